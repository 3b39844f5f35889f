"""Private upstreams on purpose: the operator's list opens only what it names, never the control plane or
the gateway itself, and a bad list stops the gateway from starting."""

from __future__ import annotations

import ipaddress

import pytest
from mitmproxy import exceptions
from roster_gateway.addresses import AddressRefused, Vetting, vetted_address
from roster_gateway.private_upstreams import BadPrivateUpstream, parse_entry, parse_private_upstreams

from tests.conftest import allow, make_flow
from tests.test_config_and_health import configure

ENDPOINTS = [("the control plane", "127.0.0.1", 8002), ("a control-plane endpoint", "127.0.0.1", 8000),
             ("the gateway's listener", "10.88.0.1", 8080),
             ("the gateway's health endpoint", "127.0.0.1", 8081)]
RESERVED = {8000, 8002, 8080, 8081}


def listed(text: str) -> Vetting:
    entries = parse_private_upstreams(text, endpoints=ENDPOINTS, reserved_ports=RESERVED)
    return Vetting(allow_loopback=False, own_ports=frozenset({8080, 8081}), control_plane=("127.0.0.1", 8002),
                   also_control_plane=(("127.0.0.1", 8000),), private_upstreams=entries)


GOOD = [
    ("10.20.0.0/16", "10.20.3.4", 443, None, True),
    ("10.20.0.0/16", "10.21.0.1", 443, None, False),
    ("10.20.0.7", "10.20.0.7", 1234, None, True),
    ("10.20.0.7:8443", "10.20.0.7", 8443, None, True),
    ("10.20.0.7:8443", "10.20.0.7", 8444, None, False),
    ("10.20.0.0/16:8443", "10.20.9.9", 8443, None, True),
    ("[fd00::7]:443", "fd00::7", 443, None, True),
    ("[fd00::7]:443", "fd00::7", 80, None, False),
    ("fd00::/8", "fd12::1", 22, None, True),
    ("::ffff:10.20.0.7", "10.20.0.7", 80, None, True),
    ("10.20.0.7", "::ffff:10.20.0.7", 80, None, True),
    ("git.internal:443", "10.1.1.1", 443, "git.internal", True),
    ("git.internal:443", "10.1.1.1", 443, "GIT.internal.", True),
    ("git.internal:443", "10.1.1.1", 443, "other.internal", False),
    ("git.internal:443", "10.1.1.1", 80, "git.internal", False),
    ("127.0.0.1:9000", "127.0.0.1", 9000, None, True),
    ("127.0.0.1:9000", "127.0.0.1", 9001, None, False),
]


@pytest.mark.parametrize("text,ip,port,name,allowed", GOOD, ids=[f"{g[0]}->{g[1]}:{g[2]}" for g in GOOD])
def test_listed_upstreams_open_only_what_they_name(text, ip, port, name, allowed):
    vetting = listed(text)
    if allowed:
        vetting.check(ipaddress.ip_address(ip), port, name=name)
    else:
        with pytest.raises(AddressRefused):
            vetting.check(ipaddress.ip_address(ip), port, name=name)


@pytest.mark.parametrize("ip,port", [("127.0.0.1", 8002), ("127.0.0.1", 8000), ("10.88.0.1", 8080),
                                     ("127.0.0.2", 8081), ("10.20.0.7", 8080)])
def test_the_control_plane_and_the_gateway_stay_refused_with_a_wide_list(ip, port):
    vetting = listed("10.20.0.0/16, fd00::/8, 127.0.0.1:9000")
    with pytest.raises(AddressRefused):
        vetting.check(ipaddress.ip_address(ip), port)


BAD = [
    ("not an address", "10.20.0.300"),
    ("host bits set", "10.20.0.1/16"),
    ("port out of range", "10.20.0.7:70000"),
    ("port not a number", "10.20.0.7:https"),
    ("URL", "http://10.20.0.7:8080"),
    ("credentials", "user@10.20.0.7:80"),
    ("name without port", "git.internal"),
    ("everything", "0.0.0.0/0"),
    ("every IPv6", "::/0"),
    ("brackets on IPv4", "[10.0.0.1]:80"),
    ("empty port", "10.20.0.7:"),
    ("covers the control plane", "127.0.0.1"),
    ("loopback range covers the control plane", "127.0.0.0/8"),
    ("the control plane's port", "127.0.0.1:8002"),
    ("the web server's port", "10.20.0.7:8000"),
    ("the gateway's listener", "10.88.0.0/24"),
    ("the gateway's port elsewhere", "10.20.0.0/16:8080"),
    ("the health port", "127.0.0.1:8081"),
    ("one good one bad", "10.20.0.0/16, 127.0.0.1"),
    ("only commas", " , "),
]


@pytest.mark.parametrize("name,text", BAD, ids=[b[0] for b in BAD])
def test_bad_lists_are_refused(name, text):
    with pytest.raises(BadPrivateUpstream):
        parse_private_upstreams(text, endpoints=ENDPOINTS, reserved_ports=RESERVED)


def test_a_control_plane_named_by_host_is_covered_by_its_resolved_address():
    with pytest.raises(BadPrivateUpstream, match="covers the control plane"):
        parse_private_upstreams("127.0.0.0/8", endpoints=[("the control plane", "localhost", 8002)],
                                reserved_ports=set())
    with pytest.raises(BadPrivateUpstream, match="covers"):
        parse_private_upstreams("cp.internal:9443", endpoints=[("the control plane", "CP.internal", 9443)],
                                reserved_ports=set())


def test_a_wildcard_listener_is_covered_by_loopback_and_by_its_port():
    wildcard = [("the gateway's listener", "0.0.0.0", 8080)]
    with pytest.raises(BadPrivateUpstream):
        parse_private_upstreams("127.0.0.0/8", endpoints=wildcard, reserved_ports=set())
    with pytest.raises(BadPrivateUpstream):
        parse_private_upstreams("10.0.0.0/8:8080", endpoints=wildcard, reserved_ports=set())
    assert parse_private_upstreams("10.0.0.0/8:9000", endpoints=wildcard, reserved_ports=set())


def test_entries_keep_the_operators_spelling():
    assert str(parse_entry(" 10.20.0.0/16:8443 ")) == "10.20.0.0/16:8443"


# --- the addon: option parsing in configure(), the vetting it builds, the health page ---

def test_configure_builds_the_list_into_the_vetting(tmp_path):
    addon = configure(tmp_path, roster_private_upstreams="10.20.0.0/16, git.internal:443",
                      roster_health_port=8081)
    assert [str(e) for e in addon.config.private_upstreams] == ["10.20.0.0/16", "git.internal:443"]
    assert addon.vetting.private_upstreams == addon.config.private_upstreams
    assert configure(tmp_path).config.private_upstreams == ()


@pytest.mark.parametrize("value", ["10.20.0.1/16", "cp.test:80", "127.0.0.1:8081", "nonsense entry"])
def test_configure_refuses_to_start_with_a_bad_list(tmp_path, value):
    with pytest.raises(exceptions.OptionsError, match="roster_private_upstreams"):
        _reconfigure(tmp_path, roster_private_upstreams=value, roster_health_port=8081)


def test_configure_refuses_an_entry_covering_the_other_control_plane_endpoints(tmp_path):
    with pytest.raises(exceptions.OptionsError, match="covers a control-plane endpoint"):
        _reconfigure(tmp_path, roster_control_plane_also="http://10.20.0.5:8443",
                     roster_private_upstreams="10.20.0.0/16")


def _reconfigure(tmp_path, **opts):
    """A good start, then the options under test (so the error seen is theirs, not a rollback's)."""
    from mitmproxy.test import taddons
    from roster_gateway.addon import Gateway

    from tests.conftest import CP_URL, FakeControlPlane

    path = tmp_path / "tok"
    path.write_text("svc")
    path.chmod(0o600)
    addon = Gateway(transport=FakeControlPlane())
    with taddons.context(addon) as tctx:
        tctx.configure(addon, roster_control_plane=CP_URL, roster_service_token_file=str(path))
        tctx.configure(addon, **opts)


async def test_a_listed_name_is_dialled_and_an_unlisted_one_refused():
    vetting = listed("localhost:9000")
    ip = await vetted_address("localhost", 9000, vetting, dns_timeout=1)
    assert ip in ("127.0.0.1", "::1")
    with pytest.raises(AddressRefused):
        await vetted_address("localhost", 9001, vetting, dns_timeout=1)


LITERALS = [
    # listed, literal, port, allowed: an internal literal passes only when the operator's list names it
    ("127.0.0.1:9000", "127.0.0.1", 9000, True),
    ("127.0.0.1:9000", "::ffff:127.0.0.1", 9000, True),
    ("127.0.0.1:9000", "[::ffff:127.0.0.1]", 9000, True),
    ("127.0.0.1:9000", "127.0.0.1", 9001, False),
    ("127.0.0.1:9000", "127.0.0.2", 9000, False),
    ("[::1]:9000", "::1", 9000, True),
    ("[::1]:9000", "[::1]", 9000, True),
    ("[::1]:9000", "127.0.0.1", 9000, False),
    ("10.20.0.0/16", "10.20.0.7", 443, True),
    ("10.20.0.0/16", "[::ffff:10.20.0.7]", 443, True),
    ("10.20.0.0/16", "10.21.0.7", 443, False),
    ("localhost:9000", "127.0.0.1", 9000, False),  # a listed name lifts the check for that name only
]


@pytest.mark.parametrize("text,host,port,allowed", LITERALS, ids=[f"{t}->{h}:{p}" for t, h, p, _ in LITERALS])
async def test_an_internal_literal_passes_only_when_listed(text, host, port, allowed):
    vetting = listed(text)
    if allowed:
        assert await vetted_address(host, port, vetting, dns_timeout=1)
    else:
        with pytest.raises(AddressRefused, match="not a public address"):
            await vetted_address(host, port, vetting, dns_timeout=1)


async def test_the_addon_dials_a_listed_private_upstream_and_refuses_others(cp, token_file):
    from mitmproxy.test import taddons
    from roster_gateway.addon import Gateway

    from tests.conftest import CP_URL

    addon = Gateway(transport=cp)
    cp.decide = allow()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, roster_control_plane=CP_URL, roster_service_token_file=str(token_file),
                       roster_private_upstreams="localhost:9000")
        listed_flow = make_flow(host="localhost", port=9000)
        await addon.request(listed_flow)
        unlisted = make_flow(host="localhost", port=9001)
        await addon.request(unlisted)
        await addon.shutdown()
    assert listed_flow.response is None and listed_flow.request.host == "127.0.0.1"
    assert unlisted.response.status_code == 403 and b"blocked_address" in unlisted.response.content


async def test_the_addon_refuses_a_granted_literal_until_the_operator_lists_it(cp, token_file):
    # The control plane allows the request (a grant names 127.0.0.1); the gateway still refuses to dial it
    # while roster_private_upstreams is empty, and dials it once the list names it.
    from mitmproxy.test import taddons
    from roster_gateway.addon import Gateway

    from tests.conftest import CP_URL

    outcomes = {}
    for setting in ("", "127.0.0.1:9000"):
        addon = Gateway(transport=cp)
        cp.decide = allow(grant="g-loopback-literal")
        with taddons.context(addon) as tctx:
            tctx.configure(addon, roster_control_plane=CP_URL, roster_service_token_file=str(token_file),
                           roster_private_upstreams=setting)
            flow = make_flow(host="127.0.0.1", port=9000)
            await addon.request(flow)
            await addon.shutdown()
        outcomes[setting] = flow
    refused, listed_flow = outcomes[""], outcomes["127.0.0.1:9000"]
    assert refused.response.status_code == 403 and b"blocked_address" in refused.response.content
    assert listed_flow.response is None and listed_flow.request.host == "127.0.0.1"
