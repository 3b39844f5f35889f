"""Outcomes the control plane has not acknowledged yet, kept in a file in the gateway's private state dir
(issue 22.3): a forwarded request's bytes are charged even when the decision API crashed before its
report arrived, or the gateway itself was killed with reports still queued. The reporter
(roster_gateway.outcomes) writes each outcome here before sending it and marks it done once the control
plane answered for it ("ok", or "unknown"/"already_settled": nothing more to settle); a gateway that
starts again sends what is left.

An append-only log of JSON lines, {"add": outcome} and {"ack": [decision ids]}: one short write per
report, no fsync (a killed process loses nothing the kernel has; a power cut may lose the last writes),
on a file kept open between writes (opening and closing it for each report was about a tenth of the
addon's own time per request, profiled under load); a rewrite replaces the file, so the next write opens
the new one.
A torn last line (killed mid-write) is skipped. The file is emptied whenever nothing is pending and
rewritten from what is pending when acknowledgements dominate it, so it stays small."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

Outcome = dict
_COMPACT_SLACK = 512  # lines beyond twice the pending count before the file is rewritten
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(..., separators) builds one per call


class OutcomeJournal:
    def __init__(self, path: Path | None, what: str = "outcome") -> None:
        self.path = path
        self.what = what  # what the log lines call an entry (the run journal keeps model calls here too)
        self.pending: dict[str, Outcome] = {}
        self._lines = 0
        self._out = None  # the file, open for appending (unbuffered: each line is one write to the kernel)
        self._recovered: list[Outcome] = []
        if path is not None:
            self._recovered = self._load(path)

    @staticmethod
    def _read(path: Path) -> dict[str, Outcome]:
        pending: dict[str, Outcome] = {}
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return pending
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill mid-write: its outcome was never acknowledged either
            if isinstance(entry, dict) and isinstance(entry.get("add"), dict):
                outcome = entry["add"]
                if isinstance(outcome.get("decision_id"), str):
                    pending[outcome["decision_id"]] = outcome
            elif isinstance(entry, dict) and isinstance(entry.get("ack"), list):
                for decision_id in entry["ack"]:
                    if isinstance(decision_id, str):
                        pending.pop(decision_id, None)
        return pending

    def _load(self, path: Path) -> list[Outcome]:
        self.pending = self._read(path)
        self._rewrite()
        if self.pending:
            log.warning("%d %s(s) left unacknowledged by the last run: reporting them",
                        len(self.pending), self.what)
        return list(self.pending.values())

    def take_recovered(self) -> list[Outcome]:
        """What the last run left unacknowledged, once (the first reporter on this journal sends it)."""
        recovered, self._recovered = self._recovered, []
        return recovered

    def add(self, outcome: Outcome) -> None:
        self.pending[outcome["decision_id"]] = outcome
        self._append({"add": outcome})

    def ack(self, decision_ids: list[str]) -> None:
        for decision_id in decision_ids:
            self.pending.pop(decision_id, None)
        if not self.pending:
            self._empty()
        elif self._lines > 2 * len(self.pending) + _COMPACT_SLACK:
            self._rewrite()
        else:
            self._append({"ack": decision_ids})

    def _append(self, entry: dict) -> None:
        if self.path is None:
            return
        line = (_ENCODE(entry) + "\n").encode("utf-8")
        try:
            if self._out is None:
                self._out = open(self.path, "ab", buffering=0)  # noqa: SIM115 - kept open across writes
            written = 0
            while written < len(line):
                written += self._out.write(line[written:])
            self._lines += 1
        except OSError as exc:  # the report still goes out; only its survival of a restart is lost
            self.close()  # opened again for the next write
            log.error("%s journal %s not written: %s", self.what, self.path, exc.strerror)

    def _empty(self) -> None:
        """Nothing is pending: the open file is cut to nothing in place (what it held is all settled, so a
        crash midway loses nothing), else rewritten empty."""
        if self._out is not None:
            try:
                self._out.truncate(0)
                self._lines = 0
                return
            except OSError:
                self.close()
        self._rewrite()

    def close(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            try:
                out.close()
            except OSError:
                pass

    def _rewrite(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        self.close()  # the replaced file's descriptor would append to the old file
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                for outcome in self.pending.values():
                    out.write(_ENCODE({"add": outcome}) + "\n")
            tmp.replace(self.path)
            self._lines = len(self.pending)
        except OSError as exc:
            log.error("%s journal %s not rewritten: %s", self.what, self.path, exc.strerror)


_OPEN: dict[str, OutcomeJournal] = {}


def journal_at(path: str, what: str = "outcome") -> OutcomeJournal:
    """One journal per file in this process: a reconfiguration's new reporter shares the old one's."""
    if not path:
        return OutcomeJournal(None, what)
    key = os.path.abspath(os.path.expanduser(path))
    if key not in _OPEN:
        _OPEN[key] = OutcomeJournal(Path(key), what)
    return _OPEN[key]
