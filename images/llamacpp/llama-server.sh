#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` and small random-weight GGUF models: the real OpenAI-compatible
# server the tests and `make bench` measure gpuflow against (docs/benchmark.md#real-servers).
#
#   images/llamacpp/llama-server.sh          # build or reuse; prints the cache folder
#
# The folder it prints holds `bin/llama-server` and `models/{tiny,small}.gguf`.
#
# Where the sources come from: llama.cpp as vendored in the `llama-cpp-python` sdist on PyPI (a
# pinned version; there is no llama.cpp package in Debian and no other registry here), built
# with CMake and Ninja from PyPI, Release, the server target only, the web UI neither built nor
# downloaded. Nothing is fetched but those PyPI files.
#
# Cache: outside the clone, so a reused machine skips the ~10-minute build on 2 cores:
# ${GPUFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gpuflow}/llama-server/<version>-<key>, the
# key a hash of what decides the result: the pins, the CMake flags, the model recipe
# (make_gguf.py and MODELS) and the CPU's flags (the build is tuned to the CPU it ran on;
# another CPU must not reuse it). A folder appears there only once complete (built in a
# temporary folder beside it, then renamed), so an interrupted build leaves nothing
# half-made; a lock makes a second caller wait for the first one's build instead of
# repeating it.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
# The build and model tools, pinned so that a cache key means the same build everywhere.
PIP_PINS=(cmake==4.4.5 ninja==1.13.2 gguf==0.19.0 numpy==2.4.6)
# LLAMA_USE_PREBUILT_UI=OFF: otherwise the build downloads the web UI. OpenSSL and curl off:
# the server only listens on loopback or a container network, and loads local files.
CMAKE_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF)
# name: make_gguf.py arguments. tiny: 64 wide, 2 layers, context 512 (1.2 MB; ~2 ms TTFT);
# small: 256 wide, 4 layers, context 2048 (25 MB).
MODELS=(
  "tiny:"
  "small:--embd 256 --layers 4 --heads 8 --ctx 2048 --words 4000"
)

here="$(cd "$(dirname "$0")" && pwd)"
say() { printf 'images/llamacpp: %s\n' "$*" >&2; }
die() { printf 'images/llamacpp: error: %s\n' "$*" >&2; exit 1; }

command -v python3 >/dev/null || die "\`python3\` is needed (with the venv module) to install cmake, ninja and gguf from PyPI"
command -v c++ >/dev/null || die "a C++ compiler is needed (\`apt-get install g++\`)"

cache_root="${GPUFLOW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuflow}/llama-server"
cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m)"
key="$( { printf '%s\n' "$LLAMA_CPP_PYTHON_VERSION" "${PIP_PINS[@]}" "${CMAKE_FLAGS[@]}" "${MODELS[@]}" "$cpu_flags" "$(uname -m)"; cat "$here/make_gguf.py"; } | sha256sum | cut -c1-16)"
dir="$cache_root/$LLAMA_CPP_PYTHON_VERSION-$key"

built() { [ -x "$dir/bin/llama-server" ] && [ -f "$dir/models/small.gguf" ]; }
if built; then
  say "llama-server $LLAMA_CPP_PYTHON_VERSION is built (\`$dir\`)"
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

say "installing ${PIP_PINS[*]} from PyPI into a build venv"
python3 -m venv "$work/venv" || die "\`python3 -m venv\` failed (apt-get install python3-venv)"
"$work/venv/bin/pip" install -q --disable-pip-version-check "${PIP_PINS[@]}" \
  || die "pip could not install ${PIP_PINS[*]}"

mkdir -p "$work/out/models" "$work/out/bin"
say "making random-weight GGUF models"
for model in "${MODELS[@]}"; do
  read -r -a model_args <<<"${model#*:}"
  "$work/venv/bin/python" "$here/make_gguf.py" "$work/out/models/${model%%:*}.gguf" "${model_args[@]}" >&2
done

say "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist (llama.cpp's sources are vendored in it)"
# --no-binary for this package only: `:all:` would build CMake itself from source too.
"$work/venv/bin/pip" download -q --disable-pip-version-check --no-deps \
  --no-binary llama-cpp-python -d "$work/sdist" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" \
  || die "pip could not download llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
tar -xzf "$work/sdist/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$work"
src="$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
[ -f "$src/CMakeLists.txt" ] || die "the sdist has no vendored llama.cpp at \`$src\`"

jobs="$(nproc 2>/dev/null || echo 2)"
say "building llama-server (Release, server target only, $jobs jobs; ~10 minutes on 2 cores)"
PATH="$work/venv/bin:$PATH" cmake -S "$src" -B "$work/build" -G Ninja "${CMAKE_FLAGS[@]}" \
  >"$work/cmake.log" 2>&1 \
  || { tail -n 40 "$work/cmake.log" >&2; die "cmake could not configure llama.cpp (its log is above)"; }
PATH="$work/venv/bin:$PATH" cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log" >&2; die "the llama-server build failed (its log is above)"; }
cp "$work/build/bin/llama-server" "$work/out/bin/llama-server"
"$work/out/bin/llama-server" --version >/dev/null 2>&1 \
  || die "llama-server was built but does not run (\`$work/out/bin/llama-server --version\`)"

rm -rf "$dir"
mv "$work/out" "$dir"
say "built llama-server $LLAMA_CPP_PYTHON_VERSION into \`$dir\`"
printf '%s\n' "$dir"
