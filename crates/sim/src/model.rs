//! The analytic model of paper 000 (§III-D) and the calibration of paper 001 (§V-B).
//!
//! - Worst-case RT latency with a BE ring budget `b`: `Tmax = b·x / (1 − ρRT)` (Eq. 1).
//! - Largest budget meeting `Tmax ≤ m·x`: `b ≤ m·(1 − ρRT)` (Eq. 2).
//! - Service time `x = a·S + b + c` and extra latency `T+ = 4·T_DMA + 2·8·x`.

use serde::Serialize;

/// Paper 001's calibration: ns per byte of the packet.
pub const CAL_A_NS_PER_BYTE: f64 = 2.34;
/// Paper 001's calibration: constant per-packet cost b, in ns.
pub const CAL_B_NS: f64 = 272.47;
/// Paper 001's calibration: constant per-packet cost c, in ns.
pub const CAL_C_NS: f64 = 225.18;
/// One DMA transfer (paper 001), in ns.
pub const T_DMA_NS: f64 = 2_560.0;

/// Service time of a packet of `size` bytes under paper 001's calibration.
pub fn service_time_ns(size: u32) -> f64 {
    CAL_A_NS_PER_BYTE * size as f64 + CAL_B_NS + CAL_C_NS
}

/// Paper 001's extra latency outside the CPU, `T+ = 4·T_DMA + 2·8·x`.
pub fn extra_latency_ns(service_ns: f64) -> f64 {
    4.0 * T_DMA_NS + 2.0 * 8.0 * service_ns
}

pub use llr_core::sched::bound::{max_budget, tmax_ns};

/// Least-squares fit of `ns_per_grant = c_g + frames_per_grant · x` over `(frames, ns)`
/// points (per ring and point, from the live worker's grant counters): `(c_g, x)`. `None` with
/// fewer than two distinct grant sizes.
pub fn fit_grant_cost(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let pts: Vec<(f64, f64)> = (points.iter().copied())
        .filter(|(n, t)| n.is_finite() && t.is_finite() && *n > 0.0)
        .collect();
    llr_core::stats::LineFit::of(&pts).map(|f| (f.intercept, f.slope))
}

/// The live worker's costs split three ways: `t = grant_ns + flushes·flush_ns + frames·frame_ns`
/// per grant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrantCost {
    pub grant_ns: f64,
    pub flush_ns: f64,
    pub frame_ns: f64,
}

/// One measured point for [`fit_grant_flush_cost`]: the measurement round it belongs to, and
/// over every ring the frames, flushes and worker ns per grant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrantPoint {
    pub round: u32,
    pub frames: f64,
    pub flushes: f64,
    pub ns: f64,
}

/// Least squares of the per-frame cost `t/n = x_round + c_g/n + c_f·f/n` over points of several
/// targets: grant cost `c_g` and flush cost `c_f` are the same everywhere, the per-frame cost
/// `x` is one per round, because on a shared VM the machine's speed moves more between rounds
/// than these costs differ between targets (a single `x` gave negative costs). Returns the
/// costs with the median of the rounds' `x`; `None` when the points cannot tell `c_g` and `c_f`
/// apart (e.g. every grant flushes).
pub fn fit_grant_flush_cost(points: &[GrantPoint]) -> Option<GrantCost> {
    let pts: Vec<(u32, Vec<f64>, f64)> = (points.iter())
        .filter(|p| p.frames.is_finite() && p.flushes.is_finite() && p.ns.is_finite())
        .filter(|p| p.frames > 0.0)
        .map(|p| {
            let z = vec![1.0 / p.frames, p.flushes / p.frames];
            (p.round, z, p.ns / p.frames)
        })
        .collect();
    let (c, frame_ns) = fit_shared_plus_round(&pts)?;
    Some(GrantCost {
        grant_ns: c[0],
        flush_ns: c[1],
        frame_ns,
    })
}

/// One measured point for [`fit_split_cost`]: per grant (over every ring), the frames served,
/// the flushes, the frames those flushes handed to the kernel, the worker's ns, and the ns
/// of it spent inside the flushes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitPoint {
    pub round: u32,
    pub frames: f64,
    pub flushes: f64,
    pub flushed: f64,
    pub ns: f64,
    pub flush_ns: f64,
}

impl From<&SplitPoint> for GrantPoint {
    /// The same point for the three-way fit, which ignores the flushes' own time.
    fn from(p: &SplitPoint) -> GrantPoint {
        GrantPoint {
            round: p.round,
            frames: p.frames,
            flushes: p.flushes,
            ns: p.ns,
        }
    }
}

/// The live worker's costs split four ways, from its time inside flushes measured apart:
/// outside flushes `grant_ns + frames·frame_ns` (the receive part), inside them
/// `flush_ns + frames flushed·flush_frame_ns` (the transmit part).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitCost {
    pub grant_ns: f64,
    pub frame_ns: f64,
    pub flush_ns: f64,
    pub flush_frame_ns: f64,
}

/// Fits [`SplitCost`] with one per-frame cost per round for each part (the machine's speed
/// moves between rounds) and the fixed costs shared: per frame served,
/// `(ns − flush_ns)/frames = grant_ns/frames + x_rx(round)`; per frame flushed,
/// `flush_ns/flushed = c_f·flushes/flushed + x_tx(round)`. The per-frame costs returned are
/// the medians over rounds. `None` when a part cannot be fitted (too few points, or no
/// variation in grant or flush sizes).
pub fn fit_split_cost(points: &[SplitPoint]) -> Option<SplitCost> {
    let ok = |p: &&SplitPoint| {
        [p.frames, p.flushes, p.flushed, p.ns, p.flush_ns]
            .iter()
            .all(|v| v.is_finite())
            && p.frames > 0.0
            && p.flushed > 0.0
            && p.flushes > 0.0
    };
    let pts: Vec<&SplitPoint> = points.iter().filter(ok).collect();
    let rx: Vec<(u32, Vec<f64>, f64)> = (pts.iter())
        .map(|p| {
            (
                p.round,
                vec![1.0 / p.frames],
                (p.ns - p.flush_ns) / p.frames,
            )
        })
        .collect();
    let tx: Vec<(u32, Vec<f64>, f64)> = (pts.iter())
        .map(|p| (p.round, vec![p.flushes / p.flushed], p.flush_ns / p.flushed))
        .collect();
    let (grant, frame_ns) = fit_shared_plus_round(&rx)?;
    let (flush, flush_frame_ns) = fit_shared_plus_round(&tx)?;
    Some(SplitCost {
        grant_ns: grant[0],
        frame_ns,
        flush_ns: flush[0],
        flush_frame_ns,
    })
}

/// Least squares of `y = c·z + x_round` over `(round, z, y)` (`z` the same length in every
/// point): `(c, median of the x_round)`.
fn fit_shared_plus_round(points: &[(u32, Vec<f64>, f64)]) -> Option<(Vec<f64>, f64)> {
    let shared = points.first()?.1.len();
    let mut rounds: Vec<u32> = points.iter().map(|p| p.0).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let k = shared + rounds.len();
    if points.len() <= k {
        return None;
    }
    let rows: Vec<(Vec<f64>, f64)> = (points.iter())
        .map(|(round, z, y)| {
            let mut row = z.clone();
            row.extend(rounds.iter().map(|r| f64::from(u8::from(r == round))));
            (row, *y)
        })
        .collect();
    let b = least_squares(&rows, k)?;
    Some((b[..shared].to_vec(), median(b[shared..].to_vec())))
}

/// The median of the per-round costs (at least one).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Solves the normal equations of `rows` (`k` regressors, response) by Gaussian elimination
/// with partial pivoting; `None` when the regressors are (nearly) dependent.
fn least_squares(rows: &[(Vec<f64>, f64)], k: usize) -> Option<Vec<f64>> {
    let mut a = vec![vec![0.0f64; k + 1]; k];
    for (x, y) in rows {
        for i in 0..k {
            for j in 0..k {
                a[i][j] += x[i] * x[j];
            }
            a[i][k] += x[i] * y;
        }
    }
    let scale = (0..k).map(|i| a[i][i].abs()).fold(0.0, f64::max);
    for c in 0..k {
        let p = (c..k).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() <= 1e-9 * scale {
            return None;
        }
        a.swap(c, p);
        let pivot = a[c].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != c {
                let f = row[c] / pivot[c];
                for (v, q) in row.iter_mut().zip(&pivot).skip(c) {
                    *v -= f * q;
                }
            }
        }
    }
    Some((0..k).map(|i| a[i][k] / a[i][i]).collect())
}

/// A model query's answer, as printed by `llrouter model --json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelReport {
    pub rho_rt: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub m: Option<f64>,
    pub budget: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmax_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmax_service_times: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_fit_recovers_receive_and_transmit_costs_under_a_drifting_machine() {
        // Receive: 200 ns a grant + 300 ns a frame; transmit: 700 ns a flush + 900 ns a frame.
        // Round 2's machine is 20 % slower in the per-frame costs.
        let point = |round: u32, frames: f64, flushes: f64, flushed: f64| {
            let slow = if round == 2 { 1.2 } else { 1.0 };
            let flush_ns = flushes * 700.0 + flushed * 900.0 * slow;
            SplitPoint {
                round,
                frames,
                flushes,
                flushed,
                ns: 200.0 + frames * 300.0 * slow + flush_ns,
                flush_ns,
            }
        };
        let pts: Vec<SplitPoint> = [1, 2, 3]
            .into_iter()
            .flat_map(|r| {
                // sq-like, ll-wfq-like and ll-rr-like grants of that round
                [
                    point(r, 31.7, 1.0, 31.7),
                    point(r, 4.2, 0.44, 4.2),
                    point(r, 3.4, 0.5, 3.4),
                ]
            })
            .collect();
        let c = fit_split_cost(&pts).unwrap();
        assert!((c.grant_ns - 200.0).abs() < 1e-6, "{c:?}");
        assert!((c.frame_ns - 300.0).abs() < 1e-6, "{c:?}");
        assert!((c.flush_ns - 700.0).abs() < 1e-6, "{c:?}");
        assert!((c.flush_frame_ns - 900.0).abs() < 1e-6, "{c:?}");
        // Without the flush time (old counters) there is nothing to split.
        let old: Vec<SplitPoint> = (pts.iter())
            .map(|p| SplitPoint { flushed: 0.0, ..*p })
            .collect();
        assert_eq!(fit_split_cost(&old), None);
    }

    #[test]
    fn grant_and_flush_costs_are_told_apart() {
        // Three targets' grant shapes in two rounds on a machine whose per-frame cost moved
        // from 1500 to 1800 ns between them; grant cost 300, flush cost 2500.
        let shapes = [(31.6, 1.0), (5.0, 1.0), (3.8, 0.05), (6.0, 0.4)];
        let mut pts = Vec::new();
        for (round, x) in [(1, 1500.0), (2, 1800.0)] {
            for &(n, f) in &shapes {
                let ns = 300.0 + 2500.0 * f + x * n;
                pts.push(GrantPoint {
                    round,
                    frames: n,
                    flushes: f,
                    ns,
                });
            }
        }
        let c = fit_grant_flush_cost(&pts).unwrap();
        assert!((c.grant_ns - 300.0).abs() < 1e-6, "{c:?}");
        assert!((c.flush_ns - 2500.0).abs() < 1e-6, "{c:?}");
        assert!(
            (c.frame_ns - 1650.0).abs() < 1e-6,
            "{c:?}: the median of the rounds"
        );
        // Every grant flushes: flushes and grants cannot be told apart.
        let all: Vec<GrantPoint> = (pts.iter())
            .map(|p| GrantPoint { flushes: 1.0, ..*p })
            .collect();
        assert_eq!(fit_grant_flush_cost(&all), None);
        // As many unknowns as points: no fit.
        assert_eq!(fit_grant_flush_cost(&pts[..3]), None);
    }

    #[test]
    fn grant_cost_fit_recovers_a_line() {
        let pts: Vec<(f64, f64)> = [4.0, 11.0, 32.0]
            .iter()
            .map(|&n| (n, 900.0 + 2000.0 * n))
            .collect();
        let (c, x) = fit_grant_cost(&pts).unwrap();
        assert!((c - 900.0).abs() < 1e-6 && (x - 2000.0).abs() < 1e-9);
        assert_eq!(fit_grant_cost(&[(4.0, 1.0), (4.0, 2.0)]), None);
        assert_eq!(fit_grant_cost(&[(4.0, 1.0)]), None);
    }

    #[test]
    fn paper001_service_time() {
        // Paper 001: 1518 B frames take about 4.05 µs.
        assert!((service_time_ns(1518) - 4049.77).abs() < 0.01);
    }
}
