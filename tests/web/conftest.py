"""Users in each role and a held request to look at. Approvals are opened with the real service."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from controlplane.approvals.services import approval_open, request_snapshot
from controlplane.core.roles import ADMINS, APPROVERS, AUDITORS, ensure_roles
from controlplane.fleet.services import run_create

PASSWORD = "correct horse battery staple"
MARKUP_BODY = '{"note": "<b>bold</b><script>alert(1)</script><img src=x onerror=alert(2)>"}'


@pytest.fixture(autouse=True)
def _in_memory_channel_layer(settings):
    # View tests don't need Redis; the browser tests use the real Redis layer.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; not under test


def _user(name: str, group: str | None) -> User:
    ensure_roles()
    user = User.objects.create_user(name, password=PASSWORD)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def approver(db):
    return _user("alice-approver", APPROVERS)


@pytest.fixture
def approver2(db):
    return _user("bob-approver", APPROVERS)


@pytest.fixture
def auditor(db):
    return _user("carol-auditor", AUDITORS)


@pytest.fixture
def admin_user(db):
    return _user("dave-admin", ADMINS)


@pytest.fixture
def nobody(db):
    return _user("eve-nobody", None)


@pytest.fixture
def run(worker):
    run, _token = run_create(worker, command=["echo", "hi"])
    return run


def open_approval(run, *, url="https://api.example.com/v1/post?x=1", body=MARKUP_BODY, headers=None,
                  sentinels=frozenset(), grant_slug="example-post"):
    snapshot = request_snapshot(
        method="POST", url=url,
        headers=headers if headers is not None else [["content-type", "application/json"]],
        body_preview=body, body_sha256="ab" * 32, body_size=len(body), sentinels=sentinels,
    )
    return approval_open(run=run, grant_id=None, grant_slug=grant_slug, snapshot=snapshot)


@pytest.fixture
def approval(run):
    return open_approval(run)
