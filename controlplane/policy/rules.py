"""The policy engine's inputs as immutable values: the run's state, one request's facts and a grant's
snapshot (GrantRule), compiled once when the snapshot is made (controlplane.policy.matching,
.conditions). controlplane.policy.engine judges them and re-exports them as its API."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

from controlplane.core.taint import DataClass
from controlplane.policy import matching


class Mode(enum.StrEnum):
    AUTO = "auto"
    ASK = "ask"
    DENY = "deny"


@dataclass(frozen=True)
class RunState:
    run_id: int
    worker_id: int
    taint: DataClass
    untrusted: bool


@dataclass(frozen=True)
class McpCall:
    method: str
    tool: str | None


@dataclass(frozen=True)
class RequestFacts:
    method: str
    scheme: str
    host: str
    port: int | None
    path: str
    mcp: tuple[McpCall, ...] = ()
    sentinel_secret_ids: frozenset[int] = frozenset()
    # The box's request headers as the gateway forwards them, every line as (name, value); a value of
    # None is not known (masked in a stored approval). Injected credentials are never among them.
    headers: tuple[tuple[str, str | None], ...] = ()
    body_size: int | None = None  # bytes forwarded; None: not known (over any grant's max_body_size)


@dataclass(frozen=True)
class GrantRule:
    """An immutable snapshot of a Grant. Construction compiles the match fields; a grant that does not
    compile keeps the error in `broken`, and evaluating against it denies everything (broken config)."""

    slug: str
    host: str
    mode: Mode = Mode.AUTO
    id: int | None = None
    worker_id: int | None = None
    methods: tuple[str, ...] = ()
    schemes: tuple[str, ...] = ()
    port: int | None = None
    paths: tuple[str, ...] = ()
    mcp_tools: tuple[str, ...] = ()
    max_taint: DataClass = DataClass.PRIVATE
    result_class: DataClass = DataClass.PRIVATE
    untrusted: bool = True
    expires_at: datetime | None = None
    secret_id: int | None = None
    secret_name: str | None = None
    inject_header: str = ""
    inject_format: str = "{secret}"
    cost_per_call: int = 0
    tunnel: bool = False
    trace: bool = False
    journal: bool = True
    enabled: bool = True
    header_conditions: tuple = ()  # stored form, controlplane.policy.conditions
    max_body_size: int | None = None
    wire: str = ""  # the model wire format the grant's host speaks ("" = not a model API)
    compiled: matching.CompiledMatch | None = field(default=None, compare=False, repr=False)
    broken: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode(self.mode))
        object.__setattr__(self, "max_taint", DataClass(self.max_taint))
        object.__setattr__(self, "result_class", DataClass(self.result_class))
        for name in ("methods", "schemes", "paths", "mcp_tools"):
            object.__setattr__(self, name, tuple(getattr(self, name) or ()))
        # Hashable, frozen copies ((key, value) pairs per condition): a snapshot never changes under the
        # policy cache; anything else is left as it is, for the compiler to call broken.
        raw = self.header_conditions
        if isinstance(raw, list | tuple):
            raw = tuple(tuple(c.items()) if isinstance(c, dict) else c for c in raw)
        object.__setattr__(self, "header_conditions", raw)
        try:
            compiled = matching.compile_match(
                worker_id=self.worker_id, host=self.host, port=self.port, schemes=self.schemes,
                methods=self.methods, paths=self.paths, mcp_tools=self.mcp_tools, tunnel=self.tunnel,
                wall=self.mode == Mode.DENY, header_conditions=self.header_conditions,
                max_body_size=self.max_body_size,
            )
            object.__setattr__(self, "compiled", compiled)
            object.__setattr__(self, "broken", "")
        except (matching.PatternError, TypeError, ValueError) as exc:
            object.__setattr__(self, "compiled", None)
            object.__setattr__(self, "broken", f"grant {self.slug!r}: {exc}")

    @classmethod
    def from_model(cls, grant) -> GrantRule:
        secret = grant.secret if grant.secret_id else None
        return cls(
            id=grant.pk, slug=grant.slug, worker_id=grant.worker_id, methods=tuple(grant.methods or ()),
            schemes=tuple(grant.schemes or ()), host=grant.host, port=grant.port,
            paths=tuple(grant.paths or ()), mcp_tools=tuple(grant.mcp_tools or ()), mode=grant.mode,
            max_taint=grant.max_taint, result_class=grant.result_class, untrusted=grant.untrusted,
            expires_at=grant.expires_at, secret_id=grant.secret_id,
            secret_name=secret.name if secret is not None else None, inject_header=grant.inject_header,
            inject_format=grant.inject_format, cost_per_call=grant.cost_per_call, tunnel=grant.tunnel,
            trace=grant.trace, journal=getattr(grant, "journal", True), enabled=grant.enabled,
            header_conditions=tuple(grant.header_conditions or ()), max_body_size=grant.max_body_size,
            wire=getattr(grant, "wire", "") or "",
        )
