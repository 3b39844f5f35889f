from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "controlplane.web"
    label = "web"

    def ready(self) -> None:
        from controlplane.web import login_throttle  # noqa: F401 - connects the lockout audit receiver
