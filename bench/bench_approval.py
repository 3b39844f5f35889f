"""Approval release: an approver's click in Chromium to the held request's response at the box-side client,
through the web server, the decision API process and the real gateway (docs/operations.md, "Approval
release"). Runs the browser test that measures it (tests/integration/browser/test_approval_release.py)
with more clicks and prints its per-hop medians. Target: click -> response at the client <= 500 ms.
`python -m bench approval` runs only this; ROSTER_BENCH_APPROVAL_CLICKS sets the number of clicks."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import procs

CLICKS = int(os.environ.get("ROSTER_BENCH_APPROVAL_CLICKS", 9))
TEST = "tests/integration/browser/test_approval_release.py"


def main() -> None:
    env = {**os.environ, "ROSTER_RELEASE_CLICKS": str(CLICKS)}
    run = subprocess.run([sys.executable, "-m", "pytest", TEST, "-q", "-s", "-m", "integration", "-p",
                          "no:cacheprovider"], cwd=procs.REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    lines = [line for line in run.stdout.splitlines() if " median " in line]
    if run.returncode != 0 or not lines:
        tail = "\n".join((run.stdout + run.stderr).splitlines()[-20:])
        raise RuntimeError(f"the approval release test failed:\n{tail}")
    print(f"approval release over {CLICKS} clicks (Chromium, web server, decision API, gateway):")
    for line in lines:
        print("  " + line)


if __name__ == "__main__":
    main()
