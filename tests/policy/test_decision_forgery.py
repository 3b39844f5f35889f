"""Code outside the policy package cannot make a Decision that the engine's consumers accept."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import UTC, datetime

import pytest

from controlplane.core.taint import DataClass
from controlplane.policy import decision, engine
from controlplane.policy.engine import (
    Decision,
    DenyReason,
    GrantRule,
    RequestFacts,
    RunState,
    Verdict,
    evaluate,
    is_authentic,
    require_authentic,
)

NOW = datetime(2026, 11, 30, tzinfo=UTC)
GRANT = GrantRule(slug="g", host="api.example.com")


def denied():
    run = RunState(1, 1, DataClass.PRIVATE, False)
    return evaluate(run, RequestFacts("GET", "https", "evil.net", 443, "/"), [GRANT], NOW)


def test_engine_decisions_are_authentic():
    d = denied()
    assert d.verdict == Verdict.DENY and is_authentic(d) and require_authentic(d) is d
    assert is_authentic(engine.deny(DenyReason.BAD_TOKEN, "bad token"))
    assert is_authentic(engine.allow_approved(GRANT, "approved"))


@pytest.mark.parametrize("args", [
    (), (Verdict.ALLOW, None, GRANT, "x", False), (object(), Verdict.ALLOW, None, GRANT, "x", False),
])
def test_direct_construction_fails(args):
    with pytest.raises(TypeError):
        Decision(*args)


def test_dataclasses_replace_fails():
    with pytest.raises(TypeError):
        dataclasses.replace(denied(), verdict=Verdict.ALLOW)


@pytest.mark.parametrize("fn", [copy.copy, copy.deepcopy, pickle.dumps])
def test_copy_and_pickle_fail(fn):
    with pytest.raises(TypeError):
        fn(denied())


def test_attributes_cannot_be_set_or_deleted():
    d = denied()
    with pytest.raises(AttributeError):
        d.verdict = Verdict.ALLOW
    with pytest.raises(AttributeError):
        d._verdict = Verdict.ALLOW
    with pytest.raises(AttributeError):
        del d._reason


def test_object_new_and_setattr_yield_an_unauthentic_decision():
    fake = object.__new__(Decision)
    for name, value in [("_verdict", Verdict.ALLOW), ("_reason", None), ("_grant", GRANT), ("_message", "ok"),
                        ("_tripwire", False)]:
        object.__setattr__(fake, name, value)
    assert fake.verdict == Verdict.ALLOW
    assert not is_authentic(fake)
    with pytest.raises(TypeError):
        require_authentic(fake)


def test_tampering_with_an_issued_decision_is_detected():
    d = denied()
    object.__setattr__(d, "_verdict", Verdict.ALLOW)
    assert not is_authentic(d)


def test_the_module_token_alone_does_not_mint_an_accepted_decision():
    forged = Decision(decision._TOKEN, Verdict.ALLOW, None, GRANT, "forged", False)
    assert not is_authentic(forged)


def test_subclassing_fails():
    with pytest.raises(TypeError):
        type("Sub", (Decision,), {})


@pytest.mark.parametrize("thing", [None, "allow", {"verdict": "allow"}, GRANT])
def test_other_objects_are_not_authentic(thing):
    assert not is_authentic(thing)
