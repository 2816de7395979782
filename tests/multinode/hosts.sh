# Simulated hosts on one machine, sourced by the multinode tests (see README, "Running across
# machines"). Each host is a process holding new network, mount and UTS namespaces: its own
# hostname, its own /dev/shm and /tmp (tmpfs), and one veth interface with an address in
# 10.77.0.0/24 plugged into a bridge that lives in one more namespace of ours. Nothing is
# added to the machine's own network namespace (no address, no route, no interface), and
# nothing is routed out of the bridge. Where the kernel has time namespaces, each host's
# monotonic clock is offset (host i by i x 1000 s), as on machines booted at different times.
# The process namespace is NOT separate (pids are shared,
# so a rank could read another host's /proc: the code must not, and the tests check
# behaviour that would differ), and the hosts share the machine's CPUs.
#
#   mn_up 2 1 1        three hosts: host1 with 2 slots, host2 and host3 with 1 (needs MN_STATE)
#   mn_mpirun ARGS     mpirun on host1 over the hostfile, the rsh agent entering each host
#   mn_on HOST CMD     a command on one host
#   mn_down            kills, by pid, every process inside the hosts, then the hosts
# mn_up exits 77 (ctest's skip) with the reason where the machine refuses namespaces.

MN_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MN_HOSTS=()
MN_HOLDERS=()

mn_skip() { echo "SKIP: simulated hosts unavailable: $*" >&2; exit 77; }

# a process holding new namespaces; prints its pid
mn_holder() {
  local pidfile="$MN_STATE/.holder.$RANDOM$RANDOM"
  # it lives as long as the test's shell does, so a test killed past its trap leaves nothing
  unshare "$@" --fork sh -c "echo \$\$ > $pidfile; while kill -0 $$ 2>/dev/null; do sleep 1; done" \
    </dev/null >/dev/null 2>"$pidfile.err" &
  for _ in $(seq 100); do
    [ -s "$pidfile" ] && break
    kill -0 $! 2>/dev/null || break
    sleep 0.02
  done
  [ -s "$pidfile" ] || { cat "$pidfile.err" >&2; return 1; }
  cat "$pidfile"
  rm -f "$pidfile" "$pidfile.err"
}

mn_up() {
  [ -n "$MN_STATE" ] && mkdir -p "$MN_STATE" || mn_skip "MN_STATE is not set"
  [ "$(id -u)" = 0 ] || mn_skip "needs root (namespaces and veth interfaces)"
  command -v unshare >/dev/null && command -v nsenter >/dev/null && command -v ip >/dev/null ||
    mn_skip "needs unshare, nsenter and ip (util-linux, iproute2)"
  case "$MN_DIR:$MN_STATE" in /tmp/* | *:/tmp/*) mn_skip "the tree or MN_STATE is under /tmp, which each host replaces with its own" ;; esac
  trap mn_down EXIT
  MN_TIME=
  unshare --time --monotonic 1 true 2>/dev/null && MN_TIME=-T
  echo "$MN_TIME" > "$MN_STATE/time"
  local sw
  sw=$(mn_holder --net) || mn_skip "unshare --net refused"
  MN_HOLDERS+=("$sw")
  nsenter -t "$sw" -n ip link add br0 type bridge 2>/dev/null || mn_skip "cannot create a bridge inside a namespace"
  nsenter -t "$sw" -n ip link set br0 up
  : > "$MN_STATE/hostfile"
  local i=0 slots pid
  for slots in "$@"; do
    i=$((i + 1))
    # each host's CLOCK_MONOTONIC runs $i thousand seconds ahead (a time namespace, where the
    # kernel has them), as machines booted at different times do
    pid=$(mn_holder --net --mount --uts ${MN_TIME:+--time --monotonic $((i * 1000))} --propagation private) ||
      mn_skip "unshare --net --mount --uts refused"
    MN_HOLDERS+=("$pid")
    MN_HOSTS+=("host$i")
    echo "$pid" > "$MN_STATE/host$i.pid"
    nsenter -t "$sw" -n ip link add "p$i" type veth peer name eth0 netns "$pid" 2>/dev/null ||
      mn_skip "cannot create veth interfaces inside a namespace"
    nsenter -t "$sw" -n ip link set "p$i" master br0 up
    nsenter -t "$pid" -n -m -u sh -c "hostname host$i && ip link set lo up && ip addr add 10.77.0.$i/24 dev eth0 &&
      ip link set eth0 up && mount -t tmpfs tmpfs /dev/shm && mount -t tmpfs tmpfs /tmp" ||
      mn_skip "cannot set up host$i (hostname, address, tmpfs)"
    echo "host$i slots=$slots" >> "$MN_STATE/hostfile"
  done
}

mn_on() {
  local host=$1
  shift
  nsenter -t "$(cat "$MN_STATE/$host.pid")" -n -m -u $(cat "$MN_STATE/time") --wd="$PWD" -- "$@"
}

# mpirun as a user on host1 would type it, over the hostfile; only OMPI_MCA_* and what -x names
# travel (the caller adds --allow-run-as-root, -np and the rest, as llmlab -n does)
mn_mpirun() {
  mn_on host1 mpirun --hostfile "$MN_STATE/hostfile" \
    --mca plm_rsh_agent "$MN_DIR/rsh.sh" --mca btl self,vader,tcp \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 -x MN_STATE "$@"
}

# every process whose network namespace is one of ours (the holders, mpirun, the daemons, the
# ranks), by pid; then the holders, which frees the namespaces and their interfaces
mn_down() {
  local h ns p
  for h in "${MN_HOLDERS[@]}"; do
    ns=$(readlink "/proc/$h/ns/net" 2>/dev/null) || continue
    for p in /proc/[0-9]*; do
      p=${p#/proc/}
      [ "$p" = "$h" ] && continue
      [ "$(readlink "/proc/$p/ns/net" 2>/dev/null)" = "$ns" ] && kill -KILL "$p" 2>/dev/null
    done
  done
  for h in "${MN_HOLDERS[@]}"; do kill -KILL "$h" 2>/dev/null; done
  MN_HOLDERS=()
}
