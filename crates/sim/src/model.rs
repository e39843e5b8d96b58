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
    let k = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), (n, t)| (a + n, b + t));
    let (mx, my) = (sx / k, sy / k);
    let sxx: f64 = pts.iter().map(|(n, _)| (n - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|(n, t)| (n - mx) * (t - my)).sum();
    if pts.len() < 2 || sxx <= 1e-9 * k {
        return None;
    }
    let x = sxy / sxx;
    Some((my - x * mx, x))
}

/// The live worker's costs split three ways: `t = grant_ns + flushes·flush_ns + frames·frame_ns`
/// per grant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrantCost {
    pub grant_ns: f64,
    pub flush_ns: f64,
    pub frame_ns: f64,
}

/// Least squares of `t = c_g + f·c_f + n·x` over `(n frames, f flushes, t ns)` per grant:
/// needs points whose frames and flushes vary independently (sq's 32-frame grants flush every
/// time, ll-wfq's RT grants too with a few frames, its BE grants rarely), else `None`.
pub fn fit_grant_flush_cost(points: &[(f64, f64, f64)]) -> Option<GrantCost> {
    let pts: Vec<[f64; 3]> = (points.iter())
        .filter(|(n, f, t)| n.is_finite() && f.is_finite() && t.is_finite() && *n > 0.0)
        .map(|&(n, f, t)| [n, f, t])
        .collect();
    if pts.len() < 3 {
        return None;
    }
    // Normal equations of the design matrix [1, f, n] against t.
    let mut a = [[0.0f64; 4]; 3];
    for p in &pts {
        let row = [1.0, p[1], p[0]];
        for i in 0..3 {
            for j in 0..3 {
                a[i][j] += row[i] * row[j];
            }
            a[i][3] += row[i] * p[2];
        }
    }
    // Gaussian elimination with partial pivoting; a tiny pivot means the columns are dependent.
    let scale = a[0][0].max(a[1][1]).max(a[2][2]);
    for c in 0..3 {
        let p = (c..3).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() <= 1e-9 * scale {
            return None;
        }
        a.swap(c, p);
        let pivot = a[c];
        for (r, row) in a.iter_mut().enumerate() {
            if r != c {
                let k = row[c] / pivot[c];
                for (v, p) in row.iter_mut().zip(pivot).skip(c) {
                    *v -= k * p;
                }
            }
        }
    }
    Some(GrantCost {
        grant_ns: a[0][3] / a[0][0],
        flush_ns: a[1][3] / a[1][1],
        frame_ns: a[2][3] / a[2][2],
    })
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
    fn grant_and_flush_costs_are_told_apart() {
        // sq-like, ll-wfq RT-like and BE-like grants on t = 300 + 2500·f + 1500·n.
        let t = |n: f64, f: f64| (n, f, 300.0 + 2500.0 * f + 1500.0 * n);
        let pts = [t(31.6, 1.0), t(5.0, 1.0), t(3.8, 0.05), t(3.9, 0.1)];
        let c = fit_grant_flush_cost(&pts).unwrap();
        assert!((c.grant_ns - 300.0).abs() < 1e-6, "{c:?}");
        assert!((c.flush_ns - 2500.0).abs() < 1e-6, "{c:?}");
        assert!((c.frame_ns - 1500.0).abs() < 1e-6, "{c:?}");
        // Every grant flushes: flushes and the constant cannot be told apart.
        let all = [t(31.6, 1.0), t(5.0, 1.0), t(3.8, 1.0)];
        assert_eq!(fit_grant_flush_cost(&all), None);
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
