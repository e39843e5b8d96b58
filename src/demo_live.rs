//! The live half of `llrouter demo`: SQ vs LL-WFQ vs the Linux kernel on the namespace testbed,
//! at a light load and flat-out overload (the bpf-live generator as fast as it goes), 30 % RT,
//! RT and BE latency and loss side by side.
//!
//! Needs root (network namespaces, XDP). Total time ≈ 3 targets × 2 points × (`secs` + ~1 s)
//! plus the router start-ups; `secs` is capped so the whole comparison stays within ~30 s.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::cli_util::table;
use crate::testbed::{compare, Common, Target, Wake};
use llr_core::sched::StrategyKind;

/// Light load of the comparison, packets/s.
pub const LIGHT_PPS: f64 = 50_000.0;
/// RT share of the comparison.
pub const RT_SHARE: f64 = 0.3;

/// Runs the live comparison with `secs` seconds of traffic per point (clamped to 0.5..=3) and
/// returns the table. Errors (with the reason) when not root or the testbed cannot run.
pub fn live(secs: f64) -> Result<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the live comparison needs root (network namespaces and XDP); showing the simulation only");
    }
    let secs = if secs.is_finite() {
        secs.clamp(0.5, 3.0)
    } else {
        1.0
    };
    let out: PathBuf = std::env::temp_dir().join(format!("llrouter-demo-{}", std::process::id()));
    let c = Common {
        flows: 8,
        point_secs: secs,
        // The router owns CPU 1 here, so its worker busy-polls like a DPDK/AF_XDP router on a
        // dedicated core; a sleeping worker's wake-ups on a shared VM add millisecond outliers.
        wake: Wake::Busy,
        ..Common::new(
            &[
                Target::Kernel,
                Target::Llrouter(StrategyKind::Sq),
                Target::Llrouter(StrategyKind::LlWfq),
            ],
            out.clone(),
        )
    };
    let res = compare(&c, &[LIGHT_PPS, 0.0], RT_SHARE);
    let _ = std::fs::remove_dir_all(&out);
    let rows = res?;
    let pct = |x: f64| format!("{:.2}", 100.0 * x);
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.target.clone(),
                if r.offered_pps == 0.0 {
                    "overload".into()
                } else {
                    "light".into()
                },
                format!("{:.0}", r.sent_pps / 1000.0),
                format!("{:.0}", r.throughput_pps / 1000.0),
                format!("{:.1}", r.rt_p50_us),
                format!("{:.1}", r.rt_p99_us),
                pct(r.loss_rt),
                format!("{:.1}", r.be_p50_us),
                format!("{:.1}", r.be_p99_us),
                pct(r.loss_be),
            ]
        })
        .collect();
    Ok(format!(
        "live testbed: gen ns → router ns → sink ns (veth), 64 B UDP, {} % RT (DSCP EF), bpf-live generator, XDP sink; \
         light = {:.0} kpps, overload = generator flat out; router on CPU 1 (llrouter worker busy-polling); {secs} s per point\n{}",
        RT_SHARE * 100.0,
        LIGHT_PPS / 1000.0,
        table(
            &[
                "target",
                "load",
                "sent kpps",
                "fwd kpps",
                "RT p50 µs",
                "RT p99 µs",
                "RT loss%",
                "BE p50 µs",
                "BE p99 µs",
                "BE loss%",
            ],
            &body,
        )
    ))
}
