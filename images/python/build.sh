#!/usr/bin/env bash
# Builds `gpuflow-python:test`: a minimal Debian root (debootstrap --variant=minbase) with
# `python3`, and the write-ups' benchmark script at /tmp/benchmark_eagle3.py (its real interface:
# `--server-url --max-tokens --num-runs --warmup`). The tests of check-cli-interface and
# preflight read that script's argparse usage.
#
# Two images, each idempotent by a hash label (dev.gpuflow.image-hash):
# - `gpuflow-python:rootfs`, the Debian root, `docker import`ed: rebuilt only when the mirror,
#   the suite or the recipe below change (debootstrap takes a minute or two);
# - `gpuflow-python:test`, the root plus the script (classic builder: no buildx here).
# The mirror and suite are the ones this machine's apt already uses (/etc/apt/sources.list*),
# so nothing else is contacted; GPUFLOW_DEBIAN_MIRROR / GPUFLOW_DEBIAN_SUITE override them.
set -euo pipefail

TAG="${GPUFLOW_PYTHON_TAG:-gpuflow-python:test}"
ROOT_TAG="${TAG%:*}:rootfs"
HASH_LABEL=dev.gpuflow.image-hash
PACKAGES=python3
here="$(cd "$(dirname "$0")" && pwd)"

say() { printf 'images/python: %s\n' "$*"; }
die() { printf 'images/python: error: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "the \`docker\` CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
  || die "the Docker engine is unreachable (DOCKER_HOST=\`${DOCKER_HOST:-unix:///var/run/docker.sock}\`); start it (e.g. \`service docker start\`)"

label_of() { docker image inspect "$1" --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" 2>/dev/null || true; }

# The first Debian (not -security) archive and suite apt is configured with: deb822 files
# (`URIs:`/`Suites:`) or one-line `deb URI SUITE …` entries.
apt_source() {
  local files=() f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] && files+=("$f")
  done
  [ "${#files[@]}" -gt 0 ] || return 1
  awk '
    /^[[:space:]]*#/ { next }
    /^URIs:/   { uri = $2 }
    /^Suites:/ { if (uri ~ /\/debian\/?$/ && mirror == "") { mirror = uri; suite = $2 } }
    /^[[:space:]]*$/ { uri = "" }
    /^deb[[:space:]]/ {
      i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      if ($i ~ /\/debian\/?$/ && mirror == "") { mirror = $i; suite = $(i + 1) }
    }
    END { if (mirror != "") print mirror, suite; else exit 1 }
  ' "${files[@]}"
}

mirror="${GPUFLOW_DEBIAN_MIRROR:-}"
suite="${GPUFLOW_DEBIAN_SUITE:-}"
if [ -z "$mirror" ] || [ -z "$suite" ]; then
  read -r found_mirror found_suite < <(apt_source) \
    || die "no Debian archive found in /etc/apt/sources.list*; set GPUFLOW_DEBIAN_MIRROR and GPUFLOW_DEBIAN_SUITE (e.g. http://deb.debian.org/debian bookworm)"
  mirror="${mirror:-$found_mirror}"
  suite="${suite:-$found_suite}"
fi

# The root's recipe: what debootstrap is asked for and how the result is trimmed. Changing any
# of it (or the mirror/suite) rebuilds the root.
recipe="variant=minbase include=$PACKAGES mirror=$mirror suite=$suite trim=v1"
root_hash="$(printf '%s' "$recipe" | sha256sum | cut -c1-16)"

if [ "$(label_of "$ROOT_TAG")" = "$root_hash" ]; then
  say "\`$ROOT_TAG\` is up to date ($root_hash)"
else
  [ "$(id -u)" = 0 ] || die "building the Debian root needs root (debootstrap): run \`sudo bash images/python/build.sh\`"
  if ! command -v debootstrap >/dev/null; then
    command -v apt-get >/dev/null || die "\`debootstrap\` is needed and there is no apt-get to install it"
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null; } \
      || die "could not install debootstrap with apt-get"
  fi
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  root="$work/root"
  say "debootstrap $suite from $mirror (minbase + $PACKAGES; a minute or two)"
  debootstrap --variant=minbase --include="$PACKAGES" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed (the log's end is above)"; }
  # Trim what a test image never reads: docs, manuals, locales, apt's caches and lists, logs.
  rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/locale/* "$root"/usr/share/lintian "$root"/var/cache/apt/* \
    "$root"/var/lib/apt/lists/* "$root"/var/cache/debconf/*-old "$root"/var/log/* \
    "$root"/tmp/* "$root"/debootstrap
  find "$root" -name __pycache__ -type d -prune -exec rm -rf {} +
  chroot "$root" python3 -c 'import argparse, json, urllib.request' \
    || die "the Debian root's python3 cannot import argparse, json and urllib"
  say "importing \`$ROOT_TAG\` ($root_hash)"
  tar -C "$root" --numeric-owner -c . | docker import \
    --change "LABEL $HASH_LABEL=$root_hash" \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'CMD ["python3"]' - "$ROOT_TAG" >/dev/null \
    || die "\`docker import\` of the Debian root failed"
  rm -rf "$work"
  trap - EXIT
fi

root_id="$(docker image inspect "$ROOT_TAG" --format '{{.Id}}')"
hash="$( { cat "$here/build.sh" "$here/benchmark_eagle3.py"; printf '%s' "$root_id"; } | sha256sum | cut -c1-16)"
if [ "$(label_of "$TAG")" = "$hash" ]; then
  say "\`$TAG\` is up to date ($hash)"
  exit 0
fi
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp "$here/benchmark_eagle3.py" "$ctx/benchmark_eagle3.py"
printf 'FROM %s\nCOPY benchmark_eagle3.py /tmp/benchmark_eagle3.py\nCMD ["python3"]\n' "$ROOT_TAG" >"$ctx/Dockerfile"
say "building \`$TAG\` FROM $ROOT_TAG"
# The classic builder prints a deprecation notice on every build; show its output only on failure.
if ! out="$(DOCKER_BUILDKIT=0 docker build --quiet --label "$HASH_LABEL=$hash" --tag "$TAG" "$ctx" 2>&1)"; then
  printf '%s\n' "$out" >&2
  die "docker build of \`$TAG\` failed (its output is above)"
fi
docker run --rm "$TAG" python3 /tmp/benchmark_eagle3.py --help | grep -q -- '--server-url' \
  || die "\`$TAG\` was built but its benchmark script does not print its usage"
say "built \`$TAG\` ($hash)"
