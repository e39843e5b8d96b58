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
    /// The worker thread panicked.
    #[error("the worker thread panicked")]
    WorkerPanicked,
}

impl RouterError {
    /// A [`RouterError::Setup`] from any error, with its causes (`{:#}`).
    pub(crate) fn setup(e: impl Display) -> RouterError {
        RouterError::Setup(format!("{e:#}"))
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
