//! Rendering of a [`MetricsSnapshot`] in the Prometheus text format.

use std::fmt::Write as _;

/// A per-flow family: name, type, help, value.
type FlowSeries = (
    &'static str,
    &'static str,
    &'static str,
    fn(&FlowMetrics) -> f64,
);

use super::{
    DeviceMetrics, FlowMetrics, InterfaceMetrics, MetricsSnapshot, RingMetrics, WorkerMetrics,
};

/// Escapes a label value: `\` → `\\`, `"` → `\"`, newline → `\n`.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Escapes HELP text: `\` → `\\`, newline → `\n`.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value as Prometheus (Go `ParseFloat`) reads it.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// Label pairs of one sample.
type Labels = Vec<(&'static str, String)>;

struct Out {
    s: String,
}

impl Out {
    /// `# HELP` and `# TYPE` of the family `name` (full name).
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.s, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.s, "# TYPE {name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, String)], v: f64) {
        let _ = write!(self.s, "{name}");
        if !labels.is_empty() {
            self.s.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.s.push(',');
                }
                let _ = write!(self.s, "{k}=\"{}\"", escape_label(val));
            }
            self.s.push('}');
        }
        let _ = writeln!(self.s, " {}", format_value(v));
    }
    /// A family and one sample per item.
    fn each<T>(
        &mut self,
        (name, kind, help): (&str, &str, &str),
        items: &[T],
        sample: impl Fn(&T) -> (Labels, f64),
    ) {
        self.family(name, kind, help);
        for it in items {
            let (l, v) = sample(it);
            self.sample(name, &l, v);
        }
    }
}

fn ring_labels(r: &RingMetrics) -> Labels {
    vec![
        ("worker", r.worker.to_string()),
        ("engine_device", r.device.to_string()),
        ("ring", r.ring.to_string()),
        ("class", r.class.clone()),
    ]
}

/// Renders `snap` in the Prometheus text format 0.0.4.
pub fn render(snap: &MetricsSnapshot) -> String {
    let mut o = Out { s: String::new() };
    o.family(
        "llrouter_build_info",
        "gauge",
        "The running llrouter build (always 1).",
    );
    o.sample(
        "llrouter_build_info",
        &[("version", env!("CARGO_PKG_VERSION").to_string())],
        1.0,
    );
    let mut strategies = snap.strategies.clone();
    if let Some(s) = snap.strategy.filter(|s| !strategies.contains(s)) {
        strategies.push(s);
    }
    o.each(
        (
            "llrouter_strategy",
            "gauge",
            "1 for the running scheduling strategy, 0 for every other known one.",
        ),
        &strategies,
        |s| {
            let on = Some(*s) == snap.strategy;
            (
                vec![("strategy", s.to_string())],
                if on { 1.0 } else { 0.0 },
            )
        },
    );

    type IfField = fn(&InterfaceMetrics) -> u64;
    let if_counters: [(&str, &str, IfField); 5] = [
        (
            "llrouter_interface_rx_packets_total",
            "Frames the router received from the interface (AF_XDP).",
            |i| i.rx_packets,
        ),
        (
            "llrouter_interface_tx_packets_total",
            "Frames the router transmitted on the interface.",
            |i| i.tx_packets,
        ),
        (
            "llrouter_interface_kernel_pass_packets_total",
            "Frames the interface's XDP classifier handed to the kernel stack.",
            |i| i.kernel_pass_packets,
        ),
        (
            "llrouter_interface_dropped_packets_total",
            "Frames dropped at the interface: egress queue full, socket ring full, other kernel AF_XDP drops.",
            |i| i.dropped_packets,
        ),
        (
            "llrouter_interface_errors_total",
            "Malformed frames, invalid Tx descriptors and frames for a port the worker does not serve.",
            |i| i.errors,
        ),
    ];
    for (name, help, f) in if_counters {
        o.each((name, "counter", help), &snap.interfaces, |i| {
            (vec![("interface", i.interface.clone())], f(i) as f64)
        });
    }
    o.each(
        (
            "llrouter_class_packets_total",
            "counter",
            "Frames the XDP classifier steered to the class on all interfaces (before its ring).",
        ),
        &snap.classes,
        |(c, n)| (vec![("class", c.clone())], *n as f64),
    );

    type RingField = fn(&RingMetrics) -> u64;
    let ring_counters: [(&str, &str, RingField); 5] = [
        (
            "llrouter_ring_packets_total",
            "Frames that entered the ring.",
            |r| r.packets,
        ),
        (
            "llrouter_ring_bytes_total",
            "Bytes of the frames the poll engine took from the ring.",
            |r| r.bytes,
        ),
        (
            "llrouter_ring_dropped_packets_total",
            "Frames dropped because the ring was full.",
            |r| r.drops,
        ),
        (
            "llrouter_ring_served_packets_total",
            "Frames the poll engine took from the ring.",
            |r| r.served,
        ),
        (
            "llrouter_ring_budget_hits_total",
            "Grants that ended with the ring budget spent and frames left in the ring.",
            |r| r.budget_hits,
        ),
    ];
    for (name, help, f) in ring_counters {
        o.each((name, "counter", help), &snap.rings, |r| {
            (ring_labels(r), f(r) as f64)
        });
    }
    o.each(
        (
            "llrouter_ring_grants_total",
            "counter",
            "Grants the poll engine gave the ring (served by the worker).",
        ),
        &snap.rings,
        |r| (ring_labels(r), r.grants as f64),
    );
    o.each(
        (
            "llrouter_ring_grant_seconds_total",
            "counter",
            "Worker CPU time spent in the ring's grants; divided by grants: the cost of a grant, by served packets: the cost of a frame.",
        ),
        &snap.rings,
        |r| (ring_labels(r), r.grant_seconds),
    );
    o.each(
        (
            "llrouter_ring_tx_flushes_total",
            "counter",
            "Grants of the ring that ended in a transmit flush (a sendto kick per port with frames).",
        ),
        &snap.rings,
        |r| (ring_labels(r), r.tx_flushes as f64),
    );
    o.each(
        (
            "llrouter_ring_tx_flush_seconds_total",
            "counter",
            "Worker CPU time inside the transmit flushes that ended the ring's grants (part of the grant time).",
        ),
        &snap.rings,
        |r| (ring_labels(r), r.tx_flush_seconds),
    );
    o.each(
        (
            "llrouter_ring_tx_flushed_frames_total",
            "counter",
            "Frames the transmit flushes that ended the ring's grants handed to the kernel.",
        ),
        &snap.rings,
        |r| (ring_labels(r), r.tx_flushed_frames as f64),
    );
    o.each(
        (
            "llrouter_ring_budget",
            "gauge",
            "The ring's budget now: packets per grant (ns for the time-slice strategies); set by the worker under budget = \"auto\".",
        ),
        &snap.rings,
        |r| (ring_labels(r), r.budget as f64),
    );

    o.family(
        "llrouter_ring_latency_seconds",
        "histogram",
        "Time a frame spent in its ring, from XDP receive to processing.",
    );
    for r in &snap.rings {
        let base = ring_labels(r);
        let h = &r.latency;
        let mut cum = 0u64;
        for (i, b) in h.bounds.iter().enumerate() {
            cum += h.counts.get(i).copied().unwrap_or(0);
            let mut l = base.clone();
            l.push(("le", format_value(*b)));
            o.sample("llrouter_ring_latency_seconds_bucket", &l, cum as f64);
        }
        let total = h.count();
        let mut l = base.clone();
        l.push(("le", "+Inf".into()));
        o.sample("llrouter_ring_latency_seconds_bucket", &l, total as f64);
        o.sample("llrouter_ring_latency_seconds_sum", &base, h.sum);
        o.sample("llrouter_ring_latency_seconds_count", &base, total as f64);
    }

    type DevField = fn(&DeviceMetrics) -> u64;
    let dev_counters: [(&str, &str, DevField); 4] = [
        (
            "llrouter_engine_device_wakeups_total",
            "Wake-ups that put the engine device on the poll list (interrupts taken).",
            |d| d.wakeups,
        ),
        (
            "llrouter_engine_device_rearms_total",
            "Times the engine device left the poll list with every ring empty and re-armed its wake-up.",
            |d| d.rearms,
        ),
        (
            "llrouter_engine_device_budget_exhaustions_total",
            "Times the device budget ran out with frames left.",
            |d| d.budget_exhaustions,
        ),
        (
            "llrouter_engine_device_passes_total",
            "Full passes over the engine device's rings.",
            |d| d.passes,
        ),
    ];
    for (name, help, f) in dev_counters {
        o.each((name, "counter", help), &snap.devices, |d| {
            (
                vec![
                    ("worker", d.worker.to_string()),
                    ("engine_device", d.device.to_string()),
                ],
                f(d) as f64,
            )
        });
    }

    let wl = |w: &WorkerMetrics| -> Labels {
        vec![
            ("worker", w.worker.to_string()),
            ("core", w.core.to_string()),
        ]
    };
    o.each(
        (
            "llrouter_worker_poll_rounds_total",
            "counter",
            "Iterations of the worker's poll loop.",
        ),
        &snap.workers,
        |w| (wl(w), w.poll_rounds as f64),
    );
    o.each(
        (
            "llrouter_worker_busy_seconds_total",
            "counter",
            "Time the worker was not idle; rate() gives its load (0..1).",
        ),
        &snap.workers,
        |w| (wl(w), w.busy_seconds),
    );
    o.each(
        (
            "llrouter_worker_stall_max_seconds",
            "gauge",
            "The worker's longest grant or flow turn since it started (its longest stall).",
        ),
        &snap.workers,
        |w| (wl(w), w.stall_max_seconds),
    );
    let fl = |f: &FlowMetrics| -> Labels { vec![("flow", f.flow.clone())] };
    let flow_series: [FlowSeries; 6] = [
        (
            "llrouter_flow_cpu_seconds_total",
            "counter",
            "CPU time charged to the flow by the flow scheduler (its elements and forwarding).",
            |f| f.cpu_seconds,
        ),
        (
            "llrouter_flow_packets_total",
            "counter",
            "Packets that left the flow's pipeline.",
            |f| f.packets as f64,
        ),
        (
            "llrouter_flow_queue_dropped_packets_total",
            "counter",
            "Packets dropped at the flow's full queue.",
            |f| f.queue_drops as f64,
        ),
        (
            "llrouter_flow_element_dropped_packets_total",
            "counter",
            "Packets the flow's elements dropped (meters, ACLs).",
            |f| f.element_drops as f64,
        ),
        (
            "llrouter_flow_preemptions_total",
            "counter",
            "Turns of the flow that ended mid-packet with another flow going first.",
            |f| f.preemptions as f64,
        ),
        (
            "llrouter_flow_queue_packets",
            "gauge",
            "Packets in the flow's queue.",
            |f| f.queue_len as f64,
        ),
    ];
    for (name, kind, help, f) in flow_series {
        o.each((name, kind, help), &snap.flows, |x| (fl(x), f(x)));
    }
    o.each(
        (
            "llrouter_worker_busy_ratio",
            "gauge",
            "Busy fraction of the worker over its last ~0.5 s window (0..1).",
        ),
        &snap.workers,
        |w| (wl(w), w.busy_ratio),
    );
    o.each(
        (
            "llrouter_dropped_packets_total",
            "counter",
            "Frames the router dropped, by reason (ring-full drops are in llrouter_ring_dropped_packets_total).",
        ),
        &snap.drops,
        |(r, n)| (vec![("reason", r.clone())], *n as f64),
    );
    o.each(
        (
            "llrouter_fib_routes",
            "gauge",
            "Routes in the forwarding table, by address family.",
        ),
        &snap.fib_routes,
        |(f, n)| (vec![("family", f.clone())], *n as f64),
    );
    o.each(
        (
            "llrouter_fib_memory_bytes",
            "gauge",
            "Memory of the forwarding table by structure (tbl24 pages in use, groups, prefix maps, next hops).",
        ),
        &snap.fib_memory,
        |(s, n)| (vec![("structure", s.clone())], *n as f64),
    );
    let rule_labels = |r: &super::FilterRuleMetrics| {
        vec![
            ("family", r.family.clone()),
            ("table", r.table.clone()),
            ("chain", r.chain.clone()),
            ("handle", r.handle.to_string()),
        ]
    };
    o.each(
        (
            "llrouter_filter_rule_packets_total",
            "counter",
            "Packets each rule of the host's firewall matched in llrouter (handle 0: the base chain's policy).",
        ),
        &snap.filter_rules,
        |r| (rule_labels(r), r.packets as f64),
    );
    o.each(
        (
            "llrouter_filter_rule_bytes_total",
            "counter",
            "Bytes of the packets each rule of the host's firewall matched in llrouter.",
        ),
        &snap.filter_rules,
        |r| (rule_labels(r), r.bytes as f64),
    );
    o.each(
        (
            "llrouter_filter_rule_xdp_packets_total",
            "counter",
            "Of the packets each rule of the host's firewall matched, those the XDP classifier dropped before the rings.",
        ),
        &snap.filter_rules,
        |r| (rule_labels(r), r.xdp_packets as f64),
    );
    o.each(
        (
            "llrouter_filter_rule_xdp_bytes_total",
            "counter",
            "Bytes of the packets the XDP classifier dropped for each rule of the host's firewall.",
        ),
        &snap.filter_rules,
        |r| (rule_labels(r), r.xdp_bytes as f64),
    );
    o.each(
        (
            "llrouter_kernel_pass_packets_total",
            "counter",
            "Frames the XDP classifier handed to the kernel stack, by reason (not drops).",
        ),
        &snap.kernel_pass,
        |(r, n)| (vec![("reason", r.clone())], *n as f64),
    );
    o.each(
        (
            "llrouter_icmp_sent_packets_total",
            "counter",
            "ICMP / ICMPv6 errors the router sent, by type (time_exceeded, unreachable, too_big).",
        ),
        &snap.icmp,
        |(t, n, _)| (vec![("type", t.clone())], *n as f64),
    );
    o.each(
        (
            "llrouter_icmp_ratelimited_packets_total",
            "counter",
            "ICMP / ICMPv6 errors the rate limit held back, by type.",
        ),
        &snap.icmp,
        |(t, _, n)| (vec![("type", t.clone())], *n as f64),
    );
    o.each(
        (
            "llrouter_slow_path_packets_total",
            "counter",
            "Worker slow-path events: fragments_sent, fragment_failed, punted (to the kernel through the punt TAP), punt_dropped, icmp_unsendable.",
        ),
        &snap.slow_path,
        |(e, n)| (vec![("event", e.clone())], *n as f64),
    );

    if let Some(m) = &snap.mirror {
        let mirror: [(&str, &str, u64); 4] = [
            (
                "llrouter_mirror_events_total",
                "Netlink route, neighbour, link and address events the route mirror received.",
                m.events,
            ),
            (
                "llrouter_mirror_resyncs_total",
                "Full re-dumps of the kernel's tables (start, link/address changes, overruns, the safety period).",
                m.resyncs,
            ),
            (
                "llrouter_mirror_overruns_total",
                "Event-socket overruns (ENOBUFS: events lost), each repaired by a re-dump.",
                m.overruns,
            ),
            (
                "llrouter_mirror_updates_total",
                "Forwarding-table entries the route mirror changed.",
                m.updates,
            ),
        ];
        for (name, help, v) in mirror {
            o.family(name, "counter", help);
            o.sample(name, &[], v as f64);
        }
    }
    if let Some(p) = &snap.process {
        let process: [(&str, &str, &str, f64); 5] = [
            (
                "process_cpu_seconds_total",
                "counter",
                "Total user and system CPU time spent in seconds.",
                p.cpu_seconds,
            ),
            (
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                p.resident_memory_bytes as f64,
            ),
            (
                "process_open_fds",
                "gauge",
                "Number of open file descriptors.",
                p.open_fds as f64,
            ),
            (
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                p.max_fds as f64,
            ),
            (
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
                p.start_time_seconds,
            ),
        ];
        for (name, kind, help, v) in process {
            o.family(name, kind, help);
            o.sample(name, &[], v);
        }
    }
    o.s
}
