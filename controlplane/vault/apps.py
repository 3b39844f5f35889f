from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class VaultConfig(AppConfig):
    name = "controlplane.vault"
    label = "vault"

    def ready(self) -> None:
        # Refuse to start with a key file that others can read or that holds no key (a missing file is
        # created, 0600, on first use).
        from controlplane.vault.keyfile import VaultKeyError, check_key_file

        try:
            check_key_file()
        except VaultKeyError as exc:
            raise ImproperlyConfigured(f"Roster vault: {exc}") from None
