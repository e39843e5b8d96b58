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
}

impl TxPolicy {
    /// Frames of the lowest ring wait for `batch` queued frames (at least 1).
    pub fn new(batch: usize) -> TxPolicy {
        TxPolicy {
            batch: batch.max(1),
        }
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
