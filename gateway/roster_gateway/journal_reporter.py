"""The run journal's model calls on their way to the control plane (docs/journal.md): the outcome
reporter's machinery (outcomes.py: batches, one in flight, retried until answered) over its own on-disk
journal, `roster_model_journal` (model-journal.jsonl in the gateway's state dir): an entry is written
there before it is sent and marked done once the control plane has stored it ("ok"), or has nothing to
store it under ("unknown", "already_settled"); a gateway that starts again sends what is left. Entries
carry bodies, so batches are small (JOURNAL_BATCH_MAX: the control plane's request limit is sized for it)."""

from __future__ import annotations

from roster_gateway.outcomes import OutcomeReporter

# The control plane accepts this many journal entries per POST /journal (docs/wire.md).
JOURNAL_BATCH_MAX = 4


class JournalReporter(OutcomeReporter):
    def send(self, entry: dict) -> None:
        """Keep `entry` (model_journal.finish) on disk and queue it for POST /journal."""
        self._journal.add(entry)
        self._queue.append(entry)
        if len(self._queue) >= self._max_batch:
            self._full.set()
        if self._sender is None:
            self._sender = self._spawn(self._send_all())

    async def _post(self, batch: list[dict]) -> list[str]:
        return await self._client.journal(batch)
