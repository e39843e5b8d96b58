#!/usr/bin/env bash
# Builds the Debian package: target/debian/llrouter_VERSION_ARCH.deb with the binary, the
# systemd unit, a commented default config (a conffile: upgrades keep the operator's edits),
# completions for bash, zsh and fish, man pages generated from the CLI, and the operator docs.
# Uses dpkg-deb (every Debian has it). Install: `dpkg -i target/debian/llrouter_*.deb`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
[ "${SKIP_BUILD:-}" = 1 ] || cargo build --release --bin llrouter
bin="${LLROUTER_BIN:-target/release/llrouter}"
version=$(grep -m1 '^version' Cargo.toml | cut -d'"' -f2)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/llrouter"
install -D -m 0755 "$bin" "$root/usr/bin/llrouter"
# the release profile keeps line tables for perf; the package ships without them
strip --strip-debug "$root/usr/bin/llrouter"
install -D -m 0644 packaging/llrouter.service "$root/lib/systemd/system/llrouter.service"
install -D -m 0644 packaging/router.toml "$root/etc/llrouter/router.toml"
"$bin" completions bash | install -D -m 0644 /dev/stdin "$root/usr/share/bash-completion/completions/llrouter"
"$bin" completions zsh | install -D -m 0644 /dev/stdin "$root/usr/share/zsh/vendor-completions/_llrouter"
"$bin" completions fish | install -D -m 0644 /dev/stdin "$root/usr/share/fish/vendor_completions.d/llrouter.fish"
"$bin" manpages "$root/usr/share/man/man1"
gzip -9n "$root"/usr/share/man/man1/*.1
doc="$root/usr/share/doc/llrouter"
install -D -m 0644 docs/operations.md "$doc/operations.md"
install -m 0644 README.md "$doc/README.md"
install -D -m 0644 grafana/llrouter.json "$root/usr/share/llrouter/grafana/llrouter.json"
install -m 0644 grafana/prometheus.yml "$root/usr/share/llrouter/grafana/prometheus.yml"
cat > "$doc/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: llrouter
Files: *
License: MIT or Apache-2.0
COPY
mkdir -p "$root/DEBIAN"
installed_kb=$(du -sk "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CTRL
Package: llrouter
Version: $version
Architecture: $arch
Maintainer: llrouter developers <llrouter@localhost>
Installed-Size: $installed_kb
Depends: libc6 (>= 2.34), iproute2, nftables
Recommends: ethtool
Suggests: bird2 | frr
Section: net
Priority: optional
Homepage: https://github.com/llrouter/llrouter
Description: low-latency, QoS-aware software router
 llrouter classifies packets in XDP, before the CPU bottleneck, into one AF_XDP
 receive ring per traffic class and serves the rings with a NAPI-style poll
 engine whose budgets and strategy keep real-time traffic fast while the
 router's CPU is saturated. Routes come from the kernel (BIRD, FRR).
CTRL
echo /etc/llrouter/router.toml > "$root/DEBIAN/conffiles"
cat > "$root/DEBIAN/postinst" <<'POST'
#!/bin/sh
set -e
# Like dh_installsystemd: enable nothing by default (the config names interfaces the operator
# must set first); reload the unit files where systemd runs.
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null || true
fi
POST
cat > "$root/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
    systemctl stop llrouter.service >/dev/null 2>&1 || true
fi
PRERM
cat > "$root/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null || true
fi
POSTRM
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
mkdir -p target/debian
out="target/debian/llrouter_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "$out"
