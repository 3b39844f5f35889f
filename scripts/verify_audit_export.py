#!/usr/bin/env python3
"""Check a Roster audit export (JSONL from `manage.py audit export --format jsonl`) with nothing but
the Python standard library: every line's stored body must hash (SHA-256 over its exact bytes) to
its hash, and each body's prev must be the previous record's hash, from 32 zero bytes at seq 1.

    python3 verify_audit_export.py audit.jsonl            # a full export: seq 1, 2, 3, ... no gaps
    python3 verify_audit_export.py --partial audit.jsonl  # a filtered export: links checked where seqs touch
    python3 verify_audit_export.py --anchor 1000:<hash> audit.jsonl  # must still hold that record
    python3 verify_audit_export.py --checkpoint audit-checkpoints.jsonl \
        --public-keys audit-checkpoint.key.pub audit.jsonl  # must hold the latest checkpoint's record

Prints OK with the count and the head as SEQ:HASH, or the first broken line and what is wrong;
exits 1 if broken, 2 if it could not be checked. A file over 4 MB is checked on every CPU (--workers N
to choose: two worker processes per CPU): the per-line checks run in the workers, the links between lines
are followed here in file order, so the answer is the same as with --workers 1.

The rules themselves are the control plane's own (controlplane/audit/chain.py, standard library only),
loaded by path: from this checkout, or from a chain.py copied beside this file; so are the checkpoint
rules (checkpoint_format.py). The standard library has no Ed25519: a checkpoint's signature is checked
with the `cryptography` package when it can be imported; without it the check stops (exit 2) unless
--unsigned-checkpoint accepts checking the checkpoint's position only, which the answer then says."""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import json
import multiprocessing
import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _load(filename: str, module_name: str):
    for path in (_HERE / filename, _HERE.parent / "controlplane" / "audit" / filename):
        if path.is_file():
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # a dataclass looks its module up there
            spec.loader.exec_module(module)
            return module
    print(f"ERROR: the audit rules (controlplane/audit/{filename}) are neither in this checkout nor "
          f"beside this file ({_HERE}); copy {filename} next to it", file=sys.stderr)
    raise SystemExit(2)


chain = _load("chain.py", "roster_audit_chain")

Result = tuple[str | None, int, str]
# (problem or None, seq, hash, the body's prev) from the checks a line needs no neighbour for
Inspection = tuple[str | None, int, str, object]
PARALLEL_MIN_BYTES = 4 * 1024 * 1024  # smaller files are checked faster than worker processes start
BATCH_LINES = 2000


def inspect_line(line: str) -> Inspection:
    try:
        entry = json.loads(line)
        seq, body, stored_hash = entry["seq"], entry["body"], entry["hash"]
    except (ValueError, KeyError, TypeError):
        return "not an export line with seq, body and hash", -1, "", None
    if not isinstance(body, str) or not isinstance(seq, int) or isinstance(seq, bool):
        return "body must be a string and seq an integer", -1, "", None
    problem, digest, parsed = chain.record_problem(seq, body, stored_hash)
    return problem, seq, digest, None if parsed is None else parsed["prev"]


def link_problem(seq: int, body_prev, prev_seq: int | None, prev_hash: str | None,
                 partial: bool) -> str | None:
    """What is wrong with a sound line as the successor of the previous one, if anything. A filtered
    export (`partial`) may start anywhere and skip records: links are checked where seqs touch."""
    if partial and prev_seq is None:
        return None
    expected_seq = 1 if prev_seq is None else prev_seq + 1
    if partial and seq > expected_seq:
        return None
    return chain.link_problem(seq, body_prev, expected_seq, chain.GENESIS_PREV if prev_hash is None
                              else prev_hash)


def check_line(line: str, prev_seq: int | None, prev_hash: str | None, partial: bool) -> Result:
    """Return (problem or None, seq, hash) for one export line."""
    problem, seq, digest, body_prev = inspect_line(line)
    if problem is None:
        problem = link_problem(seq, body_prev, prev_seq, prev_hash, partial)
    return problem, seq, digest


def _batches(lines, size: int):
    batch = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class Walk:
    """Follows the export line by line: the links, the count, the anchor."""

    def __init__(self, partial: bool, anchor: tuple[int, str] | None):
        self.partial, self.anchor = partial, anchor
        self.prev_seq: int | None = None
        self.prev_hash: str | None = None
        self.count = 0
        self.anchor_seen = False

    def step(self, number: int, inspection: Inspection | None) -> str | None:
        """The message if this line (None: a blank one) is broken, else None."""
        if inspection is None:
            return None
        problem, seq, digest, body_prev = inspection
        if problem is None:
            problem = link_problem(seq, body_prev, self.prev_seq, self.prev_hash, self.partial)
        if problem is None and self.anchor and seq == self.anchor[0]:
            self.anchor_seen = True
            problem = chain.anchor_problem(seq, digest, self.anchor)
        if problem:
            return f"line {number} (seq {seq}): {problem}"
        self.prev_seq, self.prev_hash, self.count = seq, digest, self.count + 1
        return None

    def result(self) -> tuple[bool, str]:
        if self.count == 0:
            return False, "no records in the export"
        if self.anchor and not self.anchor_seen:
            return False, f"the export has no record seq {self.anchor[0]} named by the anchor"
        return True, chain.ok_message(self.count, self.prev_seq, self.prev_hash)


def _check_batch(lines: list[str], partial: bool, anchor):
    """In a worker. A sound line leaves the walk at its own (seq, hash) whatever came before, so every
    line after a batch's first non-blank one can be judged here; only that first line needs the state
    the caller holds. Returns ("sound", first index, its inspection, the walk after the batch) when
    nothing after the first line is wrong, else ("lines", every inspection) for the caller to walk."""
    found = [inspect_line(line) if line.strip() else None for line in lines]
    first = next((i for i, inspection in enumerate(found) if inspection is not None), None)
    if first is None:
        return "sound", None, None, None
    walk = Walk(partial, anchor)
    problem, walk.prev_seq, walk.prev_hash, _ = found[first]
    if problem is not None or any(walk.step(0, inspection) for inspection in found[first + 1:]):
        return "lines", found
    return "sound", first, found[first], (walk.prev_seq, walk.prev_hash, walk.count, walk.anchor_seen)


class WorkerDied(Exception):
    """A worker process ended before answering (killed, out of memory): the export was not judged."""


def _serve(tasks, results, partial: bool, anchor, callers_ends) -> None:
    """A worker: batches in, answers out, until told to stop (None) or either pipe closes (the caller
    has its answer, or is gone). First it closes the caller's ends of the pipes that a fork copied into
    it: holding its own answer pipe's reading end, or its task pipe's writing end, it would never see the
    caller go (blocked writing an answer nobody reads, or outliving a caller that was killed)."""
    for end in callers_ends:
        end.close()
    with contextlib.suppress(EOFError, OSError):
        while (batch := tasks.recv()) is not None:
            results.send(_check_batch(batch, partial, anchor))


class _Workers:
    """Worker processes, each with a pipe of its own each way. The caller holds no writing end of any
    answer pipe, so a worker that dies, even halfway through writing an answer, is seen at once as the end
    of its pipe: never a wait on a half-written answer, never a lock left held (a shared result queue
    can leave either behind). One batch at a time per worker, so neither side can wait on the other's
    full pipe."""

    def __init__(self, count: int, partial: bool, anchor) -> None:
        context = multiprocessing.get_context()
        self.pipes = []
        self.processes = []
        for _ in range(count):
            task_reader, task_writer = context.Pipe(duplex=False)
            result_reader, result_writer = context.Pipe(duplex=False)
            callers_ends = [end for pair in self.pipes for end in pair] + [task_writer, result_reader]
            process = context.Process(target=_serve, daemon=True,
                                      args=(task_reader, result_writer, partial, anchor, callers_ends))
            process.start()
            task_reader.close()
            result_writer.close()
            self.pipes.append((task_writer, result_reader))
            self.processes.append(process)

    def send(self, worker: int, batch: list[str]) -> None:
        try:
            self.pipes[worker][0].send(batch)
        except OSError as exc:
            raise WorkerDied(f"worker {worker} is gone") from exc

    def receive(self, worker: int):
        try:
            return self.pipes[worker][1].recv()
        except (EOFError, OSError) as exc:
            raise WorkerDied(f"worker {worker} ended before answering") from exc

    def close(self) -> None:
        for (tasks, results), process in zip(self.pipes, self.processes, strict=True):
            with contextlib.suppress(OSError):
                tasks.send(None)
            tasks.close()
            results.close()  # nothing is read any more: a worker still writing gets a broken pipe
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()


def _verify_in_workers(lines, walk: Walk, workers: int, batch_lines: int) -> str | None:
    """Batches of lines checked in worker processes (batch k by worker k mod N), taken in file order.
    Two processes per worker asked for: each holds one batch at a time, so while this process reads one
    answer the CPU's other process is already on its next batch."""
    number = 0
    workers *= 2
    pool = _Workers(workers, walk.partial, walk.anchor)
    try:
        pending = collections.deque()  # (batch size, worker) in file order
        batches = _batches(lines, batch_lines)
        for worker in range(workers):
            if (batch := next(batches, None)) is None:
                break
            pool.send(worker, batch)
            pending.append((len(batch), worker))
        while pending:
            size, worker = pending.popleft()
            answer = pool.receive(worker)
            if (batch := next(batches, None)) is not None:
                pool.send(worker, batch)
                pending.append((len(batch), worker))
            if answer[0] == "lines":
                for offset, inspection in enumerate(answer[1], start=1):
                    if message := walk.step(number + offset, inspection):
                        return message
            elif answer[1] is not None:
                _, first, inspection, (last_seq, last_hash, count, anchor_seen) = answer
                if message := walk.step(number + first + 1, inspection):
                    return message
                walk.prev_seq, walk.prev_hash = last_seq, last_hash
                walk.count += count
                walk.anchor_seen = walk.anchor_seen or anchor_seen
            number += size
        return None
    finally:
        pool.close()


def verify(lines, partial: bool = False, anchor: tuple[int, str] | None = None,
           workers: int = 1, batch_lines: int = BATCH_LINES) -> tuple[bool, str]:
    walk = Walk(partial, anchor)
    if workers > 1:
        message = _verify_in_workers(lines, walk, workers, batch_lines)
        return (False, message) if message else walk.result()
    for number, line in enumerate(lines, start=1):
        if message := walk.step(number, inspect_line(line) if line.strip() else None):
            return False, message
    return walk.result()


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _anchor(text: str) -> tuple[int, str]:
    seq, _, digest = text.partition(":")
    if not seq.isdigit() or len(digest) != 64:
        raise argparse.ArgumentTypeError("SEQ:HASH, as printed by an earlier verify")
    return int(seq), digest.lower()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="JSONL export file, or - for stdin")
    parser.add_argument("--partial", action="store_true", help="the export was filtered (gaps allowed)")
    parser.add_argument("--anchor", type=_anchor, help="SEQ:HASH that must be in the export (detects a "
                        "chain cut short)")
    parser.add_argument("--workers", type=int, default=0, help="CPUs for the per-line checks, "
                        "two worker processes each (default: every CPU for a file over 4 MB; 1: no workers)")
    parser.add_argument("--checkpoint", help="checkpoint log: the export must hold its latest checkpoint")
    parser.add_argument("--public-keys", help="the checkpoint public keys file (KEY_ID BASE64 lines)")
    parser.add_argument("--unsigned-checkpoint", action="store_true",
                        help="without the cryptography package: check the checkpoint's position only")
    parser.add_argument("--batch-lines", type=int, default=BATCH_LINES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workers < 0 or args.batch_lines < 1:
        parser.error("--workers is 0 or more and --batch-lines 1 or more")
    checkpoint, note = None, ""
    if args.checkpoint:
        if args.anchor:
            parser.error("--anchor or --checkpoint, not both")
        try:
            checkpoint, note = _checkpoint(args)
        except SystemExit:
            raise
        except Exception as exc:  # CheckpointError, from a module loaded by path
            print(f"BROKEN: {exc}")
            return 1
        if checkpoint is None:
            print(f"ERROR: the checkpoint log {args.checkpoint} holds no checkpoint", file=sys.stderr)
            return 2
        args.anchor = (checkpoint["seq"], checkpoint["head"]) if checkpoint["seq"] else None
    try:
        if args.path == "-":
            workers = args.workers or 1
            ok, message = verify(sys.stdin, args.partial, args.anchor, workers, args.batch_lines)
        else:
            big = os.path.getsize(args.path) >= PARALLEL_MIN_BYTES
            workers = args.workers or (_usable_cpus() if big else 1)
            with open(args.path, encoding="utf-8") as fh:
                ok, message = verify(fh, args.partial, args.anchor, workers, args.batch_lines)
    except WorkerDied:
        # Not "broken" (exit 1): the export was not judged at all.
        print("ERROR: a worker process died before answering; the export was not verified "
              "(run it again, or with --workers 1)", file=sys.stderr)
        return 2
    print(message + note if ok else f"BROKEN: {message}")
    return 0 if ok else 1


def _checkpoint(args) -> tuple[dict | None, str]:
    fmt = _load("checkpoint_format.py", "roster_audit_checkpoint_format")
    if fmt.signature_checking_available():
        if not args.public_keys:
            print("ERROR: --checkpoint needs --public-keys (the checkpoint key's public half)",
                  file=sys.stderr)
            raise SystemExit(2)
        checkpoint = fmt.latest(Path(args.checkpoint), fmt.load_public_keys(Path(args.public_keys)))
        signed = "signature checked"
    elif args.unsigned_checkpoint:
        checkpoint = fmt.latest(Path(args.checkpoint), None)
        signed = "signature NOT checked: no cryptography package"
    else:
        print("ERROR: cannot check the checkpoint's Ed25519 signature: the cryptography package is not "
              "importable here (the standard library has no Ed25519). Install it (pip install "
              "cryptography), or pass --unsigned-checkpoint to check the checkpoint's position only",
              file=sys.stderr)
        raise SystemExit(2)
    if checkpoint is None:
        return None, ""
    return checkpoint, (f"; checkpoint seq {checkpoint['seq']} of {checkpoint['time']} (key "
                        f"{checkpoint['key']}, {signed}) holds")


if __name__ == "__main__":
    sys.exit(main())
