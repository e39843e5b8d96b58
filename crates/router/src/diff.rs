//! How two configurations differ, and which of the differences a running router can apply.

use serde_json::Value;

use crate::config::RouterConfig;

/// Top-level fields the running router applies without a restart: the scheduler (layout,
/// budgets and the automatic budget's target), the rules, the static routes and neighbours, and the wake-up mode. `classes` is
/// live only while the class names stay, `flows` while flows are on before and after (see
/// [`diff`]).
const LIVE: &[&str] = &[
    "strategy",
    "device-budget",
    "time-slice-ns",
    "auto-budget",
    "classes",
    "rules",
    "routes",
    "neighbors",
    "wake",
    "spin-us",
];

/// The fields (as spelled in the file, in alphabetical order) that differ between two
/// configurations, and those of them that need a restart of the router.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigDiff {
    pub changed: Vec<String>,
    pub restart: Vec<String>,
}

impl ConfigDiff {
    /// Whether the running router can apply the new configuration.
    pub fn is_live(&self) -> bool {
        self.restart.is_empty()
    }
}

/// Compares `old` and `new` field by field, through their serialized form, so a field added
/// to [`RouterConfig`] is covered (and needs a restart unless listed as live).
pub fn diff(old: &RouterConfig, new: &RouterConfig) -> ConfigDiff {
    let (a, b) = (fields(old), fields(new));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut d = ConfigDiff::default();
    for k in keys {
        if a.get(k) == b.get(k) {
            continue;
        }
        d.changed.push(k.clone());
        let live = match k.as_str() {
            "classes" => class_names(old) == class_names(new),
            "flows" => flows_on(old) && flows_on(new),
            k => LIVE.contains(&k),
        };
        if !live {
            d.restart.push(k.clone());
        }
    }
    d
}

/// The configuration's top-level fields as the file spells them.
pub(crate) fn fields(cfg: &RouterConfig) -> serde_json::Map<String, Value> {
    match serde_json::to_value(cfg) {
        Ok(Value::Object(m)) => m,
        // A struct of plain data serializes to an object.
        other => unreachable!("RouterConfig serialized to {other:?}"),
    }
}

/// The flow scheduler runs (its section, or flows that imply it).
fn flows_on(cfg: &RouterConfig) -> bool {
    cfg.flow_scheduler.is_some() || !cfg.flows.is_empty()
}

fn class_names(cfg: &RouterConfig) -> Vec<&str> {
    cfg.classes.iter().map(|c| c.name.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use llr_core::sched::ClassSpec;

    fn base() -> RouterConfig {
        RouterConfig {
            interfaces: vec!["a".into(), "b".into()],
            classes: vec![ClassSpec::named("rt"), ClassSpec::named("be")],
            ..Default::default()
        }
    }

    #[test]
    fn equal_configs_differ_in_nothing() {
        assert_eq!(diff(&base(), &base()), ConfigDiff::default());
    }

    #[test]
    fn live_and_restart_fields_are_told_apart() {
        let mut n = base();
        n.classes[0].budget = llr_core::sched::Budget::packets(10).unwrap();
        n.strategy = llr_core::sched::StrategyKind::Prio;
        n.wake = llr_io::xsk::WakeMode::Busy;
        let d = diff(&base(), &n);
        assert_eq!(d.changed, ["classes", "strategy", "wake"]);
        assert!(d.is_live(), "{d:?}");
        n.classes[1].name = "bulk".into();
        n.tx_batch = 1;
        n.metrics = Some(crate::config::MetricsConfig {
            listen: "127.0.0.1:1".into(),
            allow_remote: false,
        });
        n.icmp.rate = 1;
        let d = diff(&base(), &n);
        assert_eq!(d.restart, ["classes", "icmp", "metrics", "tx-batch"]);
        for f in [
            "interfaces",
            "cores",
            "rings",
            "attach",
            "steering",
            "control",
        ] {
            let mut n = base();
            match f {
                "interfaces" => n.interfaces.push("c".into()),
                "cores" => n.cores.push(0),
                "rings" => n.rings.rx_size *= 2,
                "attach" => n.attach = llr_io::ebpf::AttachMode::Skb,
                "steering" => n.steering = crate::Steering::Ntuple,
                _ => n.control.socket = "/tmp/other.sock".into(),
            }
            assert_eq!(diff(&base(), &n).restart, [f]);
        }
    }

    #[test]
    fn flows_are_live_while_the_flow_scheduler_runs() {
        let flow = llr_core::flow::FlowSpec {
            name: "v".into(),
            class: Some("be".into()),
            ..Default::default()
        };
        let mut on = base();
        on.flow_scheduler = Some(Default::default());
        let mut more = on.clone();
        more.flows.push(flow.clone());
        let d = diff(&on, &more);
        assert_eq!(d.changed, ["flows"]);
        assert!(d.is_live(), "{d:?}");
        // turning flows on (implicitly, by listing one) needs a restart
        let mut implicit = base();
        implicit.flows.push(flow);
        assert_eq!(diff(&base(), &implicit).restart, ["flows"]);
        let mut q = on.clone();
        q.flow_scheduler.as_mut().unwrap().quantum_us = 20.0;
        assert_eq!(diff(&on, &q).restart, ["flow-scheduler"]);
    }
}
