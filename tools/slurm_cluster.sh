#!/usr/bin/env bash
# A SLURM on this machine, to run the tests marked `slurm` against a real scheduler.
#   tools/slurm_cluster.sh up [cgroup|linuxproc] [NODES]  start it (as root); prints the export
#   tools/slurm_cluster.sh down                    stop what `up` started, nothing else
#   tools/slurm_cluster.sh env                     the export line of a cluster that is up
# NODES (default 1): with 2 or more, one slurmd per node on this machine, each with its own node
# name (SLURM_CLUSTER_NODE-1, -2, ...), port, spool, log and pid file (slurm.conf's %n), all on
# loopback; the node names are added to /etc/hosts as 127.0.0.1 (one marked line, removed by
# `down`) so that a job's first node name is an address, as on a cluster. Jobs then run across
# the nodes with srun as on several machines.
# Installs Debian's slurmctld, slurmd, slurm-client and munge when they are missing. Everything
# it writes is under SLURM_CLUSTER_DIR (default /var/tmp/mixco-slurm): its own munge key and
# socket, slurm.conf and cgroup.conf, state, logs and pid files; a system-wide SLURM or munge is
# left alone (other ports, other socket). Point the SLURM commands at it with
#   export SLURM_CONF=$SLURM_CLUSTER_DIR/slurm.conf
# A second cluster beside the first (e.g. the other tracking mode) takes its own
# SLURM_CLUSTER_DIR, SLURM_CLUSTER_PORT (it uses that port and the next) and SLURM_CLUSTER_NODE.
# Process tracking: proctrack/cgroup (the common setting on clusters: on scancel or pre-emption
# SLURM signals only the processes directly under the job step) or proctrack/linuxproc (the
# whole process tree). A partition `debug`; short scheduler and credential intervals so a
# requeued job restarts within seconds rather than minutes.
set -euo pipefail
DIR=${SLURM_CLUSTER_DIR:-/var/tmp/mixco-slurm}
CTLD_PORT=${SLURM_CLUSTER_PORT:-6917}
NODE=${SLURM_CLUSTER_NODE:-$(hostname -s)}  # another name runs a second cluster beside a first
CONF="$DIR/slurm.conf"
HOSTS_MARK="# mixco-slurm $DIR"  # the /etc/hosts line of a several-node cluster ends with it

die() { echo "error: $*" >&2; exit 1; }

stop() {  # stop the daemons this script started (their pid files under $DIR), newest first
  local file pid
  for file in "$DIR"/slurmd*.pid "$DIR/slurmctld.pid" "$DIR/munged.pid"; do
    [ -s "$file" ] || continue
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$file"
  done
  # the line that ends with this cluster's mark only: /var/tmp/mixco-slurm's mark is the start
  # of /var/tmp/mixco-slurm-2n's, and a substring match removed the other cluster's node names
  if [ -w /etc/hosts ] && grep -qF "$HOSTS_MARK" /etc/hosts; then
    awk -v mark="$HOSTS_MARK" 'substr($0, length($0) - length(mark) + 1) != mark' \
      /etc/hosts >"$DIR/hosts.tmp" || true
    cat "$DIR/hosts.tmp" >/etc/hosts
    rm -f "$DIR/hosts.tmp"
  fi
}

node_names() {  # $1: number of nodes
  if [ "$1" = 1 ]; then echo "$NODE"; else for i in $(seq "$1"); do echo "$NODE-$i"; done; fi
}

install() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    && command -v munged >/dev/null && return
  [ "$(id -u)" = 0 ] || die "SLURM is not installed; run this as root to install it"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmctld slurmd slurm-client munge \
    >"$DIR/install.log" 2>&1 || die "apt-get install of SLURM failed; see $DIR/install.log"
}

write_config() {  # $1: cgroup or linuxproc, $2: number of nodes
  local host cpus mem name per i=0
  host=$(hostname -s)
  cpus=$(nproc --all)
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  per=$([ "$2" = 1 ] || echo '-%n')  # several slurmd: a spool, pid and log file each
  cat >"$CONF" <<EOF
ClusterName=mixco-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a step credential's lifetime, and also how long a requeued job waits before it
# may start again (slurm.conf(5); 120 s by default): 10 s keeps a requeue cycle short here.
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool$per
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd$per.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd$per.log
ProctrackType=proctrack/$1
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=10
MinJobAge=300
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  if [ "$2" = 1 ]; then
    echo "NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN" >>"$CONF"
  else  # each slurmd on a port of its own after the controller's, the machine's CPUs each
    for name in $(node_names "$2"); do
      i=$((i + 1))
      echo "NodeName=$name NodeHostname=$host NodeAddr=127.0.0.1 Port=$((CTLD_PORT + i))" \
        "CPUs=$cpus RealMemory=$((mem / $2)) State=UNKNOWN" >>"$CONF"
    done
  fi
  cat >"$DIR/cgroup.conf" <<EOF
CgroupPlugin=autodetect
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=no
ConstrainRAMSpace=no
EOF
}

up() {
  local mode=${1:-cgroup} nodes=${2:-1} name
  case "$mode" in cgroup|linuxproc) ;; *) die "tracking must be cgroup or linuxproc, got '$mode'";; esac
  [[ "$nodes" =~ ^[1-9][0-9]?$ ]] || die "NODES must be a number of nodes (1-99), got '$nodes'"
  [ "$(id -u)" = 0 ] || die "a SLURM cluster is started as root (its daemons run as root)"
  mkdir -p "$DIR"
  install
  stop
  mkdir -p "$DIR/munge" "$DIR/state" "$DIR/spool"
  chmod 700 "$DIR/munge"
  if [ ! -s "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
  fi
  write_config "$mode" "$nodes"
  if [ "$nodes" != 1 ]; then  # the node names resolve to loopback, as a cluster's resolve
    [ -w /etc/hosts ] || die "/etc/hosts is not writable: the node names could not resolve"
    echo "127.0.0.1 $(node_names "$nodes" | tr '\n' ' ')$HOSTS_MARK" >>/etc/hosts
  fi
  munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/munged.pid" --log-file="$DIR/munged.log" --seed-file="$DIR/munge/seed" \
    || die "munged did not start; see $DIR/munged.log"
  slurmctld -f "$CONF" -c || die "slurmctld did not start; see $DIR/slurmctld.log"
  for name in $(node_names "$nodes"); do
    slurmd -f "$CONF" -N "$name" || die "slurmd of node $name did not start; see $DIR/slurmd*.log"
  done
  for _ in $(seq 150); do
    if [ "$(SLURM_CONF="$CONF" sinfo -h -N -o '%T' 2>/dev/null | grep -cx 'idle')" = "$nodes" ]; then
      echo "SLURM up ($mode tracking, $nodes node(s), partition debug); use: export SLURM_CONF=$CONF"
      return
    fi
    sleep 0.2
  done
  SLURM_CONF="$CONF" sinfo >&2 || true
  die "the SLURM nodes did not become idle within 30 s; see $DIR/slurmctld.log and $DIR/slurmd*.log"
}

case "${1:-}" in
  up) up "${2:-cgroup}" "${3:-1}" ;;
  down) stop; echo "SLURM down" ;;
  env)
    [ -s "$DIR/slurmctld.pid" ] || die "no cluster is up in $DIR; start one with: $0 up"
    echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 up [cgroup|linuxproc] [NODES] | down | env" >&2; exit 2 ;;
esac
