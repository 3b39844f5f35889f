#!/usr/bin/env bash
# Starts the whole stack on one machine and proves it works: Redis, dockerd, the box network lockdown, the
# secrets, the static files, the decision API (controlplane.decision_server: /api/gateway/ only), the
# gateway, daphne (admin, pages, API, websockets), the relay (chat channels), a Celery worker, the box
# watcher (starts, follows and finishes the boxes, so no Celery process is held for a box's life) and
# Celery beat; then a canary request
# through the gateway on the box bridge's address that must come back as the control plane's decision.
#
# Every secret exists before the process that needs it starts (scripts/mint-secrets.sh). Each process is
# checked the way its real caller uses it (scripts/stack_check.py): the decision API must accept the
# gateway's own token, the gateway's health must say the control plane answers, the admin's stylesheet
# must be served. Idempotent, and it repairs: a process that runs but fails its check is restarted.
# Exits non-zero, saying what is wrong, when anything still fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/close-inherited-fds.sh
. scripts/close-inherited-fds.sh  # the daemons never hold a caller's lock
mkdir -p var/run var/log
PY=.venv/bin/python
WEB_PORT=${ROSTER_WEB_PORT:-8000}
DECISION_PORT=${ROSTER_DECISION_API_PORT:-8002}
METRICS_PORT=${ROSTER_METRICS_PORT:-8003}
# The decision API's processes (ROSTER_DECISION_PROCESSES): one per core unless told.
DECISION_PROCESSES=${ROSTER_DECISION_PROCESSES:-$(nproc 2>/dev/null || echo 1)}
RELAY_PORT=${ROSTER_RELAY_PORT:-8004}
failures=()

running() { [ -f "var/run/$1.pid" ] && kill -0 "$(cat "var/run/$1.pid")" 2>/dev/null; }
stop() {  # stop NAME: its whole process group, then wait for it to go
  local pid
  pid=$(cat "var/run/$1.pid" 2>/dev/null) || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "var/run/$1.pid"
}
start() {  # start NAME CMD...: background process with a pid file and a log
  local name=$1; shift
  nohup setsid "$@" >"var/log/$name.log" 2>&1 &
  echo $! >"var/run/$name.pid"
}
check() { "$PY" scripts/stack_check.py "$@"; }
# ensure NAME WAIT CHECK-COMMAND -- START-COMMAND...: keep a running process that passes its check, restart
# one that fails it, start a missing one; then the check must pass within WAIT seconds.
ensure() {
  local name=$1 wait=$2 probe=$3; shift 4
  local out
  if running "$name"; then
    if out=$($probe 0); then echo "up: $name already running, $out"; return 0; fi
    echo "up: $name is running but fails its check ($out); restarting it"
    stop "$name"
  fi
  if [ "$name" = gateway ]; then "$@" >/dev/null || true; else start "$name" "$@"; fi
  if out=$($probe "$wait"); then
    echo "up: started $name, $out"
  else
    echo "up: $name $out" >&2
    failures+=("$name")
  fi
}
probe_decision_api() { check decision-api --wait "$1" --pidfile var/run/decision-api.pid; }
probe_gateway() { check gateway --wait "$1" --pidfile var/run/gateway.pid; }
probe_web() { check web --wait "$1" --pidfile var/run/web.pid; }
probe_relay() { check relay --wait "$1" --pidfile var/run/relay.pid; }
probe_boxwatcher() { check boxwatcher --wait "$1" --pidfile var/run/boxwatcher.pid; }
probe_worker() {  # the worker must answer a ping over the broker, not just be alive
  local deadline=$((SECONDS + ${1%.*}))
  while :; do
    if running celery-worker && "$PY" -m celery -A controlplane inspect ping -d "roster-stack@$(hostname)" \
        --timeout 3 >/dev/null 2>&1; then echo "ok: Celery worker answers"; return 0; fi
    [ "$SECONDS" -lt "$deadline" ] || { echo "FAILED: the Celery worker does not answer; see var/log/celery-worker.log"; return 1; }
    sleep 1
  done
}
probe_beat() {
  sleep "${1%.*}"
  if running celery-beat; then echo "ok: Celery beat running"; else
    echo "FAILED: Celery beat exited; see var/log/celery-beat.log"; return 1; fi
}

if ! redis-cli -u "${REDIS_URL:-redis://127.0.0.1:6379/0}" ping 2>/dev/null | grep -q PONG; then
  running redis && stop redis
  start redis redis-server --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  for _ in $(seq 1 40); do redis-cli ping 2>/dev/null | grep -q PONG && break; sleep 0.25; done
  redis-cli ping 2>/dev/null | grep -q PONG || { echo "up: Redis did not start; see var/log/redis.log" >&2; exit 1; }
  echo "up: started redis"
fi
scripts/start-docker.sh
scripts/network-lockdown.sh
scripts/mint-secrets.sh
"$PY" manage.py collectstatic --noinput -v 0  # the admin's styles and scripts, served by WhiteNoise

ensure decision-api 30 probe_decision_api -- \
  "$PY" -m controlplane.decision_server --host 127.0.0.1 --port "$DECISION_PORT" \
  --processes "$DECISION_PROCESSES" --metrics-host 127.0.0.1 --metrics-port "$METRICS_PORT"
ensure gateway 30 probe_gateway -- \
  env ROSTER_CONTROL_PLANE_URL="${ROSTER_CONTROL_PLANE_URL:-http://127.0.0.1:$DECISION_PORT}" scripts/gateway-up.sh
ensure web 40 probe_web -- "$PY" -m daphne -b 127.0.0.1 -p "$WEB_PORT" controlplane.asgi:application
ensure relay 30 probe_relay -- "$PY" -m controlplane.relay --host 127.0.0.1 --port "$RELAY_PORT"
ensure celery-worker 60 probe_worker -- \
  "$PY" -m celery -A controlplane worker --loglevel INFO --concurrency 2 -n "roster-stack@%h"
ensure boxwatcher 30 probe_boxwatcher -- "$PY" manage.py boxwatcher
ensure celery-beat 2 probe_beat -- \
  "$PY" -m celery -A controlplane beat --loglevel INFO --schedule var/celerybeat-schedule

# The canary: what a box does, minus the run token. A 407 bad_token deny is the control plane's decision
# (the path works end to end); a 503 means the gateway could not get one.
if out=$(check canary --wait 10); then echo "up: $out"; else echo "up: $out" >&2; failures+=(canary); fi
if ! out=$("$PY" manage.py preflight 2>&1); then
  echo "up: the dispatcher's preflight refuses to start boxes: $out" >&2; failures+=(preflight)
fi

if [ ${#failures[@]} -gt 0 ]; then
  cat >&2 <<MSG
Roster is NOT working: ${failures[*]} failed (see the lines above and var/log/).
Run \`make up\` again to restart what fails its check, or \`make down\` to stop everything.
MSG
  exit 1
fi
cat <<MSG
Roster is up, and a request through the gateway got the control plane's decision.
  web and admin:   http://127.0.0.1:$WEB_PORT/   (admin at /admin/)
  create an admin: .venv/bin/python manage.py createsuperuser
  gateway:         boxes reach it on the bridge address, port ${ROSTER_GATEWAY_PORT:-8080}; health http://127.0.0.1:${ROSTER_GATEWAY_HEALTH_PORT:-8081}/healthz
  decision API:    http://127.0.0.1:$DECISION_PORT/api/gateway/   (the gateway's only; $DECISION_PROCESSES processes; log var/log/decision-api.log)
  relay:           http://127.0.0.1:$RELAY_PORT/healthz; signed webhooks at /hooks/<channel> (log var/log/relay.log)
  metrics:         control plane http://127.0.0.1:$METRICS_PORT/metrics (Authorization: Bearer \$(cat var/metrics.token));
                   gateway http://127.0.0.1:${ROSTER_GATEWAY_HEALTH_PORT:-8081}/metrics   (docs/operations.md, Metrics)
  logs:            var/log/
  stop everything: make down
MSG
