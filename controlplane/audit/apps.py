from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _on_connect(sender, connection, **kwargs):
    from controlplane.audit.triggers import register_sqlite_functions

    register_sqlite_functions(connection)


class AuditConfig(AppConfig):
    name = "controlplane.audit"
    label = "audit"

    def ready(self):
        connection_created.connect(_on_connect, dispatch_uid="roster-audit-sqlite-functions")
