"""Decision API replicas (roster_control_plane with several URLs, roster_gateway.replicas): two real
HTTP/1.1 servers on loopback sharing one "database" (what each settled), one of them stopped, hung,
erroring or dying mid-answer. A call goes to the one that answers within the same deadline; only when
neither answers is it a deny; an outcome batch a replica took and died before acknowledging is settled
once, never twice."""

from __future__ import annotations

import asyncio
import json

import pytest
from mitmproxy.test import taddons
from roster_gateway import metrics
from roster_gateway.addon import Gateway
from roster_gateway.client import ControlPlaneClient, ControlPlaneDown
from roster_gateway.outcomes import OutcomeReporter

from tests.conftest import HEALTH, allow, answer, make_flow, run_request
from tests.support_ports import free_port


class Ledger:
    """What the one PostgreSQL behind both replicas holds: each decision settled at most once."""

    def __init__(self) -> None:
        self.charged: dict[str, int] = {}


class Replica:
    """A decision API replica on a real loopback port. `mode`: "ok", "hang" (reads, never answers),
    "500", or "die_after_commit" (does the work, then drops the connection without answering)."""

    def __init__(self, name: str, ledger: Ledger) -> None:
        self.name, self.ledger, self.mode = name, ledger, "ok"
        self.port = free_port()
        self.seen: list[str] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in self._writers:  # a stopped replica's keep-alive connections go with it
                writer.transport.abort()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *fields = head.decode("latin-1").split("\r\n")
                length = next((int(f.split(":", 1)[1]) for f in fields
                               if f.lower().startswith("content-length")), 0)
                body = json.loads(await reader.readexactly(length)) if length else {}
                path = line.split()[1].removeprefix("/api/gateway")
                self.seen.append(path)
                if self.mode == "hang":
                    await asyncio.sleep(3600)
                status, doc = self._answer(path, body)
                if self.mode == "die_after_commit":
                    writer.transport.abort()
                    return
                if self.mode == "500":
                    status, doc = 500, {"detail": "boom"}
                data = json.dumps(doc).encode()
                writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % (status, len(data)) + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()
        finally:
            self._writers.discard(writer)

    def _answer(self, path: str, body: dict) -> tuple[int, dict]:
        if path == "/health":
            return 200, HEALTH
        if path == "/sentinels":
            return 200, {"sentinels": []}
        if path == "/decide":
            return 200, allow(decision_id=f"dc_{self.name}")
        if path == "/outcomes":
            results = []
            for outcome in body["outcomes"]:
                did = outcome["decision_id"]
                if did in self.ledger.charged:
                    results.append("already_settled")
                else:
                    self.ledger.charged[did] = outcome["response_bytes"]
                    results.append("ok")
            return 200, {"results": results}
        if path == "/proposals":
            return 200, {"status": 201, "body": {"id": "p1", "status": "pending"}}
        return 200, {"ok": True}


@pytest.fixture
async def pair():
    ledger = Ledger()
    a, b = Replica("a", ledger), Replica("b", ledger)
    await a.start()
    await b.start()
    yield a, b
    await a.stop()
    await b.stop()


def client(*replicas: Replica, timeout: float = 0.5, backoff: float = 60.0) -> ControlPlaneClient:
    return ControlPlaneClient([r.url for r in replicas], "svc", decide_timeout=timeout,
                              outcome_timeout=timeout, backoff=backoff)


@pytest.mark.parametrize("failure", ["stopped", "hang", "500"])
async def test_a_failed_replica_hands_each_decision_to_the_other_within_the_deadline(pair, failure):
    a, b = pair
    if failure == "stopped":
        await a.stop()
    else:
        a.mode = failure
    cp = client(a, b)
    failures = metrics.REPLICA_FAILURES._value.get()
    try:
        for _ in range(4):  # every turn of the rotation, the failed replica's included
            decision = await cp.decide({})
            assert decision.decision_id == "dc_b"
    finally:
        await cp.close()
    # It failed once and then rested (back-off): the later decisions went straight to the other.
    assert len(a.seen) <= 1 and b.seen.count("/decide") == 4
    assert metrics.REPLICA_FAILURES._value.get() == failures + 1


async def test_a_replica_past_its_back_off_is_asked_again(pair):
    a, b = pair
    await a.stop()
    cp = client(a, b, backoff=0.05)
    try:
        await cp.decide({})
        await a.start()
        await asyncio.sleep(0.1)
        answered = {(await cp.decide({})).decision_id for _ in range(4)}
    finally:
        await cp.close()
    assert answered == {"dc_a", "dc_b"}  # both share the load again


async def test_with_every_replica_down_it_is_control_plane_down(pair):
    a, b = pair
    await a.stop()
    await b.stop()
    cp = client(a, b)
    try:
        with pytest.raises(ControlPlaneDown, match="unreachable"):
            await cp.decide({})
        assert await cp.health(0.5) == (False, None)
    finally:
        await cp.close()


async def test_both_hung_is_a_deny_within_the_one_deadline(pair):
    a, b = pair
    a.mode = b.mode = "hang"
    cp = client(a, b, timeout=0.3)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(ControlPlaneDown, match="did not answer /decide"):
            await cp.decide({})
    finally:
        await cp.close()
    assert loop.time() - started < 0.3 + 0.25  # the one deadline, not one per replica
    assert a.seen == ["/decide"] and b.seen == ["/decide"]


async def _gateway(a: Replica, b: Replica, token_file):
    addon = Gateway()
    tctx = taddons.context(addon)
    tctx.__enter__()
    tctx.configure(addon, roster_control_plane=f"{a.url}, {b.url}", roster_service_token_file=str(token_file),
                   roster_decide_timeout_ms=300, roster_budget_wait_ms=0, roster_outcome_retry_ms=20)
    return addon, tctx


async def test_through_the_gateway_one_down_is_allowed_and_both_down_a_legible_503(pair, token_file):
    a, b = pair
    addon, tctx = await _gateway(a, b, token_file)
    try:
        assert addon.config.also_control_plane[0] == ("127.0.0.1", b.port)  # never dialled for a box
        await a.stop()
        flow = await run_request(addon, make_flow())
        assert flow.response is None, answer(flow)
        assert flow.metadata["roster_decision_id"] == "dc_b"
        await b.stop()
        flow = await run_request(addon, make_flow())
        body = answer(flow)
        assert flow.response.status_code == 503
        assert body["verdict"] == "deny" and body["reason"] == "control_plane_unavailable"
        assert "127.0.0.1" not in body["message"]  # the box never learns the control plane's addresses
    finally:
        await addon.shutdown()
        tctx.__exit__(None, None, None)


async def test_an_outcome_batch_a_replica_took_and_died_on_is_settled_once(pair):
    a, b = pair
    a.mode = "die_after_commit"  # settles the batch in the shared ledger, then the connection drops
    cp = client(a, b)
    cp.replicas._next = 0  # a is asked first
    spawned: list[asyncio.Task] = []
    reporter = OutcomeReporter(cp, max_batch=10, flush_delay=0, spawn=lambda c: spawned.append(
        asyncio.ensure_future(c)) or spawned[-1], retry_delay=0.01)
    try:
        for n in range(3):
            reporter.report(f"dc_{n}", 200, 10, 100 + n, "")
        await asyncio.gather(*spawned)
    finally:
        await cp.close()
    # a took it and died; b answered it "already_settled": charged once each, nothing left to send.
    assert a.seen == ["/outcomes"] and b.seen == ["/outcomes"]
    assert a.ledger.charged == {"dc_0": 100, "dc_1": 101, "dc_2": 102}
    assert reporter.queued == 0


async def test_a_proposal_a_replica_may_have_taken_is_never_sent_to_another(pair):
    a, b = pair
    a.mode = "die_after_commit"
    cp = client(a, b)
    cp.replicas._next = 0
    try:
        with pytest.raises(ControlPlaneDown):
            await cp.propose("rt_x", b"{}", "10.0.0.2")
        assert b.seen == []
        await a.stop()  # never connected: the other replica takes it
        cp.replicas._next = 0
        cp.replicas.replicas[0].down_until = 0.0
        assert (await cp.propose("rt_x", b"{}", "10.0.0.2"))[0] == 201
    finally:
        await cp.close()
    assert b.seen == ["/proposals"]
