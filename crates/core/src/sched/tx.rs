//! When the worker hands its egress queue to the kernel: after which grant a transmit *flush*
//! (a `sendto` kick per port with frames) follows.
//!
//! A flush has a fixed cost besides its per-frame work (the syscall, and on veth the peer's
//! receive it starts), so frames of a device's lowest-priority ring wait in the egress queue
//! until `batch` frames are queued; a grant on a higher ring flushes at once, because its frames
//! are the ones whose latency the strategy protects. The worker runs this rule and the simulator
//! charges a flush's cost by it, so both pay for the same flushes.

use super::{Grant, PollEngine};

/// The flush rule of one worker; `batch` is `tx-batch` in the router's config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxPolicy {
    batch: usize,
    hold_ns: u64,
    /// When the oldest frame of a higher ring queued without a flush was queued.
    urgent_since: Option<u64>,
}

impl TxPolicy {
    /// The router's default `tx-hold-us`. Under load, 1 µs is about one BE grant: RT frames
    /// go out with the next grant's frames instead of in a kick of their own, which on veth
    /// cuts ll-wfq's flushes per frame from 0.106 to 0.073 and forwards 2–4 % more under
    /// overload, for ~1.5–4 µs of RT median there; a worker that runs out of work flushes at
    /// once, so at light load it costs nothing (docs/datapath.md, "Transmit", on "the price of QoS under
    /// overload"). 0: every higher ring's grant kicks at once.
    pub const DEFAULT_HOLD_US: u32 = 1;
    /// The router's default `tx-batch`: frames of the lowest ring held back for one kick.
    pub const DEFAULT_BATCH: u32 = 16;

    /// Frames of the lowest ring wait for `batch` queued frames (at least 1).
    pub fn new(batch: usize) -> TxPolicy {
        TxPolicy {
            batch: batch.max(1),
            hold_ns: 0,
            urgent_since: None,
        }
    }

    /// Frames of a higher ring may wait up to `hold_ns` for the batch (0: flush at once).
    pub fn with_hold(self, hold_ns: u64) -> TxPolicy {
        TxPolicy { hold_ns, ..self }
    }

    pub fn hold_ns(&self) -> u64 {
        self.hold_ns
    }

    /// [`TxPolicy::flush_after`] with a hold: a higher ring's frames wait for the batch until
    /// `hold_ns` after the first of them was queued. `now_ns` matters only with a hold.
    #[inline]
    pub fn flush_after_at(&mut self, lowest: bool, queued: usize, now_ns: u64) -> bool {
        if self.hold_ns == 0 {
            return self.flush_after(lowest, queued);
        }
        if !lowest && self.urgent_since.is_none() {
            self.urgent_since = Some(now_ns);
        }
        let flush = queued >= self.batch
            || self
                .urgent_since
                .is_some_and(|t| now_ns.saturating_sub(t) >= self.hold_ns);
        if flush {
            self.urgent_since = None;
        }
        flush
    }

    /// Everything queued went out (the worker ran out of work and flushed).
    #[inline]
    pub fn flushed(&mut self) {
        self.urgent_since = None;
    }

    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Whether to flush after a grant, with `queued` frames now in the egress queues. `lowest`:
    /// the grant was on its device's lowest-priority ring (see [`TxPolicy::is_lowest`]).
    #[inline]
    pub fn flush_after(&self, lowest: bool, queued: usize) -> bool {
        !lowest || queued >= self.batch
    }

    /// Whether `grant` served the lowest-priority ring of its device. A device with a single
    /// ring has only a lowest ring: its frames always wait for the batch.
    #[inline]
    pub fn is_lowest(engine: &PollEngine, grant: &Grant) -> bool {
        engine.device_rings(grant.device).last() == Some(&grant.ring)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{SchedConfig, StrategyKind};

    #[test]
    fn higher_rings_flush_at_once_the_lowest_waits_for_the_batch() {
        let p = TxPolicy::new(16);
        assert!(p.flush_after(false, 1));
        assert!(!p.flush_after(true, 15));
        assert!(p.flush_after(true, 16));
        assert_eq!(
            TxPolicy::new(0).batch(),
            1,
            "a batch of 0 would never flush"
        );
    }

    #[test]
    fn a_hold_lets_higher_ring_frames_wait_for_the_batch_but_no_longer() {
        let mut p = TxPolicy::new(16).with_hold(5_000);
        // An RT grant at t = 0 queues 3 frames: held.
        assert!(!p.flush_after_at(false, 3, 0));
        // BE grants follow; the RT frames' clock runs from their first grant, not the last.
        assert!(!p.flush_after_at(true, 7, 2_000));
        assert!(!p.flush_after_at(false, 10, 4_000));
        assert!(p.flush_after_at(true, 14, 5_000), "held 5 µs: flush");
        // The batch fills first.
        assert!(!p.flush_after_at(false, 2, 10_000));
        assert!(p.flush_after_at(true, 16, 11_000));
        // Only BE queued: no clock running, BE waits for the batch however long.
        assert!(!p.flush_after_at(true, 4, 100_000));
        assert!(!p.flush_after_at(true, 8, 900_000));
        // Running out of work flushed everything: the next RT frames start a new wait.
        assert!(!p.flush_after_at(false, 1, 1_000_000));
        p.flushed();
        assert!(!p.flush_after_at(false, 1, 1_004_000));
        assert!(p.flush_after_at(true, 2, 1_009_000));
        // Without a hold the rule is the plain one, whatever the clock says.
        let mut now = TxPolicy::new(16);
        assert!(now.flush_after_at(false, 1, 0));
        assert!(!now.flush_after_at(true, 15, u64::MAX));
    }

    #[test]
    fn the_lowest_ring_is_the_last_of_its_device() {
        let layout = SchedConfig::new(StrategyKind::LlWfq, &["rt", "be"])
            .layout()
            .unwrap();
        let e = PollEngine::new(&layout);
        let g = |ring| Grant {
            device: 0,
            ring,
            max: 1,
        };
        assert!(!TxPolicy::is_lowest(&e, &g(0)));
        assert!(TxPolicy::is_lowest(&e, &g(1)));
    }
}
