#!/usr/bin/env bash
# The testbed's forwarding rate with a firewall against none (docs/firewall.md, "Measured"):
# llrouter (ll-wfq) with no ruleset, with a stateless firewall it runs itself (a forward chain
# of 10 rules and a 10 000-prefix blocklist, none matching the test traffic), and with a
# typical stateful router firewall (ct state, policy drop) in two ways: "typical", where the
# generator's one-way UDP flows never become established connections, so the kernel forwards
# them all; and "typical-est", where each flow was answered once by the sink before the run
# (one datagram each way per flow), so its connection is established and llrouter carries it.
# Offered load above what any of them forwards; rounds interleave the modes; prints the
# received rate, median [min-max], its ratio to "none" within each round, RT loss and RT p99.
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
    typical | typical-est) rules="table inet llrcost {
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

# One datagram from each generator flow's source port (20000 + flow, llr-traffic's
# SPORT_BASE) to both sink ports, answered by the sink: the kernel's conntrack then holds
# every flow of the run as an established connection.
FLOWS=16
establish() {
    ip netns exec "$NAME-sink" python3 - "$FLOWS" <<'PY' &
import select, socket, sys
socks = []
for port in (9000, 9001):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port)); socks.append(s)
left = 2 * int(sys.argv[1])
while left:
    ready, _, _ = select.select(socks, [], [], 3)
    if not ready:
        sys.exit("establish: the generator's datagrams did not arrive")
    for s in ready:
        data, peer = s.recvfrom(64)
        s.sendto(b"ok", peer)
        left -= 1
PY
    local answerer=$!
    sleep 0.3
    ip netns exec "$NAME-gen" python3 - "$FLOWS" <<'PY'
import socket, sys
for f in range(int(sys.argv[1])):
    for port in (9000, 9001):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", 20000 + f)); s.settimeout(2)
        s.sendto(b"hello", ("10.71.2.1", port))
        s.recv(64)
        s.close()
PY
    wait "$answerer"
}

# Empties the router's connection table (ctnetlink: IPCTNL_MSG_CT_DELETE without a tuple is a
# flush), so that no round inherits the established connections of the one before.
forget_connections() {
    ip netns exec "$NAME-rtr" python3 - <<'PY'
import socket, struct
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)  # NETLINK_NETFILTER
s.bind((0, 0))
for family in (socket.AF_INET, socket.AF_INET6):
    # nlmsghdr (type: CTNETLINK << 8 | DELETE; REQUEST | ACK), nfgenmsg
    s.send(struct.pack("=IHHII", 20, (1 << 8) | 2, 1 | 4, family, 0) + struct.pack("=BBH", family, 0, 0))
    err = struct.unpack_from("=i", s.recv(4096), 16)[0]
    if err not in (0, -2):  # ENOENT: conntrack not loaded, nothing to flush
        raise SystemExit(f"conntrack flush: errno {-err}")
PY
}

"$BIN" testbed up --name "$NAME" >/dev/null
rm -rf "$OUT" && mkdir -p "$OUT"
for round in $(seq 1 "$ROUNDS"); do
    for mode in none stateless typical typical-est; do
        ruleset "$mode"
        forget_connections
        [[ $mode == typical-est ]] && establish
        dir="$OUT/$mode-$round"
        "$BIN" testbed run --name "$NAME" --targets llrouter:ll-wfq --point-secs "$SECS" \
            --loads "$LOAD" --rt-shares 0.1 --flows "$FLOWS" --out "$dir" >"$dir.log" 2>&1 ||
            { echo "firewall-cost: $mode round $round failed: $dir.log" >&2; exit 1; }
        awk -F, -v mode="$mode" -v round="$round" '
            NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; next }
            { print mode, round, $h["sent_pps"], $h["throughput_pps"], $h["loss_rt"], $h["rt_p99_us"] }' \
            "$dir/results.csv" >>"$OUT/rows"
        echo "round $round $mode: $(tail -1 "$OUT/rows")" >&2
    done
done
ruleset none
python3 - "$OUT/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for mode, rnd, sent, got, loss, p99 in rows:
    by.setdefault(mode, []).append(dict(round=rnd, sent=float(sent), got=float(got), loss=float(loss) * 100, p99=float(p99)))
none = {r["round"]: r["got"] for r in by["none"]}
def mr(v):
    return f"{statistics.median(v):.4g} [{min(v):.4g}–{max(v):.4g}]"
print("| firewall | rounds | sent pps | forwarded pps | ÷ none | RT loss % | RT p99 µs |")
print("|---|---|---|---|---|---|---|")
for mode in ["none", "stateless", "typical", "typical-est"]:
    rs = by.get(mode, [])
    print(f"| {mode} | {len(rs)} | {mr([r['sent'] for r in rs])} | {mr([r['got'] for r in rs])} | "
          f"{mr([r['got'] / none[r['round']] for r in rs])} | {mr([r['loss'] for r in rs])} | "
          f"{mr([r['p99'] for r in rs])} |")
PY
