"""The gateway's options (registered with mitmproxy in `load`) and the validated config built from them.

Every timeout and limit is a named option here, never a literal in the hooks."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from mitmproxy import exceptions

from roster_gateway.private_upstreams import BadPrivateUpstream, PrivateUpstream, parse_private_upstreams

# name, type, default, help
OPTIONS: tuple[tuple[str, type, object, str], ...] = (
    ("roster_control_plane", str, "", "Base URL of the control plane's decision API, e.g. "
     "http://127.0.0.1:8002, or of its replicas, comma-separated (each call goes to a live one; one that "
     "fails hands the call to the next within the same deadline)"),
    ("roster_control_plane_backoff_ms", int, 1000, "Milliseconds a decision API replica that failed is "
     "skipped while another answers, doubled for each failure in a row up to 8x (with one replica: unused)"),
    ("roster_service_token_file", str, "", "File holding the gateway's service token (mode 0600)"),
    ("roster_decide_timeout_ms", int, 2000,
     "Milliseconds to wait for /decide (and /trace) before a 503 deny"),
    ("roster_outcome_timeout_ms", int, 5000, "Milliseconds to wait for /outcomes and /abandon reports"),
    ("roster_hold_seconds", int, 60, "Longest time a request is held waiting for an approval: the control "
     "plane's hold (ROSTER_APPROVAL_HOLD_SECONDS) applies; this must not be below it"),
    ("roster_approval_poll_seconds", int, 10, "Longest single /approvals/{id}/wait long-poll (at most the "
     "control plane's ROSTER_APPROVAL_WAIT_MAX_SECONDS)"),
    ("roster_dns_timeout_ms", int, 2000, "Milliseconds to resolve an upstream name before denying"),
    ("roster_max_body_bytes", int, 32 * 1024 * 1024,
     "Largest request (and response) body the gateway passes; bodies are never streamed"),
    ("roster_body_preview_bytes", int, 4096, "Body bytes shown to approvers in /decide"),
    # The control plane's decision API refuses larger request facts (ROSTER_DECIDE_MAX_PATH_BYTES,
    # ..._HEADERS, ..._HEADER_BYTES); the gateway refuses them first, legibly (414, 431).
    ("roster_max_target_bytes", int, 16 * 1024, "Longest request target (path and query) the gateway passes"),
    ("roster_sentinel_refresh_ms", int, 5000,
     "Milliseconds the gateway reuses the control plane's list of sentinels before fetching it again"),
    ("roster_max_headers", int, 200, "Most request header fields the gateway passes"),
    ("roster_max_header_bytes", int, 16 * 1024, "Longest single request header value the gateway passes"),
    ("roster_health_port", int, 0, "Loopback port of the health endpoint (0: off)"),
    ("roster_metrics", bool, True, "Serve Prometheus metrics at /metrics on the health port (loopback)"),
    ("roster_health_cache_ms", int, 1000, "Milliseconds a control-plane health answer is reused"),
    ("roster_allow_loopback_upstreams", bool, False,
     "TESTS ONLY: allow dialling loopback upstreams (never the gateway's or control plane's ports)"),
    ("roster_ca_cert_export", str, "", "Copy the CA's public certificate (never the key) to this path"),
    ("roster_control_plane_also", str, "",
     "Other control-plane endpoints never dialled, whatever the grant: comma-separated URLs (the web "
     "server, when roster_control_plane is the decision API's own process)"),
    ("roster_private_upstreams", str, "",
     "Internal upstreams the gateway may dial although they are private or loopback: comma-separated "
     "ranges, addresses or host:port (10.20.0.0/16, 10.20.0.7:8443, [fd00::7]:443, git.internal:443); "
     "never the control plane's or the gateway's own endpoints"),
    ("roster_outcome_flush_ms", int, 5,
     "Milliseconds an outcome report waits for others to share its POST /outcomes (0: send at once)"),
    ("roster_journal_flush_ms", int, 100,
     "Milliseconds a journaled model call waits for others to share its POST /journal (0: send at once); "
     "kept on disk meanwhile. Long enough that it is stored while the agent's next call streams, not while "
     "that call is being decided"),
    ("roster_proposals_host", str, "proposals.roster.invalid",
     "Reserved name the gateway answers itself for proposals (never dialled; must end in .invalid; the "
     "same as the control plane's ROSTER_PROPOSALS_HOST)"),
    ("roster_budget_wait_ms", int, 30_000, "Milliseconds the control plane may hold a /decide for a call "
     "waiting for budget that calls in flight hold (at least the control plane's ROSTER_BUDGET_WAIT_MS): "
     "added to roster_decide_timeout_ms for /decide"),
    ("roster_outcome_journal", str, "", "File (in the gateway's private state dir) keeping outcome reports "
     "until the control plane acknowledges them, across a crash of either side; empty: memory only"),
    ("roster_model_journal", str, "", "File (in the gateway's private state dir, model-journal.jsonl) "
     "keeping journaled model calls until the control plane stored them (docs/journal.md); empty: memory "
     "only"),
    ("roster_outcome_retry_ms", int, 1000, "Milliseconds before outcome reports the control plane did not "
     "take are sent again"),
    ("roster_outcome_batch_max", int, 256, "Most outcomes in one POST /outcomes (at most the control "
     "plane's ROSTER_OUTCOME_BATCH_MAX)"),
)


@dataclass(frozen=True)
class GatewayConfig:
    control_plane: str  # the first replica (roster_control_plane); `control_planes` holds every one
    service_token: str
    decide_timeout: float
    outcome_timeout: float
    hold_seconds: int
    approval_poll_seconds: int
    dns_timeout: float
    max_body_bytes: int
    body_preview_bytes: int
    health_port: int
    health_cache_seconds: float
    allow_loopback_upstreams: bool
    control_plane_endpoint: tuple[str, int]
    own_ports: frozenset[int]
    outcome_flush_delay: float = 0.005
    journal_flush_delay: float = 0.1
    also_control_plane: tuple[tuple[str, int], ...] = ()
    outcome_batch_max: int = 256
    private_upstreams: tuple[PrivateUpstream, ...] = ()
    max_target_bytes: int = 16 * 1024
    max_headers: int = 200
    max_header_bytes: int = 16 * 1024
    sentinel_refresh_seconds: float = 5.0
    proposals_host: str = "proposals.roster.invalid"
    metrics: bool = True
    budget_wait_ms: int = 30_000
    outcome_journal: str = ""
    outcome_retry_delay: float = 1.0
    model_journal: str = ""
    control_planes: tuple[str, ...] = ()
    control_plane_backoff: float = 1.0

    @property
    def replica_urls(self) -> tuple[str, ...]:
        return self.control_planes or (self.control_plane,)


def read_token_file(path: str) -> str:
    if not path:
        raise exceptions.OptionsError("roster_service_token_file is required")
    p = Path(path)
    try:
        mode = p.stat().st_mode
        token = p.read_text().strip()
    except OSError as exc:
        raise exceptions.OptionsError(f"cannot read roster_service_token_file: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise exceptions.OptionsError("roster_service_token_file must not be readable by group or others")
    if not token:
        raise exceptions.OptionsError("roster_service_token_file is empty")
    return token


def _endpoint(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise exceptions.OptionsError("roster_control_plane(_also) must be http(s) URLs")
    return parts.hostname.lower(), parts.port or (443 if parts.scheme == "https" else 80)


def _listen_ports(opts) -> set[int]:
    ports = {int(getattr(opts, "listen_port", 0) or 0)}
    modes: Sequence[str] = getattr(opts, "mode", ()) or ()
    for mode in modes:
        tail = mode.rsplit("@", 1)[-1] if "@" in mode else ""
        port = tail.rsplit(":", 1)[-1]
        if port.isdigit():
            ports.add(int(port))
    return ports


def _proposals_host(name: str) -> str:
    # RFC 6761: .invalid never resolves, so the reserved name can never be a real upstream.
    name = name.strip().lower()
    if not name.endswith(".invalid") or not name.removesuffix(".invalid"):
        raise exceptions.OptionsError("roster_proposals_host must be a name under .invalid")
    return name


def build_config(opts) -> GatewayConfig:
    """Validate options; a misconfigured gateway must refuse to start rather than run open."""
    urls = [u.strip().rstrip("/") for u in opts.roster_control_plane.split(",") if u.strip()]
    if not urls:
        raise exceptions.OptionsError("roster_control_plane is required")
    if len(set(urls)) != len(urls):
        raise exceptions.OptionsError("roster_control_plane names a replica twice")
    url, endpoint = urls[0], _endpoint(urls[0])
    # The other replicas are control-plane endpoints too: never dialled for a box, whatever the grant.
    replicas = tuple(e for e in dict.fromkeys(_endpoint(u) for u in urls[1:]) if e != endpoint)
    if getattr(opts, "roster_control_plane_backoff_ms", 1000) <= 0:
        raise exceptions.OptionsError("roster_control_plane_backoff_ms must be positive")
    for name in ("roster_decide_timeout_ms", "roster_outcome_timeout_ms", "roster_dns_timeout_ms"):
        if getattr(opts, name) <= 0:
            raise exceptions.OptionsError(f"{name} must be positive")
    if opts.roster_hold_seconds < 0 or opts.roster_approval_poll_seconds < 1:
        raise exceptions.OptionsError("roster_hold_seconds >= 0 and roster_approval_poll_seconds >= 1")
    if opts.roster_outcome_flush_ms < 0 or opts.roster_outcome_batch_max < 1:
        raise exceptions.OptionsError("roster_outcome_flush_ms >= 0 and roster_outcome_batch_max >= 1")
    if opts.roster_journal_flush_ms < 0:
        raise exceptions.OptionsError("roster_journal_flush_ms must not be negative")
    if opts.roster_outcome_retry_ms <= 0:
        raise exceptions.OptionsError("roster_outcome_retry_ms must be positive")
    if opts.roster_budget_wait_ms < 0:
        raise exceptions.OptionsError("roster_budget_wait_ms must not be negative")
    if opts.roster_max_body_bytes < 0 or opts.roster_body_preview_bytes < 0:
        raise exceptions.OptionsError("body limits must not be negative")
    if min(opts.roster_max_target_bytes, opts.roster_max_headers, opts.roster_max_header_bytes) < 1:
        raise exceptions.OptionsError("request target and header limits must be positive")
    own = _listen_ports(opts) | {opts.roster_health_port}
    own.discard(0)
    also = replicas + tuple(_endpoint(u.strip()) for u in opts.roster_control_plane_also.split(",")
                            if u.strip())
    return GatewayConfig(
        control_plane=url,
        service_token=read_token_file(opts.roster_service_token_file),
        decide_timeout=opts.roster_decide_timeout_ms / 1000,
        outcome_timeout=opts.roster_outcome_timeout_ms / 1000,
        hold_seconds=int(opts.roster_hold_seconds),
        approval_poll_seconds=int(opts.roster_approval_poll_seconds),
        dns_timeout=opts.roster_dns_timeout_ms / 1000,
        max_body_bytes=int(opts.roster_max_body_bytes),
        body_preview_bytes=int(opts.roster_body_preview_bytes),
        health_port=int(opts.roster_health_port),
        health_cache_seconds=opts.roster_health_cache_ms / 1000,
        allow_loopback_upstreams=bool(opts.roster_allow_loopback_upstreams),
        control_plane_endpoint=endpoint,
        also_control_plane=also,
        own_ports=frozenset(own),
        outcome_flush_delay=opts.roster_outcome_flush_ms / 1000,
        journal_flush_delay=opts.roster_journal_flush_ms / 1000,
        outcome_batch_max=int(opts.roster_outcome_batch_max),
        private_upstreams=_private_upstreams(opts, endpoint, also, own),
        max_target_bytes=int(opts.roster_max_target_bytes),
        max_headers=int(opts.roster_max_headers),
        max_header_bytes=int(opts.roster_max_header_bytes),
        sentinel_refresh_seconds=max(0, opts.roster_sentinel_refresh_ms) / 1000,
        proposals_host=_proposals_host(opts.roster_proposals_host),
        metrics=bool(getattr(opts, "roster_metrics", True)),
        budget_wait_ms=int(opts.roster_budget_wait_ms),
        outcome_journal=str(opts.roster_outcome_journal),
        outcome_retry_delay=opts.roster_outcome_retry_ms / 1000,
        model_journal=str(opts.roster_model_journal),
        control_planes=tuple(urls),
        control_plane_backoff=getattr(opts, "roster_control_plane_backoff_ms", 1000) / 1000,
    )


def _own_endpoints(opts) -> list[tuple[str, str, int]]:
    """Where the gateway itself answers: its proxy listener(s) and its loopback health endpoint."""
    found = []
    if getattr(opts, "listen_port", 0):
        host = str(getattr(opts, "listen_host", "") or "")
        found.append(("the gateway's listener", host, int(opts.listen_port)))
    for mode in getattr(opts, "mode", ()) or ():
        tail = mode.rsplit("@", 1)[-1] if "@" in mode else ""
        mode_host, _, port = tail.rpartition(":")
        if port.isdigit():
            found.append(("the gateway's listener", mode_host, int(port)))
    if opts.roster_health_port:
        found.append(("the gateway's health endpoint", "127.0.0.1", int(opts.roster_health_port)))
    return found


def _private_upstreams(opts, control_plane: tuple[str, int], also: tuple[tuple[str, int], ...],
                       own_ports: set[int]) -> tuple[PrivateUpstream, ...]:
    endpoints = [("the control plane", *control_plane)]
    endpoints += [("a control-plane endpoint", *e) for e in also]
    endpoints += _own_endpoints(opts)
    reserved = own_ports | {control_plane[1]} | {port for _host, port in also}
    try:
        return parse_private_upstreams(opts.roster_private_upstreams, endpoints=endpoints,
                                       reserved_ports=reserved)
    except BadPrivateUpstream as exc:
        raise exceptions.OptionsError(f"roster_private_upstreams: {exc}") from exc


def export_ca_cert(confdir: str, dest: str) -> None:
    """Copy only the public CA certificate out of the private confdir."""
    src = Path(os.path.expanduser(confdir)) / "mitmproxy-ca-cert.pem"
    if not dest or not src.exists():
        return
    target = Path(dest)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(src.read_bytes())
    tmp.chmod(0o644)
    tmp.replace(target)
