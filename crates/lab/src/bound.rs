//! Paper 000's model in the loop: for one measured point of an llrouter target, the RT
//! utilisation ρRT and per-packet cost x the worker measured, the bound
//! `Tmax = b·x/(1 − ρRT)` on an RT frame's time in its ring (Eq. 1, `b` the BE ring budget),
//! and whether the RT ring's measured p99 stays within it.
//!
//! Everything comes from two counter snapshots of the router (before and after the point):
//! `x` is the worker's CPU time in grants per frame served (all rings), `ρRT` the RT arrival
//! rate the generator sent times `x`, and the RT ring's wait the worker's ring-latency histogram
//! (XDP receive → served), whose buckets (steps of 1.5–2×) give the p99 as a range.

use llr_core::sched::bound::{tmax_burst_ns, tmax_ns};
use llr_core::sched::StrategyKind;
use llr_ops::metrics::{Histogram, MetricsSnapshot, RingMetrics};

/// The model's quantities at one point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bound {
    /// Mean worker CPU time per frame served, ns (all rings).
    pub x_ns: f64,
    /// RT arrival rate × x.
    pub rho_rt: f64,
    /// The BE ring budget b during the point (the lowest one when several lower rings).
    pub be_budget: u32,
    /// Eq. 1, µs; `None` when ρRT ≥ 1.
    pub tmax_us: Option<f64>,
    /// Frames per burst of the generator during the point (1: frame by frame).
    pub burst: u32,
    /// Eq. 1 for arrivals in bursts of `burst` ([`tmax_burst_ns`]), µs; `None` when ρRT ≥ 1.
    pub tmax_burst_us: Option<f64>,
    /// The RT rings' time-in-ring p99 as its histogram bucket `(low, high]`, µs (`high` is
    /// infinite above the last bound); `None` without RT frames served.
    pub rt_ring_p99_us: Option<(f64, f64)>,
}

/// Whether a measured p99 lies within the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The whole p99 bucket lies at or below Tmax.
    Within,
    /// The whole bucket lies above Tmax (or ρRT ≥ 1: no bound).
    Beyond,
    /// Tmax falls inside the p99's bucket.
    Undecided,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Within => "yes",
            Verdict::Beyond => "no",
            Verdict::Undecided => "bucket",
        }
    }
}

impl Bound {
    /// How the RT ring's p99 compares with Tmax (Eq. 1, smooth arrivals); `None` when no RT
    /// frame was served.
    pub fn verdict(&self) -> Option<Verdict> {
        self.verdict_against(self.tmax_us)
    }

    /// How it compares with the bound for the point's arrival bursts, the like-for-like check
    /// of a generator that sends in batches.
    pub fn verdict_burst(&self) -> Option<Verdict> {
        self.verdict_against(self.tmax_burst_us)
    }

    fn verdict_against(&self, tmax_us: Option<f64>) -> Option<Verdict> {
        let (lo, hi) = self.rt_ring_p99_us?;
        Some(match tmax_us {
            None => Verdict::Beyond,
            Some(t) if hi <= t => Verdict::Within,
            Some(t) if lo >= t => Verdict::Beyond,
            Some(_) => Verdict::Undecided,
        })
    }
}

/// The highest class's name among the rings (ring 0 serves it).
fn rt_class(s: &MetricsSnapshot) -> Option<&str> {
    s.rings
        .iter()
        .find(|r| r.ring == 0)
        .map(|r| r.class.as_str())
}

impl Bound {
    /// The bound with the BE budget `during` shows (a snapshot taken while the traffic still
    /// ran): under `budget = "auto"` the worker keeps setting budgets after the traffic ends,
    /// with no RT load any more, so the budget read afterwards is not the one the point ran
    /// with. Unchanged when `during` has no budget-limited lower ring.
    pub fn with_budget_from(self, during: &MetricsSnapshot) -> Bound {
        let Some(rt) = rt_class(during) else {
            return self;
        };
        let b = (during.rings.iter())
            .filter(|r| r.class != rt && r.budget > 0)
            .map(|r| r.budget)
            .min();
        match b {
            Some(be_budget) => Bound {
                be_budget,
                tmax_us: tmax_ns(be_budget, self.x_ns, self.rho_rt).map(|t| t / 1000.0),
                tmax_burst_us: tmax_burst_ns(be_budget, self.burst, self.x_ns, self.rho_rt)
                    .map(|t| t / 1000.0),
                ..self
            },
            None => self,
        }
    }
}

/// The bound at a point that sent `sent_rt` RT packets in `secs` seconds in bursts of `burst`
/// frames, between the counter snapshots `a` and `b` of the router. `None` when the strategy has no BE ring budget that
/// Eq. 1 is about (only `ll-wfq` and `ll-rr` serve a budget-limited BE ring between RT visits),
/// or no frame was served.
pub fn at_point(
    a: &MetricsSnapshot,
    b: &MetricsSnapshot,
    sent_rt: u64,
    secs: f64,
    burst: u32,
) -> Option<Bound> {
    if !matches!(b.strategy, Some(StrategyKind::LlWfq | StrategyKind::LlRr)) || secs <= 0.0 {
        return None;
    }
    let rt = rt_class(b)?;
    let before = |r: &RingMetrics| {
        a.rings
            .iter()
            .find(|p| p.worker == r.worker && p.device == r.device && p.ring == r.ring)
    };
    let served = ring_delta(a, b, |_| true, |r| r.served as f64) as u64;
    let cost_s = ring_delta(a, b, |_| true, |r| r.grant_seconds);
    let mut rt_wait: Option<Histogram> = None;
    let mut be_budget = u32::MAX;
    for r in &b.rings {
        let p = before(r);
        if r.class == rt {
            let d = match p {
                Some(p) => r.latency.since(&p.latency),
                None => r.latency.clone(),
            };
            rt_wait = Some(match rt_wait {
                None => d,
                Some(mut h) => {
                    for (c, n) in h.counts.iter_mut().zip(&d.counts) {
                        *c += n;
                    }
                    h
                }
            });
        } else if r.budget > 0 {
            be_budget = be_budget.min(r.budget);
        }
    }
    if served == 0 || be_budget == u32::MAX {
        return None;
    }
    let x_ns = cost_s * 1e9 / served as f64;
    let rho_rt = sent_rt as f64 / secs * x_ns * 1e-9;
    let rt_ring_p99_us = rt_wait.and_then(|h| p99_bucket_us(&h));
    Some(Bound {
        x_ns,
        rho_rt,
        be_budget,
        tmax_us: tmax_ns(be_budget, x_ns, rho_rt).map(|t| t / 1000.0),
        burst,
        tmax_burst_us: tmax_burst_ns(be_budget, burst, x_ns, rho_rt).map(|t| t / 1000.0),
        rt_ring_p99_us,
    })
}

/// One ring's grants during a point, summed over workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrantShape {
    pub frames_per_grant: f64,
    pub ns_per_grant: f64,
    /// The share of the grants that ended in a transmit flush (`TxPolicy`).
    pub flushes_per_grant: f64,
    /// Per grant: the worker's ns inside those flushes and the frames they sent (NaN from a
    /// router that does not count them).
    pub flush_ns_per_grant: f64,
    pub flushed_per_grant: f64,
}

/// The grants of the highest ring (ring 0) and of the lowest (the last; under `sq` the only
/// one, which then is reported as the lowest) between the snapshots `a` and `b`: where the
/// flushes happen.
pub fn grant_shapes(
    a: &MetricsSnapshot,
    b: &MetricsSnapshot,
) -> (Option<GrantShape>, Option<GrantShape>) {
    match b.rings.iter().map(|r| r.ring).max() {
        Some(0) => (None, shape(a, b, |r| r == 0)),
        Some(l) => (shape(a, b, |r| r == 0), shape(a, b, |r| r == l)),
        None => (None, None),
    }
}

/// The grants of every ring together: what calibrates the simulator's grant and flush costs
/// (`c_g + flushes·c_f + frames·x` per grant). Per ring the fit cannot work: a flush transmits
/// the frames of earlier grants too, whatever ring they came from, and its time is billed to
/// the grant that happened to trigger it.
pub fn grant_total(a: &MetricsSnapshot, b: &MetricsSnapshot) -> Option<GrantShape> {
    shape(a, b, |_| true)
}

/// Counter `field` of the rings `rings` selects (ring ids), summed over workers and devices,
/// between the snapshots `a` and `b`: each ring against its own reading in `a` (a ring new in
/// `b` counts from 0, a counter that went back counts 0).
pub fn ring_delta(
    a: &MetricsSnapshot,
    b: &MetricsSnapshot,
    rings: impl Fn(u32) -> bool,
    field: impl Fn(&RingMetrics) -> f64,
) -> f64 {
    b.rings
        .iter()
        .filter(|r| rings(r.ring))
        .map(|r| {
            let p = a
                .rings
                .iter()
                .find(|p| p.worker == r.worker && p.device == r.device && p.ring == r.ring);
            (field(r) - p.map_or(0.0, &field)).max(0.0)
        })
        .sum()
}

fn shape(
    a: &MetricsSnapshot,
    b: &MetricsSnapshot,
    rings: impl Fn(u32) -> bool,
) -> Option<GrantShape> {
    let delta = |field: fn(&RingMetrics) -> f64| ring_delta(a, b, &rings, field);
    let grants = delta(|r| r.grants as f64) as u64;
    let served = delta(|r| r.served as f64) as u64;
    let secs = delta(|r| r.grant_seconds);
    let flushes = delta(|r| r.tx_flushes as f64) as u64;
    let flush_secs = delta(|r| r.tx_flush_seconds);
    let flushed = delta(|r| r.tx_flushed_frames as f64) as u64;
    // A router without the flush counters reports 0 frames flushed while it flushed.
    let counted = flushes == 0 || flushed > 0;
    (grants > 0).then(|| GrantShape {
        frames_per_grant: served as f64 / grants as f64,
        ns_per_grant: secs * 1e9 / grants as f64,
        flushes_per_grant: flushes as f64 / grants as f64,
        flush_ns_per_grant: if counted {
            flush_secs * 1e9 / grants as f64
        } else {
            f64::NAN
        },
        flushed_per_grant: if counted {
            flushed as f64 / grants as f64
        } else {
            f64::NAN
        },
    })
}

/// The bucket `(low, high]` of `h`'s 0.99-quantile, µs.
fn p99_bucket_us(h: &Histogram) -> Option<(f64, f64)> {
    let hi = h.quantile_bound(0.99)?;
    let i = h.bounds.iter().position(|b| *b == hi);
    let lo = match i {
        Some(0) => 0.0,
        Some(i) => h.bounds[i - 1],
        None => h.bounds.last().copied().unwrap_or(0.0),
    };
    Some((lo * 1e6, hi * 1e6))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(
        ring: u32,
        class: &str,
        served: u64,
        grant_s: f64,
        budget: u32,
        waits_us: &[f64],
    ) -> RingMetrics {
        let mut latency = Histogram::new(Histogram::latency_bounds());
        for w in waits_us {
            latency.observe(w * 1e-6);
        }
        RingMetrics {
            ring,
            class: class.into(),
            served,
            grant_seconds: grant_s,
            budget,
            latency,
            ..RingMetrics::default()
        }
    }

    fn snap(strategy: &str, rings: Vec<RingMetrics>) -> MetricsSnapshot {
        MetricsSnapshot {
            strategy: Some(strategy.parse().expect("a strategy")),
            rings,
            ..MetricsSnapshot::default()
        }
    }

    #[test]
    fn the_bound_comes_from_the_counters_moved_during_the_point() {
        let a = snap(
            "ll-wfq",
            vec![
                ring(0, "rt", 1_000, 0.001, 60, &[3.0; 10]),
                ring(1, "be", 9_000, 0.010, 4, &[]),
            ],
        );
        // 1 s: 300 k RT and 700 k BE frames served for 0.5 s of grants → x = 500 ns;
        // 300 k RT sent → ρRT = 0.15; Tmax = 4 · 500 / 0.85 ns = 2.35 µs.
        let mut waits = vec![3.0; 10];
        waits.extend(vec![1.5; 990]);
        waits.extend(vec![15.0; 20]);
        let b = snap(
            "ll-wfq",
            vec![
                ring(0, "rt", 301_000, 0.151, 60, &waits),
                ring(1, "be", 709_000, 0.360, 4, &[]),
            ],
        );
        let m = at_point(&a, &b, 300_000, 1.0, 8).unwrap();
        assert!((m.x_ns - 500.0).abs() < 1e-6, "{m:?}");
        assert!((m.rho_rt - 0.15).abs() < 1e-9, "{m:?}");
        assert_eq!(m.be_budget, 4);
        assert!((m.tmax_us.unwrap() - 2.0 / 0.85).abs() < 1e-9, "{m:?}");
        // `budget = "auto"` had the BE ring at 12 while the traffic ran: that budget, not the
        // one read afterwards, goes into Tmax (12 · 500 / 0.85 ns).
        let during = snap(
            "ll-wfq",
            vec![
                ring(0, "rt", 200_000, 0.1, 60, &[]),
                ring(1, "be", 500_000, 0.2, 12, &[]),
            ],
        );
        let d = m.with_budget_from(&during);
        assert_eq!(d.be_budget, 12);
        assert!((d.tmax_us.unwrap() - 6.0 / 0.85).abs() < 1e-9, "{d:?}");
        assert_eq!((d.x_ns, d.rho_rt), (m.x_ns, m.rho_rt));
        // 1010 new waits, 20 of them 15 µs (2 %): the p99 is in (10, 15] µs, above Tmax. The
        // ten 3 µs waits before the point do not count.
        let (lo, hi) = m.rt_ring_p99_us.unwrap();
        assert!(
            (lo - 10.0).abs() < 1e-9 && (hi - 15.0).abs() < 1e-9,
            "{m:?}"
        );
        assert_eq!(m.verdict(), Some(Verdict::Beyond));
        let within = Bound {
            rt_ring_p99_us: Some((1.0, 2.0)),
            ..m
        };
        assert_eq!(within.verdict(), Some(Verdict::Within));
        let straddles = Bound {
            rt_ring_p99_us: Some((2.0, 5.0)),
            ..m
        };
        assert_eq!(straddles.verdict(), Some(Verdict::Undecided));
        let saturated = Bound {
            tmax_us: None,
            ..within
        };
        assert_eq!(saturated.verdict(), Some(Verdict::Beyond));
        // Bursts of 8: b + 7 = 11 services, 5.5 / 0.85 = 6.47 µs; the (10, 15] µs p99 is beyond
        // that too, a (5, 6] µs one within it though beyond Eq. 1.
        assert_eq!(m.burst, 8);
        assert!(
            (m.tmax_burst_us.unwrap() - 5.5 / 0.85).abs() < 1e-9,
            "{m:?}"
        );
        assert_eq!(m.verdict_burst(), Some(Verdict::Beyond));
        let bursty = Bound {
            rt_ring_p99_us: Some((5.0, 6.0)),
            ..m
        };
        assert_eq!(bursty.verdict(), Some(Verdict::Beyond));
        assert_eq!(bursty.verdict_burst(), Some(Verdict::Within));
        assert!(
            (d.tmax_burst_us.unwrap() - 9.5 / 0.85).abs() < 1e-9,
            "{d:?}"
        );
    }

    #[test]
    fn grant_shapes_per_ring_over_the_point() {
        let mut r0 = ring(0, "rt", 100, 0.001, 60, &[]);
        r0.grants = 10;
        let mut r1 = ring(1, "be", 400, 0.004, 4, &[]);
        r1.grants = 100;
        let a = snap("ll-wfq", vec![r0.clone(), r1.clone()]);
        // 20 RT grants of 11 frames for 0.002 s; 250 BE grants of 4 frames for 0.005 s.
        r0.grants += 20;
        r0.served += 220;
        r0.grant_seconds += 0.002;
        r0.tx_flushes += 20;
        r1.grants += 250;
        r1.served += 1_000;
        r1.grant_seconds += 0.005;
        r1.tx_flushes += 50;
        let b = snap("ll-wfq", vec![r0, r1]);
        let (hi, lo) = grant_shapes(&a, &b);
        let (hi, lo) = (hi.unwrap(), lo.unwrap());
        assert!(
            (hi.frames_per_grant - 11.0).abs() < 1e-9 && (hi.ns_per_grant - 100_000.0).abs() < 1e-3
        );
        assert!(
            (lo.frames_per_grant - 4.0).abs() < 1e-9 && (lo.ns_per_grant - 20_000.0).abs() < 1e-3
        );
        assert!((hi.flushes_per_grant - 1.0).abs() < 1e-9);
        assert!((lo.flushes_per_grant - 0.2).abs() < 1e-9);
        // Both rings: 270 grants, 1220 frames, 70 flushes, 0.007 s.
        let all = grant_total(&a, &b).unwrap();
        assert!((all.frames_per_grant - 1220.0 / 270.0).abs() < 1e-9);
        assert!((all.flushes_per_grant - 70.0 / 270.0).abs() < 1e-9);
        assert!((all.ns_per_grant - 7e6 / 270.0).abs() < 1e-3);
        // sq: the one ring is the lowest.
        let mut all = ring(0, "all", 0, 0.0, 64, &[]);
        let a = snap("sq", vec![all.clone()]);
        all.grants = 2;
        all.served = 64;
        all.grant_seconds = 0.0001;
        let (hi, lo) = grant_shapes(&a, &snap("sq", vec![all]));
        assert_eq!(hi, None);
        assert!((lo.unwrap().frames_per_grant - 32.0).abs() < 1e-9);
    }

    #[test]
    fn no_bound_without_a_budget_limited_be_ring_or_traffic() {
        let one = |s: &str| snap(s, vec![ring(0, "all", 1_000, 0.001, 64, &[])]);
        assert_eq!(at_point(&one("sq"), &one("sq"), 10, 1.0, 1), None);
        let idle = snap(
            "ll-wfq",
            vec![
                ring(0, "rt", 0, 0.0, 60, &[]),
                ring(1, "be", 0, 0.0, 4, &[]),
            ],
        );
        assert_eq!(at_point(&idle, &idle, 0, 1.0, 1), None);
    }
}
