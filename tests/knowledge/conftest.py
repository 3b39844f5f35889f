"""Fixtures for knowledge: runs of one worker with a checkout each, the proposals' eager executor, an
approver and an admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from controlplane.core.roles import ADMINS, ensure_roles
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create
from controlplane.knowledge.checkout import checkout_open, checkout_write
from tests.egress.fixtures import live_run, token  # noqa: F401 - fixtures
from tests.proposals.conftest import _eager, approver, gw  # noqa: F401 - fixtures

ANA = {"id": "@ana:example.org", "name": "Ana Lima", "role": "member"}


@pytest.fixture
def admin(db):
    ensure_roles()
    user = User.objects.create_user("ada", password="pw-ada-123456")
    user.groups.add(Group.objects.get(name=ADMINS))
    return User.objects.get(pk=user.pk)


@pytest.fixture
def checkout_of(worker, tmp_path):
    """A run of the worker with its checkout written under tmp_path: (run, directory)."""

    def make(*, writable: bool = True, participants=(), untrusted: bool = False):
        run, _ = run_create(worker, task="learn")
        Run.objects.filter(pk=run.pk).update(participants=list(participants), untrusted=untrusted)
        run.refresh_from_db()
        checkout_open(run, writable=writable)
        where = tmp_path / f"run-{run.pk}"
        checkout_write(run.pk, where)
        return run, where

    return make
