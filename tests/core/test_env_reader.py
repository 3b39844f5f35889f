"""The one reader of settings from the environment (controlplane.core.env): unset is the default, set must
be well formed, and a bad value stops the process with an error naming the setting and what it accepts."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane.core.env import EnvReader
from tests.support import procs


def read(**environ) -> EnvReader:
    return EnvReader(environ)


@pytest.mark.parametrize("kind, default", [("int", 5), ("float", 0.5), ("bool", True), ("str", "x"),
                                           ("path", Path("/d")), ("list", ("a", "b"))])
def test_unset_is_the_default(kind, default):
    assert getattr(read(), kind)("ROSTER_X", default) == default


@pytest.mark.parametrize("raw, value", [("7", 7), ("-3", -3), ("1_000", 1000), (" 8 ", 8)])
def test_whole_numbers(raw, value):
    assert read(ROSTER_X=raw).int("ROSTER_X", 1) == value


@pytest.mark.parametrize("raw", ["7.5", "seven", "0x10", "", "1e3"])
def test_a_bad_whole_number_is_refused(raw):
    with pytest.raises(ImproperlyConfigured, match="^ROSTER_X ") as caught:
        read(ROSTER_X=raw).int("ROSTER_X", 1)
    assert "empty" in str(caught.value) if raw == "" else "must be a whole number" in str(caught.value)


@pytest.mark.parametrize("raw, value", [("0.25", 0.25), ("3", 3.0), ("1e-3", 0.001)])
def test_numbers(raw, value):
    assert read(ROSTER_X=raw).float("ROSTER_X", 1.0) == value


@pytest.mark.parametrize("raw", ["fast", "nan", "inf", "-inf", ""])
def test_a_bad_number_is_refused(raw):
    with pytest.raises(ImproperlyConfigured, match="^ROSTER_X "):
        read(ROSTER_X=raw).float("ROSTER_X", 1.0)


def test_ranges_are_checked_with_the_setting_named():
    with pytest.raises(ImproperlyConfigured, match="ROSTER_X must be at least 1, not 0"):
        read(ROSTER_X="0").int("ROSTER_X", 5, minimum=1)
    with pytest.raises(ImproperlyConfigured, match="ROSTER_PORT must be at most 65535, not 70000"):
        read(ROSTER_PORT="70000").int("ROSTER_PORT", 80, maximum=65535)
    with pytest.raises(ImproperlyConfigured, match="ROSTER_X must be at least 0, not -0.5"):
        read(ROSTER_X="-0.5").float("ROSTER_X", 1.0, minimum=0)
    assert read(ROSTER_X="1").int("ROSTER_X", 5, minimum=1) == 1


@pytest.mark.parametrize("raw, value", [("1", True), ("0", False)])
def test_flags_are_exactly_1_or_0(raw, value):
    assert read(ROSTER_X=raw).bool("ROSTER_X", not value) is value


@pytest.mark.parametrize("raw", ["true", "yes", "on", "True", "", " 1", "2", "false", "no"])
def test_any_other_flag_value_is_refused_never_read_as_off(raw):
    with pytest.raises(ImproperlyConfigured, match=f"^ROSTER_X must be 0 or 1, not {raw!r}$"):
        read(ROSTER_X=raw).bool("ROSTER_X", False)


def test_strings_and_choices():
    assert read(ROSTER_X="abc").str("ROSTER_X", "d") == "abc"
    assert read(ROSTER_X="").str("ROSTER_X", "") == ""  # empty is a value where the default is empty
    with pytest.raises(ImproperlyConfigured, match="ROSTER_X is set but empty"):
        read(ROSTER_X="").str("ROSTER_X", "d")
    with pytest.raises(ImproperlyConfigured, match="ROSTER_LEVEL must be one of INFO, ERROR, not 'LOUD'"):
        read(ROSTER_LEVEL="LOUD").str("ROSTER_LEVEL", "INFO", choices=("INFO", "ERROR"))


def test_paths():
    assert read(ROSTER_X="/srv/x").path("ROSTER_X", "/d") == Path("/srv/x")
    with pytest.raises(ImproperlyConfigured, match="ROSTER_X is set but empty"):
        read(ROSTER_X="").path("ROSTER_X", "/d")


def test_lists_drop_blanks():
    assert read(ROSTER_X=" a, b ,,c ").list("ROSTER_X", ["d"]) == ("a", "b", "c")
    assert read(ROSTER_X="").list("ROSTER_X") == ()
    with pytest.raises(ImproperlyConfigured, match="ROSTER_X is set but empty"):
        read(ROSTER_X="").list("ROSTER_X", ["d"])


def test_a_long_bad_value_is_cut_short_in_the_error():
    with pytest.raises(ImproperlyConfigured) as caught:
        read(ROSTER_X="x" * 500).int("ROSTER_X", 1)
    assert len(str(caught.value)) < 120


SHOW = ("import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'controlplane.settings'; "
        "from django.conf import settings; print(settings.{name})")


def _settings_process(name: str, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", SHOW.format(name=name)], cwd=procs.REPO, env=environ,
                          capture_output=True, text=True)


@pytest.mark.parametrize("name, raw, message", [
    ("ROSTER_APPROVAL_TTL_SECONDS", "five minutes", "ROSTER_APPROVAL_TTL_SECONDS must be a whole number"),
    ("ROSTER_APPROVAL_DENY_COMMENT_REQUIRED", "yes", "ROSTER_APPROVAL_DENY_COMMENT_REQUIRED must be 0 or 1"),
    ("ROSTER_DECISION_API_PORT", "0", "ROSTER_DECISION_API_PORT must be at least 1"),
    ("ROSTER_LOG_LEVEL", "loud", "ROSTER_LOG_LEVEL must be one of DEBUG"),
    ("ROSTER_BOX_IMAGE", "", "ROSTER_BOX_IMAGE is set but empty"),
    ("ROSTER_PROPOSALS_HOST", "proposals.example.com", "ROSTER_PROPOSALS_HOST must be a name under .invalid"),
])
def test_the_settings_refuse_a_bad_value_at_start(name, raw, message):
    """Every process builds its settings at start: a bad value stops it there, with the reason."""
    done = _settings_process("ROSTER_APPROVAL_TTL_SECONDS", **{name: raw})
    assert done.returncode != 0 and done.stdout == ""
    assert message in done.stderr


def test_the_settings_read_a_good_value():
    assert _settings_process("ROSTER_APPROVAL_TTL_SECONDS", ROSTER_APPROVAL_TTL_SECONDS="42").stdout == "42\n"
