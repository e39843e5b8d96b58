//! Paper 000's latency bound for the highest class (§III-D), shared by the simulator, the
//! testbed's reports and the worker's automatic budget.
//!
//! - Worst-case RT latency with a BE ring budget `b`: `Tmax = b·x / (1 − ρRT)` (Eq. 1).
//! - Largest budget meeting `Tmax ≤ m·x`: `b ≤ m·(1 − ρRT)` (Eq. 2).

/// Eq. 1: the RT latency bound for BE ring budget `budget`, service time `service_ns` and RT
/// utilisation `rho_rt`. `None` when `rho_rt ≥ 1` (the series diverges) or an input is not a
/// number.
pub fn tmax_ns(budget: u32, service_ns: f64, rho_rt: f64) -> Option<f64> {
    (rho_rt < 1.0 && rho_rt.is_finite() && service_ns.is_finite())
        .then(|| budget as f64 * service_ns / (1.0 - rho_rt.max(0.0)))
}

/// Eq. 1 for arrivals in bursts of `burst` frames that reach the ring together (a generator's
/// batch, a NIC's interrupt coalescing): besides the BE budget, an RT frame may find up to
/// `burst − 1` frames of its own burst ahead of it in the RT ring, so the bound is Eq. 1 with
/// `budget + burst − 1` services (every frame of the burst RT, the worst case). `burst = 1` is
/// Eq. 1.
pub fn tmax_burst_ns(budget: u32, burst: u32, service_ns: f64, rho_rt: f64) -> Option<f64> {
    tmax_ns(budget.saturating_add(burst.max(1) - 1), service_ns, rho_rt)
}

/// Eq. 2: the largest BE ring budget keeping the RT latency within `m` service times;
/// 0 when even a budget of 1 would exceed it.
pub fn max_budget(m: f64, rho_rt: f64) -> u32 {
    let b = m * (1.0 - rho_rt);
    if b.is_finite() && b >= 1.0 {
        // The small epsilon keeps 6·(1−0.5)=3.0 at 3 despite rounding in 1−ρ.
        (b + 1e-9).floor().min(u32::MAX as f64) as u32
    } else {
        0
    }
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
        assert_eq!(max_budget(f64::NAN, 0.5), 0);
        let t = tmax_ns(4, 600.0, 0.3).unwrap();
        assert!((t - 4.0 * 600.0 / 0.7).abs() < 1e-9);
        assert_eq!(tmax_ns(4, 600.0, 1.0), None);
        assert_eq!(tmax_ns(4, 600.0, f64::NAN), None);
        // bursts of 32 with b = 4: 35 services; a burst of 1 (or 0) is Eq. 1
        let t = tmax_burst_ns(4, 32, 600.0, 0.3).unwrap();
        assert!((t - 35.0 * 600.0 / 0.7).abs() < 1e-9);
        assert_eq!(tmax_burst_ns(4, 1, 600.0, 0.3), tmax_ns(4, 600.0, 0.3));
        assert_eq!(tmax_burst_ns(4, 0, 600.0, 0.3), tmax_ns(4, 600.0, 0.3));
        assert_eq!(tmax_burst_ns(4, 32, 600.0, 1.0), None);
    }
}
