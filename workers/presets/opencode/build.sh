#!/usr/bin/env bash
# OpenCode's image layer (workers/presets/layer.sh does the work): the native binary of the platform
# package opencode-linux-x64 (what the opencode-ai wrapper's postinstall would pick on this machine),
# at /opt/roster-agents/opencode/opencode, `opencode` on the PATH. The package.json names the platform
# package directly: the wrapper's other platforms' packages are not served by every registry mirror,
# and npm ci needs each one the wrapper's lockfile would list. No Node at run time (a Bun binary).
here=$(cd "$(dirname "$0")" && pwd)

stage() {  # $1: the npm install (package.json, node_modules), $2: the tree copied into the image at /
  [ "$(uname -m)" = x86_64 ] || { echo "build.sh (opencode): the lockfile pins linux x64 only" >&2; return 1; }
  mkdir -p "$2/opt/roster-agents/opencode"
  install -m 755 "$1/node_modules/opencode-linux-x64/bin/opencode" "$2/opt/roster-agents/opencode/opencode"
  ln -s /opt/roster-agents/opencode/opencode "$2/usr/local/bin/opencode"
}

# shellcheck source=../layer.sh
. "$here/../layer.sh"
