#!/usr/bin/env bash
# Installs what the kernel VM matrix (scripts/vm/*.sh) needs on a Debian 12 (bookworm) host:
#   - qemu-system-x86 + qemu-utils from bookworm-backports (QEMU >= 8 is needed for -device igb),
#   - busybox-static (virtme-ng's initramfs), kmod/cpio/zstd (depmod, module extraction),
#   - udev: virtme-ng-init needs systemd-udevd in the guest to create /dev/virtio-ports/*,
#     without which the --exec output/exit code channel falls back to the serial console,
#   - virtme-ng from PyPI in a venv (default /opt/llrouter-vng; $VNG_VENV overrides).
# Idempotent and cheap when everything is already there. Prints the path of vng at the end.
set -euo pipefail

VNG_VENV="${VNG_VENV:-/opt/llrouter-vng}"
VNG_VERSION="${VNG_VERSION:-1.42}"
BPO_LIST=/etc/apt/sources.list.d/llrouter-bookworm-backports.list
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mirror() { vm_mirror; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

qemu_major() {
  qemu-system-x86_64 --version 2>/dev/null | sed -n 's/^QEMU emulator version \([0-9]*\).*/\1/p'
}

updated=0
apt_update() { [ "$updated" = 1 ] || { $SUDO apt-get update -q; updated=1; }; }

# 1. QEMU from bookworm-backports.
if [ "$(qemu_major || echo 0)" -lt 8 ] 2>/dev/null || ! installed qemu-utils; then
  if [ ! -f "$BPO_LIST" ]; then
    m=$(mirror)
    echo "vm-install: adding $BPO_LIST ($m bookworm-backports)"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m bookworm-backports main" \
      | $SUDO tee "$BPO_LIST" >/dev/null
  fi
  apt_update
  $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports \
    qemu-system-x86 qemu-utils
fi

# 2. Other Debian packages (from the host's normal suites).
need=()
for p in busybox-static udev kmod cpio zstd xz-utils python3-venv iproute2 ethtool procps pciutils; do
  installed "$p" || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
  apt_update
  $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# 3. virtme-ng in a venv. Debian's python3 (not a pyenv shim) so the venv does not depend on
# the user's shell setup.
PY=/usr/bin/python3
if ! "$VNG_VENV/bin/vng" --version 2>/dev/null | grep -q "$VNG_VERSION"; then
  echo "vm-install: installing virtme-ng==$VNG_VERSION into $VNG_VENV"
  $SUDO "$PY" -m venv "$VNG_VENV"
  $SUDO "$VNG_VENV/bin/pip" install -q --disable-pip-version-check "virtme-ng==$VNG_VERSION"
fi

echo "vm-install: $(qemu-system-x86_64 --version | head -n1)"
echo "vm-install: vng $("$VNG_VENV/bin/vng" --version 2>&1 | head -n1) at $VNG_VENV/bin/vng"
