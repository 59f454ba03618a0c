#!/usr/bin/env bash
# Checks gpuflow's GPU support on this machine against what the NVIDIA tools say
# (docs/gpus.md, "Checking a new node: make gpu-check").
#
#   scripts/gpu-check.sh OUT_DIR
#
# Needs only the two release binaries (GPUFLOW_BIN, GPUFLOW_SIM_BIN; default
# target/release/gpuflow and target/release/gpuflow-sim beside this script's repository),
# bash, python3 and, on a GPU machine, nvidia-smi. No Rust, no Docker (check 5 uses Docker
# when it is there). Writes OUT_DIR/summary.json and every command's log into OUT_DIR.
#
# Without a GPU (no nvidia-smi, or it lists none) it says so, runs what makes sense on the
# stand-in inventory (examples/stand-in-8gpu-pcie.toml, or GPU_CHECK_STAND_IN), marks the
# GPU-only checks "skipped: no GPU" and exits 0 unless a stand-in check failed. With a GPU it
# exits 1 when any check failed. GPU_CHECK_NO_GPU=1 asks for the stand-in branch on any machine
# (the smoke test, runner/tests/gpu_check.rs).
set -euo pipefail

if [ "$#" -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$script_dir")"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
GPUFLOW_BIN="${GPUFLOW_BIN:-$repo/target/release/gpuflow}"
GPUFLOW_SIM_BIN="${GPUFLOW_SIM_BIN:-$repo/target/release/gpuflow-sim}"
STAND_IN="${GPU_CHECK_STAND_IN:-$repo/examples/stand-in-8gpu-pcie.toml}"
started_s="$(date +%s)"

for bin in "$GPUFLOW_BIN" "$GPUFLOW_SIM_BIN"; do
  if [ ! -x "$bin" ]; then
    echo "gpu-check: $bin is not there or not executable (build it: cargo build --release --bin gpuflow --bin gpuflow-sim, or set GPUFLOW_BIN / GPUFLOW_SIM_BIN)" >&2
    exit 2
  fi
done
GPUFLOW_BIN="$(cd "$(dirname "$GPUFLOW_BIN")" && pwd)/$(basename "$GPUFLOW_BIN")"
GPUFLOW_SIM_BIN="$(cd "$(dirname "$GPUFLOW_SIM_BIN")" && pwd)/$(basename "$GPUFLOW_SIM_BIN")"
if ! command -v python3 >/dev/null 2>&1; then
  echo "gpu-check: python3 is needed (it reads and writes the JSON)" >&2
  exit 2
fi

WORK="$(mktemp -d)"
LEASES="$WORK/leases"
mkdir -m 0700 "$LEASES"
export GPUFLOW_LEASE_DIR="$LEASES"
CHECKS="$OUT/checks.jsonl"
: >"$CHECKS"
PIDS=()
SIM_URL=""

cleanup() {
  local pid
  for pid in "${PIDS[@]+"${PIDS[@]}"}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]+"${PIDS[@]}"}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf 'gpu-check: %s\n' "$*" | tee -a "$OUT/gpu-check.log" >&2; }

# record NAME STATUS WHY [VALUES_JSON]
record() {
  python3 - "$CHECKS" "$1" "$2" "$3" "${4:-{\}}" <<'PY'
import json, sys
path, name, status, why, values = sys.argv[1:6]
try:
    values = json.loads(values)
except ValueError:
    values = {"raw": values}
with open(path, "a") as f:
    f.write(json.dumps({"name": name, "status": status, "why": why, "values": values}) + "\n")
PY
  say "$1: $2: $3"
}

# wait_for SECONDS COMMAND...: until the command succeeds; 1 when the time ran out.
wait_for() {
  local until=$(($(date +%s) + $1))
  shift
  while ! "$@"; do
    [ "$(date +%s)" -lt "$until" ] || return 1
    sleep 0.1
  done
}

# A workspace for one workflow: a folder with .git (the results store's anchor) and w.yml.
workspace() {
  mkdir -p "$WORK/$1/.git"
  cat >"$WORK/$1/w.yml"
}

# ---------------------------------------------------------------------------------------
# GPU or not
# ---------------------------------------------------------------------------------------
GPU=0
why_no_gpu=""
if [ -n "${GPU_CHECK_NO_GPU:-}" ]; then
  why_no_gpu="GPU_CHECK_NO_GPU is set: the stand-in branch was asked for"
elif ! command -v nvidia-smi >/dev/null 2>&1; then
  why_no_gpu="no nvidia-smi on this machine"
elif ! nvidia-smi -L >"$OUT/nvidia-smi-L.log" 2>&1; then
  why_no_gpu="nvidia-smi -L failed: $(head -c 300 "$OUT/nvidia-smi-L.log")"
elif ! grep -q '^GPU ' "$OUT/nvidia-smi-L.log"; then
  why_no_gpu="nvidia-smi -L lists no GPU"
else
  GPU=1
fi
if [ "$GPU" = 1 ]; then
  unset GPUFLOW_GPU_INVENTORY
  say "GPU machine: $(grep -c '^GPU ' "$OUT/nvidia-smi-L.log") GPU(s) listed by nvidia-smi -L"
  nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version,mig.mode.current \
    --format=csv,noheader,nounits >"$OUT/nvidia-smi-query.csv" 2>"$OUT/nvidia-smi-query.err"
  nvidia-smi topo -m >"$OUT/nvidia-smi-topo.log" 2>&1 || true
  nvidia-smi >"$OUT/nvidia-smi.log" 2>&1 || true
else
  say "NO GPU: $why_no_gpu. Running the stand-in checks on $STAND_IN (not real GPUs); GPU-only checks are skipped"
  export GPUFLOW_GPU_INVENTORY="$STAND_IN"
fi

# nvidia-smi's live values of one GPU (by UUID) as JSON, for the before-timing checks.
smi_state() {
  local uuid="$1" q apps
  q="$(nvidia-smi --id="$uuid" --query-gpu=memory.total,memory.used,memory.free,persistence_mode,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader,nounits 2>&1 || true)"
  apps="$(nvidia-smi --id="$uuid" --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c . || true)"
  python3 - "$q" "$apps" <<'PY'
import json, sys
q, apps = sys.argv[1], sys.argv[2]
keys = ["memory_total_mib", "memory_used_mib", "memory_free_mib", "persistence_mode",
        "sm_clock_mhz", "max_sm_clock_mhz", "power_w", "temperature_c"]
vals = [v.strip() for v in q.strip().splitlines()[0].split(",")] if q.strip() else []
out = {"raw": q.strip(), "processes": int(apps or 0)}
for k, v in zip(keys, vals):
    if k == "persistence_mode":
        out[k] = {"Enabled": True, "Disabled": False}.get(v)
    else:
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = None
print(json.dumps(out))
PY
}

# ---------------------------------------------------------------------------------------
# 1. hosts --json
# ---------------------------------------------------------------------------------------
check_hosts() {
  local verdict
  if ! "$GPUFLOW_BIN" hosts --json >"$OUT/hosts.json" 2>"$OUT/hosts.err"; then
    record hosts fail "gpuflow hosts --json exited non-zero (hosts.err)"
    return
  fi
  verdict="$(python3 - "$OUT" "$GPU" <<'PY'
import json, re, sys
out, gpu = sys.argv[1], sys.argv[2] == "1"
inv = json.load(open(f"{out}/hosts.json"))["hosts"][0]["inventory"]
gpus = inv.get("gpus") or []
problems, values = [], {"source": inv.get("source"), "driver": inv.get("driver"),
                        "cuda": inv.get("cuda"), "topology": inv.get("topology"),
                        "links": inv.get("links"), "gpus": []}
fields = ["index", "uuid", "model", "memory_mib", "mig", "numa_node"]
for g in gpus:
    values["gpus"].append({k: g.get(k) for k in fields})
    for k in fields:
        if k not in g:
            problems.append(f"GPU {g.get('index')}: no `{k}` field")
if not gpus:
    problems.append("no GPU in the inventory: " + json.dumps(inv.get("source")))
for k in ["driver", "cuda", "topology", "links"]:
    if k not in inv:
        problems.append(f"no `{k}` field")
if not gpu:
    if not inv.get("stand_in"):
        problems.append("the inventory is not marked stand-in")
    for k in ["uuid", "model", "memory_mib"]:
        if any(g.get(k) is None for g in gpus):
            problems.append(f"a stand-in GPU has no {k}")
    if not inv.get("driver") or not inv.get("cuda") or not inv.get("topology"):
        problems.append("driver, CUDA or topology missing")
    print(json.dumps({"status": "fail" if problems else "pass",
                      "why": "; ".join(problems) or f"stand-in inventory: {len(gpus)} GPUs, every field present",
                      "values": values}))
    sys.exit()

# GPU: compare with nvidia-smi.
if (inv.get("source") or {}).get("kind") != "nvml":
    problems.append(f"inventory source is {inv.get('source')}, not NVML")
smi = []
for line in open(f"{out}/nvidia-smi-query.csv").read().strip().splitlines():
    c = [x.strip() for x in line.split(",")]
    if len(c) >= 6:
        smi.append({"index": int(c[0]), "uuid": c[1], "name": c[2],
                    "memory_mib": int(float(c[3])), "driver": c[4], "mig": c[5]})
values["nvidia_smi"] = smi
if len(smi) != len(gpus):
    problems.append(f"nvidia-smi lists {len(smi)} GPUs, gpuflow {len(gpus)}")
by_index = {g.get("index"): g for g in gpus}
for s in smi:
    g = by_index.get(s["index"])
    if g is None:
        problems.append(f"GPU {s['index']} missing in gpuflow")
        continue
    if g.get("uuid") != s["uuid"]:
        problems.append(f"GPU {s['index']}: uuid {g.get('uuid')} vs nvidia-smi {s['uuid']}")
    if g.get("model") != s["name"]:
        problems.append(f"GPU {s['index']}: model {g.get('model')!r} vs nvidia-smi {s['name']!r}")
    if g.get("memory_mib") != s["memory_mib"]:
        problems.append(f"GPU {s['index']}: memory {g.get('memory_mib')} MiB vs nvidia-smi {s['memory_mib']}")
    want_mig = {"Enabled": True, "Disabled": False}.get(s["mig"])  # [N/A]: no MIG support
    if g.get("mig") != want_mig:
        problems.append(f"GPU {s['index']}: mig {g.get('mig')} vs nvidia-smi {s['mig']!r}")
    if inv.get("driver") != s["driver"]:
        problems.append(f"driver {inv.get('driver')} vs nvidia-smi {s['driver']}")
banner = open(f"{out}/nvidia-smi.log").read()
m = re.search(r"CUDA Version:\s*([0-9.]+)", banner)
values["nvidia_smi_cuda"] = m and m.group(1)
if m and inv.get("cuda") != m.group(1):
    problems.append(f"cuda {inv.get('cuda')} vs nvidia-smi {m.group(1)}")
if not m:
    problems.append("no CUDA version in nvidia-smi's banner")
# topo -m: a header of device columns (GPU0…, then NIC0… on some nodes), CPU Affinity, NUMA
# Affinity, GPU NUMA ID; then one row per GPU, starting at column 0. Tab-separated.
topo = open(f"{out}/nvidia-smi-topo.log").read().splitlines()
header = next((l for l in topo if "GPU0" in l and not re.match(r"GPU\d+", l)), "")
sep = "\t" if "\t" in header else None
hcells = [c.strip() for c in header.split(sep)] if header else []
gpu_cols = [k for k, c in enumerate(hcells) if re.fullmatch(r"GPU\d+", c)]
numa_col = hcells.index("NUMA Affinity") if "NUMA Affinity" in hcells else None
if sep is None:
    problems.append("nvidia-smi topo -m is not tab-separated: links and NUMA not compared")
links = inv.get("links") or []
seen_links, seen_numa = [], {}
for l in topo:
    if sep is None or not re.match(r"GPU\d+\s", l):
        continue
    cells = [c.strip() for c in l.split(sep)]
    i = int(cells[0][3:])
    row = [cells[k] if k < len(cells) else None for k in gpu_cols]
    seen_links.append(row)
    if numa_col is not None and numa_col < len(cells):
        numa = cells[numa_col]
        seen_numa[i] = numa
        g = by_index.get(i)
        if g is not None and numa.isdigit() and g.get("numa_node") != int(numa):
            problems.append(f"GPU {i}: numa_node {g.get('numa_node')} vs topo -m {numa}")
        if g is not None and not numa.isdigit() and g.get("numa_node") is not None:
            problems.append(f"GPU {i}: numa_node {g.get('numa_node')} vs topo -m {numa!r}")
    if i < len(links) and row != links[i]:
        problems.append(f"GPU {i}: links {links[i]} vs topo -m {row}")
values["topo_links"] = seen_links
values["topo_numa"] = seen_numa
if not seen_links:
    problems.append("no GPU rows in nvidia-smi topo -m")
print(json.dumps({"status": "fail" if problems else "pass",
                  "why": "; ".join(problems) or "every field equals nvidia-smi's",
                  "values": values}))
PY
)" || verdict='{"status":"fail","why":"could not compare (python error, see gpu-check.log)","values":{}}'
  record_json hosts "$verdict"
}

# record_json NAME '{"status","why","values"}'
record_json() {
  local status why values
  status="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["status"])' "$2")"
  why="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["why"])' "$2")"
  values="$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1]).get("values", {})))' "$2")"
  record "$1" "$status" "$why" "$values"
}

# ---------------------------------------------------------------------------------------
# 2. leases: gpus: 1 gets a UUID and CUDA_VISIBLE_DEVICES; a second run waits; SIGKILL frees
# ---------------------------------------------------------------------------------------
check_leases() {
  local a_pid b_pid uuid sleeper b_status=0 problems=""
  workspace lease-a <<EOF
on: workflow_dispatch
jobs:
  hold:
    gpus: 1
    steps:
      - run: |
          echo "\$\$" > "$WORK/sleeper-a"
          echo "\$CUDA_VISIBLE_DEVICES" > "$WORK/cvd-a.tmp"
          mv "$WORK/cvd-a.tmp" "$WORK/cvd-a"
          exec sleep 120
EOF
  (cd "$WORK/lease-a" && exec "$GPUFLOW_BIN" run w.yml --plain) >"$OUT/lease-a.log" 2>&1 &
  a_pid=$!
  PIDS+=("$a_pid")
  if ! wait_for 20 test -s "$WORK/cvd-a"; then
    record leases fail "the gpus: 1 job never started within 20 s (lease-a.log)"
    return
  fi
  uuid="$(tr -d '[:space:]' <"$WORK/cvd-a")"
  sleeper="$(cat "$WORK/sleeper-a" 2>/dev/null || true)"
  [ -n "$sleeper" ] && PIDS+=("$sleeper")
  "$GPUFLOW_BIN" hosts --json >"$OUT/hosts-while-leased.json" 2>&1 || true
  local lease_seen
  lease_seen="$(python3 - "$OUT/hosts-while-leased.json" "$uuid" "$GPU" <<'PY'
import json, sys
path, uuid, gpu = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
problems = []
try:
    inv = json.load(open(path))["hosts"][0]["inventory"]
except Exception as e:
    print(f"hosts --json unreadable: {e}"); sys.exit()
uuids = [g["uuid"] for g in inv["gpus"]]
if "," in uuid or uuid not in uuids:
    problems.append(f"CUDA_VISIBLE_DEVICES={uuid!r} is not one UUID of {uuids}")
held = [g for g in inv["gpus"] if g.get("leased_by")]
if [g["uuid"] for g in held] != [uuid]:
    problems.append(f"hosts --json shows leases on {[(g['uuid'], g['leased_by']) for g in held]}")
print("; ".join(problems))
PY
)"
  [ -n "$lease_seen" ] && problems="$problems; $lease_seen"
  if [ "$GPU" = 1 ] && ! grep -q "$uuid" "$OUT/nvidia-smi-L.log"; then
    problems="$problems; $uuid is not a UUID nvidia-smi -L lists"
  fi
  if [ ! -e "$LEASES/local@$uuid.lock" ]; then
    problems="$problems; no lock file local@$uuid.lock in the lease folder"
  fi
  grep -q "GPUs leased: " "$OUT/lease-a.log" || problems="$problems; lease-a.log has no 'GPUs leased:' line"

  # A second run asking for that very GPU waits.
  workspace lease-b <<EOF
on: workflow_dispatch
jobs:
  hold:
    gpus: [$uuid]
    steps:
      - run: |
          echo "\$CUDA_VISIBLE_DEVICES" > "$WORK/cvd-b.tmp"
          mv "$WORK/cvd-b.tmp" "$WORK/cvd-b"
EOF
  (cd "$WORK/lease-b" && exec "$GPUFLOW_BIN" run w.yml --plain) >"$OUT/lease-b.log" 2>&1 &
  b_pid=$!
  PIDS+=("$b_pid")
  if ! wait_for 15 grep -q "^\[hold\] waiting for " "$OUT/lease-b.log"; then
    problems="$problems; the second run did not say it waits within 15 s (lease-b.log)"
  fi
  [ -e "$WORK/cvd-b" ] && problems="$problems; the second run got the GPU while the first held it"

  # SIGKILL the first runner: the kernel drops its lock, the second run gets the GPU.
  kill -KILL "$a_pid"
  wait "$a_pid" 2>/dev/null || true
  [ -n "$sleeper" ] && kill -KILL "$sleeper" 2>/dev/null || true
  if ! wait_for 20 test -s "$WORK/cvd-b"; then
    problems="$problems; the GPU was not freed for the waiting run within 20 s of SIGKILL"
    kill -KILL "$b_pid" 2>/dev/null || true
  fi
  wait "$b_pid" || b_status=$?
  local got_b
  got_b="$(tr -d '[:space:]' <"$WORK/cvd-b" 2>/dev/null || true)"
  [ "$got_b" = "$uuid" ] || problems="$problems; the waiting run got '$got_b', not $uuid"
  [ "$b_status" = 0 ] || problems="$problems; the waiting run exited $b_status"
  problems="${problems#; }"
  local values
  values="$(python3 -c 'import json,sys; print(json.dumps({"leased_uuid": sys.argv[1], "cuda_visible_devices_a": sys.argv[1], "cuda_visible_devices_b": sys.argv[2], "second_run_exit": int(sys.argv[3]), "stand_in": sys.argv[4] == "0"}))' "$uuid" "$got_b" "$b_status" "$GPU")"
  if [ -n "$problems" ]; then
    record leases fail "$problems" "$values"
  else
    record leases pass "gpus: 1 leased $uuid$([ "$GPU" = 1 ] || echo ' (stand-in)'), CUDA_VISIBLE_DEVICES reached the step, a second run waited, SIGKILL of the holder freed it" "$values"
  fi
}

# ---------------------------------------------------------------------------------------
# 3. benchmark against gpuflow-sim: telemetry and the before-timing checks
# ---------------------------------------------------------------------------------------
start_sim() {
  "$GPUFLOW_SIM_BIN" --host 127.0.0.1 --port 0 >"$OUT/sim.log" 2>&1 &
  SIM_PID=$!
  PIDS+=("$SIM_PID")
  wait_for 15 grep -q 'listening on http://127.0.0.1:' "$OUT/sim.log" || return 1
  SIM_URL="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$OUT/sim.log" | head -1)"
}

check_benchmark() {
  if ! start_sim; then
    record telemetry fail "gpuflow-sim did not start (sim.log)"
    record before-timing fail "gpuflow-sim did not start (sim.log)"
    return
  fi
  # The GPU's values before the run, from nvidia-smi or the stand-in file (via hosts --json).
  local state
  # The stand-in lease goes to GPU 0 of the file when all are free (best fit, lowest index).
  workspace bench <<EOF
on: workflow_dispatch
jobs:
  bench:
    gpus: 1
    steps:
      - run: echo "\$CUDA_VISIBLE_DEVICES" > "$WORK/cvd-bench"
      - id: main
        uses: benchmark
        with:
          target: $SIM_URL
          mode: concurrency
          concurrency: 4
          duration: 3s
          warmup: 1
          output-tokens: 32
      - { id: idle, uses: benchmark, continue-on-error: true, with: { target: $SIM_URL, mode: single-stream, requests: 1, warmup: 0, output-tokens: 4, gpu-telemetry: false, gpu-idle: true } }
      - { id: freemem-low, uses: benchmark, continue-on-error: true, with: { target: $SIM_URL, mode: single-stream, requests: 1, warmup: 0, output-tokens: 4, gpu-telemetry: false, gpu-min-free-memory: 1m } }
      - { id: freemem-high, uses: benchmark, continue-on-error: true, with: { target: $SIM_URL, mode: single-stream, requests: 1, warmup: 0, output-tokens: 4, gpu-telemetry: false, gpu-min-free-memory: 100000g } }
      - { id: persistence, uses: benchmark, continue-on-error: true, with: { target: $SIM_URL, mode: single-stream, requests: 1, warmup: 0, output-tokens: 4, gpu-telemetry: false, gpu-persistence-mode: true } }
      - { id: smclock-low, uses: benchmark, continue-on-error: true, with: { target: $SIM_URL, mode: single-stream, requests: 1, warmup: 0, output-tokens: 4, gpu-telemetry: false, gpu-min-sm-clock: 1% } }
      - { id: smclock-high, uses: benchmark, continue-on-error: true, with: { target: $SIM_URL, mode: single-stream, requests: 1, warmup: 0, output-tokens: 4, gpu-telemetry: false, gpu-min-sm-clock: 100% } }
EOF
  # nvidia-smi's values of every GPU just before the run (the lease picks one of them).
  local each states="{}"
  if [ "$GPU" = 1 ]; then
    for each in $(cut -d, -f2 "$OUT/nvidia-smi-query.csv" | tr -d ' '); do
      states="$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d[sys.argv[2]]=json.loads(sys.argv[3]); print(json.dumps(d))' "$states" "$each" "$(smi_state "$each")")"
    done
  fi
  local rc=0
  (cd "$WORK/bench" && exec timeout 60 "$GPUFLOW_BIN" run w.yml --plain) >"$OUT/bench.log" 2>&1 || rc=$?
  local uuid
  uuid="$(tr -d '[:space:]' <"$WORK/cvd-bench" 2>/dev/null || true)"
  state="$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1]).get(sys.argv[2], {})))' "$states" "$uuid")"
  (cd "$WORK/bench" && "$GPUFLOW_BIN" history output_throughput --json) >"$OUT/history.json" 2>&1 || true
  "$GPUFLOW_BIN" hosts --json >"$OUT/hosts-after-bench.json" 2>&1 || true
  local verdicts
  verdicts="$(python3 - "$OUT" "$WORK/bench" "$GPU" "$rc" "$uuid" "$state" <<'PY'
import glob, json, re, sqlite3, statistics, sys
out, ws, gpu, rc, uuid, state = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]), sys.argv[5], json.loads(sys.argv[6])
log = open(f"{out}/bench.log").read()
res = []

def step_outcome(step):
    m = re.search(rf"^\[bench\] {re.escape(step)}: (success|failure)", log, re.M)
    return m and m.group(1)

def step_says(step):
    return [l.split("gpuflow: ", 1)[1] for l in log.splitlines()
            if l.startswith(f"[bench] {step} | gpuflow: before timing")]

# gpuflow's `benchmark` step asks for the job's Docker engine even for a host target: on a
# machine without Docker it fails before it measures (docs/gpus.md, "Checking a new node").
no_engine = next((l for l in log.splitlines() if l.startswith("[bench] main | ")
                  and ("cannot reach the Docker engine" in l or "needs a Docker engine" in l)), None)
if no_engine:
    why = ("gpuflow's `benchmark` step needs a reachable Docker engine, even against a host "
           "target, and this machine has none: " + no_engine.split(" | ", 1)[1][:300])
    if gpu:
        res = [{"name": n, "status": "fail", "why": why, "values": {"run_exit": rc}}
               for n in ("telemetry", "before-timing")]
    else:
        res = [{"name": n, "status": "skipped", "why": "no GPU; and " + why, "values": {"run_exit": rc}}
               for n in ("telemetry", "before-timing")]
    print(json.dumps(res))
    sys.exit()

# --- telemetry ---
tel_values, problems = {"run_exit": rc, "uuid": uuid}, []
try:
    db = sqlite3.connect(f"{ws}/.gpuflow/results.db")
    row = db.execute("select id, info from results where step = 'main' order by id desc limit 1").fetchone()
except Exception as e:
    row = None
    problems.append(f"results store unreadable: {e}")
files = sorted(glob.glob(f"{ws}/.gpuflow/runs/*/bench/*main.result.json"))
tel_values["result_file"] = files[-1] if files else None
try:
    hist = json.load(open(f"{out}/history.json"))
    ids = [p["result"] for s in hist["series"] for p in s["points"] if p.get("step") == "main"]
    tel_values["history_results"] = ids
except Exception as e:
    ids = []
    problems.append(f"gpuflow history --json unreadable: {e}")
if row is None:
    problems.append("no stored result of the benchmark step")
    tel = None
else:
    if row[0] not in ids:
        problems.append(f"result {row[0]} not in gpuflow history --json")
    info = json.loads(row[1])
    tel = info.get("telemetry")
    tel_values["telemetry_status"] = tel and tel.get("status")
    tel_values["info_means"] = {k: info.get(k) for k in ("clocks", "power", "temperature")}
if not gpu:
    why = (tel or {}).get("reason") or "no telemetry recorded"
    res.append({"name": "telemetry", "status": "skipped",
                "why": f"no GPU (the stored result says: {why})", "values": tel_values})
elif tel is None:
    res.append({"name": "telemetry", "status": "fail", "why": "; ".join(problems), "values": tel_values})
elif tel.get("status") != "sampled":
    problems.append(f"telemetry {tel}")
    res.append({"name": "telemetry", "status": "fail", "why": "; ".join(problems), "values": tel_values})
else:
    tel_values["interval_ms"] = tel.get("interval_ms")
    tel_values["summary"] = tel.get("summary")
    if tel.get("interval_ms") != 100:
        problems.append(f"interval {tel.get('interval_ms')} ms, not 100")
    series = tel.get("series") or []
    if [s.get("uuid") for s in series] != [uuid]:
        problems.append(f"series of {[s.get('uuid') for s in series]}, not [{uuid}]")
    mem_total = state.get("memory_total_mib")
    hosts = json.load(open(f"{out}/hosts.json"))["hosts"][0]["inventory"]["gpus"]
    inv_mem = next((g["memory_mib"] for g in hosts if g["uuid"] == uuid), None)
    tel_values["memory_total_mib"] = {"gpuflow": inv_mem, "nvidia_smi": mem_total}
    if mem_total is None or inv_mem != int(mem_total):
        problems.append(f"memory total {inv_mem} MiB vs nvidia-smi {mem_total}")
    for s in series:
        n = len(s.get("samples", []))
        tel_values["samples"] = n
        if n < 20:
            problems.append(f"{n} samples over a 3 s measurement (expected about 30)")
        gaps = [b - a for a, b in zip(s["t_ms"], s["t_ms"][1:])]
        if gaps:
            tel_values["median_gap_ms"] = statistics.median(gaps)
            if not 80 <= statistics.median(gaps) <= 150:
                problems.append(f"median gap {statistics.median(gaps)} ms, not about 100")
        missing = {k for smp in s["samples"] for k, v in smp.items() if v is None}
        if missing:
            problems.append(f"samples without {sorted(missing)}")
        bad = []
        for smp in s["samples"]:
            if (smp.get("power_w") or 0) <= 0: bad.append(f"power {smp.get('power_w')} W")
            if not 0 <= (smp.get("utilization_pct") or 0) <= 100: bad.append(f"utilisation {smp.get('utilization_pct')}")
            if not 0 < (smp.get("sm_clock_mhz") or 0) < 5000: bad.append(f"SM clock {smp.get('sm_clock_mhz')}")
            if not 5 < (smp.get("temperature_c") or 0) < 110: bad.append(f"temperature {smp.get('temperature_c')}")
            if mem_total and not 0 <= (smp.get("memory_used_mib") or 0) <= mem_total: bad.append(f"memory used {smp.get('memory_used_mib')}")
        if bad:
            problems.append("implausible samples: " + ", ".join(sorted(set(bad))[:8]))
        tel_values["first_sample"] = s["samples"][0] if s["samples"] else None
    res.append({"name": "telemetry", "status": "fail" if problems else "pass",
                "why": "; ".join(problems) or f"{tel_values.get('samples')} samples every 100 ms with all five quantities, plausible, stored with result {row[0]}",
                "values": tel_values})

# --- before-timing checks ---
if gpu:
    st = state
    src = "nvidia-smi"
else:
    inv = json.load(open(f"{out}/hosts-after-bench.json"))["hosts"][0]["inventory"]["gpus"]
    g = next((g for g in inv if g["uuid"] == uuid), {})
    st = dict(g.get("state") or {})
    st["memory_total_mib"] = g.get("memory_mib")
    if st.get("memory_used_mib") is not None and g.get("memory_mib") is not None:
        st["memory_free_mib"] = g["memory_mib"] - st["memory_used_mib"]
    src = "the stand-in file"
def expect(ok):  # None: a value not reported cannot fail a check
    return "success" if ok in (None, True) else "failure"
free = st.get("memory_free_mib")
sm, smax = st.get("sm_clock_mhz"), st.get("max_sm_clock_mhz")
cases = {
    "idle": expect(None if st.get("processes") is None else st["processes"] == 0),
    "freemem-low": expect(None if free is None else free >= 1),
    "freemem-high": expect(None if free is None else free >= 100000 * 1024),
    "persistence": expect(st.get("persistence_mode")),
    "smclock-low": expect(None if not sm or not smax else sm >= 0.01 * smax),
    "smclock-high": expect(None if not sm or not smax else sm >= smax),
}
seen, problems = {}, []
for step, want in cases.items():
    got = step_outcome(step)
    seen[step] = {"expected": want, "gpuflow": got, "says": step_says(step)}
    if got != want:
        problems.append(f"{step}: gpuflow {got}, expected {want} from {src}")
    if not seen[step]["says"]:
        problems.append(f"{step}: no 'before timing' line")
res.append({"name": "before-timing", "status": "fail" if problems else "pass",
            "why": "; ".join(problems) or f"gpu-idle, gpu-min-free-memory, gpu-persistence-mode, gpu-min-sm-clock each judged as {src}'s values say ({'real GPU' if gpu else 'stand-in'})",
            "values": {"gpu_values": st, "steps": seen}})
print(json.dumps(res))
PY
)" || verdicts='[{"name":"telemetry","status":"fail","why":"could not read the results (python error)"},{"name":"before-timing","status":"fail","why":"could not read the results (python error)"}]'
  local i n
  n="$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$verdicts")"
  for ((i = 0; i < n; i++)); do
    record_json "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])[int(sys.argv[2])]["name"])' "$verdicts" "$i")" \
      "$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])[int(sys.argv[2])]))' "$verdicts" "$i")"
  done
}

# ---------------------------------------------------------------------------------------
# 4. a real GPU process makes gpu-idle fail
# ---------------------------------------------------------------------------------------
check_busy() {
  if [ "$GPU" != 1 ]; then
    record gpu-busy skipped "no GPU: $why_no_gpu"
    return
  fi
  local py="" lib
  for lib in torch cupy; do
    if timeout 30 python3 -c "import $lib" >/dev/null 2>&1; then
      py="$lib"
      break
    fi
  done
  if [ -z "$py" ]; then
    record gpu-busy skipped "no Python package with CUDA (torch, cupy) to start a GPU process with"
    return
  fi
  local uuid
  uuid="$(python3 -c 'import csv,sys; print(next(csv.reader(open(sys.argv[1])))[1].strip())' "$OUT/nvidia-smi-query.csv")"
  local prog
  if [ "$py" = torch ]; then
    prog='import torch,time; x=torch.ones(256*1024*1024, device="cuda"); torch.cuda.synchronize(); print("ready", flush=True); time.sleep(120)'
  else
    prog='import cupy,time; x=cupy.ones(256*1024*1024); cupy.cuda.Device().synchronize(); print("ready", flush=True); time.sleep(120)'
  fi
  CUDA_VISIBLE_DEVICES="$uuid" python3 -c "$prog" >"$OUT/busy-process.log" 2>&1 &
  local busy=$!
  PIDS+=("$busy")
  if ! wait_for 30 grep -q ready "$OUT/busy-process.log"; then
    record gpu-busy fail "the $py process did not get the GPU within 30 s (busy-process.log)"
    return
  fi
  local apps
  apps="$(nvidia-smi --id="$uuid" --query-compute-apps=pid,used_memory --format=csv,noheader 2>&1 || true)"
  if [ -z "${SIM_URL:-}" ] && ! start_sim; then
    kill -KILL "$busy" 2>/dev/null || true
    record gpu-busy fail "gpuflow-sim did not start (sim.log)"
    return
  fi
  workspace busy <<EOF
on: workflow_dispatch
jobs:
  bench:
    gpus: [$uuid]
    steps:
      - { id: idle, uses: benchmark, with: { target: $SIM_URL, mode: single-stream, requests: 1, warmup: 0, output-tokens: 4, gpu-telemetry: false, gpu-idle: true } }
EOF
  local rc=0
  (cd "$WORK/busy" && exec timeout 45 "$GPUFLOW_BIN" run w.yml --plain) >"$OUT/busy.log" 2>&1 || rc=$?
  kill -KILL "$busy" 2>/dev/null || true
  local line
  line="$(grep -m1 'before timing' "$OUT/busy.log" || true)"
  local values
  values="$(python3 -c 'import json,sys; print(json.dumps({"package": sys.argv[1], "compute_apps": sys.argv[2], "gpuflow_says": sys.argv[3], "run_exit": int(sys.argv[4])}))' "$py" "$apps" "$line" "$rc")"
  if [ "$rc" != 0 ] && grep -q "is not idle" "$OUT/busy.log"; then
    record gpu-busy pass "with a $py process on the GPU, gpu-idle failed the step: $line" "$values"
  elif grep -q -e 'cannot reach the Docker engine' -e 'needs a Docker engine' "$OUT/busy.log"; then
    record gpu-busy fail "gpuflow's benchmark step needs a reachable Docker engine, even against a host target, and this machine has none (busy.log)" "$values"
  else
    record gpu-busy fail "gpu-idle did not see the $py process (busy.log): ${line:-no before-timing line}" "$values"
  fi
}

# ---------------------------------------------------------------------------------------
# 5. Docker: a container gets the leased GPU by UUID
# ---------------------------------------------------------------------------------------
check_docker() {
  if [ "$GPU" != 1 ]; then
    record docker-gpu skipped "no GPU: $why_no_gpu"
    return
  fi
  if ! command -v docker >/dev/null 2>&1; then
    record docker-gpu skipped "no docker command on this machine"
    return
  fi
  if ! timeout 20 docker info >"$OUT/docker-info.log" 2>&1; then
    record docker-gpu skipped "docker info fails: $(head -c 300 "$OUT/docker-info.log")"
    return
  fi
  if ! grep -qi 'runtimes:.*nvidia' "$OUT/docker-info.log"; then
    record docker-gpu skipped "docker info shows no nvidia runtime: $(grep -i 'runtimes:' "$OUT/docker-info.log" | head -1)"
    return
  fi
  local image="${GPU_CHECK_IMAGE:-ubuntu:24.04}"
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    record docker-gpu skipped "image $image is not on this machine (set GPU_CHECK_IMAGE to one that is)"
    return
  fi
  workspace docker <<EOF
on: workflow_dispatch
jobs:
  ctr:
    gpus: 1
    container: $image
    steps:
      - run: nvidia-smi -L > /tmp/gpus.txt && cat /tmp/gpus.txt && sleep 4
EOF
  local rc=0 run_pid
  (cd "$WORK/docker" && exec timeout 60 "$GPUFLOW_BIN" run w.yml --plain) >"$OUT/docker.log" 2>&1 &
  run_pid=$!
  PIDS+=("$run_pid")
  local run_id="" ctr=""
  wait_for 20 grep -q '^run [0-9]' "$OUT/docker.log" || true
  run_id="$(sed -n 's/^run \([0-9a-f-]*\) of .*/\1/p' "$OUT/docker.log" | head -1)"
  wait_for 30 sh -c "docker ps -q --filter label=dev.gpuflow.run-id=$run_id | grep -q ." || true
  ctr="$(docker ps -q --filter "label=dev.gpuflow.run-id=$run_id" | head -1)"
  local requests=""
  [ -n "$ctr" ] && requests="$(docker inspect --format '{{json .HostConfig.DeviceRequests}}' "$ctr" 2>&1 || true)"
  wait "$run_pid" || rc=$?
  local listed leased
  listed="$(grep -o 'GPU [0-9]*: .*(UUID: GPU-[0-9a-f-]*)' "$OUT/docker.log" || true)"
  leased="$(sed -n 's/.*GPUs leased: .*\(GPU-[0-9a-f-]*\).*/\1/p' "$OUT/docker.log" | head -1)"
  local values
  values="$(python3 -c 'import json,sys; print(json.dumps({"image": sys.argv[1], "device_requests": sys.argv[2], "nvidia_smi_L_inside": sys.argv[3].splitlines(), "run_exit": int(sys.argv[4])}))' "$image" "$requests" "$listed" "$rc")"
  local n_listed uuid_inside
  n_listed="$(printf '%s\n' "$listed" | grep -c 'UUID' || true)"
  uuid_inside="$(printf '%s\n' "$listed" | grep -o 'GPU-[0-9a-f-]*' | head -1)"
  if [ "$rc" = 0 ] && [ "$n_listed" = 1 ] && [ -n "$uuid_inside" ] && printf '%s' "$requests" | grep -q "$uuid_inside"; then
    record docker-gpu pass "the container's DeviceRequests name $uuid_inside and nvidia-smi -L inside lists exactly it" "$values"
  else
    record docker-gpu fail "run exit $rc; nvidia-smi -L inside listed $n_listed GPU(s); DeviceRequests: ${requests:-none seen}; leased: ${leased:-?}" "$values"
  fi
}

check_hosts
check_leases
check_benchmark
check_busy
check_docker

elapsed=$(($(date +%s) - started_s))
python3 - "$CHECKS" "$OUT/summary.json" "$GPU" "$why_no_gpu" "$elapsed" "$GPUFLOW_BIN" "$STAND_IN" <<'PY'
import json, platform, sys
checks_path, out, gpu, why, elapsed, bin_, stand_in = sys.argv[1:8]
checks = [json.loads(l) for l in open(checks_path) if l.strip()]
summary = {
    "gpu": gpu == "1",
    "no_gpu_reason": None if gpu == "1" else why,
    "inventory": "nvml" if gpu == "1" else f"stand-in: {stand_in} (not real GPUs)",
    "host": platform.node(),
    "gpuflow": bin_,
    "elapsed_s": int(elapsed),
    "checks": checks,
    "failed": [c["name"] for c in checks if c["status"] == "fail"],
}
json.dump(summary, open(out, "w"), indent=2)
PY
say "summary: $OUT/summary.json ($elapsed s)"
python3 - "$OUT/summary.json" >&2 <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))
for c in s["checks"]:
    print("  %-8s %s: %s" % (c["status"], c["name"], c["why"]))
sys.exit(1 if s["failed"] else 0)
PY
if [ "$GPU" != 1 ]; then
  say "NO GPU on this machine: only the stand-in checks ran; GPU-only checks were skipped"
fi
