//! `testbed flood`: RT traffic alone, then beside a flood to an address the router's own
//! netfilter ruleset drops, once by a prerouting rule (which llrouter compiles into its XDP
//! classifier: the flood never reaches a worker) and once by a forward-chain rule (judged by the
//! worker after its ring) — the modes interleaved in every round, so each flood point has an RT
//! alone point from the same minute of the machine to be set against.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use llr_traffic::netns::addr;

use crate::measure::{measure, Point, Row};
use crate::options::{check_repeat, Options, Target};
use crate::setup::prepare;
use crate::summary::spread;
use crate::target::Active;
use crate::{LabError, Progress, Result};
use llr_ops::metrics::MetricsSnapshot;

/// Where the flood goes, and who drops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FloodMode {
    /// RT only, at the RT rate of the flood modes; no ruleset.
    Alone,
    /// A prerouting rule drops the flood: in XDP, before the rings.
    Xdp,
    /// A forward-chain rule drops the flood: in the worker, after its ring.
    Worker,
}

impl FloodMode {
    pub fn name(self) -> &'static str {
        match self {
            FloodMode::Alone => "RT alone",
            FloodMode::Xdp => "flood dropped in XDP",
            FloodMode::Worker => "flood dropped by the worker",
        }
    }
}

/// The nftables table the study owns in the router's namespace (only this table is touched).
const TABLE: &str = "llrflood";

/// The ruleset of `mode` dropping what goes to `blocked`, for `nft -f` (replaces the study's
/// table; empty for [`FloodMode::Alone`]).
pub fn ruleset(mode: FloodMode, blocked: IpAddr) -> String {
    // `add` then `delete` removes the table whether or not it exists.
    let mut s = format!("add table inet {TABLE}\ndelete table inet {TABLE}\n");
    let fam = if blocked.is_ipv4() { "ip" } else { "ip6" };
    let chain = match mode {
        FloodMode::Alone => return s,
        FloodMode::Xdp => {
            "chain pre {\n    type filter hook prerouting priority -150; policy accept;"
        }
        FloodMode::Worker => "chain fw {\n    type filter hook forward priority 0; policy accept;",
    };
    let _ = write!(
        s,
        "table inet {TABLE} {{\n  {chain}\n    {fam} daddr {blocked} drop\n  }}\n}}\n"
    );
    s
}

/// The study.
#[derive(Debug, Clone)]
pub struct FloodStudy {
    /// One llrouter target; `be_dst` is the study's (`blocked`).
    pub options: Options,
    /// Offered load of the flood modes, packets/s; RT is `rt_share` of it in every mode.
    pub load: f64,
    pub rt_share: f64,
    pub rounds: u32,
    pub modes: Vec<FloodMode>,
    /// The flood's destination (default: beside the sink, [`FloodStudy::default_blocked`]).
    pub blocked: Option<IpAddr>,
}

/// One mode in one round.
#[derive(Debug, Clone)]
pub struct FloodRow {
    pub mode: FloodMode,
    pub round: u32,
    pub row: Row,
    /// The router's firewall drops during the point: in XDP (`filtered_xdp`) and by the
    /// workers (`filtered`).
    pub dropped_xdp: u64,
    pub dropped_worker: u64,
    /// Frames the BE ring had no room for (its worker late): flood frames lost before a
    /// forward-chain rule could drop them.
    pub be_ring_drops: u64,
}

/// A line of `flood.csv`.
#[derive(Debug, serde::Serialize)]
struct CsvRow {
    mode: &'static str,
    round: u32,
    sent_rt: u64,
    sent_be: u64,
    loss_rt: f64,
    rt_p99_us: f64,
    hi_ring_drops: u64,
    dropped_xdp: u64,
    dropped_worker: u64,
    be_ring_drops: u64,
    router_cpu_s: f64,
}

impl FloodMode {
    fn key(self) -> &'static str {
        match self {
            FloodMode::Alone => "alone",
            FloodMode::Xdp => "xdp",
            FloodMode::Worker => "worker",
        }
    }
}

/// How much the drop counter `reason` grew during the point (0 without counters).
fn drop_delta(p: &Point, reason: &str) -> u64 {
    let get = |s: &MetricsSnapshot| {
        (s.drops.iter())
            .find(|(r, _)| r == reason)
            .map_or(0, |(_, n)| *n)
    };
    (p.extra.counters.as_ref()).map_or(0, |(a, b)| get(b).saturating_sub(get(a)))
}

/// What the study measured; `report.md` and the rulesets are written.
#[derive(Debug, Clone, Default)]
pub struct FloodOutcome {
    pub rows: Vec<FloodRow>,
    pub point_secs: f64,
    pub md: String,
    pub interrupted: bool,
}

impl FloodOutcome {
    /// `f` of `mode` in each round, in round order.
    pub fn col(&self, mode: FloodMode, f: impl Fn(&Row) -> f64) -> Vec<f64> {
        (self.rows.iter().filter(|r| r.mode == mode))
            .map(|r| f(&r.row))
            .collect()
    }

    /// Per round, `mode`'s RT p99 over RT alone's in the same round.
    pub fn p99_vs_alone(&self, mode: FloodMode) -> Vec<f64> {
        (self.rows.iter().filter(|r| r.mode == mode))
            .map(|r| {
                self.rows
                    .iter()
                    .find(|a| a.mode == FloodMode::Alone && a.round == r.round)
                    .filter(|a| a.row.rt_p99_us > 0.0)
                    .map_or(f64::NAN, |a| r.row.rt_p99_us / a.row.rt_p99_us)
            })
            .collect()
    }

    /// Per round, the firewall's drops in the workers (`by_worker`) or in XDP per flood frame
    /// sent, %.
    pub fn dropped_pct(&self, mode: FloodMode, by_worker: bool) -> Vec<f64> {
        (self.rows.iter().filter(|r| r.mode == mode))
            .map(|r| match r.row.sent_be {
                0 => f64::NAN,
                n => {
                    let d = if by_worker {
                        r.dropped_worker
                    } else {
                        r.dropped_xdp
                    };
                    d as f64 / n as f64 * 100.0
                }
            })
            .collect()
    }

    /// The router process's CPU over the point, % of one CPU (with `--wake busy` the worker
    /// alone spins at 100 %).
    pub fn cpu_pct(&self, r: &Row) -> f64 {
        r.router_cpu_s / self.point_secs * 100.0
    }
}

impl FloodStudy {
    pub fn default_blocked(ipv6: bool) -> IpAddr {
        let s = if ipv6 { "fd71:2::2" } else { "10.71.2.2" };
        s.parse().expect("a literal address")
    }

    fn blocked(&self) -> IpAddr {
        self.blocked
            .unwrap_or_else(|| Self::default_blocked(self.options.ipv6))
    }

    /// The settings, checked before anything changes on the host.
    pub fn check(&self) -> Result<()> {
        let c = &self.options;
        match c.targets.as_slice() {
            [Target::Llrouter(_)] => {}
            _ => {
                return Err(LabError::invalid(
                    "targets",
                    "one llrouter:<strategy> target: the study compares where llrouter drops \
                     the flood (XDP or the worker)",
                ))
            }
        }
        if c.be_dst.is_some() {
            return Err(LabError::invalid(
                "be-dst",
                "the flood's destination is --blocked here",
            ));
        }
        let b = self.blocked();
        if b.is_ipv4() == c.ipv6 {
            return Err(LabError::invalid(
                "blocked",
                format!("{b} is not of the traffic's family (--ipv6 is {})", c.ipv6),
            ));
        }
        let sink: IpAddr = (if c.ipv6 { addr::SINK_V6 } else { addr::SINK_V4 })
            .parse()
            .expect("a literal address");
        if b == sink {
            return Err(LabError::invalid(
                "blocked",
                "the sink's own address: RT would be dropped too",
            ));
        }
        if !(self.load > 0.0 && self.load.is_finite()) {
            return Err(LabError::invalid("load", "a rate > 0 packets/s"));
        }
        if !(self.rt_share > 0.0 && self.rt_share < 1.0) {
            return Err(LabError::invalid(
                "rt-share",
                "between 0 and 1, both excluded: the flood is the rest",
            ));
        }
        if self.modes.is_empty() {
            return Err(LabError::invalid("modes", "at least one"));
        }
        check_repeat(self.rounds, 100)?;
        crate::traffic::gen_config(&self.flood_options(), self.load, self.rt_share)?;
        Ok(())
    }

    fn flood_options(&self) -> Options {
        Options {
            be_dst: Some(self.blocked()),
            ..self.options.clone()
        }
    }

    /// Runs every mode in every round, each with a router started after its ruleset, and
    /// writes `report.md` and the rulesets into the output directory. The study's table is
    /// removed from the router's namespace at the end, also on error.
    pub fn run(&self, stop: &AtomicBool, progress: &dyn Progress) -> Result<FloodOutcome> {
        self.check()?;
        let c = &self.options;
        let (topo, _shield) = prepare(c)?;
        let table = crate::nft::StudyTable::new(&topo, TABLE)?;
        let target = c.targets[0];
        let flood = self.flood_options();
        let rt_rate = self.load * self.rt_share;
        progress.start(u64::from(self.rounds) * self.modes.len() as u64);
        let mut o = FloodOutcome {
            point_secs: c.point_secs,
            ..FloodOutcome::default()
        };
        'rounds: for round in 1..=self.rounds {
            for &mode in &self.modes {
                if stop.load(Ordering::Relaxed) {
                    break 'rounds;
                }
                progress.message(&format!("{} (round {round})", mode.name()));
                table.apply(
                    &c.out.join(format!("ruleset-{}.nft", mode.key())),
                    &ruleset(mode, self.blocked()),
                )?;
                let act = Active::start(&topo, &target, c)?;
                let (p, share) = match mode {
                    FloodMode::Alone => (measure(&topo, &act, c, rt_rate, 1.0, stop)?, 1.0),
                    _ => (
                        measure(&topo, &act, &flood, self.load, self.rt_share, stop)?,
                        self.rt_share,
                    ),
                };
                drop(act);
                let mut row = p.row(&target, share);
                row.round = round;
                o.rows.push(FloodRow {
                    mode,
                    round,
                    row,
                    dropped_xdp: drop_delta(&p, "filtered_xdp"),
                    dropped_worker: drop_delta(&p, "filtered"),
                    be_ring_drops: (p.extra.counters.as_ref()).map_or(0, |(a, b)| {
                        crate::bound::ring_delta(a, b, |r| r != 0, |r| r.drops as f64) as u64
                    }),
                });
                progress.inc(1);
            }
        }
        drop(table);
        progress.finish();
        o.interrupted = stop.load(Ordering::Relaxed);
        o.md = self.report(&o);
        for &mode in &self.modes {
            let rows: Vec<Row> = (o.rows.iter().filter(|r| r.mode == mode))
                .map(|r| r.row.clone())
                .collect();
            let path = c.out.join(format!("results-{}.csv", mode.key()));
            crate::report::write_rows(&path, &rows)?;
        }
        let lines: Vec<CsvRow> = (o.rows.iter())
            .map(|r| CsvRow {
                mode: r.mode.key(),
                round: r.round,
                sent_rt: r.row.sent_rt,
                sent_be: r.row.sent_be,
                loss_rt: r.row.loss_rt,
                rt_p99_us: r.row.rt_p99_us,
                hi_ring_drops: r.row.hi_ring_drops,
                dropped_xdp: r.dropped_xdp,
                dropped_worker: r.dropped_worker,
                be_ring_drops: r.be_ring_drops,
                router_cpu_s: r.row.router_cpu_s,
            })
            .collect();
        crate::report::write_csv(&c.out.join("flood.csv"), &lines, "mode")?;
        let path = c.out.join("report.md");
        std::fs::write(&path, &o.md)
            .map_err(|e| LabError::io(format!("write {}", path.display()), e))?;
        Ok(o)
    }

    /// The per-mode table: median [min–max] over rounds.
    pub fn report(&self, o: &FloodOutcome) -> String {
        let secs = o.point_secs;
        let mut s = format!(
            "## RT beside a blocked flood\n\n\
             {} pps offered, {:.0} % of it RT; the flood goes to {}, which the router's ruleset \
             drops (`ruleset-<mode>.nft`; rows in `flood.csv` and `results-<mode>.csv`); {} rounds of {secs} s per mode, the modes interleaved. \
             Median [min–max] over rounds.\n\n\
             | mode | RT sent pps | flood sent pps | RT loss % | RT p99 µs | ÷ RT alone | RT ring drops | dropped in XDP, % of flood | by the worker | router CPU % |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
            self.load,
            self.rt_share * 100.0,
            self.blocked(),
            self.rounds,
        );
        for &mode in &self.modes {
            let m = |v: Vec<f64>, d: usize| match spread(&v) {
                Some((m, lo, hi)) => format!("{m:.d$} [{lo:.d$}–{hi:.d$}]"),
                None => "–".into(),
            };
            let ratio = match mode {
                FloodMode::Alone => "1".into(),
                _ => m(o.p99_vs_alone(mode), 2),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {ratio} | {} | {} | {} | {} |",
                mode.name(),
                m(o.col(mode, |r| r.sent_rt as f64 / secs), 0),
                m(o.col(mode, |r| r.sent_be as f64 / secs), 0),
                m(o.col(mode, |r| r.loss_rt * 100.0), 3),
                m(o.col(mode, |r| r.rt_p99_us), 0),
                m(o.col(mode, |r| r.hi_ring_drops as f64), 0),
                m(o.dropped_pct(mode, false), 2),
                m(o.dropped_pct(mode, true), 2),
                m(o.col(mode, |r| o.cpu_pct(r)), 1),
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rulesets_replace_only_the_study_table() {
        let v4: IpAddr = "10.71.2.2".parse().unwrap();
        let alone = ruleset(FloodMode::Alone, v4);
        assert!(!alone.contains("drop") && alone.contains("delete table inet llrflood"));
        let xdp = ruleset(FloodMode::Xdp, v4);
        assert!(xdp.contains("hook prerouting") && xdp.contains("ip daddr 10.71.2.2 drop"));
        let w = ruleset(FloodMode::Worker, "fd71:2::2".parse().unwrap());
        assert!(w.contains("hook forward") && w.contains("ip6 daddr fd71:2::2 drop"));
        assert!(!w.contains("flush ruleset"));
    }

    #[test]
    fn check_names_the_field() {
        use llr_core::sched::StrategyKind;
        let t = [Target::Llrouter(StrategyKind::LlWfq)];
        let ok = FloodStudy {
            options: Options::new(&t, "/tmp/x".into()),
            load: 1e6,
            rt_share: 0.1,
            rounds: 2,
            modes: vec![FloodMode::Alone, FloodMode::Xdp],
            blocked: None,
        };
        ok.check().unwrap();
        let field = |s: FloodStudy| match s.check() {
            Err(LabError::Invalid(e)) => e.field,
            other => panic!("{other:?}"),
        };
        let mut s = ok.clone();
        s.options.targets = vec![Target::Kernel];
        assert_eq!(field(s), "targets");
        let mut s = ok.clone();
        s.blocked = Some("fd71:2::2".parse().unwrap());
        assert_eq!(field(s), "blocked");
        let mut s = ok.clone();
        s.blocked = Some(addr::SINK_V4.parse().unwrap());
        assert_eq!(field(s), "blocked");
        let mut s = ok.clone();
        s.rt_share = 1.0;
        assert_eq!(field(s), "rt-share");
        let mut s = ok.clone();
        s.options.be_dst = Some("10.71.2.3".parse().unwrap());
        assert_eq!(field(s), "be-dst");
        let mut s = ok;
        s.modes.clear();
        assert_eq!(field(s), "modes");
    }
}
