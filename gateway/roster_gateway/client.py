"""The gateway's only way to the control plane: keep-alive HTTP/1.1 (http11.Http11Pool) to each decision
API replica (roster_gateway.replicas), the service token on every request, and a hard total deadline per
call, shared among the replicas: one that does not connect, does not answer within its share, or answers
5xx hands the call to the next. Only when none answers is it ControlPlaneDown (a deny)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Sequence

from roster_gateway import metrics
from roster_gateway.http11 import ConnectFailed, Http11Pool, HttpError
from roster_gateway.replicas import Replica, Replicas, Transport
from roster_gateway.wire import ApprovalWait, WireDecision, WireError, parse_decision, parse_wait

log = logging.getLogger(__name__)

# Outcome fields a control plane takes only when its health answer names them (docs/wire.md GET /health,
# `outcome_fields`): outcomes are strict, so one an older control plane does not know would refuse the
# whole batch. Until a health answer names it, an outcome goes without it.
OPTIONAL_OUTCOME_FIELDS = frozenset({"response_sha256"})
__all__ = ["ControlPlaneClient", "ControlPlaneDown", "Transport"]
# One encoder for every call: json.dumps with separators builds a new JSONEncoder each time.
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


class ControlPlaneDown(Exception):
    """Unreachable, erroring, too slow, or answering nonsense. The caller denies."""


class ControlPlaneClient:
    def __init__(self, base_url: str | Sequence[str], service_token: str, *, decide_timeout: float,
                 outcome_timeout: float, decide_wait: float = 0,
                 transport: Transport | Sequence[Transport] | None = None, backoff: float = 1.0):
        """`base_url`: the decision API, or its replicas; `transport` (tests): one per replica."""
        self.decide_timeout = decide_timeout
        # How long the control plane may keep a /decide waiting for budget held by calls in flight
        # (docs/settings.md, ROSTER_BUDGET_WAIT_MS): /decide's deadline is the decide timeout after it.
        self.decide_wait = decide_wait
        self.outcome_timeout = outcome_timeout
        headers = {"Authorization": f"Bearer {service_token}", "Accept": "application/json"}
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if transport is None:
            # With replicas, one that does not connect within the decide timeout leaves the call to another.
            connect = decide_timeout if len(urls) > 1 else None
            transports: list[Transport] = [Http11Pool(url + "/api/gateway", headers, connect_timeout=connect)
                                           for url in urls]
        else:
            transports = list(transport) if isinstance(transport, Sequence) else [transport]
            if len(urls) != len(transports):
                urls = [f"replica {i + 1}" for i in range(len(transports))]
        self._replicas = Replicas([Replica(u, t) for u, t in zip(urls, transports, strict=True)], backoff)
        self.outcome_fields: frozenset[str] = frozenset()  # the optional ones the control plane named

    @property
    def replicas(self) -> Replicas:
        return self._replicas

    async def close(self) -> None:
        await self._replicas.close()

    async def _call(self, method: str, path: str, payload: dict | None, timeout: float, *,
                    resend: bool = True) -> tuple[int, bytes]:
        """One request, to the first replica that answers within `timeout` in all. `resend=False` (a call
        the control plane does not deduplicate): a request a replica may have received (sent, then no
        answer) goes to no other; only one that never connected moves on."""
        body = _ENCODE(payload).encode() if payload is not None else None
        order = self._replicas.order()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Each replica still to be asked keeps a share of the deadline (at most the decide timeout, so a
        # /decide's budget wait stays with the replica asked first): one that hangs leaves the next its turn.
        share = min(timeout / len(order), self.decide_timeout) if len(order) > 1 else 0.0
        problem = f"control plane did not answer {path} within {timeout:g}s"
        for i, replica in enumerate(order):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            later = len(order) - 1 - i
            attempt = max(remaining - later * share, min(remaining, share))
            try:
                async with asyncio.timeout(attempt):
                    status, answer = await replica.transport.request(method, path, body)
            except TimeoutError:
                self._replicas.failed(replica)
                problem = f"control plane did not answer {path} within {timeout:g}s"
                self._log(replica, f"no answer to {path} within {attempt:g}s")
                if not resend:
                    break
                continue
            except (HttpError, OSError) as exc:
                self._replicas.failed(replica)
                problem = f"control plane unreachable ({exc})"
                self._log(replica, problem)
                if not resend and not isinstance(exc, ConnectFailed):
                    break
                continue
            if status >= 500:
                self._replicas.failed(replica)
                if resend and later:
                    problem = f"control plane answered {path} with HTTP {status}"
                    self._log(replica, problem)
                    continue
            else:
                self._replicas.answered(replica)
            return status, answer
        if len(self._replicas) > 1:
            log.warning("no decision API replica answered %s: %s", path, problem)
        raise ControlPlaneDown(problem)

    def _log(self, replica: Replica, problem: str) -> None:
        """A replica's failure, named in the log only (a deny's message, which the box reads, never
        names the control plane's addresses)."""
        if len(self._replicas) > 1:
            metrics.REPLICA_FAILURES.inc()
            log.warning("decision API replica %s failed (%s)", replica.url, problem)

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

    async def _proposal_call(self, path: str, payload: dict, *, resend: bool = True) -> tuple[int, dict]:
        # A proposal is not deduplicated: one a replica may have taken is never sent to another.
        status, body = await self._call("POST", path, payload, self.outcome_timeout, resend=resend)
        answer = self._json(status, body, path)
        if not (isinstance(answer, dict) and isinstance(answer.get("status"), int)
                and isinstance(answer.get("body"), dict)):
            raise ControlPlaneDown(f"control plane answer to {path} not understood")
        return answer["status"], answer["body"]

    async def propose(self, token: str, body: bytes, client: str) -> tuple[int, dict]:
        """A box's proposal (docs/wire.md POST /proposals): the box's status and JSON answer. `client`:
        the box connection's peer address, as for /decide (the token is accepted only from its box)."""
        return await self._proposal_call("/proposals", {"token": token, "client": client,
                                                        "body_b64": base64.b64encode(body).decode()},
                                         resend=False)

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
