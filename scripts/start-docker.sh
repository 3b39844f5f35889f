#!/usr/bin/env bash
# Starts the Docker engine when none answers (no systemd in CI), then builds the box image if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! docker info >/dev/null 2>&1; then
  mkdir -p var
  nohup dockerd >var/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see var/dockerd.log"; tail -20 var/dockerd.log; exit 1; }
fi
if [ -x workers/build.sh ]; then workers/build.sh; fi
