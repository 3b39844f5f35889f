# ruff: noqa: E501 - strategies read best one per line
"""Property tests: a header condition or body-size limit can only make a request less allowed. Adding one
to an allow or ask grant never turns a refusal into an allow; a deny grant with conditions never allows
what the same grant set without that deny would refuse, nor more than without the conditions' narrowing
allows; names match whatever their case."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.core.taint import DataClass
from controlplane.policy.engine import GrantRule, RequestFacts, RunState, Verdict, evaluate

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN = RunState(run_id=1, worker_id=7, taint=DataClass.PRIVATE, untrusted=False)
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = ["content-type", "x-a", "accept"]
VALUES = ["application/json", "text/plain", "", "a, b", "1"]

condition_st = st.sampled_from(NAMES).flatmap(lambda name: st.one_of(
    st.just({"name": name, "present": True}), st.just({"name": name, "absent": True}),
    st.sampled_from(VALUES[:2] + ["1"]).map(lambda v: {"name": name, "equals": v}),
    st.sampled_from(["application/.*", "text/plain", "[0-9]+", ".*"]).map(lambda p: {"name": name, "matches": p}),
))
conditions_st = st.lists(condition_st, max_size=3, unique_by=lambda c: c["name"])
headers_st = st.lists(st.tuples(st.sampled_from(NAMES + ["Content-Type", "X-A", "ACCEPT", "x-b"]),
                                st.sampled_from(VALUES)), max_size=5)
limit_st = st.one_of(st.none(), st.integers(0, 100))
size_st = st.one_of(st.none(), st.integers(0, 120))


def facts(headers, size):
    return RequestFacts("POST", "https", "api.example.com", 443, "/v1/x", headers=tuple(headers), body_size=size)


def allowed(grants, request) -> bool:
    return evaluate(RUN, request, grants, NOW).verdict == Verdict.ALLOW


@PROPS
@given(conditions_st, limit_st, st.sampled_from(["auto", "ask"]), headers_st, size_st)
def test_conditions_on_an_allow_never_widen_it(conds, limit, mode, headers, size):
    plain = [GrantRule(slug="g", host="api.example.com", mode=mode), GrantRule(slug="other", host="*.example.com", mode="ask")]
    narrowed = [GrantRule(slug="g", host="api.example.com", mode=mode, header_conditions=conds, max_body_size=limit),
                plain[1]]
    request = facts(headers, size)
    if allowed(narrowed, request):
        assert allowed(plain, request)
    if evaluate(RUN, request, narrowed, NOW).verdict == Verdict.ASK:
        assert evaluate(RUN, request, plain, NOW).verdict in (Verdict.ASK, Verdict.ALLOW)


@PROPS
@given(conditions_st, headers_st, size_st)
def test_a_deny_with_conditions_never_allows_more_than_no_deny(conds, headers, size):
    allow = GrantRule(slug="a", host="api.example.com")
    deny = GrantRule(slug="d", host="*.example.com", mode="deny", header_conditions=conds)
    wall = GrantRule(slug="d", host="*.example.com", mode="deny")
    request = facts(headers, size)
    if allowed([allow, deny], request):
        assert allowed([allow], request)
    assert not allowed([allow, wall], request)  # the unconditioned wall never lets anything through
    if evaluate(RUN, request, [deny], NOW).reason.value == "denied_by_grant":
        assert not allowed([allow, deny], request)  # where the deny applies, no allow outranks it


@PROPS
@given(conditions_st, headers_st, size_st)
def test_header_names_match_whatever_their_case(conds, headers, size):
    grants = [GrantRule(slug="g", host="api.example.com", header_conditions=conds)]
    lower = [(n.lower(), v) for n, v in headers]
    upper = [(n.upper(), v) for n, v in headers]
    assert allowed(grants, facts(lower, size)) == allowed(grants, facts(upper, size)) == allowed(grants, facts(headers, size))
