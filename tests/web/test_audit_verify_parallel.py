"""The web's Verify button verifies a long chain in worker processes and shows exactly what the plain
sequential walk finds. Transactional: the workers see only committed rows."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from controlplane.audit import verify_parallel
from controlplane.audit.models import AuditRecord
from controlplane.audit.services import audit_append
from controlplane.audit.verify import FIELDS, verify_rows
from controlplane.web.models import ChainCheck
from tests.audit import tamper
from tests.web.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def long_chain(settings, monkeypatch):
    settings.ROSTER_AUDIT_CHUNK_SIZE = 4
    settings.ROSTER_AUDIT_VERIFY_PARALLEL_MIN_RECORDS = 10
    settings.ROSTER_AUDIT_VERIFY_WORKERS = 2
    settings.ROSTER_WEB_VERIFY_COOLDOWN_SECONDS = 0
    for i in range(24):
        audit_append("decision", {"i": i}, worker="w", verdict="allow")
    used = []
    real = verify_parallel.verify_in_parallel
    monkeypatch.setattr(verify_parallel, "verify_in_parallel", lambda *args: used.append(1) or real(*args))
    tamper.drop_triggers()
    yield used
    tamper.restore_triggers()


def _verify_on_the_page(auditor) -> ChainCheck:
    client = Client()
    assert client.login(username=auditor.username, password=PASSWORD)
    assert client.post(reverse("web:audit-verify")).status_code == 302
    return ChainCheck.objects.order_by("-id").first()


def _reference():
    return verify_rows(AuditRecord.objects.order_by("seq").values_list(*FIELDS).iterator(chunk_size=4))


def test_verify_button_uses_the_workers(auditor, long_chain):
    check = _verify_on_the_page(auditor)
    # The page adds what the latest checkpoint says (here: none yet) after the chain's own verdict.
    assert check.ok and check.records_checked == 24 and check.message.startswith(_reference().message)
    assert long_chain == [1]


def test_verify_button_reports_the_first_break_at_a_seam(auditor, long_chain):
    # Ranges of four records (the fetch size is the smallest range): seq 13 opens one.
    tamper.raw("UPDATE audit_auditrecord SET hash = %s WHERE seq = 13", ["d" * 64])
    tamper.raw("DELETE FROM audit_auditrecord WHERE seq = 20")
    check = _verify_on_the_page(auditor)
    expected = _reference()
    assert not check.ok and expected.broken_seq == 13
    assert (check.records_checked, check.message) == (expected.checked, expected.message)
    assert long_chain == [1]
