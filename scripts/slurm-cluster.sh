#!/usr/bin/env bash
# The Slurm cluster the Slurm tests and `make bench` run against: Debian's slurmctld, slurmd
# and munge on this one machine, with NODES emulated nodes (one slurmd each, `slurmd -N gpuN`
# on its own port) of GPUS stand-in GPUs each. A stand-in GPU is a character device with
# /dev/null's numbers, which Slurm's gres/gpu plugin accepts: jobs get real GRES allocations
# (CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS) without a GPU in the machine.
#
#   scripts/slurm-cluster.sh up       install (as root) if needed, configure, start, wait until idle;
#                                     also makes the user `gpuflow-peer`, a second user of the
#                                     cluster for runner/tests/slurm.rs (no home, no login shell)
#   scripts/slurm-cluster.sh check    exit 0 when the cluster answers with every node usable
#   scripts/slurm-cluster.sh status   daemons and nodes
#   scripts/slurm-cluster.sh down     stop the daemons
#
# `up` is idempotent: a running cluster with the same configuration is left as it is.
# Needs root (the daemons run as root, no systemd, no cgroups); loopback only.
set -euo pipefail

NODES=${GPUFLOW_SLURM_NODES:-3}
GPUS=${GPUFLOW_SLURM_GPUS:-8}
CONF_DIR=/etc/slurm
STATE=/var/spool/gpuflow-slurm
LOGS=/var/log/gpuflow-slurm
PIDS=/run/gpuflow-slurm
DEVICES=/run/gpuflow-stand-in-gpus
BASE_PORT=17001
PEER=gpuflow-peer
export SLURM_CONF=$CONF_DIR/slurm.conf

say() { printf 'slurm-cluster: %s\n' "$*" >&2; }

# A pid file's process is alive (and not a zombie).
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] && ! awk '{exit $3 != "Z"}' "/proc/$pid/stat"
}

stop() {
  local file=$1 pid
  if alive "$file"; then
    pid=$(cat "$file")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$file" || break; sleep 0.1; done
    if alive "$file"; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$file"
}

install_packages() {
  dpkg -s slurmctld slurmd slurm-client munge >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || { say "error: slurmctld, slurmd, slurm-client and munge are missing; as root: apt-get install slurmctld slurmd slurm-client munge"; exit 1; }
  say "installing slurmctld slurmd slurm-client munge"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null \
    || { apt-get update -q >/dev/null \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null; }
}

start_munge() {
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --force 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 755 /run/munge
  alive /run/munge/munged.pid || runuser -u munge -- /usr/sbin/munged --force
  for _ in $(seq 50); do
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  say "error: munged does not answer (see /var/log/munge/munged.log)"
  exit 1
}

slurm_conf() {
  local host
  host=$(hostname -s)
  cat <<EOF
# Written by gpuflow's scripts/slurm-cluster.sh: $NODES emulated nodes of $GPUS stand-in GPUs.
ClusterName=gpuflow-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/%n
SlurmctldPidFile=$PIDS/slurmctld.pid
SlurmdPidFile=$PIDS/slurmd-%n.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol for 10 minutes: the coordinator reads their end.
MinJobAge=600
# A job past its --time is ended within a few seconds rather than the default 30.
OverTimeLimit=0
KillWait=2
SchedulerParameters=sched_interval=2
GresTypes=gpu
NodeName=gpu[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$BASE_PORT-$((BASE_PORT + NODES - 1))] CPUs=16 RealMemory=16000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

gres_conf() {
  cat <<EOF
# Written by gpuflow's scripts/slurm-cluster.sh: stand-in GPU devices (/dev/null's numbers).
AutoDetect=off
NodeName=gpu[1-$NODES] Name=gpu File=$DEVICES/nvidia[0-$((GPUS - 1))]
EOF
}

usable_nodes() {
  sinfo -h -N -t idle,mix,alloc -o %N 2>/dev/null | sort -u | wc -l
}

up() {
  local started=$SECONDS reconfigured=0
  install_packages
  [ "$(id -u)" = 0 ] || { check && return 0; say "error: the cluster is not running and only root can start it: sudo $0 up"; exit 1; }
  start_munge
  id -u "$PEER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PEER"
  mkdir -p "$DEVICES" "$CONF_DIR" "$STATE/ctld" "$LOGS" "$PIDS"
  for i in $(seq 0 $((GPUS - 1))); do
    [ -c "$DEVICES/nvidia$i" ] || mknod -m 666 "$DEVICES/nvidia$i" c 1 3
  done
  if ! cmp -s <(slurm_conf) "$CONF_DIR/slurm.conf" || ! cmp -s <(gres_conf) "$CONF_DIR/gres.conf"; then
    down_daemons
    rm -rf "${STATE:?}"/*
    mkdir -p "$STATE/ctld"
    slurm_conf >"$CONF_DIR/slurm.conf"
    gres_conf >"$CONF_DIR/gres.conf"
    reconfigured=1
  fi
  # -c: a clean controller state, so a node shows idle only once its slurmd registered.
  alive "$PIDS/slurmctld.pid" || slurmctld -c -i
  for i in $(seq "$NODES"); do
    mkdir -p "$STATE/gpu$i"
    alive "$PIDS/slurmd-gpu$i.pid" || slurmd -N "gpu$i"
  done
  for _ in $(seq 300); do
    [ "$(usable_nodes)" -ge "$NODES" ] && break
    # A node that registered drained or invalid (after a configuration change) is resumed.
    local bad
    bad=$(sinfo -h -N -t drain,inval -o %N 2>/dev/null | sort -u | paste -sd, || true)
    [ -z "$bad" ] || scontrol update nodename="$bad" state=resume 2>/dev/null || true
    sleep 0.2
  done
  if [ "$(usable_nodes)" -lt "$NODES" ]; then
    sinfo -N >&2 || true
    say "error: only $(usable_nodes) of $NODES nodes came up; see $LOGS"
    exit 1
  fi
  say "up: $NODES nodes × $GPUS stand-in GPUs (partition gpu) in $((SECONDS - started)) s$([ $reconfigured = 1 ] && echo ', configuration written to /etc/slurm')"
}

check() {
  [ -f "$SLURM_CONF" ] && [ "$(usable_nodes)" -ge "$NODES" ]
}

down_daemons() {
  local file
  for file in "$PIDS"/slurmd-*.pid; do [ -e "$file" ] && stop "$file"; done
  stop "$PIDS/slurmctld.pid"
}

case "${1:-up}" in
  up) up ;;
  check) check ;;
  status)
    for file in /run/munge/munged.pid "$PIDS"/*.pid; do
      [ -e "$file" ] || continue
      if alive "$file"; then echo "$(basename "$file" .pid): running"; else echo "$(basename "$file" .pid): dead"; fi
    done
    sinfo -N -o '%N %t %G' 2>/dev/null || true
    squeue 2>/dev/null || true
    ;;
  down) down_daemons; stop /run/munge/munged.pid; say "stopped" ;;
  *) echo "usage: $0 up|check|status|down" >&2; exit 2 ;;
esac
