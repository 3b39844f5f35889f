"""One egress request as the gateway reports it, and the engine's RequestFacts built from it: the one
place request facts are built, for a fresh request and for an approved one judged again."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from controlplane.ledger.types import ModelCallFacts
from controlplane.policy import engine
from controlplane.vault.redact import url_for_record


def new_decision_id() -> str:
    return "dc_" + secrets.token_urlsafe(16)


def request_facts(*, method: str, scheme: str, host: str, port: int, path: str,
                  mcp: Iterable[Sequence[str | None]], sentinel_ids: frozenset[int],
                  headers: Iterable[Sequence[str | None]] = (), body_size: int | None = None,
                  ) -> engine.RequestFacts:
    """The facts the policy engine judges. `mcp` is (method, tool) pairs; `headers` (name, value) pairs
    as the gateway forwards them (a None value: not known); `body_size` None when not known."""
    return engine.RequestFacts(
        method=method, scheme=scheme, host=host, port=port, path=path,
        mcp=tuple(engine.McpCall(method=m, tool=t) for m, t in mcp), sentinel_secret_ids=sentinel_ids,
        headers=tuple((n, v) for n, v in headers), body_size=body_size,
    )


@dataclass(frozen=True)
class EgressRequest:
    """The gateway's request facts (validated by the API schema)."""

    token: str
    method: str
    scheme: str
    host: str
    port: int
    path: str
    headers: Sequence[tuple[str, str]]
    body_size: int
    body_sha256: str
    body_preview: str
    mcp: Sequence[tuple[str, str | None]]
    sentinels: Sequence[str] = ()  # found by the gateway anywhere in the request (docs/wire.md)
    model_call: ModelCallFacts | None = None  # a model call: its worst case is reserved in tokens and money
    client: str = ""  # the peer address the token came in from; accepted only from the run's box

    @property
    def exact_url(self) -> str:
        """What an approval covers (its digest); the port is always explicit. Never written down."""
        host = self.host.lower()
        if self.scheme == "tunnel":
            return f"tunnel://{host}:{self.port}"
        return f"{self.scheme}://{host}:{self.port}{self.path}"

    @cached_property
    def url(self) -> str:
        """The URL as audit records, approvals and run decisions name it: sentinels and credential query
        values masked (controlplane.vault.redact). If masking fails, the path is left out altogether."""
        try:
            return url_for_record(self.exact_url)
        except Exception:  # noqa: BLE001 - also named by the policy-error path; never fall back to raw
            return f"{self.scheme}://{self.host.lower()}:{self.port}/[not recorded]"

    def facts(self, sentinel_ids: frozenset[int]) -> engine.RequestFacts:
        return request_facts(method=self.method, scheme=self.scheme, host=self.host, port=self.port,
                             path=self.path, mcp=self.mcp, sentinel_ids=sentinel_ids, headers=self.headers,
                             body_size=self.body_size)
