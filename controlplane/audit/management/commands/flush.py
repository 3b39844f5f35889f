"""Django's flush, which on a *test* database may also empty the append-only tables (the test runner
flushes between transactional tests). Against any other database the triggers still refuse it."""

from django.core.management.commands.flush import Command as DjangoFlush
from django.db import connections

from controlplane.audit.triggers import allow_purge


class Command(DjangoFlush):
    def handle(self, **options):
        conn = connections[options["database"]]
        if conn.settings_dict["NAME"] != conn.creation._get_test_db_name():
            return super().handle(**options)
        with allow_purge():
            return super().handle(**options)
