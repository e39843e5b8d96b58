//! `llrouter run --config router.toml`: the live router.
//!
//! Binds the control socket first (a second router on the same path is refused before it
//! touches any interface), loads one XDP classifier per interface (rules → classes → one AF_XDP
//! socket per class), opens the sockets on one shared UMEM, mirrors the kernel's routes and
//! neighbours, serves metrics if configured, and runs the worker loop until SIGINT/SIGTERM (or
//! `--duration`); then removes the socket, stops the metrics server, detaches everything and
//! prints the counters. Every resource is owned by a value whose `Drop` releases it, so an error
//! on the way out cleans up too.
//!
//! The control plane ([`RouterCtl`], the router's `llr_ops::ctl::ControlTarget`) validates a
//! change on the connection thread, hands it to the worker, which applies it between poll rounds
//! ([`llr_io::router::run_worker_ctl`]), and replies only when the worker confirmed it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use llr_core::classify::{RuleSet, RuleSpec};
use llr_core::fwd::Forwarder;
use llr_core::sched::{Layout, StrategyKind};
use llr_io::ebpf::{Classifier, FLAG_TIMESTAMP};
use llr_io::kernel::{self, MirrorSpec, StaticRoute};
use llr_io::router::ctl::{Change, WorkerLink, WorkerSnapshot, LATENCY_BOUNDS};
use llr_io::router::{self, WorkerCtl, WorkerOptions};
use llr_io::xsk::{Device, PortSpec, WakeMode};
use llr_ops::ctl::{
    Command, ControlTarget, CtlError, CtlServer, RuleEntry, DEFAULT_DUMP_LIMIT, MAX_DUMP_LIMIT,
};
use llr_ops::metrics::{
    DeviceMetrics, Histogram, InterfaceMetrics, MetricsServer, MetricsSnapshot, ProcessMetrics,
    RingMetrics, WorkerMetrics,
};
use llr_ops::views::{format_mac, InterfaceView, NeighbourView, RouteView};
use serde_json::{json, Value};

use llr_router::config::{ConfigError, Resolved, RouterConfig, Steering};

/// How long a change may wait for the worker to apply it.
pub const APPLY_TIMEOUT: Duration = Duration::from_millis(100);

/// Arguments of `llrouter run`.
#[derive(Debug, Clone, Default, Args)]
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
    /// How frames reach the class rings (overrides the config's `steering`): `xdp` (the eBPF
    /// classifier) or `ntuple` (NIC filters, one hardware queue per class).
    #[arg(long, value_enum)]
    pub steering: Option<Steering>,
    /// Print what would be set up (the ethtool commands for `ntuple`, the class → queue/ring
    /// layout) and exit without touching anything.
    #[arg(long)]
    pub dry_run: bool,
}

/// What a run counted.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub worker: llr_io::router::WorkerStats,
    /// Per interface (name, classifier counters).
    pub classifier: Vec<(String, llr_io::ebpf::ClassifierStats)>,
    pub class_names: Vec<String>,
    /// The router's `(ifindex, name)` pairs.
    pub interfaces: Vec<(u32, String)>,
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
        // Ports by interface name: the worker only knows indexes.
        let mut w = stats.clone();
        w.ports.clear();
        println!("llrouter counters:\n{w}");
        for p in &stats.ports {
            let name = rep
                .interfaces
                .iter()
                .find(|(i, _)| *i == p.ifindex)
                .map_or_else(|| format!("ifindex {}", p.ifindex), |(_, n)| n.clone());
            println!(
                "  {name:<12} rx {:>10} tx {:>10} tx kicks {} egress drops {} kernel: rx dropped {} ring full {} fill empty {}",
                p.rx, p.tx, p.tx_kicks, p.egress_drops, p.kernel_rx_dropped, p.kernel_rx_ring_full, p.kernel_fill_empty
            );
        }
        for (n, s) in cls {
            let per: Vec<String> = rep
                .class_names
                .iter()
                .enumerate()
                .map(|(k, c)| format!("{c}={}", s.per_class[k]))
                .collect();
            println!(
                "  xdp {n}: classes {}; to kernel: non-ip {} multicast {} local {}; dropped: malformed {} no-socket {}",
                per.join(" "),
                s.pass_non_ip,
                s.pass_multicast,
                s.pass_local,
                s.malformed,
                s.no_socket
            );
        }
    }
    Ok(())
}

/// Runs the router in the calling thread's namespace; returns the counters (`None` for
/// `--check`). Stops on SIGINT/SIGTERM or after `--duration`.
pub fn run_report(args: &RunArgs) -> Result<Option<RunReport>> {
    run_report_until(args, None)
}

/// [`run_report`] that stops when `stop` is set instead of on signals (tests, embedding).
pub fn run_report_until(args: &RunArgs, stop: Option<&AtomicBool>) -> Result<Option<RunReport>> {
    // A configuration that does not load or fit this host is bad input (exit 2), like a flag.
    let bad_config = |e: ConfigError| crate::cli_util::usage("config", e.to_string());
    let cfg = RouterConfig::load(&args.config).map_err(bad_config)?;
    let steering = args.steering.unwrap_or(cfg.steering);
    if args.dry_run {
        for l in dry_run_plan(cfg, steering)? {
            println!("{l}");
        }
        return Ok(None);
    }
    let r = cfg
        .resolve(|n| llr_io::ebpf::ifindex(n).ok())
        .map_err(bad_config)?;
    if steering == Steering::Ntuple {
        // Check every interface (and that the rules are expressible) before touching anything.
        let nclasses = r.cfg.classes.len();
        for (n, &ifindex) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
            llr_io::ntuple::check_support(n, nclasses as u32).context("steering = \"ntuple\"")?;
            llr_io::ntuple::plan(n, ifindex, &r.rules, nclasses, 0)
                .context("steering = \"ntuple\"")?;
        }
        bail!(
            "steering = \"ntuple\": {} support ntuple filters, but one AF_XDP socket per hardware queue is not implemented in `llrouter run` yet; nothing was changed (`--dry-run` prints the filters; `ethtool` can apply them by hand)",
            r.cfg.interfaces.join(", ")
        );
    }
    if args.check {
        println!(
            "config ok: {}, strategy {}, {}, {}",
            plural(r.ifindexes.len(), "interface"),
            r.layout.strategy,
            plural(r.layout.rings.len(), "ring"),
            plural(r.rule_images.len(), "rule")
        );
        return Ok(None);
    }
    let stop = match stop {
        Some(s) => s,
        None => llr_io::sys::install_stop_signals(),
    };
    // Helper threads (control connections, metrics, route mirror) are spawned while this thread
    // runs on the helper cores, so they inherit them; the worker is pinned afterwards.
    let allowed = llr_ops::cpus::allowed().context("read the CPU affinity")?;
    let helpers = llr_ops::cpus::helper_cpus(&allowed, &r.cfg.cores, r.cfg.helper_cores.as_deref());
    llr_ops::cpus::set_affinity(&helpers).with_context(|| {
        format!(
            "helper-cores: run on {}",
            llr_ops::cpus::format_cpu_list(&helpers)
        )
    })?;
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

    // Control plane first: a second router on the same socket stops here, before touching XDP.
    let link = WorkerLink::new().context("control: eventfd")?;
    let ctl = Arc::new(RouterCtl::new(
        args.config.clone(),
        &r,
        spec.clone(),
        fwd.clone(),
        link.clone(),
        flags,
        helpers.clone(),
    ));
    let sock_path = r.cfg.control.socket.clone();
    if let Some(dir) = sock_path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("control.socket: create {}", dir.display()))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    let ctl_server = CtlServer::bind(&sock_path, ctl.clone())
        .map_err(|e| anyhow::anyhow!("control.socket: {e}"))?;
    let metrics_server = match &r.cfg.metrics {
        Some(m) => {
            let addr = m.addr()?;
            let c = ctl.clone();
            Some(
                MetricsServer::start(addr, move || c.metrics(Duration::from_millis(50)))
                    .with_context(|| format!("metrics.listen: bind {addr}"))?,
            )
        }
        None => None,
    };
    if let Some(m) = &metrics_server {
        *ctl.metrics_addr.lock().unwrap_or_else(|e| e.into_inner()) = Some(m.local_addr());
    }
    if let Some(&core) = r.cfg.cores.first() {
        llr_ops::cpus::set_affinity(&[core].into())
            .with_context(|| format!("cores: pin to core {core}"))?;
    }

    // One socket per class, whatever the strategy: switching to `sq` and back keeps them all.
    let nsock = r.cfg.classes.len().max(r.layout.rings.len());
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
    let mut dev = Device::open(ports, 0, nsock, &r.cfg.rings, r.cfg.wake, r.cfg.attach)?;
    eprintln!(
        "llrouter: routing between {} ({} strategy, {}, wake {}); control {}{}; Ctrl-C stops",
        r.cfg.interfaces.join(", "),
        r.layout.strategy,
        plural(r.layout.rings.len(), "ring"),
        r.cfg.wake.name(),
        sock_path.display(),
        metrics_server
            .as_ref()
            .map(|m| format!(", metrics http://{}/metrics", m.local_addr()))
            .unwrap_or_default()
    );
    ctl.start_mirror()?;
    let opts = WorkerOptions {
        wake: r.cfg.wake,
        spin_us: r.cfg.spin_us,
        batch: r.cfg.batch,
        tx_batch: r.cfg.tx_batch,
        cost_ns: r.cfg.cost_ns,
        acl_rules: r.cfg.acl_rules,
        max_duration: args.duration.map(Duration::from_secs_f64),
        icmp: r.cfg.icmp.limits()?,
        punt_device: (r.cfg.icmp.punt_rate > 0).then(|| "llr-punt".to_string()),
        punt_rate: r.cfg.icmp.punt_rate,
    };
    let wctl = WorkerCtl {
        link: link.clone(),
        rules: r.rule_images.clone(),
        default_class: r.default_class,
        flags,
    };
    let stats = router::run_worker_ctl(&mut dev, &r.layout, &fwd, &opts, stop, Some(wctl));
    // Stop taking commands, then the rest.
    drop(ctl_server);
    drop(metrics_server);
    ctl.shutdown();
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
        interfaces: r
            .ifindexes
            .iter()
            .copied()
            .zip(r.cfg.interfaces.clone())
            .collect(),
    }))
}

/// The `--dry-run` report: the class → queue (ntuple) or class → ring (xdp) layout and, for
/// ntuple, the `ethtool` commands per interface. Touches nothing; interfaces missing from this
/// namespace get a placeholder index (noted in the output), so a plan can be made anywhere.
pub fn dry_run_plan(cfg: RouterConfig, steering: Steering) -> Result<Vec<String>> {
    let names = cfg.interfaces.clone();
    let lookup = move |n: &str| {
        llr_io::ebpf::ifindex(n).ok().or_else(|| {
            names
                .iter()
                .position(|x| x == n)
                .map(|i| DRY_RUN_IFINDEX_BASE + i as u32)
        })
    };
    let r = cfg.resolve(&lookup)?;
    let classes: Vec<String> = r.cfg.classes.iter().map(|c| c.name.clone()).collect();
    let mut out = vec![format!(
        "# llrouter dry run: steering {}, strategy {}, {} classes, {} rules; nothing is changed",
        steering.name(),
        r.layout.strategy,
        classes.len(),
        r.rules.len()
    )];
    for (n, &i) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
        if i >= DRY_RUN_IFINDEX_BASE {
            out.push(format!("# note: no interface `{n}` here; planned anyway"));
        }
    }
    match steering {
        Steering::Ntuple => {
            let mut layout_done = false;
            for (n, &ifindex) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
                let plan = llr_io::ntuple::plan(n, ifindex, &r.rules, classes.len(), 0)
                    .context("steering = \"ntuple\"")?;
                if !layout_done {
                    out.push("# class -> hardware queue (one AF_XDP socket per queue)".into());
                    for (c, q) in classes.iter().zip(&plan.class_queue) {
                        let d = if *c == classes[classes.len() - 1] {
                            " (default: unmatched traffic)"
                        } else {
                            ""
                        };
                        out.push(format!("#   {c} -> queue {q}{d}"));
                    }
                    layout_done = true;
                }
                out.push(format!("# {n}"));
                out.extend(plan.lines());
            }
        }
        Steering::Xdp => {
            out.push(
                "# class -> ring (AF_XDP socket on queue 0 of each interface, XDP classifier)"
                    .into(),
            );
            for (c, name) in classes.iter().enumerate() {
                let ring = r.layout.class_to_ring.get(c).copied().unwrap_or(c);
                let rn = r
                    .layout
                    .rings
                    .get(ring)
                    .map(|x| x.name.as_str())
                    .unwrap_or("?");
                out.push(format!("#   {name} -> ring {ring} ({rn})"));
            }
            for (i, spec) in r.cfg.rules.iter().enumerate() {
                out.push(format!("# rule {i}: {spec}"));
            }
        }
    }
    Ok(out)
}

/// Placeholder interface indexes of `--dry-run` for interfaces absent from the namespace.
const DRY_RUN_IFINDEX_BASE: u32 = 1 << 30;

/// The kernel route mirror thread; `Drop` stops and joins it.
struct Mirror {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Mirror {
    fn start(
        spec: MirrorSpec,
        fwd: Arc<RwLock<Forwarder>>,
        period: Duration,
        cpus: BTreeSet<usize>,
    ) -> Result<Mirror> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("llr-mirror".into())
            .spawn(move || {
                if let Err(e) = llr_ops::cpus::set_affinity(&cpus) {
                    tracing::warn!("route mirror: helper cores: {e}");
                }
                kernel::refresh_loop(spec, fwd, period, s)
            })
            .context("spawn the route mirror")?;
        Ok(Mirror {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The running configuration as the control plane sees it (changed only after the worker
/// confirmed a change).
struct State {
    cfg: RouterConfig,
    ifindexes: Vec<u32>,
    /// (id, rule) in first-match order.
    rules: Vec<(u64, RuleSpec)>,
    next_rule: u64,
    images: Vec<[u8; 64]>,
    default_class: u32,
    spec: MirrorSpec,
    mirror: Option<Mirror>,
}

/// The router's control target (`llr_ops::ctl::ControlTarget`).
pub struct RouterCtl {
    config_path: PathBuf,
    started: Instant,
    link: Arc<WorkerLink>,
    fwd: Arc<RwLock<Forwarder>>,
    flags: u32,
    /// Where helper threads run (the route mirror sets it itself: it is restarted from
    /// connection threads and from the worker's thread before the worker pins itself).
    helper_cpus: BTreeSet<usize>,
    /// Serialises changes: one at a time, validated against the running state.
    state: Mutex<State>,
    /// Where metrics are served (for `status`).
    pub metrics_addr: Mutex<Option<std::net::SocketAddr>>,
}

/// The checked size of a table dump.
fn dump_limit(limit: Option<usize>) -> Result<usize, CtlError> {
    match limit.unwrap_or(DEFAULT_DUMP_LIMIT) {
        0 => Err(err("limit", "must be at least 1")),
        n if n > MAX_DUMP_LIMIT => Err(err(
            "limit",
            format!("at most {MAX_DUMP_LIMIT} (a reply must fit in one control message)"),
        )),
        n => Ok(n),
    }
}

/// A rule in the one-line syntax with the configuration's field names (`dst_port`, not
/// `dport`), which the rule parser also reads.
pub fn rule_text(r: &RuleSpec) -> String {
    r.to_string()
        .split(' ')
        .map(|w| match w.split_once('=') {
            Some(("dport", v)) => format!("dst_port={v}"),
            Some(("sport", v)) => format!("src_port={v}"),
            Some(("ipver", v)) => format!("ip_version={v}"),
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The name of `ifindex` among `names`, or `ifindex N` for one the router does not serve.
fn name_of(names: &[(u32, String)], ifindex: u32) -> String {
    names
        .iter()
        .find(|(i, _)| *i == ifindex)
        .map_or_else(|| format!("ifindex {ifindex}"), |(_, n)| n.clone())
}

/// The router's `(ifindex, name)` pairs.
fn interface_names(st: &State) -> Vec<(u32, String)> {
    st.ifindexes
        .iter()
        .copied()
        .zip(st.cfg.interfaces.iter().cloned())
        .collect()
}

fn err(field: impl Into<String>, reason: impl Into<String>) -> CtlError {
    CtlError::new(field, reason)
}

/// The field and reason of a configuration error (without the file it came from).
fn split_err(e: &ConfigError) -> CtlError {
    let s = match e.root() {
        ConfigError::Field { field, reason } => return err(field.as_str(), reason.as_str()),
        other => other.to_string(),
    };
    let cut = s.as_str();
    match cut.split_once(": ") {
        Some((f, r)) if !f.contains(' ') || f.starts_with("TOML") => err(f, r),
        _ => err("config", cut),
    }
}

/// `1 ring`, `2 rings`.
fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

impl RouterCtl {
    fn new(
        config_path: PathBuf,
        r: &Resolved,
        spec: MirrorSpec,
        fwd: Arc<RwLock<Forwarder>>,
        link: Arc<WorkerLink>,
        flags: u32,
        helper_cpus: BTreeSet<usize>,
    ) -> RouterCtl {
        let rules: Vec<(u64, RuleSpec)> = r
            .cfg
            .rules
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u64 + 1, s.clone()))
            .collect();
        RouterCtl {
            config_path,
            started: Instant::now(),
            link,
            fwd,
            flags,
            helper_cpus,
            state: Mutex::new(State {
                cfg: r.cfg.clone(),
                ifindexes: r.ifindexes.clone(),
                next_rule: rules.len() as u64 + 1,
                rules,
                images: r.rule_images.clone(),
                default_class: r.default_class,
                spec,
                mirror: None,
            }),
            metrics_addr: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the kernel route mirror.
    fn start_mirror(&self) -> Result<()> {
        let mut st = self.lock();
        let period = Duration::from_millis(st.cfg.route_refresh_ms);
        st.mirror = Some(Mirror::start(
            st.spec.clone(),
            self.fwd.clone(),
            period,
            self.helper_cpus.clone(),
        )?);
        Ok(())
    }

    /// Stops the route mirror (also done on drop).
    fn shutdown(&self) {
        drop(self.lock().mirror.take());
    }

    fn apply(&self, change: Change) -> Result<(), CtlError> {
        self.link
            .apply(change, APPLY_TIMEOUT)
            .map_err(|e| err("worker", e))
    }

    /// Validates a scheduler configuration and applies its layout.
    fn apply_sched(&self, st: &mut State, cfg: RouterConfig) -> Result<(), CtlError> {
        let layout = sched_layout(&cfg)?;
        self.apply(Change::Sched(layout))?;
        st.cfg = cfg;
        Ok(())
    }

    /// The interfaces as the forwarder sees them, with their counters.
    fn interfaces(&self) -> Vec<InterfaceView> {
        let counters = self.metrics(Duration::from_millis(50)).interfaces;
        let names = interface_names(&self.lock());
        let fwd = self.fwd.read().unwrap_or_else(|e| e.into_inner());
        names
            .into_iter()
            .map(|(i, name)| {
                let f = fwd.interfaces.get(i);
                InterfaceView {
                    counters: counters
                        .iter()
                        .find(|c| c.ifindex == i)
                        .cloned()
                        .unwrap_or_default(),
                    name,
                    ifindex: i,
                    mtu: f.map_or(0, |f| f.mtu),
                    mac: f.map_or("-".into(), |f| format_mac(&f.mac)),
                    addrs: f.map_or(Vec::new(), |f| {
                        f.addrs
                            .iter()
                            .map(|a| format!("{}/{}", a.addr, a.len))
                            .collect()
                    }),
                }
            })
            .collect()
    }

    /// The first `limit` routes of the forwarder (IPv4 then IPv6, by address and length), and
    /// how many there are.
    fn fib(&self, limit: usize) -> (Vec<RouteView>, usize) {
        let names = interface_names(&self.lock());
        let fwd = self.fwd.read().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = fwd.routes.iter().collect();
        drop(fwd);
        all.sort_by_key(|(p, _)| (p.addr().is_ipv6(), p.addr(), p.len()));
        let total = all.len();
        let rows = all
            .into_iter()
            .take(limit)
            .map(|(p, nh)| RouteView {
                prefix: p.to_string(),
                via: nh.gateway.map(|g| g.to_string()),
                dev: name_of(&names, nh.ifindex),
                ifindex: nh.ifindex,
            })
            .collect();
        (rows, total)
    }

    /// The first `limit` neighbour entries (by interface, then address), and how many there are.
    fn neighbours(&self, limit: usize) -> (Vec<NeighbourView>, usize) {
        let names = interface_names(&self.lock());
        let fwd = self.fwd.read().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<_> = fwd.neighbors.iter().collect();
        drop(fwd);
        all.sort_by_key(|(i, a, _)| (*i, a.is_ipv6(), *a));
        let total = all.len();
        let rows = all
            .into_iter()
            .take(limit)
            .map(|(i, a, mac)| NeighbourView {
                ip: a.to_string(),
                mac: format_mac(&mac),
                dev: name_of(&names, i),
            })
            .collect();
        (rows, total)
    }

    /// Compiles `rules` against the running classes.
    fn compile_rules(
        &self,
        st: &State,
        rules: &[(u64, RuleSpec)],
    ) -> Result<Vec<[u8; 64]>, CtlError> {
        let names: Vec<String> = st.cfg.classes.iter().map(|c| c.name.clone()).collect();
        let mut out = Vec::new();
        for (id, s) in rules {
            out.push(
                s.resolve(&names, |n| llr_io::ebpf::ifindex(n).ok())
                    .map_err(|e| err(e.field, format!("rule {id}: {}", e.reason)))?,
            );
        }
        RuleSet::with_rules(out, st.default_class as usize)
            .to_bpf_map()
            .map_err(|e| err(e.field, e.reason))
    }

    fn set_rules(&self, st: &mut State, rules: Vec<(u64, RuleSpec)>) -> Result<(), CtlError> {
        let images = self.compile_rules(st, &rules)?;
        self.apply(Change::Rules {
            images: images.clone(),
            default_class: st.default_class,
            flags: self.flags,
        })?;
        st.rules = rules;
        st.images = images;
        Ok(())
    }

    /// Rebuilds the forwarder for `spec` (static routes override the kernel's) and swaps it in,
    /// restarting the mirror with the new overrides.
    fn set_routes(&self, st: &mut State, spec: MirrorSpec) -> Result<(), CtlError> {
        let mut f = kernel::build(&spec).map_err(|e| err("route", format!("{e:#}")))?;
        drop(st.mirror.take()); // the old mirror must not overwrite the new table
        {
            let mut w = self.fwd.write().unwrap_or_else(|e| e.into_inner());
            f.fragments = w.fragments;
            f.max_frame = w.max_frame;
            *w = f;
        }
        let period = Duration::from_millis(st.cfg.route_refresh_ms);
        st.mirror = Some(
            Mirror::start(
                spec.clone(),
                self.fwd.clone(),
                period,
                self.helper_cpus.clone(),
            )
            .map_err(|e| err("route", format!("{e:#}")))?,
        );
        st.spec = spec;
        Ok(())
    }

    fn status(&self) -> Value {
        let snap = self.link.latest();
        let st = self.lock();
        let classes: Vec<Value> = st
            .cfg
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let ring = snap.class_to_ring.get(i).copied();
                json!({
                    "name": c.name,
                    "budget": ring.and_then(|r| snap.ring_budgets.get(r).copied()),
                    "configured_budget": c.budget,
                    "ring": ring,
                })
            })
            .collect();
        let routes: Vec<Value> = st
            .cfg
            .routes
            .iter()
            .map(|r| json!({"prefix": r.prefix, "via": r.via, "dev": r.dev}))
            .collect();
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "config": self.config_path,
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "interfaces": st.cfg.interfaces,
            "strategy": snap.strategy.map(|s| s.name()).unwrap_or(st.cfg.strategy.as_str()),
            "device_budget": snap.device_budget,
            "classes": classes,
            "rings": snap.layout_rings.iter().zip(&snap.ring_budgets).map(|(n, b)| json!({"name": n, "budget": b})).collect::<Vec<_>>(),
            "wakeup": snap.wake.map(WakeMode::name),
            "spin_us": snap.spin_us,
            "workers": [{"worker": 0, "core": st.cfg.cores.first(), "busy_ratio": snap.busy_ratio}],
            "helper_cores": llr_ops::cpus::format_cpu_list(&self.helper_cpus),
            "rules": st.rules.len(),
            "static_routes": routes,
            "changes_applied": snap.changes,
            "timestamps": self.flags & FLAG_TIMESTAMP != 0,
            "metrics": self.metrics_addr.lock().unwrap_or_else(|e| e.into_inner()).map(|a| a.to_string()),
        })
    }

    /// A metrics snapshot (asks the worker for fresh counters, waiting up to `wait`).
    pub fn metrics(&self, wait: Duration) -> MetricsSnapshot {
        let snap = self.link.fresh(wait);
        let (names, core, ifs) = {
            let st = self.lock();
            (
                st.cfg
                    .classes
                    .iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>(),
                st.cfg.cores.first().copied().unwrap_or(0) as u32,
                interface_names(&st),
            )
        };
        to_metrics(&snap, &names, core, &ifs)
    }
}

/// The layout of `cfg`'s scheduler settings, or the field and reason it is rejected for.
fn sched_layout(cfg: &RouterConfig) -> Result<Layout, CtlError> {
    let sc = cfg.sched().map_err(|e| split_err(&e))?;
    sc.layout().map_err(|e| err(e.field, e.reason))
}

/// Converts a worker snapshot into the metrics model. `interfaces` are the router's
/// `(ifindex, name)` pairs; worker pass and drop reasons are taken as the worker names them.
pub fn to_metrics(
    snap: &WorkerSnapshot,
    class_names: &[String],
    core: u32,
    interfaces: &[(u32, String)],
) -> MetricsSnapshot {
    let rr = snap.strategy == Some(StrategyKind::Rr);
    let rings = snap
        .rings
        .iter()
        .enumerate()
        .map(|(k, c)| RingMetrics {
            worker: 0,
            device: if rr { k as u32 } else { 0 },
            ring: k as u32,
            class: snap
                .layout_rings
                .get(k)
                .or(class_names.get(k))
                .cloned()
                .unwrap_or_else(|| format!("ring{k}")),
            packets: c.served + c.backlog,
            bytes: c.bytes,
            drops: c.drops,
            served: c.served,
            budget_hits: c.budget_hits,
            latency: Histogram {
                bounds: LATENCY_BOUNDS.to_vec(),
                counts: c.latency_counts.clone(),
                sum: c.latency_sum,
            },
        })
        .collect();
    let devices = snap
        .devices
        .iter()
        .enumerate()
        .map(|(d, c)| DeviceMetrics {
            worker: 0,
            device: d as u32,
            wakeups: c.wakeups,
            rearms: c.rearms,
            budget_exhaustions: c.budget_exhaustions,
            passes: c.passes,
        })
        .collect();
    let mut drops: Vec<(String, u64)> = snap.drop.clone();
    // ICMP and the other slow-path events: `icmp_sent_<type>` / `icmp_ratelimited_<type>`
    // become one series per type, the rest stay events.
    let mut icmp: Vec<(String, u64, u64)> = Vec::new();
    let mut slow_path: Vec<(String, u64)> = Vec::new();
    for (n, c) in &snap.events {
        if let Some(t) = n.strip_prefix("icmp_sent_") {
            match icmp.iter_mut().find(|e| e.0 == t) {
                Some(e) => e.1 = *c,
                None => icmp.push((t.to_string(), *c, 0)),
            }
        } else if let Some(t) = n.strip_prefix("icmp_ratelimited_") {
            match icmp.iter_mut().find(|e| e.0 == t) {
                Some(e) => e.2 = *c,
                None => icmp.push((t.to_string(), 0, *c)),
            }
        } else {
            slow_path.push((n.clone(), *c));
        }
    }
    let mut classes: Vec<(String, u64)> = class_names.iter().map(|n| (n.clone(), 0)).collect();
    let mut ifs: Vec<InterfaceMetrics> = interfaces
        .iter()
        .map(|(i, n)| InterfaceMetrics {
            interface: n.clone(),
            ifindex: *i,
            ..Default::default()
        })
        .collect();
    // What the classifier hands to the kernel stack is delivered there, not dropped; malformed
    // frames go on to the worker, which drops (and counts) them, so they are errors here only.
    const TO_KERNEL: [&str; 4] = ["non_ip", "multicast", "local", "no_socket"];
    let mut kernel_pass = [0u64; TO_KERNEL.len()];
    for (i, s) in &snap.classifier {
        for (k, slot) in classes.iter_mut().enumerate() {
            slot.1 += s.per_class.get(k).copied().unwrap_or(0);
        }
        let passed = [s.pass_non_ip, s.pass_multicast, s.pass_local, s.no_socket];
        for (t, v) in kernel_pass.iter_mut().zip(passed) {
            *t += v;
        }
        let x = interface_slot(&mut ifs, *i, interfaces);
        x.kernel_pass_packets = passed.iter().sum();
        x.errors += s.malformed;
    }
    for p in &snap.ports {
        let x = interface_slot(&mut ifs, p.ifindex, interfaces);
        x.rx_packets = p.rx;
        x.tx_packets = p.tx;
        x.dropped_packets += p.egress_drops + p.kernel_rx_dropped + p.kernel_rx_ring_full;
        x.errors += p.kernel_tx_invalid + p.no_port;
    }
    let mut kernel_pass: Vec<(String, u64)> = if snap.classifier.is_empty() {
        classes.clear();
        Vec::new()
    } else {
        TO_KERNEL
            .iter()
            .zip(kernel_pass)
            .map(|(n, v)| (n.to_string(), v))
            .collect()
    };
    // What the forwarder hands back for the kernel goes through the punt TAP (`punted` /
    // `punt_dropped` in the slow-path events say whether it got there).
    kernel_pass.extend(snap.pass.iter().map(|(n, c)| (format!("worker_{n}"), *c)));
    drops.push((
        "egress_queue_full".into(),
        snap.ports.iter().map(|p| p.egress_drops).sum(),
    ));
    drops.push((
        "kernel_rx_dropped".into(),
        snap.rings.iter().map(|r| r.kernel_rx_dropped).sum(),
    ));
    MetricsSnapshot {
        strategy: snap
            .strategy
            .map(|s| s.name().to_string())
            .unwrap_or_default(),
        strategies: StrategyKind::ALL
            .iter()
            .map(|s| s.name().to_string())
            .collect(),
        rings,
        devices,
        workers: vec![WorkerMetrics {
            worker: 0,
            core,
            poll_rounds: snap.poll_rounds,
            busy_ratio: snap.busy_ratio,
            busy_seconds: snap.busy_s,
        }],
        drops,
        kernel_pass,
        icmp,
        slow_path,
        classes,
        interfaces: ifs,
        process: ProcessMetrics::read(),
    }
}

/// The entry of `ifindex` in `ifs`, added (named from `names`) when missing.
fn interface_slot<'a>(
    ifs: &'a mut Vec<InterfaceMetrics>,
    ifindex: u32,
    names: &[(u32, String)],
) -> &'a mut InterfaceMetrics {
    let k = match ifs.iter().position(|x| x.ifindex == ifindex) {
        Some(k) => k,
        None => {
            ifs.push(InterfaceMetrics {
                interface: name_of(names, ifindex),
                ifindex,
                ..Default::default()
            });
            ifs.len() - 1
        }
    };
    &mut ifs[k]
}

impl ControlTarget for RouterCtl {
    fn handle(&self, cmd: Command) -> Result<Value, CtlError> {
        match cmd {
            Command::Status {} => Ok(self.status()),
            Command::Counters {} => serde_json::to_value(self.metrics(Duration::from_millis(50)))
                .map_err(|e| err("counters", e.to_string())),
            Command::Interfaces {} => Ok(json!({ "interfaces": self.interfaces() })),
            Command::Fib { limit } => {
                let limit = dump_limit(limit)?;
                let (routes, total) = self.fib(limit);
                Ok(json!({ "routes": routes, "total": total }))
            }
            Command::Neighbours { limit } => {
                let limit = dump_limit(limit)?;
                let (n, total) = self.neighbours(limit);
                Ok(json!({ "neighbours": n, "total": total }))
            }
            Command::RulesList {} => {
                let st = self.lock();
                let rules: Vec<RuleEntry> = st
                    .rules
                    .iter()
                    .map(|(id, r)| RuleEntry {
                        id: *id,
                        rule: rule_text(r),
                    })
                    .collect();
                Ok(json!({ "rules": rules }))
            }
            Command::RulesAdd { rule } => {
                let spec: RuleSpec = rule
                    .parse()
                    .map_err(|e: llr_core::classify::RuleError| err(e.field, e.reason))?;
                let mut st = self.lock();
                let id = st.next_rule;
                let text = rule_text(&spec);
                let mut rules = st.rules.clone();
                rules.push((id, spec));
                self.set_rules(&mut st, rules)?;
                st.next_rule += 1;
                Ok(json!({ "id": id, "rule": text }))
            }
            Command::RulesRemove { id } => {
                let mut st = self.lock();
                let Some(pos) = st.rules.iter().position(|(i, _)| *i == id) else {
                    return Err(err("id", format!("no rule with id {id}")));
                };
                let mut rules = st.rules.clone();
                let (_, gone) = rules.remove(pos);
                self.set_rules(&mut st, rules)?;
                Ok(json!({ "removed": { "id": id, "rule": rule_text(&gone) } }))
            }
            Command::BudgetSet { class, budget } => {
                let mut st = self.lock();
                let Some(i) = st.cfg.classes.iter().position(|c| c.name == class) else {
                    let known: Vec<&str> = st.cfg.classes.iter().map(|c| c.name.as_str()).collect();
                    return Err(err(
                        "class",
                        format!("unknown class `{class}` (known: {})", known.join(", ")),
                    ));
                };
                if budget == 0 {
                    return Err(err("budget", "must be at least 1"));
                }
                let snap = self.link.latest();
                let previous =
                    (snap.class_to_ring.get(i)).and_then(|&r| snap.ring_budgets.get(r).copied());
                let mut cfg = st.cfg.clone();
                cfg.classes[i].budget = Some(budget);
                self.apply_sched(&mut st, cfg)?;
                Ok(json!({ "class": class, "budget": budget, "previous": previous }))
            }
            Command::DeviceBudgetSet { budget } => {
                if budget == 0 {
                    return Err(err("budget", "must be at least 1"));
                }
                let mut st = self.lock();
                let previous = st.cfg.device_budget;
                let mut cfg = st.cfg.clone();
                cfg.device_budget = budget;
                self.apply_sched(&mut st, cfg)?;
                Ok(json!({ "device_budget": budget, "previous": previous }))
            }
            Command::StrategySet { strategy } => {
                let mut st = self.lock();
                let previous = self
                    .link
                    .latest()
                    .strategy
                    .map_or(st.cfg.strategy.clone(), |s| s.name().to_string());
                let mut cfg = st.cfg.clone();
                cfg.strategy = strategy.name().to_string();
                self.apply_sched(&mut st, cfg)?;
                Ok(json!({ "strategy": strategy.name(), "previous": previous }))
            }
            Command::WakeupSet { mode, spin_us } => {
                if spin_us.is_some() && mode != WakeMode::Adaptive {
                    return Err(err("spin_us", "only the adaptive mode spins"));
                }
                if spin_us.is_some_and(|s| s > 1_000_000) {
                    return Err(err("spin_us", "at most 1000000 (1 s)"));
                }
                let mut st = self.lock();
                let spin = spin_us.unwrap_or(st.cfg.spin_us);
                let previous = json!({"wakeup": st.cfg.wake.name(), "spin_us": st.cfg.spin_us});
                self.apply(Change::Wake {
                    wake: mode,
                    spin_us: spin,
                })?;
                st.cfg.wake = mode;
                st.cfg.spin_us = spin;
                Ok(json!({ "wakeup": st.cfg.wake.name(), "spin_us": spin, "previous": previous }))
            }
            Command::RouteAdd { prefix, via, dev } => {
                let p = kernel::parse_prefix(&prefix).ok_or_else(|| {
                    err("prefix", format!("`{prefix}` is not an addr/len prefix"))
                })?;
                let gw: Option<std::net::IpAddr> = match &via {
                    Some(v) => Some(
                        v.parse()
                            .map_err(|_| err("via", format!("`{v}` is not an IP address")))?,
                    ),
                    None => None,
                };
                if let Some(g) = gw {
                    if g.is_ipv4() != p.addr().is_ipv4() {
                        return Err(err(
                            "via",
                            "gateway and prefix are of different IP versions",
                        ));
                    }
                }
                let ifindex = llr_io::ebpf::ifindex(&dev)
                    .map_err(|_| err("dev", format!("no interface named `{dev}`")))?;
                let mut st = self.lock();
                if !st.ifindexes.contains(&ifindex) {
                    return Err(err(
                        "dev",
                        format!("`{dev}` is not one of the router's interfaces"),
                    ));
                }
                let mut spec = st.spec.clone();
                spec.routes.retain(|r| r.prefix != p);
                spec.routes.push(StaticRoute {
                    prefix: p,
                    ifindex,
                    gateway: gw,
                });
                self.set_routes(&mut st, spec)?;
                let replaced = st
                    .cfg
                    .routes
                    .iter()
                    .any(|r| kernel::parse_prefix(&r.prefix) == Some(p));
                st.cfg
                    .routes
                    .retain(|r| kernel::parse_prefix(&r.prefix) != Some(p));
                st.cfg.routes.push(llr_router::config::RouteConfig {
                    prefix: prefix.clone(),
                    dev: dev.clone(),
                    via: gw,
                });
                Ok(
                    json!({ "route": {"prefix": prefix, "via": gw, "dev": dev}, "replaced": replaced }),
                )
            }
            Command::RouteRemove { prefix } => {
                let p = kernel::parse_prefix(&prefix).ok_or_else(|| {
                    err("prefix", format!("`{prefix}` is not an addr/len prefix"))
                })?;
                let mut st = self.lock();
                if !st.spec.routes.iter().any(|r| r.prefix == p) {
                    return Err(err(
                        "prefix",
                        format!("no static route for {prefix} (kernel routes are changed with `ip route`)"),
                    ));
                }
                let mut spec = st.spec.clone();
                spec.routes.retain(|r| r.prefix != p);
                self.set_routes(&mut st, spec)?;
                st.cfg
                    .routes
                    .retain(|r| kernel::parse_prefix(&r.prefix) != Some(p));
                Ok(json!({ "removed": prefix }))
            }
            Command::Reload {} => self.reload(),
        }
    }
}

impl RouterCtl {
    /// Re-reads the configuration file; applies it all or nothing.
    fn reload(&self) -> Result<Value, CtlError> {
        let new = RouterConfig::load(&self.config_path).map_err(|e| split_err(&e))?;
        let r = new
            .resolve(|n| llr_io::ebpf::ifindex(n).ok())
            .map_err(|e| split_err(&e))?;
        let mut st = self.lock();
        let old = &st.cfg;
        let restart = |f: &str| err(f, "changing it needs a restart of the router");
        if r.cfg.interfaces != old.interfaces {
            return Err(restart("interfaces"));
        }
        if r.cfg.cores != old.cores {
            return Err(restart("cores"));
        }
        if r.cfg.helper_cores != old.helper_cores {
            return Err(restart("helper-cores"));
        }
        let names = |c: &RouterConfig| c.classes.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        if names(&r.cfg) != names(old) {
            return Err(restart("classes"));
        }
        if r.cfg.rings != old.rings {
            return Err(restart("rings"));
        }
        if r.cfg.attach != old.attach {
            return Err(restart("attach"));
        }
        if r.cfg.steering != old.steering {
            return Err(restart("steering"));
        }
        if r.cfg.timestamp_meta != old.timestamp_meta {
            return Err(restart("timestamp-meta"));
        }
        if r.cfg.control != old.control {
            return Err(restart("control"));
        }
        if r.cfg.metrics != old.metrics {
            return Err(restart("metrics"));
        }
        if r.cfg.kernel_routes != old.kernel_routes {
            return Err(restart("kernel-routes"));
        }
        if r.cfg.route_refresh_ms != old.route_refresh_ms {
            return Err(restart("route-refresh-ms"));
        }
        if r.cfg.batch != old.batch {
            return Err(restart("batch"));
        }
        if r.cfg.tx_batch != old.tx_batch {
            return Err(restart("tx-batch"));
        }
        if r.cfg.cost_ns != old.cost_ns {
            return Err(restart("cost-ns"));
        }
        if r.cfg.acl_rules != old.acl_rules {
            return Err(restart("acl-rules"));
        }
        // Routes: build the new table first, so a bad one rejects the whole reload.
        let spec = MirrorSpec {
            ifindexes: st.spec.ifindexes.clone(),
            kernel_routes: r.cfg.kernel_routes,
            routes: r.routes.clone(),
            neighbors: r.neighbors.clone(),
        };
        let routes_changed = spec.routes != st.spec.routes || spec.neighbors != st.spec.neighbors;
        if routes_changed {
            kernel::build(&spec).map_err(|e| err("routes", format!("{e:#}")))?;
        }
        let mut batch = vec![Change::Sched(r.layout.clone())];
        if r.rule_images != st.images {
            batch.push(Change::Rules {
                images: r.rule_images.clone(),
                default_class: r.default_class,
                flags: self.flags,
            });
        }
        batch.push(Change::Wake {
            wake: r.cfg.wake,
            spin_us: r.cfg.spin_us,
        });
        self.apply(Change::Batch(batch))?;
        if routes_changed {
            self.set_routes(&mut st, spec)?;
        }
        let rules: Vec<(u64, RuleSpec)> = r
            .cfg
            .rules
            .iter()
            .enumerate()
            .map(|(i, s)| (st.next_rule + i as u64, s.clone()))
            .collect();
        st.next_rule += rules.len() as u64;
        st.rules = rules;
        st.images = r.rule_images;
        st.default_class = r.default_class;
        st.cfg = r.cfg;
        Ok(json!({"reloaded": self.config_path}))
    }
}

/// The control socket path of a config file (for `llrouter ctl --config`).
pub fn socket_of(config: &Path) -> Result<PathBuf> {
    Ok(RouterConfig::load(config)?.control.socket)
}

#[cfg(test)]
mod tests {
    use super::*;
    use llr_io::ebpf::ClassifierStats;
    use llr_io::router::ctl::RingCounters;
    use llr_io::xsk::PortStats;

    #[test]
    fn metrics_keep_kernel_passes_apart_and_name_interfaces() {
        let mut rings = vec![RingCounters::default(), RingCounters::default()];
        rings[0].served = 90;
        rings[0].backlog = 10;
        rings[1].kernel_rx_dropped = 2;
        let snap = WorkerSnapshot {
            strategy: Some(StrategyKind::LlWfq),
            layout_rings: vec!["rt".into(), "be".into()],
            rings,
            busy_s: 1.5,
            // reason names as the worker gives them, whatever they are
            pass: vec![("some_pass".into(), 4)],
            drop: vec![("some_drop".into(), 3), ("another".into(), 0)],
            ports: vec![
                PortStats {
                    ifindex: 7,
                    rx: 100,
                    egress_drops: 1,
                    ..Default::default()
                },
                PortStats {
                    ifindex: 9,
                    tx: 95,
                    kernel_tx_invalid: 2,
                    ..Default::default()
                },
            ],
            classifier: vec![(
                7,
                ClassifierStats {
                    per_class: vec![60, 40],
                    pass_multicast: 5,
                    no_socket: 1,
                    malformed: 3,
                    ..Default::default()
                },
            )],
            ..Default::default()
        };
        let names = vec!["rt".to_string(), "be".to_string()];
        let ifs = vec![(7, "eth0".to_string()), (9, "eth1".to_string())];
        let m = to_metrics(&snap, &names, 1, &ifs);
        let get = |l: &[(String, u64)], k: &str| l.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        assert_eq!(get(&m.drops, "some_drop"), Some(3));
        assert_eq!(get(&m.drops, "another"), Some(0));
        assert_eq!(
            get(&m.drops, "pass_some_pass"),
            None,
            "the worker's passes are not drops"
        );
        assert_eq!(get(&m.kernel_pass, "worker_some_pass"), Some(4));
        assert_eq!(get(&m.drops, "egress_queue_full"), Some(1));
        assert_eq!(get(&m.drops, "kernel_rx_dropped"), Some(2));
        assert!(
            m.drops.iter().all(|(n, _)| !n.starts_with("xdp_")),
            "{:?}",
            m.drops
        );
        assert_eq!(get(&m.kernel_pass, "multicast"), Some(5));
        assert_eq!(get(&m.kernel_pass, "no_socket"), Some(1));
        assert_eq!(m.classes, vec![("rt".into(), 60), ("be".into(), 40)]);
        let eth0 = &m.interfaces[0];
        assert_eq!(
            (
                eth0.interface.as_str(),
                eth0.rx_packets,
                eth0.kernel_pass_packets
            ),
            ("eth0", 100, 6)
        );
        assert_eq!((eth0.dropped_packets, eth0.errors), (1, 3));
        let eth1 = &m.interfaces[1];
        assert_eq!(
            (eth1.interface.as_str(), eth1.tx_packets, eth1.errors),
            ("eth1", 95, 2)
        );
        assert_eq!(m.rings[0].packets, 100);
        assert_eq!(m.workers[0].busy_seconds, 1.5);
        assert_eq!(m.strategy, "ll-wfq");
        assert!(m.strategies.contains(&"sq".to_string()));
    }

    #[test]
    fn rules_print_with_the_config_field_names() {
        let r: RuleSpec = "class=rt proto=udp sport=1 dport=5000-5010 ipver=4"
            .parse()
            .unwrap();
        let t = rule_text(&r);
        assert_eq!(
            t,
            "class=rt ip_version=4 proto=udp src_port=1 dst_port=5000-5010"
        );
        // and the parser reads it back
        assert_eq!(t.parse::<RuleSpec>().unwrap(), r);
    }

    #[test]
    fn dumps_are_capped_to_fit_a_message() {
        assert_eq!(dump_limit(None).unwrap(), DEFAULT_DUMP_LIMIT);
        assert_eq!(dump_limit(Some(7)).unwrap(), 7);
        assert_eq!(dump_limit(Some(0)).unwrap_err().field, "limit");
        assert_eq!(
            dump_limit(Some(MAX_DUMP_LIMIT + 1)).unwrap_err().field,
            "limit"
        );
        // a full dump of long IPv6 routes still fits in one reply line
        let row = RouteView {
            prefix: "2001:db8:1234:5678:9abc:def0:1234:0/112".into(),
            via: Some("fe80::1234:5678:9abc:def0".into()),
            dev: "a-long-ifname-1".into(),
            ifindex: 4_000_000_000,
        };
        let v = json!({"routes": vec![row; MAX_DUMP_LIMIT], "total": MAX_DUMP_LIMIT});
        let reply = llr_ops::ctl::Reply::ok(json!(u64::MAX), v);
        assert!(serde_json::to_vec(&reply).unwrap().len() < llr_ops::ctl::MAX_MESSAGE);
    }

    #[test]
    fn banner_words() {
        assert_eq!(plural(1, "ring"), "1 ring");
        assert_eq!(plural(2, "ring"), "2 rings");
        assert_eq!(WakeMode::Interrupt.name(), "interrupt");
    }
}
