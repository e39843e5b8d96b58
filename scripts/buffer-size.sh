#!/bin/bash
# Paper 003, Table 1 and Fig. 13 on the testbed (docs/papers.md): the share of packets
# forwarded against the buffer size, at the paper's offered rates of 64-byte packets, polling
# (`--wake busy`) and interrupt (`--wake interrupt`). The buffer is llrouter's receive ring
# (`--rx-size`); AF_XDP rings here take 64 to 32768 entries, so the paper's b = 10, 100, 1000
# become 64, 128, 1024. One class (RT share 0, as the paper's single flow); the generator paces
# frame by frame (`--gen-backend xsk`), as the paper's "back-to-back" packets at a fixed rate.
# Root; the testbed removes its namespaces, this script its files.
#   usage: scripts/buffer-size.sh [SECS] [LLROUTER]   (defaults 5, target/release/llrouter)
set -euo pipefail
SECS=${1:-5}; BIN=${2:-target/release/llrouter}
LOADS=${LOADS:-9927,29937,49355,70499}
RINGS=${RINGS:-"64 128 1024"}
DIR=$(mktemp -d)
cleanup() { rm -rf "$DIR"; }
trap cleanup EXIT INT TERM
for wake in busy interrupt; do
  for rx in $RINGS; do
    out="$DIR/$wake-$rx"
    "$BIN" testbed run --targets llrouter:ll-wfq --gen-backend xsk --loads "$LOADS" \
      --rt-shares 0 --wake "$wake" --rx-size "$rx" --point-secs "$SECS" --out "$out" \
      >"$out.log" 2>&1 \
      || { echo "testbed run failed ($wake, ring $rx):" >&2; tail -5 "$out.log" >&2; exit 1; }
  done
done
python3 - "$DIR" "$RINGS" <<'PY'
import csv, sys
d, rings = sys.argv[1], sys.argv[2].split()
print("% of the packets sent that the sink received (sent pps in brackets)")
print("| offered pps | wake | " + " | ".join(f"ring {r}" for r in rings) + " |")
print("|---|---|" + "---|" * len(rings))
for wake in ["busy", "interrupt"]:
    rows = {r: list(csv.DictReader(open(f"{d}/{wake}-{r}/results.csv"))) for r in rings}
    for i, first in enumerate(rows[rings[0]]):
        cells = []
        for r in rings:
            x = rows[r][i]
            sent = int(x["sent_rt"]) + int(x["sent_be"])
            recv = int(x["recv_rt"]) + int(x["recv_be"])
            cells.append(f"{100 * recv / sent:.2f} [{float(x['sent_pps']):.0f}]" if sent else "no packets sent")
        print(f"| {float(first['offered_pps']):.0f} | {wake} | " + " | ".join(cells) + " |")
PY
