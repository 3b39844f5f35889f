"""Preflight refuses, with a reason, and nothing starts: gateway down, network not internal, inter-box
traffic on, host firewall missing. Real Docker networks; no box is ever created."""

from __future__ import annotations

import contextlib
import subprocess

import docker
import pytest

from controlplane.dispatch.engine import box_name
from controlplane.dispatch.running import run_dispatch
from controlplane.fleet.models import Run
from controlplane.fleet.services import run_create, worker_create
from tests.support import procs

pytestmark = [pytest.mark.integration, pytest.mark.docker]


@pytest.fixture
def site_settings(box_site, settings, db, tmp_path):
    for name, value in box_site.settings.items():
        setattr(settings, name, value)
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    settings.ROSTER_GATEWAY_CA_CERT = ca
    settings.ROSTER_GATEWAY_HEALTH_URL = f"http://127.0.0.1:{procs.free_port()}/healthz"  # nothing listens
    return box_site


@contextlib.contextmanager
def network(client, name, *, internal=True, icc="false", bridge=None):
    options = {"com.docker.network.bridge.enable_icc": icc}
    if bridge:
        options["com.docker.network.bridge.name"] = bridge
    net = client.networks.create(name, driver="bridge", internal=internal, options=options)
    try:
        yield net
    finally:
        net.remove()


def _dispatch_refused(docker_client) -> Run:
    run, _ = run_create(worker_create("preflight-worker"), command=["echo", "must not run"])
    run_dispatch(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.REFUSED
    assert run.container_id == "" and run.output == ""
    assert run.token_hash is None  # revoked
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(box_name(run.pk))
    return run


def test_refused_when_the_gateway_is_down(site_settings, docker_client):
    run = _dispatch_refused(docker_client)
    assert "gateway health check" in run.status_reason


def test_refused_when_the_network_is_not_internal(site_settings, docker_client, settings):
    name = f"{site_settings.namespace}-open"
    with network(docker_client, name, internal=False, bridge=f"{site_settings.namespace}op"):
        settings.ROSTER_BOX_NETWORK = name
        run = _dispatch_refused(docker_client)
    assert "is not internal" in run.status_reason


def test_refused_when_boxes_can_talk_to_each_other(site_settings, docker_client, settings):
    name = f"{site_settings.namespace}-icc"
    with network(docker_client, name, icc="true", bridge=f"{site_settings.namespace}ic"):
        settings.ROSTER_BOX_NETWORK = name
        run = _dispatch_refused(docker_client)
    assert "allows traffic between boxes" in run.status_reason


def test_refused_when_the_host_firewall_is_missing(site_settings, docker_client, settings):
    name = f"{site_settings.namespace}-nofw"
    with network(docker_client, name, bridge=f"{site_settings.namespace}nf"):
        settings.ROSTER_BOX_NETWORK = name
        run = _dispatch_refused(docker_client)
    assert "host firewall chain" in run.status_reason


def test_refused_when_the_firewall_was_tampered_with(site_settings, docker_client):
    chain = f"ROSTER-{site_settings.bridge}"
    subprocess.run(["iptables", "-w", "-D", chain, "-j", "DROP"], check=True)
    try:
        run = _dispatch_refused(docker_client)
    finally:
        subprocess.run(["iptables", "-w", "-A", chain, "-j", "DROP"], check=True)
    assert "does not hold the lockdown rules" in run.status_reason


def test_refused_when_the_network_is_missing(site_settings, docker_client, settings):
    settings.ROSTER_BOX_NETWORK = f"{site_settings.namespace}-absent"
    run = _dispatch_refused(docker_client)
    assert "does not exist" in run.status_reason


def _iptables_lines(*args) -> list[str]:
    return subprocess.run(["iptables", "-w", "-S", *args], check=True, capture_output=True,
                          text=True).stdout.splitlines()


def test_lockdown_script_is_idempotent(box_site):
    script = str(procs.REPO / "scripts" / "network-lockdown.sh")
    for _ in range(2):
        subprocess.run([script, box_site.network, box_site.bridge, str(box_site.gateway_port)], check=True,
                       capture_output=True)
    chain = f"ROSTER-{box_site.bridge}"
    assert [line for line in _iptables_lines(chain) if line.startswith("-A")] == [
        f"-A {chain} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        f"-A {chain} -d {box_site.gateway_ip}/32 -p tcp -m tcp --dport {box_site.gateway_port} -j ACCEPT",
        f"-A {chain} -j DROP",
    ]
    assert _iptables_lines("INPUT").count(f"-A INPUT -i {box_site.bridge} -j {chain}") == 1


def test_lockdown_script_refuses_an_open_network_of_that_name(box_site, docker_client):
    name, bridge = f"{box_site.namespace}-lo", f"{box_site.namespace}lo"
    with network(docker_client, name, internal=False, bridge=bridge):
        done = subprocess.run([str(procs.REPO / "scripts" / "network-lockdown.sh"), name, bridge, "8080"],
                              capture_output=True, text=True)
    assert done.returncode == 1 and "is not locked" in done.stderr
    assert not any(bridge in line for line in _iptables_lines("INPUT"))
