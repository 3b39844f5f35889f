#!/usr/bin/env bash
# Claude Code's image layer (workers/presets/layer.sh does the work): only the native binary of this
# platform's package (@anthropic-ai/claude-code-linux-<arch>), at /opt/roster-agents/claude-code/claude,
# `claude` on the PATH. The wrapper package's postinstall would copy it over a stub; install scripts never
# run here, so the binary is taken from the platform package directly. No Node at run time.
here=$(cd "$(dirname "$0")" && pwd)

stage() {  # $1: the npm install (package.json, node_modules), $2: the tree copied into the image at /
  local arch
  case "$(uname -m)" in
    x86_64) arch=x64 ;; aarch64) arch=arm64 ;;
    *) echo "build.sh (claude-code): no native package for $(uname -m)" >&2; return 1 ;;
  esac
  mkdir -p "$2/opt/roster-agents/claude-code"
  install -m 755 "$1/node_modules/@anthropic-ai/claude-code-linux-$arch/claude" \
    "$2/opt/roster-agents/claude-code/claude"
  ln -s /opt/roster-agents/claude-code/claude "$2/usr/local/bin/claude"
}

# shellcheck source=../layer.sh
. "$here/../layer.sh"
