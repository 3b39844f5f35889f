"""controlplane.core.db.pipelined: on PostgreSQL with server-side binding (the decision API's process) a
transaction's statements go out in psycopg's pipeline, and on everything else the block changes nothing.
Either way the statements run in the order sent, a read sees the writes before it, and a write the
database refuses fails the block, so the transaction around it rolls back and nothing is committed.
Runs on SQLite here and on PostgreSQL with prepared statements (tests/integration/test_on_postgresql.py)."""

import pytest
from django.db import connection, transaction

from controlplane.core.db import pipelined
from controlplane.fleet.models import Worker

pytestmark = pytest.mark.django_db(transaction=True)


def _pipelining_expected() -> bool:
    return connection.vendor == "postgresql" and bool(
        connection.settings_dict.get("OPTIONS", {}).get("server_side_binding"))


def _in_pipeline() -> bool:
    raw = connection.connection
    return connection.vendor == "postgresql" and raw is not None and raw.pgconn.pipeline_status != 0


def test_pipeline_only_inside_a_transaction_on_the_decision_apis_settings():
    with transaction.atomic(), pipelined():
        assert _in_pipeline() is _pipelining_expected()
    with pipelined():  # no transaction: nothing to send together
        assert not _in_pipeline()
    assert not _in_pipeline()


def test_statements_run_in_order_and_a_read_sees_the_writes_before_it():
    table = Worker._meta.db_table
    with transaction.atomic(), pipelined():
        with connection.cursor() as cur:
            for i in range(5):
                cur.execute(f"INSERT INTO {table} (name, description, active, created_at, identity) "
                            "VALUES (%s, '', %s, %s, '')",
                            [f"piped-{i}", True, connection.ops.adapt_datetimefield_value(_now())])
            cur.execute(f"SELECT name FROM {table} WHERE name LIKE %s ORDER BY id", ["piped-%"])
            assert [row[0] for row in cur.fetchall()] == [f"piped-{i}" for i in range(5)]
    assert Worker.objects.filter(name__startswith="piped-").count() == 5


def test_a_refused_write_fails_the_block_and_nothing_is_committed():
    Worker.objects.create(name="taken")
    table = Worker._meta.db_table
    with pytest.raises(Exception) as refused:  # noqa: PT011 - the driver's own error, whichever it is
        with transaction.atomic(), pipelined():
            with connection.cursor() as cur:
                cur.execute(f"INSERT INTO {table} (name, description, active, created_at, identity) "
                            "VALUES (%s, '', %s, %s, '')",
                            ["first-in-block", True, connection.ops.adapt_datetimefield_value(_now())])
                cur.execute(f"INSERT INTO {table} (name, description, active, created_at, identity) "
                            "VALUES (%s, '', %s, %s, '')",
                            ["taken", True, connection.ops.adapt_datetimefield_value(_now())])
    assert "unique" in str(refused.value).lower() or "duplicate" in str(refused.value).lower()
    assert list(Worker.objects.values_list("name", flat=True)) == ["taken"]
    # the connection serves the next transaction as usual
    with transaction.atomic(), pipelined():
        Worker.objects.create(name="next")
    assert Worker.objects.filter(name="next").exists()


def _now():
    from django.utils import timezone

    return timezone.now()
