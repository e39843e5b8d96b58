//! Route churn beside measured traffic: a temporary testbed whose router namespace holds
//! `routes` /24 routes (11.0.0.0 upwards, via the sink), and in every round two points of one
//! llrouter target at `load` packets/s, one while `rate` routes a second are replaced (paced
//! in one-second `ip -batch` chunks, each moving a route to the other of two gateways, on `churn_cpu`: a routing
//! daemon's control-plane core, not the worker's) and one without; the order swaps from round
//! to round. The traffic goes to the sink, not to the churned routes: what the churn costs it
//! is the route mirror's and the forwarder's work.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llr_traffic::netns::Topology;
use serde::Serialize;

use crate::measure::{measure, Row};
use crate::options::{check_repeat, Options, Target};
use crate::setup::prepare;
use crate::summary::spread;
use crate::target::Active;
use crate::{LabError, Progress, Result};

/// Whether a point runs beside the churn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChurnMode {
    Churn,
    Quiet,
}

impl ChurnMode {
    pub fn name(self) -> &'static str {
        match self {
            ChurnMode::Churn => "churn",
            ChurnMode::Quiet => "quiet",
        }
    }
}

/// The study.
#[derive(Debug, Clone)]
pub struct ChurnStudy {
    /// One llrouter target, the traffic, the point's length, the output directory.
    pub options: Options,
    /// /24 routes in the kernel's table (the churn replaces them).
    pub routes: usize,
    /// Route replaces a second.
    pub rate: u32,
    /// Offered load, packets/s.
    pub load: f64,
    pub rt_share: f64,
    pub rounds: u32,
    /// The CPU the churn's `ip` runs on (default: the generator's).
    pub churn_cpu: Option<usize>,
}

/// One point.
#[derive(Debug, Clone)]
pub struct ChurnRow {
    pub mode: ChurnMode,
    pub round: u32,
    pub row: Row,
    /// Route replaces issued during the point.
    pub replaced: u64,
    /// Seconds of churn whose batch took longer than the second it had.
    pub late_secs: u32,
    /// Forwarding-table entries the router's route mirror changed during the point.
    pub fib_updates: u64,
}

/// What a study measured.
#[derive(Debug, Clone, Default)]
pub struct ChurnOutcome {
    pub rows: Vec<ChurnRow>,
    pub md: String,
    pub interrupted: bool,
}

impl ChurnOutcome {
    /// `f` of `mode`'s point in each round, in round order.
    pub fn col(&self, mode: ChurnMode, f: impl Fn(&ChurnRow) -> f64) -> Vec<f64> {
        self.rows.iter().filter(|r| r.mode == mode).map(f).collect()
    }

    /// Per round, `f` with churn over `f` without (NaN where either is missing or 0).
    pub fn vs_quiet(&self, f: impl Fn(&Row) -> f64) -> Vec<f64> {
        (self.rows.iter().filter(|r| r.mode == ChurnMode::Churn))
            .map(|c| {
                let q = (self.rows.iter())
                    .find(|q| q.mode == ChurnMode::Quiet && q.round == c.round)
                    .map(|q| f(&q.row));
                match q {
                    Some(q) if q > 0.0 => f(&c.row) / q,
                    _ => f64::NAN,
                }
            })
            .collect()
    }
}

/// The `i`-th route's prefix: 11.0.0.0/24 upwards (at most 2^20 of them, up to 26.255.255.0/24:
/// public space, but only in the testbed's namespace).
fn prefix(i: usize) -> String {
    let a = 0x0B00_0000u32.wrapping_add((i as u32) << 8);
    format!("{}/24", std::net::Ipv4Addr::from(a))
}

impl ChurnStudy {
    /// Checks the settings before anything changes on the host.
    pub fn check(&self) -> Result<()> {
        let c = &self.options;
        if !matches!(
            c.targets[..],
            [Target::Llrouter(_)] | [Target::LlrouterFlows(_)]
        ) {
            return Err(LabError::invalid(
                "targets",
                "one llrouter:<strategy> target: the churn is the route mirror's",
            ));
        }
        if c.ipv6 {
            return Err(LabError::invalid("ipv6", "the churned routes are IPv4"));
        }
        if !(1..=1 << 20).contains(&self.routes) {
            return Err(LabError::invalid(
                "routes",
                "within 1..=1048576 (/24s from 11.0.0.0 up)",
            ));
        }
        if self.rate == 0 || self.rate > 100_000 {
            return Err(LabError::invalid(
                "rate",
                "within 1..=100000 replaces a second",
            ));
        }
        if !(self.load > 0.0 && self.load.is_finite()) {
            return Err(LabError::invalid("load", "a rate > 0 packets/s"));
        }
        if !(self.rt_share > 0.0 && self.rt_share < 1.0) {
            return Err(LabError::invalid(
                "rt-share",
                "between 0 and 1, both excluded",
            ));
        }
        if c.point_secs < 2.0 {
            return Err(LabError::invalid(
                "point-secs",
                "at least 2: the churn is paced in whole seconds",
            ));
        }
        check_repeat(self.rounds, 100)?;
        crate::traffic::gen_config(c, self.load, self.rt_share)?;
        Ok(())
    }

    /// Runs it (root): the table loaded once, then per round a point with churn and one
    /// without, each with a router started for it; writes `churn.csv` and `report.md`.
    pub fn run(&self, stop: &AtomicBool, progress: &dyn Progress) -> Result<ChurnOutcome> {
        self.check()?;
        let c = &self.options;
        let (topo, _shield) = prepare(c)?;
        let load = c.out.join("routes.batch");
        write_batch(
            &load,
            (0..self.routes)
                .map(|i| format!("route add {} via 10.71.2.1 dev veth-rout\n", prefix(i))),
        )?;
        progress.message(&format!("loading {} routes", self.routes));
        ip_batch(&topo, &load, None)?;
        let target = c.targets[0];
        progress.start(u64::from(self.rounds) * 2);
        let mut o = ChurnOutcome::default();
        // Where the churn goes on from: each point's churn continues the last one's passes, so
        // that its replaces keep changing routes.
        let mut next = 0usize;
        'rounds: for round in 1..=self.rounds {
            let order = if round % 2 == 1 {
                [ChurnMode::Churn, ChurnMode::Quiet]
            } else {
                [ChurnMode::Quiet, ChurnMode::Churn]
            };
            for mode in order {
                if stop.load(Ordering::Relaxed) {
                    break 'rounds;
                }
                progress.message(&format!("{} (round {round})", mode.name()));
                let act = Active::start(&topo, &target, c)?;
                let done = AtomicBool::new(false);
                let from = next;
                let (p, (replaced, late_secs, to)) = std::thread::scope(|s| {
                    let churn = (mode == ChurnMode::Churn)
                        .then(|| s.spawn(|| self.churn(&topo, &c.out, round, from, &done, stop)));
                    let p = measure(&topo, &act, c, self.load, self.rt_share, stop);
                    done.store(true, Ordering::Relaxed);
                    let churned = match churn {
                        Some(h) => h.join().unwrap_or_else(|_| {
                            Err(LabError::Failed("the churn thread panicked".into()))
                        }),
                        None => Ok((0, 0, from)),
                    };
                    Ok::<_, LabError>((p?, churned?))
                })?;
                drop(act);
                next = to;
                let fib_updates = (p.extra.counters.as_ref()).map_or(0, |(a, b)| {
                    let u = |m: &llr_ops::metrics::MetricsSnapshot| {
                        m.mirror.as_ref().map_or(0, |x| x.updates)
                    };
                    u(b).saturating_sub(u(a))
                });
                let mut row = p.row(&target, self.rt_share);
                row.round = round;
                o.rows.push(ChurnRow {
                    mode,
                    round,
                    row,
                    replaced,
                    late_secs,
                    fib_updates,
                });
                progress.inc(1);
            }
        }
        progress.finish();
        o.interrupted = stop.load(Ordering::Relaxed);
        o.md = self.report(&o);
        self.write(&o)?;
        Ok(o)
    }

    /// Replaces `rate` routes a second until `done`, the `from`-th replace of the study first,
    /// each second's batch prepared before it; returns the replaces issued, the seconds that
    /// overran and where the next churn goes on from.
    fn churn(
        &self,
        topo: &Topology,
        out: &Path,
        round: u32,
        from: usize,
        done: &AtomicBool,
        stop: &AtomicBool,
    ) -> Result<(u64, u32, usize)> {
        let cpu = self.churn_cpu.unwrap_or(self.options.gen_cpu);
        let file = out.join(format!("churn-{round}.batch"));
        let (mut replaced, mut late) = (0u64, 0u32);
        // Bounded whatever happens to the point: its length and a retry, and some slack.
        let limit = Duration::from_secs_f64(self.options.point_secs * 3.0 + 10.0);
        let t0 = Instant::now();
        let mut sec = 0usize;
        while !done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) && t0.elapsed() < limit
        {
            let base = from + sec * self.rate as usize;
            // A stride prime to the table's size visits every route once a pass; every pass
            // moves them to the other gateway, so that each replace changes a route.
            let stride = if self.routes % 7919 == 0 { 7907 } else { 7919 };
            write_batch(
                &file,
                (0..self.rate as usize).map(|i| {
                    let n = base + i;
                    let k = n.wrapping_mul(stride) % self.routes;
                    let gw = if (n / self.routes) % 2 == 0 {
                        "10.71.2.3"
                    } else {
                        "10.71.2.1"
                    };
                    format!("route replace {} via {gw} dev veth-rout\n", prefix(k))
                }),
            )?;
            let t = Instant::now();
            ip_batch(topo, &file, Some(cpu))?;
            replaced += u64::from(self.rate);
            match Duration::from_secs(1).checked_sub(t.elapsed()) {
                Some(left) => {
                    // Sleep in slices so that the end of the point is not held up.
                    let end = Instant::now() + left;
                    while Instant::now() < end && !done.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now()));
                    }
                }
                None => late += 1,
            }
            sec += 1;
        }
        Ok((replaced, late, from + sec * self.rate as usize))
    }

    fn report(&self, o: &ChurnOutcome) -> String {
        let mut s = format!(
            "{} /24 routes; churn: {} replaces a second; {} pps offered, {:.0} % RT.\n\n\
             | round | mode | RT loss % | RT p99 µs | RT ring p99 µs | BE loss % | worker's longest grant µs | replaced | FIB updates | late seconds |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
            self.routes,
            self.rate,
            self.load,
            self.rt_share * 100.0
        );
        for r in &o.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {:.3} | {:.1} | ≤{:.0} | {:.3} | {:.0} | {} | {} | {} |",
                r.round,
                r.mode.name(),
                r.row.loss_rt * 100.0,
                r.row.rt_p99_us,
                r.row.rt_ring_p99_us,
                r.row.loss_be * 100.0,
                r.row.stall_max_us,
                r.replaced,
                r.fib_updates,
                r.late_secs
            );
        }
        if let Some((m, lo, hi)) = spread(&o.vs_quiet(|r| r.rt_p99_us)) {
            let _ = writeln!(
                s,
                "\nRT p99 with churn ÷ without, same round: {m:.2} [{lo:.2}–{hi:.2}]."
            );
        }
        s
    }

    fn write(&self, o: &ChurnOutcome) -> Result<()> {
        #[derive(Serialize)]
        struct Line {
            round: u32,
            mode: ChurnMode,
            sent_rt: u64,
            loss_rt: f64,
            rt_p99_us: f64,
            loss_be: f64,
            stall_max_us: f64,
            replaced: u64,
            fib_updates: u64,
            late_secs: u32,
        }
        let c = &self.options;
        let path = c.out.join("churn.csv");
        let err = |e: csv::Error| LabError::step(format!("write {}", path.display()), e);
        let mut w = csv::Writer::from_path(&path).map_err(err)?;
        for r in &o.rows {
            w.serialize(Line {
                round: r.round,
                mode: r.mode,
                sent_rt: r.row.sent_rt,
                loss_rt: r.row.loss_rt,
                rt_p99_us: r.row.rt_p99_us,
                loss_be: r.row.loss_be,
                stall_max_us: r.row.stall_max_us,
                replaced: r.replaced,
                fib_updates: r.fib_updates,
                late_secs: r.late_secs,
            })
            .map_err(err)?;
        }
        w.flush()
            .map_err(|e| LabError::io(format!("write {}", path.display()), e))?;
        let md = c.out.join("report.md");
        std::fs::write(&md, &o.md).map_err(|e| LabError::io(format!("write {}", md.display()), e))
    }
}

fn write_batch(path: &PathBuf, lines: impl Iterator<Item = String>) -> Result<()> {
    let what = || format!("write {}", path.display());
    let f = std::fs::File::create(path).map_err(|e| LabError::io(what(), e))?;
    let mut w = std::io::BufWriter::new(f);
    for l in lines {
        w.write_all(l.as_bytes())
            .map_err(|e| LabError::io(what(), e))?;
    }
    w.flush().map_err(|e| LabError::io(what(), e))
}

/// `ip -batch FILE` in the router namespace, on `cpu` if given.
pub(crate) fn ip_batch(topo: &Topology, file: &Path, cpu: Option<usize>) -> Result<()> {
    let mut cmd = match cpu {
        Some(c) => {
            let mut t = topo.router.command("taskset");
            t.args(["-c", &c.to_string(), "ip"]);
            t
        }
        None => topo.router.command("ip"),
    };
    let out = cmd
        .arg("-batch")
        .arg(file)
        .output()
        .map_err(|e| LabError::io("run ip -batch", e))?;
    if !out.status.success() {
        return Err(LabError::Failed(format!(
            "ip -batch {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_distinct_24s_of_11_0_0_0() {
        assert_eq!(prefix(0), "11.0.0.0/24");
        assert_eq!(prefix(1), "11.0.1.0/24");
        assert_eq!(prefix(256), "11.1.0.0/24");
        assert_eq!(prefix(65_535), "11.255.255.0/24");
        assert_eq!(prefix((1 << 20) - 1), "26.255.255.0/24");
    }

    #[test]
    fn each_round_is_set_against_its_own_quiet_point() {
        let row = |mode, round, p99| ChurnRow {
            mode,
            round,
            row: Row {
                rt_p99_us: p99,
                ..Row::default()
            },
            replaced: 0,
            late_secs: 0,
            fib_updates: 0,
        };
        let o = ChurnOutcome {
            rows: vec![
                row(ChurnMode::Churn, 1, 60.0),
                row(ChurnMode::Quiet, 1, 50.0),
                row(ChurnMode::Quiet, 2, 40.0),
                row(ChurnMode::Churn, 2, 80.0),
                row(ChurnMode::Churn, 3, 10.0),
            ],
            ..ChurnOutcome::default()
        };
        let v = o.vs_quiet(|r| r.rt_p99_us);
        assert_eq!(v[..2], [1.2, 2.0]);
        assert!(v[2].is_nan(), "round 3 has no quiet point");
    }
}
