//! `llrouter run --config router.toml`: the live router.
//!
//! Loads one XDP classifier per interface (rules → classes → one AF_XDP socket per ring), opens
//! the sockets on one shared UMEM, mirrors the kernel's routes and neighbours, and runs the
//! worker loop until SIGINT/SIGTERM (or `--duration`); then detaches everything and prints the
//! counters.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use llr_io::ebpf::{Classifier, FLAG_TIMESTAMP};
use llr_io::kernel::{self, MirrorSpec};
use llr_io::router::{self, WorkerOptions};
use llr_io::xsk::{Device, PortSpec};

use crate::config::RouterConfig;

/// Arguments of `llrouter run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Router configuration (TOML).
    #[arg(long, short)]
    pub config: std::path::PathBuf,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Check the configuration and exit.
    #[arg(long)]
    pub check: bool,
    /// Print the counters as JSON on exit.
    #[arg(long)]
    pub json: bool,
}

/// What a run counted.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub worker: llr_io::router::WorkerStats,
    /// Per interface (name, classifier counters).
    pub classifier: Vec<(String, llr_io::ebpf::ClassifierStats)>,
    pub class_names: Vec<String>,
}

/// Runs the router and prints its counters on exit.
pub fn run(args: RunArgs) -> Result<()> {
    let json = args.json;
    let Some(rep) = run_report(&args)? else {
        return Ok(());
    };
    let (stats, cls) = (&rep.worker, &rep.classifier);
    if json {
        let v = serde_json::json!({ "worker": stats, "classifier": cls.iter().map(|(n, s)| serde_json::json!({"interface": n, "stats": s})).collect::<Vec<_>>() });
        println!("{v}");
    } else {
        println!("llrouter counters:\n{stats}");
        for (n, s) in cls {
            let per: Vec<String> = rep
                .class_names
                .iter()
                .enumerate()
                .map(|(k, c)| format!("{c}={}", s.per_class[k]))
                .collect();
            println!(
                "  xdp {n}: classes {} pass: non-ip {} multicast {} local {} ttl {} malformed {} no-socket {}",
                per.join(" "),
                s.pass_non_ip,
                s.pass_multicast,
                s.pass_local,
                s.pass_ttl,
                s.malformed,
                s.no_socket
            );
        }
    }
    Ok(())
}

/// Runs the router in the calling thread's namespace; returns the counters (`None` for
/// `--check`).
pub fn run_report(args: &RunArgs) -> Result<Option<RunReport>> {
    let cfg = RouterConfig::load(&args.config)?;
    let r = cfg.resolve(|n| llr_io::ebpf::ifindex(n).ok())?;
    if args.check {
        println!(
            "config ok: {} interfaces, strategy {}, {} rings, {} rules",
            r.ifindexes.len(),
            r.layout.strategy,
            r.layout.rings.len(),
            r.rule_images.len()
        );
        return Ok(None);
    }
    let stop = router::install_stop_signals();
    if let Some(&core) = r.cfg.cores.first() {
        router::pin_to_core(core).with_context(|| format!("cores: pin to core {core}"))?;
    }
    let spec = MirrorSpec {
        ifindexes: r.ifindexes.clone(),
        kernel_routes: r.cfg.kernel_routes,
        routes: r.routes.clone(),
        neighbors: r.neighbors.clone(),
    };
    let fwd0 = kernel::build(&spec)?;
    let local: Vec<std::net::IpAddr> = fwd0
        .interfaces
        .iter()
        .flat_map(|i| i.addrs.iter().map(|a| a.addr))
        .collect();
    let fwd = Arc::new(RwLock::new(fwd0));
    let flags = if r.cfg.timestamp_meta {
        FLAG_TIMESTAMP
    } else {
        0
    };
    let mut ports = Vec::new();
    for &ifindex in &r.ifindexes {
        let mut c = Classifier::load(r.default_class)?;
        c.set_rules(&r.rule_images, r.default_class, flags)?;
        c.set_class_rings(&r.layout.class_to_ring)?;
        c.set_local_addrs(&local)?;
        ports.push(PortSpec {
            ifindex,
            classifier: c,
        });
    }
    let mut dev = Device::open(
        ports,
        0,
        r.layout.rings.len(),
        &r.cfg.rings,
        r.cfg.wake,
        r.cfg.attach,
    )?;
    eprintln!(
        "llrouter: routing between {} ({} strategy, {} rings, wake {:?}); Ctrl-C stops",
        r.cfg.interfaces.join(", "),
        r.layout.strategy,
        r.layout.rings.len(),
        r.cfg.wake
    );
    let refresh_stop = Arc::new(AtomicBool::new(false));
    let refresher = {
        let (spec, fwd, stop) = (spec.clone(), fwd.clone(), refresh_stop.clone());
        let period = Duration::from_millis(r.cfg.route_refresh_ms);
        std::thread::spawn(move || kernel::refresh_loop(spec, fwd, period, stop))
    };
    let opts = WorkerOptions {
        wake: r.cfg.wake,
        spin_us: r.cfg.spin_us,
        batch: r.cfg.batch,
        cost_ns: r.cfg.cost_ns,
        max_duration: args.duration.map(Duration::from_secs_f64),
    };
    let stats = router::run_worker(&mut dev, &r.layout, &fwd, &opts, stop);
    refresh_stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = refresher.join();
    let mut cls = Vec::new();
    for (i, &ifindex) in r.ifindexes.iter().enumerate() {
        if let Some(c) = dev.classifier(ifindex) {
            cls.push((r.cfg.interfaces[i].clone(), c.stats()?));
        }
    }
    drop(dev); // detaches the classifiers, closes the sockets, frees the UMEM
    Ok(Some(RunReport {
        worker: stats,
        classifier: cls,
        class_names: r.cfg.classes.iter().map(|c| c.name.clone()).collect(),
    }))
}
