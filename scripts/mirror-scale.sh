#!/bin/bash
# The route mirror at scale (docs/measurements.md, "A full table"): loads the fixture table
# (`llrouter testbed fulltable`, N4 IPv4 + N6 IPv6 prefixes via the sink) into the router
# namespace of a temporary testbed with `ip -batch`, starts `llrouter run`, and reports the time
# until the forwarder holds every route, the mirror thread's CPU over 30 s idle, and the
# process's resident memory. Root. Everything it creates is removed on exit.
#   usage: scripts/mirror-scale.sh N4 N6 [LLROUTER]
set -euo pipefail
N4=$1; N6=$2; BIN=${3:-target/release/llrouter}; NAME=llrms$$; DIR=$(mktemp -d)
PID=
cleanup() {
  [ -n "$PID" ] && kill -INT "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  "$BIN" testbed down --name "$NAME" >/dev/null 2>&1 || true
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
t0=$(date +%s.%N)
ip netns exec "$NAME-rtr" "$BIN" run --config "$DIR/r.toml" >"$DIR/log" 2>&1 &
PID=$!
total() { "$BIN" ctl --socket "$DIR/ctl.sock" -j status 2>/dev/null \
  | python3 -c 'import sys,json; print(json.load(sys.stdin).get("routes",0))' 2>/dev/null || echo 0; }
until [ "$(total)" -ge $((N4 + N6)) ]; do sleep 0.2; done
echo "llrouter: start until the forwarder holds every route: $(echo "$(date +%s.%N) - $t0" | bc) s"
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
