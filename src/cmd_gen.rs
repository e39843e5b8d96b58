//! `llrouter gen`: send probe traffic (see `llr_traffic::gen`).

use clap::Args;
use llr_traffic::gen::Backend as GenBackend;
use llr_traffic::gen::{GenConfig, GenReport};

use crate::cli_util::{in_netns, print_json_or, table, to_usage};

/// Send UDP probe traffic (sequence number, class, flow and send timestamp in every payload).
#[derive(Debug, Args)]
pub struct GenArgs {
    /// What to send.
    #[command(flatten)]
    pub cfg: GenConfig,
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
    /// The generator configuration, checked.
    pub fn config(&self) -> anyhow::Result<GenConfig> {
        self.cfg.validate().map_err(to_usage)?;
        Ok(self.cfg.clone())
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
