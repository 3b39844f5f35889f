"""Every error the trusted side defines is a RosterError (controlplane.core.errors): one base whose
message is safe to show a person, so a caller can tell Roster's refusals from a bug."""

from __future__ import annotations

import ast
from pathlib import Path

CONTROLPLANE = Path(__file__).resolve().parents[2] / "controlplane"
BARE = {"Exception", "BaseException"}
# Standard library only by design: the auditors' export verifier loads this file by path, outside Django.
STANDALONE = {("audit/checkpoint_format.py", "CheckpointError")}


def _bare_exceptions(root: Path = CONTROLPLANE) -> set[tuple[str, str]]:
    found = set()
    for path in root.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(base, ast.Name) and base.id in BARE for base in node.bases):
                found.add((path.relative_to(root).as_posix(), node.name))
    return found


def test_only_roster_error_subclasses_exception_directly():
    assert _bare_exceptions() - STANDALONE == {("core/errors.py", "RosterError")}


def test_the_scan_sees_a_bare_exception(tmp_path):
    source = "class Stray(Exception):\n    pass\n\n\nclass Fine(Stray):\n    pass\n"
    (tmp_path / "stray.py").write_text(source, encoding="utf-8")
    assert _bare_exceptions(tmp_path) == {("stray.py", "Stray")}
