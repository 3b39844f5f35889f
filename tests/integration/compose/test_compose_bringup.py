"""compose.yaml brought up for real (make test-compose): images built locally, PostgreSQL and Redis as
compose services, and a box run whose requests go through the compose-started gateway and are decided by
the compose-started control plane; then the second box host (compose.box-host.yaml, its own worker,
gateway and locked network) dispatching runs against the same control plane; and the decision API's
metrics listener, published on host loopback, answering only the scrape token."""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest

# The first test's set-up builds the images (up to the build's own 1800 s on a machine with no cached
# layers), so the project-wide 600 s per-test limit would cut a cold build off.
pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.postgres, pytest.mark.slow,
              pytest.mark.compose, pytest.mark.timeout(2400)]

WORKER = "compose-worker"


def _grant(port: int) -> str:
    return (f'host = "127.0.0.1"\nport = {port}\nschemes = ["http"]\nmethods = ["GET"]\n'
            f'paths = ["/allowed"]\nworker = "{WORKER}"\n')


def _box_run(stack, upstream: str) -> tuple[str, str]:
    """One run: an allowed request, a denied one, and the gateway the box was given. (status, logs)"""
    box = (f'curl -sS {upstream}/allowed; echo; curl -sS {upstream}/denied; echo; '
           'echo "gateway ${HTTP_PROXY##*@}"')
    # The operator's three commands in one exec: run start, run wait on the id it printed, run logs.
    script = ('set -e; started=$(python manage.py run start "$1" --timeout 60 -- sh -c "$2"); '
              'id=$(echo "$started" | sed -n "s/^run \\([0-9]*\\).*/\\1/p"); '
              'python manage.py run wait "$id" --timeout 90 || true; echo "---"; '
              'python manage.py run logs "$id"')
    out = stack.compose_run(0, "exec", "-T", "web", "sh", "-c", script, "sh", WORKER, box, timeout=240).stdout
    status, _, logs = out.partition("---\n")
    return status, logs


@pytest.fixture(scope="module")
def configured(stack, upstream):
    stack.manage("worker", "create", WORKER)
    # grants import reads a directory: one file, written inside the web container from stdin.
    script = 'd=$(mktemp -d) && cat > "$d/compose-local.toml" && python manage.py grants import "$d"'
    stack.compose_run(0, "exec", "-T", "web", "sh", "-c", script, stdin=_grant(stack.upstream_port))
    return upstream


def test_control_plane_runs_on_postgresql(stack):
    vendor = stack.manage("shell", "-c", "from django.db import connection; print(connection.vendor)")
    assert vendor.stdout.strip().splitlines()[-1] == "postgresql"


def test_box_run_through_the_compose_gateway_is_decided_by_the_control_plane(stack, configured):
    stack.only_worker(0)  # this run must be the first box host's
    status, logs = _box_run(stack, configured)
    assert "succeeded" in status, (status, logs)
    lines = [line for line in logs.splitlines() if line]
    assert lines[0] == "upstream saw /allowed", logs
    # Decided by the control plane and never forwarded: the gateway's deny answer, with its reason.
    assert '"reason": "no_grant"' in lines[1] and "upstream saw" not in lines[1], logs
    host = stack.hosts[0]
    assert lines[2] == f"gateway {host.bridge_ip}:{host.gateway_port}", logs


def test_second_box_host_dispatches_against_the_same_control_plane(stack, configured):
    stack.only_worker(1)  # only the second box host's worker takes runs now
    status, logs = _box_run(stack, configured)
    assert "succeeded" in status, (status, logs)
    lines = [line for line in logs.splitlines() if line]
    assert lines[0] == "upstream saw /allowed" and "no_grant" in lines[1], logs
    host = stack.hosts[1]
    assert lines[2] == f"gateway {host.bridge_ip}:{host.gateway_port}", logs


def test_control_plane_metrics_answer_the_scrape_token_only(stack, configured):
    # After the box runs above: the decision API's metrics listener, published on host loopback, counts
    # their decisions for the operator's scrape token and refuses a scrape without it or with another.
    port = int(stack.env["ROSTER_METRICS_PORT"])
    secrets_dir = Path(stack.env["ROSTER_SECRETS_DIR"])
    gateway_token = (secrets_dir / "gateway" / "service.token").read_text().strip()
    for offered in (None, "mst_not-the-token", gateway_token):
        assert _scrape(port, offered)[0] == 401, offered and offered[:4]
    status, text = _scrape(port, (secrets_dir / "metrics.token").read_text().strip())
    allowed = [line for line in text.splitlines()
               if line.startswith('roster_decisions_total{reason="granted",verdict="allow"}')]
    assert status == 200 and allowed and float(allowed[0].split()[-1]) >= 1, text[:2000]


def _scrape(port: int, token: str | None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_the_relay_runs_as_its_own_service_against_postgresql(stack):
    # The relay service answers its health on host loopback with its database (PostgreSQL) reachable.
    import time

    import httpx

    port, deadline, last = int(stack.env["ROSTER_RELAY_PORT"]), time.monotonic() + 120, None
    while time.monotonic() < deadline:
        try:
            last = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()
        except (httpx.HTTPError, ValueError):
            time.sleep(0.5)
            continue
        if last.get("ok") is True:
            return
        time.sleep(0.5)
    raise AssertionError(f"the relay service is not healthy after 120 s (last answer {last})")
