//! `flow.add | flow.set | flow.del | flow.list`: flows set up, changed and torn down at run time
//! (paper 003 §4.1's IC_SETUP / IC_CONFIG / IC_TEARD, as control commands).
//!
//! A change is checked here against the running flows (a scratch copy built from the
//! configuration: the same [`Flows`] code the workers run), then handed to every worker, which
//! applies it between two turns; if a worker refuses, the others get the undo. The running
//! configuration's `flows` list is what `reload` and the next change compare against.

use std::time::Duration;

use llr_core::flow::{FlowInfo, FlowSpec, Flows};
use llr_ops::ctl::CtlError;
use llr_ops::views::{FlowAdded, FlowChanged, FlowRemoved};

use super::{err, RouterCtl, State};
use crate::config::FlowSetup;
use crate::worker::ctl::{Change, FlowChange};

/// How long `flow.list` waits for the workers' fresh counters.
const LIST_WAIT: Duration = Duration::from_millis(200);

impl State {
    fn flow_setup(&self) -> Result<FlowSetup, CtlError> {
        FlowSetup::of(&self.cfg, &self.ifindexes).ok_or_else(|| {
            err(
                "flow",
                "flows are off: add a [flow-scheduler] section to the configuration and restart",
            )
        })
    }

    /// The running flows rebuilt (to check a change against, as a worker would apply it).
    pub(super) fn scratch_flows(&self) -> Result<(FlowSetup, Flows<()>), CtlError> {
        let setup = self.flow_setup()?;
        let flows = setup.build::<()>().map_err(|e| err(e.field, e.reason))?;
        Ok((setup, flows))
    }
}

impl RouterCtl {
    /// `flow.add`: sets up a flow (its spec as in `[[flows]]`).
    pub fn flow_add(&self, spec: FlowSpec) -> Result<FlowAdded, CtlError> {
        let mut st = self.lock();
        let (setup, mut scratch) = st.scratch_flows()?;
        scratch
            .add(&spec, &|n| setup.ifindex_of(n))
            .map_err(|e| err(e.field, e.reason))?;
        self.to_workers(
            Change::Flow(FlowChange::Add(Box::new(spec.clone()))),
            Change::Flow(FlowChange::Del(spec.name.clone())),
        )?;
        st.cfg.flows.push(spec.clone());
        self.changed();
        Ok(FlowAdded { added: spec })
    }

    /// `flow.set`: changes the fields given (weight or cpu, quantum-us, queue, pipeline).
    pub fn flow_set(&self, spec: FlowSpec) -> Result<FlowChanged, CtlError> {
        let mut st = self.lock();
        let (setup, mut scratch) = st.scratch_flows()?;
        let Some(pos) = st.cfg.flows.iter().position(|f| f.name == spec.name) else {
            return Err(err("name", format!("no flow `{}`", spec.name)));
        };
        let old = st.cfg.flows[pos].clone();
        scratch
            .set(&spec, &|n| setup.ifindex_of(n))
            .map_err(|e| err(e.field, e.reason))?;
        let merged = scratch.spec(&spec.name).cloned().expect("just set");
        self.to_workers(
            Change::Flow(FlowChange::Set(Box::new(spec))),
            Change::Flow(FlowChange::Set(Box::new(old.clone()))),
        )?;
        st.cfg.flows[pos] = merged.clone();
        self.changed();
        Ok(FlowChanged {
            flow: merged,
            previous: old,
        })
    }

    /// `flow.del`: tears a flow down; its queued packets are dropped (counted).
    pub fn flow_del(&self, name: &str) -> Result<FlowRemoved, CtlError> {
        let mut st = self.lock();
        st.flow_setup()?;
        let Some(pos) = st.cfg.flows.iter().position(|f| f.name == name) else {
            let hint = if name.starts_with("class:") {
                " (a class's default flow stays; give the class a flow of its own to replace it)"
            } else {
                ""
            };
            return Err(err("name", format!("no flow `{name}`{hint}")));
        };
        let old = st.cfg.flows[pos].clone();
        self.to_workers(
            Change::Flow(FlowChange::Del(name.to_string())),
            Change::Flow(FlowChange::Add(Box::new(old.clone()))),
        )?;
        st.cfg.flows.remove(pos);
        self.changed();
        Ok(FlowRemoved { removed: old })
    }

    /// `flow.list`: every flow with its counters summed over the workers (each worker runs the
    /// same flows on its own share of the traffic).
    pub fn flow_list(&self) -> Result<Vec<FlowInfo>, CtlError> {
        self.lock().flow_setup()?;
        // A snapshot built just before the ask carries only the flows with traffic: ask again.
        let mut snaps = Vec::new();
        for _ in 0..3 {
            for l in &self.links {
                l.want_flow_list();
            }
            snaps = crate::worker::ctl::fresh_all(&self.links, LIST_WAIT);
            if snaps.iter().all(|s| s.flows_complete) {
                break;
            }
        }
        Ok(crate::metrics::merge_flows(
            snaps.iter().map(|s| s.flows.as_slice()),
        ))
    }
}
