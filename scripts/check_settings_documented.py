"""Fails when a setting the code reads is missing from docs/settings.md, when the table names one nothing
reads, or when a default the code gives a setting is not in its row. Settings are the ROSTER_* names,
the gateway's roster_* options, and DATABASE_URL, REDIS_URL, CELERY_BROKER_URL and DEMO_AUTO_APPROVE.

What counts as read:
- Python (controlplane/, scripts/, bench/, tools/, workers/, manage.py): a ROSTER_* name given to a call
  (os.environ.get, os.getenv, the settings reader controlplane.core.env, a helper taking the environment)
  or looked up by subscript or `in`; never a name only written (setenv, setdefault, a dict given to a
  child process). Under tests/ and gateway/roster_gateway/, only reads of os.environ itself.
- The gateway's options: each `roster_*` option in gateway/roster_gateway/options.py (OPTIONS).
- Shell, Makefile, compose files, Dockerfiles: every `$ROSTER_*` / `${ROSTER_*...}` expansion.
The default given where it is read (a literal, or `${NAME:-literal}`; an empty one means "unset" and is
not compared) must be one of the row's `backticked` defaults: where two processes default differently,
the row says both.

Usage: check_settings_documented.py [ROOT]   (ROOT: the repository, default the current directory)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

DOC = Path("docs/settings.md")
GATEWAY_OPTIONS = Path("gateway/roster_gateway/options.py")
PYTHON_TREES = ("controlplane/", "scripts/", "bench/", "tools/", "workers/", "manage.py")
# Here only reads of os.environ itself count: tests make up names, and the gateway's settings are options.
ENVIRON_ONLY = ("tests/", "gateway/roster_gateway/")
SHELL_LIKE = re.compile(r"(\.sh|\.ya?ml|Makefile|Dockerfile[^/]*|\.env|\.ci/run)$")
SKIPPED = re.compile(r"(^|/)(\.venv|\.build|node_modules|var|test-artifacts)/")
# ROSTER_* names (a prefix such as ROSTER_SECRET_ is not one), and the few settings that keep the names
# their libraries give them.
OTHER_NAMES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DEMO_AUTO_APPROVE")
_NAME = r"ROSTER_[A-Z0-9_]*[A-Z0-9]|" + "|".join(OTHER_NAMES)
NAME = re.compile(rf"^(?:{_NAME})$")
WRITERS = {"setenv", "delenv", "setdefault", "pop", "update", "putenv", "unsetenv"}
EXPANSION = re.compile(rf"\$\{{?({_NAME})\b(?:(:?[-=?+])([^}}$]*)(\$?))?")
TICKED = re.compile(r"`([^`]+)`")


@dataclass
class Read:
    where: str
    default: str | None = None  # the literal default given there, rendered for comparison


@dataclass
class Inventory:
    reads: dict[str, list[Read]] = field(default_factory=dict)

    def add(self, name: str, where: str, default: str | None = None) -> None:
        self.reads.setdefault(name, []).append(Read(where, default))


def _files(root: Path) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return sorted({f for f in listed if not SKIPPED.search(f) and (root / f).is_file()})


def _literal(node: ast.AST | None) -> str | None:
    """A default as the table writes it: numbers as numbers, flags as 0/1, text as is; None if computed."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = _arithmetic(node)
        if value is None:
            return None
    return _render(value)


def _arithmetic(node: ast.AST):
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add | ast.Sub | ast.FloorDiv):
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if left is None or right is None:
            return None
        return {ast.Mult: left * right, ast.Add: left + right, ast.Sub: left - right,
                ast.FloorDiv: left // right if right else None}[type(node.op)]
    return None


def _render(value) -> str | None:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return None


def _number(value) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _call_name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_os_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def _python_reads(tree: ast.AST, where: str, inventory: Inventory, *, environ_only: bool) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _call_name(node.func)
            if name in WRITERS:
                continue
            reads_environ = name == "getenv" or (
                name == "get" and isinstance(node.func, ast.Attribute) and _is_os_environ(node.func.value))
            if environ_only and not reads_environ:
                continue
            for i, arg in enumerate(node.args):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and NAME.match(arg.value):
                    default = node.args[i + 1] if len(node.args) > i + 1 else None
                    inventory.add(arg.value, f"{where}:{node.lineno}", _literal(default))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and NAME.match(key.value):
                if not environ_only or _is_os_environ(node.value):
                    inventory.add(key.value, f"{where}:{node.lineno}")
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant):
            if isinstance(node.left.value, str) and NAME.match(node.left.value) and any(
                    isinstance(op, ast.In | ast.NotIn) for op in node.ops):
                if not environ_only or any(_is_os_environ(c) for c in node.comparators):
                    inventory.add(node.left.value, f"{where}:{node.lineno}")


def _gateway_options(root: Path, inventory: Inventory) -> None:
    tree = ast.parse((root / GATEWAY_OPTIONS).read_text(), str(GATEWAY_OPTIONS))
    for node in ast.walk(tree):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "OPTIONS":
            for entry in node.value.elts:
                name = ast.literal_eval(entry.elts[0])
                inventory.add(name, f"{GATEWAY_OPTIONS}:{entry.lineno}", _literal(entry.elts[2]))
            return
    raise SystemExit(f"{GATEWAY_OPTIONS}: no OPTIONS table found")


def _shell_reads(text: str, where: str, inventory: Inventory) -> None:
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for match in EXPANSION.finditer(line):
            name, op, value, nested = match.groups()
            default = value if op in ("-", ":-", "=", ":=") and not nested else None
            inventory.add(name, f"{where}:{lineno}", default)


def collect(root: Path) -> Inventory:
    inventory = Inventory()
    for path in _files(root):
        if path.endswith(".py") and path.startswith(PYTHON_TREES + ENVIRON_ONLY):
            if path == "scripts/check_settings_documented.py":
                continue
            try:
                tree = ast.parse((root / path).read_text(encoding="utf-8"), path)
            except (SyntaxError, UnicodeDecodeError) as exc:
                raise SystemExit(f"{path}: cannot be read: {exc}") from exc
            _python_reads(tree, path, inventory, environ_only=path.startswith(ENVIRON_ONLY))
        elif SHELL_LIKE.search(path):
            _shell_reads((root / path).read_text(encoding="utf-8", errors="replace"), path, inventory)
    _gateway_options(root, inventory)
    return inventory


def documented(root: Path) -> dict[str, set[str]]:
    """Each name in the table's name column -> the `ticked` values of its row's default column."""
    rows: dict[str, set[str]] = {}
    columns: list[str] = []
    for line in (root / DOC).read_text().splitlines():
        if not line.startswith("|"):
            columns = [] if not line.strip() else columns
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not columns:
            columns = [c.lower() for c in cells]
            continue
        if set(line) <= set("|-: "):
            continue
        row = dict(zip(columns, cells, strict=False))
        defaults = {_normal(v) for v in TICKED.findall(row.get("default", ""))}
        for name in TICKED.findall(row.get("name", "")):
            if name in rows:
                raise SystemExit(f"{DOC}: {name} has two rows")
            rows[name] = defaults
    return rows


def _normal(value: str) -> str:
    try:
        return _number(float(value.replace("_", ""))) if re.fullmatch(r"-?[\d_]+(\.\d+)?", value) else value
    except ValueError:
        return value


def problems(root: Path) -> list[str]:
    inventory, table = collect(root), documented(root)
    found = []
    for name in sorted(set(inventory.reads) - set(table)):
        sites = ", ".join(sorted({r.where for r in inventory.reads[name]})[:3])
        found.append(f"{name} is read ({sites}) but has no row in {DOC}")
    for name in sorted(set(table) - set(inventory.reads)):
        found.append(f"{name} has a row in {DOC} but nothing reads it: remove the row")
    for name, reads in sorted(inventory.reads.items()):
        if name not in table:
            continue
        for read in reads:
            if read.default and not NAME.match(read.default) and _normal(read.default) not in table[name]:
                found.append(f"{name}: {read.where} defaults to `{read.default}`, which its row's default "
                             f"column does not name")
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(".")
    found = problems(root)
    if found:
        print(f"settings and {DOC} disagree:\n  " + "\n  ".join(found))
        return 1
    print(f"settings: every one the code reads is in {DOC}, and nothing else")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
