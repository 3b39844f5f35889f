from django.apps import AppConfig


class RelayConfig(AppConfig):
    name = "controlplane.relay"
    label = "relay"

    def ready(self) -> None:
        # Proposals must not import the layers above it, and dispatch imports no proposals
        # (docs/architecture.md): the top layer adds the follow-up kind to the executors registry.
        from controlplane.proposals.executors import register_executor
        from controlplane.relay.followups import follow_up

        register_executor("follow_up", follow_up)
