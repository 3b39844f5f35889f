"""From inside a real box, with the real gateway and control plane: the gateway's port is the only way
out, nothing real is inside, nothing can be changed; through the gateway an allowed request gets the
secret injected upstream, a denied one fails legibly, and dead or foreign tokens are refused.
One probe box does all of it (see probe.py) to keep the Docker time short."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from urllib.parse import urlsplit

import docker
import httpx
import pytest
from prometheus_client import CollectorRegistry

from controlplane.dispatch.running import run_dispatch
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, run_set_status, worker_create
from controlplane.metrics import listener
from controlplane.policy.models import Grant
from controlplane.vault.services import secret_set
from tests.integration.boxes.conftest import install_probe
from tests.integration.boxes.servers import host_listening_ports, listener_on_all_interfaces, upstream_server

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REAL_VALUE = "real-upstream-credential-" + "7f3a9c" * 4
OTHER_BOX_PORT = 8000


@pytest.fixture
def other_box(docker_client, box_site):
    listen = (f"import socket,time; s=socket.socket(); s.bind(('0.0.0.0',{OTHER_BOX_PORT})); s.listen(8); "
              "time.sleep(120)")
    container = docker_client.containers.run(
        box_site.image, ["python3", "-c", listen], network=box_site.network, detach=True, remove=False,
        labels={"roster.test": box_site.namespace}, environment={"HTTP_PROXY": "x", "HTTPS_PROXY": "x"},
        cap_drop=["ALL"], dns=["127.0.0.1"],
    )
    try:
        container.reload()
        ip = container.attrs["NetworkSettings"]["Networks"][box_site.network]["IPAddress"]
        deadline = time.monotonic() + 20
        # The host can reach it: the listener is real, so a box failing to reach it proves ICC is off.
        while True:
            try:
                socket.create_connection((ip, OTHER_BOX_PORT), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield ip
    finally:
        container.remove(force=True)


@contextlib.contextmanager
def metrics_listener():
    """The control plane's metrics listener as the decision API's process runs it (on loopback), so the
    box's scan of every host port tries it too, beside the gateway's health and metrics port."""
    server = listener.start("127.0.0.1", 0, registry=CollectorRegistry())
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


def _probe_result(run: Run) -> dict:
    line = next(line for line in run.output.splitlines() if line.startswith("PROBE "))
    return json.loads(line.removeprefix("PROBE "))


def test_box_is_locked_and_the_gateway_is_the_only_exit(stack, docker_client, other_box, settings):
    site = stack.site
    worker = worker_create("probe-worker")
    secret = secret_set("upstream-key", REAL_VALUE)
    with upstream_server() as (http_port, upstream), \
            upstream_server(stack.upstream_ca) as (tls_port, tls_upstream), \
            listener_on_all_interfaces() as listen_port, metrics_listener() as metrics_port:
        Grant.objects.create(
            slug="probe-upstream", worker=worker, methods=["GET"], schemes=["http"], host="127.0.0.1",
            port=http_port, paths=["/allowed/*"], secret=secret, inject_header="authorization",
            inject_format="Bearer {secret}",
        )
        Grant.objects.create(slug="probe-tls", worker=worker, methods=["GET"], schemes=["https"],
                             host="127.0.0.1", port=tls_port, paths=["/tls/*"])
        args = {
            "gateway": [site.gateway_ip, site.gateway_port],
            "listener": [site.gateway_ip, listen_port],
            "other_box": [other_box, OTHER_BOX_PORT],
            "scan": host_listening_ports(),  # every port the host listens on, this listener's included
            "allowed": f"http://127.0.0.1:{http_port}/allowed/thing",
            # The sentinel toward a host no grant of its secret names, and toward its own grant's host on a
            # path that grant does not cover.
            "denied": f"http://127.0.0.2:{http_port}/denied",
            "denied_home": f"http://127.0.0.1:{http_port}/denied",
            "bad_token": f"http://127.0.0.1:{http_port}/allowed/thing",
            "https": f"https://127.0.0.1:{tls_port}/tls/hello",
            "sentinel_var": "ROSTER_SECRET_UPSTREAM_KEY",
        }
        run, _ = run_create(worker, command=["python3", install_probe(site, worker.name), json.dumps(args)],
                            timeout_seconds=120)
        run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, (run.status_reason, run.output[-2000:])
    assert run.image_id.startswith("sha256:") and run.container_id
    assert run.token_hash is None
    probe = _probe_result(run)

    # Network: the gateway port and nothing else.
    assert probe["gateway"] == "open"
    assert probe["listener"].startswith("blocked"), "a host port other than the gateway's was reachable"
    assert len(args["scan"]) > 3 and listen_port in args["scan"] and site.gateway_port in args["scan"]
    assert probe["open_host_ports"] == [site.gateway_port]
    # Neither metrics endpoint is reachable from a box: the gateway's (its loopback health port) and the
    # control plane's listener were both among the ports tried.
    assert urlsplit(stack.gateway.health_url).port in args["scan"] and metrics_port in args["scan"]
    assert probe["direct_ip"].startswith("blocked") and probe["internet_ip"].startswith("blocked")
    assert probe["dns"].startswith("failed")
    assert probe["other_box"].startswith("blocked")

    # Privileges and mounts.
    assert probe["uid"] == settings.ROSTER_BOX_UID != 0
    # No core dumps, whatever the box sets: a crash would hand box memory to the host's core handler.
    assert probe["core_limit"] == [0, 0]
    assert probe["write_code"].startswith("refused") and probe["write_config"].startswith("refused")
    assert probe["write_rootfs"].startswith("refused") and probe["write_resolv"].startswith("refused")
    assert probe["write_workspace"] == "written"
    assert probe["docker_socket"] == []
    assert probe["raw_socket"].startswith("refused") and probe["ifdown"].startswith("refused")
    assert probe["caps"] == {"CapEff": "0" * 16, "CapPrm": "0" * 16, "CapBnd": "0" * 16, "NoNewPrivs": "1"}
    limits, quota = probe["limits"], settings.ROSTER_BOX_NANO_CPUS * 100_000 // 1_000_000_000
    assert limits["memory"] == str(docker.utils.parse_bytes(settings.ROSTER_BOX_MEMORY))
    assert limits["pids"] == str(settings.ROSTER_BOX_PIDS_LIMIT)
    assert limits["cpu"] in (str(quota), f"{quota} 100000")  # cgroup v1 quota, or v2 "quota period"

    # No real secret anywhere in the box: environment, mounts, output; the sentinel is there instead.
    assert REAL_VALUE not in run.output
    assert probe["env"]["ROSTER_SECRET_UPSTREAM_KEY"] == secret.sentinel != REAL_VALUE
    assert all(REAL_VALUE not in text for text in probe["files"].values())

    # Through the gateway: allowed with the secret injected upstream; denied legibly; a bad token refused.
    assert probe["allowed"]["status"] == 200 and "upstream says hello" in probe["allowed"]["body"]
    assert [r["headers"].get("authorization") for r in upstream.requests] == [f"Bearer {REAL_VALUE}"]
    assert all(r["path"].startswith("/allowed/") for r in upstream.requests)
    # The denied request carries the secret's sentinel to a host no grant injects it for: a tripwire
    # (docs/grants.md), still a legible 403. Back to its own grant's host on another path it is no_grant,
    # nothing injected, the secret named (a model host is not a tripwire for its own key).
    assert probe["denied"]["status"] == 403 and '"reason": "tripwire"' in probe["denied"]["body"]
    assert probe["denied_home"]["status"] == 403 and '"reason": "no_grant"' in probe["denied_home"]["body"]
    home_body = probe["denied_home"]["body"]
    assert "'upstream-key'" in home_body and "nothing injected" in home_body
    assert probe["bad_token"]["status"] == 407
    assert probe["https"]["status"] == 200, probe["https"]  # the box trusts the gateway CA
    assert probe["curl_https"] == "200" and probe["node_ca_readable"] is True
    assert [r["path"] for r in tls_upstream.requests] == ["/tls/hello", "/tls/hello-curl"]

    # This run's token, now that it ended, and another ended run's token: refused at the gateway.
    own_token = probe["env"]["HTTPS_PROXY"].split("run:", 1)[1].split("@", 1)[0]
    other, other_token = run_create(worker, command=["true"])
    run_set_status(other.pk, Run.Status.CANCELLED, "test")
    with upstream_server() as (port, after):
        for token in (own_token, other_token):
            proxy = stack.gateway.proxy_url_with(token)  # the bridge address, where it listens
            answer = httpx.get(f"http://127.0.0.1:{port}/allowed/again", proxy=proxy, timeout=10)
            assert answer.status_code == 407, answer.text
        assert after.requests == []


def test_gateway_listens_on_the_bridge_address_only(stack):
    """As in production (scripts/gateway-up.sh): reachable where boxes reach it, not on host loopback."""
    gw = stack.gateway
    assert gw.host == stack.site.gateway_ip and f"@{stack.site.gateway_ip}:" in gw.proxy_url_with("rt_x")
    with socket.create_connection((stack.site.gateway_ip, stack.site.gateway_port), timeout=2):
        pass
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", stack.site.gateway_port), timeout=2):
        pass
    assert httpx.get(gw.health_url, timeout=5).status_code == 200  # health stays on loopback
