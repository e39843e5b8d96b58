#!/bin/bash
# The route mirror under churn (docs/results.md, "Full table and BIRD"): N /24 routes, then CHURN route replaces
# (alternating two gateways) while the xsk generator sends 50 kpps through one worker; prints
# the worker's longest stall (its longest grant: route updates take no lock the worker waits
# for). Root; removes what it creates. CHURN=0 gives the same run without churn.
#   usage: scripts/mirror-churn.sh N CHURN LLROUTER

set -euo pipefail
N=$1; C=$2; BIN=$3; NAME=llrch$$
cleanup() { [ -n "${PID:-}" ] && kill -INT $PID 2>/dev/null; sleep 1; $BIN testbed down --name $NAME >/dev/null 2>&1 || true; rm -rf /tmp/$NAME; }
trap cleanup EXIT INT TERM
mkdir -p /tmp/$NAME
$BIN testbed up --name $NAME >/dev/null
ip -n $NAME-rtr neigh replace 10.71.2.2 lladdr 02:00:00:00:02:01 dev veth-rout nud permanent
python3 - "$N" "$C" /tmp/$NAME <<'PY'
import sys
n,c,d=int(sys.argv[1]),int(sys.argv[2]),sys.argv[3]
def pfx(i):
    a=0x0B000000+((i%n)<<8); return f"{a>>24}.{(a>>16)&255}.{(a>>8)&255}.0/24"
open(d+"/load","w").write("".join(f"route add {pfx(i)} via 10.71.2.1 dev veth-rout\n" for i in range(n)))
open(d+"/churn","w").write("".join(f"route replace {pfx(i*7919)} via 10.71.2.{2 if (i//n)%2==0 else 1} dev veth-rout\n" for i in range(c)))
PY
ip -n $NAME-rtr -batch /tmp/$NAME/load
cat > /tmp/$NAME/r.toml <<TOML
interfaces = ["veth-rin", "veth-rout"]
cores = [1]
[control]
socket = "/tmp/$NAME/ctl.sock"
[[classes]]
name = "rt"
[[classes]]
name = "be"
[[rules]]
class = "rt"
dscp = 46
TOML
ip netns exec $NAME-rtr $BIN run --config /tmp/$NAME/r.toml 2>/tmp/$NAME/log &
PID=$!
until [ "$($BIN ctl --socket /tmp/$NAME/ctl.sock -j status 2>/dev/null | python3 -c 'import sys,json; print(json.load(sys.stdin).get("routes",0))' 2>/dev/null || echo 0)" -ge "$N" ]; do sleep 0.2; done
ip netns exec $NAME-gen $BIN gen --dst 10.71.2.1 --rate 50000 --duration 12 --backend xsk --cpu 0 > /tmp/$NAME/gen.log 2>&1 &
GP=$!
sleep 1
t0=$(date +%s.%N); [ "$C" -gt 0 ] && ip -n $NAME-rtr -batch /tmp/$NAME/churn; t1=$(date +%s.%N)
echo "churn: $C route replaces in $(echo "$t1 - $t0" | bc) s"
wait $GP
$BIN ctl --socket /tmp/$NAME/ctl.sock -j counters | python3 -c '
import sys,json
d=json.load(sys.stdin)
for w in d.get("workers",[]): print("worker", w["worker"], "longest stall (grant) us %.1f" % (w.get("stall_max_seconds",0)*1e6))
'
tail -3 /tmp/$NAME/gen.log
