//! Starting and stopping the router: [`Router::start`] → [`Running`] → [`Running::stop`].

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::worker::ctl::{WorkerLink, WorkerSnapshot};
use crate::worker::{self, WorkerCtl, WorkerOptions, WorkerStats};
use llr_core::fwd::Forwarder;
use llr_io::ebpf::{Classifier, ClassifierStats, FLAG_TIMESTAMP};
use llr_io::kernel::{self, MirrorSpec};
use llr_io::xsk::{Device, PortSpec};
use llr_ops::ctl::CtlServer;
use llr_ops::metrics::{MetricsServer, MetricsSnapshot};

use crate::config::{Resolved, RouterConfig, Steering};
use crate::control::RouterCtl;
use crate::error::{RouterError, Step};
use crate::plan::{check_steering, plural};

/// What `llrouter run` takes from its command line rather than from the configuration.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The file the configuration came from: `reload` re-reads it. `None` for a configuration
    /// built in code (`reload` then says there is no file).
    pub config_path: Option<PathBuf>,
    /// Stop the worker after this long (`None`: until [`Running::stop`]).
    pub duration: Option<Duration>,
    /// Overrides the configuration's `steering`.
    pub steering: Option<Steering>,
}

/// What a run counted.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub worker: WorkerStats,
    /// Per interface (name, classifier counters).
    pub classifier: Vec<(String, ClassifierStats)>,
    pub class_names: Vec<String>,
    /// The router's `(ifindex, name)` pairs.
    pub interfaces: Vec<(u32, String)>,
}

/// The router: see [`Router::start`].
pub struct Router;

/// A started router. Dropping it stops it too (without the report).
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<RunReport, RouterError>>>,
    ctl: Arc<RouterCtl>,
    link: Arc<WorkerLink>,
    socket: PathBuf,
    metrics_addr: Option<SocketAddr>,
    interfaces: Vec<(u32, String)>,
    summary: String,
}

/// What the worker thread hands back once everything is set up.
struct Started {
    ctl: Arc<RouterCtl>,
    link: Arc<WorkerLink>,
    metrics_addr: Option<SocketAddr>,
    summary: String,
}

/// Everything the worker loop runs with; dropping it releases all of it.
struct Plant {
    r: Resolved,
    dev: Device,
    fwd: Arc<RwLock<Forwarder>>,
    link: Arc<WorkerLink>,
    ctl: Arc<RouterCtl>,
    ctl_server: CtlServer,
    metrics_server: Option<MetricsServer>,
    flags: u32,
    summary: String,
}

impl Router {
    /// Starts the router in the calling thread's network namespace: checks `cfg` against this
    /// host's interfaces, then sets up and runs the worker on its own thread (pinned to
    /// `cores[0]` if given; helper threads run on `helper-cores`). Returns once the control
    /// socket is bound, the classifiers are attached and the sockets are open; see
    /// [`Running::wait_ready`] for the worker loop. Installs no signal handlers.
    pub fn start(cfg: RouterConfig, opts: StartOptions) -> Result<Running, RouterError> {
        let steering = opts.steering.unwrap_or(cfg.steering);
        let r = cfg.resolve(|n| llr_io::ebpf::ifindex(n).ok())?;
        check_steering(&r, steering)?;
        let allowed = llr_ops::cpus::allowed().step("read the CPU affinity")?;
        let helpers =
            llr_ops::cpus::helper_cpus(&allowed, &r.cfg.cores, r.cfg.helper_cores.as_deref());
        let socket = r.cfg.control.socket.clone();
        let interfaces: Vec<(u32, String)> = (r.ifindexes.iter().copied())
            .zip(r.cfg.interfaces.iter().cloned())
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = sync_channel(1);
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("llr-worker".into())
            .spawn(move || worker_thread(r, opts, helpers, s, tx))
            .step("spawn the worker thread")?;
        match rx.recv() {
            Ok(Ok(st)) => Ok(Running {
                stop,
                thread: Some(thread),
                ctl: st.ctl,
                link: st.link,
                socket,
                metrics_addr: st.metrics_addr,
                interfaces,
                summary: st.summary,
            }),
            // The thread has failed and returns its error.
            Ok(Err(())) | Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                Ok(Ok(_)) => RouterError::Setup("the worker stopped during start-up".into()),
                Err(_) => RouterError::WorkerPanicked,
            }),
        }
    }
}

impl Running {
    /// Whether the worker loop runs (it has published its first counters).
    pub fn ready(&self) -> bool {
        self.link.latest().seq > 0
    }

    /// Waits up to `timeout` for [`ready`](Self::ready); false if it did not get there (or the
    /// worker stopped).
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        while !self.ready() {
            if self.is_finished() || t0.elapsed() >= timeout {
                return self.ready();
            }
            let left = timeout.saturating_sub(t0.elapsed());
            self.link.fresh(left.min(Duration::from_millis(50)));
        }
        true
    }

    /// Whether the worker has stopped on its own (`duration` elapsed).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Fresh counters of the worker (waits up to 50 ms for them).
    pub fn snapshot(&self) -> Arc<WorkerSnapshot> {
        self.link.fresh(Duration::from_millis(50))
    }

    /// Fresh counters in the metrics model (as `/metrics` and `ctl counters` serve them).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.ctl.metrics(Duration::from_millis(50))
    }

    /// The control target: the commands of the control socket as methods (interface names
    /// are looked up in the calling thread's network namespace).
    pub fn control(&self) -> Arc<RouterCtl> {
        self.ctl.clone()
    }

    /// The control socket's path.
    pub fn control_socket(&self) -> &Path {
        &self.socket
    }

    /// Where metrics are served, if configured.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The router's `(ifindex, name)` pairs.
    pub fn interfaces(&self) -> &[(u32, String)] {
        &self.interfaces
    }

    /// One line for people: `routing between a, b (ll-wfq strategy, 2 rings, wake interrupt);
    /// control /run/llrouter/llrouter.sock`. Nothing should parse it: the accessors above say
    /// the same.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// Stops the worker, waits for it, closes the control socket and the metrics server,
    /// detaches the classifiers and returns the counters.
    pub fn stop(mut self) -> Result<RunReport, RouterError> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits for the worker to stop on its own (`duration`), then as [`stop`](Self::stop).
    pub fn wait(mut self) -> Result<RunReport, RouterError> {
        self.join()
    }

    fn join(&mut self) -> Result<RunReport, RouterError> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(RouterError::WorkerPanicked),
            None => Err(RouterError::Setup("the router was already stopped".into())),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The worker thread: sets up (reporting the outcome to `started`), runs the loop until
/// `stop` or the duration, and tears down.
fn worker_thread(
    r: Resolved,
    opts: StartOptions,
    helpers: BTreeSet<usize>,
    stop: Arc<AtomicBool>,
    started: SyncSender<Result<Started, ()>>,
) -> Result<RunReport, RouterError> {
    let mut plant = match set_up(r, opts.config_path, helpers) {
        Ok(p) => p,
        Err(e) => {
            let _ = started.send(Err(()));
            return Err(e);
        }
    };
    let wopts = match worker_options(&plant.r, opts.duration) {
        Ok(o) => o,
        Err(e) => {
            let _ = started.send(Err(()));
            return Err(e);
        }
    };
    let _ = started.send(Ok(Started {
        ctl: plant.ctl.clone(),
        link: plant.link.clone(),
        metrics_addr: plant.metrics_server.as_ref().map(|m| m.local_addr()),
        summary: plant.summary.clone(),
    }));
    let wctl = WorkerCtl {
        link: plant.link.clone(),
        rules: plant.r.rule_images.clone(),
        default_class: plant.r.default_class,
        flags: plant.flags,
    };
    let stats = worker::run_worker_ctl(
        &mut plant.dev,
        &plant.r.layout,
        &plant.fwd,
        &wopts,
        &stop,
        Some(wctl),
    );
    tear_down(plant, stats)
}

/// Control socket first (a second router on the same socket stops here, before touching XDP),
/// then metrics, then the classifiers and sockets, then the route mirror. Helper threads are
/// spawned while this thread runs on the helper cores, so they inherit them; it pins itself to
/// the worker's core before it opens the sockets.
fn set_up(
    r: Resolved,
    config_path: Option<PathBuf>,
    helpers: BTreeSet<usize>,
) -> Result<Plant, RouterError> {
    llr_ops::cpus::set_affinity(&helpers).step(format_args!(
        "helper-cores: run on {}",
        llr_ops::cpus::format_cpu_list(&helpers)
    ))?;
    let spec = MirrorSpec {
        ifindexes: r.ifindexes.clone(),
        kernel_routes: r.cfg.kernel_routes,
        routes: r.routes.clone(),
        neighbors: r.neighbors.clone(),
    };
    let fwd0 = kernel::build(&spec).map_err(RouterError::setup)?;
    let local: Vec<IpAddr> = (fwd0.interfaces.iter())
        .flat_map(|i| i.addrs.iter().map(|a| a.addr))
        .collect();
    let fwd = Arc::new(RwLock::new(fwd0));
    let flags = if r.cfg.timestamp_meta {
        FLAG_TIMESTAMP
    } else {
        0
    };
    let link = WorkerLink::new().step("control: eventfd")?;
    let ctl = Arc::new(RouterCtl::new(
        config_path,
        &r,
        spec,
        fwd.clone(),
        link.clone(),
        flags,
        helpers,
    ));
    let ctl_server = bind_control(&r.cfg.control.socket, ctl.clone())?;
    let metrics_server = match &r.cfg.metrics {
        Some(m) => {
            let addr = m.addr()?;
            let c = ctl.clone();
            Some(
                MetricsServer::start(addr, move || c.metrics(Duration::from_millis(50)))
                    .step(format_args!("metrics.listen: bind {addr}"))?,
            )
        }
        None => None,
    };
    ctl.set_metrics_addr(metrics_server.as_ref().map(|m| m.local_addr()));
    if let Some(&core) = r.cfg.cores.first() {
        llr_ops::cpus::set_affinity(&[core].into())
            .step(format_args!("cores: pin to core {core}"))?;
    }
    let dev = open_device(&r, flags, &local)?;
    let summary = format!(
        "routing between {} ({} strategy, {}, wake {}); control {}{}",
        r.cfg.interfaces.join(", "),
        r.layout.strategy,
        plural(r.layout.rings.len(), "ring"),
        r.cfg.wake.name(),
        r.cfg.control.socket.display(),
        metrics_server
            .as_ref()
            .map(|m| format!(", metrics http://{}/metrics", m.local_addr()))
            .unwrap_or_default()
    );
    tracing::info!("{summary}");
    ctl.start_mirror()?;
    Ok(Plant {
        r,
        dev,
        fwd,
        link,
        ctl,
        ctl_server,
        metrics_server,
        flags,
        summary,
    })
}

/// Binds the control socket, creating its directory (mode 0700) if missing.
fn bind_control(path: &Path, ctl: Arc<RouterCtl>) -> Result<CtlServer, RouterError> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::create_dir_all(dir)
                .step(format_args!("control.socket: create {}", dir.display()))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    CtlServer::bind(path, ctl).step("control.socket")
}

/// One classifier per interface and one socket per class on each, whatever the strategy:
/// switching to `sq` and back keeps them all.
fn open_device(r: &Resolved, flags: u32, local: &[IpAddr]) -> Result<Device, RouterError> {
    let nsock = r.cfg.classes.len().max(r.layout.rings.len());
    let mut ports = Vec::new();
    for &ifindex in &r.ifindexes {
        let mut c = Classifier::load(r.default_class).map_err(RouterError::setup)?;
        c.set_rules(&r.rule_images, r.default_class, flags)
            .map_err(RouterError::setup)?;
        c.set_class_rings(&r.layout.class_to_ring)
            .map_err(RouterError::setup)?;
        c.set_local_addrs(local).map_err(RouterError::setup)?;
        ports.push(PortSpec {
            ifindex,
            classifier: c,
        });
    }
    Device::open(ports, 0, nsock, &r.cfg.rings, r.cfg.attach).map_err(RouterError::setup)
}

fn worker_options(r: &Resolved, duration: Option<Duration>) -> Result<WorkerOptions, RouterError> {
    Ok(WorkerOptions {
        wake: r.cfg.wake,
        spin_us: r.cfg.spin_us,
        batch: r.cfg.batch,
        tx_batch: r.cfg.tx_batch,
        cost_ns: r.cfg.cost_ns,
        acl_rules: r.cfg.acl_rules,
        max_duration: duration,
        icmp: r.cfg.icmp.limits()?,
        punt_device: (r.cfg.icmp.punt_rate > 0).then(|| "llr-punt".to_string()),
        punt_rate: r.cfg.icmp.punt_rate,
    })
}

/// Stops taking commands, then the rest; reads the classifiers' counters before detaching.
fn tear_down(plant: Plant, stats: WorkerStats) -> Result<RunReport, RouterError> {
    let Plant {
        r,
        dev,
        ctl,
        ctl_server,
        metrics_server,
        ..
    } = plant;
    drop(ctl_server);
    drop(metrics_server);
    ctl.shutdown();
    let mut cls = Vec::new();
    for (i, &ifindex) in r.ifindexes.iter().enumerate() {
        if let Some(c) = dev.classifier(ifindex) {
            cls.push((
                r.cfg.interfaces[i].clone(),
                c.stats().map_err(RouterError::setup)?,
            ));
        }
    }
    drop(dev); // detaches the classifiers, closes the sockets, frees the UMEM
    Ok(RunReport {
        worker: stats,
        classifier: cls,
        class_names: r.cfg.classes.iter().map(|c| c.name.clone()).collect(),
        interfaces: (r.ifindexes.iter().copied())
            .zip(r.cfg.interfaces.iter().cloned())
            .collect(),
    })
}
