"""compose.yaml gives the dispatcher what its preflight needs and starts the gateway like
scripts/gateway-up.sh (no compose here: the file is read as YAML and checked against those needs)."""

from __future__ import annotations

import re

import pytest

from tests.support import procs

yaml = pytest.importorskip("yaml")


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((procs.REPO / "compose.yaml").read_text())["services"]


def _default(value: str) -> str:
    """A compose value with each ${VAR:-default} replaced by its default."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))


def test_worker_reads_the_host_firewall_and_reaches_the_bridge(services):
    worker = services["celery-worker"]
    assert worker["network_mode"] == "host"  # iptables -S and the bridge address are the host's
    assert "NET_ADMIN" in worker["cap_add"] and str(worker["user"]).split(":")[0] == "0"
    env = {k: _default(v) for k, v in worker["environment"].items()}
    assert "@127.0.0.1:" in env["DATABASE_URL"] and env["REDIS_URL"].startswith("redis://127.0.0.1:")
    assert env["ROSTER_GATEWAY_HEALTH_URL"].startswith("http://127.0.0.1:")


def test_worker_mounts_run_and_code_dirs_at_their_host_paths(services):
    worker = services["celery-worker"]
    env = {k: _default(v) for k, v in worker["environment"].items()}
    mounts = [_default(v).split(":")[:2] for v in worker["volumes"]]
    for setting in ("ROSTER_BOX_RUNS_DIR", "ROSTER_BOX_CODE_DIR"):
        assert [env[setting], env[setting]] in mounts, setting
    assert ["/var/run/docker.sock", "/var/run/docker.sock"] in mounts
    ca_dir = env["ROSTER_GATEWAY_CA_CERT"].rsplit("/", 1)[0]
    assert any(m[1] == ca_dir for m in mounts)


def test_host_network_services_reach_db_and_redis_on_loopback(services):
    for name in ("db", "redis"):
        assert all(str(p).startswith("127.0.0.1:") for p in services[name]["ports"]), name


def test_gateway_runs_like_gateway_up(services):
    gateway = services["gateway"]
    assert gateway["network_mode"] == "host" and "ports" not in gateway
    command = [_default(c) for c in gateway["command"]]
    options = dict(c.split("=", 1) for c in command if "=" in c)
    assert command[:4] == ["mitmdump", "-q", "-s", "/gateway/roster_gateway/script.py"]
    assert options["listen_host"].startswith("${ROSTER_GATEWAY_LISTEN_HOST:?")  # required, no default
    assert options["roster_service_token_file"] == "/run/secrets/gateway_token"
    assert "gateway_token" in gateway["secrets"]
    assert options["roster_control_plane"] == "http://127.0.0.1:8000"
    assert "127.0.0.1:8000:8000" in services["web"]["ports"]
    worker_env = {k: _default(v) for k, v in services["celery-worker"]["environment"].items()}
    assert worker_env["ROSTER_GATEWAY_HEALTH_URL"].endswith(f":{options['roster_health_port']}/healthz")
    assert worker_env["ROSTER_GATEWAY_PORT"] == options["listen_port"]
    export_dir = options["roster_ca_cert_export"].rsplit("/", 1)[0]
    assert any(v.split(":")[1] == export_dir for v in gateway["volumes"])
