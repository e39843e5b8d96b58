//! Paper 000 ("Building a Low Latency Linux Software Router"), simulated: the latency of
//! Fig. 7 (mean latency of RT and BE against the RT share at 1.5 Mpps, and against the offered
//! load at 30 % RT) for SQ, RR, LL-RR and LL-WFQ, and Eq. 1's bound on the RT ring's waiting
//! time checked against the same runs.
//!
//! The setup, as the simulator takes it: one core whose service time x makes SQ's maximum
//! throughput the paper's 1.75 Mpps (x = 571 ns, constant, as §III-D assumes); Poisson
//! arrivals (the paper's generator); a device budget (NAPI weight) of 64; LL-RR's ring budgets
//! 4 and 4, LL-WFQ's 60 for RT and 4 for BE (§IV); RR is a device per class on the poll list,
//! each with the full device budget. The simulator models no interrupt cost or moderation
//! here (`wakeup-cost-ns` 0): the figures' IRQ effects (SQ's rise between 0.75 and 1 Mpps,
//! the LL strategies' fall towards 1.7 Mpps, RR's extra IRQs) are the live testbed's.
//! The paper's latencies also hold the NIC's and the wire's time, which a queueing model has
//! not, so its numbers are compared as differences between strategies.

use llr_core::sched::bound::{max_budget, tmax_ns};
use llr_core::sched::{ClassBudget, StrategyKind};
use llr_sim::args::SimArgs;

use super::{Axis, Claim, Figure, Job, PaperArgs, Results, Series};
use crate::Result;

/// The figures' ids: `eq1` is Eq. 1's bound against the RT ring's waits of Fig. 7a's runs.
pub const FIGURES: [&str; 3] = ["7a", "7b", "eq1"];

/// SQ's maximum throughput in the paper (§IV-B1), packets per second.
pub const PAPER_TPMAX_PPS: f64 = 1.75e6;
/// The fixed offered load of the paper's fixed-load experiments.
const LOAD_PPS: f64 = 1.5e6;
const RT_SHARE: f64 = 0.3;
const DEVICE_BUDGET: u32 = 64;
/// The BE ring budget of both LL strategies, the b of Eq. 1.
const BE_BUDGET: u32 = 4;

/// The service time x, ns.
pub fn service_ns() -> f64 {
    1e9 / PAPER_TPMAX_PPS
}

fn s(label: &'static str, strategy: StrategyKind) -> Series {
    Series {
        label,
        strategy,
        weights: None,
        panel: 'a',
    }
}

fn lines() -> Vec<Series> {
    vec![
        s("SQ", StrategyKind::Sq),
        s("RR", StrategyKind::Rr),
        s("LL-RR", StrategyKind::LlRr),
        s("LL-WFQ", StrategyKind::LlWfq),
    ]
}

/// The RT shares of Fig. 7a (the paper's 0 % and 100 % leave a class without packets).
fn shares() -> Vec<f64> {
    (1..=9).map(|i| f64::from(i) / 10.0).collect()
}

/// The two panels of Fig. 7.
pub fn figures() -> Vec<Figure> {
    vec![
        Figure {
            id: "7a",
            title: "mean latency against the real-time share (1.5 Mpps)",
            axis: Axis::RtShare,
            values: shares(),
            series: lines(),
        },
        Figure {
            id: "7b",
            title: "mean latency against the offered load (30 % RT)",
            axis: Axis::OfferedMpps,
            values: vec![0.05, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.6, 1.7, 1.8, 2.0],
            series: lines(),
        },
    ]
}

fn budgets(strategy: StrategyKind) -> Vec<ClassBudget> {
    let (rt, be) = match strategy {
        StrategyKind::LlRr => (BE_BUDGET, BE_BUDGET),
        StrategyKind::LlWfq => (60, BE_BUDGET),
        _ => return Vec::new(),
    };
    [format!("rt={rt}"), format!("be={be}")]
        .iter()
        .map(|b| b.parse().expect("a budget of packets"))
        .collect()
}

/// The simulator's settings of one point.
fn args(series: &Series, axis: Axis, x: f64, packets: u64, seed: u64) -> SimArgs {
    let (share, pps) = match axis {
        Axis::RtShare => (x, LOAD_PPS),
        Axis::OfferedMpps => (RT_SHARE, x * 1e6),
        Axis::Utilization => (RT_SHARE, x * PAPER_TPMAX_PPS),
        Axis::TimeSliceUs => (RT_SHARE, LOAD_PPS),
    };
    SimArgs {
        strategy: Some(series.strategy),
        cores: Some(1),
        rt_share: Some(share),
        rate_pps: Some(pps),
        service_ns: Some(service_ns()),
        device_budget: DEVICE_BUDGET,
        budgets: budgets(series.strategy),
        packets,
        seed,
        ..SimArgs::default()
    }
}

/// Eq. 1 at one RT share for one LL strategy: the bound and the RT ring's waits (a packet's
/// latency less its own service, x being constant), over the replications.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundRow {
    pub line: &'static str,
    pub share: f64,
    pub rho_rt: f64,
    /// Eq. 1 with b = 4, µs.
    pub tmax_us: f64,
    /// Mean over the replications of the RT class's mean wait, µs.
    pub mean_wait_us: f64,
    /// Mean over the replications of the RT class's 99th-percentile wait, µs.
    pub p99_wait_us: f64,
    /// The longest RT wait of any replication, µs.
    pub max_wait_us: f64,
}

fn bound_rows(
    jobs: &[Job],
    figs: &[Figure],
    sims: &[llr_sim::SimResult],
    reps: usize,
) -> Vec<BoundRow> {
    let x = service_ns();
    let mut rows = Vec::new();
    for (chunk, runs) in jobs.chunks(reps).zip(sims.chunks(reps)) {
        let (fig, series) = (
            &figs[chunk[0].fig],
            &figs[chunk[0].fig].series[chunk[0].series],
        );
        if fig.id != "7a" || !matches!(series.strategy, StrategyKind::LlRr | StrategyKind::LlWfq) {
            continue;
        }
        let share = chunk[0].point.value;
        let rho_rt = share * LOAD_PPS / PAPER_TPMAX_PPS;
        let n = runs.len() as f64;
        let rt = |r: &llr_sim::SimResult| r.classes[0].clone();
        rows.push(BoundRow {
            line: series.label,
            share,
            rho_rt,
            tmax_us: tmax_ns(BE_BUDGET, x, rho_rt).unwrap_or(f64::INFINITY) / 1e3,
            mean_wait_us: runs.iter().map(|r| rt(r).mean_wait_ns).sum::<f64>() / n / 1e3,
            p99_wait_us: runs
                .iter()
                .map(|r| (rt(r).p99_ns as f64 - x).max(0.0))
                .sum::<f64>()
                / n
                / 1e3,
            max_wait_us: runs.iter().map(|r| rt(r).max_wait_ns).fold(0.0, f64::max) / 1e3,
        });
    }
    rows
}

/// A check that looked for a counterexample: holds with `ok` when there was none.
fn verdict(counterexample: Option<String>, ok: String) -> (bool, String) {
    match counterexample {
        None => (true, ok),
        Some(why) => (false, why),
    }
}

/// The paper's statements about Fig. 7 and Eq. 1–2, checked against `r` and `bounds`
/// (figures not run are left out).
pub fn claims(r: &Results, figs: &[Figure], bounds: &[BoundRow]) -> Vec<Claim> {
    let ran = |id: &str| figs.iter().any(|f| f.id == id);
    let m = |f: &str, s: &str, c: &str, x: f64| r.mean(f, s, c, x);
    let mut out = Vec::new();
    let mut claim = |figure, statement, (holds, check): (bool, String)| {
        out.push(Claim {
            figure,
            statement,
            check,
            holds,
        })
    };
    if ran("7a") {
        let f = "7a";
        let sq: Vec<f64> = shares()
            .iter()
            .flat_map(|&x| [m(f, "SQ", "rt", x), m(f, "SQ", "be", x)])
            .collect();
        let (lo, hi) = sq
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &y| (a.min(y), b.max(y)));
        claim(
            "7a",
            "SQ: the latency is constant, independent of the RT ratio (no classification)",
            (
                hi / lo - 1.0 <= 0.05,
                format!("SQ's RT and BE means {lo:.2}–{hi:.2} µs over 10–90 % RT"),
            ),
        );
        let bad = shares().iter().find_map(|&x| {
            ["rt", "be"].iter().find_map(|c| {
                (m(f, "RR", c, x) <= m(f, "SQ", c, x)).then(|| {
                    format!(
                        "not {} at {x}: RR {:.2}, SQ {:.2} µs",
                        c.to_uppercase(),
                        m(f, "RR", c, x),
                        m(f, "SQ", c, x)
                    )
                })
            })
        });
        claim(
            "7a",
            "RR: all measured latencies for both classes are above SQ's",
            verdict(bad, "RR above SQ for RT and BE at every share".into()),
        );
        let bad = [0.1, 0.2, 0.3, 0.4].iter().find_map(|&x| {
            let (rt, be) = (m(f, "RR", "rt", x), m(f, "RR", "be", x));
            (rt <= be).then(|| format!("not at {x}: RT {rt:.2}, BE {be:.2} µs"))
        });
        claim(
            "7a",
            "RR: RT latency above BE latency at RT ratios below 50 %",
            verdict(bad, "RT above BE at 10–40 % RT".into()),
        );
        let (sq3, ll3) = (m(f, "SQ", "rt", 0.3), m(f, "LL-RR", "rt", 0.3));
        claim(
            "7a",
            "LL-RR: RT latency ca. 11 % below SQ's at 30 % RT (10.4 against 11.7 µs: 1.3 µs less)",
            (
                ll3 < sq3,
                format!(
                    "LL-RR RT {ll3:.2} against SQ {sq3:.2} µs: {:.2} µs less (the paper's 1.3 µs \
                     holds the IRQs our model leaves out)",
                    sq3 - ll3
                ),
            ),
        );
        let bad = [0.1, 0.2, 0.3, 0.4].iter().find_map(|&x| {
            let (ll, sq) = (m(f, "LL-RR", "be", x), m(f, "SQ", "be", x));
            (ll <= sq).then(|| format!("not at {x}: LL-RR BE {ll:.2}, SQ {sq:.2} µs"))
        });
        claim(
            "7a",
            "LL-RR: the RT improvement costs BE latency, notably above SQ's below 50 % RT",
            verdict(bad, "LL-RR's BE above SQ's at 10–40 % RT".into()),
        );
        let (lo, hi) = (m(f, "LL-RR", "rt", 0.3), m(f, "LL-RR", "rt", 0.7));
        let (blo, bhi) = (m(f, "LL-RR", "be", 0.3), m(f, "LL-RR", "be", 0.7));
        claim(
            "7a",
            "LL-RR: RT and BE latencies cut across at an RT ratio of 50 %",
            (
                lo < blo && hi > bhi,
                format!("RT/BE at 30 %: {lo:.2}/{blo:.2} µs; at 70 %: {hi:.2}/{bhi:.2} µs"),
            ),
        );
        let bad = [0.5, 0.6, 0.7, 0.8].iter().find_map(|&x| {
            let (w, sq) = (m(f, "LL-WFQ", "rt", x), m(f, "SQ", "rt", x));
            (w >= sq).then(|| format!("not at {x}: LL-WFQ RT {w:.2}, SQ {sq:.2} µs"))
        });
        claim(
            "7a",
            "LL-WFQ: lower RT latency than SQ for RT ratios between 50 % and 80 %",
            verdict(bad, "LL-WFQ's RT below SQ's at 50–80 % RT".into()),
        );
    }
    if ran("7b") {
        let f = "7b";
        let loads = [0.05, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.6, 1.7, 1.8, 2.0];
        let bad = loads.iter().find_map(|&x| {
            let (rt, be) = (m(f, "RR", "rt", x), m(f, "RR", "be", x));
            (rt <= be).then(|| format!("not at {x} Mpps: RT {rt:.2}, BE {be:.2} µs"))
        });
        claim(
            "7b",
            "RR shows higher RT than BE latency at all offered loads",
            verdict(bad, "at every load from 0.05 to 2 Mpps".into()),
        );
        let (a, b) = (m(f, "SQ", "rt", 1.5), m(f, "SQ", "rt", 1.7));
        claim(
            "7b",
            "SQ's latency increases abruptly at 1.65 Mpps, as bursts cause backlogs in the Rx ring",
            (
                b >= 3.0 * a,
                format!(
                    "SQ at 1.5 Mpps {a:.2} µs, at 1.7 Mpps {b:.2} µs (×{:.1})",
                    b / a
                ),
            ),
        );
        let bad = ["LL-RR", "LL-WFQ"].iter().find_map(|s| {
            let (rt15, rt20) = (m(f, s, "rt", 1.5), m(f, s, "rt", 2.0));
            let (be15, be20) = (m(f, s, "be", 1.5), m(f, s, "be", 2.0));
            (!(rt20 <= 2.0 * rt15 && be20 >= 5.0 * be15)).then(|| {
                format!(
                    "not {s}: RT {rt15:.2} → {rt20:.2} µs, BE {be15:.2} → {be20:.2} µs from 1.5 to 2 Mpps"
                )
            })
        });
        let ok = format!(
            "from 1.5 to 2 Mpps LL-RR RT {:.2} → {:.2}, BE {:.2} → {:.2} µs; LL-WFQ RT {:.2} → {:.2}, BE {:.2} → {:.2} µs",
            m(f, "LL-RR", "rt", 1.5),
            m(f, "LL-RR", "rt", 2.0),
            m(f, "LL-RR", "be", 1.5),
            m(f, "LL-RR", "be", 2.0),
            m(f, "LL-WFQ", "rt", 1.5),
            m(f, "LL-WFQ", "rt", 2.0),
            m(f, "LL-WFQ", "be", 1.5),
            m(f, "LL-WFQ", "be", 2.0)
        );
        claim(
            "7b",
            "LL-RR and LL-WFQ: the RT latency remains low even in overload (at most 2× its 1.5 Mpps value), the BE latency rises sharply (at least 5×)",
            verdict(bad, ok),
        );
        let bad = loads.iter().find_map(|&x| {
            let (a, b) = (m(f, "LL-RR", "rt", x), m(f, "LL-WFQ", "rt", x));
            ((a - b).abs() > 0.1 * a.max(b))
                .then(|| format!("not at {x} Mpps: LL-RR {a:.2}, LL-WFQ {b:.2} µs"))
        });
        claim(
            "7b",
            "LL-RR and LL-WFQ: RT latencies quite similar at all offered loads (within 10 %)",
            verdict(bad, "within 10 % at every load".into()),
        );
    }
    if !bounds.is_empty() {
        let wfq: Vec<&BoundRow> = bounds.iter().filter(|b| b.line == "LL-WFQ").collect();
        let bad = wfq.iter().find(|b| b.p99_wait_us > b.tmax_us).map(|b| {
            format!(
                "not at {} RT (ρRT {:.2}): p99 wait {:.2} µs, Tmax {:.2} µs",
                b.share, b.rho_rt, b.p99_wait_us, b.tmax_us
            )
        });
        let worst = wfq
            .iter()
            .map(|b| b.p99_wait_us / b.tmax_us)
            .fold(0.0, f64::max);
        claim(
            "Eq. 1",
            "LL-WFQ (BE budget b = 4): an RT packet waits in its ring at most Tmax = b·x/(1 − ρRT) (for smooth arrivals)",
            verdict(
                bad,
                format!(
                    "the RT p99 wait within Tmax at every share, at most {:.2} of it",
                    worst
                ),
            ),
        );
        let within_max = wfq.iter().filter(|b| b.max_wait_us <= b.tmax_us).count();
        claim(
            "Eq. 1",
            "\"slightly conservative\": the bound also covers the longest wait",
            (
                within_max == wfq.len(),
                format!(
                    "the longest RT wait within Tmax at {within_max} of {} shares (Poisson arrivals are not smooth: {})",
                    wfq.len(),
                    wfq.iter()
                        .map(|b| format!("{:.1}/{:.1}", b.max_wait_us, b.tmax_us))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        );
        let b = max_budget(6.0, 0.3);
        claim(
            "Eq. 2",
            "m = 6 and ρRT ≤ 0.3 give b ≤ 6·0.7 = 4.2, so b = 4",
            (b == 4, format!("max_budget(6, 0.3) = {b}")),
        );
    }
    out
}

/// The report's setup paragraph.
pub fn setup(replications: u32, packets: u64) -> String {
    format!(
        "Simulated (`llr-sim`, the router's poll engine): one core with a constant service time \
         x = {:.0} ns (SQ's maximum throughput in the paper, 1.75 Mpps), Poisson arrivals, device \
         budget 64, rings of 512; LL-RR's ring budgets 4/4, LL-WFQ's 60/4; RR a device per class. \
         Fig. 7a at 1.5 Mpps, Fig. 7b at 30 % RT. No interrupt cost is modelled, and the paper's \
         latencies hold the NIC's and the wire's time: compare differences and shapes, not \
         absolute values. Each point: the mean over {replications} replications (seeds \
         1–{replications}, {packets} packets each) of each class's mean latency, ± the 95 % \
         confidence interval (Student's t).",
        service_ns()
    )
}

/// What a run gave.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub results: Results,
    pub bounds: Vec<BoundRow>,
    pub claims: Vec<Claim>,
    pub simulations: usize,
    pub packets: u64,
}

/// Runs the figures `args` asks for (`eq1` needs Fig. 7a's runs and adds them), writes the
/// report into `args.out`; `done` is called after each simulation.
pub fn run(args: &PaperArgs, done: impl Fn() + Sync) -> Result<Outcome> {
    args.check(&FIGURES)?;
    let figs: Vec<Figure> = figures()
        .into_iter()
        .filter(|f| args.wants(f.id) || (f.id == "7a" && args.wants("eq1")))
        .collect();
    let super::Simulated {
        jobs,
        sims,
        results,
        packets,
    } = super::simulate(&figs, args, self::args, done)?;
    let bounds = if args.wants("eq1") {
        bound_rows(&jobs, &figs, &sims, args.replications as usize)
    } else {
        Vec::new()
    };
    let claims = claims(&results, &figs, &bounds);
    let mut md_extra = String::new();
    if !bounds.is_empty() {
        md_extra.push_str(
            "\n\n## Eq. 1: the RT ring's wait against Tmax (Fig. 7a's runs, b = 4)\n\n\
             | line | RT share | ρRT | Tmax µs | mean wait µs | p99 wait µs | longest wait µs |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for b in &bounds {
            md_extra.push_str(&format!(
                "| {} | {} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
                b.line, b.share, b.rho_rt, b.tmax_us, b.mean_wait_us, b.p99_wait_us, b.max_wait_us
            ));
        }
    }
    super::write_report(
        &args.out,
        "Paper 000, Fig. 7 and Eq. 1–2, simulated",
        &(setup(args.replications, args.packets) + &md_extra),
        &figs,
        &results,
        &[],
        &claims,
    )?;
    Ok(Outcome {
        results,
        bounds,
        claims,
        simulations: jobs.len(),
        packets,
    })
}

/// Job count of a run, for a progress bar before it starts.
pub fn count(args: &PaperArgs) -> usize {
    figures()
        .iter()
        .filter(|f| args.wants(f.id) || (f.id == "7a" && args.wants("eq1")))
        .map(|f| f.series.len() * f.values.len() * args.replications as usize)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fig. 7a with Eq. 1 at reduced size (3 replications of 20 000 packets): the report and
    /// the plot are written, SQ does not depend on the RT share, LL-WFQ's RT ring waits less
    /// than SQ's packets at high RT shares, and the bound's rows are computed from the runs.
    #[test]
    fn fig7a_and_eq1_at_reduced_size() {
        let (o, exist, report) = crate::paper::reduced::run(
            "000",
            &["eq1"],
            &["report.md", "results.csv", "fig7a.png"],
            |a| run(a, || {}),
        );
        assert!(exist, "{report}");
        assert_eq!(o.simulations, 4 * 9 * 3);
        let holds = |start: &str| {
            let c = (o.claims.iter())
                .find(|c| c.statement.starts_with(start))
                .unwrap_or_else(|| panic!("no claim `{start}`"));
            assert!(c.holds, "{}: {}", c.statement, c.check);
        };
        holds("SQ: the latency is constant");
        holds("LL-WFQ: lower RT latency than SQ");
        holds("m = 6");
        // Two LL lines at nine shares, each with Tmax from ρRT = share · 1.5/1.75.
        assert_eq!(o.bounds.len(), 18);
        let b = o
            .bounds
            .iter()
            .find(|b| b.line == "LL-WFQ" && b.share == 0.3)
            .unwrap();
        assert!((b.tmax_us - 4.0 * service_ns() / (1.0 - 0.3 * 1.5 / 1.75) / 1e3).abs() < 1e-9);
        assert!(
            b.mean_wait_us > 0.0
                && b.mean_wait_us <= b.p99_wait_us
                && b.p99_wait_us <= b.max_wait_us
        );
        assert!(report.contains("## Eq. 1"), "{report}");
    }
}
