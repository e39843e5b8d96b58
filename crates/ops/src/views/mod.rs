//! Operator views of a running router: the rows `ctl show …` prints (as the router's control
//! plane returns them) and their rendering as aligned tables, like `vtysh show ip route` or
//! VPP's `show ip fib`. Pure: values in, lines out.

use serde::{Deserialize, Serialize};

use crate::metrics::InterfaceMetrics;

mod flows;
mod listing;
pub use listing::{
    listing_tail, lookup_text, neighbour_row, route_row, routing_rules_text, summary_text,
    ListingWriter,
};
mod replies;
pub use flows::{flow_reply_text, flows_table, FlowAdded, FlowChanged, FlowListView, FlowRemoved};
mod status;
pub mod top;
pub use replies::{
    counters_table, filter_text, reload_text, reply_text, rules_table, BudgetChanged,
    DeviceBudgetChanged, FieldChange, FilterView, InterfacesView, ReloadView, RouteAdded,
    RouteRemoved, RuleRemoved, RulesView, StrategyChanged, WakeupChanged, WakeupState,
};
pub use status::{
    classes_table, latency, status_text, workers_table, ClassStatus, MirrorView, RingStatus,
    StaticRouteView, StatusView, WorkerStatus,
};

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
    /// The rx queues served (a socket per ring on each), by number.
    #[serde(default)]
    pub queues: Vec<u32>,
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

    /// `queues 0, 1, 2, 3 served` (`ctl status`): which rx queues have sockets.
    pub fn served(&self) -> String {
        let q: Vec<String> = self.queues.iter().map(u32::to_string).collect();
        format!("{}: rx queues {} served", self.interface, q.join(", "))
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

pub use crate::query::{NeighbourView, RouteView};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
