"""Where the gateway's own time per request goes, without mitmproxy's share: the addon's hooks
(requestheaders, request, responseheaders, response) driven in-process with mitmproxy's test flows, a
plain HTTP GET each as the gateway bench's client sends it, with the real control-plane client to a
stand-in decision API in another process (an allow at once; outcomes taken, so the outcome journal is
acknowledged as with the real one). Prints the CPU per request (user and system: the system share is the
client's socket calls) and cProfile's top functions by own time and the gateway's by cumulative time,
as a percentage of the profiled CPU time (time spent waiting, or preempted by another process on a
shared machine, is not the gateway's and is not counted).

    .venv/bin/python -m bench.profile_gateway        # runs itself in gateway/.venv (mitmproxy's)
    ROSTER_PROFILE_GATEWAY_REQUESTS=3000 (per round; 3 rounds, the best one counts)

Not part of `make bench`: the gateway bench (bench_gateway.py) measures the whole proxy."""

from __future__ import annotations

import asyncio
import base64
import cProfile
import io
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GATEWAY_PY = REPO / "gateway" / ".venv" / "bin" / "python"
REQUESTS = int(os.environ.get("ROSTER_PROFILE_GATEWAY_REQUESTS", "3000"))
ROUNDS = 3
UPSTREAM = b"127.0.0.1:8081"
AUTH = b"Basic " + base64.b64encode(b"run:rt_profile_" + b"0" * 24)
ALLOW = (b'{"verdict":"allow","reason":null,"status":200,"message":"","decision_id":"dc_profile",'
         b'"grant":"bench","tunnel":false,"trace":false,"inject":[],"replace":[],"approval_id":null,'
         b'"hold_seconds":0,"budget":null}')


# --- the stand-in decision API (its own process) ---
async def _serve_one(reader, writer, health: bytes) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            body = await reader.readexactly(length) if length else b""
            target = head.split(b"\r\n", 1)[0]
            if b"/decide" in target:
                answer = ALLOW
            elif b"/sentinels" in target:
                answer = b'{"sentinels":[]}'
            elif b"/health" in target:
                answer = health
            elif b"/outcomes" in target or b"/journal" in target:
                answer = b'{"results":[' + b",".join([b'"ok"'] * body.count(b'"decision_id"')) + b"]}"
            else:
                answer = b'{"ok":true}'
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(answer), answer))
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def _serve() -> None:
    import json

    health = json.dumps(json.loads((REPO / "tests" / "contract" / "health.json").read_text())["response"],
                        separators=(",", ":")).encode()
    server = await asyncio.start_server(lambda r, w: _serve_one(r, w, health), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


# --- the addon under measurement (in gateway/.venv) ---
def _flow():
    from mitmproxy.test import tflow, tutils

    headers = tutils.http.Headers([(b"Host", UPSTREAM), (b"Proxy-Authorization", AUTH),
                                   (b"User-Agent", b"roster-bench")])
    flow = tflow.tflow(req=tutils.treq(host="127.0.0.1", port=8081, scheme=b"http", method=b"GET",
                                       path=b"/bench", headers=headers, content=b""))
    flow.request.authority = UPSTREAM.decode()
    flow.client_conn.peername = ("127.0.0.1", 50000)
    flow.client_conn.sni = None
    response = tutils.tresp(content=b"ok", headers=tutils.http.Headers([(b"Content-Type", b"text/plain"),
                                                                          (b"Content-Length", b"2")]))
    return flow, response


async def _one(gateway, flow, response) -> None:
    gateway.requestheaders(flow)
    await gateway.request(flow)
    if flow.response is not None:
        raise RuntimeError(f"the gateway answered instead of forwarding: {flow.response.content[:200]!r}")
    flow.response = response
    gateway.responseheaders(flow)
    gateway.response(flow)


async def _measure(port: int, tmp: Path) -> None:
    from mitmproxy.test import taddons
    from roster_gateway.addon import Gateway

    token = tmp / "service.token"
    token.write_text("svc")
    token.chmod(0o600)
    gateway = Gateway()
    with taddons.context(gateway) as tctx:
        tctx.configure(gateway, roster_control_plane=f"http://127.0.0.1:{port}",
                       roster_service_token_file=str(token), roster_allow_loopback_upstreams=True,
                       roster_outcome_journal=str(tmp / "outcomes.jsonl"),
                       roster_model_journal=str(tmp / "model-journal.jsonl"))
        gateway._running = True
        gateway.outcomes.resume()
        await gateway._check_shared_limits(gateway.shared)
        for flow, response in [_flow() for _ in range(300)]:  # warm: connections, sentinel list
            await _one(gateway, flow, response)
        best, profile = None, cProfile.Profile(time.process_time)  # CPU time: waits are not the gateway's
        for round_ in range(ROUNDS + 1):
            flows = [_flow() for _ in range(REQUESTS)]
            profiled = round_ == ROUNDS  # the last round runs under cProfile, its time not counted
            before, cpu = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
            if profiled:
                profile.enable()
            for flow, response in flows:
                await _one(gateway, flow, response)
            if profiled:
                profile.disable()
                break
            after = resource.getrusage(resource.RUSAGE_SELF)
            row = ((time.process_time() - cpu) / REQUESTS, (after.ru_utime - before.ru_utime) / REQUESTS,
                   (after.ru_stime - before.ru_stime) / REQUESTS)
            best = row if best is None or row[0] < best[0] else best
        await asyncio.sleep(0.1)  # the last outcome batch
        await gateway.shutdown()
    print(f"gateway addon, own CPU per request (best of {ROUNDS} rounds of {REQUESTS}): "
          f"{best[0] * 1e6:.0f} us (user {best[1] * 1e6:.0f}, system {best[2] * 1e6:.0f}); "
          f"load average {os.getloadavg()[0]:.1f}")
    _print_profile(profile)


def _print_profile(profile: cProfile.Profile) -> None:
    stats = pstats.Stats(profile, stream=io.StringIO())
    total = sum(entry[2] for entry in stats.stats.values())  # own time of every function: the whole
    rows = [(func, entry[2], entry[3]) for func, entry in stats.stats.items()]

    def name(func) -> str:
        path, line, function = func
        return f"{function} ({Path(path).name}:{line})" if path != "~" else function

    print("top functions by own time (% of the profiled time):")
    for func, own, _cum in sorted(rows, key=lambda r: -r[1])[:15]:
        print(f"  {100 * own / total:5.1f}%  {name(func)}")
    print("the gateway's functions by cumulative time (% of the profiled time):")
    ours = [r for r in rows if "roster_gateway" in r[0][0]]
    for func, _own, cum in sorted(ours, key=lambda r: -r[2])[:20]:
        print(f"  {100 * cum / total:5.1f}%  {name(func)}")


def main() -> None:
    try:
        import mitmproxy  # noqa: F401 - only to tell which environment this is
    except ImportError:  # the main environment: run again in the gateway's
        sys.exit(subprocess.run([str(GATEWAY_PY), "-m", "bench.profile_gateway"], cwd=REPO).returncode)
    server = subprocess.Popen([sys.executable, "-m", "bench.profile_gateway", "serve"], cwd=REPO,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory(prefix="roster-profile-gw-") as tmp:
            asyncio.run(_measure(port, Path(tmp)))
    finally:
        server.kill()
        server.wait(5)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        asyncio.run(_serve())
    else:
        main()
