#!/usr/bin/env bash
# Installs Debian's Slurm (slurm-wlm: slurmctld, slurmd and the client commands) and munge
# for the Slurm suite (tests/slurm) and scripts/slurm/start.sh.
#
# Idempotent: when every command is already there it says so and does nothing else. It
# only installs packages; it starts nothing (scripts/slurm/start.sh starts the daemons).
# Debian 12 ships Slurm 22.05.8; see the README for what that means for GPU requests.
set -euo pipefail

say() { echo "install.sh: $*" >&2; }
# The daemons live in /usr/sbin, which a non-root PATH may lack.
PATH=$PATH:/usr/sbin

need=(slurmctld slurmd sbatch srun squeue sinfo scancel sacct munged munge)
missing=()
for cmd in "${need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
done
if [ ${#missing[@]} -eq 0 ]; then
  say "Slurm $(slurmctld -V | awk '{print $2}') and munge are installed"
  exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  say "missing ${missing[*]}; installing them needs root and apt-get (Debian's slurm-wlm, munge)"
  exit 1
fi

say "installing Debian's slurm-wlm and munge (missing: ${missing[*]})"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends: the daemons and clients only, not the docs or the mail tools.
apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
say "installed Slurm $(slurmctld -V | awk '{print $2}')"
