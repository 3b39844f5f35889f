"""Django's flush, which on a *test* database may also empty the append-only tables (the test runner
flushes between transactional tests): it drops their triggers, flushes and puts them back, in one
transaction. Against any other database the triggers refuse it; no SQL a connection can run stands in
for this check (controlplane/audit/triggers.py)."""

from django.core.management.commands.flush import Command as DjangoFlush
from django.db import connections, transaction
from django.db.backends.base.creation import TEST_DATABASE_PREFIX

from controlplane.audit.triggers import triggers_lifted


def is_test_database(conn) -> bool:
    """True while the test runner has switched this connection to its test database."""
    name = str(conn.settings_dict["NAME"])
    test_name = (conn.settings_dict.get("TEST") or {}).get("NAME")
    return name == str(test_name) if test_name else name.startswith(TEST_DATABASE_PREFIX)


class Command(DjangoFlush):
    def handle(self, **options):
        conn = connections[options["database"]]
        if not is_test_database(conn):
            return super().handle(**options)
        with transaction.atomic(using=conn.alias), triggers_lifted(conn):
            return super().handle(**options)
