# shellcheck shell=bash
# Shared helpers for booting Debian's stock kernels in QEMU (TCG) with virtme-ng.
# Source it:  . scripts/vm/lib.sh
#
# Prerequisites: scripts/vm/install.sh (QEMU >= 8 from bookworm-backports, virtme-ng, udev,
# busybox-static) and scripts/vm/kernels.sh (kernels in /lib/modules/<ver>/vmlinuz).
#
# Main entry points:
#   vm_kernel SHORT                 -> path of the vmlinuz for 6.1 | 6.12 | 6.12-rt | bpo
#   vm_nic_opts virtio|igb HUB0 HUB1 -> QEMU options for two back-to-back NIC pairs
#   vm_nic_opts virtio-mq             -> the same with multi-queue virtio-net on taps (queues
#         VM_MQ_QUEUES, default 4): run vm_mq_up first (VM_NETNS, the taps and bridges), and
#         vm_mq_down after. virtio-mqmax: the same NICs (the guest enables every queue)
#   vm_run VMLINUZ GUEST_CMD [QEMU_OPT...]
#         boots VMLINUZ under TCG (2 vCPUs, 2G by default), runs GUEST_CMD (a shell string)
#         as root inside, prints its stdout/stderr, returns its exit code (124: timeout).
#
# NIC layout (MACs are fixed, so the guest finds each NIC by address, not by name):
#   model  pair side  MAC                 role in gen <-> router <-> sink
#   virtio  0    a    52:54:00:00:00:0a   gen
#   virtio  0    b    52:54:00:00:00:0b   router (upstream)
#   virtio  1    a    52:54:00:00:01:0a   router (downstream)
#   virtio  1    b    52:54:00:00:01:0b   sink
#   igb     0/1  a/b  52:54:00:01:PP:0S   same roles
# Each pair is two NICs on one QEMU hub (-netdev hubport), i.e. a wire between them; the
# hubs are private to the VM, no frame reaches the host's network. A hubport has one queue, so
# virtio-mq puts each NIC on a multi-queue tap instead, the two taps of a pair on one bridge, in
# a network namespace of the run's own (VM_NETNS) where QEMU runs: frames stay in it.
# virtio-mq NICs have the virtio MACs.
# In the guest, `vm_guest_prelude` (prepended to GUEST_CMD by vm_run) defines
#   nic_by_mac MAC     -> interface name,   and   nic MODEL PAIR SIDE -> interface name.

VM_VNG_VENV="${VNG_VENV:-/opt/llrouter-vng}"
VM_VNG="${VM_VNG:-$VM_VNG_VENV/bin/vng}"
VM_MEMORY="${VM_MEMORY:-2G}"
VM_CPUS="${VM_CPUS:-2}"
VM_TIMEOUT="${VM_TIMEOUT:-300}"
# vng runs virtme-run by name: the venv's bin has to be on PATH.
case ":$PATH:" in *":$VM_VNG_VENV/bin:"*) ;; *) PATH="$VM_VNG_VENV/bin:$PATH" ;; esac
export PATH

vm_mirror() { # the Debian mirror this machine already uses (deb822 or one-line); no other host
  local m=""
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -v -- '-security' | grep '/debian/*$' | head -n1 || true)
  if [ -z "$m" ]; then
    m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
          | awk '{for(i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; exit}}' \
          | grep -v -- '-security' | grep '/debian/*$' | head -n1 || true)
  fi
  m="${m:-http://deb.debian.org/debian}"
  echo "${m%/}"
}

vm_kernel() { # SHORT -> /lib/modules/<ver>/vmlinuz (from kernels.sh, without downloading)
  local cache="${LLROUTER_KERNEL_CACHE:-/var/cache/llrouter-kernels}" ver
  ver=$(cat "$cache/$1/version" 2>/dev/null) || { echo "vm: kernel $1 not fetched; run scripts/vm/kernels.sh" >&2; return 1; }
  [ -f "/lib/modules/$ver/vmlinuz" ] || { echo "vm: /lib/modules/$ver/vmlinuz missing; run scripts/vm/kernels.sh" >&2; return 1; }
  echo "/lib/modules/$ver/vmlinuz"
}

vm_mac() { # MODEL PAIR SIDE -> MAC
  local m
  case "$1" in virtio | virtio-mq*) m=00 ;; igb) m=01 ;; *) echo "vm: unknown NIC model $1" >&2; return 1 ;; esac
  printf '52:54:00:%s:%02x:0%s\n' "$m" "$2" "$3"
}

# QEMU options for two back-to-back pairs of MODEL NICs on hubs HUB0 and HUB1.
#  virtio: modern-only virtio-net-pci with VIRTIO_F_ACCESS_PLATFORM (what AF_XDP zero-copy
#          on virtio-net wants), one queue pair each (a hubport netdev has one queue).
#  igb:    emulated 82576 (QEMU >= 8), each port behind its own pcie-root-port so its
#          SR-IOV VFs (sriov_totalvfs=7) get PCIe config space; see VM_IGB_BUS below.
vm_nic_opts() {
  local model="$1" h0="${2:-0}" h1="${3:-1}" pair side hub id out=()
  case "$model" in
    virtio | virtio-mq*) out+=(-global virtio-net-pci.disable-legacy=on -global virtio-net-pci.iommu_platform=on) ;;
    igb)
      if [ "${VM_IGB_BUS:-root-port}" = pci-bridge ]; then
        out+=(-device "pci-bridge,id=igbbr,chassis_nr=1")
      fi ;;
  esac
  local n=0
  for pair in 0 1; do
    [ "$pair" = 0 ] && hub="$h0" || hub="$h1"
    for side in a b; do
      id="${model%-mq*}${pair}${side}"
      case "$model" in
        virtio-mq*)
          # vhost off (TCG); vectors: one per queue, both directions, plus config and control.
          out+=(-netdev "tap,id=$id,ifname=$(vm_mq_tap "$pair" "$side"),script=no,downscript=no,vhost=off,queues=${VM_MQ_QUEUES:-4}")
          out+=(-device "virtio-net-pci,netdev=$id,mq=on,vectors=$((2 * ${VM_MQ_QUEUES:-4} + 2)),mac=$(vm_mac virtio "$pair" "$side")") ;;
        *) out+=(-netdev "hubport,id=$id,hubid=$hub") ;;
      esac
      case "$model" in
        virtio-mq*) ;;
        virtio) out+=(-device "virtio-net-pci,netdev=$id,mac=$(vm_mac virtio "$pair" "$side")") ;;
        igb)
          if [ "${VM_IGB_BUS:-root-port}" = pci-bridge ]; then
            # Conventional PCI bridge: no PCIe extended config space, so no SR-IOV.
            # QEMU places the 7 VFs of a PF at devfn PF+0x80, stride 2 (two slots' worth),
            # so PFs on one bus sit two slots apart (1, 3, 5, 7) or their VFs collide.
            out+=(-device "igb,bus=igbbr,addr=$((2 * n + 1)),netdev=$id,mac=$(vm_mac igb "$pair" "$side")")
          else
            out+=(-device "pcie-root-port,id=igbrp$n,chassis=$((10 + n))")
            out+=(-device "igb,bus=igbrp$n,netdev=$id,mac=$(vm_mac igb "$pair" "$side")")
          fi ;;
      esac
      n=$((n + 1))
    done
  done
  printf '%s\n' "${out[@]}"
}

vm_mq_tap() { echo "llt$$-$1$2"; } # PAIR SIDE -> the tap's name (unique per run)

# vm_mq_up: the network namespace VM_NETNS (created, unique per run) with a multi-queue tap
# per NIC (VM_MQ_QUEUES queues) and a bridge per pair, all up: the wires of virtio-mq.
vm_mq_up() {
  VM_NETNS="llrvm$$"
  export VM_NETNS
  ip netns add "$VM_NETNS" || return 1
  # Plain wires: where br_netfilter is loaded, bridged IPv4/IPv6 would go through the host's
  # netfilter, which drops what the malformed check sends on purpose.
  local k
  for k in iptables ip6tables arptables; do
    ip netns exec "$VM_NETNS" sysctl -qw "net.bridge.bridge-nf-call-$k=0" 2>/dev/null
  done
  local pair side br
  for pair in 0 1; do
    br="llrbr$pair"
    ip -n "$VM_NETNS" link add "$br" mtu 9000 type bridge || return 1
    ip -n "$VM_NETNS" link set "$br" up
    for side in a b; do
      # MTU 9000, as a hub (which has none): the jumbo check sends 9000-byte frames.
      ip -n "$VM_NETNS" tuntap add dev "$(vm_mq_tap "$pair" "$side")" mode tap multi_queue || return 1
      ip -n "$VM_NETNS" link set "$(vm_mq_tap "$pair" "$side")" mtu 9000 master "$br" up || return 1
    done
  done
}

vm_mq_down() { # removes VM_NETNS (its taps and bridges go with it)
  [ -n "${VM_NETNS:-}" ] && ip netns del "$VM_NETNS" 2>/dev/null
  VM_NETNS=""
  return 0
}

# Shell code run in the guest before the caller's command.
vm_guest_prelude() {
  cat <<'EOF'
nic_by_mac() { for _d in /sys/class/net/*; do [ "$(cat "$_d/address" 2>/dev/null)" = "$1" ] && { echo "${_d##*/}"; return 0; }; done; return 1; }
nic() { case "$1" in virtio | virtio-mq*) _m=00 ;; igb) _m=01 ;; *) return 1 ;; esac; nic_by_mac "$(printf '52:54:00:%s:%02x:0%s' "$_m" "$2" "$3")"; }
# virtme-ng's udev coldplug does not load NIC drivers: load them (and wait for the netdevs).
vm_load_nics() { for _mod in "$@"; do [ -d "/sys/module/$_mod" ] || modprobe "$_mod" || echo "modprobe $_mod failed" >&2; done; udevadm settle -t 10 2>/dev/null || sleep 1; }
EOF
}

# vm_run VMLINUZ GUEST_CMD [QEMU_OPT...]
# Extra vng options: the array VM_VNG_EXTRA (e.g. VM_VNG_EXTRA=(--rwdir=/tmp/out)), or
# VM_VERBOSE=1 for the guest's kernel console (vng -v) on stderr.
vm_run() {
  local kernel="$1" cmd="$2"; shift 2
  local qopts="" o name
  for o in "$@"; do qopts+="${qopts:+ }$o"; done
  name="llrouter-vm-$$-$RANDOM"
  # timeout runs vng in its own process group and signals the whole group (python + qemu).
  # QEMU writes the guest's stdout/stderr through its own open of /proc/self/fd/1 (and 2):
  # when those are regular files that open starts at offset 0 and overwrites what the file
  # already holds, so both go through pipes (cat, and grep dropping QEMU's hub warnings).
  # The command goes in a script file, not on --exec: vng passes --exec base64-encoded on the
  # kernel command line, and past 2048 bytes (COMMAND_LINE_SIZE) the kernel panics in early
  # boot (fortify: strlen buffer overflow) and QEMU hangs until the timeout. The guest sees
  # the host's /tmp (as the lower layer of an overlay), so the file is readable there.
  # The guest runs in the background and this shell waits for it: a wait, unlike a foreground
  # command, returns at once when a trapped signal arrives, so the caller's INT/TERM trap can
  # stop the guest (vm_abort) instead of waiting for its timeout (timeout puts QEMU in a
  # process group of its own, which a terminal's Ctrl-C does not reach).
  local rc script
  script=$(mktemp "${VM_TMPDIR:-/tmp}/llrouter-vm.XXXXXX.sh") || return 1
  { vm_guest_prelude; printf '%s\n' "$cmd"; } > "$script"
  chmod 644 "$script"
  local in_ns=()
  [ -n "${VM_NETNS:-}" ] && in_ns=(ip netns exec "$VM_NETNS")
  ( "${in_ns[@]}" timeout -k 15 "$VM_TIMEOUT" "$VM_VNG" --run "$kernel" --disable-kvm --disable-microvm \
      --name "$name" -m "$VM_MEMORY" -p "$VM_CPUS" \
      ${qopts:+--qemu-opts="$qopts"} "${VM_VNG_EXTRA[@]}" ${VM_VERBOSE:+-v} \
      --exec "bash $script" </dev/null \
      2> >(grep -v --line-buffered 'warning: hub [0-9]* is not connected to host network' >&2) | cat
    exit "${PIPESTATUS[0]}"
  ) &
  VM_PID=$!
  wait "$VM_PID"
  rc=$?
  VM_PID=""
  rm -f "$script"
  vm_reap "$name"
  return "$rc"
}

vm_abort() { # stops this shell's guests (for an INT/TERM trap): QEMU, then vng and timeout
  local pid
  for pid in $(pgrep -f -- "-name llrouter-vm-$$-" 2>/dev/null); do kill "$pid" 2>/dev/null; done
  [ -n "${VM_PID:-}" ] && kill "$VM_PID" 2>/dev/null
  wait 2>/dev/null
  return 0
}

vm_reap() { # kill a leftover QEMU of this run (matched by its unique -name), if any
  local pid
  for pid in $(pgrep -f -- "-name $1( |$)" 2>/dev/null); do
    echo "vm: killing leftover qemu $pid ($1)" >&2
    kill "$pid" 2>/dev/null; sleep 1; kill -9 "$pid" 2>/dev/null
  done
  return 0
}
