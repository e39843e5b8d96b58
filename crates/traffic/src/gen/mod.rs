//! Traffic generator: UDP probes (IPv4 or IPv6) carrying an [`llr_core::probe`] header, at a
//! chosen frame size, rate (constant or Poisson gaps), RT share and number of flows, bounded in
//! packets and time.
//!
//! Classes: flow `f` is real-time (class 0) for `f < rt_flows`, best-effort (class 1) otherwise.
//! Each packet picks its class with probability `rt_share`, then a flow of that class uniformly.
//! RT packets carry DSCP EF (46) when `rt_dscp` and go to `rt_port` when set.
//!
//! Frame size counts the Ethernet frame without FCS (what veth and AF_XDP see): IPv4 64..=1518
//! (UDP payload = size − 42), IPv6 84..=1518 (payload = size − 62); the probe needs 22 bytes.
//!
//! Backends: [`udp`] (sendmmsg, one socket per flow, works anywhere), [`xsk_tx`] (an AF_XDP
//! transmit socket on the egress interface; per-packet pacing, 0.5-0.8 Mpps here, root) and [`bpf_live`]
//! (`BPF_PROG_RUN` with live XDP frames redirected into the egress veth; Mpps in bursts, root).

pub mod bpf_live;
pub mod udp;
pub mod xsk_tx;

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use llr_core::sched::ConfigError;
use serde::{Deserialize, Serialize};

/// DSCP Expedited Forwarding.
pub const DSCP_EF: u8 = 46;
/// Class id of real-time packets.
pub const CLASS_RT: u8 = 0;
/// Class id of best-effort packets.
pub const CLASS_BE: u8 = 1;

// Thread set-up the generator's callers use (pinning, SCHED_FIFO), kept under their old path.
pub use llr_io::sys::{pin_to_cpu, set_fifo};

/// How the generator sends (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// UDP sockets with sendmmsg (~0.4 Mpps per core; works anywhere).
    Udp,
    /// An AF_XDP transmit socket on the route's egress interface (root; packet-by-packet
    /// pacing and timestamps, one sendto per batch of due packets at most).
    Xsk,
    /// BPF_PROG_RUN with live XDP frames redirected into the route's egress interface
    /// (Mpps; root; bursts of batch frames spaced to the average rate).
    BpfLive,
}

/// Runs the generator with `backend` on the calling thread (in the sender's network namespace)
/// until the packet or time bound of `cfg` or `stop`.
pub fn run(cfg: &GenConfig, backend: Backend, stop: &AtomicBool) -> Result<GenReport> {
    if backend != Backend::Xsk && (cfg.queues > 1 || cfg.tx_steer == TxSteer::Class) {
        let why = match backend {
            Backend::Udp if cfg.tx_steer == TxSteer::Rss => None,
            Backend::Udp => Some("plain sockets cannot pick their Tx queue by class"),
            _ => Some(
                "live XDP frames reach the peer's Rx queue of the sending CPU, not a chosen one",
            ),
        };
        if let Some(why) = why {
            anyhow::bail!(
                "--queues {} --tx-steer {:?}: needs the xsk backend ({why})",
                cfg.queues,
                cfg.tx_steer
            );
        }
    }
    match backend {
        Backend::Udp => drive(cfg, &mut udp::UdpSender::new(cfg)?, stop),
        Backend::Xsk => drive(cfg, &mut xsk_tx::XskSender::new(cfg)?, stop),
        Backend::BpfLive => bpf_live::run(cfg, stop),
    }
}

/// How packets pick their Tx queue when the generator sends on several (`queues` > 1, `xsk`
/// backend). On veth a frame sent on Tx queue q arrives on the peer's Rx queue q, so this is
/// the NIC's RSS or Flow Director seen by the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum TxSteer {
    /// By a hash of the flow (RSS): a flow stays on one queue, flows spread over all.
    #[default]
    Rss,
    /// By class (Flow Director): flow f of class c goes to queue `w × 2 + c`, w = hash(f) mod
    /// (queues / 2) — the layout of the router's `steering = "queues"` with queues/2 workers.
    Class,
}

impl TxSteer {
    /// The Tx queue of `flow` (of class `class`) among `queues`.
    pub fn queue(self, flow: u16, class: u8, queues: u16) -> u16 {
        let h = Rng::new(u64::from(flow)).next_u64();
        match self {
            TxSteer::Rss => (h % u64::from(queues.max(1))) as u16,
            TxSteer::Class => {
                let groups = (queues / 2).max(1);
                (h % u64::from(groups)) as u16 * 2 + u16::from(class.min(1))
            }
        }
    }
}

/// Inter-arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Gaps {
    Constant,
    Poisson,
}

/// What to send. `llrouter gen` derives its flags from it (`clap` feature).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct GenConfig {
    /// Destination address (IPv4 or IPv6).
    #[cfg_attr(feature = "clap", arg(long))]
    pub dst: IpAddr,
    /// Destination UDP port.
    #[cfg_attr(
        feature = "clap",
        arg(long = "port", value_name = "PORT", default_value_t = 9000)
    )]
    pub dst_port: u16,
    /// Destination port of RT packets (default: --port).
    #[cfg_attr(feature = "clap", arg(long))]
    pub rt_port: Option<u16>,
    /// Mark RT packets with DSCP EF (46); `--no-dscp` leaves them unmarked.
    #[cfg_attr(feature = "clap", arg(long = "no-dscp", action = clap::ArgAction::SetFalse))]
    pub rt_dscp: bool,
    /// Frame size in bytes without FCS (IPv4 64..=1518, IPv6 84..=1518).
    #[cfg_attr(
        feature = "clap",
        arg(long = "size", value_name = "SIZE", default_value_t = 64)
    )]
    pub frame_size: usize,
    /// Offered rate, packets/s (0 = as fast as possible).
    #[cfg_attr(
        feature = "clap",
        arg(long = "rate", value_name = "RATE", default_value_t = 10_000.0)
    )]
    pub rate_pps: f64,
    /// Inter-arrival times.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = Gaps::Constant))]
    pub gaps: Gaps,
    /// Share of RT packets, 0..=1.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.3))]
    pub rt_share: f64,
    /// Number of flows (distinct source ports); the first round(flows × rt-share) are RT.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 8))]
    pub flows: u16,
    /// Stop after this many packets.
    #[cfg_attr(feature = "clap", arg(long))]
    pub packets: Option<u64>,
    /// Stop after this many seconds. One of --packets and --duration is required.
    #[cfg_attr(feature = "clap", arg(long, value_parser = crate::secs))]
    pub duration: Option<Duration>,
    /// Random seed (flow choice, Poisson gaps).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub seed: u64,
    /// Packets per send call at most.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 32))]
    pub batch: usize,
    /// TTL / hop limit of BE packets (bpf-live backend). 1: every BE packet expires at the
    /// router (an ICMP time-exceeded flood it must answer, not forward).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..)))]
    pub be_ttl: u8,
    /// Destination of the BE packets (bpf-live and xsk backends; default: `dst`). It must be
    /// of `dst`'s family and behind the same next hop: the frames take `dst`'s route. With a
    /// firewall rule that drops it, BE is a flood the router must not forward.
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long))]
    pub be_dst: Option<IpAddr>,
    /// Tx queues to send on (xsk backend; with the udp backend the kernel hashes each flow's
    /// socket to one of the interface's queues).
    #[serde(default = "one_queue")]
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub queues: u16,
    /// How a packet picks its Tx queue: rss (by flow hash) or class (queue w×2+class, the
    /// router's `steering = "queues"` layout).
    #[serde(default)]
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = TxSteer::Rss))]
    pub tx_steer: TxSteer,
}

fn one_queue() -> u16 {
    1
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            dst: IpAddr::from([127, 0, 0, 1]),
            dst_port: 9000,
            rt_port: None,
            rt_dscp: true,
            frame_size: 64,
            rate_pps: 10_000.0,
            gaps: Gaps::Constant,
            rt_share: 0.3,
            flows: 8,
            packets: Some(10_000),
            duration: None,
            seed: 1,
            batch: 32,
            be_ttl: 64,
            be_dst: None,
            queues: 1,
            tx_steer: TxSteer::Rss,
        }
    }
}

impl GenConfig {
    /// Header bytes below the UDP payload (Ethernet + IP + UDP).
    pub fn header_len(&self) -> usize {
        14 + if self.dst.is_ipv4() { 20 } else { 40 } + 8
    }

    /// UDP payload length for the frame size.
    pub fn payload_len(&self) -> usize {
        self.frame_size.saturating_sub(self.header_len())
    }

    /// Number of RT flows.
    pub fn rt_flows(&self) -> u16 {
        let f = self.flows as f64;
        let n = (f * self.rt_share).round() as u16;
        let lo = u16::from(self.rt_share > 0.0);
        let hi = if self.rt_share < 1.0 {
            self.flows - 1
        } else {
            self.flows
        };
        n.clamp(lo, hi)
    }

    /// Class of a flow.
    pub fn class_of(&self, flow: u16) -> u8 {
        if flow < self.rt_flows() {
            CLASS_RT
        } else {
            CLASS_BE
        }
    }

    /// Checks every field; the error names the generator's command-line flag (without `--`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field: &str, reason: String| Err(ConfigError::new(field, reason));
        let min = self.header_len() + llr_core::probe::LEN;
        if self.frame_size < min || self.frame_size > 1518 {
            return err(
                "size",
                format!(
                    "{}: must be {min}..=1518 for {} (frame without FCS, probe needs {} bytes)",
                    self.frame_size,
                    if self.dst.is_ipv4() { "IPv4" } else { "IPv6" },
                    llr_core::probe::LEN
                ),
            );
        }
        if !(self.rate_pps >= 0.0 && self.rate_pps.is_finite()) {
            return err(
                "rate",
                format!("{}: must be a finite number ≥ 0", self.rate_pps),
            );
        }
        if !(0.0..=1.0).contains(&self.rt_share) {
            return err(
                "rt-share",
                format!("{}: must be within 0..=1", self.rt_share),
            );
        }
        if self.flows == 0 || (self.rt_share > 0.0 && self.rt_share < 1.0 && self.flows < 2) {
            return err(
                "flows",
                format!(
                    "{}: need ≥ 1, and ≥ 2 when both classes are sent",
                    self.flows
                ),
            );
        }
        if self.packets.is_none() && self.duration.is_none() {
            return err(
                "packets",
                "at least one bound (--packets or --duration) is required".into(),
            );
        }
        if self.packets == Some(0) {
            return err("packets", "0: must be ≥ 1".into());
        }
        if self.batch == 0 || self.batch > 1024 {
            return err("batch", format!("{}: must be 1..=1024", self.batch));
        }
        if self.dst_port == 0 || self.rt_port == Some(0) {
            return err("port", "--port and --rt-port must be 1..=65535".into());
        }
        if let Some(d) = self.be_dst {
            if d.is_ipv4() != self.dst.is_ipv4() {
                return err(
                    "be_dst",
                    format!("{d}: not of the family of --dst {}", self.dst),
                );
            }
        }
        if self.queues == 0 || self.queues > 64 {
            return err("queues", format!("{}: must be 1..=64", self.queues));
        }
        if self.tx_steer == TxSteer::Class && self.queues % 2 != 0 {
            return err(
                "queues",
                format!(
                    "{}: --tx-steer class needs an even number (one queue per class and worker)",
                    self.queues
                ),
            );
        }
        Ok(())
    }
}

/// What was sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GenReport {
    pub backend: String,
    pub sent: u64,
    pub sent_rt: u64,
    pub sent_be: u64,
    /// Packets the local stack refused (send error); not numbered, not counted as sent.
    pub send_errors: u64,
    pub duration_s: f64,
    pub achieved_pps: f64,
    pub offered_pps: f64,
    pub frame_size: usize,
    /// Packets sent per flow (index = flow id): the sink's `unique` per flow can be compared.
    pub per_flow: Vec<u64>,
}

/// Small, fast, seeded PRNG (splitmix64): reproducible traffic without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in 0..n.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Decides when the next packet is due and which flow it belongs to.
#[derive(Debug, Clone)]
pub struct Schedule {
    rng: Rng,
    gaps: Gaps,
    mean_gap_ns: f64,
    rt_share: f64,
    rt_flows: u16,
    flows: u16,
    /// Due time of the next packet, ns (fractional part kept for exact constant rates).
    next_due: f64,
}

impl Schedule {
    pub fn new(cfg: &GenConfig, start_ns: u64) -> Self {
        Schedule {
            rng: Rng::new(cfg.seed),
            gaps: cfg.gaps,
            mean_gap_ns: if cfg.rate_pps > 0.0 {
                1e9 / cfg.rate_pps
            } else {
                0.0
            },
            rt_share: cfg.rt_share,
            rt_flows: cfg.rt_flows(),
            flows: cfg.flows,
            next_due: start_ns as f64,
        }
    }

    /// Due time of the next packet.
    pub fn next_due(&self) -> u64 {
        self.next_due as u64
    }

    /// Takes the next packet: returns its flow and advances the due time.
    pub fn take(&mut self) -> u16 {
        let gap = match self.gaps {
            Gaps::Constant => self.mean_gap_ns,
            Gaps::Poisson => -self.rng.unit().ln() * self.mean_gap_ns,
        };
        self.next_due += gap;
        let rt = self.rng.unit() <= self.rt_share && self.rt_flows > 0;
        if rt || self.rt_flows == self.flows {
            self.rng.below(self.rt_flows as u64) as u16
        } else {
            self.rt_flows + self.rng.below((self.flows - self.rt_flows) as u64) as u16
        }
    }
}

/// Sends per-flow batches; implemented by each backend.
pub trait Sender {
    /// Sends `count` packets of `flow` numbered `first_seq..`, stamping the probe with the current
    /// time; returns how many were sent (a prefix).
    fn send(&mut self, flow: u16, first_seq: u64, count: usize) -> Result<usize>;
    /// Transmits what `send` queued (backends that batch their syscalls).
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    /// Backend name for reports.
    fn name(&self) -> &'static str;
}

/// The pacing loop shared by all backends: runs until the packet or time bound or `stop`.
pub fn drive(cfg: &GenConfig, tx: &mut dyn Sender, stop: &AtomicBool) -> Result<GenReport> {
    cfg.validate()?;
    let start = llr_io::sys::mono_ns();
    let end = cfg
        .duration
        .map(|d| start + d.as_nanos() as u64)
        .unwrap_or(u64::MAX);
    let limit = cfg.packets.unwrap_or(u64::MAX);
    let mut sched = Schedule::new(cfg, start);
    let mut seq = vec![0u64; cfg.flows as usize];
    let mut rep = GenReport {
        backend: tx.name().to_owned(),
        offered_pps: cfg.rate_pps,
        frame_size: cfg.frame_size,
        ..Default::default()
    };
    let mut pending: Vec<u16> = Vec::with_capacity(cfg.batch);
    let mut counts = vec![0usize; cfg.flows as usize];
    let mut attempted = 0u64;
    // 1 µs: the pacing sleeps below wake close to their deadline.
    llr_io::sys::set_timer_slack(1000);
    loop {
        let now = llr_io::sys::mono_ns();
        if now >= end || attempted >= limit || stop.load(Ordering::Relaxed) {
            break;
        }
        pending.clear();
        while pending.len() < cfg.batch
            && attempted + (pending.len() as u64) < limit
            && sched.next_due() <= now
        {
            pending.push(sched.take());
        }
        if pending.is_empty() {
            let wait = sched.next_due().saturating_sub(now);
            if wait > 60_000 {
                // Sleep most of a long gap (leaving the core to a sink sharing it), spin the
                // rest: wake-ups cost ~20 µs here.
                std::thread::sleep(Duration::from_nanos((wait - 40_000).min(50_000_000)));
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        attempted += pending.len() as u64;
        // Group by flow, keeping per-flow order (one send call per flow).
        for &f in &pending {
            counts[f as usize] += 1;
        }
        for &f in &pending {
            let n = std::mem::take(&mut counts[f as usize]);
            if n == 0 {
                continue;
            }
            let sent = tx.send(f, seq[f as usize], n)?;
            seq[f as usize] += sent as u64;
            rep.sent += sent as u64;
            rep.send_errors += (n - sent) as u64;
            if cfg.class_of(f) == CLASS_RT {
                rep.sent_rt += sent as u64;
            } else {
                rep.sent_be += sent as u64;
            }
        }
        tx.flush()?;
    }
    rep.duration_s = (llr_io::sys::mono_ns() - start) as f64 / 1e9;
    rep.achieved_pps = rep.sent as f64 / rep.duration_s.max(1e-9);
    rep.per_flow = seq;
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_steering_keeps_flows_on_one_queue_and_classes_apart() {
        // RSS: every flow on one queue of 4, all queues used by 64 flows.
        let mut used = [0u32; 4];
        for f in 0..64 {
            let q = TxSteer::Rss.queue(f, 0, 4);
            assert_eq!(q, TxSteer::Rss.queue(f, 1, 4), "the class does not matter");
            used[q as usize] += 1;
        }
        assert!(used.iter().all(|&n| n > 0), "{used:?}");
        // Class: class c on queue w×2 + c; both groups used.
        let mut groups = [0u32; 2];
        for f in 0..64 {
            for c in [CLASS_RT, CLASS_BE] {
                let q = TxSteer::Class.queue(f, c, 4);
                assert_eq!(q % 2, u16::from(c), "flow {f} class {c} on queue {q}");
                groups[q as usize / 2] += 1;
            }
        }
        assert!(groups.iter().all(|&n| n > 0), "{groups:?}");
        assert_eq!(TxSteer::Class.queue(5, CLASS_BE, 2), 1);
        let odd = GenConfig {
            queues: 3,
            tx_steer: TxSteer::Class,
            ..Default::default()
        };
        assert_eq!(odd.validate().unwrap_err().field, "queues");
    }

    #[test]
    fn rt_flow_split() {
        let mut c = GenConfig {
            flows: 10,
            rt_share: 0.3,
            ..Default::default()
        };
        assert_eq!(c.rt_flows(), 3);
        c.rt_share = 0.01;
        assert_eq!(c.rt_flows(), 1);
        c.rt_share = 0.99;
        assert_eq!(c.rt_flows(), 9);
        c.rt_share = 0.0;
        assert_eq!(c.rt_flows(), 0);
        c.rt_share = 1.0;
        assert_eq!(c.rt_flows(), 10);
    }

    #[test]
    fn schedule_rates_and_shares() {
        for gaps in [Gaps::Constant, Gaps::Poisson] {
            let c = GenConfig {
                rate_pps: 1e6,
                gaps,
                flows: 10,
                rt_share: 0.3,
                ..Default::default()
            };
            let mut s = Schedule::new(&c, 0);
            let n = 100_000;
            let mut rt = 0;
            for _ in 0..n {
                if c.class_of(s.take()) == CLASS_RT {
                    rt += 1;
                }
            }
            // 100k packets at 1 Mpps: 100 ms of schedule.
            let t = s.next_due() as f64;
            assert!((t - 1e8).abs() < 2e6, "{gaps:?}: {t}");
            let share = rt as f64 / n as f64;
            assert!((share - 0.3).abs() < 0.01, "{share}");
        }
    }

    #[test]
    fn validation_names_flags() {
        let bad = |c: GenConfig, flag: &str| {
            let e = c.validate().unwrap_err();
            assert_eq!(format!("--{}", e.field), flag, "{e}");
        };
        let d = GenConfig::default();
        bad(
            GenConfig {
                frame_size: 63,
                ..d.clone()
            },
            "--size",
        );
        bad(
            GenConfig {
                dst: "::1".parse().unwrap(),
                frame_size: 64,
                ..d.clone()
            },
            "--size",
        );
        bad(
            GenConfig {
                rt_share: 1.5,
                ..d.clone()
            },
            "--rt-share",
        );
        bad(
            GenConfig {
                packets: None,
                duration: None,
                ..d.clone()
            },
            "--packets",
        );
        bad(GenConfig { flows: 1, ..d }, "--flows");
        assert!(GenConfig::default().validate().is_ok());
    }
}

#[cfg(test)]
mod e2e {
    use super::*;
    use crate::netns::{addr, Topology};
    use crate::sink::{Sink, SinkConfig};

    /// UDP generator → kernel-forwarding router namespace → sink, IPv4 and IPv6, light load:
    /// every packet arrives, in order, with the right class split.
    #[test]
    #[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
    fn udp_gen_through_topology_to_sink() {
        through_topology("llrge", |c| Box::new(udp::UdpSender::new(c).unwrap()));
    }

    /// The same with the AF_XDP transmit backend: its frames (templates, incremental UDP
    /// checksums, MACs from the neighbour table) are accepted by the kernel router and the
    /// sink's UDP stack, v4 and v6.
    #[test]
    #[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
    fn xsk_gen_through_topology_to_sink() {
        through_topology("llrgx", |c| Box::new(xsk_tx::XskSender::new(c).unwrap()));
    }

    /// Back-to-back generators on one interface queue (as in a testbed sweep): the kernel
    /// releases a closed AF_XDP socket asynchronously, and the next bind must wait for it
    /// (it failed with EBUSY in CI before `TxSocket::open` retried).
    #[test]
    #[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
    fn xsk_sockets_reopen_back_to_back() {
        llr_io::sys::require_root();
        let topo = Topology::new("llrgr").unwrap();
        let ifname = addr::GEN_IF;
        topo.gen
            .run(|| {
                let ifindex = llr_io::ebpf::ifindex(ifname).unwrap();
                for i in 0..30 {
                    let s = llr_io::xsk::TxSocket::open(ifindex, 0, 64, 64);
                    assert!(s.is_ok(), "open #{i}: {:?}", s.err());
                }
            })
            .unwrap();
    }

    fn through_topology(prefix: &str, make: impl Fn(&GenConfig) -> Box<dyn Sender> + Sync) {
        llr_io::sys::require_root();
        let topo = Topology::new(prefix).unwrap();
        for dst in [addr::SINK_V4, addr::SINK_V6] {
            let mut sink = topo
                .sink
                .run(|| {
                    Sink::bind(SinkConfig {
                        ports: vec![9000, 9001],
                        packets: Some(2000),
                        duration: Some(Duration::from_secs(10)),
                        idle: Some(Duration::from_secs(3)),
                        ..Default::default()
                    })
                })
                .unwrap()
                .unwrap();
            let stop = AtomicBool::new(false);
            let cfg = GenConfig {
                dst: dst.parse().unwrap(),
                rt_port: Some(9001),
                frame_size: if dst.contains(':') { 84 } else { 64 },
                rate_pps: 20_000.0,
                packets: Some(2000),
                duration: Some(Duration::from_secs(5)),
                ..Default::default()
            };
            let (g, st) = std::thread::scope(|s| {
                let h = s.spawn(|| sink.run(&stop).unwrap());
                let g = topo
                    .gen
                    .run(|| {
                        let mut tx = make(&cfg);
                        drive(&cfg, tx.as_mut(), &AtomicBool::new(false)).unwrap()
                    })
                    .unwrap();
                (g, h.join().unwrap())
            });
            assert_eq!(g.sent, 2000);
            assert_eq!(g.sent_rt + g.sent_be, 2000);
            let r = st.report();
            assert_eq!(r.received, 2000, "{r:?}");
            assert_eq!(r.invalid, 0);
            let rt = r.classes.iter().find(|c| c.class == CLASS_RT).unwrap();
            assert_eq!(rt.seq.received, g.sent_rt);
            assert_eq!(rt.seq.lost + rt.seq.duplicates, 0);
            let share = g.sent_rt as f64 / 2000.0;
            assert!((share - 0.3).abs() < 0.06, "{share}");
            for (f, s) in &r.flows {
                assert_eq!(s.unique, g.per_flow[*f as usize]);
            }
        }
    }
}
