"""A real box that interleaves writes to stdout and stderr (each flushed, apart in time) is stored in write
order with each chunk's source, as `docker logs` keeps it, under the same byte limit; Docker's log read back
after the fact (recovery) keeps the sources too. Before, the two streams were stored as one text without
sources, in whatever order the daemon's two pipe readers happened to deliver them."""

from __future__ import annotations

import pytest

from controlplane.dispatch import running
from controlplane.dispatch.boxoutput import OutputCollector
from controlplane.fleet.models import Run
from controlplane.fleet.output import output_pieces, stdout_text
from controlplane.fleet.services import run_create, worker_create

pytestmark = [pytest.mark.integration, pytest.mark.docker]

# Writes apart in time (two pipes have no common clock: writes in the same instant may arrive either way).
INTERLEAVE = ("import sys, time\n"
              "for i in range({count}):\n"
              "    s = sys.stdout if i % 2 == 0 else sys.stderr\n"
              "    s.write(f'{{i:04d}} {{s.name}} ' + 'x' * {pad} + '\\n'); s.flush(); time.sleep(0.03)\n")


def _expected(count: int, pad: int) -> list[tuple[str, str]]:
    names = ("stdout", "stderr")
    return [(names[i % 2], f"{i:04d} <{names[i % 2]}> " + "x" * pad + "\n") for i in range(count)]


def _run(worker, count: int, pad: int = 0) -> Run:
    script = INTERLEAVE.format(count=count, pad=pad)
    run, _ = run_create(worker, command=["python3", "-c", script], timeout_seconds=60)
    running.run_dispatch(run.pk)
    run.refresh_from_db()
    return run


def test_interleaved_stdout_and_stderr_are_stored_in_write_order_with_sources(stack):
    worker = worker_create("interleave-worker")
    run = _run(worker, 12)
    assert run.status == Run.Status.SUCCEEDED, run.status_reason
    want = _expected(12, 0)
    assert output_pieces(run.output, run.output_sources) == want
    assert run.output == "".join(text for _, text in want)
    assert run.output_sources == [[source, len(text)] for source, text in want]
    assert stdout_text(output_pieces(run.output, run.output_sources)) == "".join(
        text for source, text in want if source == "stdout")
    assert run.output_truncated is False


def test_the_byte_limit_holds_over_both_streams(stack, settings):
    settings.ROSTER_RUN_MAX_OUTPUT_BYTES = 1000
    worker = worker_create("interleave-flood")
    run = _run(worker, 30, pad=80)  # 30 lines of ~94 bytes: well past 1000
    assert run.status == Run.Status.SUCCEEDED, run.status_reason
    assert len(run.output.encode()) == 1000 and run.output_truncated is True
    whole = "".join(text for _, text in _expected(30, 80))
    assert run.output == whole[:1000]
    pieces = output_pieces(run.output, run.output_sources)
    assert [source for source, _ in pieces] == ["stdout", "stderr"] * (len(pieces) // 2) + (
        ["stdout"] if len(pieces) % 2 else [])


def test_dockers_log_read_back_keeps_sources(stack, docker_client, box_site):
    script = INTERLEAVE.format(count=6, pad=0)
    container = docker_client.containers.create(
        box_site.image, ["python3", "-c", script], entrypoint=[], network_mode="none",
        name=f"{box_site.namespace}-readback")
    try:
        container.start()
        assert container.wait(timeout=60)["StatusCode"] == 0
        collector = OutputCollector(container, 10_000, follow=False)
        collector.start()
        collector.finish(timeout=30)
        assert collector.pieces() == _expected(6, 0)
        assert collector.truncated is True  # read back from Docker's capped log: never claimed whole
    finally:
        container.remove(force=True)
