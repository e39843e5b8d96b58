//! The router's error type.

use std::fmt::Display;

use crate::config::ConfigError;

/// Why the router did not start or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    /// The configuration does not check out on this host (bad input: `llrouter run` exits 2).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A step of start-up or shutdown failed; the message names the step and the cause.
    #[error("{0}")]
    Setup(String),
    /// This process lacks capabilities the router needs (exit 2: run it as root or with
    /// them).
    #[error("{}", llr_io::probe::privileges_message(.missing))]
    Privileges { missing: Vec<&'static str> },
    /// An interface's rx queue is bound by another AF_XDP socket (exit 2).
    #[error(transparent)]
    QueueBusy(#[from] llr_io::xsk::QueueBusy),
    /// An interface's XDP hook is held by another program (exit 2).
    #[error(transparent)]
    XdpHeld(#[from] llr_io::ebpf::XdpHeld),
    /// The worker thread panicked.
    #[error("the worker thread panicked")]
    WorkerPanicked,
}

impl RouterError {
    /// A [`RouterError::Setup`] from any error, with its causes (`{:#}`).
    pub(crate) fn setup(e: impl Display) -> RouterError {
        RouterError::Setup(format!("{e:#}"))
    }

    /// A start-up error of llr-io, keeping the variants an operator acts on.
    pub(crate) fn io(e: anyhow::Error) -> RouterError {
        let e = match e.downcast::<llr_io::xsk::QueueBusy>() {
            Ok(b) => return RouterError::QueueBusy(b),
            Err(e) => e,
        };
        match e.downcast::<llr_io::ebpf::XdpHeld>() {
            Ok(h) => RouterError::XdpHeld(h),
            Err(e) => RouterError::setup(e),
        }
    }

    /// Whether the operator must change something on the host first (exit 2, like bad input).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            RouterError::Config(_)
                | RouterError::Privileges { .. }
                | RouterError::QueueBusy(_)
                | RouterError::XdpHeld(_)
        )
    }
}

/// Names the step that failed: `result.step("control.socket")`.
pub(crate) trait Step<T> {
    fn step(self, what: impl Display) -> Result<T, RouterError>;
}

impl<T, E: Display> Step<T> for Result<T, E> {
    fn step(self, what: impl Display) -> Result<T, RouterError> {
        self.map_err(|e| RouterError::Setup(format!("{what}: {e:#}")))
    }
}
