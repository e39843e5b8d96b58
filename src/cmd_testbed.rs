//! `llrouter testbed`: the namespace testbed (gen ns → router ns → sink ns) and the study that
//! compares forwarding targets on the same traffic (`llr_lab`).
//!
//! - `up` / `down`: create / remove a named, persistent topology;
//! - `run`: sweep offered load × RT share for each target, write `results.csv`, PNG plots and
//!   `report.md`;
//! - `mlffr`: RFC 2544-style binary search for the maximum loss-free forwarding rate;
//! - `iperf`: TCP goodput of iperf3 through each target, alone and beside a BE overload;
//! - `fulltable`: write the generated full Internet table (`llr_core::fixture`) as `ip -batch`
//!   files, BIRD static protocols and a summary (`llr_lab::fulltable`).
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

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use llr_io::gen::Gaps;
use llr_io::netns::{addr, Topology};
use llr_io::xsk::WakeMode;
use llr_lab::alternate::AlternateStudy;
use llr_lab::iperf::{self, IperfStudy};
use llr_lab::mlffr::MlffrStudy;
use llr_lab::options::Search;
use llr_lab::options::Steering;
use llr_lab::sweep::SweepStudy;
use llr_lab::{Budgets, GenBackend, Options, Progress, SinkBackend, Target};

use crate::cli_util::{lab_error, parse_values, usage};
use crate::cmd_gen::stop_on_signal;

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
        /// Rx/Tx queues of every veth (one per llrouter worker; per worker and class for
        /// `--steering queues`).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        queues: u32,
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
    /// Compare llrouter strategies under one constant overload by switching the running
    /// router's strategy every slice (the first target is the reference): each slice is set
    /// against the reference's slices around it, so the machine's own speed changes cancel.
    Alternate(AlternateArgs),
    /// Fit the worker's grant and flush costs over the results.csv of several `run`s (e.g. at
    /// `--tx-hold-us 0` and 5, interleaved) and compare the simulator with them.
    Costs(CostsArgs),
    /// TCP goodput of iperf3 (ordinary sockets, default offloads) through each target, alone
    /// and beside a BE overload.
    Iperf(IperfArgs),
    /// Write a generated full Internet routing table (deterministic, realistic prefix lengths,
    /// clustered and nested): routes-v4.batch and routes-v6.batch for `ip -batch`,
    /// bird-static.conf for BIRD 2, summary.txt with the prefix-length histogram.
    Fulltable(FulltableArgs),
}

/// `testbed fulltable`.
#[derive(Debug, Args)]
pub struct FulltableArgs {
    /// IPv4 prefixes (today's table: about 1 000 000).
    #[arg(long, default_value_t = 1_000_000)]
    pub v4: usize,
    /// IPv6 prefixes (today's table: about 200 000).
    #[arg(long, default_value_t = 230_000)]
    pub v6: usize,
    /// Seed: the same seed and sizes always give the same table.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Distinct next hops. 1: every route via the sink (10.71.2.1, fd71:2::1), so the batch
    /// files apply to a plain `testbed up`. More: gateways 10.71.64.1… and fd71:2::100:1…,
    /// which need 10.71.127.254/18 on the router's veth-rout (the summary says so).
    #[arg(long, default_value_t = 1)]
    pub next_hops: u16,
    /// BIRD static protocols per family (fx4_0…, fx6_0…): `birdc disable fx4_3` withdraws a
    /// slice.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub slices: u32,
    /// Output directory (created).
    #[arg(long)]
    pub out: PathBuf,
}

/// Wake-up mode of the llrouter targets' worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Wake {
    Interrupt,
    Busy,
    Adaptive,
}

impl From<Wake> for WakeMode {
    fn from(w: Wake) -> WakeMode {
        match w {
            Wake::Interrupt => WakeMode::Interrupt,
            Wake::Busy => WakeMode::Busy,
            Wake::Adaptive => WakeMode::Adaptive,
        }
    }
}

fn parse_target(s: &str) -> std::result::Result<Target, String> {
    s.parse().map_err(|e: llr_lab::options::TargetError| e.0)
}

/// Options shared by `run`, `mlffr` and `iperf`.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// Targets, comma-separated: kernel, kernel-htb, llrouter:<strategy>.
    #[arg(long, value_delimiter = ',', value_parser = parse_target, default_value = "kernel,kernel-htb")]
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
    #[arg(long, value_enum, default_value_t = Gaps::Poisson)]
    pub gaps: Gaps,
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
    #[arg(long, value_enum, default_value_t = GenBackend::BpfLive)]
    pub gen_backend: GenBackend,
    /// Sink backend: xdp (histograms in maps, 3 % buckets) or udp (exact HDR).
    #[arg(long, value_enum, default_value_t = SinkBackend::Xdp)]
    pub sink_backend: SinkBackend,
    /// llrouter targets: wake-up mode.
    #[arg(long, value_enum, default_value_t = Wake::Interrupt)]
    pub wake: Wake,
    /// llrouter targets: ring budgets of rt and be, `RT,BE` (ll-rr: BE for both rings).
    #[arg(long, default_value = "60,4")]
    pub budgets: Budgets,
    /// llrouter:ll-wfq targets: `budget = "auto"` for be, towards an RT time in ring of this
    /// many µs (paper 000's Eq. 2 with the measured ρRT and x; replaces the BE budget).
    #[arg(long)]
    pub auto_budget_us: Option<f64>,
    /// llrouter targets: device budget.
    #[arg(long, default_value_t = 64)]
    pub device_budget: u32,
    /// llrouter targets: artificial per-packet cost in ns (busy wait).
    #[arg(long, default_value_t = 0)]
    pub cost_ns: u64,
    /// Generator (bpf-live) burst size in frames, 1..=1024. Below 8 the generator falls far short
    /// of its rate when the router's ingress has an XDP program (see docs/results.md, "How to read them").
    #[arg(long, default_value_t = 32)]
    pub gen_batch: usize,
    /// Receive on the router's CPU: threaded NAPI for the router's ingress veth, its kernel
    /// thread pinned to --router-cpu. Without it the ingress veth's receive work (XDP
    /// classifier, AF_XDP copy, or the kernel's GRO) runs on the generator's CPU inside its
    /// send call, which caps the `xsk` generator below llrouter's capacity. Needs a sleeping
    /// worker (`--wake interrupt`): a busy-polling worker on the same CPU starves the thread.
    #[arg(long)]
    pub rx_napi_thread: bool,
    /// Run the sink veth's receive (its XDP program or UDP stack) on the generator's CPU
    /// (threaded NAPI for the sink veth, pinned there at real-time priority, and RPS) instead
    /// of in softirq on the router's CPU inside the router's transmit, for every target alike.
    /// On a 2-core machine that CPU then also carries the generator and the router's ingress
    /// receive (see docs/results.md, "How to read them", before trusting loss figures with it).
    #[arg(long)]
    pub sink_on_gen_cpu: bool,
    /// Keep every other task of the machine (processes, unbound kernel threads and
    /// workqueues) off the router's CPUs while this runs (a cgroup v1 cpuset, removed at the
    /// end): without it, anything that wakes on the router's CPU takes it from the worker for a
    /// scheduler tick or more, and the RT tail shows it. Confines other users' work too.
    #[arg(long)]
    pub shield: bool,
    /// llrouter targets: Rx ring entries per class socket (power of two; 512 as in paper 000).
    #[arg(long, default_value_t = 512)]
    pub rx_size: u32,
    /// llrouter targets: BE frames held back before a transmit kick (1: a kick per grant).
    #[arg(long, default_value_t = 16)]
    pub tx_batch: u32,
    /// llrouter targets: µs the RT frames may wait for --tx-batch frames before a kick of their
    /// own (the router's `tx-hold-us`; 0: a kick after every RT grant).
    #[arg(long, default_value_t = llr_core::sched::TxPolicy::DEFAULT_HOLD_US)]
    pub tx_hold_us: u32,
    /// llrouter targets: the llrouter binary (default: this executable).
    #[arg(long)]
    pub router_bin: Option<PathBuf>,
    /// TTL / hop limit of the generator's BE packets (bpf-live). 1: every BE packet expires at
    /// the router, which answers with ICMP time exceeded (rate-limited) instead of forwarding.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    pub be_ttl: u8,
    /// llrouter targets: workers, on --router-cpu and the CPUs after it (wrapping around). The
    /// veths get one queue per worker; the generator must be xsk (it spreads flows over the
    /// queues by hash, as RSS) or udp (the kernel hashes each socket to a queue); the kernel
    /// targets get one RPS CPU per queue.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// llrouter targets: xdp (the classifier's rules) or queues (the xsk generator puts class c
    /// of flow f in queue w×2+c, an emulated Flow Director; the router uses no rules).
    #[arg(long, value_enum, default_value_t = Steering::Xdp)]
    pub steering: Steering,
    /// `llrouter:<strategy>+flows` targets: a TOML file with the router's `[flow-scheduler]`,
    /// `[[flows]]` and `[[acls]]` (without it: the class flows only, forwarding only).
    #[arg(long)]
    pub flow_config: Option<PathBuf>,
}

impl Common {
    /// The library's options (checked).
    fn options(&self) -> Result<Options> {
        let o = Options {
            targets: self.targets.clone(),
            name: self.name.clone(),
            size: self.size,
            flows: self.flows,
            gaps: self.gaps,
            point_secs: self.point_secs,
            router_cpu: self.router_cpu,
            gen_cpu: self.gen_cpu,
            ipv6: self.ipv6,
            out: self.out.clone(),
            gen_backend: self.gen_backend,
            sink_backend: self.sink_backend,
            wake: self.wake.into(),
            budgets: self.budgets,
            auto_budget_us: self.auto_budget_us,
            device_budget: self.device_budget,
            cost_ns: self.cost_ns,
            gen_batch: self.gen_batch,
            rx_napi_thread: self.rx_napi_thread,
            sink_on_gen_cpu: self.sink_on_gen_cpu,
            shield: self.shield,
            rx_size: self.rx_size,
            tx_batch: self.tx_batch,
            tx_hold_us: self.tx_hold_us,
            router_bin: self.router_bin.clone(),
            be_ttl: self.be_ttl,
            workers: self.workers,
            steering: self.steering,
            flow_config: self.flow_config.clone(),
        };
        o.check().map_err(lab_error)?;
        Ok(o)
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
    #[arg(long, value_enum, default_value_t = GenBackend::Xsk)]
    pub reference_gen_backend: GenBackend,
}

#[derive(Debug, Args)]
pub struct CostsArgs {
    /// results.csv files (or the output directories holding them) of `testbed run`s with
    /// llrouter targets at overload; each file's rounds stay its own.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// The runs' ring budgets of rt and be, `RT,BE` (for the simulator).
    #[arg(long, default_value = "60,4")]
    pub budgets: Budgets,
    /// The runs' --tx-batch (for the simulator).
    #[arg(long, default_value_t = 16)]
    pub tx_batch: u32,
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

/// Options of `testbed alternate`.
#[derive(Debug, Args, Clone)]
pub struct AlternateArgs {
    #[command(flatten)]
    pub common: Common,
    /// Offered load, packets per second (flat out: more than the router forwards).
    #[arg(long, default_value_t = 3_000_000.0)]
    pub load: f64,
    /// RT share of the traffic.
    #[arg(long, default_value_t = 0.15)]
    pub rt_share: f64,
    /// Measured milliseconds per slice.
    #[arg(long, default_value_t = 500)]
    pub slice_ms: u64,
    /// Milliseconds after each switch before the slice is measured.
    #[arg(long, default_value_t = 100)]
    pub settle_ms: u64,
    /// Cycles through every target.
    #[arg(long, default_value_t = 30)]
    pub cycles: u32,
}

/// Options of `testbed iperf`.
#[derive(Debug, Args, Clone)]
pub struct IperfArgs {
    #[command(flatten)]
    pub common: Common,
    /// Seconds per iperf3 run.
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Offered rate of the BE overload beside the TCP flow, packets per second.
    #[arg(long, default_value_t = 3_000_000.0)]
    pub overload: f64,
    /// Rounds (targets interleaved within each round); the report gives medians and ranges.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// MTU of every link (576..=9000; above one UMEM chunk llrouter uses multi-buffer).
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Segmentation, receive and checksum offloads of the links: `on` leaves veth's defaults
    /// (TSO, GSO, checksum offload on), `off` turns TSO, GSO, GRO and checksum offload off.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub offloads: String,
    /// Cases, comma-separated: alone (as fast as TCP goes), paced (at --pace), overload (beside
    /// a BE overload), rt (in the RT class beside it).
    #[arg(long, default_value = "alone,overload,rt", value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Rate of the paced case's TCP flow, Mbit/s.
    #[arg(long, default_value_t = 1000.0)]
    pub pace: f64,
}

/// A progress bar on stderr.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new() -> Bar {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} {msg} [{elapsed}/~{duration}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Bar(b)
    }
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.0.set_length(total);
    }
    fn message(&self, msg: &str) {
        self.0.set_message(msg.to_string());
    }
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

fn run_sweep(a: RunArgs) -> Result<()> {
    let options = a.common.options()?;
    let multiples = match &a.mlffr_multiples {
        Some(m) => Some(parse_values("mlffr-multiples", m)?),
        None => None,
    };
    let study = SweepStudy {
        loads: parse_values("loads", &a.loads)?,
        shares: parse_values("rt-shares", &a.rt_shares)?,
        multiples,
        search: Search {
            loss_tolerance: a.loss_tolerance,
            min_rate: 10_000.0,
            max_rate: a.max_rate,
            steps: a.steps,
        },
        repeat: a.repeat,
        reference_load: a.reference_load,
        reference_gen_backend: a.reference_gen_backend,
        options,
    };
    study.check().map_err(lab_error)?;
    let stop = stop_on_signal();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!(
        "wrote {}/results.csv, report.md and {} plots",
        study.options.out.display(),
        o.plots.len()
    );
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    if !o.errors.is_empty() {
        bail!(
            "{} target run(s) not measured (see report.md): {}",
            o.errors.len(),
            o.errors.join("; ")
        );
    }
    Ok(())
}

fn run_mlffr(a: MlffrArgs) -> Result<()> {
    let study = MlffrStudy {
        options: a.common.options()?,
        rt_share: a.rt_share,
        search: Search {
            loss_tolerance: a.loss_tolerance,
            min_rate: a.min_rate,
            max_rate: a.max_rate,
            steps: a.steps,
        },
        repeat: a.repeat,
    };
    study.check().map_err(lab_error)?;
    let stop = stop_on_signal();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    for (t, why) in &o.unmeasured {
        println!("{t}: not measured: {why}");
    }
    print!("{}{}", o.csv, o.md);
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    if !o.unmeasured.is_empty() {
        let names: Vec<&str> = o.unmeasured.iter().map(|(t, _)| t.as_str()).collect();
        bail!("not measured: {}", names.join(", "));
    }
    Ok(())
}

fn run_alternate(a: AlternateArgs) -> Result<()> {
    let study = AlternateStudy {
        options: a.common.options()?,
        rate: a.load,
        rt_share: a.rt_share,
        slice: Duration::from_millis(a.slice_ms),
        settle: Duration::from_millis(a.settle_ms),
        cycles: a.cycles,
    };
    study.check().map_err(lab_error)?;
    let stop = stop_on_signal();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!(
        "wrote {}/alternate.csv and alternate.md",
        study.options.out.display()
    );
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    Ok(())
}

fn run_iperf(a: IperfArgs) -> Result<()> {
    let study = IperfStudy {
        options: a.common.options()?,
        secs: a.secs,
        overload: a.overload,
        repeat: a.repeat,
        mtu: a.mtu,
        offloads: a.offloads == "on",
        cases: (a.cases.iter())
            .map(|c| {
                iperf::Case::parse(c).ok_or_else(|| {
                    usage(
                        "cases",
                        format!("`{c}` is not a case (alone, paced, overload, rt)"),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        pace_mbps: a.pace,
    };
    study.check().map_err(lab_error)?;
    let stop = stop_on_signal();
    let rows = study
        .run(stop, &mut |r| {
            eprintln!(
                "round {} {:<18} {:<17} {:>9.1} Mbit/s  retransmits {:>6} ({:.2} %)  overload {:>8.0} pps  router CPU {:>5.0} ms/Gbit",
                r.round,
                r.target,
                r.case,
                r.goodput_mbps,
                r.retransmits,
                r.retransmit_pct,
                r.overload_pps,
                r.router_cpu_ms_per_gbit
            )
        })
        .map_err(lab_error)?;
    println!("{}", iperf::summary(&rows));
    println!("rows: {}", study.csv_path().display());
    Ok(())
}

fn up(name: &str, queues: u32) -> Result<()> {
    if name.is_empty()
        || name.len() > 40
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(usage("name", "1..=40 characters of [A-Za-z0-9-]"));
    }
    if Topology::exists(name) {
        println!("topology {name} already up");
        return Ok(());
    }
    let mut t = Topology::create_with(name, queues)?;
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

fn down(name: &str) -> Result<()> {
    if !Topology::exists(name) {
        println!("topology {name} is not up");
        return Ok(());
    }
    Topology::open(name)?.down()?;
    println!("down: {name}");
    Ok(())
}

/// `llrouter testbed`.
pub fn run(args: TestbedArgs) -> Result<()> {
    // A study killed while it held the CPU shield left the machine's other tasks confined;
    // any testbed command puts them back (the studies do it again when they start).
    match llr_ops::shield::sweep_stale() {
        Ok(0) => {}
        Ok(n) => eprintln!("released {n} CPU shield(s) left by a killed testbed run"),
        Err(e) => eprintln!("note: {e:#}"),
    }
    match args.cmd {
        TestbedCmd::Up { name, queues } => up(&name, queues),
        TestbedCmd::Down { name } => down(&name),
        TestbedCmd::Run(a) => run_sweep(a),
        TestbedCmd::Mlffr(a) => run_mlffr(a),
        TestbedCmd::Alternate(a) => run_alternate(a),
        TestbedCmd::Costs(a) => costs(a),
        TestbedCmd::Iperf(a) => run_iperf(a),
        TestbedCmd::Fulltable(a) => fulltable(a),
    }
}

fn costs(a: CostsArgs) -> Result<()> {
    let files: Vec<PathBuf> = (a.results.iter())
        .map(|p| {
            if p.is_dir() {
                p.join("results.csv")
            } else {
                p.clone()
            }
        })
        .collect();
    if let Some(f) = files.iter().find(|f| !f.is_file()) {
        bail!(
            "{}: no such file (a `testbed run` output directory or its results.csv)",
            f.display()
        );
    }
    let paths: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
    let rows = llr_lab::report::read_runs(&paths).map_err(lab_error)?;
    let c = Options {
        budgets: a.budgets,
        tx_batch: a.tx_batch,
        ..Options::new(&[], PathBuf::new())
    };
    let md = llr_lab::report::costs_md(&c, &rows);
    if md.is_empty() {
        bail!(
            "no overloaded llrouter point with grant counters in {} file(s) (BE loss > 1 % and a build that records flushes)",
            files.len()
        );
    }
    print!("{md}");
    Ok(())
}

fn fulltable(a: FulltableArgs) -> Result<()> {
    use llr_core::fixture::{Fixture, FixtureSpec};
    use llr_lab::fulltable::{self, Gateways};
    let spec = FixtureSpec {
        v4: a.v4,
        v6: a.v6,
        seed: a.seed,
        next_hops: a.next_hops,
    };
    let gw = Gateways::testbed(a.next_hops).map_err(lab_error)?;
    let t0 = std::time::Instant::now();
    let fx = Fixture::generate(spec).map_err(|e| usage(&e.field, e.reason))?;
    let w = fulltable::write_dir(&a.out, &fx, &gw, a.slices as usize).map_err(lab_error)?;
    print!("{}", fulltable::summary(&fx));
    println!(
        "\nwritten in {:.1} s: {}, {}, {}, {}",
        t0.elapsed().as_secs_f64(),
        w.batch_v4.display(),
        w.batch_v6.display(),
        w.bird_static.display(),
        w.summary.display()
    );
    if gw.needs_gateway_net() {
        println!(
            "the gateways are on {}: first `ip -n NAME-rtr addr add {} dev {}`",
            fulltable::GATEWAY_NET_V4,
            fulltable::ROUTER_GW_ADDR_V4,
            addr::RTR_OUT_IF
        );
    }
    println!(
        "load into a testbed's router namespace (never the host): ip -n NAME-rtr -batch {}",
        w.batch_v4.display()
    );
    Ok(())
}
