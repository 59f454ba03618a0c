#!/usr/bin/env bash
# Builds `gpuflow-llamacpp:test`: llama.cpp's real `llama-server` (built from PyPI sources by
# llama-server.sh, cached outside the clone) on top of `gpuflow-base:test`, at
# `/app/llama-server` as in llama.cpp's own images. The base is a static busybox FROM scratch,
# without a libc, so the binary goes in with every shared library `ldd` lists and the dynamic
# loader, at the paths it asks for. The models are not in the image: mount a folder of them
# (`actions/llamacpp-server`'s input `models`; `llama-server.sh` makes `models/{tiny,small}.gguf`).
#
# Idempotent: the image carries a label with a hash of its inputs (this script, the
# Dockerfile, the binary and libraries, the base image's id); when the tag exists with the same
# hash, nothing is built. The first run on a machine builds llama-server (~10 minutes on 2
# cores); later ones reuse its cache. Classic builder (DOCKER_BUILDKIT=0): no buildx here.
set -euo pipefail

TAG="${GPUFLOW_LLAMACPP_TAG:-gpuflow-llamacpp:test}"
BASE_TAG="${GPUFLOW_BASE_TAG:-gpuflow-base:test}"
HASH_LABEL=dev.gpuflow.image-hash
here="$(cd "$(dirname "$0")" && pwd)"

say() { printf 'images/llamacpp: %s\n' "$*"; }
die() { printf 'images/llamacpp: error: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "the \`docker\` CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
  || die "the Docker engine is unreachable (DOCKER_HOST=\`${DOCKER_HOST:-unix:///var/run/docker.sock}\`); start it (e.g. \`service docker start\`)"
base_id="$(docker image inspect "$BASE_TAG" --format '{{.Id}}' 2>/dev/null)" \
  || die "\`$BASE_TAG\` is not built: run \`bash images/base/build.sh\` (or \`make test-images\`) first"
command -v ldd >/dev/null || die "\`ldd\` is needed to find llama-server's libraries (apt-get install libc-bin)"

# llama-server.sh needs a C++ compiler and Python's venv module (it installs cmake from PyPI).
missing=()
command -v c++ >/dev/null || missing+=(g++)
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; } \
      || die "could not install ${missing[*]} with apt-get"
  else
    die "llama-server.sh needs ${missing[*]}: run \`sudo apt-get install -y ${missing[*]}\`"
  fi
fi

# Prints the cache folder holding bin/llama-server and models/; builds it the first time.
dir="$(bash "$here/llama-server.sh")" || die "llama-server.sh failed (its output is above)"
binary="$dir/bin/llama-server"
[ -x "$binary" ] || die "llama-server.sh printed \`$dir\`, which has no bin/llama-server"

# The libraries the binary loads, and the loader itself, as absolute paths.
ldd_out="$(ldd "$binary")" || die "\`ldd $binary\` failed"
if grep -q 'not found' <<<"$ldd_out"; then
  die "llama-server needs libraries this machine lacks: $(grep 'not found' <<<"$ldd_out" | tr -s ' \t' ' ')"
fi
mapfile -t libs < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd_out" | sort -u)
[ "${#libs[@]}" -gt 0 ] || die "\`ldd\` listed no libraries for \`$binary\` (is it static? then this script needs no libraries)"

dockerfile="FROM $BASE_TAG
COPY rootfs/ /
ENV PATH=/app:/usr/local/bin:/bin
WORKDIR /app
EXPOSE 8080
ENTRYPOINT [\"/app/llama-server\"]
CMD [\"--host\", \"0.0.0.0\", \"--port\", \"8080\"]"

hash="$( { cat "$here/build.sh"; printf '%s' "$dockerfile" "$base_id"; sha256sum "$binary" "${libs[@]}" | cut -d' ' -f1; } | sha256sum | cut -c1-16)"
current="$(docker image inspect "$TAG" --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" 2>/dev/null || true)"
if [ "$current" = "$hash" ]; then
  say "\`$TAG\` is up to date ($hash)"
  exit 0
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"
mkdir -p "$root/app" "$root/usr/local/bin"
cp "$binary" "$root/app/llama-server"
ln -s /app/llama-server "$root/usr/local/bin/llama-server"
for lib in "${libs[@]}"; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"   # the file a symlink names, under the name the binary asks for
done
printf '%s\n' "$dockerfile" >"$ctx/Dockerfile"

say "building \`$TAG\` FROM $BASE_TAG ($hash): llama-server and ${#libs[@]} libraries"
# The classic builder prints a deprecation notice on every build: show its output only on failure.
DOCKER_BUILDKIT=0 docker build -q --label "$HASH_LABEL=$hash" -t "$TAG" "$ctx" >"$ctx/build.log" 2>&1 \
  || { cat "$ctx/build.log" >&2; die "\`docker build\` of \`$TAG\` failed"; }
docker run --rm --entrypoint /app/llama-server "$TAG" --version >"$ctx/version.log" 2>&1 \
  || { cat "$ctx/version.log" >&2; die "\`$TAG\` was built but \`llama-server --version\` does not run in it (a library missing?)"; }
say "built \`$TAG\`"
