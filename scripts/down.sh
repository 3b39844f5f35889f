#!/usr/bin/env bash
# Stops what scripts/up.sh started (by pid file). Leaves dockerd running.
set -uo pipefail
cd "$(dirname "$0")/.."
for pidfile in var/run/*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
  rm -f "$pidfile"
  echo "down: stopped $(basename "$pidfile" .pid)"
done
