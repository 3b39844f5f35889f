# ruff: noqa: E501 - one case per line reads best as a table
"""Header conditions and max_body_size in the engine: named cases asserting verdict, reason and the grant
that decides (docs/grants.md, "Header and body-size conditions")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.core.taint import DataClass
from controlplane.policy.engine import GrantRule, RequestFacts, RunState, Verdict, evaluate

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN = RunState(run_id=1, worker_id=7, taint=DataClass.PRIVATE, untrusted=False)
JSON = {"name": "content-type", "equals": "application/json"}
JSONISH = {"name": "content-type", "matches": r"application/json(;\s*charset=utf-8)?"}
NO_OVERRIDE = {"name": "x-http-method-override", "absent": True}
HAS_TENANT = {"name": "x-tenant", "present": True}


def g(slug="g", host="api.example.com", **kw) -> GrantRule:
    return GrantRule(slug=slug, host=host, **kw)


def req(headers=(), body_size=0, method="POST", port=443, scheme="https", path="/v1/x"):
    return RequestFacts(method, scheme, "api.example.com", port, path, headers=tuple(headers), body_size=body_size)


CT_JSON = ("content-type", "application/json")

CASES = [
    # name, grants, request, verdict, reason, chosen grant
    ("equals met", [g(header_conditions=[JSON])], req([CT_JSON]), "allow", None, "g"),
    ("equals not met", [g(header_conditions=[JSON])], req([("content-type", "text/plain")]), "deny", "no_grant", None),
    ("equals is case-sensitive in the value", [g(header_conditions=[JSON])], req([("content-type", "Application/JSON")]), "deny", "no_grant", None),
    ("equals with the header missing", [g(header_conditions=[JSON])], req([]), "deny", "no_grant", None),
    ("header names are case-insensitive", [g(header_conditions=[JSON])], req([("Content-Type", "application/json")]), "allow", None, "g"),
    ("equals: a second, different line fails an allow", [g(header_conditions=[JSON])], req([CT_JSON, ("content-type", "text/plain")]), "deny", "no_grant", None),
    ("equals: the same value twice fails an allow (joined it is another value)", [g(header_conditions=[JSON])], req([CT_JSON, CT_JSON]), "deny", "no_grant", None),
    ("matches met", [g(header_conditions=[JSONISH])], req([("content-type", "application/json; charset=utf-8")]), "allow", None, "g"),
    ("matches is the whole value", [g(header_conditions=[JSONISH])], req([("content-type", "application/json+evil")]), "deny", "no_grant", None),
    ("matches: every line must match", [g(header_conditions=[JSONISH])], req([CT_JSON, ("Content-Type", "text/html")]), "deny", "no_grant", None),
    ("present met", [g(header_conditions=[HAS_TENANT])], req([("x-tenant", "a")]), "allow", None, "g"),
    ("present met by an empty value", [g(header_conditions=[HAS_TENANT])], req([("x-tenant", "")]), "allow", None, "g"),
    ("present not met", [g(header_conditions=[HAS_TENANT])], req([]), "deny", "no_grant", None),
    ("absent met", [g(header_conditions=[NO_OVERRIDE])], req([CT_JSON]), "allow", None, "g"),
    ("absent not met", [g(header_conditions=[NO_OVERRIDE])], req([("x-http-method-override", "DELETE")]), "deny", "no_grant", None),
    ("absent not met whatever the case", [g(header_conditions=[NO_OVERRIDE])], req([("X-HTTP-Method-Override", "DELETE")]), "deny", "no_grant", None),
    ("absent not met by a header sent twice in two cases", [g(header_conditions=[NO_OVERRIDE])], req([("x-http-method-override", "GET"), ("X-Http-Method-Override", "DELETE")]), "deny", "no_grant", None),
    ("absent not met by an empty value", [g(header_conditions=[NO_OVERRIDE])], req([("x-http-method-override", "")]), "deny", "no_grant", None),
    ("every condition must hold", [g(header_conditions=[JSON, NO_OVERRIDE])], req([CT_JSON, ("x-http-method-override", "PUT")]), "deny", "no_grant", None),
    ("a value not known fails an allow", [g(header_conditions=[JSON])], req([("content-type", None)]), "deny", "no_grant", None),
    ("a value that is not UTF-8 fails an allow's pattern", [g(header_conditions=[JSONISH])], req([("content-type", "application/json\udcff")]), "deny", "no_grant", None),
    ("a value that is not UTF-8 holds for a deny's pattern",
     [g("allow"), g("no-json", mode="deny", header_conditions=[{"name": "content-type", "matches": "text/.*"}])],
     req([("content-type", "text/\udcff")]), "deny", "denied_by_grant", "no-json"),
    # body size
    ("body at the limit", [g(max_body_size=1024)], req(body_size=1024), "allow", None, "g"),
    ("body one over the limit", [g(max_body_size=1024)], req(body_size=1025), "deny", "no_grant", None),
    ("limit 0: no body at all", [g(max_body_size=0)], req(body_size=0), "allow", None, "g"),
    ("limit 0 refuses one byte", [g(max_body_size=0)], req(body_size=1), "deny", "no_grant", None),
    ("body size not known is over any limit", [g(max_body_size=1024)], req(body_size=None), "deny", "no_grant", None),
    ("no limit: any body", [g()], req(body_size=10**9), "allow", None, "g"),
    ("over the limit falls to a broader ask", [g("small", max_body_size=10), g("big", mode="ask")], req(body_size=11), "ask", None, "big"),
    # deny vs allow with conditions
    ("deny with a condition denies the matching request",
     [g("allow"), g("no-override", mode="deny", header_conditions=[{"name": "x-http-method-override", "present": True}])],
     req([("x-http-method-override", "DELETE")]), "deny", "denied_by_grant", "no-override"),
    ("deny with a condition lets other requests through to the allow",
     [g("allow"), g("no-override", mode="deny", header_conditions=[{"name": "x-http-method-override", "present": True}])],
     req([CT_JSON]), "allow", None, "allow"),
    ("deny condition: any line matching denies",
     [g("allow"), g("no-html", mode="deny", header_conditions=[{"name": "accept", "matches": "text/html.*"}])],
     req([("accept", "application/json"), ("Accept", "text/html")]), "deny", "denied_by_grant", "no-html"),
    ("deny condition: a value not known holds",
     [g("allow"), g("no-html", mode="deny", header_conditions=[{"name": "accept", "equals": "text/html"}])],
     req([("accept", None)]), "deny", "denied_by_grant", "no-html"),
    ("deny condition: the joined value counts too",
     [g("allow"), g("no-pair", mode="deny", header_conditions=[{"name": "x-a", "equals": "1, 2"}])],
     req([("x-a", "1"), ("x-a", "2")]), "deny", "denied_by_grant", "no-pair"),
    ("a deny is never weakened by an allow's unmet condition",
     [g("allow", header_conditions=[JSON]), g("block", host="*.example.com", mode="deny")],
     req([("content-type", "text/plain")]), "deny", "denied_by_grant", "block"),
    ("a deny is never weakened by an allow's met condition",
     [g("allow", header_conditions=[JSON], paths=["/v1/x"], methods=["POST"]), g("block", host="*.example.com", mode="deny")],
     req([CT_JSON]), "deny", "denied_by_grant", "block"),
    ("a deny with a condition still covers every port",
     [g("allow", port=8443), g("no-override", mode="deny", header_conditions=[{"name": "x-http-method-override", "present": True}])],
     req([("x-http-method-override", "x")], port=8443), "deny", "denied_by_grant", "no-override"),
    ("a deny with a condition covers a tunnel (the tunnel hides headers)",
     [g("tun", tunnel=True, port=8443), g("no-override", mode="deny", header_conditions=[{"name": "x-http-method-override", "present": True}])],
     RequestFacts("CONNECT", "tunnel", "api.example.com", 8443, ""), "deny", "denied_by_grant", "no-override"),
    # specificity: a grant with conditions outranks the same grant without
    ("conditioned auto over a plain ask", [g("plain", mode="ask"), g("json", header_conditions=[JSON])], req([CT_JSON]), "allow", None, "json"),
    ("condition unmet: the plain ask decides", [g("plain", mode="ask"), g("json", header_conditions=[JSON])], req([]), "ask", None, "plain"),
    ("conditioned ask over a plain auto", [g("plain"), g("tenant", mode="ask", header_conditions=[HAS_TENANT])], req([("x-tenant", "t")]), "ask", None, "tenant"),
]


@pytest.mark.parametrize("name,grants,facts,verdict,reason,chosen", CASES, ids=[c[0] for c in CASES])
def test_case(name, grants, facts, verdict, reason, chosen):
    for grant in grants:
        assert not grant.broken, grant.broken
    decision = evaluate(RUN, facts, grants, NOW)
    assert decision.verdict.value == verdict, decision.message
    assert (decision.reason.value if decision.reason else None) == reason, decision.message
    assert (decision.grant.slug if decision.grant else None) == chosen


def test_a_near_miss_says_which_condition_and_never_quotes_the_request():
    decision = evaluate(RUN, req([("content-type", "text/secret-looking-value")]), [g("api", header_conditions=[JSON])], NOW)
    assert decision.verdict == Verdict.DENY and "grant 'api' would" in decision.message
    assert "header content-type equals 'application/json'" in decision.message
    assert "secret-looking" not in decision.message
    over = evaluate(RUN, req(body_size=2049), [g("api", max_body_size=2048)], NOW)
    assert "body of 2049 bytes is over its max_body_size of 2048 bytes" in over.message


@pytest.mark.parametrize("fields", [
    {"mode": "deny", "max_body_size": 10},                      # a deny covers every body size
    {"tunnel": True, "header_conditions": [JSON]},             # a tunnel hides headers
    {"tunnel": True, "max_body_size": 10},
    {"header_conditions": [{"name": "a", "matches": r"(a)\1"}]},  # not RE2: backreference
    {"header_conditions": [{"name": "a", "present": True, "absent": True}]},
    {"header_conditions": [{"name": "A", "present": True}]},    # stored names are lower case
    {"header_conditions": [{"name": "a", "present": True}, {"name": "a", "absent": True}]},
    {"max_body_size": -1},
    {"header_conditions": "content-type"},
], ids=repr)
def test_a_grant_written_around_the_validator_is_broken_and_denies_everything(fields):
    rule = g(**fields)
    assert rule.broken
    decision = evaluate(RUN, req([CT_JSON]), [g("other"), rule], NOW)
    assert decision.verdict == Verdict.DENY and decision.reason.value == "policy_error"


def test_a_pattern_cannot_stall_the_engine():
    import time
    rule = g(header_conditions=[{"name": "x-a", "matches": "(a+)+b"}])
    started = time.perf_counter()
    decision = evaluate(RUN, req([("x-a", "a" * 16000)]), [rule], NOW)
    assert decision.reason.value == "no_grant" and time.perf_counter() - started < 0.5


def test_grant_rules_stay_hashable_and_equal_by_value():
    a, b = g(header_conditions=[JSON]), g(header_conditions=[dict(JSON)])
    assert a == b and hash(a) == hash(b)
