//! The live worker loop: the poll engine of `llr-core` (the same one the simulator runs) over
//! AF_XDP rings, the `Forwarder` of `llr-core` per frame, egress Tx with per-class priority.
//!
//! ```text
//! loop:
//!   "interrupt": every armed engine device whose rings hold frames is woken (engine.wake)
//!   grant = engine.pick(device)            # strategy: SQ, RR, LL-RR, LL-WFQ, slices, ...
//!   n = device.recv(grant.ring, min(grant.max, batch), forward)   # parse, LPM, rewrite
//!   engine.complete(grant, n, measured ns)
//!   device.flush()                         # completions, egress (highest ring first), fill
//!   idle -> interrupt: poll(); busy: spin; adaptive: spin spin_us, then poll()
//! ```
//!
//! Frames the forwarder hands to the kernel (`Verdict::Pass`: no route, no neighbour, IP
//! options, ...) are counted and dropped here: the classifier already passes ARP/ND, multicast,
//! the router's own addresses and TTL expiry to the kernel in XDP, so user-space Pass is rare.
//! For `NoNeighbor` the kernel is asked to resolve the next hop (a datagram to its discard
//! port), and the neighbour mirror picks the answer up.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use llr_core::fwd::{DropReason, Forwarder, PassReason, Verdict};
use llr_core::sched::{Layout, PollEngine, RingView};

use crate::xsk::{Action, Device, PortStats, WakeMode};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub wake: WakeMode,
    /// Adaptive mode: spin this long before sleeping.
    pub spin_us: u64,
    /// At most this many frames per grant (caps the engine's `grant.max`).
    pub batch: u32,
    /// Artificial per-packet cost (busy wait), to make the CPU the bottleneck in a testbed.
    pub cost_ns: u64,
    /// Stop after this long (`None`: until the stop flag).
    pub max_duration: Option<Duration>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            wake: WakeMode::Interrupt,
            spin_us: 50,
            batch: 32,
            cost_ns: 0,
            max_duration: None,
        }
    }
}

/// Counters of one worker, printed on exit.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WorkerStats {
    /// Ring names (layout order).
    pub rings: Vec<String>,
    /// Frames served per ring.
    pub served: Vec<u64>,
    /// Frames forwarded (queued for Tx) per ring.
    pub forwarded: Vec<u64>,
    /// User-space Pass verdicts by reason (dropped here, see the module doc).
    pub pass: Vec<(String, u64)>,
    /// Drops by reason.
    pub drop: Vec<(String, u64)>,
    /// Engine device counters: wake-ups, re-arms, budget exhaustions.
    pub engine_wakeups: u64,
    pub engine_rearms: u64,
    pub budget_exhaustions: u64,
    /// Times the worker slept in poll(), and times it was woken by packets.
    pub sleeps: u64,
    pub poll_wakeups: u64,
    pub ports: Vec<PortStats>,
    pub elapsed_s: f64,
}

impl std::fmt::Display for WorkerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "  elapsed {:.3} s", self.elapsed_s)?;
        for (i, r) in self.rings.iter().enumerate() {
            writeln!(
                f,
                "  ring {r:<8} served {:>10}  forwarded {:>10}",
                self.served[i], self.forwarded[i]
            )?;
        }
        for (n, c) in self.pass.iter().filter(|(_, c)| *c > 0) {
            writeln!(f, "  pass {n:<20} {c}")?;
        }
        for (n, c) in self.drop.iter().filter(|(_, c)| *c > 0) {
            writeln!(f, "  drop {n:<20} {c}")?;
        }
        writeln!(
            f,
            "  engine wake-ups {} re-arms {} budget exhaustions {}; poll() sleeps {} woken {}",
            self.engine_wakeups,
            self.engine_rearms,
            self.budget_exhaustions,
            self.sleeps,
            self.poll_wakeups
        )?;
        for p in &self.ports {
            writeln!(
                f,
                "  ifindex {:<3} rx {:>10} tx {:>10} egress drops {} kernel: rx dropped {} ring full {} fill empty {}",
                p.ifindex, p.rx, p.tx, p.egress_drops, p.kernel_rx_dropped, p.kernel_rx_ring_full, p.kernel_fill_empty
            )?;
        }
        Ok(())
    }
}

#[inline]
fn spin_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let t = Instant::now();
    while (t.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

/// Asks the kernel to resolve `addr` (ARP/ND) by sending one datagram to its discard port.
fn poke_neighbor(addr: IpAddr) {
    let bind: SocketAddr = match addr {
        IpAddr::V4(_) => "0.0.0.0:0".parse().unwrap(),
        IpAddr::V6(_) => "[::]:0".parse().unwrap(),
    };
    if let Ok(s) = UdpSocket::bind(bind) {
        let _ = s.send_to(b"llrouter-resolve", SocketAddr::new(addr, 9));
    }
}

/// Runs one worker until `stop` is set (or `opts.max_duration` passes).
pub fn run_worker(
    dev: &mut Device,
    layout: &Layout,
    fwd: &RwLock<Forwarder>,
    opts: &WorkerOptions,
    stop: &AtomicBool,
) -> WorkerStats {
    let nr = layout.rings.len();
    let mut engine = PollEngine::new(layout);
    let mut forwarded = vec![0u64; nr];
    let mut pass = vec![0u64; PassReason::ALL.len()];
    let mut drops: Vec<(String, u64)> = Vec::new();
    let mut to_resolve: Vec<IpAddr> = Vec::new();
    let mut last_poke = Instant::now() - Duration::from_secs(10);
    let t0 = Instant::now();
    let deadline = opts.max_duration.map(|d| t0 + d);
    let batch = opts.batch.max(1);
    let mut iter: u64 = 0;
    loop {
        iter += 1;
        if (iter % 1024 == 0 || engine.is_idle())
            && (stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d))
        {
            break;
        }
        // Interrupts: an armed device with frames waiting is put on the poll list.
        for d in 0..engine.num_devices() {
            if !engine.is_scheduled(d) && engine.device_rings(d).iter().any(|&r| dev.backlog(r) > 0)
            {
                engine.wake(d);
            }
        }
        if let Some(g) = engine.pick(&*dev) {
            let start = Instant::now();
            let max = g.max.min(batch);
            let table = fwd.read().unwrap_or_else(|e| e.into_inner());
            let ring = g.ring;
            let mut fwd_n = 0u64;
            let n = dev.recv(ring, max, |frame, len, ingress| {
                spin_ns(opts.cost_ns);
                match table.process(&mut frame[..len as usize], ingress) {
                    Verdict::Tx { ifindex, len } => {
                        fwd_n += 1;
                        Action::Tx { ifindex, len }
                    }
                    Verdict::Pass(r) => {
                        pass[r.index()] += 1;
                        if r == PassReason::NoNeighbor {
                            if let Ok(m) = llr_core::wire::parse_frame(&frame[..len as usize]) {
                                if let Some(nh) = table.routes.lookup(m.dst_ip()) {
                                    let a = nh.gateway.unwrap_or(m.dst_ip());
                                    if to_resolve.len() < 16 && !to_resolve.contains(&a) {
                                        to_resolve.push(a);
                                    }
                                }
                            }
                        }
                        Action::Drop
                    }
                    Verdict::Drop(r) => {
                        count_drop(&mut drops, r);
                        Action::Drop
                    }
                }
            });
            drop(table);
            forwarded[ring] += fwd_n;
            dev.flush();
            engine.complete(g, n, start.elapsed().as_nanos() as u64);
            continue;
        }
        dev.flush();
        if !to_resolve.is_empty() && last_poke.elapsed() > Duration::from_millis(200) {
            for a in to_resolve.drain(..) {
                poke_neighbor(a);
            }
            last_poke = Instant::now();
        }
        if dev.egress_pending() {
            continue;
        }
        match opts.wake {
            WakeMode::Busy => std::hint::spin_loop(),
            WakeMode::Interrupt => {
                dev.wait(50);
            }
            WakeMode::Adaptive => {
                let s = Instant::now();
                let spin = Duration::from_micros(opts.spin_us);
                let mut got = false;
                while s.elapsed() < spin {
                    if (0..nr).any(|r| dev.backlog(r) > 0) {
                        got = true;
                        break;
                    }
                    std::hint::spin_loop();
                }
                if !got {
                    dev.wait(50);
                }
            }
        }
    }
    // Drain what is queued for Tx (bounded).
    let t = Instant::now();
    while dev.egress_pending() && t.elapsed() < Duration::from_millis(200) {
        dev.flush();
    }
    let ds = engine.device_stats();
    WorkerStats {
        rings: layout.rings.iter().map(|r| r.name.clone()).collect(),
        served: engine.ring_stats().iter().map(|s| s.served).collect(),
        forwarded,
        pass: PassReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), pass[r.index()]))
            .collect(),
        drop: drops,
        engine_wakeups: ds.iter().map(|d| d.wakeups).sum(),
        engine_rearms: ds.iter().map(|d| d.rearms).sum(),
        budget_exhaustions: ds.iter().map(|d| d.budget_exhaustions).sum(),
        sleeps: dev.sleeps,
        poll_wakeups: dev.wakeups,
        ports: dev.port_stats(),
        elapsed_s: t0.elapsed().as_secs_f64(),
    }
}

fn count_drop(drops: &mut Vec<(String, u64)>, r: DropReason) {
    let name = r.name();
    match drops.iter_mut().find(|(n, _)| n == name) {
        Some((_, c)) => *c += 1,
        None => drops.push((name.to_string(), 1)),
    }
}

/// Pins the calling thread to `core`.
pub fn pin_to_core(core: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it; sched_setaffinity reads
    // exactly size_of::<cpu_set_t>() bytes from it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs SIGINT/SIGTERM handlers that set the returned flag (async-signal-safe: one atomic
/// store). The worker loop polls it at least every 50 ms.
pub fn install_stop_signals() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only performs an atomic store, which is async-signal-safe; the
        // function pointer has the C ABI signal() expects.
        unsafe {
            libc::signal(sig, on_stop_signal as *const () as libc::sighandler_t);
        }
    }
    &STOP
}
