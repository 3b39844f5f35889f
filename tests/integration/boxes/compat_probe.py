# ruff: noqa: S108, S310, S603, S607 - this probe runs inside a box and calls exactly these clients
"""Runs INSIDE a box: each client a worker's own code is likely to use (requests, httpx, the openai client,
curl, git, pip, Node's fetch) against a granted HTTPS upstream and a denied one, with only what the box
environment gives it. Prints one line `COMPAT {...}`: per client, what it got."""

import json
import subprocess
import sys

args = json.loads(sys.argv[1])
allowed, denied, model = args["allowed"], args["denied"], args["model"]
result = {}


def attempt(name, fn):
    try:
        result[name] = fn()
    except Exception as exc:  # the failure itself is what the test reads
        result[name] = f"error {exc.__class__.__name__}: {str(exc)[:300]}"


def run(cmd, keep=None):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    out = (done.stdout + done.stderr).strip()
    if keep:  # a verbose client: only the lines that say what happened
        out = "\n".join(line for line in out.splitlines() if any(k in line for k in keep))
    return f"exit {done.returncode}: {out[-400:]}"


def requests_get(url):
    import requests

    r = requests.get(url, timeout=30)
    return f"{r.status_code} {r.headers.get('x-roster-deny-reason', '')} {r.text[:80]}".strip()


def httpx_get(url):
    import httpx

    r = httpx.get(url, timeout=30)
    return f"{r.status_code} {r.headers.get('x-roster-deny-reason', '')} {r.text[:80]}".strip()


def openai_chat(base_url):
    import openai

    client = openai.OpenAI(base_url=base_url, max_retries=0, timeout=30)  # key: OPENAI_API_KEY, a sentinel
    try:
        answer = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        return f"200 {answer.choices[0].message.content}"
    except openai.APIStatusError as exc:
        return f"{exc.status_code} {exc.response.headers.get('x-roster-deny-reason', '')}"


NODE = ("fetch(process.argv[1]).then(async r => console.log(r.status, "
        "r.headers.get('x-roster-deny-reason') || '', (await r.text()).slice(0, 80)))"
        ".catch(e => { console.log('error', String(e.cause || e)); process.exit(3) })")

for label, url in (("allowed", allowed), ("denied", denied)):
    attempt(f"requests_{label}", lambda url=url: requests_get(url))
    attempt(f"httpx_{label}", lambda url=url: httpx_get(url))
    attempt(f"curl_{label}", lambda url=url: run(["curl", "-sS", "-w", " %{http_code}", url]))
    attempt(f"node_{label}", lambda url=url: run(["node", "-e", NODE, url]))
    base = url.rsplit("/", 1)[0]
    attempt(f"git_{label}", lambda base=base: run(["git", "ls-remote", base + "/repo.git"]))
    attempt(f"pip_{label}", lambda base=base: run(
        ["pip3", "download", "-vv", "--no-deps", "--disable-pip-version-check", "-d", "/tmp/pip",
         "--retries", "0", "--index-url", base + "/simple/", "roster-compat-probe"],
        keep=("Could not fetch", "HTTP error", "403", "ERROR")))
attempt("openai_allowed", lambda: openai_chat(model["allowed"]))
attempt("openai_denied", lambda: openai_chat(model["denied"]))
print("COMPAT " + json.dumps(result, sort_keys=True), flush=True)
