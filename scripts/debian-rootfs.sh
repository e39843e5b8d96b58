#!/usr/bin/env bash
# A clean Debian root file system with systemd, for the package test (tests/package_debian.rs):
# debootstrap's minbase of SUITE (default bookworm) plus systemd, dbus, iproute2 and nftables
# (the package depends on it: llrouter reads the host's ruleset with nft), made once
# and kept in $LLROUTER_ROOTFS_CACHE (default /var/cache/llrouter-rootfs/SUITE; about 250 MB).
# Prints its path. Needs root, debootstrap and the network (deb.debian.org or $DEBIAN_MIRROR).
set -euo pipefail
suite="${1:-bookworm}"
cache="${LLROUTER_ROOTFS_CACHE:-/var/cache/llrouter-rootfs}"
root="$cache/$suite"
if [ ! -x "$root/lib/systemd/systemd" ] || [ ! -x "$root/usr/sbin/nft" ]; then
    mkdir -p "$cache"
    tmp="$root.tmp.$$"
    trap 'rm -rf "$tmp"' EXIT
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,iproute2,nftables \
        "$suite" "$tmp" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >&2
    rm -rf "$root"
    mv "$tmp" "$root"
fi
echo "$root"
