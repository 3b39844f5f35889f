"""A request carrying sentinels everywhere (URL path and query, bearer and Basic headers, body preview)
goes through allow with injection, outcome and trace, an ask, and a tripwire; afterwards no row of any
table and no audit body contains the real secret value, and only the vault's own row holds the sentinel."""

import base64

import pytest
from django.apps import apps
from django.db import connection

from controlplane.approvals.models import Approval
from controlplane.audit.models import AuditRecord
from controlplane.fleet.models import RunDecision
from tests.egress.fixtures import SECRET_VALUE, decide_body

pytestmark = pytest.mark.django_db


def _forms(value: str) -> list[str]:
    raw = value.encode()
    return [value, base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("="),
            raw.hex()]


def _every_row_as_text() -> list[tuple[str, str]]:
    rows = []
    with connection.cursor() as cursor:
        for model in apps.get_models(include_auto_created=True):
            table = model._meta.db_table
            if table not in connection.introspection.table_names():
                continue
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - table names from the app registry
            for row in cursor.fetchall():
                text = " ".join(bytes(v).decode("latin-1") if isinstance(v, (bytes, memoryview)) else str(v)
                                for v in row)
                rows.append((table, text))
    return rows


def test_no_real_secret_value_and_no_stray_sentinel_anywhere(gateway, token, secret, make_grant):
    sentinel = secret.sentinel
    make_grant(secret=secret, inject_header="authorization", inject_format="Bearer {secret}", trace=True,
               paths=["/v1/**"])
    make_grant(slug="ask-openai", host="ask.openai.com", mode="ask", secret=secret,
               inject_header="authorization")
    basic = base64.b64encode(f"user:{sentinel}".encode()).decode()
    headers = [["authorization", f"Bearer {sentinel}"], ["x-extra", f"Basic {basic}"],
               ["content-type", "application/json"]]
    path = f"/v1/{sentinel}/chat?key={sentinel}&access_token=plain-credential&q=1"
    preview = f'{{"note": "{sentinel}"}}'

    allowed = gateway.decide(decide_body(token, path=path, headers=headers, body_preview=preview))
    assert allowed["verdict"] == "allow" and allowed["replace"] and allowed["inject"]
    assert SECRET_VALUE in str(allowed["inject"])  # the answer carries it, nothing else may
    decision_id = allowed["decision_id"]
    assert gateway.post("/api/gateway/outcome", {"decision_id": decision_id, "status": 200,
                                                 "request_bytes": 10, "response_bytes": 20,
                                                 "error": ""}).status_code == 200
    assert gateway.post("/api/gateway/trace", {"decision_id": decision_id,
                                               "body_b64": base64.b64encode(b'{"m": 1}').decode()}
                        ).status_code == 200
    asked = gateway.decide(decide_body(token, host="ask.openai.com", path=path, headers=headers,
                                       body_preview=preview))
    assert asked["verdict"] == "ask"
    tripped = gateway.decide(decide_body(token, host="elsewhere.example", path=path, headers=headers))
    assert tripped["reason"] == "tripwire"
    assert AuditRecord.objects.filter(kind="tripwire").exists()

    recorded = RunDecision.objects.get(decision_id=decision_id).url
    assert "access_token=[masked]" in recorded and sentinel not in recorded
    approval = Approval.objects.get(pk=asked["approval_id"])
    assert sentinel not in str(approval.request) and "plain-credential" not in str(approval.request)

    rows = _every_row_as_text()
    assert len({table for table, _ in rows}) > 10
    for table, text in rows:
        for form in _forms(SECRET_VALUE):
            assert form not in text, f"secret value ({form[:4]}...) written to {table}"
        if table != "vault_secret":
            assert sentinel not in text and basic not in text, f"sentinel written to {table}"
            assert "plain-credential" not in text, f"credential query value written to {table}"
    for record in AuditRecord.objects.all():
        assert SECRET_VALUE not in record.body and sentinel not in record.body
