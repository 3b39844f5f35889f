"""A separate process that hits the ledger or the audit chain, for concurrency and restart tests:
`python -m tests.ledger.hammer reserve|append|totals ...` with DATABASE_URL naming the test database.
Prints one JSON line with what it did."""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()


def concurrently(fn, items, threads: int) -> list:
    """Run fn over items on `threads` threads, each keeping one database connection for all its items
    and closing it at the end (a connection per item would make the test measure connects)."""
    from django.db import connection

    todo: queue.Queue = queue.Queue()
    for item in items:
        todo.put(item)
    results, errors = [], []

    def work():
        try:
            while True:
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                results.append(fn(item))
        except Exception as exc:  # noqa: BLE001 - reported to the caller below
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    return results


def decide(worker_name: str, decision_id: str, model_call=None) -> bool:
    """One governed call the way the decision path does it: reserve, then the decision's audit record,
    both in one transaction. Returns whether it was allowed."""
    from django.db import transaction

    from controlplane.audit.services import audit_append
    from controlplane.fleet.models import Worker
    from controlplane.ledger.services import reserve
    from controlplane.ledger.types import Reservation

    worker = Worker.objects.get(name=worker_name)
    with transaction.atomic():
        result = reserve(worker=worker, run=None, grant_slug="g", decision_id=decision_id, cost_micro=1,
                         origin="proactive", model_call=model_call)
        allowed = isinstance(result, Reservation)
        audit_append("decision", {"decision_id": decision_id}, worker=worker_name,
                     verdict="allow" if allowed else "deny", reason="" if allowed else "over_budget")
    return allowed


def model_call(worker_name: str, decision_id: str, *, input_estimate: int = 50, max_output: int = 100,
               used_output: int = 40, stream_seconds: float = 0.0) -> bool:
    """One model call the way the gateway and decision path do it: reserve the worst case with the
    decision, "stream" for a while with nothing held, then settle the usage the response reported."""
    import time

    from controlplane.ledger.services import settle
    from controlplane.ledger.types import ModelCallFacts, TokenUsage

    facts = ModelCallFacts(api="chat", model="gpt-test", stream=True, max_output_tokens=max_output, choices=1,
                           input_estimate=input_estimate)
    if not decide(worker_name, decision_id, model_call=facts):
        return False
    time.sleep(stream_seconds)
    settle(decision_id, 10, 100, TokenUsage(known=True, model="gpt-test", input=input_estimate // 2,
                                             output=used_output))
    return True


def append(tag: str) -> None:
    from django.db import transaction

    from controlplane.audit.services import audit_append

    with transaction.atomic():
        audit_append("decision", {"tag": tag})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=["reserve", "model", "append", "totals"])
    parser.add_argument("--worker", default="")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prefix", default="p")
    args = parser.parse_args(argv)
    _setup()
    if args.action == "totals":
        from controlplane.ledger.selectors import cap_statuses

        print(json.dumps([s.as_dict() for s in cap_statuses()]))
        return 0
    items = [f"{args.prefix}-{i}" for i in range(args.count)]
    if args.action == "reserve":
        allowed = sum(concurrently(lambda d: decide(args.worker, d), items, args.threads))
        print(json.dumps({"allowed": allowed, "denied": args.count - allowed}))
    elif args.action == "model":
        allowed = sum(concurrently(lambda d: model_call(args.worker, d), items, args.threads))
        print(json.dumps({"allowed": allowed, "denied": args.count - allowed}))
    else:
        concurrently(append, items, args.threads)
        print(json.dumps({"appended": args.count}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
