"""Prepared statements on PostgreSQL: on in the decision API's process (controlplane.decision_server sets
ROSTER_DB_PREPARED_STATEMENTS unless the environment says otherwise), off everywhere else, never on
SQLite. Read from the settings a fresh interpreter builds, as each process builds its own."""

import json
import os
import subprocess
import sys

import pytest

from tests.support import procs

PG_URL = "postgres://roster@127.0.0.1:1/roster"
SHOW = ("import json, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'controlplane.settings'); {prelude}"
        "from django.conf import settings; "
        "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {{}})))")
SERVER_PRELUDE = "from controlplane.egress.server import set_process_defaults; set_process_defaults(); "


def _options(database_url: str, prelude: str = "", **env) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "ROSTER_DB_PREPARED_STATEMENTS"}
    environ.update(DATABASE_URL=database_url, **env)
    out = subprocess.run([sys.executable, "-c", SHOW.format(prelude=prelude)], cwd=procs.REPO, env=environ,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_off_by_default_on_postgresql():
    assert "server_side_binding" not in _options(PG_URL)


@pytest.mark.parametrize("value, on", [("1", True), ("0", False)])
def test_the_setting_turns_them_on_only_when_it_says_1(value, on):
    options = _options(PG_URL, ROSTER_DB_PREPARED_STATEMENTS=value)
    assert (options.get("server_side_binding"), options.get("prepare_threshold")) == ((True, 5) if on
                                                                                        else (None, None))


def test_never_on_sqlite(tmp_path):
    options = _options(f"sqlite:///{tmp_path / 'x.sqlite3'}", ROSTER_DB_PREPARED_STATEMENTS="1")
    assert "server_side_binding" not in options and options["transaction_mode"] == "IMMEDIATE"


def test_the_decision_api_process_turns_them_on_unless_told_not_to():
    assert _options(PG_URL, SERVER_PRELUDE)["server_side_binding"] is True
    assert "server_side_binding" not in _options(PG_URL, SERVER_PRELUDE, ROSTER_DB_PREPARED_STATEMENTS="0")


@pytest.mark.parametrize("value", ["yes", "true", "", " 1"])
def test_any_other_value_is_refused_with_a_clear_error(value):
    environ = {**os.environ, "DATABASE_URL": PG_URL, "ROSTER_DB_PREPARED_STATEMENTS": value}
    out = subprocess.run([sys.executable, "-c", SHOW.format(prelude="")], cwd=procs.REPO, env=environ,
                         capture_output=True, text=True)
    assert out.returncode != 0 and out.stdout == ""
    assert f"ROSTER_DB_PREPARED_STATEMENTS must be 0 or 1, not {value!r}" in out.stderr
