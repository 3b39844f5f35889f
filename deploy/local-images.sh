#!/usr/bin/env bash
# Selects the base images compose.yaml builds from and runs. Where a registry answers (or the official
# images are already present) it prints nothing and compose.yaml's defaults apply (python:3.11-slim-bookworm,
# postgres:15, redis:7). Where none is reachable it builds stand-ins from the local debootstrap base
# (workers/build-base.sh, then deploy/{python,postgres,redis}/Dockerfile) and prints the settings that
# select them, one NAME=value a line, for compose's .env or the environment:
#   deploy/local-images.sh >> .env
# ROSTER_LOCAL_IMAGES=1 forces the stand-ins. Idempotent and cached (Docker's layer cache).
set -euo pipefail
cd "$(dirname "$0")"
base="${ROSTER_BASE_IMAGE:-roster-base:bookworm}"
registry=0
if [ "${ROSTER_LOCAL_IMAGES:-0}" != 1 ] && curl -s -o /dev/null -m 3 https://registry-1.docker.io/v2/; then
  registry=1
fi

# present or pullable: the official image; otherwise the stand-in built from deploy/<dir>.
select_image() {  # SETTING OFFICIAL DIR LOCAL_TAG
  local setting=$1 official=$2 dir=$3 tag=$4 out
  if [ "${ROSTER_LOCAL_IMAGES:-0}" != 1 ]; then
    if [ "$registry" = 1 ] || docker image inspect "$official" >/dev/null 2>&1; then return 0; fi
  fi
  ../workers/build-base.sh >&2
  # A context of the Dockerfile's directory plus local-ca/: the host's own trust anchors, if any.
  context=$(mktemp -d /tmp/roster-image.XXXXXX)
  cp -r "$dir"/. "$context"/
  mkdir -p "$context/local-ca"
  cp /usr/local/share/ca-certificates/*.crt "$context/local-ca/" 2>/dev/null || true
  if ! out=$(docker build -q --build-arg BASE="$base" -t "$tag" "$context" 2>&1); then
    rm -rf "$context"; echo "$out" >&2; exit 1
  fi
  rm -rf "$context"
  echo "$setting=$tag"
}
select_image ROSTER_PYTHON_BASE python:3.11-slim-bookworm python roster-python:bookworm
select_image ROSTER_POSTGRES_IMAGE postgres:15 postgres roster-postgres:15
select_image ROSTER_REDIS_IMAGE redis:7 redis roster-redis:7
