"""Issue 27.8: the approval queue filtered by worker and by run (linked from each card, kept by the live
list and by the redirect after a decision), and the grant's description (why it asks) on the card, in
`approval list`/`approval show` and in the chat post."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from controlplane.approvals.models import Approval
from controlplane.conversations.chat_approvals import approval_post_text
from controlplane.fleet.services import run_create, worker_create
from controlplane.policy.models import Grant
from tests.web.conftest import open_approval
from tests.web.test_approval_views import LIST, QUEUE, _csrf_post, _decide_url, _login

pytestmark = pytest.mark.django_db

WHY = "Posting to the partner API sends data outside: a person checks each post."


@pytest.fixture
def three(worker):
    """alpha's run 1 and run 2, beta's run: one held request each."""
    beta = worker_create("beta")
    run_a1, _ = run_create(worker, command=["true"])
    run_a2, _ = run_create(worker, command=["true"])
    run_b, _ = run_create(beta, command=["true"])
    return {name: open_approval(run, url=f"https://api.example.com/{name}")
            for name, run in (("a1", run_a1), ("a2", run_a2), ("b", run_b))}


def _pending_ids(html: str) -> set[str]:
    pending = html.split('id="recent-heading"')[0]
    return {a for a in ("a1", "a2", "b") if f"https://api.example.com/{a}<" in pending}


def test_filter_by_worker_and_by_run(approver, three):
    client = _login(approver)
    assert _pending_ids(client.get(QUEUE).content.decode()) == {"a1", "a2", "b"}
    assert _pending_ids(client.get(QUEUE, {"worker": "alpha"}).content.decode()) == {"a1", "a2"}
    assert _pending_ids(client.get(QUEUE, {"worker": "beta"}).content.decode()) == {"b"}
    run = three["a2"].run_id
    html = client.get(QUEUE, {"run": run}).content.decode()
    assert _pending_ids(html) == {"a2"}
    assert f"run <strong class=\"filter-run\">{run}</strong>" in html and "Show every worker and run" in html
    # Both at once: a run of another worker shows nothing, not everything.
    assert _pending_ids(client.get(QUEUE, {"worker": "beta", "run": run}).content.decode()) == set()
    assert _pending_ids(client.get(QUEUE, {"worker": "nosuch"}).content.decode()) == set()


def test_the_live_list_keeps_the_filter(approver, three):
    client = _login(approver)
    html = client.get(QUEUE, {"worker": "beta"}).content.decode()
    assert f'data-list-url="{LIST}?worker=beta"' in html
    assert _pending_ids(client.get(LIST, {"worker": "beta"}).content.decode()) == {"b"}


def test_cards_link_to_their_worker_and_run_filter(approver, three):
    html = _login(approver).get(QUEUE).content.decode()
    assert f'href="{QUEUE}?worker=alpha"' in html and f'href="{QUEUE}?worker=beta"' in html
    assert f'href="{QUEUE}?run={three["b"].run_id}"' in html


@pytest.mark.parametrize("query", [{"run": "x1"}, {"run": "-3"}, {"run": "1" * 30}, {"worker": "a b"},
                                   {"worker": "<script>"}, {"worker": "w" * 65}])
def test_a_malformed_filter_is_refused_not_ignored(approver, three, query):
    client = _login(approver)
    for url in (QUEUE, LIST):
        response = client.get(url, query)
        assert response.status_code == 400 and response["Content-Type"].startswith("text/plain")


def test_the_filter_needs_the_view_permission(nobody, three):
    assert _login(nobody).get(QUEUE, {"worker": "alpha"}).status_code == 403


def test_after_a_decision_the_queue_comes_back_filtered(approver, three):
    client = _login(approver)
    response = _csrf_post(client, _decide_url(three["b"]) + "?worker=beta", {"action": "deny"})
    assert response.status_code == 302 and response["Location"] == f"{QUEUE}?worker=beta"
    three["b"].refresh_from_db()
    assert three["b"].status == Approval.Status.REFUSED
    # A bad filter on the way back is dropped (the decision stands), never a 400 after deciding.
    response = _csrf_post(client, _decide_url(three["a1"]) + "?run=zz", {"action": "deny"})
    assert response.status_code == 302 and response["Location"] == QUEUE


def test_approval_list_filters_too(three):
    out = io.StringIO()
    call_command("approval", "list", "--worker", "beta", stdout=out)
    assert str(three["b"].pk) in out.getvalue() and str(three["a1"].pk) not in out.getvalue()
    out = io.StringIO()
    call_command("approval", "list", "--run", str(three["a1"].run_id), stdout=out)
    assert str(three["a1"].pk) in out.getvalue() and str(three["a2"].pk) not in out.getvalue()


def _with_grant(run, description):
    grant = Grant.objects.create(slug="partner-post", host="api.example.com", schemes=["https"], mode="ask",
                                 description=description)
    approval = open_approval(run, grant_slug=grant.slug)
    Approval.objects.filter(pk=approval.pk).update(grant=grant)
    return Approval.objects.get(pk=approval.pk)


def test_the_card_says_why_the_grant_asks(approver, run):
    approval = _with_grant(run, WHY)
    html = _login(approver).get(QUEUE).content.decode()
    assert "Why it asks" in html and WHY in html
    out = io.StringIO()
    call_command("approval", "show", str(approval.pk), stdout=out)
    assert f"why      {WHY}" in out.getvalue()
    out = io.StringIO()
    call_command("approval", "list", stdout=out)
    assert WHY in out.getvalue()
    assert f"Why the grant asks: {WHY}" in approval_post_text(approval)


def test_a_description_is_escaped_and_hidden_characters_shown(approver, run):
    _with_grant(run, "<b>check</b>\u202eevil")
    html = _login(approver).get(QUEUE).content.decode()
    assert "&lt;b&gt;check&lt;/b&gt;\\u202eevil" in html and "<b>check</b>" not in html


def test_no_description_says_so(approver, approval):
    html = _login(approver).get(QUEUE).content.decode()
    assert "(the grant has no description)" in html
    out = io.StringIO()
    call_command("approval", "show", str(approval.pk), stdout=out)
    assert "(the grant has no description)" in out.getvalue()


def test_approval_show_of_an_unknown_id_is_an_error():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no approval"):
        call_command("approval", "show", "not-a-uuid")
