"""A run's token is bound to its box: /decide accepts it only when the gateway reports the run's box's
address as the connection's peer. From anywhere else (the host, after `docker inspect`; another box), or
with no address reported, it is bad_token, audited with its own detail and naming the run."""

from __future__ import annotations

import json

import pytest

from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import Run
from controlplane.fleet.tokens import token_address_problem
from tests.egress.fixtures import BOX_ADDRESS, decide_body

pytestmark = pytest.mark.django_db


def _last_decision() -> tuple[AuditRecord, dict]:
    record = AuditRecord.objects.filter(kind="decision").latest("seq")
    return record, json.loads(record.body)["data"]


def test_the_token_from_its_box_is_allowed(gateway, live_run, make_grant):
    run, token = live_run
    make_grant()
    assert gateway.decide(decide_body(token))["verdict"] == "allow"
    record, data = _last_decision()
    assert record.verdict == "allow" and "detail" not in data


@pytest.mark.parametrize(("client", "detail"), [
    ("172.17.0.1", "token presented from 172.17.0.1, run's box is 10.89.0.2"),  # the host
    ("10.89.0.3", "token presented from 10.89.0.3, run's box is 10.89.0.2"),  # another box
    ("::ffff:10.89.0.9", "token presented from 10.89.0.9, run's box is 10.89.0.2"),
    ("", "the gateway reported no client address for the token"),
    ("not-an-address", "the gateway reported an unreadable client address for the token"),
])
def test_the_token_from_elsewhere_is_bad_token_and_audited(gateway, live_run, make_grant, client, detail):
    run, token = live_run
    make_grant()
    answer = gateway.decide(decide_body(token, client=client))
    assert (answer["verdict"], answer["reason"], answer["status"]) == ("deny", "bad_token", 407)
    assert BOX_ADDRESS not in json.dumps(answer)  # the caller learns nothing about the box
    record, data = _last_decision()
    assert (record.verdict, record.reason, record.run_id_ref) == ("deny", "bad_token", run.pk)
    assert data["detail"] == detail


def test_no_client_field_at_all_is_bad_token(gateway, live_run, make_grant):
    _run, token = live_run
    make_grant()
    body = decide_body(token)
    del body["client"]
    assert gateway.decide(body)["reason"] == "bad_token"
    assert _last_decision()[1]["detail"] == "the gateway reported no client address for the token"


def test_a_run_whose_box_address_is_not_recorded_accepts_its_token_from_nowhere(gateway, live_run,
                                                                                make_grant):
    run, token = live_run
    make_grant()
    Run.objects.filter(pk=run.pk).update(box_address=None)
    assert gateway.decide(decide_body(token))["reason"] == "bad_token"
    detail = _last_decision()[1]["detail"]
    assert detail == "token presented from 10.89.0.2, run's box address is not recorded"


def test_an_unknown_token_has_no_detail(gateway, live_run, make_grant):
    make_grant()
    assert gateway.decide(decide_body("rt_unknown", client=BOX_ADDRESS))["reason"] == "bad_token"
    record, data = _last_decision()
    assert record.run_id_ref is None and "detail" not in data


def test_a_long_client_value_is_refused_by_the_schema(gateway, live_run):
    _run, token = live_run
    response = gateway.post("/api/gateway/decide", decide_body(token, client="1" * 65))
    assert response.status_code == 422


def test_address_forms_compare_as_addresses():
    assert token_address_problem("10.89.0.2", "10.89.0.2") == ""
    assert token_address_problem("::ffff:10.89.0.2", "10.89.0.2") == ""
    assert token_address_problem(" 10.89.0.2 ", "10.89.0.2") == ""
    assert token_address_problem("fd00::2", "fd00:0::2") == ""
    assert token_address_problem("10.89.0.20", "10.89.0.2") != ""
