//! `llrouter testbed`: the namespace testbed (gen ns → router ns → sink ns) and the study that
//! compares forwarding targets on the same traffic.
//!
//! - `up` / `down`: create / remove a named, persistent topology;
//! - `run`: sweep offered load × RT share for each target, write `results.csv`, PNG plots and
//!   `report.md`;
//! - `mlffr`: RFC 2544-style binary search for the maximum loss-free forwarding rate.
//!
//! Targets: `kernel` (Linux forwarding in the router ns, its softirq steered to the router CPU
//! with RPS), `kernel-htb` (plus an egress HTB qdisc on the router's egress veth giving DSCP EF
//! the higher priority) and `llrouter:<strategy>` (`llrouter run` started in the router ns with
//! a generated config — classes rt/be, rule dscp 46 → rt, the strategy, budgets, wake-up mode,
//! per-packet cost — its worker pinned to `--router-cpu`; stopped with SIGINT, its exit counters
//! kept in `llrouter-<strategy>.json`).
//!
//! Generator and sink run as threads of this process, in their namespaces, pinned to `--gen-cpu`.
//! Generator backends: `bpf-live` (default; Mpps, enough to overload the router) or `udp`. Sink
//! backends: `xdp` (default; an XDP program on the sink veth, ~100 ns per packet) or `udp`.
//! The router's CPU cost per forwarded packet is measured per point: llrouter's process CPU time
//! (`/proc/PID/stat`), or the router CPU's softirq time (`/proc/stat`) for the kernel targets.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use llr_core::sched::StrategyKind;
use llr_io::gen::{self, Gaps, GenConfig, GenReport, CLASS_BE, CLASS_RT};
use llr_io::netns::{addr, sweep_stale, Topology};
use llr_io::sink::{Sink, SinkConfig, SinkReport};
use llr_io::sink_xdp::XdpSink;

mod iperf;
mod summary;
use serde::Serialize;
use summary::Mlffr;

use crate::cli_util::{parse_values, usage, value_name};
use crate::cmd_gen::{stop_on_signal, Backend, GapsArg};
use crate::cmd_sink::SinkBackend;
use crate::plot::{line_chart, Series};

/// Prefix of every namespace the testbed creates (`{prefix}-{pid}-{n}-{gen,rtr,sink}` for
/// temporary ones).
pub const PREFIX: &str = "llrtb";

/// The namespace testbed.
#[derive(Debug, Args)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub cmd: TestbedCmd,
}

#[derive(Debug, Subcommand)]
pub enum TestbedCmd {
    /// Create a persistent topology (namespaces NAME-gen, NAME-rtr, NAME-sink).
    Up {
        #[arg(long, default_value = "llr")]
        name: String,
    },
    /// Remove a topology created by `up`.
    Down {
        #[arg(long, default_value = "llr")]
        name: String,
    },
    /// Sweep offered load and RT share for each target.
    Run(RunArgs),
    /// Find the maximum loss-free forwarding rate of each target.
    Mlffr(MlffrArgs),
    /// TCP goodput of iperf3 (ordinary sockets, default offloads) through each target, alone
    /// and beside a BE overload.
    Iperf(iperf::IperfArgs),
}

/// Wake-up mode of the llrouter targets' worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Wake {
    Interrupt,
    Busy,
    Adaptive,
}

/// Ring budgets of the llrouter targets' classes, `RT,BE` packets per turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    pub rt: u32,
    pub be: u32,
}

impl std::str::FromStr for Budgets {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Budgets, String> {
        let v: Vec<u32> = s
            .split(',')
            .map(|x| x.trim().parse::<u32>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| format!("`{s}`: expected RT,BE packet counts, e.g. 60,4"))?;
        match v[..] {
            [rt, be] if rt >= 1 && be >= 1 => Ok(Budgets { rt, be }),
            _ => Err(format!("`{s}`: expected two counts ≥ 1, RT,BE")),
        }
    }
}

impl std::fmt::Display for Budgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.rt, self.be)
    }
}

/// Options shared by `run` and `mlffr`.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// Targets, comma-separated: kernel, kernel-htb, llrouter:<strategy>.
    #[arg(long, value_delimiter = ',', value_parser = Target::from_arg, default_value = "kernel,kernel-htb")]
    pub targets: Vec<Target>,
    /// Use this topology (from `up`) instead of a temporary one.
    #[arg(long)]
    pub name: Option<String>,
    /// Frame size in bytes without FCS.
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Number of flows.
    #[arg(long, default_value_t = 16)]
    pub flows: u16,
    /// Inter-arrival times.
    #[arg(long, value_enum, default_value_t = GapsArg::Poisson)]
    pub gaps: GapsArg,
    /// Seconds of traffic per measurement point.
    #[arg(long, default_value_t = 2.0)]
    pub point_secs: f64,
    /// CPU of the router (RPS target of the kernel, worker of llrouter).
    #[arg(long, default_value_t = 1)]
    pub router_cpu: usize,
    /// CPU of the generator and sink threads.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// Use IPv6 instead of IPv4.
    #[arg(long)]
    pub ipv6: bool,
    /// Output directory.
    #[arg(long, default_value = "testbed-out")]
    pub out: PathBuf,
    /// Generator backend: bpf-live (Mpps, bursts of --gen-batch), xsk (AF_XDP Tx, packet by
    /// packet, 0.5-0.8 Mpps here) or udp.
    #[arg(long, value_enum, default_value_t = Backend::BpfLive)]
    pub gen_backend: Backend,
    /// Sink backend: xdp (histograms in maps, 3 % buckets) or udp (exact HDR).
    #[arg(long, value_enum, default_value_t = SinkBackend::Xdp)]
    pub sink_backend: SinkBackend,
    /// llrouter targets: wake-up mode.
    #[arg(long, value_enum, default_value_t = Wake::Interrupt)]
    pub wake: Wake,
    /// llrouter targets: ring budgets of rt and be, `RT,BE`.
    #[arg(long, default_value = "60,4")]
    pub budgets: Budgets,
    /// llrouter targets: device budget.
    #[arg(long, default_value_t = 64)]
    pub device_budget: u32,
    /// llrouter targets: artificial per-packet cost in ns (busy wait).
    #[arg(long, default_value_t = 0)]
    pub cost_ns: u64,
    /// Generator (bpf-live) burst size in frames, 1..=1024. Below 8 the generator falls far short
    /// of its rate when the router's ingress has an XDP program (see docs/measurements.md).
    #[arg(long, default_value_t = 32)]
    pub gen_batch: usize,
    /// Receive on the router's CPU: threaded NAPI for the router's ingress veth, its kernel
    /// thread pinned to --router-cpu. Without it the ingress veth's receive work (XDP
    /// classifier, AF_XDP copy, or the kernel's GRO) runs on the generator's CPU inside its
    /// send call, which caps the `xsk` generator below llrouter's capacity. Needs a sleeping
    /// worker (`--wake interrupt`): a busy-polling worker on the same CPU starves the thread.
    #[arg(long)]
    pub rx_napi_thread: bool,
    /// llrouter targets: Rx ring entries per class socket (power of two; 512 as in paper 000).
    #[arg(long, default_value_t = 512)]
    pub rx_size: u32,
    /// llrouter targets: BE frames held back before a transmit kick (1: a kick per grant).
    #[arg(long, default_value_t = 16)]
    pub tx_batch: u32,
    /// llrouter targets: the llrouter binary (default: this executable).
    #[arg(long)]
    pub router_bin: Option<PathBuf>,
    /// TTL / hop limit of the generator's BE packets (bpf-live). 1: every BE packet expires at
    /// the router, which answers with ICMP time exceeded (rate-limited) instead of forwarding.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    pub be_ttl: u8,
}

impl Common {
    /// Defaults for programmatic use (tests, demo).
    pub fn new(targets: &[Target], out: PathBuf) -> Common {
        Common {
            targets: targets.to_vec(),
            name: None,
            size: 64,
            flows: 16,
            gaps: GapsArg::Poisson,
            point_secs: 2.0,
            router_cpu: 1,
            gen_cpu: 0,
            ipv6: false,
            out,
            gen_backend: Backend::BpfLive,
            sink_backend: SinkBackend::Xdp,
            wake: Wake::Interrupt,
            budgets: Budgets { rt: 60, be: 4 },
            device_budget: 64,
            cost_ns: 0,
            tx_batch: 16,
            gen_batch: 32,
            rx_size: 512,
            rx_napi_thread: false,
            router_bin: None,
            be_ttl: 64,
        }
    }
}

#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: Common,
    /// Offered loads in packets/s: list `a,b,c` or range `start:stop:step`.
    #[arg(long, default_value = "20000,100000,200000,400000")]
    pub loads: String,
    /// RT shares: list or range.
    #[arg(long, default_value = "0.3")]
    pub rt_shares: String,
    /// Loads as multiples of each target's MLFFR (e.g. `0.5,0.9,1.5`): searches the MLFFR of
    /// each target first (at the first RT share) and ignores --loads.
    #[arg(long)]
    pub mlffr_multiples: Option<String>,
    /// MLFFR search (with --mlffr-multiples): tolerated loss ratio.
    #[arg(long, default_value_t = 0.001)]
    pub loss_tolerance: f64,
    /// MLFFR search: binary-search steps.
    #[arg(long, default_value_t = 7)]
    pub steps: u32,
    /// MLFFR search: upper end of the range, packets/s.
    #[arg(long, default_value_t = 3_000_000.0)]
    pub max_rate: f64,
    /// Repeat the whole measurement of every target this many times, targets interleaved per
    /// round (a noisy VM moves single MLFFR searches by tens of %); the report gives medians
    /// and ranges.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// With --mlffr-multiples: also measure every target, every round, at this fixed light load
    /// with --reference-gen-backend (default xsk: packet-by-packet Poisson arrivals, no bursts),
    /// and report latency growth against that reference too (reference.csv).
    #[arg(long)]
    pub reference_load: Option<f64>,
    /// Generator backend of the reference point.
    #[arg(long, value_enum, default_value_t = Backend::Xsk)]
    pub reference_gen_backend: Backend,
}

#[derive(Debug, Args)]
pub struct MlffrArgs {
    #[command(flatten)]
    pub common: Common,
    /// RT share of the traffic.
    #[arg(long, default_value_t = 0.3)]
    pub rt_share: f64,
    /// Tolerated loss ratio (noisy VMs: e.g. 0.001).
    #[arg(long, default_value_t = 0.0)]
    pub loss_tolerance: f64,
    /// Search range, packets/s.
    #[arg(long, default_value_t = 10_000.0)]
    pub min_rate: f64,
    #[arg(long, default_value_t = 2_000_000.0)]
    pub max_rate: f64,
    /// Repeat every search this many times, targets interleaved per round.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Binary-search steps.
    #[arg(long, default_value_t = 8)]
    pub steps: u32,
}

/// A forwarding target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Kernel,
    KernelHtb,
    Llrouter(StrategyKind),
}

impl Target {
    /// Parses one target; the reason names what is expected.
    pub fn from_arg(s: &str) -> std::result::Result<Target, String> {
        Ok(match s.trim() {
            "kernel" => Target::Kernel,
            "kernel-htb" => Target::KernelHtb,
            t => {
                match t.strip_prefix("llrouter:") {
                    Some(strat) => Target::Llrouter(strat.parse().map_err(
                        |e: llr_core::sched::ConfigError| format!("`{t}`: {}", e.reason),
                    )?),
                    None => {
                        return Err(format!(
                            "`{t}`: expected kernel, kernel-htb or llrouter:<strategy>"
                        ))
                    }
                }
            }
        })
    }

    /// Parses a comma-separated list of targets (a usage error naming --targets).
    pub fn list(s: &str) -> Result<Vec<Target>> {
        s.split(',')
            .filter(|t| !t.trim().is_empty())
            .map(|t| Target::from_arg(t).map_err(|e| usage("targets", e)))
            .collect()
    }

    pub fn label(&self) -> String {
        match self {
            Target::Kernel => "kernel".into(),
            Target::KernelHtb => "kernel-htb".into(),
            Target::Llrouter(s) => format!("llrouter:{s}"),
        }
    }
}

/// A running `llrouter run` child in the router namespace.
struct RouterProc {
    child: std::process::Child,
    stderr_path: PathBuf,
    json_path: PathBuf,
}

impl RouterProc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT, wait (≤ 10 s, then SIGKILL), keep the JSON counters; returns them.
    fn stop(mut self) -> Result<serde_json::Value> {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid (not yet reaped, so the pid is not reused).
        unsafe { libc::kill(pid, libc::SIGINT) };
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait()? {
                break st;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let st = self.child.wait()?;
                bail!("llrouter run did not stop within 10 s of SIGINT (killed: {st})");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            use std::io::Read as _;
            let _ = o.read_to_string(&mut out);
        }
        if !status.success() {
            let err = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
            bail!("llrouter run exited with {status}: {}", err.trim());
        }
        let v: serde_json::Value = out
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .context("llrouter run printed no JSON counters")?;
        let _ = std::fs::write(&self.json_path, serde_json::to_string_pretty(&v)?);
        Ok(v)
    }
}

impl Drop for RouterProc {
    fn drop(&mut self) {
        // Reached only on error paths (stop() consumes self after reaping): SIGINT, then kill.
        if let Ok(None) = self.child.try_wait() {
            let pid = self.child.id() as libc::pid_t;
            // SAFETY: kill(2) on our own, not yet reaped child.
            unsafe { libc::kill(pid, libc::SIGINT) };
            for _ in 0..100 {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The router configuration the testbed generates for `llrouter:<strategy>`.
pub fn router_toml(c: &Common, strategy: StrategyKind) -> Result<String> {
    if !(1..=2048).contains(&c.tx_batch) {
        return Err(usage(
            "tx-batch",
            format!("{}: must be within 1..=2048 frames", c.tx_batch),
        ));
    }
    Ok(format!(
        "# generated by llrouter testbed\n\
         interfaces = [\"{}\", \"{}\"]\n\
         cores = [{}]\n\
         strategy = \"{strategy}\"\n\
         device-budget = {}\n\
         wake = \"{}\"\n\
         cost-ns = {}\n\
         tx-batch = {}\n\
         kernel-routes = true\n\
         [[classes]]\nname = \"rt\"\nbudget = {}\n\
         [[classes]]\nname = \"be\"\nbudget = {}\n\
         [[rules]]\nclass = \"rt\"\ndscp = 46\n\
         [[rules]]\nclass = \"rt\"\nproto = \"tcp\"\ndst_port = {rt_tcp}\n\
         [[rules]]\nclass = \"rt\"\nproto = \"tcp\"\nsrc_port = {rt_tcp}\n\
         [rings]\nrx-size = {}\n\
         [control]\nsocket = \"{}\"\n",
        addr::RTR_IN_IF,
        addr::RTR_OUT_IF,
        c.router_cpu,
        c.device_budget,
        value_name(c.wake),
        c.cost_ns,
        c.tx_batch,
        c.budgets.rt,
        c.budgets.be,
        c.rx_size,
        ctl_socket(strategy).display(),
        rt_tcp = RT_TCP_PORT,
    ))
}

/// The TCP port whose traffic, both directions, llrouter targets put in the RT class (the
/// RT case of `testbed iperf`): a real deployment classifies a flow's ACKs with its data.
pub const RT_TCP_PORT: u16 = 5202;

/// Kernel threads running threaded NAPI for interfaces named `ifname` (any namespace):
/// `napi/<ifname>-<napi id>`.
fn napi_threads(ifname: &str) -> Vec<u32> {
    let prefix = format!("napi/{ifname}-");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(&prefix))
        })
        .collect()
}

/// Control socket of the llrouter target running `strategy`: unique per testbed process, so
/// runs never collide with each other or with a router on the default socket.
fn ctl_socket(strategy: StrategyKind) -> PathBuf {
    std::env::temp_dir().join(format!("llrtb-{}-{strategy}.sock", std::process::id()))
}

/// NET_RX softirqs handled by `cpu` so far (`/proc/softirqs`): the kernel's receive "interrupt"
/// count (NAPI polls and RPS IPIs) on the router's CPU.
fn net_rx_softirqs(cpu: usize) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/softirqs").ok()?;
    let l = s.lines().find(|l| l.trim_start().starts_with("NET_RX:"))?;
    l.split_whitespace().nth(1 + cpu)?.parse().ok()
}

/// Worker wake-ups of an llrouter target so far: the engine's device wake-ups (a device put on
/// the poll list after it went idle — NAPI's `napi_schedule`), from its control socket.
fn llrouter_wakeups(strategy: StrategyKind) -> Option<u64> {
    use llr_ops::ctl::{Command, CtlClient};
    let mut c = CtlClient::connect(ctl_socket(strategy), Duration::from_secs(1)).ok()?;
    let v = c.call(&Command::Counters {}).ok()?.into_result().ok()?;
    let m: llr_ops::metrics::MetricsSnapshot = serde_json::from_value(v).ok()?;
    Some(m.devices.iter().map(|d| d.wakeups).sum())
}

/// A running target; undoes its setup on drop.
struct Active<'a> {
    topo: &'a Topology,
    target: Target,
    router: Option<RouterProc>,
    /// Final counters of an llrouter target (after `finish`).
    counters: Option<serde_json::Value>,
}

impl<'a> Active<'a> {
    fn start(topo: &'a Topology, target: &Target, c: &Common) -> Result<Active<'a>> {
        let router_cpu = c.router_cpu;
        // Kernel forwarding: steer the router's receive processing to its CPU (RPS), as on a
        // NIC whose IRQ is pinned there.
        let mask = format!("{:x}", 1u64 << router_cpu);
        let rps = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", addr::RTR_IN_IF);
        topo.router
            .exec(&["sh", "-c", &format!("echo {mask} > {rps}")])
            .context("set RPS on the router's ingress veth")?;
        // A veth delivers XDP-redirected frames (bpf-live generator) only to a peer whose NAPI
        // is on: GRO on (kernel targets) or an XDP program (llrouter's classifier).
        let _ = topo
            .router
            .exec(&["ethtool", "-K", addr::RTR_IN_IF, "gro", "on"]);
        // Off first, so that a thread left by an earlier target ends and ours is new.
        let threaded = format!("/sys/class/net/{}/threaded", addr::RTR_IN_IF);
        let _ = topo
            .router
            .exec(&["sh", "-c", &format!("echo 0 > {threaded}")]);
        let before = napi_threads(addr::RTR_IN_IF);
        if c.rx_napi_thread {
            topo.router
                .exec(&["sh", "-c", &format!("echo 1 > {threaded}")])
                .context("set threaded NAPI on the router's ingress veth")?;
        }
        let mut act = Active {
            topo,
            target: *target,
            router: None,
            counters: None,
        };
        match target {
            Target::Kernel => {}
            Target::KernelHtb => {
                let dev = addr::RTR_OUT_IF;
                let tc = |args: &str| -> Result<()> {
                    let mut argv = vec!["tc"];
                    argv.extend(args.split_whitespace());
                    topo.router.exec(&argv).map(|_| ())
                };
                tc(&format!(
                    "qdisc add dev {dev} root handle 1: htb default 20"
                ))?;
                tc(&format!(
                    "class add dev {dev} parent 1: classid 1:1 htb rate 10gbit"
                ))?;
                tc(&format!(
                    "class add dev {dev} parent 1:1 classid 1:10 htb rate 5gbit ceil 10gbit prio 0"
                ))?;
                tc(&format!(
                    "class add dev {dev} parent 1:1 classid 1:20 htb rate 5gbit ceil 10gbit prio 1"
                ))?;
                tc(&format!(
                    "filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip dsfield 0xb8 0xfc flowid 1:10"
                ))?;
                tc(&format!(
                    "filter add dev {dev} parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xb8 0xfc flowid 1:10"
                ))?;
            }
            Target::Llrouter(strategy) => {
                act.router = Some(start_router(topo, c, *strategy)?);
            }
        }
        if c.rx_napi_thread {
            // After the router started: attaching XDP may create the NAPI thread anew. Threads
            // of other namespaces' interfaces with the same name existed before: not ours.
            let ours: Vec<u32> = napi_threads(addr::RTR_IN_IF)
                .into_iter()
                .filter(|t| !before.contains(t))
                .collect();
            if ours.is_empty() {
                bail!("rx-napi-thread: no NAPI thread appeared for the router's ingress veth");
            }
            for pid in ours {
                let st = std::process::Command::new("taskset")
                    .args(["-pc", &router_cpu.to_string(), &pid.to_string()])
                    .stdout(std::process::Stdio::null())
                    .status()
                    .context("taskset")?;
                if !st.success() {
                    bail!("rx-napi-thread: taskset -pc {router_cpu} {pid} failed");
                }
            }
        }
        Ok(act)
    }

    /// Router CPU time so far, ns: llrouter's process time, or the router CPU's softirq time.
    /// The target's wake-up counter (see [`llrouter_wakeups`], [`net_rx_softirqs`]).
    fn wakeups(&self, router_cpu: usize) -> Option<u64> {
        match &self.target {
            Target::Llrouter(strategy) => llrouter_wakeups(*strategy),
            Target::Kernel | Target::KernelHtb => net_rx_softirqs(router_cpu),
        }
    }

    fn router_cpu_ns(&self, router_cpu: usize) -> u64 {
        match &self.router {
            Some(r) => proc_cpu_ns(r.pid()),
            None => softirq_ns(router_cpu),
        }
    }

    /// Stops an llrouter target and keeps its counters.
    fn finish(&mut self) -> Result<()> {
        if let Some(r) = self.router.take() {
            self.counters = Some(r.stop()?);
        }
        Ok(())
    }
}

fn start_router(topo: &Topology, c: &Common, strategy: StrategyKind) -> Result<RouterProc> {
    let toml = router_toml(c, strategy)?;
    let cfg_path = c.out.join(format!("router-{strategy}.toml"));
    std::fs::write(&cfg_path, toml).with_context(|| format!("write {}", cfg_path.display()))?;
    let cfg_abs = std::fs::canonicalize(&cfg_path)?;
    let bin = match &c.router_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("path of this executable")?,
    };
    let stderr_path = c.out.join(format!("llrouter-{strategy}.log"));
    let json_path = c.out.join(format!("llrouter-{strategy}.json"));
    let errf = std::fs::File::create(&stderr_path)?;
    let mut cmd = topo.router.command("nice");
    cmd.args(["-n", "-10"])
        .arg(&bin)
        .args(["run", "--json", "--config"])
        .arg(&cfg_abs)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(errf);
    let child = cmd
        .spawn()
        .with_context(|| format!("start {} run", bin.display()))?;
    let mut rp = RouterProc {
        child,
        stderr_path: stderr_path.clone(),
        json_path,
    };
    // Ready when it says so on stderr (classifiers attached, sockets bound).
    let t0 = std::time::Instant::now();
    loop {
        let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        if log.contains("routing between") {
            break;
        }
        if let Some(st) = rp.child.try_wait()? {
            bail!(
                "target llrouter:{strategy}: `llrouter run` exited ({st}) before it was ready: {}",
                log.trim()
            );
        }
        if t0.elapsed() > Duration::from_secs(15) {
            bail!(
                "target llrouter:{strategy}: not ready after 15 s: {}",
                log.trim()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the route mirror settle.
    std::thread::sleep(Duration::from_millis(300));
    let _ = &mut rp;
    Ok(rp)
}

fn clk_tck() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// utime + stime of a process (all threads), ns.
fn proc_cpu_ns(pid: u32) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Fields after the command name (which may contain spaces) in parentheses.
    let Some(rest) = s.rsplit_once(')').map(|x| x.1) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime = field 14, stime = 15 → indices 11, 12.
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (t(11) + t(12)) * 1_000_000_000 / clk_tck()
}

/// softirq time of one CPU (/proc/stat), ns.
fn softirq_ns(cpu: usize) -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let key = format!("cpu{cpu} ");
    s.lines()
        .find(|l| l.starts_with(&key))
        .and_then(|l| l.split_whitespace().nth(7))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |t| t * 1_000_000_000 / clk_tck())
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        drop(self.router.take());
        if self.target == Target::KernelHtb {
            let _ = self
                .topo
                .router
                .exec(&["tc", "qdisc", "del", "dev", addr::RTR_OUT_IF, "root"]);
        }
    }
}

/// One measurement point.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Row {
    /// Repetition (1-based) of the whole per-target measurement (`--repeat`).
    pub round: u32,
    pub target: String,
    pub rt_share: f64,
    pub offered_pps: f64,
    pub sent_pps: f64,
    pub sent_rt: u64,
    pub sent_be: u64,
    pub recv_rt: u64,
    pub recv_be: u64,
    pub loss_rt: f64,
    pub loss_be: f64,
    pub reordered: u64,
    pub throughput_pps: f64,
    pub rt_mean_us: f64,
    pub rt_p50_us: f64,
    pub rt_p99_us: f64,
    pub rt_p999_us: f64,
    pub be_mean_us: f64,
    pub be_p50_us: f64,
    pub be_p99_us: f64,
    pub be_p999_us: f64,
    /// Packets dropped at the router CPU's input backlog (/proc/net/softnet_stat column 2).
    pub backlog_drops: u64,
    /// Router CPU time during the point (llrouter process, or the router CPU's softirq), s.
    pub router_cpu_s: f64,
    /// Router CPU time per forwarded packet, ns (the service time when the CPU is saturated).
    pub router_ns_per_pkt: f64,
    /// Wake-ups per second of traffic (llrouter: engine device wake-ups; kernel: NET_RX
    /// softirqs on the router CPU); NaN when not readable.
    pub wakeups_per_s: f64,
}

fn softnet_drops(cpu: usize) -> u64 {
    std::fs::read_to_string("/proc/net/softnet_stat")
        .ok()
        .and_then(|s| {
            s.lines().nth(cpu).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .map(|h| u64::from_str_radix(h, 16))
            })
        })
        .and_then(|r| r.ok())
        .unwrap_or(0)
}

/// What one point measured besides the generator and sink reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct PointExtra {
    /// Backlog drops on the router CPU (kernel targets).
    pub drops: u64,
    /// Router CPU time during the point, ns.
    pub router_cpu_ns: u64,
    /// Wake-ups during the point (llrouter: engine device wake-ups; kernel: NET_RX softirqs on
    /// the router CPU), if they could be read.
    pub wakeups: Option<u64>,
}

/// The generator configuration of one point (checked: a usage error names the flag).
fn gen_config(c: &Common, rate: f64, rt_share: f64) -> Result<GenConfig> {
    let (dst, size) = if c.ipv6 {
        (addr::SINK_V6, c.size.max(84))
    } else {
        (addr::SINK_V4, c.size)
    };
    let cfg = GenConfig {
        dst: dst.parse()?,
        dst_port: 9000,
        rt_port: Some(9001),
        rt_dscp: true,
        frame_size: size,
        rate_pps: rate,
        gaps: match c.gaps {
            GapsArg::Constant => Gaps::Constant,
            GapsArg::Poisson => Gaps::Poisson,
        },
        rt_share,
        flows: c.flows,
        packets: None,
        duration: Some(Duration::from_secs_f64(c.point_secs)),
        seed: 1,
        batch: c.gen_batch,
        be_ttl: c.be_ttl,
    };
    cfg.validate().map_err(crate::cmd_gen::to_usage)?;
    Ok(cfg)
}

/// Sends one point's traffic through the topology and measures it.
fn measure(
    topo: &Topology,
    act: &Active<'_>,
    c: &Common,
    rate: f64,
    rt_share: f64,
    stop: &AtomicBool,
) -> Result<(GenReport, SinkReport, PointExtra)> {
    let backend = c.gen_backend;
    let xdp_sink = c.sink_backend == SinkBackend::Xdp;
    let cfg = gen_config(c, rate, rt_share)?;
    let gen_cpu = c.gen_cpu;
    let sink_cfg = SinkConfig {
        ports: vec![9000, 9001],
        busy: false,
        packets: None,
        duration: Some(Duration::from_secs_f64(c.point_secs + 5.0)),
        idle: Some(Duration::from_millis(500)),
        batch: 64,
    };
    enum AnySink {
        Udp(Sink),
        Xdp(XdpSink),
    }
    let mut sink = topo.sink.run(|| -> Result<AnySink> {
        Ok(if xdp_sink {
            AnySink::Xdp(XdpSink::attach(addr::SINK_IF, sink_cfg.clone())?)
        } else {
            AnySink::Udp(Sink::bind(sink_cfg.clone())?)
        })
    })??;
    let drops0 = softnet_drops(c.router_cpu);
    let cpu0 = act.router_cpu_ns(c.router_cpu);
    let wake0 = act.wakeups(c.router_cpu);
    let sink_stop = AtomicBool::new(false);
    let (g, s) = std::thread::scope(|sc| -> Result<(GenReport, SinkReport)> {
        let h = sc.spawn(|| -> Result<SinkReport> {
            match &mut sink {
                AnySink::Udp(u) => {
                    let _ = gen::pin_to_cpu(gen_cpu);
                    // The sink shares the generator's core: let it preempt the generator.
                    let _ = gen::set_fifo(50);
                    Ok(u.run(&sink_stop)?.report())
                }
                AnySink::Xdp(x) => x.run(&sink_stop),
            }
        });
        let g = topo.gen.run(|| {
            let _ = gen::pin_to_cpu(gen_cpu);
            // Other work on the generator's core (builds) should not thin the offered load.
            // SAFETY: setpriority on the calling thread (who = 0 with PRIO_PROCESS is the
            // calling thread on Linux).
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) };
            crate::cmd_gen::generate(&cfg, backend, stop)
        });
        if g.is_err() || stop.load(Ordering::Relaxed) {
            sink_stop.store(true, Ordering::Relaxed);
        }
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("sink thread panicked"))??;
        Ok((g??, s))
    })?;
    let extra = PointExtra {
        drops: softnet_drops(c.router_cpu).saturating_sub(drops0),
        router_cpu_ns: act.router_cpu_ns(c.router_cpu).saturating_sub(cpu0),
        wakeups: wake0
            .zip(act.wakeups(c.router_cpu))
            .map(|(a, b)| b.saturating_sub(a)),
    };
    drop(sink); // detaches the XDP sink
    Ok((g, s, extra))
}

fn row(target: &Target, rt_share: f64, g: &GenReport, s: &SinkReport, x: PointExtra) -> Row {
    let class = |k: u8| {
        s.classes
            .iter()
            .find(|c| c.class == k)
            .cloned()
            .unwrap_or_default()
    };
    let (rt, be) = (class(CLASS_RT), class(CLASS_BE));
    let loss = |sent: u64, got: u64| {
        if sent == 0 {
            0.0
        } else {
            sent.saturating_sub(got) as f64 / sent as f64
        }
    };
    let u = |ns: u64| ns as f64 / 1000.0;
    Row {
        round: 1,
        target: target.label(),
        rt_share,
        offered_pps: g.offered_pps,
        sent_pps: g.achieved_pps,
        sent_rt: g.sent_rt,
        sent_be: g.sent_be,
        recv_rt: rt.seq.unique,
        recv_be: be.seq.unique,
        loss_rt: loss(g.sent_rt, rt.seq.unique),
        loss_be: loss(g.sent_be, be.seq.unique),
        reordered: rt.seq.reordered + be.seq.reordered,
        throughput_pps: (rt.seq.unique + be.seq.unique) as f64 / g.duration_s.max(1e-9),
        rt_mean_us: rt.latency.mean / 1000.0,
        rt_p50_us: u(rt.latency.p50),
        rt_p99_us: u(rt.latency.p99),
        rt_p999_us: u(rt.latency.p999),
        be_mean_us: be.latency.mean / 1000.0,
        be_p50_us: u(be.latency.p50),
        be_p99_us: u(be.latency.p99),
        be_p999_us: u(be.latency.p999),
        backlog_drops: x.drops,
        router_cpu_s: x.router_cpu_ns as f64 / 1e9,
        wakeups_per_s: x
            .wakeups
            .map_or(f64::NAN, |w| w as f64 / g.duration_s.max(1e-9)),
        router_ns_per_pkt: if rt.seq.unique + be.seq.unique > 0 {
            x.router_cpu_ns as f64 / (rt.seq.unique + be.seq.unique) as f64
        } else {
            0.0
        },
    }
}

/// Opens the named topology or creates a temporary one (removed on drop, Ctrl-C included).
fn topology(c: &Common) -> Result<Topology> {
    match &c.name {
        Some(n) => {
            Topology::open(n).map_err(|e| usage("name", format!("{e:#} (run `testbed up`)")))
        }
        None => {
            let _ = sweep_stale(PREFIX);
            Topology::new(PREFIX)
        }
    }
}

fn targets(c: &Common) -> Result<Vec<Target>> {
    if c.targets.is_empty() {
        return Err(usage("targets", "is empty"));
    }
    Ok(c.targets.clone())
}

/// Checks the options shared by `run` and `mlffr` — everything that can be checked before a
/// namespace exists, so that bad input changes nothing on the host.
fn check_common(c: &Common) -> Result<()> {
    if !(c.point_secs > 0.0 && c.point_secs <= 600.0) {
        return Err(usage("point-secs", "must be within (0, 600]"));
    }
    targets(c)?;
    if !(1..=1024).contains(&c.gen_batch) {
        return Err(usage(
            "gen-batch",
            format!("{}: must be 1..=1024 frames", c.gen_batch),
        ));
    }
    if !c.rx_size.is_power_of_two() || !(64..=32768).contains(&c.rx_size) {
        return Err(usage(
            "rx-size",
            format!("{}: must be a power of two within 64..=32768", c.rx_size),
        ));
    }
    for t in &c.targets {
        if let Target::Llrouter(s) = t {
            router_toml(c, *s)?;
        }
    }
    crate::cli_util::check_cpu("router-cpu", c.router_cpu)?;
    crate::cli_util::check_cpu("gen-cpu", c.gen_cpu)?;
    gen_config(c, 1000.0, 0.3)?;
    Ok(())
}

/// The last check before the topology is built.
fn need_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the testbed needs root (network namespaces)");
    }
    Ok(())
}

fn write_csv(path: &Path, rows: &[Row]) -> Result<()> {
    let mut s = String::from(
        "target,rt_share,offered_pps,sent_pps,sent_rt,sent_be,recv_rt,recv_be,loss_rt,loss_be,reordered,throughput_pps,rt_mean_us,rt_p50_us,rt_p99_us,rt_p999_us,be_mean_us,be_p50_us,be_p99_us,be_p999_us,backlog_drops,router_cpu_s,router_ns_per_pkt,round,wakeups_per_s\n",
    );
    for r in rows {
        writeln!(
            s,
            "{},{},{:.0},{:.0},{},{},{},{},{:.6},{:.6},{},{:.0},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{:.2},{},{:.3},{:.1},{},{:.0}",
            r.target, r.rt_share, r.offered_pps, r.sent_pps, r.sent_rt, r.sent_be, r.recv_rt,
            r.recv_be, r.loss_rt, r.loss_be, r.reordered, r.throughput_pps, r.rt_mean_us,
            r.rt_p50_us, r.rt_p99_us, r.rt_p999_us, r.be_mean_us, r.be_p50_us, r.be_p99_us,
            r.be_p999_us, r.backlog_drops, r.router_cpu_s, r.router_ns_per_pkt, r.round,
            r.wakeups_per_s
        )?;
    }
    std::fs::write(path, s).with_context(|| format!("write {}", path.display()))
}

/// The x value of a row in the load plots: what the router forwarded (kpps), not what was
/// asked of the generator, which may fall short of it.
fn forwarded_kpps(r: &Row) -> f64 {
    r.throughput_pps / 1000.0
}

/// A row's point for the RT (`true`) or BE line of a chart, if the row belongs on it.
type PointOf<'a> = dyn Fn(&Row, bool) -> Option<(f64, f64)> + 'a;

/// Rows of `target` in the order of the load asked of the generator (rounds of --repeat
/// interleave their loads), so that a line follows rising load even where its x (forwarded
/// load) falls back under overload — a bend that shows receive livelock.
fn by_load<'a>(rows: &'a [Row], target: &Target) -> Vec<&'a Row> {
    let mut v: Vec<&Row> = rows.iter().filter(|r| r.target == target.label()).collect();
    v.sort_by(|a, b| {
        a.offered_pps
            .total_cmp(&b.offered_pps)
            .then(a.sent_pps.total_cmp(&b.sent_pps))
    });
    v
}

/// Lines of `rows` of every target, RT and BE, at (x, y) given by `xy`, in load order.
fn class_series(rows: &[Row], tg: &[Target], xy: &PointOf<'_>) -> Vec<Series> {
    let mut series = Vec::new();
    for t in tg {
        for (ci, (cls, rt)) in [("RT", true), ("BE", false)].into_iter().enumerate() {
            let points: Vec<(f64, f64)> = by_load(rows, t)
                .into_iter()
                .filter_map(|r| xy(r, rt))
                .collect();
            series.push(Series {
                label: format!("{} {cls}", t.label()),
                points,
                group: t.label(),
                class: ci,
            });
        }
    }
    series
}

/// `series` with each line drawn left to right (for x axes other than load).
fn by_x(mut series: Vec<Series>) -> Vec<Series> {
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

fn plots(out: &Path, rows: &[Row], tg: &[Target], loads: &[f64], shares: &[f64]) -> Vec<String> {
    let mut made = Vec::new();
    let mut chart =
        |name: &str, title: &str, xlabel: &str, ylabel: &str, series: &[Series], log_y: bool| {
            match line_chart(&out.join(name), title, xlabel, ylabel, series, log_y) {
                Ok(()) => made.push(name.to_owned()),
                Err(e) => tracing::warn!("plot {name}: {e}"),
            }
        };
    let s0 = shares[0];
    let l_max = *loads.last().unwrap_or(&0.0);
    let p99 = |r: &Row, rt: bool| if rt { r.rt_p99_us } else { r.be_p99_us };
    let loss_pct = |r: &Row, rt: bool| 100.0 * if rt { r.loss_rt } else { r.loss_be };
    if loads.len() > 1 {
        // Latency over what was forwarded, loss over what was sent: beside each other, so a
        // low p99 bought with lost packets shows as such.
        let at_s0 = |r: &Row| r.rt_share == s0;
        chart(
            "latency_vs_load.png",
            "p99 latency vs forwarded load",
            "forwarded load (kpps)",
            "p99 latency (µs)",
            &class_series(rows, tg, &|r, rt| {
                at_s0(r).then(|| (forwarded_kpps(r), p99(r, rt)))
            }),
            true,
        );
        chart(
            "loss_vs_load.png",
            "loss vs sent load",
            "sent load (kpps, what the generator achieved)",
            "loss (% of sent)",
            &class_series(rows, tg, &|r, rt| {
                at_s0(r).then(|| (r.sent_pps / 1000.0, loss_pct(r, rt)))
            }),
            false,
        );
    }
    if shares.len() > 1 {
        let at_max = |r: &Row| r.offered_pps == l_max;
        chart(
            "latency_vs_rt_share.png",
            "p99 latency vs RT share",
            "RT share",
            "p99 latency (µs)",
            &by_x(class_series(rows, tg, &|r, rt| {
                at_max(r).then(|| (r.rt_share, p99(r, rt)))
            })),
            true,
        );
        chart(
            "loss_vs_rt_share.png",
            "loss vs RT share",
            "RT share",
            "loss (% of sent)",
            &by_x(class_series(rows, tg, &|r, rt| {
                at_max(r).then(|| (r.rt_share, loss_pct(r, rt)))
            })),
            false,
        );
        let series: Vec<Series> = by_x(
            tg.iter()
                .map(|t| {
                    Series::new(
                        t.label(),
                        rows.iter()
                            .filter(|r| r.target == t.label() && at_max(r))
                            .map(|r| (r.rt_share, r.throughput_pps / 1000.0))
                            .collect(),
                    )
                })
                .collect(),
        );
        chart(
            "throughput_vs_rt_share.png",
            "throughput vs RT share",
            "RT share",
            "forwarded (kpps)",
            &series,
            false,
        );
    }
    if loads.len() > 1 {
        let series: Vec<Series> = tg
            .iter()
            .map(|t| {
                let points: Vec<(f64, f64)> = by_load(rows, t)
                    .into_iter()
                    .filter(|r| r.rt_share == s0 && r.wakeups_per_s.is_finite())
                    .map(|r| (forwarded_kpps(r), r.wakeups_per_s))
                    .collect();
                Series::new(t.label(), points)
            })
            .collect();
        chart(
            "wakeups_vs_load.png",
            "wake-ups vs load (llrouter: worker/device wake-ups; kernel: NET_RX softirqs on the router CPU)",
            "forwarded load (kpps)",
            "wake-ups per second",
            &series,
            true,
        );
    }
    made
}

/// Loss above this share of what was sent counts as the router's (noise on a VM stays below).
const LOSS_NOTE_THRESHOLD: f64 = 0.001;

/// What limited a point, for the findings: the generator only when it fell short of the
/// offered rate *and* the router forwarded what it got; when the router lost packets too, it
/// was overloaded even at the lower rate the generator reached.
fn limit_note(r: &Row) -> String {
    let short = r.offered_pps > 0.0 && r.sent_pps < 0.95 * r.offered_pps;
    let sent = (r.sent_rt + r.sent_be) as f64;
    let lost = r.loss_rt * r.sent_rt as f64 + r.loss_be * r.sent_be as f64;
    let loss = if sent > 0.0 { lost / sent } else { 0.0 };
    match (short, loss > LOSS_NOTE_THRESHOLD) {
        (true, false) => " (below the offered rate, and the router forwarded all of it: the generator, not the router, was the limit)".into(),
        (true, true) => format!(
            " (below the offered rate, and still {:.1} % lost: the router was overloaded at the rate the generator reached)",
            loss * 100.0
        ),
        (false, true) => format!(" ({:.1} % lost: the router was the limit)", loss * 100.0),
        (false, false) => String::new(),
    }
}

fn report_md(c: &Common, rows: &[Row], plots: &[String], errors: &[String]) -> String {
    let mut s = String::from("# llrouter testbed run\n\n## Setup\n\n");
    let _ = writeln!(
        s,
        "gen ns → router ns → sink ns over two veth pairs ({}), frame size {} B (no FCS), {} flows, {} gaps, {} s per point. \
         Generator `{}`, sink `{}`, threads pinned to CPU {}; router on CPU {} (kernel: RPS; llrouter: worker pinned, wake {}, budgets rt,be = {}, device budget {}, cost {} ns, tx batch {}, Rx ring {} per class); generator bursts of {} frames. \
         Latency: sink CLOCK_MONOTONIC − send timestamp (bpf_ktime_get_ns in the XDP programs), per packet; xdp sink: log-linear buckets of 1/32 (3.1 %) resolution, udp sink: HDR. \
         Loss: 1 − unique received / sent per class. Noisy 2-core VM: repeat runs before trusting small differences.\n",
        if c.ipv6 { "IPv6" } else { "IPv4" },
        c.size, c.flows, value_name(c.gaps), c.point_secs, value_name(c.gen_backend),
        value_name(c.sink_backend), c.gen_cpu, c.router_cpu, value_name(c.wake), c.budgets, c.device_budget, c.cost_ns, c.tx_batch, c.rx_size, c.gen_batch
    );
    s.push_str("## Results\n\n| target | RT share | offered pps | sent pps | fwd pps | RT loss | BE loss | RT p50 µs | RT p99 µs | BE p50 µs | BE p99 µs | backlog drops | router ns/pkt | wake-ups/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.4} | {:.4} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.0} | {:.0} |",
            r.target, r.rt_share, r.offered_pps, r.sent_pps, r.throughput_pps, r.loss_rt, r.loss_be,
            r.rt_p50_us, r.rt_p99_us, r.be_p50_us, r.be_p99_us, r.backlog_drops, r.router_ns_per_pkt,
            r.wakeups_per_s
        );
    }
    s.push_str("\n## Findings (computed from the rows above)\n\n");
    let mut targets: Vec<&str> = rows.iter().map(|r| r.target.as_str()).collect();
    targets.dedup();
    for t in targets {
        let tr: Vec<&Row> = rows.iter().filter(|r| r.target == t).collect();
        let (Some(lo), Some(hi)) = (
            tr.iter()
                .min_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps)),
            tr.iter()
                .max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps)),
        ) else {
            continue;
        };
        let ratio = if lo.rt_p99_us > 0.0 {
            hi.rt_p99_us / lo.rt_p99_us
        } else {
            f64::NAN
        };
        let _ = writeln!(
            s,
            "- {t}: from {:.0} to {:.0} pps offered, RT p99 goes {:.1} → {:.1} µs (×{:.2}), BE p99 {:.1} → {:.1} µs; RT loss at the highest load {:.3} %, BE {:.3} %; generator achieved {:.0} pps at the highest setting{}.",
            lo.offered_pps, hi.offered_pps, lo.rt_p99_us, hi.rt_p99_us, ratio, lo.be_p99_us, hi.be_p99_us,
            hi.loss_rt * 100.0, hi.loss_be * 100.0, hi.sent_pps,
            limit_note(hi)
        );
    }
    for e in errors {
        let _ = writeln!(s, "- not measured: {e}");
    }
    if !plots.is_empty() {
        s.push_str("\n## Plots\n\n");
        for p in plots {
            let _ = writeln!(s, "![{p}]({p})");
        }
    }
    s
}

/// Binary search for the maximum loss-free forwarding rate of the running target; the trials
/// are appended to `rows`. Returns (MLFFR, whether the generator fell short of the rate asked
/// in a loss-free trial — then the MLFFR may be the generator's limit, not the target's).
#[allow(clippy::too_many_arguments)]
fn search_mlffr(
    topo: &Topology,
    act: &Active<'_>,
    c: &Common,
    rt_share: f64,
    tolerance: f64,
    min_rate: f64,
    max_rate: f64,
    steps: u32,
    stop: &AtomicBool,
    rows: &mut Vec<Row>,
    bar: &indicatif::ProgressBar,
) -> Result<(f64, bool)> {
    let (mut lo, mut hi) = (0.0f64, max_rate);
    let mut rate = max_rate;
    let mut gen_limited = false;
    for _ in 0..steps {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        bar.set_message(format!("{} mlffr {rate:.0} pps", act.target.label()));
        let (g, s, x) = measure(topo, act, c, rate, rt_share, stop)?;
        let r = row(&act.target, rt_share, &g, &s, x);
        let loss = 1.0 - (r.recv_rt + r.recv_be) as f64 / (g.sent.max(1)) as f64;
        if loss <= tolerance {
            if g.achieved_pps < 0.95 * rate {
                gen_limited = true;
            }
            // Loss-free at what was actually sent.
            lo = lo.max(g.achieved_pps.min(rate));
        } else {
            hi = hi.min(rate);
            // At overload the forwarded rate bounds the MLFFR from above too.
            hi = hi.min(r.throughput_pps.max(lo) * 1.05);
        }
        rows.push(r);
        bar.inc(1);
        if lo >= hi * 0.97 {
            break;
        }
        rate = if hi <= lo {
            lo
        } else {
            (lo.max(min_rate) + hi) / 2.0
        };
    }
    Ok((lo, gen_limited))
}

fn run_sweep(a: RunArgs) -> Result<()> {
    let c = &a.common;
    check_common(c)?;
    let tg = targets(c)?;
    let loads = parse_values("loads", &a.loads)?;
    let shares = parse_values("rt-shares", &a.rt_shares)?;
    let multiples = match &a.mlffr_multiples {
        Some(m) => Some(parse_values("mlffr-multiples", m)?),
        None => None,
    };
    if loads.iter().any(|&l| l <= 0.0) {
        return Err(usage("loads", "every load must be > 0 packets/s"));
    }
    if multiples
        .as_ref()
        .is_some_and(|m| m.iter().any(|&x| !(x > 0.0 && x <= 10.0)))
    {
        return Err(usage(
            "mlffr-multiples",
            "every multiple must be within (0, 10]",
        ));
    }
    if shares.iter().any(|s| !(0.0..=1.0).contains(s)) {
        return Err(usage("rt-shares", "every share must be within 0..=1"));
    }
    if !(0.0..1.0).contains(&a.loss_tolerance) {
        return Err(usage("loss-tolerance", "must be within [0, 1)"));
    }
    if a.steps == 0 || a.steps > 30 {
        return Err(usage("steps", "must be 1..=30"));
    }
    if a.repeat == 0 || a.repeat > 100 {
        return Err(usage("repeat", "must be 1..=100"));
    }
    if let Some(l) = a.reference_load {
        if multiples.is_none() || !(l > 0.0 && l.is_finite()) {
            return Err(usage(
                "reference-load",
                "needs --mlffr-multiples and a load > 0 packets/s",
            ));
        }
    }
    for &sh in &shares {
        gen_config(c, loads[0], sh)?;
    }
    need_root()?;
    std::fs::create_dir_all(&c.out).with_context(|| format!("create {}", c.out.display()))?;
    let stop = stop_on_signal();
    let topo = topology(c)?;
    let ref_common = Common {
        gen_backend: a.reference_gen_backend,
        ..c.clone()
    };
    let per_target = multiples.as_ref().map_or(loads.len(), |m| m.len()) * shares.len()
        + usize::from(a.reference_load.is_some());
    let search = if multiples.is_some() {
        a.steps as usize
    } else {
        0
    };
    let rounds = a.repeat;
    let bar =
        indicatif::ProgressBar::new((rounds as usize * tg.len() * (per_target + search)) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} {msg} [{elapsed}/~{duration}]",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut rows = Vec::new();
    let mut refs = Vec::new();
    let mut trials = Vec::new();
    let mut errors = Vec::new();
    let mut mlffrs: Vec<Mlffr> = Vec::new();
    'outer: for round in 1..=rounds {
        for t in &tg {
            let mut act = match Active::start(&topo, t, c) {
                Ok(a) => a,
                Err(e) => {
                    errors.push(format!("{} (round {round}): {e:#}", t.label()));
                    bar.inc((per_target + search) as u64);
                    continue;
                }
            };
            // First, on an unperturbed target: measured after its overload points, the kernel's
            // light-load p99 was ~0.46 ms instead of ~0.07 ms (cause not identified).
            if let Some(l) = a.reference_load.filter(|_| !stop.load(Ordering::Relaxed)) {
                bar.set_message(format!(
                    "{} reference {l:.0} pps (round {round})",
                    t.label()
                ));
                let (g, s, x) = measure(&topo, &act, &ref_common, l, shares[0], stop)?;
                let mut r = row(t, shares[0], &g, &s, x);
                r.round = round;
                refs.push(r);
                bar.inc(1);
            }
            let t_loads: Vec<f64> = match &multiples {
                Some(m) => {
                    let first = trials.len();
                    let (mlffr, limited) = search_mlffr(
                        &topo,
                        &act,
                        c,
                        shares[0],
                        a.loss_tolerance,
                        10_000.0,
                        a.max_rate,
                        a.steps,
                        stop,
                        &mut trials,
                        &bar,
                    )?;
                    for r in &mut trials[first..] {
                        r.round = round;
                    }
                    mlffrs.push(Mlffr {
                        target: t.label(),
                        round,
                        pps: mlffr,
                        gen_limited: limited,
                    });
                    if mlffr <= 0.0 {
                        errors.push(format!(
                            "{} (round {round}): no loss-free rate found",
                            t.label()
                        ));
                        continue;
                    }
                    m.iter().map(|x| x * mlffr).collect()
                }
                None => loads.clone(),
            };
            for &sh in &shares {
                for &l in &t_loads {
                    if stop.load(Ordering::Relaxed) {
                        break 'outer;
                    }
                    bar.set_message(format!("{} rt={sh} {l:.0} pps (round {round})", t.label()));
                    let (g, s, x) = measure(&topo, &act, c, l, sh, stop)?;
                    let mut r = row(t, sh, &g, &s, x);
                    r.round = round;
                    rows.push(r);
                    bar.inc(1);
                }
            }
            if let Err(e) = act.finish() {
                errors.push(format!("{} (round {round}): {e:#}", t.label()));
            }
        }
    }
    bar.finish_and_clear();
    write_csv(&c.out.join("results.csv"), &rows)?;
    if !refs.is_empty() {
        write_csv(&c.out.join("reference.csv"), &refs)?;
    }
    if !trials.is_empty() {
        write_csv(&c.out.join("mlffr_trials.csv"), &trials)?;
    }
    let loads_for_plot: Vec<f64> = if multiples.is_some() {
        vec![0.0, 1.0]
    } else {
        loads.clone()
    };
    let made = plots(&c.out, &rows, &tg, &loads_for_plot, &shares);
    let mut md = report_md(c, &rows, &made, &errors);
    if !mlffrs.is_empty() {
        md.push_str(&summary::mlffr_md(&mlffrs, a.loss_tolerance));
    }
    if let Some(m) = &multiples {
        md.push_str(&summary::multiples_md(&rows, &mlffrs, m, shares[0]));
        if let Some(l) = a.reference_load {
            md.push_str(&summary::reference_md(
                &rows,
                &refs,
                &mlffrs,
                m,
                shares[0],
                l,
                &value_name(a.reference_gen_backend),
            ));
        }
    }
    std::fs::write(c.out.join("report.md"), &md)?;
    println!("{md}");
    println!(
        "wrote {}/results.csv, report.md and {} plots",
        c.out.display(),
        made.len()
    );
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted (partial results written)");
    }
    if !errors.is_empty() {
        bail!(
            "{} target run(s) not measured (see report.md): {}",
            errors.len(),
            errors.join("; ")
        );
    }
    Ok(())
}

/// Runs every target of `c` at each offered load (packets/s; 0 = as fast as the generator
/// goes) with `rt_share`, on a temporary topology (or `c.name`); returns the rows. For the demo
/// and tests: no files besides the generated router configs and logs in `c.out`.
pub fn compare(c: &Common, loads: &[f64], rt_share: f64) -> Result<Vec<Row>> {
    check_common(c)?;
    let tg = targets(c)?;
    need_root()?;
    std::fs::create_dir_all(&c.out).with_context(|| format!("create {}", c.out.display()))?;
    let stop = stop_on_signal();
    let topo = topology(c)?;
    let mut rows = Vec::new();
    for t in &tg {
        let mut act = Active::start(&topo, t, c)?;
        for &l in loads {
            if stop.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            let (g, s, x) = measure(&topo, &act, c, l, rt_share, stop)?;
            rows.push(row(t, rt_share, &g, &s, x));
        }
        act.finish()?;
    }
    Ok(rows)
}

fn run_mlffr(a: MlffrArgs) -> Result<()> {
    let c = &a.common;
    check_common(c)?;
    if !(0.0..1.0).contains(&a.loss_tolerance) {
        return Err(usage("loss-tolerance", "must be within [0, 1)"));
    }
    if !(a.min_rate > 0.0 && a.max_rate > a.min_rate) {
        return Err(usage("max-rate", "need 0 < --min-rate < --max-rate"));
    }
    if a.steps == 0 || a.steps > 30 {
        return Err(usage("steps", "must be 1..=30"));
    }
    if a.repeat == 0 || a.repeat > 100 {
        return Err(usage("repeat", "must be 1..=100"));
    }
    let tg = targets(c)?;
    gen_config(c, a.min_rate, a.rt_share)?;
    need_root()?;
    std::fs::create_dir_all(&c.out)?;
    let stop = stop_on_signal();
    let topo = topology(c)?;
    let bar = indicatif::ProgressBar::new((a.repeat * tg.len() as u32 * a.steps) as u64);
    let mut rows = Vec::new();
    let mut found = Vec::new();
    let mut out = String::from("target,round,mlffr_pps,loss_tolerance,generator_limited\n");
    let mut unmeasured = Vec::new();
    'outer: for round in 1..=a.repeat {
        for t in &tg {
            if stop.load(Ordering::Relaxed) {
                break 'outer;
            }
            let mut act = match Active::start(&topo, t, c) {
                Ok(x) => x,
                Err(e) => {
                    println!("{} (round {round}): not measured: {e:#}", t.label());
                    unmeasured.push(format!("{} (round {round})", t.label()));
                    bar.inc(a.steps as u64);
                    continue;
                }
            };
            let first = rows.len();
            let (lo, gen_limited) = search_mlffr(
                &topo,
                &act,
                c,
                a.rt_share,
                a.loss_tolerance,
                a.min_rate,
                a.max_rate,
                a.steps,
                stop,
                &mut rows,
                &bar,
            )?;
            for r in &mut rows[first..] {
                r.round = round;
            }
            act.finish()?;
            let _ = writeln!(
                out,
                "{},{round},{lo:.0},{},{gen_limited}",
                t.label(),
                a.loss_tolerance
            );
            found.push(Mlffr {
                target: t.label(),
                round,
                pps: lo,
                gen_limited,
            });
        }
    }
    bar.finish_and_clear();
    write_csv(&c.out.join("mlffr_trials.csv"), &rows)?;
    std::fs::write(c.out.join("mlffr.csv"), &out)?;
    let md = summary::mlffr_md(&found, a.loss_tolerance);
    std::fs::write(c.out.join("mlffr.md"), &md)?;
    print!("{out}{md}");
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted (partial results written)");
    }
    if !unmeasured.is_empty() {
        bail!("not measured: {}", unmeasured.join(", "));
    }
    Ok(())
}

/// `llrouter testbed`.
pub fn run(args: TestbedArgs) -> Result<()> {
    match args.cmd {
        TestbedCmd::Up { name } => {
            if name.is_empty()
                || name.len() > 40
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                return Err(usage("name", "1..=40 characters of [A-Za-z0-9-]"));
            }
            if Topology::exists(&name) {
                println!("topology {name} already up");
                return Ok(());
            }
            let mut t = Topology::create(&name)?;
            t.persist();
            println!(
                "up: {0}-gen ({1}, {2}) → {0}-rtr ({3} | {4}) → {0}-sink ({5}, {6})",
                name,
                addr::GEN_V4,
                addr::GEN_V6,
                addr::RTR_IN_IF,
                addr::RTR_OUT_IF,
                addr::SINK_V4,
                addr::SINK_V6
            );
            Ok(())
        }
        TestbedCmd::Down { name } => {
            if !Topology::exists(&name) {
                println!("topology {name} is not up");
                return Ok(());
            }
            Topology::open(&name)?.down()?;
            println!("down: {name}");
            Ok(())
        }
        TestbedCmd::Run(a) => run_sweep(a),
        TestbedCmd::Mlffr(a) => run_mlffr(a),
        TestbedCmd::Iperf(a) => iperf::run_iperf(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        assert_eq!(Target::from_arg("kernel").unwrap(), Target::Kernel);
        assert_eq!(
            Target::from_arg("llrouter:ll-wfq").unwrap(),
            Target::Llrouter(StrategyKind::LlWfq)
        );
        assert!(Target::from_arg("linux").unwrap_err().contains("linux"));
        // An unknown strategy is refused when parsed, not when its router fails to start.
        let e = Target::from_arg("llrouter:foo").unwrap_err();
        assert!(e.contains("llrouter:foo") && e.contains("ll-wfq"), "{e}");
        assert!(Target::from_arg("llrouter:").is_err());
        let e = Target::list("kernel,llrouter:bogus").unwrap_err();
        assert!(e.downcast_ref::<crate::cli_util::UsageError>().is_some());
        assert_eq!("60,4".parse::<Budgets>(), Ok(Budgets { rt: 60, be: 4 }));
        assert!("60".parse::<Budgets>().is_err());
        assert!("0,4".parse::<Budgets>().is_err());
    }

    #[test]
    fn bad_options_name_the_field() {
        let c = |f: &dyn Fn(&mut Common)| {
            let mut c = Common::new(&[Target::Kernel], PathBuf::from("/nonexistent"));
            f(&mut c);
            c
        };
        let field = |e: anyhow::Error| {
            e.downcast_ref::<crate::cli_util::UsageError>()
                .map(|u| u.to_string())
                .unwrap_or_else(|| format!("not a usage error: {e:#}"))
        };
        for (bad, name) in [
            (c(&|c| c.gen_batch = 0), "gen-batch"),
            (c(&|c| c.gen_batch = 5000), "gen-batch"),
            (c(&|c| c.rx_size = 1000), "rx-size"),
            (c(&|c| c.rx_size = 32), "rx-size"),
        ] {
            let e = field(check_common(&bad).unwrap_err());
            assert!(e.contains(name), "{name}: {e}");
        }
        let e = field(router_toml(&c(&|c| c.tx_batch = 0), StrategyKind::Sq).unwrap_err());
        assert!(e.contains("tx-batch"), "{e}");
        let t = router_toml(&c(&|c| c.rx_size = 2048), StrategyKind::LlWfq).unwrap();
        assert!(t.contains("[rings]\nrx-size = 2048\n"), "{t}");
        assert!(t.contains("tx-batch = 16\n"), "{t}");
        // The generated file is a valid router config.
        crate::config::RouterConfig::from_toml(&t)
            .unwrap()
            .validate()
            .unwrap();
    }

    #[test]
    fn limit_note_blames_the_generator_only_without_loss() {
        let r = |offered: f64, sent: f64, loss_be: f64| Row {
            offered_pps: offered,
            sent_pps: sent,
            sent_rt: 300,
            sent_be: 700,
            loss_be,
            ..Default::default()
        };
        // Short of the offered rate, nothing lost: the generator was the limit.
        assert!(limit_note(&r(2e6, 1.5e6, 0.0)).contains("the generator, not the router"));
        // Short of it and 49 % lost (sq at 2 Mpps): the router, not the generator.
        let n = limit_note(&r(2e6, 1.5e6, 0.7));
        assert!(!n.contains("the generator, not the router"), "{n}");
        assert!(
            n.contains("49.0 % lost") && n.contains("router was overloaded"),
            "{n}"
        );
        // Rate reached and loss: the router.
        assert!(limit_note(&r(2e6, 2e6, 0.7)).contains("router was the limit"));
        assert_eq!(limit_note(&r(2e6, 2e6, 0.0)), "");
    }

    /// A short real sweep (root; skipped otherwise): kernel and kernel-htb at two light loads,
    /// twice (`--repeat 2`).
    #[test]
    fn short_kernel_sweep_writes_results() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let out = std::env::temp_dir().join(format!("llrtb-test-{}", std::process::id()));
        let args = RunArgs {
            common: Common {
                flows: 4,
                point_secs: 0.5,
                ..Common::new(&[Target::Kernel, Target::KernelHtb], out.clone())
            },
            loads: "5000,20000".into(),
            rt_shares: "0.3".into(),
            mlffr_multiples: None,
            loss_tolerance: 0.001,
            steps: 7,
            max_rate: 3e6,
            repeat: 2,
            reference_load: None,
            reference_gen_backend: Backend::Xsk,
        };
        let bad = RunArgs {
            common: Common::new(&[Target::Kernel], out.clone()),
            reference_load: Some(1000.0),
            ..args.clone()
        };
        let e = run_sweep(bad).unwrap_err().to_string();
        assert!(e.contains("--reference-load"), "{e}");
        // The router doing its own receive: a NAPI thread must appear and be pinned (else the
        // run fails), and light traffic still arrives whole.
        let own_rx = RunArgs {
            common: Common {
                rx_napi_thread: true,
                flows: 4,
                point_secs: 0.5,
                ..Common::new(&[Target::Kernel], out.join("own-rx"))
            },
            loads: "5000".into(),
            repeat: 1,
            ..args.clone()
        };
        run_sweep(own_rx).unwrap();
        let csv = std::fs::read_to_string(out.join("own-rx/results.csv")).unwrap();
        let f: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
        assert_eq!((f[8], f[9]), ("0.000000", "0.000000"), "{csv}");
        run_sweep(args).unwrap();
        let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
        assert_eq!(csv.lines().count(), 9, "{csv}");
        let mut rounds = Vec::new();
        for l in csv.lines().skip(1) {
            let f: Vec<&str> = l.split(',').collect();
            // Light load: nothing lost.
            assert_eq!(f[8].parse::<f64>().unwrap(), 0.0, "{l}");
            assert_eq!(f[9].parse::<f64>().unwrap(), 0.0, "{l}");
            rounds.push(f[23].parse::<u32>().unwrap());
        }
        assert_eq!(rounds, [1, 1, 1, 1, 2, 2, 2, 2], "{csv}");
        assert!(out.join("report.md").exists());
        assert!(out.join("latency_vs_load.png").exists());
        let _ = std::fs::remove_dir_all(&out);
    }
}
