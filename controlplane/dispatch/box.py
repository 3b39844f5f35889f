"""The box: a container on the locked network whose only exit is the gateway. `box_create_kwargs` says
exactly what the box gets (pure, unit-tested); the rest starts it, watches it to its deadline, captures
bounded output (controlplane.dispatch.boxoutput) and removes it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

import docker
import requests
from django.conf import settings
from django.utils import timezone
from docker.types import LogConfig, Mount, Ulimit

from controlplane.dispatch.agentbox import BoxPlan
from controlplane.dispatch.boxoutput import OutputCollector, output_sources
from controlplane.dispatch.engine import box_labels, box_name
from controlplane.dispatch.preflight import BoxNetwork
from controlplane.dispatch.rundirs import RunDirs
from controlplane.fleet.models import Run

BOX_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
BOX_GATEWAY_CA = "/etc/roster/gateway-ca.pem"
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO")
PROXY_USER = "run"


def proxy_url(network: BoxNetwork, token: str) -> str:
    return f"http://{PROXY_USER}:{quote(token, safe='')}@{network.gateway_ip}:{settings.ROSTER_GATEWAY_PORT}"


AGENT_COMMAND = ("python3", "-m", "workers.agent")


def agent_command(task: str, *, base_url: str = "", model: str = "") -> list[str]:
    """The reference agent on `task`, with the model this control plane is set to use written into the
    run's command, so the run record says which model it talked to."""
    return [*AGENT_COMMAND, "--base-url", base_url or settings.ROSTER_AGENT_BASE_URL,
            "--model", model or settings.ROSTER_AGENT_MODEL, "--", task]


def agent_environment() -> dict[str, str]:
    """Where the reference agent (workers/agent) finds its model: settings, never a secret."""
    return {
        "ROSTER_AGENT_BASE_URL": settings.ROSTER_AGENT_BASE_URL,
        "ROSTER_AGENT_MODEL": settings.ROSTER_AGENT_MODEL,
        "ROSTER_AGENT_KEY_VARIABLE": settings.ROSTER_AGENT_KEY_VARIABLE,
        "ROSTER_AGENT_MAX_TURNS": str(settings.ROSTER_AGENT_MAX_TURNS),
        "ROSTER_AGENT_MAX_TOKENS": str(settings.ROSTER_AGENT_MAX_TOKENS),
        "ROSTER_AGENT_MCP_SERVERS": settings.ROSTER_AGENT_MCP_SERVERS,
        # The name the gateway answers itself for proposals (its roster_proposals_host, the same name).
        "ROSTER_AGENT_PROPOSALS_URL": f"http://{settings.ROSTER_PROPOSALS_HOST}/v1/proposals",
    }


def box_environment(run: Run, network: BoxNetwork, token: str, sentinels: dict[str, str],
                    plan: BoxPlan | None = None) -> dict[str, str]:
    """The box's variables. The preset's and the worker's own come first and everything Roster sets goes
    on top of them (validation refuses those names already; this order keeps it so whatever was stored):
    the sentinels, the model key's sentinel under the preset's key variable, the proxy, the CA, HOME and
    ROSTER_*."""
    proxy = proxy_url(network, token)
    env = dict(plan.env) if plan is not None else {}
    env.update(sentinels)
    if plan is not None and plan.key_variable:
        env[plan.key_variable] = plan.key_sentinel
    env.update({
        "HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "ALL_PROXY": proxy,
        "http_proxy": proxy, "https_proxy": proxy, "all_proxy": proxy,
        "NO_PROXY": "", "no_proxy": "",  # everything goes through the gateway, even "local" names
        "NODE_EXTRA_CA_CERTS": BOX_GATEWAY_CA,
        "NODE_USE_ENV_PROXY": "1",  # Node >= 24.5 / 22.21: fetch and http use HTTP(S)_PROXY
        "HOME": "/workspace",
        "ROSTER_RUN_ID": str(run.pk),
        "ROSTER_WORKER": run.worker.name,
    })
    env.update(agent_environment())
    if plan is not None and plan.preset:
        # The reference agent reads these; any agent may: the model and base URL the run was started with.
        env.update({"ROSTER_AGENT_BASE_URL": plan.base_url, "ROSTER_AGENT_MODEL": plan.model,
                    "ROSTER_AGENT_KEY_VARIABLE": plan.key_variable, "ROSTER_PRESET": plan.preset})
    env.update({name: BOX_CA_BUNDLE for name in CA_VARIABLES})
    return env


KNOWLEDGE_MOUNT = "/knowledge"


def box_mounts(dirs: RunDirs) -> list[Mount]:
    gateway_ca = str(dirs.gateway_ca)
    return [
        Mount("/code", str(dirs.code), type="bind", read_only=True),
        Mount("/config", str(dirs.config), type="bind", read_only=True),
        Mount(BOX_CA_BUNDLE, str(dirs.ca_bundle), type="bind", read_only=True),
        Mount(BOX_GATEWAY_CA, gateway_ca, type="bind", read_only=True),
        Mount("/usr/local/share/ca-certificates/roster-gateway.crt", gateway_ca, type="bind", read_only=True),
        # The run's plain checkout of its worker's knowledge: read-only for a run that carried conversation
        # content, so no person-data reaches the world store through it (docs/knowledge.md).
        *([Mount(KNOWLEDGE_MOUNT, str(dirs.knowledge), type="bind", read_only=not dirs.knowledge_writable)]
          if dirs.knowledge is not None else []),
    ]


def box_create_kwargs(run: Run, *, image_id: str, network: BoxNetwork, token: str, dirs: RunDirs,
                      sentinels: dict[str, str], plan: BoxPlan | None = None) -> dict:
    """Everything the box gets. `plan`: what its preset (or the worker's admin settings) adds: the command
    (a preset run's, with the prompt filled in) and variables; never a mount, a capability or a limit."""
    uid = settings.ROSTER_BOX_UID
    # Docker keeps at most this much log on disk per box, so a chatty box cannot fill the host.
    log_kib = max(64, 2 * settings.ROSTER_RUN_MAX_OUTPUT_BYTES // 1024)
    return {
        "image": image_id,
        "command": list(plan.command) if plan is not None else list(run.command),
        "name": box_name(run.pk),
        "hostname": f"run-{run.pk}",
        "labels": box_labels(run.pk),
        "user": f"{uid}:{uid}",
        "working_dir": "/workspace",
        "environment": box_environment(run, network, token, sentinels, plan),
        "network": network.name,
        "dns": ["127.0.0.1"],
        "dns_search": [],
        "mounts": box_mounts(dirs),
        "read_only": True,
        "tmpfs": {
            "/tmp": f"rw,nosuid,nodev,size={settings.ROSTER_BOX_TMPFS_SIZE}",  # noqa: S108 - in the box
            "/workspace": f"rw,nosuid,nodev,size={settings.ROSTER_BOX_WORKSPACE_SIZE},uid={uid},gid={uid}",
        },
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "privileged": False,
        "mem_limit": settings.ROSTER_BOX_MEMORY,
        "memswap_limit": settings.ROSTER_BOX_MEMORY,
        "nano_cpus": settings.ROSTER_BOX_NANO_CPUS,
        "pids_limit": settings.ROSTER_BOX_PIDS_LIMIT,
        # Hard 0: the box cannot raise it, so no crash hands box memory to the host's core handler.
        "ulimits": [Ulimit(name="core", soft=0, hard=0)],
        "init": True,
        "ipc_mode": "private",
        "log_config": LogConfig(type="json-file", config={"max-size": f"{log_kib}k", "max-file": "1"}),
        "detach": True,
    }


@dataclass(frozen=True)
class BoxOutcome:
    exit_code: int | None
    timed_out: bool
    oom_killed: bool
    output: str
    truncated: bool
    # [[source, characters], ...] over `output` (controlplane.dispatch.boxoutput); () when not known.
    sources: tuple = ()


def box_kill(container) -> None:
    with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
        container.kill()


def box_output_collector(container) -> OutputCollector:
    """Attached to a created box before it starts (call container.start() after this), so no output is
    missed; hand it to box_watch."""
    collector = OutputCollector(container, settings.ROSTER_RUN_MAX_OUTPUT_BYTES)
    collector.attach_before_start()
    return collector


def box_watch(container, deadline: datetime, *, follow: bool = True,
              collector: OutputCollector | None = None) -> BoxOutcome:
    """Wait for the box to exit or its deadline, killing it at the deadline; collect its output (from the
    collector attached before start; else from Docker's log, as recovery does, flagged truncated)."""
    if collector is None:
        collector = OutputCollector(container, settings.ROSTER_RUN_MAX_OUTPUT_BYTES, follow=follow)
    collector.start()
    timed_out = False
    exit_code = None
    remaining = (deadline - timezone.now()).total_seconds()
    try:
        if remaining <= 0:
            raise requests.exceptions.ReadTimeout("deadline already passed")
        exit_code = container.wait(timeout=remaining)["StatusCode"]
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        timed_out = True
        box_kill(container)
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            exit_code = container.wait(timeout=settings.ROSTER_BOX_KILL_WAIT_SECONDS)["StatusCode"]
    return box_outcome(container, collector, exit_code, timed_out=timed_out)


def box_outcome(container, collector: OutputCollector, exit_code: int | None, *,
                timed_out: bool) -> BoxOutcome:
    """What an exited box leaves: the rest of its output, its exit code, whether memory killed it."""
    collector.finish(timeout=settings.ROSTER_BOX_KILL_WAIT_SECONDS)
    oom = False
    with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
        container.reload()
        state = container.attrs.get("State", {})
        oom = bool(state.get("OOMKilled"))
        if exit_code is None and state.get("Status") in ("exited", "dead"):
            exit_code = state.get("ExitCode")
    if exit_code is not None:  # exited: its log is all it will ever print
        collector.take_tail_from_log()
    pieces = collector.pieces()
    return BoxOutcome(exit_code=exit_code, timed_out=timed_out, oom_killed=oom,
                      output="".join(text for _, text in pieces), truncated=collector.truncated,
                      sources=tuple(tuple(item) for item in output_sources(pieces)))


def box_remove(client: docker.DockerClient, run_id: int) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        client.containers.get(box_name(run_id)).remove(force=True)
