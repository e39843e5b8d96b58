//! The worker with flows on (paper 003): the poll engine's grants become the *input flow*,
//! which moves frames from the rings into per-flow queues; the flow scheduler (SFQ over the
//! CPU time measured here) decides whether the input or which flow runs next, and for how long.
//!
//! ```text
//! pick():  Input   → one poll-engine grant: each frame → flow lookup → held in its flow queue
//!          Flow(i) → a turn: elements of i's packets, timed; forward = the plain path's
//!                    forwarder + slow path; ends after i's quantum at an element boundary
//!          Idle    → transmit, sleep as the wake-up mode says
//! ```
//!
//! Frames stay in their UMEM chunks while queued (no copy); the chunks come from the device's
//! `hold-frames` reserve. The CPU time of each element is read from the clock around it and
//! charged to the flow; `work` elements spin for their time like the global `cost-ns`.

use std::time::Instant;

use llr_core::flow::{Cx, FlowId, Flows, Next, Pkt, Progress, Step, INPUT};
use llr_core::fwd::{Forwarder, Verdict};
use llr_core::sched::{Grant, Layout, RingId, RingView};
use llr_io::sys::mono_ns;
use llr_io::xsk::{Action, Held};

use super::poll_loop::spin_ns;
use super::Worker;

/// A worker's flows and its scratch list of frames just held.
pub(crate) struct FlowPath {
    pub(crate) flows: Flows<Held>,
    held: Vec<Held>,
}

impl FlowPath {
    pub(crate) fn new(flows: Flows<Held>) -> FlowPath {
        FlowPath {
            flows,
            held: Vec::with_capacity(64),
        }
    }
}

/// The class whose frames arrive on ring `ring`: the lowest-priority class steered there (a
/// socket outside the layout is its class's own).
fn ring_class(layout: &Layout, ring: RingId) -> usize {
    layout
        .class_to_ring
        .iter()
        .rposition(|&r| r == ring)
        .unwrap_or(ring)
}

impl Worker<'_> {
    /// The input flow is eligible: the poll engine has a device on its poll list (the
    /// "interrupts" put every device with frames there), or a socket outside the running layout
    /// still holds frames. No ring index is read here: those reads are cache misses on lines
    /// the kernel writes, and `take_interrupts` has just done them.
    fn input_ready(&self) -> bool {
        !self.engine.is_idle()
            || (self.layout.rings.len()..self.xsk.num_rings()).any(|r| self.xsk.backlog(r) > 0)
    }

    /// One scheduling decision. False when nothing is eligible.
    pub(super) fn flow_round(&mut self) -> bool {
        let ready = self.input_ready();
        let Some(fp) = self.flow_path.as_mut() else {
            return false;
        };
        fp.flows.sched.set_input_ready(ready);
        match fp.flows.sched.pick() {
            Next::Input => {
                // Grants until the input's quantum is spent or the rings are empty: one turn
                // (one pick, one charge) per grant would cost more than ll-wfq's 4-frame BE
                // grants themselves. Which ring each grant serves is still the engine's call.
                let quantum = fp
                    .flows
                    .sched
                    .view(INPUT)
                    .map_or(0, |v| v.params.quantum_ns);
                let t0 = mono_ns();
                let mut cost = 0;
                while let Some((grant, ring, max)) = self.next_grant() {
                    self.input_grant(grant, ring, max);
                    cost = mono_ns().saturating_sub(t0);
                    if cost >= quantum {
                        break;
                    }
                    self.take_interrupts();
                }
                let still = self.input_ready();
                if let Some(fp) = self.flow_path.as_mut() {
                    fp.flows.sched.input_done(cost, still);
                }
                true
            }
            Next::Flow(id) => {
                self.flow_turn(id);
                true
            }
            Next::Idle => false,
        }
    }

    /// The input flow's work: one grant's frames into their flow queues.
    fn input_grant(&mut self, grant: Option<Grant>, ring: RingId, max: u32) {
        let start = Instant::now();
        let timestamps = self.timestamps;
        let now_ns = if timestamps { mono_ns() } else { 0 };
        let class = ring_class(&self.layout, ring);
        let Some(fp) = self.flow_path.as_mut() else {
            return;
        };
        let flows = &fp.flows;
        let rc = &mut self.counters.rings[ring];
        let mut bytes = 0u64;
        let (nbytes, ring_counters) = (&mut bytes, &mut *rc);
        let n = self
            .xsk
            .recv_meta(ring, max, move |frame, len, ingress, stamp, _spare| {
                *nbytes += len as u64;
                if timestamps
                    && stamp != 0
                    && stamp.abs_diff(now_ns) < super::poll_loop::MAX_STAMP_AGE_NS
                {
                    ring_counters.observe(now_ns.saturating_sub(stamp) as f64 * 1e-9);
                }
                let id = flows.classify(&frame[..len as usize], ingress, class);
                Action::Hold { tag: id }
            });
        rc.bytes += bytes;
        self.xsk.take_held(&mut fp.held);
        for h in fp.held.drain(..) {
            let id = h.tag as FlowId;
            if let Err(h) = fp.flows.sched.enqueue(id, h) {
                // Counted as the flow's queue drop.
                self.xsk.free_held(h);
            }
        }
        let ns = start.elapsed().as_nanos() as u64;
        self.counters.stall(ns);
        match grant {
            Some(g) => self.engine.complete(g, n, ns),
            None => self.counters.rings[ring].served += n as u64,
        }
    }

    /// A turn of flow `id`: its packets through their elements, each timed, the last step the
    /// forwarder (and slow path) as on the plain path.
    fn flow_turn(&mut self, id: FlowId) {
        let start = Instant::now();
        let table = self.table();
        let fwd: &Forwarder = &table;
        let Some(fp) = self.flow_path.as_mut() else {
            return;
        };
        let xsk = &mut *self.xsk;
        let slow = &mut self.slow;
        let rings = &mut self.counters.rings;
        let (cost_ns, acl_rules, acl) = (self.opts.cost_ns, self.opts.acl_rules, &self.acl);
        let lowest = self.layout.rings.len().saturating_sub(1);
        let mut urgent = false;
        // The highest-priority ring among the frames this turn finished: its flush is counted
        // there, as a plain grant's is counted to the grant's ring.
        let mut top = lowest;
        let mut t = mono_ns();
        fp.flows.sched.run_turn(id, |pl, pos, mut h| {
            if pos < pl.len() {
                let (len, ingress) = (h.len(), h.ingress());
                let mut spend = spin_ns;
                let step = pl.run(
                    pos,
                    &mut Pkt {
                        frame: xsk.held_frame(&mut h),
                        len,
                        ingress,
                    },
                    &mut Cx {
                        now_ns: t,
                        spend: &mut spend,
                    },
                );
                let now = mono_ns();
                let cost = now.saturating_sub(t);
                t = now;
                return match step {
                    Step::Next => (Progress::Next(h), cost),
                    Step::Jump(k) => (Progress::At(h, usize::from(k)), cost),
                    Step::Drop => {
                        xsk.free_held(h);
                        (Progress::Finished, cost)
                    }
                };
            }
            let ring = h.ring();
            urgent |= ring < lowest;
            top = top.min(ring);
            let mut forwarded = false;
            xsk.finish_held(h, |frame, len, ingress, spare| {
                spin_ns(cost_ns);
                if acl_rules > 0 {
                    std::hint::black_box(acl.classify(&frame[..len as usize], None, ingress));
                }
                match fwd.process(&mut frame[..len as usize], ingress) {
                    Verdict::Tx { ifindex, len } => {
                        forwarded = true;
                        Action::Tx { ifindex, len }
                    }
                    v @ Verdict::Redirect { .. } => {
                        forwarded = true;
                        slow.handle(v, frame, len as usize, ingress, fwd, spare)
                    }
                    v => slow.handle(v, frame, len as usize, ingress, fwd, spare),
                }
            });
            if let Some(rc) = rings.get_mut(ring) {
                rc.forwarded += u64::from(forwarded);
            }
            let now = mono_ns();
            let cost = now.saturating_sub(t);
            t = now;
            (Progress::Finished, cost)
        });
        drop(table);
        // As on the plain path: higher classes transmit at once, the lowest in batches.
        let (due, now) = self.flush_due(!urgent);
        if due {
            self.flush_for(top, now);
        }
        self.counters.stall(start.elapsed().as_nanos() as u64);
    }

    /// On stop: every frame still in a flow queue is freed.
    pub(super) fn drain_flows(&mut self) {
        if let Some(fp) = self.flow_path.as_mut() {
            for h in fp.flows.sched.drain() {
                self.xsk.free_held(h);
            }
        }
    }
}
