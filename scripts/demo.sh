#!/usr/bin/env bash
# The README's demo command: installs what is missing, builds, and runs `llrouter demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --bin llrouter
./target/release/llrouter demo "$@"
echo "llrouter is target/release/llrouter; for the README's \"Try it\" commands:" \
    "export PATH=\"$PWD/target/release:\$PATH\""
