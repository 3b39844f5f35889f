import hashlib
import threading

import pytest
from django.db import connection

from controlplane.audit.models import AuditRecord
from controlplane.core.errors import ValidationFailed
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run
from controlplane.fleet.services import (
    RunStateError,
    run_create,
    run_raise_taint,
    run_resolve_token,
    run_set_status,
    worker_create,
)

pytestmark = pytest.mark.django_db


def test_worker_create_validates_name():
    with pytest.raises(ValidationFailed) as err:
        worker_create("Not A Slug!")
    assert "name" in err.value.errors


def test_worker_create_refuses_duplicate(worker):
    with pytest.raises(ValidationFailed):
        worker_create("alpha")


def test_run_token_is_single_random_and_only_hash_stored(worker):
    run, raw = run_create(worker)
    other, raw2 = run_create(worker)
    assert raw.startswith("rt_") and len(raw) == 3 + 43
    assert raw != raw2
    run.refresh_from_db()
    assert run.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in str(Run.objects.filter(pk=run.pk).values().first())
    assert not AuditRecord.objects.filter(body__contains=raw).exists()


def test_resolve_token_only_while_live(worker):
    run, raw = run_create(worker)
    assert run_resolve_token(raw).pk == run.pk
    run_set_status(run.pk, Run.Status.RUNNING)
    assert run_resolve_token(raw).pk == run.pk
    run_set_status(run.pk, Run.Status.SUCCEEDED, exit_code=0)
    assert run_resolve_token(raw) is None
    run.refresh_from_db()
    assert run.token_hash is None and run.ended_at is not None


@pytest.mark.parametrize("bad", ["", "rt_", "rt_nope", "x" * 10_000, "rt_" + "a" * 200])
def test_resolve_rejects_unknown_tokens(worker, bad):
    run_create(worker)
    assert run_resolve_token(bad) is None


def test_resolve_refuses_inactive_worker(worker):
    run, raw = run_create(worker)
    worker.active = False
    worker.save()
    assert run_resolve_token(raw) is None


def test_run_create_refuses_inactive_worker(worker):
    worker.active = False
    worker.save()
    with pytest.raises(RunStateError):
        run_create(worker)


def test_status_change_is_audited(worker):
    run, _ = run_create(worker)
    before = AuditRecord.objects.filter(kind="run_state").count()
    run_set_status(run.pk, Run.Status.RUNNING, reason="box started", container_id="c1")
    records = AuditRecord.objects.filter(kind="run_state").order_by("seq")
    assert records.count() == before + 1
    last = records.last()
    assert last.run_id_ref == run.pk and '"running"' in last.body and "box started" in last.body


def test_terminal_state_is_final(worker):
    run, _ = run_create(worker)
    run_set_status(run.pk, Run.Status.FAILED, reason="boom")
    count = AuditRecord.objects.count()
    for status in (Run.Status.RUNNING, Run.Status.SUCCEEDED, Run.Status.FAILED):
        with pytest.raises(RunStateError):
            run_set_status(run.pk, status)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and AuditRecord.objects.count() == count


def test_status_change_refuses_protected_fields(worker):
    run, _ = run_create(worker)
    with pytest.raises(ValidationFailed):
        run_set_status(run.pk, Run.Status.RUNNING, token_hash="x" * 64)
    with pytest.raises(ValidationFailed):
        run_set_status(run.pk, Run.Status.RUNNING, taint=DataClass.PUBLIC)
    with pytest.raises(ValidationFailed):
        run_set_status(run.pk, "exploded")
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_taint_never_lowers_and_untrusted_never_clears(worker):
    run, _ = run_create(worker)
    assert run.taint == DataClass.PRIVATE and not run.untrusted
    run = run_raise_taint(run.pk, DataClass.PUBLIC, untrusted=False)
    assert run.taint == DataClass.PRIVATE and not run.untrusted
    run = run_raise_taint(run.pk, DataClass.SECRET, untrusted=True)
    assert run.taint == DataClass.SECRET and run.untrusted
    run = run_raise_taint(run.pk, DataClass.PRIVATE, untrusted=False)
    assert run.taint == DataClass.SECRET and run.untrusted


@pytest.mark.django_db(transaction=True)
def test_concurrent_taint_raises_keep_the_maximum(worker):
    run, _ = run_create(worker)
    barrier = threading.Barrier(2)

    def raise_to(level):
        try:
            barrier.wait()
            run_raise_taint(run.pk, level, untrusted=False)
        finally:
            connection.close()

    threads = [threading.Thread(target=raise_to, args=(lvl,)) for lvl in (DataClass.SECRET, DataClass.PUBLIC)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.refresh_from_db()
    assert run.taint == DataClass.SECRET
