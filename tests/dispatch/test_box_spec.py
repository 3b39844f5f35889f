"""What a box gets: the proxy with its own token, the gateway CA, sentinels, no privileges, limits,
read-only code and config, a writable workspace, no docker socket."""

from __future__ import annotations

from controlplane.dispatch.box import BOX_CA_BUNDLE, box_create_kwargs, proxy_url
from controlplane.dispatch.preflight import BoxNetwork
from controlplane.dispatch.rundirs import run_dirs_create, run_dirs_path, run_dirs_remove
from controlplane.fleet.services import run_create

NETWORK = BoxNetwork(name="rst-net", bridge="rst-br", gateway_ip="172.30.0.1")
TOKEN = "rt_" + "A" * 43


def _spec(run, sentinels=None):
    dirs = run_dirs_create(run)
    return dirs, box_create_kwargs(run, image_id="sha256:abc", network=NETWORK, token=TOKEN, dirs=dirs,
                                   sentinels=sentinels or {})


def test_proxy_points_at_the_gateway_on_the_bridge_with_the_runs_token(worker, gateway_ca, settings):
    settings.ROSTER_GATEWAY_PORT = 18443
    run, _ = run_create(worker, command=["true"])
    _, spec = _spec(run)
    env = spec["environment"]
    expected = f"http://run:{TOKEN}@172.30.0.1:18443"
    assert proxy_url(NETWORK, TOKEN) == expected
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        assert env[name] == expected
    assert env["NO_PROXY"] == "" and env["no_proxy"] == ""


def test_gateway_ca_trusted_by_the_usual_variables(worker, gateway_ca):
    run, _ = run_create(worker, command=["true"])
    dirs, spec = _spec(run)
    env = spec["environment"]
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"):
        assert env[name] == BOX_CA_BUNDLE
    assert env["NODE_EXTRA_CA_CERTS"] == "/etc/roster/gateway-ca.pem" and env["NODE_USE_ENV_PROXY"] == "1"
    assert gateway_ca.read_text() in dirs.ca_bundle.read_text()
    mounts = {m["Target"]: m for m in spec["mounts"]}
    assert mounts[BOX_CA_BUNDLE]["ReadOnly"] is True
    assert mounts["/etc/roster/gateway-ca.pem"]["Source"] == str(dirs.gateway_ca)
    assert dirs.gateway_ca.read_text() == gateway_ca.read_text()
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in (dirs.gateway_ca, dirs.ca_bundle))


def test_locked_down_container(worker, gateway_ca, settings):
    run, _ = run_create(worker, command=["sleep", "1"])
    _, spec = _spec(run)
    assert spec["cap_drop"] == ["ALL"]
    assert spec["security_opt"] == ["no-new-privileges:true"]
    assert spec["privileged"] is False
    assert spec["user"] == f"{settings.ROSTER_BOX_UID}:{settings.ROSTER_BOX_UID}"
    assert not spec["user"].startswith("0:")
    assert spec["dns"] == ["127.0.0.1"]
    assert spec["network"] == "rst-net"
    assert spec["mem_limit"] and spec["memswap_limit"] == spec["mem_limit"]
    assert spec["nano_cpus"] > 0 and spec["pids_limit"] > 0
    assert spec["read_only"] is True
    assert [(u["Name"], u["Soft"], u["Hard"]) for u in spec["ulimits"]] == [("core", 0, 0)]
    assert spec["command"] == ["sleep", "1"]
    assert spec["name"].endswith(f"-run-{run.pk}")


def test_mounts_code_and_config_read_only_workspace_writable_no_docker_socket(worker, gateway_ca, settings):
    run, _ = run_create(worker, command=["true"])
    dirs, spec = _spec(run)
    mounts = {m["Target"]: m for m in spec["mounts"]}
    assert mounts["/code"]["ReadOnly"] is True
    assert mounts["/config"]["ReadOnly"] is True
    assert "/workspace" not in mounts and spec["tmpfs"]["/workspace"].startswith("rw,")
    assert f"uid={settings.ROSTER_BOX_UID}" in spec["tmpfs"]["/workspace"]
    assert "size=" in spec["tmpfs"]["/workspace"] and "size=" in spec["tmpfs"]["/tmp"]  # noqa: S108
    assert all("docker.sock" not in m["Source"] and "docker.sock" not in m["Target"] for m in spec["mounts"])
    assert all(m["Type"] == "bind" for m in spec["mounts"])
    assert "volumes" not in spec
    assert (dirs.config / "run.json").is_file()


def test_sentinels_in_place_of_secrets(worker, gateway_ca):
    run, _ = run_create(worker, command=["true"])
    _, spec = _spec(run, {"ROSTER_SECRET_OPENAI": "sk-roster-sentinel"})
    assert spec["environment"]["ROSTER_SECRET_OPENAI"] == "sk-roster-sentinel"


def test_the_agent_finds_its_model_in_settings_not_secrets(worker, gateway_ca, settings):
    settings.ROSTER_AGENT_BASE_URL = "http://127.0.0.1:18091/v1"
    settings.ROSTER_AGENT_MODEL = "roster-scripted"
    settings.ROSTER_AGENT_MAX_TURNS = 7
    run, _ = run_create(worker, command=["python3", "-m", "workers.agent", "task"])
    _, spec = _spec(run, {"OPENAI_API_KEY": "sk-proj-sentinel"})
    env = spec["environment"]
    assert env["ROSTER_AGENT_BASE_URL"] == "http://127.0.0.1:18091/v1"
    assert env["ROSTER_AGENT_MODEL"] == "roster-scripted" and env["ROSTER_AGENT_MAX_TURNS"] == "7"
    assert env["ROSTER_AGENT_KEY_VARIABLE"] == "OPENAI_API_KEY"
    assert env["OPENAI_API_KEY"] == "sk-proj-sentinel"


def test_the_box_is_told_the_proposals_name_the_gateway_answers(worker, gateway_ca, settings):
    run, _ = run_create(worker, command=["true"])
    assert _spec(run)[1]["environment"]["ROSTER_AGENT_PROPOSALS_URL"] == (
        "http://proposals.roster.invalid/v1/proposals")
    settings.ROSTER_PROPOSALS_HOST = "intake.roster.invalid"
    assert _spec(run)[1]["environment"]["ROSTER_AGENT_PROPOSALS_URL"] == (
        "http://intake.roster.invalid/v1/proposals")


def test_run_dirs_are_removed(worker, gateway_ca):
    run, _ = run_create(worker, command=["true"])
    _spec(run)
    assert run_dirs_path(run.pk).is_dir()
    run_dirs_remove(run.pk)
    assert not run_dirs_path(run.pk).exists()
    run_dirs_remove(run.pk)  # idempotent
