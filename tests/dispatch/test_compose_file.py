"""compose.yaml gives the dispatcher what its preflight needs, runs the decision API as its own service
like scripts/up.sh (two replicas of it), and starts the gateway like scripts/gateway-up.sh, pointed at
both replicas; and
compose.box-host.yaml's worker and gateway are compose.yaml's. (The file is read as YAML here, fast and
without Docker; tests/integration/compose brings both files up for real.)"""

from __future__ import annotations

import re

import pytest

from tests.support import procs

yaml = pytest.importorskip("yaml")


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load((procs.REPO / "compose.yaml").read_text())["services"]


@pytest.fixture(scope="module")
def box_host_services() -> dict:
    return yaml.safe_load((procs.REPO / "compose.box-host.yaml").read_text())["services"]


def _default(value: str) -> str:
    """A compose value with each ${VAR:-default} replaced by its default."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", str(value))


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


def _gateway_options(services) -> dict[str, str]:
    command = [_default(c) for c in services["gateway"]["command"]]
    return dict(c.split("=", 1) for c in command if "=" in c)


def _loopback_port(url: str) -> str:
    match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)", url)
    assert match, f"{url} is not a host-loopback URL"
    return match.group(1)


def _published(service: dict) -> dict[str, str]:
    """container port -> host port, for ports published on host loopback only."""
    published = {}
    for port in service["ports"]:
        host_ip, host_port, container_port = _default(port).split(":")
        assert host_ip == "127.0.0.1", port
        published[container_port] = host_port
    return published


def test_decision_api_is_its_own_service_like_up_sh(services):
    api, web = services["decision-api"], services["web"]
    for key in ("build", "depends_on"):  # same image
        assert api[key] == web[key], key
    # The same environment and secrets, the scrape token's hash for its metrics, and its process count.
    assert api["environment"] == {**web["environment"],
                                  "ROSTER_METRICS_TOKEN_SHA256_FILE": "/run/secrets/metrics_token_sha256",
                                  "ROSTER_DECISION_PROCESSES": "${ROSTER_DECISION_PROCESSES:-2}"}
    assert api["secrets"] == [*web["secrets"], "metrics_token_sha256"]
    assert api["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    command = api["command"]
    assert command[:3] == ["python", "-m", "controlplane.decision_server"]
    assert "controlplane.decision_server" in (procs.REPO / "scripts" / "up.sh").read_text()
    args = dict(zip(command[3::2], command[4::2], strict=True))
    # Bridge network: it must listen on the container's interfaces to be published at all.
    assert "network_mode" not in api and args["--host"] == "0.0.0.0"
    assert args["--port"] in _published(api)
    assert f"('127.0.0.1', {args['--port']})" in " ".join(api["healthcheck"]["test"])
    # Its metrics listener: on the container's interfaces, published on host loopback only.
    assert args["--metrics-host"] == "0.0.0.0" and args["--metrics-port"] in _published(api)
    assert all(port.startswith("127.0.0.1:") for port in api["ports"])


def test_gateway_asks_both_decision_api_replicas_and_never_dials_web(services):
    options = _gateway_options(services)
    decision_ports = [_loopback_port(url) for url in options["roster_control_plane"].split(",")]
    api_command = services["decision-api"]["command"]
    api_port = api_command[api_command.index("--port") + 1]
    replicas = ("decision-api", "decision-api-2")
    assert decision_ports == [_published(services[name])[api_port] for name in replicas]
    also = options["roster_control_plane_also"].split(",")
    web_port, *metrics_ports = [_loopback_port(url) for url in also]
    assert _published(services["web"])["8000"] == web_port not in decision_ports
    # Neither replica's metrics listener is ever dialled for a box either.
    assert metrics_ports == [_published(services[name])["8003"] for name in replicas]
    # Started once the first replica listens (the second is started too; either answering is enough).
    assert services["gateway"]["depends_on"] == {"decision-api": {"condition": "service_healthy"},
                                                 "decision-api-2": {"condition": "service_started"}}


def test_the_second_decision_api_replica_is_the_first_on_other_ports(services):
    first, second = dict(services["decision-api"]), dict(services["decision-api-2"])
    assert set(_published(first)) == set(_published(second)) == {"8002", "8003"}
    assert not set(_published(first).values()) & set(_published(second).values())
    first.pop("ports"), second.pop("ports")
    assert first == second  # image, command, environment, secrets, healthcheck
    assert second["environment"]["DATABASE_URL"] == first["environment"]["DATABASE_URL"]  # the one PostgreSQL


def test_gateway_sets_every_option_gateway_up_sets(services):
    script = (procs.REPO / "scripts" / "gateway-up.sh").read_text()
    wanted = set(re.findall(r"--set ([a-z_0-9]+)=", script))
    assert {"roster_control_plane", "roster_control_plane_also"} <= wanted
    assert wanted <= set(_gateway_options(services))


def test_gateway_runs_like_gateway_up(services):
    gateway = services["gateway"]
    assert gateway["network_mode"] == "host" and "ports" not in gateway
    command = [_default(c) for c in gateway["command"]]
    options = _gateway_options(services)
    assert command[:4] == ["mitmdump", "-q", "-s", "/gateway/roster_gateway/script.py"]
    assert options["listen_host"].startswith("${ROSTER_GATEWAY_LISTEN_HOST:?")  # required, no default
    assert options["roster_service_token_file"] == "/run/secrets/gateway_token"
    assert "gateway_token" in gateway["secrets"]
    # The decision API's replicas, not web.
    assert options["roster_control_plane"] == "http://127.0.0.1:8002,http://127.0.0.1:8005"
    assert options["roster_control_plane_also"] == ("http://127.0.0.1:8000,http://127.0.0.1:8003,"
                                                    "http://127.0.0.1:8006")
    assert _published(services["web"]) == {"8000": "8000"}
    worker_env = {k: _default(v) for k, v in services["celery-worker"]["environment"].items()}
    assert worker_env["ROSTER_GATEWAY_HEALTH_URL"].endswith(f":{options['roster_health_port']}/healthz")
    assert worker_env["ROSTER_GATEWAY_PORT"] == options["listen_port"]
    export_dir = options["roster_ca_cert_export"].rsplit("/", 1)[0]
    assert any(v.split(":")[1] == export_dir for v in gateway["volumes"])


def _control_plane_at(value, host_var: str = "${ROSTER_CONTROL_PLANE_HOST:-127.0.0.1}"):
    """compose.box-host.yaml's value with the control plane's address as compose.yaml's (host loopback)."""
    if isinstance(value, dict):
        return {k: _control_plane_at(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_control_plane_at(v) for v in value]
    return value.replace(host_var, "127.0.0.1") if isinstance(value, str) else value


def test_second_box_host_runs_compose_yaml_worker_and_gateway(services, box_host_services):
    """The second box host's worker and gateway are compose.yaml's: same image, options, mounts and
    privileges; they differ only in where the control plane is and in not waiting for its services."""
    assert set(box_host_services) == {"celery-worker", "boxwatcher", "gateway"}
    for name in ("celery-worker", "boxwatcher", "gateway"):
        mine, theirs = dict(services[name]), _control_plane_at(dict(box_host_services[name]))
        for key in set(mine) | set(theirs):
            if key == "depends_on":
                continue
            expected = mine.get(key)
            if name in ("celery-worker", "boxwatcher") and key in ("command", "environment"):
                # A box host must name its namespace (no default shared with the first host).
                expected = _default_namespace_required(expected)
            assert theirs.get(key) == expected, f"{name}.{key}"
    assert box_host_services["celery-worker"]["depends_on"] == {"gateway": {"condition": "service_started"}}
    assert box_host_services["boxwatcher"]["depends_on"] == {"gateway": {"condition": "service_started"}}
    assert "depends_on" not in box_host_services["gateway"]


def _default_namespace_required(value):
    required = "${ROSTER_BOX_NAMESPACE:?set ROSTER_BOX_NAMESPACE, one per box host}"
    if isinstance(value, dict):
        return {k: _default_namespace_required(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_default_namespace_required(v) for v in value]
    return value.replace("${ROSTER_BOX_NAMESPACE:-roster}", required) if isinstance(value, str) else value


@pytest.mark.parametrize("which", ["compose.yaml", "compose.box-host.yaml"])
def test_each_box_host_runs_one_box_watcher_beside_its_worker(which):
    services = yaml.safe_load((procs.REPO / which).read_text())["services"]
    worker, watcher = services["celery-worker"], services["boxwatcher"]
    assert watcher["command"] == ["python", "manage.py", "boxwatcher"]
    assert watcher["volumes"] == worker["volumes"]  # the Docker socket and the run dirs at their host paths
    assert watcher["network_mode"] == "host" and not watcher["cap_add"]  # never reads the firewall
    env = {k: _default(v) for k, v in watcher["environment"].items()}
    worker_env = {k: _default(v) for k, v in worker["environment"].items()}
    for name in ("DATABASE_URL", "REDIS_URL", "ROSTER_BOX_NAMESPACE", "ROSTER_BOX_RUNS_DIR"):
        assert env[name] == worker_env[name], name
    assert env["ROSTER_BOXWATCHER_HEARTBEAT_FILE"] in " ".join(watcher["healthcheck"]["test"])
