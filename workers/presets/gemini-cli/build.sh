#!/usr/bin/env bash
# Gemini CLI's image layer (workers/presets/layer.sh does the work): the installed npm tree under
# /opt/roster-agents/gemini-cli (the package ships one esbuild bundle; its optional node-pty and keytar
# natives are never built: install scripts do not run), `gemini` on the PATH. It runs on the base
# image's Node 24 (the package needs Node 20 or later).
here=$(cd "$(dirname "$0")" && pwd)

stage() {  # $1: the npm install (package.json, node_modules), $2: the tree copied into the image at /
  mkdir -p "$2/opt/roster-agents/gemini-cli"
  mv "$1/node_modules" "$2/opt/roster-agents/gemini-cli/"
  ln -s /opt/roster-agents/gemini-cli/node_modules/@google/gemini-cli/bundle/gemini.js "$2/usr/local/bin/gemini"
}

# shellcheck source=../layer.sh
. "$here/../layer.sh"
