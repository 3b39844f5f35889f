"""The box runtime (workers.runtime): which command it runs and when it refuses to start."""

from __future__ import annotations

import json

import pytest

from workers.runtime import launch

PROXY_ENV = {"HTTP_PROXY": "http://run:t@172.30.0.1:8080", "HTTPS_PROXY": "http://run:t@172.30.0.1:8080"}


def test_command_from_argv_or_config(tmp_path):
    config = tmp_path / "run.json"
    assert launch.command_from(["--", "python3", "-m", "agent"], config) == ["python3", "-m", "agent"]
    assert launch.command_from(["echo", "--", "x"], config) == ["echo", "--", "x"]
    assert launch.command_from([], config) == []
    config.write_text(json.dumps({"command": ["sh", "-c", "true"]}))
    assert launch.command_from([], config) == ["sh", "-c", "true"]
    config.write_text(json.dumps({"command": "sh -c true"}))  # not a list: ignored
    assert launch.command_from([], config) == []


def test_refuses_root_and_missing_proxy():
    assert launch.misconfiguration(PROXY_ENV, uid=0) == "the box runs as root"
    assert launch.misconfiguration({}, uid=10001) == "no gateway proxy in the environment"
    assert launch.misconfiguration({"HTTP_PROXY": "x"}, uid=10001) == "no gateway proxy in the environment"
    assert launch.misconfiguration(PROXY_ENV, uid=10001) == ""


@pytest.fixture
def box_env(monkeypatch):
    for name, value in PROXY_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(launch.os, "getuid", lambda: 10001)


def test_execs_the_command(box_env, monkeypatch):
    calls = []
    monkeypatch.setattr(launch.os, "execvp", lambda file, args: calls.append((file, args)))
    launch.main(["--", "python3", "-V"])
    assert calls == [("python3", ["python3", "-V"])]


def test_exit_codes(box_env, capsys, monkeypatch):
    assert launch.main(["definitely-not-a-command-xyz"]) == launch.EXIT_NOT_FOUND
    assert launch.main([]) == launch.EXIT_MISCONFIGURED
    monkeypatch.delenv("HTTPS_PROXY")
    assert launch.main(["true"]) == launch.EXIT_MISCONFIGURED
    assert "refusing to start" in capsys.readouterr().err
