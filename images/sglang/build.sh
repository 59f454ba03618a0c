#!/usr/bin/env bash
# Builds `gpuflow-test/sglang-cli:0.5.23`: SGLang 0.5.23's real command-line parser (not its
# server) on top of `gpuflow-python:test`, so that a step can run SGLang's own command lines
# without a GPU:
#
#   sglang serve MODEL ARGS...                 # as SGLang's `sglang serve`
#   python3 -m sglang.launch_server ARGS...    # as SGLang's `python -m sglang.launch_server`
#
# `--help` prints SGLang's help; flags SGLang refuses exit 2 with argparse's own
# `sglang serve: error: ...`; flags it accepts print one line saying the image has SGLang's parser
# only, and exit 1 (0 with SGLANG_CLI_ONLY_OK=1). The parser comes from sglang-parser.sh (the
# pinned wheel's sources, cached outside the clone) and parser.py (what is stubbed and why).
#
# Idempotent: the image carries a label with a hash of its inputs (this script, the parser
# cache's key, the pins, the Python image's id); when the tag exists with the same hash, nothing
# is built. Classic builder (DOCKER_BUILDKIT=0): no buildx here.
set -euo pipefail

TAG="${GPUFLOW_SGLANG_TAG:-gpuflow-test/sglang-cli:0.5.23}"
PYTHON_TAG="${GPUFLOW_PYTHON_TAG:-gpuflow-python:test}"
HASH_LABEL=dev.gpuflow.image-hash
OPT=/opt/sglang-parser
here="$(cd "$(dirname "$0")" && pwd)"

say() { printf 'images/sglang: %s\n' "$*"; }
die() { printf 'images/sglang: error: %s\n' "$*" >&2; exit 1; }

command -v docker >/dev/null || die "the \`docker\` CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
  || die "the Docker engine is unreachable (DOCKER_HOST=\`${DOCKER_HOST:-unix:///var/run/docker.sock}\`); start it (e.g. \`service docker start\`)"
python_id="$(docker image inspect "$PYTHON_TAG" --format '{{.Id}}' 2>/dev/null)" \
  || die "\`$PYTHON_TAG\` is not built: run \`bash images/python/build.sh\` (or \`make test-images\`) first"
label_of() { docker image inspect "$1" --format "{{ index .Config.Labels \"$HASH_LABEL\" }}" 2>/dev/null || true; }

# The parser's cache folder: lib/ (SGLang's sources), parser.py, PINS (line 2: the pip pins).
dir="$(bash "$here/sglang-parser.sh")" || die "sglang-parser.sh failed (its output is above)"
[ -f "$dir/PINS" ] && [ -f "$dir/parser.py" ] && [ -d "$dir/lib/sglang" ] \
  || die "sglang-parser.sh printed \`$dir\`, which lacks PINS, parser.py or lib/sglang"
read -r -a pins < <(sed -n 2p "$dir/PINS")
[ "${#pins[@]}" -gt 0 ] || die "\`$dir/PINS\` names no pip pins on its second line"

hash="$( { cat "$here/build.sh"; basename "$dir"; cat "$dir/PINS"; printf '%s' "$python_id"; } | sha256sum | cut -c1-16)"
if [ "$(label_of "$TAG")" = "$hash" ]; then
  say "\`$TAG\` is up to date ($hash)"
  exit 0
fi

# The image's own Python decides which wheels of the pins fit it (its version and glibc).
read -r py_version glibc < <(docker run --rm "$PYTHON_TAG" python3 -c \
  'import platform, sys; print("%d.%d" % sys.version_info[:2], platform.libc_ver()[1])') \
  || die "could not run python3 in \`$PYTHON_TAG\`"
[ -n "$glibc" ] || die "\`$PYTHON_TAG\`'s python3 reports no glibc version"

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/opt/site" "$ctx/opt/front/sglang" "$ctx/bin"
cp -r "$dir/lib" "$ctx/opt/lib"
cp "$dir/parser.py" "$dir/PINS" "$ctx/opt/"
find "$ctx/opt" -name __pycache__ -type d -prune -exec rm -rf {} +
# Every manylinux tag the image's glibc runs (this pip does not expand one tag to older ones).
platforms=()
major="${glibc%%.*}" minor="${glibc#*.}"
[ "$major" = 2 ] || die "unexpected glibc version \`$glibc\` in \`$PYTHON_TAG\`"
for ((m = minor; m >= 17; m--)); do platforms+=(--platform "manylinux_2_${m}_$(uname -m)"); done
platforms+=(--platform "manylinux2014_$(uname -m)")
say "installing ${pins[*]} for the image's Python $py_version (glibc $glibc) from PyPI"
"$dir/venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --target "$ctx/opt/site" --python-version "$py_version" --implementation cp \
  "${platforms[@]}" "${pins[@]}" \
  || die "pip could not install ${pins[*]} for Python $py_version"

# `python3 -m sglang.launch_server`: a front package named sglang on PYTHONPATH whose
# launch_server runs the harness (the real sglang/__init__.py would import torch). The harness
# then maps `sglang` to the real sources in $OPT/lib.
printf '"""gpuflow-test/sglang-cli: only `python3 -m sglang.launch_server` (SGLang'"'"'s parser, not its\nserver). The real package is at %s/lib; see images/sglang/parser.py in gpuflow."""\n' "$OPT" \
  >"$ctx/opt/front/sglang/__init__.py"
cat >"$ctx/opt/front/sglang/launch_server.py" <<EOF
"""\`python3 -m sglang.launch_server ARGS\`: SGLang's own parser (prepare_server_args), no server."""
import runpy
import sys

sys.argv = ["$OPT/parser.py", "--mode", "launch_server", "--image", *sys.argv[1:]]
runpy.run_path("$OPT/parser.py", run_name="__main__")
EOF
cat >"$ctx/bin/sglang" <<EOF
#!/bin/sh
# gpuflow-test/sglang-cli: \`sglang serve ARGS\` runs SGLang's own parser (not its server).
case "\${1:-}" in
  serve) shift; exec python3 $OPT/parser.py --mode serve --image "\$@" ;;
  version) python3 -c 'import sys; sys.path.insert(0, "$OPT/lib"); exec(open("$OPT/lib/sglang/_version.py").read()); print("sglang version:", __version__)' ;;
  *) echo "sglang: this image (gpuflow-test/sglang-cli) has SGLang's \\\`serve\\\` parser only: sglang serve MODEL [ARGS...]" >&2; exit 2 ;;
esac
EOF
chmod 755 "$ctx/bin/sglang"
printf '%s\n' \
  "FROM $PYTHON_TAG" \
  "COPY opt/ $OPT/" \
  "COPY bin/sglang /usr/local/bin/sglang" \
  "ENV PYTHONPATH=$OPT/front:$OPT/site" \
  'CMD ["sglang", "serve", "--help"]' >"$ctx/Dockerfile"

say "building \`$TAG\` FROM $PYTHON_TAG"
# The classic builder prints a deprecation notice on every build; show its output only on failure.
if ! out="$(DOCKER_BUILDKIT=0 docker build --quiet --label "$HASH_LABEL=$hash" --tag "$TAG" "$ctx" 2>&1)"; then
  printf '%s\n' "$out" >&2
  die "docker build of \`$TAG\` failed (its output is above)"
fi

# Checked: the help, a refused flag (exit 2, argparse's message), an accepted line (exit 1, or 0).
help="$(docker run --rm "$TAG" sglang serve --help 2>&1)" || die "\`sglang serve --help\` failed in \`$TAG\`: $help"
grep -q -- '--cuda-graph-max-bs-decode' <<<"$help" || die "\`sglang serve --help\` in \`$TAG\` does not list --cuda-graph-max-bs-decode"
rc=0; err="$(docker run --rm "$TAG" python3 -m sglang.launch_server --model-path m --enable-custom-all-reduce 2>&1)" || rc=$?
{ [ "$rc" = 2 ] && grep -q 'sglang serve: error: unrecognized arguments: --enable-custom-all-reduce' <<<"$err"; } \
  || die "\`python3 -m sglang.launch_server\` in \`$TAG\` did not refuse an unknown flag as SGLang does (exit $rc): $err"
docker run --rm -e SGLANG_CLI_ONLY_OK=1 "$TAG" sglang serve m --tp 8 >/dev/null 2>&1 \
  || die "\`sglang serve m --tp 8\` with SGLANG_CLI_ONLY_OK=1 did not exit 0 in \`$TAG\`"
say "built \`$TAG\` ($hash)"
