"""Fails when a dependency in a pyproject.toml is not named in docs/dependencies.md."""

import re
import sys
import tomllib
from pathlib import Path

doc = Path("docs/dependencies.md").read_text().lower()
missing = []
for project in [Path("pyproject.toml"), Path("gateway/pyproject.toml")]:
    if not project.exists():
        continue
    data = tomllib.loads(project.read_text())["project"]
    reqs = list(data.get("dependencies", []))
    for extra in data.get("optional-dependencies", {}).values():
        reqs += extra
    for req in reqs:
        name = re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].strip().lower()
        if f"`{name}`" not in doc:
            missing.append(f"{project}: {name}")
if missing:
    print("dependencies not named in docs/dependencies.md (as `name`):\n  " + "\n  ".join(missing))
    sys.exit(1)
print("dependencies: every one is documented")
