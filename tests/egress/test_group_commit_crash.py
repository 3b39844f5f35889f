"""Group commit survives a killed decision API (docs/operations.md, "Group commit"): 48 decisions race
into the real server process, which is killed with SIGKILL mid-stream; afterwards every answer the
gateway received has its records, no decision is half-recorded, the audit chain verifies unforked, and
the cap was never overshot. On SQLite and on a real PostgreSQL."""

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.support import postgres, procs

pytestmark = [pytest.mark.integration]

SERVICE_TOKEN = "gst_crash_test_token_0123456789"
CALLS = 48
CAP = 40

SEED = """
import django, json; django.setup()
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.ledger.models import Cap
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
worker = worker_create("crash")
tokens = []
for _ in range(8):
    run, raw = run_create(worker)
    run_set_status(run.pk, Run.Status.RUNNING)
    tokens.append(raw)
secret = secret_set("crash-key", "crash-real-value-0123456789", kind="openai")
Grant.objects.create(slug="crash", host="api.example.com", schemes=["https"], secret=secret,
                     inject_header="authorization", inject_format="Bearer {secret}")
Cap.objects.create(worker=worker, unit="requests", window="day", limit=CAP_LIMIT)
print(json.dumps(tokens))
""".replace("CAP_LIMIT", str(CAP))

CHECK = """
import django, json, sys; django.setup()
from controlplane.audit.models import AuditRecord
from controlplane.audit.verify import verify_database
from controlplane.fleet.models import RunDecision
from controlplane.ledger.models import SpendLine
answered = json.loads(sys.stdin.read())
decided = {json.loads(body)["data"].get("decision_id"): json.loads(body)["verdict"]
           for body in AuditRecord.objects.filter(kind="decision").values_list("body", flat=True)}
reserves = SpendLine.objects.filter(kind="reserve", unit="requests")
reserved = set(reserves.values_list("decision_id", flat=True))
run_decisions = set(RunDecision.objects.values_list("decision_id", flat=True))
allowed = {d for d, verdict in decided.items() if verdict == "allow"}
print(json.dumps({
    "verify_ok": verify_database().ok,
    "answered_missing": sorted(set(answered) - set(decided)),
    "allowed_without_reserve": sorted(allowed - reserved),
    "reserve_without_decision": sorted(reserved - allowed),
    "run_decision_mismatch": sorted(run_decisions ^ allowed),
    "allowed": len(allowed),
}))
"""


def _env(database_url: str, tmp) -> dict[str, str]:
    return {**os.environ, **procs.control_plane_env(database_url, "redis://127.0.0.1:1/0", {
        "ROSTER_GATEWAY_TOKEN_SHA256": hashlib.sha256(SERVICE_TOKEN.encode()).hexdigest(),
        "ROSTER_VAULT_KEY_FILE": str(tmp / "vault.key"), "ROSTER_VAR_DIR": str(tmp),
        "ROSTER_LOG_LEVEL": "ERROR"})}


def _python(code: str, env: dict[str, str], stdin: str = "") -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=procs.REPO, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def _blast_and_kill(url: str, tokens: list[str], server) -> list[str]:
    answered: list[str] = []
    lock = threading.Lock()

    def call(i: int) -> None:
        body = {"token": tokens[i % len(tokens)], "method": "POST", "scheme": "https",
                "host": "api.example.com", "port": 443, "path": "/v1/x", "headers": [], "body_size": 0,
                "body_sha256": "", "body_preview": "", "mcp": []}
        with contextlib.suppress(httpx.HTTPError):
            answer = httpx.post(f"{url}/api/gateway/decide", json=body, timeout=20,
                                headers={"Authorization": f"Bearer {SERVICE_TOKEN}"}).json()
            with lock:
                answered.append(answer["decision_id"])
                if len(answered) == 12:  # mid-stream: groups are queued and in flight
                    os.killpg(server.pid, signal.SIGKILL)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(CALLS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answered


def _crash_and_check(database_url: str, tmp) -> dict:
    env = _env(database_url, tmp)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=procs.REPO, env=env,
                   check=True, timeout=300)
    tokens = json.loads(_python(SEED, env))
    port = procs.free_port()
    server = procs.spawn([procs.VENV_PY, "-m", "controlplane.decision_server", "--host", "127.0.0.1",
                          "--port", str(port)], env=env, log=tmp / "decision-api.log")
    try:
        procs.wait_for_http(f"http://127.0.0.1:{port}/api/gateway/health", timeout=60, proc=server)
        answered = _blast_and_kill(f"http://127.0.0.1:{port}", tokens, server)
    finally:
        procs.stop(server)
    time.sleep(0.2)
    result = json.loads(_python(CHECK, env, json.dumps(answered)))
    assert len(answered) >= 12
    return result


def _assert_whole(result: dict) -> None:
    assert result["verify_ok"]
    assert result["answered_missing"] == []  # every answer released has its records
    assert result["allowed_without_reserve"] == [] and result["reserve_without_decision"] == []
    assert result["run_decision_mismatch"] == []
    assert result["allowed"] <= CAP


def test_a_killed_decision_api_leaves_no_answer_without_records_sqlite(tmp_path):
    _assert_whole(_crash_and_check(str(tmp_path / "crash.sqlite3"), tmp_path))


@pytest.mark.postgres
def test_a_killed_decision_api_leaves_no_answer_without_records_postgres(tmp_path):
    with postgres.postgres_cluster() as url:
        _assert_whole(_crash_and_check(url, tmp_path))
