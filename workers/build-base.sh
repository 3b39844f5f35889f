#!/usr/bin/env bash
# Builds the box's base image locally from Debian packages, because no container registry is
# reachable here. Idempotent: an existing image with this tag is kept.
set -euo pipefail
tag="${ROSTER_BASE_IMAGE:-roster-base:bookworm}"
if docker image inspect "$tag" >/dev/null 2>&1; then echo "base image $tag present"; exit 0; fi
root=$(mktemp -d /tmp/roster-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,ca-certificates,curl,git bookworm "$root" \
  "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/tmp/roster-debootstrap.log 2>&1 \
  || { tail -20 /tmp/roster-debootstrap.log; exit 1; }
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import - "$tag" >/dev/null
echo "built base image $tag"
