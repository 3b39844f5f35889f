"""Checks that scripts/network-lockdown.sh's host rules are in place for the box bridge: a dedicated chain
hooked into INPUT for that bridge that accepts replies and the gateway port on the bridge address, then
drops everything else. Reading the rules needs the same privilege as writing them; if they cannot be
read, that is a refusal too (any doubt is a deny)."""

from __future__ import annotations

import subprocess

from django.conf import settings


def chain_name(bridge: str) -> str:
    return f"ROSTER-{bridge}"


def expected_rules(bridge: str, address: str, port: int) -> list[str]:
    chain = chain_name(bridge)
    return [
        f"-A {chain} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        f"-A {chain} -d {address}/32 -p tcp -m tcp --dport {port} -j ACCEPT",
        f"-A {chain} -j DROP",
    ]


def _iptables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [settings.ROSTER_IPTABLES, "-w", *args], capture_output=True, text=True,
        timeout=settings.ROSTER_PREFLIGHT_TIMEOUT_SECONDS * 5,
    )


def firewall_problem(bridge: str, address: str, port: int) -> str:
    """Why the host is not locked down for this bridge, or "" when it is. One listing of the filter
    table is read, so the answer is about a single moment."""
    chain = chain_name(bridge)
    try:
        listing = _iptables("-S")
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot read the host firewall: {exc.__class__.__name__}"
    if listing.returncode != 0:
        return "cannot read the host firewall: iptables failed"
    lines = [line.strip() for line in listing.stdout.splitlines()]
    if f"-N {chain}" not in lines:
        return f"host firewall chain {chain} is missing (run scripts/network-lockdown.sh)"
    rules = [line for line in lines if line.startswith(f"-A {chain} ")]
    if rules != expected_rules(bridge, address, port):
        return f"host firewall chain {chain} does not hold the lockdown rules for {address}:{port}"
    hook = f"-A INPUT -i {bridge} -j {chain}"
    input_rules = [line for line in lines if line.startswith("-A INPUT ")]
    if hook not in input_rules:
        return f"host firewall chain {chain} is not hooked into INPUT for {bridge}"
    # Nothing before the hook may accept the bridge's traffic; only other bridges' hooks may precede it.
    for rule in input_rules[: input_rules.index(hook)]:
        words = rule.split()
        if not (len(words) == 6 and words[2] == "-i" and words[4] == "-j" and words[3] != bridge
                and words[5] == chain_name(words[3])):
            return f"host firewall rule before the {bridge} hook may accept box traffic: {rule}"
    return ""
