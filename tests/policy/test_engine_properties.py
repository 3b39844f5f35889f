# ruff: noqa: E501 - strategies read best one per line
"""Property tests: nothing is allowed without a matching, enabled, unexpired, auto grant whose max_taint
covers the run; and spelling tricks never widen what a request matches."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.core.taint import DataClass
from controlplane.policy.engine import (
    GrantRule,
    McpCall,
    RequestFacts,
    RunState,
    Verdict,
    evaluate,
    is_authentic,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HOSTS = ["api.example.com", "example.com", "a.b.example.com", "other.net"]
GRANT_HOSTS = HOSTS + ["*.example.com", "*.b.example.com"]
SEGMENTS = ["v1", "chat", "admin", "x"]
PATTERNS = ["/v1/**", "/v1/*", "/v1/chat", "/admin/**", "/*/chat", "/**"]
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

grants_st = st.lists(st.builds(
    lambda i, host, mode, taint, expiry, enabled, worker, methods, paths, port, tools: GrantRule(
        slug=f"g{i}", host=host, mode=mode, max_taint=taint, expires_at=expiry, enabled=enabled,
        worker_id=worker, methods=methods, paths=paths, port=port, mcp_tools=tools),
    st.integers(0, 10**6), st.sampled_from(GRANT_HOSTS + ["api.example.com", "*.example.com"] * 2),
    st.sampled_from(["auto", "auto", "auto", "ask", "deny"]),
    st.sampled_from(list(DataClass)), st.sampled_from([None, None, NOW - timedelta(seconds=1), NOW + timedelta(hours=1)]),
    st.sampled_from([True, True, True, False]), st.sampled_from([None, None, 1, 2]),
    st.sampled_from([(), (), ("GET",), ("POST", "GET")]),
    st.one_of(st.just(()), st.lists(st.sampled_from(PATTERNS), max_size=2).map(tuple)),
    st.sampled_from([None, None, 443, 8443]), st.sampled_from([(), (), ("search",)]),
), max_size=6, unique_by=lambda g: g.slug)

canonical_st = st.fixed_dictionaries({
    "method": st.sampled_from(["GET", "POST", "DELETE"]),
    "host": st.sampled_from(HOSTS + ["api.example.com"] * 3),
    "port": st.sampled_from([443, 443, 443, 8443]),
    "segments": st.lists(st.sampled_from(SEGMENTS), max_size=3),
    "mcp": st.sampled_from([(), (), (), (), (), (), (McpCall("tools/call", "search"),), (McpCall("tools/call", "delete"),),
                            (McpCall("initialize", None),), (McpCall("tools/call", "search"), McpCall("tools/call", "x"))]),
})
run_st = st.builds(RunState, st.just(1), st.sampled_from([1, 2]), st.sampled_from(list(DataClass)), st.booleans())


def reference_matches(g: GrantRule, worker_id: int, c: dict) -> bool:
    """An independent, deliberately simple matcher over canonical request parts."""
    path = "/" + "/".join(c["segments"])
    if g.worker_id not in (None, worker_id) or c["port"] != (g.port or 443):
        return False
    if g.host.startswith("*."):
        if not c["host"].endswith(g.host[1:]):
            return False
    elif c["host"] != g.host:
        return False
    if g.methods and c["method"] not in g.methods:
        return False
    if g.mcp_tools and not (c["mcp"] and all(
            (m.method == "tools/call" and m.tool in g.mcp_tools) or (m.method == "initialize" and m.tool is None)
            for m in c["mcp"])):
        return False
    if g.paths:
        regexes = [re.escape(p[:-3]).replace(r"\*", "[^/]*") + "(/.*)?" if p.endswith("/**")
                   else re.escape(p).replace(r"\*", "[^/]*") for p in g.paths]
        regexes = ["(/.*)?" if r == "(/.*)?" and p == "/**" else r for r, p in zip(regexes, g.paths, strict=True)]
        if not any(re.fullmatch(r, path) for r in regexes):
            return False
    return True


def could_allow(grants, run, c) -> bool:
    live = [g for g in grants if g.enabled and reference_matches(g, run.worker_id, c)
            and (g.expires_at is None or g.expires_at > NOW)]
    if any(g.mode == "deny" for g in live):
        return False
    return any(g.mode == "auto" and g.max_taint >= run.taint for g in live)


@st.composite
def tricked(draw, c):
    """The same request spelled differently: case, trailing dot, escapes, dot segments, '//', query."""
    host = c["host"]
    host = "".join(ch.upper() if draw(st.booleans()) else ch for ch in host)
    if draw(st.booleans()):
        host += "."
    parts = []
    for seg in c["segments"]:
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from([".", "junk/..", "%2E", "zz/%2e%2e", ""])))
        parts.append("".join(f"%{ord(ch):02x}" if draw(st.booleans()) else ch for ch in seg))
    path = "/" + "/".join(parts)
    if draw(st.booleans()):
        path += "?q=/admin/../x"
    port = None if c["port"] == 443 and draw(st.booleans()) else c["port"]
    return RequestFacts(c["method"].lower() if draw(st.booleans()) else c["method"], "https", host, port, path,
                        c["mcp"])


@PROPS
@given(grants=grants_st, run=run_st, c=canonical_st, data=st.data())
def test_allow_needs_an_auto_grant_and_tricks_never_widen(grants, run, c, data):
    facts = data.draw(tricked(c))
    decision = evaluate(run, facts, grants, NOW)
    assert is_authentic(decision)
    if decision.verdict == Verdict.ALLOW:
        g = decision.grant
        assert g.enabled and g.mode == "auto" and g.max_taint >= run.taint
        assert g.expires_at is None or g.expires_at > NOW
        assert reference_matches(g, run.worker_id, c)
        assert could_allow(grants, run, c)
        canonical = RequestFacts(c["method"], "https", c["host"], c["port"], "/" + "/".join(c["segments"]), c["mcp"])
        plain = evaluate(run, canonical, grants, NOW)
        assert plain.verdict == Verdict.ALLOW and plain.grant == g


HOSTILE_HOSTS = ["user@api.example.com", "api.example.com:443", "api.example.com.other.net", "[::1]",
                 "api.example.com%00", "api\u3002example.com", "\uff41pi.example.com", "127.0.0.1",
                 "api.example.com..", "api.example.com\t", "[::ffff:127.0.0.1]"]
OPEN_GRANTS = [GrantRule(slug="api", host="api.example.com"), GrantRule(slug="wild", host="*.example.com"),
               GrantRule(slug="apex", host="example.com")]


def test_open_grants_allow_the_plain_host():
    run = RunState(1, 1, DataClass.PRIVATE, False)
    assert evaluate(run, RequestFacts("GET", "https", "api.example.com", 443, "/"), OPEN_GRANTS, NOW).verdict == "allow"


@PROPS
@given(run=run_st, host=st.sampled_from(HOSTILE_HOSTS), port=st.sampled_from([None, 443]),
       path=st.sampled_from(["/", "", "/v1/chat"]))
def test_hostile_spellings_of_a_granted_host_are_never_allowed(run, host, port, path):
    decision = evaluate(run, RequestFacts("GET", "https", host, port, path), OPEN_GRANTS, NOW)
    assert is_authentic(decision)
    assert decision.verdict != Verdict.ALLOW, host


@PROPS
@given(grants=grants_st, run=run_st, method=st.text(max_size=8), scheme=st.text(max_size=6),
       host=st.text(max_size=30), port=st.one_of(st.none(), st.integers(-5, 70000)), path=st.text(max_size=40))
def test_evaluate_never_raises_and_allows_only_what_a_grant_names(grants, run, method, scheme, host, port, path):
    decision = evaluate(run, RequestFacts(method, scheme, host, port, path), grants, NOW)
    assert is_authentic(decision)
    if decision.verdict == Verdict.ALLOW:
        g = decision.grant
        assert g.enabled and g.mode == "auto" and g.max_taint >= run.taint


@settings(max_examples=100, deadline=None)
@given(run=run_st, granted=st.ip_addresses(v=6), exploded=st.booleans(), upper=st.booleans(),
       bracket=st.booleans(), data=st.data())
def test_ipv6_spellings_match_only_the_same_address(run, granted, exploded, upper, bracket, data):
    asked = data.draw(st.one_of(st.just(granted), st.ip_addresses(v=6)))
    rule = GrantRule(slug="v6", host=f"[{granted.compressed}]", max_taint=DataClass.SECRET)
    text = asked.exploded if exploded else asked.compressed
    text = text.upper() if upper else text
    decision = evaluate(run, RequestFacts("GET", "https", f"[{text}]" if bracket else text, 443, "/"), [rule], NOW)
    assert (decision.verdict == Verdict.ALLOW) == (asked == granted)
