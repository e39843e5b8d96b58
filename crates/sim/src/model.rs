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

/// Eq. 1: the RT latency bound for BE ring budget `budget`, service time `service_ns` and RT
/// utilisation `rho_rt`. `None` when `rho_rt ≥ 1` (the series diverges).
pub fn tmax_ns(budget: u32, service_ns: f64, rho_rt: f64) -> Option<f64> {
    (rho_rt < 1.0).then(|| budget as f64 * service_ns / (1.0 - rho_rt))
}

/// Eq. 2: the largest BE ring budget keeping the RT latency within `m` service times;
/// 0 when even a budget of 1 would exceed it.
pub fn max_budget(m: f64, rho_rt: f64) -> u32 {
    let b = m * (1.0 - rho_rt);
    if b.is_finite() && b >= 1.0 {
        // The small epsilon keeps 6·(1−0.5)=3.0 at 3 despite rounding in 1−ρ.
        (b + 1e-9).floor() as u32
    } else {
        0
    }
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
    fn paper_examples() {
        // Paper 000: m = 6, ρRT ≤ 0.3 → b = 4; ρRT ≤ 0.5 → b = 3.
        assert_eq!(max_budget(6.0, 0.3), 4);
        assert_eq!(max_budget(6.0, 0.5), 3);
        assert_eq!(max_budget(1.0, 0.5), 0);
        let t = tmax_ns(4, 600.0, 0.3).unwrap();
        assert!((t - 4.0 * 600.0 / 0.7).abs() < 1e-9);
        assert_eq!(tmax_ns(4, 600.0, 1.0), None);
        // Paper 001: 1518 B frames take about 4.05 µs.
        assert!((service_time_ns(1518) - 4049.77).abs() < 0.01);
    }
}
