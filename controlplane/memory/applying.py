"""The executor of `memory_note` proposals (registered by this app's AppConfig): the box writes notes only
by proposing them; once a rule or a person allows one, the trusted side writes it with the proposing run's
provenance. The channel is the run's own conversation and a person note may name only someone who was in
that room: the box cannot file a note about anyone, anywhere else."""

from __future__ import annotations

from controlplane.conversations.selectors import conversation_for_run
from controlplane.memory.services import NoteInvalid, note_write
from controlplane.proposals.executors import Outcome


def memory_note(proposal, credential: str | None) -> Outcome:
    payload = proposal.payload
    scope = str(payload.get("scope", ""))
    person = str(payload.get("person") or "")
    run = proposal.run
    conversation = conversation_for_run(run) if scope != "worker" else None
    channel = conversation["channel"] if conversation else ""
    in_room = {str(p.get("id")) for p in proposal.participants or [] if isinstance(p, dict)}
    if scope == "person" and person not in in_room:
        return Outcome(ok=False, transient=False, summary="not in the room",
                       detail="a person note names someone in the proposing run's conversation")
    try:
        note = note_write(proposal.worker, scope, str(payload.get("text", "")), channel=channel,
                          person=person, run=run, participants=proposal.participants,
                          untrusted=bool(proposal.untrusted), proposal_id=proposal.pk)
    except NoteInvalid as exc:
        return Outcome(ok=False, transient=False, summary="note refused", detail=str(exc))
    return Outcome(ok=True, transient=False, summary=f"note {note.pk} written ({note.scope_label})")
