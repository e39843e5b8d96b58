//! llrouter operations: everything an operator touches around the datapath.
//!
//! - [`tune`]: host tuning after paper 002 — per-core load ECDFs from `/proc/stat`, the worker
//!   core, IRQ affinities, ring and socket-buffer sizes;
//! - [`metrics`]: Prometheus text exposition of a [`metrics::MetricsSnapshot`] and a tiny HTTP
//!   endpoint serving it;
//! - [`cpus`]: CPU lists, the machine's CPUs and where helper threads run (off the workers);
//! - [`ctl`]: the run-time control plane (paper 003): a versioned JSON protocol over a Unix
//!   socket, its server (the router implements [`ctl::ControlTarget`]) and its client;
//! - [`conns`]: admission of control and metrics connections (a bounded table that closes the
//!   least recently active idle connection before it refuses anyone);
//! - [`shield`]: keeps every other task off the router's CPUs for a measurement (cpuset);
//! - [`query`]: the typed arguments and answers of the listing and lookup commands;
//! - [`views`]: what `ctl show …` and `ctl status` print, as aligned tables.
//!
//! Nothing here knows the datapath: the router hands in snapshots and implements a trait. The
//! few raw calls it needs are safe wrappers in `llr_io::sys`; this crate has no `unsafe`.

#![forbid(unsafe_code)]

pub mod conns;
pub mod cpus;
pub mod ctl;
pub mod metrics;
pub mod query;
pub mod shield;
pub mod tune;
pub mod views;
