//! Paper 001 ("Towards low latency software routers"), Section VI: the case study's Figs. 5–7,
//! mean packet latency of RT and BE traffic against the RT share (Fig. 5), the utilization
//! (Fig. 6) and the time slice (Fig. 7), for every resource-management strategy.
//!
//! The case study's setup, as the simulator takes it: 4 cores, Rx rings of 512 per class and
//! core, Poisson flows of ~410 packets/s (video conferences of ~5 Mbit/s) hashed to the cores,
//! 1518-byte frames, the calibration x = a·S + b + c of the paper, and its extra latency
//! T+ = 4·T_DMA + 2·8·x on every packet (the paper's latencies include it: 87 µs at 80 % load
//! is T+ ≈ 75 µs plus the wait and the service). Held fixed: utilization 80 %, RT share 30 %
//! and Δt = 50 µs, except the one a figure varies.
//!
//! The paper's lines and ours: "no RM" is `sq` (one ring per core, FCFS, no classification);
//! FCFS, Prio, RR, LL-RR, WFQ and LL-WFQ are `fcfs`, `prio`, `rr-slice`, `ll-rr-slice`, `wfq`
//! and `ll-wfq-slice`. WFQ "3:1" gives the RT ring three times the BE ring's slice: weights
//! rt=3,be=1 (our WFQ splits Δt·w/Σw per turn).

use llr_core::sched::{PerClass, StrategyKind};
use llr_sim::args::{OnOff, SimArgs};
use llr_sim::sweep::SweepPoint;

use super::{Axis, Claim, Figure, PaperArgs, PaperValue, Results, Series};
use crate::{LabError, Result};

/// The figures' ids, and `share` for §IV's guaranteed share (no figure in the paper).
pub const FIGURES: [&str; 4] = ["5", "6", "7", "share"];

const UTILIZATION: f64 = 0.8;
const RT_SHARE: f64 = 0.3;
const SLICE_US: f64 = 50.0;

fn s(
    label: &'static str,
    strategy: StrategyKind,
    weights: Option<(u32, u32)>,
    panel: char,
) -> Series {
    Series {
        label,
        strategy,
        weights,
        panel,
    }
}

const NO_RM: &str = "no RM";

fn lines(with_fcfs: bool) -> Vec<Series> {
    use StrategyKind::*;
    let mut v = vec![s(NO_RM, Sq, None, 'a')];
    if with_fcfs {
        v.push(s("FCFS", Fcfs, None, 'a'));
    }
    v.extend([
        s("Prio", Prio, None, 'a'),
        s("RR", RrSlice, None, 'a'),
        s("LL-RR", LlRrSlice, None, 'a'),
        s("WFQ 3:1", Wfq, Some((3, 1)), 'b'),
        s("WFQ 7:1", Wfq, Some((7, 1)), 'b'),
        s("LL-WFQ 3:1", LlWfqSlice, Some((3, 1)), 'b'),
        s("LL-WFQ 7:1", LlWfqSlice, Some((7, 1)), 'b'),
    ]);
    v
}

/// The three figures.
pub fn figures() -> Vec<Figure> {
    vec![
        Figure {
            id: "5",
            title: "mean latency against the real-time share (80 % load, Δt 50 µs)",
            axis: Axis::RtShare,
            values: (1..=9).map(|i| f64::from(i) / 10.0).collect(),
            series: lines(true),
        },
        Figure {
            id: "6",
            title: "mean latency against the utilization (30 % RT, Δt 50 µs)",
            axis: Axis::Utilization,
            values: vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95],
            series: lines(true),
        },
        Figure {
            id: "7",
            title: "mean latency against the time slice (30 % RT, 80 % load)",
            axis: Axis::TimeSliceUs,
            values: vec![10.0, 20.0, 50.0, 100.0, 200.0, 500.0],
            series: lines(false),
        },
    ]
}

/// The simulator's settings of one point.
pub(super) fn args(series: &Series, axis: Axis, x: f64, packets: u64, seed: u64) -> SimArgs {
    let (mut share, mut util, mut slice) = (RT_SHARE, UTILIZATION, SLICE_US);
    match axis {
        Axis::RtShare => share = x,
        Axis::Utilization => util = x,
        Axis::TimeSliceUs => slice = x,
        // Not one of this paper's axes: its loads are relative to the cores' capacity.
        Axis::OfferedMpps => {}
    }
    let weights = series.weights.map_or(Vec::new(), |(rt, be)| {
        vec![
            PerClass {
                class: "rt".into(),
                value: rt,
            },
            PerClass {
                class: "be".into(),
                value: be,
            },
        ]
    });
    SimArgs {
        strategy: Some(series.strategy),
        cores: Some(4),
        rt_share: Some(share),
        utilization: Some(util),
        packet_size: 1518,
        extra_latency: OnOff::On,
        ring_size: 512,
        weights,
        time_slice_us: slice,
        flow_pps: Some(410.0),
        flows: SimArgs::DEFAULT_FLOWS,
        packets,
        seed,
        ..SimArgs::default()
    }
}

/// The numbers the paper's text gives (Section VI-B1, 10 % RT at 80 % load).
pub const PAPER: [PaperValue; 4] = [
    PaperValue {
        figure: "5",
        series: "Prio",
        class: "rt",
        x: 0.1,
        us: 81.0,
    },
    PaperValue {
        figure: "5",
        series: "Prio",
        class: "be",
        x: 0.1,
        us: 88.0,
    },
    PaperValue {
        figure: "5",
        series: NO_RM,
        class: "rt",
        x: 0.1,
        us: 87.0,
    },
    PaperValue {
        figure: "5",
        series: NO_RM,
        class: "be",
        x: 0.1,
        us: 87.0,
    },
];

/// A check that looked for a counterexample: holds with `ok` when there was none.
fn verdict(counterexample: Option<String>, ok: &str) -> (bool, String) {
    match counterexample {
        None => (true, ok.to_string()),
        Some(why) => (false, why),
    }
}

/// Whether `a` is below `b` beyond their intervals' overlap is not asked: "below" is `a < b`
/// with both means; "equal" is within the sum of the half-widths or 2 % of the larger.
fn same(r: &Results, f: &str, a: (&str, &str, f64), b: (&str, &str, f64)) -> (bool, String) {
    let (ma, mb) = (r.mean(f, a.0, a.1, a.2), r.mean(f, b.0, b.1, b.2));
    let tol = (r.ci(f, a.0, a.1, a.2) + r.ci(f, b.0, b.1, b.2)).max(0.02 * ma.max(mb));
    (
        (ma - mb).abs() <= tol,
        format!("{ma:.1} vs {mb:.1} µs (tolerance {tol:.1})"),
    )
}

/// The paper's statements about Figs. 5–7, checked against `r` (figures not run are left
/// out).
pub fn claims(r: &Results, figs: &[Figure]) -> Vec<Claim> {
    let ran = |id: &str| figs.iter().any(|f| f.id == id);
    let mut out = Vec::new();
    let mut claim = |figure, statement, (holds, check): (bool, String)| {
        out.push(Claim {
            figure,
            statement,
            check,
            holds,
        })
    };
    let m = |f: &str, s: &str, c: &str, x: f64| r.mean(f, s, c, x);
    if ran("5") {
        let f = "5";
        let shares: Vec<f64> = (1..=9).map(|i| f64::from(i) / 10.0).collect();
        let worst = shares
            .iter()
            .map(|&x| same(r, f, (NO_RM, "rt", x), (NO_RM, "be", x)))
            .find(|(ok, _)| !ok);
        claim(
            "5",
            "no RM: real-time and best-effort packets incur the same mean latency",
            verdict(worst.map(|(_, why)| why), "RT = BE at every share"),
        );
        let (prt, nrm, pbe) = (
            m(f, "Prio", "rt", 0.1),
            m(f, NO_RM, "rt", 0.1),
            m(f, "Prio", "be", 0.1),
        );
        claim(
            "5",
            "Prio at 10 % RT: RT ca. 81 µs, 7 % faster than no RM (ca. 87 µs); BE ca. 88 µs, 1 % slower",
            (
                prt < nrm && nrm < pbe,
                format!(
                    "RT {prt:.1} µs ({:+.1} %), no RM {nrm:.1}, BE {pbe:.1} ({:+.1} %)",
                    100.0 * (prt / nrm - 1.0),
                    100.0 * (pbe / nrm - 1.0)
                ),
            ),
        );
        let others = [
            NO_RM,
            "LL-RR",
            "WFQ 3:1",
            "WFQ 7:1",
            "LL-WFQ 3:1",
            "LL-WFQ 7:1",
        ];
        let bad = shares.iter().find_map(|&x| {
            others.iter().find_map(|o| {
                let tol = r.ci(f, "Prio", "rt", x) + r.ci(f, o, "rt", x);
                let rt_ok = m(f, "Prio", "rt", x) <= m(f, o, "rt", x) + tol;
                let tol = r.ci(f, "Prio", "be", x) + r.ci(f, o, "be", x);
                let be_ok = m(f, "Prio", "be", x) + tol >= m(f, o, "be", x);
                (!(rt_ok && be_ok)).then(|| format!("not at {x} against {o}"))
            })
        });
        claim(
            "5",
            "Prio is the lower bound for RT and the upper bound for BE of every strategy but FCFS and RR",
            verdict(bad, "at every share, against no RM, LL-RR, WFQ and LL-WFQ"),
        );
        let (rr, nr) = (m(f, "RR", "rt", 0.1), m(f, NO_RM, "rt", 0.1));
        claim(
            "5",
            "RR raises the RT mean latency when the RT share is small (a whole time slice to wait)",
            (
                rr > nr,
                format!("RR {rr:.1} vs no RM {nr:.1} µs at 10 % RT"),
            ),
        );
        let (lo, hi) = (m(f, "FCFS", "rt", 0.1), m(f, "FCFS", "rt", 0.5));
        claim(
            "5",
            "FCFS: the less RT there is, the more RT suffers (it waits for whole BE turns)",
            (
                lo > hi,
                format!("RT {lo:.1} µs at 10 %, {hi:.1} µs at 50 %"),
            ),
        );
        claim(
            "5",
            "LL-RR: at 50 % RT, RT and BE suffer the same mean latency",
            same(r, f, ("LL-RR", "rt", 0.5), ("LL-RR", "be", 0.5)),
        );
        let (lo, hi) = (m(f, "LL-RR", "rt", 0.1), m(f, "LL-RR", "rt", 0.5));
        claim(
            "5",
            "LL-RR: the RT mean latency is the smaller the less RT there is",
            (lo < hi, format!("{lo:.1} µs at 10 %, {hi:.1} µs at 50 %")),
        );
        let (w, lw) = (m(f, "WFQ 3:1", "rt", 0.1), m(f, "LL-WFQ 3:1", "rt", 0.1));
        let p = m(f, "Prio", "rt", 0.1);
        claim(
            "5",
            "LL-WFQ improves on WFQ for RT and behaves like Prio at low RT shares",
            (
                lw < w && (lw - p).abs() <= 0.05 * p,
                format!("RT at 10 %: WFQ 3:1 {w:.1}, LL-WFQ 3:1 {lw:.1}, Prio {p:.1} µs"),
            ),
        );
    }
    if ran("6") {
        let f = "6";
        let at = |x| {
            let v: Vec<f64> = lines(true).iter().map(|s| m(f, s.label, "rt", x)).collect();
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &y| (a.min(y), b.max(y)));
            (
                hi / lo - 1.0 <= 0.05,
                format!("RT means {lo:.1}–{hi:.1} µs at {x}"),
            )
        };
        claim(
            "6",
            "below 50 % utilization the mean latency is nearly equal for every strategy",
            at(0.3),
        );
        let rt = m(f, "Prio", "rt", 0.95) / m(f, "Prio", "rt", 0.5);
        let be = m(f, "Prio", "be", 0.95) / m(f, "Prio", "be", 0.5);
        claim(
            "6",
            "Prio: the BE mean latency rises exponentially with the utilization, the RT one only linearly",
            (rt < be, format!("from 50 % to 95 %: RT ×{rt:.2}, BE ×{be:.2}")),
        );
        let (p, l1, l2) = (
            m(f, "Prio", "rt", 0.5),
            m(f, "LL-RR", "rt", 0.5),
            m(f, "LL-WFQ 3:1", "rt", 0.5),
        );
        claim(
            "6",
            "LL-RR and LL-WFQ: RT close to Prio at low utilization",
            (
                (l1 - p).abs() <= 0.05 * p && (l2 - p).abs() <= 0.05 * p,
                format!("RT at 50 %: Prio {p:.1}, LL-RR {l1:.1}, LL-WFQ 3:1 {l2:.1} µs"),
            ),
        );
        let (w3, w7) = (m(f, "WFQ 3:1", "rt", 0.9), m(f, "WFQ 7:1", "rt", 0.9));
        claim(
            "6",
            "WFQ: the larger RT's time slice, the lower RT's mean latency",
            (w7 < w3, format!("RT at 90 %: 7:1 {w7:.1}, 3:1 {w3:.1} µs")),
        );
    }
    if ran("7") {
        let f = "7";
        let rise = |s: &str| m(f, s, "rt", 500.0) - m(f, s, "rt", 10.0);
        let (rr, w3, w7) = (rise("RR"), rise("WFQ 3:1"), rise("WFQ 7:1"));
        claim(
            "7",
            "RR: the RT mean latency rises significantly with the time slice",
            (
                rr > r.ci(f, "RR", "rt", 500.0) + r.ci(f, "RR", "rt", 10.0),
                format!("+{rr:.1} µs from 10 to 500 µs"),
            ),
        );
        // Read as curves, as the figure shows them: at every slice WFQ's RT curve lies below
        // RR's and 7:1's below 3:1's, and each rises. (Over 10–500 µs as a whole, RR rises
        // less than WFQ: RR's RT has saturated by 200 µs, where a slice outlasts the busy
        // periods, while WFQ's shorter BE slice Δt·1/(n+1) is still growing into it.)
        let slices = [10.0, 20.0, 50.0, 100.0, 200.0, 500.0];
        let below = slices.iter().find_map(|&x| {
            let (a, b, c) = (
                m(f, "RR", "rt", x),
                m(f, "WFQ 3:1", "rt", x),
                m(f, "WFQ 7:1", "rt", x),
            );
            (!(c <= b && b <= a))
                .then(|| format!("not at {x} µs: RR {a:.1}, 3:1 {b:.1}, 7:1 {c:.1}"))
        });
        claim(
            "7",
            "WFQ rises like RR but less, and the less the higher RT's share (7:1 below 3:1)",
            match below {
                None if w3 > 0.0 && w7 > 0.0 => (
                    true,
                    format!(
                        "at every slice RR ≥ WFQ 3:1 ≥ WFQ 7:1; rises from 10 to 500 µs: RR +{rr:.1} \
                         (flat from 200 µs), 3:1 +{w3:.1}, 7:1 +{w7:.1} µs"
                    ),
                ),
                None => (false, format!("WFQ does not rise: 3:1 +{w3:.1}, 7:1 +{w7:.1} µs")),
                Some(why) => (false, why),
            },
        );
        let bad = slices.iter().find_map(|&x| {
            ["LL-RR", "LL-WFQ 3:1", "LL-WFQ 7:1"].iter().find_map(|s| {
                (m(f, s, "rt", x) >= m(f, NO_RM, "rt", x)).then(|| format!("not {s} at {x} µs"))
            })
        });
        claim(
            "7",
            "with LL-RR and LL-WFQ the RT mean latency beats no RM whatever the time slice",
            verdict(bad, "at every slice from 10 to 500 µs"),
        );
    }
    out
}

/// The report's setup paragraph.
pub fn setup(replications: u32, packets: u64) -> String {
    format!(
        "Simulated (`llr-sim`, the router's scheduler code): 4 cores, Rx rings of 512 per class and \
         core, Poisson flows of 410 packets/s hashed to the cores, 1518-byte frames, x = a·S + b + c \
         with the paper's a, b, c, and T+ = 4·T_DMA + 2·8·x added to every packet. Fixed unless \
         varied: 80 % utilization, 30 % RT, Δt = 50 µs. Each point: the mean over {replications} \
         replications (seeds 1–{replications}, {packets} packets each) of each class's mean \
         latency, ± the 95 % confidence interval (Student's t). \"no RM\" is `sq`; RR, LL-RR, WFQ \
         and LL-WFQ are the time-slice strategies; WFQ n:1 weights RT n, BE 1."
    )
}

/// §IV: "The configured weight guarantees a worst case share of high priority traffic in the
/// maximum throughput TPmax of at least TPmax·weight/(#cores·Σweights) [...] and TPmax·weight/Σweights
/// if we assume high priority traffic that is evenly distributed to all cores." Checked with RT
/// spread over the cores by the flow hash (the second case) at twice the capacity, half of it
/// RT, so that both classes always have work: each class's delivered rate against TPmax
/// (all cores' capacity, 1/x each).
pub const SHARE_LINES: [(&str, StrategyKind, (u32, u32)); 5] = [
    ("WFQ 1:3", StrategyKind::Wfq, (1, 3)),
    ("WFQ 1:1", StrategyKind::Wfq, (1, 1)),
    ("WFQ 3:1", StrategyKind::Wfq, (3, 1)),
    ("LL-WFQ 1:3", StrategyKind::LlWfqSlice, (1, 3)),
    ("LL-WFQ 3:1", StrategyKind::LlWfqSlice, (3, 1)),
];

/// The skewed case of the guarantee: RT in one flow, so on one core, BE in the rest of
/// [`SKEW_FLOWS`], spread by the hash. At 2× overload RT offers its core 2·cores·share = 1.2 of
/// that core's capacity, more than any weight gives it, and BE competes on that core too.
pub const SKEW_FLOWS: usize = 8;
pub const SKEW_RT_SHARE: f64 = 0.15;

/// One line of the guaranteed-share check.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareRow {
    pub line: &'static str,
    /// RT on one core (TPmax·w/(#cores·Σw)) rather than spread evenly (TPmax·w/Σw).
    pub skewed: bool,
    /// The RT class's guaranteed fraction of TPmax: weight over the sum, over the cores too
    /// when skewed.
    pub guaranteed: f64,
    /// BE's guaranteed fraction (spread: 1 − RT's weight fraction; skewed: not claimed, 0).
    pub be_guaranteed: f64,
    /// Skewed: how many of BE's flows share RT's core (0 would make the bound trivial).
    pub be_flows_on_rt_core: usize,
    /// The smallest over the replications of the RT class's delivered rate over TPmax.
    pub rt_min: f64,
    /// The same for BE, whose guarantee is 1 − `guaranteed`.
    pub be_min: f64,
    /// How far a class may fall short for reasons outside the guarantee: when the offered load
    /// stops, the class whose rings empty first leaves the CPU to the other while its rings
    /// drain, up to one ring per core, so that many packets over all delivered (the largest over
    /// the replications; 1 % of TPmax at 400 000 packets).
    pub slack: f64,
}

fn share_rows(args: &PaperArgs, skewed: bool) -> Result<(Vec<ShareRow>, usize, u64)> {
    let mut points = Vec::new();
    for (label, strategy, w) in SHARE_LINES {
        let series = s(label, strategy, Some(w), 'a');
        for rep in 0..args.replications {
            let mut a = super::p001::args(
                &series,
                Axis::Utilization,
                2.0,
                args.packets,
                1 + u64::from(rep),
            );
            if skewed {
                a.rt_share = Some(SKEW_RT_SHARE);
                a.flow_pps = None;
                a.flows = SKEW_FLOWS;
            } else {
                a.rt_share = Some(0.5);
            }
            let config = a.to_config().map_err(LabError::Invalid)?;
            points.push(SweepPoint {
                strategy,
                value: 2.0,
                config,
            });
        }
    }
    let (sims, _) = llr_sim::sweep::run(&points, args.jobs.unwrap_or(0), || {})
        .map_err(|e| LabError::Failed(format!("simulation: {e}")))?;
    let reps = args.replications as usize;
    let ring = points.first().map_or(0, |p| p.config.ring_size);
    let (cores, be_flows_on_rt_core) = points.first().map_or((1, 0), |p| {
        let by_class = llr_sim::flow_cores(&p.config);
        let rt_core = by_class.first().and_then(|c| c.first()).copied();
        let be = by_class
            .get(1)
            .map_or(0, |c| c.iter().filter(|&&k| Some(k) == rt_core).count());
        (p.config.cores, be)
    });
    let rows = SHARE_LINES
        .iter()
        .zip(sims.chunks(reps))
        .map(|(&(line, _, (rt, be)), runs)| {
            let frac = |r: &llr_sim::SimResult, c: usize| {
                let tp_max = r.core_utilization.len() as f64 * 1e9 / r.service_ns;
                r.classes[c].delivered as f64 * 1e9 / r.sim_time_ns / tp_max
            };
            let min = |c| runs.iter().map(|r| frac(r, c)).fold(f64::MAX, f64::min);
            let slack = runs
                .iter()
                .map(|r| {
                    let delivered: u64 = r.classes.iter().map(|c| c.delivered).sum();
                    (r.core_utilization.len() * ring) as f64 / delivered.max(1) as f64
                })
                .fold(0.0, f64::max);
            let weight = f64::from(rt) / f64::from(rt + be);
            ShareRow {
                line,
                skewed,
                guaranteed: if skewed {
                    weight / cores as f64
                } else {
                    weight
                },
                be_guaranteed: if skewed { 0.0 } else { 1.0 - weight },
                be_flows_on_rt_core: if skewed { be_flows_on_rt_core } else { 0 },
                rt_min: min(0),
                be_min: min(1),
                slack,
            }
        })
        .collect();
    Ok((
        rows,
        points.len(),
        points.iter().map(|p| p.config.packets).sum(),
    ))
}

/// The guaranteed-share claim: every line gives each class at least its weight's fraction of
/// TPmax, less the row's [`slack`](ShareRow::slack) (the end of a run, when the rings drain,
/// is not at overload).
pub fn share_claim(rows: &[ShareRow]) -> Claim {
    let skewed = rows.first().is_some_and(|r| r.skewed);
    let bad = rows
        .iter()
        .find(|r| r.rt_min < r.guaranteed - r.slack || r.be_min < r.be_guaranteed - r.slack);
    let all = rows
        .iter()
        .map(|r| {
            format!(
                "{}: RT {:.3} (≥ {:.3} − {:.3}), BE {:.3}",
                r.line, r.rt_min, r.guaranteed, r.slack, r.be_min
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let setup = if skewed {
        format!(
            "delivered / TPmax at 2× overload, {:.0} % RT in one flow (so on one core, with {} of BE's flows there), worst replication",
            SKEW_RT_SHARE * 100.0,
            rows.first().map_or(0, |r| r.be_flows_on_rt_core)
        )
    } else {
        "delivered / TPmax at 2× overload, 50 % RT, worst replication".to_string()
    };
    Claim {
        figure: "§IV",
        statement: if skewed {
            "the weight guarantees the RT class at least TPmax·weight/(#cores·Σweights) when all RT traffic is on one core"
        } else {
            "the weight guarantees the RT class at least TPmax·weight/Σweights when RT is spread evenly over the cores"
        },
        check: match bad {
            None => format!("{setup}: {all}"),
            Some(r) => format!("not for {}: {all}", r.line),
        },
        holds: bad.is_none(),
    }
}

/// What a run of the paper's figures gave.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub results: Results,
    pub claims: Vec<Claim>,
    pub shares: Vec<ShareRow>,
    pub simulations: usize,
    pub packets: u64,
}

/// Runs the figures `args` asks for, writes the report into `args.out`, and returns the points
/// and the claims; `done` is called after each simulation.
pub fn run(args: &PaperArgs, done: impl Fn() + Sync) -> Result<Outcome> {
    args.check(&FIGURES)?;
    let figs: Vec<Figure> = figures().into_iter().filter(|f| args.wants(f.id)).collect();
    let sim = super::simulate(&figs, args, self::args, done)?;
    let results = sim.results;
    let mut claims = claims(&results, &figs);
    let (mut simulations, mut packets) = (sim.jobs.len(), sim.packets);
    let mut shares = Vec::new();
    if args.wants("share") {
        for skewed in [false, true] {
            let (rows, n, p) = share_rows(args, skewed)?;
            claims.push(share_claim(&rows));
            shares.extend(rows);
            simulations += n;
            packets += p;
        }
    }
    super::write_report(
        &args.out,
        "Paper 001, Figs. 5–7: mean latency of the case study",
        &setup(args.replications, args.packets),
        &figs,
        &results,
        &PAPER,
        &claims,
    )?;
    Ok(Outcome {
        results,
        claims,
        shares,
        simulations,
        packets,
    })
}

/// Job count of a run, for a progress bar before it starts.
pub fn count(args: &PaperArgs) -> usize {
    figures()
        .iter()
        .filter(|f| args.wants(f.id))
        .map(|f| f.series.len() * f.values.len() * args.replications as usize)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fig. 5 at reduced size (3 replications of 20 000 packets): the paper's four numbers are
    /// met within 3 % (the simulator's calibration and T+ are the paper's own; at this size
    /// the replications' spread is ~1 %), the claims that do not depend on fine differences
    /// hold, and the report and both panels are written.
    #[test]
    fn fig5_matches_the_papers_numbers_at_reduced_size() {
        let files = ["report.md", "results.csv", "fig5a.png", "fig5b.png"];
        let (o, exist, report) =
            crate::paper::reduced::run("001", &["5"], &files, |a| run(a, || {}));
        assert!(exist, "missing files: {files:?}");
        for p in &PAPER {
            let s = o
                .results
                .get(p.figure, p.series, p.class, p.x)
                .expect("a point");
            assert!(
                (s.mean_us / p.us - 1.0).abs() < 0.03,
                "{} {}: paper {} µs, ours {} ± {}",
                p.series,
                p.class,
                p.us,
                s.mean_us,
                s.ci95_us
            );
            assert!(s.ci95_us.is_finite() && s.ci95_us >= 0.0);
        }
        for c in &o.claims {
            if c.statement.starts_with("no RM") || c.statement.starts_with("Prio at 10 %") {
                assert!(c.holds, "{}: {}", c.statement, c.check);
            }
        }
        assert!(report.contains("| 5 | Prio | rt | 0.1 | 81 |"), "{report}");
        assert_eq!(o.simulations, 9 * 9 * 3);
        assert!(o.shares.is_empty());
    }

    /// §IV's guarantee: at 2× overload with half the traffic RT, each class of every weighted
    /// line gets its weight's fraction of TPmax. 400 000 packets keep the drain's slack at 1 %,
    /// so that losing a slice's overrun (RT 0.71 for 0.75 at 3:1) fails.
    #[test]
    fn weights_guarantee_their_share() {
        let args = PaperArgs {
            fig: vec!["share".into()],
            replications: 2,
            packets: 400_000,
            out: std::env::temp_dir(),
            jobs: Some(2),
        };
        let (rows, n, _) = share_rows(&args, false).unwrap();
        assert_eq!(n, SHARE_LINES.len() * 2);
        let c = share_claim(&rows);
        assert!(c.holds, "{}", c.check);
        assert!(rows.iter().all(|r| r.slack < 0.012), "{}", c.check);
        // And it could fail: the same rows against a guarantee they do not reach.
        let mut wrong = rows.clone();
        wrong[0].guaranteed = 0.9;
        assert!(!share_claim(&wrong).holds);
        // The skewed case: RT on one core, which BE flows share, gets its weight of that core.
        let (rows, _, _) = share_rows(&args, true).unwrap();
        let c = share_claim(&rows);
        assert!(c.holds, "{}", c.check);
        assert!(rows[0].be_flows_on_rt_core > 0, "{}", c.check);
        for r in &rows {
            // RT is held to its weight on its core, not given the whole core: within 0.02 of
            // the bound for the WFQ lines (the LL variants may give RT more at a boundary).
            if r.line.starts_with("WFQ") {
                assert!(r.rt_min < r.guaranteed + 0.02, "{}", c.check);
            }
        }
    }

    #[test]
    fn bad_settings_name_the_flag() {
        let mut a = PaperArgs {
            fig: vec!["9".into()],
            replications: 10,
            packets: 400_000,
            out: "x".into(),
            jobs: None,
        };
        let e = a.check(&FIGURES).unwrap_err().to_string();
        assert!(e.contains("fig") && e.contains("5, 6, 7, share"), "{e}");
        a.fig.clear();
        a.replications = 1;
        assert!(a
            .check(&FIGURES)
            .unwrap_err()
            .to_string()
            .contains("replications"));
    }
}
