//! `llrouter sim`, `llrouter sim sweep` and `llrouter sim flows`: the discrete-event simulator
//! from the command line.

use crate::cli_util::{parse_pairs, parse_values, table, us, usage, UsageError};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use llr_core::sched::{ClassSpec, SchedConfig, StrategyKind};
use llr_lab::plot;
use llr_sim::sweep::{offered_load, Capacity, SweepPoint, SweepRow};
use llr_sim::{Arrivals, Rate, ServiceDist, ServiceModel, SimConfig, SimResult, Steering};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimCmd {
    #[command(subcommand)]
    pub sub: Option<SimSub>,
    #[command(flatten)]
    pub args: SimArgs,
}

#[derive(Subcommand, Debug, Clone)]
pub enum SimSub {
    /// Vary one parameter over several strategies; write results.csv and PNG plots.
    Sweep(Box<SweepArgs>),
    /// Flow-based element pipelines (paper 003): the flow scheduler and its elements on
    /// simulated traffic, per flow CPU share, latency and drops.
    Flows(FlowsArgs),
    /// One run whose RT share moves phase by phase (classes rt and be): how the scheduler,
    /// and `--budgets be=auto` with its target, follow a changing mix.
    Ramp(Box<RampArgs>),
}

/// `llrouter sim ramp`.
#[derive(Args, Debug, Clone)]
pub struct RampArgs {
    /// The RT share of each phase, in order (each phase offers --packets packets).
    #[arg(long, value_delimiter = ',', default_value = "0.1,0.2,0.3,0.4,0.5,0.6")]
    pub rt_shares: Vec<f64>,
    /// The simulation parameters (without --rt-share or --classes).
    #[command(flatten)]
    pub base: SimArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum OnOff {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ArrivalKind {
    Poisson,
    Cbr,
    Onoff,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum DistKind {
    /// Every packet takes the mean service time (paper 001).
    Det,
    /// Exponentially distributed service times.
    Exp,
}

/// A strategy name as a typed option value (clap then reports a bad one as a usage error).
pub fn parse_strategy(s: &str) -> Result<StrategyKind, String> {
    s.parse::<StrategyKind>().map_err(|e| e.reason)
}

/// A steering name as a typed option value.
pub fn parse_steering(s: &str) -> Result<Steering, String> {
    s.parse::<Steering>().map_err(|e| e.reason)
}

/// Largest `--utilization`: beyond 10× the capacity more than 90 % of the packets are dropped
/// and the run shows the drop policy, not the scheduler.
pub const MAX_UTILIZATION: f64 = 10.0;

/// Checks an offered load relative to capacity; the reason says what is allowed and why.
pub fn check_utilization(u: f64) -> anyhow::Result<()> {
    if !u.is_finite() {
        return Err(usage(
            "utilization",
            format!("`{u}` is not a finite number; give the offered load relative to the cores' capacity, within (0, {MAX_UTILIZATION}]"),
        ));
    }
    if u <= 0.0 {
        return Err(usage(
            "utilization",
            format!("{u}: must be greater than 0 (no traffic offered)"),
        ));
    }
    if u > MAX_UTILIZATION {
        return Err(usage(
            "utilization",
            format!(
                "{u}: at most {MAX_UTILIZATION} (1 is saturation, above 1 is overload; beyond \
                 {MAX_UTILIZATION}× more than 90 % of the packets would be dropped and the run \
                 would show the drop policy, not the scheduler)"
            ),
        ));
    }
    Ok(())
}

/// Most flows `--flow-pps` may ask for (the simulator keeps a table entry per flow).
const MAX_FLOWS: usize = 10_000_000;

/// Parameters of one simulation.
#[derive(Args, Debug, Clone)]
pub struct SimArgs {
    /// Scheduling strategy (default ll-wfq): sq, rr, ll-rr, ll-wfq, fcfs, prio, rr-slice, wfq,
    /// ll-rr-slice, ll-wfq-slice.
    #[arg(long, value_parser = parse_strategy)]
    pub strategy: Option<StrategyKind>,
    /// Number of cores (default 1); flows are hashed to cores, each core runs its own poll
    /// engine.
    #[arg(long)]
    pub cores: Option<usize>,
    /// How packets reach a core's rings: rss (the flow hash picks the core's queue, a
    /// classifier splits it into the core's class rings: paper 001, Fig. 2; live `xdp`) or
    /// class (a hardware queue per core and class, core·classes + class: live `queues` /
    /// `ntuple`). The same hash and engine: the same results for a strategy with a ring per
    /// class; sq has no layout under class.
    #[arg(long, value_parser = parse_steering, default_value = "rss")]
    pub steering: Steering,
    /// Traffic classes with their shares, highest priority first: hi=0.2,mid=0.3,lo=0.5.
    #[arg(long, conflicts_with = "rt_share")]
    pub classes: Option<String>,
    /// Shorthand for --classes rt=S,be=1-S.
    #[arg(long)]
    pub rt_share: Option<f64>,
    /// Offered load relative to the capacity of all cores, within (0, 10]: 1.0 = saturation,
    /// above 1 = overload (the excess is dropped at the rings).
    #[arg(long, conflicts_with = "rate_pps")]
    pub utilization: Option<f64>,
    /// Offered load in packets per second.
    #[arg(long)]
    pub rate_pps: Option<f64>,
    /// Frame size in bytes (service time x = a·S + b + c).
    #[arg(long, default_value_t = 128)]
    pub packet_size: u32,
    /// Fixed mean service time in ns, overriding the calibration.
    #[arg(long)]
    pub service_ns: Option<f64>,
    /// Calibration override as a,b,c (ns/B, ns, ns); default 2.34,272.47,225.18 (paper 001).
    #[arg(long)]
    pub calibration: Option<String>,
    /// Service time distribution.
    #[arg(long, value_enum, default_value_t = DistKind::Det)]
    pub service_dist: DistKind,
    /// Fixed CPU cost of a grant in ns, on top of each frame's service time (the live
    /// worker's per-grant work; `llrouter_ring_grant_seconds_total` ÷ grants against frames
    /// per grant calibrates it).
    #[arg(long, default_value_t = 0.0)]
    pub grant_ns: f64,
    /// Frames per grant at most (the live worker's `batch`; 0: the engine's allowance only).
    #[arg(long, default_value_t = 0)]
    pub max_grant: u32,
    /// Fixed CPU cost of a transmit flush in ns, charged after the grants the live worker
    /// flushes after (every grant of a higher ring; the lowest ring's once --tx-batch frames
    /// wait; when out of work). `llrouter_ring_tx_flushes_total` calibrates it.
    #[arg(long, default_value_t = 0.0)]
    pub flush_ns: f64,
    /// CPU cost per frame a flush hands to the kernel, ns (the transmit part of a frame's cost;
    /// --service-ns is then the receive part). `llrouter_ring_tx_flush_seconds_total` and
    /// `llrouter_ring_tx_flushed_frames_total` calibrate it.
    #[arg(long, default_value_t = 0.0)]
    pub flush_frame_ns: f64,
    /// Frames of the lowest ring that wait for one flush (the router's `tx-batch`).
    #[arg(long, default_value_t = 16)]
    pub tx_batch: u32,
    /// µs a higher ring's frames may wait for --tx-batch frames before a flush of their own
    /// (the router's `tx-hold-us`).
    #[arg(long, default_value_t = llr_core::sched::TxPolicy::DEFAULT_HOLD_US)]
    pub tx_hold_us: u32,
    /// Add paper 001's extra latency T+ = 4·T_DMA + 2·8·x to every packet.
    #[arg(long, value_enum, default_value_t = OnOff::Off)]
    pub extra_latency: OnOff,
    /// Slots per ring.
    #[arg(long, default_value_t = 512)]
    pub ring_size: usize,
    /// Device budget (NAPI weight), packets per turn on the poll list.
    #[arg(long, default_value_t = 64)]
    pub device_budget: u32,
    /// Ring budgets per class in packets, e.g. rt=60,be=4; `auto` (be=auto, ll-wfq) lets
    /// paper 000's Eq. 2 set the class's budget from the measured RT load, towards
    /// --auto-target-us or --auto-service-times.
    #[arg(long)]
    pub budgets: Option<String>,
    /// `budget = "auto"`: the RT class's time in its ring within this many µs.
    #[arg(long, conflicts_with = "auto_service_times")]
    pub auto_target_us: Option<f64>,
    /// `budget = "auto"`: the RT class's time in its ring within m service times (T* = m·x).
    #[arg(long)]
    pub auto_service_times: Option<u32>,
    /// `budget = "auto"`: how long each measurement of ρRT and x runs, ms of simulated time.
    #[arg(long, default_value_t = 100)]
    pub auto_window_ms: u64,
    /// Weights per class for wfq / ll-wfq-slice, e.g. rt=3,be=1.
    #[arg(long)]
    pub weights: Option<String>,
    /// Time slice Δt in µs for the time-slice strategies.
    #[arg(long, default_value_t = 50.0)]
    pub time_slice_us: f64,
    /// CPU cost of one wake-up (interrupt) in ns; 0 is the pure queueing model.
    #[arg(long, default_value_t = 0.0)]
    pub wakeup_cost_ns: f64,
    /// Arrival process of every class.
    #[arg(long, value_enum, default_value_t = ArrivalKind::Poisson)]
    pub arrivals: ArrivalKind,
    /// Mean on and off periods in µs for --arrivals onoff, as ON,OFF.
    #[arg(long, default_value = "100,100")]
    pub onoff_us: String,
    /// Flows in total, hashed to cores.
    #[arg(long, default_value_t = 64)]
    pub flows: usize,
    /// Instead of --flows: flows of this many packets/s each, as many as the offered load
    /// needs (paper 001's video flows: ~410 pkt/s). The count then grows with the load and
    /// the cores, so the flow hash evens out as it does on a real router.
    #[arg(long, conflicts_with = "flows")]
    pub flow_pps: Option<f64>,
    /// Packets offered in total.
    #[arg(long, default_value_t = 1_000_000)]
    pub packets: u64,
    /// Seed of the random number generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The parameter a sweep varies.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
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

    fn default_values(self) -> &'static str {
        match self {
            SweepParam::RtShare => "0:1:0.05",
            SweepParam::Utilization => "0.1:1.5:0.1",
            SweepParam::TimeSlice => "10,25,50,100,200,400",
            SweepParam::Budget => "1,2,4,8,16,32,64",
            SweepParam::Cores => "1,2,4,8,16",
        }
    }

    fn axis_label(self) -> &'static str {
        match self {
            SweepParam::RtShare => "RT share",
            SweepParam::Utilization => "offered load / capacity",
            SweepParam::TimeSlice => "time slice Δt (µs)",
            SweepParam::Budget => "lowest class's ring budget (packets)",
            SweepParam::Cores => "cores",
        }
    }
}

/// `llrouter sim sweep`.
#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// Parameter to vary.
    #[arg(long, value_enum, default_value_t = SweepParam::RtShare)]
    pub param: SweepParam,
    /// Values: a,b,c or start:stop:step (inclusive). Default depends on --param.
    #[arg(long)]
    pub values: Option<String>,
    /// Strategies to compare, comma separated (a sweep takes no --strategy).
    #[arg(long, value_delimiter = ',', value_parser = parse_strategy, default_value = "sq,rr,ll-rr,ll-wfq")]
    pub strategies: Vec<StrategyKind>,
    /// Output directory for results.csv and the plots.
    #[arg(long, default_value = "results/sim-sweep")]
    pub out: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Do not draw a progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Also find every point's loss-free capacity: the highest offered load with total loss
    /// ≤ --loss-tolerance, by bisection (11 runs per point); written to capacity.csv.
    #[arg(long)]
    pub capacity: bool,
    /// Loss allowed at the capacity found by --capacity, in percent of the offered packets.
    #[arg(long, default_value_t = 0.1)]
    pub loss_tolerance: f64,
    /// The simulation parameters held fixed (with --json: print the rows as JSON instead of
    /// the summary; results.csv and the plots are written either way).
    #[command(flatten)]
    pub base: SimArgs,
}

impl SimArgs {
    /// Builds the simulation configuration; errors name the flag.
    pub fn to_config(&self) -> anyhow::Result<SimConfig> {
        let strategy = self.strategy.unwrap_or(StrategyKind::LlWfq);
        let shares: Vec<(String, f64)> = match (&self.classes, self.rt_share) {
            (Some(c), _) => parse_pairs("classes", c)?,
            (None, Some(s)) => {
                if !(0.0..=1.0).contains(&s) {
                    return Err(usage("rt-share", format!("{s} is outside 0–1")));
                }
                vec![("rt".into(), s), ("be".into(), 1.0 - s)]
            }
            (None, None) => vec![("rt".into(), 0.3), ("be".into(), 0.7)],
        };
        let mut classes: Vec<ClassSpec> = shares
            .iter()
            .map(|(n, _)| ClassSpec::named(n.clone()))
            .collect();
        let lookup = |flag: &str, name: &str| -> anyhow::Result<usize> {
            shares.iter().position(|(n, _)| n == name).ok_or_else(|| {
                usage(
                    flag,
                    format!(
                        "class `{name}` is not one of the classes ({})",
                        shares
                            .iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
        };
        if let Some(b) = &self.budgets {
            let pairs: Vec<(String, String)> = parse_pairs("budgets", b)?;
            for (name, v) in pairs {
                let c = &mut classes[lookup("budgets", &name)?];
                if v == "auto" {
                    c.auto_budget = true;
                } else {
                    c.budget = Some(v.parse::<u32>().map_err(|e| {
                        usage(
                            "budgets",
                            format!("`{name}`: `{v}`: {e} (a number of packets or auto)"),
                        )
                    })?);
                }
            }
        }
        let auto_budget = match (self.auto_target_us, self.auto_service_times) {
            (None, None) => None,
            (us, m) => Some(
                llr_core::sched::AutoBudgetSpec::new(us, m, self.auto_window_ms)
                    .map_err(|e| usage(&format!("auto-{}", e.field), e.reason))?,
            ),
        };
        if let Some(w) = &self.weights {
            let pairs: Vec<(String, u32)> = parse_pairs("weights", w)?;
            for (name, v) in pairs {
                classes[lookup("weights", &name)?].weight = Some(v);
            }
        }
        if !(self.time_slice_us > 0.0 && self.time_slice_us.is_finite()) {
            return Err(usage(
                "time-slice-us",
                format!("{}; must be greater than 0", self.time_slice_us),
            ));
        }
        let sched = SchedConfig {
            strategy,
            classes,
            device_budget: self.device_budget,
            time_slice_ns: (self.time_slice_us * 1000.0).round() as u64,
            auto_budget,
        };
        let rate = match (self.utilization, self.rate_pps) {
            (Some(u), _) => {
                check_utilization(u)?;
                Rate::Utilization(u)
            }
            (None, Some(p)) if !(p.is_finite() && p > 0.0) => {
                return Err(usage(
                    "rate-pps",
                    format!("`{p}`: must be a finite number of packets per second, > 0"),
                ))
            }
            (None, Some(p)) => Rate::Pps(p),
            (None, None) => Rate::Utilization(0.8),
        };
        let mut service = ServiceModel {
            override_ns: self.service_ns,
            dist: match self.service_dist {
                DistKind::Det => ServiceDist::Deterministic,
                DistKind::Exp => ServiceDist::Exponential,
            },
            grant_ns: self.grant_ns,
            max_grant: self.max_grant,
            flush_ns: self.flush_ns,
            flush_frame_ns: self.flush_frame_ns,
            tx_batch: self.tx_batch,
            tx_hold_ns: u64::from(self.tx_hold_us) * 1000,
            ..ServiceModel::default()
        };
        for (field, v) in [
            ("grant-ns", self.grant_ns),
            ("flush-ns", self.flush_ns),
            ("flush-frame-ns", self.flush_frame_ns),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(usage(field, format!("{v}: must be 0 or more ns")));
            }
        }
        if self.tx_batch == 0 {
            return Err(usage(
                "tx-batch",
                "0: must be at least 1 frame (as in the router's config)",
            ));
        }
        if let Some(cal) = &self.calibration {
            let v = parse_values("calibration", cal)?;
            if v.len() != 3 || v.iter().any(|x| *x < 0.0) {
                return Err(usage(
                    "calibration",
                    "expects three non-negative numbers a,b,c",
                ));
            }
            (service.a_ns_per_byte, service.b_ns, service.c_ns) = (v[0], v[1], v[2]);
        }
        if let Some(s) = self.service_ns {
            if !(s > 0.0 && s.is_finite()) {
                return Err(usage("service-ns", format!("{s}; must be greater than 0")));
            }
        }
        let arrivals = match self.arrivals {
            ArrivalKind::Poisson => Arrivals::Poisson,
            ArrivalKind::Cbr => Arrivals::Cbr,
            ArrivalKind::Onoff => {
                let v = parse_values("onoff-us", &self.onoff_us)?;
                if v.len() != 2 || v[0] <= 0.0 || v[1] < 0.0 {
                    return Err(usage(
                        "onoff-us",
                        "expects ON,OFF in µs with ON > 0 and OFF ≥ 0",
                    ));
                }
                Arrivals::OnOff {
                    on_ns: v[0] * 1000.0,
                    off_ns: v[1] * 1000.0,
                }
            }
        };
        let mut cfg = SimConfig {
            sched,
            shares: shares.iter().map(|(_, s)| *s).collect(),
            cores: self.cores.unwrap_or(1),
            steering: self.steering,
            flows: self.flows,
            rate,
            packet_size: self.packet_size,
            service,
            extra_latency: self.extra_latency == OnOff::On,
            ring_size: self.ring_size,
            wakeup_cost_ns: self.wakeup_cost_ns,
            arrivals,
            packets: self.packets,
            seed: self.seed,
        };
        if let Some(f) = self.flow_pps {
            // The rate must be valid before it can count the flows.
            cfg.validate()
                .map_err(|llr_sim::SimError::Config(e)| UsageError::from(e))?;
            if !(f.is_finite() && f > 0.0) {
                return Err(usage(
                    "flow-pps",
                    format!("`{f}`: must be a finite number of packets per second, > 0"),
                ));
            }
            // The flow table is one entry per flow: bound it far above any realistic count.
            let flows = (cfg.offered_pps() / f).ceil();
            if flows > MAX_FLOWS as f64 {
                return Err(usage(
                    "flow-pps",
                    format!(
                        "{f} pkt/s per flow needs {flows:.0} flows for {:.0} pkt/s; at most \
                         {MAX_FLOWS}",
                        cfg.offered_pps()
                    ),
                ));
            }
            cfg.flows = (flows as usize).max(1);
        }
        cfg.validate()
            .map_err(|llr_sim::SimError::Config(e)| UsageError::from(e))?;
        Ok(cfg)
    }
}

/// The JSON object of one result, in the documented shape.
pub fn result_json(r: &SimResult, events_per_sec: Option<f64>) -> Value {
    let mut classes = Map::new();
    for c in &r.classes {
        classes.insert(
            c.name.clone(),
            serde_json::to_value(c).expect("serialisable"),
        );
    }
    let mut v = json!({
        "classes": classes,
        "utilization": r.utilization,
        "offered_load": offered_load(r, r.core_utilization.len()),
        "core_utilization": r.core_utilization,
        "wakeups_per_sec": r.wakeups_per_sec,
        "offered_pps": r.offered_pps,
        "service_ns": r.service_ns,
        "sim_time_ns": r.sim_time_ns,
        "budget_exhaustions": r.budget_exhaustions,
        "steering": r.steering,
        "per_core": r.per_core,
    });
    if let Some(e) = events_per_sec {
        v["events_per_sec"] = json!(e);
    }
    v
}

/// Per-class table of a result.
pub fn result_table(r: &SimResult) -> String {
    let rows: Vec<Vec<String>> = r
        .classes
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.sent.to_string(),
                c.delivered.to_string(),
                c.dropped.to_string(),
                format!(
                    "{:.2}",
                    if c.sent == 0 {
                        0.0
                    } else {
                        100.0 * c.dropped as f64 / c.sent as f64
                    }
                ),
                us(c.mean_ns),
                us(c.p50_ns as f64),
                us(c.p99_ns as f64),
                us(c.p999_ns as f64),
                us(c.max_ns as f64),
            ]
        })
        .collect();
    table(
        &[
            "class",
            "sent",
            "delivered",
            "dropped",
            "loss%",
            "mean µs",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
        ],
        &rows,
    )
}

/// Per-core table of a multi-core result: the hardware queues each core serves, its share of
/// the offered packets (against the flow hash's expectation) and its loss per class.
pub fn core_table(cfg: &SimConfig, r: &SimResult) -> String {
    let names: Vec<&str> = r.classes.iter().map(|c| c.name.as_str()).collect();
    let n = names.len();
    let total: u64 = r.classes.iter().map(|c| c.sent).sum();
    let expected = llr_sim::core_shares(cfg);
    let rows: Vec<Vec<String>> = r
        .per_core
        .iter()
        .map(|pc| {
            let queues: Vec<String> = match r.steering {
                Steering::Rss => vec![pc.core.to_string()],
                Steering::Class => (0..n)
                    .map(|c| format!("{}={}", r.steering.queue(pc.core, c, n), names[c]))
                    .collect(),
            };
            let sent: u64 = pc.sent.iter().sum();
            let mut row = vec![
                pc.core.to_string(),
                queues.join(" "),
                format!("{:.1}", 100.0 * sent as f64 / total.max(1) as f64),
                format!("{:.1}", 100.0 * expected[pc.core]),
                format!("{:.3}", r.core_utilization[pc.core]),
            ];
            for c in 0..n {
                row.push(format!(
                    "{:.2}",
                    100.0 * pc.dropped[c] as f64 / pc.sent[c].max(1) as f64
                ));
            }
            row
        })
        .collect();
    let loss_cols: Vec<String> = names.iter().map(|c| format!("{c} loss%")).collect();
    let mut header = vec!["core", "hw queue(s)", "share%", "hash share%", "busy"];
    header.extend(loss_cols.iter().map(String::as_str));
    table(&header, &rows)
}

pub fn run(cmd: SimCmd) -> anyhow::Result<()> {
    match cmd.sub {
        Some(SimSub::Sweep(s)) => sweep(*s),
        Some(SimSub::Flows(f)) => flows(f),
        Some(SimSub::Ramp(r)) => ramp(*r),
        None => {
            let cfg = cmd.args.to_config()?;
            let t0 = Instant::now();
            let r =
                llr_sim::run(&cfg).map_err(|llr_sim::SimError::Config(e)| UsageError::from(e))?;
            let eps = r.events as f64 / t0.elapsed().as_secs_f64();
            if cmd.args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&result_json(&r, Some(eps)))?
                );
            } else {
                let load = offered_load(&r, cfg.cores);
                println!(
                    "strategy {}  cores {} ({} steering)  offered {:.3} Mpps = {load:.3} × capacity{}  service {:.0} ns  busy {:.3}  wake-ups {:.0}/s",
                    cfg.sched.strategy,
                    cfg.cores,
                    cfg.steering,
                    r.offered_pps / 1e6,
                    if load > 1.0 { " (overload)" } else { "" },
                    r.service_ns,
                    r.utilization,
                    r.wakeups_per_sec
                );
                print!("{}", result_table(&r));
                if cfg.cores > 1 {
                    print!("{}", core_table(&cfg, &r));
                }
                println!(
                    "({} events in {:.2} s, {:.1} M events/s)",
                    r.events,
                    t0.elapsed().as_secs_f64(),
                    eps / 1e6
                );
            }
            Ok(())
        }
    }
}

/// `llrouter sim ramp`: one run, a phase per RT share, a row per phase.
fn ramp(a: RampArgs) -> anyhow::Result<()> {
    if a.base.classes.is_some() || a.base.rt_share.is_some() {
        return Err(usage(
            "rt-shares",
            "the phases set the RT share; drop --classes / --rt-share",
        ));
    }
    if a.rt_shares.is_empty() {
        return Err(usage("rt-shares", "give at least one share"));
    }
    for &v in &a.rt_shares {
        if !(0.0..=1.0).contains(&v) {
            return Err(usage("rt-shares", format!("{v} is outside 0–1")));
        }
    }
    let mut base = a.base.clone();
    base.rt_share = Some(a.rt_shares[0]);
    let cfg = base.to_config()?;
    let phases: Vec<Vec<f64>> = a.rt_shares.iter().map(|&v| vec![v, 1.0 - v]).collect();
    let results = llr_sim::run_phases(&cfg, &phases)
        .map_err(|llr_sim::SimError::Config(e)| UsageError::from(e))?;
    let be_budget = |r: &SimResult| {
        r.auto_budget.map(|a| a.budget).or_else(|| {
            cfg.sched
                .layout()
                .ok()
                .and_then(|l| l.rings.last().map(|x| x.budget))
        })
    };
    if a.base.json {
        let rows: Vec<Value> = (a.rt_shares.iter().zip(&results))
            .map(|(share, r)| {
                json!({ "rt_share": share, "be_budget": be_budget(r), "auto": r.auto_budget, "result": result_json(r, None) })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let target = match cfg.sched.auto_budget.map(|s| s.target) {
        Some(llr_core::sched::AutoTarget::Ns(n)) => format!("target {:.1} µs", n as f64 / 1000.0),
        Some(llr_core::sched::AutoTarget::ServiceTimes(m)) => format!("target {m} service times"),
        None => "fixed budgets".into(),
    };
    println!(
        "strategy {}  offered {:.3} Mpps = {:.2} × capacity  service {:.0} ns  {} packets per phase  ({target})",
        cfg.sched.strategy,
        results[0].offered_pps / 1e6,
        offered_load(&results[0], cfg.cores),
        results[0].service_ns,
        cfg.packets
    );
    let rows: Vec<Vec<String>> = (a.rt_shares.iter().zip(&results))
        .map(|(share, r)| {
            let (rt, be) = (&r.classes[0], &r.classes[1]);
            let loss = |c: &llr_sim::ClassResult| {
                format!("{:.2}", 100.0 * c.dropped as f64 / c.sent.max(1) as f64)
            };
            let b = be_budget(r);
            let (rho, x) = r
                .auto_budget
                .map_or((*share * offered_load(r, cfg.cores), r.service_ns), |a| {
                    (a.rho_rt, a.x_ns)
                });
            let tmax = b.and_then(|b| llr_core::sched::bound::tmax_ns(b, x, rho));
            vec![
                format!("{share:.2}"),
                format!("{rho:.3}"),
                b.map_or("-".into(), |b| b.to_string()),
                tmax.map_or("∞".into(), us),
                us(rt.p99_ns as f64),
                us(rt.max_wait_ns),
                loss(rt),
                us(be.p99_ns as f64),
                loss(be),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "RT share",
                "ρRT",
                "BE budget",
                "Tmax µs",
                "RT p99 µs",
                "RT max wait µs",
                "RT loss%",
                "BE p99 µs",
                "BE loss%",
            ],
            &rows
        )
    );
    println!("(ρRT, x and the budget: the auto controller's last window in the phase, else share × load; Tmax = b·x/(1−ρRT))");
    Ok(())
}

fn apply_param(args: &mut SimArgs, param: SweepParam, v: f64) -> anyhow::Result<()> {
    match param {
        SweepParam::RtShare => {
            args.classes = None;
            args.rt_share = Some(v);
        }
        SweepParam::Utilization => {
            args.rate_pps = None;
            args.utilization = Some(v);
        }
        SweepParam::TimeSlice => args.time_slice_us = v,
        SweepParam::Cores => {
            if !((1.0..=1024.0).contains(&v) && v.fract() == 0.0) {
                return Err(usage(
                    "values",
                    format!("{v}: a number of cores is a whole number within 1–1024"),
                ));
            }
            args.cores = Some(v as usize);
            // The same simulated time span at every core count: packets per core.
            args.packets = args.packets.saturating_mul(v as u64);
        }
        SweepParam::Budget => {
            let cfg = args.to_config()?;
            let low = &cfg.sched.classes.last().expect("classes").name;
            let mut pairs: Vec<String> = args
                .budgets
                .as_deref()
                .map(|b| {
                    b.split(',')
                        .filter(|p| !p.starts_with(&format!("{low}=")))
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            if !(v >= 1.0 && v <= u32::MAX as f64 && v.fract() == 0.0) {
                return Err(usage(
                    "values",
                    format!("{v}: a ring budget is a whole number of packets ≥ 1"),
                ));
            }
            pairs.push(format!("{low}={}", v as u32));
            args.budgets = Some(pairs.join(","));
        }
    }
    Ok(())
}

pub fn sweep(s: SweepArgs) -> anyhow::Result<()> {
    if let Some(st) = s.base.strategy {
        return Err(usage(
            "strategy",
            format!("a sweep compares --strategies (comma separated), e.g. --strategies {st}; --strategy is for a single `llrouter sim`"),
        ));
    }
    // A fixed value of what --param varies would be replaced without a word.
    let fixed = match s.param {
        SweepParam::Utilization if s.base.utilization.is_some() => Some("utilization"),
        SweepParam::Utilization if s.base.rate_pps.is_some() => Some("rate-pps"),
        SweepParam::RtShare if s.base.rt_share.is_some() => Some("rt-share"),
        SweepParam::RtShare if s.base.classes.is_some() => Some("classes"),
        SweepParam::Cores if s.base.cores.is_some() => Some("cores"),
        _ => None,
    };
    if let Some(flag) = fixed {
        return Err(usage(
            flag,
            format!(
                "--param {} varies it over --values; give one or the other",
                s.param.name()
            ),
        ));
    }
    if !(s.loss_tolerance >= 0.0 && s.loss_tolerance < 100.0) {
        return Err(usage(
            "loss-tolerance",
            format!(
                "{}: a percentage of the offered packets within [0, 100)",
                s.loss_tolerance
            ),
        ));
    }
    let values = parse_values(
        "values",
        s.values.as_deref().unwrap_or(s.param.default_values()),
    )?;
    let strategies = s.strategies.clone();
    if strategies.is_empty() {
        return Err(usage("strategies", "is empty"));
    }
    // Validate every point before spending CPU on any of them.
    let mut jobs = Vec::new();
    for st in &strategies {
        for &v in &values {
            let mut a = s.base.clone();
            a.strategy = Some(*st);
            apply_param(&mut a, s.param, v)?;
            if s.param == SweepParam::Budget && *st == StrategyKind::LlRr {
                // ll-rr has one budget for every ring: vary them together.
                let cfg = a.to_config();
                if cfg.is_err() {
                    let names: Vec<String> = s
                        .base
                        .to_config()?
                        .sched
                        .classes
                        .iter()
                        .map(|c| c.name.clone())
                        .collect();
                    a.budgets = Some(
                        names
                            .iter()
                            .map(|n| format!("{n}={}", v.round() as u32))
                            .collect::<Vec<_>>()
                            .join(","),
                    );
                }
            }
            let cfg = a.to_config()?;
            jobs.push(SweepPoint {
                strategy: *st,
                value: v,
                config: cfg,
            });
        }
    }
    std::fs::create_dir_all(&s.out)
        .map_err(|e| usage("out", format!("cannot create {}: {e}", s.out.display())))?;
    let pb = progress_bar(&s, jobs.len(), "sweep {param}");
    pb.set_message(s.param.name());
    let t0 = Instant::now();
    let (results, threads) = llr_sim::sweep::run(&jobs, s.jobs.unwrap_or(0), || pb.inc(1))
        .map_err(|llr_sim::SimError::Config(e)| UsageError::from(e))?;
    pb.finish_and_clear();
    let elapsed = t0.elapsed();
    let rows = llr_sim::sweep::rows(s.param.name(), &jobs, &results);
    let csv = s.out.join("results.csv");
    llr_sim::sweep::write_csv(&csv, &rows)
        .map_err(|e| anyhow::anyhow!("write {}: {e}", csv.display()))?;
    let total_packets: u64 = jobs.iter().map(|p| p.config.packets).sum();
    let say = |line: String| {
        // With --json, stdout carries only the JSON document.
        if s.base.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    say(format!(
        "{} runs, {} simulated packets in {:.1} s ({:.1} M packets/s over {} threads)",
        jobs.len(),
        total_packets,
        elapsed.as_secs_f64(),
        total_packets as f64 / elapsed.as_secs_f64() / 1e6,
        threads
    ));
    say(format!("wrote {}", csv.display()));
    let classes: Vec<String> = results
        .first()
        .map(|r| r.classes.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    for (name, title, path) in sweep_plots(s.param, &s.out) {
        match plot::line_chart(
            &path,
            &title,
            s.param.axis_label(),
            name,
            &series_of(&rows, &strategies, &classes, name),
            name != LOSS && name != DELIVERED,
        ) {
            Ok(()) => say(format!("wrote {}", path.display())),
            Err(e) => eprintln!("warning: plot {} skipped: {e}", path.display()),
        }
    }
    let caps = if s.capacity {
        Some(capacity(&s, &jobs, &say)?)
    } else {
        None
    };
    if !s.base.json {
        if s.param == SweepParam::Cores {
            print!("{}", scaling_table(&jobs, &results, caps.as_deref()));
        } else if let Some(c) = &caps {
            print!("{}", capacity_table(s.param, &jobs, c));
        }
    }
    if s.base.json {
        let mut doc = json!({ "param": s.param.name(), "rows": rows });
        if let Some(c) = &caps {
            doc["capacity"] = json!(llr_sim::sweep::capacity_rows(
                s.param.name(),
                &jobs,
                c,
                s.loss_tolerance / 100.0
            ));
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(())
}

/// Bisection steps of `--capacity`: 1.25 / 2^10 ≈ 0.0012 of the cores' capacity.
const CAPACITY_STEPS: u32 = 10;

/// `--capacity`: every point's loss-free capacity, `capacity.csv` and its plot.
fn capacity(
    s: &SweepArgs,
    jobs: &[SweepPoint],
    say: &dyn Fn(String),
) -> anyhow::Result<Vec<Capacity>> {
    let tol = s.loss_tolerance / 100.0;
    let pb = progress_bar(s, jobs.len(), "capacity");
    let t0 = Instant::now();
    let caps =
        llr_sim::sweep::capacities(jobs, tol, CAPACITY_STEPS, s.jobs.unwrap_or(0), || pb.inc(1))
            .map_err(|llr_sim::SimError::Config(e)| UsageError::from(e))?;
    pb.finish_and_clear();
    let runs: u32 = caps.iter().map(|c| c.runs).sum();
    say(format!(
        "capacity: {} bisections ({runs} runs, loss ≤ {} %) in {:.1} s",
        caps.len(),
        s.loss_tolerance,
        t0.elapsed().as_secs_f64()
    ));
    let rows = llr_sim::sweep::capacity_rows(s.param.name(), jobs, &caps, tol);
    let csv = s.out.join("capacity.csv");
    llr_sim::sweep::write_capacity_csv(&csv, &rows)
        .map_err(|e| anyhow::anyhow!("write {}: {e}", csv.display()))?;
    say(format!("wrote {}", csv.display()));
    let series: Vec<plot::Series> = s
        .strategies
        .iter()
        .map(|st| plot::Series {
            label: st.name().to_string(),
            points: (jobs.iter().zip(&caps))
                .filter(|(p, _)| p.strategy == *st)
                .map(|(p, c)| (p.value, c.delivered_pps / 1e6))
                .collect(),
            group: st.name().to_string(),
            class: 0,
        })
        .collect();
    let path = s.out.join(format!("capacity_vs_{}.png", s.param.name()));
    let title = format!(
        "loss-free capacity (loss ≤ {} %) vs {}",
        s.loss_tolerance,
        s.param.axis_label()
    );
    match plot::line_chart(
        &path,
        &title,
        s.param.axis_label(),
        "delivered at capacity (Mpps)",
        &series,
        false,
    ) {
        Ok(()) => say(format!("wrote {}", path.display())),
        Err(e) => eprintln!("warning: plot {} skipped: {e}", path.display()),
    }
    Ok(caps)
}

/// `--param cores`: per strategy and core count, what was offered and delivered, loss, the
/// highest class's latency, the flow hash's imbalance and, with `--capacity`, the loss-free
/// capacity. Speedups are against the smallest core count of the same strategy.
fn scaling_table(jobs: &[SweepPoint], results: &[SimResult], caps: Option<&[Capacity]>) -> String {
    let Some(first) = results.first() else {
        return String::new();
    };
    let top = first.classes[0].name.clone();
    let mpps = |v: f64| format!("{:.3}", v / 1e6);
    let delivered = |r: &SimResult| {
        r.classes.iter().map(|c| c.delivered).sum::<u64>() as f64 * 1e9 / r.sim_time_ns
    };
    // The smallest core count of each strategy is its reference.
    let base = |i: usize| -> usize {
        let st = jobs[i].strategy;
        (0..jobs.len())
            .filter(|&j| jobs[j].strategy == st)
            .min_by_key(|&j| jobs[j].config.cores)
            .unwrap_or(i)
    };
    let mut rows = Vec::new();
    for (i, (p, r)) in jobs.iter().zip(results).enumerate() {
        let b = base(i);
        let sent: u64 = r.classes.iter().map(|c| c.sent).sum();
        let dropped: u64 = r.classes.iter().map(|c| c.dropped).sum();
        let busiest = (r.per_core.iter())
            .map(|pc| pc.sent.iter().sum::<u64>())
            .max()
            .unwrap_or(0);
        let t = &r.classes[0];
        let mut row = vec![
            p.strategy.name().to_string(),
            p.config.cores.to_string(),
            mpps(r.offered_pps),
            mpps(delivered(r)),
            format!("{:.2}", delivered(r) / delivered(&results[b])),
            format!("{:.2}", 100.0 * dropped as f64 / sent.max(1) as f64),
            format!("{:.2}", 100.0 * t.dropped as f64 / t.sent.max(1) as f64),
            us(t.p99_ns as f64),
            format!(
                "{:.2}",
                busiest as f64 * p.config.cores as f64 / sent.max(1) as f64
            ),
            format!("{:.3}", llr_sim::hash_bound(&p.config)),
        ];
        if let Some(c) = caps {
            row.push(format!(
                "{:.3}{}",
                c[i].utilization,
                if c[i].at_least { "+" } else { "" }
            ));
            row.push(mpps(c[i].delivered_pps));
            row.push(format!(
                "{:.2}",
                c[i].delivered_pps / c[b].delivered_pps.max(1.0)
            ));
        }
        rows.push(row);
    }
    let (loss_h, p99_h) = (format!("{top} loss%"), format!("{top} p99 µs"));
    let mut header = vec![
        "strategy",
        "cores",
        "offered Mpps",
        "delivered Mpps",
        "speedup",
        "loss%",
        loss_h.as_str(),
        p99_h.as_str(),
        "busiest/fair",
        "hash bound",
    ];
    if caps.is_some() {
        header.extend(["capacity load", "capacity Mpps", "capacity speedup"]);
    }
    table(&header, &rows)
}

/// `--capacity` for a parameter other than cores: the capacity of every point.
fn capacity_table(param: SweepParam, jobs: &[SweepPoint], caps: &[Capacity]) -> String {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .zip(caps)
        .map(|(p, c)| {
            vec![
                p.strategy.name().to_string(),
                format!("{}", p.value),
                format!("{:.3}{}", c.utilization, if c.at_least { "+" } else { "" }),
                format!("{:.3}", c.delivered_pps / 1e6),
                format!("{:.3}", c.hash_bound),
            ]
        })
        .collect();
    table(
        &[
            "strategy",
            param.name(),
            "capacity load",
            "capacity Mpps",
            "hash bound",
        ],
        &rows,
    )
}

/// y-axis label of the loss plot.
const LOSS: &str = "loss (% of offered)";
/// y-axis label of the delivered-rate plot (cores sweeps).
const DELIVERED: &str = "delivered (Mpps)";

/// The sweep's charts: (y-axis label, title, file), latency beside loss.
fn sweep_plots(param: SweepParam, out: &std::path::Path) -> Vec<(&'static str, String, PathBuf)> {
    let x = param.axis_label();
    let mut charts = vec![
        ("mean latency (µs)", "mean"),
        ("p99 latency (µs)", "p99"),
        (LOSS, "loss"),
    ];
    if param == SweepParam::Cores {
        charts.push((DELIVERED, "delivered"));
    }
    charts
        .into_iter()
        .map(|(label, file)| {
            let path = if file == "loss" || file == "delivered" {
                out.join(format!("{file}_vs_{}.png", param.name()))
            } else {
                out.join(format!("latency_{file}_vs_{}.png", param.name()))
            };
            (label, format!("{label} vs {x}"), path)
        })
        .collect()
}

/// One line per strategy and class of the metric named by `ylabel`. Latency lines leave out
/// points where nothing was delivered; loss lines keep every point.
fn series_of(
    rows: &[SweepRow],
    strategies: &[StrategyKind],
    classes: &[String],
    ylabel: &str,
) -> Vec<plot::Series> {
    let mut series = Vec::new();
    for st in strategies {
        for (ci, class) in classes.iter().enumerate() {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.strategy == st.name() && &r.class == class)
                .filter(|r| ylabel == LOSS || ylabel == DELIVERED || r.delivered > 0)
                .map(|r| {
                    let y = match ylabel {
                        LOSS => 100.0 * r.dropped as f64 / r.sent.max(1) as f64,
                        DELIVERED => r.delivered_pps / 1e6,
                        "mean latency (µs)" => r.mean_ns / 1000.0,
                        _ => r.p99_ns as f64 / 1000.0,
                    };
                    (r.value, y)
                })
                .collect();
            series.push(plot::Series {
                label: format!("{st} {class}"),
                points,
                group: st.name().to_string(),
                class: ci,
            });
        }
    }
    series
}

/// The progress bar of a sweep over `n` jobs (hidden with `--quiet` or `--json`).
fn progress_bar(s: &SweepArgs, n: usize, what: &str) -> ProgressBar {
    let pb = if s.quiet || s.base.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(n as u64)
    };
    pb.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {what} [{{bar:30}}] {{pos}}/{{len}} ({{elapsed}}, eta {{eta}})"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb
}

/// `llrouter sim flows`.
#[derive(Args, Debug, Clone)]
pub struct FlowsArgs {
    /// The simulation: classes, [flow-scheduler], [[flows]], [[acls]], [[traffic]], [cost]
    /// (examples/flows/, docs/flows.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Rerun with every flow's quantum qᵢ (and the default) set to each of these values, in µs,
    /// and print latency, throughput and context switches against qᵢ: 1,5,10,20,50.
    #[arg(long)]
    pub quantum_us: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

fn flows(a: FlowsArgs) -> anyhow::Result<()> {
    use llr_sim::flows::{run, FlowSimConfig};
    let path = a.config.display().to_string();
    let bad = |e: llr_core::error::FieldError| usage("config", format!("{path}: {e}"));
    let text =
        std::fs::read_to_string(&a.config).map_err(|e| usage("config", format!("{path}: {e}")))?;
    let cfg = FlowSimConfig::from_toml(&text).map_err(bad)?;
    let Some(list) = &a.quantum_us else {
        let r = run(&cfg).map_err(bad)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print!("{}", flows_report(&r));
        }
        return Ok(());
    };
    let qs = parse_values("quantum-us", list)?;
    // Check each value as the config would, naming the flag rather than the file.
    for &q in &qs {
        cfg.with_quantum_us(q)
            .flow_scheduler
            .defaults()
            .map_err(|e| usage("quantum-us", e.reason))?;
    }
    let results: Vec<llr_sim::flows::FlowSimResult> = {
        use rayon::prelude::*;
        qs.par_iter()
            .map(|&q| run(&cfg.with_quantum_us(q)))
            .collect::<Result<_, _>>()
            .map_err(bad)?
    };
    if a.json {
        let rows: Vec<Value> = qs
            .iter()
            .zip(&results)
            .map(|(q, r)| json!({ "quantum_us": q, "result": r }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", quantum_table(&qs, &results));
    }
    Ok(())
}

/// One run: per-flow table and totals.
pub fn flows_report(r: &llr_sim::flows::FlowSimResult) -> String {
    let secs = r.sim_ns as f64 / 1e9;
    let rows: Vec<Vec<String>> = r
        .flows
        .iter()
        .map(|f| {
            let share = match f.share {
                llr_core::flow::Share::Weight(w) => format!("w{w}"),
                llr_core::flow::Share::Cpu(c) => format!("cpu {c}"),
            };
            let lat = |ns: u64| {
                if f.forwarded == 0 {
                    "-".to_string()
                } else {
                    us(ns as f64)
                }
            };
            vec![
                format!("{}{}", f.name, if f.latency_sensitive { " *" } else { "" }),
                share,
                if f.id == llr_core::flow::INPUT {
                    "-".to_string()
                } else {
                    us(f.quantum_ns as f64)
                },
                format!("{:.1}", 100.0 * f.cpu_share),
                f.done.to_string(),
                format!("{:.1}", f.forwarded as f64 / secs / 1e3),
                format!("{}/{}/{}", f.ring_drops, f.queue_drops, f.element_drops),
                lat(f.p50_ns),
                lat(f.p99_ns),
                lat(f.max_ns),
                f.preemptions.to_string(),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "flow",
            "share",
            "q µs",
            "cpu%",
            "done",
            "fwd kpps",
            "drops ring/queue/elem",
            "p50 µs",
            "p99 µs",
            "max µs",
            "preempted",
        ],
        &rows,
    );
    out.push_str(&format!(
        "* latency-sensitive (open-loop traffic only)\n{:.0} ms simulated: {} of {} offered \
         packets forwarded ({:.1} kpps), busy {:.1} % (switching {:.1} %), {:.0} switches/s, \
         {} flows installed\n",
        secs * 1e3,
        r.forwarded,
        r.offered,
        r.throughput_pps / 1e3,
        100.0 * r.busy_ns as f64 / r.sim_ns as f64,
        100.0 * r.switch_overhead_ns as f64 / r.sim_ns as f64,
        r.switches_per_sec,
        r.flows_installed,
    ));
    out
}

/// Latency-sensitive flows' p99 and max, throughput and switches against the quantum.
pub fn quantum_table(qs: &[f64], results: &[llr_sim::flows::FlowSimResult]) -> String {
    let ls: Vec<&str> = results
        .first()
        .map(|r| {
            r.flows
                .iter()
                .filter(|f| f.latency_sensitive)
                .map(|f| f.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let mut header: Vec<String> = vec!["q µs".into()];
    for n in &ls {
        header.push(format!("{n} p99 µs"));
        header.push(format!("{n} max µs"));
    }
    for h in ["kpps", "switches/s", "switching %"] {
        header.push(h.into());
    }
    let rows: Vec<Vec<String>> = qs
        .iter()
        .zip(results)
        .map(|(q, r)| {
            let mut row = vec![format!("{q}")];
            for n in &ls {
                let f = r.flow(n);
                row.push(f.map_or("-".into(), |f| us(f.p99_ns as f64)));
                row.push(f.map_or("-".into(), |f| us(f.max_ns as f64)));
            }
            row.push(format!("{:.1}", r.throughput_pps / 1e3));
            row.push(format!("{:.0}", r.switches_per_sec));
            row.push(format!(
                "{:.1}",
                100.0 * r.switch_overhead_ns as f64 / r.sim_ns as f64
            ));
            row
        })
        .collect();
    let h: Vec<&str> = header.iter().map(String::as_str).collect();
    table(&h, &rows)
}
