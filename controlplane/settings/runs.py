"""Runs and their boxes: limits, where a box finds the gateway, preflight, reaping (controlplane.dispatch)."""

import os

from controlplane.core.env import env
from controlplane.settings.base import VAR_DIR

# --- A run's limits, the command line's wait ---
ROSTER_RUN_DEFAULT_TIMEOUT_SECONDS = env.int("ROSTER_RUN_DEFAULT_TIMEOUT_SECONDS", 600, minimum=1)
ROSTER_RUN_MAX_OUTPUT_BYTES = env.int("ROSTER_RUN_MAX_OUTPUT_BYTES", 256 * 1024, minimum=0)
ROSTER_RUN_WAIT_POLL_SECONDS = env.float("ROSTER_RUN_WAIT_POLL_SECONDS", 0.2, minimum=0)

# --- The run's input (controlplane.dispatch.runinput; docs/architecture.md, "The run's input and answer") ---
# At most this many turns of a conversation go into a run's input (the newest), each cut at this many
# characters (marked as cut).
ROSTER_RUN_INPUT_MAX_TURNS = env.int("ROSTER_RUN_INPUT_MAX_TURNS", 50, minimum=1)
ROSTER_RUN_INPUT_TURN_MAX_CHARS = env.int("ROSTER_RUN_INPUT_TURN_MAX_CHARS", 8000, minimum=1)

# --- Boxes ---
ROSTER_BOX_IMAGE = env.str("ROSTER_BOX_IMAGE", "roster-box:latest")
ROSTER_BOX_NETWORK = env.str("ROSTER_BOX_NETWORK", "roster-boxes")
# Where a box reaches the gateway (its proxy port, on the box network's gateway address), how preflight
# asks its health, the CA a box trusts.
ROSTER_GATEWAY_PORT = env.int("ROSTER_GATEWAY_PORT", 8080, minimum=1, maximum=65535)
ROSTER_GATEWAY_HEALTH_URL = env.str("ROSTER_GATEWAY_HEALTH_URL", "http://127.0.0.1:8081/healthz")
ROSTER_GATEWAY_CA_CERT = env.path("ROSTER_GATEWAY_CA_CERT", VAR_DIR / "gateway" / "mitmproxy-ca-cert.pem")
# A box's resource limits.
ROSTER_BOX_MEMORY = env.str("ROSTER_BOX_MEMORY", "512m")
ROSTER_BOX_NANO_CPUS = env.int("ROSTER_BOX_NANO_CPUS", 1_000_000_000, minimum=1)
ROSTER_BOX_PIDS_LIMIT = env.int("ROSTER_BOX_PIDS_LIMIT", 256, minimum=1)
# Labels and container names carry this, so a reaper only ever touches its own boxes.
ROSTER_BOX_NAMESPACE = env.str("ROSTER_BOX_NAMESPACE", "roster")
# Not 10001 (the control plane image's user, owner of the vault key) nor 10002 (the gateway's): a box
# process that ever sees host files must own none of the trusted side's.
ROSTER_BOX_UID = env.int("ROSTER_BOX_UID", 10100, minimum=1)
# Per-worker code (mounted read-only at /code) lives in ROSTER_BOX_CODE_DIR/<worker>; per-run config and CAs
# under ROSTER_BOX_RUNS_DIR/<namespace>-<run id>, removed when the run ends.
ROSTER_BOX_CODE_DIR = env.path("ROSTER_BOX_CODE_DIR", VAR_DIR / "workers")
ROSTER_BOX_RUNS_DIR = env.path("ROSTER_BOX_RUNS_DIR", VAR_DIR / "runs")
ROSTER_BOX_TMPFS_SIZE = env.str("ROSTER_BOX_TMPFS_SIZE", "64m")
# The writable workspace is memory-backed and bounded (it counts against the box's memory limit too).
ROSTER_BOX_WORKSPACE_SIZE = env.str("ROSTER_BOX_WORKSPACE_SIZE", "256m")
# Public CAs the box keeps trusting (for tunnel grants), combined with the gateway CA into its system store.
ROSTER_BOX_SYSTEM_CA_BUNDLE = env.path("ROSTER_BOX_SYSTEM_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")

# --- Docker, preflight, reaping ---
ROSTER_DOCKER_TIMEOUT_SECONDS = env.int("ROSTER_DOCKER_TIMEOUT_SECONDS", 30, minimum=1)
ROSTER_PREFLIGHT_TIMEOUT_SECONDS = env.float("ROSTER_PREFLIGHT_TIMEOUT_SECONDS", 2.0, minimum=0)
# A claimed run whose box is not running by then is failed by the reaper (the dispatcher died).
ROSTER_RUN_START_GRACE_SECONDS = env.int("ROSTER_RUN_START_GRACE_SECONDS", 120, minimum=0)
# How long the reaper leaves an exited box to its watcher before finalising it itself.
ROSTER_REAP_EXITED_GRACE_SECONDS = env.int("ROSTER_REAP_EXITED_GRACE_SECONDS", 10, minimum=0)
# A live run of another box host this long past its deadline is failed by any host's reaper (its own host
# stopped reconciling: gone, or its worker down); ending it revokes its token at every gateway.
ROSTER_REAP_OTHER_HOST_GRACE_SECONDS = env.int("ROSTER_REAP_OTHER_HOST_GRACE_SECONDS", 300, minimum=0)
# A queued run older than this is dispatched again (its message was lost); dispatch is idempotent.
ROSTER_RUN_REQUEUE_SECONDS = env.int("ROSTER_RUN_REQUEUE_SECONDS", 60, minimum=1)
ROSTER_BOX_KILL_WAIT_SECONDS = env.int("ROSTER_BOX_KILL_WAIT_SECONDS", 10, minimum=0)
# The iptables binary the preflight reads the box network's firewall rules with.
ROSTER_IPTABLES = env.str("ROSTER_IPTABLES", "iptables")

# --- Admission and the box watcher (controlplane.dispatch.admission, controlplane.dispatch.watcher) ---


def _host_box_limit(box_memory: str) -> int:
    """Default per-host box limit, sized to the host: as many boxes as fit in its memory at their memory
    limit, and at most 8 per core (a box mostly waits on its model), never below 2."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = box_memory.strip().lower().rstrip("b")
    try:
        per_box = int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text)
        host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 2
    return max(2, min(host // max(per_box, 1), 8 * (os.cpu_count() or 1)))


# At most this many boxes live (starting or running) on this box host; a run beyond it stays queued, in
# order, and is admitted when a box of this host ends.
ROSTER_BOXES_PER_HOST = env.int("ROSTER_BOXES_PER_HOST", _host_box_limit(ROSTER_BOX_MEMORY), minimum=1)
# The watcher reconciles every live run of this host against Docker this often (missed events), and
# writes its heartbeat file each time its loop turns (scripts/up.sh checks it is fresh).
ROSTER_BOXWATCHER_RECONCILE_SECONDS = env.float("ROSTER_BOXWATCHER_RECONCILE_SECONDS", 10.0, minimum=0.5)
ROSTER_BOXWATCHER_HEARTBEAT_FILE = env.path("ROSTER_BOXWATCHER_HEARTBEAT_FILE",
                                            VAR_DIR / "run" / "boxwatcher.heartbeat")
