"""The participant scan (issue 26.3, invariant 1's "a tripwire, not a wall"): a knowledge change, or a note
for the whole worker, that names someone who was in the room of the runs that fed the proposing run (their
chat id, display name or handle) is held for a person, with the hits on the card. It catches the careless
copy, not a paraphrase: the wall is the read-only mount of a run that carried conversation content
(docs/knowledge.md). Registered into proposals' holds by the knowledge app."""

from __future__ import annotations

import re

from controlplane.fleet.models import Run
from controlplane.proposals.models import Proposal

MIN_TERM = 3  # shorter names and handles would hold nearly everything
FED_DEPTH = 5  # how far back along requeues and follow-ups the scan looks for the runs that fed this one


def _feeding_runs(run: Run) -> list[Run]:
    """The run and the runs it came from: the one it requeues and the one whose follow-up started it."""
    runs, current = [run], run
    for _ in range(FED_DEPTH):
        parent = None
        if current.requeue_of_id:
            parent = Run.objects.filter(pk=current.requeue_of_id).first()
        elif current.origin == Run.Origin.PROACTIVE:
            started = (Proposal.objects.filter(kind=Proposal.Kind.FOLLOW_UP, worker_id=current.worker_id,
                                               result__summary__startswith=f"run {current.pk} ")
                       .select_related("run").first())
            parent = started.run if started else None
        if parent is None or parent in runs:
            break
        runs.append(parent)
        current = parent
    return runs


def people_of(proposal) -> list[dict]:
    people = {}
    for p in list(proposal.participants or []):
        if isinstance(p, dict) and p.get("id"):
            people.setdefault(str(p["id"]), p)
    for run in _feeding_runs(proposal.run)[1:]:
        for p in run.participants or []:
            if isinstance(p, dict) and p.get("id"):
                people.setdefault(str(p["id"]), p)
    return list(people.values())


def terms_for(person: dict) -> list[str]:
    """A person's chat id, display name and handle (the id's local part: @ana:example.org -> ana)."""
    chat_id, name = str(person.get("id", "")), str(person.get("name", "") or "")
    handle = chat_id.lstrip("@").split(":", 1)[0].split("@", 1)[0]
    terms = {t.strip() for t in (chat_id, name, handle) if t and len(t.strip()) >= MIN_TERM}
    return sorted(terms, key=len, reverse=True)


def _found(term: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", text, re.IGNORECASE) is not None


def hits_in(texts: list[tuple[str, str]], people: list[dict]) -> list[dict]:
    hits, seen = [], set()
    for person in people:
        for term in terms_for(person):  # longest first: one hit per person and place
            for where, text in texts:
                key = (str(person.get("id")), where)
                if key not in seen and _found(term, text):
                    seen.add(key)
                    hits.append({"who": key[0], "term": term, "where": where})
    return hits


def knowledge_change_hits(proposal) -> list[dict]:
    texts = []
    for entry in (proposal.payload or {}).get("files") or []:
        texts.append((f"the path {entry.get('path', '')}", str(entry.get("path", ""))))
        if entry.get("content") is not None:
            texts.append((str(entry.get("path", "")), str(entry["content"])))
    return hits_in(texts, people_of(proposal))


def worker_note_hits(proposal) -> list[dict]:
    payload = proposal.payload or {}
    if payload.get("scope") != "worker":
        return []  # a person or channel note is about the room by design: memory's scope rules govern it
    return hits_in([("the note", str(payload.get("text", "")))], people_of(proposal))
