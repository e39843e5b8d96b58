//! The poll engine: poll list, device budget, ring budgets and the strategies' ring choice.

use super::config::{Layout, StrategyKind};
use super::ring::Ring;
use super::{DevId, RingId};
use serde::Serialize;
use std::collections::VecDeque;

/// What the engine needs to know about the rings: how many packets wait in each.
///
/// The simulator answers from its FIFOs, the live loop from its AF_XDP rx rings. The engine only
/// asks whether a ring is empty, so an answer may be a lower bound of the packets waiting, as
/// long as it is never above them and 0 only when the ring was seen empty just now.
pub trait RingView {
    fn backlog(&self, ring: RingId) -> usize;
}

impl<T> RingView for [Ring<T>] {
    #[inline]
    fn backlog(&self, ring: RingId) -> usize {
        self[ring].len()
    }
}

impl RingView for [usize] {
    #[inline]
    fn backlog(&self, ring: RingId) -> usize {
        self[ring]
    }
}

/// Permission to serve at most `max` packets from `ring` of `device`, to be answered with
/// [`PollEngine::complete`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub device: DevId,
    pub ring: RingId,
    pub max: u32,
}

/// Counters of one ring.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RingStats {
    /// Packets served.
    pub served: u64,
    /// Times the ring still had packets when its ring budget (or time slice) ran out.
    pub budget_hits: u64,
    /// Grants completed, and the CPU time they cost as reported to [`PollEngine::complete`]:
    /// cost per grant and per packet are the price of the strategy's grant sizes.
    pub grants: u64,
    pub cost_ns: u64,
}

/// Counters of one device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeviceStats {
    /// Wake-ups that put the device on the poll list (interrupts taken).
    pub wakeups: u64,
    /// Times the device left the poll list with every ring empty and re-armed its wake-up.
    pub rearms: u64,
    /// Times the device budget ran out with packets left: the device moved to the tail.
    pub budget_exhaustions: u64,
    /// Full passes over the device's rings (packet-budget strategies).
    pub passes: u64,
}

#[derive(Debug, Clone)]
struct Dev {
    rings: Vec<RingId>,
    scheduled: bool,
    /// Device budget left in this turn.
    left: u32,
    /// Packet-budget strategies: position in the current pass. Others: index of the current ring.
    cursor: usize,
    /// Ring budget left for the ring at `cursor` in this pass.
    ring_left: u32,
    slice_active: bool,
    slice_left_ns: i64,
    /// The current slice began while another ring of the device was waiting.
    contended: bool,
    /// FCFS: order in which each ring was first seen waiting (`u64::MAX`: not waiting).
    waiting_since: Vec<u64>,
}

enum Step {
    Serve(RingId, u32),
    Empty,
    Exhausted,
}

/// The NAPI-style poll engine of one core.
#[derive(Debug, Clone)]
pub struct PollEngine {
    kind: StrategyKind,
    device_budget: u32,
    ring_budget: Vec<u32>,
    ring_slice: Vec<i64>,
    /// Time-slice strategies: how far each ring's last expired slice overran (a packet that
    /// starts inside a slice runs to its end), taken off its next slice, as deficit round robin
    /// carries a deficit. Without it the class with the shorter slice gains up to one packet
    /// per turn, and WFQ 3:1 with 1518-byte frames at Δt = 50 µs gives RT 0.71 of the CPU,
    /// not 0.75. At most one slice: a packet longer than a slice still goes out whole.
    slice_debt: Vec<i64>,
    devs: Vec<Dev>,
    poll_list: VecDeque<DevId>,
    ring_stats: Vec<RingStats>,
    dev_stats: Vec<DeviceStats>,
    seq: u64,
}

impl PollEngine {
    /// An engine for `layout` with every device armed (off the poll list).
    pub fn new(layout: &Layout) -> Self {
        let devs = layout
            .devices
            .iter()
            .map(|rings| Dev {
                rings: rings.clone(),
                scheduled: false,
                left: layout.device_budget,
                cursor: 0,
                ring_left: layout.rings[rings[0]].budget,
                slice_active: false,
                slice_left_ns: 0,
                contended: false,
                waiting_since: vec![u64::MAX; rings.len()],
            })
            .collect::<Vec<_>>();
        PollEngine {
            kind: layout.strategy,
            device_budget: layout.device_budget,
            ring_budget: layout.rings.iter().map(|r| r.budget).collect(),
            ring_slice: layout.rings.iter().map(|r| r.slice_ns as i64).collect(),
            slice_debt: vec![0; layout.rings.len()],
            dev_stats: vec![DeviceStats::default(); devs.len()],
            devs,
            poll_list: VecDeque::with_capacity(layout.devices.len()),
            ring_stats: vec![RingStats::default(); layout.rings.len()],
            seq: 0,
        }
    }

    pub fn strategy(&self) -> StrategyKind {
        self.kind
    }

    pub fn num_devices(&self) -> usize {
        self.devs.len()
    }

    pub fn num_rings(&self) -> usize {
        self.ring_budget.len()
    }

    /// The rings of `dev`, highest priority first.
    pub fn device_rings(&self, dev: DevId) -> &[RingId] {
        &self.devs[dev].rings
    }

    /// The device a ring belongs to.
    pub fn device_of(&self, ring: RingId) -> DevId {
        self.devs
            .iter()
            .position(|d| d.rings.contains(&ring))
            .expect("ring belongs to a device")
    }

    /// A wake-up (interrupt) of `dev`: schedules it on the poll list unless it already is.
    /// Returns whether this wake-up scheduled the device (an armed device took an interrupt).
    #[inline]
    pub fn wake(&mut self, dev: DevId) -> bool {
        let d = &mut self.devs[dev];
        if d.scheduled {
            return false;
        }
        d.scheduled = true;
        self.poll_list.push_back(dev);
        self.dev_stats[dev].wakeups += 1;
        true
    }

    /// Whether `dev` is on the poll list (its wake-up is disarmed).
    #[inline]
    pub fn is_scheduled(&self, dev: DevId) -> bool {
        self.devs[dev].scheduled
    }

    /// True when no device is on the poll list: the core may sleep until a wake-up.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.poll_list.is_empty()
    }

    /// The poll list, head first.
    pub fn poll_list(&self) -> impl Iterator<Item = DevId> + '_ {
        self.poll_list.iter().copied()
    }

    /// Picks the ring to serve next. `None` means every device has left the poll list with all
    /// its rings empty and re-armed its wake-up; the caller should wait for a wake-up.
    #[inline]
    pub fn pick<V: RingView + ?Sized>(&mut self, rings: &V) -> Option<Grant> {
        loop {
            let dev = *self.poll_list.front()?;
            match self.pick_in(dev, rings) {
                Step::Serve(ring, max) => {
                    debug_assert!(max > 0);
                    return Some(Grant {
                        device: dev,
                        ring,
                        max,
                    });
                }
                Step::Empty => {
                    self.poll_list.pop_front();
                    self.dev_stats[dev].rearms += 1;
                    let d = &mut self.devs[dev];
                    d.scheduled = false;
                    d.slice_active = false;
                    self.new_turn(dev);
                }
                Step::Exhausted => {
                    self.poll_list.pop_front();
                    self.poll_list.push_back(dev);
                    self.dev_stats[dev].budget_exhaustions += 1;
                    self.new_turn(dev);
                }
            }
        }
    }

    /// Accounts the work done for `grant`: `served` packets (at most `grant.max`) that cost
    /// `cost_ns` of CPU time (used by the time-slice strategies; pass 0 otherwise).
    #[inline]
    pub fn complete(&mut self, grant: Grant, served: u32, cost_ns: u64) {
        debug_assert!(
            served <= grant.max,
            "served {served} > granted {}",
            grant.max
        );
        let d = &mut self.devs[grant.device];
        d.left = d.left.saturating_sub(served);
        d.ring_left = d.ring_left.saturating_sub(served);
        d.slice_left_ns -= cost_ns as i64;
        let rs = &mut self.ring_stats[grant.ring];
        rs.served += served as u64;
        rs.grants += 1;
        rs.cost_ns += cost_ns;
    }

    /// The rings' budgets now (packets; ns for the time-slice strategies).
    pub fn ring_budgets(&self) -> &[u32] {
        &self.ring_budget
    }

    /// Sets `ring`'s packet budget from its next turn on (the turn under way keeps what it
    /// has left).
    pub fn set_ring_budget(&mut self, ring: RingId, budget: u32) {
        self.ring_budget[ring] = budget.max(1);
    }

    pub fn ring_stats(&self) -> &[RingStats] {
        &self.ring_stats
    }

    pub fn device_stats(&self) -> &[DeviceStats] {
        &self.dev_stats
    }

    fn new_turn(&mut self, dev: DevId) {
        let budget = self.device_budget;
        let d = &mut self.devs[dev];
        d.left = budget;
    }

    #[inline]
    fn pick_in<V: RingView + ?Sized>(&mut self, dev: DevId, rings: &V) -> Step {
        match self.kind {
            StrategyKind::Sq | StrategyKind::Rr | StrategyKind::LlRr | StrategyKind::LlWfq => {
                self.pick_budget(dev, rings)
            }
            StrategyKind::Prio => self.pick_prio(dev, rings),
            StrategyKind::Fcfs => self.pick_fcfs(dev, rings),
            StrategyKind::RrSlice
            | StrategyKind::Wfq
            | StrategyKind::LlRrSlice
            | StrategyKind::LlWfqSlice => self.pick_slice(dev, rings),
        }
    }

    /// Paper 000, Fig. 2: passes over the rings in priority order, each ring served up to
    /// min(ring budget, device budget left); after a pass, leave the poll list if every ring is
    /// empty, go to the tail if the device budget is spent, else make another pass.
    ///
    /// When the device budget runs out in the middle of a pass (ring budgets summing to more
    /// than the device budget, e.g. three classes with 60/4/4 under 64), the device goes to the
    /// tail and its next turn resumes the pass where it stopped. Restarting the pass instead
    /// would starve the rings at its end forever.
    #[inline]
    fn pick_budget<V: RingView + ?Sized>(&mut self, dev: DevId, rings: &V) -> Step {
        let d = &mut self.devs[dev];
        loop {
            while d.cursor < d.rings.len() {
                let r = d.rings[d.cursor];
                if rings.backlog(r) > 0 {
                    if d.left == 0 {
                        return Step::Exhausted;
                    }
                    if d.ring_left > 0 {
                        return Step::Serve(r, d.ring_left.min(d.left));
                    }
                    self.ring_stats[r].budget_hits += 1;
                }
                d.cursor += 1;
                if d.cursor < d.rings.len() {
                    d.ring_left = self.ring_budget[d.rings[d.cursor]];
                }
            }
            self.dev_stats[dev].passes += 1;
            d.cursor = 0;
            d.ring_left = self.ring_budget[d.rings[0]];
            if d.rings.iter().all(|&r| rings.backlog(r) == 0) {
                return Step::Empty;
            }
            if d.left == 0 {
                return Step::Exhausted;
            }
        }
    }

    /// Strict non-preemptive priority: the highest non-empty ring, re-decided after every
    /// packet unless the highest ring itself is being served.
    #[inline]
    fn pick_prio<V: RingView + ?Sized>(&mut self, dev: DevId, rings: &V) -> Step {
        let d = &self.devs[dev];
        let Some(i) = d.rings.iter().position(|&r| rings.backlog(r) > 0) else {
            return Step::Empty;
        };
        if d.left == 0 {
            return Step::Exhausted;
        }
        Step::Serve(d.rings[i], if i == 0 { d.left } else { 1 })
    }

    /// Exhaustive service; waiting rings in the order they were first seen waiting.
    #[inline]
    fn pick_fcfs<V: RingView + ?Sized>(&mut self, dev: DevId, rings: &V) -> Step {
        let d = &mut self.devs[dev];
        let mut any = false;
        for (j, &r) in d.rings.iter().enumerate() {
            if rings.backlog(r) > 0 {
                any = true;
                if d.waiting_since[j] == u64::MAX {
                    d.waiting_since[j] = self.seq;
                    self.seq += 1;
                }
            } else {
                d.waiting_since[j] = u64::MAX;
            }
        }
        if !any {
            return Step::Empty;
        }
        if d.left == 0 {
            return Step::Exhausted;
        }
        if !(d.slice_active && rings.backlog(d.rings[d.cursor]) > 0) {
            let (j, _) = d
                .waiting_since
                .iter()
                .enumerate()
                .min_by_key(|&(_, s)| *s)
                .expect("a device has rings");
            d.cursor = j;
            d.slice_active = true;
        }
        Step::Serve(d.rings[d.cursor], d.left)
    }

    /// Paper 001 §V-C: RR/WFQ time slices; the LL variants let a higher class go first at the
    /// next packet boundary unless the current slice began under contention.
    #[inline]
    fn pick_slice<V: RingView + ?Sized>(&mut self, dev: DevId, rings: &V) -> Step {
        let ll = matches!(
            self.kind,
            StrategyKind::LlRrSlice | StrategyKind::LlWfqSlice
        );
        let d = &mut self.devs[dev];
        let n = d.rings.len();
        let highest = d.rings.iter().position(|&r| rings.backlog(r) > 0);
        let Some(highest) = highest else {
            d.slice_active = false;
            return Step::Empty;
        };
        if d.left == 0 {
            return Step::Exhausted;
        }
        let next = if d.slice_active {
            let cur = d.cursor;
            let cur_backlog = rings.backlog(d.rings[cur]);
            if cur_backlog > 0 && d.slice_left_ns > 0 {
                if !(ll && !d.contended && highest < cur) {
                    let max = if ll && !d.contended && cur > 0 {
                        1
                    } else {
                        d.left
                    };
                    return Step::Serve(d.rings[cur], max);
                }
                highest
            } else {
                let expired = cur_backlog > 0;
                let ring = d.rings[cur];
                if expired {
                    self.ring_stats[ring].budget_hits += 1;
                }
                // A ring that drained keeps no debt (nor credit): as in DRR, only a ring that
                // still has work carries its overrun.
                self.slice_debt[ring] = if expired {
                    (-d.slice_left_ns).clamp(0, self.ring_slice[ring])
                } else {
                    0
                };
                if ll && !expired {
                    highest
                } else {
                    (1..=n)
                        .map(|k| (cur + k) % n)
                        .find(|&j| rings.backlog(d.rings[j]) > 0)
                        .expect("some ring is non-empty")
                }
            }
        } else if ll {
            highest
        } else {
            (0..n)
                .map(|k| (d.cursor + k) % n)
                .find(|&j| rings.backlog(d.rings[j]) > 0)
                .expect("some ring is non-empty")
        };
        d.cursor = next;
        d.slice_active = true;
        let ring = d.rings[next];
        d.slice_left_ns = self.ring_slice[ring] - std::mem::take(&mut self.slice_debt[ring]);
        d.contended = d
            .rings
            .iter()
            .enumerate()
            .any(|(j, &r)| j != next && rings.backlog(r) > 0);
        let max = if ll && !d.contended && next > 0 {
            1
        } else {
            d.left
        };
        Step::Serve(d.rings[next], max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::SchedConfig;

    fn engine(kind: StrategyKind, budgets: &[u32]) -> PollEngine {
        let cfg = SchedConfig::new(kind, &["rt", "be"]).with_budgets(budgets);
        PollEngine::new(&cfg.layout().unwrap())
    }

    #[test]
    fn grants_and_their_cost_are_counted_per_ring() {
        let mut e = engine(StrategyKind::LlWfq, &[8, 4]);
        let mut backlog = vec![10usize, 10];
        let mut n = [0u64; 2];
        assert!(e.wake(0));
        while let Some(g) = e.pick(&*backlog) {
            let k = (g.max as usize).min(backlog[g.ring]) as u32;
            backlog[g.ring] -= k as usize;
            n[g.ring] += 1;
            e.complete(g, k, 100 * u64::from(k) + 1000);
        }
        for (r, (s, &grants)) in e.ring_stats().iter().zip(&n).enumerate() {
            assert_eq!(s.grants, grants);
            assert_eq!(s.served, 10);
            assert_eq!(s.cost_ns, 100 * 10 + 1000 * grants, "ring {r}");
        }
        assert!(n[1] >= 3, "BE in 4-frame grants: {n:?}");
    }

    /// Serves every grant fully from `backlog`, returns the sequence of (ring, n).
    fn drain(e: &mut PollEngine, backlog: &mut [usize]) -> Vec<(RingId, u32)> {
        let mut out = Vec::new();
        while let Some(g) = e.pick(&*backlog) {
            let n = (g.max as usize).min(backlog[g.ring]) as u32;
            backlog[g.ring] -= n as usize;
            e.complete(g, n, 0);
            out.push((g.ring, n));
        }
        out
    }

    #[test]
    fn ll_wfq_follows_fig2() {
        let mut e = engine(StrategyKind::LlWfq, &[60, 4]);
        let mut backlog = [100usize, 100];
        assert!(
            e.pick(&backlog[..]).is_none(),
            "an armed device is not polled"
        );
        assert!(e.wake(0));
        assert!(!e.wake(0), "a scheduled device takes no second interrupt");
        let seq = drain(&mut e, &mut backlog);
        assert_eq!(&seq[..4], &[(0, 60), (1, 4), (0, 40), (1, 4)]);
        assert_eq!(backlog, [0, 0]);
        assert!(e.is_idle());
        assert_eq!(e.device_stats()[0].rearms, 1);
        assert!(e.device_stats()[0].budget_exhaustions >= 2);
    }

    #[test]
    fn rr_rotates_devices_with_device_budget() {
        let mut e = engine(StrategyKind::Rr, &[]);
        let mut backlog = [200usize, 200];
        e.wake(1);
        e.wake(0);
        let seq = drain(&mut e, &mut backlog);
        assert_eq!(&seq[..4], &[(1, 64), (0, 64), (1, 64), (0, 64)]);
    }

    #[test]
    fn prio_always_takes_highest_nonempty() {
        let cfg = SchedConfig::new(StrategyKind::Prio, &["a", "b", "c"]);
        let mut e = PollEngine::new(&cfg.layout().unwrap());
        let mut backlog = [0usize, 3, 2];
        e.wake(0);
        let g = e.pick(&backlog[..]).unwrap();
        assert_eq!((g.ring, g.max), (1, 1));
        e.complete(g, 1, 0);
        backlog[1] -= 1;
        backlog[0] = 2;
        let g = e.pick(&backlog[..]).unwrap();
        assert_eq!(g.ring, 0);
    }

    #[test]
    fn ll_slice_prefers_rt_without_contention() {
        let mut cfg = SchedConfig::new(StrategyKind::LlRrSlice, &["rt", "be"]);
        cfg.time_slice_ns = 10_000;
        let mut e = PollEngine::new(&cfg.layout().unwrap());
        let mut backlog = [0usize, 50];
        e.wake(0);
        let g = e.pick(&backlog[..]).unwrap();
        assert_eq!(g.ring, 1);
        e.complete(g, 1, 1000);
        backlog[1] -= 1;
        backlog[0] = 1;
        // BE's slice began uncontended, so RT goes first at the packet boundary.
        assert_eq!(e.pick(&backlog[..]).unwrap().ring, 0);

        // Plain RR-slice keeps serving BE until its slice is spent.
        let mut cfg = SchedConfig::new(StrategyKind::RrSlice, &["rt", "be"]);
        cfg.time_slice_ns = 10_000;
        let mut e = PollEngine::new(&cfg.layout().unwrap());
        let mut backlog = [0usize, 50];
        e.wake(0);
        let g = e.pick(&backlog[..]).unwrap();
        e.complete(g, 1, 1000);
        backlog[1] -= 1;
        backlog[0] = 1;
        let mut be_served = 1;
        loop {
            let g = e.pick(&backlog[..]).unwrap();
            if g.ring == 0 {
                break;
            }
            e.complete(g, 1, 1000);
            backlog[1] -= 1;
            be_served += 1;
        }
        assert_eq!(be_served, 10, "a 10 µs slice at 1 µs per packet");
    }

    /// WFQ 3:1 over a 50 µs Δt with 4.05 µs packets (1518 B, paper 001's calibration): the
    /// slices of 37.5 and 12.5 µs are no whole number of packets, yet with the overrun carried
    /// over each ring gets its weight's share of the CPU.
    #[test]
    fn wfq_keeps_its_weights_when_packets_overrun_the_slice() {
        let mut cfg = SchedConfig::new(StrategyKind::Wfq, &["rt", "be"]);
        cfg.time_slice_ns = 50_000;
        cfg.classes[0].weight = Some(3);
        cfg.classes[1].weight = Some(1);
        let mut e = PollEngine::new(&cfg.layout().unwrap());
        let backlog = [usize::MAX, usize::MAX];
        let mut busy = [0u64; 2];
        e.wake(0);
        for _ in 0..100_000 {
            let g = e.pick(&backlog[..]).unwrap();
            e.complete(g, 1, 4050);
            busy[g.ring] += 4050;
        }
        let rt = busy[0] as f64 / (busy[0] + busy[1]) as f64;
        assert!((rt - 0.75).abs() < 0.001, "RT got {rt:.4} of the CPU");
    }
}
