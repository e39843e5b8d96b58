//! `reload`: a whole new configuration, applied all or nothing.

use crate::steer::RuleImages;
use crate::worker::ctl::{Change, FlowChange};
use llr_core::flow::FlowSpec;
use llr_io::kernel::{self, MirrorSpec};
use llr_ops::ctl::CtlError;
use llr_ops::views::{FieldChange, ReloadView};

use super::{config_err, err, RouterCtl};
use crate::config::RouterConfig;
use crate::diff::{diff, fields};

impl RouterCtl {
    /// `reload`: re-reads the configuration file the router was started from and applies it
    /// ([`apply_config`](Self::apply_config)).
    pub fn reload(&self) -> Result<ReloadView, CtlError> {
        let Some(path) = &self.config_path else {
            return Err(err(
                "config",
                "this router was started from a configuration built in code; there is no file to reload",
            ));
        };
        let new = RouterConfig::load(path).map_err(|e| config_err(&e))?;
        let (running, file) = {
            let st = self.lock();
            (fields(&st.cfg), fields(&st.file))
        };
        let want = fields(&new);
        let changed = self.apply_config(new.clone())?;
        // Each change with its values; one the file did not make (its value there is the
        // same as at the last load) undoes a change made through the control socket.
        let changes = (changed.iter())
            .map(|k| {
                let (old, new) = (running.get(k), want.get(k));
                FieldChange {
                    field: k.clone(),
                    old: old.cloned(),
                    new: new.cloned(),
                    reverted: file.get(k) == new,
                }
            })
            .collect();
        self.lock().file = new;
        Ok(ReloadView {
            reloaded: path.display().to_string(),
            changed,
            changes,
        })
    }

    /// Applies `new` all or nothing: validates all of it, refuses changes that need a restart
    /// (naming the field), then applies layout and wake-up mode (one step on every worker),
    /// the class→ring maps, the rules and the routes. Returns the changed fields.
    pub fn apply_config(&self, new: RouterConfig) -> Result<Vec<String>, CtlError> {
        let r = new
            .resolve(|n| llr_io::ebpf::ifindex(n).ok())
            .map_err(|e| config_err(&e))?;
        let mut st = self.lock();
        let d = diff(&st.cfg, &r.cfg);
        if let Some(first) = d.restart.first() {
            let mut reason = "changing it needs a restart of the router".to_string();
            if d.restart.len() > 1 {
                reason += &format!(" (so do: {})", d.restart[1..].join(", "));
            }
            return Err(err(first.as_str(), reason));
        }
        // Routes: build the new table first, so a bad one rejects the whole reload.
        let spec = MirrorSpec {
            ifindexes: st.spec.ifindexes.clone(),
            kernel_routes: r.cfg.kernel_routes,
            routes: r.routes.clone(),
            neighbors: r.neighbors.clone(),
            // A change of max-routes needs a restart (the diff says so): the running one stays.
            max_routes: st.spec.max_routes,
            event_buffer: st.spec.event_buffer,
        };
        let routes_changed = spec.routes != st.spec.routes || spec.neighbors != st.spec.neighbors;
        if routes_changed {
            kernel::build(&spec).map_err(|e| err("routes", format!("{e:#}")))?;
        }
        // Layout and wake-up mode in one worker step; then the rules; a failure undoes what
        // went before.
        let old_layout = super::sched_layout(&st.cfg)?;
        let (flows_do, flows_undo) = flow_changes(&st.cfg.flows, &r.cfg.flows);
        let mut to_new = vec![
            Change::Sched(r.layout.clone()),
            Change::Wake {
                wake: r.cfg.wake,
                spin_us: r.cfg.spin_us,
            },
        ];
        to_new.extend(flows_do);
        let to_new = Change::Batch(to_new);
        let mut to_old = vec![
            Change::Sched(old_layout.clone()),
            Change::Wake {
                wake: st.cfg.wake,
                spin_us: st.cfg.spin_us,
            },
        ];
        to_old.extend(flows_undo);
        let to_old = Change::Batch(to_old);
        self.to_workers(to_new, to_old.clone())?;
        let undo_workers = || {
            let _ = self.to_workers(to_old.clone(), to_old.clone());
        };
        if let Err(e) = self
            .classifiers()
            .set_class_rings(&r.layout.class_to_ring, &old_layout.class_to_ring)
        {
            undo_workers();
            return Err(err("class→ring map", e));
        }
        if r.rule_images != st.images {
            let new = RuleImages {
                images: r.rule_images.clone(),
                default_class: r.default_class,
                flags: self.flags,
            };
            if let Err(e) = self.apply_rules(&new) {
                let _ = self
                    .classifiers()
                    .set_class_rings(&old_layout.class_to_ring, &r.layout.class_to_ring);
                undo_workers();
                return Err(e);
            }
        }
        if routes_changed {
            self.set_routes(&mut st, spec)?;
        }
        let first_id = st.next_rule;
        st.rules = (r.cfg.rules.iter().cloned())
            .enumerate()
            .map(|(i, s)| (first_id + i as u64, s))
            .collect();
        st.next_rule += r.cfg.rules.len() as u64;
        st.images = r.rule_images;
        st.default_class = r.default_class;
        st.cfg = r.cfg;
        self.changed();
        Ok(d.changed)
    }
}

/// The flow changes from `old` to `new` (by name), and their undo. A changed flow is torn down
/// and set up again (its queued packets are dropped, counted): a `set` would keep fields the
/// new spec leaves at their defaults. `new` as a whole was checked when it was resolved.
fn flow_changes(old: &[FlowSpec], new: &[FlowSpec]) -> (Vec<Change>, Vec<Change>) {
    let gone = |a: &[FlowSpec], b: &[FlowSpec]| -> Vec<FlowSpec> {
        a.iter()
            .filter(|f| b.iter().find(|g| g.name == f.name) != Some(f))
            .cloned()
            .collect()
    };
    let (removed, added) = (gone(old, new), gone(new, old));
    fn del(v: &[FlowSpec]) -> Vec<Change> {
        v.iter()
            .map(|f| Change::Flow(FlowChange::Del(f.name.clone())))
            .collect()
    }
    fn add(v: &[FlowSpec]) -> Vec<Change> {
        v.iter()
            .map(|f| Change::Flow(FlowChange::Add(Box::new(f.clone()))))
            .collect()
    }
    let forward = [del(&removed), add(&added)].concat();
    let back = [del(&added), add(&removed)].concat();
    (forward, back)
}
