#!/usr/bin/env bash
# What the test suite needs besides Rust, checked before `make test` runs it (the Makefile's
# `test-deps`): each tool is looked for; missing Debian packages are installed with apt-get
# when this runs as root (as images/base/build.sh does for busybox-static), otherwise the
# script names each missing one, what needs it, and the command that installs them all, and
# fails: a test must never be skipped because a tool was quietly absent.
# GPUFLOW_TEST_DEPS=check only checks, root or not (nothing is installed).
#
# The Docker images themselves, and llama-server (images/llamacpp/llama-server.sh, built once
# and cached), are built by `make test-images`, which `make test` runs after this.
set -euo pipefail

say() { printf 'test-deps: %s\n' "$*"; }

packages=() # Debian packages to install
whys=()     # one line per package: what needs it

# need PACKAGE WHY CHECK...: PACKAGE is missing unless one of the CHECKs succeeds.
need() {
  local package=$1 why=$2 check
  shift 2
  for check in "$@"; do
    if bash -c "$check" >/dev/null 2>&1; then return 0; fi
  done
  packages+=("$package")
  whys+=("$package: $why")
}

need git "the trigger, results-branch and remote-action tests make real repositories" \
  'command -v git'
need docker.io "the Docker tests and make test-images (the engine must also be running)" \
  'command -v docker'
need openssh-server "runner/tests/remote.rs starts its own sshd on 127.0.0.1" \
  'command -v sshd' 'test -x /usr/sbin/sshd'
need openssh-client "runner/tests/remote.rs reaches that sshd with ssh and makes keys with ssh-keygen" \
  'command -v ssh && command -v ssh-keygen'
need chromium "runner/tests/report.rs screenshots the HTML report headless" \
  'command -v chromium' 'command -v chromium-browser' 'command -v google-chrome'
need sqlite3 "the sqlite3 CLI the results-store tests and make bench compare against" \
  'command -v sqlite3'
need busybox-static "images/base/build.sh: the base test image" \
  "dpkg-query -W -f='\${Status}' busybox-static | grep -q 'install ok installed'"
need debootstrap "images/python/build.sh: the Python test image's Debian root" \
  'command -v debootstrap' 'test -x /usr/sbin/debootstrap'
need g++ "images/llamacpp/llama-server.sh compiles llama-server (the real test server)" \
  'command -v c++'
need python3-venv "images/llamacpp/llama-server.sh installs cmake and gguf into a venv" \
  'python3 -c "import ensurepip"'
need slurmctld "runner/tests/slurm.rs: the test Slurm cluster's controller (scripts/slurm-cluster.sh)" \
  'command -v slurmctld' 'test -x /usr/sbin/slurmctld'
need slurmd "runner/tests/slurm.rs: the test Slurm cluster's node daemons" \
  'command -v slurmd' 'test -x /usr/sbin/slurmd'
need slurm-client "runner/tests/slurm.rs and gpuflow's Slurm hosts: sbatch, squeue, scancel, sinfo" \
  'command -v sbatch'
need munge "runner/tests/slurm.rs: Slurm's authentication between its daemons and commands" \
  'command -v munged' 'test -x /usr/sbin/munged'
need libnuma1 "real vLLM on the CPU (images/vllm): its CPU kernels link libnuma" \
  '"$(command -v ldconfig || echo /sbin/ldconfig)" -p | grep -q "libnuma.so.1 "'
need docker-registry "runner/tests/registry.rs starts its own image registry (CNCF Distribution) on 127.0.0.1" \
  'command -v docker-registry'
need apache2-utils "runner/tests/registry.rs: htpasswd writes the bcrypt password file of the registry with basic auth" \
  'command -v htpasswd'
need curl "docs/simulator.md's example asks the simulator with curl (runner/tests/doc_examples.rs runs it)" \
  'command -v curl'

if [ "${#packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ "${GPUFLOW_TEST_DEPS:-}" != check ]; then
    say "installing ${packages[*]}"
    for why in "${whys[@]}"; do say "  $why"; done
    # As images/base/build.sh: try the package lists there are, update them only if needed.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" >/dev/null \
      || { apt-get update -q >/dev/null \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" >/dev/null; } \
      || { say "error: apt-get could not install ${packages[*]} (its output is above)"; exit 1; }
  else
    say "error: the tests need what this machine lacks:" >&2
    for why in "${whys[@]}"; do say "  $why" >&2; done
    if command -v apt-get >/dev/null; then
      say "install them with: sudo apt-get install -y ${packages[*]}" >&2
      say "(or run \`sudo make test-deps\` once: as root this script installs them)" >&2
    else
      say "install them with this system's package manager (these are Debian's names)" >&2
    fi
    exit 1
  fi
fi

# The test runner: not a Debian package; installed for this user, root or not.
if ! cargo nextest --version >/dev/null 2>&1; then
  if [ "${GPUFLOW_TEST_DEPS:-}" = check ]; then
    say "error: cargo-nextest is missing: cargo install cargo-nextest --locked" >&2
    exit 1
  fi
  say "installing cargo-nextest (cargo install cargo-nextest --locked; a few minutes, once)"
  cargo install cargo-nextest --locked
fi

say "everything the tests need is here"
