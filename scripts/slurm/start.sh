#!/usr/bin/env bash
# Starts a single-machine Slurm cluster on loopback, with everything under DIR.
#
#   scripts/slurm/start.sh DIR     (then: export SLURM_CONF=DIR/slurm.conf)
#   scripts/slurm/stop.sh DIR
#
# It writes a fresh munge key, slurm.conf and cgroup.conf into DIR, starts munged,
# slurmctld and slurmd as background processes (no systemd), waits until sinfo shows the
# node idle, and prints the environment to use. One node, NodeAddr 127.0.0.1, with
# PYDET_SLURM_CPUS artificial CPU "slots" (default 4, whatever the machine has), in one
# partition `pydet`. Ports are free ones picked on 127.0.0.1. No accounting daemon: how a
# job ended is in `scontrol show job` / `squeue -t all` for MinJobAge seconds and, for good,
# in DIR/log/jobcomp.txt (JobCompType=jobcomp/filetxt). Needs root (the daemons run as it).
set -euo pipefail

say() { echo "start.sh: $*" >&2; }

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
CPUS=${PYDET_SLURM_CPUS:-4}
WAIT=${PYDET_SLURM_WAIT:-60}
NODE=${PYDET_SLURM_NODE:-pydet1}
export SLURM_CONF=$DIR/slurm.conf

if [ "$(id -u)" != 0 ]; then
  say "the Slurm daemons run as root here; run this script as root"
  exit 1
fi
PATH=$PATH:/usr/sbin
for cmd in munged slurmctld slurmd sinfo; do
  command -v "$cmd" >/dev/null 2>&1 || { say "$cmd is missing: run scripts/slurm/install.sh"; exit 1; }
done
if [ -f "$DIR/run/slurmctld.pid" ] && kill -0 "$(cat "$DIR/run/slurmctld.pid")" 2>/dev/null; then
  say "a cluster already runs in $DIR; stop it first (scripts/slurm/stop.sh $DIR)"
  exit 1
fi

# munged refuses directories that others may write to, and a key others may read.
umask 022
mkdir -p "$DIR"/{munge,run,state,spool,log}
chmod 700 "$DIR/munge"
if [ ! -s "$DIR/munge/munge.key" ]; then
  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$DIR/munge/munge.key"
SOCK=$DIR/munge/munge.socket.2

# Two free TCP ports on loopback (the kernel picks them; a race with another process that
# grabs one before slurmctld does is possible but unlikely, and shows as a start failure).
read -r CTLD_PORT SLURMD_PORT < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)

# slurmctld insists on running on the host named first in SlurmctldHost (`hostname -s`);
# the address in parentheses is what everything connects to.
HOST=$(hostname -s)
# Slurm's daemons and srun listen on every address unless NoInAddrAny/NoCtldInAddrAny make
# them bind to the address gethostname() resolves to. Where that is a loopback address
# (as in pydet's CI and containers) use them, so nothing listens beyond loopback; elsewhere
# they would bind to a non-loopback address, so keep the default. Either way every
# connection goes to 127.0.0.1 (SlurmctldHost's and NodeAddr's address).
COMM=""
case "$(getent ahostsv4 "$(hostname)" 2>/dev/null | awk 'NR == 1 {print $1}')" in
  127.*) COMM="CommunicationParameters=NoInAddrAny,NoCtldInAddrAny" ;;
  *) say "$(hostname) does not resolve to a loopback address: the daemons listen on all addresses (connections stay on 127.0.0.1)" ;;
esac
cat > "$DIR/slurm.conf" <<CONF
# Written by scripts/slurm/start.sh: a one-node Slurm cluster on loopback for pydet's tests.
ClusterName=pydet
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
$COMM
# No cgroups: processes are tracked by their parentage, and nothing binds them to CPUs.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node's CPUs are artificial slots: trust this file, not the hardware.
SlurmdParameters=config_overrides
ReturnToService=2
# No slurmdbd: sacct has nothing to read. Finished jobs stay visible to squeue/scontrol
# for MinJobAge seconds, and every job's end is appended to the jobcomp file.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=60
SlurmdTimeout=60
NodeName=$NODE NodeHostname=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=1024 State=UNKNOWN
PartitionName=pydet Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
cat > "$DIR/cgroup.conf" <<CONF
# Written by scripts/slurm/start.sh. slurm.conf uses no cgroup plugin (proctrack/linuxproc,
# task/none); this file only keeps slurmd from mounting cgroups should one be loaded.
CgroupAutomount=no
CONF

say "starting munged, slurmctld and slurmd (Slurm $(slurmctld -V | awk '{print $2}'), $CPUS CPUs, ports $CTLD_PORT/$SLURMD_PORT, logs in $DIR/log)"
munged --key-file="$DIR/munge/munge.key" --socket="$SOCK" \
  --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
  --seed-file="$DIR/munge/munged.seed" --force
# -D: stay in the foreground, as a background job of this script; -i: ignore any state an
# earlier run left in DIR/state.
setsid nohup slurmctld -D -i -f "$SLURM_CONF" >>"$DIR/log/slurmctld.out" 2>&1 </dev/null &
setsid nohup slurmd -D -N "$NODE" -f "$SLURM_CONF" >>"$DIR/log/slurmd.out" 2>&1 </dev/null &

state=""
for _ in $(seq "$((WAIT * 2))"); do
  state=$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null || true)
  case "$state" in
    idle) break ;;
  esac
  sleep 0.5
done
if [ "$state" != idle ]; then
  say "node $NODE is not idle after ${WAIT}s (sinfo says '${state:-nothing}'); last log lines:"
  tail -n 15 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" "$DIR/log/munged.log" >&2 || true
  exit 1
fi
say "node $NODE is idle"
echo "export SLURM_CONF=$SLURM_CONF"
