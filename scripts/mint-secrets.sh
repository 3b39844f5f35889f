#!/usr/bin/env bash
# Makes every secret the stack's processes read, before any of them starts (scripts/up.sh runs this first),
# so no process can start half-configured. Idempotent: what exists is kept (losing the vault key loses every
# secret; replacing the gateway's token would only force a gateway restart).
#  - var/gateway/service.token (0600): the gateway's service token; var/gateway-token.sha256 (0644): its
#    SHA-256, which the control plane reads (settings.ROSTER_GATEWAY_TOKEN_SHA256_FILE).
#  - var/vault.key (0600): the vault's Fernet key (settings.ROSTER_VAULT_KEY_FILE).
#  - var/django-secret.key (0600): signs sessions and CSRF tokens.
#  - var/metrics.token (0600): the bearer token a Prometheus scrapes the control plane's metrics with;
#    var/metrics-token.sha256 (0644): its SHA-256 (settings.ROSTER_METRICS_TOKEN_SHA256_FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
umask 077
mkdir -p var/gateway
chmod 755 var/gateway  # the gateway's public CA certificate is exported here for boxes
PY=${ROSTER_MINT_PYTHON:-python3}

make_once() {  # make_once FILE PYTHON-EXPRESSION: write a new secret only when FILE is missing or empty
  local file=$1 expr=$2
  if [ ! -s "$file" ]; then
    local tmp
    tmp=$(mktemp "$file.XXXXXX")
    "$PY" -c "import base64, os, secrets; print($expr)" >"$tmp"
    mv "$tmp" "$file"
    echo "mint-secrets: made $file"
  fi
  chmod 600 "$file"
}

make_once var/gateway/service.token '"gst_" + secrets.token_urlsafe(32)'
make_once var/vault.key 'base64.urlsafe_b64encode(os.urandom(32)).decode()'
make_once var/django-secret.key 'secrets.token_urlsafe(50)'
make_once var/metrics.token '"mst_" + secrets.token_urlsafe(32)'

hash_of() {  # hash_of TOKEN-FILE HASH-FILE: the hash the control plane checks; rewritten only when it
  local want  # differs (its mtime tells readers to re-read)
  want=$(tr -d '\n' <"$1" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$2" 2>/dev/null)" != "$want" ]; then
    local tmp
    tmp=$(mktemp "$2.XXXXXX")
    echo "$want" >"$tmp"
    chmod 644 "$tmp"
    mv "$tmp" "$2"
  fi
  chmod 644 "$2"
}
hash_of var/gateway/service.token var/gateway-token.sha256
hash_of var/metrics.token var/metrics-token.sha256
