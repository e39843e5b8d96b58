#!/bin/bash
# Listings at scale (docs/operations.md, "Listings at scale"): loads the fixture table (N4 IPv4 +
# N6 IPv6 prefixes, `llrouter testbed fulltable`) into the router namespace of a temporary
# testbed, starts `llrouter run` (worker on core 1), then
#  1. times `ctl show fib --all` (text and -j) and `ctl show fib summary` over ROUNDS rounds;
#  2. forwards RATE pps (30 % RT, DSCP 46) for WINDOW s per window, windows alternating between
#     an idle control plane and `ctl show fib --all -j` listed over and over, ROUNDS pairs
#     (MODES="idle listing hog" adds a window where a plain busy loop holds core 0), and
#     reports what the sink received, the RT class's p99 one-way latency at the sink (which
#     also waits for the sink's own core, shared with the listing client on a 2-core VM), and
#     the router's own RT ring sojourn p99 (from its ring histograms, before and after; on veth
#     the ingress NAPI runs on the sender's core, here core 0 with the listing, so a listing
#     that delays ksoftirqd shows there too), and the worker's longest grant since its start
#     (the stall metric: a worker held up by the listing would show it).
# TIMING=0 (--no-timing) skips step 1; SHIELD=1 (--shield) runs the router with --shield (every
# other task of the machine off the worker's core 1 while it runs); WAKE (--wake) is the
# worker's wake mode; MODES (--modes) the windows of a round. With OUT set (a directory) the
# windows also go to OUT/listing.tsv (`llrouter results listing` reads them). Root. Every loop
# is bounded; everything it creates is removed on exit.
#   usage: scripts/listing-scale.sh [--wake interrupt|busy] [--shield] [--modes "idle listing hog"]
#                                   [--no-timing] [N4 [N6 [LLROUTER]]]   (defaults 1000000 230000)
set -euo pipefail
args=()
while (($#)); do
  case $1 in
    --wake) WAKE=${2:?--wake needs interrupt or busy}; shift 2 ;;
    --shield) SHIELD=1; shift ;;
    --modes) MODES=${2:?--modes needs a list of idle, listing and hog}; shift 2 ;;
    --no-timing) TIMING=0; shift ;;
    -*) echo "listing-scale: $1: unknown option" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"
case ${WAKE:=interrupt} in interrupt | busy) ;; *) echo "listing-scale: --wake: $WAKE is not interrupt or busy" >&2; exit 2 ;; esac
for m in ${MODES:=idle listing}; do
  case $m in idle | listing | hog) ;; *) echo "listing-scale: --modes: $m is not idle, listing or hog" >&2; exit 2 ;; esac
done
N4=${1:-1000000}; N6=${2:-230000}; BIN=${3:-target/release/llrouter}
ROUNDS=${ROUNDS:-3}; RATE=${RATE:-50000}; WINDOW=${WINDOW:-8}
NAME=llrls$$; DIR=$(mktemp -d); PID=; LOOP=
cleanup() {
  [ -n "$LOOP" ] && kill "$LOOP" 2>/dev/null || true
  [ -n "$PID" ] && kill -INT "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  "$BIN" testbed down --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
"$BIN" testbed fulltable --v4 "$N4" --v6 "$N6" --out "$DIR/ft" >/dev/null
"$BIN" testbed up --name "$NAME" >/dev/null
ip -n "$NAME-rtr" -batch "$DIR/ft/routes-v4.batch"
ip -n "$NAME-rtr" -batch "$DIR/ft/routes-v6.batch"
cat > "$DIR/r.toml" <<TOML
interfaces = ["veth-rin", "veth-rout"]
cores = [1]
wake = "$WAKE"
netlink-buffer-kb = 16384
[control]
socket = "$DIR/ctl.sock"
[[classes]]
name = "rt"
[[classes]]
name = "be"
[[rules]]
class = "rt"
dscp = 46
TOML
if [ -n "${SHIELD:-}" ]; then
  # nsenter, not `ip netns exec`: that one remounts /sys, which hides the cgroup hierarchy the
  # shield works on (the testbed's own studies enter the namespace the same way)
  nsenter --net="/run/netns/$NAME-rtr" "$BIN" run --config "$DIR/r.toml" --shield >"$DIR/log" 2>&1 &
else
  ip netns exec "$NAME-rtr" "$BIN" run --config "$DIR/r.toml" >"$DIR/log" 2>&1 &
fi
PID=$!
# The clients run on core 0, off the worker's core, as on a router whose worker cores are kept
# for the workers (`llrouter tune`, isolcpus): a client on the worker's core competes with it
# for that core, whatever the router does.
CTL=(taskset -c 0 "$BIN" ctl --socket "$DIR/ctl.sock")
deadline=$((SECONDS + 300))
until n=$("${CTL[@]}" -j status 2>/dev/null | python3 -c 'import sys,json; print(json.load(sys.stdin)["routes"])' 2>/dev/null) \
    && [ "$n" -ge $((N4 + N6)) ]; do
  kill -0 "$PID" 2>/dev/null || { echo "llrouter exited:"; tail -5 "$DIR/log"; exit 1; }
  [ $SECONDS -lt $deadline ] || { echo "routes did not arrive in 300 s"; exit 1; }
  sleep 0.5
done
echo "table: $n routes"
# A window reads the RT ring's histogram from the counters, which list the rings once the
# worker's engine runs; right after a table's load they can still be missing.
until "${CTL[@]}" -j counters 2>/dev/null |
    python3 -c 'import sys, json; sys.exit(not any(r["class"] == "rt" for r in json.load(sys.stdin)["rings"]))'; do
  kill -0 "$PID" 2>/dev/null || { echo "llrouter exited:"; tail -5 "$DIR/log"; exit 1; }
  [ $SECONDS -lt $deadline ] || { echo "no rt ring in the router's counters in 300 s"; exit 1; }
  sleep 0.5
done
secs() { local t0; t0=$(date +%s.%N); "$@" >"$DIR/out"; echo "$(date +%s.%N) - $t0" | bc; }
med() { python3 -c 'import sys,statistics as s; v=sorted(map(float,sys.argv[1:])); print(f"median {s.median(v):.2f} s (range {v[0]:.2f}–{v[-1]:.2f}, {len(v)} rounds)")' "$@"; }
text=(); json=(); summ=()
for r in $(seq "$([ "${TIMING:-1}" = 0 ] && echo 0 || echo "$ROUNDS")"); do
  text+=("$(secs "${CTL[@]}" show fib --all)")
  lines=$(wc -l <"$DIR/out")
  json+=("$(secs "${CTL[@]}" show fib --all -j)")
  summ+=("$(secs "${CTL[@]}" show fib summary)")
done
if [ "${#text[@]}" -gt 0 ]; then
  echo "show fib --all ($lines lines): $(med "${text[@]}")"
  echo "show fib --all -j: $(med "${json[@]}")"
  echo "show fib summary: $(med "${summ[@]}")"
fi
ksoftirqd0() { awk '{print $14 + $15}' "/proc/$(pgrep -x ksoftirqd/0)/stat"; }
steal1() { awk '$1 == "cpu1" {print $9}' /proc/stat; } # ticks the hypervisor took from core 1
preempted() { # involuntary context switches of the router's worker threads
  local t n=0
  for t in /proc/"$PID"/task/*; do
    grep -q '^llr-worker' "$t/comm" 2>/dev/null || continue
    n=$((n + $(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status")))
  done
  echo "$n"
}
window() { # $1 = idle | listing | hog; prints "sent received rt_p99_us ≤ring_p99_us stall_us ksoftirqd0_ms steal1_ms preempted"
  local k0 s1 p0; k0=$(ksoftirqd0) s1=$(steal1) p0=$(preempted)
  "${CTL[@]}" -j counters >"$DIR/before.json"
  ip netns exec "$NAME-sink" "$BIN" sink --cpu 0 --duration $((WINDOW + 3)) --idle 2 --json >"$DIR/sink.json" 2>/dev/null &
  local sink=$!
  sleep 0.5
  if [ "$1" = hog ]; then
    # the same core 0 kept busy by a plain loop instead of a listing: separates what the
    # listing itself does (its scan, the router's control thread) from a busy core 0
    ( taskset -pc 0 $BASHPID >/dev/null; end=$((SECONDS + WINDOW + 1)); while [ $SECONDS -lt $end ]; do :; done ) &
    LOOP=$!
  elif [ "$1" = listing ]; then
    # the loop's own shell on core 0 too: its forks would otherwise land on the worker's core
    ( taskset -pc 0 $BASHPID >/dev/null; end=$((SECONDS + WINDOW + 1)); while [ $SECONDS -lt $end ]; do "${CTL[@]}" ${LISTCMD:-show fib --all -j} >/dev/null; done ) &
    LOOP=$!
  fi
  ip netns exec "$NAME-gen" "$BIN" gen --dst 10.71.2.1 --rate "$RATE" --rt-share 0.3 \
      --duration "$WINDOW" --cpu 0 --json >"$DIR/gen.json" 2>/dev/null
  [ -n "$LOOP" ] && { wait "$LOOP" 2>/dev/null || true; LOOP=; }
  wait "$sink" || true
  "${CTL[@]}" -j counters >"$DIR/after.json"
  python3 - "$DIR/sink.json" "$DIR/before.json" "$DIR/after.json" "$DIR/gen.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
sent = json.load(open(sys.argv[4]))["sent"]
rt = [c for c in v["classes"] if c["class"] == 0]
def ring(path):
    r = [x for x in json.load(open(path))["rings"] if x["class"] == "rt"][0]["latency"]
    return r["bounds"], r["counts"]
bounds, a = ring(sys.argv[2])
_, b = ring(sys.argv[3])
d = [y - x for x, y in zip(a, b)]
n, acc, p99 = sum(d), 0, float("inf")
for i, c in enumerate(d):
    acc += c
    if n and acc >= 0.99 * n:
        p99 = bounds[i] * 1e6 if i < len(bounds) else float("inf")
        break
stall = max(w["stall_max_seconds"] for w in json.load(open(sys.argv[3]))["workers"]) * 1e6
print(sent, v["received"], rt[0]["latency"]["p99"] / 1000 if rt else "nan", f"≤{p99:g}", f"{stall:.0f}", end=" ")
PY
  echo "$(( ($(ksoftirqd0) - k0) * 1000 / $(getconf CLK_TCK) )) $(( ($(steal1) - s1) * 1000 / $(getconf CLK_TCK) )) $(( $(preempted) - p0 ))"
}
echo "forwarding $RATE pps (30 % RT) for $WINDOW s per window: sent, received, RT p99 µs at the sink, RT ring sojourn p99 µs, the worker's longest grant so far µs, ksoftirqd/0 CPU ms, steal on core 1 ms, worker preemptions"
# The first window after the table's load ran slow in every run (RT ring p99 1–5 ms, also
# idle): the kernel is still compacting and scanning the memory the load touched (kcompactd,
# kdamond on core 1 in `perf sched timehist`). It is printed, not counted in the rounds.
echo "warm-up: $(window idle)"
TSV=
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  TSV=$OUT/listing.tsv
  printf 'wake\tshield\tmode\tround\tsent\treceived\trt_p99_sink_us\tring_p99_us\tstall_us\tksoftirqd0_ms\tsteal1_ms\tpreempted\n' >"$TSV"
fi
for r in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    w=$(window "$mode")
    echo "round $r $mode: $w"
    # A window that could not read its counters or the sink's report is a failed run, not a row.
    [ "$(wc -w <<<"$w")" -eq 8 ] || { echo "listing-scale: round $r $mode: no complete window ($w)" >&2; exit 1; }
    if [ -n "$TSV" ]; then
      read -r sent rcv rtp ring stall ks st pre <<<"$w"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$WAKE" "$([ -n "${SHIELD:-}" ] && echo yes || echo no)" \
        "$mode" "$r" "$sent" "$rcv" "$rtp" "${ring#≤}" "$stall" "$ks" "$st" "$pre" >>"$TSV"
    fi
  done
done
