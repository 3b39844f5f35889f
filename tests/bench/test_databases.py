"""The benches' choice of databases: both by default, one on request, a clear skip line (and the SQLite
rows kept) when PostgreSQL's binaries are missing, and a clear error for an unknown name."""

import pytest

from bench import databases
from tests.support import postgres


def test_both_databases_by_default(monkeypatch):
    monkeypatch.delenv("ROSTER_BENCH_DATABASES", raising=False)
    assert databases.selected() == ["sqlite", "postgres"]


def test_one_database_on_request(monkeypatch):
    monkeypatch.setenv("ROSTER_BENCH_DATABASES", "postgres")
    assert databases.selected() == ["postgres"]


def test_unknown_database_is_an_error(monkeypatch):
    monkeypatch.setenv("ROSTER_BENCH_DATABASES", "sqlite,mysql")
    with pytest.raises(ValueError, match="mysql"):
        databases.selected()


def test_missing_postgres_is_skipped_with_the_reason(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("ROSTER_BENCH_DATABASES", raising=False)
    monkeypatch.setattr(postgres, "PG_BIN", tmp_path / "no-such-bin")
    assert databases.available_databases("decision API bench") == ["sqlite"]
    out = capsys.readouterr().out
    assert "decision API bench on PostgreSQL 15: skipped: PostgreSQL 15 binaries not found under" in out
    assert "no-such-bin" in out


def test_quick_mode_counts(monkeypatch):
    monkeypatch.delenv("ROSTER_BENCH_X", raising=False)
    monkeypatch.setattr(databases, "QUICK", True)
    assert databases.count("ROSTER_BENCH_X", 1000, 10) == 10
    monkeypatch.setattr(databases, "QUICK", False)
    assert databases.count("ROSTER_BENCH_X", 1000, 10) == 1000
    monkeypatch.setenv("ROSTER_BENCH_X", "7")
    assert databases.count("ROSTER_BENCH_X", 1000, 10) == 7
