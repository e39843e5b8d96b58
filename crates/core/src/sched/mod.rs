//! The scheduler core: rings, devices, the poll list and the strategies.
//!
//! The model follows the NAPI poll loop extended with per-class rings of
//! paper 000 (Beifuß et al., "Building a Low Latency Linux Software Router", ITC 2016; Fig. 2): a *device* is a set of rings that share
//! one wake-up source (an IRQ line; here a blocking wait on the device's sockets). A woken device
//! joins the *poll list*; the engine takes the device at the head, serves its rings with per-ring
//! budgets until its *device budget* is spent (device moves to the tail) or every ring is empty
//! (device leaves the poll list and its wake-up is re-armed).
//!
//! The engine never touches packets or clocks. A caller asks [`PollEngine::pick`] which ring to
//! serve next and how many packets at most, serves them however it likes (the simulator one
//! packet at a time in simulated time, the live loop a batch from an AF_XDP socket), and reports
//! what it did with [`PollEngine::complete`]: a BESS-style *pick, then account* cycle.

mod auto;
pub mod bound;
mod budget;
mod config;
mod engine;
mod ring;
mod tx;

pub use auto::{AutoBudget, AutoReading};
pub use budget::{repeated_class, Budget, BudgetError, ClassBudget, PerClass};
pub use config::{
    AutoBudgetSpec, AutoRings, AutoTarget, ClassSpec, ConfigError, Layout, RingSpec, SchedConfig,
    StrategyKind,
};
pub use engine::{DeviceStats, Grant, PollEngine, RingStats, RingView};
pub use ring::Ring;
pub use tx::TxPolicy;

/// Index of a traffic class; 0 is the highest priority.
pub type ClassId = usize;
/// Index of a ring within one engine (one core).
pub type RingId = usize;
/// Index of a device within one engine (one core).
pub type DevId = usize;
