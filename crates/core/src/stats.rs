//! Latency histograms and per-flow sequence tracking (loss, reordering, duplicates).
//!
//! Pure bookkeeping: values (latencies in ns, sequence numbers) come in as arguments.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest latency recorded exactly (60 s); larger values are clamped to it.
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// A latency histogram in nanoseconds (HDR, 3 significant digits: ≤ 0.1 % quantisation error).
#[derive(Debug, Clone)]
pub struct LatencyHist {
    h: Histogram<u64>,
    clamped: u64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

/// Summary of a [`LatencyHist`], all values in ns.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl LatencyHist {
    /// An empty histogram covering 1 ns .. [`MAX_LATENCY_NS`].
    pub fn new() -> Self {
        LatencyHist {
            h: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)
                .expect("static histogram bounds are valid"),
            clamped: 0,
        }
    }

    /// Records one latency; 0 is recorded as 1 ns, values above [`MAX_LATENCY_NS`] are clamped
    /// (and counted in [`LatencyHist::clamped`]).
    pub fn record(&mut self, ns: u64) {
        let v = if ns > MAX_LATENCY_NS {
            self.clamped += 1;
            MAX_LATENCY_NS
        } else {
            ns.max(1)
        };
        // Cannot fail: v is within the bounds.
        let _ = self.h.record(v);
    }

    /// Number of values clamped to [`MAX_LATENCY_NS`].
    pub fn clamped(&self) -> u64 {
        self.clamped
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// Adds another histogram's values to this one.
    pub fn merge(&mut self, other: &LatencyHist) {
        // Cannot fail: both histograms have the same bounds.
        let _ = self.h.add(&other.h);
        self.clamped += other.clamped;
    }

    /// The value at quantile `q` (0..=1), 0 if empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.h.is_empty() {
            0
        } else {
            self.h.value_at_quantile(q)
        }
    }

    /// Count, mean, min, p50, p90, p99, p99.9 and max (all 0 when empty).
    pub fn summary(&self) -> LatencySummary {
        if self.h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.h.len(),
            mean: self.h.mean(),
            min: self.h.min(),
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.h.max(),
        }
    }
}

/// Most gap ranges a [`SeqTracker`] remembers; beyond it the oldest gaps are given up as lost
/// for good (a later arrival from them counts as [`SeqStats::too_late`]).
pub const MAX_GAPS: usize = 1 << 16;

/// Loss and ordering of one flow whose sender numbers packets `base, base+1, …` (u64, no wrap).
///
/// Definitions (`max` = highest sequence number received so far):
/// - `received`: every packet seen, duplicates included;
/// - `unique`: distinct sequence numbers seen;
/// - `lost`: sequence numbers in `base..=max` not (yet) received — a gap that is later filled
///   stops counting as lost; trailing loss after `max` is invisible here (compare `unique` with the
///   sender's count, see [`SeqTracker::lost_given_sent`]);
/// - `reordered`: packets that arrived after a higher sequence number and were not seen before
///   (late arrivals filling a gap);
/// - `duplicates`: packets whose sequence number was already received (or is below `base`);
/// - `too_late`: late arrivals for gaps already given up (more than [`MAX_GAPS`] gaps open) —
///   counted neither as unique nor as duplicates.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    base: u64,
    /// `max + 1`, or `base` before the first packet.
    next: u64,
    /// Open gaps: start → end (exclusive).
    gaps: BTreeMap<u64, u64>,
    /// Sequence numbers below this are no longer tracked (gaps given up).
    horizon: u64,
    stats: SeqStats,
}

/// Counters of a [`SeqTracker`]; see its definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SeqStats {
    pub received: u64,
    pub unique: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub too_late: u64,
}

impl SeqStats {
    /// Field-wise sum.
    pub fn add(&mut self, o: &SeqStats) {
        self.received += o.received;
        self.unique += o.unique;
        self.lost += o.lost;
        self.reordered += o.reordered;
        self.duplicates += o.duplicates;
        self.too_late += o.too_late;
    }
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new(0)
    }
}

impl SeqTracker {
    /// A tracker for a flow whose first sequence number is `base`.
    pub fn new(base: u64) -> Self {
        SeqTracker {
            base,
            next: base,
            gaps: BTreeMap::new(),
            horizon: base,
            stats: SeqStats::default(),
        }
    }

    /// Accounts one received packet.
    pub fn record(&mut self, seq: u64) {
        let s = &mut self.stats;
        s.received += 1;
        if seq >= self.next {
            if seq > self.next {
                self.gaps.insert(self.next, seq);
                s.lost += seq - self.next;
                if self.gaps.len() > MAX_GAPS {
                    if let Some((_, end)) = self.gaps.pop_first() {
                        self.horizon = end;
                    }
                }
            }
            s.unique += 1;
            self.next = seq + 1;
            return;
        }
        if seq < self.base {
            s.duplicates += 1;
            return;
        }
        // seq < next: a late arrival or a duplicate. Find the gap that would contain it.
        match self.gaps.range(..=seq).next_back().map(|(&a, &b)| (a, b)) {
            Some((start, end)) if seq < end => {
                self.gaps.remove(&start);
                if start < seq {
                    self.gaps.insert(start, seq);
                }
                if seq + 1 < end {
                    self.gaps.insert(seq + 1, end);
                }
                s.lost -= 1;
                s.unique += 1;
                s.reordered += 1;
            }
            _ if seq < self.horizon => s.too_late += 1,
            _ => s.duplicates += 1,
        }
    }

    /// The counters.
    pub fn stats(&self) -> SeqStats {
        self.stats
    }

    /// Packets lost if the sender sent `sent` packets (`base..base+sent`): `sent − unique`,
    /// which includes trailing loss.
    pub fn lost_given_sent(&self, sent: u64) -> u64 {
        sent.saturating_sub(self.stats.unique)
    }
}

/// [`SeqTracker`]s of many flows, created on first sight with base 0.
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    flows: HashMap<u16, SeqTracker>,
}

impl FlowTable {
    /// Accounts a packet of `flow`.
    pub fn record(&mut self, flow: u16, seq: u64) {
        self.flows.entry(flow).or_default().record(seq);
    }

    /// Number of flows seen.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// One flow's tracker.
    pub fn get(&self, flow: u16) -> Option<&SeqTracker> {
        self.flows.get(&flow)
    }

    /// All flows (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = (u16, &SeqTracker)> {
        self.flows.iter().map(|(&f, t)| (f, t))
    }

    /// Sum of all flows' counters.
    pub fn total(&self) -> SeqStats {
        let mut t = SeqStats::default();
        for f in self.flows.values() {
            t.add(&f.stats());
        }
        t
    }
}

/// A least-squares line `y = intercept + slope·x` and its coefficient of determination: the
/// one fit behind the simulator's grant cost, paper 003's switch cost and `tune`'s tail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineFit {
    pub intercept: f64,
    pub slope: f64,
    /// R² (1 when every y is the same and the line goes through them).
    pub r2: f64,
}

impl LineFit {
    /// The fit of `points`; `None` with fewer than two distinct x, or a value that is not a
    /// number.
    pub fn of(points: &[(f64, f64)]) -> Option<LineFit> {
        let k = points.len() as f64;
        if points.len() < 2 || points.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
            return None;
        }
        let (mx, my) = (
            points.iter().map(|p| p.0).sum::<f64>() / k,
            points.iter().map(|p| p.1).sum::<f64>() / k,
        );
        let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
        let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        let syy: f64 = points.iter().map(|(_, y)| (y - my).powi(2)).sum();
        if sxx <= 1e-9 * k * (1.0 + mx.abs()) {
            return None;
        }
        let slope = sxy / sxx;
        Some(LineFit {
            intercept: my - slope * mx,
            slope,
            r2: if syy > 0.0 {
                sxy * sxy / (sxx * syy)
            } else {
                1.0
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_fit_recovers_a_line_and_refuses_one_x() {
        let pts: Vec<(f64, f64)> = (1..=4).map(|x| (x as f64, 10.0 + 2.5 * x as f64)).collect();
        let f = LineFit::of(&pts).unwrap();
        assert!((f.intercept - 10.0).abs() < 1e-9 && (f.slope - 2.5).abs() < 1e-9);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        let noisy = [(0.0, 0.0), (1.0, 2.0), (2.0, 1.0), (3.0, 3.0)];
        let f = LineFit::of(&noisy).unwrap();
        assert!(f.r2 > 0.5 && f.r2 < 1.0, "{f:?}");
        assert_eq!(LineFit::of(&[(1.0, 2.0), (1.0, 3.0)]), None);
        assert_eq!(LineFit::of(&[(1.0, 2.0)]), None);
        assert_eq!(LineFit::of(&[(1.0, 2.0), (f64::NAN, 3.0)]), None);
    }

    fn run(seqs: &[u64]) -> SeqStats {
        let mut t = SeqTracker::new(0);
        for &s in seqs {
            t.record(s);
        }
        t.stats()
    }

    fn st(received: u64, unique: u64, lost: u64, reordered: u64, duplicates: u64) -> SeqStats {
        SeqStats {
            received,
            unique,
            lost,
            reordered,
            duplicates,
            too_late: 0,
        }
    }

    #[test]
    fn in_order() {
        assert_eq!(run(&[0, 1, 2, 3]), st(4, 4, 0, 0, 0));
    }

    #[test]
    fn loss_in_the_middle_and_at_start() {
        assert_eq!(run(&[0, 1, 4, 5, 9]), st(5, 5, 5, 0, 0));
        assert_eq!(run(&[3, 4]), st(2, 2, 3, 0, 0));
    }

    #[test]
    fn reorder_fills_gaps() {
        // 2 arrives after 3: one reordered, nothing lost.
        assert_eq!(run(&[0, 1, 3, 2, 4]), st(5, 5, 0, 1, 0));
        // Late arrivals in the middle and at both ends of a gap 1..6.
        assert_eq!(run(&[0, 6, 3, 1, 5, 7]), st(6, 6, 2, 3, 0));
    }

    #[test]
    fn duplicates() {
        assert_eq!(run(&[0, 1, 1, 2, 0]), st(5, 3, 0, 0, 2));
        // A late arrival repeated: first is reordered, second a duplicate.
        assert_eq!(run(&[0, 2, 1, 1]), st(4, 3, 0, 1, 1));
        // Below base.
        let mut t = SeqTracker::new(10);
        t.record(10);
        t.record(9);
        assert_eq!(t.stats(), st(2, 1, 0, 0, 1));
    }

    #[test]
    fn huge_u64_sequence_numbers() {
        let b = u64::MAX - 10;
        let mut t = SeqTracker::new(b);
        for s in [b, b + 2, b + 1, b + 5] {
            t.record(s);
        }
        assert_eq!(t.stats(), st(4, 4, 2, 1, 0));
        assert_eq!(t.lost_given_sent(10), 6);
    }

    #[test]
    fn gaps_beyond_the_limit_are_given_up() {
        let mut t = SeqTracker::new(0);
        for i in 0..=(MAX_GAPS as u64 + 1) {
            t.record(2 * i); // a gap at every odd number
        }
        t.record(1); // the oldest gap was given up
        t.record(3); // still tracked
        let s = t.stats();
        assert_eq!(s.too_late, 1);
        assert_eq!(s.reordered, 1);
        assert_eq!(s.duplicates, 0);
    }

    #[test]
    fn flow_table_sums() {
        let mut f = FlowTable::default();
        for (flow, seq) in [(1, 0), (2, 0), (1, 2), (2, 1), (2, 1)] {
            f.record(flow, seq);
        }
        assert_eq!(f.flows(), 2);
        assert_eq!(f.get(1).unwrap().stats().lost, 1);
        assert_eq!(f.total(), st(5, 4, 1, 0, 1));
    }

    #[test]
    fn histogram_summary_and_merge() {
        let mut a = LatencyHist::new();
        assert_eq!(a.summary(), LatencySummary::default());
        for v in 1..=1000u64 {
            a.record(v * 1000);
        }
        let s = a.summary();
        assert_eq!(s.count, 1000);
        let close = |x: u64, want: u64| (x as f64 - want as f64).abs() <= want as f64 * 0.002;
        assert!(close(s.p50, 500_000), "{s:?}");
        assert!(close(s.p99, 990_000), "{s:?}");
        assert!(close(s.max, 1_000_000), "{s:?}");
        assert!((s.mean - 500_500.0).abs() < 1000.0, "{s:?}");
        let mut b = LatencyHist::new();
        b.record(0);
        b.record(u64::MAX);
        assert_eq!(b.clamped(), 1);
        a.merge(&b);
        let m = a.summary();
        assert_eq!(m.count, 1002);
        assert_eq!(m.min, 1);
        assert!(close(m.max, MAX_LATENCY_NS));
    }
}
