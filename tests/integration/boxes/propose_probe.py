# ruff: noqa: S310 - this probe runs inside a box and pokes at exactly these things
"""Runs INSIDE a box: tries to reach the destinations' hosts directly and through the gateway, then
proposes a webhook post and an e-mail to the reserved name (with forged run identities) and polls them.
Prints one JSON line `PROPOSE {...}`. Standard library only."""

import json
import socket
import sys
import time
import urllib.error
import urllib.request

args = json.loads(sys.argv[1])
result = {}
RESERVED = "http://proposals.roster.invalid/v1/proposals"


def connect(host, port):
    try:
        with socket.create_connection((host, port), timeout=2):
            return "open"
    except OSError as exc:
        return f"blocked: {exc.__class__.__name__}"


def call(url, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST" if data is not None else "GET",
    )
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return {"status": resp.status, "body": json.loads(resp.read() or b"{}")}
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")
        try:
            return {"status": exc.code, "body": json.loads(text)}
        except ValueError:
            return {"status": exc.code, "body": text[:500]}
    except Exception as exc:  # noqa: BLE001 - any failure is a result here
        return {"status": None, "body": f"{exc.__class__.__name__}: {exc}"}


for name, (host, port) in args["direct"].items():
    result[f"direct_{name}"] = connect(host, port)
for name, url in args["via_gateway"].items():
    result[f"gateway_{name}"] = call(url, {"x": 1})["status"]

forged = {"X-Roster-Run": str(args["other_run"]), "X-Roster-Worker": "someone-else"}
result["forged_top_level"] = call(RESERVED, {**args["webhook"], "run": args["other_run"]}, forged)
webhook = call(RESERVED, args["webhook"], forged)
email = call(RESERVED, args["email"], forged)
result["webhook"], result["email"] = webhook, email
finals = {}
deadline = time.monotonic() + args["poll_seconds"]
while time.monotonic() < deadline and len(finals) < 2:
    for name, answer in (("webhook", webhook), ("email", email)):
        if name in finals or answer["status"] != 201:
            finals.setdefault(name, {"status": "not proposed"})
            continue
        state = call(f"{RESERVED}/{answer['body']['id']}")["body"]
        if state.get("status") in ("executed", "failed", "refused", "expired"):
            finals[name] = state
    time.sleep(0.5)
result["final"] = finals
print("PROPOSE " + json.dumps(result), flush=True)
