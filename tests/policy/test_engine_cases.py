# ruff: noqa: E501 - one case per line reads best as a table
"""Named cases: each asserts the verdict and the reason the engine gives (docs/grants.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controlplane.core.taint import DataClass
from controlplane.policy.engine import (
    DenyReason,
    GrantRule,
    McpCall,
    RequestFacts,
    RunState,
    Verdict,
    evaluate,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PAST = NOW - timedelta(minutes=1)
FUTURE = NOW + timedelta(days=1)
RUN = RunState(run_id=1, worker_id=7, taint=DataClass.PRIVATE, untrusted=False)
SECRET_RUN = RunState(run_id=2, worker_id=7, taint=DataClass.SECRET, untrusted=True)


def g(slug="g", host="api.example.com", **kw) -> GrantRule:
    return GrantRule(slug=slug, host=host, **kw)


def req(method="GET", scheme="https", host="api.example.com", port=443, path="/", mcp=(), sentinels=()):
    return RequestFacts(method, scheme, host, port, path, tuple(mcp), frozenset(sentinels))


CASES = [
    # name, grants, run, request, verdict, reason, chosen slug
    ("no grants at all", [], RUN, req(), "deny", "no_grant", None),
    ("exact host auto", [g()], RUN, req(), "allow", None, "g"),
    ("other host", [g()], RUN, req(host="example.com"), "deny", "no_grant", None),
    ("suffix lookalike host", [g()], RUN, req(host="api.example.com.evil.net"), "deny", "no_grant", None),
    ("disabled grant ignored", [g(enabled=False)], RUN, req(), "deny", "no_grant", None),
    ("disabled deny does not block", [g("a"), g("b", mode="deny", enabled=False)], RUN, req(), "allow", None, "a"),
    ("expired grant", [g(expires_at=PAST)], RUN, req(), "deny", "grant_expired", "g"),
    ("expiry exactly now is expired", [g(expires_at=NOW)], RUN, req(), "deny", "grant_expired", "g"),
    ("unexpired grant", [g(expires_at=FUTURE)], RUN, req(), "allow", None, "g"),
    ("expired specific grant shadows general",
     [g("gen", host="*.example.com"), g("spec", expires_at=PAST)], RUN, req(), "deny", "grant_expired", "spec"),
    ("taint above max_taint", [g(max_taint=DataClass.PRIVATE)], SECRET_RUN, req(), "deny", "taint_too_high", "g"),
    ("taint at max_taint", [g(max_taint=DataClass.SECRET)], SECRET_RUN, req(), "allow", None, "g"),
    ("public max_taint refuses a private run", [g(max_taint=DataClass.PUBLIC)], RUN, req(),
     "deny", "taint_too_high", "g"),
    ("mode deny", [g(mode="deny")], RUN, req(), "deny", "denied_by_grant", "g"),
    ("mode ask", [g(mode="ask")], RUN, req(), "ask", None, "g"),
    ("ask under high taint is still refused", [g(mode="ask")], SECRET_RUN, req(), "deny", "taint_too_high", "g"),
    ("deny beats a more specific allow",
     [g("allow", paths=["/v1/chat"], methods=["GET"]), g("block", host="*.example.com", mode="deny")],
     RUN, req(path="/v1/chat"), "deny", "denied_by_grant", "block"),
    ("expired deny does not block a general allow",
     [g("allow", host="*.example.com"), g("block", mode="deny", expires_at=PAST)], RUN, req(),
     "deny", "grant_expired", "block"),
    ("most specific: exact host over wildcard",
     [g("wild", host="*.example.com", mode="ask"), g("exact")], RUN, req(), "allow", None, "exact"),
    ("most specific: longer path",
     [g("short", paths=["/v1/**"], mode="ask"), g("long", paths=["/v1/chat/**"])], RUN, req(path="/v1/chat/x"),
     "allow", None, "long"),
    ("most specific: methods listed",
     [g("any"), g("post", methods=["POST"], mode="ask")], RUN, req(method="POST"), "ask", None, "post"),
    ("most specific: worker over all-workers",
     [g("all", mode="ask"), g("mine", worker_id=7)], RUN, req(), "allow", None, "mine"),
    ("tie goes to ask", [g("a"), g("b", mode="ask")], RUN, req(), "ask", None, "b"),
    ("tie goes to ask whatever the order", [g("b", mode="ask"), g("a")], RUN, req(), "ask", None, "b"),
    ("worker-specific grant of another worker", [g(worker_id=8)], RUN, req(), "deny", "no_grant", None),
    ("method not listed", [g(methods=["GET"])], RUN, req(method="DELETE"), "deny", "no_grant", None),
    ("method case folded", [g(methods=["POST"])], RUN, req(method="post"), "allow", None, "g"),
    ("http refused by https-only default", [g()], RUN, req(scheme="http", port=80), "deny", "no_grant", None),
    ("http allowed when listed", [g(schemes=["http"])], RUN, req(scheme="http", port=80), "allow", None, "g"),
    ("non-default port needs explicit grant port", [g()], RUN, req(port=8443), "deny", "no_grant", None),
    ("explicit port", [g(port=8443)], RUN, req(port=8443), "allow", None, "g"),
    ("explicit port refuses default", [g(port=8443)], RUN, req(port=443), "deny", "no_grant", None),
    ("wildcard matches subdomain", [g(host="*.example.com")], RUN, req(host="a.b.example.com"), "allow", None, "g"),
    ("wildcard does not match apex", [g(host="*.example.com")], RUN, req(host="example.com"), "deny", "no_grant",
     None),
    ("path outside pattern", [g(paths=["/v1/*"])], RUN, req(path="/v2/x"), "deny", "no_grant", None),
    ("single star stays in one segment", [g(paths=["/v1/*"])], RUN, req(path="/v1/a/b"), "deny", "no_grant", None),
    ("dot segments resolved before matching", [g(paths=["/v1/**"])], RUN, req(path="/v1/../admin"),
     "deny", "no_grant", None),
    ("encoded dot segments resolved", [g(paths=["/v1/**"])], RUN, req(path="/v1/%2E%2e/admin"),
     "deny", "no_grant", None),
    ("encoded slash rejected", [g(paths=["/v1/**"])], RUN, req(path="/v1/a%2Fb"), "deny", "no_grant", None),
    ("tomcat ..; rejected", [g(paths=["/v1/**"])], RUN, req(path="/v1/..;/admin"), "deny", "no_grant", None),
    ("query does not count", [g(paths=["/v1/chat"])], RUN, req(path="/v1/chat?next=/admin"), "allow", None, "g"),
    ("userinfo in host rejected", [g()], RUN, req(host="user@api.example.com"), "deny", "no_grant", None),
    ("port in host rejected", [g()], RUN, req(host="api.example.com:443"), "deny", "no_grant", None),
    ("unknown scheme", [g()], RUN, req(scheme="ftp", port=21), "deny", "no_grant", None),
    ("tunnel grant matches CONNECT", [g(tunnel=True)], RUN, req(method="CONNECT", scheme="tunnel"),
     "allow", None, "g"),
    ("tunnel grant does not match intercepted https", [g(tunnel=True)], RUN, req(), "deny", "no_grant", None),
    ("intercept grant does not match a tunnel", [g()], RUN, req(method="CONNECT", scheme="tunnel"),
     "deny", "no_grant", None),
    ("mcp tool listed", [g(mcp_tools=["search"])], RUN, req(method="POST", mcp=[McpCall("tools/call", "search")]),
     "allow", None, "g"),
    ("mcp tool not listed", [g(mcp_tools=["search"])], RUN,
     req(method="POST", mcp=[McpCall("tools/call", "search"), McpCall("tools/call", "delete")]),
     "deny", "no_grant", None),
    ("mcp grant needs mcp traffic", [g(mcp_tools=["search"])], RUN, req(method="POST"), "deny", "no_grant", None),
    ("mcp session set-up under a tools grant", [g(mcp_tools=["search"])], RUN,
     req(method="POST", mcp=[McpCall("initialize", None)]), "allow", None, "g"),
    ("mcp tools listed is more specific", [g("any", mode="ask"), g("tools", mcp_tools=["search"])], RUN,
     req(method="POST", mcp=[McpCall("tools/call", "search")]), "allow", None, "tools"),
    ("sentinel of the named secret", [g(secret_id=5)], RUN, req(sentinels=[5]), "allow", None, "g"),
    ("sentinel of another secret", [g(secret_id=5)], RUN, req(sentinels=[6]), "deny", "tripwire", "g"),
    ("sentinel under a grant naming no secret", [g()], RUN, req(sentinels=[5]), "deny", "tripwire", "g"),
    ("sentinel toward an unmatched host", [g(secret_id=5)], RUN, req(host="evil.net", sentinels=[5]),
     "deny", "tripwire", None),
    ("ipv6 literal, other spelling", [g(host="[2001:db8::1]")], RUN, req(host="[2001:DB8:0:0::1]"), "allow", None, "g"),
    ("ipv6 literal, unbracketed", [g(host="[2001:db8::1]")], RUN, req(host="2001:db8::1"), "allow", None, "g"),
    ("ipv6 literal with port glued on", [g(host="[2001:db8::1]")], RUN, req(host="[2001:db8::1]:443"), "deny", "no_grant", None),
    ("ipv4-mapped ipv6 is not the ipv4 host", [g(host="127.0.0.1")], RUN, req(host="[::ffff:127.0.0.1]"), "deny", "no_grant", None),
    ("short ipv4 form rejected", [g(host="127.0.0.1")], RUN, req(host="127.1"), "deny", "no_grant", None),
    ("upper case and trailing dot", [g()], RUN, req(host="API.EXAMPLE.COM."), "allow", None, "g"),
    ("two trailing dots rejected", [g()], RUN, req(host="api.example.com.."), "deny", "no_grant", None),
    ("explicit default port equals absent", [g()], RUN, req(port=None), "allow", None, "g"),
    ("broken grant denies everything", [g(), g("bad", host="bad host")], RUN, req(), "deny", "policy_error", None),
]


@pytest.mark.parametrize(("name", "grants", "run", "facts", "verdict", "reason", "slug"), CASES,
                         ids=[c[0] for c in CASES])
def test_case(name, grants, run, facts, verdict, reason, slug):
    d = evaluate(run, facts, grants, NOW)
    assert d.verdict == Verdict(verdict), d.message
    assert d.reason == (DenyReason(reason) if reason else None), d.message
    assert (d.grant.slug if d.grant else None) == slug


@pytest.mark.parametrize("sentinels", [[6], [5, 6]])
def test_foreign_sentinel_is_a_tripwire(sentinels):
    d = evaluate(RUN, req(sentinels=sentinels), [g(secret_id=5)], NOW)
    assert d.tripwire and d.reason == DenyReason.TRIPWIRE


def test_ordinary_denies_are_not_tripwires():
    assert not evaluate(RUN, req(host="evil.net"), [g()], NOW).tripwire
    assert not evaluate(RUN, req(sentinels=[5]), [g(secret_id=5)], NOW).tripwire


@pytest.mark.parametrize("bad", [
    ("run", None), ("facts", None), ("grants", [object()]), ("grants", None), ("now", datetime(2026, 1, 1)),
    ("facts", RequestFacts(None, "https", "api.example.com", 443, "/")),
    ("facts", RequestFacts("GET", "https", "api.example.com", "443", "/")),
])
def test_any_exception_is_policy_error(bad):
    args = {"run": RUN, "facts": req(), "grants": [g()], "now": NOW}
    args[bad[0]] = bad[1]
    d = evaluate(**args)
    assert (d.verdict, d.reason) in {(Verdict.DENY, DenyReason.POLICY_ERROR), (Verdict.DENY, DenyReason.NO_GRANT)}
    assert d.verdict == Verdict.DENY


def test_wrong_types_are_policy_error_specifically():
    assert evaluate(None, req(), [g()], NOW).reason == DenyReason.POLICY_ERROR
    assert evaluate(RUN, req(), None, NOW).reason == DenyReason.POLICY_ERROR
    assert evaluate(RUN, req(), [g()], datetime(2026, 1, 1)).reason == DenyReason.POLICY_ERROR


def test_grant_from_model_round_trip(db):
    from controlplane.fleet.models import Worker
    from controlplane.policy.models import Grant

    w = Worker.objects.create(name="w1")
    grant = Grant.objects.create(slug="m", host="api.example.com", worker=w, methods=["POST"],
                                 paths=["/v1/**"], mode="ask", max_taint=DataClass.SECRET, expires_at=FUTURE)
    rule = GrantRule.from_model(grant)
    assert (rule.slug, rule.worker_id, rule.methods, rule.paths, rule.mode, rule.max_taint) == (
        "m", w.pk, ("POST",), ("/v1/**",), "ask", DataClass.SECRET)
    run = RunState(1, w.pk, DataClass.SECRET, False)
    assert evaluate(run, req(method="POST", path="/v1/x"), [rule], NOW).verdict == Verdict.ASK


@pytest.mark.parametrize(("taint", "untrusted", "result_class", "grant_untrusted", "expected"), [
    (DataClass.PRIVATE, False, DataClass.SECRET, False, (DataClass.SECRET, False)),
    (DataClass.SECRET, False, DataClass.PUBLIC, False, (DataClass.SECRET, False)),
    (DataClass.PRIVATE, False, DataClass.PUBLIC, True, (DataClass.PRIVATE, True)),
    (DataClass.PRIVATE, True, DataClass.PRIVATE, False, (DataClass.PRIVATE, True)),
])
def test_taint_only_rises_and_untrusted_never_clears(taint, untrusted, result_class, grant_untrusted, expected):
    from controlplane.policy.engine import taint_after

    run = RunState(1, 7, taint, untrusted)
    assert taint_after(run, g(result_class=result_class, untrusted=grant_untrusted)) == expected
