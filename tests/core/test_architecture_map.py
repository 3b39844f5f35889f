"""docs/architecture.md is the map of the trusted side: every app that exists is in its tree (and nothing
it calls present is missing), and pyproject.toml's layers contract holds exactly the apps that exist, on
the map's lines and in its order."""

from __future__ import annotations

import re
import tomllib

from tests.support import procs

MAP = (procs.REPO / "docs" / "architecture.md").read_text()
NOT_APPS = {"settings"}  # the settings package wires the apps up; it is not one


def _apps() -> set[str]:
    return {p.parent.name for p in (procs.REPO / "controlplane").glob("*/__init__.py")} - NOT_APPS


def _tree() -> dict[str, bool]:
    """app -> planned, from the map's tree of controlplane/."""
    tree = MAP.split("```\ncontrolplane/\n", 1)[1].split("\n```", 1)[0]
    found = {}
    for line in tree.splitlines():
        match = re.match(r"^  ([a-z_]+)/\s+(.*)$", line)
        if match:
            found[match.group(1)] = match.group(2).startswith("(planned)")
    return found


def _map_layers() -> list[list[str]]:
    block = MAP.split("## Layers", 1)[1].split("```\n", 1)[1].split("\n```", 1)[0]
    return [[name.strip() for name in line.split("|")] for line in block.splitlines() if line.strip()]


def _contract_layers() -> list[list[str]]:
    project = tomllib.loads((procs.REPO / "pyproject.toml").read_text())
    [layers] = [c["layers"] for c in project["tool"]["importlinter"]["contracts"]
                if c["type"] == "layers" and c.get("containers") == ["controlplane"]]
    return [[name.strip() for name in line.split("|")] for line in layers]


def test_every_app_is_on_the_map_and_every_present_one_exists():
    tree = _tree()
    apps = _apps()
    assert apps - set(tree) == set(), "apps missing from docs/architecture.md's tree"
    assert {app for app, planned in tree.items() if not planned} - NOT_APPS == apps, (
        "the map calls these present (or planned) wrongly")


def test_the_contract_holds_exactly_the_apps_that_exist_on_the_maps_lines():
    apps = _apps()
    expected = [[app for app in line if app in apps] for line in _map_layers()]
    assert _contract_layers() == [line for line in expected if line]


def test_every_app_in_the_maps_layers_is_in_its_tree():
    assert {app for line in _map_layers() for app in line} <= set(_tree())
