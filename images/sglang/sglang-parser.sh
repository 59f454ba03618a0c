#!/usr/bin/env bash
# Makes SGLang's real server-argument parser runnable without a GPU: the pinned SGLang wheel's
# Python sources, a venv with the few pure-CPU packages that parser imports, and the harness
# images/sglang/parser.py (which says exactly what of SGLang runs and what is stubbed, and why).
#
#   images/sglang/sglang-parser.sh          # build or reuse; prints the cache folder
#
# The folder it prints holds:
#   bin/sglang-serve-parser ARGS...          # as `sglang serve ARGS` (a positional MODEL is taken)
#   bin/sglang-launch-server-parser ARGS...  # as `python -m sglang.launch_server ARGS`
# Both: `--help` prints SGLang's help (`usage: sglang serve ...`); flags SGLang refuses exit 2
# with argparse's `sglang serve: error: ...` on stderr; accepted ones print the parsed server
# arguments as JSON on stdout and exit 0. Also lib/ (the wheel's sglang/*.py), venv/, parser.py.
#
# Where it comes from: the sglang wheel on PyPI (pinned version and sha256; only its *.py files
# and dist-info are unpacked), and msgspec, orjson and PyYAML from PyPI (pinned). Nothing else is
# fetched. GPUFLOW_SGLANG_WHEEL=/path/to/the.whl uses a local copy instead (checked against
# the same sha256).
#
# Cache: outside the clone, ${GPUFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gpuflow}/sglang-parser/
# <version>-<key>, the key a hash of the pins, the harness, the wrappers and the Python that runs
# the venv. A folder appears there only once complete (built in a temporary folder beside it,
# checked, then renamed); a lock makes a second caller wait for the first one's build.
set -euo pipefail

SGLANG_VERSION=0.5.23
SGLANG_WHEEL="sglang-$SGLANG_VERSION-cp311-cp311-manylinux_2_34_x86_64.whl"
SGLANG_WHEEL_SHA256=00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937
# What the parser imports beyond the standard library: msgspec (the field namespaces and
# ServerArgs are msgspec Structs), orjson (json_list_type, the `type=` of JSON-list flags),
# PyYAML (`--config FILE`, read by sglang/srt/utils/server_args_config_parser.py).
PIP_PINS=(msgspec==0.23.0 orjson==3.13.0 PyYAML==6.0.4)
# The wrappers: MODE, then the name under bin/.
WRAPPERS=("serve:sglang-serve-parser" "launch_server:sglang-launch-server-parser")

here="$(cd "$(dirname "$0")" && pwd)"
say() { printf 'images/sglang: %s\n' "$*" >&2; }
die() { printf 'images/sglang: error: %s\n' "$*" >&2; exit 1; }

command -v python3 >/dev/null || die "\`python3\` (3.10 or newer, with the venv module) is needed"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || die "SGLang $SGLANG_VERSION's sources need Python 3.10 or newer; \`python3\` is $(python3 -V 2>&1)"
command -v flock >/dev/null || die "\`flock\` is needed (apt-get install util-linux)"
[ -f "$here/parser.py" ] || die "the harness \`$here/parser.py\` is missing"

python_id="$(python3 -c 'import os, sys; print(sys.version.split()[0], os.path.realpath(sys.executable))')"
wrapper_text() { # MODE: the body of bin/<name>; the folder is found from the script's own path
  printf '#!/bin/sh\n# SGLang %s parser (gpuflow images/sglang/sglang-parser.sh), mode %s.\nhere="$(cd "$(dirname "$0")/.." && pwd)"\nexec "$here/venv/bin/python" "$here/parser.py" --mode %s "$@"\n' \
    "$SGLANG_VERSION" "$1" "$1"
}
key="$( { printf '%s\n' "$SGLANG_VERSION" "$SGLANG_WHEEL" "$SGLANG_WHEEL_SHA256" "${PIP_PINS[@]}" "$python_id" "$(uname -m)";
  for w in "${WRAPPERS[@]}"; do wrapper_text "${w%%:*}"; done; cat "$here/parser.py"; } | sha256sum | cut -c1-16)"
cache_root="${GPUFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuflow}/sglang-parser"
dir="$cache_root/$SGLANG_VERSION-$key"

built() { [ -x "$dir/bin/sglang-serve-parser" ] && [ -x "$dir/bin/sglang-launch-server-parser" ] && [ -f "$dir/lib/sglang/srt/server_args.py" ]; }
if built; then
  say "SGLang $SGLANG_VERSION's parser is ready (\`$dir\`)"
  printf '%s\n' "$dir"
  exit 0
fi

mkdir -p "$cache_root"
chmod 700 "$cache_root" 2>/dev/null || true
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
  say "another build is running; waiting for it"
  flock 9
fi
if built; then
  printf '%s\n' "$dir"
  exit 0
fi
work="$(mktemp -d "$cache_root/.building-XXXXXX")"
trap 'rm -rf "$work"' EXIT
out="$work/out"
mkdir -p "$out/bin" "$out/lib" "$work/wheel"

say "creating a venv with ${PIP_PINS[*]} from PyPI"
python3 -m venv "$out/venv" || die "\`python3 -m venv\` failed (apt-get install python3-venv)"
"$out/venv/bin/pip" install -q --disable-pip-version-check --no-deps --only-binary=:all: "${PIP_PINS[@]}" \
  || die "pip could not install ${PIP_PINS[*]}"

if [ -n "${GPUFLOW_SGLANG_WHEEL:-}" ]; then
  [ -f "$GPUFLOW_SGLANG_WHEEL" ] || die "GPUFLOW_SGLANG_WHEEL=\`$GPUFLOW_SGLANG_WHEEL\` is not a file"
  say "using the local wheel \`$GPUFLOW_SGLANG_WHEEL\`"
  cp "$GPUFLOW_SGLANG_WHEEL" "$work/wheel/$SGLANG_WHEEL"
else
  say "downloading $SGLANG_WHEEL from PyPI (39 MB; no dependencies)"
  # The platform and ABI are given so that the same wheel is chosen on any host.
  "$out/venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_34_x86_64 --implementation cp --python-version 3.11 --abi cp311 \
    -d "$work/wheel" "sglang==$SGLANG_VERSION" \
    || die "pip could not download sglang==$SGLANG_VERSION (or set GPUFLOW_SGLANG_WHEEL to a local copy of $SGLANG_WHEEL)"
fi
wheel="$work/wheel/$SGLANG_WHEEL"
[ -f "$wheel" ] || die "no \`$SGLANG_WHEEL\` after the download (found: $(ls "$work/wheel"))"
actual="$(sha256sum "$wheel" | cut -d' ' -f1)"
[ "$actual" = "$SGLANG_WHEEL_SHA256" ] \
  || die "$SGLANG_WHEEL has sha256 $actual, not the pinned $SGLANG_WHEEL_SHA256"

say "unpacking the wheel's sglang/**/*.py and dist-info"
"$out/venv/bin/python" - "$wheel" "$out/lib" "$SGLANG_VERSION" <<'PY' || die "could not unpack the wheel"
import sys, zipfile
wheel, dest, version = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if (n.startswith("sglang/") and n.endswith(".py")) or n.startswith(f"sglang-{version}.dist-info/")]
    z.extractall(dest, names)
print(f"{len(names)} files", file=sys.stderr)
PY

cp "$here/parser.py" "$out/parser.py"
for w in "${WRAPPERS[@]}"; do
  wrapper_text "${w%%:*}" >"$out/bin/${w#*:}"
  chmod 755 "$out/bin/${w#*:}"
done
printf 'sglang==%s %s sha256=%s\n%s\n' "$SGLANG_VERSION" "$SGLANG_WHEEL" "$SGLANG_WHEEL_SHA256" "${PIP_PINS[*]}" >"$out/PINS"

# Checked before it is published: the help, a refused flag (exit 2) and an accepted line.
help="$("$out/bin/sglang-serve-parser" --help 2>&1)" || die "\`$out/bin/sglang-serve-parser --help\` failed: $help"
grep -q -- '--cuda-graph-max-bs-decode' <<<"$help" \
  || die "the parser was made but its --help does not list --cuda-graph-max-bs-decode (\`$out/bin/sglang-serve-parser --help\`)"
rc=0; "$out/bin/sglang-serve-parser" m --no-such-flag >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || die "the parser accepted or crashed on an unknown flag (exit $rc, not 2)"
"$out/bin/sglang-launch-server-parser" --model-path m --tp-size 2 >/dev/null \
  || die "the parser refused \`--model-path m --tp-size 2\` (its error is above)"
find "$out" -name __pycache__ -type d -prune -exec rm -rf {} +

rm -rf "$dir"
mv "$out" "$dir"
say "made SGLang $SGLANG_VERSION's parser in \`$dir\`"
printf '%s\n' "$dir"
