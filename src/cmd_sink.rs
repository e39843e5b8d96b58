//! `llrouter sink`: receive probe traffic, report one-way latency, loss and reordering per class.

use clap::Args;
use llr_lab::SinkBackend;
use llr_traffic::gen::{CLASS_BE, CLASS_RT};
use llr_traffic::sink::{self, SinkConfig, SinkReport};

use crate::cli_util::to_usage;
use crate::cli_util::{in_netns, print_json_or, table, us, usage};

/// Receive probe traffic and measure latency, loss and reordering per class.
#[derive(Debug, Args)]
pub struct SinkArgs {
    #[arg(long, value_enum, default_value_t = SinkBackend::Udp)]
    pub backend: SinkBackend,
    /// Interface to attach the XDP sink to (--backend xdp).
    #[arg(long)]
    pub iface: Option<String>,
    /// When and how to receive.
    #[command(flatten)]
    pub cfg: SinkConfig,
    /// Run inside this network namespace.
    #[arg(long)]
    pub netns: Option<String>,
    /// Pin the receiving thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The name of a probe class id, as the generator assigns them (`gen --rt-share`).
pub fn class_name(class: u8) -> String {
    match class {
        CLASS_RT => "rt".into(),
        CLASS_BE => "be".into(),
        other => format!("class {other}"),
    }
}

/// Prints a sink report as a table.
pub fn print_report(r: &SinkReport) {
    let rows: Vec<Vec<String>> = r
        .classes
        .iter()
        .map(|c| {
            let l = &c.latency;
            vec![
                class_name(c.class),
                c.flows.to_string(),
                c.seq.received.to_string(),
                c.seq.lost.to_string(),
                c.seq.reordered.to_string(),
                c.seq.duplicates.to_string(),
                format!("{:.0}", c.pps),
                us(l.mean),
                us(l.p50 as f64),
                us(l.p90 as f64),
                us(l.p99 as f64),
                us(l.p999 as f64),
                us(l.max as f64),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "class", "flows", "recv", "lost", "reord", "dup", "pps", "mean_us", "p50_us",
                "p90_us", "p99_us", "p999_us", "max_us"
            ],
            &rows
        )
    );
    println!(
        "total {} packets in {:.3} s ({:.0} pps), {} invalid",
        r.received, r.duration_s, r.pps, r.invalid
    );
}

/// `llrouter sink`.
pub fn run(args: SinkArgs) -> anyhow::Result<()> {
    let cfg = args.cfg.clone();
    cfg.validate().map_err(to_usage)?;
    let backend = match (args.backend, &args.iface) {
        (SinkBackend::Xdp, None) => {
            return Err(usage("iface", "required with --backend xdp"));
        }
        (SinkBackend::Udp, Some(_)) => {
            return Err(usage("iface", "only with --backend xdp"));
        }
        (SinkBackend::Xdp, Some(i)) => sink::SinkBackend::Xdp { iface: i.clone() },
        (SinkBackend::Udp, None) => sink::SinkBackend::Udp,
    };
    let stop = llr_io::sys::install_stop_signals();
    let cpu = args.cpu;
    if let Some(c) = cpu {
        crate::cli_util::check_cpu("cpu", c)?;
    }
    let work = move || -> anyhow::Result<SinkReport> {
        if let Some(c) = cpu {
            crate::cli_util::pin_cpu("cpu", c)?;
        }
        sink::run(cfg, &backend, stop)
    };
    let rep = in_netns(args.netns.as_deref(), work)?;
    print_json_or(args.json, &rep, print_report)
}
