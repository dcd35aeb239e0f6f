#!/usr/bin/env bash
# test-slurm.sh - `changelens-cli batch describe` on a real Slurm: the test starts munged,
# slurmctld and slurmd for this machine alone (ports on 127.0.0.1, every file in a temporary
# folder), submits a job array of 4 tasks over a manifest of 200 pairs that share out the lines
# by Slurm's array variables, cancels one task in the middle and re-queues it, and checks that
# every pair was described exactly once and nothing was lost; then stops the daemons. Skipped
# (77) without Slurm and munge (Debian: slurm-wlm, munge) or when not run as root (slurmd
# launches the tasks).
set -euo pipefail
CLI=${CL_CLI:?CL_CLI: the changelens-cli to test}
for p in munged slurmctld slurmd sbatch squeue scontrol scancel python3; do
  command -v "$p" >/dev/null || { echo "1..0 # SKIP $p not found (Debian: slurm-wlm, munge)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "1..0 # SKIP slurmd needs root to start the tasks"; exit 77; }

T=$(mktemp -d /tmp/changelens-slurm-XXXXXX)
stop() {
  for d in slurmd slurmctld munged; do
    [ -f "$T/$d.pid" ] && kill "$(cat "$T/$d.pid")" 2>/dev/null || true
  done
  sleep 1
  for d in slurmd slurmctld munged; do
    [ -f "$T/$d.pid" ] && kill -9 "$(cat "$T/$d.pid")" 2>/dev/null || true
  done
  rm -rf "$T"
}
trap stop EXIT
fail() { echo "not ok - $*"; for f in "$T"/*.log "$T"/task-*.txt; do [ -f "$f" ] && { echo "# --- $f"; tail -20 "$f" | sed 's/^/# /'; }; done; exit 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # wait_for SECONDS WHAT COMMAND…
  local until=$((SECONDS + $1)) what=$2; shift 2
  until "$@"; do [ $SECONDS -lt $until ] || fail "timed out waiting for $what"; sleep 1; done
}

# ---- munge, then a one-node Slurm ----
head -c 1024 /dev/urandom >"$T/munge.key"
chmod 400 "$T/munge.key"
munged --force --socket="$T/munge.sock" --key-file="$T/munge.key" --pid-file="$T/munged.pid" \
  --log-file="$T/munged.log" --seed-file="$T/munge.seed" || fail "munged did not start"
host=$(hostname -s)
mkdir -p "$T/state" "$T/spool"
cat >"$T/slurm.conf" <<EOF
ClusterName=changelens-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$T/munge.sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" || fail "slurmd did not start"
node_idle() { sinfo -h -o %t 2>/dev/null | grep -q idle; }
wait_for 60 "the node to be idle" node_idle
echo "# Slurm up: $(sinfo -h -o '%P %D %t %N')"

# ---- 200 pairs, a job array of 4 ----
"$CLI" synth --task edits --n 200 --seed 21 --out "$T/set" >/dev/null
mv "$T/set/data.jsonl" "$T/set/pairs.jsonl"
db="$T/cases.db"
cat >"$T/describe.sh" <<EOF
#!/bin/bash
exec "$CLI" batch --db "$db" describe "$T/set/pairs.jsonl" --device cpu
EOF
chmod +x "$T/describe.sh"
job=$(sbatch --parsable --array=0-3 --open-mode=append --output="$T/task-%a.txt" \
  --chdir="$T" "$T/describe.sh") || fail "sbatch refused the array"
echo "# submitted job array $job (4 tasks)"

# task 2 (shard 3/4) is cancelled once it has described a pair, then re-queued
progressed() { grep -q "shard 3/4: .* described now" "$T/task-2.txt" 2>/dev/null; }
wait_for 300 "task 2's first description" progressed
scancel "${job}_2"
gone() { ! squeue -h -j "${job}_2" -t RUNNING 2>/dev/null | grep -q .; }
wait_for 60 "task 2 to stop" gone
mid=$("$CLI" batch --db "$db" status "$T/set/pairs.jsonl")
echo "# task 2 cancelled: $mid"
scontrol requeue "${job}_2" || fail "scontrol requeue refused task 2"
scontrol update JobId="${job}_2" StartTime=now >/dev/null 2>&1 || true # no requeue delay
finished() { ! squeue -h -j "$job" 2>/dev/null | grep -q .; }
wait_for 900 "the job array to finish" finished

# ---- every pair described once, nothing lost ----
status=$("$CLI" batch --db "$db" status "$T/set/pairs.jsonl" --json |
  python3 -c 'import json, sys; s = json.load(sys.stdin); print(s["lines"], s["described"], s["made_not_described"], s["not_started"])')
echo "# lines, described, made but not described, not started: $status"
[ "$status" = "200 200 0 0" ] || fail "not every pair was described: $status"
counts=$(python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(*c.execute(
  "SELECT count(*), count(DISTINCT case_id), (SELECT count(*) FROM cases) FROM runs").fetchone())' "$db")
[ "$counts" = "200 200 200" ] || fail "runs, cases described, cases: $counts (want 200 200 200)"
grep -q "batch pairs shard 3/4: 50 lines, [0-9]* described now, [1-9][0-9]* described before, 0 failed" \
  "$T/task-2.txt" || fail "the re-queued task did not skip what it had recorded"
for a in 0 1 3; do
  grep -q "batch pairs shard $((a + 1))/4: 50 lines, 50 described now, 0 described before, 0 failed" \
    "$T/task-$a.txt" || fail "task $a did not describe its 50 pairs"
done
echo "# $(grep -h '^batch pairs' "$T"/task-*.txt | tr '\n' ';')"
echo "ok - 200 pairs over a job array of 4, one task cancelled and re-queued: each described once"
