"""The gateway's list of private upstreams on the pages (issue 27.2): the web's gateway health page shows
what the gateway's health endpoint says it may dial, and a grant naming a loopback or private IP literal
the list does not name is warned about on the grant page and when saved (the gateway refuses such a
request blocked_address: an IP literal in a grant is not the operator's listing). The health endpoint
here is a real HTTP server answering as the gateway's does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import User

from controlplane.policy.models import Grant
from tests.support.procs import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway_says(settings):
    """Start a health endpoint answering with the given list; returns a function taking the list."""
    servers = []

    def start(private_upstreams: list[str], *, ok: bool = True):
        doc = json.dumps({"ok": ok, "gateway": True, "control_plane": ok,
                          "private_upstreams": private_upstreams}).encode()

        class Health(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                self.send_response(200 if ok else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(doc)))
                self.end_headers()
                self.wfile.write(doc)

            def log_message(self, *_args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        settings.ROSTER_GATEWAY_HEALTH_URL = f"http://127.0.0.1:{server.server_address[1]}/healthz"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    return client


BASE = {
    "slug": "local-model", "description": "", "enabled": "on", "worker": "", "mode": "auto",
    "host": "127.0.0.1", "port": "11434", "schemes": "http", "methods": "POST", "paths": "/v1/**",
    "mcp_tools": "", "max_taint": "1", "result_class": "1", "untrusted": "on", "expires_at_0": "",
    "expires_at_1": "", "secret": "", "inject_header": "", "inject_format": "{secret}", "cost_per_call": "0",
}


def test_the_health_page_shows_the_list(gateway_says, admin_client):
    gateway_says(["127.0.0.1:11434", "10.20.0.0/16:443"])
    html = admin_client.get("/gateway/").content.decode()
    assert "<code>127.0.0.1:11434</code>" in html and "<code>10.20.0.0/16:443</code>" in html
    assert "healthy" in html and "is policy, not a listing" in html


def test_the_health_page_says_when_nothing_is_listed_or_the_gateway_is_silent(gateway_says, admin_client,
                                                                             settings):
    gateway_says([])
    assert 'id="private-upstreams-none"' in admin_client.get("/gateway/").content.decode()
    settings.ROSTER_GATEWAY_HEALTH_URL = f"http://127.0.0.1:{free_port()}/healthz"
    html = admin_client.get("/gateway/").content.decode()
    assert 'id="gateway-unreachable"' in html and "Not known while the gateway does not answer" in html


def test_the_health_page_needs_the_grant_viewing_permission(client, gateway_says):
    gateway_says([])
    client.force_login(User.objects.create_user("nobody", password="pw-nobody-123456"))
    assert client.get("/gateway/").status_code == 403


def test_an_unlisted_loopback_literal_is_warned_on_save_and_on_the_grant_page(gateway_says, admin_client):
    gateway_says(["127.0.0.1:9999"])
    saved = admin_client.post("/admin/policy/grant/add/", BASE, follow=True).content.decode()
    assert "is a loopback or private address the gateway&#x27;s private upstreams do not list" in saved
    grant = Grant.objects.get(slug="local-model")  # saved all the same: the grant is policy
    page = admin_client.get(f"/admin/policy/grant/{grant.pk}/change/").content.decode()
    assert 'id="private-literal-warning"' in page and "blocked_address" in page


@pytest.mark.parametrize("listed", ["127.0.0.1:11434", "127.0.0.0/8:11434", "127.0.0.1"])
def test_a_listed_literal_is_not_warned(gateway_says, admin_client, listed):
    gateway_says([listed])
    saved = admin_client.post("/admin/policy/grant/add/", BASE, follow=True).content.decode()
    grant = Grant.objects.get(slug="local-model")
    page = admin_client.get(f"/admin/policy/grant/{grant.pk}/change/").content.decode()
    assert "private-literal-warning" not in page and "do not list" not in saved


@pytest.mark.parametrize("host", ["[::1]", "[fd00::7]", "10.20.0.7", "169.254.169.254"])
def test_other_internal_literals_are_warned(gateway_says, admin_client, host):
    gateway_says(["127.0.0.1:9999"])
    admin_client.post("/admin/policy/grant/add/", {**BASE, "host": host})
    grant = Grant.objects.get(slug="local-model")
    page = admin_client.get(f"/admin/policy/grant/{grant.pk}/change/").content.decode()
    assert 'id="private-literal-warning"' in page


def test_a_public_literal_or_a_name_is_not_warned_and_the_gateway_is_not_asked(admin_client, settings):
    settings.ROSTER_GATEWAY_HEALTH_URL = f"http://127.0.0.1:{free_port()}/healthz"  # nothing answers
    for slug, host in (("public", "93.184.216.34"), ("named", "api.example.com")):
        admin_client.post("/admin/policy/grant/add/", {**BASE, "slug": slug, "host": host})
        grant = Grant.objects.get(slug=slug)
        page = admin_client.get(f"/admin/policy/grant/{grant.pk}/change/").content.decode()
        assert "private-literal-warning" not in page


def test_an_unreachable_gateway_is_said_not_guessed(admin_client, settings):
    settings.ROSTER_GATEWAY_HEALTH_URL = f"http://127.0.0.1:{free_port()}/healthz"
    admin_client.post("/admin/policy/grant/add/", BASE)
    grant = Grant.objects.get(slug="local-model")
    page = admin_client.get(f"/admin/policy/grant/{grant.pk}/change/").content.decode()
    assert "whether it is listed is not known" in page
