#!/usr/bin/env bash
# Installs what Roster and its tests need on a fresh Debian 12 machine. Idempotent: every step checks
# first and does nothing when its work is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pair in redis-server:redis-server dockerd:docker.io chromium:chromium debootstrap:debootstrap \
            iptables:iptables pg_ctlcluster:postgresql npm:npm git:git; do
  cmd=${pair%%:*}; pkg=${pair#*:}
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || [ -x "/usr/bin/$cmd" ] || need_apt+=("$pkg")
done
# make test-compose: the compose plugin where present, else Debian's docker-compose.
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  need_apt+=(docker-compose)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# The control plane's environment.
stamp=.venv/.roster-deps
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  touch "$stamp"
fi

# The gateway's own environment: mitmproxy pins asgiref/cryptography/pyOpenSSL below the control plane's.
gstamp=gateway/.venv/.roster-deps
if [ ! -x gateway/.venv/bin/python ]; then python3 -m venv gateway/.venv; fi
if [ ! -f "$gstamp" ] || [ gateway/pyproject.toml -nt "$gstamp" ]; then
  gateway/.venv/bin/pip install -q --upgrade pip
  gateway/.venv/bin/pip install -q -e 'gateway[test]'
  touch "$gstamp"
fi

# A real Matrix homeserver (Synapse) for the relay's tests and `make demo`: its own virtualenv (its pins
# are its own), in a cache outside the checkout so CI's fresh clone and every worktree install it once.
synapse_version=$(sed -n 's/^SYNAPSE_VERSION = "\(.*\)"$/\1/p' tools/synapse/homeserver.py)
synapse=${ROSTER_SYNAPSE_VENV:-/var/cache/roster/synapse-$synapse_version}
if [ ! -f "$synapse/.roster-deps" ]; then
  echo "bootstrap: installing matrix-synapse $synapse_version into $synapse"
  mkdir -p "$(dirname "$synapse")"
  python3 -m venv "$synapse"
  "$synapse/bin/pip" install -q --upgrade pip
  "$synapse/bin/pip" install -q "matrix-synapse==$synapse_version"
  touch "$synapse/.roster-deps"
fi

scripts/start-docker.sh
