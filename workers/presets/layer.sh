# Sourced by workers/presets/<slug>/build.sh after it defines `stage` (how the agent's installed npm tree
# becomes files under .build/root/, copied into the image at /). Builds the preset's image layer FROM
# the base box image, offline: the packages are fetched on the host (npm ci against the committed
# package-lock.json, integrity-checked, install scripts never run), the docker build reaches nothing.
#
# Settings: ROSTER_BOX_IMAGE (the base, default roster-box:latest; built with workers/build.sh when
# missing), ROSTER_PRESET_IMAGE (the layer's tag; default roster-box-<slug>:<the base's tag>).
# Cached: the image carries a stamp (the lockfile, the recipe and the base image's id); when the image
# already has that stamp nothing is done. Prints one line saying what it did, and the image's size.
set -euo pipefail
slug=$(basename "$here")
base="${ROSTER_BOX_IMAGE:-roster-box:latest}"
base_repo="${base%:*}"; base_tag="${base##*:}"; [ "$base_tag" = "$base" ] && base_tag=latest
tag="${ROSTER_PRESET_IMAGE:-${base_repo}-${slug}:${base_tag}}"
SECONDS=0

if ! docker image inspect "$base" >/dev/null 2>&1; then
  ROSTER_BOX_IMAGE="$base" "$here/../../build.sh" >&2
fi
base_id=$(docker image inspect -f '{{.Id}}' "$base")
recipe=$(cat "$here/package.json" "$here/package-lock.json" "$here/Dockerfile" "$here/build.sh" \
  "$here/../layer.sh" | sha256sum | cut -c1-64)
stamp=$(printf '%s %s' "$recipe" "$base_id" | sha256sum | cut -c1-64)
label=org.roster.preset.stamp
if [ "$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$tag" 2>/dev/null)" = "$stamp" ]; then
  echo "preset image $tag up to date"
  exit 0
fi

build="$here/.build"
if [ "$(cat "$build/staged" 2>/dev/null)" != "$recipe" ]; then
  rm -rf "$build" && mkdir -p "$build/npm" "$build/root/usr/local/bin"
  cp "$here/package.json" "$here/package-lock.json" "$build/npm/"
  if ! out=$(cd "$build/npm" && npm ci --ignore-scripts --omit=dev --no-audit --no-fund 2>&1); then
    echo "$out" >&2; echo "build.sh ($slug): npm ci failed" >&2; exit 1
  fi
  stage "$build/npm" "$build/root"
  # Nothing the box user could write: root owns every file (COPY), none is group- or world-writable.
  chmod -R u+rwX,go-w,go+rX "$build/root"
  rm -rf "$build/npm"
  echo "$recipe" >"$build/staged"
fi

versions=$(python3 -c 'import json, sys; lock = json.load(open(sys.argv[1]))["packages"]
print(" ".join(n + "@" + lock["node_modules/" + n]["version"] for n in lock[""]["dependencies"]))' \
  "$here/package-lock.json")
if ! out=$(docker build -q --build-arg BASE="$base" --label "$label=$stamp" \
    --label "org.roster.preset.packages=$versions" -t "$tag" "$here" 2>&1); then
  echo "$out" >&2; exit 1
fi
size=$(docker image inspect -f '{{.Size}}' "$tag"); base_size=$(docker image inspect -f '{{.Size}}' "$base")
echo "preset image $tag built from $base with $versions in ${SECONDS}s" \
  "($(numfmt --to=iec "$size"), the layer $(numfmt --to=iec $((size - base_size))))"
