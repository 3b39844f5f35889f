"""An allow raises taint by its grant at decision time; POST /outcome settles the ledger; POST /trace
stores bodies."""

import base64
import hashlib

import pytest
from django.conf import settings

from controlplane.audit.models import AuditRecord, ModelTrace
from controlplane.core.taint import DataClass
from controlplane.fleet.models import Run
from controlplane.ledger.models import SpendLine
from tests.egress.fixtures import SECRET_VALUE, decide_body

pytestmark = pytest.mark.django_db
OUTCOME, TRACE = "/api/gateway/outcome", "/api/gateway/trace"


def _outcome(decision_id, **overrides):
    body = {"decision_id": decision_id, "status": 200, "request_bytes": 10, "response_bytes": 2048,
            "error": ""}
    body.update(overrides)
    return body


def test_allow_raises_taint_at_decision_time_and_outcome_settles(gateway, live_run, make_grant):
    run, token = live_run
    grant = make_grant(result_class=DataClass.SECRET, untrusted=True, max_taint=DataClass.SECRET)
    answer = gateway.decide(decide_body(token))
    assert answer["verdict"] == "allow"
    # Raised by the decision itself, before (and without) any outcome.
    run.refresh_from_db()
    assert run.taint == DataClass.SECRET and run.untrusted
    # The decision's audit record names the taint it was judged on, not the raised one.
    record = AuditRecord.objects.get(kind="decision", run_id_ref=run.pk)
    assert '"taint":"private"' in record.body and '"untrusted":false' in record.body
    type(grant).objects.filter(pk=grant.pk).update(result_class=DataClass.PUBLIC, untrusted=False)
    response = gateway.post(OUTCOME, _outcome(answer["decision_id"]))
    assert response.status_code == 200 and response.json() == {"ok": True}
    run.refresh_from_db()
    assert run.taint == DataClass.SECRET and run.untrusted  # an outcome never lowers it
    settle = SpendLine.objects.get(decision_id=answer["decision_id"], kind="settle")
    assert settle.amount == 2058
    assert gateway.post(OUTCOME, _outcome(answer["decision_id"])).status_code == 409


def test_next_decision_sees_taint_of_an_unreported_allow(gateway, live_run, make_grant):
    """No outcome is ever reported for the first call: the second is still judged on its result."""
    run, token = live_run
    make_grant(slug="secret-source", host="vault.example.com", result_class=DataClass.SECRET,
               max_taint=DataClass.SECRET)
    make_grant(slug="public-sink", max_taint=DataClass.PRIVATE)
    first = gateway.decide({**decide_body(token), "host": "vault.example.com", "path": "/v1/read"})
    assert (first["verdict"], first["grant"]) == ("allow", "secret-source")
    second = gateway.decide(decide_body(token))
    assert (second["verdict"], second["reason"]) == ("deny", "taint_too_high")


def test_denied_decision_raises_no_taint(gateway, live_run, make_grant):
    run, token = live_run
    make_grant(mode="deny", result_class=DataClass.SECRET, untrusted=True)
    assert gateway.decide(decide_body(token))["verdict"] == "deny"
    run.refresh_from_db()
    assert run.taint == DataClass.PRIVATE and not run.untrusted


def test_outcome_of_trusted_public_grant_keeps_run_private(gateway, live_run, make_grant):
    run, token = live_run
    make_grant(result_class=DataClass.PUBLIC, untrusted=False)
    decision_id = gateway.decide(decide_body(token))["decision_id"]
    assert gateway.post(OUTCOME, _outcome(decision_id)).status_code == 200
    run.refresh_from_db()
    assert run.taint == DataClass.PRIVATE and not run.untrusted


def test_outcome_unknown_or_denied_decision_is_404(gateway, token, make_grant):
    assert gateway.post(OUTCOME, _outcome("dc_nope")).status_code == 404
    denied = gateway.decide(decide_body(token))["decision_id"]
    assert gateway.post(OUTCOME, _outcome(denied)).status_code == 404
    assert not SpendLine.objects.filter(kind="settle").exists()


OUTCOMES = "/api/gateway/outcomes"


def test_outcome_batch_settles_each_in_order(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    first, second = (gateway.decide(decide_body(token))["decision_id"] for _ in range(2))
    denied = gateway.decide(decide_body(token, host="elsewhere.example.com"))["decision_id"]
    body = {"outcomes": [_outcome(first), _outcome(second, response_bytes=5), _outcome(denied),
                         _outcome(first), _outcome("dc_nope")]}
    response = gateway.post(OUTCOMES, body)
    assert response.status_code == 200
    assert response.json() == {"results": ["ok", "ok", "unknown", "already_settled", "unknown"]}
    settled = dict(SpendLine.objects.filter(kind="settle").values_list("decision_id", "amount"))
    assert settled == {first: 2058, second: 15}
    # Every settle line still appends its own spend record.
    spend = AuditRecord.objects.filter(kind="spend", body__contains='"op":"settle"')
    assert spend.count() == 2
    assert gateway.post(OUTCOMES, {"outcomes": [_outcome(second)]}).json() == {"results": ["already_settled"]}


def test_outcome_batch_survives_one_broken_outcome(gateway, live_run, make_grant, monkeypatch):
    from controlplane.egress import outcomes

    run, token = live_run
    make_grant()
    good, bad = (gateway.decide(decide_body(token))["decision_id"] for _ in range(2))
    real_settle = outcomes.settle

    def settle(decision_id, *args, **kwargs):
        if decision_id == bad:
            raise RuntimeError("disk on fire")
        return real_settle(decision_id, *args, **kwargs)

    monkeypatch.setattr(outcomes, "settle", settle)
    response = gateway.post(OUTCOMES, {"outcomes": [_outcome(good), _outcome(bad)]})
    assert response.json() == {"results": ["ok", "error"]}
    assert list(SpendLine.objects.filter(kind="settle").values_list("decision_id", flat=True)) == [good]


TOO_MANY = {"outcomes": [_outcome("dc_x")] * (settings.ROSTER_OUTCOME_BATCH_MAX + 1)}


@pytest.mark.parametrize("body", [{"outcomes": []}, TOO_MANY,
                                  {"outcomes": [_outcome("dc_x", extra=1)]}, {"outcomes": [], "x": 1},
                                  {"outcomes": [_outcome("dc_x", status=1.0)]}, [_outcome("dc_x")]])
def test_outcome_batch_bad_bodies(gateway, body):
    assert gateway.post(OUTCOMES, body).status_code == 422
    assert not SpendLine.objects.filter(kind="settle").exists()


@pytest.mark.parametrize("change", [{"status": 200.0}, {"request_bytes": -1}, {"response_bytes": "1"},
                                    {"extra": True}, {"decision_id": ""}, {"error": "x" * 10_000}])
def test_outcome_bad_bodies(gateway, change):
    body = _outcome("dc_x")
    body.update(change)
    assert gateway.post(OUTCOME, body).status_code == 422


def _injecting_allow(gateway, token, secret, make_grant) -> str:
    make_grant(secret=secret, inject_header="authorization", inject_format="Bearer {secret}")
    answer = gateway.decide(decide_body(token))
    assert answer["verdict"] == "allow" and answer["inject"]
    return answer["decision_id"]


def _tripwires(run):
    return list(AuditRecord.objects.filter(kind="tripwire", run_id_ref=run.pk))


def test_scrubbed_echo_is_audited_as_a_tripwire_naming_the_secret(gateway, live_run, secret, make_grant):
    run, token = live_run
    decision_id = _injecting_allow(gateway, token, secret, make_grant)
    response = gateway.post(OUTCOME, _outcome(decision_id, scrubbed=3))
    assert response.status_code == 200 and response.json() == {"ok": True}
    [record] = _tripwires(run)
    assert SpendLine.objects.filter(decision_id=decision_id, kind="settle").exists()
    for expected in (f'"decision_id":"{decision_id}"', '"grant":"openai-chat"', '"secret":"openai"',
                     '"scrubbed":3', "upstream echoed the injected secret openai; 3 occurrences scrubbed "
                     "before the box"):
        assert expected in record.body, expected
    assert record.worker_name == run.worker.name
    assert SECRET_VALUE not in record.body and secret.sentinel not in record.body


@pytest.mark.parametrize("scrubbed", [None, 0])
def test_outcome_without_scrubbed_echoes_writes_no_tripwire(gateway, live_run, secret, make_grant, scrubbed):
    run, token = live_run
    decision_id = _injecting_allow(gateway, token, secret, make_grant)
    body = _outcome(decision_id) if scrubbed is None else _outcome(decision_id, scrubbed=scrubbed)
    assert gateway.post(OUTCOME, body).status_code == 200
    assert SpendLine.objects.filter(decision_id=decision_id, kind="settle").exists()
    assert _tripwires(run) == []


def test_outcome_batch_audits_each_scrubbed_echo(gateway, live_run, secret, make_grant):
    run, token = live_run
    first = _injecting_allow(gateway, token, secret, make_grant)
    second = gateway.decide(decide_body(token))["decision_id"]
    body = {"outcomes": [_outcome(first, scrubbed=1), _outcome(second), _outcome("dc_nope", scrubbed=5)]}
    assert gateway.post(OUTCOMES, body).json() == {"results": ["ok", "ok", "unknown"]}
    [record] = _tripwires(run)
    assert f'"decision_id":"{first}"' in record.body and '"scrubbed":1' in record.body
    assert "1 occurrence scrubbed before the box" in record.body
    # Already settled: refused, and no second tripwire.
    again = {"outcomes": [_outcome(first, scrubbed=1)]}
    assert gateway.post(OUTCOMES, again).json() == {"results": ["already_settled"]}
    assert len(_tripwires(run)) == 1


BAD_SCRUBBED = [-1, 2**53 + 1, 10**30, 1.0, 2.5, "1", True, None, [1]]


@pytest.mark.parametrize("scrubbed", BAD_SCRUBBED)
def test_bad_scrubbed_counts_are_refused_and_settle_nothing(gateway, live_run, secret, make_grant, scrubbed):
    run, token = live_run
    decision_id = _injecting_allow(gateway, token, secret, make_grant)
    assert gateway.post(OUTCOME, _outcome(decision_id, scrubbed=scrubbed)).status_code == 422
    batch = {"outcomes": [_outcome(decision_id), _outcome(decision_id, scrubbed=scrubbed)]}
    assert gateway.post(OUTCOMES, batch).status_code == 422
    assert not SpendLine.objects.filter(kind="settle").exists()
    assert _tripwires(run) == []


def test_largest_scrubbed_count_is_accepted(gateway, live_run, secret, make_grant):
    run, token = live_run
    decision_id = _injecting_allow(gateway, token, secret, make_grant)
    assert gateway.post(OUTCOME, _outcome(decision_id, scrubbed=2**53)).status_code == 200
    assert f'"scrubbed":{2**53}' in _tripwires(run)[0].body


def test_trace_is_stored_byte_exactly_and_audited(gateway, live_run, make_grant):
    run, token = live_run
    make_grant(trace=True)
    answer = gateway.decide(decide_body(token))
    assert answer["trace"] is True
    body = b'{"messages": [{"role": "user", "content": "hi \xff\x00"}]}'
    response = gateway.post(TRACE, {"decision_id": answer["decision_id"],
                                    "body_b64": base64.b64encode(body).decode()})
    assert response.status_code == 200
    stored = ModelTrace.objects.get(decision_id=answer["decision_id"])
    assert bytes(stored.body) == body and stored.sha256 == hashlib.sha256(body).hexdigest()
    assert stored.run_id_ref == run.pk and stored.url.startswith("https://api.openai.com")
    assert AuditRecord.objects.filter(kind="trace", run_id_ref=run.pk).exists()
    again = {"decision_id": answer["decision_id"], "body_b64": ""}
    assert gateway.post(TRACE, again).status_code == 409


def test_trace_refusals(gateway, token, make_grant, settings):
    make_grant(trace=True)
    decision_id = gateway.decide(decide_body(token))["decision_id"]
    assert gateway.post(TRACE, {"decision_id": "dc_none", "body_b64": "aGk="}).status_code == 404
    assert gateway.post(TRACE, {"decision_id": decision_id, "body_b64": "not base64!"}).status_code == 422
    assert gateway.post(TRACE, {"decision_id": decision_id, "body_b64": "aGk=", "x": 1}).status_code == 422
    settings.ROSTER_TRACE_MAX_BYTES = 4
    big = base64.b64encode(b"12345").decode()
    assert gateway.post(TRACE, {"decision_id": decision_id, "body_b64": big}).status_code == 413
    assert not ModelTrace.objects.exists()


def test_trace_for_ended_run_still_links(gateway, live_run, make_grant):
    run, token = live_run
    make_grant(trace=True)
    decision_id = gateway.decide(decide_body(token))["decision_id"]
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    assert gateway.post(TRACE, {"decision_id": decision_id, "body_b64": "aGk="}).status_code == 200
