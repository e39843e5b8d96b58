//! Prometheus metrics: a plain [`MetricsSnapshot`] the router fills, its rendering in the
//! [text exposition format 0.0.4](https://prometheus.io/docs/instrumenting/exposition_formats/),
//! and a tiny HTTP endpoint ([`MetricsServer`]) serving `GET /metrics`.
//!
//! Names follow the [Prometheus conventions](https://prometheus.io/docs/practices/naming/):
//! counters end in `_total` after their unit (`_packets_total`, `_bytes_total`,
//! `_seconds_total`, or the counted event: `_wakeups_total`), per-interface series carry an
//! `interface` label with the interface's name, and the scheduler's internal "engine devices"
//! (sets of rings sharing a wake-up; an index, not an interface) are labelled `engine_device`.
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `llrouter_build_info` | gauge (1) | `version` | the running build |
//! | `llrouter_strategy` | gauge (0/1) | `strategy` | 1 for the running strategy, 0 for every other known one |
//! | `llrouter_interface_rx_packets_total` | counter | `interface` | frames the router received from the interface (AF_XDP) |
//! | `llrouter_interface_tx_packets_total` | counter | `interface` | frames the router transmitted on the interface |
//! | `llrouter_interface_kernel_pass_packets_total` | counter | `interface` | frames the XDP classifier handed to the kernel stack |
//! | `llrouter_interface_dropped_packets_total` | counter | `interface` | frames dropped at the interface (egress queue full, socket ring full, other kernel AF_XDP drops) |
//! | `llrouter_interface_errors_total` | counter | `interface` | malformed frames, invalid Tx descriptors, frames for a port the worker does not serve, Tx kicks the kernel refused |
//! | `llrouter_class_packets_total` | counter | `class` | frames the XDP classifier steered to the class, all interfaces (before its ring) |
//! | `llrouter_ring_packets_total` | counter | `worker`,`engine_device`,`ring`,`class` | frames that entered the ring |
//! | `llrouter_ring_bytes_total` | counter | same | bytes of the frames the poll engine took from the ring |
//! | `llrouter_ring_dropped_packets_total` | counter | same | frames dropped because the ring was full |
//! | `llrouter_ring_served_packets_total` | counter | same | frames the poll engine took from the ring |
//! | `llrouter_ring_budget_hits_total` | counter | same | grants that ended with the ring budget spent and frames left |
//! | `llrouter_ring_grants_total` | counter | same | grants the poll engine gave the ring |
//! | `llrouter_ring_grant_seconds_total` | counter | same | worker CPU time in those grants (÷ grants: cost per grant; ÷ served: per frame) |
//! | `llrouter_ring_tx_flushes_total` | counter | same | grants that ended in a transmit flush (÷ grants: how often the ring's grants pay a kick) |
//! | `llrouter_ring_tx_flush_seconds_total` | counter | same | worker CPU time inside those flushes (part of the grant time) |
//! | `llrouter_ring_tx_flushed_frames_total` | counter | same | frames those flushes handed to the kernel |
//! | `llrouter_ring_budget` | gauge | same | the ring's budget now (packets per grant; ns for time-slice strategies); moves under `budget = "auto"` |
//! | `llrouter_ring_latency_seconds` | histogram | same | time from XDP receive to processing |
//! | `llrouter_engine_device_wakeups_total` | counter | `worker`,`engine_device` | wake-ups (interrupts taken) |
//! | `llrouter_engine_device_rearms_total` | counter | same | left the poll list, wake-up re-armed |
//! | `llrouter_engine_device_budget_exhaustions_total` | counter | same | device budget ran out with work left |
//! | `llrouter_engine_device_passes_total` | counter | same | full passes over the device's rings |
//! | `llrouter_worker_poll_rounds_total` | counter | `worker`,`core` | iterations of the poll loop |
//! | `llrouter_worker_busy_seconds_total` | counter | `worker`,`core` | time the worker was not idle (`rate()` gives its load) |
//! | `llrouter_worker_busy_ratio` | gauge | `worker`,`core` | busy fraction over the worker's last ~0.5 s window |
//! | `llrouter_dropped_packets_total` | counter | `reason` | frames the router dropped, by reason (worker reasons as the worker names them) |
//! | `llrouter_filter_rule_packets_total`, `_bytes_total` | counter | `family`, `table`, `chain`, `handle` | what each rule (handle 0: the base chain's policy) of the host's firewall matched in llrouter, in the workers and the XDP classifier |
//! | `llrouter_filter_rule_xdp_packets_total`, `_xdp_bytes_total` | counter | `family`, `table`, `chain`, `handle` | of these, what the XDP classifier dropped before the rings |
//! | `llrouter_kernel_pass_packets_total` | counter | `reason` | frames handed to the kernel stack, by reason (not drops): by the XDP classifier (`non_ip`, `multicast`, `local`, `no_socket`, `firewall`: the host's firewall has rules llrouter cannot evaluate) or by the worker through the punt TAP (`worker_<reason>`) |
//! | `llrouter_icmp_sent_packets_total` | counter | `type` | ICMP / ICMPv6 errors sent: `time_exceeded`, `unreachable`, `too_big` |
//! | `llrouter_icmp_ratelimited_packets_total` | counter | `type` | ICMP errors the rate limit held back |
//! | `llrouter_slow_path_packets_total` | counter | `event` | `fragments_sent`, `fragment_failed`, `punted`, `punt_dropped`, `icmp_unsendable` |
//! | `llrouter_fib_routes` | gauge | `family` | routes in the forwarding table (`ipv4`, `ipv6`) |
//! | `llrouter_fib_memory_bytes` | gauge | `structure` | the forwarding table's memory by structure (`v4_tbl24`, `v4_tbl8`, `v4_prefixes`, the same for `v6_`, `nexthops`) |
//! | `llrouter_mirror_events_total` / `_resyncs_total` / `_overruns_total` / `_updates_total` | counter | | the route mirror: netlink events received, full re-dumps of the kernel's tables, event-socket overruns (events lost, each repaired by a re-dump), forwarding-table entries changed |
//! | `process_cpu_seconds_total` | counter | | user + system CPU time of the router process |
//! | `process_resident_memory_bytes` | gauge | | resident set size |
//! | `process_open_fds` / `process_max_fds` | gauge | | open file descriptors, and their limit |
//! | `process_start_time_seconds` | gauge | | start time, seconds since the Unix epoch |

mod process;
mod render;
mod server;
#[cfg(test)]
mod tests;

pub use process::ProcessMetrics;
pub use render::{escape_label, format_value, render};
pub use server::{MetricsServer, CONTENT_TYPE, IO_TIMEOUT, MAX_CONNECTIONS, MAX_REQUEST};

use llr_core::sched::StrategyKind;
use serde::{Deserialize, Serialize};

/// A histogram with fixed upper bounds: `counts[i]` observations in `(bounds[i-1], bounds[i]]`,
/// the last entry (`counts[bounds.len()]`) those above every bound (`+Inf`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Upper bounds, ascending, in the metric's unit (seconds for latencies).
    pub bounds: Vec<f64>,
    /// Per-bucket (not cumulative) counts, `bounds.len() + 1` entries.
    pub counts: Vec<u64>,
    /// Sum of all observed values.
    pub sum: f64,
}

/// Ring-latency histogram bounds (seconds): 1 µs … 10 ms in steps of 1.5–2× up to 1 ms, so
/// that a p99 read from the buckets is known within a factor of about 1.5 where the RT ring's
/// waits lie (Tmax is a few to a few tens of µs).
pub const LATENCY_BOUNDS: [f64; 22] = [
    1e-6, 1.5e-6, 2e-6, 3e-6, 5e-6, 7e-6, 10e-6, 15e-6, 20e-6, 30e-6, 50e-6, 70e-6, 100e-6, 150e-6,
    200e-6, 300e-6, 500e-6, 700e-6, 1e-3, 2e-3, 5e-3, 10e-3,
];

impl Histogram {
    /// The ring-latency bounds, [`LATENCY_BOUNDS`].
    pub fn latency_bounds() -> Vec<f64> {
        LATENCY_BOUNDS.to_vec()
    }

    pub fn new(bounds: Vec<f64>) -> Self {
        let n = bounds.len() + 1;
        Histogram {
            bounds,
            counts: vec![0; n],
            sum: 0.0,
        }
    }

    /// Records one value.
    pub fn observe(&mut self, v: f64) {
        let i = self.bounds.partition_point(|b| *b < v);
        if self.counts.len() != self.bounds.len() + 1 {
            self.counts.resize(self.bounds.len() + 1, 0);
        }
        self.counts[i] += 1;
        self.sum += v;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Observations since `earlier` (same bounds), e.g. over one refresh interval; counters
    /// that went backwards (a restart) count from zero.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        if earlier.bounds != self.bounds {
            return self.clone();
        }
        let counts = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, c)| c.saturating_sub(earlier.counts.get(i).copied().unwrap_or(0)))
            .collect();
        Histogram {
            bounds: self.bounds.clone(),
            counts,
            sum: (self.sum - earlier.sum).max(0.0),
        }
    }

    /// Upper bound of the bucket holding the `q`-quantile (`+Inf` when it lies above every
    /// bound); `None` when empty. A histogram only knows quantiles to a bucket's resolution.
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut cum = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cum += c;
            if cum >= rank {
                return Some(self.bounds.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        Some(f64::INFINITY)
    }
}

/// Counters of one ring (one traffic class on one engine device of one worker).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RingMetrics {
    pub worker: u32,
    /// Engine device (a set of rings sharing a wake-up) — an index, not an interface.
    pub device: u32,
    pub ring: u32,
    pub class: String,
    /// Frames that entered the ring (served + waiting).
    pub packets: u64,
    /// Bytes of the served frames.
    pub bytes: u64,
    /// Frames dropped because the ring was full.
    pub drops: u64,
    pub served: u64,
    pub budget_hits: u64,
    /// Grants served from the ring and the worker's CPU time in them, seconds (per grant and
    /// per frame: the fixed and the per-frame cost of serving this ring).
    #[serde(default)]
    pub grants: u64,
    #[serde(default)]
    pub grant_seconds: f64,
    /// Grants of the ring that ended in a transmit flush (a `sendto` kick per port with
    /// frames): higher rings flush after every grant, the lowest once `tx-batch` frames wait.
    #[serde(default)]
    pub tx_flushes: u64,
    /// The worker's time inside those flushes, seconds (part of `grant_seconds`), and the
    /// frames they handed to the kernel: ÷ flushes and ÷ frames, the fixed and the per-frame
    /// cost of transmitting.
    #[serde(default)]
    pub tx_flush_seconds: f64,
    #[serde(default)]
    pub tx_flushed_frames: u64,
    /// The ring's budget now (packets per grant, or ns for the time-slice strategies): the
    /// configured one, or what `budget = "auto"` set last.
    #[serde(default)]
    pub budget: u32,
    /// Time spent in the ring, seconds.
    pub latency: Histogram,
}

/// Counters of one engine device (a set of rings sharing a wake-up).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceMetrics {
    pub worker: u32,
    pub device: u32,
    pub wakeups: u64,
    pub rearms: u64,
    pub budget_exhaustions: u64,
    pub passes: u64,
}

/// Counters of one worker thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerMetrics {
    pub worker: u32,
    pub core: u32,
    pub poll_rounds: u64,
    /// Fraction of the last measuring interval the worker was busy (0..1).
    pub busy_ratio: f64,
    /// Time the worker was not idle since it started, seconds.
    #[serde(default)]
    pub busy_seconds: f64,
    /// The worker's longest grant or flow turn since it started, seconds: its longest stall
    /// (route updates never make it wait; a long one is the CPU taken away).
    #[serde(default)]
    pub stall_max_seconds: f64,
}

/// Counters of one of the router's interfaces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceMetrics {
    /// Interface name (`eth0`).
    pub interface: String,
    pub ifindex: u32,
    /// Frames the router received from it (through its AF_XDP sockets).
    pub rx_packets: u64,
    /// Frames the router transmitted on it.
    pub tx_packets: u64,
    /// Frames its XDP classifier handed to the kernel stack (ARP, local, multicast, …).
    pub kernel_pass_packets: u64,
    /// Frames dropped at it: egress queue full, socket ring full, other kernel AF_XDP drops.
    pub dropped_packets: u64,
    /// Malformed frames, invalid Tx descriptors, frames for a port the worker does not serve,
    /// Tx kicks the kernel refused (frames left in the Tx ring).
    pub errors: u64,
}

/// Everything `/metrics` shows, as plain data. The router builds one per scrape; `ctl counters`
/// returns it as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    /// The running strategy (`None` before a worker published).
    pub strategy: Option<StrategyKind>,
    /// Every strategy the router knows (the `llrouter_strategy` gauge has one series each, so a
    /// strategy change never creates a series).
    #[serde(default)]
    pub strategies: Vec<StrategyKind>,
    pub rings: Vec<RingMetrics>,
    pub devices: Vec<DeviceMetrics>,
    pub workers: Vec<WorkerMetrics>,
    /// `(reason, packets)` the router dropped, e.g. `("egress_queue_full", 3)`.
    pub drops: Vec<(String, u64)>,
    /// `(reason, packets)` the XDP classifier handed to the kernel stack (not drops).
    #[serde(default)]
    pub kernel_pass: Vec<(String, u64)>,
    /// `(type, sent, rate-limited)`: ICMP errors the router sent per type
    /// (`time_exceeded`, `unreachable`, `too_big`), and those its rate limit held back.
    #[serde(default)]
    pub icmp: Vec<(String, u64, u64)>,
    /// `(event, packets)` of the worker's slow path besides ICMP: `fragments_sent`,
    /// `fragment_failed`, `punted` (handed to the kernel through the punt TAP), `punt_dropped`,
    /// `icmp_unsendable`.
    #[serde(default)]
    pub slow_path: Vec<(String, u64)>,
    /// `(class, packets)`: frames the XDP classifier steered to each class (all interfaces),
    /// independent of which ring serves the class under the running strategy.
    #[serde(default)]
    pub classes: Vec<(String, u64)>,
    #[serde(default)]
    pub interfaces: Vec<InterfaceMetrics>,
    #[serde(default)]
    pub process: Option<ProcessMetrics>,
    /// The flow scheduler's flows (flows on), summed over workers.
    #[serde(default)]
    pub flows: Vec<FlowMetrics>,
    /// `(family, routes)` in the forwarding table (`ipv4`, `ipv6`).
    #[serde(default)]
    pub fib_routes: Vec<(String, u64)>,
    /// `(structure, bytes)` of the forwarding table: `v4_tbl24` (first-level pages holding a
    /// route), `v4_tbl8` (extension groups), `v4_prefixes` (the per-length prefix maps updates
    /// work from), the same for `v6_`, and `nexthops`.
    #[serde(default)]
    pub fib_memory: Vec<(String, u64)>,
    /// The kernel route mirror's counters (none without a mirror).
    #[serde(default)]
    pub mirror: Option<MirrorMetrics>,
    /// The host firewall's rules and base-chain policies on the forwarding path, with what
    /// they matched in llrouter.
    #[serde(default)]
    pub filter_rules: Vec<FilterRuleMetrics>,
}

/// One rule (or base-chain policy, handle 0) of the host's firewall.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterRuleMetrics {
    /// `ip`, `ip6`, `inet`, ….
    pub family: String,
    pub table: String,
    pub chain: String,
    /// The nftables handle; 0 for the chain's policy.
    pub handle: u64,
    /// All it matched, the XDP classifier's drops included.
    pub packets: u64,
    pub bytes: u64,
    /// What the XDP classifier dropped for it (a policy: crossed on the way to such a drop).
    #[serde(default)]
    pub xdp_packets: u64,
    #[serde(default)]
    pub xdp_bytes: u64,
}

/// The kernel route mirror (netlink events into the forwarding table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorMetrics {
    /// Netlink event messages received.
    pub events: u64,
    /// Full re-dumps of the kernel's tables (start, link/address changes, overruns, period).
    pub resyncs: u64,
    /// Event-socket overruns (`ENOBUFS`: events lost), each repaired by a re-dump.
    pub overruns: u64,
    /// Forwarding-table entries changed.
    pub updates: u64,
}

/// One flow of the flow scheduler.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowMetrics {
    pub flow: String,
    /// CPU time charged to the flow (its elements and forwarding), seconds.
    pub cpu_seconds: f64,
    /// Packets that left its pipeline (forwarded or dropped by an element).
    pub packets: u64,
    /// Packets dropped at its full queue.
    pub queue_drops: u64,
    /// Packets its elements dropped (meters, ACLs).
    pub element_drops: u64,
    /// Turns that ended with a packet mid-pipeline while another flow went first.
    pub preemptions: u64,
    /// Packets queued now.
    pub queue_len: u64,
}
