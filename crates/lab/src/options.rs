//! What a study runs: the forwarding targets and the settings of traffic and router shared by
//! sweeps, MLFFR searches and iperf runs.

use std::path::PathBuf;

use std::num::NonZeroU32;

use llr_core::sched::{Budget, SchedConfig, StrategyKind, TxPolicy};
use llr_io::xsk::WakeMode;
pub use llr_router::Steering;
use llr_traffic::gen::Gaps;

use crate::{LabError, Result};
use serde::{Deserialize, Serialize};

/// How the generator sends (llr-traffic's; `clap::ValueEnum` under the `clap` feature).
pub use llr_traffic::gen::Backend as GenBackend;

/// Which sink receives a point: the closed choice of [`llr_traffic::sink::SinkBackend`], whose XDP
/// variant also names the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum SinkBackend {
    /// UDP sockets with recvmmsg (exact HDR histograms; ~0.5 Mpps).
    Udp,
    /// XDP program on --iface: timestamps in the driver, histograms in maps (3 % buckets), drops.
    Xdp,
}

impl SinkBackend {
    /// llr-traffic's sink backend, the XDP program on `iface`.
    pub fn on(self, iface: &str) -> llr_traffic::sink::SinkBackend {
        match self {
            SinkBackend::Udp => llr_traffic::sink::SinkBackend::Udp,
            SinkBackend::Xdp => llr_traffic::sink::SinkBackend::Xdp {
                iface: iface.to_string(),
            },
        }
    }
}

/// A forwarding target.
///
/// `kernel`: Linux forwarding in the router ns, its softirq steered to the router CPU with RPS;
/// `kernel-htb`: plus an egress HTB qdisc giving DSCP EF the higher priority;
/// `kernel-xdp`: plus an XDP program that passes every frame on the router's interfaces, so the
/// kernel forwards under the link conditions llrouter has (a veth whose peer runs XDP loses its
/// segmentation offload: the sender's frames arrive MTU-sized, not as 64 KB aggregates);
/// `llrouter:<strategy>`: an llrouter process in the router ns (see the `router_proc` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Kernel,
    KernelHtb,
    KernelXdp,
    Llrouter(StrategyKind),
    /// llrouter with the flow scheduler on (`llrouter:<strategy>+flows`): the flows of
    /// `--flow-config`, or only the class flows (forwarding only) without it.
    LlrouterFlows(StrategyKind),
}

/// A target that does not parse; the message names what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TargetError(pub String);

impl std::str::FromStr for Target {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Target, TargetError> {
        let t = s.trim();
        Ok(match t {
            "kernel" => Target::Kernel,
            "kernel-htb" => Target::KernelHtb,
            "kernel-xdp" => Target::KernelXdp,
            _ => match t.strip_prefix("llrouter:") {
                Some(strat) => {
                    let (strat, flows) = match strat.strip_suffix("+flows") {
                        Some(s) => (s, true),
                        None => (strat, false),
                    };
                    let k = strat.parse().map_err(|e: llr_core::sched::ConfigError| {
                        TargetError(format!("`{t}`: {}", e.reason))
                    })?;
                    if flows {
                        Target::LlrouterFlows(k)
                    } else {
                        Target::Llrouter(k)
                    }
                }
                None => {
                    return Err(TargetError(format!(
                        "`{t}`: expected kernel, kernel-htb, kernel-xdp, llrouter:<strategy> or llrouter:<strategy>+flows"
                    )))
                }
            },
        })
    }
}

impl Target {
    /// The name in reports and CSV files (`llrouter:ll-wfq`).
    pub fn label(&self) -> String {
        self.to_string()
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Kernel => f.write_str("kernel"),
            Target::KernelHtb => f.write_str("kernel-htb"),
            Target::KernelXdp => f.write_str("kernel-xdp"),
            Target::Llrouter(s) => write!(f, "llrouter:{s}"),
            Target::LlrouterFlows(s) => write!(f, "llrouter:{s}+flows"),
        }
    }
}

/// Ring budgets of the llrouter targets' classes, `RT,BE` packets per turn (the BE budget set
/// by the worker is [`Options::auto_budget_us`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    pub rt: NonZeroU32,
    pub be: NonZeroU32,
}

impl Budgets {
    /// `rt,be`.
    ///
    /// # Panics
    /// On a budget of 0 (a ring with budget 0 starves).
    pub fn new(rt: u32, be: u32) -> Budgets {
        let n = |b| NonZeroU32::new(b).expect("a ring budget is at least 1 packet");
        Budgets {
            rt: n(rt),
            be: n(be),
        }
    }

    /// The budgets as [`Budget`]s.
    pub fn rt(&self) -> Budget {
        Budget::Packets(self.rt)
    }

    pub fn be(&self) -> Budget {
        Budget::Packets(self.be)
    }
}

impl std::str::FromStr for Budgets {
    type Err = String;
    fn from_str(s: &str) -> Result<Budgets, String> {
        let fixed = |x: &str| {
            match x.parse::<Budget>() {
            Ok(Budget::Packets(n)) => Ok(n),
            Ok(_) => Err(format!(
                "`{x}`: the testbed takes packet counts here (--auto-budget-us sets BE's automatically)"
            )),
            Err(e) => Err(e.to_string()),
        }
        };
        match s.split(',').collect::<Vec<_>>()[..] {
            [rt, be] => Ok(Budgets {
                rt: fixed(rt)?,
                be: fixed(be)?,
            }),
            _ => Err(format!("`{s}`: expected RT,BE packet counts, e.g. 60,4")),
        }
    }
}

impl std::fmt::Display for Budgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.rt, self.be)
    }
}

/// A target as a typed option value (the reason without the field, which the flag names).
pub fn parse_target(s: &str) -> std::result::Result<Target, String> {
    s.parse().map_err(|e: TargetError| e.0)
}

/// Settings shared by sweeps, MLFFR searches and iperf runs (`llrouter testbed` derives its
/// flags from them). Field errors name the command-line flag (`gen-batch`).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Options {
    /// Targets, comma-separated: kernel, kernel-htb, kernel-xdp (the kernel behind a pass-all
    /// XDP program: the link conditions llrouter has), llrouter:<strategy>[+flows].
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ',', value_parser = parse_target, default_value = "kernel,kernel-htb"))]
    pub targets: Vec<Target>,
    /// Use this topology (from `up`) instead of a temporary one.
    #[cfg_attr(feature = "clap", arg(long))]
    pub name: Option<String>,
    /// Frame size in bytes without FCS.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Options::DEFAULT_SIZE))]
    pub size: usize,
    /// Number of flows.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Options::DEFAULT_FLOWS))]
    pub flows: u16,
    /// Inter-arrival times.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = Gaps::Poisson))]
    pub gaps: Gaps,
    /// Seconds of traffic per measurement point.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Options::DEFAULT_POINT_SECS))]
    pub point_secs: f64,
    /// CPU of the router (RPS target of the kernel, worker of llrouter).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Options::DEFAULT_ROUTER_CPU))]
    pub router_cpu: usize,
    /// CPU of the generator and sink threads.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Options::DEFAULT_GEN_CPU))]
    pub gen_cpu: usize,
    /// Use IPv6 instead of IPv4.
    #[cfg_attr(feature = "clap", arg(long))]
    pub ipv6: bool,
    /// Output directory (router configs and logs; the study's files).
    #[cfg_attr(feature = "clap", arg(long, default_value = "testbed-out"))]
    pub out: PathBuf,
    /// Generator backend: bpf-live (Mpps, bursts of --gen-batch), xsk (AF_XDP Tx, packet by
    /// packet, 0.5-0.8 Mpps here) or udp.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = GenBackend::BpfLive))]
    pub gen_backend: GenBackend,
    /// Sink backend: xdp (histograms in maps, 3 % buckets) or udp (exact HDR).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = SinkBackend::Xdp))]
    pub sink_backend: SinkBackend,
    /// llrouter targets: wake-up mode.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = WakeMode::Interrupt))]
    pub wake: WakeMode,
    /// llrouter targets: ring budgets of rt and be, `RT,BE` (ll-rr: BE for both rings).
    #[cfg_attr(feature = "clap", arg(long, default_value = "60,4"))]
    pub budgets: Budgets,
    /// llrouter:ll-wfq targets: `budget = "auto"` for be, towards an RT time in ring of this
    /// many µs (paper 000's Eq. 2 with the measured ρRT and x; replaces the BE budget).
    #[cfg_attr(feature = "clap", arg(long))]
    pub auto_budget_us: Option<f64>,
    /// llrouter targets: device budget.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = SchedConfig::DEFAULT_DEVICE_BUDGET))]
    pub device_budget: u32,
    /// llrouter targets: artificial per-packet cost in ns (busy wait).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0))]
    pub cost_ns: u64,
    /// Generator (bpf-live) burst size in frames, 1..=1024. Below 8 the generator falls far short
    /// of its rate when the router's ingress has an XDP program (see docs/results.md, "How to read them").
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Options::DEFAULT_GEN_BATCH))]
    pub gen_batch: usize,
    /// Receive on the router's CPU: threaded NAPI for the router's ingress veth, its kernel
    /// thread pinned to --router-cpu. Without it the ingress veth's receive work (XDP
    /// classifier, AF_XDP copy, or the kernel's GRO) runs on the generator's CPU inside its
    /// send call, which caps the `xsk` generator below llrouter's capacity. Needs a sleeping
    /// worker (`--wake interrupt`): a busy-polling worker on the same CPU starves the thread.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rx_napi_thread: bool,
    /// Run the sink veth's receive (its XDP program or UDP stack) on the generator's CPU
    /// (threaded NAPI for the sink veth, pinned there at real-time priority, and RPS) instead
    /// of in softirq on the router's CPU inside the router's transmit, for every target alike.
    /// On a 2-core machine that CPU then also carries the generator and the router's ingress
    /// receive (see docs/results.md, "How to read them", before trusting loss figures with it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub sink_on_gen_cpu: bool,
    /// Keep every other task of the machine (processes, unbound kernel threads and
    /// workqueues) off the router's CPUs while this runs (a cgroup v1 cpuset, removed at the
    /// end): without it, anything that wakes on the router's CPU takes it from the worker for a
    /// scheduler tick or more, and the RT tail shows it. Confines other users' work too.
    #[cfg_attr(feature = "clap", arg(long))]
    pub shield: bool,
    /// llrouter targets: Rx ring entries per class socket (power of two; 512 as in paper 000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Options::DEFAULT_RX_SIZE))]
    pub rx_size: u32,
    /// llrouter targets: BE frames held back before a transmit kick (1: a kick per grant).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TxPolicy::DEFAULT_BATCH))]
    pub tx_batch: u32,
    /// llrouter targets: µs the RT frames may wait for --tx-batch frames before a kick of their
    /// own (the router's `tx-hold-us`; 0: a kick after every RT grant).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TxPolicy::DEFAULT_HOLD_US))]
    pub tx_hold_us: u32,
    /// llrouter targets: the llrouter binary (default: this executable).
    #[cfg_attr(feature = "clap", arg(long))]
    pub router_bin: Option<PathBuf>,
    /// TTL / hop limit of the generator's BE packets (bpf-live). 1: every BE packet expires at
    /// the router, which answers with ICMP time exceeded (rate-limited) instead of forwarding.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Options::DEFAULT_TTL, value_parser = clap::value_parser!(u8).range(1..)))]
    pub be_ttl: u8,
    /// Destination of the generator's BE packets (bpf-live, xsk; default: the sink's address),
    /// behind the same next hop: with a firewall rule in the router's namespace that drops it,
    /// BE becomes a blocked flood beside the RT traffic (`testbed flood` sets both up).
    #[cfg_attr(feature = "clap", arg(long))]
    pub be_dst: Option<std::net::IpAddr>,
    /// llrouter targets: hand what the host's firewall has that llrouter cannot evaluate
    /// (connection tracking, NAT, …) to the kernel (`[firewall] unsupported = "kernel"`)
    /// instead of refusing to start.
    #[cfg_attr(feature = "clap", arg(long))]
    pub firewall_to_kernel: bool,
    /// llrouter targets: workers, on --router-cpu and the CPUs after it (wrapping around). The
    /// veths get one queue per worker; the generator must be xsk (it spreads flows over the
    /// queues by hash, as RSS) or udp (the kernel hashes each socket to a queue); the kernel
    /// targets get one RPS CPU per queue.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub workers: usize,
    /// llrouter targets: xdp (the classifier's rules) or queues (the xsk generator puts class c
    /// of flow f in queue w×2+c, an emulated Flow Director; the router uses no rules).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = Steering::Xdp))]
    pub steering: Steering,
    /// `llrouter:<strategy>+flows` targets: a TOML file with the router's `[flow-scheduler]`,
    /// `[[flows]]` and `[[acls]]` (without it: the class flows only, forwarding only).
    #[cfg_attr(feature = "clap", arg(long))]
    pub flow_config: Option<PathBuf>,
}

impl Options {
    pub const DEFAULT_SIZE: usize = 64;
    pub const DEFAULT_FLOWS: u16 = 16;
    pub const DEFAULT_POINT_SECS: f64 = 2.0;
    pub const DEFAULT_ROUTER_CPU: usize = 1;
    pub const DEFAULT_GEN_CPU: usize = 0;
    pub const DEFAULT_GEN_BATCH: usize = 32;
    pub const DEFAULT_RX_SIZE: u32 = 512;
    pub const DEFAULT_TTL: u8 = 64;

    /// The defaults of `llrouter testbed run` for `targets`, writing to `out`.
    pub fn new(targets: &[Target], out: PathBuf) -> Options {
        Options {
            targets: targets.to_vec(),
            name: None,
            size: Self::DEFAULT_SIZE,
            flows: Self::DEFAULT_FLOWS,
            gaps: Gaps::Poisson,
            point_secs: Self::DEFAULT_POINT_SECS,
            router_cpu: Self::DEFAULT_ROUTER_CPU,
            gen_cpu: Self::DEFAULT_GEN_CPU,
            ipv6: false,
            out,
            gen_backend: GenBackend::BpfLive,
            sink_backend: SinkBackend::Xdp,
            wake: WakeMode::Interrupt,
            budgets: Budgets::new(
                SchedConfig::DEFAULT_HIGH_BUDGET,
                SchedConfig::DEFAULT_LOW_BUDGET,
            ),
            auto_budget_us: None,
            device_budget: SchedConfig::DEFAULT_DEVICE_BUDGET,
            cost_ns: 0,
            tx_batch: TxPolicy::DEFAULT_BATCH,
            tx_hold_us: TxPolicy::DEFAULT_HOLD_US,
            gen_batch: Self::DEFAULT_GEN_BATCH,
            rx_size: Self::DEFAULT_RX_SIZE,
            rx_napi_thread: false,
            sink_on_gen_cpu: false,
            shield: false,
            router_bin: None,
            be_ttl: Self::DEFAULT_TTL,
            be_dst: None,
            firewall_to_kernel: false,
            workers: 1,
            steering: Steering::Xdp,
            flow_config: None,
        }
    }

    /// Keeps the calling thread off the router's CPUs (on the others online; the generator's
    /// CPU if that leaves none). The testbed's own helper threads (the sink's map reader, the
    /// counter sampler) wake up hundreds of times a second: on the router's CPU each wake-up
    /// preempts the busy-polling worker, and the CPU shield does not move them, as it leaves
    /// the testbed's own process where it is. Best effort: a thread that cannot move stays.
    pub fn keep_off_router_cpus(&self) {
        let router: std::collections::BTreeSet<usize> = self.router_cpus().into_iter().collect();
        let mut others: std::collections::BTreeSet<usize> = llr_ops::cpus::online()
            .difference(&router)
            .copied()
            .collect();
        if others.is_empty() {
            others.insert(self.gen_cpu);
        }
        if let Err(e) = llr_io::sys::set_affinity(&others) {
            tracing::debug!("keeping a testbed thread off the router's CPUs: {e}");
        }
    }

    /// The router's CPUs: `workers` CPUs from `router_cpu` on, wrapping around the online
    /// ones (on a 2-core VM, 2 workers from CPU 1 are on CPUs 1 and 0).
    pub fn router_cpus(&self) -> Vec<usize> {
        let online: Vec<usize> = llr_ops::cpus::online().into_iter().collect();
        let start = online
            .iter()
            .position(|&c| c == self.router_cpu)
            .unwrap_or(0);
        (0..self.workers.min(online.len().max(1)))
            .map(|i| {
                online
                    .get((start + i) % online.len().max(1))
                    .copied()
                    .unwrap_or(self.router_cpu)
            })
            .collect()
    }

    /// Rx/Tx queues of every testbed veth: one per worker, or per worker and class with queue
    /// steering.
    /// Frames the generator sends back to back: its batch, except the `xsk` backend, which
    /// paces frame by frame.
    pub fn arrival_burst(&self) -> u32 {
        match self.gen_backend {
            GenBackend::Xsk => 1,
            _ => self.gen_batch as u32,
        }
    }

    pub fn veth_queues(&self) -> u32 {
        match self.steering {
            Steering::Xdp => self.workers as u32,
            _ => self.workers as u32 * 2,
        }
    }

    /// Whether the generator must choose Tx queues (several queues, or classes by queue).
    pub fn multi_queue(&self) -> bool {
        self.veth_queues() > 1
    }
}

/// Errors unless this process is root (the last check before a topology is built).
pub fn need_root() -> Result<()> {
    if !llr_io::sys::is_root() {
        return Err(LabError::NeedRoot);
    }
    Ok(())
}

/// Binary-search settings shared by `mlffr` and the load multiples of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Search {
    /// Tolerated loss ratio, [0, 1).
    pub loss_tolerance: f64,
    /// Range of rates, packets/s.
    pub min_rate: f64,
    pub max_rate: f64,
    /// Binary-search steps, 1..=30.
    pub steps: u32,
}

impl Search {
    /// Checks the tolerance and the number of steps.
    pub fn check(&self) -> Result<()> {
        if !(0.0..1.0).contains(&self.loss_tolerance) {
            return Err(LabError::invalid("loss-tolerance", "must be within [0, 1)"));
        }
        if self.steps == 0 || self.steps > 30 {
            return Err(LabError::invalid("steps", "must be 1..=30"));
        }
        Ok(())
    }
}

/// Checks a number of rounds (`--repeat`) against `max`.
pub fn check_repeat(repeat: u32, max: u32) -> Result<()> {
    if repeat == 0 || repeat > max {
        return Err(LabError::invalid("repeat", format!("must be 1..={max}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        assert_eq!("kernel".parse::<Target>().unwrap(), Target::Kernel);
        assert_eq!("kernel-xdp".parse::<Target>().unwrap(), Target::KernelXdp);
        assert_eq!(Target::KernelXdp.to_string(), "kernel-xdp");
        assert_eq!(
            "llrouter:ll-wfq".parse::<Target>().unwrap(),
            Target::Llrouter(StrategyKind::LlWfq)
        );
        assert!("linux".parse::<Target>().unwrap_err().0.contains("linux"));
        // An unknown strategy is refused when parsed, not when its router fails to start.
        let e = "llrouter:foo".parse::<Target>().unwrap_err().0;
        assert!(e.contains("llrouter:foo") && e.contains("ll-wfq"), "{e}");
        assert!("llrouter:".parse::<Target>().is_err());
        assert_eq!(
            Target::Llrouter(StrategyKind::LlWfq).label(),
            "llrouter:ll-wfq"
        );
        let f = "llrouter:sq+flows".parse::<Target>().unwrap();
        assert_eq!(f, Target::LlrouterFlows(StrategyKind::Sq));
        assert_eq!(f.label().parse::<Target>().unwrap(), f, "label round trip");
        assert!("llrouter:foo+flows".parse::<Target>().is_err());
        assert_eq!("60,4".parse::<Budgets>(), Ok(Budgets::new(60, 4)));
        assert!("60".parse::<Budgets>().is_err());
        assert!("0,4".parse::<Budgets>().is_err());
    }

    #[test]
    fn bad_options_name_the_field() {
        let c = |f: &dyn Fn(&mut Options)| {
            let mut c = Options::new(&[Target::Kernel], PathBuf::from("/nonexistent"));
            f(&mut c);
            c
        };
        for (bad, name) in [
            (c(&|c| c.gen_batch = 0), "gen-batch"),
            (c(&|c| c.gen_batch = 5000), "gen-batch"),
            (c(&|c| c.rx_size = 1000), "rx-size"),
            (c(&|c| c.rx_size = 32), "rx-size"),
            (
                c(&|c| {
                    c.targets = vec![Target::Llrouter(StrategyKind::Sq)];
                    c.tx_batch = 0
                }),
                "tx-batch",
            ),
            (c(&|c| c.targets.clear()), "targets"),
            (c(&|c| c.router_cpu = 4096), "router-cpu"),
            (c(&|c| c.size = 20), "size"),
            (c(&|c| c.workers = 0), "workers"),
            (c(&|c| c.workers = 4096), "workers"),
            (c(&|c| c.steering = Steering::Ntuple), "steering"),
            // bpf-live frames land on the Rx queue of the sending CPU: no RSS, no classes
            (c(&|c| c.steering = Steering::Queues), "gen-backend"),
            (
                c(&|c| {
                    c.steering = Steering::Queues;
                    c.gen_backend = GenBackend::Udp
                }),
                "gen-backend",
            ),
        ] {
            match bad.check() {
                Err(LabError::Invalid(e)) => assert_eq!(e.field, name),
                other => panic!("{name}: {other:?}"),
            }
        }
        c(&|_| ()).check().unwrap();
        let xsk = c(&|c| {
            c.steering = Steering::Queues;
            c.gen_backend = GenBackend::Xsk
        });
        xsk.check().unwrap();
        assert_eq!(xsk.veth_queues(), 2, "one queue per class");
    }

    #[test]
    fn workers_take_the_cpus_from_router_cpu_on() {
        let online: Vec<usize> = llr_ops::cpus::online().into_iter().collect();
        let mut c = Options::new(&[Target::Kernel], PathBuf::from("/nonexistent"));
        c.router_cpu = *online.last().unwrap();
        assert_eq!(c.router_cpus(), [c.router_cpu]);
        c.workers = online.len();
        let cpus = c.router_cpus();
        assert_eq!(cpus[0], c.router_cpu, "the first worker on --router-cpu");
        let mut sorted = cpus.clone();
        sorted.sort();
        assert_eq!(
            sorted, online,
            "then the others, wrapping around, each once"
        );
        assert_eq!(c.veth_queues(), online.len() as u32);
    }

    #[test]
    fn the_testbeds_threads_keep_off_the_routers_cpus() {
        let online: Vec<usize> = llr_ops::cpus::online().into_iter().collect();
        let mut c = Options::new(&[Target::Kernel], PathBuf::from("/nonexistent"));
        c.router_cpu = *online.last().unwrap();
        c.gen_cpu = online[0];
        // A thread of its own: the test harness's thread keeps its affinity.
        let got = std::thread::spawn(move || {
            c.keep_off_router_cpus();
            llr_io::sys::affinity().unwrap()
        })
        .join()
        .unwrap();
        if online.len() > 1 {
            let want: std::collections::BTreeSet<usize> =
                online[..online.len() - 1].iter().copied().collect();
            assert_eq!(got, want, "every online CPU but the router's");
        } else {
            assert!(got.contains(&online[0]), "one CPU: the thread stays on it");
        }
    }

    #[test]
    fn an_unknown_gaps_value_is_rejected() {
        // The one `Gaps` type has two values; anything else is an error, never Poisson.
        assert!(serde_json::from_str::<Gaps>("\"bursty\"").is_err());
        assert_eq!(
            serde_json::from_str::<Gaps>("\"constant\"").unwrap(),
            Gaps::Constant
        );
    }
}
