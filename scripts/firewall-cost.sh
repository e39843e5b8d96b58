#!/usr/bin/env bash
# The testbed's forwarding rate with a firewall against none (docs/firewall.md, "Measured"):
# llrouter (ll-wfq) with no ruleset, with a stateless firewall it runs itself (a forward chain
# of 10 rules and a 10 000-prefix blocklist, none matching the test traffic), and with a
# typical stateful router firewall (ct state, policy drop), which it hands to the kernel
# (`--firewall-to-kernel`). Offered load above what any of them forwards; rounds interleave the
# modes; prints the received rate, median [min-max], and its ratio to "none" within each round.
# One testbed topology, removed on exit, error or Ctrl-C.
#
#   ROUNDS=5 LOAD=2000000 SECS=3 bash scripts/firewall-cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
LOAD=${LOAD:-2000000}
SECS=${SECS:-3}
BIN=${BIN:-target/release/llrouter}
OUT=${OUT:-target/firewall-cost}
NAME=llr-fc$$

[[ $(id -u) == 0 ]] || { echo "firewall-cost: needs root (network namespaces, XDP)" >&2; exit 2; }
[[ -x $BIN ]] || { echo "firewall-cost: $BIN missing: cargo build --release" >&2; exit 2; }
command -v nft >/dev/null || { echo "firewall-cost: nft missing: scripts/install-deps.sh" >&2; exit 2; }

cleanup() { "$BIN" testbed down --name "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

BLOCK=$(awk 'BEGIN { for (i = 0; i < 10000; i++) printf "%s10.%d.%d.0/24", (i ? ", " : ""), 100 + int(i / 250), i % 250 }')
ruleset() { # mode
    local rules
    case $1 in
    none) rules="" ;;
    stateless) rules="table inet llrcost {
  set block4 { type ipv4_addr; flags interval; elements = { $BLOCK } }
  chain fw {
    type filter hook forward priority 0; policy accept;
    ip daddr @block4 drop
    ip saddr 192.0.2.0/24 drop
    ip saddr 198.51.100.0/24 drop
    ip6 saddr 2001:db8::/32 drop
    tcp dport { 23, 135, 139, 445 } drop
    udp dport { 137, 138, 161, 1900 } drop
    tcp dport 25 oifname \"veth-rout\" reject
    meta l4proto sctp drop
    icmp type redirect drop
    udp dport 6000-6063 drop
  }
}" ;;
    typical) rules="table inet llrcost {
  chain fw {
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    ct state invalid drop
    iifname \"veth-rin\" accept
    meta l4proto { icmp, ipv6-icmp } accept
  }
}" ;;
    esac
    printf 'flush ruleset\n%s\n' "$rules" | ip netns exec "$NAME-rtr" nft -f -
}

"$BIN" testbed up --name "$NAME" >/dev/null
rm -rf "$OUT" && mkdir -p "$OUT"
for round in $(seq 1 "$ROUNDS"); do
    for mode in none stateless typical; do
        ruleset "$mode"
        dir="$OUT/$mode-$round"
        "$BIN" testbed run --name "$NAME" --targets llrouter:ll-wfq --point-secs "$SECS" \
            --loads "$LOAD" --rt-shares 0.1 --firewall-to-kernel --out "$dir" >"$dir.log" 2>&1 ||
            { echo "firewall-cost: $mode round $round failed: $dir.log" >&2; exit 1; }
        awk -F, -v mode="$mode" -v round="$round" '
            NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
            { print mode, round, $h["sent_pps"], $h["throughput_pps"], $h["loss_rt"] }' \
            "$dir/results.csv" >>"$OUT/rows"
        echo "round $round $mode: $(tail -1 "$OUT/rows")" >&2
    done
done
ruleset none
python3 - "$OUT/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for mode, rnd, sent, got, loss in rows:
    by.setdefault(mode, []).append(dict(round=rnd, sent=float(sent), got=float(got), loss=float(loss) * 100))
none = {r["round"]: r["got"] for r in by["none"]}
def mr(v):
    return f"{statistics.median(v):.4g} [{min(v):.4g}–{max(v):.4g}]"
print("| firewall | rounds | sent pps | forwarded pps | ÷ none | RT loss % |")
print("|---|---|---|---|---|---|")
for mode in ["none", "stateless", "typical"]:
    rs = by.get(mode, [])
    print(f"| {mode} | {len(rs)} | {mr([r['sent'] for r in rs])} | {mr([r['got'] for r in rs])} | "
          f"{mr([r['got'] / none[r['round']] for r in rs])} | {mr([r['loss'] for r in rs])} |")
PY
