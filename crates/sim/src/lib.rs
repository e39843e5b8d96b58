//! Discrete-event simulator of a CPU-bound software router.
//!
//! Simulated arrivals fill simulated rings; simulated cores serve them through the *same*
//! [`PollEngine`](llr_core::sched::PollEngine) the live datapath uses, one packet at a time, each
//! taking the service time of paper 001's calibration `x = a·S + b + c`. A device whose rings
//! all ran empty leaves the poll list and re-arms its wake-up; the next arrival for it is an
//! interrupt that costs `wakeup_cost_ns` of CPU time (0 by default: the pure queueing model of
//! paper 001, where the results can be checked against M/D/1, M/M/1 and Cobham's formula).
//!
//! Time is an `f64` in nanoseconds; nothing here reads a clock.
#![forbid(unsafe_code)]

pub mod model;
mod sim;
pub mod sweep;

pub use sim::{
    run, Arrivals, ClassResult, Rate, ServiceDist, ServiceModel, SimConfig, SimError, SimResult,
};
