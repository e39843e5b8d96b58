//! Control changes on the worker: requests taken from the [`WorkerLink`](super::ctl::WorkerLink)
//! between poll rounds and applied in order, each acknowledged after a snapshot showing it is
//! published.
//!
//! A rule update runs on a helper thread ([`RulesJob`]): the classifiers are taken out of the
//! sockets (they stay attached and keep classifying) because `Classifier::update_rules` may wait
//! for an RCU grace period before reusing a rule-table half — 10–35 ms on a busy VM, per
//! interface. On the worker, that wait leaves the rings unserved long enough for a 512-slot
//! ring to overflow at 14 kpps. Later changes wait behind the job, so changes still apply in
//! order; the job's thread wakes the worker when it is done.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use llr_core::sched::{Layout, PollEngine};

use super::ctl::{Change, Request};
use super::{Worker, WorkerCtl};
use llr_io::ebpf::Classifier;
use llr_io::xsk::Device;

/// A classifier rule table: 64-byte `llr_rule` images (first match wins), the default class
/// and `llr_config.flags`.
#[derive(Debug, Clone)]
struct RuleImages {
    images: Vec<[u8; 64]>,
    default_class: u32,
    flags: u32,
}

impl WorkerCtl {
    fn installed(&self) -> RuleImages {
        RuleImages {
            images: self.rules.clone(),
            default_class: self.default_class,
            flags: self.flags,
        }
    }

    fn set_installed(&mut self, r: RuleImages) {
        self.rules = r.images;
        self.default_class = r.default_class;
        self.flags = r.flags;
    }
}

/// A worker's state under a control plane.
pub(super) struct Control {
    pub(super) ctl: WorkerCtl,
    /// Claimed requests not applied yet (held back behind a rules job), in order.
    deferred: VecDeque<Request>,
    rules_job: Option<RulesJob>,
    /// The eventfd may be readable (a kick not drained yet).
    pub(super) efd_dirty: bool,
    pub(super) last_publish: Instant,
}

impl Control {
    pub(super) fn new(ctl: WorkerCtl) -> Control {
        Control {
            ctl,
            deferred: VecDeque::new(),
            rules_job: None,
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

    /// Whether requests wait to be applied or a rules job is out (most rounds: neither).
    #[inline]
    pub(super) fn has_changes(&self) -> bool {
        !self.deferred.is_empty() || self.rules_job.is_some()
    }

    /// Whether the control plane asks for something (requests or a snapshot).
    #[inline]
    pub(super) fn is_asking(&self) -> bool {
        self.ctl.link.has_pending() || self.ctl.link.snapshot_wanted()
    }

    /// [`Control::is_asking`], or a rules job to finish.
    pub(super) fn has_work(&self) -> bool {
        self.is_asking() || self.rules_job.as_ref().is_some_and(|j| j.is_finished())
    }

    /// Classifier counters are read when asked for and no classifier is out on a rules job.
    pub(super) fn wants_classifier_stats(&self) -> bool {
        self.ctl.link.full_wanted() && self.rules_job.is_none()
    }

    /// On stop: the rules job in flight completes (its thread ends after at most a grace
    /// period or two); requests held back behind it are refused.
    pub(super) fn shut_down(&mut self, xsk: &mut Device) {
        if let Some(job) = self.rules_job.take() {
            let (req, r) = job.finish(xsk, &mut self.ctl);
            req.done(r);
        }
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
            Change::Rules {
                images,
                default_class,
                flags,
            } => self.apply_rules(RuleImages {
                images,
                default_class,
                flags,
            }),
        }
    }

    /// A rules job that finished: classifiers back, then its ack (published first). Returns
    /// whether a request was acknowledged.
    pub(super) fn finish_rules_job(&mut self) -> bool {
        let Some(c) = self.control.as_mut() else {
            return false;
        };
        let Some(job) = c.rules_job.take_if(|j| j.is_finished()) else {
            return false;
        };
        let (req, r) = job.finish(self.xsk, &mut c.ctl);
        if r.is_ok() {
            self.counters.changes += 1;
        }
        self.publish();
        req.done(r);
        true
    }

    /// Applies the claimed requests in order until a rules change, which goes to a helper
    /// thread and holds the rest back. Returns whether a request was acknowledged.
    pub(super) fn apply_requests(&mut self) -> bool {
        let mut acked = false;
        while let Some(c) = self.control.as_mut().filter(|c| c.rules_job.is_none()) {
            let Some(req) = c.deferred.pop_front() else {
                break;
            };
            if let Change::Rules {
                images,
                default_class,
                flags,
            } = &req.change
            {
                let new = RuleImages {
                    images: images.clone(),
                    default_class: *default_class,
                    flags: *flags,
                };
                c.rules_job = Some(RulesJob::start(self.xsk, &c.ctl, req, new));
                break;
            }
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

    /// A new ring layout: new frames go to the new rings first (class→ring maps), then the
    /// engine is rebuilt; what sits in the old rings is served by the new engine (same socket
    /// ids) or drained as orphans.
    fn apply_layout(&mut self, new: Layout) -> Result<(), String> {
        let nsock = self.xsk.num_rings();
        if new.rings.len() > nsock || new.class_to_ring.len() > nsock {
            return Err(format!(
                "the layout needs {} rings; the router opened {nsock} sockets (restart to change the classes)",
                new.rings.len(),
            ));
        }
        let ifs = self.xsk.ifindexes();
        for (k, &i) in ifs.iter().enumerate() {
            let r = self
                .xsk
                .classifier_mut(i)
                .ok_or_else(|| format!("ifindex {i}: no classifier"))
                .and_then(|cl| {
                    cl.set_class_rings(&new.class_to_ring)
                        .map_err(|e| format!("{e:#}"))
                });
            if let Err(e) = r {
                // restore the interfaces already switched
                for &j in &ifs[..k] {
                    if let Some(cl) = self.xsk.classifier_mut(j) {
                        let _ = cl.set_class_rings(&self.layout.class_to_ring);
                    }
                }
                return Err(format!("class→ring map: {e}"));
            }
        }
        self.counters.absorb(&self.engine);
        self.engine = PollEngine::new(&new);
        self.layout = new;
        Ok(())
    }

    /// A new rule set on the worker itself (part of a batch): on an error the classifiers
    /// already updated are restored.
    fn apply_rules(&mut self, new: RuleImages) -> Result<(), String> {
        let Some(c) = self.control.as_mut() else {
            return Err("rules: no control plane".to_string());
        };
        let mut taken = take_classifiers(self.xsk);
        let r = update_rules_all(&mut taken, &c.ctl.installed(), &new);
        put_classifiers(self.xsk, taken);
        if r.is_ok() {
            c.ctl.set_installed(new);
        }
        r
    }
}

/// A rule update running on a helper thread (see the module doc).
struct RulesJob {
    req: Request,
    new: RuleImages,
    /// The thread, or the outcome when the update ran on the worker (no thread).
    handle: Result<JoinHandle<JobOut>, JobOut>,
}

/// Classifiers taken out of the sockets, per ifindex.
type Taken = Vec<(u32, Option<Classifier>)>;
type JobOut = (Taken, Result<(), String>);

impl RulesJob {
    fn start(xsk: &mut Device, ctl: &WorkerCtl, req: Request, new: RuleImages) -> RulesJob {
        let old = ctl.installed();
        let link = ctl.link.clone();
        // The work goes over a channel, so that the classifiers are still ours if the thread
        // cannot be started (then the update runs here).
        let (tx, rx) = mpsc::channel::<Taken>();
        let (o, n) = (old.clone(), new.clone());
        let spawned = std::thread::Builder::new()
            .name("llr-rules".into())
            .spawn(move || {
                let mut taken = rx.recv().unwrap_or_default();
                let r = update_rules_all(&mut taken, &o, &n);
                link.kick();
                (taken, r)
            });
        let mut taken = take_classifiers(xsk);
        let handle = match spawned {
            Ok(h) => {
                tx.send(taken).expect("the rules thread waits for its work");
                Ok(h)
            }
            Err(e) => {
                tracing::warn!("rules update thread: {e}; updating on the worker");
                let r = update_rules_all(&mut taken, &old, &new);
                Err((taken, r))
            }
        };
        RulesJob { req, new, handle }
    }

    fn is_finished(&self) -> bool {
        self.handle.as_ref().map_or(true, |h| h.is_finished())
    }

    /// Joins the thread, gives the classifiers back and records the new rules on success.
    fn finish(self, xsk: &mut Device, ctl: &mut WorkerCtl) -> (Request, Result<(), String>) {
        let (back, r) = match self.handle {
            Ok(h) => h.join().unwrap_or_else(|_| {
                (
                    Vec::new(),
                    Err("rules: the update thread panicked".to_string()),
                )
            }),
            Err(out) => out,
        };
        put_classifiers(xsk, back);
        if r.is_ok() {
            ctl.set_installed(self.new);
        }
        (self.req, r)
    }
}

fn take_classifiers(xsk: &mut Device) -> Taken {
    xsk.ifindexes()
        .into_iter()
        .map(|i| (i, xsk.take_classifier(i)))
        .collect()
}

fn put_classifiers(xsk: &mut Device, taken: Taken) {
    for (i, cl) in taken {
        if let Some(cl) = cl {
            if xsk.put_classifier(i, cl).is_some() {
                tracing::error!("ifindex {i}: classifier could not be put back");
            }
        }
    }
}

/// Updates the rules of every classifier from `old` to `new`; on an error restores those
/// already updated (nothing changed then).
fn update_rules_all(cls: &mut Taken, old: &RuleImages, new: &RuleImages) -> Result<(), String> {
    for k in 0..cls.len() {
        let (i, cl) = &mut cls[k];
        let r = match cl.as_mut() {
            None => Err(format!("ifindex {i}: no classifier")),
            Some(cl) => cl
                .update_rules(&old.images, &new.images, new.default_class, new.flags)
                .map_err(|e| format!("{e:#}")),
        };
        if let Err(e) = r {
            for (_, cl) in cls[..=k].iter_mut() {
                if let Some(cl) = cl.as_mut() {
                    let _ = cl.update_rules(&new.images, &old.images, old.default_class, old.flags);
                }
            }
            return Err(format!("rules: {e}"));
        }
    }
    Ok(())
}
