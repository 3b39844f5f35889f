#!/usr/bin/env bash
# pi's image layer (workers/presets/layer.sh does the work): the installed npm tree under
# /opt/roster-agents/pi, `pi` on the PATH. pi is JavaScript; it runs on the base image's Node 24.
here=$(cd "$(dirname "$0")" && pwd)

stage() {  # $1: the npm install (package.json, node_modules), $2: the tree copied into the image at /
  mkdir -p "$2/opt/roster-agents/pi"
  mv "$1/node_modules" "$2/opt/roster-agents/pi/"
  ln -s /opt/roster-agents/pi/node_modules/@mariozechner/pi-coding-agent/dist/cli.js "$2/usr/local/bin/pi"
}

# shellcheck source=../layer.sh
. "$here/../layer.sh"
