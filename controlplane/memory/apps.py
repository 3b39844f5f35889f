from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "controlplane.memory"
    label = "memory"
    verbose_name = "Memory: the worker's scoped notes"

    def ready(self) -> None:
        # Proposals must not import the layers above it (docs/architecture.md): memory adds its own kind
        # to the executors registry, as the relay adds follow-ups.
        from controlplane.memory.applying import memory_note
        from controlplane.proposals.executors import register_executor

        register_executor("memory_note", memory_note)
