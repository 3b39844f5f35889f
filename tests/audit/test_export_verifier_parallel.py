"""The standalone export verifier with worker processes answers exactly as with none: the same first
broken line and message, for tampering at the first line, inside a batch, at both sides of a batch
boundary and at the last line; for partial exports and anchors too. No database needed."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import multiprocessing
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controlplane.audit import chain
from tests.audit.test_export import SCRIPT

BATCH = 7
COUNT = 40
POSITIONS = [0, 3, 6, 7, 20, COUNT - 1]  # 0-based line indexes; lines 7 and 8 sit across a boundary


def _module():
    spec = importlib.util.spec_from_file_location("verify_audit_export", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the workers' tasks name their function by module
    spec.loader.exec_module(module)
    return module


verifier = _module()


def _export(count=COUNT) -> list[str]:
    return [json.dumps({"seq": seq, "body": body, "hash": digest}, separators=(",", ":")) + "\n"
            for seq, _, _, body, _, digest in chain.generate_chain(count, dt.datetime.now(dt.UTC))]


def _rebody(line: str, **changes) -> str:
    entry = json.loads(line)
    body = json.loads(entry["body"])
    body.update(changes)
    entry["body"] = chain.canonical_json(body)
    entry["hash"] = chain.record_hash(entry["body"])
    entry["seq"] = body["seq"]
    return json.dumps(entry) + "\n"


def _edit(lines, i):
    lines[i] = lines[i].replace('\\"i\\":', '\\"j\\":')


def _rehash(lines, i):
    lines[i] = _rebody(lines[i], data={"forged": True})


def _delete(lines, i):
    del lines[i]


def _swap(lines, i):
    j = i + 1 if i + 1 < len(lines) else i - 1
    lines[i], lines[j] = lines[j], lines[i]


def _fork(lines, i):
    prev = json.loads(json.loads(lines[i - 1])["body"])["prev"] if i else "1" * 64
    lines[i] = _rebody(lines[i], prev=prev)


def _garbage(lines, i):
    lines.insert(i, "not json\n")


def _blank(lines, i):
    lines.insert(i, "\n")


TAMPERS = {"edit": _edit, "rehash": _rehash, "delete": _delete, "swap": _swap, "fork": _fork,
           "garbage": _garbage, "blank": _blank}


def _same(lines, **options):
    alone = verifier.verify(iter(lines), workers=1, **options)
    assert verifier.verify(iter(lines), workers=2, batch_lines=BATCH, **options) == alone
    assert verifier.verify(iter(lines), workers=3, batch_lines=1, **options) == alone
    return alone


@pytest.mark.parametrize("kind", sorted(TAMPERS))
def test_tampering_gives_the_same_answer_with_workers(kind):
    for position in POSITIONS:
        lines = _export()
        TAMPERS[kind](lines, position)
        ok, message = _same(lines)
        # A blank line is skipped; the last record cut off or re-hashed needs an anchor to be noticed.
        if kind == "blank" or (kind in ("delete", "rehash") and position == COUNT - 1):
            assert ok, (kind, position, message)
        else:
            assert not ok and message.startswith("line "), (kind, position, message)


def test_sound_partial_and_anchored_exports():
    lines = _export()
    head = json.loads(lines[-1])
    ok, message = _same(lines, anchor=(COUNT, head["hash"]))
    assert ok and message == f"OK: {COUNT} records, head {COUNT}:{head['hash']}"
    assert _same(lines, anchor=(8, "0" * 64))[1].startswith("line 8 (seq 8): anchor mismatch")
    assert "no record seq 41" in _same(lines, anchor=(41, head["hash"]))[1]
    partial = lines[:5] + lines[9:30:3]
    assert _same(partial, partial=True)[0]
    assert "seq gap" in _same(partial)[1]
    assert _same([])[1] == "no records in the export"


def test_command_line_with_workers(tmp_path):
    path = tmp_path / "audit.jsonl"
    lines = _export()
    _fork(lines, 21)
    path.write_text("".join(lines))
    outputs = [subprocess.run(["/usr/bin/python3", "-I", "-S", str(SCRIPT), *extra, str(path)],
                              capture_output=True, text=True, timeout=60)
               for extra in ([], ["--workers", "2", "--batch-lines", "5"])]
    assert outputs[0].returncode == outputs[1].returncode == 1
    assert outputs[0].stdout == outputs[1].stdout and outputs[0].stdout.startswith("BROKEN: line 22 (seq 22)")
    bad = subprocess.run(["/usr/bin/python3", "-I", "-S", str(SCRIPT), "--workers", "-1", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--workers" in bad.stderr


def _die_before_answering(*_args):  # in a worker, as _check_batch: as if killed (out of memory, a signal)
    os._exit(3)


def _die_halfway_through_an_answer(tasks, results, *_rest):  # in a worker, as _serve
    tasks.recv()
    # The length of a 5 MB answer and its first 100 kB (more than a pipe holds), then killed.
    os.write(results.fileno(), struct.pack("!i", 5_000_000) + b"x" * 100_000)
    os._exit(9)


@pytest.mark.parametrize("name,fault", [("_check_batch", _die_before_answering),
                                        ("_serve", _die_halfway_through_an_answer)],
                         ids=["before-answering", "halfway-through-an-answer"])
def test_a_worker_that_dies_is_an_error_not_a_verdict_nor_a_hang(tmp_path, monkeypatch, capfd, name, fault):
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(_export()))
    monkeypatch.setattr(verifier, name, fault)
    assert verifier.main(["--workers", "2", "--batch-lines", "5", str(path)]) == 2
    out, err = capfd.readouterr()
    assert out == "" and "was not verified" in err and "Traceback" not in err  # the fault, not a crash


def test_an_early_verdict_leaves_no_worker_behind_and_says_nothing_of_them(tmp_path, capfd):
    lines = _export(400)
    _edit(lines, 3)  # broken in the first batch: the other workers are still busy when it is found
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(lines))
    before = set(multiprocessing.active_children())
    assert verifier.main(["--workers", "2", "--batch-lines", "5", str(path)]) == 1
    assert set(multiprocessing.active_children()) == before
    out, err = capfd.readouterr()
    assert out.startswith("BROKEN: line 4") and err == ""


def test_workers_busy_with_large_answers_end_on_their_own_after_an_early_verdict(tmp_path, monkeypatch):
    # Every line broken: each worker's answer lists its whole batch (far more than a pipe holds) and
    # is still being written when the first batch's answer settles the verdict.
    lines = _export(4000)
    for i in range(len(lines)):
        _edit(lines, i)
    path = tmp_path / "audit.jsonl"
    path.write_text("".join(lines))
    ended = []
    real_close = verifier._Workers.close

    def close_and_look(workers):
        real_close(workers)
        ended.extend(process.exitcode for process in workers.processes)

    monkeypatch.setattr(verifier._Workers, "close", close_and_look)
    assert verifier.main(["--workers", "2", "--batch-lines", "1000", str(path)]) == 1
    assert ended == [0, 0, 0, 0]  # none had to be killed


def _descendants(pid: int) -> list[str]:
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        found += [child, *_descendants(int(child))]
    return found


def test_workers_end_when_their_caller_is_killed(tmp_path):
    caller = subprocess.Popen(["/usr/bin/python3", "-I", "-S", str(SCRIPT), "--workers", "2", "-"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        children = []
        for _ in range(100):  # the workers start before the first line is read
            children = _descendants(caller.pid)  # (under a fork server the workers are its children)
            if len(children) >= 4:
                break
            time.sleep(0.05)
        assert len(children) >= 4
        caller.kill()
        caller.wait()
        for _ in range(100):
            alive = [pid for pid in children if Path(f"/proc/{pid}").exists()
                     and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()]
            if not alive:
                break
            time.sleep(0.05)
        assert alive == []
    finally:
        caller.kill()
        caller.stdin.close()
