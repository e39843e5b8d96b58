#!/bin/bash
# Route churn beside measured traffic (docs/results.md, "Full table and BIRD"): a testbed with N
# /24 routes in the router namespace, one `testbed run` point of llrouter:ll-wfq at LOAD pps
# with 30 % RT for SECS+20 s, and from 10 s into the point RATE route replaces per second for
# SECS s (paced in one-second `ip -batch` chunks, alternating two gateways). RATE=0 is the same
# run without churn. The churn's `ip` runs on CHURN_CPU (default 0: the generator's and the
# router's helper CPU, as a routing daemon runs on a control-plane core, not on the forwarding
# core). Prints the point's RT/BE loss and latency from the testbed's report, then where RT was
# lost (sent, received, the router's RT-ring and other drops) and the worker's longest stall.
# Root; removes what it creates.
#   usage: scripts/churn-traffic.sh N RATE SECS LOAD [LLROUTER]
set -euo pipefail
N=$1; RATE=$2; SECS=$3; LOAD=$4; BIN=${5:-target/release/llrouter}
NAME=llrct$$; DIR=$(mktemp -d); CH=; CHURN_CPU=${CHURN_CPU:-0}
cleanup() {
  [ -n "$CH" ] && kill "$CH" 2>/dev/null && wait "$CH" 2>/dev/null || true
  "$BIN" testbed down --name "$NAME" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
python3 - "$N" "$RATE" "$SECS" "$DIR" <<'PY'
import sys
n, rate, secs, d = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def pfx(i):
    a = 0x0B000000 + ((i % n) << 8)
    return f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.0/24"
open(d + "/load", "w").write("".join(f"route add {pfx(i)} via 10.71.2.1 dev veth-rout\n" for i in range(n)))
for s in range(secs):
    gw = "10.71.2.3" if s % 2 == 0 else "10.71.2.1"
    open(f"{d}/churn{s}", "w").write("".join(
        f"route replace {pfx((s * rate + i) * 7919)} via {gw} dev veth-rout\n" for i in range(rate)))
PY
"$BIN" testbed up --name "$NAME" >/dev/null
ip -n "$NAME-rtr" -batch "$DIR/load"
(
  sleep 10
  for s in $(seq 0 $((SECS - 1))); do
    t=$(date +%s.%N)
    [ "$RATE" -gt 0 ] && taskset -c "$CHURN_CPU" ip -n "$NAME-rtr" -batch "$DIR/churn$s"
    left=$(echo "1 - ($(date +%s.%N) - $t)" | bc)
    case "$left" in -*) echo "churn: second $s took longer than 1 s" >&2 ;; *) sleep "$left" ;; esac
  done
) &
CH=$!
"$BIN" testbed run --name "$NAME" --targets llrouter:ll-wfq --loads "$LOAD" --rt-shares 0.3 \
  --point-secs $((SECS + 20)) --out "$DIR/out" >"$DIR/run.log" 2>&1
wait "$CH" || true
CH=
grep -E "^\|" "$DIR/out/report.md" | head -8
python3 - "$DIR/out/results.csv" <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(f"RT sent {r['sent_rt']} received {r['recv_rt']} (lost {int(r['sent_rt']) - int(r['recv_rt'])}); "
          f"router: RT-ring drops {r['hi_ring_drops']}, other drops {r['router_drops']}; "
          f"worker's longest grant since start {r['stall_max_us']} us")
PY
