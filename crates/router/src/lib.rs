//! llrouter as a library: the configuration schema ([`config`]) and the live router that
//! `llrouter run` starts.
//!
//! [`Router::start`] takes a [`RouterConfig`] (parsed from TOML or built in code), binds the
//! control socket first (a second router on the same path is refused before it touches any
//! interface), loads one XDP classifier per interface (rules → classes → one AF_XDP socket per
//! class and rx queue), starts one worker thread per core in `cores` (worker i serves rx queue i
//! of every interface on its own UMEM; see [`steer`]), mirrors the kernel's routes and
//! neighbours, and serves metrics if configured. [`Running::stop`]
//! stops it, detaches everything and returns the counters. Every resource is owned by a value
//! whose `Drop` releases it, so an error on the way out cleans up too.
//!
//! The control plane ([`RouterCtl`], an `llr_ops::ctl::ControlTarget`) validates a change on
//! the caller's thread, hands it to every worker, which apply it between poll rounds, and
//! replies only when all of them confirmed it.
//!
//! ```no_run
//! use llr_router::{Router, RouterConfig, StartOptions};
//! let cfg = RouterConfig::from_toml(&std::fs::read_to_string("router.toml")?)?;
//! let running = Router::start(cfg, StartOptions::default())?;
//! running.wait_ready(std::time::Duration::from_secs(5));
//! let report = running.stop()?;
//! println!("{}", report.worker);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

pub mod config;
pub mod conntrack;
pub mod control;
pub mod diff;
mod error;
pub mod firewall;
pub mod metrics;
mod mirror;
pub mod plan;
mod start;
pub mod steer;
pub mod worker;

pub use config::{ConfigError, Resolved, RouterConfig, Steering};
pub use control::RouterCtl;
pub use diff::ConfigDiff;
pub use error::{IoError, RouterError};
pub use start::{Router, RunReport, Running, StartOptions};
