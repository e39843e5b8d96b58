#!/usr/bin/env bash
# The headline figures of two builds, side by side (docs/results.md, "Between builds"): builds
# the git revisions OLD and NEW, brings up one testbed, and measures each point with each build
# in turn, the two builds alternating within every round, ROUNDS rounds:
#   flat      ll-wfq offered 2 Mpps, 30 % RT (above what it forwards): forwarded pps, and the
#             workers' CPU time per packet (`worker_ns_per_pkt`, schedstat: steal left out)
#   overload  ll-wfq at OVERLOAD pps, 30 % RT: RT loss and RT p99
# Prints, per figure, each build's median [min-max] and the ratio new/old: median [min-max] of
# the ratios of the rounds' pairs. The same generator and sink (NEW's) serve both builds; only
# the router differs (`testbed run --router-bin`). Worktrees, testbed and builds' scratch are
# removed on exit, error or Ctrl-C. The rounds also go to OUT/ab.tsv and the table to OUT/ab.md
# (`llrouter results between-builds` reads them). The same revision twice (`bash scripts/ab.sh
# HEAD HEAD`) measures the noise a change's ratios are read against.
#
#   OLD=HEAD~1 NEW=HEAD ROUNDS=5 OVERLOAD=600000 SECS=3 bash scripts/ab.sh
#   bash scripts/ab.sh OLD NEW      # the same, revisions as arguments
# BUILD_DIR (default OUT) holds the worktrees and the shared cargo target directory.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:-${OLD:-HEAD~1}}
NEW=${2:-${NEW:-HEAD}}
ROUNDS=${ROUNDS:-5}
OVERLOAD=${OVERLOAD:-600000}
SECS=${SECS:-3}
OUT=${OUT:-target/ab}
BUILD_DIR=${BUILD_DIR:-$OUT}
NAME=llr-ab$$

[[ $(id -u) == 0 ]] || { echo "ab: needs root (network namespaces, XDP)" >&2; exit 2; }
for rev in "$OLD" "$NEW"; do
    git rev-parse --verify --quiet "$rev^{commit}" >/dev/null ||
        { echo "ab: OLD/NEW: $rev is not a commit of this repository" >&2; exit 2; }
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "ab: ROUNDS: $ROUNDS is not a positive count" >&2; exit 2; }
(($# <= 2)) || { echo "ab: at most two arguments, OLD and NEW; got $#" >&2; exit 2; }

trees=()
cleanup() {
    [[ -x $BUILD_DIR/llrouter-new ]] && { "$BUILD_DIR/llrouter-new" testbed down --name "$NAME" >/dev/null 2>&1 || true; }
    for t in "${trees[@]}"; do git worktree remove --force "$t" >/dev/null 2>&1 || true; done
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT" "$BUILD_DIR"
# One target directory for both, so that the second build recompiles what differs only.
for side in old new; do
    rev=$OLD
    [[ $side == new ]] && rev=$NEW
    tree="$BUILD_DIR/src-$side"
    git worktree remove --force "$tree" >/dev/null 2>&1 || true
    git worktree add --detach "$tree" "$rev" >/dev/null
    trees+=("$tree")
    echo "ab: building $side = $(git rev-parse --short "$rev")" >&2
    target=$(realpath -m "$BUILD_DIR/target")
    CARGO_TARGET_DIR="$target" cargo build --release --quiet --manifest-path "$tree/Cargo.toml" --bin llrouter
    cp "$target/release/llrouter" "$BUILD_DIR/llrouter-$side"
done

"$BUILD_DIR/llrouter-new" testbed up --name "$NAME" >/dev/null
printf 'side\tpoint\tround\tpps\tworker_ns\tloss_rt_pct\trt_p99_us\n' >"$OUT/ab.tsv"
for round in $(seq 1 "$ROUNDS"); do
    # Alternate which build goes first, so that neither always runs on the warmer machine.
    order="old new"
    ((round % 2 == 0)) && order="new old"
    for side in $order; do
        for point in flat overload; do
            load=2000000
            [[ $point == overload ]] && load=$OVERLOAD
            dir="$OUT/$side-$point-$round"
            "$BUILD_DIR/llrouter-new" testbed run --name "$NAME" --router-bin "$BUILD_DIR/llrouter-$side" \
                --targets llrouter:ll-wfq --point-secs "$SECS" --loads "$load" --rt-shares 0.3 \
                --out "$dir" >"$dir.log" 2>&1 ||
                { echo "ab: $side $point round $round failed: $dir.log" >&2; exit 1; }
            awk -F, -v OFS='\t' -v side="$side" -v point="$point" -v round="$round" '
                NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
                { print side, point, round, $h["throughput_pps"], $h["worker_ns_per_pkt"],
                        100 * $h["loss_rt"], $h["rt_p99_us"] }' "$dir/results.csv" >>"$OUT/ab.tsv"
        done
        echo "ab: round $round $side done" >&2
    done
done
python3 - "$OUT/ab.tsv" "$(git rev-parse --short "$OLD")" "$(git rev-parse --short "$NEW")" <<'PY' | tee "$OUT/ab.md"
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()[1:]]
old, new = sys.argv[2], sys.argv[3]
val = {}
for side, point, rnd, pps, ns, loss, p99 in rows:
    for fig, v in (("forwarded pps", pps), ("worker ns per packet", ns), ("RT loss %", loss), ("RT p99 µs", p99)):
        val[(side, point, fig, rnd)] = float(v)
figures = [("flat", "forwarded pps"), ("flat", "worker ns per packet"), ("overload", "RT loss %"), ("overload", "RT p99 µs")]
rounds = sorted({r[2] for r in rows}, key=int)
def mr(v):
    return f"{statistics.median(v):.4g} [{min(v):.4g}–{max(v):.4g}]" if v else "–"
print(f"| point | figure | old {old} | new {new} | new ÷ old |")
print("|---|---|---|---|---|")
for point, fig in figures:
    o = [val[("old", point, fig, r)] for r in rounds if ("old", point, fig, r) in val]
    n = [val[("new", point, fig, r)] for r in rounds if ("new", point, fig, r) in val]
    ratios = [val[("new", point, fig, r)] / val[("old", point, fig, r)] for r in rounds
              if val.get(("old", point, fig, r))]
    print(f"| {point} | {fig} | {mr(o)} | {mr(n)} | {mr(ratios)} |")
PY
