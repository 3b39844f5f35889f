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
# Quiet unless it fails (the legacy builder prints a deprecation banner on every call).
if ! out=$(docker build -q --build-arg BASE="$base" --build-arg BOX_UID="${ROSTER_BOX_UID:-10100}" -t "$tag" . 2>&1); then echo "$out"; exit 1; fi
echo "box image $tag built from $base ($(docker image inspect -f '{{.Id}}' "$tag"))"
