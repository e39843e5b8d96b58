//! The replies of the control commands that change or list something, as types (the router
//! fills them, clients read them), and their text forms: one place for what `ctl` prints.

use llr_core::sched::{Budget, StrategyKind};
use llr_io::xsk::WakeMode;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    flow_reply_text, interfaces_table, status_text, table, InterfaceView, StaticRouteView,
    StatusView,
};
use crate::ctl::{Command, RuleEntry};
use crate::metrics::MetricsSnapshot;

/// `interfaces`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfacesView {
    pub interfaces: Vec<InterfaceView>,
}

/// `rules.list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesView {
    pub rules: Vec<RuleEntry>,
}

/// `rules.remove`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRemoved {
    pub removed: RuleEntry,
}

/// `budget.set`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetChanged {
    pub class: String,
    pub budget: Budget,
    /// The budget the worker ran before.
    pub previous: Option<u32>,
}

/// `device_budget.set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceBudgetChanged {
    pub device_budget: u32,
    pub previous: u32,
}

/// `strategy.set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StrategyChanged {
    pub strategy: StrategyKind,
    pub previous: StrategyKind,
}

/// A wake-up mode with the adaptive mode's spin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupState {
    pub wakeup: WakeMode,
    pub spin_us: u64,
}

impl std::fmt::Display for WakeupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.wakeup {
            WakeMode::Adaptive => write!(f, "adaptive (spin {} µs)", self.spin_us),
            w => f.write_str(w.name()),
        }
    }
}

/// `wakeup.set`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupChanged {
    #[serde(flatten)]
    pub now: WakeupState,
    pub previous: WakeupState,
}

/// `route.add`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteAdded {
    pub route: StaticRouteView,
    /// A static route for the same prefix was replaced.
    pub replaced: bool,
}

/// `route.remove`: the prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteRemoved {
    pub removed: String,
}

/// `reload`: the file and every field it changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReloadView {
    pub reloaded: String,
    /// The names of the changed fields, in the order of `changes`.
    pub changed: Vec<String>,
    pub changes: Vec<FieldChange>,
}

/// One field a reload changed: its values as the configuration holds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    pub old: Option<Value>,
    pub new: Option<Value>,
    /// The file did not change the field (its value there is the one of the last load): the
    /// reload undid a change made through the control socket.
    pub reverted: bool,
}

/// The text `ctl` prints for the reply `v` to `cmd`, or `None` for the commands whose replies
/// another view prints (listings, flows). A reply that does not read as its type is shown as
/// the JSON it is.
pub fn reply_text(cmd: &Command, v: &Value) -> Option<String> {
    fn read<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, String> {
        T::deserialize(v).map_err(|_| format!("{v:#}\n"))
    }
    let text = match cmd {
        Command::Status {} => read::<StatusView>(v).map(|s| status_text(&s)),
        Command::Counters {} => read::<MetricsSnapshot>(v).map(|m| counters_table(&m)),
        Command::Interfaces {} => {
            read::<InterfacesView>(v).map(|i| interfaces_table(&i.interfaces))
        }
        Command::Filter {} => read::<FilterView>(v).map(|f| filter_text(&f)),
        Command::RulesList {} => read::<RulesView>(v).map(|r| rules_table(&r.rules)),
        Command::RulesAdd { .. } => {
            read::<RuleEntry>(v).map(|r| format!("added rule {}: {}\n", r.id, r.rule))
        }
        Command::RulesRemove { id } => {
            read::<RuleRemoved>(v).map(|r| format!("removed rule {id}: {}\n", r.removed.rule))
        }
        Command::BudgetSet { class, budget } => read::<BudgetChanged>(v).map(|b| {
            let previous = b.previous.map_or("-".to_string(), |p| p.to_string());
            format!("budget of class {class}: {previous} -> {budget}\n")
        }),
        Command::DeviceBudgetSet { budget } => read::<DeviceBudgetChanged>(v)
            .map(|d| format!("device budget: {} -> {budget}\n", d.previous)),
        Command::StrategySet { strategy } => {
            read::<StrategyChanged>(v).map(|s| format!("strategy: {} -> {strategy}\n", s.previous))
        }
        Command::WakeupSet { .. } => {
            read::<WakeupChanged>(v).map(|w| format!("wake-up: {} -> {}\n", w.previous, w.now))
        }
        Command::RouteAdd { prefix, via, dev } => read::<RouteAdded>(v).map(|r| {
            format!(
                "{} static route {prefix} {}dev {dev}\n",
                if r.replaced { "replaced" } else { "added" },
                via.as_ref()
                    .map(|g| format!("via {g} "))
                    .unwrap_or_default()
            )
        }),
        Command::RouteRemove { prefix } => Ok(format!("removed static route {prefix}\n")),
        Command::Reload {} => read::<ReloadView>(v).map(|r| reload_text(&r)),
        Command::Fib { .. }
        | Command::FibSummary { .. }
        | Command::FibGet { .. }
        | Command::FibRules {}
        | Command::Neighbours { .. } => return None,
        Command::FlowList { .. }
        | Command::FlowGet { .. }
        | Command::FlowAdd { .. }
        | Command::FlowSet { .. }
        | Command::FlowDel { .. } => flow_reply_text(cmd, v)?,
    };
    Some(text.unwrap_or_else(|raw| raw))
}

/// What `ctl show filter` shows.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FilterView {
    /// `host` or `off`.
    pub mode: String,
    /// `refuse` or `kernel`.
    pub unsupported: String,
    /// One line: what llrouter does with the ruleset now.
    pub summary: String,
    /// Why the ruleset could not be read last time, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Times the ruleset was read since start.
    pub loads: u64,
    /// Every rule and policy on the forwarding path, with its counts.
    pub rules: Vec<llr_core::filter::RuleReport>,
    /// Who forwards IPv4 and IPv6: `llrouter`, `conntrack` (the kernel until a connection is
    /// established, then llrouter) or `kernel`.
    #[serde(default)]
    pub families: Vec<String>,
    /// Established connections llrouter carries now (conntrack families).
    #[serde(default)]
    pub carried_connections: u64,
    /// Connections llrouter took from the kernel since start.
    #[serde(default)]
    pub taken_connections: u64,
}

/// `show filter`: the summary, then one row per rule and policy, in the ruleset's own names,
/// with where its packets go when it is one llrouter hands to the kernel. PACKETS counts all a
/// rule matched; IN XDP, those of them the classifier dropped before the rings.
pub fn filter_text(f: &FilterView) -> String {
    let mut out = format!(
        "firewall: mode {}, unsupported rules: {}\n{}\n",
        f.mode, f.unsupported, f.summary
    );
    if let Some(e) = &f.error {
        out += &format!("error: {e}\n");
    }
    if let [v4, v6] = f.families.as_slice() {
        out += &format!("IPv4: {v4}, IPv6: {v6}");
        if f.families.iter().any(|m| m == "conntrack") {
            out += &format!(
                "; connections carried now {}, taken from the kernel since start {}",
                f.carried_connections, f.taken_connections
            );
        }
        out += "\n";
    }
    if f.rules.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = (f.rules.iter())
        .map(|r| {
            let o = &r.origin;
            vec![
                format!("{} {}", o.family, o.table),
                o.chain.clone(),
                if o.handle == 0 {
                    "-".into()
                } else {
                    o.handle.to_string()
                },
                r.packets.to_string(),
                r.bytes.to_string(),
                r.xdp_packets.to_string(),
                match &o.kernel_because {
                    Some(why) => format!("{} [to the kernel: {why}]", o.text),
                    None if o.conntrack => format!("{} [established connections]", o.text),
                    None => o.text.clone(),
                },
            ]
        })
        .collect();
    out + &table(
        &[
            "TABLE", "CHAIN", "HANDLE", "PACKETS", "BYTES", "IN XDP", "RULE",
        ],
        &rows,
    )
}

/// `rules list`.
pub fn rules_table(rules: &[RuleEntry]) -> String {
    if rules.is_empty() {
        return "no rules\n".into();
    }
    let rows: Vec<Vec<String>> = (rules.iter())
        .map(|r| vec![r.id.to_string(), r.rule.clone()])
        .collect();
    table(&["ID", "RULE"], &rows)
}

/// `reload`: the file, then each field it changed, old -> new, and whether that undid a change
/// made with `ctl` (the file itself did not change the field).
pub fn reload_text(r: &ReloadView) -> String {
    let file = &r.reloaded;
    if r.changes.is_empty() {
        return format!("reloaded {file}: nothing changed\n");
    }
    let mut out = format!("reloaded {file}:\n");
    for c in &r.changes {
        let short = |x: &Option<Value>| {
            let t = match x {
                None | Some(Value::Null) => "-".to_string(),
                Some(v) => v.to_string(),
            };
            if t.chars().count() > 60 {
                t.chars().take(59).collect::<String>() + "…"
            } else {
                t
            }
        };
        let revert = if c.reverted {
            " (reverts a change made with ctl)"
        } else {
            ""
        };
        out.push_str(&format!(
            "  {}: {} -> {}{revert}\n",
            c.field,
            short(&c.old),
            short(&c.new)
        ));
    }
    out
}

/// Counters as tables: rings, then engine devices and workers, then non-zero drops and passes.
pub fn counters_table(m: &MetricsSnapshot) -> String {
    let mut out = format!("strategy {}\n", m.strategy.map_or("-", StrategyKind::name));
    let rows: Vec<Vec<String>> = m
        .rings
        .iter()
        .map(|r| {
            vec![
                r.class.clone(),
                r.worker.to_string(),
                r.ring.to_string(),
                r.packets.to_string(),
                r.bytes.to_string(),
                r.served.to_string(),
                r.drops.to_string(),
                r.budget_hits.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "CLASS",
            "WORKER",
            "RING",
            "PACKETS",
            "BYTES",
            "SERVED",
            "RING-FULL",
            "BUDGET-HITS",
        ],
        &rows,
    ));
    if !m.interfaces.is_empty() {
        let rows: Vec<Vec<String>> = m
            .interfaces
            .iter()
            .map(|i| {
                vec![
                    i.interface.clone(),
                    i.rx_packets.to_string(),
                    i.tx_packets.to_string(),
                    i.kernel_pass_packets.to_string(),
                    i.dropped_packets.to_string(),
                    i.errors.to_string(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table(
            &["INTERFACE", "RX", "TX", "TO-KERNEL", "DROPPED", "ERRORS"],
            &rows,
        ));
        out.push('\n');
    }
    for d in &m.devices {
        out.push_str(&format!(
            "worker {} engine device {}: wakeups {} rearms {} budget exhaustions {} passes {}\n",
            d.worker, d.device, d.wakeups, d.rearms, d.budget_exhaustions, d.passes
        ));
    }
    for w in &m.workers {
        out.push_str(&format!(
            "worker {} on core {}: poll rounds {} busy {:.1}% ({:.3} s)\n",
            w.worker,
            w.core,
            w.poll_rounds,
            w.busy_ratio * 100.0,
            w.busy_seconds
        ));
    }
    for (what, list) in [("dropped", &m.drops), ("to kernel", &m.kernel_pass)] {
        let nz: Vec<String> = list
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        if !nz.is_empty() {
            out.push_str(&format!("{what}: {}\n", nz.join(", ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricsSnapshot;

    fn reply(cmd: &Command, v: &Value) -> String {
        reply_text(cmd, v).expect("a reply with a text")
    }

    #[test]
    fn reload_names_each_change_and_reverts() {
        let v = serde_json::json!({"reloaded": "/etc/llrouter/router.toml", "changed": ["strategy", "wake"],
            "changes": [
                {"field": "strategy", "old": "sq", "new": "ll-wfq", "reverted": true},
                {"field": "wake", "old": "busy", "new": "interrupt", "reverted": false}]});
        assert_eq!(
            reload_text(&serde_json::from_value(v).unwrap()),
            "reloaded /etc/llrouter/router.toml:\n  strategy: \"sq\" -> \"ll-wfq\" (reverts a change made with ctl)\n  wake: \"busy\" -> \"interrupt\"\n"
        );
        let v = serde_json::json!({"reloaded": "r.toml", "changed": [], "changes": []});
        assert_eq!(
            reload_text(&serde_json::from_value(v).unwrap()),
            "reloaded r.toml: nothing changed\n"
        );
    }

    #[test]
    fn human_output() {
        let v = serde_json::json!({"rules": [{"id": 3, "rule": "class=rt dst_port=5000"}]});
        let h = reply(&Command::RulesList {}, &v);
        assert!(h.contains("3  class=rt dst_port=5000"), "{h}");
        let h = reply(
            &Command::BudgetSet {
                class: "rt".into(),
                budget: Budget::packets(30).unwrap(),
            },
            &serde_json::json!({"class": "rt", "budget": 30, "previous": 60}),
        );
        assert_eq!(h, "budget of class rt: 60 -> 30\n");
        let h = reply(
            &Command::StrategySet {
                strategy: StrategyKind::Sq,
            },
            &serde_json::json!({"strategy": "sq", "previous": "ll-wfq"}),
        );
        assert_eq!(h, "strategy: ll-wfq -> sq\n");
        let h = reply(
            &Command::WakeupSet {
                mode: WakeMode::Adaptive,
                spin_us: Some(20),
            },
            &serde_json::json!({"wakeup": "adaptive", "spin_us": 20, "previous": {"wakeup": "interrupt", "spin_us": 50}}),
        );
        assert_eq!(h, "wake-up: interrupt -> adaptive (spin 20 µs)\n");
        let snap = MetricsSnapshot {
            strategy: Some(StrategyKind::Sq),
            drops: vec![("a".into(), 0), ("b".into(), 2)],
            interfaces: vec![crate::metrics::InterfaceMetrics {
                interface: "eth0".into(),
                rx_packets: 12,
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = serde_json::to_value(&snap).unwrap();
        let h = reply(&Command::Counters {}, &v);
        assert!(h.starts_with("strategy sq"));
        assert!(h.contains("dropped: b 2\n") && !h.contains("a 0"), "{h}");
        let eth0: Vec<&str> = h
            .lines()
            .find(|l| l.starts_with("eth0"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(eth0, ["eth0", "12", "0", "0", "0", "0"], "{h}");
    }
}
