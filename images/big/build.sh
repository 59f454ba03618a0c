#!/usr/bin/env bash
# Builds `gpuflow-big:test`: `gpuflow-base:test` plus four layers of 288 MiB of random bytes
# each (1152 MiB in all), the image the registry tests push and pull (runner/tests/registry.rs,
# runner/tests/support/registry.rs). Its size is the point: a pull of it lasts long enough for a
# test to watch its progress, stall the registry or kill it half way. The bytes are random so
# that the registry's gzip cannot shrink them: what crosses the wire is what the manifest says.
# Several layers, because the engine pulls layers side by side and reports each apart.
#
# Idempotent: the image carries a label with a hash of its inputs (this script and the base
# image's id); when the tag exists with the same hash, nothing is built. The random bytes are not
# an input: a rebuild makes other bytes, which no test depends on. Classic builder
# (DOCKER_BUILDKIT=0): the engine here has no buildx.
set -euo pipefail

TAG="${GPUFLOW_BIG_TAG:-gpuflow-big:test}"
BASE_TAG="${GPUFLOW_BASE_TAG:-gpuflow-base:test}"
LAYERS=4
LAYER_MIB=288
HASH_LABEL=dev.gpuflow.image-hash
here="$(cd "$(dirname "$0")" && pwd)"

say() { printf 'images/big: %s\n' "$*"; }
die() { printf 'images/big: error: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "the \`docker\` CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
  || die "the Docker engine is unreachable (DOCKER_HOST=\`${DOCKER_HOST:-unix:///var/run/docker.sock}\`); start it (e.g. \`service docker start\`)"

base_id="$(docker image inspect "$BASE_TAG" --format '{{.Id}}' 2>/dev/null)" \
  || die "\`$BASE_TAG\` is not built: run \`bash images/base/build.sh\` first (\`make test-images\` does)"

# One RUN per layer: the classic builder commits each RUN as a layer of its own. busybox's
# `head` reads /dev/urandom (the build container has the engine's /dev).
dockerfile="FROM $BASE_TAG"
for i in $(seq 1 "$LAYERS"); do
  dockerfile+="
RUN mkdir -p /big && head -c $((LAYER_MIB * 1024 * 1024)) /dev/urandom >/big/layer-$i"
done

hash="$( { cat "$here/build.sh"; printf '%s' "$dockerfile" "$base_id"; } | sha256sum | cut -c1-16)"
current="$(docker image inspect "$TAG" --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" 2>/dev/null || true)"
if [ "$current" = "$hash" ]; then
  say "\`$TAG\` is up to date ($hash)"
  exit 0
fi

old_id="$(docker image inspect "$TAG" --format '{{.Id}}' 2>/dev/null || true)"
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
printf '%s\n' "$dockerfile" >"$ctx/Dockerfile"
say "building \`$TAG\` ($LAYERS layers of $LAYER_MIB MiB of random bytes on \`$BASE_TAG\`; $hash)"
# The classic builder prints a deprecation notice on every build: show its output only on failure.
DOCKER_BUILDKIT=0 docker build -q --label "$HASH_LABEL=$hash" -t "$TAG" "$ctx" >"$ctx/build.log" 2>&1 \
  || { cat "$ctx/build.log" >&2; die "\`docker build\` of \`$TAG\` failed"; }
# The layers above the base's: a builder that squashed or skipped a RUN would give fewer.
layers="$(docker image inspect "$TAG" --format '{{len .RootFS.Layers}}')"
base_layers="$(docker image inspect "$BASE_TAG" --format '{{len .RootFS.Layers}}')"
[ "$((layers - base_layers))" = "$LAYERS" ] \
  || die "\`$TAG\` has $((layers - base_layers)) layers above \`$BASE_TAG\`, not $LAYERS"
# The previous build lost its tag: unless something else still uses it, its 1 GiB goes too.
if [ -n "$old_id" ] && [ "$(docker image inspect "$old_id" --format '{{len .RepoTags}}' 2>/dev/null)" = 0 ]; then
  docker image rm "$old_id" >/dev/null 2>&1 || true
fi
say "built \`$TAG\`"
