#!/bin/sh
# The rsh agent OpenMPI launches remote daemons with on the simulated hosts (hosts.sh): instead
# of ssh to HOST, it enters HOST's namespaces (network, mount, UTS) by the pid that holds them,
# and, as sshd does, starts the command with a fresh environment: only what mpirun forwards
# (-x) reaches remote ranks, so a setting that does not travel is caught here as on a cluster.
# OpenMPI calls it as: rsh.sh [options] HOST COMMAND...
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
pid=$(cat "$MN_STATE/$host.pid" 2>/dev/null) || { echo "rsh.sh: no simulated host '$host' in $MN_STATE" >&2; exit 255; }
exec nsenter -t "$pid" -n -m -u $(cat "$MN_STATE/time") -- env -i PATH="$PATH" HOME="${HOME:-/root}" MN_STATE="$MN_STATE" /bin/sh -c "$*"
