//! Control changes on the worker: requests taken from the [`WorkerLink`](super::ctl::WorkerLink)
//! between poll rounds and applied in order, each acknowledged after a snapshot showing it is
//! published.
//!
//! Only what is the worker's own arrives here: its poll engine (layout) and wake-up mode. The
//! classifiers are shared by all workers and changed by the control plane itself (rules can
//! wait for an RCU grace period, 10–35 ms on a busy VM, which on a worker would leave the rings
//! unserved long enough to overflow).

use std::collections::VecDeque;
use std::time::Instant;

use llr_core::sched::{AutoBudget, Layout, PollEngine};

use super::ctl::{Change, FlowChange, Request};
use super::{Worker, WorkerCtl};

/// A worker's state under a control plane.
pub(super) struct Control {
    pub(super) ctl: WorkerCtl,
    /// Claimed requests not applied yet, in order.
    deferred: VecDeque<Request>,
    /// The eventfd may be readable (a kick not drained yet).
    pub(super) efd_dirty: bool,
    pub(super) last_publish: Instant,
}

impl Control {
    pub(super) fn new(ctl: WorkerCtl) -> Control {
        Control {
            ctl,
            deferred: VecDeque::new(),
            efd_dirty: true,
            last_publish: Instant::now(),
        }
    }

    /// Claims the requests waiting on the link.
    #[inline]
    pub(super) fn take_requests(&mut self) {
        if self.ctl.link.has_pending() {
            let claimed = self.ctl.link.take().into_iter().filter(|r| r.claim());
            self.deferred.extend(claimed);
        }
    }

    /// Whether requests wait to be applied (most rounds: none).
    #[inline]
    pub(super) fn has_changes(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Whether the control plane asks for something (requests or a snapshot).
    #[inline]
    pub(super) fn is_asking(&self) -> bool {
        self.ctl.link.has_pending() || self.ctl.link.snapshot_wanted()
    }

    /// [`Control::is_asking`].
    pub(super) fn has_work(&self) -> bool {
        self.is_asking()
    }

    /// On stop: requests not applied are refused.
    pub(super) fn shut_down(&mut self) {
        for req in self.deferred.drain(..) {
            req.done(Err(
                "the router is stopping; nothing was changed".to_string()
            ));
        }
    }
}

impl Worker<'_> {
    /// Applies one change; on `Err` nothing was changed.
    pub(super) fn apply(&mut self, change: Change) -> Result<(), String> {
        match change {
            Change::Batch(v) => v.into_iter().try_for_each(|ch| self.apply(ch)),
            Change::Wake { wake, spin_us } => {
                self.wake = wake;
                self.spin_us = spin_us;
                Ok(())
            }
            Change::Sched(layout) => self.apply_layout(layout),
            Change::Flow(f) => self.apply_flow(f),
        }
    }

    /// Sets up, changes or tears down a flow, all or nothing; frames it drops are freed.
    fn apply_flow(&mut self, change: FlowChange) -> Result<(), String> {
        let (Some(fp), Some(setup)) = (self.flow_path.as_mut(), self.opts.flows.as_ref()) else {
            return Err(
                "flows are off: add a [flow-scheduler] section to the configuration".into(),
            );
        };
        let ifindex_of = |n: &str| setup.ifindex_of(n);
        let freed = match &change {
            FlowChange::Add(spec) => fp.flows.add(spec, &ifindex_of).map(|_| Vec::new()),
            FlowChange::Set(spec) => fp.flows.set(spec, &ifindex_of),
            FlowChange::Del(name) => fp.flows.remove(name),
        }
        .map_err(|e| e.to_string())?;
        for h in freed {
            self.xsk.free_held(h);
        }
        Ok(())
    }

    /// Applies the claimed requests in order. Returns whether a request was acknowledged.
    pub(super) fn apply_requests(&mut self) -> bool {
        let mut acked = false;
        while let Some(req) = self.control.as_mut().and_then(|c| c.deferred.pop_front()) {
            let r = self.apply(req.change.clone());
            if r.is_ok() {
                self.counters.changes += 1;
            }
            // Published before the ack, so `status`/`counters` show the change at once.
            self.publish();
            req.done(r);
            acked = true;
        }
        acked
    }

    /// A new ring layout: the engine is rebuilt; what sits in the old rings is served by the
    /// new engine (same socket ids) or drained as orphans. The control plane rewrites the
    /// classifiers' class→ring maps once every worker has its new engine.
    fn apply_layout(&mut self, new: Layout) -> Result<(), String> {
        let nsock = self.xsk.num_rings();
        if new.rings.len() > nsock || new.class_to_ring.len() > nsock {
            return Err(format!(
                "the layout needs {} rings; the router opened {nsock} sockets (restart to change the classes)",
                new.rings.len(),
            ));
        }
        self.counters.absorb(&self.engine);
        self.engine = PollEngine::new(&new);
        self.auto = AutoBudget::new(&new);
        self.layout = new;
        Ok(())
    }
}
