//! The live half of `llrouter demo`: SQ vs LL-WFQ vs the Linux kernel on the namespace testbed,
//! at a light load and flat-out overload (the bpf-live generator as fast as it goes), 30 % RT,
//! RT and BE latency and loss side by side.
//!
//! Needs root (network namespaces, XDP). Total time ≈ 3 targets × 2 points × (`secs` + ~1 s)
//! plus the router start-ups; `secs` is capped so the whole comparison stays within ~30 s.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use llr_core::sched::StrategyKind;
use llr_io::xsk::WakeMode;

use crate::measure::Row;
use crate::options::{need_root, Options, Target};
use crate::sweep::compare;
use crate::Result;

/// Light load of the comparison, packets/s.
pub const LIGHT_PPS: f64 = 50_000.0;
/// RT share of the comparison.
pub const RT_SHARE: f64 = 0.3;

/// The seconds per point the comparison uses for `secs` (clamped to 0.5..=3).
pub fn point_secs(secs: f64) -> f64 {
    if secs.is_finite() {
        secs.clamp(0.5, 3.0)
    } else {
        1.0
    }
}

/// The comparison's options: kernel, llrouter:sq and llrouter:ll-wfq, 8 flows, `secs` per
/// point, the llrouter worker busy-polling.
pub fn options(secs: f64, out: PathBuf) -> Options {
    Options {
        flows: 8,
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

/// Runs the live comparison with `secs` seconds of traffic per point: per target a light row
/// ([`LIGHT_PPS`]) and an overload row (offered 0 = flat out). Errors (with the reason) when
/// not root or the testbed cannot run.
pub fn live(secs: f64, stop: &AtomicBool) -> Result<Vec<Row>> {
    need_root()?;
    let out: PathBuf = std::env::temp_dir().join(format!("llrouter-demo-{}", std::process::id()));
    let res = compare(
        &options(secs, out.clone()),
        &[LIGHT_PPS, 0.0],
        RT_SHARE,
        stop,
    );
    let _ = std::fs::remove_dir_all(&out);
    res
}
