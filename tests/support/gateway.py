"""A real Roster gateway (mitmdump + the addon from gateway/) for integration tests.

    with gateway_process(live_server.url, GATEWAY_SERVICE_TOKEN, tmp_path) as gw:
        httpx.get(url, proxy=gw.proxy_url_with(run_token), verify=gw.ca_cert_path)

Listens on loopback on a free port, with its own mitmproxy confdir (the CA) under tmp_path, unless
`extra_options` names another `listen_host` (e.g. a box bridge's address, as scripts/gateway-up.sh
does): readiness is then checked, and proxy URLs point, at that address. The health endpoint is always
on loopback."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support import procs

MITMDUMP = procs.REPO / "gateway" / ".venv" / "bin" / "mitmdump"
ADDON_SCRIPT = procs.REPO / "gateway" / "roster_gateway" / "script.py"


@dataclass(frozen=True)
class GatewayProcess:
    port: int
    proxy_url: str  # http://HOST:PORT (no credentials); HOST is where it listens (127.0.0.1 by default)
    health_url: str
    ca_cert_path: Path  # public certificate only; the key stays in confdir
    confdir: Path
    log_path: Path
    proc: object
    host: str = "127.0.0.1"  # an address the proxy port answers on

    def proxy_url_with(self, run_token: str, user: str = "run") -> str:
        """Proxy URL carrying the run token as the Basic password."""
        return f"http://{user}:{run_token}@{_url_host(self.host)}:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def reachable_host(listen_host: str) -> str:
    """Where to connect to reach a listener on `listen_host` (a wildcard address: its loopback)."""
    host = str(listen_host).strip("[]")
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _set(name: str, value: object) -> list[str]:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return ["--set", f"{name}={value}"]


@contextlib.contextmanager
def gateway_process(control_plane_url: str, service_token: str, tmp_path: Path, *,
                    allow_loopback_upstreams: bool = False, hold_seconds: int = 60,
                    decide_timeout_ms: int = 2000, extra_options: Mapping[str, object] | None = None,
                    quiet: bool = False) -> Iterator[GatewayProcess]:
    base = Path(tmp_path) / f"gateway-{os.getpid()}-{time.monotonic_ns()}"
    confdir = base / "confdir"
    confdir.mkdir(parents=True)
    confdir.chmod(0o700)
    token_file = base / "service.token"
    token_file.write_text(service_token)
    token_file.chmod(0o600)
    port, health_port = procs.free_port(), procs.free_port()
    ca_export = base / "ca-cert.pem"
    options: dict[str, object] = {
        "listen_host": "127.0.0.1",
        "listen_port": port,
        "confdir": confdir,
        "roster_outcome_journal": base / "outcomes.jsonl",
        "roster_model_journal": base / "model-journal.jsonl",
        "connection_strategy": "lazy",
        "upstream_cert": False,
        "roster_control_plane": control_plane_url.rstrip("/"),
        "roster_service_token_file": token_file,
        "roster_decide_timeout_ms": decide_timeout_ms,
        "roster_hold_seconds": hold_seconds,
        "roster_health_port": health_port,
        "roster_allow_loopback_upstreams": allow_loopback_upstreams,
        "roster_ca_cert_export": ca_export,
    }
    options.update(extra_options or {})
    args = [str(MITMDUMP), "-s", str(ADDON_SCRIPT)]
    if quiet:
        args.append("-q")
    for name, value in options.items():
        args += _set(name, value)
    log = base / "mitmdump.log"
    proc = procs.spawn(args, env={"PYTHONDONTWRITEBYTECODE": "1"}, log=log)
    try:
        host = reachable_host(str(options["listen_host"]))
        procs.wait_for_port(int(options["listen_port"]), host=host, proc=proc, timeout=30)
        procs.wait_for_port(health_port, proc=proc, timeout=10)
        deadline = time.monotonic() + 10
        while not ca_export.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield GatewayProcess(
            port=int(options["listen_port"]), proxy_url=f"http://{_url_host(host)}:{options['listen_port']}",
            health_url=f"http://127.0.0.1:{health_port}/healthz", ca_cert_path=ca_export, confdir=confdir,
            log_path=log, proc=proc, host=host,
        )
    except BaseException:
        print(log.read_text(errors="replace") if log.exists() else "(no gateway log)")
        raise
    finally:
        procs.stop(proc)
