"""Private upstreams on purpose, through a real mitmdump: a listed loopback upstream is dialled, an unlisted
one is still refused, the list is on the health page, and a list covering the control plane stops the
gateway from starting."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from tests.integration.gateway.conftest import box_client, deny_body, extra_gateway, grant
from tests.support import procs
from tests.support.gateway import ADDON_SCRIPT, MITMDUMP

pytestmark = pytest.mark.integration


def test_a_listed_loopback_upstream_is_reachable_and_an_unlisted_one_refused(stack, token, tmp_path):
    # Granted by name here (the literal case is in test_gateway_shapes_and_vetting). Both upstreams listen
    # on loopback; only one is listed.
    grant("listed", stack.http, host="localhost")
    grant("unlisted", stack.other, host="localhost")
    listed = f"127.0.0.1:{stack.http.port}"
    options = {"roster_private_upstreams": listed}
    with extra_gateway(stack.control_plane_url, tmp_path, extra_options=options) as gw, \
            box_client(gw, token) as box:
        reached = box.get(stack.http.url("/private", host="localhost"))
        refused = box.get(stack.other.url("/private", host="localhost"))
        health = httpx.get(gw.health_url, timeout=5).json()
    assert reached.status_code == 200, reached.text
    assert refused.status_code == 403 and deny_body(refused)["reason"] == "blocked_address"
    assert [r["path"] for r in stack.http.requests] == ["/private"]
    assert stack.other.requests == []
    assert health["private_upstreams"] == [listed] and health["control_plane"] is True


def test_without_the_list_the_same_upstream_is_refused(stack, token, tmp_path):
    grant("listed", stack.http, host="localhost")
    with extra_gateway(stack.control_plane_url, tmp_path) as gw, box_client(gw, token) as box:
        refused = box.get(stack.http.url("/private", host="localhost"))
        health = httpx.get(gw.health_url, timeout=5).json()
    assert refused.status_code == 403 and deny_body(refused)["reason"] == "blocked_address"
    assert stack.http.requests == [] and health["private_upstreams"] == []


@pytest.mark.parametrize("entry", ["127.0.0.1", "127.0.0.0/8", "not/an/address"])
def test_a_list_covering_the_control_plane_or_malformed_stops_the_gateway(stack, tmp_path, entry):
    token_file = tmp_path / "service.token"
    token_file.write_text("gst_unused")
    token_file.chmod(0o600)
    (tmp_path / "conf").mkdir(mode=0o700)
    args = [str(MITMDUMP), "-q", "-s", str(ADDON_SCRIPT), "--set", "listen_host=127.0.0.1",
            "--set", f"listen_port={procs.free_port()}", "--set", f"confdir={tmp_path / 'conf'}",
            "--set", f"roster_control_plane={stack.control_plane_url}",
            "--set", f"roster_service_token_file={token_file}",
            "--set", f"roster_private_upstreams={entry}"]
    done = subprocess.run(args, cwd=procs.REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "roster_private_upstreams" in done.stdout + done.stderr
