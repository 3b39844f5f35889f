"""From mitmproxy's options to a configured gateway: refuse the options under which it would run open or
record secrets, build the parts (control-plane client, address vetting, outcome reporter, the shared
steps) from the validated `roster_*` options (options.py), and pin the mitmproxy settings its guarantees
depend on. The addon's `configure` hook calls these; a refusal stops the gateway from starting."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

from mitmproxy import exceptions

from roster_gateway.addresses import Vetting
from roster_gateway.client import ControlPlaneClient, Transport
from roster_gateway.journal_reporter import JOURNAL_BATCH_MAX, JournalReporter
from roster_gateway.options import GatewayConfig
from roster_gateway.outcome_journal import journal_at
from roster_gateway.outcomes import OutcomeReporter
from roster_gateway.steps import Steps

log = logging.getLogger("roster_gateway")

# mitmproxy settings the gateway's guarantees depend on: nothing is dialled before a decision
# (lazy, no upstream cert sniffing), inbound headers validated, no HTTP/3, and no streamed bodies
# (a streamed request would be judged before its body, e.g. its MCP tool, is known).
REQUIRED_OPTIONS = {"connection_strategy": "lazy", "upstream_cert": False,
                    "validate_inbound_headers": True, "http3": False, "stream_large_bodies": None}
FORBIDDEN_NONEMPTY = ("ignore_hosts", "allow_hosts", "tcp_hosts", "udp_hosts")


def refuse_unsafe_options(opts) -> None:
    """Raise OptionsError for a mitmproxy setting that would bypass the decisions or record secrets."""
    # (getattr with a default: in unit tests the proxy-server options are not registered)
    if getattr(opts, "ssl_insecure", False):
        raise exceptions.OptionsError("the gateway never skips upstream certificate checks")
    for name in FORBIDDEN_NONEMPTY:
        if getattr(opts, name, None):
            raise exceptions.OptionsError(f"{name} would bypass the gateway's decisions; leave it empty")
    # Flows carry injected secrets once allowed: never dump headers or bodies, never save flows.
    if getattr(opts, "flow_detail", 0) > 1 or getattr(opts, "save_stream_file", None):
        raise exceptions.OptionsError("flow_detail > 1 and save_stream_file would record secret values")
    for mode in getattr(opts, "mode", ()):
        if not mode.startswith("regular"):
            raise exceptions.OptionsError("the gateway runs only as a regular HTTP proxy")


def changes_config(updated: Collection[str]) -> bool:
    """Whether an options update touches what the config is built from (the listener ports included:
    the gateway never dials its own)."""
    return any(n.startswith("roster_") or n in ("listen_port", "mode") for n in updated)


def build_steps(config: GatewayConfig, *, transport: Transport | None,
                spawn: Callable[..., asyncio.Task | None], background: set[asyncio.Task]) -> Steps:
    """The parts one configuration runs with, held by the shared steps both request paths use."""
    vetting = Vetting(allow_loopback=config.allow_loopback_upstreams, own_ports=config.own_ports,
                      control_plane=config.control_plane_endpoint,
                      also_control_plane=config.also_control_plane,
                      private_upstreams=config.private_upstreams)
    client = ControlPlaneClient(config.replica_urls, config.service_token,
                                decide_timeout=config.decide_timeout, outcome_timeout=config.outcome_timeout,
                                decide_wait=config.budget_wait_ms / 1000, transport=transport,
                                backoff=config.control_plane_backoff)
    outcomes = OutcomeReporter(client, max_batch=config.outcome_batch_max,
                               flush_delay=config.outcome_flush_delay, spawn=spawn,
                               journal=journal_at(config.outcome_journal),
                               retry_delay=config.outcome_retry_delay)
    journal = JournalReporter(client, max_batch=JOURNAL_BATCH_MAX, flush_delay=config.journal_flush_delay,
                              spawn=spawn, journal=journal_at(config.model_journal, "journaled model call"),
                              retry_delay=config.outcome_retry_delay)
    steps = Steps(config, client, vetting, outcomes, background)
    steps.journal = journal
    return steps


def log_widened_dialling(config: GatewayConfig) -> None:
    """Say so in the log whenever the gateway may dial what it would otherwise refuse."""
    if config.allow_loopback_upstreams:
        log.warning("roster_allow_loopback_upstreams is on: for tests only")
    if config.private_upstreams:
        log.info("private upstreams the gateway may dial: %s", ", ".join(map(str, config.private_upstreams)))


def pin_required_options(opts, config: GatewayConfig) -> None:
    """Set the mitmproxy options the gateway's guarantees depend on (REQUIRED_OPTIONS, the body limit)."""
    wanted = {k: v for k, v in REQUIRED_OPTIONS.items() if hasattr(opts, k)}
    if hasattr(opts, "body_size_limit"):
        # mitmproxy itself answers 413 for a body over the limit, before reading it.
        wanted["body_size_limit"] = str(config.max_body_bytes)
    wrong = {k: v for k, v in wanted.items() if getattr(opts, k) != v}
    if wrong:
        opts.update(**wrong)  # re-enters the addon's configure hook, which ignores its own updates
