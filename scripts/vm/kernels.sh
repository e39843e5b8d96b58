#!/usr/bin/env bash
# Fetches Debian's stock kernel packages and prepares them for booting with virtme-ng
# (scripts/vm/lib.sh). Kernels (short name -> Debian metapackage @ suite):
#   6.1      linux-image-amd64     @ bookworm           (Debian 12)
#   6.12     linux-image-amd64     @ trixie             (Debian 13)
#   6.12-rt  linux-image-rt-amd64  @ trixie             (Debian 13, PREEMPT_RT)
#   bpo      linux-image-amd64     @ trixie-backports   (newest backported kernel)
#
# apt runs with a private configuration (its own sources list, lists, cache and an empty
# dpkg status) under $LLROUTER_KERNEL_CACHE/apt, so the host's apt setup is untouched. The
# metapackage's dependencies are resolved with apt-cache depends (newer kernels split into
# linux-image-*, linux-binary-*, linux-modules-* and linux-base-*), fetched with apt-get download and
# unpacked with dpkg-deb -x into $LLROUTER_KERNEL_CACHE/<short>/root.
#
# virtme-ng boots the host's root filesystem, so the guest loads modules from the host's
# /lib/modules/<version>: each kernel's module tree is copied there, with the image as
# /lib/modules/<version>/vmlinuz (the path to boot), and depmod is run for it.
# The running host kernel's own /lib/modules/$(uname -r) is never touched.
#
# A kernel already in the cache is not downloaded again (set LLROUTER_KERNELS_REFRESH=1 to
# look for newer packages). Usage: kernels.sh [short-name...]   (default: all four)
# Output, one line per kernel:  <short> <version> /lib/modules/<version>/vmlinuz
set -euo pipefail

CACHE="${LLROUTER_KERNEL_CACHE:-/var/cache/llrouter-kernels}"
REFRESH="${LLROUTER_KERNELS_REFRESH:-0}"
ALL=(6.1 6.12 6.12-rt bpo)

log() { echo "kernels: $*" >&2; }

# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
mirror() { vm_mirror; }

spec() { # short -> "suite metapackage"
  case "$1" in
    6.1) echo "bookworm linux-image-amd64" ;;
    6.12) echo "trixie linux-image-amd64" ;;
    6.12-rt) echo "trixie linux-image-rt-amd64" ;;
    bpo) echo "trixie-backports linux-image-amd64" ;;
    *) echo "kernels: unknown kernel '$1' (known: ${ALL[*]})" >&2; return 1 ;;
  esac
}

# Private apt configuration for one suite (one state dir per suite, so the same
# metapackage name resolves to that suite's candidate without pinning).
APT_OPTS=()
apt_setup() {
  local suite="$1" d="$CACHE/apt/$1"
  mkdir -p "$d/sources.list.d" "$d/preferences.d" "$d/lists/partial" "$d/cache/archives/partial"
  : > "$d/status.empty"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(mirror) $suite main" \
    > "$d/sources.list"
  APT_OPTS=(
    -o "Dir::Etc::sourcelist=$d/sources.list"
    -o "Dir::Etc::sourceparts=$d/sources.list.d"
    -o "Dir::Etc::preferences=$d/preferences"
    -o "Dir::Etc::preferencesparts=$d/preferences.d"
    -o "Dir::State::Lists=$d/lists"
    -o "Dir::State::status=$d/status.empty"
    -o "Dir::Cache=$d/cache"
    -o "APT::Architectures::=amd64"
    -o "APT::Architecture=amd64"
    -o "APT::Sandbox::User=root"
    -o "Acquire::Languages=none"
  )
  if [ ! -e "$d/updated" ] || [ "$REFRESH" = 1 ]; then
    log "apt-get update ($suite, private config in $d)"
    apt-get "${APT_OPTS[@]}" -q update >&2
    touch "$d/updated"
  fi
}

# Concrete kernel packages the metapackage pulls in: follow Depends through packages named
# linux-image-*, linux-binary-*, linux-modules-* or linux-base-<ver>-<flavour> (the latter
# carries config, System.map and modules.builtin*; not the plain linux-base, initramfs-tools...).
resolve() {
  local -A seen=()
  local queue=("$1") p deps d out=()
  while [ "${#queue[@]}" -gt 0 ]; do
    p="${queue[0]}"; queue=("${queue[@]:1}")
    [ -n "${seen[$p]:-}" ] && continue
    seen[$p]=1
    out+=("$p")
    deps=$(apt-cache "${APT_OPTS[@]}" depends --no-recommends --no-suggests --no-conflicts \
             --no-breaks --no-replaces --no-enhances "$p" 2>/dev/null \
           | sed -n 's/^ *|\{0,1\}\(Pre\)\{0,1\}Depends: \([^<> ]*\).*/\2/p')
    for d in $deps; do
      case "$d" in
        linux-image-*|linux-binary-*|linux-modules-*|linux-base-*) queue+=("$d") ;;
      esac
    done
  done
  printf '%s\n' "${out[@]}"
}

# Copy one kernel's module tree into the host's /lib/modules/<ver> and run depmod.
install_modules() {
  local short="$1" ver="$2" img="$3" src
  if [ "$ver" = "$(uname -r)" ]; then
    log "$short: $ver is the running host kernel; not touching /lib/modules/$ver"
    return 0
  fi
  src="$CACHE/$short/root/lib/modules/$ver"
  [ -d "$src" ] || src="$CACHE/$short/root/usr/lib/modules/$ver"
  [ -d "$src" ] || { log "$short: no module tree for $ver in the packages"; return 1; }
  if [ -f "/lib/modules/$ver/.llrouter-stamp" ] && [ -f "/lib/modules/$ver/vmlinuz" ] && \
     cmp -s "/lib/modules/$ver/.llrouter-stamp" "$CACHE/$short/stamp"; then
    return 0
  fi
  log "$short: installing kernel and modules into /lib/modules/$ver and running depmod"
  rm -rf "/lib/modules/$ver"
  mkdir -p "/lib/modules/$ver"
  cp -a "$src/." "/lib/modules/$ver/"
  # The image goes next to its modules (Debian's newer layout): vng --run on a kernel whose
  # root resolves to "/" uses the guest's (= host's) /lib/modules/<ver> as is. A kernel
  # booted from elsewhere (e.g. this cache) gets its modules symlinked into a tmpfs on
  # /lib/modules instead, and virtme-ng-init hides /var/cache behind a tmpfs in the guest,
  # so booting from $CACHE would find no modules.
  [ -f "/lib/modules/$ver/vmlinuz" ] || cp "$img" "/lib/modules/$ver/vmlinuz"
  local f
  for f in config System.map; do
    [ -f "$CACHE/$short/root/boot/$f-$ver" ] && [ ! -f "/lib/modules/$ver/$f" ] && \
      cp "$CACHE/$short/root/boot/$f-$ver" "/lib/modules/$ver/$f"
  done
  if [ -f "/lib/modules/$ver/System.map" ]; then
    depmod -a -F "/lib/modules/$ver/System.map" "$ver"
  else
    depmod -a "$ver" 2>&1 | grep -v 'could not open modules\.' >&2 || true
  fi
  cp "$CACHE/$short/stamp" "/lib/modules/$ver/.llrouter-stamp"
}

fetch_one() {
  local short="$1" suite meta
  read -r suite meta < <(spec "$short")
  local dir="$CACHE/$short"
  if [ -f "$dir/stamp" ] && [ "$REFRESH" != 1 ]; then
    :
  else
    apt_setup "$suite"
    local pkgs=() p vers want
    mapfile -t pkgs < <(resolve "$meta")
    [ "${#pkgs[@]}" -gt 1 ] || { log "$short: could not resolve $meta in $suite"; return 1; }
    want=""
    for p in "${pkgs[@]}"; do
      vers=$(apt-cache "${APT_OPTS[@]}" policy "$p" | sed -n 's/^ *Candidate: //p')
      want+="$p=$vers"$'\n'
    done
    if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$want" ]; then
      log "$short: cache is up to date"
    else
      log "$short: fetching $(tr '\n' ' ' <<<"$want")"
      rm -rf "$dir.new"; mkdir -p "$dir.new/debs" "$dir.new/root"
      # shellcheck disable=SC2086
      (cd "$dir.new/debs" && apt-get "${APT_OPTS[@]}" -q download $want >&2)
      for p in "$dir.new"/debs/*.deb; do
        # Only the kernel image and modules are needed; skip metapackages' docs.
        dpkg-deb -x "$p" "$dir.new/root"
      done
      printf '%s' "$want" > "$dir.new/stamp"
      rm -rf "$dir.new/debs"
      rm -rf "$dir"; mv "$dir.new" "$dir"
    fi
  fi
  # Older packages ship /boot/vmlinuz-<ver>; newer ones (linux-binary-*) ship
  # /usr/lib/modules/<ver>/vmlinuz.
  local vmlinuz ver
  vmlinuz=$(ls -1 "$dir"/root/boot/vmlinuz-* 2>/dev/null | head -n1 || true)
  if [ -n "$vmlinuz" ]; then
    ver="${vmlinuz##*/vmlinuz-}"
  else
    vmlinuz=$(ls -1 "$dir"/root/usr/lib/modules/*/vmlinuz "$dir"/root/lib/modules/*/vmlinuz \
                2>/dev/null | head -n1 || true)
    [ -n "$vmlinuz" ] || { log "$short: no vmlinuz in the extracted packages"; return 1; }
    ver="${vmlinuz%/vmlinuz}"; ver="${ver##*/}"
  fi
  echo "$ver" > "$dir/version"
  install_modules "$short" "$ver" "$vmlinuz"
  echo "$short $ver /lib/modules/$ver/vmlinuz"
}

if ! command -v dpkg-deb >/dev/null || ! command -v depmod >/dev/null; then
  log "dpkg-deb and depmod (kmod) are needed; run scripts/vm/install.sh"; exit 1
fi
[ "$(id -u)" -eq 0 ] || { log "must run as root (writes $CACHE and /lib/modules)"; exit 1; }
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

want=("$@")
[ "${#want[@]}" -gt 0 ] || want=("${ALL[@]}")
rc=0
for k in "${want[@]}"; do
  fetch_one "$k" || { log "$k: FAILED"; rc=1; }
done
exit "$rc"
