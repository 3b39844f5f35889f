"""scripts/up.sh closes what it inherited before starting daemons: under `flock LOCK make up` a daemon that
kept flock's descriptor held the machine-wide lock for the stack's life, and `flock LOCK make down` waited
forever. Here a background "daemon" is started the way up.sh starts one, with and without the closing."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DAEMON = 'nohup setsid sleep 30 >/dev/null 2>&1 & echo $! > "$PIDFILE"'


def _lock_free_while_a_daemon_runs(tmp_path: Path, prelude: str) -> bool:
    lock, pidfile = tmp_path / "stack.lock", tmp_path / "daemon.pid"
    script = f"cd {ROOT}\n{prelude}\n{DAEMON}\n"
    subprocess.run(["flock", str(lock), "bash", "-c", script], check=True, timeout=30,
                   env={"PATH": "/usr/bin:/bin", "PIDFILE": str(pidfile)})
    try:
        return subprocess.run(["flock", "-n", str(lock), "true"], timeout=30).returncode == 0
    finally:
        subprocess.run(["kill", pidfile.read_text().strip()], check=False)


def test_a_daemon_started_after_closing_does_not_hold_the_callers_lock(tmp_path):
    assert _lock_free_while_a_daemon_runs(tmp_path, ". scripts/close-inherited-fds.sh")


def test_without_it_the_daemon_holds_the_lock(tmp_path):
    """The failure this guards against, shown: the test above can fail."""
    assert not _lock_free_while_a_daemon_runs(tmp_path, "")


def test_up_sh_closes_them_before_it_starts_anything():
    lines = (ROOT / "scripts/up.sh").read_text().splitlines()
    closing = next(i for i, line in enumerate(lines)
                   if line.startswith(".") and "close-inherited-fds.sh" in line)
    first_start = next(i for i, line in enumerate(lines)
                       if line.startswith(("start ", "ensure ", "scripts/")))
    assert closing < first_start
