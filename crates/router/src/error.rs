//! The router's error type.

use std::fmt::Display;

use crate::config::ConfigError;
use llr_io::ebpf::EbpfError;
use llr_io::kernel::KernelError;
use llr_io::ntuple::NtupleError;
use llr_io::probe::KernelTooOld;
use llr_io::punt::PuntError;
use llr_io::xsk::XskError;

/// An error of llr-io, by the module it comes from.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error(transparent)]
    Ebpf(#[from] EbpfError),
    #[error(transparent)]
    Xsk(#[from] XskError),
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Ntuple(#[from] NtupleError),
    #[error(transparent)]
    Punt(#[from] PuntError),
    #[error(transparent)]
    KernelTooOld(#[from] KernelTooOld),
}

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
    /// A step of start-up in the kernel's I/O failed: `step` names it, `cause` keeps the
    /// typed cause (an interface's queue or XDP hook held by another program is a refusal).
    #[error("{step}{}{cause}", if step.is_empty() { "" } else { ": " })]
    Io { step: String, cause: Box<IoError> },
    /// The worker thread panicked.
    #[error("the worker thread panicked")]
    WorkerPanicked,
    /// The host's firewall has what llrouter cannot honour, or cannot be read (exit 2: the
    /// message names the rule and the setting that hands its packets to the kernel).
    #[error("{0}")]
    Firewall(String),
}

impl RouterError {
    /// An error of llr-io at an unnamed step (its own message names the interface and the
    /// operation).
    pub(crate) fn io(e: impl Into<IoError>) -> RouterError {
        RouterError::Io {
            step: String::new(),
            cause: Box::new(e.into()),
        }
    }

    /// Whether the operator must change something on the host first (exit 2, like bad input).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            RouterError::Config(_) | RouterError::Privileges { .. } | RouterError::Firewall(_)
        ) || matches!(
            self,
            RouterError::Io { cause, .. }
                if matches!(**cause, IoError::Xsk(XskError::QueueBusy(_)) | IoError::Ebpf(EbpfError::Held(_)))
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

/// Names the step of llr-io that failed and keeps its error's type: `result.io_step("attach")`.
pub(crate) trait IoStep<T> {
    fn io_step(self, what: impl Display) -> Result<T, RouterError>;
}

impl<T, E: Into<IoError>> IoStep<T> for Result<T, E> {
    fn io_step(self, what: impl Display) -> Result<T, RouterError> {
        self.map_err(|e| RouterError::Io {
            step: what.to_string(),
            cause: Box::new(e.into()),
        })
    }
}
