"""Login throttling: repeated failures lock out (username, address), audited, and the answer is the same
whether or not the user exists."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.audit.models import AuditRecord
from tests.web.conftest import PASSWORD

LOGIN = "/accounts/login/"


@pytest.fixture(autouse=True)
def _limit(settings):
    settings.AXES_FAILURE_LIMIT = 3


def _try(username: str, password: str, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(LOGIN, {"username": username, "password": password})


def _strip(html: str, username: str) -> str:
    return html.replace(username, "USER")


def test_lockout_after_failures_is_audited_and_reveals_nothing(approver, db):
    real, ghost = approver.username, "nobody-by-this-name"
    answers = {}
    for name in (real, ghost):
        codes = [_try(name, "wrong-password").status_code for _ in range(3)]
        assert codes[:2] == [200, 200]
        locked = _try(name, "wrong-password")
        assert locked.status_code == 429
        answers[name] = _strip(locked.content.decode(), name)
        assert "Too many failed sign-ins" in answers[name]
    # the same words and status for a user that exists and one that does not
    assert answers[real].split('<main')[1] == answers[ghost].split('<main')[1]
    # even the right password is refused while locked out
    assert _try(real, PASSWORD).status_code == 429
    records = AuditRecord.objects.filter(kind="login_lockout")
    # one record per lockout, however many attempts follow it while it holds
    assert sorted(name for r in records for name in (real, ghost) if f'"username":"{name}"' in r.body) \
        == sorted([real, ghost])
    assert records.count() == 2 and all('"address":"10.0.0.1"' in r.body for r in records)
    assert PASSWORD not in "".join(r.body for r in records)


def test_lockout_is_per_user_and_address(approver, db):
    for _ in range(4):
        _try(approver.username, "wrong-password", "10.0.0.1")
    assert _try(approver.username, PASSWORD, "10.0.0.1").status_code == 429
    ok = _try(approver.username, PASSWORD, "10.0.0.2")  # same user elsewhere
    assert ok.status_code == 302
