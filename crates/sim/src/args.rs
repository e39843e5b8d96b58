//! The simulator's settings as a user gives them (`llrouter sim` derives its flags from
//! [`SimArgs`] with the `clap` feature), and how they become a [`SimConfig`]. Errors name the
//! flag without its dashes (`tx-batch`), as [`FieldError`]s.

use llr_core::error::FieldError;
use llr_core::sched::{
    repeated_class, AutoBudgetSpec, ClassBudget, ClassSpec, PerClass, SchedConfig, StrategyKind,
    TxPolicy,
};
use llr_core::values::Values;

use crate::{
    model, Arrivals, Interrupts, Rate, ServiceDist, ServiceModel, SimConfig, SimError, Steering,
};

/// Largest `--utilization`: beyond 10× the capacity more than 90 % of the packets are dropped
/// and the run shows the drop policy, not the scheduler.
pub const MAX_UTILIZATION: f64 = 10.0;

/// Most flows `--flow-pps` may ask for (the simulator keeps a table entry per flow).
pub const MAX_FLOWS: usize = 10_000_000;

fn bad(field: &str, reason: impl Into<String>) -> FieldError {
    FieldError::new(field, reason)
}

fn config_error(SimError::Config(e): SimError) -> FieldError {
    e
}

/// A strategy name as a typed option value (the reason without the field, which the flag names).
pub fn parse_strategy(s: &str) -> Result<StrategyKind, String> {
    s.parse::<StrategyKind>().map_err(|e| e.reason)
}

/// A steering name as a typed option value.
pub fn parse_steering(s: &str) -> Result<Steering, String> {
    s.parse::<Steering>().map_err(|e| e.reason)
}

/// Checks an offered load relative to capacity; the reason says what is allowed and why.
pub fn check_utilization(u: f64) -> Result<(), FieldError> {
    if !u.is_finite() {
        return Err(bad(
            "utilization",
            format!("`{u}` is not a finite number; give the offered load relative to the cores' capacity, within (0, {MAX_UTILIZATION}]"),
        ));
    }
    if u <= 0.0 {
        return Err(bad(
            "utilization",
            format!("{u}: must be greater than 0 (no traffic offered)"),
        ));
    }
    if u > MAX_UTILIZATION {
        return Err(bad(
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

/// `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum OnOff {
    On,
    #[default]
    Off,
}

/// The arrival process of every class, as chosen on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ArrivalKind {
    #[default]
    Poisson,
    Cbr,
    Onoff,
    /// Bursts of --batch-size packets at constant gaps, classes mixed at random (the testbed
    /// generator's --gen-batch).
    Batch,
}

/// Parameters of one simulation. `Default` gives the command line's defaults.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SimArgs {
    /// Scheduling strategy (default ll-wfq): sq, rr, ll-rr, ll-wfq, fcfs, prio, rr-slice, wfq,
    /// ll-rr-slice, ll-wfq-slice.
    #[cfg_attr(feature = "clap", arg(long, value_parser = parse_strategy))]
    pub strategy: Option<StrategyKind>,
    /// Number of cores (default 1); flows are hashed to cores, each core runs its own poll
    /// engine.
    #[cfg_attr(feature = "clap", arg(long))]
    pub cores: Option<usize>,
    /// How packets reach a core's rings: rss (the flow hash picks the core's queue, a
    /// classifier splits it into the core's class rings: paper 001, Fig. 2; live `xdp`) or
    /// class (a hardware queue per core and class, core·classes + class: live `queues` /
    /// `ntuple`). The same hash and engine: the same results for a strategy with a ring per
    /// class; sq has no layout under class.
    #[cfg_attr(feature = "clap", arg(long, value_parser = parse_steering, default_value = "rss"))]
    pub steering: Steering,
    /// Traffic classes with their shares, highest priority first: hi=0.2,mid=0.3,lo=0.5.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', conflicts_with = "rt_share")
    )]
    pub classes: Vec<PerClass<f64>>,
    /// Shorthand for --classes rt=S,be=1-S.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rt_share: Option<f64>,
    /// Offered load relative to the capacity of all cores, within (0, 10]: 1.0 = saturation,
    /// above 1 = overload (the excess is dropped at the rings).
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "rate_pps"))]
    pub utilization: Option<f64>,
    /// Offered load in packets per second.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rate_pps: Option<f64>,
    /// Frame size in bytes (service time x = a·S + b + c).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimArgs::DEFAULT_PACKET_SIZE))]
    pub packet_size: u32,
    /// Fixed mean service time in ns, overriding the calibration.
    #[cfg_attr(feature = "clap", arg(long))]
    pub service_ns: Option<f64>,
    /// Calibration override as a,b,c (ns/B, ns, ns); default 2.34,272.47,225.18 (paper 001).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub calibration: Vec<f64>,
    /// Service time distribution.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = ServiceDist::Deterministic))]
    pub service_dist: ServiceDist,
    /// Fixed CPU cost of a grant in ns, on top of each frame's service time (the live
    /// worker's per-grant work; `llrouter_ring_grant_seconds_total` ÷ grants against frames
    /// per grant calibrates it).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.0))]
    pub grant_ns: f64,
    /// Frames per grant at most (the live worker's `batch`; 0: the engine's allowance only).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub max_grant: u32,
    /// Fixed CPU cost of a transmit flush in ns, charged after the grants the live worker
    /// flushes after (every grant of a higher ring; the lowest ring's once --tx-batch frames
    /// wait; when out of work). `llrouter_ring_tx_flushes_total` calibrates it.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.0))]
    pub flush_ns: f64,
    /// CPU cost per frame a flush hands to the kernel, ns (the transmit part of a frame's cost;
    /// --service-ns is then the receive part). `llrouter_ring_tx_flush_seconds_total` and
    /// `llrouter_ring_tx_flushed_frames_total` calibrate it.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.0))]
    pub flush_frame_ns: f64,
    /// Frames of the lowest ring that wait for one flush (the router's `tx-batch`).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TxPolicy::DEFAULT_BATCH))]
    pub tx_batch: u32,
    /// µs a higher ring's frames may wait for --tx-batch frames before a flush of their own
    /// (the router's `tx-hold-us`).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TxPolicy::DEFAULT_HOLD_US))]
    pub tx_hold_us: u32,
    /// Add paper 001's extra latency T+ = 4·T_DMA + 2·8·x to every packet.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = OnOff::Off))]
    pub extra_latency: OnOff,
    /// Slots per ring.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimArgs::DEFAULT_RING_SIZE))]
    pub ring_size: usize,
    /// Device budget (NAPI weight), packets per turn on the poll list.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SchedConfig::DEFAULT_DEVICE_BUDGET))]
    pub device_budget: u32,
    /// Ring budgets per class in packets, e.g. rt=60,be=4; `auto` (be=auto, ll-wfq) lets
    /// paper 000's Eq. 2 set the class's budget from the measured RT load, towards
    /// --auto-target-us or --auto-service-times.
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub budgets: Vec<ClassBudget>,
    /// `budget = "auto"`: the RT class's time in its ring within this many µs.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "auto_service_times"))]
    pub auto_target_us: Option<f64>,
    /// `budget = "auto"`: the RT class's time in its ring within m service times (T* = m·x).
    #[cfg_attr(feature = "clap", arg(long))]
    pub auto_service_times: Option<u32>,
    /// `budget = "auto"`: how long each measurement of ρRT and x runs, ms of simulated time.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimArgs::DEFAULT_AUTO_WINDOW_MS))]
    pub auto_window_ms: u64,
    /// Weights per class for wfq / ll-wfq-slice, e.g. rt=3,be=1.
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub weights: Vec<PerClass<u32>>,
    /// Time slice Δt in µs for the time-slice strategies.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimArgs::DEFAULT_TIME_SLICE_US))]
    pub time_slice_us: f64,
    /// CPU cost of one wake-up (interrupt) in ns; 0 is the pure queueing model.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.0))]
    pub wakeup_cost_ns: f64,
    /// Which arrivals take an interrupt: napi (a device with work that is off the poll list)
    /// or per-packet (every arrival, as before NAPI: paper 004's plain kernel).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = Interrupts::Napi))]
    pub interrupts: Interrupts,
    /// Arrival process of every class.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = ArrivalKind::Poisson))]
    pub arrivals: ArrivalKind,
    /// Mean on and off periods in µs for --arrivals onoff, as ON,OFF.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', default_value = "100,100")
    )]
    pub onoff_us: Vec<f64>,
    /// Packets per burst for --arrivals batch (the testbed's --gen-batch, 32 by default).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 32))]
    pub batch_size: u32,
    /// Flows in total, hashed to cores.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimArgs::DEFAULT_FLOWS))]
    pub flows: usize,
    /// Instead of --flows: flows of this many packets/s each, as many as the offered load
    /// needs (paper 001's video flows: ~410 pkt/s). The count then grows with the load and
    /// the cores, so the flow hash evens out as it does on a real router.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "flows"))]
    pub flow_pps: Option<f64>,
    /// Packets offered in total.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SimArgs::DEFAULT_PACKETS))]
    pub packets: u64,
    /// Seed of the random number generator.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub seed: u64,
    /// Print one JSON object instead of a table.
    #[cfg_attr(feature = "clap", arg(long))]
    pub json: bool,
}

impl SimArgs {
    pub const DEFAULT_PACKET_SIZE: u32 = 128;
    pub const DEFAULT_RING_SIZE: usize = 512;
    pub const DEFAULT_FLOWS: usize = 64;
    pub const DEFAULT_PACKETS: u64 = 1_000_000;
    pub const DEFAULT_AUTO_WINDOW_MS: u64 = 100;
    pub const DEFAULT_TIME_SLICE_US: f64 = SchedConfig::DEFAULT_TIME_SLICE_NS as f64 / 1000.0;
    /// The RT share without `--classes` or `--rt-share`.
    pub const DEFAULT_RT_SHARE: f64 = 0.3;
    /// The offered load without `--utilization` or `--rate-pps`.
    pub const DEFAULT_UTILIZATION: f64 = 0.8;
}

impl Default for SimArgs {
    fn default() -> Self {
        SimArgs {
            strategy: None,
            cores: None,
            steering: Steering::Rss,
            classes: Vec::new(),
            rt_share: None,
            utilization: None,
            rate_pps: None,
            packet_size: Self::DEFAULT_PACKET_SIZE,
            service_ns: None,
            calibration: Vec::new(),
            service_dist: ServiceDist::Deterministic,
            grant_ns: 0.0,
            max_grant: 0,
            flush_ns: 0.0,
            flush_frame_ns: 0.0,
            tx_batch: TxPolicy::DEFAULT_BATCH,
            tx_hold_us: TxPolicy::DEFAULT_HOLD_US,
            extra_latency: OnOff::Off,
            ring_size: Self::DEFAULT_RING_SIZE,
            device_budget: SchedConfig::DEFAULT_DEVICE_BUDGET,
            budgets: Vec::new(),
            auto_target_us: None,
            auto_service_times: None,
            auto_window_ms: Self::DEFAULT_AUTO_WINDOW_MS,
            weights: Vec::new(),
            time_slice_us: Self::DEFAULT_TIME_SLICE_US,
            wakeup_cost_ns: 0.0,
            interrupts: Interrupts::Napi,
            arrivals: ArrivalKind::Poisson,
            onoff_us: vec![100.0, 100.0],
            batch_size: 32,
            flows: Self::DEFAULT_FLOWS,
            flow_pps: None,
            packets: Self::DEFAULT_PACKETS,
            seed: 1,
            json: false,
        }
    }
}

/// The first class named twice, as an error for `field`.
fn no_repeats<T>(field: &str, items: &[PerClass<T>]) -> Result<(), FieldError> {
    match repeated_class(items) {
        Some(c) => Err(bad(field, format!("`{c}` is given twice"))),
        None => Ok(()),
    }
}

impl SimArgs {
    /// The classes and their shares, highest priority first.
    pub fn shares(&self) -> Result<Vec<PerClass<f64>>, FieldError> {
        no_repeats("classes", &self.classes)?;
        Ok(match (&self.classes[..], self.rt_share) {
            ([_, ..], _) => self.classes.clone(),
            ([], Some(s)) if !(0.0..=1.0).contains(&s) => {
                return Err(bad("rt-share", format!("{s} is outside 0–1")))
            }
            ([], s) => {
                let s = s.unwrap_or(Self::DEFAULT_RT_SHARE);
                let share = |class: &str, value| PerClass {
                    class: class.into(),
                    value,
                };
                vec![share("rt", s), share("be", 1.0 - s)]
            }
        })
    }

    fn sched(&self, shares: &[PerClass<f64>]) -> Result<SchedConfig, FieldError> {
        let mut classes: Vec<ClassSpec> =
            shares.iter().map(|s| ClassSpec::named(&s.class)).collect();
        let lookup = |field: &str, name: &str| -> Result<usize, FieldError> {
            shares.iter().position(|s| s.class == name).ok_or_else(|| {
                let names: Vec<&str> = shares.iter().map(|s| s.class.as_str()).collect();
                bad(
                    field,
                    format!(
                        "class `{name}` is not one of the classes ({})",
                        names.join(", ")
                    ),
                )
            })
        };
        no_repeats("budgets", &self.budgets)?;
        for b in &self.budgets {
            classes[lookup("budgets", &b.class)?].budget = b.value;
        }
        no_repeats("weights", &self.weights)?;
        for w in &self.weights {
            classes[lookup("weights", &w.class)?].weight = Some(w.value);
        }
        let auto_budget = match (self.auto_target_us, self.auto_service_times) {
            (None, None) => None,
            (us, m) => Some(
                AutoBudgetSpec::new(us, m, self.auto_window_ms)
                    .map_err(|e| bad(&format!("auto-{}", e.field), e.reason))?,
            ),
        };
        if !(self.time_slice_us > 0.0 && self.time_slice_us.is_finite()) {
            return Err(bad(
                "time-slice-us",
                format!("{}; must be greater than 0", self.time_slice_us),
            ));
        }
        Ok(SchedConfig {
            strategy: self.strategy.unwrap_or(StrategyKind::LlWfq),
            classes,
            device_budget: self.device_budget,
            time_slice_ns: (self.time_slice_us * 1000.0).round() as u64,
            auto_budget,
        })
    }

    fn rate(&self) -> Result<Rate, FieldError> {
        Ok(match (self.utilization, self.rate_pps) {
            (Some(u), _) => {
                check_utilization(u)?;
                Rate::Utilization(u)
            }
            (None, Some(p)) if !(p.is_finite() && p > 0.0) => {
                return Err(bad(
                    "rate-pps",
                    format!("`{p}`: must be a finite number of packets per second, > 0"),
                ))
            }
            (None, Some(p)) => Rate::Pps(p),
            (None, None) => Rate::Utilization(Self::DEFAULT_UTILIZATION),
        })
    }

    fn service(&self) -> Result<ServiceModel, FieldError> {
        for (field, v) in [
            ("grant-ns", self.grant_ns),
            ("flush-ns", self.flush_ns),
            ("flush-frame-ns", self.flush_frame_ns),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(bad(field, format!("{v}: must be 0 or more ns")));
            }
        }
        if self.tx_batch == 0 {
            return Err(bad(
                "tx-batch",
                "0: must be at least 1 frame (as in the router's config)",
            ));
        }
        if let Some(s) = self.service_ns {
            if !(s > 0.0 && s.is_finite()) {
                return Err(bad("service-ns", format!("{s}; must be greater than 0")));
            }
        }
        let (mut a, mut b, mut c) = (model::CAL_A_NS_PER_BYTE, model::CAL_B_NS, model::CAL_C_NS);
        match self.calibration[..] {
            [] => {}
            [x, y, z] if [x, y, z].iter().all(|v| *v >= 0.0 && v.is_finite()) => {
                (a, b, c) = (x, y, z)
            }
            _ => {
                return Err(bad(
                    "calibration",
                    "expects three non-negative numbers a,b,c",
                ))
            }
        }
        Ok(ServiceModel {
            a_ns_per_byte: a,
            b_ns: b,
            c_ns: c,
            override_ns: self.service_ns,
            dist: self.service_dist,
            grant_ns: self.grant_ns,
            max_grant: self.max_grant,
            flush_ns: self.flush_ns,
            flush_frame_ns: self.flush_frame_ns,
            tx_batch: self.tx_batch,
            tx_hold_ns: u64::from(self.tx_hold_us) * 1000,
        })
    }

    fn arrivals(&self) -> Result<Arrivals, FieldError> {
        Ok(match self.arrivals {
            ArrivalKind::Poisson => Arrivals::Poisson,
            ArrivalKind::Cbr => Arrivals::Cbr,
            ArrivalKind::Batch => match self.batch_size {
                1..=4096 => Arrivals::Batch {
                    size: self.batch_size,
                },
                n => return Err(bad("batch-size", format!("{n}: must be within 1..=4096"))),
            },
            ArrivalKind::Onoff => match self.onoff_us[..] {
                [on, off] if on > 0.0 && off >= 0.0 && on.is_finite() && off.is_finite() => {
                    Arrivals::OnOff {
                        on_ns: on * 1000.0,
                        off_ns: off * 1000.0,
                    }
                }
                _ => {
                    return Err(bad(
                        "onoff-us",
                        "expects ON,OFF in µs with ON > 0 and OFF ≥ 0",
                    ))
                }
            },
        })
    }

    /// Builds the simulation configuration; errors name the flag.
    pub fn to_config(&self) -> Result<SimConfig, FieldError> {
        let shares = self.shares()?;
        let mut cfg = SimConfig {
            sched: self.sched(&shares)?,
            shares: shares.iter().map(|s| s.value).collect(),
            cores: self.cores.unwrap_or(1),
            steering: self.steering,
            flows: self.flows,
            rate: self.rate()?,
            packet_size: self.packet_size,
            service: self.service()?,
            extra_latency: self.extra_latency == OnOff::On,
            ring_size: self.ring_size,
            wakeup_cost_ns: self.wakeup_cost_ns,
            interrupts: self.interrupts,
            arrivals: self.arrivals()?,
            packets: self.packets,
            seed: self.seed,
        };
        if let Some(f) = self.flow_pps {
            // The rate must be valid before it can count the flows.
            cfg.validate().map_err(config_error)?;
            if !(f.is_finite() && f > 0.0) {
                return Err(bad(
                    "flow-pps",
                    format!("`{f}`: must be a finite number of packets per second, > 0"),
                ));
            }
            // The flow table is one entry per flow: bound it far above any realistic count.
            let flows = (cfg.offered_pps() / f).ceil();
            if flows > MAX_FLOWS as f64 {
                return Err(bad(
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
        cfg.validate().map_err(config_error)?;
        Ok(cfg)
    }
}

/// Parses a `--values`-style list for `field`.
pub fn values(field: &str, s: &str) -> Result<Vec<f64>, FieldError> {
    s.parse::<Values>()
        .map(|v| v.0)
        .map_err(|reason| bad(field, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_command_lines_and_errors_name_the_flag() {
        let cfg = SimArgs::default().to_config().unwrap();
        assert_eq!(cfg.shares, vec![0.3, 0.7]);
        assert_eq!(cfg.sched.strategy, StrategyKind::LlWfq);
        assert_eq!(cfg.rate, Rate::Utilization(0.8));
        assert_eq!(cfg.sched.time_slice_ns, SchedConfig::DEFAULT_TIME_SLICE_NS);
        let err = |f: &dyn Fn(&mut SimArgs)| {
            let mut a = SimArgs::default();
            f(&mut a);
            a.to_config().unwrap_err()
        };
        assert_eq!(err(&|a| a.tx_batch = 0).field, "tx-batch");
        assert_eq!(err(&|a| a.calibration = vec![1.0]).field, "calibration");
        let burst = |n: u32| {
            move |a: &mut SimArgs| {
                a.arrivals = ArrivalKind::Batch;
                a.batch_size = n;
            }
        };
        assert_eq!(err(&burst(0)).field, "batch-size");
        let mut a = SimArgs::default();
        burst(32)(&mut a);
        assert_eq!(
            a.to_config().unwrap().arrivals,
            Arrivals::Batch { size: 32 }
        );
        assert_eq!(
            err(&|a| a.budgets = vec!["x=4".parse().unwrap()]).field,
            "budgets"
        );
        let twice = err(&|a| a.weights = vec!["rt=1".parse().unwrap(), "rt=2".parse().unwrap()]);
        assert_eq!(
            (twice.field.as_str(), twice.reason.as_str()),
            ("weights", "`rt` is given twice")
        );
        assert_eq!(
            err(&|a| a.auto_target_us = Some(-1.0)).field,
            "auto-target-us"
        );
        assert_eq!(err(&|a| a.utilization = Some(0.0)).field, "utilization");
        let a = SimArgs {
            budgets: vec!["be=auto".parse().unwrap()],
            auto_service_times: Some(10),
            ..SimArgs::default()
        };
        assert!(a.to_config().unwrap().sched.classes[1].budget.is_auto());
    }
}
