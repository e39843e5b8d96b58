//! `llrouter run --config router.toml`: the live router (`llr_router`) until SIGINT/SIGTERM or
//! `--duration`, then its counters.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use llr_router::config::{ConfigError, RouterConfig, Steering};
use llr_router::{plan, RouterError, RunReport, StartOptions};

use crate::cli_util::usage;

/// Arguments of `llrouter run`.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// Router configuration (TOML).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Check the configuration and exit.
    #[arg(long)]
    pub check: bool,
    /// Print the counters as JSON on exit.
    #[arg(long)]
    pub json: bool,
    /// How frames reach the class rings (overrides the config's `steering`): `xdp` (the eBPF
    /// classifier) or `ntuple` (NIC filters, one hardware queue per class).
    #[arg(long, value_enum)]
    pub steering: Option<Steering>,
    /// Print what would be set up (the ethtool commands for `ntuple`, the class → queue/ring
    /// layout) and exit without touching anything.
    #[arg(long)]
    pub dry_run: bool,
    /// While the router runs, keep every other task of the machine that may move (processes,
    /// unbound kernel threads and workqueues) off the worker cores (`cores`), and give them
    /// back on exit: `cset shield` for a machine booted without `isolcpus=`. Needs the cgroup v1
    /// cpuset hierarchy.
    #[arg(long)]
    pub shield: bool,
}

/// The CPU shield over the worker cores, after releasing any a killed run left behind.
fn shield_workers(cores: &[usize]) -> Result<llr_ops::shield::CpuShield> {
    if let Ok(n @ 1..) = llr_ops::shield::sweep_stale() {
        eprintln!("llrouter: released {n} CPU shield(s) left by a killed run");
    }
    let cpus = cores.iter().copied().collect();
    let s =
        llr_ops::shield::CpuShield::new(&cpus).map_err(|e| usage("shield", format!("{e:#}")))?;
    eprintln!(
        "llrouter: CPU shield over core(s) {}: {} other tasks moved off until the router stops",
        llr_ops::cpus::format_cpu_list(&cpus),
        s.moved()
    );
    Ok(s)
}

/// A configuration that does not load or fit this host is bad input (exit 2), like a flag.
fn bad_config(e: ConfigError) -> anyhow::Error {
    usage("config", e.to_string())
}

/// Runs the router in this process's namespace and prints its counters on exit.
pub fn run(args: RunArgs) -> Result<()> {
    let duration = match args.duration {
        Some(0.0) => {
            return Err(usage(
                "duration",
                "must be above 0 seconds (leave it out to run until Ctrl-C or SIGTERM)",
            ))
        }
        Some(s) => Some(Duration::try_from_secs_f64(s).map_err(|_| {
            usage(
                "duration",
                format!("{s} is not a number of seconds above 0"),
            )
        })?),
        None => None,
    };
    let cfg = RouterConfig::load(&args.config).map_err(bad_config)?;
    let steering = args.steering.unwrap_or(cfg.steering);
    if args.dry_run {
        let cfg_fw = (cfg.firewall, cfg.interfaces.clone());
        let plan = plan::dry_run_plan(cfg, steering).map_err(|e| match e {
            RouterError::Config(c) => bad_config(c),
            other => other.into(),
        })?;
        for l in plan {
            println!("{l}");
        }
        let served: Vec<(String, u32)> = (cfg_fw.1.iter())
            .map(|n| (n.clone(), llr_io::ebpf::ifindex(n).unwrap_or(0)))
            .collect();
        let (lines, refusal) = llr_router::firewall::describe(&cfg_fw.0, &served);
        for l in lines {
            println!("{l}");
        }
        if let Some(r) = refusal {
            println!("firewall: a start would be refused: {r}");
        }
        return Ok(());
    }
    if args.check {
        let r = cfg
            .resolve(|n| llr_io::ebpf::ifindex(n).ok())
            .map_err(bad_config)?;
        let kernel = llr_io::probe::KernelFeatures::probe();
        let queues = plan::check(&r, steering, kernel.multi_buffer).map_err(|e| match e {
            RouterError::Config(c) => bad_config(c),
            other => other.into(),
        })?;
        let served: Vec<(String, u32)> = (r.cfg.interfaces.iter().cloned())
            .zip(r.ifindexes.iter().copied())
            .collect();
        let (lines, refusal) = llr_router::firewall::describe(&r.cfg.firewall, &served);
        for l in lines {
            println!("{l}");
        }
        if let Some(r) = refusal {
            return Err(crate::cli_util::Refused(r).into());
        }
        println!("config ok: {}", plan::summary(&r, &queues));
        return Ok(());
    }
    if args.shield && cfg.cores.is_empty() {
        return Err(usage(
            "shield",
            "the config pins no worker (`cores` is empty): there is no core to keep for it",
        ));
    }
    let stop = llr_io::sys::install_stop_signals();
    let opts = StartOptions {
        config_path: Some(args.config.clone()),
        duration,
        steering: args.steering,
    };
    let cores = cfg.cores.clone();
    let running = llr_router::Router::start(cfg, opts).map_err(|e| match e {
        RouterError::Config(c) => bad_config(c),
        e if e.is_refusal() => crate::cli_util::Refused(e.to_string()).into(),
        e => e.into(),
    })?;
    eprintln!("llrouter: {}; Ctrl-C stops", running.summary());
    // This thread wakes every 50 ms until the end: on a worker's core each wake-up would
    // preempt the worker (`perf sched timehist` saw it run there up to 5 ms at a time while the other core was busy).
    if let Err(e) = llr_ops::cpus::set_affinity(running.helper_cpus()) {
        tracing::warn!("could not move the main thread to the helper cores: {e}");
    }
    // After the start, so a refused start changes nothing on the machine; the router's own
    // threads stay where they are pinned (the shield leaves this process's threads alone).
    let shield = match args.shield {
        true => match shield_workers(&cores) {
            Ok(s) => Some(s),
            Err(e) => {
                let _ = running.stop();
                return Err(e);
            }
        },
        false => None,
    };
    while !stop.load(Ordering::Relaxed) && !running.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let rep = running.stop();
    drop(shield);
    let rep = rep?;
    if args.json {
        print_json(&rep);
    } else {
        print_text(&rep);
    }
    Ok(())
}

fn print_json(rep: &RunReport) {
    let cls: Vec<_> = (rep.classifier.iter())
        .map(|(n, s)| serde_json::json!({"interface": n, "stats": s}))
        .collect();
    println!(
        "{}",
        serde_json::json!({ "worker": rep.worker, "classifier": cls })
    );
}

fn print_text(rep: &RunReport) {
    // Ports by interface name: the worker only knows indexes.
    let mut w = rep.worker.clone();
    w.ports.clear();
    println!("llrouter counters:\n{w}");
    for p in &rep.worker.ports {
        let name = (rep.interfaces.iter())
            .find(|(i, _)| *i == p.ifindex)
            .map_or_else(|| format!("ifindex {}", p.ifindex), |(_, n)| n.clone());
        println!(
            "  {name:<12} rx {:>10} tx {:>10} tx kicks {} ({} refused) egress drops {} kernel: rx dropped {} ring full {} fill empty {}",
            p.rx, p.tx, p.tx_kicks, p.tx_kick_errors, p.egress_drops, p.kernel_rx_dropped, p.kernel_rx_ring_full, p.kernel_fill_empty
        );
    }
    for (n, s) in &rep.classifier {
        let per: Vec<String> = (rep.class_names.iter().enumerate())
            .map(|(k, c)| format!("{c}={}", s.per_class[k]))
            .collect();
        println!(
            "  xdp {n}: classes {}; to kernel: non-ip {} multicast {} local {} firewall {} conntrack {} vlan {}; dropped: firewall {} malformed {} no-socket {}",
            per.join(" "),
            s.pass_non_ip,
            s.pass_multicast,
            s.pass_local,
            s.pass_firewall,
            s.pass_conntrack,
            s.pass_vlan,
            s.drop_firewall,
            s.malformed,
            s.no_socket
        );
    }
}
