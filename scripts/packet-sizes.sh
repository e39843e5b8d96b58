#!/bin/bash
# Paper 002, Figs. 4 and 8-10 on the testbed (docs/papers.md): loss and CPU against the packet
# size, 72 to 1200 bytes, at one offered bit rate (the paper: a gigabit link, 12-byte gaps), for
# the kernel and for llrouter with a small receive ring and a large one (the paper's
# optimisation is sizing the buffers). Per point: the loss before the application (the router
# and the links: sent - received - the sink's socket drops), the loss at the application (the
# sink's UDP sockets' buffers: Udp InErrors in the sink namespace), the router CPU's softirq
# share and the router's CPU (llrouter's process, or the kernel's softirq). The sink receives
# with UDP sockets, so that an application can fall behind. Root; the testbed removes its
# namespaces, this script its files.
#   usage: scripts/packet-sizes.sh [MBPS] [SECS] [LLROUTER]   (defaults 300, 4)
set -euo pipefail
MBPS=${1:-300}; SECS=${2:-4}; BIN=${3:-target/release/llrouter}
SIZES=${SIZES:-"72 128 256 380 500 800 1200"}
DIR=$(mktemp -d)
cleanup() { rm -rf "$DIR"; }
trap cleanup EXIT INT TERM
run() { # NAME SIZE PPS ARGS...
  local name=$1 size=$2 pps=$3; shift 3
  "$BIN" testbed run --sink-backend udp --size "$size" --loads "$pps" --rt-shares 0.3 \
    --point-secs "$SECS" --out "$DIR/$name-$size" "$@" >"$DIR/$name-$size.log" 2>&1 \
    || { echo "testbed run failed ($name, $size B):" >&2; tail -5 "$DIR/$name-$size.log" >&2; exit 1; }
}
for size in $SIZES; do
  # Bits on the wire per frame: the frame, its FCS (4), preamble (8) and the 12-byte gap.
  pps=$(( MBPS * 1000000 / ((size + 24) * 8) ))
  run kernel "$size" "$pps" --targets kernel
  run rx64 "$size" "$pps" --targets llrouter:ll-wfq --rx-size 64
  run rx2048 "$size" "$pps" --targets llrouter:ll-wfq --rx-size 2048
done
python3 - "$DIR" "$SIZES" "$MBPS" <<'PY'
import csv, sys
d, sizes, mbps = sys.argv[1], sys.argv[2].split(), sys.argv[3]
print(f"offered {mbps} Mbit/s on the wire at every size; loss in % of the packets sent")
print("| size B | offered pps | target | lost before the application % | lost at the application % | softirq % (router CPU) | router CPU % |")
print("|---|---|---|---|---|---|---|")
for s in sizes:
    for name, label in [("kernel", "kernel"), ("rx64", "llrouter ll-wfq, rx ring 64"), ("rx2048", "llrouter ll-wfq, rx ring 2048")]:
        r = list(csv.DictReader(open(f"{d}/{name}-{s}/results.csv")))[-1]
        sent = int(r["sent_rt"]) + int(r["sent_be"])
        recv = int(r["recv_rt"]) + int(r["recv_be"])
        app = int(r["sink_drops"])
        before = max(sent - recv - app, 0)
        secs = sent / float(r["sent_pps"]) if float(r["sent_pps"]) > 0 else float("nan")
        cpu = 100 * float(r["router_cpu_s"]) / secs
        pct = lambda n: 100 * n / sent if sent else float("nan")
        print(f"| {s} | {float(r['offered_pps']):.0f} | {label} | {pct(before):.2f} | {pct(app):.2f} | {float(r['router_softirq_pct']):.1f} | {cpu:.1f} |")
PY
