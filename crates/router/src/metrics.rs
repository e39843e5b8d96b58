//! The worker's snapshot in the metrics model of `llr_ops::metrics` (Prometheus, `ctl counters`,
//! `llrouter top`).

use crate::worker::ctl::{WorkerSnapshot, LATENCY_BOUNDS};
use crate::worker::stats::add_named;
use llr_core::sched::StrategyKind;
use llr_io::ebpf::ClassifierStats;
use llr_io::xsk::PortStats;
use llr_ops::metrics::{
    DeviceMetrics, Histogram, InterfaceMetrics, MetricsSnapshot, ProcessMetrics, RingMetrics,
    WorkerMetrics,
};

/// What the classifier hands to the kernel stack, by reason: delivered there, not dropped.
const TO_KERNEL: [&str; 7] = [
    "non_ip",
    "multicast",
    "local",
    "no_socket",
    "firewall",
    "vlan",
    "conntrack",
];

/// One worker's part of the metrics: its index, its core and its snapshot.
#[derive(Debug, Clone, Copy)]
pub struct WorkerPart<'a> {
    pub worker: u32,
    pub core: u32,
    pub snap: &'a WorkerSnapshot,
}

/// Converts the workers' snapshots and the classifiers' counters into the metrics model:
/// rings, engine devices and workers per worker (the `worker` label), the rest added up.
/// `interfaces` are the router's `(ifindex, name)` pairs; worker pass and drop reasons are
/// taken as the workers name them.
pub fn to_metrics(
    workers: &[WorkerPart<'_>],
    classifier: &[(u32, ClassifierStats)],
    class_names: &[String],
    interfaces: &[(u32, String)],
) -> MetricsSnapshot {
    let mut events = Vec::new();
    let mut drop_reasons = Vec::new();
    let mut pass = Vec::new();
    for w in workers {
        add_named(&mut events, &w.snap.events);
        add_named(&mut drop_reasons, &w.snap.drop);
        add_named(&mut pass, &w.snap.pass);
    }
    let ports: Vec<&PortStats> = workers.iter().flat_map(|w| &w.snap.ports).collect();
    let (icmp, slow_path) = split_events(&events);
    let PerInterface {
        classes,
        interfaces: ifs,
        kernel_pass,
    } = per_interface(classifier, &ports, &pass, class_names, interfaces);
    let mut drops = drop_reasons;
    // The host firewall's drops taken before the rings (the workers' are `filtered`).
    drops.push((
        "filtered_xdp".into(),
        classifier.iter().map(|(_, s)| s.drop_firewall).sum(),
    ));
    drops.push((
        "egress_queue_full".into(),
        ports.iter().map(|p| p.egress_drops).sum(),
    ));
    drops.push((
        "kernel_rx_dropped".into(),
        (workers.iter())
            .flat_map(|w| &w.snap.rings)
            .map(|r| r.kernel_rx_dropped)
            .sum(),
    ));
    let first = workers.first().map(|w| w.snap);
    MetricsSnapshot {
        strategy: first.and_then(|s| s.strategy),
        strategies: StrategyKind::ALL.to_vec(),
        rings: workers.iter().flat_map(|w| rings(w, class_names)).collect(),
        devices: workers.iter().flat_map(devices).collect(),
        workers: (workers.iter())
            .map(|w| WorkerMetrics {
                worker: w.worker,
                core: w.core,
                poll_rounds: w.snap.poll_rounds,
                busy_ratio: w.snap.busy_ratio,
                busy_seconds: w.snap.busy_s,
                stall_max_seconds: w.snap.stall_max_ns as f64 * 1e-9,
            })
            .collect(),
        drops,
        kernel_pass,
        icmp,
        slow_path,
        classes,
        interfaces: ifs,
        process: ProcessMetrics::read(),
        flows: flows(workers),
        fib_routes: Vec::new(),
        fib_memory: Vec::new(),
        mirror: None,
        filter_rules: Vec::new(),
    }
}

/// The flows of every worker, summed by name.
fn flows(parts: &[WorkerPart<'_>]) -> Vec<llr_ops::metrics::FlowMetrics> {
    merge_flows(parts.iter().map(|p| p.snap.flows.as_slice()))
        .into_iter()
        .map(|f| llr_ops::metrics::FlowMetrics {
            element_drops: f.elements.iter().map(|e| e.dropped).sum(),
            flow: f.name,
            cpu_seconds: f.stats.cpu_ns as f64 * 1e-9,
            packets: f.stats.done,
            queue_drops: f.stats.queue_drops,
            preemptions: f.stats.preemptions,
            queue_len: f.queue_len as u64,
        })
        .collect()
}

/// The name of `ifindex` among `names`, or `ifindex N` for one the router does not serve.
pub(crate) fn name_of(names: &[(u32, String)], ifindex: u32) -> String {
    names
        .iter()
        .find(|(i, _)| *i == ifindex)
        .map_or_else(|| format!("ifindex {ifindex}"), |(_, n)| n.clone())
}

fn rings(w: &WorkerPart<'_>, class_names: &[String]) -> Vec<RingMetrics> {
    let snap = w.snap;
    // Under round robin every ring is its own engine device.
    let rr = snap.strategy == Some(StrategyKind::Rr);
    snap.rings
        .iter()
        .enumerate()
        .map(|(k, c)| RingMetrics {
            worker: w.worker,
            device: if rr { k as u32 } else { 0 },
            ring: k as u32,
            class: snap
                .layout_rings
                .get(k)
                .or(class_names.get(k))
                .cloned()
                .unwrap_or_else(|| format!("ring{k}")),
            packets: c.served + c.backlog,
            bytes: c.bytes,
            drops: c.drops,
            served: c.served,
            budget_hits: c.budget_hits,
            grants: c.grants,
            grant_seconds: c.grant_ns as f64 * 1e-9,
            tx_flushes: c.flushes,
            tx_flush_seconds: c.flush_ns as f64 * 1e-9,
            tx_flushed_frames: c.flushed,
            budget: snap.ring_budgets.get(k).copied().unwrap_or(0),
            latency: Histogram {
                bounds: LATENCY_BOUNDS.to_vec(),
                counts: c.latency_counts.clone(),
                sum: c.latency_sum,
            },
        })
        .collect()
}

fn devices(w: &WorkerPart<'_>) -> Vec<DeviceMetrics> {
    (w.snap.devices.iter())
        .enumerate()
        .map(|(d, c)| DeviceMetrics {
            worker: w.worker,
            device: d as u32,
            wakeups: c.wakeups,
            rearms: c.rearms,
            budget_exhaustions: c.budget_exhaustions,
            passes: c.passes,
        })
        .collect()
}

/// ICMP and the other slow-path events: `icmp_sent_<type>` / `icmp_ratelimited_<type>` become
/// one `(type, sent, rate-limited)` series per type, the rest stay events.
#[allow(clippy::type_complexity)]
fn split_events(events: &[(String, u64)]) -> (Vec<(String, u64, u64)>, Vec<(String, u64)>) {
    let mut icmp: Vec<(String, u64, u64)> = Vec::new();
    let mut slow_path: Vec<(String, u64)> = Vec::new();
    for (n, c) in events {
        if let Some(t) = n.strip_prefix("icmp_sent_") {
            match icmp.iter_mut().find(|e| e.0 == t) {
                Some(e) => e.1 = *c,
                None => icmp.push((t.to_string(), *c, 0)),
            }
        } else if let Some(t) = n.strip_prefix("icmp_ratelimited_") {
            match icmp.iter_mut().find(|e| e.0 == t) {
                Some(e) => e.2 = *c,
                None => icmp.push((t.to_string(), 0, *c)),
            }
        } else {
            slow_path.push((n.clone(), *c));
        }
    }
    (icmp, slow_path)
}

/// The classifier's and the ports' counters, per class and per interface.
struct PerInterface {
    classes: Vec<(String, u64)>,
    interfaces: Vec<InterfaceMetrics>,
    kernel_pass: Vec<(String, u64)>,
}

fn per_interface(
    classifier: &[(u32, ClassifierStats)],
    ports: &[&PortStats],
    pass: &[(String, u64)],
    class_names: &[String],
    interfaces: &[(u32, String)],
) -> PerInterface {
    let mut classes: Vec<(String, u64)> = class_names.iter().map(|n| (n.clone(), 0)).collect();
    let mut ifs: Vec<InterfaceMetrics> = interfaces
        .iter()
        .map(|(i, n)| InterfaceMetrics {
            interface: n.clone(),
            ifindex: *i,
            ..Default::default()
        })
        .collect();
    // Malformed frames go on to the worker, which drops (and counts) them, so they are errors
    // here only.
    let mut kernel_pass = [0u64; TO_KERNEL.len()];
    for (i, s) in classifier {
        for (k, slot) in classes.iter_mut().enumerate() {
            slot.1 += s.per_class.get(k).copied().unwrap_or(0);
        }
        let passed = [
            s.pass_non_ip,
            s.pass_multicast,
            s.pass_local,
            s.no_socket,
            s.pass_firewall,
            s.pass_vlan,
            s.pass_conntrack,
        ];
        for (t, v) in kernel_pass.iter_mut().zip(passed) {
            *t += v;
        }
        let x = interface_slot(&mut ifs, *i, interfaces);
        x.kernel_pass_packets = passed.iter().sum();
        x.errors += s.malformed;
    }
    for p in ports {
        let x = interface_slot(&mut ifs, p.ifindex, interfaces);
        x.rx_packets += p.rx;
        x.tx_packets += p.tx;
        x.dropped_packets += p.egress_drops + p.kernel_rx_dropped + p.kernel_rx_ring_full;
        x.errors += p.kernel_tx_invalid + p.no_port + p.tx_kick_errors;
    }
    let mut kernel_pass: Vec<(String, u64)> = if classifier.is_empty() {
        classes.clear();
        Vec::new()
    } else {
        TO_KERNEL
            .iter()
            .zip(kernel_pass)
            .map(|(n, v)| (n.to_string(), v))
            .collect()
    };
    // What the forwarder hands back for the kernel goes through the punt TAP (`punted` /
    // `punt_dropped` in the slow-path events say whether it got there).
    kernel_pass.extend(pass.iter().map(|(n, c)| (format!("worker_{n}"), *c)));
    PerInterface {
        classes,
        interfaces: ifs,
        kernel_pass,
    }
}

/// The entry of `ifindex` in `ifs`, added (named from `names`) when missing.
fn interface_slot<'a>(
    ifs: &'a mut Vec<InterfaceMetrics>,
    ifindex: u32,
    names: &[(u32, String)],
) -> &'a mut InterfaceMetrics {
    let k = match ifs.iter().position(|x| x.ifindex == ifindex) {
        Some(k) => k,
        None => {
            ifs.push(InterfaceMetrics {
                interface: name_of(names, ifindex),
                ifindex,
                ..Default::default()
            });
            ifs.len() - 1
        }
    };
    &mut ifs[k]
}

/// The flows of several workers, counters added by flow name (order: the first worker's).
pub(crate) fn merge_flows<'a>(
    parts: impl IntoIterator<Item = &'a [llr_core::flow::FlowInfo]>,
) -> Vec<llr_core::flow::FlowInfo> {
    let mut out: Vec<llr_core::flow::FlowInfo> = Vec::new();
    // by name: 10 000 flows on several workers would be 10^8 comparisons by search
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for part in parts {
        for f in part {
            match at.get(&f.name).map(|&i| &mut out[i]) {
                None => {
                    at.insert(f.name.clone(), out.len());
                    out.push(f.clone());
                }
                Some(o) => {
                    let (a, b) = (&mut o.stats, &f.stats);
                    a.enqueued += b.enqueued;
                    a.queue_drops += b.queue_drops;
                    a.done += b.done;
                    a.cpu_ns += b.cpu_ns;
                    a.turns += b.turns;
                    a.preemptions += b.preemptions;
                    o.queue_len += f.queue_len;
                    for (x, y) in o.elements.iter_mut().zip(&f.elements) {
                        x.packets += y.packets;
                        x.bytes += y.bytes;
                        x.dropped += y.dropped;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::ctl::RingCounters;

    #[test]
    fn metrics_keep_kernel_passes_apart_and_name_interfaces() {
        let mut rings = vec![RingCounters::default(), RingCounters::default()];
        rings[0].served = 90;
        rings[0].backlog = 10;
        rings[1].kernel_rx_dropped = 2;
        let snap = WorkerSnapshot {
            strategy: Some(StrategyKind::LlWfq),
            layout_rings: vec!["rt".into(), "be".into()],
            rings,
            busy_s: 1.5,
            // reason names as the worker gives them, whatever they are
            pass: vec![("some_pass".into(), 4)],
            drop: vec![("some_drop".into(), 3), ("another".into(), 0)],
            ports: vec![
                PortStats {
                    ifindex: 7,
                    rx: 100,
                    egress_drops: 1,
                    ..Default::default()
                },
                PortStats {
                    ifindex: 9,
                    tx: 95,
                    kernel_tx_invalid: 2,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let classifier = vec![(
            7,
            ClassifierStats {
                per_class: vec![60, 40],
                pass_multicast: 5,
                no_socket: 1,
                malformed: 3,
                ..Default::default()
            },
        )];
        let names = vec!["rt".to_string(), "be".to_string()];
        let ifs = vec![(7, "eth0".to_string()), (9, "eth1".to_string())];
        let part = WorkerPart {
            worker: 0,
            core: 1,
            snap: &snap,
        };
        let m = to_metrics(&[part], &classifier, &names, &ifs);
        let get = |l: &[(String, u64)], k: &str| l.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        assert_eq!(get(&m.drops, "some_drop"), Some(3));
        assert_eq!(get(&m.drops, "another"), Some(0));
        assert_eq!(
            get(&m.drops, "pass_some_pass"),
            None,
            "the worker's passes are not drops"
        );
        assert_eq!(get(&m.kernel_pass, "worker_some_pass"), Some(4));
        assert_eq!(get(&m.drops, "egress_queue_full"), Some(1));
        assert_eq!(get(&m.drops, "kernel_rx_dropped"), Some(2));
        assert!(
            m.drops.iter().all(|(n, _)| !n.starts_with("xdp_")),
            "{:?}",
            m.drops
        );
        assert_eq!(get(&m.kernel_pass, "multicast"), Some(5));
        assert_eq!(get(&m.kernel_pass, "no_socket"), Some(1));
        assert_eq!(m.classes, vec![("rt".into(), 60), ("be".into(), 40)]);
        let eth0 = &m.interfaces[0];
        assert_eq!(
            (
                eth0.interface.as_str(),
                eth0.rx_packets,
                eth0.kernel_pass_packets
            ),
            ("eth0", 100, 6)
        );
        assert_eq!((eth0.dropped_packets, eth0.errors), (1, 3));
        let eth1 = &m.interfaces[1];
        assert_eq!(
            (eth1.interface.as_str(), eth1.tx_packets, eth1.errors),
            ("eth1", 95, 2)
        );
        assert_eq!(m.rings[0].packets, 100);
        assert_eq!(m.workers[0].busy_seconds, 1.5);
        assert_eq!(m.strategy, Some(StrategyKind::LlWfq));
        assert!(m.strategies.contains(&StrategyKind::Sq));
    }

    #[test]
    fn two_workers_add_up_and_keep_their_label() {
        let mut a = WorkerSnapshot {
            layout_rings: vec!["rt".into(), "be".into()],
            rings: vec![RingCounters::default(), RingCounters::default()],
            drop: vec![("malformed".into(), 2)],
            ports: vec![PortStats {
                ifindex: 7,
                rx: 10,
                ..Default::default()
            }],
            busy_s: 1.0,
            ..Default::default()
        };
        a.rings[0].served = 5;
        let mut b = a.clone();
        b.rings[0].served = 7;
        b.busy_s = 2.0;
        b.ports[0].rx = 32;
        let names = vec!["rt".to_string(), "be".to_string()];
        let ifs = vec![(7, "eth0".to_string())];
        let parts = [
            WorkerPart {
                worker: 0,
                core: 0,
                snap: &a,
            },
            WorkerPart {
                worker: 1,
                core: 1,
                snap: &b,
            },
        ];
        let m = to_metrics(&parts, &[], &names, &ifs);
        assert_eq!(m.workers.len(), 2);
        assert_eq!((m.workers[1].worker, m.workers[1].busy_seconds), (1, 2.0));
        let rt: Vec<(u32, u64)> = (m.rings.iter())
            .filter(|r| r.class == "rt")
            .map(|r| (r.worker, r.served))
            .collect();
        assert_eq!(rt, [(0, 5), (1, 7)]);
        assert_eq!(m.interfaces[0].rx_packets, 42, "ports of both workers");
        let malformed = m.drops.iter().find(|(n, _)| n == "malformed").unwrap();
        assert_eq!(malformed.1, 4);
    }
}
