"""The README's path, walked as a newcomer walks it, on the real default stack (`make up` in this checkout,
its fixed ports, the box bridge): from a var/ without any of the stack's state, `make up` exactly as the
README says; an admin made as the README says; in Chromium the admin's stylesheet loads and the admin
creates a worker and grants through the admin's forms; `run start` makes an allowed, a denied and an asked
request through the production gateway on the bridge address; an approver approves the ask on the queue
page; an auditor downloads the CSV; `make down` leaves no process and no box behind.

The default stack is machine-wide: the test holds /tmp/roster-default-stack.lock while it runs. The
checkout's own stack state in var/ (database, keys, logs) is moved aside and put back afterwards; the
test session's database files (var/test-roster-*) stay where they are."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import http.server
import io
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support import procs

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.browser, pytest.mark.slow]

REPO = procs.REPO
VAR = REPO / "var"
LOCK = "/tmp/roster-default-stack.lock"  # noqa: S108 - the machine-wide lock the README walk shares
BASE = "http://127.0.0.1:8000"
SHOTS = REPO / "test-artifacts" / "readme-walk"
ADMIN, APPROVER, AUDITOR = "admin", "ann", "carol"
PASSWORD = "readme-walk-password-1"
ALLOWED_BODY = b"hello from the private upstream"
STACK_PORTS = (8000, 8002, 8003, 8080, 8081)


class Upstream:
    """A private (loopback) upstream the operator lists in ROSTER_GATEWAY_PRIVATE_UPSTREAMS."""

    def __init__(self):
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's API
                seen.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", str(len(ALLOWED_BODY)))
                self.end_headers()
                self.wfile.write(ALLOWED_BODY)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _env(**extra) -> dict[str, str]:
    """The environment of a person at a shell in the checkout: not the test session's settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ROSTER_", "DJANGO_", "PYTEST")) and k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(extra)
    return env


def sh(*args: str, timeout: float = 120, check: bool = True, **env) -> subprocess.CompletedProcess:
    done = subprocess.run(list(args), cwd=REPO, env=_env(**env), capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done


def manage(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return sh(str(REPO / ".venv" / "bin" / "python"), "manage.py", *args, **kwargs)


def _stack_pids() -> list[int]:
    pids = []
    for pidfile in (VAR / "run").glob("*.pid") if (VAR / "run").exists() else []:
        with contextlib.suppress(ValueError, OSError):
            pids.append(int(pidfile.read_text().strip()))
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _box_containers() -> list[str]:
    return sh("docker", "ps", "-aq", "--filter", "label=roster.namespace=roster").stdout.split()


@pytest.fixture(scope="module")
def default_stack_lock():
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # other walks and helpers wait here; CI is uncontended
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def empty_var(default_stack_lock, tmp_path_factory):
    """var/ without the stack's state, as on a machine where `make up` never ran; restored afterwards."""
    sh("make", "down", timeout=120, check=False)
    saved = tmp_path_factory.mktemp("var-before-walk")
    moved = []
    for entry in VAR.iterdir() if VAR.exists() else []:
        if not entry.name.startswith("test-roster-"):
            shutil.move(str(entry), str(saved / entry.name))
            moved.append(entry.name)
    try:
        yield
    finally:
        sh("make", "down", timeout=120, check=False)
        for entry in VAR.iterdir():
            if not entry.name.startswith("test-roster-"):
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for name in moved:
            shutil.move(str(saved / name), str(VAR / name))


@pytest.fixture(scope="module")
def upstream():
    server = Upstream()
    yield server
    server.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                      args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        yield chromium
        chromium.close()


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def sign_in(browser, username: str, path: str):
    page = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True).new_page()
    page.goto(f"{BASE}/accounts/login/?next={path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.locator("form [type=submit]").first.click()
    page.wait_for_url(f"{BASE}{path}*")
    return page


def admin_add(page, model: str, fields: dict[str, str], selects: dict[str, str] | None = None) -> None:
    page.goto(f"{BASE}/admin/{model}/add/")
    for name, value in fields.items():
        page.fill(f"#id_{name}", value)
    for name, value in (selects or {}).items():  # by label (a worker's name) or by value (a mode)
        select = page.locator(f"#id_{name}")
        labels = select.locator("option").all_inner_texts()
        select.select_option(label=value) if value in labels else select.select_option(value=value)
    page.click("input[name=_save]")
    page.wait_for_load_state()
    errors = page.locator(".errornote, .errorlist").all_inner_texts()
    assert not errors, f"{model}: {errors}"


def add_person(page, username: str, group: str) -> None:
    page.goto(f"{BASE}/admin/auth/user/add/")
    page.fill("#id_username", username)
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("input[name=_continue]")
    page.wait_for_selector("#id_groups_from")
    page.select_option("#id_groups_from", label=group)
    page.click("#id_groups_add_link, #id_groups_add")
    page.click("input[name=_save]")
    page.wait_for_load_state()
    assert not page.locator(".errornote").count()


BOX_SCRIPT = """
import urllib.request, urllib.error
for name, url in (("allowed", "{allowed}"), ("denied", "{denied}"), ("asked", "{asked}")):
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            print(name, r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        print(name, e.code, e.read().decode())
"""


def test_the_readme_walk(empty_var, upstream, browser):
    readme = (REPO / "README.md").read_text()
    assert "make up" in readme and "ROSTER_GATEWAY_PRIVATE_UPSTREAMS" in readme
    assert "createsuperuser --noinput" in readme

    # 1. `make up`, with the local upstream listed as a private upstream (README: "Private upstreams").
    begun = time.monotonic()
    up = sh("make", "up", timeout=1200, check=False,
            ROSTER_GATEWAY_PRIVATE_UPSTREAMS=f"127.0.0.1:{upstream.port}")
    took = time.monotonic() - begun
    (REPO / "test-artifacts").mkdir(exist_ok=True)
    (REPO / "test-artifacts" / "readme-walk-make-up.txt").write_text(
        f"make up from an empty var/: {took:.1f} s, exit {up.returncode}\n{up.stdout}\n{up.stderr}")
    assert up.returncode == 0, f"make up failed:\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}"
    assert "Roster is up" in up.stdout and "canary" in up.stdout
    health = httpx.get("http://127.0.0.1:8081/healthz", timeout=5).json()
    assert health["control_plane"] is True and health["private_upstreams"] == [f"127.0.0.1:{upstream.port}"]
    # The metrics `make up` prints (docs/operations.md, Metrics): the control plane's want the scrape token.
    assert "127.0.0.1:8003/metrics" in up.stdout and "127.0.0.1:8081/metrics" in up.stdout
    assert "roster_gateway_requests_total" in httpx.get("http://127.0.0.1:8081/metrics", timeout=5).text
    assert httpx.get("http://127.0.0.1:8003/metrics", timeout=5).status_code == 401
    scrape = {"Authorization": f"Bearer {(VAR / 'metrics.token').read_text().strip()}"}
    scraped = httpx.get("http://127.0.0.1:8003/metrics", headers=scrape, timeout=5)
    assert scraped.status_code == 200 and "roster_decisions_total" in scraped.text

    # 2. An admin, as the README says.
    manage("createsuperuser", "--noinput", DJANGO_SUPERUSER_USERNAME=ADMIN,
           DJANGO_SUPERUSER_PASSWORD=PASSWORD, DJANGO_SUPERUSER_EMAIL="admin@example.com")

    # 3. The admin, styled: the stylesheet is served and applied.
    admin = sign_in(browser, ADMIN, "/admin/")
    css = httpx.get(f"{BASE}/static/admin/css/base.css", timeout=10)
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    header_colour = admin.evaluate(
        "getComputedStyle(document.querySelector('#header')).backgroundColor")
    assert header_colour not in ("rgba(0, 0, 0, 0)", "transparent"), "the admin is unstyled"
    shot(admin, "01-admin-home")

    # 4. A worker and its grants, through the admin's forms.
    admin_add(admin, "fleet/worker", {"name": "walker", "description": "the README walk"})
    grant = {"host": "localhost", "port": str(upstream.port), "schemes": "http"}
    admin_add(admin, "policy/grant", {"slug": "private-hello", **grant, "paths": "/hello"},
              {"worker": "walker", "mode": "auto"})
    admin_add(admin, "policy/grant", {"slug": "private-ask", **grant, "paths": "/ask"},
              {"worker": "walker", "mode": "ask"})
    shot(admin, "02-admin-grants")
    add_person(admin, APPROVER, "Approvers")
    add_person(admin, AUDITOR, "Auditors")

    # 5. A box run: allowed, denied, asked (and approved on the queue page meanwhile).
    base = f"http://localhost:{upstream.port}"
    script = BOX_SCRIPT.format(allowed=f"{base}/hello", denied="http://example.com/nope", asked=f"{base}/ask")
    started = manage("run", "start", "walker", "--timeout", "180", "--", "python3", "-c", script)
    run_id = int(re.search(r"run (\d+)", started.stdout).group(1))
    approver = sign_in(browser, APPROVER, "/approvals/")
    card = approver.locator("article.approval").first
    card.wait_for(timeout=90_000)
    assert "/ask" in card.inner_text() and "walker" in card.inner_text()
    shot(approver, "03-approval-queue")
    card.get_by_role("button", name="Approve").click(timeout=15_000)
    manage("run", "wait", str(run_id), "--timeout", "150", timeout=180)
    output = manage("run", "logs", str(run_id)).stdout
    lines = dict(line.split(" ", 1) for line in output.splitlines() if line.split(" ", 1)[0] in
                 ("allowed", "denied", "asked"))
    assert lines["allowed"] == f"200 {ALLOWED_BODY.decode()}", output
    assert lines["denied"].startswith("403 ") and '"no_grant"' in lines["denied"], output
    assert lines["asked"] == f"200 {ALLOWED_BODY.decode()}", output
    assert upstream.seen == ["/hello", "/ask"]
    listing = manage("run", "list", "--limit", "1").stdout
    assert f"{run_id}\twalker\thuman\tsucceeded" in listing

    # 6. The auditor downloads the CSV.
    auditor = sign_in(browser, AUDITOR, "/audit/")
    shot(auditor, "04-audit")
    with auditor.expect_download() as info:
        auditor.locator("#export-csv").click()
    rows = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text(encoding="utf-8"))))
    kinds = {r["kind"] for r in rows}
    assert {"decision", "approval", "run_state"} <= kinds, kinds
    assert any(r["run"] == str(run_id) for r in rows)

    # 7. `make down`: no process, no box, no port left.
    pids = _stack_pids()
    assert len(pids) >= 5
    sh("make", "down", timeout=120)
    time.sleep(1)
    assert [p for p in pids if _alive(p)] == []
    assert [p for p in STACK_PORTS if _port_open(p)] == []
    assert _box_containers() == []
