"""Preflight's reading of the host firewall, against a fake iptables that prints given rules."""

from __future__ import annotations

import pytest

from controlplane.dispatch.firewall import expected_rules, firewall_problem

BRIDGE, ADDR, PORT = "rstbr", "172.30.0.1", 8080
HOOK = f"-A INPUT -i {BRIDGE} -j ROSTER-{BRIDGE}"
GOOD_CHAIN = [f"-N ROSTER-{BRIDGE}", *expected_rules(BRIDGE, ADDR, PORT)]


@pytest.fixture
def fake_iptables(tmp_path, settings):
    def install(chain: list[str] | None, input_rules: list[str]):
        script = tmp_path / "iptables"
        lines = ["-P INPUT ACCEPT", "-P FORWARD DROP", *(chain or []), *input_rules, "-N DOCKER"]
        script.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n")
        script.chmod(0o755)
        settings.ROSTER_IPTABLES = str(script)

    return install


def test_locked_down(fake_iptables):
    fake_iptables(GOOD_CHAIN, [HOOK])
    assert firewall_problem(BRIDGE, ADDR, PORT) == ""


def test_other_bridges_hooks_may_come_first(fake_iptables):
    fake_iptables(GOOD_CHAIN, ["-A INPUT -i otherbr -j ROSTER-otherbr", HOOK, "-A INPUT -j ACCEPT"])
    assert firewall_problem(BRIDGE, ADDR, PORT) == ""


@pytest.mark.parametrize(("chain", "input_rules", "expected"), [
    (None, [HOOK], "is missing"),
    (GOOD_CHAIN[:-1], [HOOK], "does not hold the lockdown rules"),
    ([GOOD_CHAIN[0], GOOD_CHAIN[2], GOOD_CHAIN[1], GOOD_CHAIN[3]], [HOOK], "does not hold the lockdown"),
    ([*GOOD_CHAIN[:3], f"-A ROSTER-{BRIDGE} -j ACCEPT"], [HOOK], "does not hold the lockdown rules"),
    (GOOD_CHAIN, [], "is not hooked into INPUT"),
    (GOOD_CHAIN, ["-A INPUT -j ACCEPT", HOOK], "may accept box traffic"),
    (GOOD_CHAIN, [f"-A INPUT -i {BRIDGE} -p tcp -j ACCEPT", HOOK], "may accept box traffic"),
], ids=["no-chain", "no-drop", "reordered", "accept-all", "not-hooked", "accept-before", "bridge-accept"])
def test_refusals(fake_iptables, chain, input_rules, expected):
    fake_iptables(chain, input_rules)
    assert expected in firewall_problem(BRIDGE, ADDR, PORT)


def test_wrong_port_or_address_is_a_refusal(fake_iptables):
    fake_iptables(GOOD_CHAIN, [HOOK])
    assert "does not hold" in firewall_problem(BRIDGE, ADDR, PORT + 1)
    assert "does not hold" in firewall_problem(BRIDGE, "172.30.0.2", PORT)


def test_failing_iptables_is_a_refusal(tmp_path, settings):
    script = tmp_path / "iptables"
    script.write_text("#!/bin/sh\nexit 4\n")
    script.chmod(0o755)
    settings.ROSTER_IPTABLES = str(script)
    assert firewall_problem(BRIDGE, ADDR, PORT) == "cannot read the host firewall: iptables failed"


def test_unreadable_firewall_is_a_refusal(settings):
    settings.ROSTER_IPTABLES = "/nonexistent/iptables"
    assert firewall_problem(BRIDGE, ADDR, PORT).startswith("cannot read the host firewall")
