"""Real Docker, a real gateway (mitmdump), a real control plane (daphne) and, where dispatch goes through
the queue, real Redis and a real Celery worker. One locked network, one image and one stack per session;
boxes are short-lived. Every Docker resource carries a per-session prefix and is removed at the end."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
from django.db import connections

from tests.conftest import GATEWAY_SERVICE_TOKEN
from tests.integration.boxes.servers import TestCA
from tests.support import procs
from tests.support.gateway import gateway_process

REPO = procs.REPO
PROBE = Path(__file__).with_name("probe.py")


@dataclass
class BoxSite:
    namespace: str
    network: str
    bridge: str
    gateway_ip: str
    gateway_port: int
    image: str
    tmp: Path
    settings: dict  # setting name -> value, applied in this process and passed to child processes

    def child_env(self, **extra) -> dict[str, str]:
        return {name: str(value) for name, value in {**self.settings, **extra}.items()}


@pytest.fixture(scope="session")
def docker_client():
    client = docker.from_env(timeout=60)
    client.ping()
    return client


@pytest.fixture(scope="session")
def box_site(docker_client, tmp_path_factory):
    # ROSTER_TEST_BOX_IMAGE: a tag of this checkout's own, where several checkouts share one dockerd and
    # each rebuild of roster-box:latest would otherwise swap the image under another's running tests.
    image = os.environ.get("ROSTER_TEST_BOX_IMAGE", "roster-box:latest")
    subprocess.run([str(REPO / "workers" / "build.sh")], check=True, capture_output=True, timeout=900,
                   env={**os.environ, "ROSTER_BOX_IMAGE": image})
    namespace = "rst" + secrets.token_hex(3)
    network, bridge, port = f"{namespace}-net", f"{namespace}br", procs.free_port()
    subprocess.run([str(REPO / "scripts" / "network-lockdown.sh"), network, bridge, str(port)], check=True,
                   capture_output=True, timeout=60)
    tmp = tmp_path_factory.mktemp("boxes")
    gateway_ip = docker_client.networks.get(network).attrs["IPAM"]["Config"][0]["Gateway"]
    site = BoxSite(
        namespace=namespace, network=network, bridge=bridge, gateway_ip=gateway_ip, gateway_port=port,
        image=image, tmp=tmp,
        settings={
            "ROSTER_BOX_NAMESPACE": namespace, "ROSTER_BOX_NETWORK": network, "ROSTER_GATEWAY_PORT": port,
            "ROSTER_BOX_IMAGE": image, "ROSTER_BOX_RUNS_DIR": tmp / "runs",
            "ROSTER_BOX_CODE_DIR": tmp / "code",
            "ROSTER_VAULT_KEY_FILE": tmp / "vault.key", "ROSTER_REAP_EXITED_GRACE_SECONDS": 1,
        },
    )
    try:
        yield site
    finally:
        for label in (f"roster.namespace={namespace}", f"roster.test={namespace}"):
            for container in docker_client.containers.list(all=True, filters={"label": label}):
                with contextlib.suppress(docker.errors.DockerException):
                    container.remove(force=True)
        with contextlib.suppress(docker.errors.DockerException):
            docker_client.networks.get(network).remove()
        subprocess.run([str(REPO / "scripts" / "network-unlock.sh"), bridge], check=False, timeout=60)


@dataclass
class Stack:
    site: BoxSite
    control_plane_url: str
    gateway: object
    settings: dict
    upstream_ca: TestCA


@pytest.fixture(scope="session")
def box_stack(box_site, django_db_setup, django_db_blocker, redis_url, tmp_path_factory):
    """daphne (the decision API) and the gateway listening where boxes can reach it."""
    tmp = tmp_path_factory.mktemp("stack")
    upstream_ca = TestCA(tmp)
    db_name = connections["default"].settings_dict["NAME"]
    token_sha = hashlib.sha256(GATEWAY_SERVICE_TOKEN.encode()).hexdigest()
    env = procs.control_plane_env(db_name, redis_url,
                                  box_site.child_env(ROSTER_GATEWAY_TOKEN_SHA256=token_sha))
    with procs.daphne_server(env, tmp) as url, gateway_process(
        url, GATEWAY_SERVICE_TOKEN, tmp, allow_loopback_upstreams=True,
        # On the bridge address only, as in production (scripts/gateway-up.sh): boxes reach it there,
        # and nothing else on the host's other interfaces can.
        extra_options={"listen_host": box_site.gateway_ip, "listen_port": box_site.gateway_port,
                       "ssl_verify_upstream_trusted_ca": upstream_ca.cert_path},
    ) as gw:
        settings = {**box_site.settings, "ROSTER_GATEWAY_CA_CERT": gw.ca_cert_path,
                    "ROSTER_GATEWAY_HEALTH_URL": gw.health_url}
        yield Stack(site=box_site, control_plane_url=url, gateway=gw, settings=settings,
                    upstream_ca=upstream_ca)


@pytest.fixture
def stack(box_stack, settings, transactional_db, monkeypatch):
    """The session stack, with this process's settings pointing at it. Runs are dispatched inline here
    (running.run_dispatch): the dispatch message `run_start` queues is not sent, because a session's
    Celery worker, once a queued test started it, would take it as an admission pass and claim the oldest
    queued run, the one the test is about to dispatch itself (queued_stack sends them)."""
    from controlplane.dispatch import tasks

    for name, value in box_stack.settings.items():
        setattr(settings, name, value)
    monkeypatch.setattr(tasks.dispatch_run, "delay", lambda *args, **kwargs: None)
    return box_stack


@pytest.fixture(scope="session")
def celery_env(box_stack, redis_url, django_db_setup):
    db_name = connections["default"].settings_dict["NAME"]
    token_sha = hashlib.sha256(GATEWAY_SERVICE_TOKEN.encode()).hexdigest()
    return procs.control_plane_env(db_name, redis_url, {
        **{k: str(v) for k, v in box_stack.settings.items()}, "ROSTER_GATEWAY_TOKEN_SHA256": token_sha,
        # Room for test_watcher_boxes' 21 boxes at once, whatever the host's default.
        "ROSTER_BOXES_PER_HOST": "32", "ROSTER_BOXWATCHER_RECONCILE_SECONDS": "2",
    })


@pytest.fixture(scope="session")
def celery_broker(redis_url):
    """This process's Celery app publishes to the test Redis."""
    from controlplane.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = redis_url
    yield app
    app.conf.broker_url = previous


def _send_dispatch(*args, **kwargs):
    from controlplane.dispatch import tasks

    return tasks.dispatch_run.apply_async(args, kwargs)


SEND_DISPATCH = _send_dispatch


class Restartable:
    """One of the session's processes (the Celery worker, the box watcher), which a test may kill hard
    (SIGKILL, as in a crash: a Celery worker's tasks or the watcher's attachments die mid-run) and start
    again."""

    def __init__(self, factory, env: dict[str, str], tmp: Path, log_name: str):
        self.factory, self.env, self.tmp, self.log_name = factory, env, tmp, log_name
        self.stack = contextlib.ExitStack()
        self.proc = None

    def start(self):
        self.proc = self.stack.enter_context(self.factory(self.env, self.tmp))
        return self.proc

    def ensure(self):
        if self.proc is None or self.proc.poll() is not None:
            self.start()

    def kill(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.stack.close()
        self.stack = contextlib.ExitStack()

    def close(self):
        self.stack.close()

    def log(self) -> str:
        path = self.tmp / self.log_name
        return path.read_text(errors="replace") if path.exists() else ""


# Package-scoped, not session-scoped: a live Celery worker or box watcher admits every queued run of the
# test database, so left running after this package it would claim the runs later suites queue and drive
# themselves (the relay's runs, a queued run's page).
@pytest.fixture(scope="package")
def celery_workers(celery_env, celery_broker, tmp_path_factory):
    workers = Restartable(procs.celery_worker, celery_env, tmp_path_factory.mktemp("celery"), "celery.log")
    workers.start()
    try:
        yield workers
    finally:
        workers.close()


@pytest.fixture(scope="package")
def box_watchers(celery_env, celery_broker, tmp_path_factory):
    watchers = Restartable(procs.box_watcher, celery_env, tmp_path_factory.mktemp("boxwatcher"),
                           "boxwatcher.log")
    watchers.start()
    try:
        yield watchers
    finally:
        watchers.close()


@pytest.fixture
def queued_stack(stack, celery_workers, box_watchers, monkeypatch):
    """The stack plus a live Celery worker consuming dispatches and the box watcher starting and following
    the boxes (each restarted if a test killed it)."""
    from controlplane.dispatch import tasks

    monkeypatch.setattr(tasks.dispatch_run, "delay", SEND_DISPATCH)
    celery_workers.ensure()
    box_watchers.ensure()
    return stack


def wait_for_run(run_id: int, statuses, timeout: float = 60.0):
    from controlplane.fleet.models import Run

    deadline = time.monotonic() + timeout
    while True:
        run = Run.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {run.status} ({run.status_reason}) after {timeout}s")
        time.sleep(0.1)


def install_probe(site: BoxSite, worker_name: str) -> str:
    code = Path(site.settings["ROSTER_BOX_CODE_DIR"]) / worker_name
    code.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROBE, code / "probe.py")
    return "/code/probe.py"
