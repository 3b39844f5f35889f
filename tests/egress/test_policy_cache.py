"""The grants cache never outlives a change: database triggers bump the policy version on every write to
grants and secrets, whatever path made it, and every decision reads the version with the token."""

import pytest
from django.db import connection

from controlplane.egress import policy_cache
from controlplane.fleet.models import PolicyVersion
from controlplane.fleet.selectors import policy_version
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.egress.fixtures import SECRET_VALUE, decide_body

# Transactional: the cache is used only outside transactions, as in the server.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def counter_row():
    PolicyVersion.objects.get_or_create(pk=1)  # a flush by an earlier transactional test removes it


def test_the_cache_is_really_used(gateway, token, make_grant, django_assert_max_num_queries):
    make_grant()
    gateway.decide(decide_body(token))
    state = policy_cache._state
    assert state.version == policy_version() and state.rules
    gateway.decide(decide_body(token))
    assert policy_cache._state is state


def test_every_kind_of_write_bumps_the_version(make_grant):
    seen = [policy_version()]

    def bumped():
        seen.append(policy_version())
        return seen[-1] > seen[-2]

    grant = make_grant()
    assert bumped()
    Grant.objects.filter(pk=grant.pk).update(enabled=False)
    assert bumped()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE policy_grant SET host = 'x.example.com'")
    assert bumped()
    secret_set("tok", "value-1")
    assert bumped()
    secret_set("tok", "value-2")
    assert bumped()
    grant.delete()
    assert bumped()


def test_revocation_by_raw_sql_is_seen_by_the_next_decision(gateway, token, make_grant):
    make_grant()
    assert gateway.decide(decide_body(token))["verdict"] == "allow"
    assert gateway.decide(decide_body(token))["verdict"] == "allow"  # served from the cache
    with connection.cursor() as cursor:
        cursor.execute("UPDATE policy_grant SET enabled = %s", [False])
    assert gateway.decide(decide_body(token))["reason"] == "no_grant"


def test_new_grant_is_seen_immediately(gateway, token, make_grant):
    make_grant()
    gateway.decide(decide_body(token))
    make_grant(slug="deny-all-chat", mode="deny", paths=["/v1/**"])
    assert gateway.decide(decide_body(token))["reason"] == "denied_by_grant"


def test_secret_rotation_is_seen_immediately(gateway, token, secret, make_grant):
    make_grant(secret=secret, inject_header="authorization", inject_format="{secret}")
    assert gateway.decide(decide_body(token))["inject"][0]["value"] == SECRET_VALUE
    secret_set("openai", "rotated-value-123456", kind="openai")
    assert gateway.decide(decide_body(token))["inject"][0]["value"] == "rotated-value-123456"
