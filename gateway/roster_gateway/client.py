"""The gateway's only way to the control plane: keep-alive HTTP/1.1 (http11.Http11Pool), the service
token on every request, and a hard total deadline per call. Any failure is ControlPlaneDown (a deny)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Protocol

from roster_gateway.http11 import Http11Pool, HttpError
from roster_gateway.wire import ApprovalWait, WireDecision, WireError, parse_decision, parse_wait

log = logging.getLogger(__name__)

# Outcome fields a control plane takes only when its health answer names them (docs/wire.md GET /health,
# `outcome_fields`): outcomes are strict, so one an older control plane does not know would refuse the
# whole batch. Until a health answer names it, an outcome goes without it.
OPTIONAL_OUTCOME_FIELDS = frozenset({"response_sha256"})


class Transport(Protocol):
    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]: ...

    async def close(self) -> None: ...


class ControlPlaneDown(Exception):
    """Unreachable, erroring, too slow, or answering nonsense. The caller denies."""


class ControlPlaneClient:
    def __init__(self, base_url: str, service_token: str, *, decide_timeout: float,
                 outcome_timeout: float, decide_wait: float = 0, transport: Transport | None = None):
        self.decide_timeout = decide_timeout
        # How long the control plane may keep a /decide waiting for budget held by calls in flight
        # (docs/settings.md, ROSTER_BUDGET_WAIT_MS): /decide's deadline is the decide timeout after it.
        self.decide_wait = decide_wait
        self.outcome_timeout = outcome_timeout
        headers = {"Authorization": f"Bearer {service_token}", "Accept": "application/json"}
        self._transport: Transport = transport or Http11Pool(base_url + "/api/gateway", headers)
        self.outcome_fields: frozenset[str] = frozenset()  # the optional ones the control plane named

    async def close(self) -> None:
        await self._transport.close()

    async def _call(self, method: str, path: str, payload: dict | None, timeout: float) -> tuple[int, bytes]:
        body = json.dumps(payload, separators=(",", ":")).encode() if payload is not None else None
        try:
            async with asyncio.timeout(timeout):
                return await self._transport.request(method, path, body)
        except TimeoutError as exc:
            raise ControlPlaneDown(f"control plane did not answer {path} within {timeout:g}s") from exc
        except (HttpError, OSError) as exc:
            raise ControlPlaneDown(f"control plane unreachable ({exc})") from exc

    @staticmethod
    def _json(status: int, body: bytes, path: str) -> object:
        if status != 200:
            raise ControlPlaneDown(f"control plane answered {path} with HTTP {status}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ControlPlaneDown(f"control plane answered {path} with invalid JSON") from exc

    async def decide(self, facts: dict) -> WireDecision:
        status, body = await self._call("POST", "/decide", facts, self.decide_timeout + self.decide_wait)
        try:
            return parse_decision(self._json(status, body, "/decide"))
        except WireError as exc:
            raise ControlPlaneDown(f"control plane answer not understood: {exc}") from exc

    async def wait_approval(self, approval_id: str, timeout_seconds: int) -> ApprovalWait:
        path = f"/approvals/{approval_id}/wait"
        status, body = await self._call("POST", path, {"timeout_seconds": timeout_seconds},
                                        timeout_seconds + self.decide_timeout)
        try:
            return parse_wait(self._json(status, body, path))
        except WireError as exc:
            raise ControlPlaneDown(f"control plane answer not understood: {exc}") from exc

    async def abandon(self, approval_id: str) -> None:
        status, _ = await self._call("POST", f"/approvals/{approval_id}/abandon", {}, self.outcome_timeout)
        if status >= 300:
            log.warning("abandon of %s answered HTTP %s", approval_id, status)

    async def trace(self, decision_id: str, body: bytes) -> None:
        payload = {"decision_id": decision_id, "body_b64": base64.b64encode(body).decode()}
        status, _ = await self._call("POST", "/trace", payload, self.decide_timeout)
        if not 200 <= status < 300:
            raise ControlPlaneDown(f"trace not stored (HTTP {status})")

    async def outcomes(self, outcomes: list[dict]) -> list[str]:
        """Report a batch (docs/wire.md POST /outcomes); one result per outcome, in order."""
        unknown = OPTIONAL_OUTCOME_FIELDS - self.outcome_fields
        sent = [{k: v for k, v in o.items() if k not in unknown} for o in outcomes] if unknown else outcomes
        status, body = await self._call("POST", "/outcomes", {"outcomes": sent}, self.outcome_timeout)
        answer = self._json(status, body, "/outcomes")
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != len(outcomes) or not all(
                isinstance(r, str) for r in results):
            raise ControlPlaneDown("control plane answer to /outcomes not understood")
        return results

    async def journal(self, entries: list[dict]) -> list[str]:
        """Journaled model calls (docs/wire.md POST /journal); one result per entry, in order."""
        status, body = await self._call("POST", "/journal", {"entries": entries}, self.outcome_timeout)
        answer = self._json(status, body, "/journal")
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != len(entries) or not all(
                isinstance(r, str) for r in results):
            raise ControlPlaneDown("control plane answer to /journal not understood")
        return results

    async def sentinels(self) -> list[str]:
        """Every secret's sentinel (docs/wire.md GET /sentinels): placeholders, never values."""
        status, body = await self._call("GET", "/sentinels", None, self.decide_timeout)
        answer = self._json(status, body, "/sentinels")
        found = answer.get("sentinels") if isinstance(answer, dict) else None
        if not isinstance(found, list) or not all(isinstance(s, str) and s for s in found):
            raise ControlPlaneDown("control plane answer to /sentinels not understood")
        return found
    async def _proposal_call(self, path: str, payload: dict) -> tuple[int, dict]:
        status, body = await self._call("POST", path, payload, self.outcome_timeout)
        answer = self._json(status, body, path)
        if not (isinstance(answer, dict) and isinstance(answer.get("status"), int)
                and isinstance(answer.get("body"), dict)):
            raise ControlPlaneDown(f"control plane answer to {path} not understood")
        return answer["status"], answer["body"]

    async def propose(self, token: str, body: bytes, client: str) -> tuple[int, dict]:
        """A box's proposal (docs/wire.md POST /proposals): the box's status and JSON answer. `client`:
        the box connection's peer address, as for /decide (the token is accepted only from its box)."""
        return await self._proposal_call("/proposals", {"token": token, "client": client,
                                                        "body_b64": base64.b64encode(body).decode()})

    async def proposal_status(self, token: str, proposal_id: str, client: str) -> tuple[int, dict]:
        return await self._proposal_call(f"/proposals/{proposal_id}/status",
                                         {"token": token, "client": client})

    async def health(self, timeout: float) -> tuple[bool, object]:
        """Whether the control plane answers (docs/wire.md GET /health), and the limits its answer carries
        (None when it does not answer; roster_gateway.shared_limits judges what they say)."""
        try:
            status, body = await self._call("GET", "/health", None, timeout)
            answer = json.loads(body)
        except (ControlPlaneDown, ValueError):
            return False, None
        if status != 200 or not isinstance(answer, dict) or answer.get("ok") is not True:
            return False, None
        fields = answer.get("outcome_fields")
        self.outcome_fields = OPTIONAL_OUTCOME_FIELDS.intersection(
            f for f in fields if isinstance(f, str)) if isinstance(fields, list) else frozenset()
        return True, answer.get("limits")
