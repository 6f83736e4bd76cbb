#!/usr/bin/env bash
# A SLURM cluster on this one machine, on loopback, without systemd: what
# the SLURM tests run against (Debian's slurm-wlm 22.05 and munge).
# Usage: scripts/slurm-up.sh [CPUS_PER_NODE] [NODES]
#   CPUS_PER_NODE beyond the real cores oversubscribes (config_overrides);
#   NODES > 1 runs one slurmd per node (n1..nN) on ports 17001.. of 127.0.0.1.
# Needs root. Installs the packages when missing. Stop it with slurm-down.sh.
set -euo pipefail
CPUS=${1:-$(nproc)}
NODES=${2:-1}
HOST=$(hostname -s)
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 8 / 10 / NODES ))
if [ "$(id -u)" != 0 ]; then
  echo "slurm-up.sh: needs root (it writes /etc/slurm and starts daemons)" >&2
  exit 1
fi
# An earlier cluster of this script goes first (its jobs too).
"$(dirname "$0")/slurm-down.sh"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge >/dev/null
fi
# The host name must resolve (SlurmctldHost); on loopback it is enough.
if ! getent hosts "$HOST" >/dev/null; then
  echo "127.0.0.1 $HOST" >> /etc/hosts
fi
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key
fi
install -d -o munge -g munge -m 0755 /run/munge
install -d /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm /etc/slurm
if [ "$NODES" -eq 1 ]; then
  NODELINE="NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN"
  PARTNODES=${HOST}; DPID=/run/slurmd.pid; DSPOOL=/var/lib/slurm/slurmd; DLOG=/var/log/slurm/slurmd.log
else
  NODELINE="NodeName=n[1-${NODES}] NodeHostname=${HOST} NodeAddr=127.0.0.1 Port=17001-$((17000+NODES)) CPUs=${CPUS} RealMemory=${MEM_MB} State=UNKNOWN"
  PARTNODES="n[1-${NODES}]"; DPID=/run/slurmd-%n.pid; DSPOOL=/var/lib/slurm/slurmd/%n; DLOG=/var/log/slurm/slurmd-%n.log
  for i in $(seq 1 "$NODES"); do install -d /var/lib/slurm/slurmd/n$i; done
fi
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=brisk
SlurmctldHost=${HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=${DPID}
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=${DSPOOL}
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=${DLOG}
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
SlurmdParameters=config_overrides
MessageTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=30
Waittime=0
${NODELINE}
PartitionName=debug Nodes=${PARTNODES} Default=YES MaxTime=INFINITE State=UP
CONF
# A clean start: no jobs or node states from an earlier run.
rm -rf /var/lib/slurm/slurmctld/*
runuser -u munge -- /usr/sbin/munged
munge -n | unmunge >/dev/null
/usr/sbin/slurmctld
if [ "$NODES" -eq 1 ]; then /usr/sbin/slurmd; else
  for i in $(seq 1 "$NODES"); do /usr/sbin/slurmd -N "n$i"; done
fi
for _ in $(seq 1 200); do
  [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | wc -l)" -eq "$NODES" ] && { sinfo -N >&2; exit 0; }
  sleep 0.1
done
echo "slurm-up.sh: the nodes did not become idle" >&2; sinfo -N -l >&2; exit 1
