"""Outcome reports survive a control plane that is down or crashed mid-batch (sent again until it answers)
and the gateway's own restart (the journal file in its state dir): every forwarded request's bytes reach
the ledger once the control plane takes them (issue 22.3)."""

from __future__ import annotations

import asyncio
import json

from roster_gateway.client import ControlPlaneDown
from roster_gateway.outcome_journal import OutcomeJournal
from roster_gateway.outcomes import MAX_REFUSED_TRIES, OutcomeReporter


class FlakyControlPlane:
    """The client's outcomes(): down `down` times, then answers `answer(outcome)` for each."""

    def __init__(self, down: int = 0, answer=lambda outcome: "ok") -> None:
        self.down, self.answer = down, answer
        self.sent: list[list[str]] = []

    async def outcomes(self, batch):
        self.sent.append([o["decision_id"] for o in batch])
        if self.down:
            self.down -= 1
            raise ControlPlaneDown("connection refused")
        return [self.answer(o) for o in batch]


def _reporter(client, journal, tasks) -> OutcomeReporter:
    def spawn(coro):
        task = asyncio.ensure_future(coro)
        tasks.append(task)
        return task
    return OutcomeReporter(client, max_batch=10, flush_delay=0, spawn=spawn, journal=journal,
                           retry_delay=0.01)


async def _drain(tasks) -> None:
    while tasks:
        await tasks.pop()


async def test_a_batch_the_control_plane_did_not_take_is_sent_again_until_it_does(tmp_path):
    client, tasks = FlakyControlPlane(down=3), []
    journal = OutcomeJournal(tmp_path / "outcomes.jsonl")
    reporter = _reporter(client, journal, tasks)
    reporter.report("dc_1", 200, 10, 20, "")
    reporter.report("dc_2", 200, 10, 20, "")
    await _drain(tasks)
    assert client.sent[-1] == ["dc_1", "dc_2"] and len(client.sent) == 4
    assert journal.pending == {} and (tmp_path / "outcomes.jsonl").read_text() == ""


async def test_reports_left_by_a_killed_gateway_are_sent_when_it_starts_again(tmp_path):
    path = tmp_path / "outcomes.jsonl"
    down, tasks = FlakyControlPlane(down=10**6), []
    first = _reporter(down, OutcomeJournal(path), tasks)
    first.report("dc_1", 200, 10, 20, "", usage={"known": True, "input": 1, "output": 2})
    first.report("dc_2", 502, 10, 0, "upstream refused")
    await asyncio.sleep(0.05)
    for task in tasks:  # killed: nothing more happens in this process
        task.cancel()
    with path.open("a") as out:
        out.write('{"add": {"decision_id": "dc_3", "sta')  # torn by the kill mid-write
    up, tasks = FlakyControlPlane(), []
    second = _reporter(up, OutcomeJournal(path), tasks)
    second.resume()
    await _drain(tasks)
    assert up.sent == [["dc_1", "dc_2"]]
    assert path.read_text() == ""


async def test_an_unknown_or_settled_decision_is_done_and_an_error_is_retried_then_given_up(tmp_path):
    answers = {"dc_u": "unknown", "dc_s": "already_settled", "dc_e": "error", "dc_ok": "ok"}
    client, tasks = FlakyControlPlane(answer=lambda o: answers[o["decision_id"]]), []
    journal = OutcomeJournal(tmp_path / "outcomes.jsonl")
    reporter = _reporter(client, journal, tasks)
    for decision_id in answers:
        reporter.report(decision_id, 200, 1, 1, "")
    await _drain(tasks)
    assert client.sent[0] == list(answers) and all(batch == ["dc_e"] for batch in client.sent[1:])
    assert len(client.sent) == MAX_REFUSED_TRIES and journal.pending == {}


async def test_a_stopped_reporter_keeps_what_is_unacknowledged(tmp_path):
    path = tmp_path / "outcomes.jsonl"
    client, tasks = FlakyControlPlane(down=10**6), []
    reporter = _reporter(client, OutcomeJournal(path), tasks)
    reporter.report("dc_1", 200, 10, 20, "")
    await asyncio.sleep(0.03)
    reporter.stop()
    await _drain(tasks)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"add": {"decision_id": "dc_1", "status": 200, "request_bytes": 10, "response_bytes": 20,
                              "error": "", "scrubbed": 0}}]
    assert OutcomeJournal(path).take_recovered()[0]["decision_id"] == "dc_1"


def test_the_journal_stays_small_and_private(tmp_path):
    path = tmp_path / "outcomes.jsonl"
    journal = OutcomeJournal(path)
    journal.add({"decision_id": "dc_keep"})
    for n in range(3000):
        journal.add({"decision_id": f"dc_{n}"})
        journal.ack([f"dc_{n}"])
    assert len(path.read_text().splitlines()) < 1100
    assert list(OutcomeJournal(path).pending) == ["dc_keep"]
    assert path.stat().st_mode & 0o077 == 0
