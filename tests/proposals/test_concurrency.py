"""Concurrent proposals never overshoot a destination's daily limit or a cap, and the audit chain stays
one line (the submission counts, reserves and records under the chain's single-writer lock)."""

from __future__ import annotations

import pytest
from django.db.models import Count

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from controlplane.ledger.models import Cap, SpendLine
from controlplane.proposals.models import Proposal
from controlplane.proposals.services import proposal_submit
from tests.egress.fixtures import BOX_ADDRESS
from tests.ledger.hammer import concurrently

pytestmark = pytest.mark.django_db(transaction=True)
BODY = b'{"kind": "webhook", "destination": "hooks", "payload": {"n": 1}}'


def test_daily_limit_and_micro_cap_hold_under_concurrency(token, live_run, make_destination):
    make_destination("hooks", kind="webhook", url="http://127.0.0.1:9/in", method="POST", daily_limit=7,
                     cost_micro=100)
    Cap.objects.create(worker=live_run[0].worker, unit="micro", window="day", limit=500)
    answers = concurrently(lambda _i: proposal_submit(token, BODY, BOX_ADDRESS).status, range(24), threads=8)
    assert sorted(answers).count(201) == 5  # the micro cap (5 x 100) binds before the daily limit (7)
    assert answers.count(402) == 19
    assert Proposal.objects.count() == 5
    assert SpendLine.objects.filter(unit="micro").count() == 5
    forks = AuditRecord.objects.values("prev_hash").annotate(n=Count("id")).filter(n__gt=1).count()
    assert forks == 0 and verify_database().ok
