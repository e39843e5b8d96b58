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
//! The slow path ([`SlowPath`]) handles what is not plain forwarding, in the frame's own class
//! and grant: ICMP errors (time exceeded, unreachable, fragmentation needed / packet too big),
//! rate-limited, built in the frame's buffer and sent back to its source; IPv4 fragmentation
//! into spare chunks; frames for the kernel (`Verdict::Pass`: IP options, the kernel's routes,
//! ...) written to the punt TAP ([`crate::punt`]) — the classifier already passes ARP/ND,
//! multicast and the router's own addresses to the kernel in XDP, so these are rare. For
//! `NoNeighbor` the kernel is asked to resolve the next hop (a datagram to its discard port),
//! and the neighbour mirror picks the answer up; the packet itself is dropped.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use llr_core::classify::{self, IpPrefix, PortRange, Rule};
use llr_core::fwd::{
    icmp, DropReason, Forwarder, IcmpKind, IcmpLimiter, IcmpLimits, PassReason, Verdict,
};
use llr_core::sched::{Layout, PollEngine, RingView};
use llr_core::wire::PacketMeta;

use crate::punt::Punt;
use crate::xsk::{Action, Device, PortStats, Spare, WakeMode};

#[path = "router_ctl.rs"]
pub mod ctl;
use ctl::{Change, DeviceCounters, RingCounters, WorkerLink, WorkerSnapshot};

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub wake: WakeMode,
    /// Adaptive mode: spin this long before sleeping.
    pub spin_us: u64,
    /// At most this many frames per grant (caps the engine's `grant.max`).
    pub batch: u32,
    /// Transmit kicks: frames of the lowest-priority ring are held in the egress queue until this
    /// many are waiting (or the worker runs out of work); a grant on any higher ring transmits at
    /// once. 1 = a sendto after every grant.
    pub tx_batch: u32,
    /// Artificial per-packet cost (busy wait), to make the CPU the bottleneck in a testbed.
    pub cost_ns: u64,
    /// Artificial per-packet cost as an ACL: every frame is checked against this many rules,
    /// none of which matches forwarded traffic (like a firewall's permit-after-N-denies).
    pub acl_rules: u32,
    /// Stop after this long (`None`: until the stop flag).
    pub max_duration: Option<Duration>,
    /// Rate limits of the ICMP errors the worker sends.
    pub icmp: IcmpLimits,
    /// Name of the TAP that hands frames to the kernel (`None`: such frames are dropped and
    /// counted as `punt_dropped`).
    pub punt_device: Option<String>,
    /// At most this many frames per second to the kernel through the punt TAP.
    pub punt_rate: u32,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            wake: WakeMode::Interrupt,
            spin_us: 50,
            batch: 32,
            tx_batch: 16,
            cost_ns: 0,
            acl_rules: 0,
            max_duration: None,
            icmp: IcmpLimits::default(),
            punt_device: Some("llr-punt".to_string()),
            punt_rate: 10_000,
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
    /// Slow-path events: ICMP errors sent and rate-limited per type, fragments, punts.
    pub events: Vec<(String, u64)>,
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
        for (n, c) in self.events.iter().filter(|(_, c)| *c > 0) {
            writeln!(f, "  {n:<25} {c}")?;
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
                "  ifindex {:<3} rx {:>10} tx {:>10} tx kicks {} egress drops {} kernel: rx dropped {} ring full {} fill empty {}",
                p.ifindex, p.rx, p.tx, p.tx_kicks, p.egress_drops, p.kernel_rx_dropped, p.kernel_rx_ring_full, p.kernel_fill_empty
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

/// Everything the worker does with a frame besides forwarding it whole; see the module doc.
struct SlowPath {
    icmp: IcmpLimiter,
    punt: Option<Punt>,
    /// Per [`IcmpKind::class`]: errors sent, errors held back by the rate limit.
    icmp_sent: [u64; 3],
    icmp_limited: [u64; 3],
    /// Errors that could not be sent (no route back, no address, no room).
    icmp_unsendable: u64,
    fragments: u64,
    /// Packets that needed fragmenting but could not get every fragment out.
    fragment_failed: u64,
    punt_dropped: u64,
    ip_id: u16,
    pass: Vec<u64>,
    drops: Vec<(String, u64)>,
    to_resolve: Vec<IpAddr>,
}

impl SlowPath {
    fn new(opts: &WorkerOptions) -> SlowPath {
        let punt = opts.punt_device.as_deref().and_then(|name| {
            Punt::open(name, opts.punt_rate)
                .map_err(|e| {
                    tracing::warn!(
                        "punt device {name}: {e:#}; frames for the kernel will be dropped"
                    )
                })
                .ok()
        });
        SlowPath {
            icmp: IcmpLimiter::new(opts.icmp, mono_ns()),
            punt,
            icmp_sent: [0; 3],
            icmp_limited: [0; 3],
            icmp_unsendable: 0,
            fragments: 0,
            fragment_failed: 0,
            punt_dropped: 0,
            ip_id: 0,
            pass: vec![0; PassReason::ALL.len()],
            drops: Vec::new(),
            to_resolve: Vec::new(),
        }
    }

    /// The frame's action for a verdict other than `Tx`; `buf` is the frame's whole chunk room,
    /// its first `len` bytes the frame.
    fn handle(
        &mut self,
        verdict: Verdict,
        buf: &mut [u8],
        len: usize,
        ingress: u32,
        table: &Forwarder,
        spare: &mut Spare<'_>,
    ) -> Action {
        match verdict {
            Verdict::Tx { ifindex, len } => Action::Tx { ifindex, len },
            Verdict::Icmp { drop, error } => {
                count_drop(&mut self.drops, drop);
                self.icmp_error(buf, len, ingress, error, table)
            }
            Verdict::Fragment { ifindex, mtu } => {
                let Ok(m) = llr_core::wire::parse_frame(&buf[..len]) else {
                    return Action::Drop;
                };
                let l3 = usize::from(m.l3_offset);
                let frame = &buf[..len];
                let Some(n) = icmp::fragment_count(frame, l3, mtu as usize) else {
                    self.fragment_failed += 1;
                    return Action::Drop;
                };
                let sent = (0..n)
                    .take_while(|&k| {
                        spare.tx(ifindex, |out| {
                            icmp::fragment_v4(frame, l3, mtu as usize, k, out).unwrap_or(0)
                        })
                    })
                    .count();
                if sent < n || n == 0 {
                    // Out of spare chunks part-way: the receiver cannot reassemble anyway.
                    self.fragment_failed += 1;
                } else {
                    self.fragments += n as u64;
                }
                Action::Drop
            }
            Verdict::Pass(r) => {
                self.pass[r.index()] += 1;
                // The kernel does not finish a checksum the sender left partial (it arrives
                // on the TAP as a received frame), and its receivers drop it.
                if let Ok(m) = llr_core::wire::parse_frame(&buf[..len]) {
                    llr_core::wire::l4::complete_partial_checksum(&mut buf[..len], &m);
                }
                let sent = match self.punt.as_mut() {
                    Some(p) => p.send(&mut buf[..len], mono_ns()),
                    None => false,
                };
                if !sent {
                    self.punt_dropped += 1;
                }
                Action::Drop
            }
            Verdict::Drop(r) => {
                count_drop(&mut self.drops, r);
                if r == DropReason::NoNeighbor {
                    self.want_neighbor(&buf[..len], table);
                }
                Action::Drop
            }
        }
    }

    fn icmp_error(
        &mut self,
        buf: &mut [u8],
        len: usize,
        ingress: u32,
        error: IcmpKind,
        table: &Forwarder,
    ) -> Action {
        let Ok(m): Result<PacketMeta, _> = llr_core::wire::parse_frame(&buf[..len]) else {
            return Action::Drop;
        };
        let class = error.class();
        if !self.icmp.allow(error, &m.src, mono_ns()) {
            self.icmp_limited[class] += 1;
            return Action::Drop;
        }
        self.ip_id = self.ip_id.wrapping_add(1);
        match table.icmp_error(buf, &m, ingress, error, self.ip_id) {
            Verdict::Tx { ifindex, len } => {
                self.icmp_sent[class] += 1;
                Action::Tx { ifindex, len }
            }
            _ => {
                self.icmp_unsendable += 1;
                Action::Drop
            }
        }
    }

    /// Remembers the next hop of `frame` for the kernel to resolve.
    fn want_neighbor(&mut self, frame: &[u8], table: &Forwarder) {
        if let Ok(m) = llr_core::wire::parse_frame(frame) {
            if let Some(nh) = table.routes.lookup(m.dst_ip()) {
                let a = nh.gateway.unwrap_or(m.dst_ip());
                if self.to_resolve.len() < 16 && !self.to_resolve.contains(&a) {
                    self.to_resolve.push(a);
                }
            }
        }
    }

    /// The slow-path counters, named.
    fn events(&self) -> Vec<(String, u64)> {
        let mut v = Vec::new();
        for (i, n) in IcmpKind::CLASS_NAMES.iter().enumerate() {
            v.push((format!("icmp_sent_{n}"), self.icmp_sent[i]));
            v.push((format!("icmp_ratelimited_{n}"), self.icmp_limited[i]));
        }
        v.push(("icmp_unsendable".to_string(), self.icmp_unsendable));
        v.push(("fragments_sent".to_string(), self.fragments));
        v.push(("fragment_failed".to_string(), self.fragment_failed));
        let ps = self.punt.as_ref().map(|p| p.stats).unwrap_or_default();
        v.push(("punted".to_string(), ps.punted));
        v.push(("punt_dropped".to_string(), self.punt_dropped));
        v
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
    run_worker_ctl(dev, layout, fwd, opts, stop, None)
}

/// The control plane's handle on a worker (see [`ctl`]).
pub struct WorkerCtl {
    pub link: Arc<WorkerLink>,
    /// The rule images installed in the classifiers now.
    pub rules: Vec<[u8; 64]>,
    pub default_class: u32,
    /// `llr_config.flags` of the classifiers (`FLAG_TIMESTAMP`).
    pub flags: u32,
}

/// Publish a snapshot at least this often while running (status freshness).
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// Busy-ratio window.
const BUSY_WINDOW: Duration = Duration::from_millis(500);

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a live timespec; CLOCK_MONOTONIC is always available.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Counters that survive engine rebuilds (strategy changes).
struct Acc {
    rings: Vec<RingCounters>,
    devices: Vec<DeviceCounters>,
}

impl Acc {
    /// Adds the counters of `engine` (about to be replaced) to the accumulated ones.
    fn absorb(&mut self, engine: &PollEngine) {
        for (r, s) in engine.ring_stats().iter().enumerate() {
            self.rings[r].served += s.served;
            self.rings[r].budget_hits += s.budget_hits;
        }
        for (d, s) in engine.device_stats().iter().enumerate() {
            if self.devices.len() <= d {
                self.devices.resize(d + 1, DeviceCounters::default());
            }
            let a = &mut self.devices[d];
            a.wakeups += s.wakeups;
            a.rearms += s.rearms;
            a.budget_exhaustions += s.budget_exhaustions;
            a.passes += s.passes;
        }
    }

    /// Accumulated plus the running engine's counters.
    fn current(&self, engine: &PollEngine) -> (Vec<RingCounters>, Vec<DeviceCounters>) {
        let mut rings = self.rings.clone();
        for (r, s) in engine.ring_stats().iter().enumerate() {
            rings[r].served += s.served;
            rings[r].budget_hits += s.budget_hits;
        }
        let mut devices = self.devices.clone();
        for (d, s) in engine.device_stats().iter().enumerate() {
            if devices.len() <= d {
                devices.resize(d + 1, DeviceCounters::default());
            }
            let a = &mut devices[d];
            a.wakeups += s.wakeups;
            a.rearms += s.rearms;
            a.budget_exhaustions += s.budget_exhaustions;
            a.passes += s.passes;
        }
        (rings, devices)
    }
}

/// [`run_worker`] under a control plane: between poll rounds it applies the changes `ctl`
/// hands it (rules, layout, wake-up mode) and publishes counters.
///
/// The device may have more sockets than `layout` has rings (one per class, so that switching
/// to `sq` and back keeps every socket): sockets outside the running layout ("orphans", e.g.
/// classes 1.. under `sq`) get no new frames once the class→ring maps are rewritten, and what
/// they still hold is drained here, so a layout change loses no frame.
/// An ACL of `n` rules that forwarded traffic never matches (UDP to the limited broadcast
/// address, which the classifier hands to the kernel), so every frame walks all of them:
/// first-match classification, the cost model of a real rule list.
pub fn dummy_acl(n: usize) -> classify::RuleSet {
    let dst = IpPrefix::new(IpAddr::V4(std::net::Ipv4Addr::BROADCAST), 32).expect("valid /32");
    let rules = (0..n)
        .map(|i| Rule {
            proto: Some(17),
            dst: Some(dst),
            dport: PortRange::new(i as u16, i as u16),
            class: 1,
            ..Default::default()
        })
        .collect();
    classify::RuleSet::with_rules(rules, 0)
}

pub fn run_worker_ctl(
    dev: &mut Device,
    layout: &Layout,
    fwd: &RwLock<Forwarder>,
    opts: &WorkerOptions,
    stop: &AtomicBool,
    mut ctl: Option<WorkerCtl>,
) -> WorkerStats {
    let nsock = dev.num_rings();
    assert!(
        layout.rings.len() <= nsock,
        "layout has more rings than the device has sockets"
    );
    let mut layout = layout.clone();
    let mut engine = PollEngine::new(&layout);
    let acl = dummy_acl(opts.acl_rules as usize);
    let mut acc = Acc {
        rings: ctl::new_rings(nsock),
        devices: Vec::new(),
    };
    let mut wake = opts.wake;
    let mut spin_us = opts.spin_us;
    let timestamps = ctl
        .as_ref()
        .is_some_and(|c| c.flags & crate::ebpf::FLAG_TIMESTAMP != 0);
    let mut slow = SlowPath::new(opts);
    let mut last_poke = Instant::now() - Duration::from_secs(10);
    let t0 = Instant::now();
    let deadline = opts.max_duration.map(|d| t0 + d);
    let batch = opts.batch.max(1);
    let tx_batch = opts.tx_batch.max(1) as usize;
    let mut iter: u64 = 0;
    let mut changes: u64 = 0;
    let mut idle_ns: u64 = 0;
    let mut win = (Instant::now(), 0u64);
    let mut busy_ratio = 0.0;
    let mut last_publish = Instant::now();
    let mut classifier_stats: Vec<(u32, crate::ebpf::ClassifierStats)> = Vec::new();
    // Claimed control requests not applied yet (held back behind a rules job), and that job.
    let mut deferred: VecDeque<ctl::Request> = VecDeque::new();
    let mut rules_job: Option<RulesJob> = None;
    // The control eventfd may be readable (a kick not yet drained).
    let mut efd_dirty = true;
    macro_rules! publish_now {
        ($c:expr) => {{
            let snap = snapshot(
                dev,
                &engine,
                &layout,
                &acc,
                (wake, spin_us),
                (iter, busy_ratio, changes, idle_ns),
                (&slow.pass, &slow.drops, &slow.events(), &classifier_stats),
                t0,
            );
            $c.link.publish(snap);
        }};
    }
    loop {
        iter += 1;
        if (iter % 1024 == 0 || engine.is_idle())
            && (stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d))
        {
            break;
        }
        if let Some(c) = ctl.as_mut() {
            let mut publish = c.link.snapshot_wanted()
                || (iter % 256 == 0 || engine.is_idle()) && last_publish.elapsed() >= PUBLISH_EVERY;
            if c.link.has_pending() {
                deferred.extend(c.link.take().into_iter().filter(|r| r.claim()));
            }
            let mut acked = false;
            // A rules job finished: classifiers back, then its ack (published first).
            if rules_job.as_ref().is_some_and(|j| j.is_finished()) {
                let job = rules_job.take().expect("checked");
                let (req, r) = job.finish(dev, c);
                if r.is_ok() {
                    changes += 1;
                }
                publish_now!(c);
                req.done(r);
                acked = true;
            }
            // Apply in order; a rules change goes to a helper thread and holds the rest back.
            while rules_job.is_none() {
                let Some(req) = deferred.pop_front() else {
                    break;
                };
                if let Change::Rules {
                    images,
                    default_class,
                    flags,
                } = &req.change
                {
                    let (images, default_class, flags) = (images.clone(), *default_class, *flags);
                    rules_job = Some(RulesJob::start(dev, c, req, images, default_class, flags));
                    break;
                }
                let change = req.change.clone();
                let r = apply_change(
                    dev,
                    &mut engine,
                    &mut layout,
                    &mut acc,
                    &mut wake,
                    &mut spin_us,
                    c,
                    change,
                );
                if r.is_ok() {
                    changes += 1;
                }
                // Publish before the ack so `status`/`counters` show the change at once.
                publish_now!(c);
                req.done(r);
                acked = true;
            }
            if acked {
                publish = false;
                last_publish = Instant::now();
            }
            if publish {
                // Classifier counters only while no classifier is out on a rules job.
                if c.link.full_wanted() && rules_job.is_none() {
                    classifier_stats = dev
                        .ifindexes()
                        .into_iter()
                        .filter_map(|i| Some((i, dev.classifier(i)?.stats().ok()?)))
                        .collect();
                }
                let now = Instant::now();
                if now - win.0 >= BUSY_WINDOW {
                    let w = (now - win.0).as_nanos() as u64;
                    busy_ratio = 1.0 - ((idle_ns - win.1) as f64 / w as f64).clamp(0.0, 1.0);
                    win = (now, idle_ns);
                }
                publish_now!(c);
                last_publish = now;
            }
        }
        // Interrupts: an armed device with frames waiting is put on the poll list.
        for d in 0..engine.num_devices() {
            if !engine.is_scheduled(d) && engine.device_rings(d).iter().any(|&r| dev.backlog(r) > 0)
            {
                engine.wake(d);
            }
        }
        // Sockets outside the running layout: drain what they still hold (after a change).
        let mut orphan = None;
        for r in layout.rings.len()..nsock {
            if dev.backlog(r) > 0 {
                orphan = Some(r);
                break;
            }
        }
        let grant = engine.pick(&*dev);
        let ring = match (&grant, orphan) {
            (Some(g), _) => Some((g.ring, g.max.min(batch))),
            (None, Some(r)) => Some((r, batch)),
            (None, None) => None,
        };
        if let Some((ring, max)) = ring {
            let start = Instant::now();
            let now_ns = if timestamps { mono_ns() } else { 0 };
            let table = fwd.read().unwrap_or_else(|e| e.into_inner());
            let mut fwd_n = 0u64;
            let mut bytes = 0u64;
            let rc = &mut acc.rings[ring];
            let n = dev.recv_meta(ring, max, |frame, len, ingress, meta, spare| {
                spin_ns(opts.cost_ns);
                if opts.acl_rules > 0 {
                    std::hint::black_box(acl.classify(&frame[..len as usize], None, ingress));
                }
                bytes += len as u64;
                // `now_ns` is read once per grant, so a frame that arrived during the grant is
                // stamped after it: it spent ~0 in the ring. Values far off are not timestamps.
                if timestamps && meta != 0 && meta.abs_diff(now_ns) < 10_000_000_000 {
                    rc.observe(now_ns.saturating_sub(meta) as f64 * 1e-9);
                }
                match table.process(&mut frame[..len as usize], ingress) {
                    Verdict::Tx { ifindex, len } => {
                        fwd_n += 1;
                        Action::Tx { ifindex, len }
                    }
                    v => slow.handle(v, frame, len as usize, ingress, &table, spare),
                }
            });
            drop(table);
            let rc = &mut acc.rings[ring];
            rc.forwarded += fwd_n;
            rc.bytes += bytes;
            // Transmit, reap and refill. A copy-mode sendto has a fixed cost besides its per-frame
            // work, so frames of the lowest ring (BE) wait in the egress queue for `tx_batch`
            // frames. With a sendto after every grant, ll-wfq's 4-frame BE grants made 4.7 frames
            // per kick (sq: 31) and its MLFFR was 0.84x sq's (median of 5 rounds); with 16, 12
            // frames per kick and 0.99x (docs/measurements.md). A grant on a higher ring
            // transmits at once, and the egress queues are strict priority, so RT frames go out
            // ahead of any BE frames held back. Holding *every* ring's frames was tried earlier:
            // RT p50 rose from ~40 to 60-80 us because RT then waited behind long BE flushes.
            let lowest = layout.rings.len() <= 1
                || grant
                    .as_ref()
                    .is_some_and(|g| engine.device_rings(g.device).last() == Some(&g.ring));
            if !lowest || dev.egress_len() >= tx_batch {
                dev.flush();
            }
            let now = Instant::now();
            match grant {
                Some(g) => engine.complete(g, n, now.duration_since(start).as_nanos() as u64),
                None => rc.served += n as u64,
            }
            continue;
        }
        dev.flush();
        if !slow.to_resolve.is_empty() && last_poke.elapsed() > Duration::from_millis(200) {
            for a in slow.to_resolve.drain(..) {
                poke_neighbor(a);
            }
            last_poke = Instant::now();
        }
        if dev.egress_pending() {
            continue;
        }
        if let Some(c) = ctl.as_ref().filter(|_| wake != WakeMode::Busy) {
            // Clear the kick, then look again: a kick after this point wakes the poll() below.
            // Only after poll() saw the eventfd readable (or at the start): a read of an empty
            // eventfd costs a syscall per sleep for nothing.
            if efd_dirty || dev.take_extra_ready() {
                c.link.clear();
                efd_dirty = false;
            }
            if c.link.has_pending()
                || c.link.snapshot_wanted()
                || rules_job.as_ref().is_some_and(|j| j.is_finished())
            {
                continue;
            }
        }
        let idle_start = Instant::now();
        let efd = ctl.as_ref().map(|c| c.link.fd());
        let sleep = |dev: &mut Device| match efd {
            Some(fd) => dev.wait_with(50, fd),
            None => dev.wait(50),
        };
        match wake {
            WakeMode::Busy => std::hint::spin_loop(),
            WakeMode::Interrupt => {
                sleep(dev);
            }
            WakeMode::Adaptive => {
                let s = Instant::now();
                let spin = Duration::from_micros(spin_us);
                let mut got = false;
                while s.elapsed() < spin {
                    if (0..nsock).any(|r| dev.backlog(r) > 0)
                        || ctl
                            .as_ref()
                            .is_some_and(|c| c.link.has_pending() || c.link.snapshot_wanted())
                    {
                        got = true;
                        break;
                    }
                    std::hint::spin_loop();
                }
                if !got {
                    sleep(dev);
                }
            }
        }
        idle_ns += idle_start.elapsed().as_nanos() as u64;
    }
    // A rules job in flight completes (its thread ends after at most a grace period or two);
    // requests held back behind it are refused.
    if let Some(c) = ctl.as_mut() {
        if let Some(job) = rules_job.take() {
            let (req, r) = job.finish(dev, c);
            req.done(r);
        }
        for req in deferred.drain(..) {
            req.done(Err(
                "the router is stopping; nothing was changed".to_string()
            ));
        }
    }
    // Drain what is queued for Tx (bounded).
    let t = Instant::now();
    while dev.egress_pending() && t.elapsed() < Duration::from_millis(200) {
        dev.flush();
    }
    let (rings, devices) = acc.current(&engine);
    let names = ring_names(&layout, nsock);
    WorkerStats {
        rings: names,
        served: rings.iter().map(|r| r.served).collect(),
        forwarded: rings.iter().map(|r| r.forwarded).collect(),
        pass: PassReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), slow.pass[r.index()]))
            .collect(),
        drop: slow.drops.clone(),
        events: slow.events(),
        engine_wakeups: devices.iter().map(|d| d.wakeups).sum(),
        engine_rearms: devices.iter().map(|d| d.rearms).sum(),
        budget_exhaustions: devices.iter().map(|d| d.budget_exhaustions).sum(),
        sleeps: dev.sleeps,
        poll_wakeups: dev.wakeups,
        ports: dev.port_stats(),
        elapsed_s: t0.elapsed().as_secs_f64(),
    }
}

/// Names of the sockets: the layout's ring names, then `ring<k>` for sockets outside it.
fn ring_names(layout: &Layout, nsock: usize) -> Vec<String> {
    (0..nsock)
        .map(|k| {
            layout
                .rings
                .get(k)
                .map(|r| r.name.clone())
                .unwrap_or_else(|| format!("ring{k}"))
        })
        .collect()
}

/// User-space pass and drop counters, classifier counters per ifindex.
type CounterRefs<'a> = (
    &'a [u64],
    &'a [(String, u64)],
    &'a [(String, u64)],
    &'a [(u32, crate::ebpf::ClassifierStats)],
);

#[allow(clippy::too_many_arguments)]
fn snapshot(
    dev: &Device,
    engine: &PollEngine,
    layout: &Layout,
    acc: &Acc,
    (wake, spin_us): (WakeMode, u64),
    (poll_rounds, busy_ratio, changes, idle_ns): (u64, f64, u64, u64),
    (pass, drops, events, cls): CounterRefs<'_>,
    t0: Instant,
) -> WorkerSnapshot {
    let (mut rings, devices) = acc.current(engine);
    for (r, (full, other)) in dev.ring_kernel_drops().into_iter().enumerate() {
        if let Some(rc) = rings.get_mut(r) {
            rc.drops = full;
            rc.kernel_rx_dropped = other;
            rc.backlog = dev.backlog(r) as u64;
        }
    }
    WorkerSnapshot {
        seq: 0,
        strategy: Some(layout.strategy),
        layout_rings: layout.rings.iter().map(|r| r.name.clone()).collect(),
        class_to_ring: layout.class_to_ring.clone(),
        device_budget: layout.device_budget,
        ring_budgets: layout.rings.iter().map(|r| r.budget).collect(),
        wake: Some(wake),
        spin_us,
        rings,
        devices,
        poll_rounds,
        busy_ratio,
        busy_s: (t0.elapsed().as_secs_f64() - idle_ns as f64 * 1e-9).max(0.0),
        sleeps: dev.sleeps,
        poll_wakeups: dev.wakeups,
        pass: PassReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), pass[r.index()]))
            .collect(),
        drop: drops.to_vec(),
        events: events.to_vec(),
        ports: dev.port_stats(),
        classifier: cls.to_vec(),
        changes,
        elapsed_s: t0.elapsed().as_secs_f64(),
    }
}

/// Applies one change between poll rounds; on `Err` nothing was changed (rules: restored).
#[allow(clippy::too_many_arguments)]
fn apply_change(
    dev: &mut Device,
    engine: &mut PollEngine,
    layout: &mut Layout,
    acc: &mut Acc,
    wake: &mut WakeMode,
    spin_us: &mut u64,
    c: &mut WorkerCtl,
    change: Change,
) -> Result<(), String> {
    match change {
        Change::Batch(v) => {
            for ch in v {
                apply_change(dev, engine, layout, acc, wake, spin_us, c, ch)?;
            }
            Ok(())
        }
        Change::Wake {
            wake: w,
            spin_us: s,
        } => {
            *wake = w;
            *spin_us = s;
            Ok(())
        }
        Change::Sched(new) => {
            if new.rings.len() > dev.num_rings() || new.class_to_ring.len() > dev.num_rings() {
                return Err(format!(
                    "the layout needs {} rings; the router opened {} sockets (restart to change the classes)",
                    new.rings.len(),
                    dev.num_rings()
                ));
            }
            let ifs = dev.ifindexes();
            // New frames go to the new rings first; what sits in the old ones is served by the
            // new engine (same socket ids) or drained as orphans.
            for (k, &i) in ifs.iter().enumerate() {
                let r = dev
                    .classifier_mut(i)
                    .ok_or_else(|| format!("ifindex {i}: no classifier"))
                    .and_then(|cl| {
                        cl.set_class_rings(&new.class_to_ring)
                            .map_err(|e| format!("{e:#}"))
                    });
                if let Err(e) = r {
                    // restore the interfaces already switched
                    for &j in &ifs[..k] {
                        if let Some(cl) = dev.classifier_mut(j) {
                            let _ = cl.set_class_rings(&layout.class_to_ring);
                        }
                    }
                    return Err(format!("class→ring map: {e}"));
                }
            }
            acc.absorb(engine);
            *engine = PollEngine::new(&new);
            *layout = new;
            Ok(())
        }
        Change::Rules {
            images,
            default_class,
            flags,
        } => {
            let ifs = dev.ifindexes();
            for (k, &i) in ifs.iter().enumerate() {
                let r = dev
                    .classifier_mut(i)
                    .ok_or_else(|| format!("ifindex {i}: no classifier"))
                    .and_then(|cl| {
                        cl.update_rules(&c.rules, &images, default_class, flags)
                            .map_err(|e| format!("{e:#}"))
                    });
                if let Err(e) = r {
                    for &j in &ifs[..=k] {
                        if let Some(cl) = dev.classifier_mut(j) {
                            let _ = cl.update_rules(&images, &c.rules, c.default_class, c.flags);
                        }
                    }
                    return Err(format!("rules: {e}"));
                }
            }
            c.rules = images;
            c.default_class = default_class;
            c.flags = flags;
            Ok(())
        }
    }
}

/// A rule update running on a helper thread: the classifiers are taken out of the device (they
/// stay attached and keep classifying) because `Classifier::update_rules` may wait for an RCU
/// grace period before reusing a rule-table half — 10–35 ms on a busy VM, per interface. Done
/// on the worker, that wait left the rings unserved long enough for a 512-slot ring to overflow
/// at 14 kpps (the `changes_under_traffic` flake). Later changes wait behind the job, so
/// changes still apply in order; the job's thread wakes the worker when it is done.
struct RulesJob {
    req: ctl::Request,
    images: Vec<[u8; 64]>,
    default_class: u32,
    flags: u32,
    /// The thread, or the outcome when the update ran on the worker (no thread).
    handle: Result<std::thread::JoinHandle<JobOut>, JobOut>,
}

type Taken = Vec<(u32, Option<crate::ebpf::Classifier>)>;
type JobOut = (Taken, Result<(), String>);

impl RulesJob {
    fn start(
        dev: &mut Device,
        c: &WorkerCtl,
        req: ctl::Request,
        images: Vec<[u8; 64]>,
        default_class: u32,
        flags: u32,
    ) -> RulesJob {
        let old = (c.rules.clone(), c.default_class, c.flags);
        let new = (images.clone(), default_class, flags);
        let link = c.link.clone();
        // The work goes over a channel, so that the classifiers are still ours if the thread
        // cannot be started (then the update runs here, as before).
        let (tx, rx) = std::sync::mpsc::channel::<Taken>();
        let spawned = std::thread::Builder::new()
            .name("llr-rules".into())
            .spawn(move || {
                let mut taken = rx.recv().unwrap_or_default();
                let r = update_rules_all(&mut taken, &old, &new);
                link.kick();
                (taken, r)
            });
        let taken: Taken = dev
            .ifindexes()
            .into_iter()
            .map(|i| (i, dev.take_classifier(i)))
            .collect();
        let handle = match spawned {
            Ok(h) => {
                tx.send(taken).expect("the rules thread waits for its work");
                Ok(h)
            }
            Err(e) => {
                tracing::warn!("rules update thread: {e}; updating on the worker");
                let mut taken = taken;
                let old = (c.rules.clone(), c.default_class, c.flags);
                let r = update_rules_all(&mut taken, &old, &(images.clone(), default_class, flags));
                Err((taken, r))
            }
        };
        RulesJob {
            req,
            images,
            default_class,
            flags,
            handle,
        }
    }

    fn is_finished(&self) -> bool {
        self.handle.as_ref().map_or(true, |h| h.is_finished())
    }

    /// Joins the thread, gives the classifiers back and records the new rules on success.
    fn finish(self, dev: &mut Device, c: &mut WorkerCtl) -> (ctl::Request, Result<(), String>) {
        let (back, r) = match self.handle {
            Ok(h) => h.join().unwrap_or_else(|_| {
                (
                    Vec::new(),
                    Err("rules: the update thread panicked".to_string()),
                )
            }),
            Err(out) => out,
        };
        for (i, cl) in back {
            if let Some(cl) = cl {
                if dev.put_classifier(i, cl).is_some() {
                    tracing::error!("ifindex {i}: classifier could not be put back");
                }
            }
        }
        if r.is_ok() {
            c.rules = self.images;
            c.default_class = self.default_class;
            c.flags = self.flags;
        }
        (self.req, r)
    }
}

/// Rules, default class, flags.
type RuleSet = (Vec<[u8; 64]>, u32, u32);

/// Updates the rules of every classifier from `old` to `new`; on an error restores those
/// already updated (nothing changed then).
fn update_rules_all(cls: &mut Taken, old: &RuleSet, new: &RuleSet) -> Result<(), String> {
    for k in 0..cls.len() {
        let (i, cl) = &mut cls[k];
        let r = match cl.as_mut() {
            None => Err(format!("ifindex {i}: no classifier")),
            Some(cl) => cl
                .update_rules(&old.0, &new.0, new.1, new.2)
                .map_err(|e| format!("{e:#}")),
        };
        if let Err(e) = r {
            for (_, cl) in cls[..=k].iter_mut() {
                if let Some(cl) = cl.as_mut() {
                    let _ = cl.update_rules(&new.0, &old.0, old.1, old.2);
                }
            }
            return Err(format!("rules: {e}"));
        }
    }
    Ok(())
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

#[cfg(test)]
mod acl_tests {
    use super::*;
    use llr_core::wire::build::{frame, FrameSpec};

    #[test]
    fn dummy_acl_matches_no_forwarded_traffic_but_really_checks() {
        let acl = dummy_acl(100);
        let unicast = frame(&FrameSpec {
            dst: "10.0.0.1".parse().unwrap(),
            protocol: 17,
            dst_port: 42,
            ..Default::default()
        });
        assert_eq!(
            acl.classify(&unicast, None, 1),
            0,
            "forwarded traffic never matches"
        );
        let bcast = frame(&FrameSpec {
            dst: "255.255.255.255".parse().unwrap(),
            protocol: 17,
            dst_port: 42,
            ..Default::default()
        });
        assert_eq!(
            acl.classify(&bcast, None, 1),
            1,
            "the rules are real, not skipped"
        );
        assert_eq!(dummy_acl(0).classify(&bcast, None, 1), 0);
    }
}
