"""compose.yaml (the control plane and the first box host) and compose.box-host.yaml (a second box host),
brought up with the real compose tool on this machine's dockerd, as an operator would, under names that
are this session's alone: compose projects, box networks, bridges, firewall chains and loopback ports."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support import procs

REPO = procs.REPO
# Images this test builds, tagged apart from an operator's roster-controlplane/roster-gateway:latest and
# left cached between runs (a warm run rebuilds nothing). ROSTER_COMPOSE_TEST_IMAGES names them apart again,
# for a checkout whose compose test runs on a machine beside another's (each keeps its own tags).
_IMAGES = os.environ.get("ROSTER_COMPOSE_TEST_IMAGES", "roster-compose-test")
CONTROLPLANE_IMAGE = f"{_IMAGES}-controlplane:latest"
GATEWAY_IMAGE = f"{_IMAGES}-gateway:latest"


def compose_command() -> list[str]:
    """The compose plugin where present, else Debian's docker-compose (scripts/bootstrap.sh installs it)."""
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        subprocess.run(["docker", "compose", "version"], check=True, capture_output=True, timeout=30)
        return ["docker", "compose"]
    exe = shutil.which("docker-compose")
    if exe is None:
        raise RuntimeError("neither `docker compose` nor docker-compose is installed; run `make deps`")
    return [exe]


def run(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 300, stdin: str | None = None,
        check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=REPO, env={**os.environ, **(env or {})}, input=stdin, text=True,
                            capture_output=True, timeout=timeout)
    if check and result.returncode != 0:
        command = " ".join(args)
        raise AssertionError(f"{command} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@dataclass
class BoxHost:
    """One box host: a Celery worker and a gateway on its own locked box network."""

    namespace: str
    network: str
    bridge: str
    bridge_ip: str
    gateway_port: int
    health_port: int
    host_dir: Path

    def env(self) -> dict[str, str]:
        return {
            "ROSTER_BOX_NAMESPACE": self.namespace, "ROSTER_BOX_NETWORK": self.network,
            "ROSTER_GATEWAY_LISTEN_HOST": self.bridge_ip, "ROSTER_GATEWAY_PORT": str(self.gateway_port),
            "ROSTER_GATEWAY_HEALTH_PORT": str(self.health_port), "ROSTER_HOST_DIR": str(self.host_dir),
        }


@dataclass
class ComposeStack:
    compose: list[str]
    project: str
    env: dict[str, str]  # compose.yaml's settings (control plane and first box host)
    hosts: list[BoxHost]
    upstream_port: int
    logs: Path

    def project_of(self, host: int) -> tuple[str, list[str], dict[str, str]]:
        """(project, compose files, environment) of box host 0 (compose.yaml) or 1 (compose.box-host.yaml)."""
        if host == 0:
            return self.project, ["-f", "compose.yaml"], {**self.env, **self.hosts[0].env()}
        return f"{self.project}-host2", ["-f", "compose.box-host.yaml"], {**self.env, **self.hosts[1].env()}

    def compose_run(self, host: int, *args: str, timeout: float = 600, stdin: str | None = None,
                    check: bool = True) -> subprocess.CompletedProcess:
        project, files, env = self.project_of(host)
        return run([*self.compose, "-p", project, *files, *args], env=env, timeout=timeout, stdin=stdin,
                   check=check)

    def manage(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        """`python manage.py ARGS` in the compose-started web container, as an operator runs commands."""
        return self.compose_run(0, "exec", "-T", "web", "python", "manage.py", *args, timeout=120,
                                stdin=stdin, check=check)

    def only_worker(self, host: int) -> None:
        """Only box host HOST's Celery worker takes runs: the other's is stopped, this one started."""
        self.compose_run(1 - host, "stop", "--timeout", "5", "celery-worker")
        self.compose_run(host, "start", "celery-worker")

    def save_logs(self) -> None:
        def save(host: int) -> None:
            out = self.compose_run(host, "logs", "--no-color", timeout=120, check=False)
            (self.logs / f"compose-{self.project_of(host)[0]}.log").write_text(out.stdout + out.stderr)

        _both(save)


def _both(action) -> None:
    """ACTION(0) and ACTION(1) in parallel (each mostly waits on the compose tool); re-raises a failure."""
    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(action, host) for host in (0, 1)]:
            future.result()


def _secrets(directory: Path) -> None:
    """The secret files docs/operations.md has an operator create, owned by the images' users (the scrape
    token itself stays with the operator: only its hash is the control plane's)."""
    (directory / "gateway").mkdir(parents=True)
    token = "gst_" + secrets.token_urlsafe(32)
    scrape = "mst_" + secrets.token_urlsafe(32)
    files = {
        "gateway/service.token": (token + "\n", 0o600, 10002),
        "gateway-token.sha256": (hashlib.sha256(token.encode()).hexdigest(), 0o644, 0),
        "metrics.token": (scrape + "\n", 0o600, 0),
        "metrics-token.sha256": (hashlib.sha256(scrape.encode()).hexdigest() + "\n", 0o644, 0),
        "vault.key": (_fernet_key() + "\n", 0o600, 10001),
        "django-secret.key": (secrets.token_urlsafe(50) + "\n", 0o600, 10001),
    }
    for name, (text, mode, owner) in files.items():
        path = directory / name
        path.write_text(text)
        path.chmod(mode)
        os.chown(path, owner, owner)


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def _lock_network(namespace: str, index: int, port: int, tmp: Path) -> BoxHost:
    network, bridge = f"{namespace}-net{index}", f"{namespace}b{index}"
    run([str(REPO / "scripts" / "network-lockdown.sh"), network, bridge, str(port)], timeout=60)
    inspect = run(["docker", "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", network])
    host_dir = tmp / f"host{index}"
    for sub in ("runs", "workers"):
        (host_dir / sub).mkdir(parents=True)
    return BoxHost(namespace=f"{namespace}h{index}", network=network, bridge=bridge,
                   bridge_ip=inspect.stdout.strip(), gateway_port=port, health_port=procs.free_port(),
                   host_dir=host_dir)


def _unlock_network(host: BoxHost) -> None:
    for label in (f"roster.namespace={host.namespace}",):
        ids = run(["docker", "ps", "-aq", "--filter", f"label={label}"], check=False).stdout.split()
        if ids:
            run(["docker", "rm", "-f", *ids], check=False)
    run(["docker", "network", "rm", host.network], check=False)
    run([str(REPO / "scripts" / "network-unlock.sh"), host.bridge], check=False)


def _image_ids() -> dict[str, str]:
    ids = {}
    for tag in (CONTROLPLANE_IMAGE, GATEWAY_IMAGE):
        found = run(["docker", "image", "inspect", "-f", "{{.Id}}", tag], check=False)
        ids[tag] = found.stdout.strip() if found.returncode == 0 else ""
    return ids


def _remove_replaced(before: dict[str, str]) -> None:
    """A rebuild moves this test's tags to new images: the images they named before are this test's
    leftovers (removal fails harmlessly while another session's containers still use one)."""
    after = _image_ids()
    for tag, old in before.items():
        if old and old != after[tag]:
            run(["docker", "image", "rm", old], check=False)


def wait_healthy(url: str, timeout: float) -> dict:
    """Until the gateway's health says it reaches the control plane (its token accepted)."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            last = httpx.get(url, timeout=2).json()
            if last.get("ok") and last.get("control_plane"):
                return last
        time.sleep(0.5)
    raise TimeoutError(f"{url} not healthy after {timeout}s (last answer {last})")


@contextlib.contextmanager
def compose_stack(tmp: Path, logs: Path):
    compose = compose_command()
    local = run([str(REPO / "deploy" / "local-images.sh")], timeout=1200).stdout
    run([str(REPO / "workers" / "build.sh")], timeout=1200)
    namespace = "rcp" + secrets.token_hex(3)
    secrets_dir = tmp / "secrets"
    _secrets(secrets_dir)
    env = dict(line.split("=", 1) for line in local.split())
    env.update({
        "ROSTER_SECRETS_DIR": str(secrets_dir), "ROSTER_CONTROLPLANE_IMAGE": CONTROLPLANE_IMAGE,
        "ROSTER_GATEWAY_IMAGE": GATEWAY_IMAGE,
        **{name: str(procs.free_port()) for name in (
            "ROSTER_WEB_PORT", "ROSTER_DECISION_API_PORT", "ROSTER_DB_HOST_PORT", "ROSTER_REDIS_HOST_PORT",
            "ROSTER_METRICS_PORT", "ROSTER_RELAY_PORT", "ROSTER_DECISION_API_2_PORT",
            "ROSTER_METRICS_2_PORT")},
    })
    upstream_port = procs.free_port()
    env["ROSTER_GATEWAY_PRIVATE_UPSTREAMS"] = f"127.0.0.1:{upstream_port}"
    hosts: list[BoxHost] = []
    stack = ComposeStack(compose=compose, project=namespace, env=env, hosts=hosts,
                         upstream_port=upstream_port, logs=logs)
    try:
        for index in (1, 2):
            hosts.append(_lock_network(namespace, index, procs.free_port(), tmp))
        # One build per image (compose would build the shared control plane image once per service).
        before = _image_ids()
        stack.compose_run(0, "build", "migrate", "gateway", timeout=1800)
        _remove_replaced(before)
        # Both hosts at once, as two machines would start: the second host's gateway answers 503 until
        # the control plane's decision API is up, and its worker's preflight waits on that gateway.
        _both(lambda host: stack.compose_run(host, "up", "-d"))
        for host in hosts:
            wait_healthy(f"http://127.0.0.1:{host.health_port}/healthz", timeout=120)
        yield stack
    finally:
        with contextlib.suppress(Exception):
            stack.save_logs()
        with contextlib.suppress(Exception):
            _both(lambda host: stack.compose_run(host, "down", "-v", "--remove-orphans", "--timeout", "5",
                                                 timeout=300, check=False))
        for host in hosts:
            _unlock_network(host)
        shutil.rmtree(tmp, ignore_errors=True)
