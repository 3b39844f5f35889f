from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    name = "controlplane.core"
    label = "core"

    def ready(self) -> None:
        from controlplane.core.roles import ensure_roles

        post_migrate.connect(ensure_roles, dispatch_uid="roster-ensure-roles")
