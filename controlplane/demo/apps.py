from django.apps import AppConfig


class DemoConfig(AppConfig):
    """`make demo`: set-up, run and report on top of the run lifecycle; nothing else imports it."""

    name = "controlplane.demo"
    label = "demo"
    verbose_name = "make demo"
