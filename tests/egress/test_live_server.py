"""The decision API served for real (its database thread only runs under ASGI), by its own process
(controlplane.decision_server, what the gateway calls) and by the web server (daphne): allow,
ask -> approve -> wait, outcomes, health, and concurrent decisions that keep the audit chain whole."""

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.conf import settings
from django.db import connection

from controlplane.approvals.services import approval_decide
from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from controlplane.fleet.models import PolicyVersion
from tests.approvals.helpers import approver
from tests.egress.fixtures import SECRET_VALUE, decide_body
from tests.support import procs

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


SERVERS = {"decision_api": procs.decision_api_server, "daphne": procs.daphne_server}


@pytest.fixture(params=sorted(SERVERS))
def server(request, tmp_path, redis_url):
    PolicyVersion.objects.get_or_create(pk=1)
    env = procs.control_plane_env(connection.settings_dict["NAME"], redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": settings.ROSTER_GATEWAY_TOKEN_SHA256,
        "ROSTER_VAULT_KEY_FILE": str(settings.ROSTER_VAULT_KEY_FILE),
        "ROSTER_APPROVAL_POLL_SECONDS": "0.02",
    })
    with SERVERS[request.param](env, tmp_path) as url:
        procs.wait_for_http(f"{url}/api/gateway/health", timeout=30)
        yield url


def test_decisions_through_a_real_server(server, gateway_auth, token, secret, make_grant):
    make_grant(secret=secret, inject_header="authorization", inject_format="Bearer {secret}")
    make_grant(slug="ask-me", host="ask.example.com", mode="ask")
    with httpx.Client(base_url=server, headers=gateway_auth, timeout=10) as client:
        assert client.get("/api/gateway/health").json()["ok"] is True
        assert client.get("/api/gateway/health", headers={"Authorization": "Bearer no"}).status_code == 401
        allow = client.post("/api/gateway/decide", json=decide_body(token)).json()
        assert allow["verdict"] == "allow" and allow["inject"][0]["value"] == f"Bearer {SECRET_VALUE}"
        outcome = {"decision_id": allow["decision_id"], "status": 200, "request_bytes": 1,
                   "response_bytes": 2, "error": ""}
        assert client.post("/api/gateway/outcome", json=outcome).status_code == 200
        assert client.post("/api/gateway/outcome", json=outcome).status_code == 409
        ask = client.post("/api/gateway/decide", json=decide_body(token, host="ask.example.com")).json()
        assert ask["verdict"] == "ask"
        wait_url = f"/api/gateway/approvals/{ask['approval_id']}/wait"
        pending = client.post(wait_url, json={"timeout_seconds": 0})
        assert pending.json()["status"] == "pending"
        approval_decide(ask["approval_id"], approver(), True, "web")
        waited = client.post(wait_url, json={"timeout_seconds": 5})
        assert waited.json()["status"] == "approved" and waited.json()["decision"]["verdict"] == "allow"


def test_outcome_batch_and_a_long_poll_do_not_hold_up_decisions(server, gateway_auth, token, make_grant):
    """The API's database work runs on one thread; a long-poll holds no thread between its reads."""
    make_grant()
    make_grant(slug="ask-me", host="ask.example.com", mode="ask")
    with httpx.Client(base_url=server, headers=gateway_auth, timeout=30) as client, \
            ThreadPoolExecutor(1) as bg:
        ask = client.post("/api/gateway/decide", json=decide_body(token, host="ask.example.com")).json()
        wait_url = f"/api/gateway/approvals/{ask['approval_id']}/wait"
        waiting = bg.submit(lambda: httpx.post(server + wait_url, json={"timeout_seconds": 3},
                                               headers=gateway_auth, timeout=30).json())
        ids = [client.post("/api/gateway/decide", json=decide_body(token)).json()["decision_id"]
               for _ in range(3)]
        assert not waiting.done()  # three decisions answered while the long-poll still waits
        batch = [{"decision_id": i, "status": 200, "request_bytes": 1, "response_bytes": 2, "error": ""}
                 for i in [*ids, "dc_unknown"]]
        answer = client.post("/api/gateway/outcomes", json={"outcomes": batch})
        assert answer.json() == {"results": ["ok", "ok", "ok", "unknown"]}
        assert waiting.result()["status"] == "pending"


def test_concurrent_decisions_keep_the_chain_whole(server, gateway_auth, token, make_grant):
    make_grant()

    def one(_):
        with httpx.Client(base_url=server, headers=gateway_auth, timeout=30) as client:
            return client.post("/api/gateway/decide", json=decide_body(token)).json()["verdict"]

    with ThreadPoolExecutor(16) as pool:
        verdicts = list(pool.map(one, range(64)))
    assert verdicts == ["allow"] * 64
    assert AuditRecord.objects.filter(kind="decision", verdict="allow").count() == 64
    assert verify_database().ok


def test_decision_api_process_serves_only_the_gateway_api(tmp_path, redis_url, gateway_auth):
    env = procs.control_plane_env(connection.settings_dict["NAME"], redis_url, {
        "ROSTER_GATEWAY_TOKEN_SHA256": settings.ROSTER_GATEWAY_TOKEN_SHA256})
    with procs.decision_api_server(env, tmp_path) as url, httpx.Client(base_url=url, timeout=10) as client:
        for path in ("/admin/", "/", "/accounts/login/", "/api/docs", "/api/gatewayx/decide"):
            assert client.get(path).status_code == 404, path
        assert client.get("/api/gateway/health").status_code == 401
        assert client.get("/api/gateway/health", headers=gateway_auth).json()["ok"] is True
