#!/bin/bash
# Paper 003, Figs. 7-8: the control plane against the forwarding plane (docs/papers.md). For each
# offered load, two `testbed run` points of llrouter:ll-wfq+flows, interleaved: "quiet", and
# "config", during which a service is set up and torn down again and again through the control
# socket (`ctl flow add` with a pipeline, then `ctl flow del`; each returns once every worker has
# applied it). Prints per load: the forwarded rate of both points and their ratio (Fig. 8), and
# the median and 90th percentile of `flow add`'s wall time, the ctl process included (Fig. 7),
# with a least-squares line against the load as the paper fits one. Root; the testbed removes its
# namespaces, this script its files.
#   usage: scripts/control-contention.sh [LOADS] [SECS] [LLROUTER]
#   LOADS: comma-separated packets/s (default 25000,50000,100000,200000,400000)
set -euo pipefail
LOADS=${1:-25000,50000,100000,200000,400000}; SECS=${2:-6}; BIN=${3:-target/release/llrouter}
DIR=$(mktemp -d); TB=; LOOP=
cleanup() {
  [ -n "$LOOP" ] && kill "$LOOP" 2>/dev/null && wait "$LOOP" 2>/dev/null || true
  [ -n "$TB" ] && kill -INT "$TB" 2>/dev/null && wait "$TB" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

# Sets a service up and tears it down until the testbed's router socket goes away; one line of
# milliseconds per `flow add` into $1.
config_loop() {
  local tb=$1 out=$2 sock="" i=0
  for _ in $(seq 200); do
    sock=$(ls /tmp/llrtb-"$tb"-*+flows.sock 2>/dev/null | head -1 || true)
    [ -n "$sock" ] && break
    sleep 0.1
  done
  [ -z "$sock" ] && { echo "control-contention: no router socket of testbed $tb" >&2; return 1; }
  while [ -S "$sock" ]; do
    i=$((i + 1))
    t0=$(date +%s%N)
    "$BIN" ctl -s "$sock" flow add "svc$i" --match "proto=udp dst=10.99.$((i % 250)).0/24" \
      --weight 2 --pipeline "work(us=2)" >/dev/null 2>&1 || break
    t1=$(date +%s%N)
    echo "$(( (t1 - t0) / 1000 ))" >>"$out"
    "$BIN" ctl -s "$sock" flow del "svc$i" >/dev/null 2>&1 || break
    sleep 0.1
  done
}

for load in ${LOADS//,/ }; do
  for mode in quiet config; do
    "$BIN" testbed run --targets llrouter:ll-wfq+flows --loads "$load" --rt-shares 0.3 \
      --point-secs "$SECS" --out "$DIR/$load-$mode" >"$DIR/$load-$mode.log" 2>&1 &
    TB=$!
    if [ "$mode" = config ]; then
      config_loop "$TB" "$DIR/$load-times" &
      LOOP=$!
    fi
    wait "$TB" || { echo "testbed run failed at $load ($mode):" >&2; tail -5 "$DIR/$load-$mode.log" >&2; exit 1; }
    TB=
    if [ -n "$LOOP" ]; then wait "$LOOP" || true; LOOP=; fi
  done
done

python3 - "$DIR" "$LOADS" <<'PY'
import csv, statistics, sys
d, loads = sys.argv[1], [int(x) for x in sys.argv[2].split(",")]
def fwd(path):
    rows = list(csv.DictReader(open(path)))
    return float(rows[-1]["throughput_pps"])
xs, ys = [], []
print("| offered pps | forwarded quiet | forwarded with config | ratio | flow add ms: median | p90 | n |")
print("|---|---|---|---|---|---|---|")
for l in loads:
    q = fwd(f"{d}/{l}-quiet/results.csv")
    c = fwd(f"{d}/{l}-config/results.csv")
    try:
        t = sorted(int(x) / 1000 for x in open(f"{d}/{l}-times").read().split())
    except FileNotFoundError:
        t = []
    med = statistics.median(t) if t else float("nan")
    p90 = t[min(len(t) - 1, int(0.9 * len(t)))] if t else float("nan")
    print(f"| {l} | {q:.0f} | {c:.0f} | {c / q:.3f} | {med:.1f} | {p90:.1f} | {len(t)} |")
    if t:
        xs.append(l); ys.append(med)
if len(xs) >= 2:
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ss = sum((y - my) ** 2 for y in ys)
    r2 = 1 - sum((y - a - b * x) ** 2 for x, y in zip(xs, ys)) / ss if ss > 0 else float("nan")
    print(f"\nflow add median ms = {a:.2f} + {b * 1000:.4f} per kpps offered (R^2 {r2:.3f}); "
          f"the paper: 139.86 + 13.9 per kpps")
PY
