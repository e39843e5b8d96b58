//! llrouter's pure core.
//!
//! Layers, top to bottom:
//! - [`sched`]: rings, devices, the poll list and the scheduling strategies — the NAPI poll loop of
//!   paper 000 (Fig. 2) and the resource-management strategies of paper 001 (§V-C);
//! - [`stats`]: latency histograms and sequence (loss / reordering) tracking;
//! - [`wire`]: checked packet views (Ethernet, 802.1Q, IPv4, IPv6, UDP) and checksums;
//! - [`classify`]: classifier rules (the Flow Director match set) mapping packets to classes;
//! - [`filter`]: the host's firewall (nftables ruleset) on the forwarding path;
//! - [`fwd`]: longest-prefix-match forwarding tables and the per-packet forwarding decision;
//! - [`flow`]: flow-based element pipelines and the SFQ flow scheduler (paper 003);
//! - [`fixture`]: a generated, realistic full Internet routing table for tests and benchmarks.
//!
//! Nothing here performs I/O, reads a clock or uses `unsafe`: time and packets come in as
//! arguments, which is what lets the simulator (`llr-sim`) and the live datapath (`llr-io`) run
//! the very same code.
#![forbid(unsafe_code)]

pub use error::FieldError;

pub mod classify;
pub mod error;
pub mod filter;
pub mod fixture;
pub mod flow;
pub mod fwd;
pub mod probe;
pub mod sched;
pub mod stats;
pub mod values;
pub mod wire;
