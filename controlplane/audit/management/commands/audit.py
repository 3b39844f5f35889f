"""`manage.py audit verify`, `manage.py audit checkpoint [--rotate-key]` and
`manage.py audit export --format csv|jsonl [filters]`."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys

from django.core.management.base import BaseCommand, CommandError

from controlplane.audit import checkpoints
from controlplane.audit.export import csv_rows, filtered_records, jsonl_lines
from controlplane.audit.verify import verify_database

# The option parsers raise ArgumentTypeError, not CommandError: Django parses the command line before it
# catches CommandError, so one raised here was a 40-line traceback; argparse turns this into its usage
# line and one error line (exit 2).

def _moment(text: str) -> dt.datetime:
    """ISO 8601 date or date-time; without an offset it is UTC."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from exc
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


HEX = frozenset("0123456789abcdef")


def _anchor(text: str) -> tuple[int, str]:
    seq, _, digest = text.partition(":")
    if not seq.isdigit() or int(seq) < 1 or len(digest) != 64 or any(c not in HEX for c in digest.lower()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not SEQ:HASH (e.g. 1000:<64 hex digits> from an earlier verify)")
    return int(seq), digest.lower()


def _workers(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0: one per CPU)")
    return int(text)


class Command(BaseCommand):
    help = "Verify the audit chain, or export it (streaming) as CSV or JSONL."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        verify = sub.add_parser("verify", help="re-hash every record and check the chain; exit 1 if broken")
        verify.add_argument("--anchor", type=_anchor,
                            help="SEQ:HASH from an earlier verify; detects records cut off the end "
                                 "(default: the latest signed checkpoint)")
        verify.add_argument("--workers", type=_workers,
                            help="worker processes (default ROSTER_AUDIT_VERIFY_WORKERS; 0: one per CPU, "
                                 "1: in this process)")
        checkpoint = sub.add_parser("checkpoint", help="verify the chain, sign its length and head, append "
                                    "the signed line to the checkpoint log and record it in the chain")
        checkpoint.add_argument("--rotate-key", action="store_true",
                                help="first make a new signing key (old checkpoints stay verifiable)")
        export = sub.add_parser("export", help="write records to stdout or --output")
        export.add_argument("--format", choices=["csv", "jsonl"], default="jsonl")
        export.add_argument("--output", help="file to write (default: stdout)")
        export.add_argument("--since", type=_moment, help="records at or after this time (UTC)")
        export.add_argument("--until", type=_moment, help="records at or before this time (UTC)")
        export.add_argument("--worker")
        export.add_argument("--run", type=int)
        export.add_argument("--kind")
        export.add_argument("--verdict")

    def handle(self, *args, **opts):
        if opts["action"] == "verify":
            return self._verify(opts.get("anchor"), opts.get("workers"))
        if opts["action"] == "checkpoint":
            return self._checkpoint(opts["rotate_key"])
        return self._export(opts)

    def _checkpoint(self, rotate: bool):
        try:
            if rotate:
                self.stdout.write(f"new checkpoint key {checkpoints.rotate_key()} "
                                  f"(public keys: {checkpoints.public_keys_path()})")
            statement = checkpoints.make_checkpoint(by="cli")
        except checkpoints.CheckpointError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"checkpoint: seq {statement['seq']} head {statement['head']} signed by key "
                          f"{statement['key']}, appended to {checkpoints.log_path()}")

    def _verify(self, anchor, workers):
        note = None
        if anchor is None:
            try:
                result, note = checkpoints.verify_against_latest(workers)
            except checkpoints.CheckpointError as exc:
                self.stderr.write(f"BROKEN: {exc}")
                sys.exit(1)
        else:
            result = verify_database(anchor, workers=workers)
        if result.ok:
            self.stdout.write(result.message)
            if note:
                self.stdout.write(note)
            return
        self.stderr.write(f"BROKEN after {result.checked} good records: {result.message}")
        sys.exit(1)

    def _export(self, opts):
        if opts["since"] and opts["until"] and opts["since"] > opts["until"]:
            raise CommandError("--since is after --until: no time is in that range")
        records = filtered_records(since=opts["since"], until=opts["until"], worker=opts["worker"],
                                   run=opts["run"], kind=opts["kind"], verdict=opts["verdict"])
        chunks = csv_rows(records) if opts["format"] == "csv" else jsonl_lines(records)
        if opts["output"]:
            newline = "" if opts["format"] == "csv" else "\n"
            with open(opts["output"], "w", encoding="utf-8", newline=newline) as out:
                out.writelines(chunks)
        else:
            try:
                for chunk in chunks:
                    self.stdout.write(chunk, ending="")
                self.stdout.flush()
            except BrokenPipeError:
                # The reader stopped (`| head`): not an error. Close the records' cursor while the database
                # is still open (left to the collector it complained at exit), and point stdout at
                # /dev/null so the interpreter's own flush at exit does not raise again.
                chunks.close()
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
