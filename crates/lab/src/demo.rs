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

/// Entries of every class ring of the llrouter targets. The worker of a shared 2-core VM loses
/// its CPU for one to a few milliseconds at times (the sink's receive moved to `ksoftirqd`, the
/// host), and the machine's speed moves by ±30 % and more between points, so ρRT at the
/// overload point lands anywhere in 0.4–0.75: a 512-frame RT ring lasts under a millisecond at
/// that point's ~0.5 Mpps of RT and drops RT the schedule would have served in time once the
/// worker has its CPU back; 2048 last about four. sq's one ring is as deep, so its RT wait grows
/// with the ring, which is the papers' point about a single queue.
pub const RING: u32 = 2048;

/// ρRT from which paper 000's bound protects RT little: `Tmax = b·x/(1 − ρRT)` doubles by 0.5
/// (Eq. 1), and the RT ring's own queue, which no BE budget shortens, takes over.
pub const REGIME_RHO_RT: f64 = 0.5;

/// Which of the comparison's points a row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    Light,
    FlatOut,
    Overload,
}

impl Point {
    pub fn of(row: &Row) -> Point {
        if row.offered_pps == 0.0 {
            Point::FlatOut
        } else if row.offered_pps == LIGHT_PPS {
            Point::Light
        } else {
            Point::Overload
        }
    }

    pub fn name(self) -> String {
        match self {
            Point::Light => "light".into(),
            Point::FlatOut => "flat out".into(),
            Point::Overload => format!("{OVERLOAD}× fwd"),
        }
    }
}

/// The notes printed under the comparison's table: for every overloaded llrouter row beyond
/// [`REGIME_RHO_RT`], what its RT ring measured against the burst bound; for every row whose RT
/// p99 exceeds sq's at the same point, why sq's can be shorter. `ring` is the class rings'
/// size in frames.
pub fn notes(rows: &[Row], ring: u32) -> Vec<String> {
    let mut out = Vec::new();
    let sq = StrategyKind::Sq.name();
    let is_sq = |r: &Row| r.target.strip_prefix("llrouter:") == Some(sq);
    for r in rows {
        let point = Point::of(r);
        if point == Point::Light || !r.target.starts_with("llrouter:") || is_sq(r) {
            continue;
        }
        let head = format!("{} {}", r.target, point.name());
        if r.rho_rt >= REGIME_RHO_RT {
            // At ρRT ≥ 1 Eq. 1 has no finite bound: RT alone outruns the worker.
            let ring_vs_bound = if r.rho_rt >= 1.0 {
                format!(
                    "no budget bounds RT's wait: RT alone arrives faster than the worker serves \
                     it, so its RT ring fills (p99 {:.0}–{:.0} µs) and drops what overflows",
                    r.rt_ring_p99_lo_us, r.rt_ring_p99_us
                )
            } else if r.within_tmax_burst == "no" && r.tmax_burst_us > 0.0 {
                format!(
                    "its RT ring's p99 ({:.0}–{:.0} µs) is {:.1}× Tmax B: RT frames wait behind \
                     RT frames (the generator's bursts, the times the worker loses its CPU), a \
                     queue no BE budget shortens",
                    r.rt_ring_p99_lo_us,
                    r.rt_ring_p99_us,
                    r.rt_ring_p99_lo_us / r.tmax_burst_us
                )
            } else {
                format!(
                    "its RT ring's p99 ({:.0}–{:.0} µs) is still within Tmax B",
                    r.rt_ring_p99_lo_us, r.rt_ring_p99_us
                )
            };
            let taken = match r.worker_preemptions {
                Some(n) if n > 0 => format!(
                    " Other tasks took the worker's CPU {n} times during the point ({:.0} µs \
                     in all).",
                    r.worker_wait_us
                ),
                _ => String::new(),
            };
            out.push(format!(
                "{head}: ρRT = {:.2}, beyond paper 000's regime (ρRT < {REGIME_RHO_RT}): RT alone \
                 needs {:.0} % of the worker, and {ring_vs_bound}.{taken} ρRT here follows the \
                 generator's rate and the router's, which move by ±30 % between runs on a shared \
                 VM: docs/results.md, \"How far ll-wfq protects RT\", has it measured against \
                 ρRT.",
                r.rho_rt,
                100.0 * r.rho_rt,
            ));
        }
        let rt_pps = r.rt_share * r.sent_pps;
        if r.rho_rt < REGIME_RHO_RT && r.loss_rt > 0.0 && rt_pps > 0.0 {
            let taken = match r.worker_preemptions {
                Some(n) => format!(
                    "; other tasks took its CPU {n} times during the point, {:.0} µs in all",
                    r.worker_wait_us
                ),
                None => String::new(),
            };
            out.push(format!(
                "{head}: {:.3} % of RT lost ({} frames at the full RT ring) at ρRT = {:.2}, \
                 within paper 000's regime, where the schedule serves RT in time: a {ring}-frame \
                 RT ring lasts {:.0} µs at this point's {:.0} kpps of RT, and the worker's \
                 longest grant since it started was {:.0} µs (its CPU taken away{taken}).",
                100.0 * r.loss_rt,
                r.hi_ring_drops,
                r.rho_rt,
                1e6 * f64::from(ring) / rt_pps,
                rt_pps / 1e3,
                r.stall_max_us,
            ));
        }
        let Some(s) = rows.iter().find(|s| is_sq(s) && Point::of(s) == point) else {
            continue;
        };
        if r.rt_p99_us > s.rt_p99_us && s.throughput_pps > 0.0 && r.throughput_pps > 0.0 {
            out.push(format!(
                "{head}: RT p99 {:.0} µs against sq's {:.0} µs. sq's RT wait is capped by its one \
                 full ring, {ring} frames served at the whole forwarding rate ({ring} / {:.0} kpps \
                 = {:.0} µs), and paid for with {:.2} % of RT lost; a full RT ring is served no \
                 faster ({ring} / {:.0} kpps = {:.0} µs at best), and it fills once RT alone \
                 outruns the worker for a while.",
                r.rt_p99_us,
                s.rt_p99_us,
                s.throughput_pps / 1e3,
                1e6 * f64::from(ring) / s.throughput_pps,
                100.0 * s.loss_rt,
                r.throughput_pps / 1e3,
                1e6 * f64::from(ring) / r.throughput_pps,
            ));
        }
    }
    out
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
        rx_size: RING,
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

    fn row(target: &str, offered: f64, fwd: f64, rt_p99: f64, rho: f64) -> Row {
        Row {
            target: target.into(),
            offered_pps: offered,
            throughput_pps: fwd,
            rt_p99_us: rt_p99,
            rho_rt: rho,
            loss_rt: 0.4,
            rt_ring_p99_lo_us: 700.0,
            rt_ring_p99_us: 1000.0,
            tmax_burst_us: 200.0,
            within_tmax_burst: "no".into(),
            worker_preemptions: Some(12),
            worker_wait_us: 850.0,
            ..Row::default()
        }
    }

    #[test]
    fn rows_beyond_the_regime_and_rows_losing_to_sq_carry_their_cause() {
        let rows = [
            row("llrouter:sq", LIGHT_PPS, LIGHT_PPS, 50.0, f64::NAN),
            row("llrouter:sq", 0.0, 800_000.0, 700.0, f64::NAN),
            row("llrouter:sq", 1_200_000.0, 800_000.0, 650.0, f64::NAN),
            row("llrouter:ll-wfq", LIGHT_PPS, LIGHT_PPS, 60.0, 0.02),
            row("llrouter:ll-wfq", 0.0, 790_000.0, 1024.0, 0.78),
            row("llrouter:ll-wfq", 1_185_000.0, 790_000.0, 60.0, 0.45),
            row("kernel", 0.0, 500_000.0, 2000.0, f64::NAN),
        ];
        let n = notes(&rows, 512);
        assert_eq!(n.len(), 2, "{n:#?}");
        assert!(
            n[0].starts_with("llrouter:ll-wfq flat out: ρRT = 0.78"),
            "{}",
            n[0]
        );
        assert!(n[0].contains("(700–1000 µs) is 3.5× Tmax B"), "{}", n[0]);
        assert!(
            n[0].contains("took the worker's CPU 12 times during the point (850 µs"),
            "{}",
            n[0]
        );
        assert!(
            n[1].contains("RT p99 1024 µs against sq's 700 µs"),
            "{}",
            n[1]
        );
        assert!(n[1].contains("512 / 800 kpps = 640 µs"), "{}", n[1]);
        assert!(n[1].contains("40.00 % of RT lost"), "{}", n[1]);
        // Within the regime and ahead of sq: nothing to explain.
        assert!(notes(&[rows[2].clone(), rows[5].clone()], 512).is_empty());
        // Beyond ρRT 1 the bound is infinite: the note says so, not that the ring is within it.
        let over = Row {
            tmax_burst_us: f64::INFINITY,
            within_tmax_burst: "no".into(),
            ..row("llrouter:ll-wfq", 0.0, 767_000.0, 827.0, 1.14)
        };
        let n = notes(&[over], 512);
        assert!(n[0].contains("needs 114 % of the worker"), "{}", n[0]);
        assert!(n[0].contains("no budget bounds RT's wait"), "{}", n[0]);
        assert!(!n[0].contains("within Tmax B"), "{}", n[0]);
    }

    #[test]
    fn rt_lost_within_the_regime_names_the_ring_and_the_stall() {
        let lost = Row {
            rt_share: RT_SHARE,
            sent_pps: 1_800_000.0,
            hi_ring_drops: 1028,
            stall_max_us: 4200.0,
            loss_rt: 0.0013,
            ..row("llrouter:ll-wfq", 1_800_000.0, 1_100_000.0, 300.0, 0.48)
        };
        let n = notes(std::slice::from_ref(&lost), 2048);
        assert_eq!(n.len(), 1, "{n:#?}");
        assert!(
            n[0].starts_with("llrouter:ll-wfq 1.5× fwd: 0.130 % of RT lost (1028 frames"),
            "{}",
            n[0]
        );
        // 2048 frames at 540 kpps of RT.
        assert!(
            n[0].contains("lasts 3793 µs at this point's 540 kpps"),
            "{}",
            n[0]
        );
        assert!(
            n[0].contains("longest grant since it started was 4200 µs"),
            "{}",
            n[0]
        );
        assert!(
            n[0].contains("12 times during the point, 850 µs in all"),
            "{}",
            n[0]
        );
        // No RT lost: nothing to explain.
        assert!(notes(
            &[Row {
                loss_rt: 0.0,
                ..lost
            }],
            2048
        )
        .is_empty());
    }

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
