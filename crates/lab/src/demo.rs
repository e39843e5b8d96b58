//! The live half of `llrouter demo`: SQ vs LL-WFQ vs the Linux kernel on the namespace testbed,
//! 30 % RT, RT and BE latency and loss side by side at three loads per target: light, flat out
//! (the bpf-live generator as fast as it goes) and [`OVERLOAD`] × what the target forwarded flat
//! out.
//!
//! Flat out, the RT class alone offers more than half of what the router can serve (ρRT ≈ 0.75
//! with 30 % RT at ~2.5× capacity), where paper 000's bound `Tmax = b·x/(1 − ρRT)` protects RT
//! little; at 1.5× capacity ρRT = 0.3 × 1.5 = 0.45 stays below ~0.5, the regime the strategy
//! is for. The rows carry the measured ρRT, x and Tmax ([`crate::bound`]).
//!
//! Needs root (network namespaces, XDP). Total time ≈ 3 targets × 3 points × (`secs` + ~1 s)
//! plus the router start-ups; `secs` is capped so the whole comparison stays within ~40 s.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use llr_core::sched::StrategyKind;
use llr_io::xsk::WakeMode;

use crate::measure::Row;
use crate::options::{need_root, Options, Target};
use crate::sweep::compare_planned;
use crate::Result;

/// Light load of the comparison, packets/s.
pub const LIGHT_PPS: f64 = 50_000.0;
/// RT share of the comparison.
pub const RT_SHARE: f64 = 0.3;
/// The third point's offered load, as a multiple of what the target forwarded flat out: with
/// [`RT_SHARE`] it keeps ρRT at about 0.45.
pub const OVERLOAD: f64 = 1.5;

/// What each point of the comparison offers: [`LIGHT_PPS`], flat out (0), then [`OVERLOAD`] ×
/// the flat-out point's forwarded rate (skipped if that point forwarded nothing).
pub fn next_load(done: &[Row]) -> Option<f64> {
    match done {
        [] => Some(LIGHT_PPS),
        [_] => Some(0.0),
        [_, flat] if flat.throughput_pps > 0.0 => Some((OVERLOAD * flat.throughput_pps).round()),
        _ => None,
    }
}

/// The seconds per point the comparison uses for `secs` (clamped to 0.5..=3).
pub fn point_secs(secs: f64) -> f64 {
    if secs.is_finite() {
        secs.clamp(0.5, 3.0)
    } else {
        1.0
    }
}

/// The comparison's options: kernel, llrouter:sq and llrouter:ll-wfq, 8 flows, `secs` per
/// point, the llrouter worker busy-polling, the router's CPU shielded where the machine
/// supports it ([`llr_ops::shield`]).
pub fn options(secs: f64, out: PathBuf) -> Options {
    Options {
        flows: 8,
        // Whatever else runs on the router's CPU takes it from the worker for a scheduler tick
        // or more: RT tails of milliseconds that say nothing about the strategies. The demo is
        // short, and the shield is lifted when it ends.
        shield: llr_ops::shield::supported(),
        point_secs: point_secs(secs),
        // The router owns CPU 1 here, so its worker busy-polls like a DPDK/AF_XDP router on a
        // dedicated core; a sleeping worker's wake-ups on a shared VM add millisecond outliers.
        wake: WakeMode::Busy,
        ..Options::new(
            &[
                Target::Kernel,
                Target::Llrouter(StrategyKind::Sq),
                Target::Llrouter(StrategyKind::LlWfq),
            ],
            out,
        )
    }
}

/// Runs the live comparison with `secs` seconds of traffic per point: per target the rows of
/// [`next_load`]. Errors (with the reason) when
/// not root or the testbed cannot run.
pub fn live(secs: f64, stop: &AtomicBool) -> Result<Vec<Row>> {
    need_root()?;
    let out: PathBuf = std::env::temp_dir().join(format!("llrouter-demo-{}", std::process::id()));
    let res = compare_planned(&options(secs, out.clone()), RT_SHARE, stop, &next_load);
    let _ = std::fs::remove_dir_all(&out);
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_third_point_is_one_and_a_half_times_the_flat_out_rate() {
        let fwd = |pps: f64| Row {
            throughput_pps: pps,
            ..Row::default()
        };
        assert_eq!(next_load(&[]), Some(LIGHT_PPS));
        assert_eq!(next_load(&[fwd(LIGHT_PPS)]), Some(0.0));
        assert_eq!(
            next_load(&[fwd(LIGHT_PPS), fwd(600_000.0)]),
            Some(900_000.0)
        );
        assert_eq!(next_load(&[fwd(LIGHT_PPS), fwd(0.0)]), None);
        assert_eq!(next_load(&[fwd(1.0), fwd(2.0), fwd(3.0)]), None);
    }
}
