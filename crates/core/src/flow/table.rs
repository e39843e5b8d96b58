//! Flow specifications and the per-packet flow lookup.
//!
//! A flow is matched by a 5-tuple with prefixes and port ranges (the classifier rule's fields,
//! `match`), optionally within one ingress class (`class`); a flow with a `class` and no
//! `match` *is* that class's global flow. Traffic of a class no flow matches goes to the class's
//! global flow: the one configured, or a default one (`forward` only) named after the
//! class.
//!
//! Lookup order: exact 5-tuples first (a hash lookup: this is the shape of the thousands of
//! per-connection flows a control plane installs), then the wildcard specs by descending
//! `precedence`, then the class's global flow. Two wildcard specs that can match the same packet
//! must have different precedences — the table refuses them otherwise, naming both.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use serde::{Deserialize, Serialize};

use super::element::{AclLookup, Pipeline};
use super::sched::{FlowId, FlowParams, Share};
use crate::classify::{IpPrefix, PortRange, Rule, RuleSpec};
use crate::error::FieldError;
use crate::fwd::hash::FxHasher;
use crate::sched::ClassId;
use crate::wire::{parse_frame, IpVersion, PacketMeta};

/// A flow as configured (`[[flows]]` in the router's TOML, `llrouter ctl flow add`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FlowSpec {
    pub name: String,
    /// Only traffic of this ingress class; without `match`: the class's global flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The classifier-rule fields (src, dst, proto, src_port, dst_port, dscp, …), no class.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matches: Option<RuleSpec>,
    /// Proportional CPU share (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Guaranteed fraction of the CPU instead of a weight (0 < cpu < 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
    /// Preemption quantum qᵢ in µs (default: the flow scheduler's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantum_us: Option<f64>,
    /// Queue limit in packets (default: the flow scheduler's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<u32>,
    /// Elements in their text form; `forward` is implied at the end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipeline: Vec<String>,
    /// Order among overlapping wildcard flows (higher first; default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precedence: Option<u32>,
}

/// Defaults the flow specs fall back on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowDefaults {
    pub quantum_ns: u64,
    pub queue_limit: u32,
}

impl Default for FlowDefaults {
    fn default() -> Self {
        let p = FlowParams::default();
        FlowDefaults {
            quantum_ns: p.quantum_ns,
            queue_limit: p.queue_limit,
        }
    }
}

/// A checked flow spec.
#[derive(Debug, Clone)]
pub struct FlowDef {
    pub name: String,
    pub class: Option<ClassId>,
    pub rule: Option<Rule>,
    pub precedence: u32,
    pub params: FlowParams,
    pub pipeline: Pipeline,
}

impl FlowSpec {
    /// Checks every field. Errors name the field as `flows[<name>].<field>` would need it: the
    /// caller adds the prefix.
    pub fn resolve(
        &self,
        class_names: &[String],
        ifindex_of: impl Fn(&str) -> Option<u32>,
        defaults: FlowDefaults,
        acls: &dyn AclLookup,
    ) -> Result<FlowDef, FieldError> {
        if self.name.is_empty()
            || self.name.len() > 64
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return Err(FieldError::new(
                "name",
                format!(
                    "`{}`: 1-64 characters of letters, digits, - _ . :",
                    self.name
                ),
            ));
        }
        let class = self
            .class
            .as_ref()
            .map(|c| {
                class_names.iter().position(|n| n == c).ok_or_else(|| {
                    FieldError::new(
                        "class",
                        format!("unknown class `{c}` (known: {})", class_names.join(", ")),
                    )
                })
            })
            .transpose()?;
        let rule = match &self.matches {
            None => None,
            Some(m) if !m.class.is_empty() => {
                return Err(FieldError::new(
                    "match.class",
                    "a flow's match has no class (the flow's own `class` names it)",
                ))
            }
            Some(m) => Some(m.resolve_match(ifindex_of).map_err(|e| e.within("match"))?),
        };
        if class.is_none() && rule.is_none() {
            return Err(FieldError::new(
                "match",
                "a flow needs a match, a class, or both",
            ));
        }
        let share = match (self.weight, self.cpu) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new("cpu", "give weight or cpu, not both"))
            }
            (_, Some(f)) => Share::Cpu(f),
            (w, None) => Share::Weight(w.unwrap_or(1)),
        };
        let quantum_ns = match self.quantum_us {
            None => defaults.quantum_ns,
            Some(q) if q.is_finite() && q > 0.0 && q <= 1e6 => (q * 1000.0).round().max(1.0) as u64,
            Some(q) => {
                return Err(FieldError::new(
                    "quantum-us",
                    format!("{q} is not a quantum (more than 0, at most 1 s)"),
                ))
            }
        };
        let params = FlowParams {
            share,
            quantum_ns,
            queue_limit: self.queue.unwrap_or(defaults.queue_limit),
        };
        params.validate()?;
        let pipeline = Pipeline::parse(&self.pipeline, acls)?;
        Ok(FlowDef {
            name: self.name.clone(),
            class,
            rule,
            precedence: self.precedence.unwrap_or(0),
            params,
            pipeline,
        })
    }

    /// The match in the one-line rule syntax (`proto=udp dport=5000`), empty without one.
    pub fn match_text(&self) -> String {
        self.matches
            .as_ref()
            .map(|m| {
                let mut m = m.clone();
                m.class.clear();
                m.to_string()
                    .trim_start_matches("class=")
                    .trim()
                    .to_string()
            })
            .unwrap_or_default()
    }
}

/// An exact 5-tuple: what a per-connection flow matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Exact {
    v6: bool,
    proto: u8,
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
}

impl Exact {
    /// The rule as an exact 5-tuple, if it is one: full-length prefixes, a protocol, single
    /// ports when the protocol has them, and nothing else.
    fn of(r: &Rule) -> Option<Exact> {
        let (s, d, proto) = (r.src?, r.dst?, r.proto?);
        let full = |p: IpPrefix| p.len() == if p.addr().is_ipv4() { 32 } else { 128 };
        if !full(s) || !full(d) || r.ifindex.is_some() || r.dscp.is_some() || r.flex.is_some() {
            return None;
        }
        if r.vlan_id.is_some() || r.vlan_pcp.is_some() {
            return None;
        }
        let single = |p: Option<PortRange>| p.filter(|p| p.lo() == p.hi()).map(|p| p.lo());
        let (sport, dport) = if crate::wire::l4::has_ports(proto) {
            (single(r.sport)?, single(r.dport)?)
        } else if r.sport.is_none() && r.dport.is_none() {
            (0, 0)
        } else {
            return None;
        };
        Some(Exact {
            v6: s.addr().is_ipv6(),
            proto,
            src: bytes16(s.addr()),
            dst: bytes16(d.addr()),
            sport,
            dport,
        })
    }

    fn of_packet(m: &PacketMeta) -> Exact {
        Exact {
            v6: m.version == IpVersion::V6,
            proto: m.protocol,
            src: m.src,
            dst: m.dst,
            sport: if m.has_ports { m.src_port } else { 0 },
            dport: if m.has_ports { m.dst_port } else { 0 },
        }
    }
}

fn bytes16(a: std::net::IpAddr) -> [u8; 16] {
    let mut b = [0u8; 16];
    match a {
        std::net::IpAddr::V4(v) => b[..4].copy_from_slice(&v.octets()),
        std::net::IpAddr::V6(v) => b = v.octets(),
    }
    b
}

#[derive(Debug, Clone)]
struct Wild {
    name: String,
    class: Option<ClassId>,
    rule: Rule,
    precedence: u32,
    id: FlowId,
}

/// The per-packet flow lookup.
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    exact: HashMap<Exact, (FlowId, Option<ClassId>), BuildHasherDefault<FxHasher>>,
    exact_names: HashMap<String, Exact>,
    wild: Vec<Wild>,
    /// The global flow of each class.
    class_flows: Vec<FlowId>,
}

impl FlowTable {
    /// A table sending class c to `class_flows[c]`.
    pub fn new(class_flows: Vec<FlowId>) -> FlowTable {
        FlowTable {
            class_flows,
            ..Default::default()
        }
    }

    /// Whether the lookup reads the packet (anything beyond the class flows).
    pub fn needs_parse(&self) -> bool {
        !self.exact.is_empty() || !self.wild.is_empty()
    }

    /// Flow specs matched per packet (besides the class flows).
    pub fn len(&self) -> usize {
        self.exact.len() + self.wild.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The global flow of `class`.
    pub fn class_flow(&self, class: ClassId) -> Option<FlowId> {
        self.class_flows.get(class).copied()
    }

    /// Makes `id` the global flow of `class`.
    pub fn set_class_flow(&mut self, class: ClassId, id: FlowId) {
        if class < self.class_flows.len() {
            self.class_flows[class] = id;
        }
    }

    /// Checks that `def` can join the table (no duplicate exact tuple, no overlap with a
    /// wildcard of the same precedence) without changing anything.
    pub fn check(&self, def: &FlowDef) -> Result<(), FieldError> {
        let Some(rule) = def.rule else {
            return Ok(());
        };
        if let Some(e) = Exact::of(&rule).filter(|_| def.class.is_none()) {
            if let Some(other) = self
                .exact_names
                .iter()
                .find(|(_, x)| **x == e)
                .map(|(n, _)| n)
            {
                return Err(FieldError::new(
                    "match",
                    format!("the same 5-tuple as flow `{other}`"),
                ));
            }
            return Ok(());
        }
        for w in &self.wild {
            if w.precedence == def.precedence
                && classes_overlap(w.class, def.class)
                && rules_overlap(&w.rule, &rule)
            {
                return Err(FieldError::new(
                    "precedence",
                    format!(
                        "overlaps flow `{}` at the same precedence {}: give one a higher precedence",
                        w.name, w.precedence
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Adds `def` as flow `id` (after [`check`](Self::check)).
    pub fn insert(&mut self, def: &FlowDef, id: FlowId) -> Result<(), FieldError> {
        self.check(def)?;
        let Some(rule) = def.rule else {
            if let Some(c) = def.class {
                self.set_class_flow(c, id);
            }
            return Ok(());
        };
        match Exact::of(&rule).filter(|_| def.class.is_none()) {
            Some(e) => {
                self.exact.insert(e, (id, def.class));
                self.exact_names.insert(def.name.clone(), e);
            }
            None => {
                let w = Wild {
                    name: def.name.clone(),
                    class: def.class,
                    rule,
                    precedence: def.precedence,
                    id,
                };
                let at = self
                    .wild
                    .iter()
                    .position(|x| x.precedence < w.precedence)
                    .unwrap_or(self.wild.len());
                self.wild.insert(at, w);
            }
        }
        Ok(())
    }

    /// Removes the spec of flow `name`; a class flow falls back to `fallback`.
    pub fn remove(&mut self, name: &str, id: FlowId, fallback: Option<FlowId>) {
        if let Some(e) = self.exact_names.remove(name) {
            self.exact.remove(&e);
        }
        self.wild.retain(|w| w.name != name);
        for f in &mut self.class_flows {
            if *f == id {
                if let Some(fb) = fallback {
                    *f = fb;
                }
            }
        }
    }

    /// The flow of a packet of ingress class `class`.
    #[inline]
    pub fn lookup(&self, frame: &[u8], ingress: u32, class: ClassId) -> FlowId {
        let fallback = self
            .class_flows
            .get(class)
            .or(self.class_flows.last())
            .copied()
            .unwrap_or(super::sched::INPUT);
        if !self.needs_parse() {
            return fallback;
        }
        let Ok(m) = parse_frame(frame) else {
            return fallback;
        };
        if !self.exact.is_empty() {
            if let Some(&(id, _)) = self.exact.get(&Exact::of_packet(&m)) {
                return id;
            }
        }
        for w in &self.wild {
            if w.class.is_none_or(|c| c == class)
                && w.rule.matches(frame, m.vlan, Some(&m), ingress)
            {
                return w.id;
            }
        }
        fallback
    }
}

fn classes_overlap(a: Option<ClassId>, b: Option<ClassId>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

/// Whether some packet could match both rules (conservative: a flex compare is assumed to
/// overlap unless the two compare the same bits to different values).
pub fn rules_overlap(a: &Rule, b: &Rule) -> bool {
    fn eq<T: PartialEq>(x: Option<T>, y: Option<T>) -> bool {
        match (x, y) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
    }
    fn pfx(x: Option<IpPrefix>, y: Option<IpPrefix>) -> bool {
        match (x, y) {
            (Some(x), Some(y)) => {
                x.addr().is_ipv4() == y.addr().is_ipv4()
                    && (x.contains(y.addr()) || y.contains(x.addr()))
            }
            _ => true,
        }
    }
    fn ports(x: Option<PortRange>, y: Option<PortRange>) -> bool {
        match (x, y) {
            (Some(x), Some(y)) => x.lo() <= y.hi() && y.lo() <= x.hi(),
            _ => true,
        }
    }
    let versions = match (a.required_version(), b.required_version()) {
        (Ok(x), Ok(y)) => eq(x, y),
        _ => false,
    };
    let flex = match (a.flex, b.flex) {
        (Some(x), Some(y)) if x.offset() == y.offset() && x.mask() == y.mask() => {
            x.value() == y.value()
        }
        _ => true,
    };
    versions
        && flex
        && eq(a.ifindex, b.ifindex)
        && eq(a.vlan_id, b.vlan_id)
        && eq(a.vlan_pcp, b.vlan_pcp)
        && eq(a.proto, b.proto)
        && eq(a.dscp, b.dscp)
        && pfx(a.src, b.src)
        && pfx(a.dst, b.dst)
        && ports(a.sport, b.sport)
        && ports(a.dport, b.dport)
}
