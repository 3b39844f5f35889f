#!/usr/bin/env bash
# Codex's image layer (workers/presets/layer.sh does the work): the native build of this platform's
# package (@openai/codex-linux-<arch>, an npm alias of @openai/codex@<version>-linux-<arch>), its
# directory as shipped at /opt/roster-agents/codex (bin/codex, its code-mode host, codex-path/rg,
# codex-resources), `codex` on the PATH. The wrapper package's bin/codex.js only finds and execs that
# binary; it is not needed. The voice resources (a TUI feature) are left out. No Node at run time.
here=$(cd "$(dirname "$0")" && pwd)

stage() {  # $1: the npm install (package.json, node_modules), $2: the tree copied into the image at /
  local arch triple
  case "$(uname -m)" in
    x86_64) arch=x64 triple=x86_64-unknown-linux-musl ;;
    aarch64) arch=arm64 triple=aarch64-unknown-linux-musl ;;
    *) echo "build.sh (codex): no native package for $(uname -m)" >&2; return 1 ;;
  esac
  mkdir -p "$2/opt/roster-agents"
  mv "$1/node_modules/@openai/codex-linux-$arch/vendor/$triple" "$2/opt/roster-agents/codex"
  rm -rf "$2/opt/roster-agents/codex/codex-resources/voice"
  ln -s /opt/roster-agents/codex/bin/codex "$2/usr/local/bin/codex"
}

# shellcheck source=../layer.sh
. "$here/../layer.sh"
