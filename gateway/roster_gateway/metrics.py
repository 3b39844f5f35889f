"""The gateway's Prometheus metrics (docs/operations.md, Metrics), served at /metrics on the loopback
health endpoint. One registry for the process: the addon counts into it from its hooks, each count a
plain in-process increment (no I/O on the request path).

Label values are bounded by construction: a verdict is allow or deny, a reason one of the fixed deny
reasons (anything else, e.g. a reason a newer control plane invents, counts as "other"). Never a host,
path, token, grant or secret value: those would make the label set unbounded, and some are secret."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.process_collector import ProcessCollector

from roster_gateway.reasons import CONTROL_PLANE_STATUS, GATEWAY_STATUS

KNOWN_REASONS = frozenset(CONTROL_PLANE_STATUS) | frozenset(GATEWAY_STATUS)
ALLOWED = "granted"  # the reason label of an allow: a grant (directly, or once its approval was given)
OTHER = "other"
HOLD_RESULTS = ("approved", "refused", "expired", "failed")

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)

REQUESTS = Counter(
    "roster_gateway_requests", "Requests (and CONNECTs judged for a tunnel) answered by the gateway, by "
    "the final verdict and its reason; an allow is counted when the request is forwarded",
    ["verdict", "reason"], registry=REGISTRY)
DECIDE_SECONDS = Histogram(
    "roster_gateway_decide_seconds", "Round trip of one POST /decide to the control plane, as the gateway "
    "sees it (not the time a request is held for an approval)", registry=REGISTRY,
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))
HELD = Gauge("roster_gateway_held_requests", "Requests held right now, waiting for an approver",
             registry=REGISTRY)
HOLDS = Counter("roster_gateway_holds", "Holds for an approval that ended, by how they ended",
                ["result"], registry=REGISTRY)
SCRUBBED = Counter("roster_gateway_scrubbed_echoes", "Echoes of an injected secret replaced in responses "
                   "and websocket messages before the box saw them", registry=REGISTRY)
UPSTREAM_ERRORS = Counter("roster_gateway_upstream_errors", "Allowed requests whose upstream failed "
                          "(connection refused or reset, TLS failure, timeout)", registry=REGISTRY)
OUTCOME_BATCH = Histogram("roster_gateway_outcome_batch_size", "Outcome reports per POST /outcomes",
                          registry=REGISTRY, buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500))
OUTCOMES_LOST = Counter("roster_gateway_outcomes_unreported", "Outcome reports the control plane did not "
                        "take (unreachable or refusing the batch)", registry=REGISTRY)
REPLICA_FAILURES = Counter("roster_gateway_replica_failures", "Control-plane calls a decision API replica "
                           "failed (no connection, no answer in time, 5xx), each handed to the next replica",
                           registry=REGISTRY)

# Every series exists from the start (a rate over a new series works), and the request path increments a
# child looked up once here rather than resolving its labels per request.
_DENIED = {reason: REQUESTS.labels("deny", reason) for reason in sorted(KNOWN_REASONS | {OTHER})}
_ALLOWED = REQUESTS.labels("allow", ALLOWED)
for _result in HOLD_RESULTS:
    HOLDS.labels(_result)


def bounded_reason(reason: str | None) -> str:
    return reason if reason in KNOWN_REASONS else OTHER


def count_deny(reason: str | None) -> None:
    _DENIED[bounded_reason(reason)].inc()


def count_allow() -> None:
    _ALLOWED.inc()


def count_hold(verdict: str, reason: str | None) -> None:
    """How a hold ended: approved, refused, expired (unanswered), or failed (a policy error meanwhile)."""
    if verdict == "allow":
        HOLDS.labels("approved").inc()
    else:
        HOLDS.labels({"approval_refused": "refused", "approval_expired": "expired"}.get(reason or "",
                                                                                        "failed")).inc()


def count_scrubbed(count: int) -> None:
    if count > 0:
        SCRUBBED.inc(count)


def exposition() -> bytes:
    """The text exposition format (version 0.0.4) of everything above."""
    return generate_latest(REGISTRY)
