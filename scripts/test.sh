#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every check.
# Tests that need root (network namespaces, veth, XDP) run when this runs as root (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== cargo test (release: the simulator tests run millions of packets)"
cargo test --workspace --release --no-fail-fast -- --test-threads="${LLR_TEST_THREADS:-2}"
