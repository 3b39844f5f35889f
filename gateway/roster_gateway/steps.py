"""The steps every box connection goes through, shared by plain requests, intercepted HTTPS and CONNECT
tunnels: judge (ask /decide, hold for an approval, turn a deny into the box's answer), vet (the one
address an allowed destination may be dialled at), settle (tell the ledger a reservation went unused)
and report (the outcome of a forwarded call). The addon builds one Steps per configuration; the request
path (request_path.py) and the tunnel path (tunnel.py) call its public methods only."""

from __future__ import annotations

import asyncio

from mitmproxy import http

from roster_gateway import metrics
from roster_gateway.addresses import AddressRefused, Vetting, vetted_address
from roster_gateway.approvals import hold_for_approval
from roster_gateway.client import ControlPlaneClient, ControlPlaneDown
from roster_gateway.options import GatewayConfig
from roster_gateway.outcomes import OutcomeReporter
from roster_gateway.reasons import deny_status
from roster_gateway.responses import WIRE_KEY, deny_flow
from roster_gateway.sentinels import SentinelList
from roster_gateway.usage import Usage
from roster_gateway.wire import WireDecision

NOT_FORWARDED = Usage(known=True, problem="not forwarded").as_wire()


class ConnState:
    """What the gateway knows about one client connection."""

    __slots__ = ("token", "connect_target", "tunnel", "dial_names")

    def __init__(self) -> None:
        self.token: str | None = None
        self.connect_target: tuple[str, int] | None = None
        self.tunnel = False
        self.dial_names: dict[tuple[str, int], str] = {}  # vetted (ip, port) -> name for SNI


class Steps:
    __slots__ = ("config", "client", "vetting", "outcomes", "background", "sentinels", "journal")

    def __init__(self, config: GatewayConfig, client: ControlPlaneClient, vetting: Vetting,
                 outcomes: OutcomeReporter, background: set[asyncio.Task]) -> None:
        self.config = config
        self.client = client
        self.vetting = vetting
        self.outcomes = outcomes
        self.background = background
        self.sentinels = SentinelList(client, config.sentinel_refresh_seconds)
        self.journal = None  # the run journal's reporter (journal_reporter.py), set by build_steps

    async def decide(self, payload: dict) -> WireDecision:
        """Ask /decide; on ask, hold the request for its approval. Raises ControlPlaneDown."""
        with metrics.DECIDE_SECONDS.time():
            decision = await self.client.decide(payload)
        if decision.verdict == "ask":
            with metrics.HELD.track_inprogress():
                try:
                    decision = await hold_for_approval(
                        self.client, decision, max_hold=self.config.hold_seconds,
                        poll_seconds=self.config.approval_poll_seconds, background=self.background)
                except ControlPlaneDown:
                    metrics.count_hold("deny", None)
                    raise
            metrics.count_hold(decision.verdict, decision.reason)
        return decision

    async def judge(self, flow: http.HTTPFlow, payload: dict, token: str | None) -> WireDecision | None:
        """Ask /decide (and hold for an approval). Returns the allow decision, or None after denying."""
        try:
            decision = await self.decide(payload)
        except ControlPlaneDown as exc:
            deny_flow(flow, 503, "control_plane_unavailable", str(exc))
            return None
        if decision.wire:  # every refusal of this flow from here on speaks the host's provider's shape
            flow.metadata[WIRE_KEY] = decision.wire
        if not token:
            # Belt and braces: without a run token nothing passes, whatever the answer said.
            self.settle_unused(decision)
            deny_flow(flow, 407, "bad_token", "proxy credentials (the run token) are required")
            return None
        if decision.verdict != "allow":
            deny_decision(flow, decision)
            return None
        return decision

    async def vet_or_deny(self, flow: http.HTTPFlow, decision: WireDecision, host: str) -> str | None:
        """The one address an allowed request (or tunnel) may dial, resolved once; None after denying."""
        try:
            return await vetted_address(host, flow.request.port, self.vetting,
                                        dns_timeout=self.config.dns_timeout)
        except AddressRefused as exc:
            self.settle_unused(decision, 403, "blocked_address")
            deny_flow(flow, 403, "blocked_address", f"refusing to dial {host}: {exc}",
                      decision_id=decision.decision_id)
            return None

    def settle_unused(self, decision: WireDecision, status: int = 0, error: str = "not forwarded") -> None:
        """An allow whose request is not forwarded after all: release its reservation."""
        if decision.verdict == "allow" and decision.decision_id:
            # Nothing was sent, so nothing was used: a model call's reservation is released whole.
            self.report(decision.decision_id, status, 0, 0, error, usage=NOT_FORWARDED)

    def report(self, decision_id: str, status: int, req_bytes: int, resp_bytes: int, error: str,
               scrubbed: int = 0, usage: dict | None = None, response_sha256: str | None = None) -> None:
        # Queued and sent in batches in the background: neither the box's response nor the run's next
        # decision waits for the ledger (taint was raised by the decision). A scrubbed count above 0 is
        # audited by the control plane as a tripwire (the upstream echoed the injected secret).
        self.outcomes.report(decision_id, status, req_bytes, resp_bytes, error, scrubbed, usage,
                             response_sha256)


def deny_decision(flow: http.HTTPFlow, decision: WireDecision) -> None:
    """The box's answer to a control-plane deny: its reason, with the status the reason stands for."""
    deny_flow(flow, deny_status(decision), decision.reason or "policy_error", decision.message,
              decision_id=decision.decision_id, budget=decision.budget, comment=decision.comment)
