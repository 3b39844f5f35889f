"""Header conditions and max_body_size through the decision API, and an approved request judged again on
the headers its approval bound (docs/grants.md, "Header and body-size conditions")."""

import pytest
from django.contrib.auth.models import Group, User

from controlplane.approvals.models import Approval
from controlplane.approvals.services import approval_decide
from controlplane.core.roles import APPROVERS
from tests.egress.fixtures import decide_body

pytestmark = pytest.mark.django_db
JSON = {"name": "content-type", "equals": "application/json"}


@pytest.fixture
def approver(db):
    user = User.objects.create_user("ann", password="pw-123456789")
    user.groups.add(Group.objects.get(name=APPROVERS))
    return user


@pytest.mark.parametrize("overrides, verdict", [
    ({}, "allow"),
    ({"body_size": 3}, "deny"),
    ({"headers": [["content-type", "text/plain"]]}, "deny"),
    ({"headers": [["content-type", "application/json"], ["Content-Type", "application/json"]]}, "deny"),
    ({"headers": [["content-type", "application/json"], ["x-tenant", "t"]]}, "allow"),
])
def test_decide_judges_the_gateways_headers_and_body_size(gateway, token, make_grant, overrides, verdict):
    make_grant(header_conditions=[JSON], max_body_size=2)
    answer = gateway.decide(decide_body(token, **overrides))
    assert answer["verdict"] == verdict, answer
    if verdict == "deny":
        assert answer["reason"] == "no_grant" and answer["status"] == 403
        assert "grant 'openai-chat' would" in answer["message"]


def _approved(gateway, token, approver, **overrides):
    answer = gateway.decide(decide_body(token, **overrides))
    assert answer["verdict"] == "ask", answer
    approval_decide(answer["approval_id"], approver, True, "web")
    return answer["approval_id"]


def _collect(gateway, approval_id):
    response = gateway.post(f"/api/gateway/approvals/{approval_id}/wait", {"timeout_seconds": 0})
    assert response.status_code == 200, response.content
    return response.json()


def test_an_approved_request_is_judged_again_on_its_bound_headers(gateway, token, make_grant, approver):
    make_grant(mode="ask", header_conditions=[JSON], max_body_size=2)
    answer = _collect(gateway, _approved(gateway, token, approver))
    assert answer["status"] == "approved" and answer["decision"]["verdict"] == "allow"


def test_a_condition_added_since_the_approval_that_the_request_fails_denies(gateway, token, make_grant,
                                                                             approver):
    grant = make_grant(mode="ask")
    approval_id = _approved(gateway, token, approver)
    grant.header_conditions = [{"name": "content-type", "equals": "text/plain"}]
    grant.save()
    decision = _collect(gateway, approval_id)["decision"]
    assert decision["verdict"] == "deny" and decision["reason"] == "no_grant"


def test_a_limit_lowered_since_the_approval_denies(gateway, token, make_grant, approver):
    grant = make_grant(mode="ask")
    approval_id = _approved(gateway, token, approver)
    grant.max_body_size = 1
    grant.save()
    assert _collect(gateway, approval_id)["decision"]["reason"] == "no_grant"


def test_a_masked_header_value_does_not_meet_an_allow_condition_on_approval(gateway, token, make_grant,
                                                                            approver, secret):
    # The snapshot masks a value holding a sentinel; judged again, a value not known meets no allow's
    # condition (doubt is a deny), while presence is still known.
    make_grant(mode="ask", secret=secret, inject_header="authorization", inject_format="Bearer {secret}",
               header_conditions=[{"name": "x-team", "matches": ".*"}])
    headers = [["content-type", "application/json"], ["x-team", f"team {secret.sentinel}"]]
    approval_id = _approved(gateway, token, approver, headers=headers)
    assert ["x-team", "[masked]"] in Approval.objects.get(pk=approval_id).request["headers"]
    decision = _collect(gateway, approval_id)["decision"]
    # No grant then matches a request carrying a sentinel. The sentinel went to the host its own secret's
    # grant names, so the deny is `no_grant` with nothing injected, not a tripwire (docs/grants.md,
    # "Sentinels"); toward any other host it would be one.
    assert decision["verdict"] == "deny" and decision["reason"] == "no_grant" and decision["inject"] == []
    assert "nothing injected" in decision["message"]
