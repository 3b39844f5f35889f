"""`make up`'s readiness checks (scripts/stack_check.py) read the answer, not just an open port: a 401 to
the gateway's own token, a gateway whose control plane is unreachable, an unstyled admin and a canary
answered 503 are failures that say what is wrong; a port held by another program is named with it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support import procs

spec = importlib.util.spec_from_file_location("stack_check", procs.REPO / "scripts" / "stack_check.py")
stack_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stack_check)


class Answers:
    """path, or (path, Authorization), -> (status, content type, body): a fake stack process on loopback."""

    def __init__(self, answers: dict[str, tuple[int, str, bytes]]):
        self.seen: list[tuple[str, str]] = []
        answers_, seen = answers, self.seen

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's API
                auth = self.headers.get("Authorization", "")
                seen.append((self.path, auth))
                status, kind, body = answers_.get((self.path, auth)) or answers_.get(
                    self.path, (404, "text/plain", b"no"))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake(monkeypatch, tmp_path):
    servers = []

    def serve(port_name: str, answers: dict) -> Answers:
        server = Answers(answers)
        servers.append(server)
        monkeypatch.setattr(stack_check, port_name, server.port)
        return server

    (tmp_path / "gateway").mkdir()
    (tmp_path / "gateway" / "service.token").write_text("gst_the_token\n")
    monkeypatch.setattr(stack_check, "VAR", tmp_path)
    monkeypatch.setattr(stack_check, "bridge_address", lambda: "127.0.0.1")
    monkeypatch.setattr(stack_check, "METRICS_PORT", 0)  # tests that want the metrics listener serve one
    yield serve
    for server in servers:
        server.close()


def _json(status: int, doc: dict) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(doc).encode()


def test_the_decision_api_is_asked_with_the_gateways_token(fake):
    server = fake("DECISION_PORT", {"/api/gateway/health": _json(200, {"ok": True})})
    assert "answers the gateway's token" in stack_check.check_decision_api()
    assert server.seen == [("/api/gateway/health", "Bearer gst_the_token")]


def test_a_decision_api_refusing_the_gateways_token_fails(fake):
    fake("DECISION_PORT", {"/api/gateway/health": _json(401, {"detail": "Unauthorized"})})
    with pytest.raises(stack_check.Failed, match="refuses the gateway's own service token"):
        stack_check.check_decision_api()


def test_the_metrics_listener_must_refuse_without_the_scrape_token_and_serve_with_it(fake, monkeypatch,
                                                                                       tmp_path):
    (tmp_path / "metrics.token").write_text("mst_scrape\n")
    fake("DECISION_PORT", {"/api/gateway/health": _json(200, {"ok": True})})
    listener = Answers({("/metrics", "Bearer mst_scrape"): (200, "text/plain", b"roster_decisions_total 0\n"),
                        "/metrics": (401, "text/plain", b"")})
    monkeypatch.setattr(stack_check, "METRICS_PORT", listener.port)
    try:
        assert "metrics on http://127.0.0.1" in stack_check.check_decision_api()
        assert listener.seen == [("/metrics", ""), ("/metrics", "Bearer mst_scrape")]
    finally:
        listener.close()


def test_a_metrics_listener_that_serves_without_a_token_fails(fake, monkeypatch, tmp_path):
    (tmp_path / "metrics.token").write_text("mst_scrape\n")
    fake("DECISION_PORT", {"/api/gateway/health": _json(200, {"ok": True})})
    open_listener = Answers({"/metrics": (200, "text/plain", b"roster_decisions_total 0\n")})
    monkeypatch.setattr(stack_check, "METRICS_PORT", open_listener.port)
    try:
        with pytest.raises(stack_check.Failed, match="without the scrape token"):
            stack_check.check_decision_api()
    finally:
        open_listener.close()


def test_a_gateway_must_serve_its_metrics(fake):
    healthy = _json(200, {"ok": True, "gateway": True, "control_plane": True})
    fake("HEALTH_PORT", {"/healthz": healthy})
    with pytest.raises(stack_check.Failed, match="metrics"):
        stack_check.check_gateway()


def test_a_healthy_gateway_with_metrics_passes(fake):
    healthy = _json(200, {"ok": True, "gateway": True, "control_plane": True})
    fake("HEALTH_PORT", {"/healthz": healthy,
                         "/metrics": (200, "text/plain", b"roster_gateway_requests_total 0\n")})
    assert "metrics served" in stack_check.check_gateway()


def test_a_gateway_without_its_control_plane_fails(fake):
    fake("HEALTH_PORT", {"/healthz": _json(503, {"ok": False, "gateway": True, "control_plane": False})})
    with pytest.raises(stack_check.Failed, match="cannot get answers from the control plane"):
        stack_check.check_gateway()


def test_a_gateway_disagreeing_with_its_control_plane_fails_naming_why(fake):
    fake("HEALTH_PORT", {"/healthz": _json(503, {
        "ok": False, "gateway": True, "control_plane": True,
        "disagreements": ["roster_hold_seconds is 20: it must be at least the control plane's "
                          "ROSTER_APPROVAL_HOLD_SECONDS (60)"]})})
    with pytest.raises(stack_check.Failed, match="settings disagree with the control plane's, so it refuses "
                                                 "every request: roster_hold_seconds is 20"):
        stack_check.check_gateway()


def test_an_unstyled_admin_fails(fake):
    fake("WEB_PORT", {"/accounts/login/": (200, "text/html", b"<form>")})
    with pytest.raises(stack_check.Failed, match="stylesheet"):
        stack_check.check_web()


def test_the_canary_wants_the_control_planes_decision(fake):
    decided = _json(407, {"verdict": "deny", "reason": "bad_token", "message": "no token"})
    server = fake("GATEWAY_PORT", {"http://roster-canary.invalid/": decided})
    assert "got the control plane's decision" in stack_check.check_canary()
    assert server.seen[0][0] == "http://roster-canary.invalid/"  # sent as a proxy request


def test_a_canary_answered_503_fails(fake):
    fake("GATEWAY_PORT", {"http://roster-canary.invalid/": _json(
        503, {"verdict": "deny", "reason": "control_plane_unavailable", "message": "401"})})
    with pytest.raises(stack_check.Failed, match="could not get a decision"):
        stack_check.check_canary()


def test_a_canary_refused_by_a_disagreeing_gateway_says_what_the_gateway_said(fake):
    fake("GATEWAY_PORT", {"http://roster-canary.invalid/": _json(503, {
        "verdict": "deny", "reason": "policy_error",
        "message": "the gateway's settings disagree with the control plane's; an operator must align them"})})
    with pytest.raises(stack_check.Failed, match="the gateway said: the gateway's settings disagree"):
        stack_check.check_canary()


def test_nothing_listening_fails_with_where(fake, monkeypatch):
    monkeypatch.setattr(stack_check, "HEALTH_PORT", procs.free_port())
    with pytest.raises(stack_check.Failed, match="nothing answers on 127.0.0.1"):
        stack_check.check_gateway()


@pytest.fixture
def other_program(tmp_path):
    """A program that is not this stack's, listening on a loopback port from a directory of its own."""
    port = procs.free_port()
    where = tmp_path / "elsewhere"
    where.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
                            cwd=where, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 20
    while not stack_check.listening_pids(port):
        assert time.monotonic() < deadline and proc.poll() is None, "the other program did not listen"
        time.sleep(0.1)
    yield proc, port, where
    proc.kill()
    proc.wait()


def test_a_port_held_by_another_program_is_named_with_the_setting_that_moves_it(fake, monkeypatch, tmp_path,
                                                                                 other_program, capsys):
    proc, port, where = other_program
    monkeypatch.setattr(stack_check, "DECISION_PORT", port)
    ours = tmp_path / "decision-api.pid"
    ours.write_text("999999999\n")  # ours died: it could not listen where the other program does
    assert stack_check.main(["decision-api", "--pidfile", str(ours)]) == 1
    said = capsys.readouterr().out
    assert said.startswith(f"FAILED: port {port} is held by pid {proc.pid} (")
    assert "http.server" in said and f" in {where}, not by this stack's decision-api" in said
    assert "set ROSTER_DECISION_API_PORT" in said and "answered 404" in said  # and what it answered


def test_our_own_process_on_the_port_is_not_blamed(fake, monkeypatch, tmp_path, other_program, capsys):
    proc, port, _ = other_program  # started as up.sh starts ours: its own process group
    monkeypatch.setattr(stack_check, "DECISION_PORT", port)
    ours = tmp_path / "decision-api.pid"
    ours.write_text(f"{proc.pid}\n")
    assert stack_check.main(["decision-api", "--pidfile", str(ours)]) == 1
    said = capsys.readouterr().out
    assert said.startswith("FAILED: the decision API's health answered 404") and "held by" not in said


def test_a_holder_whose_name_is_not_text_is_still_named(fake, monkeypatch, tmp_path, capsys):
    # A process name is any bytes (here not UTF-8, and shaped like the fields a tool would print): the
    # holder is found from the kernel's socket tables, by its own pid.
    port = procs.free_port()
    # Its command line holds a line break too, which must not split the one-line answer.
    code = ("\nimport ctypes, socket, time; "
            "ctypes.CDLL(None).prctl(15, b'ev\\xff\\xfe,pid=1,fd=3)', 0, 0, 0); "
            f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while stack_check.listening_pids(port) != [proc.pid]:
            assert time.monotonic() < deadline and proc.poll() is None, "the holder did not listen"
            time.sleep(0.1)
        monkeypatch.setattr(stack_check, "DECISION_PORT", port)
        monkeypatch.setattr(stack_check, "TIMEOUT", 0.5)  # it accepts and never answers
        ours = tmp_path / "decision-api.pid"
        ours.write_text("999999999\n")
        assert stack_check.main(["decision-api", "--pidfile", str(ours)]) == 1
        said = capsys.readouterr().out
        assert said.startswith(f"FAILED: port {port} is held by pid {proc.pid} (") and "pid 1 " not in said
        assert said.count("\n") == 1 and " -c ?import ctypes" in said
    finally:
        proc.kill()
        proc.wait()


def test_the_relay_must_answer_its_health_with_its_database(fake):
    fake("RELAY_PORT", {"/healthz": _json(503, {"ok": False, "database": "OperationalError"})})
    with pytest.raises(stack_check.Failed, match="relay's health answered 503"):
        stack_check.check_relay()


def test_a_healthy_relay_says_how_its_chat_servers_stand(fake):
    fake("RELAY_PORT", {"/healthz": _json(200, {"ok": True, "matrix": {
        "1": {"connected": True}, "2": {"connected": False, "error": "ConnectionError: refused"}}})})
    said = stack_check.check_relay()
    assert "2 chat server(s)" in said and "server 2: ConnectionError: refused" in said


def test_the_box_watcher_must_have_a_fresh_heartbeat(monkeypatch, tmp_path):
    heartbeat = tmp_path / "boxwatcher.heartbeat"
    monkeypatch.setattr(stack_check, "HEARTBEAT", heartbeat)
    with pytest.raises(stack_check.Failed, match="no heartbeat"):
        stack_check.check_boxwatcher()
    heartbeat.write_text(f"{time.time() - 60:.3f} 3\n")
    with pytest.raises(stack_check.Failed, match="60s old"):
        stack_check.check_boxwatcher()
    heartbeat.write_text("not a time\n")
    with pytest.raises(stack_check.Failed, match="no heartbeat"):
        stack_check.check_boxwatcher()
    heartbeat.write_text(f"{time.time():.3f} 3\n")
    assert stack_check.check_boxwatcher() == "box watcher reconciled and watching 3 box(es)"
