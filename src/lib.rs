//! The `llrouter` binary's library: CLI commands, configuration, testbed, control plane.
//!
//! Each command lives in its own module; `main.rs` only parses arguments and dispatches.
//! (Engineers: add one `pub mod NAME;` line per module, keep the list sorted.)
#![forbid(unsafe_code)]

pub mod cli_util;
pub mod cmd_ctl;
pub mod cmd_demo;
pub mod cmd_gen;
pub mod cmd_model;
pub mod cmd_paper;
pub mod cmd_results;
pub mod cmd_run;
pub mod cmd_sim;
pub mod cmd_sink;
pub mod cmd_testbed;
pub mod cmd_top;
pub mod cmd_tune;
/// The router's configuration lives in `llr_router`; re-exported for the commands.
pub use llr_router::config;
