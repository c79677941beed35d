#!/usr/bin/env bash
# A single-node SLURM on this machine, for the `slurm` tests and for trying `adlnmt experiment --executor slurm`:
# munge, MariaDB, slurmdbd (job accounting: sacct), slurmctld and slurmd for one node named after `hostname`,
# one partition `debug`. Installs Debian's packages when they are missing (root and apt-get needed) and starts the
# daemons by hand (no systemd needed). Idempotent: what already runs is left alone. scripts/slurm/stop.sh stops what
# this script started (by the PID files in $ADLNMT_SLURM_STATE).
#
# Exit status 0: the cluster is up (`sinfo` shows the node idle or allocated, `sacct` answers);
# 77: it cannot be started here (the reason on stderr); anything else: it failed to start (see the daemons' logs).
set -euo pipefail

STATE=${ADLNMT_SLURM_STATE:-/var/tmp/adlnmt-slurm}
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
MARK="# written by adlnmt scripts/slurm/start.sh"
CLUSTER=adlnmt
NODE=$(hostname -s)

cannot() { echo "single-node SLURM cannot be started here: $*" >&2; exit 77; }
alive() { [ -s "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }  # a PID file in $STATE
wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  local seconds=$1 what=$2; shift 2
  for _ in $(seq $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "start.sh: $what did not come up within ${seconds}s; logs in $STATE" >&2; exit 1
}
cluster_up() { sinfo -h -n "$NODE" -o %T 2>/dev/null | grep -Eq '^(idle|mixed|allocated|completing)' \
  && sacct -n -X -S now >/dev/null 2>&1; }

if command -v sinfo >/dev/null && cluster_up; then echo "slurm: already up (node $NODE)"; exit 0; fi
[ "$(id -u)" = 0 ] || cannot "not root (the daemons and the packages need root; or start a SLURM yourself)"

packages=()
command -v slurmctld >/dev/null || packages+=(slurm-wlm)
command -v slurmdbd >/dev/null || packages+=(slurmdbd)
command -v munged >/dev/null || packages+=(munge)
command -v mariadbd >/dev/null || packages+=(mariadb-server)
if [ ${#packages[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || cannot "${packages[*]} missing and no apt-get to install them"
  echo "slurm: installing ${packages[*]}"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}"; } >"/tmp/adlnmt-slurm-apt.log" 2>&1 \
    || cannot "apt-get could not install ${packages[*]} (its output: /tmp/adlnmt-slurm-apt.log)"
fi
for file in "$CONF" "$DBD_CONF"; do
  if [ -e "$file" ] && ! grep -qF "$MARK" "$file"; then cannot "$file exists and was not written by this script"; fi
done
mkdir -p "$STATE"/{ctld,spool,munge,mariadb} /run/munge /run/mysqld
chown munge:munge /run/munge "$STATE/munge"
chown mysql:mysql "$STATE/mariadb" /run/mysqld

# munge: the key comes with the package
[ -s /etc/munge/munge.key ] || { mungekey --create >/dev/null 2>&1 || create-munge-key -f >/dev/null; }
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
if ! alive munge/munged; then
  runuser -u munge -- /usr/sbin/munged --pid-file="$STATE/munge/munged.pid" --force
  wait_for 10 munged munge -n
fi

# MariaDB, in its own data directory, for slurmdbd
DB=$STATE/mariadb  # data, PID file and log, owned by mysql; the socket where slurmdbd 22.05 looks for it
SOCKET=/run/mysqld/mysqld.sock
if ! alive mariadb/mariadbd; then
  [ -d "$DB/data/mysql" ] || mariadb-install-db --user=mysql --datadir="$DB/data" >"$DB/install.log" 2>&1
  runuser -u mysql -- /usr/sbin/mariadbd --datadir="$DB/data" --socket="$SOCKET" --pid-file="$DB/mariadbd.pid" \
    --skip-networking --log-error="$DB/mariadb.log" </dev/null >>"$DB/mariadb.log" 2>&1 &
  wait_for 30 MariaDB mariadb --socket="$SOCKET" -e 'SELECT 1'
  mariadb --socket="$SOCKET" -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
fi

cat >"$DBD_CONF" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=slurm
EOF
chmod 600 "$DBD_CONF"

# the node as slurmd sees it (CPUs, memory), less the uptime line
node_line=$(slurmd -C | head -1)
cat >"$CONF" <<EOF
$MARK
ClusterName=$CLUSTER
SlurmctldHost=$NODE
SlurmUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerParameters=batch_sched_delay=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
KillWait=5
MailProg=/bin/true
$node_line State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

alive slurmdbd || { slurmdbd; wait_for 30 slurmdbd sacctmgr -n show cluster; }
sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
alive slurmctld || { slurmctld; wait_for 30 slurmctld scontrol ping; }
alive slurmd || slurmd
wait_for 60 "the node $NODE" cluster_up
echo "slurm: up (node $NODE, partition debug; state and logs in $STATE)"
