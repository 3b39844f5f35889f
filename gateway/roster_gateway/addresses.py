"""Which addresses the gateway may dial. Resolve once, vet every answer, dial the vetted IP.

The box must never reach loopback, private, link-local (cloud metadata), CGNAT or the IPv6 forms of any of
them, including addresses embedded in IPv4-mapped, IPv4-compatible, NAT64 and 6to4 IPv6 addresses."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
from dataclasses import dataclass, field

from roster_gateway.memo import remembered
from roster_gateway.private_upstreams import PrivateUpstream

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4_BLOCKED = tuple(ipaddress.ip_network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
))
_V6_BLOCKED = tuple(ipaddress.ip_network(n) for n in (
    "::/128", "::1/128", "100::/64", "64:ff9b:1::/48", "2001::/32", "2001:db8::/32", "fc00::/7",
    "fe80::/10", "fec0::/10", "ff00::/8",
))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIXTO4 = ipaddress.ip_network("2002::/16")
_V4_COMPAT = ipaddress.ip_network("::/96")
LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
_MAX_VERDICTS = 4096  # destinations remembered by one Vetting before it starts again


class AddressRefused(Exception):
    """The name resolved to (or is) an address the gateway must not dial."""


def embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64 or ip in _V4_COMPAT:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIXTO4:
        return ip.sixtofour
    return None


def blocked_reason(ip: IPAddress) -> str | None:
    """Why this address is off limits, or None when it is an ordinary public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "scoped IPv6 address"
        inner = embedded_v4(ip)
        if inner is not None:
            why = blocked_reason(inner)
            return f"embeds {inner}: {why}" if why else None
        for net in _V6_BLOCKED:
            if ip in net:
                return f"in {net}"
    else:
        for net in _V4_BLOCKED:
            if ip in net:
                return f"in {net}"
    if not ip.is_global:
        return "not a global address"
    return None


def is_loopback(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_v4(ip)
        return ip == ipaddress.IPv6Address("::1") or (inner is not None and inner in LOOPBACK_V4)
    return ip in LOOPBACK_V4


def _canonical(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address):
        return embedded_v4(ip) or ip
    return ip


@remembered
def parse_ip_literal(host: str) -> IPAddress | None:
    """Only canonical literals count; forms like 0x7f.1 or 2130706433 are names and get resolved.
    Remembered (memo.py): the same few destinations come back on every request."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Vetting:
    allow_loopback: bool
    own_ports: frozenset[int]
    control_plane: tuple[str, int]
    # Other control-plane endpoints (the web server, when the gateway talks to the decision API's own
    # process): never upstreams either, whatever the grant.
    also_control_plane: tuple[tuple[str, int], ...] = ()
    # The operator's private upstreams (roster_private_upstreams): internal addresses that may be dialled.
    private_upstreams: tuple[PrivateUpstream, ...] = ()
    # (ip, port, name) -> why it may not be dialled, or None: a pure function of the fields above, worked
    # out once per destination instead of on every request.
    _verdicts: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def check(self, ip: IPAddress, port: int, *, name: str | None = None) -> None:
        """Raise AddressRefused unless the gateway may dial ip:port (`name`: the host name resolved to ip)."""
        key = (ip, port, name)
        try:
            refusal = self._verdicts[key]
        except KeyError:
            refusal = self._refusal(ip, port, name)
            if len(self._verdicts) >= _MAX_VERDICTS:
                self._verdicts.clear()
            self._verdicts[key] = refusal
        if refusal is not None:
            raise AddressRefused(refusal)

    def _refusal(self, ip: IPAddress, port: int, name: str | None) -> str | None:
        if not 0 < port < 65536:
            return f"port {port} is not dialable"
        internal = is_loopback(ip) or blocked_reason(ip) is not None
        for cp_host, cp_port in (self.control_plane, *self.also_control_plane):
            cp_ip = parse_ip_literal(cp_host)
            if port == cp_port and (internal or (cp_ip is not None and _canonical(cp_ip) == _canonical(ip))):
                return "the control plane is not an upstream"
        if port in self.own_ports and internal:
            return "the gateway itself is not an upstream"
        why = blocked_reason(ip)
        if why is None:
            return None
        if self.allow_loopback and is_loopback(ip):
            return None
        if any(entry.matches(ip, port, name) for entry in self.private_upstreams):
            return None
        return f"{ip} is not a public address ({why})"


_text = functools.lru_cache(maxsize=4096)(str)  # an address as dialled; ipaddress formats it afresh each time


async def resolve(host: str, port: int, timeout: float) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError as exc:
        raise AddressRefused(f"resolving {host} timed out") from exc
    except OSError as exc:
        raise AddressRefused(f"cannot resolve {host}") from exc
    ips: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = ipaddress.ip_address(sockaddr[0])
        if ip not in ips:
            ips.append(ip)
    if not ips:
        raise AddressRefused(f"{host} has no addresses")
    return ips


async def vetted_address(host: str, port: int, vetting: Vetting, *, dns_timeout: float) -> str:
    """The one IP to dial for host:port. Every resolved address must pass, so a mixed answer
    (one public, one internal) is refused rather than raced."""
    literal = parse_ip_literal(host)
    if literal is not None:
        # An IP literal is vetted like a resolved name: a grant naming 127.0.0.1 or 10.0.0.7 is an admin's
        # policy, not the operator's listing of what the gateway may dial (README, "never dials loopback or
        # private addresses unless listed"), so an internal literal needs roster_private_upstreams too.
        vetting.check(literal, port)
        return _text(literal)
    ips = await resolve(host, port, dns_timeout)
    for ip in ips:
        vetting.check(ip, port, name=host)
    return str(ips[0])
