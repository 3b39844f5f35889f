"""Options refuse a gateway that would run open; the health endpoint reflects the control plane."""

from __future__ import annotations

import asyncio
import json

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons
from roster_gateway.addon import Gateway
from roster_gateway.health import HealthServer
from roster_gateway.wire import WireError, parse_decision, parse_wait

from tests.conftest import CP_URL, FakeControlPlane, allow, deny


def configure(tmp_path, token_mode=0o600, token_text="svc-token", **opts):  # noqa: S107
    path = tmp_path / "tok"
    path.write_text(token_text)
    path.chmod(token_mode)
    addon = Gateway(transport=FakeControlPlane())
    with taddons.context(addon) as tctx:
        base = dict(roster_control_plane=CP_URL, roster_service_token_file=str(path))
        base.update(opts)
        tctx.configure(addon, **base)
        return addon


BAD = [
    ("no control plane", dict(roster_control_plane="")),
    ("not a URL", dict(roster_control_plane="cp.test:8000")),
    ("token readable by others", dict(token_mode=0o644)),
    ("empty token", dict(token_text="  \n")),
    ("missing token file", dict(roster_service_token_file="/nonexistent/token")),
    ("zero timeout", dict(roster_decide_timeout_ms=0)),
    ("other control plane not a URL", dict(roster_control_plane_also="127.0.0.1:8000")),
    ("negative outcome flush", dict(roster_outcome_flush_ms=-1)),
    ("negative journal flush", dict(roster_journal_flush_ms=-1)),
    ("empty outcome batches", dict(roster_outcome_batch_max=0)),
    ("a replica not a URL", dict(roster_control_plane=f"{CP_URL},cp2.test:8002")),
    ("a replica named twice", dict(roster_control_plane=f"{CP_URL}, {CP_URL}/")),
    ("no replica back-off", dict(roster_control_plane_backoff_ms=0)),
]


@pytest.mark.parametrize("name,opts", BAD, ids=[b[0] for b in BAD])
def test_misconfiguration_refuses_to_start(tmp_path, name, opts):
    with pytest.raises(exceptions.OptionsError):
        configure(tmp_path, **opts)


def test_good_configuration(tmp_path):
    addon = configure(tmp_path, roster_decide_timeout_ms=750)
    assert addon.config.decide_timeout == 0.75
    assert addon.config.control_plane_endpoint == ("cp.test", 80)
    assert addon.config.allow_loopback_upstreams is False  # closed unless a test asks
    assert addon.config.also_control_plane == ()


def test_journaled_calls_and_outcomes_each_wait_their_own_flush_delay(tmp_path):
    default = configure(tmp_path)
    assert (default.steps.journal._flush_delay, default.steps.outcomes._flush_delay) == (0.1, 0.005)
    set_apart = configure(tmp_path, roster_journal_flush_ms=250, roster_outcome_flush_ms=7)
    assert (set_apart.steps.journal._flush_delay, set_apart.steps.outcomes._flush_delay) == (0.25, 0.007)


def test_replicas_are_every_url_listed_and_none_is_ever_dialled_for_a_box(tmp_path):
    addon = configure(tmp_path, roster_control_plane=f"{CP_URL}, http://cp2.test:8005/",
                      roster_control_plane_also="http://127.0.0.1:8000", roster_control_plane_backoff_ms=250)
    assert addon.config.replica_urls == (CP_URL, "http://cp2.test:8005")
    assert addon.config.control_plane_backoff == 0.25
    assert addon.vetting.control_plane == ("cp.test", 80)
    assert addon.vetting.also_control_plane == (("cp2.test", 8005), ("127.0.0.1", 8000))
    assert [r.url for r in addon.client.replicas.replicas] == ["replica 1"]  # the test's one transport


def test_other_control_plane_endpoints_reach_the_address_vetting(tmp_path):
    addon = configure(tmp_path, roster_control_plane_also="http://127.0.0.1:8000, https://cp.example")
    assert addon.config.also_control_plane == (("127.0.0.1", 8000), ("cp.example", 443))
    assert addon.vetting.also_control_plane == (("127.0.0.1", 8000), ("cp.example", 443))


async def _get(port: int) -> tuple[int, dict]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@pytest.mark.parametrize("cp_ok,status", [(True, 200), (False, 503)])
async def test_health_endpoint(cp_ok, status):
    async def probe(timeout):
        return cp_ok

    from tests.support_ports import free_port

    server = HealthServer(free_port(), probe, cache_seconds=0, probe_timeout=1)
    await server.start()
    try:
        code, body = await _get(server.port)
    finally:
        await server.stop()
    assert code == status and body["control_plane"] is cp_ok


WIRE_OK = [allow(), deny("no_grant"), allow(verdict="ask", approval_id="ap", hold_seconds=3),
           deny("over_budget", 402, budget={"scope": "org", "unit": "micro", "window": "month",
                                            "limit": 5, "spent": 5})]


@pytest.mark.parametrize("doc", WIRE_OK)
def test_wire_answers_parse(doc):
    decision = parse_decision(doc)
    assert decision.verdict == doc["verdict"]


WIRE_BAD = [[], {"verdict": "allow"}, allow(status="200"), allow(tunnel="yes"),
            allow(inject=[{"header": ""}]), allow(verdict="ask"),
            allow(verdict="ask", approval_id="a", replace=[{"sentinel": "s", "value": "v"}]),
            allow(hold_seconds=True)]


@pytest.mark.parametrize("doc", WIRE_BAD)
def test_wire_nonsense_is_refused(doc):
    with pytest.raises(WireError):
        parse_decision(doc)


def test_wait_answers():
    assert parse_wait({"status": "pending", "decision": None}).decision is None
    assert parse_wait({"status": "approved", "decision": allow()}).decision.verdict == "allow"
    with pytest.raises(WireError):
        parse_wait({"status": "approved", "decision": None})
    with pytest.raises(WireError):
        parse_wait({"status": "refused", "decision": allow()})


def test_decision_repr_hides_secret_values():
    d = parse_decision(allow(inject=[{"header": "authorization", "value": "Bearer TOPSECRET"}]))
    assert "TOPSECRET" not in repr(d)
