#!/usr/bin/env bash
# Builds `gpuflow-base:test`: a FROM-scratch image holding Debian's statically linked busybox,
# the smallest image that has a shell, so tests need no registry (there is none to pull from).
#
# Idempotent: the image carries a label with a hash of everything that goes into it (this
# script, the Dockerfile, the busybox binary); when the tag exists with the same hash, nothing
# is built. Uses the classic builder (DOCKER_BUILDKIT=0) because the engine here has no buildx.
set -euo pipefail

TAG="${GPUFLOW_BASE_TAG:-gpuflow-base:test}"
BUSYBOX=/bin/busybox
HASH_LABEL=dev.gpuflow.image-hash
here="$(cd "$(dirname "$0")" && pwd)"

say() { printf 'images/base: %s\n' "$*"; }
die() { printf 'images/base: error: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "the \`docker\` CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
  || die "the Docker engine is unreachable (DOCKER_HOST=\`${DOCKER_HOST:-unix:///var/run/docker.sock}\`); start it (e.g. \`service docker start\`)"

# The dynamically linked `busybox` package also installs /bin/busybox; only the static one runs
# in an image that has no libc.
if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Debian's busybox-static"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q busybox-static >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q busybox-static >/dev/null; } \
      || die "could not install busybox-static with apt-get"
  else
    die "Debian's \`busybox-static\` is needed: run \`sudo apt-get install -y busybox-static\`"
  fi
fi
[ -x "$BUSYBOX" ] || die "\`$BUSYBOX\` is missing although busybox-static is installed"

dockerfile='FROM scratch
COPY rootfs/ /
ENV PATH=/bin
CMD ["sh"]'

hash="$( { cat "$here/build.sh"; printf '%s' "$dockerfile"; sha256sum "$BUSYBOX"; } | sha256sum | cut -c1-16)"
current="$(docker image inspect "$TAG" --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" 2>/dev/null || true)"
if [ "$current" = "$hash" ]; then
  say "\`$TAG\` is up to date ($hash)"
  exit 0
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"
mkdir -p "$root/bin" "$root/etc" "$root/root" "$root/tmp"
chmod 1777 "$root/tmp"
cp "$BUSYBOX" "$root/bin/busybox"
# One symlink per applet, as `busybox --install -s` would make, without running a container.
for applet in $("$BUSYBOX" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
printf '%s\n' "$dockerfile" >"$ctx/Dockerfile"

say "building \`$TAG\` ($hash)"
# The classic builder prints a deprecation notice on every build: show its output only on failure.
DOCKER_BUILDKIT=0 docker build -q --label "$HASH_LABEL=$hash" -t "$TAG" "$ctx" >"$ctx/build.log" 2>&1 \
  || { cat "$ctx/build.log" >&2; die "\`docker build\` of \`$TAG\` failed"; }
docker run --rm "$TAG" sh -c 'echo ok' | grep -qx ok || die "\`$TAG\` was built but cannot run \`sh\`"
say "built \`$TAG\`"
