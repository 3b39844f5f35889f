#!/usr/bin/env bash
# Stops what scripts/up.sh started (by pid file, each process group, waiting until it is gone) and removes
# the stack's leftover box containers (label roster.namespace=$ROSTER_BOX_NAMESPACE, default roster; other
# stacks' and tests' boxes carry other namespaces). Leaves dockerd, the box network and the image.
set -uo pipefail
cd "$(dirname "$0")/.."
pids=()
for pidfile in var/run/*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  pids+=("$pid")
  rm -f "$pidfile"
  echo "down: stopped $(basename "$pidfile" .pid)"
done
for pid in "${pids[@]}"; do
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
done
if docker info >/dev/null 2>&1; then
  boxes=$(docker ps -aq --filter "label=roster.namespace=${ROSTER_BOX_NAMESPACE:-roster}")
  if [ -n "$boxes" ]; then
    # shellcheck disable=SC2086
    docker rm -f $boxes >/dev/null && echo "down: removed $(echo "$boxes" | wc -w) box container(s)"
  fi
fi
