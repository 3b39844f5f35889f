"""The Roster egress gateway addon: mitmproxy's hooks, each handing its work to the module that owns it:
configuration (configuration.py), a request's path (request_path.py), what comes back (response_path.py)
and a CONNECT's path (tunnel.py). Here are the lifecycle, the per-connection state, the dial gate and the
refusal of everything that is not HTTP. Every failure path denies."""

from __future__ import annotations

import asyncio
import functools
import logging

from mitmproxy import connection, ctx, http, tcp, tls, udp
from mitmproxy.proxy import layer, layers

from roster_gateway import configuration, metrics, response_path, shapes
from roster_gateway.addresses import Vetting
from roster_gateway.client import ControlPlaneClient, Transport
from roster_gateway.health import HealthServer
from roster_gateway.options import OPTIONS, GatewayConfig, build_config, export_ca_cert
from roster_gateway.outcomes import OutcomeReporter
from roster_gateway.request_path import judge_request
from roster_gateway.responses import deny_flow
from roster_gateway.shared_limits import SharedLimits
from roster_gateway.steps import ConnState, Steps
from roster_gateway.tunnel import judge_connect

log = logging.getLogger("roster_gateway")
# mitmproxy leaves the root logger at DEBUG; libraries that log per frame would build records per request.
logging.getLogger("hpack").setLevel(logging.WARNING)


def fail_closed(hook):
    """An exception in a hook would let mitmproxy carry on and forward the flow; deny instead."""

    @functools.wraps(hook)
    async def wrapper(self, flow: http.HTTPFlow) -> None:
        try:
            await hook(self, flow)
        except Exception:
            log.exception("gateway error in %s; denying", hook.__name__)
            flow.metadata.pop("roster_decision_id", None)
            deny_flow(flow, 503, "policy_error", "the gateway failed while judging this request")

    return wrapper


class Gateway:
    def __init__(self, transport: Transport | None = None) -> None:
        self._transport = transport  # tests inject a fake control plane
        self.config: GatewayConfig | None = None
        self.client: ControlPlaneClient | None = None
        self.vetting: Vetting | None = None
        self.health: HealthServer | None = None
        self.conns: dict[str, ConnState] = {}
        self.background: set[asyncio.Task] = set()
        self._configuring = False
        self.outcomes: OutcomeReporter | None = None
        self.steps: Steps | None = None
        self.shared: SharedLimits | None = None  # the control plane's side of the shared settings
        self._running = False

    # --- lifecycle ---
    def load(self, loader) -> None:
        for name, typespec, default, help_text in OPTIONS:
            loader.add_option(name, typespec, default, help_text)

    def configure(self, updated: set[str]) -> None:
        if self._configuring:
            return  # our own option updates below re-enter configure
        self._configuring = True
        try:
            self._configure(ctx.options, updated)
        finally:
            self._configuring = False

    def _configure(self, opts, updated: set[str]) -> None:
        configuration.refuse_unsafe_options(opts)
        if configuration.changes_config(updated) or not self.config:
            config = build_config(opts)
            old = self.client
            self.steps = configuration.build_steps(config, transport=self._transport, spawn=self._spawn,
                                                   background=self.background)
            self.config, self.client = config, self.steps.client
            self.vetting, self.outcomes = self.steps.vetting, self.steps.outcomes
            self.shared = SharedLimits(config)
            if old is not None and self._transport is None:
                self._spawn(old.close())
            configuration.log_widened_dialling(config)
            if self._running:
                self._spawn(self._check_shared_limits(self.shared))
        configuration.pin_required_options(opts, self.config)

    async def running(self) -> None:
        export_ca_cert(ctx.options.confdir, ctx.options.roster_ca_cert_export)
        self._running = True
        if self.outcomes is not None:
            self.outcomes.resume()  # what the last run left unacknowledged
        if self.steps is not None and self.steps.journal is not None:
            self.steps.journal.resume()  # journaled model calls the control plane has not stored yet
        if self.shared is not None:
            self._spawn(self._check_shared_limits(self.shared))
        if self.config and self.config.health_port and self.client:
            self.health = HealthServer(self.config.health_port, self._probe,
                                       cache_seconds=self.config.health_cache_seconds,
                                       probe_timeout=self.config.decide_timeout,
                                       info={"private_upstreams": [str(e) for e in
                                                                   self.config.private_upstreams]},
                                       metrics=metrics.exposition if self.config.metrics else None,
                                       disagreements=self._disagreements)
            await self.health.start()

    async def _probe(self, timeout: float) -> bool:
        """The health endpoint's question to the control plane, which also re-checks the shared settings."""
        shared, client = self.shared, self.client
        if client is None:
            return False
        answered, limits = await client.health(timeout)
        if shared is not None:
            shared.note(answered, limits)
        return answered

    def _disagreements(self) -> tuple[str, ...]:
        return (self.shared.problems or ()) if self.shared else ()

    async def _check_shared_limits(self, shared: SharedLimits) -> None:
        """At start (and after a reconfiguration): ask the control plane until it answers once, so a
        disagreement is found before the first box relies on it, not at the first health probe."""
        while self._running and shared is self.shared and not shared.checked and self.client is not None:
            answered, limits = await self.client.health(shared.config.decide_timeout)
            shared.note(answered, limits)
            if not answered:
                await asyncio.sleep(max(shared.config.health_cache_seconds, 0.1))

    async def shutdown(self) -> None:
        self._running = False  # ends the start check's retries (a control plane still away)
        if self.outcomes is not None:
            self.outcomes.stop()  # unacknowledged reports stay in the journal for the next start
        if self.steps is not None and self.steps.journal is not None:
            self.steps.journal.stop()
        if self.health:
            await self.health.stop()
        if self.background:
            await asyncio.gather(*self.background, return_exceptions=True)
        if self.client:
            await self.client.close()

    def _spawn(self, coro) -> asyncio.Task | None:
        task = asyncio.get_running_loop().create_task(coro) if _loop_running() else None
        if task is None:
            coro.close()
            return None
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task

    def _conn(self, client: connection.Client) -> ConnState:
        state = self.conns.get(client.id)
        if state is None:
            state = self.conns[client.id] = ConnState()
        return state

    def client_disconnected(self, client: connection.Client) -> None:
        self.conns.pop(client.id, None)

    # --- plain HTTP and intercepted HTTPS ---
    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.method.upper() == "CONNECT" or self.config is None:
            return
        refusal = shapes.check_head(flow.request, self.config)
        if refusal:
            deny_flow(flow, refusal.status, refusal.reason, refusal.message)

    @fail_closed
    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.request.method.upper() == "CONNECT":
            return
        if self._refused(flow):
            return
        await judge_request(self.steps, flow, self._conn(flow.client_conn))

    # --- what comes back ---
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        response_path.start_response(flow)

    def response(self, flow: http.HTTPFlow) -> None:
        response_path.finish_response(self.steps, flow)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        response_path.scrub_websocket_message(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        flow.metadata.pop("roster_scrubber", None)

    def error(self, flow: http.HTTPFlow) -> None:
        response_path.upstream_failed(self.steps, flow)

    # --- CONNECT, tunnels and everything that is not HTTP ---
    @fail_closed
    async def http_connect(self, flow: http.HTTPFlow) -> None:
        if self._refused(flow):
            return
        await judge_connect(self.steps, flow, self._conn(flow.client_conn))

    def _refused(self, flow: http.HTTPFlow) -> bool:
        """Every request is refused while the gateway is unconfigured or disagrees with the control plane."""
        refusal = "gateway is not configured" if self.steps is None else (
            self.shared.refusal() if self.shared else None)
        if refusal:
            deny_flow(flow, 503, "policy_error", refusal)
        return refusal is not None

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        state = self.conns.get(nextlayer.context.client.id)
        if state is not None and state.tunnel:
            # A tunnel grant: bytes pass untouched to the vetted address, judged on host and port only.
            nextlayer.layer = layers.TCPLayer(nextlayer.context, ignore=True)

    def tls_clienthello(self, data: tls.ClientHelloData) -> None:
        state = self.conns.get(data.context.client.id)
        if state is not None and state.tunnel:
            data.ignore_connection = True

    def server_connect(self, data) -> None:
        """The last gate before any dial: only an address vetted for this client's decision."""
        state = self.conns.get(data.client.id)
        address = data.server.address
        name = state.dial_names.get(tuple(address)) if (state and address) else None
        if name is None:
            data.server.error = "roster: destination was not vetted by a decision"
            log.warning("refused an unvetted dial to %s", address)
            return
        if not data.server.sni or data.server.sni == address[0]:
            data.server.sni = name

    def tcp_start(self, flow: tcp.TCPFlow) -> None:
        log.info("refused raw TCP from %s", flow.client_conn.peername)
        flow.kill()

    def udp_start(self, flow: udp.UDPFlow) -> None:
        log.info("refused UDP from %s", flow.client_conn.peername)
        flow.kill()

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        if not flow.metadata.get("roster_grant"):
            flow.kill()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False
