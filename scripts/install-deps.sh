#!/usr/bin/env bash
# Installs what llrouter needs to build and test on a fresh Debian machine.
# Idempotent: packages already present are skipped, so it is cheap to run every time.
set -euo pipefail

need_pkgs=()
# clang/llvm compile the eBPF classifier (bpf/*.c) at build time; libbpf-dev ships bpf_helpers.h.
# iproute2 and ethtool drive the namespace testbed and hardware steering; fonts-dejavu-core
# gives the PNG plots a font without fontconfig. iperf3 and tracepath are the ordinary host
# tools the tests send through the router (TCP goodput, path-MTU discovery). bird2 is the
# routing daemon the full-table test runs in the namespaces (BGP into the router's kernel
# table, which llrouter mirrors); the tests start their own instances, never the host's service.
# nftables and iptables: the router reads the host's ruleset with nft (and iptables-legacy-save),
# and the firewall tests load real rulesets into the router namespace.
pkgs=(clang llvm libbpf-dev iproute2 ethtool iputils-ping iputils-tracepath iperf3 fonts-dejavu-core pkg-config ca-certificates bird2 nftables iptables)
# the package test: a clean Debian 12 root (debootstrap) booted with systemd-nspawn
pkgs+=(debootstrap systemd-container)
# the dashboard test: Prometheus (its own PromQL engine) scrapes a testbed router and answers
# every query of grafana/llrouter.json; the tests start their own instance, never the service
pkgs+=(prometheus)
# --fuzz (scripts/fuzz.sh): AFL++ too, whose afl-fuzz runs the fuzz targets and whose
# afl-compiler-rt.o instruments them (fuzz/, built on the stable toolchain).
[ "${1:-}" = "--fuzz" ] && pkgs+=(afl++)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$p")
done

if [ "${#need_pkgs[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "install-deps: installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  # Packages that ship a daemon (prometheus, bird2) would start it on install; the tests start
  # their own instances. A policy-rc.d that refuses starts (Debian's mechanism, honoured by
  # invoke-rc.d and deb-systemd-invoke) keeps the install from leaving a service running,
  # unless the machine already has a policy of its own.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# llrouter install-deps: no service starts during this install\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  $SUDO apt-get install -y -q --no-install-recommends "${need_pkgs[@]}"
  [ -z "$policy" ] || { $SUDO rm -f "$policy"; trap - EXIT; }
fi

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "install-deps: cargo not found; install Rust stable with rustup (https://rustup.rs) first" >&2
    exit 1
  fi
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt 2>/dev/null || true
