from django.apps import AppConfig


class ProposalsConfig(AppConfig):
    name = "controlplane.proposals"
    label = "proposals"
    verbose_name = "Proposals and destinations"

    def ready(self) -> None:
        # Every process knows the executor's task by name (services.record starts it after a commit).
        from controlplane.proposals import tasks  # noqa: F401
