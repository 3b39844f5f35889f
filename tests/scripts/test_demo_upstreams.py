"""`make demo` on a reused stack stops with a clear message when the running gateway does not list the
demo's loopback upstreams (issue 27.2: the gateway refuses an unlisted loopback literal blocked_address,
whatever the demo's grants say). Runs scripts/demo_upstreams.py as demo.sh does, a real process and pipe,
and checks demo.sh wires it into the reuse path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WANTED = "127.0.0.1:18091,127.0.0.1:18092,127.0.0.1:18093"


def _check(doc) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "demo_upstreams.py"), WANTED],
                          input=doc if isinstance(doc, str) else json.dumps(doc), capture_output=True,
                          text=True, timeout=30)


@pytest.mark.parametrize("listed", [["127.0.0.1:18091", "127.0.0.1:18092", "127.0.0.1:18093"],
                                    ["10.0.0.0/8", "127.0.0.0/8"]])
def test_a_gateway_listing_them_passes(listed):
    done = _check({"ok": True, "private_upstreams": listed})
    assert done.returncode == 0 and done.stdout.strip() == ""


@pytest.mark.parametrize("listed,missing", [
    ([], "127.0.0.1:18091, 127.0.0.1:18092, 127.0.0.1:18093"),
    (["127.0.0.1:18091", "127.0.0.1:18093"], "127.0.0.1:18092"),
    (["127.0.0.0/8:443", "localhost:18092", "127.0.0.1:18091", "127.0.0.1:18093"], "127.0.0.1:18092"),
])
def test_a_gateway_missing_any_is_refused_naming_them(listed, missing):
    done = _check({"ok": True, "private_upstreams": listed})
    assert done.returncode == 1 and done.stdout.strip() == missing


def test_no_health_document_is_refused():
    assert _check("<html>").returncode == 1


def test_demo_sh_checks_a_reused_stack_and_lists_them_when_it_starts_one():
    text = (REPO / "scripts" / "demo.sh").read_text()
    reuse = text[text.index("if healthy; then"):text.index("else", text.index("if healthy; then"))]
    assert "scripts/demo_upstreams.py" in reuse and "exit 1" in reuse and "does not list" in reuse
    assert 'ROSTER_GATEWAY_PRIVATE_UPSTREAMS:+$ROSTER_GATEWAY_PRIVATE_UPSTREAMS,}$demo_upstreams' in text
