"""`manage.py run …` without Docker: start's argument handling, list, logs, cancel, errors; a closed pipe."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from controlplane.dispatch import tasks
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_resolve_token, run_set_status
from tests.support import procs


def _cli(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("run", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def enqueued(monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr(tasks.dispatch_run, "delay", lambda run_id: sent.append(run_id))
    return sent


def test_there_is_no_run_create(worker):
    """A queued run without a box was dispatched by the reaper anyway; runs come from `run start`."""
    with pytest.raises(CommandError, match="invalid choice: 'create'"):
        _cli("create", worker.name)
    assert not Run.objects.exists()


def test_start_takes_everything_after_the_double_dash(worker, enqueued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        out, _ = _cli("start", worker.name, "--timeout", "45", "--", "python3", "-m", "a", "--timeout", "3")
    run = Run.objects.get()
    assert out == f"run {run.pk}: queued\n"
    assert run.command == ["python3", "-m", "a", "--timeout", "3"] and run.timeout_seconds == 45
    assert enqueued == [run.pk]


def test_start_agent_runs_the_reference_agent_on_the_task(worker, enqueued, settings,
                                                          django_capture_on_commit_callbacks):
    settings.ROSTER_AGENT_BASE_URL, settings.ROSTER_AGENT_MODEL = "http://127.0.0.1:18091/v1", "scripted"
    with django_capture_on_commit_callbacks(execute=True):
        out, _ = _cli("start", worker.name, "--agent", "Summarise https://example.org; then stop")
    run = Run.objects.get()
    assert run.command == ["python3", "-m", "workers.agent", "--base-url", "http://127.0.0.1:18091/v1",
                           "--model", "scripted", "--", "Summarise https://example.org; then stop"]
    assert enqueued == [run.pk]


@pytest.mark.parametrize(("args", "message"), [
    (["start", "alpha"], "give the command after --"),
    (["start", "alpha", "--agent", "task", "--", "true"], "either --agent TASK or a command"),
    (["start", "alpha", "--agent", "  "], "--agent needs a task"),
    (["start", "alpha", "--timeout", "0", "--", "true"], "must be a positive number"),
    (["start", "nobody", "--", "true"], "no worker named 'nobody'"),
    (["wait", "999"], "no run 999"),
    (["logs", "999"], "no run 999"),
    (["cancel", "999"], "no run 999"),
    (["list", "--", "true"], "only `run start` takes a command"),
])
def test_bad_input_is_a_clear_error_and_changes_nothing(worker, enqueued, args, message):
    with pytest.raises(CommandError, match=message):
        _cli(*args)
    assert not Run.objects.exists() and enqueued == []


def test_list_logs_and_wait(worker):
    run, _ = run_create(worker, command=["echo", "hi"])
    started = timezone.now() - timedelta(seconds=75)
    run_set_status(run.pk, Run.Status.SUCCEEDED, "", output="hi\n", exit_code=0, started_at=started,
                   ended_at=started + timedelta(seconds=62))
    out, _ = _cli("list")
    header, row = out.splitlines()
    assert header.split("\t") == ["ID", "WORKER", "ORIGIN", "STATUS", "STARTED (UTC)", "DURATION", "EXIT",
                                   "REASON", "COMMAND"]
    started_text = f"{started:%Y-%m-%d %H:%M:%S}"
    assert row.split("\t") == [str(run.pk), "alpha", "human", "succeeded", started_text, "1m02s", "0",
                               "-", "echo hi"]
    assert _cli("logs", str(run.pk))[0] == "hi\n"
    assert _cli("wait", str(run.pk))[0] == f"run {run.pk}: succeeded\n"


def test_list_is_newest_first_limited_and_one_line_per_run(worker):
    hostile = ["sh", "-c", "echo one\nrm -rf / # \x1b[2J"]
    runs = [run_create(worker, command=hostile if i == 2 else ["true", str(i)])[0] for i in range(3)]
    run_set_status(runs[2].pk, Run.Status.FAILED, "dispatch failed:\nsecond line", exit_code=2)
    runs[1].started_at = timezone.now() - timedelta(seconds=5)
    Run.objects.filter(pk=runs[1].pk).update(status=Run.Status.RUNNING, started_at=runs[1].started_at)
    out, _ = _cli("list", "--limit", "2")
    rows = [line.split("\t") for line in out.splitlines()[1:]]
    assert [int(r[0]) for r in rows] == [runs[2].pk, runs[1].pk]  # newest first, two of three
    assert rows[0][6:] == ["2", "dispatch failed:\\nsecond line", "sh -c $'echo one\\nrm -rf / # \\x1b[2J'"]
    assert "\x1b" not in out and rows[1][3] == "running" and rows[1][5].endswith("s+")
    with pytest.raises(CommandError):
        _cli("list", "--limit", "0")


@pytest.mark.django_db(transaction=True)
def test_a_closed_pipe_is_not_a_traceback(worker, tmp_path):
    """`manage.py run list | head -1` on many runs: the reader goes away mid-output."""
    for i in range(2000):
        run_create(worker, command=["true", str(i)])
    db = connection.settings_dict["NAME"]
    script = (f"{sys.executable} manage.py run list --limit 2000 | head -n 1; "
              f"{sys.executable} manage.py approval list | head -n 0; echo \"status=${{PIPESTATUS[0]}}\"")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(["bash", "-c", script], cwd=procs.REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.startswith("ID\tWORKER") and done.stdout.count("\n") == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr


def test_wait_gives_up_on_a_live_run(worker, settings):
    settings.ROSTER_RUN_WAIT_POLL_SECONDS = 0.01
    run, _ = run_create(worker, command=["sleep", "9"])
    with pytest.raises(CommandError, match="still live"):
        _cli("wait", str(run.pk), "--timeout", "0.05")


def test_logs_say_when_output_was_truncated(worker):
    run, _ = run_create(worker, command=["yes"])
    run_set_status(run.pk, Run.Status.FAILED, "exit code 1", output="y\n" * 3, output_truncated=True)
    out, err = _cli("logs", str(run.pk))
    assert out == "y\ny\ny\n" and "output truncated" in err


def test_cancel_a_queued_run_revokes_its_token(worker, monkeypatch):
    from controlplane.dispatch import cancelling

    monkeypatch.setattr(cancelling, "docker_client", lambda: pytest.fail("no box to kill"))
    run, token = run_create(worker, command=["true"])
    out, _ = _cli("cancel", str(run.pk))
    assert out == f"run {run.pk}: cancelled (cancelled by command line)\n"
    assert run_resolve_token(token) is None
    with pytest.raises(CommandError, match="already ended"):
        _cli("cancel", str(run.pk))


def test_logs_never_send_the_boxs_terminal_escapes_to_the_operators_terminal(worker):
    """Box output is hostile: ESC/OSC sequences (retitle, clipboard write via OSC 52, cursor tricks that hide
    lines), BEL, backspaces and C1 controls are shown escaped; newlines and tabs stay as they are."""
    run, _ = run_create(worker, command=["sh"])
    hostile = "ok\n\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2K\x1b[1Ahidden\rover\x08\x9b31m\ttab\n"
    run_set_status(run.pk, Run.Status.SUCCEEDED, "", output=hostile, exit_code=0)
    out, _ = _cli("logs", str(run.pk))
    assert not any(ch in out for ch in "\x1b\x07\x08\r\x9b")
    assert out == "ok\n\\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x1b[2K\\x1b[1Ahidden\\x0dover\\x08\\x9b31m\ttab\n"
    assert Run.objects.get(pk=run.pk).output == hostile  # the record itself keeps every byte


def test_logs_write_each_part_to_its_own_stream_and_mark_sources_on_request(worker):
    run, _ = run_create(worker, command=["sh"])
    output = "out 1\nerr 1\nout 2\n"
    run_set_status(run.pk, Run.Status.SUCCEEDED, "", output=output, exit_code=0,
                   output_sources=[["stdout", 6], ["stderr", 6], ["stdout", 6]])
    out, err = _cli("logs", str(run.pk))
    assert out == "out 1\nout 2\n" and err == "err 1\n"
    out, err = _cli("logs", str(run.pk), "--sources")
    assert out == "stdout | out 1\nstderr | err 1\nstdout | out 2\n" and err == ""


def test_logs_mark_an_old_runs_output_as_of_unknown_source(worker):
    run, _ = run_create(worker, command=["sh"])
    run_set_status(run.pk, Run.Status.SUCCEEDED, "", output="a\nb\n", exit_code=0)
    assert _cli("logs", str(run.pk)) == ("a\nb\n", "")
    assert _cli("logs", str(run.pk), "--sources")[0] == "output | a\noutput | b\n"


def test_a_stderr_part_is_escaped_like_the_rest(worker):
    run, _ = run_create(worker, command=["sh"])
    run_set_status(run.pk, Run.Status.FAILED, "exit code 1", output="x\x1b[2K\n", exit_code=1,
                   output_sources=[["stderr", 6]])
    out, err = _cli("logs", str(run.pk))
    assert out == "" and err == "x\\x1b[2K\n"
    assert _cli("logs", str(run.pk), "--sources")[0] == "stderr | x\\x1b[2K\n"


def test_start_names_the_timeline_and_how_to_follow_it_on_stderr(worker, enqueued, settings):
    settings.ROSTER_WEB_BASE_URL = "http://roster.example:8000/"
    out, err = _cli("start", worker.name, "--", "true")
    run = Run.objects.get()
    assert out == f"run {run.pk}: queued\n"  # stdout stays the one line a script reads
    follow = f"  follow it: manage.py run wait {run.pk}; its output: manage.py run logs {run.pk}"
    assert err.splitlines() == [f"  timeline: http://roster.example:8000/runs/{run.pk}/", follow]


def _ends_later(run_id: int, status: str, monkeypatch) -> None:
    """The run moves queued -> running -> `status` while `run start --wait` polls it."""
    steps = iter([Run.Status.RUNNING, status])
    real_sleep = __import__("time").sleep

    def step(_seconds):
        run_set_status(run_id, next(steps), **({"exit_code": 0} if status == Run.Status.SUCCEEDED else {}))
        real_sleep(0)

    monkeypatch.setattr("controlplane.dispatch.management.commands.run.time.sleep", step)


def test_start_wait_follows_the_run_to_its_end(worker, enqueued, monkeypatch):
    monkeypatch.setattr("controlplane.dispatch.management.commands.run.run_start",
                        lambda w, command, **kw: run_create(w, command=command)[0])
    run_id = Run.objects.count() + 1
    _ends_later(run_id, Run.Status.SUCCEEDED, monkeypatch)
    out, err = _cli("start", worker.name, "--wait", "--", "true")
    run = Run.objects.get()
    assert run.pk == run_id and out.splitlines() == [f"run {run.pk}: queued", f"run {run.pk}: succeeded"]
    followed = [line.strip() for line in err.splitlines()[1:]]
    assert followed[0].startswith(f"run {run.pk} queued: ") and followed[1:] == [
        f"run {run.pk} running", f"run {run.pk} succeeded"]


def test_start_wait_fails_like_run_wait_when_the_run_fails(worker, enqueued, monkeypatch):
    monkeypatch.setattr("controlplane.dispatch.management.commands.run.run_start",
                        lambda w, command, **kw: run_create(w, command=command)[0])
    _ends_later(Run.objects.count() + 1, Run.Status.FAILED, monkeypatch)
    with pytest.raises(CommandError, match="did not succeed"):
        _cli("start", worker.name, "--wait", "--", "false")
