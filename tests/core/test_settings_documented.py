"""`make lint`'s settings check (scripts/check_settings_documented.py): every ROSTER_* name the code reads
and every gateway option has a row in docs/settings.md, no row names what nothing reads, and each default
the code gives is in its row. Run on small repositories made here, and on this one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import procs

SCRIPT = procs.REPO / "scripts" / "check_settings_documented.py"
OPTIONS = '''
OPTIONS = (
    ("roster_hold_seconds", int, 60, "help"),
)
'''
HEADER = "| area | name | default | what it does | read by |\n|---|---|---|---|---|\n"


def _repo(tmp_path: Path, files: dict[str, str], rows: list[str]) -> Path:
    files = {"gateway/roster_gateway/options.py": OPTIONS, **files}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (tmp_path / "docs").mkdir(exist_ok=True)
    rows = ["| gateway | `roster_hold_seconds` | `60` | x | gateway |", *rows]
    table = HEADER + "".join(row + "\n" for row in rows)
    (tmp_path / "docs" / "settings.md").write_text("# Settings\n\nProse first.\n\n" + table)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    return tmp_path


def _check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


SETTINGS = 'from controlplane.core.env import env\nX = env.int("ROSTER_X", 60, minimum=1)\n'


def test_this_repository_passes():
    done = _check(procs.REPO)
    assert done.returncode == 0, done.stdout


def test_a_documented_setting_passes(tmp_path):
    root = _repo(tmp_path, {"controlplane/settings/a.py": SETTINGS}, ["| a | `ROSTER_X` | `60` | x | all |"])
    assert _check(root).returncode == 0


def test_a_setting_read_without_a_row_fails_naming_where(tmp_path):
    root = _repo(tmp_path, {"controlplane/settings/a.py": SETTINGS}, [])
    done = _check(root)
    assert done.returncode == 1
    assert "ROSTER_X is read (controlplane/settings/a.py:2) but has no row in docs/settings.md" in done.stdout


def test_a_row_nothing_reads_fails(tmp_path):
    root = _repo(tmp_path, {"controlplane/settings/a.py": SETTINGS},
                 ["| a | `ROSTER_X` | `60` | x | all |", "| a | `ROSTER_GONE` | `1` | x | all |"])
    done = _check(root)
    assert done.returncode == 1
    assert "ROSTER_GONE has a row in docs/settings.md but nothing reads it" in done.stdout


def test_a_default_the_row_does_not_name_fails(tmp_path):
    root = _repo(tmp_path, {"controlplane/settings/a.py": SETTINGS}, ["| a | `ROSTER_X` | `30` | x | all |"])
    done = _check(root)
    assert done.returncode == 1
    assert "ROSTER_X: controlplane/settings/a.py:2 defaults to `60`, which its row's default" in done.stdout


def test_a_gateway_option_without_a_row_fails(tmp_path):
    root = _repo(tmp_path, {"gateway/roster_gateway/options.py": OPTIONS.replace(
        '),\n)', '),\n    ("roster_new_limit", int, 5, "help"),\n)')}, [])
    done = _check(root)
    assert done.returncode == 1
    assert "roster_new_limit is read (gateway/roster_gateway/options.py" in done.stdout


def test_a_gateway_default_that_disagrees_with_its_row_fails(tmp_path):
    root = _repo(tmp_path, {"gateway/roster_gateway/options.py": OPTIONS.replace("60", "30")}, [])
    done = _check(root)
    assert done.returncode == 1 and "roster_hold_seconds: gateway/roster_gateway/options.py" in done.stdout


@pytest.mark.parametrize("files, names", [
    # shell: expansions count, with their defaults; comments do not
    ({"scripts/up.sh": "#!/bin/sh\n# ${ROSTER_IN_A_COMMENT:-1}\nport=${ROSTER_PORT:-8000} $ROSTER_PLAIN\n"},
     {"ROSTER_PORT", "ROSTER_PLAIN"}),
    ({"compose.yaml": "services:\n  web:\n    ports: ['${ROSTER_WEB:-8000}:8000']\n"}, {"ROSTER_WEB"}),
    # the few settings named as their libraries name them count too; other variables do not
    ({"scripts/up.sh": 'redis-cli -u "${REDIS_URL:-redis://x}" "$HOME" "${REDIS_URLS:-}"\n'}, {"REDIS_URL"}),
    ({"controlplane/settings/d.py": 'D = env.str("DATABASE_URL", "sqlite://")\nP = env.str("PATH", "")\n'},
     {"DATABASE_URL"}),
    # Python: reads through any helper given the name; never a name only written
    ({"workers/agent/config.py": 'def f(env):\n    return _int(env, "ROSTER_TURNS", 12), env["ROSTER_K"]\n'},
     {"ROSTER_TURNS", "ROSTER_K"}),
    ({"bench/b.py": 'import os\nos.environ.setdefault("ROSTER_W", "1")\nenv = {"ROSTER_V": "1"}\n'
                    'os.environ["ROSTER_S"] = "1"\nprint("set ROSTER_MSG to fix it")\n'}, set()),
    # tests: only reads of os.environ itself (they make names up for the reader's own tests)
    ({"tests/t.py": 'import os\nos.environ.get("ROSTER_T")\nread("ROSTER_MADE_UP", 1)\n'
                    'monkeypatch.setenv("ROSTER_SET", "1")\n'}, {"ROSTER_T"}),
    # a prefix is not a setting
    ({"controlplane/x.py": 'def f(n):\n    return "ROSTER_SECRET_" + n, n.startswith("ROSTER_AGENT_")\n'},
     set()),
])
def test_what_counts_as_read(tmp_path, files, names):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import check_settings_documented as checker
    finally:
        sys.path.remove(str(SCRIPT.parent))
    root = _repo(tmp_path, files, [])
    assert set(checker.collect(root).reads) - {"roster_hold_seconds"} == names
