//! The `status` reply as a type (the router fills it, every client reads it), and its text
//! forms: `ctl status`, `show classes`, `show workers`.

use llr_core::sched::{AutoReading, Budget, StrategyKind};
use llr_io::xsk::WakeMode;
use serde::{Deserialize, Serialize};

use super::{table, DatapathView};
use crate::metrics::MetricsSnapshot;

/// What `status` reports. Fields a router of another version leaves out take their defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusView {
    pub version: String,
    /// The configuration file, if the router was started from one.
    pub config: Option<String>,
    pub uptime_s: f64,
    pub interfaces: Vec<String>,
    /// The strategy the workers run.
    pub strategy: StrategyKind,
    pub device_budget: u32,
    pub classes: Vec<ClassStatus>,
    pub rings: Vec<RingStatus>,
    /// `budget = "auto"`: worker 0's last window (ρRT, x ns, the budget it set).
    pub auto_budget: Option<AutoReading>,
    pub wakeup: Option<WakeMode>,
    pub spin_us: u64,
    pub workers: Vec<WorkerStatus>,
    /// The cores of the helper threads (`0,2-3`).
    pub helper_cores: Option<String>,
    /// Classifier rules installed.
    pub rules: usize,
    /// Routes in the forwarder.
    pub routes: usize,
    /// More routes than `max-routes`: routed packets go to the kernel (the log says more).
    pub routes_incomplete: bool,
    pub max_routes: usize,
    pub mirror: MirrorView,
    pub static_routes: Vec<StaticRouteView>,
    pub changes_applied: u64,
    /// Every worker loop runs (each has published from inside it).
    pub ready: bool,
    pub steering: String,
    pub datapath: DatapathView,
    /// Frames carry an XDP timestamp (ring latency is measured).
    pub timestamps: bool,
    /// The metrics endpoint's address, if it serves one.
    pub metrics: Option<String>,
}

/// One class: its ring, the budget the worker runs and the one configured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClassStatus {
    pub name: String,
    pub ring: Option<usize>,
    /// The budget the worker's engine runs (after "auto" and the strategy's defaults).
    pub budget: Option<u32>,
    /// As configured; `None`: the strategy's default.
    pub configured_budget: Option<Budget>,
}

/// One ring of the running layout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RingStatus {
    pub name: String,
    pub budget: u32,
}

/// One worker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerStatus {
    pub worker: u32,
    /// `None`: not pinned.
    pub core: Option<usize>,
    pub busy_ratio: f64,
}

/// The route mirror: netlink events applied, full re-dumps, event-socket overruns, updates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MirrorView {
    pub events: u64,
    pub resyncs: u64,
    pub overruns: u64,
    pub updates: u64,
}

/// A static route of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StaticRouteView {
    pub prefix: String,
    pub via: Option<String>,
    pub dev: String,
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".to_string(), |x| x.to_string())
}

/// `show classes`: per class its ring and budget (from `status`), what the classifier steered
/// to it and its ring's counters (from `counters`).
pub fn classes_table(status: &StatusView, m: &MetricsSnapshot) -> String {
    let rows: Vec<Vec<String>> = (status.classes.iter())
        .map(|c| {
            let r = (c.ring).and_then(|k| m.rings.iter().find(|r| r.ring as usize == k));
            let classified = (m.classes.iter())
                .find(|(n, _)| *n == c.name)
                .map(|(_, v)| *v);
            vec![
                c.name.clone(),
                opt(c.ring),
                opt(c.budget),
                opt(classified),
                opt(r.map(|r| r.served)),
                opt(r.map(|r| r.drops)),
                opt(r.map(|r| r.budget_hits)),
                r.and_then(|r| r.latency.quantile_bound(0.99))
                    .map_or("-".into(), latency),
            ]
        })
        .collect();
    table(
        &[
            "CLASS",
            "RING",
            "BUDGET",
            "CLASSIFIED",
            "SERVED",
            "RING-FULL",
            "BUDGET-HITS",
            "P99",
        ],
        &rows,
    )
}

/// A latency bound for a table cell: `≤20µs`, `≤1.0ms`, `>max`.
pub fn latency(x: f64) -> String {
    if x.is_infinite() {
        ">max".into()
    } else if x < 1e-3 {
        format!("≤{:.0}µs", x * 1e6)
    } else {
        format!("≤{:.1}ms", x * 1e3)
    }
}

/// `show workers`: per worker its core, load and poll rounds, then its engine devices.
pub fn workers_table(status: &StatusView, m: &MetricsSnapshot) -> String {
    let rows: Vec<Vec<String>> = m
        .workers
        .iter()
        .map(|w| {
            // `status` knows whether the worker is pinned; the metrics label says 0 either way
            let pinned = (status.workers.iter())
                .find(|x| x.worker == w.worker)
                .is_none_or(|x| x.core.is_some());
            vec![
                w.worker.to_string(),
                if pinned {
                    w.core.to_string()
                } else {
                    "-".into()
                },
                format!("{:.1}%", w.busy_ratio * 100.0),
                format!("{:.3}", w.busy_seconds),
                w.poll_rounds.to_string(),
            ]
        })
        .collect();
    let mut s = table(
        &["WORKER", "CORE", "BUSY", "BUSY-SECONDS", "POLL-ROUNDS"],
        &rows,
    );
    if let Some(h) = &status.helper_cores {
        s.push_str(&format!("helper threads on cores {h}\n"));
    }
    let rows: Vec<Vec<String>> = m
        .devices
        .iter()
        .map(|d| {
            vec![
                d.worker.to_string(),
                d.device.to_string(),
                d.wakeups.to_string(),
                d.rearms.to_string(),
                d.budget_exhaustions.to_string(),
                d.passes.to_string(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        s.push('\n');
        s.push_str(&table(
            &[
                "WORKER",
                "ENGINE-DEV",
                "WAKEUPS",
                "REARMS",
                "EXHAUSTED",
                "PASSES",
            ],
            &rows,
        ));
    }
    s
}

/// `ctl status` for people: grouped lines instead of a dump of keys.
pub fn status_text(v: &StatusView) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "llrouter {}, up {}, config {}\n",
        v.version,
        duration(v.uptime_s),
        opt(v.config.as_ref())
    ));
    let mut kv = |k: &str, val: String| s.push_str(&format!("  {k:<12} {val}\n"));
    kv("interfaces", v.interfaces.join(", "));
    for p in &v.datapath.ports {
        kv("datapath", p.describe());
        if !p.queues.is_empty() {
            kv("sockets", p.served());
        }
    }
    if !v.datapath.kernel.is_empty() {
        kv("kernel", v.datapath.kernel.clone());
    }
    kv(
        "strategy",
        format!("{} (device budget {})", v.strategy, v.device_budget),
    );
    kv(
        "wake-up",
        match v.wakeup {
            Some(WakeMode::Adaptive) => format!("adaptive, spin {} µs", v.spin_us),
            w => opt(w.map(WakeMode::name)),
        },
    );
    for w in &v.workers {
        let core = match w.core {
            None => "unpinned".to_string(),
            Some(c) => format!("on core {c}"),
        };
        kv(
            "worker",
            format!("{} {core}, busy {:.1}%", w.worker, w.busy_ratio * 100.0),
        );
    }
    if let Some(h) = &v.helper_cores {
        kv("helpers", format!("on cores {h}"));
    }
    kv(
        "rules",
        format!(
            "{}; static routes {}; changes applied {}",
            v.rules,
            v.static_routes.len(),
            v.changes_applied
        ),
    );
    let limit = match v.max_routes {
        0 => "no limit".to_string(),
        m => format!("max-routes {m}"),
    };
    let state = if v.routes_incomplete {
        "INCOMPLETE: more routes than the limit, routed packets go to the kernel"
    } else {
        "complete"
    };
    kv("fib", format!("{} routes ({limit}); {state}", v.routes));
    let m = &v.mirror;
    kv(
        "mirror",
        format!(
            "{} netlink events, {} full re-dumps, {} overruns",
            m.events, m.resyncs, m.overruns
        ),
    );
    kv(
        "timestamps",
        if v.timestamps {
            "on (ring latency measured)".into()
        } else {
            "off".into()
        },
    );
    kv("metrics", opt(v.metrics.as_ref()));
    let rows: Vec<Vec<String>> = (v.classes.iter())
        .map(|c| {
            vec![
                c.name.clone(),
                opt(c.ring),
                opt(c.budget),
                opt(c.configured_budget),
            ]
        })
        .collect();
    s.push('\n');
    s.push_str(&table(&["CLASS", "RING", "BUDGET", "CONFIGURED"], &rows));
    s
}

/// `1h02m`, `3m05s`, `12.3s`.
fn duration(s: f64) -> String {
    let t = s as u64;
    if t >= 3600 {
        format!("{}h{:02}m", t / 3600, (t % 3600) / 60)
    } else if t >= 60 {
        format!("{}m{:02}s", t / 60, t % 60)
    } else {
        format!("{s:.1}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Histogram, RingMetrics, WorkerMetrics};

    #[test]
    fn status_is_grouped_and_classes_joined_with_counters() {
        let st: StatusView = serde_json::from_value(serde_json::json!({
            "version": "0.1.0", "config": "/etc/r.toml", "uptime_s": 3725.0,
            "interfaces": ["eth0", "eth1"], "strategy": "ll-wfq", "device_budget": 64,
            "wakeup": "adaptive", "spin_us": 50,
            "workers": [{"worker": 0, "core": 1, "busy_ratio": 0.25}], "helper_cores": "0",
            "classes": [{"name": "rt", "ring": 0, "budget": 60, "configured_budget": 60},
                        {"name": "be", "ring": 1, "budget": 4, "configured_budget": null}],
            "rules": 2, "static_routes": [], "changes_applied": 3, "timestamps": true,
            "metrics": null, "routes": 12, "routes_incomplete": true, "max_routes": 10,
            "mirror": {"events": 40, "resyncs": 2, "overruns": 1, "updates": 38}
        }))
        .unwrap();
        let s = status_text(&st);
        assert!(
            s.starts_with("llrouter 0.1.0, up 1h02m, config /etc/r.toml"),
            "{s}"
        );
        assert!(s.contains("strategy     ll-wfq (device budget 64)"), "{s}");
        assert!(s.contains("wake-up      adaptive, spin 50 µs"), "{s}");
        assert!(s.contains("worker       0 on core 1, busy 25.0%"), "{s}");
        assert!(s.contains("helpers      on cores 0"), "{s}");
        assert!(
            s.contains("fib          12 routes (max-routes 10); INCOMPLETE"),
            "{s}"
        );
        assert!(
            s.contains("mirror       40 netlink events, 2 full re-dumps, 1 overruns"),
            "{s}"
        );
        let mut lat = Histogram::new(vec![10e-6, 100e-6]);
        lat.observe(5e-6);
        let m = MetricsSnapshot {
            rings: vec![RingMetrics {
                ring: 0,
                class: "rt".into(),
                served: 77,
                latency: lat,
                ..Default::default()
            }],
            classes: vec![("rt".into(), 80)],
            workers: vec![WorkerMetrics {
                core: 1,
                busy_seconds: 2.5,
                ..Default::default()
            }],
            ..Default::default()
        };
        let c = classes_table(&st, &m);
        let rt = c.lines().find(|l| l.starts_with("rt")).unwrap();
        let cols: Vec<&str> = rt.split_whitespace().collect();
        assert_eq!(cols, ["rt", "0", "60", "80", "77", "0", "0", "≤10µs"]);
        let be = c.lines().find(|l| l.starts_with("be")).unwrap();
        assert!(be.contains('-'), "no counters for ring 1: {be}");
        let w = workers_table(&st, &m);
        assert!(w.contains("2.500"), "{w}");
        let unpinned: StatusView =
            serde_json::from_value(serde_json::json!({"workers": [{"worker": 0, "core": null}]}))
                .unwrap();
        let w0 = workers_table(&unpinned, &m);
        let row: Vec<&str> = w0.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[1], "-", "{w0}");
        assert!(status_text(&unpinned).contains("worker       0 unpinned"));
        assert!(w.contains("helper threads on cores 0"));
    }
}
