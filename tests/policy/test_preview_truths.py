"""The grant preview tells the truth (issue 27.3): examples of a grant with header conditions carry headers
that meet them (so the requests it allows show ✓), an IP-literal grant's "not matched" examples are the
neighbouring addresses rather than invented names like www.127.0.0.1, and a deny grant denies at any
taint. Each test fails on the preview before the change."""

from __future__ import annotations

import pytest

from controlplane.policy import conditions
from controlplane.policy.engine import GrantRule
from controlplane.policy.preview import describe, examples, missing_example_headers
from controlplane.policy.preview_requests import matching_value


def _rule(**over) -> GrantRule:
    return GrantRule(**{"slug": "g", "host": "api.example.com", "methods": ("POST",), "paths": ("/v1/send",),
                        **over})


def test_examples_of_a_conditioned_grant_carry_headers_that_meet_it():
    rule = _rule(header_conditions=(
        {"name": "content-type", "equals": "application/json"}, {"name": "x-tenant", "present": True},
        {"name": "accept", "matches": "application/(json|xml)"}, {"name": "x-override", "absent": True}))
    shown = dict(examples(rule))
    allowed = [url for url, ok in shown.items() if ok]
    assert allowed == ["POST https://api.example.com:443/v1/send with content-type: application/json; "
                       "x-tenant: x; accept: application/json"]
    assert shown["POST https://api.example.com:443/v1/send"] is False  # the same request without them
    assert missing_example_headers(rule) == []


def test_a_pattern_with_no_obvious_example_is_named_not_silently_failed():
    rule = _rule(header_conditions=({"name": "x-sig", "matches": r"\p{Greek}+"},))
    assert missing_example_headers(rule) == ["x-sig"]
    assert all(not ok for _url, ok in examples(rule))


@pytest.mark.parametrize("pattern", ["Bearer [A-Za-z0-9]{20,}", r"v\d+\.\d+", "(a|b)c?d*", "[^,]+", ".{3}"])
def test_pattern_examples_are_judged_by_the_condition_itself(pattern):
    condition = conditions.compile_condition({"name": "h", "matches": pattern})
    value = matching_value(condition)
    assert value is not None and condition.regex.fullmatch(value) is not None


@pytest.mark.parametrize("host,neighbours", [("127.0.0.1", ["127.0.0.2", "127.0.0.0"]),
                                             ("10.20.0.7", ["10.20.0.8", "10.20.0.6"]),
                                             ("[::1]", ["[::2]", "[::]"])])
def test_an_ip_literal_grant_shows_neighbouring_addresses_not_invented_hosts(host, neighbours):
    rule = GrantRule(slug="ip", host=host, port=9000, schemes=("http",), methods=("GET",))
    shown = dict(examples(rule))
    assert shown[f"GET http://{host}:9000/any/path"] is True
    for near in neighbours:
        assert shown[f"GET http://{near}:9000/any/path"] is False
    assert not any("www." in url or "evil.example" in url for url in shown)


def test_a_deny_grant_denies_at_any_taint():
    text = describe(GrantRule(slug="no", host="uploads.example.com", mode="deny"))
    assert text.startswith("Denies ") and "at any taint" in text and "taint is at most" not in text
    assert "taint is at most private" in describe(_rule())
