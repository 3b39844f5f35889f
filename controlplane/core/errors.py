class RosterError(Exception):
    """A failure that carries a message safe to show to a person (never a secret value)."""


class ValidationFailed(RosterError):
    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{field}: {msg}" for field, msg in errors.items()))
