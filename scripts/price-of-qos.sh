#!/bin/bash
# The price of QoS under overload (issue 16): one router at flat-out offer, its strategy
# switched live between sq, ll-wfq and ll-rr every 0.5 s (`testbed alternate`: each slice is
# set against the sq slices around it, so the VM's own speed changes cancel), at
# `tx-hold-us` 0 (a transmit kick after every RT grant) and 1 (the default), RUNS times
# interleaved; then `testbed costs` over all of them: the grant and flush costs fitted over
# every slice and the simulator's ratios with those costs.
# Root; about 75 s per run. RUNS=2 CYCLES=30 OUT=dir LLROUTER=path/to/llrouter.
set -euo pipefail
RUNS=${RUNS:-2}
CYCLES=${CYCLES:-30}
OUT=${OUT:-price-of-qos}
LLROUTER=${LLROUTER:-$(dirname "$0")/../target/release/llrouter}
mkdir -p "$OUT"
dirs=()
for i in $(seq 1 "$RUNS"); do
  for h in 0 1; do
    d="$OUT/hold$h-run$i"
    "$LLROUTER" testbed alternate --targets llrouter:sq,llrouter:ll-wfq,llrouter:ll-rr \
      --load 3000000 --rt-share 0.15 --wake busy --cycles "$CYCLES" --tx-hold-us "$h" \
      --out "$d" > "$d.log" 2>&1 || { echo "run $i hold $h failed: $d.log" >&2; exit 1; }
    echo "== tx-hold-us $h, run $i"
    grep -E '^\| (sq|ll-)|^Noise' "$d/alternate.md"
    dirs+=("$d")
  done
done
"$LLROUTER" testbed costs "${dirs[@]}" > "$OUT/costs.md"
sed -n '/^Forwarded pps against/,$p' "$OUT/costs.md"
grep -o 'c_g = [^*]*' "$OUT/costs.md" | head -1
