//! The `alternate` study: one router under one constant overload, its strategy switched live
//! (through the control socket) every slice, so that strategies are compared within the same
//! second of machine time rather than in separate runs.
//!
//! Why: on the shared VMs here the CPU's speed itself moves by ±30 % over a few seconds (a
//! plain spin loop on the router's CPU, measured in 0.5 s windows, swings 5 500–8 000 with
//! 0 % steal), so two targets measured one after the other in `testbed run` differ by more
//! than the few per cent a strategy costs. Each slice of a compared strategy is set against
//! the reference strategy's slices just before and after it, interpolated in time: a drift
//! of the machine's speed that is slow against a slice cancels out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llr_core::sched::StrategyKind;
use llr_ops::ctl::Command;
use llr_ops::metrics::MetricsSnapshot;
use serde::Serialize;

use crate::measure::{measure_once, Point, Row};
use crate::options::{Options, Target};
use crate::setup::prepare;
use crate::summary::spread;
use crate::target::Active;
use crate::{report, traffic, LabError, Progress, Result};

/// The `alternate` study.
#[derive(Debug, Clone)]
pub struct AlternateStudy {
    /// `targets`: llrouter strategies; the first is the reference the others are set against.
    pub options: Options,
    /// Offered load, packets/s (flat out: above what the router forwards).
    pub rate: f64,
    pub rt_share: f64,
    /// Measured time per slice, after `settle`.
    pub slice: Duration,
    /// Time after a switch before a slice is measured (frames of the old layout drain).
    pub settle: Duration,
    /// Cycles through every strategy.
    pub cycles: u32,
}

/// One measured slice.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Slice {
    pub cycle: u32,
    pub strategy: StrategyKind,
    /// Middle of the slice, seconds since the first slice began.
    pub at_s: f64,
    pub secs: f64,
    /// Frames the router transmitted in the slice, per second.
    pub forwarded_pps: f64,
    /// Router process CPU seconds per second (1.0: one core busy).
    pub cpu: f64,
    /// Grants, transmit flushes and frames served in the slice (every ring).
    pub grants: u64,
    pub flushes: u64,
    pub served: u64,
    /// Worker CPU seconds inside those grants (every ring), the part of it inside transmit
    /// flushes, and the frames those flushes sent.
    pub grant_s: f64,
    pub flush_s: f64,
    pub flushed: u64,
    /// Frames the router's interfaces dropped (socket ring full, egress queue full, other
    /// AF_XDP drops) against those received plus dropped: loss at the router.
    pub loss: f64,
    /// `forwarded_pps` against the reference's, interpolated between the reference slices
    /// before and after this one (NaN for the reference itself and for an unbracketed slice).
    pub ratio: f64,
}

/// What the study measured; its files are written.
#[derive(Debug, Clone, Default)]
pub struct AlternateOutcome {
    pub slices: Vec<Slice>,
    /// `alternate.md` as written.
    pub md: String,
    pub interrupted: bool,
}

/// The counters a slice is the difference of.
#[derive(Debug, Clone, Copy)]
struct Reading {
    at: Instant,
    cpu_ns: u64,
    tx: u64,
    grants: u64,
    flushes: u64,
    served: u64,
    grant_s: f64,
    flush_s: f64,
    flushed: u64,
    rx: u64,
    dropped: u64,
}

impl Reading {
    fn take(act: &Active<'_>) -> Result<Reading> {
        let t0 = Instant::now();
        let m: MetricsSnapshot = act
            .counters()
            .ok_or_else(|| LabError::Failed("the router's control socket did not answer".into()))?;
        let t1 = Instant::now();
        Ok(Reading {
            // The snapshot was taken somewhere inside the call: its middle is the best guess.
            at: t0 + (t1 - t0) / 2,
            cpu_ns: act.router_cpu_ns(),
            tx: m.interfaces.iter().map(|i| i.tx_packets).sum(),
            grants: m.rings.iter().map(|r| r.grants).sum(),
            flushes: m.rings.iter().map(|r| r.tx_flushes).sum(),
            served: m.rings.iter().map(|r| r.served).sum(),
            grant_s: m.rings.iter().map(|r| r.grant_seconds).sum(),
            flush_s: m.rings.iter().map(|r| r.tx_flush_seconds).sum(),
            flushed: m.rings.iter().map(|r| r.tx_flushed_frames).sum(),
            rx: m.interfaces.iter().map(|i| i.rx_packets).sum(),
            dropped: m.interfaces.iter().map(|i| i.dropped_packets).sum(),
        })
    }
}

impl AlternateStudy {
    fn strategies(&self) -> Result<Vec<StrategyKind>> {
        self.options
            .targets
            .iter()
            .map(|t| match t {
                Target::Llrouter(s) => Ok(*s),
                other => Err(LabError::invalid(
                    "targets",
                    format!(
                        "{}: alternate switches llrouter's strategy live; only llrouter:<strategy> targets",
                        other.label()
                    ),
                )),
            })
            .collect()
    }

    /// Checks every option before anything changes on the host.
    pub fn check(&self) -> Result<()> {
        self.options.check()?;
        let s = self.strategies()?;
        if s.len() < 2 {
            return Err(LabError::invalid(
                "targets",
                "need at least two llrouter strategies (the first is the reference)",
            ));
        }
        if s[1..].contains(&s[0]) {
            return Err(LabError::invalid(
                "targets",
                "the reference strategy (the first) appears again",
            ));
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(10)).contains(&self.slice) {
            return Err(LabError::invalid("slice-ms", "must be within 100..=10000"));
        }
        if self.settle > Duration::from_secs(5) {
            return Err(LabError::invalid("settle-ms", "must be at most 5000"));
        }
        if !(1..=1000).contains(&self.cycles) {
            return Err(LabError::invalid(
                "cycles",
                format!("{}: must be within 1..=1000", self.cycles),
            ));
        }
        if self.total() > Duration::from_secs(600) {
            return Err(LabError::invalid(
                "cycles",
                format!(
                    "the traffic would last {:.0} s; at most 600 (fewer cycles or shorter slices)",
                    self.total().as_secs_f64()
                ),
            ));
        }
        traffic::gen_config(&self.traffic_options(), self.rate, self.rt_share)?;
        Ok(())
    }

    /// Slices, each after a switch: every strategy per cycle, and the reference once more at
    /// the end so that every slice has a reference slice after it.
    fn slices(&self) -> u32 {
        self.cycles * self.options.targets.len() as u32 + 1
    }

    /// How long the traffic runs: a second to start, the slices, a second of margin.
    fn total(&self) -> Duration {
        Duration::from_secs(2) + (self.slice + self.settle + SWITCH_ALLOWANCE) * self.slices()
    }

    fn traffic_options(&self) -> Options {
        Options {
            point_secs: self.total().as_secs_f64(),
            ..self.options.clone()
        }
    }

    /// Runs the study and writes `alternate.csv` and `alternate.md` into the output directory.
    pub fn run(&self, stop: &AtomicBool, progress: &dyn Progress) -> Result<AlternateOutcome> {
        self.check()?;
        let strategies = self.strategies()?;
        let c = self.traffic_options();
        let (topo, _shield) = prepare(&c)?;
        let mut act = Active::start(&topo, &c.targets[0], &c)?;
        progress.start(u64::from(self.slices()));
        let traffic_done = AtomicBool::new(false);
        let mut slices = Vec::new();
        let mut point = None;
        let outcome = std::thread::scope(|sc| -> Result<()> {
            let traffic = sc.spawn(|| {
                let r = measure_once(&topo, &act, &c, self.rate, self.rt_share, stop);
                traffic_done.store(true, Ordering::Relaxed);
                r
            });
            let run = self.switch_and_measure(&act, &strategies, stop, &traffic_done, progress);
            let r = run.map(|s| slices = s);
            // The traffic ends by its own duration; a failed or interrupted run does not wait
            // for it beyond that (the generator sees `stop` on Ctrl-C).
            let t = traffic
                .join()
                .map_err(|_| LabError::Failed("traffic thread panicked".into()))?;
            r?;
            point = Some(t?);
            Ok(())
        });
        progress.finish();
        act.finish()?;
        outcome?;
        let mut o = AlternateOutcome {
            slices,
            interrupted: stop.load(Ordering::Relaxed),
            ..AlternateOutcome::default()
        };
        bracket(&mut o.slices, strategies[0]);
        report::write_csv(
            &c.out.join("alternate.csv"),
            &o.slices,
            "cycle,strategy,at_s,secs,forwarded_pps,cpu,grants,flushes,served,grant_s,flush_s,flushed,loss,ratio",
        )?;
        if let Some(p) = &point {
            report::write_rows(&c.out.join("results.csv"), &self.rows(&o.slices, p))?;
        }
        o.md = self.summary_md(&o.slices, &strategies);
        let md_path = c.out.join("alternate.md");
        std::fs::write(&md_path, &o.md)
            .map_err(|e| LabError::io(format!("write {}", md_path.display()), e))?;
        Ok(o)
    }

    fn switch_and_measure(
        &self,
        act: &Active<'_>,
        strategies: &[StrategyKind],
        stop: &AtomicBool,
        traffic_done: &AtomicBool,
        progress: &dyn Progress,
    ) -> Result<Vec<Slice>> {
        // The generator takes a moment to reach its rate.
        std::thread::sleep(Duration::from_secs(1));
        let order = (0..self.cycles)
            .flat_map(|k| strategies.iter().map(move |&s| (k, s)))
            .chain(std::iter::once((self.cycles, strategies[0])));
        let mut out = Vec::new();
        let mut t0 = None;
        for (cycle, s) in order {
            if stop.load(Ordering::Relaxed) || traffic_done.load(Ordering::Relaxed) {
                break;
            }
            self.switch(act, s)?;
            progress.message(&format!("cycle {cycle} {s}"));
            std::thread::sleep(self.settle);
            let a = Reading::take(act)?;
            std::thread::sleep(self.slice);
            let b = Reading::take(act)?;
            if traffic_done.load(Ordering::Relaxed) {
                break; // the traffic may have ended inside the slice
            }
            let first = *t0.get_or_insert(a.at);
            let secs = (b.at - a.at).as_secs_f64();
            let mid = (a.at - first).as_secs_f64() + secs / 2.0;
            out.push(Slice {
                cycle,
                strategy: s,
                at_s: mid,
                secs,
                forwarded_pps: b.tx.saturating_sub(a.tx) as f64 / secs,
                cpu: b.cpu_ns.saturating_sub(a.cpu_ns) as f64 * 1e-9 / secs,
                grants: b.grants.saturating_sub(a.grants),
                flushes: b.flushes.saturating_sub(a.flushes),
                served: b.served.saturating_sub(a.served),
                grant_s: (b.grant_s - a.grant_s).max(0.0),
                flush_s: (b.flush_s - a.flush_s).max(0.0),
                flushed: b.flushed.saturating_sub(a.flushed),
                loss: {
                    let (rx, dropped) = (
                        b.rx.saturating_sub(a.rx),
                        b.dropped.saturating_sub(a.dropped),
                    );
                    dropped as f64 / (rx + dropped).max(1) as f64
                },
                ratio: f64::NAN,
            });
            progress.inc(1);
        }
        Ok(out)
    }

    /// Switches the running router to `s` with the budgets its `testbed run` target has
    /// (ll-rr: every ring the BE budget, which its configuration requires before the switch).
    fn switch(&self, act: &Active<'_>, s: StrategyKind) -> Result<()> {
        let b = self.options.budgets;
        let rt = |budget| Command::BudgetSet {
            class: "rt".into(),
            budget,
        };
        if s == StrategyKind::LlRr {
            act.call(&rt(b.be()))?;
            act.call(&Command::StrategySet { strategy: s })?;
        } else {
            act.call(&Command::StrategySet { strategy: s })?;
            act.call(&rt(b.rt()))?;
        }
        Ok(())
    }

    /// The slices as `results.csv` rows, one round per cycle, so that `testbed costs` fits the
    /// grant and flush costs over them and pairs each strategy with the reference of its
    /// cycle. The generator's rate and the BE loss are the whole run's (every strategy's);
    /// the rest is the slice's.
    fn rows(&self, slices: &[Slice], p: &Point) -> Vec<Row> {
        let whole = p.row(&self.options.targets[0], self.rt_share);
        slices
            .iter()
            .map(|s| {
                let per_grant = |v: f64| v / s.grants.max(1) as f64;
                Row {
                    round: s.cycle + 1,
                    target: format!("llrouter:{}", s.strategy),
                    rt_share: self.rt_share,
                    offered_pps: self.rate,
                    sent_pps: whole.sent_pps,
                    loss_be: whole.loss_be,
                    loss_rt: f64::NAN,
                    throughput_pps: s.forwarded_pps,
                    router_cpu_s: s.cpu * s.secs,
                    router_ns_per_pkt: s.cpu * 1e9 / s.forwarded_pps.max(1.0),
                    frames_per_grant: per_grant(s.served as f64),
                    flushes_per_grant: per_grant(s.flushes as f64),
                    ns_per_grant: per_grant(s.grant_s * 1e9),
                    flush_ns_per_grant: per_grant(s.flush_s * 1e9),
                    flushed_per_grant: per_grant(s.flushed as f64),
                    tx_hold_us: Some(self.options.tx_hold_us),
                    attempts: 1,
                    ..nan_row()
                }
            })
            .collect()
    }

    fn summary_md(&self, slices: &[Slice], strategies: &[StrategyKind]) -> String {
        let reference = strategies[0];
        let mut md = format!(
            "## Strategies alternated live under one overload\n\n\
             One router, {rate:.0} pps offered ({rt:.0} % RT), strategy switched every \
             {slice} ms slice ({settle} ms settle after each switch, not measured), {cycles} \
             cycles. Ratio: a slice's forwarded rate against `{reference}`'s, interpolated \
             between the `{reference}` slices before and after it.\n\n\
             | strategy | slices | forwarded pps | ratio to {reference} | middle half of ratios | frames per grant | flushes per frame | router CPU | loss at the router % |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            rate = self.rate,
            rt = self.rt_share * 100.0,
            slice = self.slice.as_millis(),
            settle = self.settle.as_millis(),
            cycles = self.cycles,
        );
        for s in strategies {
            let mine: Vec<&Slice> = slices.iter().filter(|x| x.strategy == *s).collect();
            let pps: Vec<f64> = mine.iter().map(|x| x.forwarded_pps).collect();
            let ratio: Vec<f64> = mine.iter().map(|x| x.ratio).collect();
            let (grants, flushes, served) = mine.iter().fold((0, 0, 0), |(g, f, n), x| {
                (g + x.grants, f + x.flushes, n + x.served)
            });
            let cpu: Vec<f64> = mine.iter().map(|x| x.cpu).collect();
            let fmt = |v: &[f64], d: usize| match spread(v) {
                Some((m, lo, hi)) => format!("{m:.d$} [{lo:.d$}–{hi:.d$}]"),
                None => "—".into(),
            };
            let iqr = match quartiles(&ratio) {
                Some((q1, q3)) => format!("{q1:.3}–{q3:.3}"),
                None => "—".into(),
            };
            let ratio_cell = match spread(&ratio) {
                Some((m, lo, hi)) => format!("**{m:.3}** [{lo:.3}–{hi:.3}]"),
                None => "(reference)".into(),
            };
            let loss: Vec<f64> = mine.iter().map(|x| x.loss * 100.0).collect();
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.1} | {:.3} | {} | {} |\n",
                s.name(),
                mine.len(),
                fmt(&pps, 0),
                ratio_cell,
                iqr,
                served as f64 / grants.max(1) as f64,
                flushes as f64 / served.max(1) as f64,
                fmt(&cpu, 2),
                fmt(&loss, 3),
            ));
        }
        // How far apart neighbouring reference slices are: the noise left at this time scale.
        let refs: Vec<f64> = slices
            .iter()
            .filter(|x| x.strategy == reference)
            .map(|x| x.forwarded_pps)
            .collect();
        let steps: Vec<f64> = refs
            .windows(2)
            .map(|w| (w[1] / w[0] - 1.0).abs() * 100.0)
            .collect();
        if let Some((m, _, hi)) = spread(&steps) {
            md.push_str(&format!(
                "\nNoise left: one `{reference}` slice to the next differs by {m:.1} % (median), \
                 {hi:.1} % at most.\n"
            ));
        }
        md
    }
}

/// A row whose measured figures are NaN (not measured per slice) until set.
fn nan_row() -> Row {
    let n = f64::NAN;
    Row {
        rt_mean_us: n,
        rt_p50_us: n,
        rt_p99_us: n,
        rt_p999_us: n,
        be_mean_us: n,
        be_p50_us: n,
        be_p99_us: n,
        be_p999_us: n,
        wakeups_per_s: n,
        steal_pct: n,
        router_softirq_pct: n,
        x_ns: n,
        rho_rt: n,
        tmax_us: n,
        rt_ring_p99_lo_us: n,
        rt_ring_p99_us: n,
        hi_frames_per_grant: n,
        hi_ns_per_grant: n,
        lo_frames_per_grant: n,
        lo_ns_per_grant: n,
        hi_flushes_per_grant: n,
        lo_flushes_per_grant: n,
        ..Row::default()
    }
}

/// Leeway per slice for the switch itself (two control calls, each answered between grants).
const SWITCH_ALLOWANCE: Duration = Duration::from_millis(100);

/// Sets every non-reference slice's `ratio`: its rate over the reference's, linearly
/// interpolated in time between the nearest reference slices before and after it. A slice
/// without a reference slice on both sides keeps NaN.
pub fn bracket(slices: &mut [Slice], reference: StrategyKind) {
    let refs: Vec<(f64, f64)> = slices
        .iter()
        .filter(|s| s.strategy == reference)
        .map(|s| (s.at_s, s.forwarded_pps))
        .collect();
    for s in slices.iter_mut().filter(|s| s.strategy != reference) {
        let before = refs.iter().rev().find(|r| r.0 <= s.at_s);
        let after = refs.iter().find(|r| r.0 >= s.at_s);
        s.ratio = match (before, after) {
            (Some(&(ta, ra)), Some(&(tb, rb))) => {
                let w = if tb > ta {
                    (s.at_s - ta) / (tb - ta)
                } else {
                    0.0
                };
                let r = ra + (rb - ra) * w;
                if r > 0.0 {
                    s.forwarded_pps / r
                } else {
                    f64::NAN
                }
            }
            _ => f64::NAN,
        };
    }
}

/// First and third quartile of the finite values (nearest rank); `None` with fewer than 4.
fn quartiles(v: &[f64]) -> Option<(f64, f64)> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 4 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    Some((q(0.25), q(0.75)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(strategy: &str, at_s: f64, pps: f64) -> Slice {
        Slice {
            strategy: strategy.parse().expect("a strategy"),
            at_s,
            forwarded_pps: pps,
            ratio: f64::NAN,
            ..Slice::default()
        }
    }

    #[test]
    fn a_linear_drift_of_the_machine_cancels_out() {
        // The machine slows linearly from 1000 to 700 over 3 s; ll-wfq costs 5 %.
        let speed = |t: f64| 1000.0 - 100.0 * t;
        let mut v = vec![
            slice("sq", 0.0, speed(0.0)),
            slice("ll-wfq", 1.0, 0.95 * speed(1.0)),
            slice("ll-rr", 2.0, 0.90 * speed(2.0)),
            slice("sq", 3.0, speed(3.0)),
        ];
        bracket(&mut v, StrategyKind::Sq);
        assert!(v[0].ratio.is_nan() && v[3].ratio.is_nan());
        assert!((v[1].ratio - 0.95).abs() < 1e-12, "{}", v[1].ratio);
        assert!((v[2].ratio - 0.90).abs() < 1e-12, "{}", v[2].ratio);
    }

    #[test]
    fn a_slice_without_a_reference_after_it_has_no_ratio() {
        let mut v = vec![slice("sq", 0.0, 100.0), slice("ll-wfq", 1.0, 90.0)];
        bracket(&mut v, StrategyKind::Sq);
        assert!(v[1].ratio.is_nan());
        // A reference that forwarded nothing gives no ratio rather than infinity.
        let mut v = vec![
            slice("sq", 0.0, 0.0),
            slice("ll-wfq", 1.0, 90.0),
            slice("sq", 2.0, 0.0),
        ];
        bracket(&mut v, StrategyKind::Sq);
        assert!(v[1].ratio.is_nan());
    }

    #[test]
    fn quartiles_need_four_values() {
        assert_eq!(quartiles(&[1.0, 2.0, 3.0]), None);
        assert_eq!(quartiles(&[4.0, 1.0, 3.0, 2.0, 5.0]), Some((2.0, 4.0)));
        assert_eq!(quartiles(&[1.0, f64::NAN, 2.0, 3.0]), None);
    }

    #[test]
    fn check_refuses_what_cannot_be_alternated() {
        let s = |targets: &[Target]| AlternateStudy {
            options: Options::new(targets, "/tmp/unused".into()),
            rate: 1e6,
            rt_share: 0.15,
            slice: Duration::from_millis(500),
            settle: Duration::from_millis(100),
            cycles: 10,
        };
        let sq = Target::Llrouter(StrategyKind::Sq);
        let wfq = Target::Llrouter(StrategyKind::LlWfq);
        assert!(s(&[sq, wfq]).check().is_ok());
        let e = s(&[Target::Kernel, wfq]).check().unwrap_err().to_string();
        assert!(e.contains("targets") && e.contains("kernel"), "{e}");
        let e = s(&[sq]).check().unwrap_err().to_string();
        assert!(e.contains("at least two"), "{e}");
        let e = s(&[sq, wfq, sq]).check().unwrap_err().to_string();
        assert!(e.contains("reference"), "{e}");
        let mut long = s(&[sq, wfq]);
        long.cycles = 1000;
        let e = long.check().unwrap_err().to_string();
        assert!(e.contains("cycles") && e.contains("600"), "{e}");
        let mut short = s(&[sq, wfq]);
        short.slice = Duration::from_millis(10);
        assert!(short.check().unwrap_err().to_string().contains("slice-ms"));
    }
}
