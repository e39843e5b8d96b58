//! `llrouter results`: the headline studies of docs/results.md, each run from its own
//! `llrouter testbed …` command line with its rounds, reduced to figures (one value per round,
//! point or slice, and the goal it is held to), stored as `docs/results/<topic>.toml` and
//! rendered from those files into docs/results.md and README.md between markers.
//!
//! The tables are therefore never edited by hand: a figure's range and its status (met, not
//! met, met in k of n) are computed here, from the stored values against the goal, once, and
//! README.md and docs/results.md render the same stored values ([`check_docs`] says whether
//! they do).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use clap::{Parser, Subcommand};
use llr_core::sched::StrategyKind;
use llr_ops::tune::StatSnapshot;
use serde::{Deserialize, Serialize};

use crate::alternate::{AlternateOutcome, Slice};
use crate::args::{
    AlternateArgs, BgpArgs, ChurnArgs, DemoArgs, FirewallArgs, FloodArgs, IperfArgs, RunArgs,
    ScaleArgs,
};
use crate::bench::BenchOutcome;
use crate::bgp::BgpOutcome;
use crate::churn::{ChurnMode, ChurnOutcome};
use crate::firewall_cost::{FirewallMode, FirewallOutcome};
use crate::flood::{FloodMode, FloodOutcome};
use crate::iperf::IperfRow;
use crate::measure::Row;
use crate::paper::{p001, p003, Claim, PaperArgs};
use crate::scale::ScaleOutcome;
use crate::summary::{self, Mlffr};
use crate::sweep::SweepOutcome;
use crate::{LabError, Progress, Result};
use llr_sim::ramp::RampOutcome;
use llr_sim::sweep::{Capacity, SweepPoint};
use llr_sim::sweep_args::{RampArgs, SweepArgs};
use llr_sim::SimResult;

/// What a figure's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// A ratio (×).
    Ratio,
    /// Microseconds.
    Us,
    /// Per cent.
    Pct,
    /// Packets per second.
    Pps,
    /// Nanoseconds.
    Ns,
    /// Megabits per second.
    Mbps,
    /// Milliseconds.
    Ms,
    /// Seconds.
    Secs,
    /// Megabytes (10^6 bytes).
    Mb,
    /// 1 where a point met a condition, 0 where it did not: rendered "k of n".
    Count,
    /// A plain quantity (frames per grant), one decimal.
    Number,
}

/// How the values are compared with the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cmp {
    AtMost,
    AtLeast,
    Below,
}

/// Which values a goal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Over {
    /// Every value (every round or point) must meet it.
    Each,
    /// The median of the values must (the goal is about the typical slice, not each one).
    Median,
}

/// What a figure is held to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    pub cmp: Cmp,
    pub bound: f64,
    pub over: Over,
}

/// A goal's verdict on the stored values.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Met,
    NotMet,
    /// `Over::Each`: some of the values met it.
    MetIn {
        met: usize,
        of: usize,
    },
    /// No finite value to judge.
    NoData,
}

impl Goal {
    fn holds(&self, v: f64) -> bool {
        match self.cmp {
            Cmp::AtMost => v <= self.bound,
            Cmp::AtLeast => v >= self.bound,
            Cmp::Below => v < self.bound,
        }
    }

    /// The verdict on `values` (NaN values are not judged).
    pub fn status(&self, values: &[f64]) -> Status {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Status::NoData;
        }
        match self.over {
            Over::Median => {
                let (m, _, _) = summary::spread(&v).expect("finite values");
                if self.holds(m) {
                    Status::Met
                } else {
                    Status::NotMet
                }
            }
            Over::Each => {
                let met = v.iter().filter(|&&x| self.holds(x)).count();
                if met == v.len() {
                    Status::Met
                } else if met == 0 {
                    Status::NotMet
                } else {
                    Status::MetIn { met, of: v.len() }
                }
            }
        }
    }

    fn text(&self, unit: Unit) -> String {
        let op = match self.cmp {
            Cmp::AtMost => "≤",
            Cmp::AtLeast => "≥",
            Cmp::Below => "<",
        };
        if unit == Unit::Count {
            return "every one".into();
        }
        let b = value_text(self.bound, unit);
        let of = match self.over {
            Over::Each => "",
            Over::Median => " (median)",
        };
        format!("{op} {b}{of}")
    }
}

/// One figure of a topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub what: String,
    pub unit: Unit,
    /// One per round, point or slice, in the order measured, run after run; NaN where not
    /// measured.
    pub values: Vec<f64>,
    /// How many of `values` each run gave (one run: empty).
    #[serde(default)]
    pub runs: Vec<usize>,
    /// What the values are per ("round", "point", "slice").
    pub per: String,
    #[serde(default)]
    pub goal: Option<Goal>,
    /// Also in README.md's results table.
    #[serde(default)]
    pub readme: bool,
}

impl Figure {
    fn new(what: impl Into<String>, unit: Unit, per: &str, values: Vec<f64>) -> Figure {
        Figure {
            what: what.into(),
            unit,
            values,
            runs: Vec::new(),
            per: per.into(),
            goal: None,
            readme: false,
        }
    }

    fn goal(mut self, cmp: Cmp, bound: f64, over: Over) -> Figure {
        self.goal = Some(Goal { cmp, bound, over });
        self
    }

    fn readme(mut self) -> Figure {
        self.readme = true;
        self
    }

    /// Appends the values of the same figure from another run.
    fn add_run(&mut self, other: &Figure) {
        if self.runs.is_empty() {
            self.runs.push(self.values.len());
        }
        self.values.extend_from_slice(&other.values);
        self.runs.push(other.values.len());
    }

    /// Each run's median (runs without a finite value left out).
    pub fn run_medians(&self) -> Vec<f64> {
        let mut at = 0;
        let mut out = Vec::new();
        for &n in &self.runs {
            if let Some((m, _, _)) =
                summary::spread(&self.values[at..(at + n).min(self.values.len())])
            {
                out.push(m);
            }
            at += n;
        }
        out
    }

    /// With several runs, whether their medians agree within [`REPRODUCED`] (`None`: one run,
    /// or a count, whose values are verdicts).
    pub fn reproduced(&self) -> Option<bool> {
        let m = self.run_medians();
        if m.len() < 2 || self.unit == Unit::Count {
            return None;
        }
        let (lo, hi) = m
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            });
        // Two medians of 0 (no loss in either run) agree; 0 against anything else does not.
        Some(hi == lo || (lo > 0.0 && hi / lo <= 1.0 + REPRODUCED))
    }

    /// What [`Figure::measured_pooled`] says, and with several runs each run's median and
    /// whether they agree.
    pub fn measured(&self) -> String {
        let pooled = self.measured_pooled();
        let m = self.run_medians();
        if m.len() < 2 || self.unit == Unit::Count {
            return pooled;
        }
        let verdict = match self.reproduced() {
            Some(false) => ", **not reproduced** within 15 %",
            _ => "",
        };
        // One value a run: the range already shows each run's.
        if self.runs.iter().all(|&n| n == 1) {
            return format!("{pooled}{verdict}");
        }
        let meds: Vec<String> = m.iter().map(|&x| bare(x, self.unit)).collect();
        format!("{pooled}; run medians {}{verdict}", meds.join(" / "))
    }

    /// `median [min–max] (n rounds)` over every run, or `k of n points` for counts.
    pub fn measured_pooled(&self) -> String {
        let finite: Vec<f64> = self
            .values
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        let n = finite.len();
        let per = if n == 1 {
            self.per.clone()
        } else {
            format!("{}s", self.per)
        };
        if self.unit == Unit::Count {
            let k = finite.iter().filter(|&&x| x > 0.0).count();
            return format!("{k} of {n} {per}");
        }
        match spread_text(&finite, self.unit) {
            None => "not measured".into(),
            Some(t) => format!("{t} ({n} {per})"),
        }
    }

    /// The goal and its verdict: `≤ 2×: met`, `< 0.1 %: met in 4 of 5`, or `–`.
    pub fn status_text(&self) -> String {
        let Some(g) = self.goal else {
            return "–".into();
        };
        let st = match self.unit {
            // A count's values are 1/0 verdicts: "every one" is met when all are 1.
            Unit::Count => Goal {
                cmp: Cmp::AtLeast,
                bound: 1.0,
                over: Over::Each,
            }
            .status(&self.values),
            _ => g.status(&self.values),
        };
        let verdict = match st {
            Status::Met => "**met**".to_string(),
            Status::NotMet => "**not met**".to_string(),
            Status::MetIn { met, of } => format!("met in {met} of {of}"),
            Status::NoData => "not measured".to_string(),
        };
        format!("{}: {verdict}", g.text(self.unit))
    }
}

/// `median [min–max]` of the finite values in `unit` (`None`: no finite value).
fn spread_text(v: &[f64], unit: Unit) -> Option<String> {
    let (m, lo, hi) = summary::spread(v)?;
    // A range that prints as one number is shown as that number.
    Some(if bare(lo, unit) == bare(hi, unit) {
        value_text(m, unit)
    } else {
        format!(
            "{} [{}–{}]",
            value_text(m, unit),
            bare(lo, unit),
            value_text(hi, unit)
        )
    })
}

/// The number without its unit, as the unit prints it.
fn bare(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Ratio if v.abs() >= 10.0 => format!("{v:.1}"),
        Unit::Ratio => format!("{v:.2}"),
        // Below 20 µs a tenth is a sizable share (a bound of 10 µs against 9.6).
        Unit::Us if v.abs() < 20.0 => format!("{v:.1}"),
        Unit::Us => format!("{v:.0}"),
        Unit::Pct if v == 0.0 => "0".into(),
        Unit::Pct if v.abs() < 1.0 => format!("{v:.3}"),
        Unit::Pct => format!("{v:.2}"),
        Unit::Pps => group(v),
        Unit::Ns if v.abs() < 100.0 => format!("{v:.1}"),
        Unit::Secs => format!("{v:.2}"),
        Unit::Ms if v.abs() < 20.0 => format!("{v:.1}"),
        Unit::Ms => format!("{v:.0}"),
        Unit::Number => format!("{v:.1}"),
        Unit::Ns | Unit::Mbps | Unit::Mb | Unit::Count => format!("{v:.0}"),
    }
}

fn value_text(v: f64, unit: Unit) -> String {
    let b = bare(v, unit);
    match unit {
        Unit::Ratio => format!("{b}×"),
        Unit::Us => format!("{b} µs"),
        Unit::Pct => format!("{b} %"),
        Unit::Pps => format!("{b} pps"),
        Unit::Ns => format!("{b} ns"),
        Unit::Mbps => format!("{b} Mbit/s"),
        Unit::Secs => format!("{b} s"),
        Unit::Ms => format!("{b} ms"),
        Unit::Mb => format!("{b} MB"),
        Unit::Count | Unit::Number => b,
    }
}

/// `1234567` → `1 234 567`.
fn group(v: f64) -> String {
    let s = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// The machine a topic ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub kernel: String,
    /// Steal over the whole run, % of all CPUs' time (`/proc/stat`); NaN when unreadable.
    pub steal_pct: f64,
}

/// One topic's stored result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicResult {
    pub topic: String,
    /// The `llrouter …` command the figures come from.
    pub command: String,
    /// UTC date of the run (YYYY-MM-DD).
    pub date: String,
    /// Wall-clock duration of all its runs, s.
    pub secs: f64,
    /// Times the study ran (each figure keeps every run's values).
    #[serde(default = "one")]
    pub runs: u32,
    pub machine: Machine,
    pub figures: Vec<Figure>,
    /// The study's own tables (medians and ranges per target and point), as it rendered them.
    #[serde(default)]
    pub detail: String,
}

fn one() -> u32 {
    1
}

/// What a topic runs.
enum Study {
    Sweep(RunArgs),
    Alternate(AlternateArgs),
    Flood(FloodArgs),
    Firewall(FirewallArgs),
    Iperf(IperfArgs),
    Scale(ScaleArgs),
    Bgp(BgpArgs),
    Churn(ChurnArgs),
    Paper001(PaperArgs),
    Paper003(PaperArgs),
    /// `cargo` and its arguments, run in the repository.
    Bench(&'static [&'static str]),
    /// `bash` and the kernel × NIC matrix script with its arguments, run in the repository.
    Matrix(&'static [&'static str]),
    /// `bash scripts/ab.sh` and its revisions, run in the repository.
    Ab(&'static [&'static str]),
    /// `bash scripts/listing-scale.sh` and its options, run in the repository.
    Listing(&'static [&'static str]),
    /// `llrouter demo`'s live half.
    Demo(DemoArgs),
    Ramp(RampArgs),
    SimSweep(SweepArgs),
    /// A topic of several lines: each line's study, in order.
    Many(Vec<(String, Study)>),
}

/// The command line of a topic after `llrouter`, parsed as the binary parses it.
// Parsed once per run and taken apart at once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Parser)]
#[command(no_binary_name = true)]
enum Line {
    #[command(subcommand)]
    Testbed(TestbedLine),
    #[command(subcommand)]
    Paper(PaperLine),
    #[command(subcommand)]
    Sim(SimLine),
    Demo(DemoArgs),
}

#[derive(Subcommand)]
enum SimLine {
    Ramp(Box<RampArgs>),
    Sweep(Box<SweepArgs>),
}

#[derive(Subcommand)]
enum TestbedLine {
    Run(RunArgs),
    Alternate(AlternateArgs),
    Flood(FloodArgs),
    Firewall(FirewallArgs),
    Iperf(IperfArgs),
    Scale(ScaleArgs),
    Bird(BgpArgs),
    Churn(ChurnArgs),
}

#[derive(Subcommand)]
enum PaperLine {
    #[command(name = "001")]
    P001(PaperArgs),
    #[command(name = "003")]
    P003(PaperArgs),
}

/// A headline study.
pub struct Topic {
    pub name: &'static str,
    /// The section of docs/results.md its block sits in.
    pub title: &'static str,
    /// `llrouter` arguments, `testbed …` (root), `paper …` or `sim ramp …`; or `cargo bench
    /// …`, run in the repository. One line, except `sim ramp`s, which a topic may set side by
    /// side (one study of several deterministic runs).
    pub lines: &'static [&'static [&'static str]],
    /// Runs it always takes, whatever `--runs` says (a deterministic study: one).
    pub runs: Option<u32>,
    reduce: fn(&Outcome) -> Vec<Figure>,
    /// The study's own tables, shown folded under the figures.
    detail: fn(&Outcome) -> String,
}

/// What a study returned.
pub enum Outcome {
    Sweep(SweepOutcome, Vec<f64>),
    Alternate(AlternateOutcome),
    Flood(FloodOutcome),
    Firewall(FirewallOutcome),
    Iperf(Vec<IperfRow>),
    Scale(ScaleOutcome),
    Bgp(BgpOutcome),
    Churn(ChurnOutcome),
    Paper001(p001::Outcome),
    Paper003(p003::Output),
    Bench(BenchOutcome),
    Matrix(crate::matrix::MatrixOutcome),
    Ab(crate::ab::AbOutcome),
    Listing(crate::listing::ListingOutcome),
    /// The live half of `llrouter demo`: its rows.
    Demo(Vec<Row>),
    Ramp(Box<RampOutcome>),
    SimSweep(SimSweepOutcome),
    /// A topic of several lines: each line's command and outcome, in order.
    Many(Vec<(String, Outcome)>),
}

/// A simulated sweep: its points, their results and (`--capacity`) their capacities.
pub struct SimSweepOutcome {
    /// What the sweep varies (`cores`, `utilization`, …).
    pub param: &'static str,
    pub jobs: Vec<SweepPoint>,
    pub results: Vec<SimResult>,
    pub caps: Option<Vec<Capacity>>,
}

/// Run medians further apart than this share of the lower one: the figure is not reproduced.
pub const REPRODUCED: f64 = 0.15;

/// ll-wfq keeps RT within its bound and loses none up to this ρRT, the claim `rt-share` tests.
pub const PROTECTED_RHO_RT: f64 = 0.6;

/// The topics, in the order README.md lists them.
pub const TOPICS: &[Topic] = &[
    Topic {
        name: "overload",
        title: "RT protection under overload",
        runs: None,
        lines: &[&[
            "testbed",
            "run",
            "--targets",
            "kernel,llrouter:sq,llrouter:ll-wfq",
            "--mlffr-multiples",
            "0.5,0.9,1.5",
            "--steps",
            "6",
            "--loss-tolerance",
            "0.005",
            "--max-rate",
            "2500000",
            "--point-secs",
            "2",
            "--flows",
            "16",
            "--wake",
            "busy",
            "--repeat",
            "5",
            "--reference-load",
            "200000",
            "--shield",
        ]],
        reduce: reduce_overload,
        detail,
    },
    Topic {
        name: "overload-variants",
        title: "RT protection under overload",
        runs: None,
        lines: &[
            &[
                "testbed",
                "run",
                "--targets",
                "llrouter:sq,llrouter:ll-wfq",
                "--mlffr-multiples",
                "0.5,0.9,1.5",
                "--steps",
                "6",
                "--loss-tolerance",
                "0.005",
                "--max-rate",
                "2500000",
                "--point-secs",
                "2",
                "--flows",
                "16",
                "--wake",
                "interrupt",
                "--repeat",
                "3",
                "--shield",
            ],
            &[
                "testbed",
                "run",
                "--targets",
                "llrouter:sq,llrouter:ll-wfq",
                "--mlffr-multiples",
                "0.5,0.9,1.5",
                "--steps",
                "6",
                "--loss-tolerance",
                "0.005",
                "--max-rate",
                "2500000",
                "--point-secs",
                "2",
                "--flows",
                "16",
                "--wake",
                "busy",
                "--rx-size",
                "2048",
                "--repeat",
                "3",
                "--shield",
            ],
        ],
        reduce: reduce_overload_variants,
        detail,
    },
    Topic {
        name: "rt-share",
        title: "How far ll-wfq protects RT",
        runs: None,
        lines: &[&[
            "testbed",
            "run",
            "--targets",
            "llrouter:sq,llrouter:ll-wfq",
            "--loads",
            "3000000",
            "--rt-shares",
            "0.1,0.15,0.2,0.25,0.3,0.4",
            "--flows",
            "8",
            "--point-secs",
            "1.5",
            "--wake",
            "busy",
            "--shield",
            "--repeat",
            "3",
        ]],
        reduce: reduce_rt_share,
        detail,
    },
    Topic {
        name: "tmax",
        title: "Paper 000's bound, simulated",
        // Seeded: a second run gives the same numbers.
        runs: Some(1),
        lines: &[
            &[
                "sim",
                "ramp",
                "--utilization",
                "1.5",
                "--packets",
                "400000",
                "--budgets",
                "be=4",
            ],
            &[
                "sim",
                "ramp",
                "--utilization",
                "1.5",
                "--packets",
                "400000",
                "--budgets",
                "be=auto",
                "--auto-target-us",
                "10",
                "--auto-window-ms",
                "5",
            ],
            &[
                "sim",
                "ramp",
                "--utilization",
                "1.5",
                "--packets",
                "400000",
                "--budgets",
                "be=auto",
                "--auto-target-us",
                "20",
                "--auto-window-ms",
                "5",
            ],
        ],
        reduce: reduce_tmax,
        detail,
    },
    Topic {
        name: "auto-budget",
        title: "Paper 000's bound, live",
        runs: None,
        lines: &[&[
            "testbed",
            "run",
            "--targets",
            "llrouter:ll-wfq",
            "--loads",
            "1000000",
            "--rt-shares",
            "0.1,0.2,0.3,0.4,0.5,0.6",
            "--wake",
            "busy",
            "--shield",
            "--auto-budget-us",
            "20",
            "--point-secs",
            "2",
            "--repeat",
            "2",
        ]],
        reduce: reduce_auto_budget,
        detail,
    },
    Topic {
        name: "flat-out",
        title: "Forwarding rate and the price of QoS",
        runs: None,
        lines: &[&[
            "testbed",
            "alternate",
            "--targets",
            "llrouter:sq,llrouter:ll-wfq,llrouter:ll-rr",
            "--load",
            "3000000",
            "--rt-share",
            "0.15",
            "--wake",
            "busy",
            "--cycles",
            "30",
        ]],
        reduce: reduce_flat_out,
        detail,
    },
    Topic {
        name: "qos-price",
        title: "What the BE budget and the transmit hold cost",
        runs: None,
        lines: &[
            &[
                "testbed",
                "alternate",
                "--targets",
                "llrouter:sq,llrouter:ll-wfq,llrouter:ll-rr",
                "--load",
                "3000000",
                "--rt-share",
                "0.15",
                "--wake",
                "busy",
                "--cycles",
                "20",
                "--tx-hold-us",
                "0",
            ],
            &[
                "testbed",
                "alternate",
                "--targets",
                "llrouter:sq,llrouter:ll-wfq",
                "--load",
                "3000000",
                "--rt-share",
                "0.15",
                "--wake",
                "busy",
                "--cycles",
                "20",
                "--tx-hold-us",
                "5",
            ],
            &[
                "testbed",
                "alternate",
                "--targets",
                "llrouter:sq,llrouter:ll-wfq",
                "--load",
                "3000000",
                "--rt-share",
                "0.15",
                "--wake",
                "busy",
                "--cycles",
                "20",
                "--budgets",
                "60,16",
            ],
            &[
                "testbed",
                "alternate",
                "--targets",
                "llrouter:sq,llrouter:ll-wfq",
                "--load",
                "3000000",
                "--rt-share",
                "0.15",
                "--wake",
                "busy",
                "--cycles",
                "20",
                "--budgets",
                "60,32",
            ],
        ],
        reduce: reduce_qos_price,
        detail,
    },
    Topic {
        name: "cpu",
        title: "CPU per packet at a load every target carries",
        runs: None,
        lines: &[&[
            "testbed",
            "run",
            "--targets",
            "kernel,llrouter:sq,llrouter:rr,llrouter:ll-rr,llrouter:ll-wfq,llrouter:ll-wfq+flows",
            "--loads",
            "200000",
            "--rt-shares",
            "0.3",
            "--repeat",
            "5",
            "--point-secs",
            "5",
            "--shield",
        ]],
        reduce: reduce_cpu,
        detail: cpu_detail,
    },
    Topic {
        name: "flows",
        title: "Flow pipelines, flooded",
        runs: None,
        lines: &[&[
            "testbed",
            "run",
            "--targets",
            "llrouter:ll-wfq,llrouter:ll-wfq+flows",
            "--loads",
            "3000000",
            "--rt-shares",
            "0.3",
            "--wake",
            "busy",
            "--point-secs",
            "2",
            "--shield",
            "--repeat",
            "10",
        ]],
        reduce: reduce_flows,
        detail: flows_detail,
    },
    Topic {
        name: "firewall-flood",
        title: "A blocked flood beside RT",
        runs: None,
        lines: &[&[
            "testbed",
            "flood",
            "--targets",
            "llrouter:ll-wfq",
            "--load",
            "2000000",
            "--rt-share",
            "0.1",
            "--rounds",
            "5",
            "--point-secs",
            "3",
            "--wake",
            "busy",
            "--sink-on-gen-cpu",
        ]],
        reduce: reduce_flood,
        detail,
    },
    Topic {
        name: "firewall-cost",
        title: "The firewall's cost to forwarding",
        runs: None,
        lines: &[&[
            "testbed",
            "firewall",
            "--targets",
            "llrouter:ll-wfq",
            "--load",
            "2000000",
            "--rt-share",
            "0.1",
            "--flows",
            "16",
            "--rounds",
            "5",
            "--point-secs",
            "3",
        ]],
        reduce: reduce_firewall_cost,
        detail,
    },
    Topic {
        name: "tcp",
        title: "One TCP stream, MTU 1500",
        runs: None,
        lines: &[&[
            "testbed",
            "iperf",
            "--targets",
            "kernel,kernel-xdp,llrouter:sq,llrouter:ll-wfq",
            "--cases",
            "alone",
            "--mtu",
            "1500",
            "--secs",
            "4",
            "--repeat",
            "3",
        ]],
        reduce: reduce_tcp_1500,
        detail,
    },
    Topic {
        name: "tcp-jumbo",
        title: "One TCP stream, MTU 9000",
        runs: None,
        lines: &[&[
            "testbed",
            "iperf",
            "--targets",
            "kernel,kernel-xdp,llrouter:sq,llrouter:ll-wfq",
            "--cases",
            "alone",
            "--mtu",
            "9000",
            "--secs",
            "4",
            "--repeat",
            "3",
        ]],
        reduce: reduce_tcp_9000,
        detail,
    },
    Topic {
        name: "tcp-off",
        title: "One TCP stream, MTU 1500, offloads off",
        runs: None,
        lines: &[&[
            "testbed",
            "iperf",
            "--targets",
            "kernel,kernel-xdp,llrouter:sq,llrouter:ll-wfq",
            "--cases",
            "alone",
            "--mtu",
            "1500",
            "--offloads",
            "off",
            "--secs",
            "4",
            "--repeat",
            "3",
        ]],
        reduce: reduce_tcp_1500_off,
        detail,
    },
    Topic {
        name: "tcp-jumbo-off",
        title: "One TCP stream, MTU 9000, offloads off",
        runs: None,
        lines: &[&[
            "testbed",
            "iperf",
            "--targets",
            "kernel,kernel-xdp,llrouter:sq,llrouter:ll-wfq",
            "--cases",
            "alone",
            "--mtu",
            "9000",
            "--offloads",
            "off",
            "--secs",
            "4",
            "--repeat",
            "3",
        ]],
        reduce: reduce_tcp_9000_off,
        detail,
    },
    Topic {
        name: "scale",
        title: "Full table and BIRD",
        runs: None,
        lines: &[&[
            "testbed",
            "scale",
            "--v4",
            "1000000",
            "--v6",
            "230000",
            "--rounds",
            "3",
            "--idle-secs",
            "10",
        ]],
        reduce: reduce_scale,
        detail,
    },
    Topic {
        name: "bird",
        title: "Full table and BIRD",
        runs: None,
        lines: &[&[
            "testbed", "bird", "--v4", "1000000", "--v6", "230000", "--rounds", "2", "--check",
            "10000",
        ]],
        reduce: reduce_bird,
        detail,
    },
    Topic {
        name: "churn",
        title: "Route churn beside traffic",
        runs: None,
        lines: &[&[
            "testbed",
            "churn",
            "--targets",
            "llrouter:ll-wfq",
            "--routes",
            "100000",
            "--rate",
            "10000",
            "--load",
            "250000",
            "--rounds",
            "3",
            "--point-secs",
            "10",
        ]],
        reduce: reduce_churn,
        detail,
    },
    Topic {
        name: "lookups",
        title: "Per-packet cost and lookups",
        runs: None,
        lines: &[&[
            "cargo",
            "bench",
            "-p",
            "llr-core",
            "--bench",
            "fulltable",
            "--",
            "--warm-up-time",
            "1",
            "--measurement-time",
            "3",
            "fulltable/(lookup_v4_1M|lookup_v4_1M_batched|lookup_v6_230k|lookup_v6_230k_batched|forward_v4_1M_routed|forward_v6_230k_routed)$",
        ]],
        reduce: reduce_lookups,
        detail,
    },
    Topic {
        name: "demo",
        title: "RT protection under overload",
        // One run is one `llrouter demo`, as a user runs it: the issue's bar is three of them.
        runs: Some(3),
        lines: &[&["demo", "--live-secs", "1.5"]],
        reduce: reduce_demo,
        detail,
    },
    Topic {
        name: "matrix",
        title: "Kernels and NICs",
        // Each row passes or fails its checks: a second run of half an hour would measure no
        // noise. CI runs the matrix on every change anyway.
        runs: Some(1),
        lines: &[&["bash", "scripts/vm/matrix.sh"]],
        reduce: reduce_matrix,
        detail,
    },
    Topic {
        name: "listing",
        title: "Listings at scale",
        runs: None,
        lines: &[
            &[
                "bash",
                LISTING_SCRIPT,
                "--no-timing",
                "--wake",
                "busy",
                "--shield",
                "--modes",
                "idle listing hog",
            ],
            &[
                "bash",
                LISTING_SCRIPT,
                "--no-timing",
                "--wake",
                "interrupt",
                "--shield",
                "--modes",
                "idle listing hog",
            ],
            &[
                "bash",
                LISTING_SCRIPT,
                "--no-timing",
                "--wake",
                "interrupt",
                "--modes",
                "idle listing hog",
            ],
        ],
        reduce: reduce_listing,
        detail,
    },
    Topic {
        name: "between-builds",
        title: "Between builds",
        // The same revision on both sides: its ratios are the noise a change's are read
        // against. Needs a committed tree (the script builds revisions, not the work tree).
        runs: None,
        lines: &[&["bash", AB_SCRIPT, "HEAD", "HEAD"]],
        reduce: reduce_between_builds,
        detail,
    },
    Topic {
        name: "demo-sim",
        title: "The demo, simulated",
        // Seeded: a second run gives the same numbers.
        runs: Some(1),
        lines: &[&[
            "sim",
            "sweep",
            "--param",
            "utilization",
            "--values",
            "0.5,0.9,1.2,1.5",
            "--rt-share",
            "0.3",
            "--packets",
            "300000",
            "--quiet",
        ]],
        reduce: reduce_demo_sim,
        detail,
    },
    Topic {
        name: "cores",
        title: "Cores, simulated",
        // Seeded: a second run gives the same numbers.
        runs: Some(1),
        lines: &[
            &[
                "sim",
                "sweep",
                "--param",
                "cores",
                "--quiet",
                "--packet-size",
                "1518",
                "--utilization",
                "0.8",
                "--flow-pps",
                "410",
                "--capacity",
            ],
            &[
                "sim",
                "sweep",
                "--param",
                "cores",
                "--quiet",
                "--utilization",
                "0.9",
                "--strategies",
                "sq,ll-wfq",
                "--capacity",
            ],
        ],
        reduce: reduce_cores,
        detail,
    },
    Topic {
        name: "paper-001",
        title: "Paper 001's case study, simulated",
        // Every point is simulated with seeds 1..=R: a second run gives the same numbers.
        runs: Some(1),
        lines: &[&["paper", "001"]],
        reduce: reduce_paper001,
        detail,
    },
    Topic {
        name: "flow-switch",
        title: "The flow scheduler's switch cost",
        runs: None,
        lines: &[&["paper", "003", "--fig", "5"]],
        reduce: reduce_flow_switch,
        detail,
    },
];

/// The A/B script, whose topic lines are `bash` lines of their own kind.
const AB_SCRIPT: &str = "scripts/ab.sh";
/// The listing-at-scale script, the same.
const LISTING_SCRIPT: &str = "scripts/listing-scale.sh";

/// The topic called `name`.
pub fn topic(name: &str) -> Option<&'static Topic> {
    TOPICS.iter().find(|t| t.name == name)
}

impl Topic {
    /// `llrouter …` (or `cargo …`) as a user types it, a line per run.
    pub fn command(&self) -> String {
        let lines: Vec<String> = self.lines.iter().map(|a| command_line(a)).collect();
        lines.join("\n")
    }

    /// The topic's study: its one line's, or [`Study::Many`] with each line's output in
    /// `out/line<i>`.
    fn study(&self, out: PathBuf) -> Result<Study> {
        match self.lines {
            [] => Err(LabError::Invalid(llr_core::FieldError::new(
                "topic",
                format!("{}: no command line", self.name),
            ))),
            [one] => line_study(one, out),
            many => Ok(Study::Many(
                (many.iter().enumerate())
                    .map(|(i, argv)| {
                        let study = line_study(argv, out.join(format!("line{}", i + 1)))?;
                        Ok((command_line(argv), study))
                    })
                    .collect::<Result<_>>()?,
            )),
        }
    }

    /// Whether it needs root (the testbed's namespaces and XDP).
    pub fn needs_root(&self) -> bool {
        (self.lines.iter()).any(|a| {
            a.first() == Some(&"testbed")
                || a.get(1)
                    .is_some_and(|s| [AB_SCRIPT, LISTING_SCRIPT].contains(s))
        })
    }

    /// Runs the study `runs` times (or its own fixed number) with its outputs under
    /// `out/<topic>/run<i>`, and reduces every run to the same figures.
    pub fn run(
        &self,
        repo: &Path,
        out: &Path,
        runs: u32,
        stop: &AtomicBool,
        progress: &dyn Progress,
    ) -> Result<TopicResult> {
        if runs == 0 {
            return Err(LabError::Invalid(llr_core::FieldError::new(
                "runs",
                "at least 1",
            )));
        }
        let runs = self.runs.unwrap_or(runs);
        let t0 = Instant::now();
        let stat0 = crate::measure::read_stat();
        let mut figures: Vec<Figure> = Vec::new();
        let mut details = Vec::new();
        for i in 1..=runs {
            let dir = out.join(self.name).join(format!("run{i}"));
            let outcome = self.run_once(repo, &dir, stop, progress)?;
            let f = (self.reduce)(&outcome);
            if figures.is_empty() {
                figures = f;
            } else {
                for (a, b) in figures.iter_mut().zip(&f) {
                    a.add_run(b);
                }
            }
            let d = (self.detail)(&outcome);
            if !d.trim().is_empty() {
                details.push(if runs > 1 {
                    format!("\n**Run {i}**\n{d}")
                } else {
                    d
                });
            }
        }
        let steal = (stat0.zip(crate::measure::read_stat()))
            .and_then(|(a, b)| steal_pct(&a, &b))
            .unwrap_or(f64::NAN);
        Ok(TopicResult {
            topic: self.name.into(),
            command: self.command(),
            date: today(),
            secs: t0.elapsed().as_secs_f64(),
            runs,
            machine: Machine {
                cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
                kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default(),
                steal_pct: steal,
            },
            figures,
            detail: details.join("\n"),
        })
    }

    fn run_once(
        &self,
        repo: &Path,
        out: &Path,
        stop: &AtomicBool,
        progress: &dyn Progress,
    ) -> Result<Outcome> {
        run_study(
            self.name,
            self.study(out.to_path_buf())?,
            repo,
            out,
            stop,
            progress,
        )
    }
}

/// Runs one study (each of [`Study::Many`]'s in turn).
fn run_study(
    name: &str,
    study: Study,
    repo: &Path,
    out: &Path,
    stop: &AtomicBool,
    progress: &dyn Progress,
) -> Result<Outcome> {
    let interrupted = || LabError::step(name, anyhow::anyhow!("interrupted"));
    Ok(match study {
        Study::Sweep(a) => {
            let s = a.study()?;
            let shares = s.shares.clone();
            let o = s.run(stop, progress)?;
            if o.interrupted {
                return Err(interrupted());
            }
            if !o.errors.is_empty() {
                return Err(LabError::step(
                    name,
                    anyhow::anyhow!("not measured: {}", o.errors.join("; ")),
                ));
            }
            Outcome::Sweep(o, shares)
        }
        Study::Alternate(a) => {
            let o = a.study()?.run(stop, progress)?;
            if o.interrupted {
                return Err(interrupted());
            }
            Outcome::Alternate(o)
        }
        Study::Flood(a) => {
            let o = a.study()?.run(stop, progress)?;
            if o.interrupted {
                return Err(interrupted());
            }
            Outcome::Flood(o)
        }
        Study::Firewall(a) => {
            let o = a.study()?.run(stop, progress)?;
            if o.interrupted {
                return Err(interrupted());
            }
            Outcome::Firewall(o)
        }
        Study::Iperf(a) => Outcome::Iperf(a.study()?.run(stop, &mut |_| {})?),
        Study::Scale(a) => {
            let o = a.study()?.run(stop, progress)?;
            if o.interrupted {
                return Err(interrupted());
            }
            Outcome::Scale(o)
        }
        Study::Bgp(a) => {
            let o = a.study()?.run(stop, progress)?;
            if o.interrupted {
                return Err(interrupted());
            }
            Outcome::Bgp(o)
        }
        Study::Churn(a) => {
            let o = a.study()?.run(stop, progress)?;
            if o.interrupted {
                return Err(interrupted());
            }
            Outcome::Churn(o)
        }
        Study::Paper001(a) => Outcome::Paper001(p001::run(&a, || {})?),
        Study::Paper003(a) => {
            a.check(&p003::FIGURES)?;
            let o = p003::run(&a, || {})?;
            p003::write_report(&a.out, &a, &o)?;
            Outcome::Paper003(o)
        }
        Study::Ramp(a) => {
            let o = llr_sim::ramp::run(&a)
                .map_err(|llr_sim::SimError::Config(e)| LabError::Invalid(e))?;
            Outcome::Ramp(Box::new(o))
        }
        Study::SimSweep(a) => {
            let sim = |llr_sim::SimError::Config(e)| LabError::Invalid(e);
            let jobs = a.points()?;
            let threads = a.jobs.unwrap_or(0);
            let (results, _) = llr_sim::sweep::run(&jobs, threads, || {}).map_err(sim)?;
            let caps = if a.capacity {
                let tol = a.loss_tolerance / 100.0;
                let steps = llr_sim::sweep::CAPACITY_STEPS;
                Some(llr_sim::sweep::capacities(&jobs, tol, steps, threads, || {}).map_err(sim)?)
            } else {
                None
            };
            Outcome::SimSweep(SimSweepOutcome {
                param: a.param.name(),
                jobs,
                results,
                caps,
            })
        }
        Study::Many(lines) => Outcome::Many(
            (lines.into_iter().enumerate())
                .map(|(i, (line, study))| {
                    let dir = out.join(format!("line{}", i + 1));
                    Ok((line, run_study(name, study, repo, &dir, stop, progress)?))
                })
                .collect::<Result<_>>()?,
        ),
        Study::Bench(args) => {
            Outcome::Bench(crate::bench::run(repo, args, &out.join("criterion"), stop)?)
        }
        Study::Matrix(args) => Outcome::Matrix(crate::matrix::run(repo, args, out, stop)?),
        Study::Ab(args) => Outcome::Ab(crate::ab::run(repo, args, out, stop)?),
        Study::Listing(args) => Outcome::Listing(crate::listing::run(repo, args, out, stop)?),
        Study::Demo(a) => {
            if a.sim_only {
                return Err(LabError::invalid(
                    "sim-only",
                    "the topic measures the demo's live half",
                ));
            }
            let rows = crate::demo::live(a.live_secs, stop)?;
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(interrupted());
            }
            Outcome::Demo(rows)
        }
    })
}

/// `llrouter …` (or `cargo …`) as a user types it.
fn command_line(argv: &[&str]) -> String {
    let quoted = argv.iter().map(|a| {
        if a.chars().any(|c| "|$()*?[]<>&;' \"\\".contains(c)) {
            format!("'{a}'")
        } else {
            a.to_string()
        }
    });
    let words: Vec<String> = if matches!(argv.first(), Some(&"cargo" | &"bash")) {
        quoted.collect()
    } else {
        std::iter::once("llrouter".to_string())
            .chain(quoted)
            .collect()
    };
    words.join(" ")
}

/// The study one command line runs, its output in `out`.
fn line_study(argv: &'static [&'static str], out: PathBuf) -> Result<Study> {
    match argv.first() {
        Some(&"cargo") => return Ok(Study::Bench(&argv[1..])),
        Some(&"bash") if argv.get(1) == Some(&AB_SCRIPT) => return Ok(Study::Ab(&argv[1..])),
        Some(&"bash") if argv.get(1) == Some(&LISTING_SCRIPT) => {
            return Ok(Study::Listing(&argv[1..]))
        }
        Some(&"bash") => return Ok(Study::Matrix(&argv[1..])),
        _ => {}
    }
    let line = Line::try_parse_from(argv.iter().copied())
        .map_err(|e| LabError::Invalid(llr_core::FieldError::new("topic", e.to_string())))?;
    let line = match line {
        Line::Testbed(t) => t,
        Line::Paper(PaperLine::P001(mut a)) => {
            a.out = out;
            return Ok(Study::Paper001(a));
        }
        Line::Paper(PaperLine::P003(mut a)) => {
            a.out = out;
            return Ok(Study::Paper003(a));
        }
        Line::Sim(SimLine::Ramp(r)) => return Ok(Study::Ramp(*r)),
        Line::Sim(SimLine::Sweep(a)) => return Ok(Study::SimSweep(*a)),
        Line::Demo(a) => return Ok(Study::Demo(a)),
    };
    Ok(match line {
        TestbedLine::Run(mut a) => {
            a.common.out = out;
            Study::Sweep(a)
        }
        TestbedLine::Alternate(mut a) => {
            a.common.out = out;
            Study::Alternate(a)
        }
        TestbedLine::Flood(mut a) => {
            a.common.out = out;
            Study::Flood(a)
        }
        TestbedLine::Firewall(mut a) => {
            a.common.out = out;
            Study::Firewall(a)
        }
        TestbedLine::Iperf(mut a) => {
            a.common.out = out;
            Study::Iperf(a)
        }
        TestbedLine::Scale(mut a) => {
            a.out = out;
            Study::Scale(a)
        }
        TestbedLine::Bird(mut a) => {
            a.out = out;
            Study::Bgp(a)
        }
        TestbedLine::Churn(mut a) => {
            a.common.out = out;
            Study::Churn(a)
        }
    })
}

/// Steal between two `/proc/stat` reads, % of all CPUs' time.
fn steal_pct(a: &StatSnapshot, b: &StatSnapshot) -> Option<f64> {
    let (mut steal, mut total) = (0u64, 0u64);
    for (cpu, y) in b {
        let x = a.get(cpu)?;
        steal += y.steal.saturating_sub(x.steal);
        total += (y.busy() + y.idle_all()).saturating_sub(x.busy() + x.idle_all());
    }
    (total > 0).then(|| 100.0 * steal as f64 / total as f64)
}

/// Today's UTC date, YYYY-MM-DD (days since the epoch to the civil date: H. Hinnant's
/// `civil_from_days`).
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date((secs / 86_400) as i64)
}

fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn detail(o: &Outcome) -> String {
    match o {
        Outcome::Sweep(s, shares) => {
            let share = shares.first().copied().unwrap_or(0.3);
            match multiples_of(s) {
                Some(m) => summary::multiples_md(&s.rows, &s.mlffrs, &m, share),
                None => rt_share_detail(&s.rows),
            }
        }
        Outcome::Alternate(a) => a.md.clone(),
        Outcome::Flood(f) => f.md.clone(),
        Outcome::Firewall(f) => f.md.clone(),
        Outcome::Iperf(rows) => crate::iperf::summary(rows),
        Outcome::Scale(o) => o.md.clone(),
        Outcome::Bgp(o) => o.md.clone(),
        Outcome::Churn(o) => o.md.clone(),
        Outcome::Paper001(p) => paper001_detail(p),
        Outcome::Paper003(p) => paper003_detail(p),
        Outcome::Bench(b) => bench_detail(b),
        Outcome::Matrix(m) => m.md.clone(),
        Outcome::Ab(a) => a.md.clone(),
        Outcome::Listing(l) => l.md(),
        Outcome::Demo(rows) => demo_detail(rows),
        Outcome::Ramp(r) => ramps_detail(&[&**r]),
        Outcome::SimSweep(o) => sweep_detail(o),
        Outcome::Many(v) => {
            let ramps = ramps_of(o);
            if ramps.len() == v.len() {
                return ramps_detail(&ramps);
            }
            let parts: Vec<String> = (v.iter())
                .map(|(line, o)| format!("\n`{line}`\n{}", detail(o)))
                .collect();
            parts.join("\n")
        }
    }
}

/// The multiples a sweep ran at (`None`: fixed loads).
fn multiples_of(s: &SweepOutcome) -> Option<Vec<f64>> {
    if s.mlffrs.is_empty() {
        return None;
    }
    let mut m: Vec<f64> = Vec::new();
    for r in &s.rows {
        let Some(f) = mlffr_of(&s.mlffrs, &r.target, r.round) else {
            continue;
        };
        let x = (r.offered_pps / f * 100.0).round() / 100.0;
        if !m.contains(&x) {
            m.push(x);
        }
    }
    m.sort_by(f64::total_cmp);
    Some(m)
}

fn mlffr_of(m: &[Mlffr], target: &str, round: u32) -> Option<f64> {
    m.iter()
        .find(|x| x.target == target && x.round == round && x.pps > 0.0)
        .map(|x| x.pps)
}

/// The rows of `target` in `round`, lowest offered load first.
fn round_rows<'a>(rows: &'a [Row], target: &str, round: u32) -> Vec<&'a Row> {
    let mut v: Vec<&Row> = rows
        .iter()
        .filter(|r| r.target == target && r.round == round)
        .collect();
    v.sort_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps));
    v
}

fn rounds(rows: &[Row]) -> Vec<u32> {
    let mut r: Vec<u32> = rows.iter().map(|r| r.round).collect();
    r.sort_unstable();
    r.dedup();
    r
}

const KERNEL: &str = "kernel";
const SQ: &str = "llrouter:sq";
const WFQ: &str = "llrouter:ll-wfq";

// The overload topic's first three figures (ll-wfq's RT loss at 1.5×, ll-wfq's and sq's RT
// p99 growth) for each variant line, named after what the line changes; its goals kept.
fn reduce_overload_variants(o: &Outcome) -> Vec<Figure> {
    let Outcome::Many(lines) = o else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (line, l) in lines {
        let variant = if line.contains("--wake interrupt") {
            "a worker woken by interrupts (`--wake interrupt`)"
        } else if line.contains("--rx-size 2048") {
            "rings of 2048 (`--rx-size 2048`)"
        } else {
            "the line's setup"
        };
        for (i, mut f) in reduce_overload(l).into_iter().take(3).enumerate() {
            // Some of the overload figures after the first already read "the same, …".
            if i == 0 {
                f.what = format!("The overload study with {variant}: {}", f.what);
            } else if !f.what.starts_with("the same") {
                f.what = format!("the same: {}", f.what);
            }
            f.readme = false;
            out.push(f);
        }
    }
    out
}

fn reduce_overload(o: &Outcome) -> Vec<Figure> {
    let Outcome::Sweep(s, _) = o else {
        return Vec::new();
    };
    let per_round = |f: &dyn Fn(u32) -> Option<f64>| -> Vec<f64> {
        rounds(&s.rows)
            .into_iter()
            .map(|rd| f(rd).unwrap_or(f64::NAN))
            .collect()
    };
    // Lowest and highest multiple of one target in one round.
    let ends = |t: &str, rd: u32| {
        let v = round_rows(&s.rows, t, rd);
        Some((*v.first()?, *v.last()?)).filter(|_| v.len() >= 2)
    };
    let growth = |t: &'static str| {
        move |rd: u32| {
            let (a, b) = ends(t, rd)?;
            (a.rt_p99_us > 0.0).then(|| b.rt_p99_us / a.rt_p99_us)
        }
    };
    let at_top_ratio = |t: &'static str| {
        move |rd: u32| {
            let (_, a) = ends(t, rd)?;
            let (_, b) = ends(WFQ, rd)?;
            (b.rt_p99_us > 0.0).then(|| a.rt_p99_us / b.rt_p99_us)
        }
    };
    let from_ref = |rd: u32| {
        let r = s.refs.iter().find(|r| r.target == WFQ && r.round == rd)?;
        let (_, b) = ends(WFQ, rd)?;
        (r.rt_p99_us > 0.0).then(|| b.rt_p99_us / r.rt_p99_us)
    };
    vec![
        Figure::new(
            "RT loss, ll-wfq at 1.5× its MLFFR",
            Unit::Pct,
            "round",
            per_round(&|rd| ends(WFQ, rd).map(|(_, b)| b.loss_rt * 100.0)),
        )
        .goal(Cmp::Below, 0.1, Over::Each)
        .readme(),
        Figure::new(
            "RT p99 growth 0.5× → 1.5× MLFFR, ll-wfq",
            Unit::Ratio,
            "round",
            per_round(&growth(WFQ)),
        )
        .goal(Cmp::AtMost, 2.0, Over::Each)
        .readme(),
        Figure::new("the same, sq", Unit::Ratio, "round", per_round(&growth(SQ)))
            .goal(Cmp::AtLeast, 10.0, Over::Each)
            .readme(),
        Figure::new(
            "the same, kernel",
            Unit::Ratio,
            "round",
            per_round(&growth(KERNEL)),
        )
        .goal(Cmp::AtLeast, 10.0, Over::Each)
        .readme(),
        Figure::new(
            "RT p99 growth from the 200 kpps packet-by-packet reference to 1.5× MLFFR, ll-wfq",
            Unit::Ratio,
            "round",
            per_round(&from_ref),
        )
        .goal(Cmp::AtMost, 2.0, Over::Each),
        Figure::new(
            "RT p99 at 1.5× MLFFR, sq ÷ ll-wfq",
            Unit::Ratio,
            "round",
            per_round(&at_top_ratio(SQ)),
        )
        .readme(),
        Figure::new(
            "RT p99 at 1.5× MLFFR, kernel ÷ ll-wfq",
            Unit::Ratio,
            "round",
            per_round(&at_top_ratio(KERNEL)),
        ),
        Figure::new(
            "MLFFR, ll-wfq ÷ sq",
            Unit::Ratio,
            "round",
            per_round(&|rd| Some(mlffr_of(&s.mlffrs, WFQ, rd)? / mlffr_of(&s.mlffrs, SQ, rd)?)),
        )
        .goal(Cmp::AtLeast, 0.95, Over::Each)
        .readme(),
        Figure::new(
            "MLFFR, ll-wfq",
            Unit::Pps,
            "round",
            per_round(&|rd| mlffr_of(&s.mlffrs, WFQ, rd)),
        ),
    ]
}

/// ll-wfq's points at or below [`PROTECTED_RHO_RT`] (`true`) or above it.
fn wfq_points(rows: &[Row], protected: bool) -> Vec<&Row> {
    rows.iter()
        .filter(|r| r.target == WFQ && r.rho_rt.is_finite())
        .filter(|r| (r.rho_rt <= PROTECTED_RHO_RT) == protected)
        .collect()
}

/// 1 where the RT ring's p99 is within the burst bound (or the bound falls inside its
/// histogram bucket, where it cannot be said to be exceeded), 0 where it is beyond.
fn within_burst_bound(r: &Row) -> f64 {
    match r.within_tmax_burst.as_str() {
        "yes" | "bucket" => 1.0,
        "no" => 0.0,
        _ => f64::NAN,
    }
}

fn reduce_rt_share(o: &Outcome) -> Vec<Figure> {
    let Outcome::Sweep(s, _) = o else {
        return Vec::new();
    };
    let lo = wfq_points(&s.rows, true);
    let hi = wfq_points(&s.rows, false);
    let col = |v: &[&Row], f: fn(&Row) -> f64| v.iter().map(|r| f(r)).collect::<Vec<f64>>();
    let p = PROTECTED_RHO_RT;
    // ll-wfq's RT p99 over sq's at the same RT share and round.
    let vs_sq: Vec<f64> = (s.rows.iter().filter(|r| r.target == WFQ))
        .map(|w| {
            s.rows
                .iter()
                .find(|q| q.target == SQ && q.round == w.round && q.rt_share == w.rt_share)
                .filter(|q| q.rt_p99_us > 0.0)
                .map_or(f64::NAN, |q| w.rt_p99_us / q.rt_p99_us)
        })
        .collect();
    vec![
        Figure::new(
            format!("ll-wfq, ρRT ≤ {p}: the RT ring's p99 within Tmax B (Eq. 1, bursts)"),
            Unit::Count,
            "point",
            col(&lo, within_burst_bound),
        )
        .goal(Cmp::AtLeast, 1.0, Over::Each)
        .readme(),
        Figure::new(
            format!("ll-wfq, ρRT ≤ {p}: RT loss"),
            Unit::Pct,
            "point",
            col(&lo, |r| r.loss_rt * 100.0),
        )
        .goal(Cmp::AtMost, 0.0, Over::Each)
        .readme(),
        Figure::new(
            format!("ll-wfq, ρRT ≤ {p}: RT p99"),
            Unit::Us,
            "point",
            col(&lo, |r| r.rt_p99_us),
        ),
        Figure::new(
            format!("ll-wfq, ρRT > {p}: the RT ring's p99 within Tmax B"),
            Unit::Count,
            "point",
            col(&hi, within_burst_bound),
        ),
        Figure::new(
            format!("ll-wfq, ρRT > {p}: RT loss"),
            Unit::Pct,
            "point",
            col(&hi, |r| r.loss_rt * 100.0),
        ),
        Figure::new(
            "RT p99 flat out, ll-wfq ÷ sq (same RT share and round)",
            Unit::Ratio,
            "point",
            vs_sq,
        )
        .goal(Cmp::AtMost, 1.0, Over::Each)
        .readme(),
        Figure::new(
            "RT loss flat out, sq",
            Unit::Pct,
            "point",
            (s.rows.iter().filter(|r| r.target == SQ))
                .map(|r| r.loss_rt * 100.0)
                .collect(),
        ),
    ]
}

/// Per RT share: ρRT, ll-wfq's RT p99, its points within Tmax B and its loss, sq's.
fn rt_share_detail(rows: &[Row]) -> String {
    let mut shares: Vec<f64> = rows.iter().map(|r| r.rt_share).collect();
    shares.sort_by(f64::total_cmp);
    shares.dedup();
    if !rows.iter().any(|r| r.target == WFQ && r.rho_rt.is_finite()) {
        return String::new();
    }
    let mut s = String::from(
        "\n| RT share | ρRT, ll-wfq | ll-wfq RT p99 µs | within Tmax B | ll-wfq RT loss % | sq RT p99 µs | sq RT loss % |\n|---|---|---|---|---|---|---|\n",
    );
    let sp = |v: Vec<f64>, u: Unit| spread_text(&v, u).unwrap_or_else(|| "—".into());
    for sh in shares {
        let w: Vec<&Row> = (rows.iter())
            .filter(|r| r.target == WFQ && r.rt_share == sh)
            .collect();
        let q: Vec<&Row> = (rows.iter())
            .filter(|r| r.target == SQ && r.rt_share == sh)
            .collect();
        let within = w
            .iter()
            .map(|r| within_burst_bound(r))
            .filter(|x| x.is_finite());
        let n = within.clone().count();
        let k = within.filter(|&x| x > 0.0).count();
        let rho: Vec<f64> = w.iter().map(|r| r.rho_rt).collect();
        let rho = match summary::spread(&rho) {
            Some((_, lo, hi)) => format!("{lo:.2}–{hi:.2}"),
            None => "—".into(),
        };
        let _ = writeln!(
            s,
            "| {sh} | {rho} | {} | {k} of {n} | {} | {} | {} |",
            sp(w.iter().map(|r| r.rt_p99_us).collect(), Unit::Us),
            sp(w.iter().map(|r| r.loss_rt * 100.0).collect(), Unit::Pct),
            sp(q.iter().map(|r| r.rt_p99_us).collect(), Unit::Us),
            sp(q.iter().map(|r| r.loss_rt * 100.0).collect(), Unit::Pct),
        );
    }
    s
}

fn reduce_flat_out(o: &Outcome) -> Vec<Figure> {
    let Outcome::Alternate(a) = o else {
        return Vec::new();
    };
    let ratios = |name: &str| -> Vec<f64> {
        (a.slices.iter())
            .filter(|s: &&Slice| crate::choice_name(&s.strategy) == name)
            .map(|s| s.ratio)
            .collect()
    };
    vec![
        Figure::new(
            "Flat-out forwarding, ll-wfq ÷ sq (1 µs hold)",
            Unit::Ratio,
            "slice",
            ratios("ll-wfq"),
        )
        .goal(Cmp::AtLeast, 0.95, Over::Median)
        .readme(),
        Figure::new(
            "Flat-out forwarding, ll-rr ÷ sq (1 µs hold)",
            Unit::Ratio,
            "slice",
            ratios("ll-rr"),
        )
        .goal(Cmp::AtLeast, 0.95, Over::Median),
        Figure::new(
            "Flat-out forwarding, sq",
            Unit::Pps,
            "slice",
            (a.slices.iter())
                .filter(|s| crate::choice_name(&s.strategy) == "sq")
                .map(|s| s.forwarded_pps)
                .collect(),
        ),
    ]
}

/// What sets a line of `qos-price` apart from the flat-out topic's defaults.
fn variant(line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |flag: &str| {
        (words.iter().position(|w| *w == flag)).and_then(|i| words.get(i + 1).copied())
    };
    match (after("--tx-hold-us"), after("--budgets")) {
        (Some(h), _) => format!("{h} µs hold"),
        (None, Some(b)) => format!("BE budget {}", b.rsplit(',').next().unwrap_or(b)),
        (None, None) => "the defaults".into(),
    }
}

/// Per line: ll-wfq ÷ sq (and ll-rr ÷ sq where the line alternates it) against the flat-out
/// goal, and ll-wfq's frames per grant, which the BE budget sets.
fn reduce_qos_price(o: &Outcome) -> Vec<Figure> {
    let Outcome::Many(lines) = o else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (line, o) in lines {
        let Outcome::Alternate(a) = o else {
            continue;
        };
        let of = |name: &str| -> Vec<&Slice> {
            (a.slices.iter())
                .filter(|s: &&Slice| crate::choice_name(&s.strategy) == name)
                .collect()
        };
        let v = variant(line);
        out.push(
            Figure::new(
                format!("Flat-out forwarding, ll-wfq ÷ sq, {v}"),
                Unit::Ratio,
                "slice",
                of("ll-wfq").iter().map(|s| s.ratio).collect(),
            )
            .goal(Cmp::AtLeast, 0.95, Over::Median),
        );
        let rr = of("ll-rr");
        if !rr.is_empty() {
            out.push(
                Figure::new(
                    format!("Flat-out forwarding, ll-rr ÷ sq, {v}"),
                    Unit::Ratio,
                    "slice",
                    rr.iter().map(|s| s.ratio).collect(),
                )
                .goal(Cmp::AtLeast, 0.95, Over::Median),
            );
        }
        out.push(Figure::new(
            format!("ll-wfq's frames per grant, {v}"),
            Unit::Number,
            "slice",
            (of("ll-wfq").iter())
                .map(|s| match s.grants {
                    0 => f64::NAN,
                    g => s.served as f64 / g as f64,
                })
                .collect(),
        ));
    }
    out
}

const RR: &str = "llrouter:rr";
const LL_RR: &str = "llrouter:ll-rr";
const FLOWS: &str = "llrouter:ll-wfq+flows";

/// Per round, `f` of `a`'s single row over `b`'s (NaN where either is missing or `b`'s is 0).
fn round_ratio(rows: &[Row], a: &str, b: &str, f: fn(&Row) -> f64) -> Vec<f64> {
    rounds(rows)
        .into_iter()
        .map(|rd| {
            let x = round_rows(rows, a, rd).first().map(|r| f(r));
            let y = round_rows(rows, b, rd).first().map(|r| f(r));
            match (x, y) {
                (Some(x), Some(y)) if y > 0.0 => x / y,
                _ => f64::NAN,
            }
        })
        .collect()
}

fn target_col(rows: &[Row], t: &str, f: fn(&Row) -> f64) -> Vec<f64> {
    rows.iter().filter(|r| r.target == t).map(f).collect()
}

// At 200 kpps every target forwards every packet, so each round's CPU per packet is the
// strategy's own cost: the ratios are taken within a round, where the VM's drift cancels.
fn reduce_cpu(o: &Outcome) -> Vec<Figure> {
    let Outcome::Sweep(s, _) = o else {
        return Vec::new();
    };
    let ns = |r: &Row| r.worker_ns_per_pkt;
    let vs = |what: &str, a: &str, b: &str| {
        Figure::new(what, Unit::Ratio, "round", round_ratio(&s.rows, a, b, ns))
    };
    vec![
        vs("CPU per packet at 200 kpps, ll-wfq ÷ sq", WFQ, SQ)
            .goal(Cmp::AtMost, 1.05, Over::Median)
            .readme(),
        vs("the same, ll-wfq with flows ÷ ll-wfq", FLOWS, WFQ)
            .goal(Cmp::AtMost, 1.10, Over::Median)
            .readme(),
        vs("the same, ll-rr ÷ sq", LL_RR, SQ),
        vs("the same, rr ÷ sq", RR, SQ),
        vs("the same, the kernel's softirq ÷ sq", KERNEL, SQ),
        Figure::new(
            "CPU per packet at 200 kpps, sq",
            Unit::Ns,
            "round",
            target_col(&s.rows, SQ, ns),
        ),
    ]
    .into_iter()
    .chain(calibration_figures(&s.rows))
    .collect()
}

// The topic's command leaves every option the replay reads (budgets, rings, transmit batch and
// hold, device budget) at its default.
fn cpu_options() -> crate::Options {
    crate::Options::new(&[], PathBuf::new())
}

/// The simulator calibrated from the run's own points (`testbed costs --below-saturation`):
/// the fitted costs and the CPU ratios it predicts, one value per run.
fn calibration_figures(rows: &[Row]) -> Vec<Figure> {
    let cal = crate::report::calibrate(&cpu_options(), rows);
    let cost = |f: fn(&llr_sim::model::SplitCost) -> f64| {
        vec![cal.as_ref().map_or(f64::NAN, |c| f(&c.cost))]
    };
    let sim = |kind: StrategyKind| {
        vec![(cal.as_ref())
            .and_then(|c| c.ratios.iter().find(|r| r.kind == kind))
            .and_then(|r| r.sim)
            .unwrap_or(f64::NAN)]
    };
    vec![
        Figure::new(
            "The worker's costs fitted over these points (`testbed costs --below-saturation`): \
             receive, per frame (`--service-ns`)",
            Unit::Ns,
            "run",
            cost(|k| k.frame_ns),
        ),
        Figure::new(
            "the same: receive, per grant (`--grant-ns`)",
            Unit::Ns,
            "run",
            cost(|k| k.grant_ns),
        ),
        Figure::new(
            "the same: transmit, per frame flushed (`--flush-frame-ns`)",
            Unit::Ns,
            "run",
            cost(|k| k.flush_frame_ns),
        ),
        Figure::new(
            "the same: transmit, per flush (`--flush-ns`)",
            Unit::Ns,
            "run",
            cost(|k| k.flush_ns),
        ),
        Figure::new(
            "The simulator calibrated with them (the generator's bursts as its arrivals): busy \
             time per packet, ll-wfq ÷ sq",
            Unit::Ratio,
            "run",
            sim(StrategyKind::LlWfq),
        ),
        Figure::new(
            "the same, ll-rr ÷ sq",
            Unit::Ratio,
            "run",
            sim(StrategyKind::LlRr),
        ),
        Figure::new(
            "the same, rr ÷ sq",
            Unit::Ratio,
            "run",
            sim(StrategyKind::Rr),
        ),
    ]
}

fn cpu_detail(o: &Outcome) -> String {
    match o {
        Outcome::Sweep(s, _) => {
            let costs = crate::report::costs_md(
                &cpu_options(),
                &s.rows,
                crate::report::CostPoints::BelowSaturation,
            );
            format!("{}\n{costs}", summary::cpu_price_md(&s.rows, SQ))
        }
        _ => detail(o),
    }
}

// The flow path against the plain path, both offered more than they forward: the ratio of
// what each forwarded in the same round is the flow path's price in rate.
fn reduce_flows(o: &Outcome) -> Vec<Figure> {
    let Outcome::Sweep(s, _) = o else {
        return Vec::new();
    };
    vec![
        Figure::new(
            "Flow pipelines, flooded: forwarded, ll-wfq with flows ÷ ll-wfq",
            Unit::Ratio,
            "round",
            round_ratio(&s.rows, FLOWS, WFQ, |r| r.throughput_pps),
        )
        .goal(Cmp::AtLeast, 0.97, Over::Median)
        .readme(),
        Figure::new(
            "the same, CPU per packet",
            Unit::Ratio,
            "round",
            round_ratio(&s.rows, FLOWS, WFQ, |r| r.worker_ns_per_pkt),
        ),
        // 30 % RT of 3 Mpps is about ρRT 0.9 of what ll-wfq forwards, beyond the regime where
        // it keeps RT whole ("How far ll-wfq protects RT"): RT loss is shown, not held to 0.
        Figure::new(
            "RT loss, ll-wfq with flows",
            Unit::Pct,
            "round",
            target_col(&s.rows, FLOWS, |r| r.loss_rt * 100.0),
        ),
        Figure::new(
            "RT loss, ll-wfq",
            Unit::Pct,
            "round",
            target_col(&s.rows, WFQ, |r| r.loss_rt * 100.0),
        ),
        Figure::new(
            "Forwarded, ll-wfq",
            Unit::Pps,
            "round",
            target_col(&s.rows, WFQ, |r| r.throughput_pps),
        ),
    ]
}

// Round by round: the generator's rate moves by tens of % between rounds here, so what each
// target was offered is shown beside what it forwarded.
fn flows_detail(o: &Outcome) -> String {
    let Outcome::Sweep(s, _) = o else {
        return detail(o);
    };
    let mut t = String::from(
        "\n| round | target | sent pps | forwarded pps | RT loss % | RT p99 µs | CPU ns per packet |\n|---|---|---|---|---|---|---|\n",
    );
    for rd in rounds(&s.rows) {
        for name in [WFQ, FLOWS] {
            for r in round_rows(&s.rows, name, rd) {
                let _ = writeln!(
                    t,
                    "| {rd} | {name} | {} | {} | {} | {} | {} |",
                    bare(r.sent_pps, Unit::Pps),
                    bare(r.throughput_pps, Unit::Pps),
                    bare(r.loss_rt * 100.0, Unit::Pct),
                    bare(r.rt_p99_us, Unit::Us),
                    bare(r.worker_ns_per_pkt, Unit::Ns),
                );
            }
        }
    }
    t
}

// The issue's bar: a flood the ruleset drops costs RT nothing — no loss, and its p99 within
// 1.2× of RT alone in the same round (each round's alone point is the machine of that minute).
fn reduce_flood(o: &Outcome) -> Vec<Figure> {
    let Outcome::Flood(f) = o else {
        return Vec::new();
    };
    let loss = |m| f.col(m, |r| r.loss_rt * 100.0);
    let secs = f.point_secs;
    vec![
        Figure::new(
            "A blocked flood at 2 Mpps offered, 10 % of it RT, dropped in XDP: RT loss",
            Unit::Pct,
            "round",
            loss(FloodMode::Xdp),
        )
        .goal(Cmp::AtMost, 0.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: RT p99 ÷ RT alone (same round)",
            Unit::Ratio,
            "round",
            f.p99_vs_alone(FloodMode::Xdp),
        )
        .goal(Cmp::AtMost, 1.2, Over::Each)
        .readme(),
        Figure::new(
            "the same: the flood sent",
            Unit::Pps,
            "round",
            f.col(FloodMode::Xdp, |r| r.sent_be as f64 / secs),
        ),
        Figure::new(
            "Dropped by the worker instead: RT loss",
            Unit::Pct,
            "round",
            loss(FloodMode::Worker),
        ),
        Figure::new(
            "the same: RT p99 ÷ RT alone",
            Unit::Ratio,
            "round",
            f.p99_vs_alone(FloodMode::Worker),
        ),
        Figure::new(
            "the same: flood frames the workers dropped, % of the flood sent",
            Unit::Pct,
            "round",
            f.dropped_pct(FloodMode::Xdp, true),
        )
        .goal(Cmp::AtMost, 0.0, Over::Each),
        Figure::new(
            "the same: flood frames dropped in XDP, % of the flood sent",
            Unit::Pct,
            "round",
            f.dropped_pct(FloodMode::Xdp, false),
        ),
    ]
}

const KERNEL_XDP: &str = "kernel-xdp";

fn reduce_tcp_1500(o: &Outcome) -> Vec<Figure> {
    reduce_tcp(o, 1500, true)
}

fn reduce_tcp_9000(o: &Outcome) -> Vec<Figure> {
    reduce_tcp(o, 9000, true)
}

fn reduce_tcp_1500_off(o: &Outcome) -> Vec<Figure> {
    reduce_tcp(o, 1500, false)
}

fn reduce_tcp_9000_off(o: &Outcome) -> Vec<Figure> {
    reduce_tcp(o, 9000, false)
}

// One TCP stream against the kernel forwarding it, each ratio within a round. `kernel-xdp`
// is the kernel behind a pass-all XDP program: the link conditions llrouter has (a veth whose
// peer runs XDP loses segmentation offload), which alone costs the kernel most of its lead.
// With every offload off the kernel has no such lead to lose: llrouter is held to match it.
fn reduce_tcp(o: &Outcome, mtu: u32, offloads: bool) -> Vec<Figure> {
    let Outcome::Iperf(rows) = o else {
        return Vec::new();
    };
    let mut rounds: Vec<u32> = rows.iter().map(|r| r.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let get = |t: &str, rd: u32| rows.iter().find(|r| r.target == t && r.round == rd);
    let vs_kernel = |t: &'static str| -> Vec<f64> {
        (rounds.iter())
            .map(|&rd| match (get(t, rd), get(KERNEL, rd)) {
                (Some(a), Some(k)) if k.goodput_mbps > 0.0 => a.goodput_mbps / k.goodput_mbps,
                _ => f64::NAN,
            })
            .collect()
    };
    let col = |t: &str, f: fn(&IperfRow) -> f64| -> Vec<f64> {
        rows.iter().filter(|r| r.target == t).map(f).collect()
    };
    let (off, goal) = if offloads {
        ("", 0.5)
    } else {
        (", offloads off", 1.0)
    };
    vec![
        Figure::new(
            format!("One TCP stream, MTU {mtu}{off}, ll-wfq ÷ the kernel"),
            Unit::Ratio,
            "round",
            vs_kernel(WFQ),
        )
        .goal(Cmp::AtLeast, goal, Over::Median)
        .readme(),
        {
            let f = Figure::new(
                "the same, the kernel behind a pass-all XDP program ÷ the kernel",
                Unit::Ratio,
                "round",
                vs_kernel(KERNEL_XDP),
            );
            if offloads {
                f.readme()
            } else {
                f
            }
        },
        Figure::new(
            "the same, sq ÷ the kernel",
            Unit::Ratio,
            "round",
            vs_kernel(SQ),
        ),
        Figure::new(
            "Goodput, ll-wfq",
            Unit::Mbps,
            "round",
            col(WFQ, |r| r.goodput_mbps),
        ),
        Figure::new(
            "Goodput, the kernel",
            Unit::Mbps,
            "round",
            col(KERNEL, |r| r.goodput_mbps),
        ),
        Figure::new(
            "Retransmits, ll-wfq, % of segments",
            Unit::Pct,
            "round",
            col(WFQ, |r| r.retransmit_pct),
        ),
    ]
}

// The criterion benchmarks of the full table (1 M IPv4 and 230 k IPv6 prefixes, destinations
// drawn at random from it, so the table is mostly cache-cold): one value per run, each the
// benchmark's median, per packet. The forwarding step leaves the classifier out.
fn reduce_lookups(o: &Outcome) -> Vec<Figure> {
    let Outcome::Bench(b) = o else {
        return Vec::new();
    };
    let ns = |id: &str| vec![b.ns(&format!("fulltable/{id}"))];
    let ratio =
        |a: &str, c: &str| vec![b.ns(&format!("fulltable/{a}")) / b.ns(&format!("fulltable/{c}"))];
    vec![
        Figure::new(
            "IPv4 forwarding with a full table (1 M routes) as the worker does it, without the \
             classifier: parse, batched lookup, neighbour, TTL, checksum, rewrite",
            Unit::Ns,
            "run",
            ns("forward_v4_1M_routed"),
        )
        .goal(Cmp::AtMost, 50.0, Over::Each)
        .readme(),
        Figure::new(
            "the same, IPv6 (230 k routes)",
            Unit::Ns,
            "run",
            ns("forward_v6_230k_routed"),
        )
        .readme(),
        Figure::new(
            "IPv6 Poptrie lookup, full table, 32 together (a grant's)",
            Unit::Ns,
            "run",
            ns("lookup_v6_230k_batched"),
        )
        .goal(Cmp::AtMost, 25.0, Over::Each)
        .readme(),
        Figure::new(
            "IPv4 DIR-24-8 lookup, full table, 32 together",
            Unit::Ns,
            "run",
            ns("lookup_v4_1M_batched"),
        ),
        Figure::new(
            "IPv6 ÷ IPv4 lookup, 32 together",
            Unit::Ratio,
            "run",
            ratio("lookup_v6_230k_batched", "lookup_v4_1M_batched"),
        )
        .goal(Cmp::AtMost, 1.5, Over::Each),
        Figure::new(
            "IPv6 lookup, one after another",
            Unit::Ns,
            "run",
            ns("lookup_v6_230k"),
        ),
        Figure::new(
            "IPv4 lookup, one after another",
            Unit::Ns,
            "run",
            ns("lookup_v4_1M"),
        ),
    ]
}

fn bench_detail(b: &BenchOutcome) -> String {
    let mut s = String::from("\n| benchmark | median, ns per packet |\n|---|---|\n");
    for (id, ns) in &b.per_element_ns {
        let _ = writeln!(s, "| `{id}` | {ns:.1} |");
    }
    s
}

// Each round is a fresh testbed: BGP session, kernel table and router all start anew.
fn reduce_bird(o: &Outcome) -> Vec<Figure> {
    let Outcome::Bgp(b) = o else {
        return Vec::new();
    };
    let col = |f: fn(&crate::bgp::BgpRow) -> f64| b.rows.iter().map(f).collect::<Vec<f64>>();
    vec![
        Figure::new(
            "BIRD's full table over eBGP (1 M IPv4 + 230 k IPv6) into the kernel: llrouter's \
             forwarder complete after the kernel",
            Unit::Ms,
            "round",
            col(|r| r.load_lag_s() * 1e3),
        )
        .readme(),
        Figure::new(
            "the same: the kernel complete, from the originator's start",
            Unit::Secs,
            "round",
            col(|r| r.load_kernel_s),
        ),
        Figure::new(
            "the same: an eighth of it withdrawn: llrouter after the kernel",
            Unit::Ms,
            "round",
            col(|r| r.withdraw_lag_s() * 1e3),
        ),
        Figure::new(
            "the same: the eighth re-announced: llrouter after the kernel",
            Unit::Ms,
            "round",
            col(|r| r.announce_lag_s() * 1e3),
        ),
        Figure::new(
            "the same: rounds in which llrouter answered as the kernel's `ip route get` for \
             every destination (14 000 a round: after the load, the withdrawal and the \
             re-announcement)",
            Unit::Count,
            "round",
            col(|r| f64::from(u8::from(r.differ == 0))),
        )
        .goal(Cmp::AtLeast, 1.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: rounds in which llrouter's forwarder held exactly the kernel's routes \
             after each step, and never went back to a wrong table",
            Unit::Count,
            "round",
            col(|r| f64::from(u8::from(r.missing + r.stale == 0 && r.regressions == 0))),
        )
        .goal(Cmp::AtLeast, 1.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: the route mirror's event-socket overruns (each repaired by a re-dump)",
            Unit::Number,
            "round",
            col(|r| r.mirror_overruns as f64),
        ),
        Figure::new(
            "the same: the lags' resolution (the longest interval between two polls of \
             llrouter's route count)",
            Unit::Ms,
            "round",
            col(|r| r.poll_max_s * 1e3),
        ),
        Figure::new(
            "the same: the router's resident memory",
            Unit::Mb,
            "round",
            col(|r| r.rss_mb),
        ),
    ]
}

fn reduce_demo(o: &Outcome) -> Vec<Figure> {
    use crate::demo::Point;
    let Outcome::Demo(rows) = o else {
        return Vec::new();
    };
    let at = |t: &str, p: Point| rows.iter().find(|r| r.target == t && Point::of(r) == p);
    let (wfq, sq) = ("llrouter:ll-wfq", "llrouter:sq");
    let p99_ratio = |p: Point| match (at(wfq, p), at(sq, p)) {
        (Some(w), Some(q)) if q.rt_p99_us > 0.0 => w.rt_p99_us / q.rt_p99_us,
        _ => f64::NAN,
    };
    let wfq_at = |p: Point, f: fn(&Row) -> f64| at(wfq, p).map_or(f64::NAN, f);
    vec![
        Figure::new(
            "The demo's live half (`llrouter demo` as root, 30 % RT), at 1.5× what each target \
             forwarded flat out: RT p99, ll-wfq ÷ sq",
            Unit::Ratio,
            "run",
            vec![p99_ratio(Point::Overload)],
        )
        .goal(Cmp::AtMost, 1.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: ll-wfq's RT loss",
            Unit::Pct,
            "run",
            vec![wfq_at(Point::Overload, |r| 100.0 * r.loss_rt)],
        )
        .goal(Cmp::AtMost, 0.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: ll-wfq's ρRT",
            Unit::Number,
            "run",
            vec![wfq_at(Point::Overload, |r| r.rho_rt)],
        ),
        Figure::new(
            "the same, flat out (beyond paper 000's regime where ρRT > 0.5): RT p99, ll-wfq ÷ sq",
            Unit::Ratio,
            "run",
            vec![p99_ratio(Point::FlatOut)],
        ),
        Figure::new(
            "the same, flat out: ll-wfq's ρRT",
            Unit::Number,
            "run",
            vec![wfq_at(Point::FlatOut, |r| r.rho_rt)],
        ),
    ]
}

/// The demo's live rows as it prints them (the main columns), with its notes: the cause under
/// every row beyond paper 000's regime or behind sq's RT p99.
fn demo_detail(rows: &[Row]) -> String {
    let mut s = String::from(
        "| target | point | sent kpps | forwarded kpps | RT p50 µs | RT p99 µs | RT loss | ρRT | RT ring p99 µs |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {:.2} % | {} | {:.0} |",
            r.target,
            crate::demo::Point::of(r).name(),
            r.sent_pps / 1e3,
            r.throughput_pps / 1e3,
            r.rt_p50_us,
            r.rt_p99_us,
            100.0 * r.loss_rt,
            if r.rho_rt.is_nan() {
                "-".to_string()
            } else {
                format!("{:.2}", r.rho_rt)
            },
            r.rt_ring_p99_us
        );
    }
    let notes = crate::demo::notes(rows, crate::demo::RING);
    if !notes.is_empty() {
        s.push('\n');
        for n in notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

// Per setup (line): the RT ring's p99 in each kind of window, and what the listing windows
// lost. The p99s are histogram bucket bounds: a window's value is the bound it fell under.
fn reduce_listing(o: &Outcome) -> Vec<Figure> {
    let Outcome::Many(lines) = o else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, (_, l)) in lines.iter().enumerate() {
        let Outcome::Listing(l) = l else {
            continue;
        };
        let ring = |mode: &str| l.col(mode, |r| r.ring_p99_us);
        let lead = if i == 0 {
            format!(
                "1.23 M routes, 50 kpps (30 % RT) in 8 s windows, {}: the RT ring's p99 while \
                 `ctl show fib --all -j` lists the table back to back",
                l.setup()
            )
        } else {
            format!("the same, {}", l.setup())
        };
        out.push(Figure::new(lead, Unit::Us, "window", ring("listing")));
        out.push(Figure::new(
            "the same, the control plane idle",
            Unit::Us,
            "window",
            ring("idle"),
        ));
        out.push(Figure::new(
            "the same, a plain loop on the clients' core instead",
            Unit::Us,
            "window",
            ring("hog"),
        ));
        out.push(Figure::new(
            "the same: frames lost per listing window (of the ~400 000 sent)",
            Unit::Number,
            "window",
            l.col("listing", crate::listing::ListingRow::lost),
        ));
    }
    out
}

fn reduce_between_builds(o: &Outcome) -> Vec<Figure> {
    let Outcome::Ab(a) = o else {
        return Vec::new();
    };
    vec![
        Figure::new(
            "One build against itself (`scripts/ab.sh`, the two alternating in each round): \
             forwarded pps, ll-wfq offered 2 Mpps (30 % RT), new ÷ old",
            Unit::Ratio,
            "round",
            a.ratios("flat", |r| r.pps),
        ),
        Figure::new(
            "the same: the worker's CPU per packet (`worker_ns_per_pkt`), new ÷ old",
            Unit::Ratio,
            "round",
            a.ratios("flat", |r| r.worker_ns),
        ),
        Figure::new(
            "the same, ll-wfq at 600 kpps (30 % RT): RT p99, new ÷ old",
            Unit::Ratio,
            "round",
            a.ratios("overload", |r| r.rt_p99_us),
        ),
        Figure::new(
            "the same: RT loss, either build",
            Unit::Pct,
            "round and build",
            a.values("overload", |r| r.loss_rt_pct),
        ),
    ]
}

fn reduce_matrix(o: &Outcome) -> Vec<Figure> {
    let Outcome::Matrix(m) = o else {
        return Vec::new();
    };
    let count = |f: &dyn Fn(&crate::matrix::MatrixRow) -> bool| {
        m.rows
            .iter()
            .map(|r| f64::from(u8::from(f(r))))
            .collect::<Vec<f64>>()
    };
    vec![
        Figure::new(
            "Kernel × NIC matrix in QEMU (Debian's kernels 6.1 to 7.3, PREEMPT_RT among them; \
             virtio-net with 1 and 4 queue pairs, igb; sockets in zero-copy where offered and in \
             copy mode): rows that passed every check",
            Unit::Count,
            "row",
            count(&|r| r.passed()),
        )
        .goal(Cmp::AtLeast, 1.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: rows whose sockets ran in zero-copy",
            Unit::Count,
            "row",
            count(&|r| r.mode == "zero-copy"),
        ),
    ]
}

// Each round restarts the router on the same kernel table, so its figures are a start's.
fn reduce_scale(o: &Outcome) -> Vec<Figure> {
    let Outcome::Scale(s) = o else {
        return Vec::new();
    };
    let col = |f: fn(&crate::scale::ScaleRow) -> f64| s.rows.iter().map(f).collect::<Vec<f64>>();
    vec![
        Figure::new(
            "1 M IPv4 + 230 k IPv6 routes in the kernel: from `llrouter run` until its forwarder \
             holds every route",
            Unit::Secs,
            "round",
            col(|r| if r.incomplete { f64::NAN } else { r.complete_s }),
        )
        .readme(),
        Figure::new(
            "the same: resident memory",
            Unit::Mb,
            "round",
            col(|r| r.rss_mb),
        )
        .goal(Cmp::AtMost, 200.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: a router on the links' routes alone",
            Unit::Mb,
            "run",
            vec![s.rss_empty_mb],
        ),
        Figure::new(
            "the same: of it, the forwarding table's",
            Unit::Mb,
            "round",
            col(|r| r.fib_mb),
        ),
        Figure::new(
            "the same: the route mirror's CPU while no route changes, % of a core",
            Unit::Pct,
            "round",
            col(|r| r.mirror_idle_pct),
        )
        .goal(Cmp::AtMost, 1.0, Over::Each),
        Figure::new(
            "the same: listing every route (`ctl show fib --all`, the client off the worker's core)",
            Unit::Secs,
            "round",
            col(|r| r.listing_s),
        )
        .goal(Cmp::Below, 5.0, Over::Each)
        .readme(),
        Figure::new(
            "the same, `-j`",
            Unit::Secs,
            "round",
            col(|r| r.listing_json_s),
        )
        .goal(Cmp::Below, 5.0, Over::Each),
        Figure::new(
            "the same: rounds whose forwarder held every route (none over max-routes)",
            Unit::Count,
            "round",
            col(|r| if r.incomplete { 0.0 } else { 1.0 }),
        )
        .goal(Cmp::AtLeast, 1.0, Over::Each),
    ]
}

// Each round's point with churn is set against the same round's without: the machine of that
// minute cancels out of the ratio.
fn reduce_churn(o: &Outcome) -> Vec<Figure> {
    let Outcome::Churn(c) = o else {
        return Vec::new();
    };
    vec![
        Figure::new(
            "10 000 route changes a second (100 k routes) beside 250 kpps, 30 % RT: RT loss",
            Unit::Pct,
            "round",
            c.col(ChurnMode::Churn, |r| r.row.loss_rt * 100.0),
        )
        .goal(Cmp::AtMost, 0.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: RT p99 with churn ÷ without (same round)",
            Unit::Ratio,
            "round",
            c.vs_quiet(|r| r.rt_p99_us),
        )
        .goal(Cmp::AtMost, 1.2, Over::Each)
        .readme(),
        Figure::new(
            "the same: BE loss",
            Unit::Pct,
            "round",
            c.col(ChurnMode::Churn, |r| r.row.loss_be * 100.0),
        ),
        Figure::new(
            "the same: the RT ring's p99 (the router's own wait), with churn ÷ without",
            Unit::Ratio,
            "round",
            c.vs_quiet(|r| r.rt_ring_p99_us),
        ),
        Figure::new(
            "the same: BE loss without churn",
            Unit::Pct,
            "round",
            c.col(ChurnMode::Quiet, |r| r.row.loss_be * 100.0),
        ),
        Figure::new(
            "the same: the worker's longest grant, with churn ÷ without",
            Unit::Ratio,
            "round",
            c.vs_quiet(|r| r.stall_max_us),
        ),
        Figure::new(
            "the same: RT loss without churn",
            Unit::Pct,
            "round",
            c.col(ChurnMode::Quiet, |r| r.row.loss_rt * 100.0),
        ),
    ]
}

/// 1 per claim that holds, 0 per one that does not.
fn claims_figure(what: &str, claims: &[Claim]) -> Figure {
    Figure::new(
        what,
        Unit::Count,
        "claim",
        claims
            .iter()
            .map(|c| if c.holds { 1.0 } else { 0.0 })
            .collect(),
    )
    .goal(Cmp::AtLeast, 1.0, Over::Each)
}

fn claims_md(claims: &[Claim]) -> String {
    let mut s =
        String::from("\n| figure | the paper says | holds | our check |\n|---|---|---|---|\n");
    for c in claims {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            c.figure,
            c.statement,
            if c.holds { "yes" } else { "**no**" },
            c.check.replace('|', "\\|")
        );
    }
    s
}

// The paper states four latencies (Fig. 5 at 10 % RT), to the µs ("ca. 81 µs"): rounding alone
// puts the true value up to 0.6 % away, so 1 % is the closest a match can be asked to be.
fn reduce_paper001(o: &Outcome) -> Vec<Figure> {
    let Outcome::Paper001(p) = o else {
        return Vec::new();
    };
    let stated: Vec<String> = (p001::PAPER.iter())
        .map(|v| format!("{} {} {:.0}", v.series, v.class.to_uppercase(), v.us))
        .collect();
    let off = (p001::PAPER.iter())
        .map(|v| {
            p.results
                .get(v.figure, v.series, v.class, v.x)
                .map_or(f64::NAN, |s| (s.mean_us - v.us).abs() / v.us * 100.0)
        })
        .collect();
    vec![
        Figure::new(
            format!(
                "Paper 001's case study, simulated: the mean latencies Fig. 5 states at 10 % RT \
                 ({} µs), ours off by",
                stated.join(", ")
            ),
            Unit::Pct,
            "value",
            off,
        )
        .goal(Cmp::AtMost, 1.0, Over::Each)
        .readme(),
        claims_figure(
            "the same: the paper's claims (Figs. 5–7, §IV) that hold",
            &p.claims,
        )
        .readme(),
    ]
}

/// What each ruleset costs against none in its round, and what RT gets where the kernel, not
/// llrouter, forwards.
fn reduce_firewall_cost(o: &Outcome) -> Vec<Figure> {
    let Outcome::Firewall(f) = o else {
        return Vec::new();
    };
    let fwd = |r: &Row| r.throughput_pps;
    let p99 = |r: &Row| r.rt_p99_us;
    let loss = |r: &Row| r.loss_rt * 100.0;
    vec![
        Figure::new(
            "Forwarded at 2 Mpps offered with a stateless ruleset llrouter runs (10 rules, a \
             10 000-prefix blocklist) ÷ none (same round)",
            Unit::Ratio,
            "round",
            f.vs_none(FirewallMode::Stateless, fwd),
        )
        .readme(),
        Figure::new(
            "the same with a typical stateful firewall (`ct state`, policy drop), the flows \
             established: llrouter carries them",
            Unit::Ratio,
            "round",
            f.vs_none(FirewallMode::TypicalEst, fwd),
        )
        .readme(),
        Figure::new(
            "the same: RT loss",
            Unit::Pct,
            "round",
            f.col(FirewallMode::TypicalEst, loss),
        )
        .goal(Cmp::AtMost, 0.0, Over::Each)
        .readme(),
        Figure::new(
            "the same: RT p99 ÷ none (same round)",
            Unit::Ratio,
            "round",
            f.vs_none(FirewallMode::TypicalEst, p99),
        ),
        Figure::new(
            "The typical firewall, the flows not established, so that the kernel forwards \
             them: RT loss",
            Unit::Pct,
            "round",
            f.col(FirewallMode::Typical, loss),
        )
        .readme(),
        Figure::new(
            "the same: frames llrouter hands to the kernel, % of those sent",
            Unit::Pct,
            "round",
            f.to_kernel_pct(FirewallMode::Typical),
        ),
        Figure::new(
            "the same: RT p99",
            Unit::Us,
            "round",
            f.col(FirewallMode::Typical, p99),
        ),
    ]
}

/// The live automatic budget: Tmax against its target at every point, and where ρRT leaves
/// room, the RT ring's p99 against the target and RT loss.
fn reduce_auto_budget(o: &Outcome) -> Vec<Figure> {
    let Outcome::Sweep(s, _) = o else {
        return Vec::new();
    };
    let target = 20.0;
    let wfq: Vec<&Row> = s.rows.iter().filter(|r| r.target == WFQ).collect();
    let room: Vec<&Row> = (wfq.iter().copied())
        .filter(|r| r.rho_rt <= PROTECTED_RHO_RT)
        .collect();
    let col = |v: &[&Row], f: fn(&Row) -> f64| v.iter().map(|r| f(r)).collect::<Vec<f64>>();
    vec![
        Figure::new(
            "Live, ll-wfq at 1 Mpps offered, automatic BE budget with a 20 µs target: Tmax, \
             every RT share up to 60 %",
            Unit::Us,
            "point",
            col(&wfq, |r| r.tmax_us),
        )
        .goal(Cmp::AtMost, target, Over::Each)
        .readme(),
        Figure::new(
            format!(
                "the same, ρRT ≤ {PROTECTED_RHO_RT}: the RT ring's p99 (its histogram bucket's \
                 upper edge)"
            ),
            Unit::Us,
            "point",
            col(&room, |r| r.rt_ring_p99_us),
        )
        .goal(Cmp::AtMost, target, Over::Each)
        .readme(),
        Figure::new(
            format!("the same, ρRT ≤ {PROTECTED_RHO_RT}: RT loss"),
            Unit::Pct,
            "point",
            col(&room, |r| r.loss_rt * 100.0),
        )
        .goal(Cmp::AtMost, 0.0, Over::Each),
    ]
}

/// Paper 000 asks the RT ring's wait to stay within its bound while the RT load leaves room:
/// up to this ρRT (its Fig. 4's RT shares at 1.5× load, up to 50 %).
pub const TMAX_RHO_RT: f64 = 0.75;

/// A ramp's budget as a reader names it: `b = 4`, or `automatic b, 20 µs`.
fn ramp_label(o: &RampOutcome) -> String {
    match o.cfg.sched.auto_budget.map(|a| a.target) {
        Some(llr_core::sched::AutoTarget::Ns(n)) => {
            format!("automatic b, {} µs target", n as f64 / 1000.0)
        }
        Some(llr_core::sched::AutoTarget::ServiceTimes(m)) => {
            format!("automatic b, {m} service times")
        }
        None => match o.rows.first().and_then(|r| r.be_budget) {
            Some(b) => format!("b = {b}"),
            None => "fixed budgets".into(),
        },
    }
}

/// The automatic budget's target in µs (`None`: fixed budgets, or a target in service times).
fn ramp_target_us(o: &RampOutcome) -> Option<f64> {
    match o.cfg.sched.auto_budget.map(|a| a.target) {
        Some(llr_core::sched::AutoTarget::Ns(n)) => Some(n as f64 / 1000.0),
        _ => None,
    }
}

/// Per ramp: with an automatic budget, its Tmax in every phase and the RT p99 where ρRT leaves
/// room, each held to the target; with a fixed one, whether the RT p99 stays within Tmax. RT
/// loss over every phase of every ramp.
fn reduce_tmax(o: &Outcome) -> Vec<Figure> {
    let ramps = ramps_of(o);
    let us = |ns: f64| ns / 1000.0;
    let mut out = Vec::new();
    for (i, r) in ramps.iter().enumerate() {
        let load = r
            .results
            .first()
            .map_or(f64::NAN, |x| llr_sim::sweep::offered_load(x, r.cfg.cores));
        // Every ramp's lead is whole: README.md shows the last one's figures alone.
        let lead = format!("Simulated at {load:.1}× capacity, {}", ramp_label(r));
        let room: Vec<_> = r.rows.iter().filter(|x| x.rho_rt <= TMAX_RHO_RT).collect();
        match ramp_target_us(r) {
            Some(t) => {
                let readme = i + 1 == ramps.len();
                let tmax = Figure::new(
                    format!("{lead}: Tmax, every phase (ρRT up to {:.2})", max_rho(r)),
                    Unit::Us,
                    "phase",
                    r.rows
                        .iter()
                        .map(|x| x.tmax_ns.map_or(f64::INFINITY, us))
                        .collect(),
                )
                .goal(Cmp::AtMost, t, Over::Each);
                let p99 = Figure::new(
                    format!("the same: RT p99, ρRT ≤ {TMAX_RHO_RT}"),
                    Unit::Us,
                    "phase",
                    room.iter().map(|x| us(x.rt_p99_ns)).collect(),
                )
                .goal(Cmp::AtMost, t, Over::Each);
                if readme {
                    out.push(tmax.readme());
                    out.push(p99.readme());
                } else {
                    out.push(tmax);
                    out.push(p99);
                }
            }
            None => out.push(
                Figure::new(
                    format!(
                        "{lead}: RT p99 within Tmax + x (Tmax bounds the wait; a frame's time \
                         adds its own service x), ρRT ≤ {TMAX_RHO_RT}"
                    ),
                    Unit::Count,
                    "phase",
                    room.iter()
                        .map(|x| {
                            let within = x.tmax_ns.is_some_and(|t| x.rt_p99_ns <= t + x.x_ns);
                            f64::from(u8::from(within))
                        })
                        .collect(),
                )
                .goal(Cmp::AtLeast, 1.0, Over::Each),
            ),
        }
    }
    let beyond: Vec<f64> = (ramps.iter())
        .flat_map(|r| r.rows.iter().filter(|x| x.rho_rt > TMAX_RHO_RT))
        .map(|x| us(x.rt_p99_ns))
        .collect();
    out.push(Figure::new(
        format!("every ramp: RT p99 beyond ρRT {TMAX_RHO_RT}"),
        Unit::Us,
        "phase",
        beyond,
    ));
    out.push(
        Figure::new(
            "every ramp: RT loss",
            Unit::Pct,
            "phase",
            (ramps.iter())
                .flat_map(|r| r.rows.iter().map(|x| x.rt_loss * 100.0))
                .collect(),
        )
        .goal(Cmp::AtMost, 0.0, Over::Each),
    );
    out
}

fn max_rho(r: &RampOutcome) -> f64 {
    r.rows.iter().map(|x| x.rho_rt).fold(0.0, f64::max)
}

/// Per point of a cores sweep, the index of its strategy's point with the fewest cores.
fn cores_base(jobs: &[SweepPoint], i: usize) -> usize {
    let st = jobs[i].strategy;
    (0..jobs.len())
        .filter(|&j| jobs[j].strategy == st)
        .min_by_key(|&j| jobs[j].config.cores)
        .unwrap_or(i)
}

/// Capacity at the point over `cores ×` its strategy's one-core capacity (NaN without one).
fn capacity_per_core(o: &SimSweepOutcome, i: usize) -> f64 {
    let Some(c) = &o.caps else {
        return f64::NAN;
    };
    let b = cores_base(&o.jobs, i);
    let scale = o.jobs[i].config.cores as f64 / o.jobs[b].config.cores as f64;
    c[i].delivered_pps / c[b].delivered_pps.max(1.0) / scale
}

/// The cores sweeps: with many flows, the capacity against the flow hash's bound and per core;
/// with the default 64 flows, per core, RT loss (sq) and RT p99 (ll-wfq).
fn reduce_cores(o: &Outcome) -> Vec<Figure> {
    let Outcome::Many(lines) = o else {
        return Vec::new();
    };
    let sweeps: Vec<&SimSweepOutcome> = (lines.iter())
        .filter_map(|(_, o)| match o {
            Outcome::SimSweep(s) => Some(s),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for (k, s) in sweeps.iter().enumerate() {
        let (few, many) = (s.jobs.iter()).fold((usize::MAX, 0), |(a, b), p| {
            (a.min(p.config.flows), b.max(p.config.flows))
        });
        // Flows of a fixed rate each grow with the cores.
        let flows = if few == many {
            format!("{few} flows")
        } else {
            format!("{few}–{many} flows")
        };
        let most = s.jobs.iter().map(|p| p.config.cores).max().unwrap_or(0);
        let top: Vec<usize> = (0..s.jobs.len())
            .filter(|&i| s.jobs[i].config.cores == most)
            .collect();
        let lead = if k == 0 {
            format!("Simulated, {flows}")
        } else {
            format!("the same, {flows}")
        };
        if k == 0 {
            out.push(
                Figure::new(
                    format!(
                        "{lead}: the loss-free capacity ÷ the flow hash's bound (the load at which \
                         the busiest core is full), every strategy and core count"
                    ),
                    Unit::Ratio,
                    "point",
                    (s.jobs.iter().enumerate())
                        .map(|(i, p)| match &s.caps {
                            Some(c) => c[i].utilization / llr_sim::hash_bound(&p.config),
                            None => f64::NAN,
                        })
                        .collect(),
                )
                .goal(Cmp::AtLeast, 0.99, Over::Each),
            );
        }
        out.push(
            Figure::new(
                format!("{lead}: capacity at {most} cores ÷ {most} × one core's, every strategy"),
                Unit::Ratio,
                "point",
                top.iter().map(|&i| capacity_per_core(s, i)).collect(),
            )
            .goal(Cmp::AtLeast, 0.9, Over::Each)
            .readme(),
        );
        let rt = |name: &str, f: fn(&SimResult) -> f64| -> Vec<f64> {
            (top.iter())
                .filter(|&&i| s.jobs[i].strategy.name() == name)
                .map(|&i| f(&s.results[i]))
                .collect()
        };
        if k > 0 {
            out.push(Figure::new(
                format!("{lead}: sq's RT loss at {most} cores"),
                Unit::Pct,
                "point",
                rt("sq", |r| {
                    r.classes[0].dropped as f64 / r.classes[0].sent.max(1) as f64 * 100.0
                }),
            ));
            out.push(Figure::new(
                format!("{lead}: ll-wfq's RT p99 at {most} cores"),
                Unit::Us,
                "point",
                rt("ll-wfq", |r| r.classes[0].p99_ns as f64 / 1000.0),
            ));
        }
    }
    out
}

/// A row per strategy and point.
fn sweep_detail(o: &SimSweepOutcome) -> String {
    // A cores sweep's value is the cores column already.
    let value = o.param != "cores";
    let mut s = format!(
        "\n| strategy |{} cores | flows | delivered Mpps | RT loss % | RT p50 µs | RT p99 µs | BE loss % | BE p99 µs | hash bound | capacity | capacity ÷ one core's |\n|---|{}---|---|---|---|---|---|---|---|---|---|---|\n",
        if value { format!(" {} |", o.param) } else { String::new() },
        if value { "---|" } else { "" },
    );
    let loss = |c: &llr_sim::ClassResult| c.dropped as f64 / c.sent.max(1) as f64 * 100.0;
    for (i, (p, r)) in o.jobs.iter().zip(&o.results).enumerate() {
        let delivered =
            r.classes.iter().map(|c| c.delivered).sum::<u64>() as f64 * 1e3 / r.sim_time_ns;
        let (t, b) = (&r.classes[0], &r.classes[r.classes.len() - 1]);
        let (cap, speedup) = match &o.caps {
            Some(c) => (
                format!("{:.3}", c[i].utilization),
                format!(
                    "{:.2}",
                    capacity_per_core(o, i) * p.config.cores as f64
                        / o.jobs[cores_base(&o.jobs, i)].config.cores as f64
                ),
            ),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            s,
            "| {} |{} {} | {} | {delivered:.3} | {:.2} | {:.2} | {:.1} | {:.2} | {:.1} | {:.3} | {cap} | {speedup} |",
            p.strategy.name(),
            if value { format!(" {} |", p.value) } else { String::new() },
            p.config.cores,
            p.config.flows,
            loss(t),
            t.p50_ns as f64 / 1000.0,
            t.p99_ns as f64 / 1000.0,
            loss(b),
            b.p99_ns as f64 / 1000.0,
            llr_sim::hash_bound(&p.config),
        );
    }
    s
}

/// The demo's simulated half: per strategy at the highest load, RT loss and p99, with ll-wfq's
/// RT loss at every load held to 0 and sq's RT p99 against ll-wfq's to paper 000's tenfold.
fn reduce_demo_sim(o: &Outcome) -> Vec<Figure> {
    let Outcome::SimSweep(s) = o else {
        return Vec::new();
    };
    let top = s.jobs.iter().map(|p| p.value).fold(f64::NAN, f64::max);
    let at = |name: &str, all: bool| -> Vec<&SimResult> {
        (s.jobs.iter().zip(&s.results))
            .filter(|(p, _)| p.strategy.name() == name && (all || p.value == top))
            .map(|(_, r)| r)
            .collect()
    };
    let rt_loss =
        |r: &SimResult| r.classes[0].dropped as f64 / r.classes[0].sent.max(1) as f64 * 100.0;
    let rt_p99 = |r: &SimResult| r.classes[0].p99_ns as f64 / 1000.0;
    let ratio: Vec<f64> = (at("sq", false).iter().zip(at("ll-wfq", false)))
        .map(|(q, w)| rt_p99(q) / rt_p99(w))
        .collect();
    let mut out = vec![
        Figure::new(
            "The demo, simulated (paper 000's scenario: one core, 30 % RT, Poisson): ll-wfq's \
             RT loss, every load up to 1.5×",
            Unit::Pct,
            "point",
            at("ll-wfq", true).into_iter().map(rt_loss).collect(),
        )
        .goal(Cmp::AtMost, 0.0, Over::Each)
        .readme(),
        Figure::new(
            format!("the same: RT p99 at {top}×, sq ÷ ll-wfq"),
            Unit::Ratio,
            "point",
            ratio,
        )
        .goal(Cmp::AtLeast, 10.0, Over::Each)
        .readme(),
        Figure::new(
            format!("the same: sq's RT loss at {top}×"),
            Unit::Pct,
            "point",
            at("sq", false).into_iter().map(rt_loss).collect(),
        ),
    ];
    for name in ["ll-wfq", "ll-rr", "rr", "sq"] {
        out.push(Figure::new(
            format!("the same: {name}'s RT p99 at {top}×"),
            Unit::Us,
            "point",
            at(name, false).into_iter().map(rt_p99).collect(),
        ));
    }
    out
}

/// The simulated ramps of a topic, in its order.
fn ramps_of(o: &Outcome) -> Vec<&RampOutcome> {
    match o {
        Outcome::Ramp(r) => vec![&**r],
        Outcome::Many(v) => (v.iter())
            .filter_map(|(_, o)| match o {
                Outcome::Ramp(r) => Some(&**r),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A row per RT share, the ramps side by side.
fn ramps_detail(ramps: &[&RampOutcome]) -> String {
    let mut s = String::from("\n| RT share |");
    for r in ramps {
        let _ = write!(s, " {}: ρRT, b, Tmax µs, RT p99 µs |", ramp_label(r));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(ramps.len()));
    s.push('\n');
    let n = ramps.iter().map(|r| r.rows.len()).max().unwrap_or(0);
    for i in 0..n {
        let share = ramps
            .iter()
            .find_map(|r| r.rows.get(i))
            .map_or(f64::NAN, |x| x.rt_share);
        let _ = write!(s, "| {share:.2} |");
        for r in ramps {
            match r.rows.get(i) {
                Some(x) => {
                    let _ = write!(
                        s,
                        " {:.3}, {}, {}, {:.1} |",
                        x.rho_rt,
                        x.be_budget.map_or("–".into(), |b| b.to_string()),
                        x.tmax_ns
                            .map_or("∞".into(), |t| format!("{:.1}", t / 1000.0)),
                        x.rt_p99_ns / 1000.0
                    );
                }
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    s
}

fn paper001_detail(p: &p001::Outcome) -> String {
    let mut s = String::from(
        "\n| Fig. | line | class | RT share | the paper | ours (95 % CI) |\n|---|---|---|---|---|---|\n",
    );
    for v in &p001::PAPER {
        if let Some(r) = p.results.get(v.figure, v.series, v.class, v.x) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.0} µs | {:.1} ± {:.1} µs |",
                v.figure,
                v.series,
                v.class.to_uppercase(),
                v.x,
                v.us,
                r.mean_us,
                r.ci95_us
            );
        }
    }
    let _ = write!(
        s,
        "\n{} simulations, {:.0} M packets.\n{}",
        p.simulations,
        p.packets as f64 / 1e6,
        claims_md(&p.claims)
    );
    s
}

// Each run measures every flow count in thread CPU time; the values per run are the means over
// its replications, and the fit is the run's own.
fn reduce_flow_switch(o: &Outcome) -> Vec<Figure> {
    let Outcome::Paper003(p) = o else {
        return Vec::new();
    };
    let at = |n: usize| {
        (p.points.iter())
            .find(|x| x.flows == n)
            .map_or(f64::NAN, |x| x.mean_ns)
    };
    let (lo, hi) = (p003::FLOWS[0], p003::FLOWS[p003::FLOWS.len() - 1]);
    vec![
        Figure::new(
            format!("Flow switch (paper 003, Fig. 5), {lo} eligible flows"),
            Unit::Ns,
            "run",
            vec![at(lo)],
        )
        .readme(),
        Figure::new(
            format!("the same, {hi} eligible flows"),
            Unit::Ns,
            "run",
            vec![at(hi)],
        )
        .readme(),
        Figure::new(
            "the same, fitted a + b·log2 n: a",
            Unit::Ns,
            "run",
            vec![p.log_fit.intercept],
        ),
        Figure::new(
            "the same: b, per doubling of the flows",
            Unit::Ns,
            "run",
            vec![p.log_fit.slope],
        ),
        Figure::new(
            format!(
                "the same, the paper's sorted list ({:.0} + {:.0}·n ns) at {hi} flows ÷ ours",
                p003::PAPER_FIXED_NS,
                p003::PAPER_PER_FLOW_NS
            ),
            Unit::Ratio,
            "run",
            vec![(p003::PAPER_FIXED_NS + p003::PAPER_PER_FLOW_NS * hi as f64) / at(hi)],
        ),
        claims_figure(
            "the same: the paper's claims about Fig. 5 that hold",
            &p.claims,
        ),
    ]
}

fn paper003_detail(p: &p003::Output) -> String {
    let mut s = String::from(
        "\n| eligible flows | ns per switch (95 % CI) | the paper's list |\n|---|---|---|\n",
    );
    for x in &p.points {
        let _ = writeln!(
            s,
            "| {} | {:.1} ± {:.1} | {:.0} |",
            x.flows,
            x.mean_ns,
            x.ci95_ns,
            p003::PAPER_FIXED_NS + p003::PAPER_PER_FLOW_NS * x.flows as f64
        );
    }
    let _ = write!(
        s,
        "\nFits: {:.1} + {:.2}·log2 n ns (R² {:.3}); {:.1} + {:.4}·n ns (R² {:.3}).\n{}",
        p.log_fit.intercept,
        p.log_fit.slope,
        p.log_fit.r2,
        p.linear_fit.intercept,
        p.linear_fit.slope,
        p.linear_fit.r2,
        claims_md(&p.claims)
    );
    s
}

/// Where the stored results live under the repository.
pub fn store_dir(repo: &Path) -> PathBuf {
    repo.join("docs/results")
}

/// Writes `r` to `docs/results/<topic>.toml`.
pub fn save(repo: &Path, r: &TopicResult) -> Result<PathBuf> {
    let dir = store_dir(repo);
    std::fs::create_dir_all(&dir).map_err(|e| LabError::io(dir.display().to_string(), e))?;
    let path = dir.join(format!("{}.toml", r.topic));
    let text = toml::to_string(r).map_err(|e| LabError::step("encode the results", e))?;
    std::fs::write(&path, text).map_err(|e| LabError::io(path.display().to_string(), e))?;
    Ok(path)
}

/// The stored results of every topic that has one, in [`TOPICS`] order.
pub fn load_all(repo: &Path) -> Result<Vec<TopicResult>> {
    let mut out = Vec::new();
    for t in TOPICS {
        let path = store_dir(repo).join(format!("{}.toml", t.name));
        let text = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(LabError::io(path.display().to_string(), e)),
        };
        let r: TopicResult = toml::from_str(&text).map_err(|e| {
            LabError::Invalid(llr_core::FieldError::new(
                "results",
                format!("{}: {e}", path.display()),
            ))
        })?;
        out.push(r);
    }
    Ok(out)
}

/// The block of docs/results.md for one topic.
pub fn render_block(r: &TopicResult) -> String {
    let steal = if r.machine.steal_pct.is_finite() {
        format!("{:.1} %", r.machine.steal_pct)
    } else {
        "unknown".into()
    };
    let per = r.figures.first().map_or("round", |f| f.per.as_str());
    let runs = if r.runs > 1 && per == "run" {
        format!(
            "{} runs, back to back: median [min–max] over the runs; a figure whose runs differ \
             by more than 15 % is not reproduced",
            r.runs
        )
    } else if r.runs > 1 {
        format!(
            "{} runs, back to back: median [min–max] over every run's {per}s, then each run's \
             median; a figure whose run medians differ by more than 15 % is not reproduced",
            r.runs
        )
    } else {
        format!("one run: median [min–max] over its {per}s")
    };
    let root = if r.command.starts_with("llrouter testbed") {
        "root, "
    } else {
        ""
    };
    let per_run = r.secs / f64::from(r.runs.max(1));
    let took = if per_run < 120.0 {
        format!("{per_run:.0} s")
    } else {
        format!("{:.0} min", per_run / 60.0)
    };
    let mut s = format!(
        "```sh\n{}   # {root}{took} a run\n```\n\n\
         Generated by `bash scripts/results.sh {}` on {} ({} cores, Linux {}, steal {steal} over the \
         runs), {runs}. A goal's status is computed from every value.\n\n\
         | figure | measured | goal |\n|---|---|---|\n",
        r.command,
        r.topic,
        r.date,
        r.machine.cores,
        r.machine.kernel,
    );
    for f in &r.figures {
        let _ = writeln!(s, "| {} | {} | {} |", f.what, f.measured(), f.status_text());
    }
    if !r.detail.trim().is_empty() {
        s.push_str("\n<details><summary>The study's own tables</summary>\n\n");
        // The study's headings would enter the page's outline: shown as bold text instead.
        for line in r.detail.trim().lines() {
            match line.trim_start_matches('#') {
                h if h.len() < line.len() => {
                    let _ = writeln!(s, "**{}**", h.trim());
                }
                _ => {
                    let _ = writeln!(s, "{line}");
                }
            }
        }
        s.push_str("\n</details>\n");
    }
    s
}

/// README.md's table of the figures marked for it, every topic's.
pub fn render_readme(all: &[TopicResult]) -> String {
    let mut s = String::from("| what | measured | goal | run |\n|---|---|---|---|\n");
    for r in all {
        for f in r.figures.iter().filter(|f| f.readme) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | `{}`, {} |",
                f.what,
                f.measured(),
                f.status_text(),
                r.topic,
                r.date
            );
        }
    }
    s
}

fn marks(name: &str) -> (String, String) {
    (
        format!("<!-- results:{name} -->\n"),
        format!("<!-- /results:{name} -->"),
    )
}

/// `doc` with the text between the markers of `name` replaced by `body`.
pub fn splice(doc: &str, name: &str, body: &str) -> std::result::Result<String, String> {
    let (open, close) = marks(name);
    let a = doc
        .find(&open)
        .ok_or_else(|| format!("marker {} missing", open.trim()))?
        + open.len();
    let b = doc[a..]
        .find(&close)
        .ok_or_else(|| format!("marker {close} missing"))?
        + a;
    Ok(format!("{}{}{}", &doc[..a], body, &doc[b..]))
}

/// README.md and docs/results.md as the stored results render them.
pub fn render_docs(repo: &Path) -> Result<Vec<(PathBuf, String)>> {
    let all = load_all(repo)?;
    let read =
        |p: &Path| std::fs::read_to_string(p).map_err(|e| LabError::io(p.display().to_string(), e));
    let bad = |p: &Path, e: String| {
        LabError::Invalid(llr_core::FieldError::new(
            "results",
            format!("{}: {e}", p.display()),
        ))
    };
    let results_md = repo.join("docs/results.md");
    let mut doc = read(&results_md)?;
    for r in &all {
        doc = splice(&doc, &r.topic, &render_block(r)).map_err(|e| bad(&results_md, e))?;
    }
    let readme = repo.join("README.md");
    let text = read(&readme)?;
    let text = splice(&text, "readme", &render_readme(&all)).map_err(|e| bad(&readme, e))?;
    Ok(vec![(results_md, doc), (readme, text)])
}

/// Writes README.md and docs/results.md from the stored results.
pub fn write_docs(repo: &Path) -> Result<()> {
    for (p, text) in render_docs(repo)? {
        std::fs::write(&p, text).map_err(|e| LabError::io(p.display().to_string(), e))?;
    }
    Ok(())
}

/// The files whose tables differ from what the stored results render.
pub fn check_docs(repo: &Path) -> Result<Vec<PathBuf>> {
    let mut stale = Vec::new();
    for (p, text) in render_docs(repo)? {
        let now =
            std::fs::read_to_string(&p).map_err(|e| LabError::io(p.display().to_string(), e))?;
        if now != text {
            stale.push(p);
        }
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(values: Vec<f64>, cmp: Cmp, bound: f64, over: Over) -> Figure {
        Figure::new("x", Unit::Ratio, "round", values).goal(cmp, bound, over)
    }

    #[test]
    fn status_is_computed_from_every_value() {
        let f = fig(vec![1.1, 1.3, 2.5], Cmp::AtMost, 2.0, Over::Each);
        assert_eq!(f.status_text(), "≤ 2.00×: met in 2 of 3");
        assert_eq!(f.measured(), "1.30× [1.10–2.50×] (3 rounds)");
        let f = fig(vec![1.1, 1.3], Cmp::AtMost, 2.0, Over::Each);
        assert_eq!(f.status_text(), "≤ 2.00×: **met**");
        let f = fig(vec![3.0, 4.0], Cmp::AtMost, 2.0, Over::Each);
        assert_eq!(f.status_text(), "≤ 2.00×: **not met**");
        // The median meets it though one slice does not.
        let f = fig(vec![0.93, 0.96, 0.97], Cmp::AtLeast, 0.95, Over::Median);
        assert_eq!(f.status_text(), "≥ 0.95× (median): **met**");
        let f = fig(vec![0.93, 0.94, 0.97], Cmp::AtLeast, 0.95, Over::Median);
        assert_eq!(f.status_text(), "≥ 0.95× (median): **not met**");
        // A round not measured is neither met nor missed.
        let f = fig(vec![f64::NAN, 1.0], Cmp::AtMost, 2.0, Over::Each);
        assert_eq!(f.status_text(), "≤ 2.00×: **met**");
        assert_eq!(f.measured(), "1.00× (1 round)");
        let f = fig(vec![f64::NAN], Cmp::AtMost, 2.0, Over::Each);
        assert_eq!(f.status_text(), "≤ 2.00×: not measured");
        // Loss goals: "< 0.1 %", and "≤ 0" with a zero.
        let f = Figure::new("l", Unit::Pct, "round", vec![0.0, 0.135, 0.0]).goal(
            Cmp::Below,
            0.1,
            Over::Each,
        );
        assert_eq!(f.status_text(), "< 0.100 %: met in 2 of 3");
        let f = Figure::new("c", Unit::Count, "point", vec![1.0, 0.0, 1.0]).goal(
            Cmp::AtLeast,
            1.0,
            Over::Each,
        );
        assert_eq!(f.measured(), "2 of 3 points");
        assert_eq!(f.status_text(), "every one: met in 2 of 3");
    }

    #[test]
    fn stored_results_round_trip_with_missing_values() {
        let r = TopicResult {
            topic: "t".into(),
            command: "llrouter testbed run".into(),
            date: "2026-11-30".into(),
            secs: 12.0,
            runs: 1,
            machine: Machine {
                cores: 2,
                kernel: "6.18".into(),
                steal_pct: f64::NAN,
            },
            figures: vec![fig(vec![1.0, f64::NAN], Cmp::AtMost, 2.0, Over::Each).readme()],
            detail: "| a |\n".into(),
        };
        let text = toml::to_string(&r).unwrap();
        let back: TopicResult = toml::from_str(&text).unwrap();
        assert_eq!(back.figures[0].values[0], 1.0);
        assert!(back.figures[0].values[1].is_nan());
        assert!(back.machine.steal_pct.is_nan());
        assert_eq!(render_block(&back), render_block(&r));
        assert_eq!(render_readme(&[back]), render_readme(&[r]));
    }

    #[test]
    fn splice_replaces_between_the_markers_and_names_a_missing_one() {
        let doc = "a\n<!-- results:x -->\nold\n<!-- /results:x -->\nb\n";
        assert_eq!(
            splice(doc, "x", "new\n").unwrap(),
            "a\n<!-- results:x -->\nnew\n<!-- /results:x -->\nb\n"
        );
        assert!(splice(doc, "y", "").unwrap_err().contains("results:y"));
    }

    #[test]
    fn every_topic_parses_as_the_testbed_parses_it() {
        for t in TOPICS {
            assert!(t.study(PathBuf::from("/tmp/x")).is_ok(), "{}", t.name);
            let c = t.command();
            let root = c.starts_with("llrouter testbed ")
                || c.starts_with("bash scripts/ab.sh")
                || c.starts_with("bash scripts/listing-scale.sh");
            assert!(root == t.needs_root(), "{}", t.name);
        }
    }

    /// The simulated topics run as `llrouter results` runs them, several lines included, and
    /// their goals hold: the scheduler keeps paper 000's bound and the demo's result (a change
    /// that broke ll-wfq's protection of RT fails here, not only in the next results run).
    #[test]
    fn simulated_topics_run_and_meet_their_goals() {
        let out = std::env::temp_dir().join(format!("llr-results-sim-{}", std::process::id()));
        for name in ["tmax", "demo-sim"] {
            let t = topic(name).expect(name);
            assert!(!t.needs_root());
            let r = t
                .run(
                    Path::new("."),
                    &out,
                    2,
                    &AtomicBool::new(false),
                    &crate::NoProgress,
                )
                .expect(name);
            assert_eq!(r.runs, 1, "{name}: deterministic, one run");
            let goals: Vec<&Figure> = r.figures.iter().filter(|f| f.goal.is_some()).collect();
            assert!(goals.len() >= 2, "{name}: {:?}", r.figures);
            for f in goals {
                assert!(
                    f.status_text().ends_with("**met**"),
                    "{name}: {} — {}: {}",
                    f.what,
                    f.measured(),
                    f.status_text()
                );
            }
            assert!(!r.detail.trim().is_empty(), "{name}: no table");
        }
        let _ = std::fs::remove_dir_all(&out);
    }

    #[test]
    fn runs_are_kept_apart_and_compared() {
        let mut f = Figure::new("x", Unit::Ratio, "round", vec![1.0, 1.1, 1.2]);
        f.add_run(&Figure::new("x", Unit::Ratio, "round", vec![1.1, 1.2, 1.3]));
        assert_eq!(f.runs, vec![3, 3]);
        assert_eq!(f.run_medians(), vec![1.1, 1.2]);
        assert_eq!(f.reproduced(), Some(true));
        assert_eq!(
            f.measured(),
            "1.15× [1.00–1.30×] (6 rounds); run medians 1.10 / 1.20"
        );
        f.add_run(&Figure::new("x", Unit::Ratio, "round", vec![2.0]));
        assert_eq!(f.reproduced(), Some(false));
        assert!(f
            .measured()
            .ends_with("run medians 1.10 / 1.20 / 2.00, **not reproduced** within 15 %"));
        // One value a run: no list of run medians, the verdict still.
        let mut b = Figure::new("b", Unit::Ns, "run", vec![15.4]);
        b.add_run(&Figure::new("b", Unit::Ns, "run", vec![22.7]));
        assert_eq!(
            b.measured(),
            "19.1 ns [15.4–22.7 ns] (2 runs), **not reproduced** within 15 %"
        );
        // No loss in either run agrees; none against some does not.
        let mut l = Figure::new("l", Unit::Pct, "round", vec![0.0, 0.0]);
        l.add_run(&Figure::new("l", Unit::Pct, "round", vec![0.0]));
        assert_eq!(l.reproduced(), Some(true));
        l.add_run(&Figure::new("l", Unit::Pct, "round", vec![0.2]));
        assert_eq!(l.reproduced(), Some(false));
    }

    /// The paper's stated values against ours, a point the run lacks is not a pass, and a claim
    /// that fails is counted, not hidden.
    #[test]
    fn paper_001_is_held_to_the_values_it_states() {
        use crate::paper::{Results, Stat};
        let stats = (p001::PAPER.iter().skip(1))
            .map(|v| Stat {
                figure: v.figure.into(),
                series: v.series.into(),
                class: v.class.into(),
                x: v.x,
                mean_us: v.us * 1.02,
                ci95_us: 0.1,
                replications: 10,
                loss_pct: 0.0,
            })
            .collect();
        let claim = |holds| Claim {
            figure: "5",
            statement: "s",
            check: "c | d".into(),
            holds,
        };
        let o = Outcome::Paper001(p001::Outcome {
            results: Results { stats },
            claims: vec![claim(true), claim(false), claim(true)],
            shares: Vec::new(),
            simulations: 1,
            packets: 1,
        });
        let f = reduce_paper001(&o);
        assert!(f[0].values[0].is_nan());
        for v in &f[0].values[1..] {
            assert!((v - 2.0).abs() < 1e-9, "{v}");
        }
        assert_eq!(f[0].status_text(), "≤ 1.00 %: **not met**");
        assert_eq!(f[1].measured(), "2 of 3 claims");
        assert_eq!(f[1].status_text(), "every one: met in 2 of 3");
        // A `|` in a check must not split the detail's table row.
        assert!(detail(&o).contains("c \\| d"));
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(20_422), "2025-11-30");
        assert_eq!(civil_date(11_016), "2000-02-29");
    }

    fn row(target: &str, round: u32, offered: f64, p99: f64, loss: f64) -> Row {
        Row {
            target: target.into(),
            round,
            rt_share: 0.3,
            offered_pps: offered,
            rt_p99_us: p99,
            loss_rt: loss,
            ..Row::default()
        }
    }

    #[test]
    fn overload_figures_are_taken_within_each_round() {
        let mut rows = Vec::new();
        let mut mlffrs = Vec::new();
        for rd in 1..=2 {
            for (t, m, p_lo, p_hi) in [
                (KERNEL, 400e3, 100.0, 1200.0),
                (SQ, 500e3, 50.0, 1000.0),
                (WFQ, 480e3, 40.0, 60.0 + rd as f64 * 10.0),
            ] {
                mlffrs.push(Mlffr {
                    target: t.into(),
                    round: rd,
                    pps: m,
                    gen_limited: false,
                });
                rows.push(row(
                    t,
                    rd,
                    1.5 * m,
                    p_hi,
                    if rd == 2 && t == WFQ { 0.002 } else { 0.0 },
                ));
                rows.push(row(t, rd, 0.5 * m, p_lo, 0.0));
            }
        }
        let o = Outcome::Sweep(
            SweepOutcome {
                rows,
                mlffrs,
                ..SweepOutcome::default()
            },
            vec![0.3],
        );
        let f = reduce_overload(&o);
        let by = |w: &str| f.iter().find(|x| x.what == w).unwrap();
        assert_eq!(
            by("RT loss, ll-wfq at 1.5× its MLFFR").values,
            vec![0.0, 0.2]
        );
        assert_eq!(
            by("RT loss, ll-wfq at 1.5× its MLFFR").status_text(),
            "< 0.100 %: met in 1 of 2"
        );
        assert_eq!(
            by("RT p99 growth 0.5× → 1.5× MLFFR, ll-wfq").values,
            vec![70.0 / 40.0, 80.0 / 40.0]
        );
        assert_eq!(by("the same, sq").values, vec![20.0, 20.0]);
        assert_eq!(by("MLFFR, ll-wfq ÷ sq").values, vec![0.96, 0.96]);
        assert_eq!(
            by("RT p99 at 1.5× MLFFR, sq ÷ ll-wfq").values,
            vec![1000.0 / 70.0, 1000.0 / 80.0]
        );
        // No reference point was measured: not measured, not a pass.
        assert!(f
            .iter()
            .find(|x| x.what.contains("reference"))
            .unwrap()
            .status_text()
            .ends_with("not measured"));
    }
}
