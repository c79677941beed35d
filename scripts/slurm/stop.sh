#!/usr/bin/env bash
# Stop the daemons scripts/slurm/start.sh started, by their PID files, the newest first; the state (queue, accounting
# database) stays in $ADLNMT_SLURM_STATE for the next start.
set -euo pipefail

STATE=${ADLNMT_SLURM_STATE:-/var/tmp/adlnmt-slurm}
for daemon in slurmd slurmctld slurmdbd mariadb/mariadbd munge/munged; do
  file="$STATE/$daemon.pid"
  [ -s "$file" ] || continue
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "slurm: stopped $daemon ($pid)"
  fi
  rm -f "$file"
done
