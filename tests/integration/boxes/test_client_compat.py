"""Real clients in a real box, configured by nothing but the box environment the dispatcher sets: Python
requests, httpx and the openai client, curl, git over HTTPS, pip and Node's fetch reach a granted HTTPS
upstream through the gateway (its CA trusted, a secret injected where the grant says) and get legible
refusals (403, reason no_grant; tripwire where the client sends the key's sentinel) from a host nothing
grants."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from controlplane.dispatch.running import run_dispatch
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.integration.boxes.servers import upstream_server
from tools.scripted_model.script import script_parse
from tools.scripted_model.server import scripted_model_server

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

PROBE = Path(__file__).with_name("compat_probe.py")
REAL_KEY = "sk-proj-" + "C0mpatK3y" * 5
CLIENTS = ("requests", "httpx", "curl", "node", "git", "pip")


def test_real_clients_in_a_box(stack):
    worker = worker_create("compat-worker")
    secret = secret_set("compat-model-key", REAL_KEY, kind="openai")
    code = Path(stack.site.settings["ROSTER_BOX_CODE_DIR"]) / worker.name
    code.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROBE, code / "compat_probe.py")
    script = script_parse({"steps": [{"say": "hello from the model"}]})
    with upstream_server(stack.upstream_ca) as (site_port, site), scripted_model_server(
            script, REAL_KEY, tls=stack.upstream_ca.leaf()) as (model_port, model):
        Grant.objects.create(slug="compat-site", worker=worker, methods=["GET"], schemes=["https"],
                             host="127.0.0.1", port=site_port)
        Grant.objects.create(slug="compat-model", worker=worker, methods=["POST"], schemes=["https"],
                             host="127.0.0.1", port=model_port, paths=["/v1/chat/completions"], secret=secret,
                             inject_header="authorization", inject_format="Bearer {secret}")
        args = {"allowed": f"https://127.0.0.1:{site_port}/files/hello.txt",
                "denied": "https://denied.example.org/files/hello.txt",
                "model": {"allowed": f"https://127.0.0.1:{model_port}/v1",
                          "denied": "https://api.denied.example.org/v1"}}
        run, _ = run_create(worker, command=["python3", "/code/compat_probe.py", json.dumps(args)],
                            timeout_seconds=240)
        run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, (run.status_reason, run.output[-3000:])
    line = next(line for line in run.output.splitlines() if line.startswith("COMPAT "))
    got = json.loads(line.removeprefix("COMPAT "))

    # Python libraries: the allowed upstream answered through the gateway, TLS verified against its CA.
    for client in ("requests", "httpx"):
        assert got[f"{client}_allowed"] == "200  upstream says hello", (client, got)
        assert got[f"{client}_denied"].startswith("403 no_grant"), (client, got)
    assert got["curl_allowed"] == "exit 0: upstream says hello 200", got
    assert got["curl_denied"].startswith("exit 0:") and got["curl_denied"].endswith(" 403"), got
    assert '"reason": "no_grant"' in got["curl_denied"], got
    assert got["node_allowed"] == "exit 0: 200  upstream says hello", got
    assert got["node_denied"].startswith("exit 0: 403 no_grant"), got
    # git and pip reach the upstream (which is no git server or package index, so they then give up) and
    # report the gateway's 403 for the denied host.
    assert "403" in got["git_denied"] and "exit 128" in got["git_denied"], got
    assert "403" in got["pip_denied"], got
    paths = [r["path"] for r in site.requests]
    assert "/files/hello.txt" in paths
    assert any(p.startswith("/files/repo.git/info/refs") for p in paths), paths  # git, via the gateway
    assert any(p.startswith("/files/simple/roster-compat-probe") for p in paths), paths  # and pip
    assert all(r["headers"].get("user-agent") for r in site.requests)

    # The openai client: the real key injected (the box holds the sentinel), a refusal for another host.
    assert got["openai_allowed"] == "200 hello from the model", got
    # The client sends its key (the sentinel) to the other host too: a tripwire, not just no grant.
    assert got["openai_denied"] == "403 tripwire", got
    assert [r["authorized"] for r in model.records] == [True]
    assert REAL_KEY not in run.output
