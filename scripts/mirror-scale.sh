#!/bin/bash
# The route mirror at scale (docs/results.md, "Full table and BIRD"): loads the fixture table
# (`llrouter testbed fulltable`, N4 IPv4 + N6 IPv6 prefixes via the sink) into the router
# namespace of a temporary testbed with `ip -batch`, starts `llrouter run`, and reports the time
# until the forwarder holds every route, the mirror thread's CPU over 30 s idle, and the
# process's resident memory. Root. Everything it creates is removed on exit.
# MEMLIMIT_MB=M runs the router in a memory cgroup limited to M MiB (v1 or v2, whichever has the
# memory controller): max-routes then follows from the limit, and the script reports whether the
# forwarder stayed complete.
#   usage: scripts/mirror-scale.sh N4 N6 [LLROUTER]
set -euo pipefail
N4=$1; N6=$2; BIN=${3:-target/release/llrouter}; NAME=llrms$$; DIR=$(mktemp -d)
PID=; CG=
cleanup() {
  [ -n "$PID" ] && kill -INT "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  "$BIN" testbed down --name "$NAME" >/dev/null 2>&1 || true
  [ -n "$CG" ] && rmdir "$CG" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
"$BIN" testbed fulltable --v4 "$N4" --v6 "$N6" --out "$DIR/ft" >/dev/null
"$BIN" testbed up --name "$NAME" >/dev/null
t0=$(date +%s.%N)
ip -n "$NAME-rtr" -batch "$DIR/ft/routes-v4.batch"
ip -n "$NAME-rtr" -batch "$DIR/ft/routes-v6.batch"
echo "ip -batch of $N4 + $N6 routes: $(echo "$(date +%s.%N) - $t0" | bc) s"
cat > "$DIR/r.toml" <<TOML
interfaces = ["veth-rin", "veth-rout"]
[control]
socket = "$DIR/ctl.sock"
[[classes]]
name = "rt"
[[classes]]
name = "be"
TOML
RUN=("$BIN" run --config "$DIR/r.toml")
if [ -n "${MEMLIMIT_MB:-}" ]; then
  if [ -d /sys/fs/cgroup/memory ]; then
    CG=/sys/fs/cgroup/memory/$NAME; mkdir "$CG"
    echo $((MEMLIMIT_MB << 20)) > "$CG/memory.limit_in_bytes"
  else
    CG=/sys/fs/cgroup/$NAME; mkdir "$CG"
    echo $((MEMLIMIT_MB << 20)) > "$CG/memory.max"
  fi
  # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup the limit is read from.
  RUN=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG"
    nsenter --net="/var/run/netns/$NAME-rtr" "${RUN[@]}")
else
  RUN=(ip netns exec "$NAME-rtr" "${RUN[@]}")
fi
t0=$(date +%s.%N)
"${RUN[@]}" >"$DIR/log" 2>&1 &
PID=$!
total() { "$BIN" ctl --socket "$DIR/ctl.sock" -j status 2>/dev/null \
  | python3 -c 'import sys,json; v=json.load(sys.stdin); print(-1 if v.get("routes_incomplete") else v.get("routes",0))' 2>/dev/null || echo 0; }
until n=$(total); [ "$n" -ge $((N4 + N6)) ] || [ "$n" = -1 ]; do
  kill -0 "$PID" 2>/dev/null || { echo "llrouter exited:"; tail -5 "$DIR/log"; exit 1; }
  sleep 0.2
done
if [ "$n" = -1 ]; then
  echo "llrouter: the forwarder is INCOMPLETE after $(echo "$(date +%s.%N) - $t0" | bc) s:"
  "$BIN" ctl --socket "$DIR/ctl.sock" status | grep -E "fib"
  grep -E "max-routes" "$DIR/log" | head -2
else
  echo "llrouter: start until the forwarder holds every route: $(echo "$(date +%s.%N) - $t0" | bc) s"
fi
sleep "${SETTLE:-2}"
mirror_ticks() { for t in /proc/$PID/task/*; do grep -q llr-mirror "$t/comm" && awk '{print $14+$15}' "$t/stat"; done; }
c0=$(mirror_ticks); sleep 30; c1=$(mirror_ticks)
echo "mirror CPU over 30 s idle: $(echo "scale=3; ($c1 - $c0) * 100 / $(getconf CLK_TCK) / 30" | bc) % of a core"
grep -E "VmRSS|VmHWM" "/proc/$PID/status"
# The forwarding table's own structures (llrouter_fib_memory_bytes).
"$BIN" ctl --socket "$DIR/ctl.sock" -j counters | python3 -c '
import sys, json
m = json.load(sys.stdin)
parts = m.get("fib_memory", [])
for name, b in parts: print("  fib %-16s %7.1f MB" % (name, b / 1e6))
print("  fib %-16s %7.1f MB" % ("total", sum(b for _, b in parts) / 1e6))'
grep -E "^(Rss|Pss|Anonymous|Private_Dirty)" "/proc/$PID/smaps_rollup" || true
