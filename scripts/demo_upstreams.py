"""`make demo` on a reused stack: are the demo's loopback upstreams among the gateway's private upstreams?

Reads the gateway's health document (scripts/demo.sh pipes `curl …/healthz` in) and the demo's entries
(argument, comma-separated). Prints the entries the gateway does not list and exits 1 when there are any:
the gateway would refuse them `blocked_address` (README, private upstreams), so the demo stops with a
clear message instead of a run whose requests all fail. An address covered by a listed range counts."""

from __future__ import annotations

import ipaddress
import json
import sys


def _covered(wanted: str, listed: list[str]) -> bool:
    host, _, port = wanted.rpartition(":")
    ip = ipaddress.ip_address(host)
    for entry in listed:
        entry = entry.strip()
        address, sep, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if sep and entry_port != port:
            continue
        try:
            if ip in ipaddress.ip_network(address, strict=False):
                return True
        except ValueError:
            continue  # a host-name entry: the demo's grants name the address, not a name
    return False


def main() -> int:
    try:
        listed = json.load(sys.stdin).get("private_upstreams") or []
    except (ValueError, AttributeError):
        print("(the gateway's health page did not answer with its health document)")
        return 1
    missing = [w for w in sys.argv[1].split(",") if w and not _covered(w, listed)]
    print(", ".join(missing))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
