# ruff: noqa: E501 - one case per line reads best as a table
"""A model host is not a tripwire for its own key (docs/grants.md, "Sentinels"): a sentinel sent to a host
that a grant of that same secret names (on its port), on another path or method, is `no_grant` with nothing injected
and the secret named; a sentinel toward a host (or port) no grant of its secret names stays a `tripwire`."""

from __future__ import annotations

import pytest

from controlplane.policy.engine import DenyReason, Verdict, evaluate
from tests.policy.test_engine_cases import NOW, RUN, g, req

ANTHROPIC = "api.anthropic.com"
KEY, OTHER = 5, 6


def model(slug="claude", **kw):
    """The model grant: POST /v1/messages on the provider's host with secret 5 injected."""
    return g(slug, host=ANTHROPIC, methods=["POST"], paths=["/v1/messages"], secret_id=KEY,
             secret_name="anthropic-key", inject_header="x-api-key", wire="anthropic-messages", **kw)


CASES = [
    # name, grants, request, verdict, reason, tripwire, chosen slug
    ("the model call itself", [model()], req("POST", host=ANTHROPIC, path="/v1/messages", sentinels=[KEY]), "allow", None, False, "claude"),
    ("own key to another path of its host", [model()], req("POST", host=ANTHROPIC, path="/api/event_logging/v2/batch", sentinels=[KEY]), "deny", "no_grant", False, None),
    ("own key with another method", [model()], req("GET", host=ANTHROPIC, path="/v1/messages", sentinels=[KEY]), "deny", "no_grant", False, None),
    ("own key on another port of its host", [model()], req("POST", host=ANTHROPIC, port=8443, path="/x", sentinels=[KEY]), "deny", "tripwire", True, None),
    ("own key over http to its https host", [model()], req("POST", scheme="http", host=ANTHROPIC, port=80, path="/x", sentinels=[KEY]), "deny", "tripwire", True, None),
    ("own key to the port its grant names", [model(port=8443)], req("POST", host=ANTHROPIC, port=8443, path="/x", sentinels=[KEY]), "deny", "no_grant", False, None),
    ("own key to the default port of a grant naming another", [model(port=8443)], req("POST", host=ANTHROPIC, path="/x", sentinels=[KEY]), "deny", "tripwire", True, None),
    ("own key to the http port of a grant for both schemes", [model(schemes=["http", "https"])], req("POST", scheme="http", host=ANTHROPIC, port=80, path="/x", sentinels=[KEY]), "deny", "no_grant", False, None),
    ("own key to a path another grant allows without it", [model(), g("anth-api", host=ANTHROPIC, paths=["/api/**"])],
     req("POST", host=ANTHROPIC, path="/api/claude_cli/bootstrap", sentinels=[KEY]), "deny", "no_grant", False, None),
    ("own key under a wildcard grant of the secret", [g("wild", host="*.anthropic.com", paths=["/v1/messages"], methods=["POST"], secret_id=KEY, secret_name="k", inject_header="x-api-key")],
     req("POST", host="statsig.anthropic.com", path="/v1/rgstr", sentinels=[KEY]), "deny", "no_grant", False, None),
    ("own key to another host", [model()], req("POST", host="evil.example.net", path="/v1/messages", sentinels=[KEY]), "deny", "tripwire", True, None),
    ("own key to a sibling host the grant does not name", [model()], req("POST", host="statsig.anthropic.com", path="/", sentinels=[KEY]), "deny", "tripwire", True, None),
    ("own key to a lookalike host", [model()], req("POST", host="api.anthropic.com.evil.net", path="/v1/messages", sentinels=[KEY]), "deny", "tripwire", True, None),
    ("another secret's sentinel to the model host", [model()], req("POST", host=ANTHROPIC, path="/v1/messages", sentinels=[KEY, OTHER]), "deny", "tripwire", True, "claude"),
    ("another secret's sentinel, its grant elsewhere", [model(), g("gh", host="api.github.com", secret_id=OTHER, inject_header="authorization")],
     req("POST", host=ANTHROPIC, path="/x", sentinels=[OTHER]), "deny", "tripwire", True, None),
    ("both secrets at home on one host", [model(), g("other", host=ANTHROPIC, paths=["/v2/**"], secret_id=OTHER, secret_name="second", inject_header="authorization")],
     req("POST", host=ANTHROPIC, path="/api/x", sentinels=[KEY, OTHER]), "deny", "no_grant", False, None),
    ("one at home, one not", [model()], req("POST", host=ANTHROPIC, path="/api/x", sentinels=[KEY, OTHER]), "deny", "tripwire", True, None),
    ("a disabled grant is no home", [model(enabled=False)], req("POST", host=ANTHROPIC, path="/api/x", sentinels=[KEY]), "deny", "tripwire", True, None),
    ("another worker's grant is no home", [model(worker_id=8)], req("POST", host=ANTHROPIC, path="/api/x", sentinels=[KEY]), "deny", "tripwire", True, None),
    ("an expired grant still names its host", [model(expires_at=NOW)], req("POST", host=ANTHROPIC, path="/api/x", sentinels=[KEY]), "deny", "no_grant", False, None),
    ("a deny grant of the secret names its host", [model(mode="deny")], req("POST", host=ANTHROPIC, path="/api/x", sentinels=[KEY]), "deny", "no_grant", False, None),
    ("no sentinel: an ordinary no_grant", [model()], req("POST", host=ANTHROPIC, path="/api/x"), "deny", "no_grant", False, None),
]


@pytest.mark.parametrize(("name", "grants", "facts", "verdict", "reason", "tripwire", "slug"), CASES,
                         ids=[c[0] for c in CASES])
def test_case(name, grants, facts, verdict, reason, tripwire, slug):
    d = evaluate(RUN, facts, grants, NOW)
    assert d.verdict == Verdict(verdict), d.message
    assert d.reason == (DenyReason(reason) if reason else None), d.message
    assert d.tripwire is tripwire, d.message
    assert (d.grant.slug if d.grant else None) == slug


def test_a_sentinel_at_home_is_named_and_never_injected():
    d = evaluate(RUN, req("POST", host=ANTHROPIC, path="/api/event_logging/v2/batch", sentinels=[KEY]), [model()], NOW)
    assert d.reason == DenyReason.NO_GRANT and d.grant is None  # no grant: nothing can be injected
    assert "'anthropic-key'" in d.message and "nothing injected" in d.message and "'claude'" in d.message


def test_at_home_behind_an_allowing_grant_names_both():
    grants = [model(), g("anth-api", host=ANTHROPIC, paths=["/api/**"])]
    d = evaluate(RUN, req("POST", host=ANTHROPIC, path="/api/x", sentinels=[KEY]), grants, NOW)
    assert d.reason == DenyReason.NO_GRANT and "'anth-api'" in d.message and "'anthropic-key'" in d.message


@pytest.mark.parametrize(("grants", "facts", "wire"), [
    ([model()], req("POST", host=ANTHROPIC, path="/api/x", sentinels=[KEY]), "anthropic-messages"),
    ([model()], req("GET", host=ANTHROPIC, path="/v1/models"), "anthropic-messages"),
    ([model()], req("POST", host=ANTHROPIC, path="/v1/messages", sentinels=[KEY]), "anthropic-messages"),
    ([model()], req("POST", host="evil.example.net", sentinels=[KEY]), ""),
    ([model(), g("second", host=ANTHROPIC, paths=["/v2"], wire="openai-chat")], req("GET", host=ANTHROPIC, path="/x"), ""),
    ([model(worker_id=8)], req("GET", host=ANTHROPIC, path="/x"), ""),
])
def test_a_decision_carries_the_wire_its_host_speaks(grants, facts, wire):
    assert evaluate(RUN, facts, grants, NOW).wire == wire
