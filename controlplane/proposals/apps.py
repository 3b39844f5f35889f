from django.apps import AppConfig


class ProposalsConfig(AppConfig):
    name = "controlplane.proposals"
    label = "proposals"
    verbose_name = "Proposals and destinations"
