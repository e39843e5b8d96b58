#!/bin/bash
# The price of QoS under overload (issue 16): flat-out offer, sq beside ll-wfq and ll-rr, in
# rounds that alternate `tx-hold-us` 0 (a transmit kick after every RT grant) and 5 (the
# default), then `testbed costs` over all of them: forwarded rate against sq per hold, the
# grant and flush costs (the hold is what separates them), and the simulator's ratios.
# Root; about 40 s per round. ROUNDS=6 OUT=dir LLROUTER=path/to/llrouter.
set -euo pipefail
ROUNDS=${ROUNDS:-6}
OUT=${OUT:-price-of-qos}
LLROUTER=${LLROUTER:-$(dirname "$0")/../target/release/llrouter}
mkdir -p "$OUT"
dirs=()
for i in $(seq 1 "$ROUNDS"); do
  for h in 0 5; do
    d="$OUT/hold$h-round$i"
    "$LLROUTER" testbed run --targets llrouter:sq,llrouter:ll-wfq,llrouter:ll-rr \
      --loads 3000000 --rt-shares 0.15,0.3 --wake busy --point-secs 2 --tx-hold-us "$h" \
      --out "$d" > "$d.log" 2>&1 || { echo "round $i hold $h failed: $d.log" >&2; exit 1; }
    dirs+=("$d")
  done
done
"$LLROUTER" testbed costs "${dirs[@]}" | tee "$OUT/costs.md"
