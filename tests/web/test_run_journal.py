"""The run timeline's journal section (docs/journal.md): each model turn with its records, the request as
the upstream received it (masked headers, body) and the response, as quoted data (escaped, never markup);
shown with the timeline's permission, refused without it."""

from __future__ import annotations

import json
import time

from django.test import Client

from controlplane.fleet.sql import run_decision_insert
from controlplane.journal.services import Part, call_store
from tests.web.conftest import PASSWORD

REQUEST = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "<script>x()</script>"}]})
RESPONSE = json.dumps({"choices": [{"message": {"role": "assistant", "content": "<b>bold</b> answer"}}]})


def _journal(run) -> None:
    run_decision_insert(decision_id="dc_web1", run_id=run.pk, grant_slug="openai-chat", result_class=1,
                        untrusted=True, trace=False, method="POST",
                        url="https://api.openai.com/v1/chat/completions", secret_name="openai")
    headers = [["authorization", "Bearer sk-roster-SENTINEL"], ["content-type", "application/json"]]
    now = time.time()
    assert call_store("dc_web1", now, now + 1, "POST", "https://api.openai.com/v1/chat/completions",
                      Part(REQUEST.encode(), len(REQUEST), masked=1, headers=headers),
                      Part(RESPONSE.encode(), len(RESPONSE), status=200)) == "ok"


def _get(user, run):
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client.get(f"/runs/{run.pk}/")


def test_the_timeline_shows_each_model_turn_quoted(auditor, run):
    _journal(run)
    html = _get(auditor, run).content.decode()
    section = html[html.index('id="journal-heading"'):]
    assert "POST https://api.openai.com/v1/chat/completions" in section
    assert "authorization: Bearer sk-roster-SENTINEL" in section and "1 credential masked" in section
    assert "&lt;script&gt;x()&lt;/script&gt;" in section and "<script>x()" not in html
    assert "&lt;b&gt;bold&lt;/b&gt; answer" in section and "<b>bold</b>" not in html
    assert "assistant (200)" in section and "session start" in section


def test_a_run_without_journaled_calls_says_so(auditor, run):
    assert "No model call journaled for this run." in _get(auditor, run).content.decode()


def test_without_the_timelines_permission_the_journal_is_not_shown(nobody, run):
    _journal(run)
    response = _get(nobody, run)
    assert response.status_code == 403 and b"bold" not in response.content
