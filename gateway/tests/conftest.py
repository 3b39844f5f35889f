"""A fake control plane (an in-process transport) and a Gateway addon in mitmproxy's taddons context."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mitmproxy.test import taddons, tflow, tutils
from roster_gateway.addon import Gateway

CP_URL = "http://cp.test"
PUBLIC_IP = "93.184.216.34"
CONTRACT = Path(__file__).resolve().parents[2] / "tests" / "contract"
# The control plane's health answer at its defaults (shared with its tests).
HEALTH = json.loads((CONTRACT / "health.json").read_text())["response"]


def allow(**over) -> dict:
    doc = {"verdict": "allow", "reason": None, "status": 200, "message": "allowed by grant",
           "decision_id": "dc_1", "grant": "g-one", "tunnel": False, "trace": False, "inject": [],
           "replace": [], "approval_id": None, "hold_seconds": 0, "budget": None, "wire": None}
    doc.update(over)
    return doc


def deny(reason: str, status: int = 403, **over) -> dict:
    return allow(verdict="deny", reason=reason, status=status, message=f"denied: {reason}", grant=None,
                 decision_id="dc_d", **over)


def ask(approval_id: str = "ap_1", hold: int = 5) -> dict:
    return allow(verdict="ask", approval_id=approval_id, hold_seconds=hold, decision_id="dc_a")


@dataclass
class FakeControlPlane:
    """Answers like the control plane; `decide` is a dict or a function of the request payload."""

    decide: dict | Callable[[dict], dict] = field(default_factory=allow)
    waits: list[dict] = field(default_factory=list)
    delay: float = 0.0
    fail_status: int | None = None
    trace_status: int = 200
    calls: list[tuple[str, dict]] = field(default_factory=list)
    sentinels: list[str] = field(default_factory=list)
    # What /proposals and /proposals/{id}/status answer: the box's status and JSON body.
    proposal_answer: dict = field(default_factory=lambda: {"status": 201, "body": {"id": "p1",
                                                                                 "status": "pending"}})
    # What GET /health answers (status, body): the contract fixture's, with the control plane's limits.
    health: tuple[int, dict] = field(default_factory=lambda: (200, json.loads(json.dumps(HEALTH))))

    def paths(self) -> list[str]:
        return [p for p, _ in self.calls]

    def bodies(self, suffix: str) -> list[dict]:
        return [b for p, b in self.calls if p.endswith(suffix)]

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """The client's transport interface: (status, body bytes)."""
        status, doc = await self.handle(method, path, json.loads(body) if body else {})
        return status, json.dumps(doc).encode()

    async def close(self) -> None:
        pass

    async def handle(self, method: str, path: str, body: dict) -> tuple[int, dict]:
        if path.endswith("/sentinels"):  # fetched now and then, not per request: not in `calls`
            return (self.fail_status or 200), {"sentinels": self.sentinels}
        if path.endswith("/health"):  # likewise
            return (self.fail_status, {"detail": "boom"}) if self.fail_status else self.health
        self.calls.append((path, body))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail_status:
            return self.fail_status, {"detail": "boom"}
        if path.endswith("/decide"):
            return 200, (self.decide(body) if callable(self.decide) else self.decide)
        if path.endswith("/wait"):
            answer = self.waits.pop(0) if self.waits else {"status": "pending", "decision": None}
            if answer.get("status") == "pending":
                await asyncio.sleep(min(body["timeout_seconds"], 0.05))
            return 200, answer
        if path.endswith("/outcomes"):
            return 200, {"results": ["ok"] * len(body["outcomes"])}
        if path.endswith("/journal"):
            return 200, {"results": ["ok"] * len(body["entries"])}
        if "/proposals" in path:
            return 200, self.proposal_answer
        if path.endswith("/trace"):
            return self.trace_status, {"ok": self.trace_status == 200}
        return 200, {"ok": True}


@pytest.fixture
def cp() -> FakeControlPlane:
    return FakeControlPlane()


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "service.token"
    path.write_text("svc-token\n")
    path.chmod(0o600)
    return path


@pytest.fixture
async def gw(cp, token_file):
    addon = Gateway(transport=cp)
    # The fake control plane never keeps a /decide waiting for budget: /decide's deadline is the timeout.
    cp.health[1]["limits"]["budget_wait_ms"] = 0
    with taddons.context(addon) as tctx:
        tctx.configure(addon, roster_control_plane=CP_URL, roster_service_token_file=str(token_file),
                       roster_decide_timeout_ms=300, roster_hold_seconds=2, roster_dns_timeout_ms=500,
                       roster_budget_wait_ms=0)
        addon.tctx = tctx
        yield addon
        await addon.shutdown()


def basic(token: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"run:{token}".encode()).decode()


def make_flow(*, host: str = PUBLIC_IP, port: int = 80, scheme: str = "http", method: str = "GET",
              path: str = "/v1/x", headers: list[tuple[str, str]] | None = None, content: bytes = b"",
              token: str | None = "rt_good",  # noqa: S107 - a fake run token
              host_header: str | None = None, sni: str | None = None):
    if host_header is None:
        host_header = host if port in (80, 443) else f"{host}:{port}"
    hdrs = [("Host", host_header)]
    if token is not None:
        hdrs.append(("Proxy-Authorization", basic(token)))
    hdrs += headers or []
    if content:
        hdrs.append(("Content-Length", str(len(content))))
    headers_obj = tutils.http.Headers([(k.encode(), v.encode()) for k, v in hdrs])
    req = tutils.treq(host=host, port=port, scheme=scheme.encode(), method=method.encode(),
                      path=path.encode(), headers=headers_obj, content=content)
    flow = tflow.tflow(req=req)
    flow.client_conn.sni = sni
    return flow


# --- driving a flow through the addon, and reading what it did ---
async def run_request(gw, flow):
    gw.requestheaders(flow)
    await gw.request(flow)
    return flow


def answer(flow) -> dict:
    assert flow.response is not None, "expected the gateway to answer"
    return json.loads(flow.response.content)


def reported(cp) -> list[dict]:
    """Every outcome the gateway reported, in order (it sends them in batches to /outcomes)."""
    return [o for body in cp.bodies("/outcomes") for o in body["outcomes"]]


async def settle(gw):
    await asyncio.sleep(0)
    if gw.outcomes is not None:
        gw.outcomes.stop()  # reports the fake control plane refused would otherwise be retried for ever
    if gw.background:
        await asyncio.gather(*list(gw.background))
    if gw.outcomes is not None:
        gw.outcomes.resume()


def journaled(cp) -> list[dict]:
    """Every model call the gateway journaled, in order (POST /journal)."""
    return [e for body in cp.bodies("/journal") for e in body["entries"]]
