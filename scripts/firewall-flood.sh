#!/usr/bin/env bash
# RT traffic beside a flood the host's firewall drops (docs/firewall.md, "Measured"): the same
# RT rate alone, with the flood dropped by a prerouting rule (which the XDP classifier takes),
# and with it dropped by a forward-chain rule (which the workers judge after the rings).
# Rounds interleave the three; prints median [min-max] per mode and the RT p99 ratio to
# "alone" within each round. One testbed topology, removed on exit, error or Ctrl-C.
#
#   ROUNDS=5 LOAD=600000 RT_SHARE=0.1 SECS=3 WAKE=interrupt bash scripts/firewall-flood.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
LOAD=${LOAD:-600000}
RT_SHARE=${RT_SHARE:-0.1}
SECS=${SECS:-3}
WAKE=${WAKE:-interrupt}
# More `llrouter testbed run` options for every run, e.g. "--sink-on-gen-cpu".
EXTRA=${EXTRA:-}
BIN=${BIN:-target/release/llrouter}
OUT=${OUT:-target/firewall-flood}
NAME=llr-ff$$
BLOCKED=10.71.2.2

[[ $(id -u) == 0 ]] || { echo "firewall-flood: needs root (network namespaces, XDP)" >&2; exit 2; }
[[ -x $BIN ]] || { echo "firewall-flood: $BIN missing: cargo build --release" >&2; exit 2; }
command -v nft >/dev/null || { echo "firewall-flood: nft missing: scripts/install-deps.sh" >&2; exit 2; }

cleanup() { "$BIN" testbed down --name "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

ruleset() { # mode
    local rules
    case $1 in
    alone) rules="" ;;
    xdp) rules="table inet llrflood {
  chain pre {
    type filter hook prerouting priority -150; policy accept;
    ip daddr $BLOCKED drop
  }
}" ;;
    worker) rules="table inet llrflood {
  chain fw {
    type filter hook forward priority 0; policy accept;
    ip daddr $BLOCKED drop
  }
}" ;;
    esac
    printf 'flush ruleset\n%s\n' "$rules" | ip netns exec "$NAME-rtr" nft -f -
}

"$BIN" testbed up --name "$NAME" >/dev/null
rm -rf "$OUT" && mkdir -p "$OUT"
RT_RATE=$(awk -v l="$LOAD" -v s="$RT_SHARE" 'BEGIN { printf "%d", l * s }')
for round in $(seq 1 "$ROUNDS"); do
    for mode in alone xdp worker; do
        ruleset "$mode"
        if [[ $mode == alone ]]; then
            args=(--loads "$RT_RATE" --rt-shares 1.0)
        else
            args=(--loads "$LOAD" --rt-shares "$RT_SHARE" --be-dst "$BLOCKED")
        fi
        dir="$OUT/$mode-$round"
        "$BIN" testbed run --name "$NAME" --targets llrouter:ll-wfq --point-secs "$SECS" --wake "$WAKE" \
            --out "$dir" "${args[@]}" $EXTRA >"$dir.log" 2>&1 ||
            { echo "firewall-flood: $mode round $round failed: $dir.log" >&2; exit 1; }
        awk -F, -v mode="$mode" -v round="$round" '
            NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
            { print mode, round, $h["sent_rt"], $h["sent_be"], $h["loss_rt"], $h["rt_p99_us"],
                $h["hi_ring_drops"], $h["router_cpu_s"] }' "$dir/results.csv" >>"$OUT/rows"
        echo "round $round $mode: $(tail -1 "$OUT/rows")" >&2
    done
done
ruleset alone
python3 - "$OUT/rows" "$SECS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
secs = float(sys.argv[2])
by = {}
for mode, rnd, srt, sbe, loss, p99, drops, cpu in rows:
    by.setdefault(mode, []).append(dict(round=rnd, rt_pps=float(srt) / secs, be_pps=float(sbe) / secs,
        loss=float(loss) * 100, p99=float(p99), drops=float(drops), cpu=float(cpu) / secs * 100))
alone = {r["round"]: r["p99"] for r in by["alone"]}
def mr(v):
    return f"{statistics.median(v):.4g} [{min(v):.4g}–{max(v):.4g}]"
print("| mode | rounds | RT sent pps | flood sent pps | RT loss % | RT p99 µs | RT p99 ÷ alone | RT ring drops | worker CPU % |")
print("|---|---|---|---|---|---|---|---|---|")
for mode in ["alone", "xdp", "worker"]:
    rs = by.get(mode, [])
    ratio = [r["p99"] / alone[r["round"]] for r in rs]
    print(f"| {mode} | {len(rs)} | {mr([r['rt_pps'] for r in rs])} | {mr([r['be_pps'] for r in rs])} | "
          f"{mr([r['loss'] for r in rs])} | {mr([r['p99'] for r in rs])} | {mr(ratio)} | "
          f"{mr([r['drops'] for r in rs])} | {mr([r['cpu'] for r in rs])} |")
PY
