//! The live worker loop: the poll engine of `llr-core` (the same one the simulator runs) over
//! AF_XDP rings, the `Forwarder` of `llr-core` per frame, egress Tx with per-class priority.
//!
//! ```text
//! loop:                                    (Worker::run)
//!   control: apply changes, publish counters between poll rounds
//!   "interrupt": every armed engine device whose rings hold frames is woken (engine.wake)
//!   grant = engine.pick(sockets)           # strategy: SQ, RR, LL-RR, LL-WFQ, slices, ...
//!   serve_grant: n = sockets.recv(grant.ring, min(grant.max, batch), forward)   # parse, LPM, rewrite
//!                sockets.flush() (completions, egress highest ring first, fill)
//!                engine.complete(grant, n, measured ns)
//!   idle -> interrupt: poll(); busy: spin; adaptive: spin spin_us, then poll()
//! ```
//!
//! "Engine device" is the poll engine's unit of wake-up (a set of rings); the AF_XDP sockets
//! of every port are one [`llr_io::xsk::Device`], called `xsk` here.
//!
//! The slow path (`slow_path.rs`) handles what is not plain forwarding, in the frame's own class
//! and grant: ICMP errors (time exceeded, unreachable, fragmentation needed / packet too big),
//! rate-limited, built in the frame's buffer and sent back to its source; IPv4 fragmentation
//! into spare chunks; frames for the kernel (`Verdict::Pass`: IP options, the kernel's routes,
//! ...) written to the punt TAP ([`llr_io::punt`]) — the classifier already passes ARP/ND,
//! multicast and the router's own addresses to the kernel in XDP, so these are rare. For
//! `NoNeighbor` the kernel is asked to resolve the next hop (a datagram to its discard port),
//! and the neighbour mirror picks the answer up; the packet waits for it, and is answered with
//! host unreachable if it does not come.
//!
//! - `worker.rs`: the [`Worker`] and its loop;
//! - `changes.rs`: control changes applied between poll rounds (rules on a helper thread);
//! - [`ctl`]: the protocol between the control plane and a worker;
//! - `stats.rs`: counters, published snapshots and the exit report ([`WorkerStats`]);
//! - `slow_path.rs`: ICMP errors, fragmentation, punting, neighbour resolution.

mod changes;
pub mod ctl;
mod flow_path;
mod poll_loop;
mod slow_path;
pub(crate) mod stats;

use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use llr_core::classify::{self, IpPrefix, PortRange, Rule};
use llr_core::fwd::{IcmpLimits, SharedForwarder};
use llr_core::sched::Layout;

use ctl::WorkerLink;
use llr_io::xsk::{Device, WakeMode};

pub use poll_loop::Worker;
pub use stats::WorkerStats;

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub wake: WakeMode,
    /// Adaptive mode: spin this long before sleeping.
    pub spin_us: u64,
    /// At most this many frames per grant (caps the engine's `grant.max`).
    pub batch: u32,
    /// Transmit kicks: frames of the lowest-priority ring are held in the egress queue until this
    /// many are waiting (or the worker runs out of work); a grant on any higher ring transmits at
    /// once, unless `tx_hold_ns` lets its frames wait that long for the batch. 1 = a sendto
    /// after every grant.
    pub tx_batch: u32,
    pub tx_hold_ns: u64,
    /// Artificial per-packet cost (busy wait), to make the CPU the bottleneck in a testbed.
    pub cost_ns: u64,
    /// Artificial per-packet cost as an ACL: every frame is checked against this many rules,
    /// none of which matches forwarded traffic (like a firewall's permit-after-N-denies).
    pub acl_rules: u32,
    /// Stop after this long (`None`: until the stop flag).
    pub max_duration: Option<Duration>,
    /// Rate limits of the ICMP errors the worker sends.
    pub icmp: IcmpLimits,
    /// Name of the TAP that hands frames to the kernel (`None`: such frames are dropped and
    /// counted as `punt_dropped`).
    pub punt_device: Option<String>,
    /// At most this many frames per second to the kernel through the punt TAP.
    pub punt_rate: u32,
    /// Flows on: each worker builds its own flows from this.
    pub flows: Option<Arc<crate::config::FlowSetup>>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            wake: WakeMode::Interrupt,
            spin_us: crate::config::RouterConfig::DEFAULT_SPIN_US,
            batch: crate::config::RouterConfig::DEFAULT_BATCH,
            tx_batch: llr_core::sched::TxPolicy::DEFAULT_BATCH,
            tx_hold_ns: 0,
            cost_ns: 0,
            acl_rules: 0,
            max_duration: None,
            icmp: IcmpLimits::default(),
            punt_device: Some("llr-punt".to_string()),
            punt_rate: 10_000,
            flows: None,
        }
    }
}

/// The control plane's handle on a worker (see [`ctl`]).
pub struct WorkerCtl {
    pub link: Arc<WorkerLink>,
    /// `llr_config.flags` of the classifiers (`FLAG_TIMESTAMP`: frames carry a timestamp).
    pub flags: u32,
}

/// Runs one worker until `stop` is set (or `opts.max_duration` passes).
pub fn run_worker(
    xsk: &mut Device,
    layout: &Layout,
    fwd: &SharedForwarder,
    opts: &WorkerOptions,
    stop: &AtomicBool,
) -> WorkerStats {
    run_worker_ctl(xsk, layout, fwd, opts, stop, None)
}

/// [`run_worker`] under a control plane: between poll rounds it applies the changes `ctl`
/// hands it (rules, layout, wake-up mode) and publishes counters.
///
/// The sockets may be more than `layout` has rings (one per class, so that switching to `sq`
/// and back keeps every socket): sockets outside the running layout ("orphans", e.g. classes
/// 1.. under `sq`) get no new frames once the class→ring maps are rewritten, and what they
/// still hold is drained, so a layout change loses no frame.
pub fn run_worker_ctl(
    xsk: &mut Device,
    layout: &Layout,
    fwd: &SharedForwarder,
    opts: &WorkerOptions,
    stop: &AtomicBool,
    ctl: Option<WorkerCtl>,
) -> WorkerStats {
    let mut worker = Worker::new(xsk, layout, fwd, opts, ctl);
    worker.run(stop);
    worker.report()
}

/// An ACL of `n` rules that forwarded traffic never matches (UDP to the limited broadcast
/// address, which the classifier hands to the kernel), so every frame walks all of them:
/// first-match classification, the cost model of a real rule list.
pub fn dummy_acl(n: usize) -> classify::RuleSet {
    let dst = IpPrefix::new(IpAddr::V4(std::net::Ipv4Addr::BROADCAST), 32).expect("valid /32");
    let rules = (0..n)
        .map(|i| Rule {
            proto: Some(17),
            dst: Some(dst),
            dport: PortRange::new(i as u16, i as u16),
            class: 1,
            ..Default::default()
        })
        .collect();
    classify::RuleSet::with_rules(rules, 0)
}

#[cfg(test)]
mod acl_tests {
    use super::*;
    use llr_core::wire::build::{frame, FrameSpec};

    #[test]
    fn dummy_acl_matches_no_forwarded_traffic_but_really_checks() {
        let acl = dummy_acl(100);
        let unicast = frame(&FrameSpec {
            dst: "10.0.0.1".parse().unwrap(),
            protocol: 17,
            dst_port: 42,
            ..Default::default()
        });
        assert_eq!(
            acl.classify(&unicast, None, 1),
            0,
            "forwarded traffic never matches"
        );
        let bcast = frame(&FrameSpec {
            dst: "255.255.255.255".parse().unwrap(),
            protocol: 17,
            dst_port: 42,
            ..Default::default()
        });
        assert_eq!(
            acl.classify(&bcast, None, 1),
            1,
            "the rules are real, not skipped"
        );
        assert_eq!(dummy_acl(0).classify(&bcast, None, 1), 0);
    }
}
