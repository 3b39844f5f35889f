"""The gateway's only way to the control plane: one keep-alive httpx client, service token in every
request, a hard total deadline per call (httpx timeouts are per phase, so we bound the whole call)."""

from __future__ import annotations

import asyncio
import base64
import logging

import httpx

from roster_gateway.wire import ApprovalWait, Decision, WireError, parse_decision, parse_wait

log = logging.getLogger(__name__)


class ControlPlaneDown(Exception):
    """Unreachable, erroring, too slow, or answering nonsense. The caller denies."""


class ControlPlaneClient:
    def __init__(self, base_url: str, service_token: str, *, decide_timeout: float,
                 outcome_timeout: float, transport: httpx.AsyncBaseTransport | None = None):
        self.decide_timeout = decide_timeout
        self.outcome_timeout = outcome_timeout
        self._http = httpx.AsyncClient(
            base_url=base_url + "/api/gateway",
            headers={"Authorization": f"Bearer {service_token}"},
            timeout=httpx.Timeout(max(decide_timeout, outcome_timeout)),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64, keepalive_expiry=60),
            transport=transport,
            trust_env=False,  # never route the control plane through an environment proxy
            follow_redirects=False,
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def _post(self, path: str, payload: dict, timeout: float) -> httpx.Response:
        try:
            async with asyncio.timeout(timeout):
                return await self._http.post(path, json=payload, timeout=timeout)
        except TimeoutError as exc:
            raise ControlPlaneDown(f"control plane did not answer {path} within {timeout:g}s") from exc
        except (httpx.HTTPError, OSError) as exc:
            raise ControlPlaneDown(f"control plane unreachable ({type(exc).__name__})") from exc

    @staticmethod
    def _json(resp: httpx.Response, path: str) -> object:
        if resp.status_code != 200:
            raise ControlPlaneDown(f"control plane answered {path} with HTTP {resp.status_code}")
        try:
            return resp.json()
        except ValueError as exc:
            raise ControlPlaneDown(f"control plane answered {path} with invalid JSON") from exc

    async def decide(self, facts: dict) -> Decision:
        resp = await self._post("/decide", facts, self.decide_timeout)
        try:
            return parse_decision(self._json(resp, "/decide"))
        except WireError as exc:
            raise ControlPlaneDown(f"control plane answer not understood: {exc}") from exc

    async def wait_approval(self, approval_id: str, timeout_seconds: int) -> ApprovalWait:
        path = f"/approvals/{approval_id}/wait"
        resp = await self._post(path, {"timeout_seconds": timeout_seconds},
                                timeout_seconds + self.decide_timeout)
        try:
            return parse_wait(self._json(resp, path))
        except WireError as exc:
            raise ControlPlaneDown(f"control plane answer not understood: {exc}") from exc

    async def abandon(self, approval_id: str) -> None:
        resp = await self._post(f"/approvals/{approval_id}/abandon", {}, self.outcome_timeout)
        if resp.status_code >= 300:
            log.warning("abandon of %s answered HTTP %s", approval_id, resp.status_code)

    async def trace(self, decision_id: str, body: bytes) -> None:
        payload = {"decision_id": decision_id, "body_b64": base64.b64encode(body).decode()}
        resp = await self._post("/trace", payload, self.decide_timeout)
        if not 200 <= resp.status_code < 300:
            raise ControlPlaneDown(f"trace not stored (HTTP {resp.status_code})")

    async def outcome(self, decision_id: str, status: int, request_bytes: int, response_bytes: int,
                      error: str = "") -> None:
        payload = {"decision_id": decision_id, "status": status, "request_bytes": request_bytes,
                   "response_bytes": response_bytes, "error": error}
        resp = await self._post("/outcome", payload, self.outcome_timeout)
        if resp.status_code != 200:
            log.warning("outcome of %s answered HTTP %s", decision_id, resp.status_code)

    async def healthy(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                resp = await self._http.get("/health", timeout=timeout)
            return resp.status_code == 200 and resp.json().get("ok") is True
        except (TimeoutError, httpx.HTTPError, ValueError, AttributeError):
            return False
