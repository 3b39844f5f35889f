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


# A preset's files (workers.runtime.presetfiles): copied or linked into $HOME, nothing outside it.

def _preset(tmp_path, files: dict[str, str], entries: list[dict], stdin: str = "none"):
    source = tmp_path / "config" / "preset"
    for rel, text in files.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_text(text)
    home = tmp_path / "home"
    home.mkdir()
    return {"preset": "p", "stdin": stdin, "files": entries}, home, source


def test_preset_files_are_copied_or_linked_into_home(tmp_path):
    from workers.runtime import presetfiles

    doc, home, source = _preset(tmp_path, {".pi/agent/models.json": "{}", ".cfg": "x"},
                                [{"path": ".pi/agent/models.json", "mode": "copy"},
                                 {"path": ".cfg", "mode": "link"}])
    assert presetfiles.set_up(doc, home, source) == ["copy .pi/agent/models.json", "link .cfg"]
    copied = home / ".pi/agent/models.json"
    assert copied.read_text() == "{}" and not copied.is_symlink()
    copied.write_text('{"changed": true}')  # the agent's own scratch ...
    assert (source / ".pi/agent/models.json").read_text() == "{}"  # ... never the original
    assert (home / ".cfg").is_symlink() and (home / ".cfg").resolve() == (source / ".cfg").resolve()


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../b", "", "a//b", "./a"])
def test_a_preset_file_never_leaves_home(tmp_path, path):
    from workers.runtime import presetfiles

    doc, home, source = _preset(tmp_path, {"ok": "x"}, [{"path": path, "mode": "copy"}])
    with pytest.raises(presetfiles.PresetSetupError):
        presetfiles.set_up(doc, home, source)
    assert not (tmp_path / "escape").exists()


def test_a_link_on_the_way_out_of_home_is_refused(tmp_path):
    from workers.runtime import presetfiles

    doc, home, source = _preset(tmp_path, {"d/f": "x"}, [{"path": "d/f", "mode": "copy"}])
    outside = tmp_path / "outside"
    outside.mkdir()
    (home / "d").symlink_to(outside)
    with pytest.raises(presetfiles.PresetSetupError, match="link out of"):
        presetfiles.set_up(doc, home, source)
    assert not (outside / "f").exists()


def test_a_missing_file_or_a_bad_manifest_refuses_to_start(tmp_path, box_env, monkeypatch, capsys):
    from workers.runtime import presetfiles

    doc, home, source = _preset(tmp_path, {}, [{"path": "gone", "mode": "copy"}])
    with pytest.raises(presetfiles.PresetSetupError, match="missing"):
        presetfiles.set_up(doc, home, source)
    bad = tmp_path / "preset.json"
    bad.write_text("[1, 2]")
    monkeypatch.setattr(presetfiles, "MANIFEST", bad)
    monkeypatch.setattr(launch.os, "execvp", lambda *a: pytest.fail("must not start"))
    assert launch.main(["true"]) == launch.EXIT_MISCONFIGURED
    assert "the preset's files" in capsys.readouterr().err


def test_the_prompt_on_stdin(tmp_path, monkeypatch):
    from workers.runtime import presetfiles

    prompt = tmp_path / "prompt.md"
    prompt.write_text("the task\n")
    dups = []
    monkeypatch.setattr(presetfiles.os, "dup2", lambda fd, to: dups.append(to))
    presetfiles.stdin_from({"stdin": "prompt"}, prompt)
    presetfiles.stdin_from({"stdin": "none"}, prompt)
    assert dups == [0]
    with pytest.raises(presetfiles.PresetSetupError):
        presetfiles.stdin_from({"stdin": "tty"}, prompt)
