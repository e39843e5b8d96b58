#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every check.
# Tests that need root (network namespaces, veth, XDP) are #[ignore]d by default; this runs them
# (--include-ignored) when it runs as root, and always under CI, where a missing root fails them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings
root_tests=()
if [ "$(id -u)" = 0 ] || [ "${CI:-}" = true ]; then
    root_tests=(--include-ignored)
else
    echo "note: not root: the tests that need root are listed as ignored, not run"
fi
echo "== cargo test (release: the simulator tests run millions of packets)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --release --no-fail-fast -- "${root_tests[@]}" \
    --test-threads="${LLR_TEST_THREADS:-2}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# One line for the whole run: cargo prints a summary per test binary only.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i;
        if ($(i+1) ~ /^failed;?$/) f += $i; if ($(i+1) ~ /^ignored;?$/) g += $i } }
     END { printf "== tests: %d passed, %d failed, %d ignored\n", p, f, g }' "$log"
exit "$rc"
