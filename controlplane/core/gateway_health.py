"""What the gateway says about itself on its loopback health endpoint (ROSTER_GATEWAY_HEALTH_URL), read for
the pages: whether it answers, agrees with the control plane, and which private upstreams the operator
listed (roster_private_upstreams). The list is the gateway's own setting, never stored here, so the pages
read it from the gateway rather than guess it from an environment variable (issue 27.2).

`literal_listed` answers whether a grant's IP literal is covered by an address or range entry of that
list. The gateway vets IP literals like resolved names (README, private upstreams): a grant naming
`127.0.0.1` reaches nothing until the list names it, so the grant form and preview warn."""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass, field

import httpx
from django.conf import settings

_CACHE_SECONDS = 10.0
_TIMEOUT_SECONDS = 1.0
_cache: dict[str, tuple[float, GatewayHealth]] = {}


@dataclass(frozen=True)
class GatewayHealth:
    url: str
    answered: bool
    ok: bool = False
    control_plane: bool = False
    private_upstreams: tuple[str, ...] = ()
    disagreements: tuple[str, ...] = field(default=())
    problem: str = ""


def gateway_health(*, fresh: bool = False) -> GatewayHealth:
    """The gateway's health, cached a few seconds (a page should not wait on it twice)."""
    url = settings.ROSTER_GATEWAY_HEALTH_URL
    cached = _cache.get(url)
    if cached and not fresh and time.monotonic() - cached[0] < _CACHE_SECONDS:
        return cached[1]
    health = _read(url)
    _cache[url] = (time.monotonic(), health)
    return health


def _strings(value) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _read(url: str) -> GatewayHealth:
    try:
        answer = httpx.get(url, timeout=_TIMEOUT_SECONDS)
        doc = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        return GatewayHealth(url, answered=False, problem=f"no answer ({exc.__class__.__name__})")
    if not isinstance(doc, dict):
        return GatewayHealth(url, answered=False,
                             problem=f"answered {answer.status_code} without a health body")
    return GatewayHealth(url, answered=True, ok=answer.status_code == 200 and doc.get("ok") is True,
                         control_plane=doc.get("control_plane") is True,
                         private_upstreams=_strings(doc.get("private_upstreams")),
                         disagreements=_strings(doc.get("disagreements")))


def _entry(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, int | None] | None:
    """An address or range entry as (network, port); None for a host-name entry (it never covers a
    literal: the gateway matches names by the name asked for)."""
    text = text.strip()
    port: int | None = None
    if text.startswith("["):
        inner, _, rest = text[1:].partition("]")
        text, port = inner, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    elif text.count(":") == 1:
        text, port_text = text.split(":")
        port = int(port_text) if port_text.isdigit() else None
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    if isinstance(network, ipaddress.IPv6Network) and network.network_address.ipv4_mapped is not None:
        inner = network.network_address.ipv4_mapped
        network = ipaddress.ip_network(f"{inner}/{max(network.prefixlen - 96, 0)}")
    return network, port


def internal_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a grant's host names when it is a loopback, private or otherwise non-global literal."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return None if ip.is_global else ip


def literal_listed(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int,
                   entries: tuple[str, ...]) -> bool:
    for text in entries:
        parsed = _entry(text)
        if parsed is not None and ip in parsed[0] and parsed[1] in (None, port):
            return True
    return False
