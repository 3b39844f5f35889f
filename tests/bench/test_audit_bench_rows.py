"""`make bench`'s audit table (bench/bench_audit.py) prints the checkpoint's signing time side by side with
the verify time (issue 24: "make bench gains ... checkpoint signing time")."""

from __future__ import annotations

from bench.bench_audit import _rows


def test_the_signing_time_is_printed_beside_the_verify_time():
    result = {"append_1": 1000.0, "append_8": 2000.0, "build_seconds": 1.0,
              "sequential": {"seconds": 0.8, "verified": 20000, "ok": True, "workers": 1},
              "parallel": {"seconds": 0.5, "verified": 20000, "ok": True, "workers": 2},
              "checkpoint": {"sign_us": 160.0, "whole_seconds": 1.2, "seq": 20000}}
    rows = dict(_rows(result, "SQLite"))
    assert rows["checkpoint signature, Ed25519 (SQLite)"] == "160 µs"
    assert rows["checkpoint signing vs verify (SQLite)"] == (
        "sign 0.16 ms vs verify 0.8 s (sign is 0.0200% of a sequential verify)")
