"""Every verdict and deny reason through POST /api/gateway/decide, and the records each leaves."""

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.approvals.models import Approval
from controlplane.audit.models import AuditRecord
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run, RunDecision
from controlplane.fleet.services import run_raise_taint, run_set_status
from controlplane.ledger.models import Cap, SpendLine
from tests.egress.fixtures import SECRET_VALUE, decide_body

pytestmark = pytest.mark.django_db


def _audit(kind):
    return list(AuditRecord.objects.filter(kind=kind).order_by("seq"))


def test_allow_injects_only_the_grants_secret(gateway, token, secret, make_grant):
    make_grant(secret=secret, inject_header="Authorization", inject_format="Bearer {secret}", cost_per_call=7)
    answer = gateway.decide(decide_body(token, headers=[["authorization", f"Bearer {secret.sentinel}"]]))
    assert answer["verdict"] == "allow" and answer["reason"] is None and answer["status"] == 200
    assert answer["grant"] == "openai-chat" and answer["decision_id"].startswith("dc_")
    assert answer["inject"] == [{"header": "authorization", "value": f"Bearer {SECRET_VALUE}"}]
    assert answer["replace"] == [{"sentinel": secret.sentinel, "value": SECRET_VALUE}]
    decision = _audit("decision")[-1]
    assert decision.verdict == "allow" and answer["decision_id"] in decision.body
    use = _audit("credential_use")[-1]
    assert '"openai"' in use.body
    assert not AuditRecord.objects.filter(body__contains=SECRET_VALUE).exists()
    assert SpendLine.objects.filter(decision_id=answer["decision_id"], kind="reserve").count() == 2
    assert RunDecision.objects.filter(decision_id=answer["decision_id"]).exists()


def test_injection_without_the_sentinel_still_pairs_it_for_scrubbing(gateway, token, secret, make_grant):
    make_grant(secret=secret, inject_header="Authorization", inject_format="Bearer {secret}")
    answer = gateway.decide(decide_body(token))
    assert answer["inject"] == [{"header": "authorization", "value": f"Bearer {SECRET_VALUE}"}]
    assert answer["replace"] == [{"sentinel": secret.sentinel, "value": SECRET_VALUE}]
    assert '"replace":false' in _audit("credential_use")[-1].body  # the box did not send the sentinel


def test_allow_without_secret_injects_nothing(gateway, token, make_grant):
    make_grant()
    answer = gateway.decide(decide_body(token))
    assert answer["verdict"] == "allow" and answer["inject"] == [] and answer["replace"] == []
    assert not _audit("credential_use")


def test_no_grant(gateway, token, make_grant):
    make_grant(host="api.other.com")
    answer = gateway.decide(decide_body(token))
    assert (answer["verdict"], answer["reason"], answer["status"]) == ("deny", "no_grant", 403)
    assert answer["inject"] == [] and answer["grant"] is None
    assert _audit("decision")[-1].reason == "no_grant"


def test_grant_expired(gateway, token, make_grant):
    make_grant(expires_at=timezone.now() - timedelta(minutes=1))
    answer = gateway.decide(decide_body(token))
    assert (answer["reason"], answer["status"]) == ("grant_expired", 403)


def test_taint_too_high(gateway, live_run, make_grant):
    run, token = live_run
    make_grant(max_taint=DataClass.PRIVATE)
    run_raise_taint(run.pk, DataClass.SECRET, untrusted=False)
    answer = gateway.decide(decide_body(token))
    assert (answer["reason"], answer["status"]) == ("taint_too_high", 403)


def test_denied_by_grant(gateway, token, make_grant):
    make_grant()
    make_grant(slug="no-chat", mode="deny", paths=["/v1/chat/*"])
    answer = gateway.decide(decide_body(token))
    assert (answer["reason"], answer["grant"]) == ("denied_by_grant", "no-chat")


def test_over_budget_answers_402_with_the_cap(gateway, token, worker, make_grant):
    make_grant(cost_per_call=5)
    Cap.objects.create(worker=worker, unit="requests", window="day", limit=1)
    first = gateway.decide(decide_body(token))
    second = gateway.decide(decide_body(token))
    assert first["verdict"] == "allow"
    assert (second["verdict"], second["reason"], second["status"]) == ("deny", "over_budget", 402)
    assert second["budget"] == {"scope": "worker:alpha", "unit": "requests", "window": "day", "limit": 1,
                                "spent": 1, "reserved": 1, "in_flight": 0, "held": 0}
    assert not RunDecision.objects.filter(decision_id=second["decision_id"]).exists()


@pytest.mark.parametrize("bad", ["", "rt_unknown", "Bearer x"])
def test_bad_token(gateway, make_grant, bad):
    make_grant()
    answer = gateway.decide(decide_body(bad))
    assert (answer["verdict"], answer["reason"], answer["status"]) == ("deny", "bad_token", 407)
    assert _audit("decision")[-1].reason == "bad_token"


def test_ended_runs_token_is_refused(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    assert gateway.decide(decide_body(token))["verdict"] == "allow"
    run_set_status(run.pk, Run.Status.SUCCEEDED)
    assert gateway.decide(decide_body(token))["reason"] == "bad_token"


def test_another_workers_grant_does_not_apply(gateway, token, other_worker, make_grant):
    make_grant(worker=other_worker)
    assert gateway.decide(decide_body(token))["reason"] == "no_grant"


def test_all_worker_grant_applies(gateway, token, make_grant):
    make_grant(worker=None)
    assert gateway.decide(decide_body(token))["verdict"] == "allow"


def test_disabled_grant_is_revoked_immediately(gateway, token, make_grant):
    grant = make_grant()
    assert gateway.decide(decide_body(token))["verdict"] == "allow"
    grant.enabled = False
    grant.save()
    assert gateway.decide(decide_body(token))["reason"] == "no_grant"


def test_grant_edited_by_queryset_update_is_seen(gateway, token, make_grant):
    grant = make_grant()
    assert gateway.decide(decide_body(token))["verdict"] == "allow"
    type(grant).objects.filter(pk=grant.pk).update(mode="deny")
    assert gateway.decide(decide_body(token))["reason"] == "denied_by_grant"


def test_sentinel_toward_wrong_host_is_a_tripwire(gateway, token, secret, make_grant):
    make_grant(slug="example", host="example.com")
    answer = gateway.decide(decide_body(token, host="example.com",
                                         headers=[["x-api-key", secret.sentinel]]))
    assert (answer["reason"], answer["inject"], answer["replace"]) == ("tripwire", [], [])
    trip = _audit("tripwire")[-1]
    assert '"openai"' in trip.body and SECRET_VALUE not in trip.body


def test_sentinel_in_path_is_a_tripwire(gateway, token, secret):
    answer = gateway.decide(decide_body(token, host="evil.example", path=f"/x?k={secret.sentinel}"))
    assert answer["reason"] == "tripwire" and _audit("tripwire")


def test_ask_opens_an_approval_with_a_masked_snapshot(gateway, live_run, secret, make_grant):
    run, token = live_run
    make_grant(mode="ask", secret=secret, inject_header="authorization", inject_format="Bearer {secret}")
    answer = gateway.decide(decide_body(token, headers=[["authorization", f"Bearer {secret.sentinel}"],
                                                        ["x-note", "hello"]]))
    assert answer["verdict"] == "ask" and answer["status"] == 200 and answer["hold_seconds"] > 0
    assert answer["inject"] == [] and answer["replace"] == []
    approval = Approval.objects.get(pk=answer["approval_id"])
    assert approval.status == "pending" and approval.run_id == run.pk and approval.grant_slug == "openai-chat"
    assert approval.request["headers"] == [["authorization", "[masked]"], ["x-note", "hello"]]
    assert approval.request["url"] == "https://api.openai.com:443/v1/chat/completions"
    assert secret.sentinel not in str(approval.request["headers"])
    assert _audit("approval")[-1].verdict == "ask"


def test_engine_failure_is_policy_error(gateway, token, secret, make_grant, monkeypatch, caplog):
    make_grant(secret=secret, inject_header="authorization")
    from controlplane.egress import allow

    def boom(*_a, **_k):
        raise RuntimeError(f"db exploded with {SECRET_VALUE}")

    monkeypatch.setattr(allow, "reserve", boom)
    response = gateway.post("/api/gateway/decide", decide_body(token))
    answer = response.json()
    assert response.status_code == 200
    assert (answer["verdict"], answer["reason"], answer["status"]) == ("deny", "policy_error", 503)
    assert "exploded" not in answer["message"]
    assert _audit("decision")[-1].reason == "policy_error"
    assert "RuntimeError" in caplog.text and SECRET_VALUE not in caplog.text
    assert not SpendLine.objects.exists()


def test_broken_grant_denies_everything(gateway, token, make_grant):
    make_grant()
    make_grant(slug="broken", host="[not a host")
    answer = gateway.decide(decide_body(token))
    assert answer["verdict"] == "deny" and answer["reason"] == "policy_error"


def test_tunnel_grant_passes_connect_without_revealing_secrets(gateway, token, secret, make_grant):
    make_grant(slug="pinned", host="pinned.example.com", port=8443, schemes=[], tunnel=True, secret=secret,
               inject_header="authorization")
    connect = decide_body(token, method="CONNECT", scheme="tunnel", host="pinned.example.com", port=8443,
                          path="", headers=[], body_size=0, body_sha256="", body_preview="")
    answer = gateway.decide(connect)
    assert (answer["verdict"], answer["tunnel"]) == ("allow", True)
    assert answer["inject"] == [] and answer["replace"] == []
    assert not _audit("credential_use")
    other_port = gateway.decide(dict(connect, port=443))
    assert other_port["verdict"] == "deny" and other_port["tunnel"] is False


def test_mcp_tools_are_judged(gateway, token, make_grant):
    make_grant(slug="mcp-search", host="mcp.example.com", paths=["/mcp"], mcp_tools=["search"])
    body = decide_body(token, host="mcp.example.com", path="/mcp")
    allowed = gateway.decide(dict(body, mcp=[{"method": "tools/call", "tool": "search"}]))
    denied = gateway.decide(dict(body, mcp=[{"method": "tools/call", "tool": "delete_everything"}]))
    batch = gateway.decide(dict(body, mcp=[{"method": "tools/call", "tool": "search"},
                                           {"method": "tools/call", "tool": "delete_everything"}]))
    assert allowed["verdict"] == "allow"
    assert denied["reason"] == "no_grant" and batch["reason"] == "no_grant"


@pytest.fixture
def change_during_evaluation(monkeypatch):
    """Run `change` right after the first (outside-the-transaction) evaluation: the window a concurrent
    revocation would hit."""
    from controlplane.policy import engine

    def install(change):
        real = engine.evaluate
        calls = []

        def evaluate(*args):
            decision = real(*args)
            calls.append(decision)
            if len(calls) == 1:
                change()
            return decision

        monkeypatch.setattr(engine, "evaluate", evaluate)
        return calls

    return install


def test_run_ending_mid_decision_is_bad_token(gateway, live_run, make_grant, change_during_evaluation):
    run, token = live_run
    make_grant()
    change_during_evaluation(lambda: run_set_status(run.pk, Run.Status.CANCELLED))
    answer = gateway.decide(decide_body(token))
    assert answer["reason"] == "bad_token" and not RunDecision.objects.exists()


def test_grant_revoked_mid_decision_is_denied(gateway, token, make_grant, change_during_evaluation):
    grant = make_grant()
    calls = change_during_evaluation(lambda: type(grant).objects.filter(pk=grant.pk).update(enabled=False))
    answer = gateway.decide(decide_body(token))
    assert answer["reason"] == "no_grant" and len(calls) == 2 and not SpendLine.objects.exists()


def test_taint_raised_mid_decision_is_denied(gateway, live_run, make_grant, change_during_evaluation):
    run, token = live_run
    make_grant(max_taint=DataClass.PRIVATE)
    change_during_evaluation(lambda: run_raise_taint(run.pk, DataClass.SECRET, untrusted=False))
    assert gateway.decide(decide_body(token))["reason"] == "taint_too_high"
