//! `llrouter demo`: paper 000's scenario in the simulator — one core, 30 % RT, loads up to
//! overload — for SQ, RR, LL-RR and LL-WFQ, as one compact table.

use crate::cli_util::{table, us, usage};
use llr_core::sched::{SchedConfig, StrategyKind};
use llr_sim::SimConfig;
use rayon::prelude::*;

pub use llr_lab::args::DemoArgs;

pub const DEMO_STRATEGIES: [StrategyKind; 4] = [
    StrategyKind::Sq,
    StrategyKind::Rr,
    StrategyKind::LlRr,
    StrategyKind::LlWfq,
];
pub const DEMO_LOADS: [f64; 4] = [0.5, 0.9, 1.2, 1.5];

/// The latency and loss columns of both demo tables.
const CLASS_COLUMNS: [&str; 6] = [
    "RT p50 µs",
    "RT p99 µs",
    "RT loss%",
    "BE p50 µs",
    "BE p99 µs",
    "BE loss%",
];

/// The simulated half of the demo: rows of (strategy, load, RT and BE latency and loss).
pub fn simulate(packets: u64) -> anyhow::Result<String> {
    let points: Vec<(StrategyKind, f64)> = DEMO_STRATEGIES
        .iter()
        .flat_map(|s| DEMO_LOADS.iter().map(move |l| (*s, *l)))
        .collect();
    let results = points
        .par_iter()
        .map(|&(s, load)| {
            let cfg = SimConfig::paper000(SchedConfig::new(s, &["rt", "be"]), 0.3, load, packets);
            llr_sim::run(&cfg).map(|r| (s, load, r))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let loss = |c: &llr_sim::ClassResult| {
        format!("{:.1}", 100.0 * c.dropped as f64 / c.sent.max(1) as f64)
    };
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|(s, load, r)| {
            let (rt, be) = (&r.classes[0], &r.classes[1]);
            vec![
                s.name().to_string(),
                format!("{load:.1}"),
                us(rt.p50_ns as f64),
                us(rt.p99_ns as f64),
                loss(rt),
                us(be.p50_ns as f64),
                us(be.p99_ns as f64),
                loss(be),
            ]
        })
        .collect();
    Ok(table(
        &[&["strategy", "load"][..], &CLASS_COLUMNS].concat(),
        &rows,
    ))
}

pub fn run(a: DemoArgs) -> anyhow::Result<()> {
    if a.packets == 0 {
        return Err(usage("packets", "must be at least 1"));
    }
    if !(0.5..=3.0).contains(&a.live_secs) {
        return Err(usage(
            "live-secs",
            format!(
                "{}: must be within 0.5–3 s (the live comparison is kept under ~30 s)",
                a.live_secs
            ),
        ));
    }
    println!("llrouter demo — simulated paper-000 scenario: 1 core, 128 B frames (x = 797 ns), 30 % RT, Poisson, rings of 512, device budget 64, LL-WFQ budgets rt=60 be=4");
    println!("load = offered load / core capacity; latency = arrival at the Rx ring → end of processing\n");
    print!("{}", simulate(a.packets)?);
    println!(
        "\nReproduce one point: llrouter sim --strategy ll-wfq --rt-share 0.3 --utilization 1.5"
    );
    if a.sim_only {
        return Ok(());
    }
    println!(
        "\nLive comparison on a namespace testbed (gen ns → router ns → sink ns over veth, 30 % RT marked DSCP EF; {}):",
        if llr_ops::shield::supported() {
            "every other task kept off the router's CPU meanwhile"
        } else {
            "no cgroup v1 cpuset here, so other tasks may share the router's CPU and lengthen the RT tail"
        }
    );
    match llr_lab::demo::live(a.live_secs, llr_io::sys::install_stop_signals()) {
        Ok(rows) => print!("{}", live_table(&rows, a.live_secs)),
        Err(llr_lab::LabError::NeedRoot) => println!("  skipped: the live comparison needs root (network namespaces and XDP); showing the simulation only"),
        Err(e) => println!("  skipped: {e:#}"),
    }
    Ok(())
}

/// The live comparison's rows as a table under a line saying what was measured, and the notes
/// of [`llr_lab::demo::notes`]: the cause under every row beyond paper 000's regime or behind
/// sq's RT p99.
fn live_table(rows: &[llr_lab::Row], secs: f64) -> String {
    use llr_lab::demo::{point_secs, Point, LIGHT_PPS, OVERLOAD, RING, RT_SHARE};
    let pct = |x: f64| format!("{:.2}", 100.0 * x);
    let load = |r: &llr_lab::Row| Point::of(r).name();
    let num = |x: f64, d: usize| {
        if x.is_nan() {
            "-".to_string()
        } else {
            format!("{x:.d$}")
        }
    };
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.target.clone(),
                load(r),
                format!("{:.0}", r.sent_pps / 1000.0),
                format!("{:.0}", r.throughput_pps / 1000.0),
                format!("{:.1}", r.rt_p50_us),
                format!("{:.1}", r.rt_p99_us),
                pct(r.loss_rt),
                format!("{:.1}", r.be_p50_us),
                format!("{:.1}", r.be_p99_us),
                pct(r.loss_be),
                num(r.rho_rt, 2),
                if r.within_tmax.is_empty() {
                    "-".into()
                } else if r.tmax_us.is_nan() {
                    "∞".into()
                } else {
                    format!("{} / {}", num(r.tmax_us, 1), num(r.tmax_burst_us, 1))
                },
                if r.within_tmax.is_empty() {
                    "-".into()
                } else {
                    format!(
                        "{:.0}–{:.0} ({} / {})",
                        r.rt_ring_p99_lo_us, r.rt_ring_p99_us, r.within_tmax, r.within_tmax_burst
                    )
                },
            ]
        })
        .collect();
    let notes: String = llr_lab::demo::notes(rows, llr_lab::demo::RING)
        .iter()
        .map(|n| format!("  {n}\n"))
        .collect();
    format!(
        "live testbed: gen ns → router ns → sink ns (veth), 64 B UDP, {} % RT (DSCP EF), bpf-live generator, XDP sink; \
         light = {:.0} kpps, flat out = generator as fast as it goes, {OVERLOAD}× fwd = {OVERLOAD}× what the target forwarded flat out; \
         router on CPU 1 (llrouter worker busy-polling, class rings of {RING} frames); {} s per point\n\
         ρRT = RT packets/s × x (x: worker CPU per frame), Tmax = b·x/(1−ρRT) with b = the BE ring budget (paper 000, Eq. 1), \
         Tmax B = the same for arrivals in the generator's bursts of B frames, (b + B − 1)·x/(1−ρRT) (an RT frame may find its own burst ahead of it), \
         RT ring p99 = time in the RT ring (XDP receive → served) as its histogram bucket, (yes/no/bucket) = within Tmax / within Tmax B, the like-for-like check\n{}{}",
        RT_SHARE * 100.0,
        LIGHT_PPS / 1000.0,
        point_secs(secs),
        table(
            &[
                &["target", "load", "sent kpps", "fwd kpps"][..],
                &CLASS_COLUMNS,
                &["ρRT", "Tmax / Tmax B µs", "RT ring p99 µs"],
            ]
            .concat(),
            &body,
        ),
        notes
    )
}
