#!/usr/bin/env bash
# Starts the egress gateway (mitmdump + gateway/roster_gateway) in the background. Idempotent.
#  - service token: var/gateway/service.token (0600), made once by scripts/mint-secrets.sh; its SHA-256 is
#    var/gateway-token.sha256, which the control plane reads when it authenticates a call.
#  - CA: minted by mitmproxy in var/gateway/ca (0700; the key never leaves it); only the public
#    certificate is exported to var/gateway/mitmproxy-ca-cert.pem (settings.ROSTER_GATEWAY_CA_CERT).
#  - listens on the box bridge's address when the bridge exists (boxes reach only that), else loopback;
#    health on 127.0.0.1:${ROSTER_GATEWAY_HEALTH_PORT:-8081}/healthz, Prometheus metrics on the same port at
#    /metrics (loopback: never reachable from a box).
#  - the settings the gateway shares with the control plane (docs/settings.md) come from the control
#    plane's own variables, so one variable sets both sides; the gateway checks them against the control
#    plane's health answer when it starts and refuses every request while they disagree.
#  - ROSTER_GATEWAY_PRIVATE_UPSTREAMS: internal upstreams the gateway may dial although they are private or
#    loopback (comma-separated ranges, addresses, host:port; docs/operations.md). Checked at start: a bad
#    entry, or one covering the control plane or the gateway itself, stops the gateway.
set -euo pipefail
if [ -n "${ROSTER_GATEWAY_HOLD_SECONDS:-}" ]; then
  echo "gateway-up: ROSTER_GATEWAY_HOLD_SECONDS is no longer read: set ROSTER_APPROVAL_HOLD_SECONDS, the" \
       "control plane's hold, which the gateway follows (docs/settings.md)" >&2
  exit 1
fi

cd "$(dirname "$0")/.."
umask 077
mkdir -p var/run var/log var/gateway/ca
chmod 755 var/gateway  # the public certificate is exported here for boxes
chmod 700 var/gateway/ca  # the CA key stays here

pidfile=var/run/gateway.pid
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
  echo "gateway-up: already running (pid $(cat "$pidfile"))"; exit 0
fi

token_file=var/gateway/service.token
scripts/mint-secrets.sh  # the token and its hash (normally made already by scripts/up.sh)

bridge=${ROSTER_BOX_BRIDGE:-roster-br0}
bridge_addr=$(ip -4 -o addr show dev "$bridge" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1 || true)
listen_host=${ROSTER_GATEWAY_LISTEN_HOST:-${bridge_addr:-127.0.0.1}}
listen_port=${ROSTER_GATEWAY_PORT:-8080}
health_port=${ROSTER_GATEWAY_HEALTH_PORT:-8081}
# The decision API's own process (scripts/up.sh starts it), not the web server; the web server and the
# control plane's metrics listener are never dialled either (roster_control_plane_also), whatever a grant
# or a private-upstream entry says.
control_plane=${ROSTER_CONTROL_PLANE_URL:-http://127.0.0.1:${ROSTER_DECISION_API_PORT:-8002}}

nohup setsid gateway/.venv/bin/mitmdump -q -s gateway/roster_gateway/script.py \
  --set listen_host="$listen_host" --set listen_port="$listen_port" \
  --set confdir="$PWD/var/gateway/ca" \
  --set connection_strategy=lazy --set upstream_cert=false \
  --set roster_control_plane="$control_plane" \
  --set roster_control_plane_also="http://127.0.0.1:${ROSTER_WEB_PORT:-8000},http://127.0.0.1:${ROSTER_METRICS_PORT:-8003}" \
  --set roster_service_token_file="$PWD/$token_file" \
  --set roster_decide_timeout_ms="${ROSTER_GATEWAY_DECIDE_TIMEOUT_MS:-2000}" \
  --set roster_hold_seconds="${ROSTER_APPROVAL_HOLD_SECONDS:-60}" \
  --set roster_outcome_batch_max="${ROSTER_OUTCOME_BATCH_MAX:-256}" \
  --set roster_budget_wait_ms="${ROSTER_BUDGET_WAIT_MS:-30000}" \
  --set roster_outcome_journal="$PWD/var/gateway/outcomes.jsonl" \
  --set roster_model_journal="$PWD/var/gateway/model-journal.jsonl" \
  --set roster_body_preview_bytes="${ROSTER_BODY_PREVIEW_BYTES:-4096}" \
  --set roster_max_target_bytes="${ROSTER_DECIDE_MAX_PATH_BYTES:-16384}" \
  --set roster_max_headers="${ROSTER_DECIDE_MAX_HEADERS:-200}" \
  --set roster_max_header_bytes="${ROSTER_DECIDE_MAX_HEADER_BYTES:-16384}" \
  --set roster_proposals_host="${ROSTER_PROPOSALS_HOST:-proposals.roster.invalid}" \
  --set roster_health_port="$health_port" \
  --set roster_ca_cert_export="$PWD/var/gateway/mitmproxy-ca-cert.pem" \
  --set roster_private_upstreams="${ROSTER_GATEWAY_PRIVATE_UPSTREAMS:-}" \
  >var/log/gateway.log 2>&1 &
echo $! >"$pidfile"

for _ in $(seq 1 60); do
  if curl -s -o /dev/null "http://127.0.0.1:$health_port/healthz"; then
    echo "gateway-up: listening on $listen_host:$listen_port (health http://127.0.0.1:$health_port/healthz," \
         "metrics http://127.0.0.1:$health_port/metrics, CA certificate var/gateway/mitmproxy-ca-cert.pem)"
    exit 0
  fi
  kill -0 "$(cat "$pidfile")" 2>/dev/null || break
  sleep 0.25
done
echo "gateway-up: the gateway did not start; see var/log/gateway.log. It said:" >&2
grep -E "Error|error" var/log/gateway.log | tail -n 2 >&2
exit 1
