//! The settings of `llrouter sim sweep` and `llrouter sim ramp`, and the runs they expand to.

use std::path::PathBuf;

use llr_core::error::FieldError;
use llr_core::sched::{Budget, ClassBudget, StrategyKind};

use crate::args::{values, SimArgs};
use crate::sweep::SweepPoint;
use crate::SimConfig;

/// The parameter a sweep varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SweepParam {
    /// Share of RT traffic (classes rt and be).
    RtShare,
    /// Offered load relative to capacity.
    Utilization,
    /// Time slice Δt in µs.
    TimeSlice,
    /// The lowest class's ring budget in packets.
    Budget,
    /// Number of cores, at a fixed offered load per core (--utilization) and a fixed number of
    /// flows (--flows); --packets is offered per core, so every point spans the same time.
    Cores,
}

impl SweepParam {
    /// The name on the command line and in results.csv.
    pub fn name(self) -> &'static str {
        match self {
            SweepParam::RtShare => "rt-share",
            SweepParam::Utilization => "utilization",
            SweepParam::TimeSlice => "time-slice",
            SweepParam::Budget => "budget",
            SweepParam::Cores => "cores",
        }
    }

    pub fn default_values(self) -> &'static str {
        match self {
            SweepParam::RtShare => "0:1:0.05",
            SweepParam::Utilization => "0.1:1.5:0.1",
            SweepParam::TimeSlice => "10,25,50,100,200,400",
            SweepParam::Budget => "1,2,4,8,16,32,64",
            SweepParam::Cores => "1,2,4,8,16",
        }
    }

    pub fn axis_label(self) -> &'static str {
        match self {
            SweepParam::RtShare => "RT share",
            SweepParam::Utilization => "offered load / capacity",
            SweepParam::TimeSlice => "time slice Δt (µs)",
            SweepParam::Budget => "lowest class's ring budget (packets)",
            SweepParam::Cores => "cores",
        }
    }

    /// Sets this parameter to `v` in `args`.
    pub fn apply(self, args: &mut SimArgs, v: f64) -> Result<(), FieldError> {
        match self {
            SweepParam::RtShare => {
                args.classes.clear();
                args.rt_share = Some(v);
            }
            SweepParam::Utilization => {
                args.rate_pps = None;
                args.utilization = Some(v);
            }
            SweepParam::TimeSlice => args.time_slice_us = v,
            SweepParam::Cores => {
                if !((1.0..=1024.0).contains(&v) && v.fract() == 0.0) {
                    return Err(FieldError::new(
                        "values",
                        format!("{v}: a number of cores is a whole number within 1–1024"),
                    ));
                }
                args.cores = Some(v as usize);
                // The same simulated time span at every core count: packets per core.
                args.packets = args.packets.saturating_mul(v as u64);
            }
            SweepParam::Budget => {
                let b = budget_value(v)?;
                let cfg = args.to_config()?;
                let low = cfg.sched.classes.last().expect("classes").name.clone();
                args.budgets.retain(|b| b.class != low);
                args.budgets.push(ClassBudget {
                    class: low,
                    value: b,
                });
            }
        }
        Ok(())
    }
}

/// A swept ring budget: a whole number of packets ≥ 1.
fn budget_value(v: f64) -> Result<Budget, FieldError> {
    let n = (v >= 1.0 && v <= u32::MAX as f64 && v.fract() == 0.0)
        .then(|| Budget::packets(v as u32))
        .flatten();
    n.ok_or_else(|| {
        FieldError::new(
            "values",
            format!("{v}: a ring budget is a whole number of packets ≥ 1"),
        )
    })
}

/// `llrouter sim sweep`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SweepArgs {
    /// Parameter to vary.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = SweepParam::RtShare))]
    pub param: SweepParam,
    /// Values: a,b,c or start:stop:step (inclusive). Default depends on --param.
    #[cfg_attr(feature = "clap", arg(long))]
    pub values: Option<String>,
    /// Strategies to compare, comma separated (a sweep takes no --strategy).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ',', value_parser = crate::args::parse_strategy, default_value = "sq,rr,ll-rr,ll-wfq"))]
    pub strategies: Vec<StrategyKind>,
    /// Output directory for results.csv and the plots.
    #[cfg_attr(feature = "clap", arg(long, default_value = "results/sim-sweep"))]
    pub out: PathBuf,
    /// Worker threads (default: all cores).
    #[cfg_attr(feature = "clap", arg(long))]
    pub jobs: Option<usize>,
    /// Do not draw a progress bar.
    #[cfg_attr(feature = "clap", arg(long))]
    pub quiet: bool,
    /// Also find every point's loss-free capacity: the highest offered load with total loss
    /// ≤ --loss-tolerance, by bisection (11 runs per point); written to capacity.csv.
    #[cfg_attr(feature = "clap", arg(long))]
    pub capacity: bool,
    /// Loss allowed at the capacity found by --capacity, in percent of the offered packets.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.1))]
    pub loss_tolerance: f64,
    /// The simulation parameters held fixed (with --json: print the rows as JSON instead of
    /// the summary; results.csv and the plots are written either way).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub base: SimArgs,
}

impl SweepArgs {
    /// Checks the settings and builds every point (strategy × value) before any runs, so that
    /// a bad one costs no CPU.
    pub fn points(&self) -> Result<Vec<SweepPoint>, FieldError> {
        if let Some(st) = self.base.strategy {
            return Err(FieldError::new(
                "strategy",
                format!("a sweep compares --strategies (comma separated), e.g. --strategies {st}; --strategy is for a single `llrouter sim`"),
            ));
        }
        // A fixed value of what --param varies would be replaced without a word.
        let b = &self.base;
        let fixed = match self.param {
            SweepParam::Utilization if b.utilization.is_some() => Some("utilization"),
            SweepParam::Utilization if b.rate_pps.is_some() => Some("rate-pps"),
            SweepParam::RtShare if b.rt_share.is_some() => Some("rt-share"),
            SweepParam::RtShare if !b.classes.is_empty() => Some("classes"),
            SweepParam::Cores if b.cores.is_some() => Some("cores"),
            _ => None,
        };
        if let Some(flag) = fixed {
            return Err(FieldError::new(
                flag,
                format!(
                    "--param {} varies it over --values; give one or the other",
                    self.param.name()
                ),
            ));
        }
        if !(self.loss_tolerance >= 0.0 && self.loss_tolerance < 100.0) {
            return Err(FieldError::new(
                "loss-tolerance",
                format!(
                    "{}: a percentage of the offered packets within [0, 100)",
                    self.loss_tolerance
                ),
            ));
        }
        let vals = values(
            "values",
            self.values
                .as_deref()
                .unwrap_or(self.param.default_values()),
        )?;
        if self.strategies.is_empty() {
            return Err(FieldError::new("strategies", "is empty"));
        }
        let mut points = Vec::new();
        for st in &self.strategies {
            for &v in &vals {
                let mut a = self.base.clone();
                a.strategy = Some(*st);
                self.param.apply(&mut a, v)?;
                if self.param == SweepParam::Budget && *st == StrategyKind::LlRr {
                    // ll-rr has one budget for every ring: vary them together.
                    if a.to_config().is_err() {
                        let b = budget_value(v.round())?;
                        a.budgets = (self.base.to_config()?.sched.classes.iter())
                            .map(|c| ClassBudget {
                                class: c.name.clone(),
                                value: b,
                            })
                            .collect();
                    }
                }
                points.push(SweepPoint {
                    strategy: *st,
                    value: v,
                    config: a.to_config()?,
                });
            }
        }
        Ok(points)
    }
}

/// `llrouter sim ramp`.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct RampArgs {
    /// The RT share of each phase, in order (each phase offers --packets packets).
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "0.1,0.2,0.3,0.4,0.5,0.6")
    )]
    pub rt_shares: Vec<f64>,
    /// The simulation parameters (without --rt-share or --classes).
    #[cfg_attr(feature = "clap", command(flatten))]
    pub base: SimArgs,
}

impl RampArgs {
    /// The configuration of the first phase and every phase's class shares.
    pub fn phases(&self) -> Result<(SimConfig, Vec<Vec<f64>>), FieldError> {
        if !self.base.classes.is_empty() || self.base.rt_share.is_some() {
            return Err(FieldError::new(
                "rt-shares",
                "the phases set the RT share; drop --classes / --rt-share",
            ));
        }
        if self.rt_shares.is_empty() {
            return Err(FieldError::new("rt-shares", "give at least one share"));
        }
        if let Some(v) = self.rt_shares.iter().find(|v| !(0.0..=1.0).contains(*v)) {
            return Err(FieldError::new("rt-shares", format!("{v} is outside 0–1")));
        }
        let mut base = self.base.clone();
        base.rt_share = Some(self.rt_shares[0]);
        let phases = self.rt_shares.iter().map(|&v| vec![v, 1.0 - v]).collect();
        Ok((base.to_config()?, phases))
    }
}
