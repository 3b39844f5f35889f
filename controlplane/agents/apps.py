from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _load_builtin_presets(sender, **kwargs) -> None:
    """Built-in presets follow their files (workers/presets/*/preset.toml) on every migrate. A bad file
    stops migrate with every problem named: a stack never starts on presets nobody checked."""
    if sender.name != "controlplane.agents":
        return
    from controlplane.agents.services import presets_sync_builtin

    presets_sync_builtin(via="migrate")


class AgentsConfig(AppConfig):
    name = "controlplane.agents"
    label = "agents"
    verbose_name = "Agents and presets"

    def ready(self) -> None:
        post_migrate.connect(_load_builtin_presets, dispatch_uid="roster-load-builtin-presets")
