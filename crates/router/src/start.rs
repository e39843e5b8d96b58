//! Starting and stopping the router: [`Router::start`] → [`Running`] → [`Running::stop`].

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::worker::ctl::{fresh_all, WorkerLink, WorkerSnapshot};
use crate::worker::{self, WorkerCtl, WorkerOptions, WorkerStats};
use llr_core::fwd::SharedForwarder;
use llr_io::ebpf::{ClassifierStats, XdpMode, FLAG_TIMESTAMP};
use llr_io::kernel::{self, MirrorSpec};
use llr_io::probe::KernelFeatures;
use llr_io::xsk::{Device, SocketSlot, XskOptions};
use llr_ops::ctl::{CtlServer, Reserved};
use llr_ops::metrics::{MetricsServer, MetricsSnapshot};
use llr_ops::views::{DatapathView, PortModeView};

use crate::config::{Resolved, RouterConfig, Steering};
use crate::control::{CtlParts, RouterCtl};
use crate::error::{IoStep, RouterError, Step};
use crate::steer::plural;
use crate::steer::{Classifiers, NtupleFilters, QueueLayout};

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
    /// All workers' counters added up.
    pub worker: WorkerStats,
    /// Each worker's own (index = worker).
    pub workers: Vec<WorkerStats>,
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
    links: Vec<Arc<WorkerLink>>,
    socket: PathBuf,
    metrics_addr: Option<SocketAddr>,
    interfaces: Vec<(u32, String)>,
    summary: String,
    helpers: BTreeSet<usize>,
}

/// What the router thread hands back once everything is set up.
struct Started {
    ctl: Arc<RouterCtl>,
    links: Vec<Arc<WorkerLink>>,
    metrics_addr: Option<SocketAddr>,
    summary: String,
}

/// Everything the workers run with; dropping it releases all of it (the classifiers detach
/// before the workers close their sockets, see [`supervise`]).
struct Plant {
    r: Resolved,
    queues: QueueLayout,
    kernel: KernelFeatures,
    fwd: Arc<SharedForwarder>,
    links: Vec<Arc<WorkerLink>>,
    ctl: Arc<RouterCtl>,
    ctl_server: CtlServer,
    metrics_server: Option<MetricsServer>,
    classifiers: Arc<Mutex<Classifiers>>,
    ntuple: Option<NtupleFilters>,
    flags: u32,
    /// The dump `fwd` was built from, for the mirror to start from (taken when it starts).
    seed: Option<kernel::Seed>,
    /// The host's firewall as last read.
    firewall: Arc<crate::firewall::FirewallState>,
    /// The interfaces served, by name and index.
    served: Vec<(String, u32)>,
}

impl Router {
    /// Starts the router in the calling thread's network namespace: checks `cfg` against this
    /// host's interfaces, then sets up and runs the worker on its own thread (pinned to
    /// `cores[0]` if given; helper threads run on `helper-cores`). Returns once the control
    /// socket is bound, the classifiers are attached and the sockets are open; see
    /// [`Running::wait_ready`] for the worker loop. Installs no signal handlers.
    pub fn start(cfg: RouterConfig, opts: StartOptions) -> Result<Running, RouterError> {
        llr_io::sys::map_large_allocations();
        let kernel = KernelFeatures::probe();
        kernel.check_minimum().map_err(RouterError::io)?;
        let missing = llr_io::probe::missing_capabilities();
        if !missing.is_empty() {
            return Err(RouterError::Privileges { missing });
        }
        let steering = opts.steering.unwrap_or(cfg.steering);
        let r = cfg.resolve(|n| llr_io::ebpf::ifindex(n).ok())?;
        if r.cfg.huge_pages {
            // For every table the process builds from now on: the advice is process-wide.
            llr_io::sys::back_tables_with_huge_pages();
        }
        let queues = crate::plan::check(&r, steering, kernel.multi_buffer)?;
        // Before any table or classifier is built: a second router on this socket is refused
        // without touching the kernel the first one runs on.
        let reserved = reserve_control(&r.cfg.control.socket)?;
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
        let helpers_kept = helpers.clone();
        let thread = std::thread::Builder::new()
            .name("llr-router".into())
            .spawn(move || supervise(r, reserved, queues, kernel, opts, helpers, s, tx))
            .step("spawn the router thread")?;
        match rx.recv() {
            Ok(Ok(st)) => Ok(Running {
                stop,
                thread: Some(thread),
                ctl: st.ctl,
                links: st.links,
                socket,
                metrics_addr: st.metrics_addr,
                interfaces,
                summary: st.summary,
                helpers: helpers_kept,
            }),
            // The thread has failed and returns its error.
            Ok(Err(())) | Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                Ok(Ok(_)) => RouterError::Setup("the workers stopped during start-up".into()),
                Err(_) => RouterError::WorkerPanicked,
            }),
        }
    }
}

impl Running {
    /// Whether every worker loop runs (each has published its first counters).
    pub fn ready(&self) -> bool {
        self.links.iter().all(|l| l.latest().seq > 0)
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
            fresh_all(&self.links, left.min(Duration::from_millis(50)));
        }
        true
    }

    /// The cores of the router's helper threads (`helper-cores`; by default every allowed core
    /// but the workers'). An application that embeds the router keeps its own threads there
    /// too: a thread that wakes on a worker's core preempts the worker.
    pub fn helper_cpus(&self) -> &BTreeSet<usize> {
        &self.helpers
    }

    /// Whether the worker has stopped on its own (`duration` elapsed).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Fresh counters of worker 0 (waits up to 50 ms for them); see
    /// [`snapshots`](Self::snapshots) for every worker.
    pub fn snapshot(&self) -> Arc<WorkerSnapshot> {
        self.links[0].fresh(Duration::from_millis(50))
    }

    /// Fresh counters of every worker (index = worker).
    pub fn snapshots(&self) -> Vec<Arc<WorkerSnapshot>> {
        fresh_all(&self.links, Duration::from_millis(50))
    }

    /// How many workers run.
    pub fn workers(&self) -> usize {
        self.links.len()
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

/// What a worker reports once its sockets are open: `(worker, sockets, (ifindex, queue,
/// zero-copy) per port)`, or why it could not open them.
type Opened = (
    usize,
    Result<(Vec<SocketSlot>, Vec<(u32, u32, bool)>), RouterError>,
);

/// One worker thread and the channels the router thread drives it with.
struct WorkerThread {
    thread: JoinHandle<()>,
    /// `true`: the classifiers are attached, run. Dropped without a send: give up.
    go: Sender<bool>,
    /// Dropped once the classifiers are detached: the worker may close its sockets.
    close: Sender<()>,
}

/// The router thread: sets up (reporting the outcome to `started`), runs one worker per core
/// until `stop`, the duration or a worker's end, and tears down.
///
/// ```text
/// set_up (control socket, metrics, classifiers loaded, ntuple filters)
/// spawn workers ── each pins itself, opens its Device, reports its sockets ──►
/// register every socket in the classifiers, attach them, `go`
/// … workers run …   (one ending — stop, duration, panic — stops them all)
/// collect their counters, detach the classifiers, remove the filters, `close`
/// ```
#[allow(clippy::too_many_arguments)]
fn supervise(
    r: Resolved,
    reserved: Reserved,
    queues: QueueLayout,
    kernel: KernelFeatures,
    opts: StartOptions,
    helpers: BTreeSet<usize>,
    stop: Arc<AtomicBool>,
    started: SyncSender<Result<Started, ()>>,
) -> Result<RunReport, RouterError> {
    let fail = |e: RouterError| {
        let _ = started.send(Err(()));
        Err(e)
    };
    let mut plant = match set_up(r, reserved, queues, kernel, opts.config_path, helpers) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let wopts = match worker_options(&plant.r, opts.duration) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let modes = match attach_and_replan(&mut plant) {
        Ok(m) => m,
        Err(e) => {
            drop(plant);
            return fail(e);
        }
    };
    let (opened_tx, opened_rx) = channel::<Opened>();
    let (done_tx, done_rx) = channel::<(usize, WorkerStats)>();
    let mut workers = Vec::new();
    for w in 0..plant.queues.workers {
        match spawn_worker(w, &plant, &wopts, &stop, opened_tx.clone(), done_tx.clone()) {
            Ok(t) => workers.push(t),
            Err(e) => {
                stop_workers(workers);
                return fail(e);
            }
        }
    }
    drop((opened_tx, done_tx));
    let attached = match register(&plant, &opened_rx, modes) {
        Ok(a) => a,
        Err(e) => {
            stop_workers(workers);
            drop(plant);
            return fail(e);
        }
    };
    let zc_check = if plant.queues.multi_buffer {
        Ok(()) // frames span buffers whatever their size
    } else {
        check_zerocopy_frames(&plant.r, &attached.0)
    };
    if let Err(e) = zc_check {
        stop_workers(workers);
        drop(plant);
        return fail(e.into());
    }
    for t in &workers {
        let _ = t.go.send(true);
    }
    let zerocopy = attached.0.iter().any(|p| p.2);
    let dp = datapath(&plant, &attached);
    let summary = summary(&plant, &dp);
    plant.ctl.set_datapath(dp);
    tracing::info!("{summary}");
    warn_shared_cores(&plant.r.cfg.cores);
    warn_realtime_busy(plant.r.cfg.worker_priority, plant.r.cfg.wake);
    if let Err(e) = plant.ctl.start_mirror(plant.seed.take()) {
        stop.store(true, Ordering::Relaxed);
        let _ = tear_down(plant, workers, done_rx, zerocopy);
        return fail(e);
    }
    warn_kernel_forwarding_off();
    say_policy(&plant.fwd.load().policy);
    if plant.fwd.routes().is_empty() {
        tracing::warn!(
            "the forwarding table is empty (no kernel routes mirrored, no [[routes]]): every \
             packet goes to the kernel until routes arrive"
        );
    }
    let watch = watch_links(&plant.r.cfg.interfaces, &stop);
    let fw_watch = crate::firewall::watch(
        plant.firewall.clone(),
        plant.fwd.clone(),
        plant.classifiers.clone(),
        plant.served.clone(),
        stop.clone(),
    );
    let ct_watch = crate::conntrack::watch(
        plant.firewall.conntrack.clone(),
        plant.fwd.clone(),
        plant.classifiers.clone(),
        stop.clone(),
    );
    let _ = started.send(Ok(Started {
        ctl: plant.ctl.clone(),
        links: plant.links.clone(),
        metrics_addr: plant.metrics_server.as_ref().map(|m| m.local_addr()),
        summary,
    }));
    let rep = tear_down(plant, workers, done_rx, zerocopy);
    for w in [watch, fw_watch, ct_watch].into_iter().flatten() {
        let _ = w.join();
    }
    rep
}

/// Warns about each interface that is down at start, then says when one comes up or goes
/// down, until `stop`. The thread polls the flags (in this thread's network namespace) twice
/// a second: a link event is rare, and the answer needs no netlink subscription of its own.
fn watch_links(names: &[String], stop: &Arc<AtomicBool>) -> Option<std::thread::JoinHandle<()>> {
    use llr_io::punt::link_state;
    let mut last: Vec<Option<bool>> = Vec::new();
    for n in names {
        let st = link_state(n).ok();
        if let Some(s) = st.filter(|s| !s.is_up()) {
            tracing::warn!(
                "{n} is {}: nothing is forwarded through it until it is up (`ip link set {n} up`); \
                 llrouter says when it comes up",
                s.describe()
            );
        }
        last.push(st.map(|s| s.is_up()));
    }
    let names = names.to_vec();
    let stop = stop.clone();
    std::thread::Builder::new()
        .name("llr-links".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(500));
                for (n, was) in names.iter().zip(last.iter_mut()) {
                    let Ok(s) = link_state(n) else { continue };
                    if *was != Some(s.is_up()) {
                        if s.is_up() {
                            tracing::warn!("{n} is up");
                        } else {
                            tracing::warn!(
                                "{n} is {}: nothing is forwarded through it",
                                s.describe()
                            );
                        }
                        *was = Some(s.is_up());
                    }
                }
            }
        })
        .ok()
}

/// Starts worker `w`: it pins itself to its core, opens its sockets and reports them, waits
/// for `go`, runs, reports its counters, and closes its sockets once told to.
fn spawn_worker(
    w: usize,
    plant: &Plant,
    wopts: &WorkerOptions,
    stop: &Arc<AtomicBool>,
    opened: Sender<Opened>,
    done: Sender<(usize, WorkerStats)>,
) -> Result<WorkerThread, RouterError> {
    let core = plant.r.cfg.cores.get(w).copied();
    let prio = plant.r.cfg.worker_priority;
    let ports = plant.queues.ports(w, &plant.r.ifindexes);
    let nsock = plant.r.cfg.classes.len().max(plant.r.layout.rings.len());
    let xsk_opts = XskOptions {
        multi_buffer: plant.queues.multi_buffer,
        ..plant.r.cfg.rings.clone()
    };
    let layout = plant.r.layout.clone();
    let fwd = plant.fwd.clone();
    let wopts = wopts.clone();
    let stop = stop.clone();
    let wctl = WorkerCtl {
        link: plant.links[w].clone(),
        flags: plant.flags,
    };
    let (go_tx, go_rx) = channel::<bool>();
    let (close_tx, close_rx) = channel::<()>();
    let thread = std::thread::Builder::new()
        .name(format!("llr-worker-{w}"))
        .spawn(move || {
            // Whatever ends this worker (stop, duration, panic) ends the others too.
            let _stop_all = StopOnExit(stop.clone());
            if let Some(c) = core {
                if let Err(e) = llr_ops::cpus::set_affinity(&[c].into()) {
                    let e = RouterError::Setup(format!("cores: pin worker {w} to core {c}: {e:#}"));
                    let _ = opened.send((w, Err(e)));
                    return;
                }
            }
            if prio > 0 {
                if let Err(e) = llr_io::sys::set_fifo(prio.into()) {
                    let e = RouterError::Setup(format!(
                        "worker-priority: SCHED_FIFO {prio} for worker {w}: {e} (needs root or \
                         CAP_SYS_NICE, and real-time time for the router's cgroup where the \
                         kernel gives cgroups their own)"
                    ));
                    let _ = opened.send((w, Err(e)));
                    return;
                }
            }
            let mut dev = match Device::open(ports, nsock, &xsk_opts) {
                Ok(d) => d,
                Err(e) => {
                    let _ = opened.send((w, Err(RouterError::io(e))));
                    return;
                }
            };
            let _ = opened.send((w, Ok((dev.sockets(), dev.zerocopy()))));
            if go_rx.recv() != Ok(true) {
                return;
            }
            let stats = worker::run_worker_ctl(&mut dev, &layout, &fwd, &wopts, &stop, Some(wctl));
            let _ = done.send((w, stats));
            drop(done);
            // Until the classifiers are detached, no socket of ours may close under them.
            let _ = close_rx.recv();
            drop(dev);
        })
        .step(format_args!("spawn worker {w}"))?;
    Ok(WorkerThread {
        thread,
        go: go_tx,
        close: close_tx,
    })
}

/// Sets the stop flag when dropped.
struct StopOnExit(Arc<AtomicBool>);

impl Drop for StopOnExit {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Tells workers that have not started to give up, releases them and joins them.
fn stop_workers(workers: Vec<WorkerThread>) {
    let mut threads = Vec::new();
    for t in workers {
        drop(t.go);
        drop(t.close);
        threads.push(t.thread);
    }
    for t in threads {
        let _ = t.join();
    }
}

/// Attaches the classifiers, then plans the queues as the drivers show them now: virtio-net
/// enables a queue pair per CPU for XDP transmit when an XDP program is attached (if the device
/// has that many) and then receives on those queues too; a socket can bind only to a queue that
/// exists. Until the sockets are registered the classifiers hand frames to the kernel (counted
/// as `no_socket`). Returns each interface's XDP mode.
fn attach_and_replan(plant: &mut Plant) -> Result<Vec<(u32, XdpMode)>, RouterError> {
    let modes =
        (plant.classifiers.lock().unwrap_or_else(|e| e.into_inner())).attach(plant.r.cfg.attach)?;
    let after = QueueLayout::active_queues(&plant.r);
    if after != plant.queues.rx {
        for ((name, was), now) in plant
            .r
            .cfg
            .interfaces
            .iter()
            .zip(&plant.queues.rx)
            .zip(&after)
        {
            if was != now {
                tracing::info!(
                    "{name}: {now} active rx queues once the XDP program is attached ({was} \
                     before: the driver enables queues of its own for XDP, and receives on them); \
                     llrouter serves all {now}"
                );
            }
        }
        plant.queues.rx = after;
        plant.queues.check(&plant.r.cfg.interfaces)?;
    }
    Ok(modes)
}

/// Registers every worker's sockets in the (attached) classifiers. Returns each port's
/// `(ifindex, queue, zero-copy)` and each interface's XDP mode (`modes`).
fn register(
    plant: &Plant,
    opened: &Receiver<Opened>,
    modes: Vec<(u32, XdpMode)>,
) -> Result<Attached, RouterError> {
    let mut zerocopy = Vec::new();
    let mut cls = plant.classifiers.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..plant.queues.workers {
        match opened.recv() {
            Ok((_, Ok((sockets, zc)))) => {
                cls.register(&sockets)?;
                zerocopy.extend(zc);
            }
            Ok((_, Err(e))) => return Err(e),
            Err(_) => return Err(RouterError::WorkerPanicked),
        }
    }
    Ok((zerocopy, modes))
}

/// What [`attach`] found: `(ifindex, queue, zero-copy)` per port, the XDP mode per interface.
type Attached = (Vec<(u32, u32, bool)>, Vec<(u32, XdpMode)>);

/// The datapath as it came up: per interface the XDP mode, the queues served and how many
/// bound in zero-copy mode; the kernel.
fn datapath(plant: &Plant, attached: &Attached) -> DatapathView {
    let (ports, modes) = attached;
    let r = &plant.r;
    DatapathView {
        kernel: plant.kernel.describe(),
        ports: (r.cfg.interfaces.iter().zip(&r.ifindexes))
            .map(|(name, &i)| PortModeView {
                interface: name.clone(),
                xdp: match modes.iter().find(|m| m.0 == i).map(|m| m.1) {
                    Some(XdpMode::Driver) | Some(XdpMode::Hardware) => "native",
                    Some(_) => "generic",
                    None => "no",
                }
                .to_string(),
                rx_queues: ports.iter().filter(|p| p.0 == i).count() as u32,
                zerocopy_queues: ports.iter().filter(|p| p.0 == i && p.2).count() as u32,
                queues: {
                    let mut q: Vec<u32> =
                        (ports.iter().filter(|p| p.0 == i)).map(|p| p.1).collect();
                    q.sort_unstable();
                    q.dedup();
                    q
                },
                mtu: kernel::link_facts(i).map_or(0, |f| f.mtu),
                multi_buffer: plant.queues.multi_buffer,
            })
            .collect(),
    }
}

/// Zero-copy sockets take frames in the driver's receive buffers, which some drivers size in
/// whole KiB: checks the MTU of every interface bound in zero-copy against that.
fn check_zerocopy_frames(
    r: &Resolved,
    zerocopy: &[(u32, u32, bool)],
) -> Result<(), crate::config::ConfigError> {
    for (name, &ifindex) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
        if !zerocopy.iter().any(|z| z.0 == ifindex && z.2) {
            continue;
        }
        let mtu = kernel::link_facts(ifindex).map_or(1500, |f| f.mtu);
        crate::plan::check_frames(
            std::slice::from_ref(name),
            &[mtu],
            r.cfg.rings.frame_size,
            true,
            false,
        )?;
    }
    Ok(())
}

/// One line for people (see [`Running::summary`]).
fn summary(plant: &Plant, dp: &DatapathView) -> String {
    let r = &plant.r;
    format!(
        "routing between {} ({} strategy, {}, {}, steering {}, wake {}; {}); control {}{}",
        r.cfg.interfaces.join(", "),
        r.layout.strategy,
        plural(r.layout.rings.len(), "ring"),
        match r.cfg.worker_priority {
            0 => plural(plant.queues.workers, "worker"),
            p => format!(
                "{} at SCHED_FIFO {p}",
                plural(plant.queues.workers, "worker")
            ),
        },
        plant.queues.steering.name(),
        r.cfg.wake.name(),
        dp.describe(),
        r.cfg.control.socket.display(),
        plant
            .metrics_server
            .as_ref()
            .map(|m| format!(", metrics http://{}/metrics", m.local_addr()))
            .unwrap_or_default()
    )
}

/// Says when a worker's core is open to other tasks: each one that wakes there takes the core
/// from the worker for a scheduler tick or more, and the RT ring waits that long (the
/// millisecond tails in docs/operations.md, "Threads and cores").
fn warn_shared_cores(cores: &[usize]) {
    for &c in cores {
        let others = llr_ops::cpus::sharing(c);
        if others.is_empty() {
            continue;
        }
        let mut names: Vec<&str> = others.iter().map(|(_, n)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        tracing::warn!(
            "core {c}: {} tasks of other processes may run there too ({}{}); each takes it from \
             the worker for a scheduler tick or more when it wakes. Keep them off with \
             isolcpus=, a cpuset, or `llrouter run --shield`",
            others.len(),
            names[..names.len().min(5)].join(", "),
            if names.len() > 5 { ", …" } else { "" }
        );
    }
}

/// A real-time worker that polls busily never yields its core: the kernel's real-time
/// throttling takes it back in one piece per period, and the rings wait that long.
fn warn_realtime_busy(prio: u8, wake: llr_io::xsk::WakeMode) {
    if prio == 0 || wake != llr_io::xsk::WakeMode::Busy {
        return;
    }
    if let (Some(run), Some(period)) = crate::config::rt_throttle_us() {
        if run >= 0 && run < period {
            tracing::warn!(
                "worker-priority {prio} with wake = \"busy\": the worker never sleeps, so the \
                 kernel's real-time throttling stops it for {} ms in every {} ms \
                 (sched_rt_runtime_us = {run}) and no ring is served meanwhile; \
                 wake = \"interrupt\" lets the worker sleep when idle",
                (period - run) / 1000,
                period / 1000
            );
        }
    }
}

/// Control socket first (a second router on the same socket stops here, before touching XDP or
/// the NIC), then metrics, then the classifiers (loaded, not attached) and the ntuple filters.
/// Helper threads are spawned while this thread runs on the helper cores, so they inherit them.
fn set_up(
    r: Resolved,
    reserved: Reserved,
    queues: QueueLayout,
    kernel: KernelFeatures,
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
        max_routes: crate::config::effective_max_routes(
            r.cfg.max_routes,
            llr_io::sys::cgroup_memory_max(),
        ) as usize,
        event_buffer: (r.cfg.netlink_buffer_kb as usize) << 10,
    };
    let (mut fwd0, seed) = kernel::build_seeded(&spec).map_err(RouterError::io)?;
    // Before any frame can be forwarded: nothing passes that the host's firewall forbids.
    let served: Vec<(String, u32)> = (r.cfg.interfaces.iter().cloned())
        .zip(r.ifindexes.iter().copied())
        .collect();
    let (filter, firewall) =
        crate::firewall::at_start(&r.cfg.firewall, &served).map_err(RouterError::Firewall)?;
    fwd0.filter = Arc::new(filter);
    fwd0.tagged = r.cfg.tagged_frames;
    if r.cfg.tagged_frames == llr_core::fwd::TaggedFrames::Kernel {
        for (i, rule) in r.cfg.rules.iter().enumerate() {
            if rule.vlan.is_some() || rule.pcp.is_some() {
                tracing::warn!(
                    "rules[{i}] matches on vlan/pcp, but tagged frames go to the kernel's VLAN \
                     devices (tagged-frames = \"kernel\", the default): it matches nothing \
                     llrouter forwards; set tagged-frames = \"forward\" to route them, tag kept"
                );
            }
        }
    }
    let local = fwd0.interfaces.local_addrs();
    let fwd = Arc::new(SharedForwarder::new(fwd0));
    let flags = if r.cfg.timestamp_meta {
        FLAG_TIMESTAMP
    } else {
        0
    } | match r.cfg.tagged_frames {
        llr_core::fwd::TaggedFrames::Forward => llr_io::ebpf::FLAG_TAGGED_FORWARD,
        llr_core::fwd::TaggedFrames::Kernel => 0,
    };
    let links = (0..queues.workers)
        .map(|_| WorkerLink::new())
        .collect::<Result<Vec<_>, _>>()
        .step("control: eventfd")?;
    let classifiers = Arc::new(Mutex::new(Classifiers::load(&r, &queues, flags, &local)?));
    firewall.publish_drops(&fwd.load().filter, &classifiers);
    let modes = fwd.load().filter.family_modes();
    (classifiers.lock().unwrap_or_else(|e| e.into_inner()))
        .set_family_modes(modes)
        .map_err(RouterError::io)?;
    let (v4, v6) = fwd.load().filter.kernel_families();
    if v4 || v6 {
        tracing::warn!(
            "firewall: the kernel carries every{}{} packet: the ruleset has rules llrouter cannot \
             evaluate (`llrouter ctl show filter`)",
            if v4 { " IPv4" } else { "" },
            if v6 { " IPv6" } else { "" }
        );
    }
    let ctl = Arc::new(RouterCtl::new(
        &r,
        CtlParts {
            config_path,
            spec,
            fwd: fwd.clone(),
            links: links.clone(),
            classifiers: classifiers.clone(),
            flags,
            helper_cpus: helpers,
        },
    ));
    let ctl_server = reserved
        .serve(ctl.clone(), Default::default())
        .step("control.socket")?;
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
    ctl.set_firewall(firewall.clone());
    let ntuple = match queues.steering {
        Steering::Ntuple => Some(install_ntuple(&r)?),
        _ => None,
    };
    Ok(Plant {
        r,
        queues,
        kernel,
        fwd,
        links,
        ctl,
        ctl_server,
        metrics_server,
        classifiers,
        ntuple,
        flags,
        seed: Some(seed),
        firewall,
        served,
    })
}

/// Removes the filters a router with the same control socket left behind, then installs this
/// one's: class c → hardware queue c on every interface.
fn install_ntuple(r: &Resolved) -> Result<NtupleFilters, RouterError> {
    let state = NtupleFilters::state_path(&r.cfg.control.socket);
    NtupleFilters::recover(&state);
    let mut plans = Vec::new();
    for (n, &ifindex) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
        plans.push(
            llr_io::ntuple::plan(n, ifindex, &r.rules, r.cfg.classes.len(), 0)
                .io_step("steering = \"ntuple\"")?,
        );
    }
    NtupleFilters::install(&plans, &state)
}

/// Binds the control socket, creating its directory (mode 0700) if missing.
fn reserve_control(path: &Path) -> Result<Reserved, RouterError> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::create_dir_all(dir)
                .step(format_args!("control.socket: create {}", dir.display()))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    Reserved::take(path).step("control.socket")
}

/// Each worker's options: the ICMP and punt limits are shared out, so that all workers
/// together keep to the configured ones.
fn worker_options(r: &Resolved, duration: Option<Duration>) -> Result<WorkerOptions, RouterError> {
    let n = r.cfg.cores.len().max(1) as u32;
    Ok(WorkerOptions {
        wake: r.cfg.wake,
        spin_us: r.cfg.spin_us,
        batch: r.cfg.batch,
        tx_batch: r.cfg.tx_batch,
        tx_hold_ns: u64::from(r.cfg.tx_hold_us) * 1000,
        cost_ns: r.cfg.cost_ns,
        acl_rules: r.cfg.acl_rules,
        max_duration: duration,
        icmp: r.cfg.icmp.limits()?.share(n),
        punt_device: (r.cfg.icmp.punt_rate > 0).then(|| "llr-punt".to_string()),
        punt_rate: r.cfg.icmp.punt_rate.div_ceil(n),
        flows: r.flows.clone(),
    })
}

/// Watches the queues once a second: warns (at most once a minute per interface, with the
/// count and the queues) when frames found no socket, and once per change when an interface's
/// active rx queues are no longer the ones llrouter serves (`ethtool -L` while running).
struct QueueWatch {
    /// Per ifindex: `no_socket` counts (total, per queue) last said, and when.
    seen: std::collections::BTreeMap<u32, (u64, Vec<u64>, Option<Instant>)>,
    /// Per interface (the configuration's order): the queues served, the count last seen.
    queues: Vec<(u32, u32)>,
}

impl QueueWatch {
    /// Counts from `start` on (the frames that reached the classifiers before the sockets
    /// were registered went to the kernel, by design); `served`: active queues per interface.
    fn new(start: &[(u32, ClassifierStats)], served: &[u32]) -> QueueWatch {
        QueueWatch {
            seen: (start.iter())
                .map(|(i, st)| (*i, (st.no_socket, st.no_socket_queues.clone(), None)))
                .collect(),
            queues: served.iter().map(|&n| (n, n)).collect(),
        }
    }

    fn check(&mut self, now: &[(u32, ClassifierStats)], r: &Resolved) {
        let name_of = |ifindex: u32| {
            (r.ifindexes.iter().position(|&i| i == ifindex)).map_or_else(
                || format!("ifindex {ifindex}"),
                |k| r.cfg.interfaces[k].clone(),
            )
        };
        for (ifindex, st) in now {
            let (seen, by_queue, warned) = self.seen.entry(*ifindex).or_default();
            if st.no_socket > *seen && warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(60))
            {
                let name = name_of(*ifindex);
                let queues: Vec<String> = (st.no_socket_queues.iter().enumerate())
                    .filter(|(q, &n)| n > by_queue.get(*q).copied().unwrap_or(0))
                    .map(|(q, _)| q.to_string())
                    .collect();
                tracing::warn!(
                    "{name}: {} frames found no socket and went to the kernel instead (counter \
                     no_socket): they arrived on rx queue {}, which llrouter does not serve; \
                     compare `ethtool -l {name}` with the queues of `llrouter ctl status`",
                    st.no_socket - *seen,
                    queues.join(", ")
                );
                *seen = st.no_socket;
                by_queue.clone_from(&st.no_socket_queues);
                *warned = Some(Instant::now());
            }
        }
        for ((name, &ifindex), (served, last)) in
            (r.cfg.interfaces.iter().zip(&r.ifindexes)).zip(&mut self.queues)
        {
            let Ok(n) = llr_io::kernel::active_rx_queues(name, ifindex) else {
                continue;
            };
            if n == *last {
                continue;
            }
            *last = n;
            if n > *served {
                tracing::warn!(
                    "{name}: {n} active rx queues now; llrouter serves {served} (queues {}..{}): \
                     frames RSS puts on the others go to the kernel (counted as no_socket) until \
                     llrouter is restarted, or the queues set back (`ethtool -L {name} combined \
                     {served}`)",
                    0,
                    *served - 1
                );
            } else if n < *served {
                tracing::info!(
                    "{name}: {n} active rx queues now; llrouter keeps the sockets of all {served}"
                );
            } else {
                tracing::info!("{name}: {n} active rx queues again, all served");
            }
        }
    }
}

/// Waits for every worker to end, then stops taking commands, reads the classifiers' counters,
/// detaches them, removes the ntuple filters and lets the workers close their sockets.
fn tear_down(
    plant: Plant,
    workers: Vec<WorkerThread>,
    done: Receiver<(usize, WorkerStats)>,
    zerocopy: bool,
) -> Result<RunReport, RouterError> {
    let mut stats: Vec<Option<WorkerStats>> = vec![None; workers.len()];
    // Ends when every worker has reported or died (each drops its sender after reporting).
    // Meanwhile, once a second, the classifiers' `no_socket` counters: a frame that found no
    // socket went to the kernel instead of the router, which is a defect (an unserved queue),
    // not traffic to take silently.
    let start = (plant.classifiers.lock().unwrap_or_else(|e| e.into_inner())).stats();
    let mut watch = QueueWatch::new(&start, &plant.queues.rx);
    let mut local_failed = false;
    loop {
        match done.recv_timeout(Duration::from_secs(1)) {
            Ok((w, s)) => stats[w] = Some(s),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let mut cls = plant.classifiers.lock().unwrap_or_else(|e| e.into_inner());
                let now = cls.stats();
                // Addresses the router gains or loses while running: their frames go to the
                // kernel from XDP, not through a worker and the punt device.
                let local = plant.fwd.load().interfaces.local_addrs();
                match cls.sync_local_addrs(local) {
                    Ok(_) => local_failed = false,
                    Err(e) if !local_failed => {
                        local_failed = true;
                        tracing::warn!(
                            "the router's addresses: cannot update the classifiers ({e}): \
                             frames to an address added since go through a worker and the punt \
                             device to the kernel"
                        );
                    }
                    Err(_) => {}
                }
                drop(cls);
                watch.check(&now, &plant.r);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let Plant {
        r,
        ctl,
        ctl_server,
        metrics_server,
        classifiers,
        ntuple,
        ..
    } = plant;
    drop(ctl_server);
    drop(metrics_server);
    ctl.shutdown();
    let cls_stats = (classifiers.lock().unwrap_or_else(|e| e.into_inner())).stats();
    drop(ntuple);
    // The sockets go before the programs, the reverse of the start: virtio-net takes back the
    // queue pairs it enabled for XDP when the program goes, and a zero-copy pool still bound to
    // one of them can then not be unbound ("Failed to disable zero-copy!"), which leaves the
    // queue broken for the next user. The kernel unbinds a closed socket's pool from a work
    // queue, after the close returns: zero-copy sockets get a moment for it.
    stop_workers(workers);
    if zerocopy {
        std::thread::sleep(Duration::from_millis(200));
    }
    (classifiers.lock().unwrap_or_else(|e| e.into_inner())).detach();
    let workers: Vec<WorkerStats> = stats
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or(RouterError::WorkerPanicked)?;
    let names: Vec<(u32, String)> = (r.ifindexes.iter().copied())
        .zip(r.cfg.interfaces.iter().cloned())
        .collect();
    let classifier = (cls_stats.into_iter())
        .map(|(i, s)| (crate::metrics::name_of(&names, i), s))
        .collect();
    Ok(RunReport {
        worker: WorkerStats::total(&workers),
        workers,
        classifier,
        class_names: r.cfg.classes.iter().map(|c| c.name.clone()).collect(),
        interfaces: names,
    })
}

/// The routing rules, said at start when they go beyond table main.
fn say_policy(p: &llr_core::fwd::Policy) {
    if p.is_plain(false) && p.is_plain(true) {
        return;
    }
    let routes: usize = p.tables().values().map(|t| t.len()).sum();
    tracing::info!(
        "policy routing: {} IPv4 and {} IPv6 rules, {} tables besides main ({routes} routes);          IPv4 by {}, IPv6 by {} (`ctl show fib rules`)",
        p.rules(false).len(),
        p.rules(true).len(),
        p.tables().len(),
        if p.is_plain(false) { "table main alone" } else { "the rules" },
        if p.is_plain(true) { "table main alone" } else { "the rules" },
    );
}

/// What llrouter hands to the kernel to forward (IPv4 options, IPv6 hop-by-hop headers, routes
/// through interfaces it does not serve) the kernel drops when its forwarding is off, Debian's
/// default: said at start, not found out from missing packets.
fn warn_kernel_forwarding_off() {
    for (path, fam, what, kind) in [
        (
            "/proc/sys/net/ipv4/ip_forward",
            "IPv4",
            "packets with IP options",
            "ip_options",
        ),
        (
            "/proc/sys/net/ipv6/conf/all/forwarding",
            "IPv6",
            "packets with a hop-by-hop header",
            "hop_by_hop",
        ),
    ] {
        if std::fs::read_to_string(path).is_ok_and(|v| v.trim() == "0") {
            tracing::warn!(
                "kernel forwarding is off for {fam} ({path} = 0): the {fam} {what} or routed \
                 through interfaces llrouter does not serve, which llrouter hands to the kernel, \
                 are dropped there (counted as llrouter_kernel_pass_packets_total \
                 reason=\"worker_{kind}\" / \"worker_kernel_route\"); set {path} to 1 to \
                 have the kernel forward them"
            );
        }
    }
}
