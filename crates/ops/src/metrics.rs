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
//! | `llrouter_interface_errors_total` | counter | `interface` | malformed frames, invalid Tx descriptors, frames for a port the worker does not serve |
//! | `llrouter_class_packets_total` | counter | `class` | frames the XDP classifier steered to the class, all interfaces (before its ring) |
//! | `llrouter_ring_packets_total` | counter | `worker`,`engine_device`,`ring`,`class` | frames that entered the ring |
//! | `llrouter_ring_bytes_total` | counter | same | bytes of the frames the poll engine took from the ring |
//! | `llrouter_ring_dropped_packets_total` | counter | same | frames dropped because the ring was full |
//! | `llrouter_ring_served_packets_total` | counter | same | frames the poll engine took from the ring |
//! | `llrouter_ring_budget_hits_total` | counter | same | grants that ended with the ring budget spent and frames left |
//! | `llrouter_ring_latency_seconds` | histogram | same | time from XDP receive to processing |
//! | `llrouter_engine_device_wakeups_total` | counter | `worker`,`engine_device` | wake-ups (interrupts taken) |
//! | `llrouter_engine_device_rearms_total` | counter | same | left the poll list, wake-up re-armed |
//! | `llrouter_engine_device_budget_exhaustions_total` | counter | same | device budget ran out with work left |
//! | `llrouter_engine_device_passes_total` | counter | same | full passes over the device's rings |
//! | `llrouter_worker_poll_rounds_total` | counter | `worker`,`core` | iterations of the poll loop |
//! | `llrouter_worker_busy_seconds_total` | counter | `worker`,`core` | time the worker was not idle (`rate()` gives its load) |
//! | `llrouter_worker_busy_ratio` | gauge | `worker`,`core` | busy fraction over the worker's last ~0.5 s window |
//! | `llrouter_dropped_packets_total` | counter | `reason` | frames the router dropped, by reason (worker reasons as the worker names them) |
//! | `llrouter_kernel_pass_packets_total` | counter | `reason` | frames handed to the kernel stack, by reason (not drops): by the XDP classifier (`non_ip`, `multicast`, `local`, `no_socket`) or by the worker through the punt TAP (`worker_<reason>`) |
//! | `llrouter_icmp_sent_packets_total` | counter | `type` | ICMP / ICMPv6 errors sent: `time_exceeded`, `unreachable`, `too_big` |
//! | `llrouter_icmp_ratelimited_packets_total` | counter | `type` | ICMP errors the rate limit held back |
//! | `llrouter_slow_path_packets_total` | counter | `event` | `fragments_sent`, `fragment_failed`, `punted`, `punt_dropped`, `icmp_unsendable` |
//! | `process_cpu_seconds_total` | counter | | user + system CPU time of the router process |
//! | `process_resident_memory_bytes` | gauge | | resident set size |
//! | `process_open_fds` / `process_max_fds` | gauge | | open file descriptors, and their limit |
//! | `process_start_time_seconds` | gauge | | start time, seconds since the Unix epoch |

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::conns::{Admit, ConnGuard, ConnTable};

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

impl Histogram {
    /// Default ring-latency bounds: 1 µs … 10 ms, roughly 1-2-5 steps.
    pub fn latency_bounds() -> Vec<f64> {
        vec![
            1e-6, 2e-6, 5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3,
        ]
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
    /// Malformed frames, invalid Tx descriptors, frames for a port the worker does not serve.
    pub errors: u64,
}

/// The router process's own resource use (the standard `process_*` metrics).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessMetrics {
    pub cpu_seconds: f64,
    pub resident_memory_bytes: u64,
    pub open_fds: u64,
    pub max_fds: u64,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessMetrics {
    /// Parses `/proc/self/stat` (`stat`) with the boot time (`btime` of `/proc/stat`, seconds
    /// since the epoch), clock ticks per second and page size.
    pub fn from_proc_stat(stat: &str, btime: u64, ticks: u64, page: u64) -> Option<Self> {
        // the command name may hold spaces and parentheses: the fields start after the last ')'
        let rest = &stat[stat.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (state): field n is f[n - 3]
        let field = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
        let ticks = ticks.max(1) as f64;
        Some(ProcessMetrics {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            resident_memory_bytes: field(24)? * page,
            open_fds: 0,
            max_fds: 0,
            start_time_seconds: btime as f64 + field(22)? as f64 / ticks,
        })
    }

    /// Reads this process's figures from `/proc`; `None` when `/proc` is unreadable.
    pub fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let btime = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
        let ticks = llr_io::sys::clock_ticks_per_sec().unwrap_or(1);
        let page = llr_io::sys::page_size().unwrap_or(1);
        let mut p = Self::from_proc_stat(&stat, btime, ticks, page)?;
        p.open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
        if let Ok(max) = llr_io::sys::max_open_files() {
            p.max_fds = max;
        }
        Some(p)
    }
}

/// Everything `/metrics` shows, as plain data. The router builds one per scrape; `ctl counters`
/// returns it as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    /// The running strategy's name.
    pub strategy: String,
    /// Every strategy the router knows (the `llrouter_strategy` gauge has one series each, so a
    /// strategy change never creates a series).
    #[serde(default)]
    pub strategies: Vec<String>,
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
}

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
    if !snap.strategy.is_empty() && !strategies.contains(&snap.strategy) {
        strategies.push(snap.strategy.clone());
    }
    o.each(
        (
            "llrouter_strategy",
            "gauge",
            "1 for the running scheduling strategy, 0 for every other known one.",
        ),
        &strategies,
        |s| {
            let on = *s == snap.strategy;
            (vec![("strategy", s.clone())], if on { 1.0 } else { 0.0 })
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

/// `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Largest request head accepted (request line plus headers).
pub const MAX_REQUEST: usize = 8 * 1024;
/// Time a request head may take to arrive (in total), and a reply write may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once; at the limit a newcomer closes the oldest one still sending its
/// request, or gets `503` when every one is being answered.
pub const MAX_CONNECTIONS: usize = 16;

/// A minimal HTTP/1.x endpoint for `GET /metrics`, on its own thread. Stops (and joins its
/// thread) on drop.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (use a loopback address unless the operator asked otherwise; port 0 picks a
    /// free one) and serves `snapshot()` rendered on every `GET /metrics`.
    pub fn start<F>(addr: SocketAddr, snapshot: F) -> io::Result<MetricsServer>
    where
        F: Fn() -> MetricsSnapshot + Send + Sync + 'static,
    {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let snapshot = Arc::new(snapshot);
        let conns = ConnTable::new(MAX_CONNECTIONS);
        let thread = std::thread::Builder::new()
            .name("llr-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop2.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    let Ok(c) = stream.try_clone() else { continue };
                    let guard = match conns.admit(Box::new(move || {
                        let _ = c.shutdown(std::net::Shutdown::Both);
                    })) {
                        Admit::Serve(g) => g,
                        Admit::Busy => {
                            refuse_busy(stream);
                            continue;
                        }
                    };
                    let snapshot = snapshot.clone();
                    let spawned = std::thread::Builder::new()
                        .name("llr-metrics-conn".into())
                        .spawn(move || {
                            if let Err(e) = serve_one(stream, &*snapshot, &guard) {
                                tracing::debug!("metrics connection: {e}");
                            }
                        });
                    if spawned.is_err() {
                        tracing::warn!("metrics: cannot spawn a connection thread");
                    }
                }
                conns.close_all();
            })?;
        tracing::info!("metrics on http://{addr}/metrics");
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address (with the real port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // wake the blocking accept
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reply beyond the connection limit while every connection is being answered.
fn refuse_busy(mut s: TcpStream) {
    tracing::warn!("metrics: {MAX_CONNECTIONS} connections are all being answered; refused one");
    let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
    let _ = respond(
        &mut s,
        "503 Service Unavailable",
        "text/plain",
        b"busy, try again\n",
    );
}

fn serve_one(
    mut s: TcpStream,
    snapshot: &(dyn Fn() -> MetricsSnapshot + Send + Sync),
    guard: &ConnGuard,
) -> io::Result<()> {
    // The whole request head must arrive within IO_TIMEOUT, however it is paced.
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        if buf.len() > MAX_REQUEST {
            return respond(
                &mut s,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"request too large\n",
            );
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request head not complete in time",
            ));
        }
        s.set_read_timeout(Some(left))?;
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(()); // closed before a full request
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    guard.start_request();
    let head = String::from_utf8_lossy(&buf[..head_end]);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => {
            let body =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render(&snapshot())));
            match body {
                Ok(b) => respond(&mut s, "200 OK", CONTENT_TYPE, b.as_bytes()),
                Err(_) => respond(
                    &mut s,
                    "500 Internal Server Error",
                    "text/plain",
                    b"snapshot failed\n",
                ),
            }
        }
        ("GET", _) => respond(&mut s, "404 Not Found", "text/plain", b"try /metrics\n"),
        _ => respond(
            &mut s,
            "405 Method Not Allowed",
            "text/plain",
            b"GET only\n",
        ),
    }
}

fn respond(s: &mut TcpStream, status: &str, ctype: &str, body: &[u8]) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    s.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashMap};
    use std::sync::atomic::AtomicUsize;

    /// One parsed sample.
    #[derive(Debug, Clone, PartialEq)]
    struct Sample {
        name: String,
        labels: BTreeMap<String, String>,
        value: f64,
    }

    /// A strict little parser of the text format: every sample must belong to a family declared
    /// by a preceding `# TYPE` (with `_bucket/_sum/_count` for histograms), HELP/TYPE at most
    /// once per family, label values properly escaped, values Go-parseable floats.
    fn parse(text: &str) -> Result<Vec<Sample>, String> {
        let mut types: HashMap<String, String> = HashMap::new();
        let mut helps: HashMap<String, ()> = HashMap::new();
        let mut out = Vec::new();
        for (no, line) in text.lines().enumerate() {
            let err = |m: &str| format!("line {}: {m}: {line:?}", no + 1);
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                let mut it = rest.splitn(3, ' ');
                let kw = it.next().unwrap();
                let name = it.next().ok_or_else(|| err("no name"))?.to_string();
                let arg = it.next().ok_or_else(|| err("no text"))?;
                match kw {
                    "HELP" if helps.insert(name.clone(), ()).is_some() => {
                        return Err(err("second HELP"));
                    }
                    "HELP" => {}
                    "TYPE" => {
                        if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&arg) {
                            return Err(err("bad type"));
                        }
                        if types.insert(name, arg.to_string()).is_some() {
                            return Err(err("second TYPE"));
                        }
                    }
                    _ => {}
                }
                continue;
            }
            let name_end = line
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .ok_or_else(|| err("no value"))?;
            let name = &line[..name_end];
            let mut rest = &line[name_end..];
            let mut labels = BTreeMap::new();
            if let Some(r) = rest.strip_prefix('{') {
                let mut r = r;
                loop {
                    if let Some(r2) = r.strip_prefix('}') {
                        r = r2;
                        break;
                    }
                    let eq = r.find('=').ok_or_else(|| err("label without ="))?;
                    let key = &r[..eq];
                    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        return Err(err("bad label name"));
                    }
                    r = r[eq + 1..]
                        .strip_prefix('"')
                        .ok_or_else(|| err("unquoted label"))?;
                    let mut val = String::new();
                    let mut chars = r.char_indices();
                    let end = loop {
                        match chars.next() {
                            None => return Err(err("unterminated label")),
                            Some((i, '"')) => break i,
                            Some((_, '\\')) => match chars.next() {
                                Some((_, '\\')) => val.push('\\'),
                                Some((_, '"')) => val.push('"'),
                                Some((_, 'n')) => val.push('\n'),
                                _ => return Err(err("bad escape")),
                            },
                            Some((_, '\n')) => return Err(err("raw newline")),
                            Some((_, c)) => val.push(c),
                        }
                    };
                    if labels.insert(key.to_string(), val).is_some() {
                        return Err(err("duplicate label"));
                    }
                    r = &r[end + 1..];
                    r = r.strip_prefix(',').unwrap_or(r);
                }
                rest = r;
            }
            let vtxt = rest
                .strip_prefix(' ')
                .ok_or_else(|| err("no space before value"))?;
            let value = match vtxt {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                "NaN" => f64::NAN,
                v => v.parse::<f64>().map_err(|_| err("bad value"))?,
            };
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| types.get(*f).map(String::as_str) == Some("histogram"))
                })
                .unwrap_or(name);
            if !types.contains_key(family) {
                return Err(err("sample before its TYPE"));
            }
            if name.ends_with("_bucket") && !labels.contains_key("le") {
                return Err(err("bucket without le"));
            }
            out.push(Sample {
                name: name.to_string(),
                labels,
                value,
            });
        }
        Ok(out)
    }

    fn snap() -> MetricsSnapshot {
        let mut lat = Histogram::new(vec![1e-6, 10e-6, 100e-6]);
        for v in [0.5e-6, 1e-6, 3e-6, 50e-6, 70e-6, 1e-3] {
            lat.observe(v);
        }
        MetricsSnapshot {
            strategy: "ll-wfq".into(),
            rings: vec![
                RingMetrics {
                    worker: 0,
                    device: 0,
                    ring: 0,
                    class: "rt".into(),
                    packets: 1000,
                    bytes: 64_000,
                    drops: 0,
                    served: 998,
                    budget_hits: 3,
                    latency: lat,
                },
                RingMetrics {
                    worker: 0,
                    device: 0,
                    ring: 1,
                    class: "be \"bulk\"\\x\nline".into(),
                    packets: 5000,
                    bytes: 7_500_000,
                    drops: 1234,
                    served: 3766,
                    budget_hits: 900,
                    latency: Histogram::new(Histogram::latency_bounds()),
                },
            ],
            devices: vec![DeviceMetrics {
                worker: 0,
                device: 0,
                wakeups: 17,
                rearms: 16,
                budget_exhaustions: 42,
                passes: 4242,
            }],
            workers: vec![WorkerMetrics {
                worker: 0,
                core: 1,
                poll_rounds: 99_999,
                busy_ratio: 0.875,
                busy_seconds: 12.5,
            }],
            drops: vec![("ttl_expired".into(), 3), ("no_route".into(), 5)],
            kernel_pass: vec![("multicast".into(), 7)],
            icmp: vec![("time_exceeded".into(), 50, 950)],
            slow_path: vec![("punted".into(), 3)],
            classes: vec![("rt".into(), 1000)],
            strategies: vec!["sq".into(), "ll-wfq".into()],
            interfaces: vec![InterfaceMetrics {
                interface: "veth-rin".into(),
                ifindex: 4,
                rx_packets: 6000,
                tx_packets: 10,
                kernel_pass_packets: 7,
                dropped_packets: 2,
                errors: 1,
            }],
            process: Some(ProcessMetrics {
                cpu_seconds: 1.25,
                resident_memory_bytes: 4096,
                open_fds: 9,
                max_fds: 1024,
                start_time_seconds: 1.7e9,
            }),
        }
    }

    fn find<'a>(s: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> &'a Sample {
        s.iter()
            .find(|x| {
                x.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .unwrap_or_else(|| panic!("no {name} {labels:?}"))
    }

    fn check(samples: &[Sample], snap: &MetricsSnapshot) {
        for r in &snap.rings {
            let l = [("ring", &*r.ring.to_string()), ("class", r.class.as_str())];
            let l: Vec<(&str, &str)> = l.to_vec();
            assert_eq!(
                find(samples, "llrouter_ring_packets_total", &l).value,
                r.packets as f64
            );
            assert_eq!(
                find(samples, "llrouter_ring_bytes_total", &l).value,
                r.bytes as f64
            );
            assert_eq!(
                find(samples, "llrouter_ring_dropped_packets_total", &l).value,
                r.drops as f64
            );
            assert_eq!(
                find(samples, "llrouter_ring_served_packets_total", &l).value,
                r.served as f64
            );
            assert_eq!(
                find(samples, "llrouter_ring_budget_hits_total", &l).value,
                r.budget_hits as f64
            );
            assert_eq!(
                find(samples, "llrouter_ring_latency_seconds_count", &l).value,
                r.latency.count() as f64
            );
            assert_eq!(
                find(samples, "llrouter_ring_latency_seconds_sum", &l).value,
                r.latency.sum
            );
            // buckets: cumulative, non-decreasing, +Inf == count
            let buckets: Vec<&Sample> = samples
                .iter()
                .filter(|x| {
                    x.name == "llrouter_ring_latency_seconds_bucket" && x.labels["class"] == r.class
                })
                .collect();
            assert_eq!(buckets.len(), r.latency.bounds.len() + 1);
            let mut cum = 0;
            for (i, b) in r.latency.bounds.iter().enumerate() {
                cum += r.latency.counts[i];
                assert_eq!(buckets[i].labels["le"].parse::<f64>().unwrap(), *b);
                assert_eq!(buckets[i].value, cum as f64);
            }
            assert_eq!(buckets.last().unwrap().labels["le"], "+Inf");
            assert_eq!(buckets.last().unwrap().value, r.latency.count() as f64);
        }
        let d = &snap.devices[0];
        assert_eq!(
            find(samples, "llrouter_engine_device_wakeups_total", &[]).value,
            d.wakeups as f64
        );
        assert_eq!(
            find(samples, "llrouter_engine_device_rearms_total", &[]).value,
            d.rearms as f64
        );
        assert_eq!(
            find(
                samples,
                "llrouter_engine_device_budget_exhaustions_total",
                &[]
            )
            .value,
            d.budget_exhaustions as f64
        );
        assert_eq!(
            find(samples, "llrouter_engine_device_passes_total", &[]).value,
            d.passes as f64
        );
        let w = &snap.workers[0];
        assert_eq!(
            find(
                samples,
                "llrouter_worker_poll_rounds_total",
                &[("core", "1")]
            )
            .value,
            w.poll_rounds as f64
        );
        assert_eq!(
            find(samples, "llrouter_worker_busy_ratio", &[]).value,
            w.busy_ratio
        );
        assert_eq!(
            find(samples, "llrouter_worker_busy_seconds_total", &[]).value,
            w.busy_seconds
        );
        for (reason, n) in &snap.drops {
            assert_eq!(
                find(
                    samples,
                    "llrouter_dropped_packets_total",
                    &[("reason", reason)]
                )
                .value,
                *n as f64
            );
        }
        for (reason, n) in &snap.kernel_pass {
            assert_eq!(
                find(
                    samples,
                    "llrouter_kernel_pass_packets_total",
                    &[("reason", reason)]
                )
                .value,
                *n as f64
            );
        }
        for i in &snap.interfaces {
            let l = [("interface", i.interface.as_str())];
            for (name, v) in [
                ("rx_packets_total", i.rx_packets),
                ("tx_packets_total", i.tx_packets),
                ("kernel_pass_packets_total", i.kernel_pass_packets),
                ("dropped_packets_total", i.dropped_packets),
                ("errors_total", i.errors),
            ] {
                assert_eq!(
                    find(samples, &format!("llrouter_interface_{name}"), &l).value,
                    v as f64
                );
            }
        }
        for (c, n) in &snap.classes {
            assert_eq!(
                find(samples, "llrouter_class_packets_total", &[("class", c)]).value,
                *n as f64
            );
        }
        // one series per known strategy, 1 only for the running one
        for s in &snap.strategies {
            let v = find(samples, "llrouter_strategy", &[("strategy", s)]).value;
            assert_eq!(v, if *s == snap.strategy { 1.0 } else { 0.0 }, "{s}");
        }
        assert_eq!(
            find(
                samples,
                "llrouter_build_info",
                &[("version", env!("CARGO_PKG_VERSION"))]
            )
            .value,
            1.0
        );
        if let Some(p) = &snap.process {
            assert_eq!(
                find(samples, "process_cpu_seconds_total", &[]).value,
                p.cpu_seconds
            );
            assert_eq!(
                find(samples, "process_open_fds", &[]).value,
                p.open_fds as f64
            );
        }
    }

    #[test]
    fn histogram_buckets() {
        let s = snap();
        // 0.5µs,1µs → ≤1µs; 3µs → ≤10µs; 50,70µs → ≤100µs; 1ms → +Inf
        assert_eq!(s.rings[0].latency.counts, vec![2, 1, 2, 1]);
    }

    #[test]
    fn render_parses_and_matches_snapshot() {
        let s = snap();
        let text = render(&s);
        let samples = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        check(&samples, &s);
        // the escaped class round-trips
        assert!(text.contains(r#"class="be \"bulk\"\\x\nline""#));
        // every family has HELP and TYPE
        assert_eq!(
            text.matches("# HELP ").count(),
            text.matches("# TYPE ").count()
        );
        // an empty snapshot still renders a valid document
        parse(&render(&MetricsSnapshot::default())).unwrap();
    }

    #[test]
    fn histogram_delta_and_quantiles() {
        let mut a = Histogram::new(vec![1.0, 2.0, 4.0]);
        a.observe(0.5);
        let before = a.clone();
        for v in [1.5, 1.5, 3.0, 9.0] {
            a.observe(v);
        }
        let d = a.since(&before);
        assert_eq!(d.counts, vec![0, 2, 1, 1]);
        assert_eq!(d.sum, 15.0);
        assert_eq!(d.quantile_bound(0.5), Some(2.0));
        assert_eq!(d.quantile_bound(0.75), Some(4.0));
        assert_eq!(d.quantile_bound(0.99), Some(f64::INFINITY));
        assert_eq!(a.quantile_bound(0.0), Some(1.0));
        assert_eq!(Histogram::new(vec![1.0]).quantile_bound(0.5), None);
    }

    #[test]
    fn parser_rejects_broken_text() {
        assert!(parse("llrouter_x 1\n").is_err()); // no TYPE
        assert!(parse("# TYPE a counter\na{b=\"c} 1\n").is_err());
        assert!(parse("# TYPE a counter\na{b=\"\\q\"} 1\n").is_err());
        assert!(parse("# TYPE a counter\na one\n").is_err());
    }

    #[test]
    fn value_formatting() {
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(1e-6), "0.000001");
        assert_eq!(format_value(3.0), "3");
    }

    #[test]
    fn names_follow_prometheus_conventions() {
        let text = render(&snap());
        let units = [
            "_packets_total",
            "_bytes_total",
            "_seconds_total",
            "_errors_total",
            "_hits_total",
            "_wakeups_total",
            "_rearms_total",
            "_exhaustions_total",
            "_passes_total",
            "_rounds_total",
        ];
        let mut families = 0;
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let mut w = line.split(' ').skip(2);
            let (name, kind) = (w.next().unwrap(), w.next().unwrap());
            families += 1;
            assert!(
                name.starts_with("llrouter_") || name.starts_with("process_"),
                "{name}: namespace"
            );
            match kind {
                "counter" => assert!(
                    units.iter().any(|u| name.ends_with(u)),
                    "{name}: a counter ends in _<unit>_total"
                ),
                _ => assert!(
                    !name.ends_with("_total"),
                    "{name}: only counters end in _total"
                ),
            }
        }
        // no bare `device` label: an index where operators expect an interface name
        assert!(!text.contains("{device=") && !text.contains(",device="));
        assert!(families > 20, "{families} families");
    }

    #[test]
    fn strategy_change_keeps_the_series_set() {
        let mut a = snap();
        let series = |s: &MetricsSnapshot| -> Vec<String> {
            parse(&render(s))
                .unwrap()
                .into_iter()
                .filter(|x| x.name == "llrouter_strategy")
                .map(|x| format!("{:?}", x.labels))
                .collect()
        };
        let before = series(&a);
        a.strategy = "sq".into();
        assert_eq!(series(&a), before);
        assert_eq!(before.len(), 2);
    }

    #[test]
    fn process_stat_parses() {
        // pid (comm with ) and spaces) state ppid ... utime=14 stime=15 ... starttime=22 vsize rss
        let mut f: Vec<String> = (3..=30).map(|i| i.to_string()).collect();
        f[14 - 3] = "250".into(); // utime
        f[15 - 3] = "50".into(); // stime
        f[22 - 3] = "1000".into(); // starttime, ticks after boot
        f[24 - 3] = "3".into(); // rss, pages
        let stat = format!("42 (a) b (c) {}", f.join(" "));
        let p = ProcessMetrics::from_proc_stat(&stat, 1_700_000_000, 100, 4096).unwrap();
        assert_eq!(p.cpu_seconds, 3.0);
        assert_eq!(p.resident_memory_bytes, 3 * 4096);
        assert_eq!(p.start_time_seconds, 1_700_000_010.0);
        let me = ProcessMetrics::read().expect("/proc readable");
        assert!(me.open_fds > 0 && me.resident_memory_bytes > 0 && me.start_time_seconds > 1e9);
    }

    fn http(addr: SocketAddr, req: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // the server may close early (oversize request): ignore write errors
        let _ = s.write_all(req);
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn http_endpoint_serves_snapshot_and_survives_bad_clients() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c2 = calls.clone();
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), move || {
            c2.fetch_add(1, Ordering::SeqCst);
            snap()
        })
        .unwrap();
        let addr = server.local_addr();
        assert!(addr.ip().is_loopback());

        // a silent client must not block others
        let _silent = TcpStream::connect(addr).unwrap();

        let resp = http(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let (head, body) = resp.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(head.contains(CONTENT_TYPE));
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        check(&parse(body).unwrap(), &snap());
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        assert!(http(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(http(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        let big = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
        let r = http(addr, big.as_bytes());
        assert!(r.is_empty() || r.starts_with("HTTP/1.1 431"), "{r}");
        // half a request then close: no effect on the next one
        drop(TcpStream::connect(addr).unwrap().write_all(b"GET /met"));
        assert!(http(addr, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200"));
        drop(server); // joins the thread; must not hang on the silent client
        assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err());
    }

    /// 30 clients that trickle a request byte every 200 ms and reconnect when closed: a scrape
    /// is still answered within 1 s, every time.
    #[test]
    fn trickling_clients_cannot_block_scrapes() {
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), snap).unwrap();
        let addr = server.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let connects = Arc::new(AtomicUsize::new(0));
        let tricklers: Vec<_> = (0..30)
            .map(|_| {
                let (stop, n) = (stop.clone(), connects.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut s) = TcpStream::connect(addr) else {
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        };
                        n.fetch_add(1, Ordering::Relaxed);
                        while !stop.load(Ordering::Relaxed) && s.write_all(b"G").is_ok() {
                            std::thread::sleep(Duration::from_millis(200));
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let mut worst = Duration::ZERO;
        for _ in 0..10 {
            let t0 = std::time::Instant::now();
            let r = http(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
            worst = worst.max(t0.elapsed());
            assert!(r.starts_with("HTTP/1.1 200"), "{:?}", &r[..r.len().min(80)]);
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
        for t in tricklers {
            t.join().unwrap();
        }
        assert!(worst < Duration::from_secs(1), "worst {worst:?}");
        assert!(connects.load(Ordering::Relaxed) > MAX_CONNECTIONS);
    }

    #[test]
    fn icmp_and_slow_path_series() {
        let text = render(&snap());
        assert!(
            text.contains("llrouter_icmp_sent_packets_total{type=\"time_exceeded\"} 50"),
            "{text}"
        );
        assert!(
            text.contains("llrouter_icmp_ratelimited_packets_total{type=\"time_exceeded\"} 950")
        );
        assert!(text.contains("llrouter_slow_path_packets_total{event=\"punted\"} 3"));
    }
}
