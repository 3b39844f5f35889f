#!/usr/bin/env bash
# Creates the box network and locks the host down for it. Idempotent; other networks and interfaces are
# never touched.
# - The network is `internal` (no NAT: nothing leaves the host), inter-container traffic is off, and its
#   bridge has a dedicated name so the host rules below apply to it alone.
# - A box on an internal network can still reach every port the host listens on at the bridge address, so
#   a dedicated chain is hooked into INPUT for that bridge: replies to connections the host made, and TCP
#   to the gateway's port on the bridge address, pass; everything else from a box to the host is dropped.
# The gateway (mitmdump) must listen on the bridge address this prints.
# Usage: network-lockdown.sh [NETWORK] [BRIDGE] [GATEWAY_PORT]
#   (defaults: $ROSTER_BOX_NETWORK or roster-boxes, $ROSTER_BOX_BRIDGE or roster-br0, $ROSTER_GATEWAY_PORT or 8080)
set -euo pipefail
network="${1:-${ROSTER_BOX_NETWORK:-roster-boxes}}"
bridge="${2:-${ROSTER_BOX_BRIDGE:-roster-br0}}"
port="${3:-${ROSTER_GATEWAY_PORT:-8080}}"
chain="ROSTER-${bridge}"
[[ "$bridge" =~ ^[A-Za-z0-9_.-]{1,15}$ ]] || { echo "bad bridge name: $bridge" >&2; exit 2; }
[[ "$port" =~ ^[0-9]{1,5}$ ]] || { echo "bad port: $port" >&2; exit 2; }

if ! docker network inspect "$network" >/dev/null 2>&1; then
  docker network create --driver bridge --internal \
    -o com.docker.network.bridge.enable_icc=false \
    -o com.docker.network.bridge.name="$bridge" \
    -o com.docker.network.bridge.enable_ip_masquerade=false \
    --label roster.box-network=1 "$network" >/dev/null
fi
internal=$(docker network inspect -f '{{.Internal}}' "$network")
icc=$(docker network inspect -f '{{index .Options "com.docker.network.bridge.enable_icc"}}' "$network")
actual=$(docker network inspect -f '{{index .Options "com.docker.network.bridge.name"}}' "$network")
if [ "$internal" != "true" ] || [ "$icc" != "false" ] || [ "$actual" != "$bridge" ]; then
  echo "network $network exists but is not locked (internal=$internal icc=$icc bridge=$actual); remove it" >&2
  exit 1
fi
addr=$(ip -4 -o addr show dev "$bridge" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
[ -n "$addr" ] || { echo "bridge $bridge has no IPv4 address (create the network first)" >&2; exit 1; }

# One atomic restore: the chain is created or flushed and refilled in a single commit, so there is no
# moment where it is empty (an empty chain would fall through to INPUT's ACCEPT policy).
iptables-restore -w --noflush <<RULES
*filter
:${chain} - [0:0]
-A ${chain} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ${chain} -d ${addr}/32 -p tcp -m tcp --dport ${port} -j ACCEPT
-A ${chain} -j DROP
COMMIT
RULES
iptables -w -C INPUT -i "$bridge" -j "$chain" 2>/dev/null || iptables -w -I INPUT 1 -i "$bridge" -j "$chain"

# IPv6: boxes get no IPv6 address, but link-local traffic must not reach the host either.
if command -v ip6tables-restore >/dev/null 2>&1 && ip6tables -w -S INPUT >/dev/null 2>&1; then
  ip6tables-restore -w --noflush <<RULES
*filter
:${chain} - [0:0]
-A ${chain} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A ${chain} -j DROP
COMMIT
RULES
  ip6tables -w -C INPUT -i "$bridge" -j "$chain" 2>/dev/null || ip6tables -w -I INPUT 1 -i "$bridge" -j "$chain"
fi
echo "locked down $network ($bridge): boxes reach only tcp ${addr}:${port}; the gateway must listen there"
