"""Trying a request: which grant decides it and why, under full precedence, with a draft applied; the
`grants test` command. Nothing is decided for real: no approval, no spend, no audit record."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.audit.models import AuditRecord
from controlplane.policy import trial
from controlplane.policy.engine import GrantRule
from controlplane.policy.models import Grant


@pytest.fixture
def grants(worker):
    Grant.objects.create(slug="api-read", worker=worker, host="api.example.com", methods=["GET"],
                         paths=["/v1/**"], mode="auto")
    Grant.objects.create(slug="api-admin-wall", worker=None, host="api.example.com", paths=["/v1/admin/**"],
                         mode="deny")
    Grant.objects.create(slug="api-post-ask", worker=worker, host="api.example.com", methods=["POST"],
                         mode="ask")
    Grant.objects.create(slug="old", worker=worker, host="old.example.com", mode="auto",
                         expires_at=timezone.now() - timedelta(days=1))
    Grant.objects.create(slug="off", worker=worker, host="off.example.com", mode="auto", enabled=False)


@pytest.mark.parametrize("method, url, verdict, reason, grant", [
    ("GET", "https://api.example.com/v1/items", "allow", None, "api-read"),
    ("GET", "https://api.example.com/v1/admin/users", "deny", "denied_by_grant", "api-admin-wall"),
    ("POST", "https://api.example.com/v1/items", "ask", None, "api-post-ask"),
    ("GET", "https://old.example.com/", "deny", "grant_expired", "old"),
    ("GET", "https://off.example.com/", "deny", "no_grant", None),
    ("GET", "https://elsewhere.example/", "deny", "no_grant", None),
])
def test_which_grant_decides(worker, grants, method, url, verdict, reason, grant):
    before = (AuditRecord.objects.count(), Approval.objects.count())
    result = trial.try_request(worker, method, url)
    assert (result.verdict, result.reason, result.grant) == (verdict, reason, grant)
    assert (AuditRecord.objects.count(), Approval.objects.count()) == before  # read-only


def test_the_explanation_lists_every_matching_grant(worker, grants):
    result = trial.try_request(worker, "GET", "https://api.example.com/v1/admin/users")
    assert {c.slug for c in result.candidates} == {"api-read", "api-admin-wall"}
    lines = trial.explain(result)
    assert lines[0].endswith("deny (denied_by_grant) by grant api-admin-wall")
    assert any(line.startswith("  * api-admin-wall") for line in lines)
    off = trial.try_request(worker, "GET", "https://off.example.com/")
    assert [c.note for c in off.candidates] == ["would match, but is disabled"]


def test_draft_changes_apply_without_saving(worker, grants):
    draft = GrantRule(slug="api-read", worker_id=worker.pk, host="api.example.com", methods=("GET",),
                      paths=("/v2/**",), mode="auto")
    rules = trial.with_draft(trial.stored_rules(worker), draft)
    base = "https://api.example.com"
    assert trial.try_request(worker, "GET", f"{base}/v1/items", rules=rules).verdict == "deny"
    assert trial.try_request(worker, "GET", f"{base}/v2/items", rules=rules).verdict == "allow"
    assert Grant.objects.get(slug="api-read").paths == ["/v1/**"]  # nothing saved


@pytest.mark.parametrize("url", ["ftp://api.example.com/", "api.example.com/v1", "https:///x",
                                 "https://api.example.com:99999/"])
def test_bad_urls_are_clear_errors(worker, grants, url):
    with pytest.raises(trial.TrialInvalid):
        trial.try_request(worker, "GET", url)


def test_cli(worker, grants, capsys):
    call_command("grants", "test", "alpha", "get", "https://api.example.com/v1/items")
    out = capsys.readouterr().out
    assert "GET https://api.example.com:443/v1/items: allow by grant api-read" in out
    with pytest.raises(CommandError, match="no worker named"):
        call_command("grants", "test", "nobody", "GET", "https://api.example.com/")
    with pytest.raises(CommandError, match="http:// or https://"):
        call_command("grants", "test", "alpha", "GET", "file:///etc/passwd")


ADMIN_FORM = {
    "description": "", "enabled": "on", "mode": "auto", "host": "api.example.com", "port": "",
    "schemes": "https", "methods": "GET", "paths": "/v1/**", "mcp_tools": "", "max_taint": "1",
    "result_class": "1", "untrusted": "on", "expires_at_0": "", "expires_at_1": "", "secret": "",
    "inject_header": "", "inject_format": "{secret}", "cost_per_call": "0",
}


def test_admin_tests_a_request_with_the_unsaved_change(worker, grants, client):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    grant = Grant.objects.get(slug="api-read")
    url = f"/admin/policy/grant/{grant.pk}/change/"
    form = {**ADMIN_FORM, "worker": str(worker.pk), "paths": "/v2/**", "try_only": "on",
            "try_worker": str(worker.pk), "try_method": "GET", "try_url": "https://api.example.com/v2/x"}
    records = AuditRecord.objects.count()
    html = client.post(url, form).content.decode()
    assert "Test only, nothing saved" in html
    assert "GET https://api.example.com:443/v2/x: allow by grant api-read" in html
    old = client.post(url, {**form, "try_url": "https://api.example.com/v1/x"}).content.decode()
    assert "GET https://api.example.com:443/v1/x: deny (no_grant)" in old  # the draft replaced /v1/**
    assert Grant.objects.get(slug="api-read").paths == ["/v1/**"] and AuditRecord.objects.count() == records
    wall = client.post(url, {**form, "paths": "/v1/**", "try_url": "https://api.example.com/v1/admin/x"})
    assert "deny (denied_by_grant) by grant api-admin-wall" in wall.content.decode()


@pytest.fixture
def json_only(worker):
    return Grant.objects.create(
        slug="api-json", worker=worker, host="api.example.com", methods=["POST"], paths=["/v2/**"],
        max_body_size=1024, header_conditions=[{"name": "content-type", "equals": "application/json"},
                                               {"name": "x-http-method-override", "absent": True}])


def test_the_trial_judges_headers_and_body_size(worker, json_only):
    url = "https://api.example.com/v2/send"
    ok = trial.try_request(worker, "POST", url, headers=["Content-Type: application/json"], body_size=1024)
    assert (ok.verdict, ok.grant) == ("allow", "api-json")
    assert "judged with headers content-type and a body of 1024 bytes" in "\n".join(trial.explain(ok))
    big = trial.try_request(worker, "POST", url, headers=["Content-Type: application/json"], body_size=1025)
    assert (big.verdict, big.reason) == ("deny", "no_grant")
    assert "aimed at it, but a body of 1025 bytes is over its max_body_size of 1024 bytes" in \
        [c.note for c in big.candidates]
    override = trial.try_request(worker, "POST", url, headers=[("content-type", "application/json"),
                                                               ("X-HTTP-Method-Override", "DELETE")])
    assert override.verdict == "deny" and "x-http-method-override is absent" in override.candidates[0].note
    assert "DELETE" not in "\n".join(trial.explain(override))  # header values are never echoed


@pytest.mark.parametrize("headers", [["no colon here"], ["bad name: x"], ["x: a\x00b"]])
def test_bad_trial_headers_are_clear_errors(worker, json_only, headers):
    with pytest.raises(trial.TrialInvalid):
        trial.try_request(worker, "POST", "https://api.example.com/v2/send", headers=headers)


def test_cli_header_and_body_size(worker, json_only, capsys):
    url = "https://api.example.com/v2/send"
    call_command("grants", "test", "alpha", "POST", url, "--header", "Content-Type: application/json",
                 "--body-size", "10")
    assert "allow by grant api-json" in capsys.readouterr().out
    call_command("grants", "test", "alpha", "POST", url, "--header", "Content-Type: application/json",
                 "--header", "x-http-method-override: DELETE")
    out = capsys.readouterr().out
    assert "deny (no_grant)" in out and "x-http-method-override is absent" in out
    with pytest.raises(CommandError, match="not 'Name: value'"):
        call_command("grants", "test", "alpha", "POST", url, "--header", "nonsense")


def test_the_admin_shows_the_answer_as_a_result_panel_and_the_preview_stays_whole(worker, grants, client):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    grant = Grant.objects.get(slug="api-read")
    url = f"/admin/policy/grant/{grant.pk}/change/"
    form = {**ADMIN_FORM, "worker": str(worker.pk), "methods": "POST", "paths": "/v2/**", "try_only": "on",
            "header_conditions": "Content-Type: equals application/json\nx-http-method-override: absent",
            "max_body_size": "100", "try_worker": str(worker.pk), "try_method": "POST",
            "try_url": "https://api.example.com/v2/x", "try_headers": "content-type: application/json",
            "try_body_size": "100"}
    html = client.post(url, form).content.decode()
    assert 'id="trial-result"' in html and "Test result: allow" in html
    assert "POST https://api.example.com:443/v2/x: allow by grant api-read" in html
    assert "errornote" not in html and "errorlist" not in html  # an answer is not an error
    assert "This grant is broken" not in html  # the saved grant's preview, not the form's raw text
    assert "Allows GET https requests to api.example.com on the scheme&#x27;s default port, paths /v1/**" \
        in html
    over = client.post(url, {**form, "try_body_size": "101"}).content.decode()
    assert "Test result: ask" in over and "over its max_body_size of 100 bytes" in over
    bad = client.post(url, {**form, "try_headers": "nonsense"}).content.decode()
    assert "errorlist" in bad and "not &#x27;Name: value&#x27;" in bad and 'id="trial-result"' not in bad
    assert Grant.objects.get(slug="api-read").header_conditions == []  # nothing saved


def test_the_admin_saves_conditions_and_shows_them_back(worker, grants, client):
    from django.contrib.auth.models import User

    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    grant = Grant.objects.get(slug="api-read")
    url = f"/admin/policy/grant/{grant.pk}/change/"
    form = {**ADMIN_FORM, "worker": str(worker.pk), "max_body_size": "4096",
            "header_conditions": "Content-Type: matches application/json.*\nx-tenant: present"}
    assert client.post(url, form).status_code == 302
    grant.refresh_from_db()
    assert grant.header_conditions == [{"name": "content-type", "matches": "application/json.*"},
                                       {"name": "x-tenant", "present": True}]
    assert grant.max_body_size == 4096
    page = client.get(url).content.decode()
    assert "content-type: matches application/json.*\nx-tenant: present" in page
    assert ("Only when header content-type matches the pattern &#x27;application/json.*&#x27;; "
            "header x-tenant is present") in page and "at most 4096 bytes" in page
    for bad, message in [("authorization: equals Bearer x", "present or absent"),
                         ("content-type: sorta json", "line 1: write"),
                         ("accept: matches (a)\\1", "does not compile")]:
        html = client.post(url, {**form, "header_conditions": bad}).content.decode()
        assert message in html, bad
    grant.refresh_from_db()
    assert grant.header_conditions[1] == {"name": "x-tenant", "present": True}
