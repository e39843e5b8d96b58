#!/usr/bin/env bash
# Boots each Debian kernel (scripts/vm/kernels.sh) in QEMU/TCG with virtme-ng and checks the
# NIC matrix inside the guest: two back-to-back virtio-net pairs and two igb pairs, the
# drivers bound, queue counts (ethtool -l), driver info (ethtool -i), igb SR-IOV room, and a
# ping across each pair between network namespaces (frames stay on the VM's private hubs).
#
# Usage: scripts/vm/boot-check.sh [--trivial] [short-name...]   (default: 6.1 6.12 6.12-rt bpo)
#   --trivial   boot without NICs and run `uname -r` only (measures boot time)
# Env: VM_TIMEOUT (s, default 300), VM_MEMORY (2G), VM_CPUS (2), VM_IGB_BUS (root-port|pci-bridge)
# Prints the guest's output per kernel and a summary line per kernel:
#   boot-check: <short> <rc> <seconds>s <uname -r>
# Exit code: 0 when every kernel booted and every check passed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

trivial=0
[ "${1:-}" = "--trivial" ] && { trivial=1; shift; }
kernels=("$@")
[ "${#kernels[@]}" -gt 0 ] || kernels=(6.1 6.12 6.12-rt bpo)

# Guest side. Any failed check sets fail=1; the script exits with it.
read -r -d '' GUEST <<'EOF'
fail=0
uname -r
vm_load_nics virtio_net igb
ip -br link
for model in virtio igb; do
  for pair in 0 1; do
    for side in a b; do
      i=$(nic $model $pair $side) || { echo "CHECK FAIL: no $model NIC pair $pair side $side"; fail=1; continue; }
      drv=$(basename "$(readlink -f /sys/class/net/$i/device/driver)")
      # virtio-net's netdev hangs off the virtio device, whose parent PCI device is virtio-pci.
      want=$model; [ $model = virtio ] && want=virtio_net
      [ "$drv" = "$want" ] || { echo "CHECK FAIL: $i bound to '$drv', want $want"; fail=1; }
      echo "== $model pair $pair side $side: $i ($(cat /sys/class/net/$i/address)) driver=$drv" \
        "combined=$(ethtool -l $i 2>/dev/null | awk '/^Combined:/{v=$2} END{print v}')" \
        "max_combined=$(ethtool -l $i 2>/dev/null | awk '/^Combined:/{print $2; exit}')" \
        "sriov_totalvfs=$(cat /sys/class/net/$i/device/sriov_totalvfs 2>/dev/null || echo -)"
      if [ $side = a ] && [ $pair = 0 ]; then ethtool -l $i; ethtool -i $i; fi
    done
  done
done
EOF

# Wiring: gen owns pair0/a, router pair0/b + pair1/a, sink pair1/b; one ping per pair.
# TEST-NET addresses; the hubs are internal to QEMU, nothing leaves the VM.
read -r -d '' GUEST_NS <<'EOF'
for model in virtio igb; do
  g=$(nic $model 0 a); r0=$(nic $model 0 b); r1=$(nic $model 1 a); s=$(nic $model 1 b)
  for ns in gen router sink; do ip netns add $ns-$model; ip -n $ns-$model link set lo up; done
  ip link set $g netns gen-$model; ip link set $r0 netns router-$model
  ip link set $r1 netns router-$model; ip link set $s netns sink-$model
  ip -n gen-$model addr add 192.0.2.1/30 dev $g; ip -n gen-$model link set $g up
  ip -n router-$model addr add 192.0.2.2/30 dev $r0; ip -n router-$model link set $r0 up
  ip -n router-$model addr add 198.51.100.1/30 dev $r1; ip -n router-$model link set $r1 up
  ip -n sink-$model addr add 198.51.100.2/30 dev $s; ip -n sink-$model link set $s up
  ok=0
  for t in $(seq 1 20); do   # igb's link comes up a few seconds after ifup under TCG
    ip netns exec gen-$model ping -c1 -W1 192.0.2.2 >/dev/null 2>&1 && \
      ip netns exec sink-$model ping -c1 -W1 198.51.100.1 >/dev/null 2>&1 && { ok=1; break; }
    sleep 1
  done
  if [ $ok = 1 ]; then echo "== $model: gen<->router and router<->sink ping OK (after ${t} tries)"
  else echo "CHECK FAIL: $model ping across the pairs"; ip -n router-$model -br link; fail=1; fi
done
exit $fail
EOF
GUEST="$GUEST
$GUEST_NS"

mapfile -t Q < <(vm_nic_opts virtio 0 1; vm_nic_opts igb 2 3)

rc_all=0
summary=()
for k in "${kernels[@]}"; do
  kimg=$(vm_kernel "$k") || { rc_all=1; summary+=("boot-check: $k MISSING"); continue; }
  echo "######## $k ($kimg)"
  start=$(date +%s%N)
  if [ "$trivial" = 1 ]; then
    out=$(vm_run "$kimg" 'uname -r' 2>&1); rc=$?
  else
    out=$(vm_run "$kimg" "$GUEST" "${Q[@]}" 2>&1); rc=$?
  fi
  ms=$(( ($(date +%s%N) - start) / 1000000 )); secs="$((ms / 1000)).$(( (ms % 1000) / 100 ))"
  echo "$out"
  uname_r=$(echo "$out" | grep -m1 -E '^[0-9]+\.[0-9]+' || echo '?')
  summary+=("boot-check: $k rc=$rc ${secs}s $uname_r")
  [ "$rc" = 0 ] || rc_all=1
done
printf '%s\n' "${summary[@]}"
exit "$rc_all"
