//! The namespace testbed (gen ns → router ns → sink ns over two veth pairs) as a library: the
//! study that compares forwarding targets on the same traffic.
//!
//! - [`options`]: what a study runs — [`Target`]s, traffic and router settings ([`Options`]);
//! - [`target`]: one target set up in the router namespace ([`target::Active`]: RPS, threaded
//!   NAPI, an HTB qdisc, or an llrouter child process from [`router_proc`]);
//! - [`measure`]: one measurement point (generator and sink threads from [`traffic`], router
//!   CPU and wake-ups from [`host`]) → a [`Row`];
//! - [`mlffr`]: RFC 2544-style search for the maximum loss-free forwarding rate;
//! - [`sweep`]: offered load × RT share for each target, [`sweep::compare`] for the demo;
//! - [`report`]: CSV (serde), PNG plots ([`plot`]) and `report.md`; [`summary`]: medians and
//!   ranges over rounds; [`iperf`]: TCP goodput through each target; [`demo`]: the demo's live
//!   comparison; [`flood`]: RT beside a flood the router's ruleset drops (in XDP or the worker);
//! - [`fulltable`]: the full-table fixture as `ip -batch` files and BIRD static routes;
//!   [`bird`]: BIRD 2 daemons in the namespaces (an originator announcing the fixture over
//!   eBGP to a speaker in the router namespace that installs it in the kernel); [`scale`]: the
//!   route mirror with that table (time to a complete forwarder, the mirror's idle CPU, memory);
//!   [`churn`]: RT beside route churn.
//!
//! Studies need root (network namespaces, XDP). They take a stop flag instead of installing
//! signal handlers, and report progress through [`Progress`] instead of printing.
//!
//! ```no_run
//! use llr_core::sched::StrategyKind;
//! use llr_lab::{sweep::SweepStudy, Options, Target};
//!
//! let targets = [Target::Kernel, Target::Llrouter(StrategyKind::LlWfq)];
//! let mut study = SweepStudy::new(Options::new(&targets, "results/x".into()));
//! study.loads = vec![50_000.0, 400_000.0];
//! let stop = std::sync::atomic::AtomicBool::new(false);
//! let outcome = study.run(&stop, &llr_lab::NoProgress)?;
//! println!("{} rows", outcome.rows.len());
//! # Ok::<(), llr_lab::LabError>(())
//! ```

#![forbid(unsafe_code)]

pub mod ab;
pub mod alternate;
pub mod args;
pub mod bench;
pub mod bgp;
pub mod bird;
pub mod bound;
mod check;
pub mod churn;
pub mod demo;
pub mod firewall_cost;
pub mod flood;
pub mod fulltable;
pub mod host;
pub mod iperf;
pub mod listing;
pub mod matrix;
pub mod measure;
pub mod mlffr;
mod nft;
pub mod options;
pub mod paper;
pub mod plot;
pub mod report;
#[cfg(feature = "clap")]
pub mod results;
pub mod router_proc;
pub mod scale;
mod script;
pub mod setup;
pub mod summary;
pub mod sweep;
pub mod target;
pub mod traffic;

pub use measure::Row;
pub use options::{Budgets, Options, Target};
pub use traffic::{GenBackend, SinkBackend};

/// Prefix of every namespace the testbed creates (`{prefix}-{pid}-{n}-{gen,rtr,sink}` for
/// temporary ones).
pub const PREFIX: &str = "llrtb";

/// Why a study could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// An option is out of range; `field` is its command-line name (`gen-batch`).
    #[error("{0}")]
    Invalid(#[from] llr_core::FieldError),
    /// Network namespaces and XDP need root.
    #[error("the testbed needs root (network namespaces)")]
    NeedRoot,
    /// A step on the host failed (a namespace, a qdisc, the generator, a router process).
    #[error("{what}: {cause:#}")]
    Step { what: String, cause: anyhow::Error },
    /// A file could not be written or read.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// Rows could not be written as CSV.
    #[error("{what}: {source}")]
    Csv { what: String, source: csv::Error },
    /// Something the study found wrong on the way (a router that did not start, stop or
    /// report).
    #[error("{0}")]
    Failed(String),
    /// The stop flag was raised.
    #[error("interrupted")]
    Interrupted,
}

impl LabError {
    /// An option error naming `field`.
    pub fn invalid(field: &str, reason: impl Into<String>) -> LabError {
        LabError::Invalid(llr_core::FieldError::new(field, reason))
    }

    /// A failed host step.
    pub fn step(what: impl Into<String>, cause: impl Into<anyhow::Error>) -> LabError {
        LabError::Step {
            what: what.into(),
            cause: cause.into(),
        }
    }

    /// A file error.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> LabError {
        LabError::Io {
            what: what.into(),
            source,
        }
    }
}

/// Result of the lab's functions.
pub type Result<T, E = LabError> = std::result::Result<T, E>;

/// Attaches a description to llr-io's `anyhow` errors.
pub(crate) trait StepContext<T> {
    fn step(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> StepContext<T> for anyhow::Result<T> {
    fn step(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| LabError::step(what(), e))
    }
}

/// Where a study reports how far it got (a progress bar, a log, nothing).
pub trait Progress: Sync {
    /// The study will take `total` steps.
    fn start(&self, _total: u64) {}
    /// What runs now.
    fn message(&self, _msg: &str) {}
    /// `n` more steps are done.
    fn inc(&self, _n: u64) {}
    /// The study is over.
    fn finish(&self) {}
}

/// Progress reported nowhere.
pub struct NoProgress;

impl Progress for NoProgress {}

/// The name a closed choice has in configs and reports (its serde name: `interrupt`,
/// `poisson`).
pub fn choice_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}
