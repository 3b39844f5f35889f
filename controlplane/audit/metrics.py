"""How long appending one record to the audit chain takes (lock, head read, hash, insert; not the commit of
the caller's transaction): a histogram in the process's Prometheus registry, exported by the decision
API's process (controlplane.metrics), where the appends of every decision happen."""

from __future__ import annotations

from prometheus_client import Histogram

APPEND_SECONDS = Histogram(
    "roster_audit_append_seconds", "Time to append one audit record (waiting for the chain head included)",
    buckets=(0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))
