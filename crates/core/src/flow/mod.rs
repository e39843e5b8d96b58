//! Flow-based element pipelines (paper 003, CROSS/Linux §3): which flow's work runs next, and
//! for how long, once a packet has left its receive ring.
//!
//! ```text
//! rings ──(poll engine: the input flow)──► flow lookup ──► per-flow queues
//!                                                           │ SFQ over CPU time,
//!                                                           ▼ preemption at element boundaries
//!                                          flow i: element 0 → element 1 → … → forward
//! ```
//!
//! - [`element`]: the [`Element`] trait, the built-ins and [`Pipeline`];
//! - [`sched`]: [`FlowSched`], start-time fair queueing with CPU time charged to flows;
//! - [`table`]: [`FlowSpec`] (the config form) and [`FlowTable`] (the per-packet lookup);
//! - [`Flows`]: the three together, changed by name at run time (`llrouter ctl flow …`).
//!
//! Like the rest of the core, nothing here reads a clock: the caller reports the CPU cost of
//! each element, measured in the live worker and modelled in the simulator.

pub mod element;
pub mod sched;
pub mod table;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use element::{Cx, Element, ElementStats, Pipeline, Pkt, Step};
pub use sched::{FlowId, FlowParams, FlowSched, FlowStats, Next, Progress, Share, Turn, INPUT};
pub use table::{FlowDef, FlowDefaults, FlowSpec, FlowTable};

use crate::classify::{RuleSet, RuleSpec};
use crate::error::FieldError;
use crate::sched::ClassId;

/// The flow scheduler's own settings (`[flow-scheduler]`; present = flows on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct FlowSchedConfig {
    /// Weight of the input flow (draining the rings into flow queues) against the flows.
    pub input_weight: u32,
    /// Default preemption quantum qᵢ, µs.
    pub quantum_us: f64,
    /// Default queue limit per flow, packets.
    pub queue: u32,
    /// Flows at most (besides the class flows).
    pub max_flows: usize,
}

impl Default for FlowSchedConfig {
    fn default() -> Self {
        FlowSchedConfig {
            input_weight: 1,
            quantum_us: 5.0,
            queue: 256,
            max_flows: 16_384,
        }
    }
}

impl FlowSchedConfig {
    pub fn defaults(&self) -> Result<FlowDefaults, FieldError> {
        if !(self.quantum_us.is_finite() && self.quantum_us > 0.0 && self.quantum_us <= 1e6) {
            return Err(FieldError::new(
                "quantum-us",
                format!(
                    "{} is not a quantum (more than 0, at most 1 s)",
                    self.quantum_us
                ),
            ));
        }
        if self.queue == 0 {
            return Err(FieldError::new("queue", "must be at least 1 packet"));
        }
        if self.input_weight == 0 {
            return Err(FieldError::new(
                "input-weight",
                "must be at least 1 (with 0 no packet would ever be received)",
            ));
        }
        if self.max_flows == 0 || self.max_flows > 1 << 20 {
            return Err(FieldError::new("max-flows", "must be 1 to 1048576"));
        }
        Ok(FlowDefaults {
            quantum_ns: (self.quantum_us * 1000.0).round().max(1.0) as u64,
            queue_limit: self.queue,
        })
    }
}

/// A named ACL (`[[acls]]`): first-match permit/deny rules for the `acl(NAME)` element.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AclSpec {
    pub name: String,
    /// `permit` (default) or `deny`: what happens to packets no rule matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Each rule's `class` is its action: `permit` or `deny`.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
}

impl AclSpec {
    pub fn resolve(&self, ifindex_of: &dyn Fn(&str) -> Option<u32>) -> Result<RuleSet, FieldError> {
        let actions = ["permit".to_string(), "deny".to_string()];
        let default = match self.default.as_deref() {
            None | Some("permit") => element::ACL_PERMIT,
            Some("deny") => element::ACL_DENY,
            Some(o) => {
                return Err(FieldError::new(
                    "default",
                    format!("`{o}`: give permit or deny"),
                ))
            }
        };
        let mut rules = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            let mut r = r.clone();
            if r.class.is_empty() {
                return Err(FieldError::new(
                    format!("rules[{i}].class"),
                    "missing: give the action, class = \"permit\" or \"deny\"",
                ));
            }
            r.class = r.class.to_ascii_lowercase();
            rules.push(
                r.resolve(&actions, ifindex_of)
                    .map_err(|e| e.within(&format!("rules[{i}]")))?,
            );
        }
        Ok(RuleSet::with_rules(rules, default))
    }
}

/// The weight of class `i`'s default global flow among `n` classes: 3 for the highest class, 1
/// for the others — the default class weight of the `wfq` strategies.
pub fn default_class_weight(i: usize, n: usize) -> u32 {
    if i == 0 && n > 1 {
        3
    } else {
        1
    }
}

/// One flow, as `ctl flow list`, `ctl counters` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowInfo {
    pub id: FlowId,
    pub name: String,
    /// The ingress class (global flows and class-bound flows).
    pub class: Option<String>,
    /// The match in the rule syntax (empty for the input flow and class flows).
    #[serde(rename = "match")]
    pub matches: String,
    pub precedence: u32,
    pub share: Share,
    /// Fraction of the CPU when every flow is backlogged.
    pub norm_share: f64,
    pub quantum_ns: u64,
    pub queue_limit: u32,
    pub queue_len: usize,
    pub pipeline: Vec<String>,
    pub elements: Vec<ElementStats>,
    pub stats: FlowStats,
}

/// The flows of one worker: the scheduler, the lookup and the specs they came from.
pub struct Flows<P> {
    pub sched: FlowSched<P>,
    pub table: FlowTable,
    specs: BTreeMap<String, (FlowSpec, FlowDef, FlowId)>,
    class_names: Vec<String>,
    /// The default global flow of each class (`class:<name>`).
    class_defaults: Vec<FlowId>,
    defaults: FlowDefaults,
    acls: BTreeMap<String, RuleSet>,
}

impl<P> Flows<P> {
    /// Builds the flows of a configuration: the input flow, one default global flow per class
    /// (`class:<name>`, `forward` only, weight [`default_class_weight`]), then `specs` in order. Errors name the flow:
    /// `flows[video].weight`.
    pub fn new(
        cfg: &FlowSchedConfig,
        class_names: &[String],
        specs: &[FlowSpec],
        acls: &[AclSpec],
        ifindex_of: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<Flows<P>, FieldError> {
        let defaults = cfg.defaults()?;
        // The input flow's quantum bounds how long one input turn drains grants.
        let input = FlowParams {
            share: Share::Weight(cfg.input_weight),
            quantum_ns: defaults.quantum_ns,
            queue_limit: 1,
        };
        // Class flows count against max-flows too; room is made for them.
        let mut sched = FlowSched::new(input, cfg.max_flows + class_names.len())?;
        let mut acl_map = BTreeMap::new();
        for (i, a) in acls.iter().enumerate() {
            if acl_map.contains_key(&a.name) {
                return Err(FieldError::new(
                    format!("acls[{i}].name"),
                    format!("`{}` defined twice", a.name),
                ));
            }
            acl_map.insert(
                a.name.clone(),
                a.resolve(ifindex_of)
                    .map_err(|e| e.within(&format!("acls[{i}]")))?,
            );
        }
        let mut class_defaults = Vec::new();
        for (i, c) in class_names.iter().enumerate() {
            // The classes' own default weight (as `wfq` uses it): turning flows on must not
            // take the highest class's precedence away.
            let p = FlowParams {
                share: Share::Weight(default_class_weight(i, class_names.len())),
                quantum_ns: defaults.quantum_ns,
                queue_limit: defaults.queue_limit,
            };
            class_defaults.push(sched.add(&format!("class:{c}"), p, Pipeline::forward_only())?);
        }
        let mut flows = Flows {
            sched,
            table: FlowTable::new(class_defaults.clone()),
            specs: BTreeMap::new(),
            class_names: class_names.to_vec(),
            class_defaults,
            defaults,
            acls: acl_map,
        };
        for s in specs {
            flows
                .add(s, ifindex_of)
                .map_err(|e| e.within(&format!("flows[{}]", s.name)))?;
        }
        Ok(flows)
    }

    /// Sets the weight of class `class`'s default global flow (`class:<name>`).
    pub fn set_class_weight(&mut self, class: ClassId, weight: u32) -> Result<(), FieldError> {
        let id = *self
            .class_defaults
            .get(class)
            .ok_or_else(|| FieldError::new("class", format!("no class {class}")))?;
        let mut p = self.sched.view(id).expect("class flows stay").params;
        p.share = Share::Weight(weight);
        // An unchanged queue limit drops nothing.
        self.sched.set(id, p).map(drop)
    }

    /// Installs a flow; nothing changes if it is refused.
    pub fn add(
        &mut self,
        spec: &FlowSpec,
        ifindex_of: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<FlowId, FieldError> {
        if self.specs.contains_key(&spec.name) || spec.name.starts_with("class:") {
            return Err(FieldError::new(
                "name",
                format!("a flow `{}` exists already", spec.name),
            ));
        }
        let def = spec.resolve(&self.class_names, ifindex_of, self.defaults, &self.acls)?;
        if def.rule.is_none() {
            if let Some(c) = def.class {
                if let Some(other) = self
                    .specs
                    .values()
                    .find(|(_, d, _)| d.rule.is_none() && d.class == Some(c))
                {
                    return Err(FieldError::new(
                        "class",
                        format!(
                            "class `{}` already has its global flow `{}`",
                            self.class_names[c], other.0.name
                        ),
                    ));
                }
            }
        }
        self.table.check(&def)?;
        let id = self
            .sched
            .add(&def.name, def.params, def.pipeline.clone())?;
        self.table
            .insert(&def, id)
            .expect("checked just above; nothing changed since");
        self.specs
            .insert(spec.name.clone(), (spec.clone(), def, id));
        Ok(id)
    }

    /// Changes a flow's share, quantum, queue limit or pipeline (not its match or class: remove
    /// and add it for that). Returns packets dropped by a shorter queue limit.
    pub fn set(
        &mut self,
        spec: &FlowSpec,
        ifindex_of: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<Vec<P>, FieldError> {
        let Some((old, _, id)) = self.specs.get(&spec.name) else {
            return Err(FieldError::new("name", format!("no flow `{}`", spec.name)));
        };
        let id = *id;
        let mut merged = old.clone();
        if spec.matches.is_some() && spec.matches != old.matches
            || spec.class.is_some() && spec.class != old.class
        {
            return Err(FieldError::new(
                "match",
                "a flow's match and class stay; remove the flow and add it to change them",
            ));
        }
        if spec.weight.is_some() || spec.cpu.is_some() {
            merged.weight = spec.weight;
            merged.cpu = spec.cpu;
        }
        if spec.quantum_us.is_some() {
            merged.quantum_us = spec.quantum_us;
        }
        if spec.queue.is_some() {
            merged.queue = spec.queue;
        }
        let new_pipeline = !spec.pipeline.is_empty();
        if new_pipeline {
            merged.pipeline = spec.pipeline.clone();
        }
        if spec.precedence.is_some() && spec.precedence != old.precedence {
            return Err(FieldError::new(
                "precedence",
                "a flow's precedence stays; remove the flow and add it to change it",
            ));
        }
        let def = merged.resolve(&self.class_names, ifindex_of, self.defaults, &self.acls)?;
        let dropped = self.sched.set(id, def.params)?;
        if new_pipeline {
            self.sched
                .set_pipeline(id, def.pipeline.clone())
                .expect("flow exists");
        }
        self.specs.insert(spec.name.clone(), (merged, def, id));
        Ok(dropped)
    }

    /// Removes a flow; its queued packets are handed back for the caller to free. Traffic it
    /// matched goes to the next match (its class's global flow at the latest).
    pub fn remove(&mut self, name: &str) -> Result<Vec<P>, FieldError> {
        let Some((_, def, id)) = self.specs.remove(name) else {
            return Err(FieldError::new("name", format!("no flow `{name}`")));
        };
        let fallback = def.class.map(|c| self.class_defaults[c]);
        self.table.remove(name, id, fallback);
        self.sched.remove(id)
    }

    /// The flow of a packet of ingress class `class`.
    #[inline]
    pub fn classify(&self, frame: &[u8], ingress: u32, class: ClassId) -> FlowId {
        self.table.lookup(frame, ingress, class)
    }

    /// The configured spec of a flow.
    pub fn spec(&self, name: &str) -> Option<&FlowSpec> {
        self.specs.get(name).map(|(s, _, _)| s)
    }

    /// Every flow, the input flow and class flows first.
    pub fn list(&self) -> Vec<FlowInfo> {
        self.list_where(|_| true)
    }

    /// The input flow, the class flows and every flow that has seen a packet: what counters
    /// and metrics carry when thousands of installed flows are idle.
    pub fn list_used(&self) -> Vec<FlowInfo> {
        // This runs over every installed flow for every snapshot: no lookups. The input flow
        // and the class flows are ids 0..=classes (installed first, never removed).
        let fixed = self.class_defaults.len() as FlowId;
        self.list_where(|v| v.id <= fixed || v.stats.enqueued + v.stats.queue_drops > 0)
    }

    fn list_where(&self, keep: impl Fn(&sched::FlowView<'_>) -> bool) -> Vec<FlowInfo> {
        self.sched
            .views()
            .filter(|v| keep(v))
            .map(|v| {
                let spec = self.specs.get(v.name);
                let class = match spec {
                    Some((s, _, _)) => s.class.clone(),
                    None => v.name.strip_prefix("class:").map(str::to_string),
                };
                FlowInfo {
                    id: v.id,
                    name: v.name.to_string(),
                    class,
                    matches: spec.map(|(s, _, _)| s.match_text()).unwrap_or_default(),
                    precedence: spec.map(|(_, d, _)| d.precedence).unwrap_or(0),
                    share: v.params.share,
                    norm_share: self.sched.share_of(v.id).unwrap_or(0.0),
                    quantum_ns: v.params.quantum_ns,
                    queue_limit: v.params.queue_limit,
                    queue_len: v.queue_len,
                    pipeline: if v.id == INPUT {
                        Vec::new()
                    } else {
                        v.pipeline.texts()
                    },
                    elements: v.pipeline.stats().to_vec(),
                    stats: v.stats,
                }
            })
            .collect()
    }
}
