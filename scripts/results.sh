#!/usr/bin/env bash
# Regenerates the results tables: installs what is missing, builds, runs each headline study
# from its own command (`llrouter results`, root: network namespaces and XDP), stores its
# figures in docs/results/<topic>.toml and renders docs/results.md's generated blocks and
# README.md's results table from them.
#
#   bash scripts/results.sh                 # every topic (about two hours on a 2-core VM)
#   bash scripts/results.sh rt-share        # one topic; `llrouter results --list` names them
#   bash scripts/results.sh --render        # re-render from the stored figures only
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --bin llrouter
./target/release/llrouter results "$@"
