//! Discrete-event simulator of a CPU-bound software router.
//!
//! Simulated arrivals fill simulated rings; simulated cores serve them through the *same*
//! [`PollEngine`](llr_core::sched::PollEngine) the live datapath uses, one packet at a time, each
//! taking the service time of paper 001's calibration `x = a·S + b + c`. A device whose rings
//! all ran empty leaves the poll list and re-arms its wake-up; the next arrival for it is an
//! interrupt that costs `wakeup_cost_ns` of CPU time (0 by default: the pure queueing model of
//! paper 001, where the results can be checked against M/D/1, M/M/1 and Cobham's formula).
//! [`Interrupts::PerPacket`] instead charges every arrival an interrupt, as the kernel did before
//! NAPI (paper 004's baseline).
//!
//! Several cores: flows are hashed to cores, each core with its own rings and its own engine;
//! [`Steering`] chooses between the live router's two queue layouts (RSS with a classifier per
//! core, or a hardware queue per core and class); the module doc of the event loop says what
//! each means here. [`sweep::capacity`] finds the loss-free capacity by bisection, and
//! [`hash_bound`] says how much of it the flow hash's imbalance leaves with few flows.
//!
//! Time is an `f64` in nanoseconds; nothing here reads a clock.
#![forbid(unsafe_code)]

pub mod args;
pub mod flows;
pub mod model;
pub mod ramp;
mod sim;
pub mod sweep;
pub mod sweep_args;

pub use sim::{
    class_flows, core_shares, flow_core, flow_cores, hash_bound, run, run_phases, Arrivals,
    ClassResult, CoreResult, Interrupts, Rate, ServiceDist, ServiceModel, SimConfig, SimError,
    SimResult, Steering,
};
