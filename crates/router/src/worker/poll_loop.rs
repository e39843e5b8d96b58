//! The [`Worker`]: one core's poll loop over the AF_XDP sockets of every port.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llr_core::classify;
use llr_core::fwd::{
    DropReason, Forwarder, ForwarderGuard, IcmpKind, Reader, RouteHint, SharedForwarder, Verdict,
    ROUTE_BATCH,
};
use llr_core::sched::{AutoBudget, Grant, Layout, PollEngine, RingId, RingView, TxPolicy};

use super::changes::Control;
use super::flow_path::FlowPath;
use super::slow_path::SlowPath;
use super::stats::Counters;
use super::{dummy_acl, WorkerCtl, WorkerOptions};
use llr_io::ebpf::FLAG_TIMESTAMP;
use llr_io::sys::mono_ns;
use llr_io::xsk::{Action, Device, WakeMode};

/// Publish a snapshot at least this often while running (status freshness).
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// Longest sleep in poll(), so that the stop flag and the deadline are seen.
const SLEEP_MS: i32 = 50;
/// The sleep while frames wait for a neighbour's address.
const PENDING_SLEEP_MS: i32 = 2;
/// `budget = "auto"` looks at the clock every this many poll rounds (its windows are ~100 ms).
const AUTO_EVERY_ROUNDS: u64 = 64;
/// Ring-latency samples further than this from the worker's clock are not timestamps.
pub(super) const MAX_STAMP_AGE_NS: u64 = 10_000_000_000;

/// One worker: the poll engine over the AF_XDP sockets, the forwarder per frame, the slow path,
/// and (optionally) the control plane's changes between poll rounds.
pub struct Worker<'a> {
    /// The AF_XDP sockets of every port: the rings the engine schedules.
    pub(super) xsk: &'a mut Device,
    pub(super) fwd: &'a SharedForwarder,
    /// This worker's registration with the route table it reads (see [`Worker::table`]).
    reader: Option<Reader>,
    pub(super) opts: &'a WorkerOptions,
    pub(super) layout: Layout,
    pub(super) engine: PollEngine,
    /// The artificial per-frame ACL (`opts.acl_rules`).
    pub(super) acl: classify::RuleSet,
    pub(super) wake: WakeMode,
    pub(super) spin_us: u64,
    /// The classifiers stamp frames (`FLAG_TIMESTAMP`): measure time in ring.
    pub(super) timestamps: bool,
    /// Frames per grant at most, and lowest-ring frames held back before a transmit kick.
    batch: u32,
    /// After which grants the egress queue goes to the kernel (`tx-batch`).
    pub(super) tx: TxPolicy,
    deadline: Option<Instant>,
    pub(super) slow: SlowPath,
    pub(super) counters: Counters,
    pub(super) control: Option<Control>,
    /// Flows on: the flow scheduler decides between the input (grants) and flow turns.
    pub(super) flow_path: Option<FlowPath>,
    /// `budget = "auto"`: sets the engine's lower ring budgets from the measured RT load.
    pub(super) auto: Option<AutoBudget>,
    /// The clock at the end of the last grant while the loop goes straight on to the next: it
    /// is that grant's start, so a busy worker reads the clock once per grant, not twice (a
    /// vDSO read is ~20 ns here, a tenth of a 4-frame grant's fixed cost). The pick and the
    /// loop's checks in between are charged to the grant they lead to.
    last_end: Option<u64>,
    /// The routes of the port batch being served (`Forwarder::route_many`), and which frame of
    /// it is next: kept from grant to grant so that no grant clears 64 of them first.
    route_hints: RefCell<[RouteHint; ROUTE_BATCH]>,
    next_hint: Cell<usize>,
}

impl<'a> Worker<'a> {
    /// A worker serving `layout` on `xsk`, which must have at least as many sockets per port
    /// as `layout` has rings.
    pub fn new(
        xsk: &'a mut Device,
        layout: &Layout,
        fwd: &'a SharedForwarder,
        opts: &'a WorkerOptions,
        ctl: Option<WorkerCtl>,
    ) -> Worker<'a> {
        assert!(
            layout.rings.len() <= xsk.num_rings(),
            "layout has more rings than the device has sockets"
        );
        let nsock = xsk.num_rings();
        let counters = Counters::new(nsock);
        // Checked when the configuration was resolved: building it again cannot fail.
        let flows = opts.flows.as_ref().map(|f| {
            f.build()
                .expect("flows were checked when the configuration was resolved")
        });
        Worker {
            xsk,
            fwd,
            reader: None,
            opts,
            layout: layout.clone(),
            engine: PollEngine::new(layout),
            acl: dummy_acl(opts.acl_rules as usize),
            wake: opts.wake,
            spin_us: opts.spin_us,
            timestamps: ctl.as_ref().is_some_and(|c| c.flags & FLAG_TIMESTAMP != 0),
            batch: opts.batch.max(1),
            tx: TxPolicy::new(opts.tx_batch as usize).with_hold(opts.tx_hold_ns),
            deadline: opts.max_duration.map(|d| counters.started() + d),
            slow: SlowPath::new(opts),
            counters,
            control: ctl.map(Control::new),
            flow_path: flows.map(FlowPath::new),
            auto: AutoBudget::new(layout),
            last_end: None,
            route_hints: RefCell::new([RouteHint::NONE; ROUTE_BATCH]),
            next_hint: Cell::new(0),
        }
    }

    /// Runs until `stop` is set or the deadline (`opts.max_duration`) passes, then settles the
    /// control plane's requests and drains the egress queues.
    pub fn run(&mut self, stop: &AtomicBool) {
        loop {
            self.counters.poll_rounds += 1;
            if self.should_stop(stop) {
                break;
            }
            if self.serve_control() {
                self.last_end = None;
            }
            if self.auto.is_some() && self.counters.poll_rounds % AUTO_EVERY_ROUNDS == 0 {
                self.tune_budgets();
            }
            self.take_interrupts();
            if !self.slow.pending.is_empty() && self.counters.poll_rounds % 256 == 0 {
                self.release_pending(true);
            }
            if self.flow_path.is_some() {
                if self.flow_round() {
                    continue;
                }
            } else if let Some((grant, ring, max)) = self.next_grant() {
                self.serve_grant(grant, ring, max);
                continue;
            }
            // Out of work: transmit everything held back, then sleep unless something came up.
            self.last_end = None;
            self.xsk.flush();
            self.tx.flushed();
            self.slow.resolve_neighbors();
            self.release_pending(true);
            if self.xsk.egress_pending() || self.control_needs_attention() {
                continue;
            }
            self.idle();
        }
        self.shut_down();
    }

    /// `budget = "auto"`: a closed measurement window sets the budgets of the rings under it.
    fn tune_budgets(&mut self) {
        let Some(a) = self.auto.as_mut() else {
            return;
        };
        if let Some(b) = a.tick(mono_ns(), self.engine.ring_stats()) {
            for &r in a.rings() {
                self.engine.set_ring_budget(r, b);
            }
        }
    }

    /// The stop flag and the deadline are checked every 1024 rounds and whenever idle.
    #[inline]
    fn should_stop(&self, stop: &AtomicBool) -> bool {
        (self.counters.poll_rounds % 1024 == 0 || self.engine.is_idle())
            && (stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d))
    }

    /// The "interrupts": every armed engine device with frames waiting goes on the poll list.
    #[inline]
    pub(super) fn take_interrupts(&mut self) {
        for d in 0..self.engine.num_devices() {
            if !self.engine.is_scheduled(d)
                && self
                    .engine
                    .device_rings(d)
                    .iter()
                    .any(|&r| self.xsk.backlog(r) > 0)
            {
                self.engine.wake(d);
            }
        }
    }

    /// What to serve next: the engine's grant (capped at `batch`), else a socket outside the
    /// running layout that still holds frames from before a layout change (no grant).
    #[inline]
    pub(super) fn next_grant(&mut self) -> Option<(Option<Grant>, RingId, u32)> {
        let orphan =
            (self.layout.rings.len()..self.xsk.num_rings()).find(|&r| self.xsk.backlog(r) > 0);
        match (self.engine.pick(&*self.xsk), orphan) {
            (Some(g), _) => Some((Some(g), g.ring, g.max.min(self.batch))),
            (None, Some(r)) => Some((None, r, self.batch)),
            (None, None) => None,
        }
    }

    /// Serves one grant: up to `max` frames of `ring` through the forwarder (the slow path
    /// for the rest), then transmits and reports the work to the engine. `grant` is `None`
    /// for an orphan socket, which the engine does not schedule.
    fn serve_grant(&mut self, grant: Option<Grant>, ring: RingId, max: u32) {
        // Held frames leave as soon as their neighbour is known, ahead of newer frames to it.
        if !self.slow.pending.is_empty() {
            self.release_pending(false);
        }
        let start = self.last_end.take().unwrap_or_else(mono_ns);
        let timestamps = self.timestamps;
        // The ring latency's "now" is the grant's start: a frame that arrived since is stamped
        // after it and counts as ~0 in the ring.
        let now_ns = start;
        let table = self.table();
        let (cost_ns, acl_rules, acl) = (self.opts.cost_ns, self.opts.acl_rules, &self.acl);
        let slow = &mut self.slow;
        slow.hold_ok = true;
        let rc = &mut self.counters.rings[ring];
        let (mut forwarded, mut bytes) = (0u64, 0u64);
        let (fwd_n, nbytes, ring_counters) = (&mut forwarded, &mut bytes, &mut *rc);
        let fwd: &Forwarder = &table;
        // Each port's batch is looked up together before its frames are processed, in the same
        // order; a frame takes its hint by position (a hint for another destination is not
        // used: `process_routed` checks).
        let (hints, next_hint) = (&self.route_hints, &self.next_hint);
        // `move`: the per-grant scalars travel in the closure by value, not behind a reference.
        let n = self.xsk.recv_warmed(
            ring,
            max,
            |frames| {
                fwd.route_many(frames, &mut hints.borrow_mut()[..]);
                next_hint.set(0);
            },
            move |frame, len, ingress, stamp, spare| {
                spin_ns(cost_ns);
                if acl_rules > 0 {
                    std::hint::black_box(acl.classify(&frame[..len as usize], None, ingress));
                }
                *nbytes += len as u64;
                if timestamps && stamp != 0 && stamp.abs_diff(now_ns) < MAX_STAMP_AGE_NS {
                    ring_counters.observe(now_ns.saturating_sub(stamp) as f64 * 1e-9);
                }
                let at = next_hint.replace(next_hint.get() + 1);
                let verdict = {
                    let h = hints.borrow();
                    let hint = h.get(at).unwrap_or(&RouteHint::NONE);
                    fwd.process_routed(&mut frame[..len as usize], ingress, hint)
                };
                match verdict {
                    Verdict::Tx { ifindex, len } => {
                        *fwd_n += 1;
                        Action::Tx { ifindex, len }
                    }
                    v @ Verdict::Redirect { .. } => {
                        *fwd_n += 1;
                        slow.handle(v, frame, len as usize, ingress, fwd, spare)
                    }
                    v => slow.handle(v, frame, len as usize, ingress, fwd, spare),
                }
            },
        );
        drop(table);
        self.slow.hold_ok = false;
        if self.slow.holding > 0 {
            let mut held = Vec::new();
            self.xsk.take_held(&mut held);
            self.slow.park(held, start);
        }
        let rc = &mut self.counters.rings[ring];
        rc.forwarded += forwarded;
        rc.bytes += bytes;
        // A copy-mode sendto has a fixed cost besides its per-frame work: frames of the lowest
        // ring (BE) wait for `tx_batch`, a higher ring's for the batch or `tx-hold-us`, whichever
        // comes first (`TxPolicy`). The egress queues are strict priority, so RT frames go out
        // ahead of any BE frames in the same flush (docs/datapath.md, "Transmit", has the numbers). An
        // orphan socket's frames go like a higher ring's.
        let lowest = self.layout.rings.len() <= 1
            || grant.is_some_and(|g| TxPolicy::is_lowest(&self.engine, &g));
        // With a hold the decision reads the clock: that read is the flush's start, or the
        // grant's end when there is no flush.
        let (due, now) = self.flush_due(lowest);
        let end = if due {
            self.flush_for(ring, now)
        } else {
            now.unwrap_or_else(mono_ns)
        };
        self.last_end = Some(end);
        let ns = end.saturating_sub(start);
        self.counters.stall(ns);
        match grant {
            Some(g) => self.engine.complete(g, n, ns),
            None => self.counters.rings[ring].served += n as u64,
        }
    }

    /// Hands the egress queues to the kernel, counting the flush, its time and its frames to
    /// `ring` (the grant's, or a flow turn's highest); `now` is the flush's start if the
    /// caller has just read the clock. Returns the flush's end.
    pub(super) fn flush_for(&mut self, ring: RingId, now: Option<u64>) -> u64 {
        let t = now.unwrap_or_else(mono_ns);
        let n = self.xsk.flush();
        let end = mono_ns();
        if let Some(rc) = self.counters.rings.get_mut(ring) {
            rc.flushes += 1;
            rc.flush_ns += end.saturating_sub(t);
            rc.flushed += n as u64;
        }
        end
    }

    /// Whether the egress queue goes to the kernel now, after a grant or flow turn on the
    /// lowest ring (`lowest`) or a higher one (`TxPolicy`); the clock is read only with a hold,
    /// and that reading is returned for the caller to reuse.
    #[inline]
    pub(super) fn flush_due(&mut self, lowest: bool) -> (bool, Option<u64>) {
        let now = (self.tx.hold_ns() > 0).then(mono_ns);
        let due = (self.tx).flush_after_at(lowest, self.xsk.egress_len(), now.unwrap_or(0));
        (due, now)
    }

    /// The forwarder for one grant or flow turn. Getting here is the worker's quiescent point
    /// for the route table (it holds nothing of it between grants), so the table may reuse the
    /// memory of prefixes removed before now; a table the worker has not read yet (a new one
    /// published by the mirror) registers it first.
    #[inline]
    pub(super) fn table(&mut self) -> ForwarderGuard {
        let t = self.fwd.load();
        match &self.reader {
            Some(r) if t.routes.is_reader(r) => r.quiescent(),
            _ => self.reader = Some(t.routes.reader()),
        }
        t
    }

    /// Whether the control plane needs the worker before it sleeps. Clears the eventfd first,
    /// then looks: a kick after this point wakes the poll() of [`Worker::idle`]. The eventfd is
    /// read only when poll() saw it readable (or at the start): reading an empty one costs a
    /// syscall per sleep for nothing. Busy mode never sleeps, so never needs to look.
    fn control_needs_attention(&mut self) -> bool {
        if self.wake == WakeMode::Busy {
            return false;
        }
        let Some(c) = self.control.as_mut() else {
            return false;
        };
        if c.efd_dirty || self.xsk.take_extra_ready() {
            c.ctl.link.clear();
            c.efd_dirty = false;
        }
        c.has_work()
    }

    /// Waits for work as the wake-up mode says; counts the time as idle.
    fn idle(&mut self) {
        let start = Instant::now();
        match self.wake {
            WakeMode::Busy => std::hint::spin_loop(),
            WakeMode::Interrupt => self.sleep(),
            WakeMode::Adaptive => {
                if !self.spin_for_work(Duration::from_micros(self.spin_us)) {
                    self.sleep();
                }
            }
        }
        self.counters.idle_ns += start.elapsed().as_nanos() as u64;
    }

    /// Spins up to `spin` until a socket holds frames or the control plane wants something.
    fn spin_for_work(&self, spin: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < spin {
            if (0..self.xsk.num_rings()).any(|r| self.xsk.backlog(r) > 0)
                || self.control.as_ref().is_some_and(|c| c.is_asking())
            {
                return true;
            }
            std::hint::spin_loop();
        }
        false
    }

    /// Sends the frames held for a neighbour whose address is known now; drops (counted as
    /// `no_neighbor`) those that waited [`HOLD_NS`](super::slow_path::HOLD_NS) in vain. A held
    /// frame is unchanged: the forwarder looks up the neighbour before it rewrites anything.
    /// Without `expire`, only when the table changed since the last try (a new neighbour is a
    /// new table), so that a dead neighbour does not cost a lookup per held frame per grant.
    fn release_pending(&mut self, expire: bool) {
        if self.slow.pending.is_empty() {
            return;
        }
        let now = mono_ns();
        let table = self.table();
        let fwd: &Forwarder = &table;
        let at = fwd as *const Forwarder as usize;
        if !expire && at == self.slow.pending_table {
            return;
        }
        self.slow.pending_table = at;
        for _ in 0..self.slow.pending.len() {
            let Some((mut h, since)) = self.slow.pending.pop_front() else {
                break;
            };
            let (len, ingress, ring) = (h.len(), h.ingress(), h.ring());
            let v = fwd.process(&mut self.xsk.held_frame(&mut h)[..len], ingress);
            if v == Verdict::Drop(DropReason::NoNeighbor)
                && now.saturating_sub(since) < super::slow_path::HOLD_NS
            {
                self.slow.pending.push_back((h, since));
                continue;
            }
            // Resolution failed: the kernel answers each packet it held with host unreachable
            // (IPv6: address unreachable); so does llrouter, through the same rate limit.
            // The kernel's neighbour layer answers from the packet it was about to send: the
            // error quotes it with the TTL already decremented.
            let v = match v {
                Verdict::Drop(DropReason::NoNeighbor) => {
                    let f = &mut self.xsk.held_frame(&mut h)[..len];
                    if let Ok(m) = llr_core::wire::parse_frame(f) {
                        llr_core::fwd::icmp::as_forwarded(f, &m);
                    }
                    Verdict::Icmp {
                        drop: DropReason::NoNeighbor,
                        error: IcmpKind::HostUnreachable,
                    }
                }
                v => v,
            };
            let slow = &mut self.slow;
            let mut sent = false;
            self.xsk
                .finish_held(h, |frame, len, ingress, spare| match v {
                    Verdict::Tx { ifindex, len } => {
                        sent = true;
                        Action::Tx { ifindex, len }
                    }
                    v => slow.handle(v, frame, len as usize, ingress, fwd, spare),
                });
            if sent {
                slow.neighbor_released += 1;
                if let Some(rc) = self.counters.rings.get_mut(ring) {
                    rc.forwarded += 1;
                }
            }
        }
    }

    /// Blocks in poll() on the sockets (and the control eventfd) for at most [`SLEEP_MS`]
    /// (a few ms while frames wait for a neighbour, so they leave soon after it resolves).
    fn sleep(&mut self) {
        // Asleep, the worker holds nothing of the route table: updates may reclaim freely.
        if let Some(r) = &self.reader {
            r.offline();
        }
        let ms = if self.slow.pending.is_empty() {
            SLEEP_MS
        } else {
            PENDING_SLEEP_MS
        };
        match self.control.as_ref().map(|c| c.ctl.link.fd()) {
            Some(fd) => self.xsk.wait_with(ms, fd),
            None => self.xsk.wait(ms),
        };
        if let Some(r) = &self.reader {
            r.online();
        }
    }

    /// After the loop: requests not applied are refused; what is queued for Tx is transmitted
    /// (bounded).
    fn shut_down(&mut self) {
        if let Some(c) = self.control.as_mut() {
            c.shut_down();
        }
        self.drain_flows();
        let t = Instant::now();
        while self.xsk.egress_pending() && t.elapsed() < Duration::from_millis(200) {
            self.xsk.flush();
        }
    }

    /// Between poll rounds: takes the control plane's requests, applies them in order,
    /// acknowledges each after publishing, and
    /// publishes counters when due or asked for.
    /// Returns whether it did anything (applied or published), i.e. took time of its own.
    #[inline]
    fn serve_control(&mut self) -> bool {
        let Some(c) = self.control.as_mut() else {
            return false;
        };
        let publish = c.ctl.link.snapshot_wanted()
            || (self.counters.poll_rounds % 256 == 0 || self.engine.is_idle())
                && c.last_publish.elapsed() >= PUBLISH_EVERY;
        c.take_requests();
        // Each acknowledged change was published just before its ack.
        let acked = c.has_changes() && self.apply_requests();
        if acked {
            if let Some(c) = self.control.as_mut() {
                c.last_publish = Instant::now();
            }
        } else if publish {
            self.publish_counters();
        }
        acked || publish
    }
}

/// Busy-waits `ns` (the artificial per-frame cost).
#[inline]
pub(super) fn spin_ns(ns: u64) {
    if ns == 0 {
        return;
    }
    let t = Instant::now();
    while (t.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}
