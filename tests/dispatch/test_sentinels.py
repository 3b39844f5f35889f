"""A box gets the sentinels of the secrets its worker's enabled grants name, never the values."""

from __future__ import annotations

from controlplane.dispatch.sentinels import secret_variable, sentinel_environment
from controlplane.fleet.services import worker_create
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set

REAL = "sk-real-value-that-must-never-enter-a-box-0123456789"


def _grant(slug, secret, worker=None, enabled=True):
    return Grant.objects.create(slug=slug, worker=worker, host="api.example.com", secret=secret,
                                inject_header="authorization", enabled=enabled)


def test_own_and_org_wide_secrets_as_sentinels(worker):
    mine = secret_set("model-key", REAL, kind="openai")
    org = secret_set("org-token", REAL + "-org")
    _grant("mine", mine, worker=worker)
    _grant("org", org)
    env = sentinel_environment(worker)
    assert env == {
        "ROSTER_SECRET_MODEL_KEY": mine.sentinel,
        "OPENAI_API_KEY": mine.sentinel,
        "ROSTER_SECRET_ORG_TOKEN": org.sentinel,
    }
    assert all(REAL not in value for value in env.values())


def test_other_workers_and_disabled_grants_give_nothing(worker):
    other = worker_create("someone-else")
    theirs = secret_set("their-key", REAL)
    off = secret_set("off-key", REAL + "-off")
    _grant("theirs", theirs, worker=other)
    _grant("off", off, worker=worker, enabled=False)
    assert sentinel_environment(worker) == {}


def test_variable_names_are_shell_safe():
    assert secret_variable("gh-token.v2") == "ROSTER_SECRET_GH_TOKEN_V2"
