#!/usr/bin/env bash
# Removes what network-lockdown.sh added for one bridge (tests clean up their per-session bridge with it).
# Usage: network-unlock.sh BRIDGE. Idempotent.
set -euo pipefail
bridge="${1:?usage: network-unlock.sh BRIDGE}"
chain="ROSTER-${bridge}"
for tool in iptables ip6tables; do
  command -v "$tool" >/dev/null 2>&1 || continue
  while "$tool" -w -D INPUT -i "$bridge" -j "$chain" 2>/dev/null; do :; done
  "$tool" -w -F "$chain" 2>/dev/null || true
  "$tool" -w -X "$chain" 2>/dev/null || true
done
