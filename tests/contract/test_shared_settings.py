"""The settings the gateway shares with the control plane (docs/settings.md): the gateway's table of them
(gateway/roster_gateway/shared_limits.py, read as text: the gateway is its own zone) names exactly the
limits the health answer carries, each from a real setting; and every launcher gives the gateway the
control plane's own variable, so on one machine one variable sets both sides."""

from __future__ import annotations

import ast
import os
import re
import subprocess

import pytest
from django.conf import settings

from controlplane.egress.limits import gateway_limits
from tests.contract import contract
from tests.support import procs

# The poll is bounded by the control plane's longest wait, not the same value: no launcher passes it.
NOT_PASSED = {"roster_approval_poll_seconds"}


def _shared() -> list[tuple[str, str, str]]:
    """(gateway option, control-plane setting, health answer key) from the gateway's SHARED table."""
    tree = ast.parse((procs.REPO / "gateway" / "roster_gateway" / "shared_limits.py").read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "SharedSetting":
            found.append(tuple(ast.literal_eval(a) for a in node.args[:3]))
    return found


SHARED = _shared()
DEFAULTS = contract.load("health")["response"]["limits"]


def test_the_gateways_table_is_the_health_answers_limits():
    assert len(SHARED) == 9
    assert {key for _, _, key in SHARED} == set(gateway_limits()) == set(DEFAULTS)
    for _option, setting, _key in SHARED:
        assert hasattr(settings, setting), setting


@pytest.mark.parametrize("launcher", ["scripts/gateway-up.sh", "compose.yaml", "compose.box-host.yaml"])
def test_each_launcher_passes_the_control_planes_variable(launcher):
    text = (procs.REPO / launcher).read_text()
    for option, setting, key in SHARED:
        if option in NOT_PASSED:
            continue
        default = DEFAULTS[key]
        assert re.search(rf'{option}="?\$\{{{setting}:-{re.escape(str(default))}\}}', text), (option, setting)


@pytest.mark.parametrize("compose, service", [("compose.yaml", "celery-worker"),
                                              ("compose.box-host.yaml", "celery-worker")])
def test_compose_gives_the_control_plane_the_same_variables(compose, service):
    yaml = pytest.importorskip("yaml")
    services = yaml.safe_load((procs.REPO / compose).read_text())["services"]
    env = services[service]["environment"]
    for option, setting, key in SHARED:
        if option not in NOT_PASSED:
            assert env[setting] == f"${{{setting}:-{DEFAULTS[key]}}}", setting


def test_the_old_hold_variable_stops_the_gateway_script_before_it_does_anything():
    done = subprocess.run(["bash", "scripts/gateway-up.sh"], cwd=procs.REPO, capture_output=True, text=True,
                          env={**os.environ, "ROSTER_GATEWAY_HOLD_SECONDS": "30"}, timeout=30)
    assert done.returncode == 1 and done.stdout == ""
    assert "ROSTER_GATEWAY_HOLD_SECONDS is no longer read: set ROSTER_APPROVAL_HOLD_SECONDS" in done.stderr
