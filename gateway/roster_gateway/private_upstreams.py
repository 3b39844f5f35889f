"""Private upstreams on purpose: the operator's list of internal addresses the gateway may dial although
address vetting refuses private and loopback ranges (a self-hosted model on 10.x, an internal Git server).

The list is an operator setting of the gateway (`roster_private_upstreams`), never a grant field: a grant
still has to allow the request, and the list only lifts the address check for what it names. Entries,
comma-separated:

    10.20.0.0/16          a range, any port
    10.20.0.7             one address, any port
    10.20.0.7:8443        one address, one port (also 10.20.0.0/16:8443)
    [fd00::7]:443         IPv6 with a port (brackets); fd00::/8 without one
    git.internal:443      a host name with its port: whatever it resolves to may be dialled

Validated at start: a malformed entry, an entry covering everything, or one that covers the control
plane's or the gateway's own endpoints (or their ports) makes the gateway refuse to start. The address
check itself still refuses the control plane and the gateway's own ports first, whatever the list says."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*$")
_WILDCARDS = ("", "0.0.0.0", "::", "*")


class BadPrivateUpstream(ValueError):
    """An entry of roster_private_upstreams that the gateway will not start with."""


def _canonical(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@dataclass(frozen=True)
class PrivateUpstream:
    """One entry: a network (or a host name) and an optional port (required with a name)."""

    text: str
    network: IPNetwork | None = None
    name: str | None = None
    port: int | None = None

    def matches(self, ip: IPAddress, port: int, name: str | None = None) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            return name is not None and name.rstrip(".").lower() == self.name
        return ip in self.network or _canonical(ip) in self.network  # type: ignore[operator]

    def __str__(self) -> str:
        return self.text


def _parse_port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise BadPrivateUpstream(f"{entry!r}: {text!r} is not a port (1-65535)")
    return int(text)


def _parse_network(text: str, entry: str) -> IPNetwork:
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise BadPrivateUpstream(f"{entry!r}: not an address or range ({exc})") from exc
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen == 128:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            network = ipaddress.ip_network(mapped)
    if network.prefixlen == 0:
        raise BadPrivateUpstream(f"{entry!r} covers every address, which would switch address vetting off")
    return network


def parse_entry(entry: str) -> PrivateUpstream:
    text = entry.strip()
    if not text:
        raise BadPrivateUpstream("empty entry")
    if "://" in text or "@" in text:
        raise BadPrivateUpstream(f"{text!r}: write an address, a range or host:port, not a URL")
    if text.startswith("["):
        inner, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise BadPrivateUpstream(f"{text!r}: write [IPv6]:PORT")
        network = _parse_network(inner, text)
        if ":" not in inner:
            raise BadPrivateUpstream(f"{text!r}: brackets are for IPv6 addresses")
        return PrivateUpstream(text, network=network, port=_parse_port(rest[1:], text) if rest else None)
    if text.count(":") >= 2:  # bare IPv6, no port
        return PrivateUpstream(text, network=_parse_network(text, text))
    host, colon, port_text = text.partition(":")
    port = _parse_port(port_text, text) if colon else None
    name = host.rstrip(".").lower()
    last_label = name.rsplit(".", 1)[-1]
    if "/" in host or not last_label or last_label[0].isdigit() or not _HOST_NAME.match(name):
        return PrivateUpstream(text, network=_parse_network(host, text), port=port)
    if port is None:
        raise BadPrivateUpstream(f"{text!r}: a host name needs its port (name:port)")
    return PrivateUpstream(text, name=name, port=port)


def _endpoint_addresses(host: str) -> list[IPAddress] | None:
    """The addresses an endpoint host stands for; None for a wildcard (every address of this machine)."""
    host = host.strip("[]").lower()
    if host in _WILDCARDS:
        return None
    try:
        return [_canonical(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return []  # not resolvable now: the address check refuses its port on internal addresses anyway
    return [_canonical(ipaddress.ip_address(info[4][0])) for info in infos]


def _covers(entry: PrivateUpstream, host: str, port: int) -> bool:
    if entry.port is not None and entry.port != port:
        return False
    if entry.name is not None:
        return entry.name == host.strip("[]").rstrip(".").lower()
    addresses = _endpoint_addresses(host)
    if addresses is None:  # a wildcard listener is reachable on loopback at least
        addresses = [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
        if entry.port is not None:
            return True
    return any(entry.matches(ip, port) for ip in addresses)


def parse_private_upstreams(text: str, *, endpoints: Iterable[tuple[str, str, int]],
                            reserved_ports: Iterable[int]) -> tuple[PrivateUpstream, ...]:
    """Parse the comma-separated setting. `endpoints` are (label, host, port) of the control plane and the
    gateway itself; `reserved_ports` are ports the address check never opens on an internal address."""
    entries = tuple(parse_entry(part) for part in text.split(",") if part.strip())
    if text.strip() and not entries:
        raise BadPrivateUpstream("no entries")
    endpoints = tuple(endpoints)
    reserved = set(reserved_ports)
    for entry in entries:
        if entry.port is not None and entry.port in reserved:
            raise BadPrivateUpstream(
                f"{entry.text!r}: port {entry.port} is the control plane's or the gateway's own; "
                "the gateway never dials it on an internal address")
        for label, host, port in endpoints:
            if _covers(entry, host, port):
                raise BadPrivateUpstream(
                    f"{entry.text!r} covers {label} ({host}:{port}), which is never an upstream; "
                    "name the private upstream's own address and port instead")
    return entries
