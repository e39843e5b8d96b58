//! The event loop: per-class arrival streams, per-core rings and poll engines.
//!
//! # Cores and steering
//!
//! Every core runs its own [`PollEngine`] over its own rings (one set per core, paper 001's
//! Fig. 2: "Rx rings per core"); a flow is always served by the same core, the one its flow hash
//! picks (splitmix64, a stand-in for the NIC's RSS hash of the 5-tuple), so nothing within a
//! flow is reordered. [`Steering`] says how packets reach a core's rings, with the live router's
//! two layouts:
//!
//! - [`Steering::Rss`] (`steering = "xdp"` live): the NIC's RSS puts a flow into its core's one
//!   hardware queue; the XDP classifier sorts that queue into the core's class rings. Hardware
//!   queue *k* = core *k*, carrying every class.
//! - [`Steering::Class`] (`steering = "queues"` / `"ntuple"` live): the NIC (ntuple filters, a
//!   switch, or the testbed's generator) puts class *c* of a flow hashed to worker *w* into
//!   hardware queue `w·C + c` (C classes), and the worker serves each hardware queue as the ring
//!   of its class.
//!
//! What that means in this model, concretely: the *same* flow → core hash (a NIC hashes the
//! same 5-tuple in both layouts, and the worker part of the queue index is that hash), the same
//! per-class rings and the same engine per core — so for a strategy with one ring per class the
//! two layouts are the same queueing network and give the same result, draw for draw (a test
//! checks it). The difference class steering makes in a real router is *where* classification
//! runs (NIC instead of the XDP program), and that cost is inside the calibrated `x`, not
//! separate. What the model does enforce: under class steering the classes arrive already
//! separated, one hardware queue each, so a layout that shares one ring between classes (`sq`)
//! does not exist — such a configuration is rejected, naming `steering`. The per-core counters
//! ([`CoreResult`]) are per hardware queue under either layout ([`Steering::queue`]).

use crate::model;
use hdrhistogram::Histogram;
use llr_core::sched::{
    AutoBudget, AutoReading, ConfigError, Grant, Layout, PollEngine, Ring, SchedConfig, TxPolicy,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// Offered load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Relative to the capacity of all cores (1.0 = every core 100 % busy on average).
    Utilization(f64),
    /// Absolute, in packets per second over all classes.
    Pps(f64),
}

/// Arrival process of every class (each class has its own independent stream).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    Poisson,
    /// Constant gaps per class, with a random phase per class.
    Cbr,
    /// Bursts: exponentially distributed on and off periods with these means; Poisson arrivals
    /// during on periods at the rate that keeps the configured mean rate.
    OnOff {
        on_ns: f64,
        off_ns: f64,
    },
    /// Bursts of `size` packets at one instant, the bursts at constant gaps that keep the mean
    /// rate (from a random phase), each packet's class drawn by the shares: the testbed's
    /// generator, which sends `--gen-batch` frames back to back and picks each one's class at
    /// random. One stream for all classes, so a burst mixes them as the generator's do.
    Batch {
        size: u32,
    },
}

/// When a packet costs the core an interrupt (`wakeup_cost_ns` each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Interrupts {
    /// NAPI (and the live worker's `wake = interrupt`): one interrupt when a device with work
    /// is off the poll list; while it is polled, arrivals cost nothing.
    #[default]
    Napi,
    /// The pre-NAPI kernel (paper 004's "plain"): every arriving packet interrupts the core,
    /// also while it works and also when the packet is then dropped because the queue is full,
    /// which is how a receive livelock spends the CPU.
    PerPacket,
}

/// Distribution of the per-packet service time around its mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ServiceDist {
    /// Every packet takes exactly the mean (paper 001's model; M/D/1).
    #[cfg_attr(feature = "clap", value(name = "det"))]
    Deterministic,
    /// Exponentially distributed (M/M/1), for checking against queueing theory.
    #[cfg_attr(feature = "clap", value(name = "exp"))]
    Exponential,
}

/// Service time `x = a·S + b + c` (paper 001), or a fixed override; and the live worker's
/// grant shape: a fixed CPU cost `grant_ns` per grant (receive ring indices, engine
/// bookkeeping: work a grant costs whatever its size), grants of at most `max_grant` frames
/// (the worker's `batch`; 0: the engine's allowance only), and a fixed cost `flush_ns` per
/// transmit flush, which follows the grants the worker's own rule picks (`TxPolicy` with
/// `tx_batch` and `tx_hold_ns`: after a higher ring's grant once its frames waited `tx_hold_ns`
/// or `tx_batch` frames wait, after the lowest ring's once `tx_batch` frames wait, and whenever
/// the core runs out of work), plus `flush_frame_ns` per frame it hands over: the transmit
/// part of a frame's cost, which the live worker pays inside the flush, not at the frame's
/// service (with it, `x` is the receive part only, and a grant lasts as long as it does live,
/// which is what a hold is measured against). Frames leave the simulator when served: a hold
/// shows in the flushes' cost, not in the latencies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServiceModel {
    pub a_ns_per_byte: f64,
    pub b_ns: f64,
    pub c_ns: f64,
    pub override_ns: Option<f64>,
    pub dist: ServiceDist,
    pub grant_ns: f64,
    pub max_grant: u32,
    pub flush_ns: f64,
    pub flush_frame_ns: f64,
    pub tx_batch: u32,
    pub tx_hold_ns: u64,
}

impl Default for ServiceModel {
    fn default() -> Self {
        ServiceModel {
            a_ns_per_byte: model::CAL_A_NS_PER_BYTE,
            b_ns: model::CAL_B_NS,
            c_ns: model::CAL_C_NS,
            override_ns: None,
            dist: ServiceDist::Deterministic,
            grant_ns: 0.0,
            max_grant: 0,
            flush_ns: 0.0,
            flush_frame_ns: 0.0,
            tx_batch: llr_core::sched::TxPolicy::DEFAULT_BATCH,
            tx_hold_ns: 0,
        }
    }
}

impl ServiceModel {
    /// Mean service time of a packet of `size` bytes.
    pub fn mean_ns(&self, size: u32) -> f64 {
        self.override_ns
            .unwrap_or(self.a_ns_per_byte * size as f64 + self.b_ns + self.c_ns)
    }
}

/// How packets reach the cores' rings; see the module doc ("Cores and steering").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Steering {
    /// The flow hash picks the core's hardware queue; the classifier splits it into the core's
    /// class rings (paper 001, Fig. 2; the live router's `steering = "xdp"`).
    #[default]
    Rss,
    /// The NIC puts (flow-hash worker, class) into a hardware queue of its own (the live
    /// router's `steering = "queues"` / `"ntuple"`).
    Class,
}

impl Steering {
    pub const ALL: [Steering; 2] = [Steering::Rss, Steering::Class];

    pub fn name(self) -> &'static str {
        match self {
            Steering::Rss => "rss",
            Steering::Class => "class",
        }
    }

    /// Hardware queues per interface that the layout needs for `cores` cores and `classes`
    /// classes.
    pub fn queues(self, cores: usize, classes: usize) -> usize {
        match self {
            Steering::Rss => cores,
            Steering::Class => cores * classes,
        }
    }

    /// The hardware queue that carries `class` of a flow hashed to `core`: the core's queue
    /// under RSS, `core·classes + class` under class steering (the live router's numbering).
    pub fn queue(self, core: usize, class: usize, classes: usize) -> usize {
        match self {
            Steering::Rss => core,
            Steering::Class => core * classes + class,
        }
    }
}

impl std::fmt::Display for Steering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Steering {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Steering::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                ConfigError::new(
                    "steering",
                    format!(
                        "`{s}` is not a steering; one of rss (flow hash → core, classifier \
                         per core), class (a hardware queue per core and class)"
                    ),
                )
            })
    }
}

/// One simulation run.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Scheduler of every core.
    pub sched: SchedConfig,
    /// Share of the traffic per class, in class order; sums to 1.
    pub shares: Vec<f64>,
    pub cores: usize,
    /// How packets reach the cores' rings.
    pub steering: Steering,
    /// Flows in total; split over classes by share (at least one each), hashed to cores.
    pub flows: usize,
    pub rate: Rate,
    /// Frame size in bytes.
    pub packet_size: u32,
    pub service: ServiceModel,
    /// Add paper 001's extra latency T+ to every packet's latency.
    pub extra_latency: bool,
    pub ring_size: usize,
    /// CPU time one wake-up (interrupt) costs, in ns.
    pub wakeup_cost_ns: f64,
    /// Which arrivals take an interrupt.
    pub interrupts: Interrupts,
    pub arrivals: Arrivals,
    /// Packets offered in total; the run ends when all of them are delivered or dropped.
    pub packets: u64,
    pub seed: u64,
}

impl SimConfig {
    /// Paper 000's scenario: one core, two classes (rt, be), 128 B packets, rings of 512.
    pub fn paper000(sched: SchedConfig, rt_share: f64, utilization: f64, packets: u64) -> Self {
        SimConfig {
            sched,
            shares: vec![rt_share, 1.0 - rt_share],
            cores: 1,
            steering: Steering::Rss,
            flows: 64,
            rate: Rate::Utilization(utilization),
            packet_size: 128,
            service: ServiceModel::default(),
            extra_latency: false,
            ring_size: 512,
            wakeup_cost_ns: 0.0,
            interrupts: Interrupts::Napi,
            arrivals: Arrivals::Poisson,
            packets,
            seed: 1,
        }
    }

    /// Checks every parameter; errors name the flag.
    pub fn validate(&self) -> Result<Layout, SimError> {
        let layout = self.sched.layout().map_err(SimError::Config)?;
        let n = self.sched.classes.len();
        let bad =
            |field: &str, reason: String| Err(SimError::Config(ConfigError::new(field, reason)));
        if self.shares.len() != n {
            return bad(
                "classes",
                format!("{} shares for {} classes", self.shares.len(), n),
            );
        }
        for (s, c) in self.shares.iter().zip(&self.sched.classes) {
            if !(0.0..=1.0).contains(s) || !s.is_finite() {
                return bad(
                    "classes",
                    format!("share of `{}` is {s}; shares must lie in 0–1", c.name),
                );
            }
        }
        let sum: f64 = self.shares.iter().sum();
        if (sum - 1.0).abs() > 1e-6 {
            return bad("classes", format!("shares sum to {sum}, not 1"));
        }
        if self.cores == 0 {
            return bad("cores", "must be at least 1".into());
        }
        if self.cores > 1024 {
            return bad("cores", format!("{} cores; at most 1024", self.cores));
        }
        if self.steering == Steering::Class {
            // Class steering delivers every class in a hardware queue of its own; a layout
            // that shares a ring between classes would have to merge hardware queues, which
            // no NIC does.
            let mut seen = vec![false; layout.rings.len()];
            for (c, &r) in layout.class_to_ring.iter().enumerate() {
                if std::mem::replace(&mut seen[r], true) {
                    return bad(
                        "steering",
                        format!(
                            "class steering gives every class its own hardware queue, but `{}` \
                             serves class `{}` from the same ring as a class before it; use \
                             rss steering with it, or a strategy with one ring per class",
                            self.sched.strategy, self.sched.classes[c].name
                        ),
                    );
                }
            }
        }
        if self.flows == 0 {
            return bad("flows", "must be at least 1".into());
        }
        match self.rate {
            Rate::Utilization(u) if !(u > 0.0 && u.is_finite()) => {
                return bad("utilization", format!("{u}; must be greater than 0"))
            }
            Rate::Pps(p) if !(p > 0.0 && p.is_finite()) => {
                return bad("rate-pps", format!("{p}; must be greater than 0"))
            }
            _ => {}
        }
        if !(40..=65_535).contains(&self.packet_size) {
            return bad(
                "packet-size",
                format!("{} bytes; must be 40–65535", self.packet_size),
            );
        }
        let x = self.service.mean_ns(self.packet_size);
        if !(x > 0.0 && x.is_finite()) {
            return bad(
                "service-ns",
                format!("service time {x} ns; must be greater than 0"),
            );
        }
        if self.ring_size == 0 {
            return bad("ring-size", "must be at least 1".into());
        }
        if !(self.wakeup_cost_ns >= 0.0 && self.wakeup_cost_ns.is_finite()) {
            return bad(
                "wakeup-cost-ns",
                format!("{}; must be 0 or more", self.wakeup_cost_ns),
            );
        }
        if let Arrivals::OnOff { on_ns, off_ns } = self.arrivals {
            if !(on_ns > 0.0 && off_ns >= 0.0) {
                return bad("arrivals", "on/off periods must be positive".into());
            }
        }
        if self.packets == 0 {
            return bad("packets", "must be at least 1".into());
        }
        Ok(layout)
    }

    /// Offered packets per second over all classes.
    pub fn offered_pps(&self) -> f64 {
        match self.rate {
            Rate::Pps(p) => p,
            Rate::Utilization(u) => {
                u * self.cores as f64 * 1e9 / self.service.mean_ns(self.packet_size)
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Per-class outcome. Latency = arrival at the ring → end of processing (+ T+ if enabled).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClassResult {
    #[serde(skip)]
    pub name: String,
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Mean time from arrival to start of service.
    pub mean_wait_ns: f64,
    /// Longest time from arrival to start of service.
    pub max_wait_ns: f64,
}

/// What one core was offered and served, per class (in class order). Under class steering
/// class `c` of core `k` is hardware queue [`Steering::queue`]`(k, c, C)`; under RSS all of a
/// core's classes share hardware queue `k`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CoreResult {
    pub core: usize,
    pub sent: Vec<u64>,
    pub delivered: Vec<u64>,
    pub dropped: Vec<u64>,
}

/// Outcome of one run.
#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    pub classes: Vec<ClassResult>,
    pub steering: Steering,
    /// Per core, per class counters (the load imbalance of the flow hash shows here).
    pub per_core: Vec<CoreResult>,
    /// Busy fraction of the cores (service plus wake-up cost), averaged over cores.
    pub utilization: f64,
    pub core_utilization: Vec<f64>,
    pub wakeups_per_sec: f64,
    pub wakeups: u64,
    pub events: u64,
    pub sim_time_ns: f64,
    pub offered_pps: f64,
    pub service_ns: f64,
    /// Times a device budget ran out with packets left, over all cores.
    pub budget_exhaustions: u64,
    /// `budget = "auto"`: core 0's controller's last reading while packets still arrived (ρRT,
    /// x, the budget it set); the drain after the last arrival is not a load to tune for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_budget: Option<AutoReading>,
}

#[derive(Debug, Clone, Copy)]
struct Pkt {
    arrival: f64,
    class: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Idle,
    Waking,
    Serving,
}

struct Core {
    engine: PollEngine,
    rings: Vec<Ring<Pkt>>,
    state: State,
    t_done: f64,
    cur: Option<(Grant, Pkt, f64)>,
    busy_ns: f64,
    /// `budget = "auto"`: the controller of this core's engine.
    auto: Option<AutoBudget>,
    /// The grant the last packet belonged to: ring, the engine's allowance at that pick,
    /// frames served in it, and whether it is its device's lowest ring (`None` after the core
    /// went idle).
    grant: Option<(usize, u32, u32, bool)>,
    /// The worker's flush rule, frames served since the last flush, and a flush owed since
    /// the core went idle.
    tx: TxPolicy,
    egress: usize,
    /// Frames the core flushed when it ran out of work, whose cost the next grant pays.
    flush_owed: Option<usize>,
}

struct Stream {
    next: f64,
    rate_per_ns: f64,
    gap: f64,
    on_end: f64,
    flow_base: usize,
    flows: usize,
    rr: usize,
}

struct Acc {
    hist: Histogram<u64>,
    sum_lat: f64,
    sum_wait: f64,
    max_wait: f64,
    delivered: u64,
}

#[inline]
fn exp_sample(rng: &mut Xoshiro256PlusPlus, mean: f64) -> f64 {
    // 1 − u lies in (0, 1], so the log is finite.
    -mean * (1.0 - rng.random::<f64>()).ln()
}

/// The core the flow hash puts `flow` on.
pub fn flow_core(flow: usize, cores: usize) -> usize {
    // splitmix64 finaliser: a cheap stand-in for an RSS hash of the flow's 5-tuple.
    let mut z = (flow as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) % cores as u64) as usize
}

/// Runs one simulation to completion: the next event is the earliest of the class streams'
/// next arrivals and the cores' next completions (ties go to the arrival).
pub fn run(cfg: &SimConfig) -> Result<SimResult, SimError> {
    let mut sim = Sim::new(cfg)?;
    sim.run_until(false);
    let reading = sim.auto_reading();
    sim.run_until(true);
    Ok(SimResult {
        auto_budget: reading,
        ..sim.result()
    })
}

/// The state of one simulation run.
struct Sim<'a> {
    cfg: &'a SimConfig,
    layout: Layout,
    rng: Xoshiro256PlusPlus,
    /// Mean service time and the extra latency T+ added to every packet.
    x_mean: f64,
    extra: f64,
    exp_service: bool,
    /// Engine device of each ring.
    ring_dev: Vec<usize>,
    cores: Vec<Core>,
    streams: Vec<Stream>,
    core_of_flow: Vec<usize>,
    acc: Vec<Acc>,
    sent: Vec<u64>,
    dropped: Vec<u64>,
    /// Per (core, class), index `core·classes + class`.
    core_sent: Vec<u64>,
    core_dropped: Vec<u64>,
    core_delivered: Vec<u64>,
    total_sent: u64,
    /// Arrivals stop when `total_sent` reaches it (`cfg.packets`, or the end of a phase).
    limit: u64,
    events: u64,
    wakeups: u64,
    now: f64,
    /// When the current phase began ([`run_phases`]).
    phase_start: f64,
    /// [`Arrivals::Batch`]'s clock, one for every class.
    bursts: Option<Bursts>,
}

/// Bursts of `size` packets: the time of the next packet, and the packets left in its burst.
struct Bursts {
    size: u32,
    next: f64,
    left: u32,
}

impl Bursts {
    /// The packet at `next` is taken: the next one comes at the same instant until the burst
    /// is out, then `gap` later.
    fn take(&mut self, gap: f64) {
        self.left -= 1;
        if self.left == 0 {
            self.left = self.size;
            self.next += gap;
        }
    }
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a SimConfig) -> Result<Sim<'a>, SimError> {
        let layout = cfg.validate()?;
        let n = cfg.shares.len();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
        let x_mean = cfg.service.mean_ns(cfg.packet_size);
        let extra = if cfg.extra_latency {
            model::extra_latency_ns(x_mean)
        } else {
            0.0
        };
        let engine = PollEngine::new(&layout);
        let ring_dev: Vec<usize> = (0..layout.rings.len())
            .map(|r| engine.device_of(r))
            .collect();
        let cores: Vec<Core> = (0..cfg.cores)
            .map(|_| Core {
                engine: engine.clone(),
                rings: (0..layout.rings.len())
                    .map(|_| Ring::new(cfg.ring_size))
                    .collect(),
                state: State::Idle,
                t_done: f64::INFINITY,
                cur: None,
                busy_ns: 0.0,
                auto: AutoBudget::new(&layout),
                grant: None,
                tx: TxPolicy::new(cfg.service.tx_batch as usize).with_hold(cfg.service.tx_hold_ns),
                egress: 0,
                flush_owed: None,
            })
            .collect();
        let streams = streams(cfg, &mut rng);
        let bursts = match cfg.arrivals {
            Arrivals::Batch { size } => Some(Bursts {
                size,
                next: rng.random::<f64>() * burst_gap(&streams, size),
                left: size,
            }),
            _ => None,
        };
        let flows = streams.last().map_or(0, |s| s.flow_base + s.flows);
        let core_of_flow: Vec<usize> = (0..flows).map(|f| flow_core(f, cfg.cores)).collect();
        let acc: Vec<Acc> = (0..n)
            .map(|_| Acc {
                hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                    .expect("valid histogram bounds"),
                sum_lat: 0.0,
                sum_wait: 0.0,
                max_wait: 0.0,
                delivered: 0,
            })
            .collect();
        Ok(Sim {
            cfg,
            layout,
            rng,
            x_mean,
            extra,
            exp_service: cfg.service.dist == ServiceDist::Exponential,
            ring_dev,
            cores,
            streams,
            core_of_flow,
            acc,
            sent: vec![0; n],
            dropped: vec![0; n],
            core_sent: vec![0; n * cfg.cores],
            core_dropped: vec![0; n * cfg.cores],
            core_delivered: vec![0; n * cfg.cores],
            total_sent: 0,
            limit: cfg.packets,
            events: 0,
            wakeups: 0,
            now: 0.0,
            phase_start: 0.0,
            bursts,
        })
    }

    /// The class and time of the next arrival (`usize::MAX` once every packet is sent). There
    /// are few classes: a scan beats a heap.
    #[inline]
    fn next_arrival(&self) -> (usize, f64) {
        let (mut ac, mut ta) = (usize::MAX, f64::INFINITY);
        if let Some(b) = &self.bursts {
            // The class is drawn at the arrival.
            return if self.total_sent < self.limit && b.next.is_finite() {
                (0, b.next)
            } else {
                (ac, ta)
            };
        }
        if self.total_sent < self.limit {
            for (i, s) in self.streams.iter().enumerate() {
                if s.next < ta {
                    ta = s.next;
                    ac = i;
                }
            }
        }
        (ac, ta)
    }

    /// The core and time of the next completion (`usize::MAX` when every core is idle).
    #[inline]
    fn next_completion(&self) -> (usize, f64) {
        let (mut cc, mut tc) = (usize::MAX, f64::INFINITY);
        for (i, c) in self.cores.iter().enumerate() {
            if c.t_done < tc {
                tc = c.t_done;
                cc = i;
            }
        }
        (cc, tc)
    }

    /// A packet of class `ac` arrives at `ta`: into its core's ring (or dropped), waking the
    /// ring's device if it was off the poll list.
    fn arrive(&mut self, mut ac: usize, ta: f64) {
        self.now = ta;
        let cfg = self.cfg;
        if let Some(b) = self.bursts.as_mut() {
            ac = draw_class(&self.streams, self.rng.random::<f64>());
            b.take(burst_gap(&self.streams, b.size));
        }
        let s = &mut self.streams[ac];
        let flow = match cfg.arrivals {
            Arrivals::Cbr => {
                s.rr = (s.rr + 1) % s.flows;
                s.rr
            }
            _ => self.rng.random_range(0..s.flows),
        } + s.flow_base;
        s.next = match cfg.arrivals {
            Arrivals::Poisson => ta + exp_sample(&mut self.rng, s.gap),
            Arrivals::Cbr => ta + s.gap,
            Arrivals::OnOff { on_ns, off_ns } => {
                let on_gap = s.gap * on_ns / (on_ns + off_ns);
                next_onoff(&mut self.rng, ta, s, on_gap, on_ns, off_ns)
            }
            // Not read: the burst clock above times every class.
            Arrivals::Batch { .. } => f64::INFINITY,
        };
        self.total_sent += 1;
        self.sent[ac] += 1;
        let k = self.core_of_flow[flow];
        let kc = k * self.sent.len() + ac;
        self.core_sent[kc] += 1;
        let core = &mut self.cores[k];
        // Both steerings end in the class's ring of the flow's core (module doc).
        let ring = self.layout.class_to_ring[ac];
        let pkt = Pkt {
            arrival: ta,
            class: ac as u32,
        };
        let pushed = core.rings[ring].push(pkt).is_ok();
        if !pushed {
            self.dropped[ac] += 1;
            self.core_dropped[kc] += 1;
        }
        let woke = pushed && core.engine.wake(self.ring_dev[ring]);
        let interrupt = match cfg.interrupts {
            Interrupts::Napi => woke,
            Interrupts::PerPacket => true,
        };
        // An idle core has empty rings, so a packet that found no room found the core busy.
        if interrupt {
            self.wakeups += 1;
            let cost = cfg.wakeup_cost_ns;
            core.busy_ns += cost;
            match core.state {
                State::Idle if cost > 0.0 => {
                    core.state = State::Waking;
                    core.t_done = ta + cost;
                }
                State::Idle => start_next(
                    core,
                    ta,
                    self.x_mean,
                    self.exp_service,
                    &cfg.service,
                    &mut self.rng,
                ),
                // An interrupt taken while busy delays the work in hand.
                State::Waking | State::Serving => core.t_done += cost,
            }
        }
    }

    /// Core `cc` finishes its packet (if any) at `tc`, accounts it, and starts the next one.
    fn complete(&mut self, cc: usize, tc: f64) {
        self.now = tc;
        let core = &mut self.cores[cc];
        if let Some((g, pkt, x)) = core.cur.take() {
            let a = &mut self.acc[pkt.class as usize];
            let lat = tc - pkt.arrival + self.extra;
            let wait = tc - x - pkt.arrival;
            a.hist.saturating_record(lat.round().max(1.0) as u64);
            a.sum_lat += lat;
            a.sum_wait += wait;
            if wait > a.max_wait {
                a.max_wait = wait;
            }
            a.delivered += 1;
            self.core_delivered[cc * self.sent.len() + pkt.class as usize] += 1;
            core.engine.complete(g, 1, x as u64);
            if let Some(a) = core.auto.as_mut() {
                if let Some(b) = a.tick(tc as u64, core.engine.ring_stats()) {
                    for &r in a.rings() {
                        core.engine.set_ring_budget(r, b);
                    }
                }
            }
        }
        start_next(
            core,
            tc,
            self.x_mean,
            self.exp_service,
            &self.cfg.service,
            &mut self.rng,
        );
    }

    fn result(&self) -> SimResult {
        let cfg = self.cfg;
        let sim_time = (self.now - self.phase_start).max(1.0);
        let classes = (0..cfg.shares.len())
            .map(|i| {
                let a = &self.acc[i];
                let h = &a.hist;
                let d = a.delivered;
                let q = |p: f64| if d == 0 { 0 } else { h.value_at_quantile(p) };
                ClassResult {
                    name: cfg.sched.classes[i].name.clone(),
                    sent: self.sent[i],
                    delivered: d,
                    dropped: self.dropped[i],
                    mean_ns: if d == 0 { 0.0 } else { a.sum_lat / d as f64 },
                    p50_ns: q(0.5),
                    p90_ns: q(0.9),
                    p99_ns: q(0.99),
                    p999_ns: q(0.999),
                    max_ns: if d == 0 { 0 } else { h.max() },
                    mean_wait_ns: if d == 0 { 0.0 } else { a.sum_wait / d as f64 },
                    max_wait_ns: a.max_wait,
                }
            })
            .collect();
        let core_utilization: Vec<f64> = (self.cores.iter())
            .map(|c| (c.busy_ns / sim_time).min(1.0))
            .collect();
        let n = cfg.shares.len();
        let slice = |v: &[u64], k: usize| v[k * n..(k + 1) * n].to_vec();
        let per_core = (0..cfg.cores)
            .map(|k| CoreResult {
                core: k,
                sent: slice(&self.core_sent, k),
                delivered: slice(&self.core_delivered, k),
                dropped: slice(&self.core_dropped, k),
            })
            .collect();
        SimResult {
            classes,
            steering: cfg.steering,
            per_core,
            utilization: core_utilization.iter().sum::<f64>() / self.cores.len() as f64,
            core_utilization,
            wakeups_per_sec: self.wakeups as f64 * 1e9 / sim_time,
            wakeups: self.wakeups,
            events: self.events,
            sim_time_ns: sim_time,
            offered_pps: cfg.offered_pps(),
            service_ns: self.x_mean,
            budget_exhaustions: (self.cores.iter())
                .flat_map(|c| c.engine.device_stats().iter().map(|d| d.budget_exhaustions))
                .sum(),
            auto_budget: self.auto_reading(),
        }
    }

    /// Core 0's `budget = "auto"` reading now.
    fn auto_reading(&self) -> Option<AutoReading> {
        self.cores.first().and_then(|c| c.auto.as_ref()?.last())
    }

    /// Runs events until arrivals stop (`limit`) and, with `drain`, every core is idle.
    fn run_until(&mut self, drain: bool) {
        loop {
            let (ac, ta) = self.next_arrival();
            if ac == usize::MAX && !drain {
                break;
            }
            let (cc, tc) = self.next_completion();
            if ac == usize::MAX && cc == usize::MAX {
                break;
            }
            self.events += 1;
            if ta <= tc {
                self.arrive(ac, ta);
            } else {
                self.complete(cc, tc);
            }
        }
    }

    /// Starts a phase: new class streams with `shares` from now on, `packets` more arrivals,
    /// the per-phase counters zeroed (rings, engines and controllers carry on).
    fn start_phase(&mut self, shares: &[f64], packets: u64) {
        let cfg = self.cfg;
        self.streams = streams_from(cfg, shares, self.now, &mut self.rng);
        if let Some(b) = self.bursts.as_mut() {
            // The bursts go on at the new shares; a burst the last phase ran past starts now.
            if !b.next.is_finite() || b.next < self.now {
                (b.next, b.left) = (self.now, b.size);
            }
        }
        let flows = self.streams.last().map_or(0, |s| s.flow_base + s.flows);
        self.core_of_flow = (0..flows).map(|f| flow_core(f, cfg.cores)).collect();
        self.limit = self.total_sent + packets;
        self.phase_start = self.now;
        for a in &mut self.acc {
            a.hist.reset();
            (a.sum_lat, a.sum_wait, a.max_wait, a.delivered) = (0.0, 0.0, 0.0, 0);
        }
        for v in [
            &mut self.sent,
            &mut self.dropped,
            &mut self.core_sent,
            &mut self.core_dropped,
            &mut self.core_delivered,
        ] {
            v.iter_mut().for_each(|x| *x = 0);
        }
        for c in &mut self.cores {
            c.busy_ns = 0.0;
        }
        self.wakeups = 0;
    }
}

/// One run through several phases, each `cfg.packets` arrivals with its own class shares
/// (`phases[i]`, in class order, each summing to 1) at `cfg`'s rate: rings, engines and
/// `budget = "auto"` controllers carry over from phase to phase, so the result shows how the
/// scheduler follows a changing mix. One result per phase; a packet counts in the phase in
/// which it finished (the few in the rings at a boundary count in the next).
pub fn run_phases(cfg: &SimConfig, phases: &[Vec<f64>]) -> Result<Vec<SimResult>, SimError> {
    for (i, p) in phases.iter().enumerate() {
        SimConfig {
            shares: p.clone(),
            ..cfg.clone()
        }
        .validate()
        .map_err(|e| match e {
            SimError::Config(c) => {
                SimError::Config(ConfigError::new(format!("phases[{i}]"), c.to_string()))
            }
        })?;
    }
    let mut sim = Sim::new(cfg)?;
    let mut out = Vec::with_capacity(phases.len());
    for (i, p) in phases.iter().enumerate() {
        sim.start_phase(p, cfg.packets);
        sim.run_until(false);
        let reading = sim.auto_reading();
        if i + 1 == phases.len() {
            sim.run_until(true);
        }
        out.push(SimResult {
            auto_budget: reading,
            ..sim.result()
        });
    }
    Ok(out)
}

/// Flows of each class: `flows` split by share, at least one per class.
pub fn class_flows(cfg: &SimConfig) -> Vec<usize> {
    flows_by_share(cfg.flows, &cfg.shares)
}

fn flows_by_share(flows: usize, shares: &[f64]) -> Vec<usize> {
    (shares.iter())
        .map(|s| ((flows as f64 * s).round() as usize).max(1))
        .collect()
}

/// The core of every flow, per class (flows numbered within their class).
pub fn flow_cores(cfg: &SimConfig) -> Vec<Vec<usize>> {
    let mut base = 0;
    class_flows(cfg)
        .into_iter()
        .map(|f| {
            let cores = (base..base + f).map(|g| flow_core(g, cfg.cores)).collect();
            base += f;
            cores
        })
        .collect()
}

/// The share of the offered packets each core can expect: within a class every flow is
/// equally likely (Poisson and on/off pick a flow uniformly per packet, CBR takes them in
/// turn), so core `k` gets `Σ share(class) / flows(class)` over its flows. With few flows the
/// largest share exceeds `1/cores` and that core saturates first: the loss-free capacity of
/// all cores is at most `1 / (cores · max share)` of their sum ([`hash_bound`]).
pub fn core_shares(cfg: &SimConfig) -> Vec<f64> {
    let mut out = vec![0.0; cfg.cores.max(1)];
    for (share, cores) in cfg.shares.iter().zip(flow_cores(cfg)) {
        let per_flow = share / cores.len() as f64;
        for k in cores {
            out[k] += per_flow;
        }
    }
    out
}

/// The utilisation (offered load relative to all cores' capacity) at which the busiest core
/// of the flow hash reaches 100 %: 1 with perfect balance, less with few flows.
pub fn hash_bound(cfg: &SimConfig) -> f64 {
    let max = core_shares(cfg).into_iter().fold(0.0, f64::max);
    if max > 0.0 {
        (1.0 / (cfg.cores as f64 * max)).min(1.0)
    } else {
        1.0
    }
}

/// One arrival stream per class: its flows split by share (at least one per active class), the
/// first arrival drawn in the order the classes are listed.
fn streams(cfg: &SimConfig, rng: &mut Xoshiro256PlusPlus) -> Vec<Stream> {
    streams_from(cfg, &cfg.shares, 0.0, rng)
}

/// The class streams of `cfg` with the shares `shares`, starting at `t0`.
fn streams_from(
    cfg: &SimConfig,
    shares: &[f64],
    t0: f64,
    rng: &mut Xoshiro256PlusPlus,
) -> Vec<Stream> {
    let lambda_per_ns = cfg.offered_pps() / 1e9;
    let mut streams = Vec::with_capacity(shares.len());
    let mut flow_base = 0;
    for (&share, flows) in shares.iter().zip(flows_by_share(cfg.flows, shares)) {
        let rate = lambda_per_ns * share;
        let gap = if rate > 0.0 {
            1.0 / rate
        } else {
            f64::INFINITY
        };
        let next = if rate <= 0.0 {
            f64::INFINITY
        } else {
            t0 + match cfg.arrivals {
                Arrivals::Poisson => exp_sample(rng, gap),
                Arrivals::Cbr => rng.random::<f64>() * gap,
                Arrivals::OnOff { .. } => 0.0,
                Arrivals::Batch { .. } => f64::INFINITY,
            }
        };
        streams.push(Stream {
            next,
            rate_per_ns: rate,
            gap,
            on_end: 0.0,
            flow_base,
            flows,
            rr: 0,
        });
        flow_base += flows;
    }
    if let Arrivals::OnOff { on_ns, off_ns } = cfg.arrivals {
        for s in streams.iter_mut().filter(|s| s.rate_per_ns > 0.0) {
            s.on_end = t0 + exp_sample(rng, on_ns);
            let on_gap = s.gap * on_ns / (on_ns + off_ns);
            s.next = next_onoff(rng, t0, s, on_gap, on_ns, off_ns);
        }
    }
    streams
}

/// The gap between bursts of `size` packets at the streams' total rate.
fn burst_gap(streams: &[Stream], size: u32) -> f64 {
    let rate: f64 = streams.iter().map(|s| s.rate_per_ns).sum();
    if rate > 0.0 {
        f64::from(size) / rate
    } else {
        f64::INFINITY
    }
}

/// The class whose share of the streams' total rate `u` (uniform in [0, 1)) falls in.
fn draw_class(streams: &[Stream], u: f64) -> usize {
    let total: f64 = streams.iter().map(|s| s.rate_per_ns).sum();
    let mut at = u * total;
    for (i, s) in streams.iter().enumerate() {
        if at < s.rate_per_ns {
            return i;
        }
        at -= s.rate_per_ns;
    }
    // Rounding left `at` at the end: the last class with a rate.
    streams
        .iter()
        .rposition(|s| s.rate_per_ns > 0.0)
        .unwrap_or(0)
}

#[inline]
fn start_next(
    core: &mut Core,
    t: f64,
    x_mean: f64,
    exp_service: bool,
    service: &ServiceModel,
    rng: &mut Xoshiro256PlusPlus,
) {
    match core.engine.pick(&core.rings[..]) {
        None => {
            // Out of work, the worker flushes whatever waits. Its cost is charged to the next
            // grant: an idle core has the time, and a packet arriving meanwhile waits for it.
            if let Some((_, _, n, _)) = core.grant {
                core.egress += n as usize;
            }
            if core.egress > 0 {
                core.flush_owed = Some(core.flush_owed.unwrap_or(0) + core.egress);
                core.egress = 0;
            }
            core.tx.flushed();
            core.state = State::Idle;
            core.t_done = f64::INFINITY;
            core.grant = None;
        }
        Some(g) => {
            let pkt = core.rings[g.ring]
                .pop()
                .expect("the engine grants only non-empty rings");
            let mut x = if exp_service {
                exp_sample(rng, x_mean)
            } else {
                x_mean
            };
            // The simulator takes one packet per pick; picks continue the live worker's grant
            // while they stay on its ring within one allowance (each one less than the last)
            // and under its frame cap. The first packet of a grant carries the grant's cost.
            let cap = if service.max_grant == 0 {
                u32::MAX
            } else {
                service.max_grant
            };
            core.grant = match core.grant {
                Some((ring, max, n, lowest)) if ring == g.ring && g.max + 1 == max && n < cap => {
                    Some((ring, g.max, n + 1, lowest))
                }
                prev => {
                    // The previous grant ended: the worker's rule says whether a flush followed.
                    if let Some((_, _, n, lowest)) = prev {
                        core.egress += n as usize;
                        if core.tx.flush_after_at(lowest, core.egress, t as u64) {
                            x += service.flush_ns + core.egress as f64 * service.flush_frame_ns;
                            core.egress = 0;
                        }
                    }
                    if let Some(n) = core.flush_owed.take() {
                        x += service.flush_ns + n as f64 * service.flush_frame_ns;
                    }
                    x += service.grant_ns;
                    Some((g.ring, g.max, 1, TxPolicy::is_lowest(&core.engine, &g)))
                }
            };
            core.state = State::Serving;
            core.t_done = t + x;
            core.busy_ns += x;
            core.cur = Some((g, pkt, x));
        }
    }
}

fn next_onoff(
    rng: &mut Xoshiro256PlusPlus,
    t: f64,
    s: &mut Stream,
    on_gap: f64,
    on_ns: f64,
    off_ns: f64,
) -> f64 {
    let mut t = t + exp_sample(rng, on_gap);
    // Memorylessness lets an arrival that falls past the on period restart in the next one.
    while t > s.on_end {
        let off = if off_ns > 0.0 {
            exp_sample(rng, off_ns)
        } else {
            0.0
        };
        let start = s.on_end + off;
        s.on_end = start + exp_sample(rng, on_ns);
        t = start + exp_sample(rng, on_gap);
    }
    t
}
