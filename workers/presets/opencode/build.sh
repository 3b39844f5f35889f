#!/usr/bin/env bash
# OpenCode's image layer (workers/presets/layer.sh does the work): the native binary of the platform
# package opencode-linux-x64 (what the opencode-ai wrapper's postinstall would pick on this machine),
# at /opt/roster-agents/opencode/opencode, `opencode` on the PATH. The package.json names the platform
# package directly: the wrapper's other platforms' packages are not served by every registry mirror,
# and npm ci needs each one the wrapper's lockfile would list. No Node at run time (a Bun binary).
#
# And ripgrep, which OpenCode's file tools need and otherwise download from github.com at startup: the
# `rg` binary of PyPI's ripgrep wheel (fetched on the host by pip, checked against the hash below,
# never installed or run on the host), at /opt/roster-agents/opencode/rg, `rg` on the PATH.
here=$(cd "$(dirname "$0")" && pwd)
RIPGREP="ripgrep==14.1.0"
RIPGREP_WHEEL_SHA256=2048f2b64a0bfe8c425df0dea6729d9795f2d8df6cda77bf76cf718439c41453

stage() {  # $1: the npm install (package.json, node_modules), $2: the tree copied into the image at /
  [ "$(uname -m)" = x86_64 ] || { echo "build.sh (opencode): the lockfile pins linux x64 only" >&2; return 1; }
  mkdir -p "$2/opt/roster-agents/opencode" "$1/wheel"
  install -m 755 "$1/node_modules/opencode-linux-x64/bin/opencode" "$2/opt/roster-agents/opencode/opencode"
  ln -s /opt/roster-agents/opencode/opencode "$2/usr/local/bin/opencode"
  local pip=(python3 -m pip)
  [ -x "$here/../../../.venv/bin/python" ] && pip=("$here/../../../.venv/bin/python" -m pip)
  printf '%s --hash=sha256:%s\n' "$RIPGREP" "$RIPGREP_WHEEL_SHA256" >"$1/requirements.txt"
  if ! out=$("${pip[@]}" download -q --disable-pip-version-check --only-binary=:all: --no-deps \
      --require-hashes --platform manylinux2014_x86_64 -r "$1/requirements.txt" -d "$1/wheel" 2>&1); then
    echo "$out" >&2; echo "build.sh (opencode): pip download of $RIPGREP failed" >&2; return 1
  fi
  python3 - "$1/wheel" "$2/opt/roster-agents/opencode/rg" <<'PY'
import pathlib, sys, zipfile
(wheel,) = pathlib.Path(sys.argv[1]).glob("ripgrep-*.whl")
with zipfile.ZipFile(wheel) as archive:
    name = next(n for n in archive.namelist() if n.endswith(".data/scripts/rg"))
    pathlib.Path(sys.argv[2]).write_bytes(archive.read(name))
PY
  chmod 755 "$2/opt/roster-agents/opencode/rg"
  ln -s /opt/roster-agents/opencode/rg "$2/usr/local/bin/rg"
}

# shellcheck source=../layer.sh
. "$here/../layer.sh"
