//! llrouter's fuzz targets as plain functions: each takes the fuzzer's bytes and panics (the
//! fuzzer's crash) on a property violation. `src/bin/*.rs` wraps each in `afl::fuzz!` for AFL++
//! (scripts/fuzz.sh); `tests/corpus.rs` replays the committed corpus through them without AFL.
//!
//! | target     | code under test                                                        |
//! |------------|-------------------------------------------------------------------------|
//! | `frame`    | `llr_core::wire::parse_frame` and `RuleSet::classify` on raw frames      |
//! | `forward`  | `llr_core::fwd::Forwarder::process` (and its ICMP / fragment outputs)    |
//! | `rules`    | the rule text parser (`RuleSpec`), `resolve`, the BPF rule image         |
//! | `ctl`      | the control protocol decoder (`llr_ops::ctl::parse_request`, `read_line`) |
//! | `config`   | the router config loader (`RouterConfig::from_toml`, `validate`, `resolve`) |
//! | `bpf_diff` | `bpf/classifier.c` under `BPF_PROG_TEST_RUN` against its Rust twin (root) |

pub mod bpf_diff;
pub mod config;
pub mod ctl;
pub mod forward;
pub mod frame;
pub mod rules;

/// Every target's name, as the binaries, corpus directories and scripts/fuzz.sh spell them.
pub const TARGETS: [&str; 6] = ["frame", "forward", "rules", "ctl", "config", "bpf_diff"];

/// Runs target `name` once over `data` (for replaying files; `bpf_diff` loads its program on
/// first use and needs root). Returns `false` for an unknown name.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "frame" => frame::run(data),
        "forward" => forward::run(data),
        "rules" => rules::run(data),
        "ctl" => ctl::run(data),
        "config" => config::run(data),
        "bpf_diff" => bpf_diff::with_global(|d| d.run(data)),
        _ => return false,
    }
    true
}
