"""`make demo`'s set-up and report without Docker: exactly three grants and a destination for the demo
worker, and a summary read from the records (a CONNECT's tunnel check is not a request the run made)."""

from __future__ import annotations

from controlplane.audit.services import audit_append
from controlplane.demo import scenario as demo
from controlplane.demo.report import run_facts, summary_line
from controlplane.fleet.services import run_create, worker_create
from controlplane.ledger.models import SpendLine
from controlplane.policy.models import Grant
from controlplane.proposals.models import Destination
from controlplane.vault.models import Secret

PORTS = demo.DemoPorts(model=18091, docs=18092, ask=18093, hook=18094)


def test_setup_gives_the_demo_worker_exactly_its_three_grants(db):
    worker = worker_create(demo.WORKER)
    Grant.objects.create(slug="leftover", worker=worker, host="example.org")
    worker, grants = demo.demo_setup(PORTS, "sk-demo-made-up")
    by_slug = {g.slug: g for g in Grant.objects.filter(worker=worker)}
    assert set(by_slug) == {demo.MODEL_GRANT, demo.DOCS_GRANT, demo.ASK_GRANT}
    model = by_slug[demo.MODEL_GRANT]
    assert model.secret.name == demo.MODEL_SECRET and model.trace and model.inject_header == "authorization"
    assert (model.host, model.port, model.paths) == ("127.0.0.1", 18091, ["/v1/chat/completions"])
    assert by_slug[demo.ASK_GRANT].mode == Grant.Mode.ASK and by_slug[demo.DOCS_GRANT].mode == Grant.Mode.AUTO
    assert Secret.objects.get(name=demo.MODEL_SECRET).kind == "openai"
    assert Destination.objects.get(name=demo.DESTINATION).url == "http://127.0.0.1:18094/hook"
    demo.demo_setup(PORTS, "sk-demo-another")  # idempotent: a second demo reuses the worker
    assert Grant.objects.filter(worker=worker).count() == 3


def test_the_summary_comes_from_the_records(db):
    worker = worker_create(demo.WORKER)
    run, _ = run_create(worker, command=["true"])

    def decision(verdict, method, url, grant=None, reason=""):
        audit_append("decision", {"decision_id": url, "method": method, "url": url, "grant": grant},
                     run=run, worker=worker, verdict=verdict, reason=reason)

    decision("allow", "POST", "http://127.0.0.1:18091/v1/chat/completions", demo.MODEL_GRANT)
    decision("allow", "POST", "http://127.0.0.1:18091/v1/chat/completions", demo.MODEL_GRANT)
    decision("allow", "GET", "http://127.0.0.1:18092/docs/notes.txt", demo.DOCS_GRANT)
    decision("deny", "CONNECT", "tunnel://exfil.example.net:443", reason="no_grant")
    decision("deny", "GET", "https://exfil.example.net/x", reason="no_grant")
    audit_append("proposal", {"proposal": "p1", "event": "executed"}, run=run, worker=worker)
    SpendLine.objects.create(worker=worker, run=run, kind="settle", unit="tokens", amount=1234)
    facts = run_facts(run, demo.MODEL_GRANT)
    assert [d["method"] for d in facts.decisions] == ["POST", "POST", "GET", "GET"]
    assert summary_line(facts, True) == (
        "demo: 2 model calls, 1234 tokens metered, 3 allowed, 1 denied, 1 proposals executed, audit OK")
    assert summary_line(facts, False).endswith("audit BROKEN")
