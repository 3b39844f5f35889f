"""`run start|wait|logs|list|cancel|requeue|journal`: runs from the command line.

    run start WORKER [--proactive] [--timeout S] [--wait] -- COMMAND ARGS…   --wait: follow it to its end
    run start WORKER --agent "TASK" [--proactive] [--timeout S]   the worker's agent (its preset, chosen
                                              with `preset use` or in the admin; default: the reference agent)
    run wait ID [--timeout S]                             exit status 0 only if the run succeeded
    run logs ID
    run show ID                                           its status, and for a queued run why it waits and
                                                          its position in the queue
    run list [--worker NAME] [--status STATUS] [--limit N]   newest first, one line per run
    run cancel ID
    run requeue ID --user ADMIN                           repair: the same task with the same input origin,
                                                          a new run recorded as `repair` naming run ID
    run journal ID [--format jsonl|text]                  the run's journal from its model calls, one record
                                                          a line (docs/journal.md)
    run answer-sheet ID [--format json|csv]               what it saw, asked for and cost, who approved it,
                                                          each fact with its audit record (docs/audit.md)

There is no `run create`: a run exists to be dispatched into a box, and a queued run without one was
dispatched by the reaper anyway (its token then died with it). Tests create runs with the service.
"""

from __future__ import annotations

import json
import re
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from controlplane.core.errors import RosterError
from controlplane.core.terminal import one_line, shell_line
from controlplane.dispatch.admission import queue_state
from controlplane.dispatch.answer_sheet import answer_sheet, answer_sheet_csv
from controlplane.dispatch.cancelling import run_cancel
from controlplane.dispatch.requeue import run_requeue
from controlplane.dispatch.starting import run_start, run_start_agent
from controlplane.fleet.models import Run, Worker
from controlplane.fleet.output import STDERR, output_pieces
from controlplane.fleet.selectors import run_get, run_list, worker_get
from controlplane.journal.records import as_text, run_records


def _worker(name: str) -> Worker:
    try:
        return worker_get(name)
    except Worker.DoesNotExist as exc:
        raise CommandError(f"no worker named {name!r}") from exc


def _run(run_id: int) -> Run:
    try:
        return run_get(run_id)
    except Run.DoesNotExist as exc:
        raise CommandError(f"no run {run_id}") from exc


# C0 controls but newline and tab, DEL and C1: what a terminal would act on (a box's output is hostile).
_TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _inert(text: str) -> str:
    return _TERMINAL_CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


LIST_COLUMNS = ("ID", "WORKER", "ORIGIN", "STATUS", "STARTED (UTC)", "DURATION", "EXIT", "REASON", "COMMAND")


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


def _duration(run: Run) -> str:
    if run.started_at is None:
        return "-"
    seconds = int(((run.ended_at or timezone.now()) - run.started_at).total_seconds())
    text = f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s" if seconds >= 3600 else (
        f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s")
    return text + ("+" if run.ended_at is None else "")  # still going


def _reason(run: Run) -> str:
    """Why the run is where it is: its recorded reason, or for a queued run why it waits and where."""
    state = queue_state(run)
    return state.reason if state is not None else run.status_reason


def _list_row(run: Run) -> list[str]:
    started = f"{run.started_at:%Y-%m-%d %H:%M:%S}" if run.started_at else "-"
    exit_code = "-" if run.exit_code is None else str(run.exit_code)
    return [str(run.pk), run.worker.name, run.origin, run.status, started, _duration(run), exit_code,
            one_line(_reason(run), 100) or "-", shell_line(run.command) or "-"]


def _when(value) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value else "-"


def timeline_url(run_id: int) -> str:
    return f"{settings.ROSTER_WEB_BASE_URL.rstrip('/')}/runs/{run_id}/"


def _line(run: Run) -> str:
    reason = f" ({run.status_reason})" if run.status_reason else ""
    return f"run {run.pk}: {run.status}{reason}"


class Command(BaseCommand):
    help = "Create, start, watch and cancel runs."

    def create_parser(self, prog_name, subcommand, **kwargs):
        """Everything after the first `--` is the box's command, options included (argparse's own `--`
        handling does not reach through subcommands)."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parse = parser.parse_args

        def parse_args(args=None, namespace=None):
            args = list(args or [])
            tail = []
            if "--" in args:
                cut = args.index("--")
                args, tail = args[:cut], args[cut + 1:]
            parsed = parse(args, namespace)
            if getattr(parsed, "action", None) == "start":
                parsed.command = list(parsed.command) + tail
            elif tail:
                parser.error("only `run start` takes a command after --")
            return parsed

        parser.parse_args = parse_args
        return parser

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        start = sub.add_parser("start", help="start a run in a box")
        start.add_argument("worker")
        start.add_argument("--proactive", action="store_true", help="not filed by a human: budgets gate it")
        start.add_argument("--timeout", type=int, default=None, help="seconds before the box is killed")
        start.add_argument("--agent", metavar="TASK", default=None,
                           help="run the worker's agent (its preset; default the reference agent) on this "
                                "task")
        start.add_argument("--wait", action="store_true",
                           help="follow the run (its place in line, each state) to its end, as run wait")
        start.add_argument("command", nargs="*", help="-- COMMAND ARGS…")
        wait = sub.add_parser("wait", help="wait for a run to end")
        wait.add_argument("id", type=int)
        wait.add_argument("--timeout", type=float, default=None, help="give up after this many seconds")
        show = sub.add_parser("show", aliases=["status"], help="a run's status; a queued run's place in line")
        show.add_argument("id", type=int)
        logs = sub.add_parser("logs", help="print a run's captured output")
        logs.add_argument("id", type=int)
        logs.add_argument("--sources", action="store_true",
                          help="one stream on stdout, each line marked with its source (stdout or stderr)")
        listing = sub.add_parser("list", help="list runs, newest first")
        listing.add_argument("--worker", default=None)
        listing.add_argument("--status", default=None, choices=Run.Status.values)
        listing.add_argument("--limit", type=_positive, default=50, help="at most this many (newest first)")
        cancel = sub.add_parser("cancel", help="cancel a live run")
        cancel.add_argument("id", type=int)
        requeue = sub.add_parser("requeue", help="repair: run an ended run's task again (a new run)")
        requeue.add_argument("id", type=int)
        requeue.add_argument("--user", required=True, help="the admin asking for the repair")
        journal = sub.add_parser("journal", help="the run's journal, built from its model calls")
        journal.add_argument("id", type=int)
        journal.add_argument("--format", choices=("jsonl", "text"), default="jsonl")
        sheet = sub.add_parser("answer-sheet", help="what a run saw, asked for and cost, fact by fact")
        sheet.add_argument("id", type=int)
        sheet.add_argument("--format", choices=["json", "csv"], default="json")

    def handle(self, *args, action, **options):
        action = {"status": "show", "answer-sheet": "answer_sheet"}.get(action, action)
        try:
            getattr(self, f"do_{action}")(**options)
        except RosterError as exc:
            raise CommandError(str(exc)) from exc

    def do_journal(self, *, id, format, **_):  # noqa: A002 - argparse's names
        for record in run_records(_run(id)):
            # JSON escapes every control character; the text form makes them inert (a model's words are data).
            line = json.dumps(record, ensure_ascii=True) if format == "jsonl" else _inert(as_text(record))
            self.stdout.write(line)

    def do_answer_sheet(self, *, id, format, **_):  # noqa: A002 - the command's own argument names
        sheet = answer_sheet(_run(id))
        if format == "csv":
            self.stdout.write(answer_sheet_csv(sheet), ending="")
        else:
            self.stdout.write(json.dumps(sheet, indent=2, ensure_ascii=False, sort_keys=True))

    def do_start(self, *, worker, proactive, timeout, command, agent=None, wait=False, **_):
        if timeout is not None and timeout <= 0:
            raise CommandError("--timeout must be a positive number of seconds")
        if agent is not None:
            if command:
                raise CommandError("give either --agent TASK or a command after --, not both")
            if not agent.strip():
                raise CommandError("--agent needs a task")
            run = run_start_agent(_worker(worker), agent, proactive=proactive, timeout=timeout, filed_by=None)
        elif not command:
            raise CommandError("give the command after --, e.g. run start WORKER -- python3 -m agent")
        else:
            run = run_start(_worker(worker), command, proactive=proactive, timeout=timeout, filed_by=None)
        self.stdout.write(_line(run))
        # Where to look next, on stderr: stdout stays the one line scripts read.
        self.stderr.write(f"  timeline: {timeline_url(run.pk)}")
        if wait:
            self._follow(run.pk)
        elif run.is_live:
            self.stderr.write(f"  follow it: manage.py run wait {run.pk}; "
                              f"its output: manage.py run logs {run.pk}")

    def _follow(self, run_id: int) -> None:
        """Each change of the run's state (and, while queued, of its place in line) on stderr, then its end
        as `run wait` says it."""
        said = ""
        run = _run(run_id)
        while True:
            state = queue_state(run) if run.status == Run.Status.QUEUED else None
            now = f"{run.status}: {state.reason}" if state is not None else run.status
            if now != said:
                self.stderr.write(f"  run {run.pk} {now}")
                said = now
            if not run.is_live:
                break
            time.sleep(settings.ROSTER_RUN_WAIT_POLL_SECONDS)
            run = _run(run_id)
        if run.status != Run.Status.SUCCEEDED:
            raise CommandError(f"{_line(run)}: did not succeed")
        self.stdout.write(_line(run))

    def do_wait(self, *, id, timeout, **_):
        give_up = None if timeout is None else time.monotonic() + timeout
        run = _run(id)
        while run.is_live:
            if give_up is not None and time.monotonic() > give_up:
                raise CommandError(f"{_line(run)}; still live after {timeout}s")
            time.sleep(settings.ROSTER_RUN_WAIT_POLL_SECONDS)
            run = _run(id)
        if run.status != Run.Status.SUCCEEDED:
            raise CommandError(f"{_line(run)}: did not succeed")
        self.stdout.write(_line(run))

    def do_show(self, *, id, **_):
        run = _run(id)
        state = queue_state(run)
        self.stdout.write(f"run {run.pk}: {run.status}")
        rows = [("worker", run.worker.name), ("origin", run.origin), ("created", _when(run.created_at)),
                ("started", _when(run.started_at)), ("ended", _when(run.ended_at)),
                ("exit code", "-" if run.exit_code is None else str(run.exit_code)),
                ("command", shell_line(run.command) or "-")]
        if state is not None:
            rows += [("waiting", state.reason), ("position", f"{state.position} of {state.queued}"),
                     ("box slots", f"{state.live} of {state.limit} in use on this host")]
        elif run.status_reason:
            rows.append(("reason", one_line(run.status_reason, 300)))
        for name, value in rows:
            self.stdout.write(f"  {name + ':':<11}{_inert(value)}")

    def do_logs(self, *, id, sources=False, **_):
        """The box's output in arrival order, as `docker logs` gives it: what it wrote to stderr on stderr
        (each write flushed, so a terminal shows both in order), or marked per line with --sources."""
        run = _run(id)
        for source, text in output_pieces(run.output, run.output_sources):
            if sources:
                lines = text.splitlines(keepends=True)
                self.stdout.write("".join(f"{source} | {_inert(line)}" for line in lines), ending="")
                continue
            stream = self.stderr if source == STDERR else self.stdout
            stream.write(_inert(text), ending="")
            stream.flush()
        if run.output_truncated:
            self.stderr.write(f"[output truncated: the box printed more than the first "
                              f"{settings.ROSTER_RUN_MAX_OUTPUT_BYTES} bytes kept, or some was lost before "
                              "it was captured]")

    def do_list(self, *, worker, status, limit, **_):
        runs = run_list(worker=_worker(worker) if worker else None, status=status, limit=limit)
        self.stdout.write("\t".join(LIST_COLUMNS))
        for run in runs:
            self.stdout.write("\t".join(_list_row(run)))

    def do_requeue(self, *, id, user, **_):
        _run(id)
        person = get_user_model().objects.filter(username=user, is_active=True).first()
        if person is None:
            raise CommandError(f"no active user named {user!r}")
        new = run_requeue(id, by=person)
        self.stdout.write(f"{_line(new)}: requeue of run {id}")
        self.stderr.write(f"  timeline: {timeline_url(new.pk)}")

    def do_cancel(self, *, id, **_):
        _run(id)
        self.stdout.write(_line(run_cancel(id, by="command line")))
