//! Operator views of a running router: the rows `ctl show …` prints (as the router's control
//! plane returns them) and their rendering as aligned tables, like `vtysh show ip route` or
//! VPP's `show ip fib`. Pure: values in, lines out.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::metrics::{InterfaceMetrics, MetricsSnapshot};

/// One of the router's interfaces as its forwarder sees it, with its counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceView {
    pub name: String,
    pub ifindex: u32,
    pub mtu: u32,
    pub mac: String,
    /// `addr/len`.
    pub addrs: Vec<String>,
    pub counters: InterfaceMetrics,
}

/// How the datapath runs on one interface: found at start (`ctl status`, the start line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortModeView {
    pub interface: String,
    /// `native` (XDP in the driver) or `generic` (XDP on the kernel's skb path).
    pub xdp: String,
    /// Active rx queues, each served by a socket per ring.
    pub rx_queues: u32,
    /// Of those, the queues whose sockets bound in zero-copy mode.
    pub zerocopy_queues: u32,
    /// The interface's MTU at start.
    #[serde(default)]
    pub mtu: u32,
    /// Frames may span several UMEM chunks (AF_XDP multi-buffer, for jumbo MTUs).
    #[serde(default)]
    pub multi_buffer: bool,
}

impl PortModeView {
    /// `eth0: native XDP, 2 rx queues, zero-copy, MTU 1500`.
    pub fn describe(&self) -> String {
        let zc = match self.zerocopy_queues {
            0 => "copy mode".to_string(),
            n if n == self.rx_queues => "zero-copy".to_string(),
            n => format!("zero-copy on {n} of {}", self.rx_queues),
        };
        format!(
            "{}: {} XDP, {} rx queue{}, {zc}{}, MTU {}",
            self.interface,
            self.xdp,
            self.rx_queues,
            if self.rx_queues == 1 { "" } else { "s" },
            if self.multi_buffer {
                ", multi-buffer"
            } else {
                ""
            },
            self.mtu
        )
    }
}

/// The datapath: the kernel and each interface's mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatapathView {
    /// `Linux 6.1.0-31-amd64`.
    pub kernel: String,
    pub ports: Vec<PortModeView>,
}

impl DatapathView {
    /// `eth0: native XDP, 2 rx queues, zero-copy; eth1: …; Linux 6.1.0-31-amd64`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.ports.iter().map(PortModeView::describe).collect();
        parts.push(self.kernel.clone());
        parts.join("; ")
    }
}

/// One route of the forwarder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteView {
    pub prefix: String,
    /// Gateway; `None` for a connected route.
    pub via: Option<String>,
    pub dev: String,
    pub ifindex: u32,
}

/// One neighbour (ARP / ND) entry of the forwarder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighbourView {
    pub ip: String,
    pub mac: String,
    pub dev: String,
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Left-aligned text columns, right-aligned numbers: `rows[i][j]` under `head[j]`. Numeric
/// columns are those whose every cell parses as a number (or is `-`).
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let n = head.len();
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (j, c) in r.iter().enumerate().take(n) {
            w[j] = w[j].max(c.chars().count());
        }
    }
    let numeric: Vec<bool> = (0..n)
        .map(|j| {
            !rows.is_empty()
                && rows.iter().all(|r| {
                    r.get(j)
                        .is_some_and(|c| c == "-" || c.trim_end_matches('%').parse::<f64>().is_ok())
                })
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (j, c) in cells.iter().enumerate() {
            let pad = w[j].saturating_sub(c.chars().count());
            if j > 0 {
                s.push_str("  ");
            }
            if numeric[j] {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                if j + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// `show interfaces`.
pub fn interfaces_table(ifs: &[InterfaceView]) -> String {
    let rows: Vec<Vec<String>> = ifs
        .iter()
        .map(|i| {
            let c = &i.counters;
            vec![
                i.name.clone(),
                i.ifindex.to_string(),
                i.mtu.to_string(),
                i.mac.clone(),
                c.rx_packets.to_string(),
                c.tx_packets.to_string(),
                c.kernel_pass_packets.to_string(),
                c.dropped_packets.to_string(),
                c.errors.to_string(),
                if i.addrs.is_empty() {
                    "-".into()
                } else {
                    i.addrs.join(" ")
                },
            ]
        })
        .collect();
    table(
        &[
            "INTERFACE",
            "IFINDEX",
            "MTU",
            "MAC",
            "RX",
            "TX",
            "TO-KERNEL",
            "DROPPED",
            "ERRORS",
            "ADDRESSES",
        ],
        &rows,
    )
}

/// `show fib`: routes, then a line when the dump was cut at `shown` of `total`.
pub fn fib_table(routes: &[RouteView], total: usize) -> String {
    let rows: Vec<Vec<String>> = routes
        .iter()
        .map(|r| {
            vec![
                r.prefix.clone(),
                r.via.clone().unwrap_or_else(|| "connected".into()),
                r.dev.clone(),
            ]
        })
        .collect();
    table(&["PREFIX", "NEXT HOP", "INTERFACE"], &rows) + &more(routes.len(), total, "routes")
}

/// `show neighbours`.
pub fn neighbours_table(n: &[NeighbourView], total: usize) -> String {
    let rows: Vec<Vec<String>> = n
        .iter()
        .map(|e| vec![e.ip.clone(), e.mac.clone(), e.dev.clone()])
        .collect();
    table(&["ADDRESS", "MAC", "INTERFACE"], &rows) + &more(n.len(), total, "neighbours")
}

fn more(shown: usize, total: usize, what: &str) -> String {
    if shown < total {
        format!("({shown} of {total} {what} shown; --limit raises the cap)\n")
    } else {
        format!("({total} {what})\n")
    }
}

/// `show classes`: per class its ring and budget (from `status`), what the classifier steered
/// to it and its ring's counters (from `counters`).
pub fn classes_table(status: &Value, m: &MetricsSnapshot) -> String {
    let empty = Vec::new();
    let classes = status["classes"].as_array().unwrap_or(&empty);
    let rows: Vec<Vec<String>> = classes
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or("?").to_string();
            let ring = c["ring"].as_u64();
            let r = ring.and_then(|k| m.rings.iter().find(|r| u64::from(r.ring) == k));
            let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
            let classified = m.classes.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
            vec![
                name,
                opt(ring),
                opt(c["budget"].as_u64()),
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
pub fn workers_table(status: &Value, m: &MetricsSnapshot) -> String {
    let rows: Vec<Vec<String>> = m
        .workers
        .iter()
        .map(|w| {
            // `status` knows whether the worker is pinned; the metrics label says 0 either way
            let pinned = status["workers"]
                .as_array()
                .and_then(|ws| ws.iter().find(|x| x["worker"] == w.worker))
                .is_none_or(|x| !x["core"].is_null());
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
    if let Some(h) = status["helper_cores"].as_str() {
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
pub fn status_text(v: &Value) -> String {
    let str_of = |x: &Value| match x {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let list = |x: &Value| {
        x.as_array()
            .map(|a| a.iter().map(str_of).collect::<Vec<_>>().join(", "))
            .unwrap_or_else(|| str_of(x))
    };
    let mut s = String::new();
    let up = v["uptime_s"].as_f64().unwrap_or(0.0);
    s.push_str(&format!(
        "llrouter {}, up {}, config {}\n",
        str_of(&v["version"]),
        duration(up),
        str_of(&v["config"])
    ));
    let mut kv = |k: &str, val: String| s.push_str(&format!("  {k:<12} {val}\n"));
    kv("interfaces", list(&v["interfaces"]));
    if let Ok(d) = serde_json::from_value::<DatapathView>(v["datapath"].clone()) {
        for p in &d.ports {
            kv("datapath", p.describe());
        }
        if !d.kernel.is_empty() {
            kv("kernel", d.kernel.clone());
        }
    }
    kv(
        "strategy",
        format!(
            "{} (device budget {})",
            str_of(&v["strategy"]),
            str_of(&v["device_budget"])
        ),
    );
    let wake = str_of(&v["wakeup"]);
    kv(
        "wake-up",
        if wake == "adaptive" {
            format!("adaptive, spin {} µs", str_of(&v["spin_us"]))
        } else {
            wake
        },
    );
    if let Some(ws) = v["workers"].as_array() {
        for w in ws {
            let core = match &w["core"] {
                Value::Null => "unpinned".to_string(),
                c => format!("on core {}", str_of(c)),
            };
            kv(
                "worker",
                format!(
                    "{} {core}, busy {:.1}%",
                    str_of(&w["worker"]),
                    w["busy_ratio"].as_f64().unwrap_or(0.0) * 100.0
                ),
            );
        }
    }
    if !v["helper_cores"].is_null() {
        kv(
            "helpers",
            format!("on cores {}", str_of(&v["helper_cores"])),
        );
    }
    kv(
        "rules",
        format!(
            "{}; static routes {}; changes applied {}",
            str_of(&v["rules"]),
            v["static_routes"].as_array().map_or(0, |a| a.len()),
            str_of(&v["changes_applied"])
        ),
    );
    if let Some(n) = v["routes"].as_u64() {
        let limit = match v["max_routes"].as_u64() {
            Some(0) | None => "no limit".to_string(),
            Some(m) => format!("max-routes {m}"),
        };
        let state = if v["routes_incomplete"] == Value::Bool(true) {
            "INCOMPLETE: more routes than the limit, routed packets go to the kernel"
        } else {
            "complete"
        };
        kv("fib", format!("{n} routes ({limit}); {state}"));
    }
    let m = &v["mirror"];
    if let (Some(ev), Some(rs), Some(or)) = (
        m["events"].as_u64(),
        m["resyncs"].as_u64(),
        m["overruns"].as_u64(),
    ) {
        kv(
            "mirror",
            format!("{ev} netlink events, {rs} full re-dumps, {or} overruns"),
        );
    }
    kv(
        "timestamps",
        if v["timestamps"] == Value::Bool(true) {
            "on (ring latency measured)".into()
        } else {
            "off".into()
        },
    );
    kv("metrics", str_of(&v["metrics"]));
    let empty = Vec::new();
    let rows: Vec<Vec<String>> = v["classes"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .map(|c| {
            vec![
                str_of(&c["name"]),
                str_of(&c["ring"]),
                str_of(&c["budget"]),
                str_of(&c["configured_budget"]),
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
    fn tables_align_columns() {
        let t = table(
            &["NAME", "N"],
            &[
                vec!["a".into(), "1".into()],
                vec!["long-name".into(), "1000".into()],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "NAME          N");
        assert_eq!(lines[1], "a             1");
        assert_eq!(lines[2], "long-name  1000");
    }

    #[test]
    fn fib_says_when_it_was_cut() {
        let r = vec![RouteView {
            prefix: "10.0.0.0/8".into(),
            via: None,
            dev: "eth0".into(),
            ifindex: 2,
        }];
        let t = fib_table(&r, 5);
        assert!(t.contains("10.0.0.0/8  connected  eth0"), "{t}");
        assert!(t.contains("1 of 5 routes shown"));
        assert!(fib_table(&r, 1).contains("(1 routes)"));
    }

    #[test]
    fn status_is_grouped_and_classes_joined_with_counters() {
        let st = serde_json::json!({
            "version": "0.1.0", "config": "/etc/r.toml", "uptime_s": 3725.0,
            "interfaces": ["eth0", "eth1"], "strategy": "ll-wfq", "device_budget": 64,
            "wakeup": "adaptive", "spin_us": 50,
            "workers": [{"worker": 0, "core": 1, "busy_ratio": 0.25}], "helper_cores": "0",
            "classes": [{"name": "rt", "ring": 0, "budget": 60, "configured_budget": 60},
                        {"name": "be", "ring": 1, "budget": 4, "configured_budget": null}],
            "rules": 2, "static_routes": [], "changes_applied": 3, "timestamps": true,
            "metrics": null, "routes": 12, "routes_incomplete": true, "max_routes": 10,
            "mirror": {"events": 40, "resyncs": 2, "overruns": 1, "updates": 38}
        });
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
        let unpinned = serde_json::json!({"workers": [{"worker": 0, "core": null}]});
        let w0 = workers_table(&unpinned, &m);
        let row: Vec<&str> = w0.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[1], "-", "{w0}");
        assert!(status_text(&unpinned).contains("worker       0 unpinned"));
        assert!(w.contains("helper threads on cores 0"));
    }
}
