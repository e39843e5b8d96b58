//! `llrouter gen`: send probe traffic (see `llr_traffic::gen`).

use std::net::IpAddr;

use clap::Args;
use llr_traffic::gen::Backend as GenBackend;
use llr_traffic::gen::{Gaps, GenConfig, GenReport, TxSteer};

use crate::cli_util::{in_netns, print_json_or, secs, table, to_usage};

/// Send UDP probe traffic (sequence number, class, flow and send timestamp in every payload).
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Destination address (IPv4 or IPv6).
    #[arg(long)]
    pub dst: IpAddr,
    /// Destination UDP port.
    #[arg(long, default_value_t = 9000)]
    pub port: u16,
    /// Destination port of RT packets (default: --port).
    #[arg(long)]
    pub rt_port: Option<u16>,
    /// Do not mark RT packets with DSCP EF (46).
    #[arg(long)]
    pub no_dscp: bool,
    /// Frame size in bytes without FCS (IPv4 64..=1518, IPv6 84..=1518).
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// Offered rate, packets/s (0 = as fast as possible).
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// Inter-arrival times.
    #[arg(long, value_enum, default_value_t = Gaps::Constant)]
    pub gaps: Gaps,
    /// Share of RT packets, 0..=1.
    #[arg(long, default_value_t = 0.3)]
    pub rt_share: f64,
    /// Number of flows (distinct source ports); the first round(flows × rt-share) are RT.
    #[arg(long, default_value_t = 8)]
    pub flows: u16,
    /// Stop after this many packets.
    #[arg(long)]
    pub packets: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Random seed (flow choice, Poisson gaps).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// TTL / hop limit of BE packets (bpf-live backend). 1: every BE packet expires at the
    /// router (an ICMP time-exceeded flood).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u8).range(1..))]
    pub be_ttl: u8,
    /// Packets per send call at most.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Tx queues to send on (xsk backend; with the udp backend the kernel hashes each flow's
    /// socket to one of the interface's queues).
    #[arg(long, default_value_t = 1)]
    pub queues: u16,
    /// How a packet picks its Tx queue: rss (by flow hash) or class (queue w×2+class, the
    /// router's `steering = "queues"` layout).
    #[arg(long, value_enum, default_value_t = TxSteer::Rss)]
    pub tx_steer: TxSteer,
    #[arg(long, value_enum, default_value_t = GenBackend::Udp)]
    pub backend: GenBackend,
    /// Run inside this network namespace.
    #[arg(long)]
    pub netns: Option<String>,
    /// Pin the sending thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

impl GenArgs {
    /// The generator configuration.
    pub fn config(&self) -> anyhow::Result<GenConfig> {
        let cfg = GenConfig {
            dst: self.dst,
            dst_port: self.port,
            rt_port: self.rt_port,
            rt_dscp: !self.no_dscp,
            frame_size: self.size,
            rate_pps: self.rate,
            gaps: self.gaps,
            rt_share: self.rt_share,
            flows: self.flows,
            packets: self.packets,
            duration: secs("duration", self.duration)?,
            seed: self.seed,
            batch: self.batch,
            be_ttl: self.be_ttl,
            queues: self.queues,
            tx_steer: self.tx_steer,
        };
        cfg.validate().map_err(to_usage)?;
        Ok(cfg)
    }
}

/// Prints a generator report.
pub fn print_report(r: &GenReport) {
    let rows = vec![vec![
        r.backend.clone(),
        r.sent.to_string(),
        r.sent_rt.to_string(),
        r.sent_be.to_string(),
        r.send_errors.to_string(),
        format!("{:.3}", r.duration_s),
        format!("{:.0}", r.achieved_pps),
        format!("{:.0}", r.offered_pps),
    ]];
    print!(
        "{}",
        table(
            &["backend", "sent", "rt", "be", "send_err", "secs", "pps", "offered"],
            &rows
        )
    );
}

/// `llrouter gen`.
pub fn run(args: GenArgs) -> anyhow::Result<()> {
    let cfg = args.config()?;
    let stop = llr_io::sys::install_stop_signals();
    let backend = args.backend;
    let cpu = args.cpu;
    if let Some(c) = cpu {
        crate::cli_util::check_cpu("cpu", c)?;
    }
    let work = move || -> anyhow::Result<GenReport> {
        if let Some(c) = cpu {
            crate::cli_util::pin_cpu("cpu", c)?;
        }
        llr_traffic::gen::run(&cfg, backend, stop)
    };
    let rep = in_netns(args.netns.as_deref(), work)?;
    print_json_or(args.json, &rep, print_report)
}
