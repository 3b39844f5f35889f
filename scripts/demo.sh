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
# The demo's upstreams are on host loopback and its grants name 127.0.0.1: the gateway dials them only
# when its private upstreams list them (an IP literal in a grant is not a listing; README).
demo_upstreams="127.0.0.1:$model_port,127.0.0.1:$docs_port,127.0.0.1:$ask_port"
# `make demo AGENT=<preset>`: that preset's agent does the work (controlplane/demo/agents.py); its image
# layer is built on the box image first (workers/presets/<slug>/build.sh: a no-op when unchanged).
agent=${AGENT:-reference}
build_agent() {
  [ "$agent" = reference ] && return 0
  build="workers/presets/$agent/build.sh"
  [ -x "$build" ] || { echo "demo: no preset $agent (make demo AGENT=pi|claude-code|codex|opencode|gemini-cli)" >&2; exit 2; }
  echo "demo: building the $agent image layer ($build; log var/log/demo-agent-build.log)"
  if ! "$build" >var/log/demo-agent-build.log 2>&1; then
    tail -20 var/log/demo-agent-build.log
    echo "demo: the $agent image could not be built; build it with: ROSTER_BOX_IMAGE=roster-box:latest $build" >&2
    exit 1
  fi
}
# Gemini CLI peaks above the default 512 MB box (workers/presets/gemini-cli/README.md).
gemini_memory=1g
if [ "$agent" = gemini-cli ] && [ -z "${ROSTER_BOX_MEMORY:-}" ]; then export ROSTER_BOX_MEMORY=$gemini_memory; fi
if healthy; then
  echo "demo: reusing the running stack"
  unlisted=$(curl -fsS "http://127.0.0.1:$health_port/healthz" | .venv/bin/python scripts/demo_upstreams.py "$demo_upstreams") || {
    echo "demo: the running gateway does not list the demo's upstreams as private upstreams (missing: $unlisted)," \
         "so it would refuse them blocked_address. Restart the stack with them listed:" \
         "make down && ROSTER_GATEWAY_PRIVATE_UPSTREAMS=$demo_upstreams make demo" >&2
    exit 1
  }
  workers/build.sh >/dev/null  # the box image with this checkout's agent (a no-op when unchanged)
else
  echo "demo: starting the stack (make up; log var/log/demo-up.log)"
  export ROSTER_GATEWAY_PRIVATE_UPSTREAMS="${ROSTER_GATEWAY_PRIVATE_UPSTREAMS:+$ROSTER_GATEWAY_PRIVATE_UPSTREAMS,}$demo_upstreams"
  started=1
  make up >var/log/demo-up.log 2>&1 || { tail -30 var/log/demo-up.log; exit 1; }
fi
build_agent
.venv/bin/python manage.py demo --model-port "$model_port" --docs-port "$docs_port" --ask-port "$ask_port" \
  --hook-port "$hook_port" --started-at "$began" --agent "$agent" "$@"
