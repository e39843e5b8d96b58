//! A worker's counters: those that survive engine rebuilds, the snapshots it publishes to the
//! control plane ([`WorkerSnapshot`]) and the report it returns on exit ([`WorkerStats`]).

use std::time::{Duration, Instant};

use llr_core::fwd::PassReason;
use llr_core::sched::{Layout, PollEngine};

use super::ctl::{self, DeviceCounters, RingCounters, WorkerSnapshot};
use super::Worker;
use llr_io::xsk::PortStats;

/// Up to this many flows every snapshot carries every flow; beyond, snapshots carry the flows
/// that have seen traffic, and all of them only when `flow.list` asks (copying 10 000 idle
/// flows' counters into every snapshot would cost the worker and every scrape).
const FLOWS_ALWAYS_PUBLISHED: usize = 64;

/// Busy-ratio window.
const BUSY_WINDOW: Duration = Duration::from_millis(500);

/// Counters of one worker, printed on exit.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WorkerStats {
    /// Ring names (layout order).
    pub rings: Vec<String>,
    /// Frames served per ring.
    pub served: Vec<u64>,
    /// Frames forwarded (queued for Tx) per ring.
    pub forwarded: Vec<u64>,
    /// Grants per ring and the worker's CPU time in them, ns (cost per grant and per frame).
    pub grants: Vec<u64>,
    pub grant_ns: Vec<u64>,
    /// Grants per ring that ended in a transmit flush.
    #[serde(default)]
    pub flushes: Vec<u64>,
    /// Per ring: the worker's time inside those flushes, ns, and the frames they sent.
    #[serde(default)]
    pub flush_ns: Vec<u64>,
    #[serde(default)]
    pub flushed: Vec<u64>,
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

impl WorkerStats {
    /// The counters of several workers added up (ports per interface, named counters by
    /// name); ring names from the first, elapsed time the longest.
    pub fn total(all: &[WorkerStats]) -> WorkerStats {
        let mut t = all.first().cloned().unwrap_or_default();
        for w in all.iter().skip(1) {
            add_each(&mut t.served, &w.served);
            add_each(&mut t.forwarded, &w.forwarded);
            add_each(&mut t.grants, &w.grants);
            add_each(&mut t.grant_ns, &w.grant_ns);
            add_each(&mut t.flushes, &w.flushes);
            add_each(&mut t.flush_ns, &w.flush_ns);
            add_each(&mut t.flushed, &w.flushed);
            add_named(&mut t.pass, &w.pass);
            add_named(&mut t.drop, &w.drop);
            add_named(&mut t.events, &w.events);
            t.engine_wakeups += w.engine_wakeups;
            t.engine_rearms += w.engine_rearms;
            t.budget_exhaustions += w.budget_exhaustions;
            t.sleeps += w.sleeps;
            t.poll_wakeups += w.poll_wakeups;
            t.ports.extend(w.ports.iter().cloned());
            t.elapsed_s = t.elapsed_s.max(w.elapsed_s);
        }
        t.ports = PortStats::per_interface(&t.ports);
        t
    }
}

fn add_each(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Adds `(name, count)` pairs by name.
pub(crate) fn add_named(a: &mut Vec<(String, u64)>, b: &[(String, u64)]) {
    for (n, c) in b {
        match a.iter_mut().find(|(m, _)| m == n) {
            Some(x) => x.1 += c,
            None => a.push((n.clone(), *c)),
        }
    }
}

impl std::fmt::Display for WorkerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "  elapsed {:.3} s", self.elapsed_s)?;
        for (i, r) in self.rings.iter().enumerate() {
            writeln!(
                f,
                "  ring {r:<8} served {:>10}  forwarded {:>10}  grants {:>9}  tx flushes {:>9} ({} frames, {:.3} s)",
                self.served[i],
                self.forwarded[i],
                self.grants.get(i).copied().unwrap_or(0),
                self.flushes.get(i).copied().unwrap_or(0),
                self.flushed.get(i).copied().unwrap_or(0),
                self.flush_ns.get(i).copied().unwrap_or(0) as f64 * 1e-9
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
                "  ifindex {:<3} rx {:>10} tx {:>10} tx kicks {} ({} refused) egress drops {} kernel: rx dropped {} ring full {} fill empty {}",
                p.ifindex, p.rx, p.tx, p.tx_kicks, p.tx_kick_errors, p.egress_drops, p.kernel_rx_dropped, p.kernel_rx_ring_full, p.kernel_fill_empty
            )?;
        }
        Ok(())
    }
}

/// The worker's own counters (the sockets and the slow path count the rest).
pub(super) struct Counters {
    /// Per socket index: accumulated over engine rebuilds (strategy changes), plus what the
    /// worker counts itself (bytes, forwarded, latency).
    pub(super) rings: Vec<RingCounters>,
    /// Per engine device id, accumulated over engine rebuilds.
    devices: Vec<DeviceCounters>,
    pub(super) poll_rounds: u64,
    /// Control changes applied.
    pub(super) changes: u64,
    /// Time spent waiting for work.
    pub(super) idle_ns: u64,
    /// The longest grant or flow turn, ns: the worker's longest stall (it does nothing else
    /// meanwhile, and takes no lock; a long one is the CPU taken away).
    pub(super) stall_max_ns: u64,
    /// Start of the current busy-ratio window and `idle_ns` then; the last window's ratio.
    busy_window: (Instant, u64),
    busy_ratio: f64,
    started: Instant,
}

impl Counters {
    pub(super) fn new(nsock: usize) -> Counters {
        let now = Instant::now();
        Counters {
            rings: ctl::new_rings(nsock),
            devices: Vec::new(),
            poll_rounds: 0,
            changes: 0,
            idle_ns: 0,
            stall_max_ns: 0,
            busy_window: (now, 0),
            busy_ratio: 0.0,
            started: now,
        }
    }

    /// Records the duration of a grant or flow turn.
    #[inline]
    pub(super) fn stall(&mut self, ns: u64) {
        self.stall_max_ns = self.stall_max_ns.max(ns);
    }

    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// Adds the counters of `engine` (about to be replaced) to the accumulated ones.
    pub(super) fn absorb(&mut self, engine: &PollEngine) {
        add_engine(&mut self.rings, &mut self.devices, engine);
    }

    /// Accumulated plus the running engine's counters.
    fn current(&self, engine: &PollEngine) -> (Vec<RingCounters>, Vec<DeviceCounters>) {
        let (mut rings, mut devices) = (self.rings.clone(), self.devices.clone());
        add_engine(&mut rings, &mut devices, engine);
        (rings, devices)
    }

    /// Closes the busy-ratio window when it is long enough.
    fn update_busy_ratio(&mut self, now: Instant) {
        let (start, idle_then) = self.busy_window;
        if now - start >= BUSY_WINDOW {
            let w = (now - start).as_nanos() as u64;
            let idle = (self.idle_ns - idle_then) as f64 / w as f64;
            self.busy_ratio = 1.0 - idle.clamp(0.0, 1.0);
            self.busy_window = (now, self.idle_ns);
        }
    }
}

fn add_engine(rings: &mut [RingCounters], devices: &mut Vec<DeviceCounters>, engine: &PollEngine) {
    for (r, s) in engine.ring_stats().iter().enumerate() {
        rings[r].served += s.served;
        rings[r].budget_hits += s.budget_hits;
        rings[r].grants += s.grants;
        rings[r].grant_ns += s.cost_ns;
    }
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
}

impl Worker<'_> {
    /// Publishes a snapshot to the control plane (if there is one).
    pub(super) fn publish(&self) {
        if let Some(c) = &self.control {
            c.ctl.link.publish(self.snapshot());
        }
    }

    /// The periodic publication: the busy ratio, then the snapshot.
    pub(super) fn publish_counters(&mut self) {
        let now = Instant::now();
        self.counters.update_busy_ratio(now);
        self.publish();
        if let Some(c) = self.control.as_mut() {
            c.last_publish = now;
        }
    }

    fn snapshot(&self) -> WorkerSnapshot {
        let (xsk, c, layout) = (&*self.xsk, &self.counters, &self.layout);
        let (mut rings, devices) = c.current(&self.engine);
        for (r, (full, other)) in xsk.ring_kernel_drops().into_iter().enumerate() {
            if let Some(rc) = rings.get_mut(r) {
                rc.drops = full;
                rc.kernel_rx_dropped = other;
                rc.backlog = xsk.waiting(r) as u64;
            }
        }
        let elapsed_s = c.started.elapsed().as_secs_f64();
        let (flows, flows_total, flow_switches, flows_complete) = match self.flow_path.as_ref() {
            Some(fp) => {
                let total = fp.flows.sched.len();
                let all = total <= FLOWS_ALWAYS_PUBLISHED
                    || self
                        .control
                        .as_ref()
                        .is_some_and(|c| c.ctl.link.flow_list_wanted());
                let list = if all {
                    fp.flows.list()
                } else {
                    fp.flows.list_used()
                };
                (list, total, fp.flows.sched.switches, all)
            }
            None => (Vec::new(), 0, 0, true),
        };
        WorkerSnapshot {
            flows,
            flows_total,
            flow_switches,
            flows_complete,
            seq: 0,
            strategy: Some(layout.strategy),
            layout_rings: layout.rings.iter().map(|r| r.name.clone()).collect(),
            class_to_ring: layout.class_to_ring.clone(),
            device_budget: layout.device_budget,
            ring_budgets: self.engine.ring_budgets().to_vec(),
            auto_budget: self.auto.as_ref().and_then(|a| a.last()),
            wake: Some(self.wake),
            spin_us: self.spin_us,
            rings,
            devices,
            poll_rounds: c.poll_rounds,
            stall_max_ns: c.stall_max_ns,
            busy_ratio: c.busy_ratio,
            busy_s: (elapsed_s - c.idle_ns as f64 * 1e-9).max(0.0),
            sleeps: xsk.sleeps,
            poll_wakeups: xsk.wakeups,
            pass: self.pass_counts(),
            drop: self.slow.drops.clone(),
            events: self.slow.events(),
            ports: PortStats::per_interface(&xsk.port_stats()),
            changes: c.changes,
            elapsed_s,
        }
    }

    /// The report on exit.
    pub fn report(&self) -> WorkerStats {
        let xsk = &*self.xsk;
        let (rings, devices) = self.counters.current(&self.engine);
        WorkerStats {
            rings: ring_names(&self.layout, xsk.num_rings()),
            served: rings.iter().map(|r| r.served).collect(),
            forwarded: rings.iter().map(|r| r.forwarded).collect(),
            grants: rings.iter().map(|r| r.grants).collect(),
            grant_ns: rings.iter().map(|r| r.grant_ns).collect(),
            flushes: rings.iter().map(|r| r.flushes).collect(),
            flush_ns: rings.iter().map(|r| r.flush_ns).collect(),
            flushed: rings.iter().map(|r| r.flushed).collect(),
            pass: self.pass_counts(),
            drop: self.slow.drops.clone(),
            events: self.slow.events(),
            engine_wakeups: devices.iter().map(|d| d.wakeups).sum(),
            engine_rearms: devices.iter().map(|d| d.rearms).sum(),
            budget_exhaustions: devices.iter().map(|d| d.budget_exhaustions).sum(),
            sleeps: xsk.sleeps,
            poll_wakeups: xsk.wakeups,
            ports: PortStats::per_interface(&xsk.port_stats()),
            elapsed_s: self.counters.started.elapsed().as_secs_f64(),
        }
    }

    fn pass_counts(&self) -> Vec<(String, u64)> {
        PassReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), self.slow.pass[r.index()]))
            .collect()
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
