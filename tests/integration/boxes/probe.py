# ruff: noqa: S310, S108 - this probe runs inside a box and pokes at exactly these things
"""Runs INSIDE a box (copied into the worker's read-only code mount). Tries everything a hostile worker
would and prints one JSON line `PROBE {...}` with what worked. Standard library only."""

import errno
import fcntl
import json
import os
import resource
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

args = json.loads(sys.argv[1])
result = {}
T0 = time.monotonic()
marks = {}  # seconds since start, to see where a slow probe spends its time


def connect(host, port, timeout=1.0):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return "open"
    except OSError as exc:
        return f"blocked: {exc.__class__.__name__}"


def open_ports(host, ports, wait=0.5, batch=16000):
    """Non-blocking connects to many ports at once; returns the ones that completed. A box's host is
    local, so an open port answers in well under `wait`; a dropped SYN never does."""
    found = []
    for start in range(0, len(ports), batch):
        socks = {}
        for port in ports[start:start + batch]:
            s = socket.socket()
            s.setblocking(False)
            code = s.connect_ex((host, port))
            if code in (0, errno.EINPROGRESS):
                socks[s.fileno()] = (s, port)
            else:
                s.close()
        poller = select.poll()
        for fd in socks:
            poller.register(fd, select.POLLOUT)
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(int(left * 1000) + 1):
                poller.unregister(fd)
                s, port = socks[fd]
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    found.append(port)
        for s, _ in socks.values():
            s.close()
    return sorted(found)


def fetch(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return {"status": resp.status, "body": resp.read(4000).decode("utf-8", "replace")}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": exc.read(4000).decode("utf-8", "replace")}
    except Exception as exc:  # noqa: BLE001 - any failure is a result here
        return {"status": None, "body": f"{exc.__class__.__name__}: {exc}"}


def write(path):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        return "written"
    except OSError as exc:
        return f"refused: {errno.errorcode.get(exc.errno, exc.errno)}"


gw_host, gw_port = args["gateway"]
targets = {"gateway": (gw_host, gw_port), "listener": tuple(args["listener"]), "direct_ip": ("192.0.2.1", 80),
           "internet_ip": ("1.1.1.1", 443)}
if args.get("other_box"):
    targets["other_box"] = tuple(args["other_box"])


def check(name, target):
    result[name] = connect(*target)


checks = [threading.Thread(target=check, args=item, daemon=True) for item in targets.items()]
for thread in checks:
    thread.start()
dns_answer = []


def resolve():
    try:
        dns_answer.append("resolved: " + socket.gethostbyname("example.com"))
    except OSError as exc:
        dns_answer.append(f"failed: {exc.__class__.__name__}")


resolver = threading.Thread(target=resolve, daemon=True)
resolver.start()
if args.get("scan"):
    result["open_host_ports"] = open_ports(gw_host, args["scan"])
resolver.join(3)  # Docker's embedded resolver forwards to 127.0.0.1 in the box and waits out its retries
result["dns"] = dns_answer[0] if dns_answer else "failed: no answer"
for thread in checks:
    thread.join()
marks["network"] = round(time.monotonic() - T0, 2)
result["uid"] = os.getuid()
try:  # raising the soft limit to the hard one is what a box would do before crashing on purpose
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
except (ValueError, OSError):
    pass
result["core_limit"] = list(resource.getrlimit(resource.RLIMIT_CORE))


def first_readable(*paths):
    for path in paths:
        try:
            return open(path).read().strip()
        except OSError:
            continue
    return None


result["limits"] = {  # cgroup v1, else v2
    "memory": first_readable("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"),
    "pids": first_readable("/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max"),
    "cpu": first_readable("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu.max"),
}
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
result["caps"] = {name: status[name].strip() for name in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs")}
result["write_code"] = write("/code/evil.py")
result["write_config"] = write("/config/run.json")
result["write_rootfs"] = write("/usr/local/bin/evil")
result["write_resolv"] = write("/etc/resolv.conf")
result["write_workspace"] = write("/workspace/notes.txt")
result["docker_socket"] = [p for p in ("/var/run/docker.sock", "/run/docker.sock") if os.path.exists(p)]
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close()
    result["raw_socket"] = "opened"
except OSError as exc:
    result["raw_socket"] = f"refused: {errno.errorcode.get(exc.errno, exc.errno)}"
try:  # bring eth0 down: needs CAP_NET_ADMIN
    s = socket.socket()
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"eth0", 0))  # SIOCSIFFLAGS
    result["ifdown"] = "done"
except OSError as exc:
    result["ifdown"] = f"refused: {errno.errorcode.get(exc.errno, exc.errno)}"
for name in ("allowed", "denied", "denied_home", "bad_token"):
    if args.get(name):
        url = args[name]
        if name == "bad_token":
            proxy = f"http://run:rt_{'B' * 43}@{gw_host}:{gw_port}"
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
            try:
                with opener.open(url, timeout=10) as resp:
                    result[name] = {"status": resp.status, "body": ""}
            except urllib.error.HTTPError as exc:
                result[name] = {"status": exc.code, "body": exc.read(2000).decode("utf-8", "replace")}
        else:
            result[name] = fetch(url, {"authorization": "Bearer " + os.environ.get(args["sentinel_var"], "")})
        marks[name] = round(time.monotonic() - T0, 2)
if args.get("https"):
    result["https"] = fetch(args["https"])  # Python: the system store (SSL_CERT_FILE, REQUESTS_CA_BUNDLE)
    curl = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", args["https"] + "-curl"],
                          capture_output=True, text=True, timeout=20)
    result["curl_https"] = curl.stdout.strip() or curl.stderr.strip()
    result["node_ca_readable"] = os.access(os.environ.get("NODE_EXTRA_CA_CERTS", "/nonexistent"), os.R_OK)
result["env"] = dict(os.environ)
seen = {}
for root in ("/code", "/config", "/workspace", "/etc/roster", "/tmp"):
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                seen[p] = open(p, errors="replace").read(20000)
            except OSError:
                seen[p] = "<unreadable>"
result["files"] = seen
result["marks"] = marks
print("PROBE " + json.dumps(result), flush=True)
