"""Where the control plane keeps its state on disk, and the reader every settings module uses."""

from pathlib import Path

from controlplane.core.env import env

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# Secrets made once (vault key, Django key, the gateway's token hash), the SQLite database, logs, runs.
VAR_DIR = env.path("ROSTER_VAR_DIR", BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)
