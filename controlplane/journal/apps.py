from django.apps import AppConfig


class JournalConfig(AppConfig):
    name = "controlplane.journal"
    label = "journal"
    verbose_name = "Journal: every model call's request and response, and the run's journal built from them"
