"""Address vetting: what the gateway refuses to dial, whatever name led there."""

from __future__ import annotations

import ipaddress

import pytest
from roster_gateway.addresses import AddressRefused, Vetting, blocked_reason, vetted_address

BLOCKED = [
    "127.0.0.1", "127.8.9.10", "0.0.0.0", "10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1",
    "169.254.169.254", "100.64.0.1", "100.127.255.254", "224.0.0.1", "255.255.255.255", "198.18.0.1",
    "::", "::1", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1",
    "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",  # IPv4-mapped
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe",  # NAT64 of loopback and of the metadata address
    "2002:7f00:1::1", "2002:a9fe:a9fe::1",  # 6to4 of loopback and metadata
    "::127.0.0.1", "64:ff9b:1::1", "2001::1", "2001:db8::1",
]
ALLOWED = ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.216.34", "64:ff9b::5db8:d822"]


@pytest.mark.parametrize("ip", BLOCKED)
def test_internal_addresses_are_blocked(ip):
    assert blocked_reason(ipaddress.ip_address(ip)) is not None


@pytest.mark.parametrize("ip", ALLOWED)
def test_public_addresses_pass(ip):
    assert blocked_reason(ipaddress.ip_address(ip)) is None


CLOSED = Vetting(allow_loopback=False, own_ports=frozenset({8080, 8081}), control_plane=("127.0.0.1", 8000))
TESTING = Vetting(allow_loopback=True, own_ports=frozenset({8080, 8081}), control_plane=("127.0.0.1", 8000))
# The gateway talks to the decision API's own process; the web server is a control-plane endpoint too.
SPLIT = Vetting(allow_loopback=True, own_ports=frozenset({8080, 8081}), control_plane=("127.0.0.1", 8002),
                also_control_plane=(("127.0.0.1", 8000), ("cp.internal", 8443)))

CASES = [
    # name, vetting, host, port, allowed
    ("public literal", CLOSED, "93.184.216.34", 443, True),
    ("loopback closed by default", CLOSED, "127.0.0.1", 9000, False),
    ("metadata", CLOSED, "169.254.169.254", 80, False),
    ("loopback allowed for tests", TESTING, "127.0.0.1", 9000, True),
    ("private still closed for tests", TESTING, "10.0.0.1", 80, False),
    ("control plane never", TESTING, "127.0.0.1", 8000, False),
    ("gateway itself never", TESTING, "127.0.0.1", 8080, False),
    ("gateway health never", TESTING, "127.0.0.2", 8081, False),
    ("mapped loopback for tests", TESTING, "::ffff:127.0.0.1", 8000, False),
    ("port zero", CLOSED, "93.184.216.34", 0, False),
    ("decision API never", SPLIT, "127.0.0.1", 8002, False),
    ("web server never", SPLIT, "127.0.0.1", 8000, False),
    ("web server on another loopback never", SPLIT, "127.0.0.2", 8000, False),
    ("other loopback ports for tests", SPLIT, "127.0.0.1", 9000, True),
]


@pytest.mark.parametrize("name,vetting,host,port,allowed", CASES, ids=[c[0] for c in CASES])
async def test_vetting_table(name, vetting, host, port, allowed):
    if allowed:
        assert await vetted_address(host, port, vetting, dns_timeout=1)
    else:
        with pytest.raises(AddressRefused):
            await vetted_address(host, port, vetting, dns_timeout=1)


# Issue 27.2: a grant naming an IP literal is the admin's policy, not the operator's list; every internal
# literal form is refused on a gateway whose list is empty, however the grant that allowed it was written.
INTERNAL_LITERALS = ["127.0.0.1", "127.8.9.10", "[::1]", "::1", "::ffff:127.0.0.1", "[::ffff:7f00:1]",
                     "169.254.169.254", "10.0.0.7", "192.168.1.1", "fd00::7", "[fe80::1]", "64:ff9b::7f00:1",
                     "::127.0.0.1", "2002:7f00:1::1"]


@pytest.mark.parametrize("host", INTERNAL_LITERALS)
async def test_an_internal_literal_is_refused_whatever_granted_it(host):
    with pytest.raises(AddressRefused, match="not a public address"):
        await vetted_address(host, 9000, CLOSED, dns_timeout=1)


@pytest.mark.parametrize("name", ["localhost", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "127.1",
                                  "localhost."])
async def test_names_that_resolve_to_loopback_are_refused_even_with_a_grant(name):
    # Non-canonical forms (decimal, hex, octal, short) are names, not literals: they are resolved and the
    # result vetted, so they are refused like the literal they stand for.
    with pytest.raises(AddressRefused):
        await vetted_address(name, 80, CLOSED, dns_timeout=1)


async def test_names_resolve_to_an_ip_that_is_dialled():
    ip = await vetted_address("localhost", 9000, TESTING, dns_timeout=1)
    assert ip in ("127.0.0.1", "::1")


async def test_unresolvable_name_is_refused():
    with pytest.raises(AddressRefused):
        await vetted_address("no-such-host.invalid", 80, CLOSED, dns_timeout=1)
