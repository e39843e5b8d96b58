//! The `llrouter` binary's library: CLI commands, configuration, testbed, control plane.
//!
//! Each command lives in its own module; `main.rs` only parses arguments and dispatches.
//! (Engineers: add one `pub mod NAME;` line per module, keep the list sorted.)

pub mod cmd_ctl;
pub mod cmd_tune;
