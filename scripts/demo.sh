#!/usr/bin/env bash
# `make demo`: the reference agent on real traffic, offline and with no real key. Reuses this checkout's
# running stack when it is healthy, else starts one (`make up`) and stops it again at the end. Then
# `manage.py demo` serves the scripted model and two small sites on host loopback, creates the demo
# worker, its model key and three grants, runs the agent, approves its held request (DEMO_AUTO_APPROVE=1
# or --auto-approve; otherwise it prints the approval page and waits for a human), prints what the run
# saw, asked and cost, verifies the audit chain and ends with one `demo: …` line.
# The default stack is machine-wide: the Makefile runs this under flock /tmp/roster-default-stack.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
began=$(date +%s)
mkdir -p var/log var/run
web_port=${ROSTER_WEB_PORT:-8000}
health_port=${ROSTER_GATEWAY_HEALTH_PORT:-8081}
model_port=${ROSTER_DEMO_MODEL_PORT:-18091}
docs_port=${ROSTER_DEMO_DOCS_PORT:-18092}
ask_port=${ROSTER_DEMO_ASK_PORT:-18093}
hook_port=${ROSTER_DEMO_HOOK_PORT:-18094}

alive() { [ -f "var/run/$1.pid" ] && kill -0 "$(cat "var/run/$1.pid")" 2>/dev/null; }
healthy() {  # this checkout's stack, all of it, answering
  for name in decision-api gateway web relay celery-worker boxwatcher; do alive "$name" || return 1; done
  curl -fsS -o /dev/null "http://127.0.0.1:$web_port/accounts/login/" 2>/dev/null &&
    curl -fsS -o /dev/null "http://127.0.0.1:$health_port/healthz" 2>/dev/null
}

started=0
stop_stack() { if [ "$started" = 1 ]; then make down >var/log/demo-down.log 2>&1 || true; fi; }
trap stop_stack EXIT
if healthy; then
  echo "demo: reusing the running stack"
  workers/build.sh >/dev/null  # the box image with this checkout's agent (a no-op when unchanged)
else
  echo "demo: starting the stack (make up; log var/log/demo-up.log)"
  # The demo's upstreams are on host loopback: name them as private upstreams the gateway may dial.
  export ROSTER_GATEWAY_PRIVATE_UPSTREAMS="${ROSTER_GATEWAY_PRIVATE_UPSTREAMS:+$ROSTER_GATEWAY_PRIVATE_UPSTREAMS,}127.0.0.1:$model_port,127.0.0.1:$docs_port,127.0.0.1:$ask_port"
  started=1
  make up >var/log/demo-up.log 2>&1 || { tail -30 var/log/demo-up.log; exit 1; }
fi
.venv/bin/python manage.py demo --model-port "$model_port" --docs-port "$docs_port" --ask-port "$ask_port" \
  --hook-port "$hook_port" --started-at "$began" "$@"
