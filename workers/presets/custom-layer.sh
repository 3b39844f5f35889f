#!/usr/bin/env bash
# A custom preset's image layer (`manage.py preset build SLUG`, docs/presets.md): the named npm and PyPI
# packages, fetched on the host by npm and pip (install scripts never run), copied into a layer FROM the
# base box image by a docker build that reaches no network. Nothing in it is writable by the box user.
#
# Input (set by the command): ROSTER_PRESET_SLUG, ROSTER_PRESET_IMAGE (the tag to build), ROSTER_BOX_IMAGE
# (the base), ROSTER_PRESET_NPM and ROSTER_PRESET_PYPI (space-separated package specs, validated by the
# control plane: registry names with optional versions, never URLs or paths). Cached: an image that
# already carries this exact package list and base is left as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
slug="${ROSTER_PRESET_SLUG:?}"; tag="${ROSTER_PRESET_IMAGE:?}"; base="${ROSTER_BOX_IMAGE:-roster-box:latest}"
npm_packages="${ROSTER_PRESET_NPM:-}"; pypi_packages="${ROSTER_PRESET_PYPI:-}"
SECONDS=0
if ! docker image inspect "$base" >/dev/null 2>&1; then
  ROSTER_BOX_IMAGE="$base" "$here/../build.sh" >&2
fi
base_id=$(docker image inspect -f '{{.Id}}' "$base")
stamp=$(printf 'npm %s\npypi %s\nbase %s\n' "$npm_packages" "$pypi_packages" "$base_id" | sha256sum | cut -c1-64)
label=org.roster.preset.stamp
if [ "$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$tag" 2>/dev/null)" = "$stamp" ]; then
  echo "preset image $tag up to date"
  exit 0
fi
build=$(mktemp -d "${TMPDIR:-/tmp}/roster-custom-$slug.XXXXXX")
trap 'rm -rf "$build"' EXIT
mkdir -p "$build/root/opt/roster-agents/$slug" "$build/root/usr/local/bin"
if [ -n "$npm_packages" ]; then
  npm_dir="$build/root/opt/roster-agents/$slug/npm"
  mkdir -p "$npm_dir"
  # shellcheck disable=SC2086 - one argument per package spec
  if ! out=$(cd "$npm_dir" && npm init -y >/dev/null && npm install --ignore-scripts --omit=dev --no-audit \
      --no-fund $npm_packages 2>&1); then echo "$out" >&2; echo "custom-layer: npm install failed" >&2; exit 1; fi
  for bin in "$npm_dir"/node_modules/.bin/*; do
    [ -e "$bin" ] && ln -s "/opt/roster-agents/$slug/npm/node_modules/.bin/$(basename "$bin")" "$build/root/usr/local/bin/"
  done
fi
if [ -n "$pypi_packages" ]; then
  pip=(python3 -m pip); [ -x "$here/../../.venv/bin/python" ] && pip=("$here/../../.venv/bin/python" -m pip)
  py_dir="$build/root/opt/roster-agents/$slug/python"
  # shellcheck disable=SC2086
  if ! out=$("${pip[@]}" install -q --disable-pip-version-check --no-compile --only-binary=:all: \
      --target "$py_dir" $pypi_packages 2>&1); then echo "$out" >&2; echo "custom-layer: pip install failed" >&2; exit 1; fi
  for bin in "$py_dir"/bin/*; do
    [ -e "$bin" ] || continue
    name=$(basename "$bin")
    printf '#!/bin/sh\nPYTHONPATH=/opt/roster-agents/%s/python${PYTHONPATH:+:$PYTHONPATH} exec python3 /opt/roster-agents/%s/python/bin/%s "$@"\n' \
      "$slug" "$slug" "$name" >"$build/root/usr/local/bin/$name"
    chmod 755 "$build/root/usr/local/bin/$name"
  done
fi
chmod -R u+rwX,go-w,go+rX "$build/root"
cat >"$build/Dockerfile" <<'DOCKERFILE'
ARG BASE=roster-box:latest
FROM ${BASE}
USER root
COPY root/ /
RUN bad=$(find /opt/roster-agents /usr/local/bin -xdev ! -type l \( ! -user root -o -perm /022 \) -print -quit); \
    [ -z "$bad" ] || { echo "writable by the box user: $bad" >&2; exit 1; }
USER box
DOCKERFILE
if ! out=$(docker build -q --build-arg BASE="$base" --label "$label=$stamp" \
    --label "org.roster.preset.packages=npm: $npm_packages; pypi: $pypi_packages" -t "$tag" "$build" 2>&1); then
  echo "$out" >&2; exit 1
fi
echo "preset image $tag built from $base in ${SECONDS}s ($(numfmt --to=iec "$(docker image inspect -f '{{.Size}}' "$tag")"))"
