#!/usr/bin/env bash
# Starts the whole stack on one machine: Redis, dockerd, the box network lockdown, the decision API
# (controlplane.decision_server: /api/gateway/ only), the gateway, daphne (admin, pages, API, websockets),
# a Celery worker and Celery beat. Idempotent: what runs is left running.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/run var/log
PY=.venv/bin/python
WEB_PORT=${ROSTER_WEB_PORT:-8000}

running() { [ -f "var/run/$1.pid" ] && kill -0 "$(cat "var/run/$1.pid")" 2>/dev/null; }
start() {  # start NAME CMD...: background process with a pid file and a log
  local name=$1; shift
  if running "$name"; then echo "up: $name already running"; return; fi
  nohup setsid "$@" >"var/log/$name.log" 2>&1 &
  echo $! >"var/run/$name.pid"
  echo "up: started $name (log var/log/$name.log)"
}

if ! redis-cli -u "${REDIS_URL:-redis://127.0.0.1:6379/0}" ping >/dev/null 2>&1; then
  start redis redis-server --bind 127.0.0.1 --port 6379 --save "" --appendonly no
  for _ in $(seq 1 40); do redis-cli ping >/dev/null 2>&1 && break; sleep 0.25; done
fi
scripts/start-docker.sh
[ -x scripts/network-lockdown.sh ] && scripts/network-lockdown.sh
# The decision API's own process (what the gateway calls; loopback only), before the gateway.
DECISION_PORT=${ROSTER_DECISION_API_PORT:-8002}
start decision-api "$PY" -m controlplane.decision_server --host 127.0.0.1 --port "$DECISION_PORT"
for _ in $(seq 1 60); do
  curl -s -o /dev/null "http://127.0.0.1:$DECISION_PORT/api/gateway/health" && break; sleep 0.25
done
[ -x scripts/gateway-up.sh ] && ROSTER_CONTROL_PLANE_URL=${ROSTER_CONTROL_PLANE_URL:-http://127.0.0.1:$DECISION_PORT} \
  scripts/gateway-up.sh

start web "$PY" -m daphne -b 127.0.0.1 -p "$WEB_PORT" controlplane.asgi:application
start celery-worker "$PY" -m celery -A controlplane worker --loglevel INFO --concurrency 2
start celery-beat "$PY" -m celery -A controlplane beat --loglevel INFO --schedule var/celerybeat-schedule

for _ in $(seq 1 60); do
  curl -fsS -o /dev/null "http://127.0.0.1:$WEB_PORT/accounts/login/" 2>/dev/null && break; sleep 0.5
done
curl -fsS -o /dev/null "http://127.0.0.1:$WEB_PORT/accounts/login/" || { echo "up: web did not answer; see var/log/web.log"; exit 1; }
cat <<MSG
Roster is up.
  web and admin:  http://127.0.0.1:$WEB_PORT/   (admin at /admin/)
  decision API:   http://127.0.0.1:$DECISION_PORT/api/gateway/   (the gateway's; log var/log/decision-api.log)
  create an admin: .venv/bin/python manage.py createsuperuser
  stop everything: make down
MSG
