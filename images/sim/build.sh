#!/usr/bin/env bash
# Builds `gpuflow-sim:test`: the simulated LLM server (docs/simulator.md), linked statically so
# it runs in an image without a libc, on top of `gpuflow-base:test` when that exists (a shell
# for `docker exec` and health checks) or FROM scratch.
#
# Idempotent: cargo rebuilds only what changed, and the image carries a label with a hash of its
# inputs (this script, the Dockerfile, the binary, the base image's id); when the tag exists with
# the same hash, nothing is built. The static build has its own target dir (target/static by
# default) so it never invalidates the normal debug build. Classic builder (DOCKER_BUILDKIT=0):
# the engine here has no buildx.
set -euo pipefail

TAG="${GPUFLOW_SIM_TAG:-gpuflow-sim:test}"
BASE_TAG="${GPUFLOW_BASE_TAG:-gpuflow-base:test}"
TARGET=x86_64-unknown-linux-gnu
HASH_LABEL=dev.gpuflow.image-hash
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target_dir="${GPUFLOW_STATIC_TARGET_DIR:-$repo/target/static}"

say() { printf 'images/sim: %s\n' "$*"; }
die() { printf 'images/sim: error: %s\n' "$*" >&2; exit 1; }

command -v cargo >/dev/null || die "\`cargo\` is not on PATH (install Rust with rustup)"
command -v docker >/dev/null || die "the \`docker\` CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
  || die "the Docker engine is unreachable (DOCKER_HOST=\`${DOCKER_HOST:-unix:///var/run/docker.sock}\`); start it (e.g. \`service docker start\`)"

say "building a static gpuflow-sim (release, $TARGET, target dir \`$target_dir\`)"
RUSTFLAGS='-C target-feature=+crt-static' cargo build --quiet --release \
  --manifest-path "$repo/Cargo.toml" --package gpuflow --bin gpuflow-sim \
  --target "$TARGET" --target-dir "$target_dir" \
  || die "the static build of gpuflow-sim failed (see cargo's output above)"
binary="$target_dir/$TARGET/release/gpuflow-sim"
[ -x "$binary" ] || die "cargo finished but \`$binary\` is missing"
# A dynamically linked binary would build fine and then fail in the image with a bare
# "no such file or directory" (the missing loader): refuse it here with the reason.
if command -v readelf >/dev/null && readelf -l "$binary" | grep -q 'INTERP'; then
  die "\`$binary\` is dynamically linked (it asks for a program interpreter); is RUSTFLAGS overridden by .cargo/config?"
fi

base=scratch
base_id=scratch
if base_id="$(docker image inspect "$BASE_TAG" --format '{{.Id}}' 2>/dev/null)"; then
  base="$BASE_TAG"
else
  base_id=scratch
  say "\`$BASE_TAG\` is not built (images/base/build.sh); building FROM scratch"
fi

hash="$( { cat "$here/build.sh" "$here/Dockerfile"; sha256sum <"$binary"; printf '%s' "$base_id"; } | sha256sum | cut -c1-16)"
current="$(docker image inspect "$TAG" --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" 2>/dev/null || true)"
if [ "$current" = "$hash" ]; then
  say "\`$TAG\` is up to date ($hash)"
  exit 0
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp "$binary" "$ctx/gpuflow-sim"
cp "$here/Dockerfile" "$ctx/Dockerfile"
say "building \`$TAG\` FROM $base"
# The classic builder prints a deprecation notice on every build; show its output only on failure.
if ! out="$(DOCKER_BUILDKIT=0 docker build --quiet --build-arg "BASE=$base" \
  --label "$HASH_LABEL=$hash" --tag "$TAG" "$ctx" 2>&1)"; then
  printf '%s\n' "$out" >&2
  die "docker build of \`$TAG\` failed (its output is above)"
fi
say "built \`$TAG\` ($hash)"
