from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "controlplane.web"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from controlplane.web import signin  # noqa: F401  (connects the sign-in lockout's audit record)
