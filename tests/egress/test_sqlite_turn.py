"""The decision API's processes take turns at SQLite's write lock (controlplane.egress.sqlite_turn): while
one holds its turn, another process's descriptor of the lock file cannot take it; after, it can. The
lock file is the owner's alone. On PostgreSQL it is no lock at all."""

import fcntl
import os
import stat

import pytest
from django.db import connection

from controlplane.egress import sqlite_turn


def _other_process_may_take(path: str) -> bool:
    fd = os.open(path, os.O_RDWR)  # another open of the file: what another process would hold
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.django_db
def test_a_turn_excludes_the_other_processes_until_it_ends():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    path = connection.settings_dict["NAME"] + ".decisions.lock"
    with sqlite_turn.turn():
        assert os.path.exists(path) and not _other_process_may_take(path)
    assert _other_process_may_take(path)
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0


@pytest.mark.django_db
def test_an_in_memory_database_has_no_lock_file(monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "NAME", ":memory:")
    assert sqlite_turn._lock_fd() is None
    with sqlite_turn.turn():
        pass
