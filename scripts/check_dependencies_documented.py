"""Fails when a dependency in a pyproject.toml, or an npm package a preset's image layer installs, is not
named in docs/dependencies.md."""

import json
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
# The agents' npm packages each preset's image layer installs (workers/presets/<slug>/package.json).
for manifest in sorted(Path("workers/presets").glob("*/package.json")):
    for name in json.loads(manifest.read_text()).get("dependencies", {}):
        if f"`{name.lower()}`" not in doc:
            missing.append(f"{manifest}: {name}")
if missing:
    print("dependencies not named in docs/dependencies.md (as `name`):\n  " + "\n  ".join(missing))
    sys.exit(1)
print("dependencies: every one is documented")
