#!/usr/bin/env bash
# The kernel × NIC matrix: boots Debian's own kernel packages in QEMU (TCG, virtme-ng over this
# machine's root) with two back-to-back NIC pairs and runs scripts/vm/guest-check.sh in each
# guest, once with zero-copy where the driver offers it (`zero-copy = "auto"`) and once in copy
# mode (`"off"`). Prints the compatibility table and writes it to $OUT (default
# target/vm-matrix.md; docs/compatibility.md publishes a run), and the same rows tab-separated
# with a header to ${OUT%.md}.tsv (what `llrouter results matrix` reads).
#
#   bash scripts/vm/matrix.sh                 # the whole matrix (CI)
#   ROWS="6.1:virtio bpo:igb" bash scripts/vm/matrix.sh
#
# Needs root, scripts/vm/install.sh and scripts/vm/kernels.sh (both run first, both cheap once
# done) and a release build (target/release/llrouter). Exit status 0 only if every row passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
here=$(pwd)
. scripts/vm/lib.sh

# A row is KERNEL:NIC, or KERNEL:NIC@MODES (modes joined by +) to run it in those modes only.
ROWS="${ROWS:-6.1:virtio 6.12:virtio 6.12-rt:virtio bpo:virtio 6.12:igb bpo:igb bpo:virtio-mq bpo:virtio-mqmax 6.12:virtio-mqmax}"
MODES="${MODES:-auto off}"
OUT="${OUT:-target/vm-matrix.md}"
LOG_DIR="${LOG_DIR:-target/vm-matrix-logs}"

[ "$(id -u)" = 0 ] || { echo "vm-matrix: needs root (QEMU guests that run XDP as root)" >&2; exit 1; }
[ -x target/release/llrouter ] || { echo "vm-matrix: build first: cargo build --release" >&2; exit 1; }
bash scripts/vm/install.sh >/dev/null || { echo "vm-matrix: scripts/vm/install.sh failed" >&2; exit 1; }
bash scripts/vm/kernels.sh >/dev/null || { echo "vm-matrix: scripts/vm/kernels.sh failed" >&2; exit 1; }
mkdir -p "$LOG_DIR" "$(dirname "$OUT")"
# The guests run a copy of the binary and the check (the guest sees the host's /tmp), so a
# rebuild while the matrix runs cannot change them under a running guest.
stage=$(mktemp -d /tmp/llrouter-matrix.XXXXXX)
trap 'rm -rf "$stage"; vm_mq_down' EXIT
trap 'vm_abort; exit 130' INT TERM
cp target/release/llrouter scripts/vm/guest-check.sh "$stage/"
export VM_TMPDIR="$stage"

# Inside the guest: load the NIC driver, find the four NICs by MAC, run the check per mode.
guest_cmd() { # MODEL MODES
  local model=$1 modes=$2 mod
  case $model in virtio | virtio-mq*) mod=virtio_net ;; igb) mod=igb ;; esac
  cat <<EOF
vm_load_nics $mod tun
g=\$(nic $model 0 a) r0=\$(nic $model 0 b) r1=\$(nic $model 1 a) s=\$(nic $model 1 b)
[ -n "\$g" ] && [ -n "\$r0" ] && [ -n "\$r1" ] && [ -n "\$s" ] || { echo "ROW $model|-|-|-|-|-|-|0/1|no NICs"; exit 1; }
if [ "$model" = virtio-mqmax ]; then
  # The router's NICs on every queue pair the device has, more than the vCPUs (the driver
  # enables one per vCPU). Not the generator's: its XDP transmit (the rt check's flood) then
  # crashes Linux 6.12's virtio_net (virtnet_xdp_xmit, NULL pointer in virtqueue_get_buf).
  for i in \$r0 \$r1; do ethtool -L \$i combined \$(ethtool -l \$i | awk '/^Combined:/{print \$2; exit}') || echo "ethtool -L \$i failed"; done
fi
echo "channels \$r0: \$(ethtool -l \$r0 2>/dev/null | awk '/^Combined:/{v=\$2} END{print v}') combined"
rc=0
for m in $modes; do
  LLR=$stage/llrouter bash $stage/guest-check.sh "$model/\$m" "\$g" "\$r0" "\$r1" "\$s" "\$m" || rc=1
done
exit \$rc
EOF
}

rows=() retried=() failures=() fail=0
t_all=$(date +%s)
for row in $ROWS; do
  k=${row%%:*} model=${row#*:} row_modes=$MODES
  case $model in *@*) row_modes=${model#*@} row_modes=${row_modes//+/ } model=${model%@*} ;; esac
  kernel=$(vm_kernel "$k") || { rows+=("$k|-|$model|-|-|-|-|-|0/1|kernel missing"); fail=1; continue; }
  mapfile -t qopts < <(vm_nic_opts "$model")
  log="$LOG_DIR/$k-$model.log"
  echo "== $k ($(basename "$(dirname "$kernel")")) × $model"
  # The guest's kernel console goes into the log (VM_VERBOSE), so a guest that dies in early
  # boot leaves its panic there. A guest that died before printing anything of the check (vng's
  # 255: QEMU gone without the command's exit code) is booted once more; the table says so and
  # the first log is kept beside the row's. A failed check is never retried.
  for attempt in 1 2; do
    t0=$(date +%s)
    # Its own variable: lib.sh has already set VM_TIMEOUT (300 s, for a single boot) when it
    # was sourced, so `${VM_TIMEOUT:-600}` here never gave a row its 600 s; an igb guest
    # running both modes takes about 300 s on TCG and was cut in the second.
    if [ "${model#virtio-mq}" != "$model" ]; then
      vm_mq_up || { echo "vm-matrix: cannot set up the taps of $model" >&2; vm_mq_down; rc=1; break; }
    fi
    VM_VERBOSE=1 VM_TIMEOUT="${VM_ROW_TIMEOUT:-600}" vm_run "$kernel" "$(guest_cmd "$model" "$row_modes")" "${qopts[@]}" >"$log" 2>&1
    rc=$?
    vm_mq_down
    secs=$(( $(date +%s) - t0 ))
    if [ "$attempt" = 1 ] && [ "$rc" = 255 ] && ! grep -qE "^(CHECK|ROW|channels) " "$log"; then
      mv "$log" "$log.boot-failed"
      echo "   guest died before the check started (exit 255 after ${secs}s); booting it again. Its console's last lines:"
      grep -v "warning: hub" "$log.boot-failed" | tail -15 | sed 's/^/   | /'
      retried+=("$k × $model: the first boot died after ${secs}s before the check began (exit 255); log $log.boot-failed")
      continue
    fi
    break
  done
  grep -E "^(CHECK|ROW|channels|  )" "$log" | sed 's/^/   /'
  got=$(grep -c "^ROW " "$log")
  while IFS= read -r l; do rows+=("$k|${l#ROW }"); done < <(grep "^ROW " "$log")
  # A failed check's own line (and what it printed after) goes under the table too: CI shows
  # the end of the output, and the table names a failed check only.
  while IFS= read -r l; do failures+=("$k × $model: $l"); done < <(awk '/^CHECK [a-z0-9]* FAIL/ {on=1; print; next} on && /^  / {print; next} {on=0}' "$log" | cut -c1-600)
  want=$(wc -w <<<"$row_modes")
  if [ "$rc" != 0 ] || [ "$got" != "$want" ]; then
    fail=1
    [ "$got" = "$want" ] || { rows+=("$k|$model|-|-|-|-|-|-|-|guest exited $rc after ${secs}s; log $log"); tail -20 "$log" | sed 's/^/   | /'; }
  fi
  echo "   ($secs s)"
done

{
  echo "| kernel (Debian package) | row | release | driver | XDP | mode | queues | MTU 9000 | checks | failed |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
  echo
  for r in "${failures[@]}"; do echo "Failed: $r"; done
  [ "${#failures[@]}" = 0 ] || echo
  for r in "${retried[@]}"; do echo "Booted twice: $r."; done
  [ "${#retried[@]}" = 0 ] || echo
  echo "Generated by \`bash scripts/vm/matrix.sh\` on $(date -u +%Y-%m-%d) in $(( $(date +%s) - t_all )) s (QEMU TCG, 2 vCPUs)."
} >"$OUT"
{
  printf 'kernel\trow\trelease\tdriver\txdp\tmode\tqueues\tmtu9000\tchecks\tfailed\n'
  for r in "${rows[@]}"; do printf '%s\n' "${r//|/$'\t'}"; done
} >"${OUT%.md}.tsv"
cat "$OUT"
exit "$fail"
