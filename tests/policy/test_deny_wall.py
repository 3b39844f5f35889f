# ruff: noqa: E501 - one case per line reads best as a table
"""A deny grant is a wall (docs/grants.md, Precedence): without a port it covers every port of its host,
without schemes every scheme (tunnels included), and a wildcard deny every subdomain at any depth. Named
cases: deny against allow across ports, schemes and wildcard depth."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.core.taint import DataClass
from controlplane.policy.engine import GrantRule, RequestFacts, RunState, evaluate

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN = RunState(run_id=1, worker_id=7, taint=DataClass.PRIVATE, untrusted=False)


def g(slug, host, **kw) -> GrantRule:
    return GrantRule(slug=slug, host=host, **kw)


def req(host="api.example.com", port=443, scheme="https", method="GET", path="/"):
    if scheme == "tunnel":
        method, path = "CONNECT", ""
    return RequestFacts(method, scheme, host, port, path)


WIDE_ALLOW = [g("wide", "*.example.com", port=8443, schemes=["http", "https"]),
              g("wide-443", "*.example.com", schemes=["http", "https"]),
              g("wide-80", "*.example.com", schemes=["http"]),
              g("tun", "*.example.com", port=8443, tunnel=True)]

CASES = [
    # name, grants, request, verdict, reason, chosen
    ("portless deny covers the default port", [g("d", "api.example.com", mode="deny"), *WIDE_ALLOW], req(), "deny", "denied_by_grant", "d"),
    ("portless deny covers another port", [g("d", "api.example.com", mode="deny"), *WIDE_ALLOW], req(port=8443), "deny", "denied_by_grant", "d"),
    ("portless deny covers http too", [g("d", "api.example.com", mode="deny"), *WIDE_ALLOW], req(port=80, scheme="http"), "deny", "denied_by_grant", "d"),
    ("portless deny covers a tunnel", [g("d", "api.example.com", mode="deny"), *WIDE_ALLOW], req(port=8443, scheme="tunnel"), "deny", "denied_by_grant", "d"),
    ("path deny covers a tunnel (the path is invisible)", [g("d", "api.example.com", mode="deny", paths=["/admin/**"]), *WIDE_ALLOW], req(port=8443, scheme="tunnel"), "deny", "denied_by_grant", "d"),
    ("path deny leaves other paths", [g("d", "api.example.com", mode="deny", paths=["/admin/**"]), *WIDE_ALLOW], req(path="/v1"), "allow", None, "wide-443"),
    ("deny with a port covers only that port", [g("d", "api.example.com", mode="deny", port=9000), *WIDE_ALLOW], req(port=8443), "allow", None, "wide"),
    ("deny with a port covers that port", [g("d", "api.example.com", mode="deny", port=8443), *WIDE_ALLOW], req(port=8443), "deny", "denied_by_grant", "d"),
    ("deny with schemes covers only those", [g("d", "api.example.com", mode="deny", schemes=["https"]), *WIDE_ALLOW], req(port=80, scheme="http"), "allow", None, "wide-443"),
    ("deny with schemes covers every port of them", [g("d", "api.example.com", mode="deny", schemes=["https"]), *WIDE_ALLOW], req(port=8443), "deny", "denied_by_grant", "d"),
    ("wildcard deny covers a subdomain on any port", [g("d", "*.api.example.com", mode="deny"), *WIDE_ALLOW], req(host="x.api.example.com", port=8443), "deny", "denied_by_grant", "d"),
    ("wildcard deny covers any depth", [g("d", "*.api.example.com", mode="deny"), *WIDE_ALLOW], req(host="a.b.c.api.example.com"), "deny", "denied_by_grant", "d"),
    ("wildcard deny does not cover its apex", [g("d", "*.api.example.com", mode="deny"), *WIDE_ALLOW], req(), "allow", None, "wide-443"),
    ("wildcard deny does not cover a sibling", [g("d", "*.api.example.com", mode="deny"), *WIDE_ALLOW], req(host="web.example.com", port=8443), "allow", None, "wide"),
    ("a more specific allow never beats a deny", [g("d", "*.example.com", mode="deny"), g("a", "api.example.com", port=8443, paths=["/v1/x"], methods=["GET"])], req(port=8443, path="/v1/x"), "deny", "denied_by_grant", "d"),
    ("a deny for another worker does not apply", [g("d", "api.example.com", mode="deny", worker_id=99), *WIDE_ALLOW], req(port=8443), "allow", None, "wide"),
    ("an allow without a port still needs its default port", [g("a", "api.example.com")], req(port=8443), "deny", "no_grant", None),
]


@pytest.mark.parametrize("name,grants,request_,verdict,reason,chosen", CASES, ids=[c[0] for c in CASES])
def test_deny_is_a_wall(name, grants, request_, verdict, reason, chosen):
    decision = evaluate(RUN, request_, grants, NOW)
    assert decision.verdict == verdict, decision.message
    assert (decision.reason or None) == reason
    assert (decision.grant.slug if decision.grant else None) == chosen
