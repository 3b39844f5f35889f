"""The participant scan (issue 26.3): a tripwire, not a wall (docs/knowledge.md). A knowledge change or a
worker note naming someone who was in the room of the runs that fed the proposing run is held for a person
with the hits shown, whatever a rule says; an unrelated one (or a paraphrase) passes."""

from __future__ import annotations

from controlplane.fleet.models import Run
from controlplane.knowledge.checkout import checkout_collect
from controlplane.proposals.models import Proposal, TrustRule
from tests.knowledge.conftest import ANA


def _rule(worker, kind="knowledge_change"):
    TrustRule.objects.create(name=f"r-{kind}", worker=worker, kind=kind, max_per_day=10)


def test_a_change_naming_a_participant_is_held_with_the_hits(
        checkout_of, worker, django_capture_on_commit_callbacks):
    _rule(worker)
    run, where = checkout_of(participants=[ANA])
    (where / "people.md").write_text("ana lima asked about the mirror.\n")
    with django_capture_on_commit_callbacks(execute=True):
        checkout_collect(run.pk, where)
    proposal = Proposal.objects.get()
    assert proposal.status == "pending" and proposal.channel == ""
    assert proposal.held == [{"who": ANA["id"], "term": "Ana Lima", "where": "people.md"}]


def test_the_handle_and_a_path_are_scanned_too(checkout_of):
    run, where = checkout_of(participants=[ANA])
    (where / "ana").mkdir()
    (where / "ana" / "x.md").write_text("see @ana:example.org")
    checkout_collect(run.pk, where)
    held = Proposal.objects.get().held
    assert {h["where"] for h in held} == {"the path ana/x.md", "ana/x.md"}


def test_an_unrelated_change_and_a_paraphrase_pass(checkout_of, worker, django_capture_on_commit_callbacks):
    _rule(worker)
    run, where = checkout_of(participants=[ANA])
    (where / "hosts.md").write_text("The member from the ops room prefers banana bread.\n")
    with django_capture_on_commit_callbacks(execute=True):
        checkout_collect(run.pk, where)
    proposal = Proposal.objects.get()
    assert proposal.held == [] and proposal.status == "executed"


def test_the_room_of_the_run_it_requeues_feeds_it(checkout_of):
    run, where = checkout_of()
    original, _ = checkout_of(participants=[ANA])
    Run.objects.filter(pk=run.pk).update(requeue_of=original)
    (where / "n.md").write_text("Ana Lima")
    checkout_collect(run.pk, where)
    assert Proposal.objects.get(run=run).held[0]["who"] == ANA["id"]


def test_a_worker_note_naming_a_participant_is_held_a_person_note_is_not_scanned(
        gw, token, live_run, worker):
    _rule(worker, "memory_note")
    run, _ = live_run
    Run.objects.filter(pk=run.pk).update(participants=[ANA])
    status, body = gw.propose(token, {"kind": "memory_note", "payload": {"scope": "worker",
                                                                       "text": "Ana Lima runs the mirror."}})
    assert status == 201 and body["status"] == "pending"
    assert Proposal.objects.get(pk=body["id"]).held[0]["term"] == "Ana Lima"
    status, body = gw.propose(token, {"kind": "memory_note", "payload": {"scope": "worker",
                                                                       "text": "The mirror moved."}})
    assert status == 201 and body["status"] != "pending"


def test_the_card_shows_the_hits_and_the_files(checkout_of, approver, client):
    run, where = checkout_of(participants=[ANA])
    (where / "people.md").write_text("Ana Lima asked about the mirror.\n")
    checkout_collect(run.pk, where)
    client.force_login(approver)
    page = client.get("/approvals/").content.decode()
    assert "Held for a person by the participant scan" in page and "<code>Ana Lima</code>" in page
    assert "knowledge-preview" in page and "people.md" in page and "asked about the mirror" in page
