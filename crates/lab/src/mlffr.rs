//! RFC 2544-style binary search for the maximum loss-free forwarding rate (MLFFR), and the
//! `mlffr` study: a search per target and round.

use std::sync::atomic::{AtomicBool, Ordering};

use llr_traffic::netns::Topology;

use crate::measure::{measure, Row};
use crate::options::{check_repeat, Options, Search};
use crate::report::{self, MlffrCsvRow, MLFFR_HEADER};
use crate::setup::prepare;
use crate::summary::{self, Mlffr};
use crate::target::Active;
use crate::{traffic, LabError, Progress, Result};

/// What one search found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Found {
    /// The highest loss-free rate, packets/s (0: none).
    pub pps: f64,
    /// The generator fell short of the rate asked in a loss-free trial: the MLFFR may be the
    /// generator's limit, not the target's.
    pub gen_limited: bool,
}

/// The running search: the loss-free rate so far and the lowest lossy bound.
struct Bounds {
    lo: f64,
    hi: f64,
    gen_limited: bool,
}

impl Bounds {
    /// Narrows the range after a trial at `rate` (packets/s asked) that sent `achieved` and
    /// forwarded `forwarded` with `loss`; returns the next rate, or `None` when done.
    fn update(
        &mut self,
        s: &Search,
        rate: f64,
        achieved: f64,
        forwarded: f64,
        loss: f64,
    ) -> Option<f64> {
        if loss <= s.loss_tolerance {
            if achieved < 0.95 * rate {
                self.gen_limited = true;
            }
            // Loss-free at what was actually sent.
            self.lo = self.lo.max(achieved.min(rate));
        } else {
            self.hi = self.hi.min(rate);
            // At overload the forwarded rate bounds the MLFFR from above too.
            self.hi = self.hi.min(forwarded.max(self.lo) * 1.05);
        }
        if self.lo >= self.hi * 0.97 {
            return None;
        }
        Some(if self.hi <= self.lo {
            self.lo
        } else {
            (self.lo.max(s.min_rate) + self.hi) / 2.0
        })
    }
}

/// A running target and what every measurement on it needs.
pub struct Bench<'a, 't> {
    pub topo: &'a Topology,
    pub act: &'a Active<'t>,
    pub opts: &'a Options,
    pub stop: &'a AtomicBool,
    pub progress: &'a dyn Progress,
}

/// Searches the MLFFR of the running target at `rt_share`; the trials, marked with `round`, are
/// appended to `rows`.
pub fn search(
    bench: &Bench<'_, '_>,
    s: &Search,
    rt_share: f64,
    round: u32,
    rows: &mut Vec<Row>,
) -> Result<Found> {
    let Bench {
        topo,
        act,
        opts: c,
        stop,
        progress,
    } = *bench;
    let mut b = Bounds {
        lo: 0.0,
        hi: s.max_rate,
        gen_limited: false,
    };
    let mut rate = s.max_rate;
    let target = act.target();
    for _ in 0..s.steps {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        progress.message(&format!("{} mlffr {rate:.0} pps", target.label()));
        let p = measure(topo, act, c, rate, rt_share, stop)?;
        let mut r = p.row(&target, rt_share);
        r.round = round;
        let loss = 1.0 - (r.recv_rt + r.recv_be) as f64 / (p.gen.sent.max(1)) as f64;
        let next = b.update(s, rate, p.gen.achieved_pps, r.throughput_pps, loss);
        rows.push(r);
        progress.inc(1);
        match next {
            Some(n) => rate = n,
            None => break,
        }
    }
    Ok(Found {
        pps: b.lo,
        gen_limited: b.gen_limited,
    })
}

/// The `mlffr` study.
#[derive(Debug, Clone)]
pub struct MlffrStudy {
    pub options: Options,
    /// RT share of the traffic.
    pub rt_share: f64,
    pub search: Search,
    /// Rounds, targets interleaved within each.
    pub repeat: u32,
}

/// What the `mlffr` study found; its files are written.
#[derive(Debug, Clone, Default)]
pub struct MlffrOutcome {
    pub found: Vec<Mlffr>,
    /// Every trial.
    pub trials: Vec<Row>,
    /// `mlffr.csv` and `mlffr.md` as written.
    pub csv: String,
    pub md: String,
    /// Targets (and rounds) that could not be set up, with the reason.
    pub unmeasured: Vec<(String, String)>,
    pub interrupted: bool,
}

impl MlffrStudy {
    /// Checks every option before anything changes on the host.
    pub fn check(&self) -> Result<()> {
        self.options.check()?;
        self.search.check()?;
        if !(self.search.min_rate > 0.0 && self.search.max_rate > self.search.min_rate) {
            return Err(LabError::invalid(
                "max-rate",
                "need 0 < --min-rate < --max-rate",
            ));
        }
        check_repeat(self.repeat, 100)?;
        traffic::gen_config(&self.options, self.search.min_rate, self.rt_share)?;
        Ok(())
    }

    /// Runs the searches and writes `mlffr_trials.csv`, `mlffr.csv` and `mlffr.md`.
    pub fn run(&self, stop: &AtomicBool, progress: &dyn Progress) -> Result<MlffrOutcome> {
        self.check()?;
        let c = &self.options;
        let (topo, _shield) = prepare(c)?;
        progress.start(u64::from(
            self.repeat * c.targets.len() as u32 * self.search.steps,
        ));
        let mut o = MlffrOutcome::default();
        'outer: for round in 1..=self.repeat {
            for t in &c.targets {
                if stop.load(Ordering::Relaxed) {
                    break 'outer;
                }
                let mut act = match Active::start(&topo, t, c) {
                    Ok(x) => x,
                    Err(e) => {
                        o.unmeasured
                            .push((format!("{} (round {round})", t.label()), e.to_string()));
                        progress.inc(u64::from(self.search.steps));
                        continue;
                    }
                };
                let bench = Bench {
                    topo: &topo,
                    act: &act,
                    opts: c,
                    stop,
                    progress,
                };
                let f = search(&bench, &self.search, self.rt_share, round, &mut o.trials)?;
                act.finish()?;
                o.found.push(Mlffr {
                    target: t.label(),
                    round,
                    pps: f.pps,
                    gen_limited: f.gen_limited,
                });
            }
        }
        progress.finish();
        o.interrupted = stop.load(Ordering::Relaxed);
        report::write_rows(&c.out.join("mlffr_trials.csv"), &o.trials)?;
        let lines: Vec<MlffrCsvRow> = o
            .found
            .iter()
            .map(|m| MlffrCsvRow::new(m, self.search.loss_tolerance))
            .collect();
        o.csv = report::write_csv(&c.out.join("mlffr.csv"), &lines, MLFFR_HEADER)?;
        o.md = summary::mlffr_md(&o.found, self.search.loss_tolerance);
        let md_path = c.out.join("mlffr.md");
        std::fs::write(&md_path, &o.md)
            .map_err(|e| LabError::io(format!("write {}", md_path.display()), e))?;
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_narrows_to_the_loss_free_rate() {
        let s = Search {
            loss_tolerance: 0.0,
            min_rate: 10_000.0,
            max_rate: 1_000_000.0,
            steps: 8,
        };
        let mut b = Bounds {
            lo: 0.0,
            hi: s.max_rate,
            gen_limited: false,
        };
        // Lossy at 1 Mpps, forwarding 400 kpps: the next trial is below 1.05 × 400 k.
        let next = b.update(&s, 1e6, 1e6, 4e5, 0.6).unwrap();
        assert_eq!(b.hi, 4.2e5);
        assert_eq!(next, (10_000.0 + 4.2e5) / 2.0);
        // Loss-free there, but the generator sent only 150 k: limited, lo = what was sent.
        b.update(&s, next, 1.5e5, 1.5e5, 0.0).unwrap();
        assert!(b.gen_limited);
        assert_eq!(b.lo, 1.5e5);
        // Loss-free within 3 % of the upper bound: done.
        assert_eq!(b.update(&s, 4.1e5, 4.1e5, 4.1e5, 0.0), None);
    }
}
