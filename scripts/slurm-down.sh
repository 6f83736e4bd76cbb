#!/usr/bin/env bash
# Stop what slurm-up.sh started, by the PIDs in its pid files (never by name).
set -u
stop() {  # stop <pidfile>
  [ -s "$1" ] || return 0
  local pid; pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$1"
}
[ -s /run/slurmctld.pid ] && timeout 10 scancel --user="$(id -un)" 2>/dev/null
for f in /run/slurmd.pid /run/slurmd-*.pid; do [ -e "$f" ] && stop "$f"; done
stop /run/slurmctld.pid
stop /run/munge/munged.pid
exit 0
