//! The flow scheduler in the simulator: the twin of the live worker's flow mode (paper 003,
//! CROSS/Linux §3).
//!
//! The simulator runs the *same* [`llr_core::flow::Flows`] as the router: the same lookup
//! ([`Flows::classify`] on real frames built by [`llr_core::wire::build::frame`]), the same
//! [`FlowSched`](llr_core::flow::FlowSched) and the same elements on a per-packet copy of the
//! frame. Only the CPU costs are modelled:
//!
//! - the input flow spends `input-ns` per packet it drains from the receive ring (lookup and
//!   enqueue included);
//! - an element that spends CPU through [`Cx::spend`] (`work`) costs exactly what it spent;
//!   any other element costs `element-ns`;
//! - the forwarding decision and transmit cost `forward-ns` (default: paper 001's calibration,
//!   so a `forward`-only flow costs `input-ns + forward-ns = a·S + b + c`, the calibrated x);
//! - a context switch, the scheduler running a different flow than last time, costs
//!   `switch-ns + switch-per-doubling-ns · log2(eligible flows)`, those still eligible once the
//!   next is picked (paper 003 §6.1 measured ~280
//!   ns fixed plus ~5 ns per eligible flow on its sorted list; our scheduler's heap grows with
//!   the log, and `llrouter paper 003 --fig 5` measures both terms on this machine). It is
//!   overhead: busy time that no flow is charged for, as the live worker measures only its
//!   elements.
//!
//! Time is virtual (u64 ns) and advances by these costs; nothing reads a clock. Arrivals that
//! fall inside a turn enter the ring only when the turn ends, as in the live worker, which sees
//! its rings between turns.
//!
//! A `backlogged` stream is a closed-loop source with `window` packets in the router: a new
//! packet arrives whenever one leaves (forwarded or dropped). Its flow is always eligible, as
//! paper 003's experiments keep their flows, without the receive ring overflowing — which
//! would measure the ring, not the flow scheduler.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::IpAddr;

use hdrhistogram::Histogram;
use llr_core::classify::NumOrText;
use llr_core::error::FieldError;
use llr_core::flow::{
    AclSpec, Cx, FlowId, FlowSchedConfig, FlowSpec, Flows, Next, Pkt, Progress, Share, Step, INPUT,
};
use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::l4::proto;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::model;

/// One flow-scheduler simulation (a TOML file for `llrouter sim flows --config`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FlowSimConfig {
    /// Ingress class names (each has its global flow `class:<name>`).
    #[serde(default = "default_classes")]
    pub classes: Vec<String>,
    #[serde(default)]
    pub flow_scheduler: FlowSchedConfig,
    #[serde(default)]
    pub flows: Vec<FlowSpec>,
    #[serde(default)]
    pub acls: Vec<AclSpec>,
    /// Installs this many per-connection flows (exact 5-tuples in 198.18.0.0/15, TCP) that no
    /// traffic matches: what idle flows cost.
    #[serde(default)]
    pub idle_flows: u32,
    #[serde(default)]
    pub traffic: Vec<StreamSpec>,
    #[serde(default)]
    pub cost: CostModel,
    /// Frames the input flow drains per turn at most.
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// Receive ring size in frames (full: arrivals are dropped).
    #[serde(default = "default_ring")]
    pub ring: u32,
    /// Simulated time.
    #[serde(default = "default_duration_ms")]
    pub duration_ms: f64,
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_classes() -> Vec<String> {
    vec!["rt".into(), "be".into()]
}
fn default_batch() -> u32 {
    32
}
fn default_ring() -> u32 {
    512
}
fn default_duration_ms() -> f64 {
    100.0
}
fn default_seed() -> u64 {
    1
}

/// CPU costs, in ns (`[cost]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CostModel {
    /// Per packet drained by the input flow, lookup and enqueue included (default: paper 001's
    /// b, the packet-switching constant).
    #[serde(default = "default_input_ns")]
    pub input_ns: f64,
    /// Per element that spends nothing through `Cx::spend` (count, meter, dscp, acl).
    #[serde(default = "default_element_ns")]
    pub element_ns: f64,
    /// Per forwarding decision and transmit; default paper 001's a·S + c for the packet's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_ns: Option<f64>,
    /// Per context switch between flows, its fixed part (paper 003 §6.1: ~280 ns).
    #[serde(default = "default_switch_ns")]
    pub switch_ns: f64,
    /// Per context switch, per doubling of the eligible flows (default 0: the fixed cost
    /// alone; `llrouter paper 003 --fig 5` calibrates it from the live scheduler).
    #[serde(default)]
    pub switch_per_doubling_ns: f64,
}

fn default_input_ns() -> f64 {
    model::CAL_B_NS
}
fn default_element_ns() -> f64 {
    50.0
}
fn default_switch_ns() -> f64 {
    280.0
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            input_ns: default_input_ns(),
            element_ns: default_element_ns(),
            forward_ns: None,
            switch_ns: default_switch_ns(),
            switch_per_doubling_ns: 0.0,
        }
    }
}

/// How an open-loop stream's packets are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalKind {
    #[default]
    Poisson,
    /// Constant gaps, random phase.
    Cbr,
}

/// One traffic stream (`[[traffic]]`): packets of one 5-tuple and class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StreamSpec {
    #[serde(default = "default_src")]
    pub src: String,
    #[serde(default = "default_dst")]
    pub dst: String,
    /// Protocol: number or tcp, udp, icmp, icmpv6, sctp.
    #[serde(default = "default_proto")]
    pub proto: NumOrText,
    #[serde(default = "default_sport")]
    pub sport: u16,
    #[serde(default = "default_dport")]
    pub dport: u16,
    #[serde(default)]
    pub dscp: u8,
    /// Ingress class (default: the last class, where unclassified traffic goes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Offered packets per second (open loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pps: Option<f64>,
    /// Always `window` packets in the router instead of a rate (closed loop).
    #[serde(default)]
    pub backlogged: bool,
    #[serde(default = "default_window")]
    pub window: u32,
    /// Frame size in bytes, Ethernet header included.
    #[serde(default = "default_size")]
    pub size: u32,
    #[serde(default)]
    pub arrivals: ArrivalKind,
}

fn default_src() -> String {
    "10.0.0.1".into()
}
fn default_dst() -> String {
    "10.1.0.1".into()
}
fn default_proto() -> NumOrText {
    NumOrText::Text("udp".into())
}
fn default_sport() -> u16 {
    1234
}
fn default_dport() -> u16 {
    5000
}
fn default_window() -> u32 {
    64
}
fn default_size() -> u32 {
    64
}

/// Longest simulated time: a minute of virtual time is tens of millions of packets.
const MAX_DURATION_MS: f64 = 60_000.0;

impl FlowSimConfig {
    /// Parses TOML text; a schema error names the line.
    pub fn from_toml(text: &str) -> Result<FlowSimConfig, FieldError> {
        toml::from_str(text).map_err(|e| {
            let field = match e.span() {
                Some(s) => format!("line {}", 1 + text[..s.start].matches('\n').count()),
                None => "config".to_string(),
            };
            FieldError::new(field, e.message().to_string())
        })
    }

    /// The same configuration with every flow's quantum (and the default) set to `us`.
    pub fn with_quantum_us(&self, us: f64) -> FlowSimConfig {
        let mut c = self.clone();
        c.flow_scheduler.quantum_us = us;
        for f in &mut c.flows {
            f.quantum_us = Some(us);
        }
        c
    }
}

/// One flow's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowResult {
    pub name: String,
    pub id: FlowId,
    /// Fed only by open-loop (`pps`) streams: the flows whose latency matters.
    pub latency_sensitive: bool,
    pub share: Share,
    pub quantum_ns: u64,
    /// CPU time charged to the flow.
    pub cpu_ns: u64,
    /// `cpu_ns` over the busy time (switch overhead included in the busy time).
    pub cpu_share: f64,
    /// Packets that left the pipeline (forwarded or dropped by an element).
    pub done: u64,
    pub forwarded: u64,
    pub ring_drops: u64,
    pub queue_drops: u64,
    pub element_drops: u64,
    /// Arrival → leaving the pipeline after transmit, of forwarded packets, ns.
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub turns: u64,
    pub preemptions: u64,
}

/// The outcome of [`run`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowSimResult {
    /// Simulated time (the configured duration, plus the end of the last turn).
    pub sim_ns: u64,
    pub busy_ns: u64,
    pub idle_ns: u64,
    /// Busy time spent switching (no flow is charged for it).
    pub switch_overhead_ns: u64,
    pub switches: u64,
    pub switches_per_sec: f64,
    /// Packets that arrived (ring drops included).
    pub offered: u64,
    pub forwarded: u64,
    pub throughput_pps: f64,
    /// Flows installed, besides the input flow (class flows and idle flows included).
    pub flows_installed: usize,
    /// The input flow first, then every flow that saw a packet.
    pub flows: Vec<FlowResult>,
}

impl FlowSimResult {
    pub fn flow(&self, name: &str) -> Option<&FlowResult> {
        self.flows.iter().find(|f| f.name == name)
    }
}

/// A packet in the simulated router.
struct SimPkt {
    stream: u32,
    arrived: u64,
    /// Its own copy of the stream's frame: elements may rewrite it (dscp, meter remarking).
    frame: Box<[u8]>,
}

/// A stream, checked.
struct Stream {
    template: Box<[u8]>,
    class: usize,
    /// ns between packets (open loop); `None`: closed loop.
    gap_ns: Option<f64>,
    poisson: bool,
    forward_ns: u64,
    /// The flow its template maps to (for attributing ring drops).
    flow: FlowId,
    rng: Xoshiro256PlusPlus,
    next_ns: f64,
}

/// Per-flow counters the scheduler does not keep.
#[derive(Default)]
struct Acc {
    forwarded: u64,
    ring_drops: u64,
    element_drops: u64,
    closed_loop: bool,
    open_loop: bool,
    hist: Option<Histogram<u64>>,
}

fn protocol(p: &NumOrText) -> Result<u8, String> {
    match p {
        NumOrText::Num(n) => u8::try_from(*n).map_err(|_| format!("{n} is not a protocol (0-255)")),
        NumOrText::Text(t) => match t.to_ascii_lowercase().as_str() {
            "tcp" => Ok(proto::TCP),
            "udp" => Ok(proto::UDP),
            "icmp" => Ok(proto::ICMP),
            "icmpv6" | "ipv6-icmp" => Ok(proto::ICMPV6),
            "sctp" => Ok(proto::SCTP),
            o => o
                .parse::<u8>()
                .map_err(|_| format!("`{o}`: give a number or tcp, udp, icmp, icmpv6, sctp")),
        },
    }
}

fn finite_ns(field: &str, v: f64, min: f64) -> Result<u64, FieldError> {
    if !(v.is_finite() && v >= min && v <= 1e9) {
        return Err(FieldError::new(
            field,
            format!("{v} ns: give {min} to 1e9 ns"),
        ));
    }
    Ok(v.round() as u64)
}

/// The frame of a stream.
fn stream_frame(s: &StreamSpec) -> Result<Vec<u8>, FieldError> {
    let addr = |f: &str, v: &str| {
        v.parse::<IpAddr>()
            .map_err(|_| FieldError::new(f, format!("`{v}` is not an IP address")))
    };
    let (src, dst) = (addr("src", &s.src)?, addr("dst", &s.dst)?);
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(FieldError::new(
            "dst",
            "src and dst must both be IPv4 or IPv6",
        ));
    }
    let protocol = protocol(&s.proto).map_err(|r| FieldError::new("proto", r))?;
    if s.dscp > 63 {
        return Err(FieldError::new(
            "dscp",
            format!("{} is not a DSCP (0-63)", s.dscp),
        ));
    }
    let mut spec = FrameSpec {
        src,
        dst,
        protocol,
        dscp: s.dscp,
        src_port: s.sport,
        dst_port: s.dport,
        payload_len: 0,
        ..Default::default()
    };
    let headers = frame(&spec).len();
    if !(headers as u32..=9_018).contains(&s.size) {
        return Err(FieldError::new(
            "size",
            format!(
                "{} bytes: this stream's headers take {headers}; give {headers} to 9018",
                s.size
            ),
        ));
    }
    spec.payload_len = s.size as usize - headers;
    Ok(frame(&spec))
}

/// Runs one simulation. Errors name the field as spelled in the TOML (`flows[x].weight`,
/// `traffic[1].pps`, `cost.switch-ns`).
pub fn run(cfg: &FlowSimConfig) -> Result<FlowSimResult, FieldError> {
    if cfg.classes.is_empty() {
        return Err(FieldError::new("classes", "give at least one class"));
    }
    for (i, c) in cfg.classes.iter().enumerate() {
        if cfg.classes[..i].contains(c) {
            return Err(FieldError::new("classes", format!("`{c}` given twice")));
        }
    }
    if !(cfg.duration_ms.is_finite() && cfg.duration_ms > 0.0 && cfg.duration_ms <= MAX_DURATION_MS)
    {
        return Err(FieldError::new(
            "duration-ms",
            format!(
                "{}: give more than 0, at most {MAX_DURATION_MS}",
                cfg.duration_ms
            ),
        ));
    }
    if cfg.batch == 0 {
        return Err(FieldError::new("batch", "must be at least 1 frame"));
    }
    if cfg.ring == 0 {
        return Err(FieldError::new("ring", "must be at least 1 frame"));
    }
    let c = &cfg.cost;
    // Virtual time must move on every input turn, or a closed-loop source could spin forever.
    let input_ns = finite_ns("cost.input-ns", c.input_ns, 1.0)?;
    let element_ns = finite_ns("cost.element-ns", c.element_ns, 0.0)?;
    let switch_ns = finite_ns("cost.switch-ns", c.switch_ns, 0.0)?;
    finite_ns("cost.switch-per-doubling-ns", c.switch_per_doubling_ns, 0.0)?;
    let per_doubling = c.switch_per_doubling_ns;
    let forward_ns = c
        .forward_ns
        .map(|f| finite_ns("cost.forward-ns", f, 1.0))
        .transpose()?;
    cfg.flow_scheduler
        .defaults()
        .map_err(|e| e.within("flow-scheduler"))?;
    if cfg.traffic.is_empty() {
        return Err(FieldError::new(
            "traffic",
            "give at least one [[traffic]] stream",
        ));
    }
    let needed = cfg.flows.len() + cfg.idle_flows as usize;
    if needed > cfg.flow_scheduler.max_flows {
        return Err(FieldError::new(
            "idle-flows",
            format!(
                "{} flows and {} idle flows need flow-scheduler.max-flows ≥ {needed} (it is {})",
                cfg.flows.len(),
                cfg.idle_flows,
                cfg.flow_scheduler.max_flows
            ),
        ));
    }
    let no_if = |_: &str| None;
    let mut flows: Flows<SimPkt> = Flows::new(
        &cfg.flow_scheduler,
        &cfg.classes,
        &cfg.flows,
        &cfg.acls,
        &no_if,
    )?;
    for i in 0..cfg.idle_flows {
        let (hi, lo) = ((i >> 8) & 0xff, i & 0xff);
        let m = format!(
            "proto=tcp src=198.18.{hi}.{lo}/32 dst=198.19.{hi}.{lo}/32 sport={} dport=443",
            1024 + (i >> 16)
        );
        let spec = FlowSpec {
            name: format!("idle-{i}"),
            matches: Some(
                llr_core::classify::RuleSpec::parse_match(&m)
                    .map_err(|e| FieldError::new("idle-flows", e.to_string()))?,
            ),
            ..Default::default()
        };
        flows
            .add(&spec, &no_if)
            .map_err(|e| e.within("idle-flows"))?;
    }
    let n_ids = flows.sched.len() + 1;
    let mut acc: Vec<Acc> = (0..n_ids).map(|_| Acc::default()).collect();

    let end_ns = (cfg.duration_ms * 1e6).round() as u64;
    let mut streams = Vec::new();
    // Pending arrivals, earliest first: (time, sequence for a stable order, stream).
    let mut heap: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::new();
    let mut seq = 0u64;
    for (i, s) in cfg.traffic.iter().enumerate() {
        let field = |e: FieldError| e.within(&format!("traffic[{i}]"));
        let template = stream_frame(s).map_err(field)?;
        let class = match &s.class {
            None => cfg.classes.len() - 1,
            Some(c) => cfg.classes.iter().position(|n| n == c).ok_or_else(|| {
                field(FieldError::new(
                    "class",
                    format!("unknown class `{c}` (known: {})", cfg.classes.join(", ")),
                ))
            })?,
        };
        let gap_ns = match (s.pps, s.backlogged) {
            (Some(_), true) => {
                return Err(field(FieldError::new(
                    "pps",
                    "give pps or backlogged, not both",
                )))
            }
            (None, false) => {
                return Err(field(FieldError::new(
                    "pps",
                    "missing: give pps = N or backlogged = true",
                )))
            }
            (Some(p), false) if !(p.is_finite() && p > 0.0 && p <= 1e9) => {
                return Err(field(FieldError::new(
                    "pps",
                    format!("{p}: give more than 0, at most 1e9"),
                )))
            }
            (Some(p), false) => Some(1e9 / p),
            (None, true) => None,
        };
        if s.backlogged && s.window == 0 {
            return Err(field(FieldError::new(
                "window",
                "must be at least 1 packet",
            )));
        }
        let flow = flows.classify(&template, 1, class);
        let fwd = forward_ns.unwrap_or_else(|| {
            (model::CAL_A_NS_PER_BYTE * s.size as f64 + model::CAL_C_NS).round() as u64
        });
        // Each stream its own generator: adding a stream does not change the others' draws.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(
            cfg.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        let next_ns = match gap_ns {
            Some(g) if s.arrivals == ArrivalKind::Cbr => rng.random::<f64>() * g,
            Some(g) => -g * (1.0 - rng.random::<f64>()).ln(),
            None => 0.0,
        };
        if gap_ns.is_some() {
            acc[flow as usize].open_loop = true;
            if next_ns < end_ns as f64 {
                heap.push(Reverse((next_ns as u64, seq, i as u32)));
                seq += 1;
            }
        } else {
            acc[flow as usize].closed_loop = true;
            for _ in 0..s.window {
                heap.push(Reverse((0, seq, i as u32)));
                seq += 1;
            }
        }
        streams.push(Stream {
            template: template.into_boxed_slice(),
            class,
            gap_ns,
            poisson: s.arrivals == ArrivalKind::Poisson,
            forward_ns: fwd,
            flow,
            rng,
            next_ns,
        });
    }

    let ring_cap = cfg.ring as usize;
    let mut ring: VecDeque<(u32, u64)> = VecDeque::with_capacity(ring_cap);
    let (mut t, mut idle_ns, mut overhead_ns) = (0u64, 0u64, 0u64);
    let (mut offered, mut forwarded) = (0u64, 0u64);
    loop {
        // Arrivals up to now enter the ring (or are dropped at a full one).
        while let Some(&Reverse((at, _, si))) = heap.peek() {
            if at > t {
                break;
            }
            heap.pop();
            offered += 1;
            let st = &mut streams[si as usize];
            if ring.len() < ring_cap {
                ring.push_back((si, at));
            } else {
                acc[st.flow as usize].ring_drops += 1;
                if st.gap_ns.is_none() {
                    // A closed-loop source resends a lost packet one input cost later, so
                    // time moves on before it tries again.
                    heap.push(Reverse((t + input_ns, seq, si)));
                    seq += 1;
                }
            }
            // An open-loop stream has exactly one arrival pending: this one; draw the next.
            if let Some(g) = st.gap_ns {
                st.next_ns += if st.poisson {
                    -g * (1.0 - st.rng.random::<f64>()).ln()
                } else {
                    g
                };
                if st.next_ns < end_ns as f64 {
                    heap.push(Reverse((st.next_ns as u64, seq, si)));
                    seq += 1;
                }
            }
        }
        if t >= end_ns {
            break;
        }
        flows.sched.set_input_ready(!ring.is_empty());
        let switches = flows.sched.switches;
        let next = flows.sched.pick();
        if flows.sched.switches != switches {
            let eligible = flows.sched.eligible().max(1) as f64;
            let cost = (switch_ns as f64 + per_doubling * eligible.log2()).round() as u64;
            t += cost;
            overhead_ns += cost;
        }
        match next {
            Next::Idle => {
                let until = heap
                    .peek()
                    .map_or(end_ns, |Reverse((at, _, _))| (*at).min(end_ns))
                    .max(t);
                idle_ns += until - t;
                t = until;
                if heap.is_empty() {
                    break;
                }
            }
            Next::Input => {
                let mut cost = 0;
                for _ in 0..cfg.batch {
                    let Some((si, arrived)) = ring.pop_front() else {
                        break;
                    };
                    let st = &streams[si as usize];
                    let id = flows.classify(&st.template, 1, st.class);
                    cost += input_ns;
                    t += input_ns;
                    let p = SimPkt {
                        stream: si,
                        arrived,
                        frame: st.template.clone(),
                    };
                    if flows.sched.enqueue(id, p).is_err() && st.gap_ns.is_none() {
                        heap.push(Reverse((t, seq, si)));
                        seq += 1;
                    }
                }
                flows.sched.input_done(cost, !ring.is_empty());
            }
            Next::Flow(id) => {
                let a = &mut acc[id as usize];
                let streams = &streams;
                let heap = &mut heap;
                let seq = &mut seq;
                let t = &mut t;
                let forwarded = &mut forwarded;
                flows.sched.run_turn(id, |pl, pos, mut p: SimPkt| {
                    // A closed-loop source sends its next packet as this one leaves.
                    let mut leave = |at: u64, si: u32| {
                        if streams[si as usize].gap_ns.is_none() {
                            heap.push(Reverse((at, *seq, si)));
                            *seq += 1;
                        }
                    };
                    if pos == pl.len() {
                        let c = streams[p.stream as usize].forward_ns;
                        *t += c;
                        a.forwarded += 1;
                        *forwarded += 1;
                        a.hist
                            .get_or_insert_with(|| {
                                Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                                    .expect("valid bounds")
                            })
                            .saturating_record((*t - p.arrived).max(1));
                        leave(*t, p.stream);
                        return (Progress::Finished, c);
                    }
                    let mut spent = 0u64;
                    let now_ns = *t;
                    let len = p.frame.len();
                    let step = pl.run(
                        pos,
                        &mut Pkt {
                            frame: &mut p.frame,
                            len,
                            ingress: 1,
                        },
                        &mut Cx {
                            now_ns,
                            spend: &mut |ns| spent += ns,
                        },
                    );
                    let c = if spent > 0 { spent } else { element_ns };
                    *t += c;
                    match step {
                        Step::Next => (Progress::Next(p), c),
                        Step::Jump(k) => (Progress::At(p, usize::from(k)), c),
                        Step::Drop => {
                            a.element_drops += 1;
                            leave(*t, p.stream);
                            (Progress::Finished, c)
                        }
                    }
                });
            }
        }
    }

    let sim_ns = t.max(1);
    let busy_ns = sim_ns - idle_ns;
    let secs = sim_ns as f64 / 1e9;
    let mut out = Vec::new();
    for v in flows.sched.views() {
        let a = &acc[v.id as usize];
        let seen = v.id == INPUT || v.stats.enqueued + v.stats.queue_drops + a.ring_drops > 0;
        if !seen {
            continue;
        }
        let h = a.hist.as_ref();
        let q = |p: f64| h.map_or(0, |h| h.value_at_quantile(p));
        out.push(FlowResult {
            name: v.name.to_string(),
            id: v.id,
            latency_sensitive: a.open_loop && !a.closed_loop,
            share: v.params.share,
            quantum_ns: v.params.quantum_ns,
            cpu_ns: v.stats.cpu_ns,
            cpu_share: v.stats.cpu_ns as f64 / busy_ns.max(1) as f64,
            done: v.stats.done,
            forwarded: a.forwarded,
            ring_drops: a.ring_drops,
            queue_drops: v.stats.queue_drops,
            element_drops: a.element_drops,
            mean_ns: h.map_or(0.0, Histogram::mean),
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            max_ns: h.map_or(0, Histogram::max),
            turns: v.stats.turns,
            preemptions: v.stats.preemptions,
        });
    }
    Ok(FlowSimResult {
        sim_ns,
        busy_ns,
        idle_ns,
        switch_overhead_ns: overhead_ns,
        switches: flows.sched.switches,
        switches_per_sec: flows.sched.switches as f64 / secs,
        offered,
        forwarded,
        throughput_pps: forwarded as f64 / secs,
        flows_installed: flows.sched.len(),
        flows: out,
    })
}
