"""The one reader of the control plane's settings from the environment (controlplane.settings; every name
it reads is in the table docs/settings.md, which `make lint` checks against the code).

A setting that is unset takes its default. A setting that is set must be well formed: a bad number, a
flag other than 0 or 1, a value out of its range, or an empty value where the default is not empty stops
the process with ImproperlyConfigured naming the setting and what it accepts, rather than running with a
guess. Flags are exactly `1` (on) or `0` (off): `true`, `yes`, or an empty value are errors, so a
setting is never silently off because of its spelling."""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_SHOWN_CHARS = 40  # a bad value is quoted in the error up to this length


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= _SHOWN_CHARS else raw[:_SHOWN_CHARS] + "…")


class EnvReader:
    """Typed reads of ROSTER_* (and the few framework) variables from one environment mapping."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ

    def _raw(self, name: str, default_is_empty: bool = False) -> str | None:
        raw = self._environ.get(name)
        if raw is None:
            return None
        if raw == "" and not default_is_empty:
            raise ImproperlyConfigured(f"{name} is set but empty: unset it to use its default")
        return raw

    def _bounded(self, name: str, value, minimum, maximum):
        if minimum is not None and value < minimum:
            raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
        if maximum is not None and value > maximum:
            raise ImproperlyConfigured(f"{name} must be at most {maximum}, not {value}")
        return value

    def int(self, name: str, default: builtins.int, *, minimum: builtins.int | None = None,
            maximum: builtins.int | None = None) -> builtins.int:
        raw = self._raw(name)
        if raw is None:
            return default
        try:
            value = builtins.int(raw, 10)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be a whole number, not {_shown(raw)}") from None
        return self._bounded(name, value, minimum, maximum)

    def float(self, name: str, default: builtins.float, *, minimum: builtins.float | None = None,
              maximum: builtins.float | None = None) -> builtins.float:
        raw = self._raw(name)
        if raw is None:
            return builtins.float(default)
        try:
            value = builtins.float(raw)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be a number, not {_shown(raw)}") from None
        if value != value or value in (builtins.float("inf"), builtins.float("-inf")):
            raise ImproperlyConfigured(f"{name} must be a finite number, not {_shown(raw)}")
        return self._bounded(name, value, minimum, maximum)

    def bool(self, name: str, default: builtins.bool) -> builtins.bool:
        raw = self._environ.get(name)
        if raw is None:
            return default
        if raw not in ("0", "1"):
            raise ImproperlyConfigured(f"{name} must be 0 or 1, not {_shown(raw)}")
        return raw == "1"

    def str(self, name: str, default: builtins.str, *, choices: Iterable[builtins.str] | None = None
            ) -> builtins.str:
        raw = self._raw(name, default_is_empty=default == "")
        value = default if raw is None else raw
        if choices is not None and value not in (allowed := tuple(choices)):
            raise ImproperlyConfigured(f"{name} must be one of {', '.join(allowed)}, not {_shown(value)}")
        return value

    def path(self, name: str, default: Path | builtins.str) -> Path:
        raw = self._raw(name)
        return Path(default if raw is None else raw)

    def list(self, name: str, default: Iterable[builtins.str] = ()) -> tuple[builtins.str, ...]:
        """Comma-separated; blanks around items and empty items are dropped."""
        default = tuple(default)
        raw = self._raw(name, default_is_empty=not default)
        if raw is None:
            return default
        return tuple(item.strip() for item in raw.split(",") if item.strip())


env = EnvReader()
