"""Many concurrent writers (threads and processes) never fork the chain: no two records share a prev,
seq stays contiguous and the whole chain verifies. Runs on PostgreSQL too
(tests/integration/test_on_postgresql.py)."""

import pytest
from django.db.models import Count

from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from tests.ledger import children
from tests.ledger.hammer import append, concurrently

pytestmark = pytest.mark.django_db(transaction=True)


def test_threads_and_processes_never_fork_the_chain():
    procs = [children.spawn("append", "--count", "60", "--threads", "6", "--prefix", f"proc{i}")
             for i in range(3)]
    concurrently(append, [f"thread-{i}" for i in range(200)], threads=16)
    for proc in procs:
        assert children.result(proc) == {"appended": 60}
    total = 200 + 3 * 60
    forks = AuditRecord.objects.values("prev_hash").annotate(n=Count("id")).filter(n__gt=1).count()
    assert forks == 0
    assert AuditRecord.objects.count() == total
    seqs = list(AuditRecord.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, total + 1))
    result = verify_database()
    assert result.ok and result.checked == total, result.message
