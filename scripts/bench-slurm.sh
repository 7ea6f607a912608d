#!/usr/bin/env bash
# Wall time of `kiln tune --slurm` against a local `kiln tune` with the same budget (a benchmark,
# not a test). Starts a one-node Slurm cluster of its own on loopback (munged with its own key and
# socket, slurmctld, slurmd; everything in a temporary folder, stopped on exit), then times both
# ways in alternating order for several rounds, each run with a fresh store and records file, and
# prints every wall time, the medians and their ratio. Run it on a quiet machine.
#
# Usage: scripts/bench-slurm.sh [--model PATH] [--trials N] [--rounds N] [--array-size N] [--kiln PATH]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$root/build/models/resnet18.pt
trials=3
rounds=3
array=2
kiln=$root/build/app/kiln
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --array-size) array=$2; shift 2 ;;
    --kiln) kiln=$2; shift 2 ;;
    *) echo "error: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
for p in munged slurmctld slurmd sbatch sinfo scancel; do
  command -v $p >/dev/null || { echo "error: $p is not installed (scripts/install-deps.sh installs slurm-wlm and munge)" >&2; exit 6; }
done
[ -f "$model" ] || { echo "error: $model: no such model" >&2; exit 2; }

dir=$(mktemp -d /tmp/kiln_bench_slurm.XXXXXX)
chmod 755 "$dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/work"
chmod 777 "$dir/work"
pids=()
stop_cluster() {
  scancel --user="$(id -un)" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap stop_cluster EXIT

# munged refuses a key that others can read.
head -c 1024 /dev/urandom >"$dir/munge.key"
chmod 400 "$dir/munge.key"
munged --foreground --key-file="$dir/munge.key" --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
  --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" >"$dir/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$dir/munge.sock" ] && break; sleep 0.2; done

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
host=$(hostname -s)
cat >"$dir/slurm.conf" <<EOF
ClusterName=kilnbench
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >"$dir/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$dir/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 300); do sinfo --noheader --format=%T 2>/dev/null | grep -q idle && break; sleep 0.2; done
sinfo --noheader --format=%T | grep -q idle || { echo "error: the Slurm node did not become idle: $(cat "$dir"/slurmd.out)" >&2; exit 6; }

common=(--tuner random --trials "$trials" --threads 1 --no-compare --seed 1)
# One timed run: WAY (local|slurm), round R. Prints the wall time in seconds.
timed() {
  local way=$1 r=$2 run=$dir/work/$1-$2 extra=()
  mkdir -p "$run"
  chmod 777 "$run"
  [ "$way" = slurm ] && extra=(--slurm --array-size "$array" --slurm-dir "$run/slurm")
  local start end
  start=$(date +%s.%N)
  "$kiln" tune "$model" "${common[@]}" "${extra[@]}" --records "$run/records.jsonl" --db "$run/store.db" \
    >"$run/out.txt" 2>&1 || { echo "error: $way run $r failed: $(tail -n 1 "$run/out.txt")" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$start $end" | awk '{printf "%.1f", $2 - $1}'
}

local_s=()
slurm_s=()
for r in $(seq "$rounds"); do
  # Alternate which way goes first, so a drift of the shared machine falls on both alike.
  if [ $((r % 2)) -eq 1 ]; then
    l=$(timed local "$r"); s=$(timed slurm "$r")
  else
    s=$(timed slurm "$r"); l=$(timed local "$r")
  fi
  n=$(grep -c . "$dir/work/slurm-$r/records.jsonl" || true)
  m=$(grep -c . "$dir/work/local-$r/records.jsonl" || true)
  echo "round $r: local ${l} s ($m records), slurm (array of $array) ${s} s ($n records)"
  local_s+=("$l")
  slurm_s+=("$s")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
ml=$(median "${local_s[@]}")
ms=$(median "${slurm_s[@]}")
echo "$(basename "$model"), --trials $trials --tuner random --threads 1, $rounds rounds, one node of $(nproc) CPUs:"
echo "median wall time: local $ml s, slurm $ms s, slurm/local $(awk -v a="$ms" -v b="$ml" 'BEGIN {printf "%.2f", a / b}')"
