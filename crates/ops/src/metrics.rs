//! Prometheus metrics: a plain [`MetricsSnapshot`] the router fills, its rendering in the
//! [text exposition format 0.0.4](https://prometheus.io/docs/instrumenting/exposition_formats/),
//! and a tiny HTTP endpoint ([`MetricsServer`]) serving `GET /metrics`.
//!
//! Metric families (all prefixed `llrouter_`):
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `info` | gauge (1) | `version`, `strategy` | build and running strategy |
//! | `ring_packets_total` | counter | `worker`,`device`,`ring`,`class` | packets that entered the ring |
//! | `ring_bytes_total` | counter | same | bytes that entered the ring |
//! | `ring_drops_total` | counter | same | packets dropped at the full ring |
//! | `ring_served_total` | counter | same | packets the poll engine took from the ring |
//! | `ring_budget_hits_total` | counter | same | ring budget ran out with packets left |
//! | `ring_latency_seconds` | histogram | same | time from XDP receive to processing |
//! | `device_wakeups_total` | counter | `worker`,`device` | wake-ups (interrupts taken) |
//! | `device_rearms_total` | counter | same | left the poll list, wake-up re-armed |
//! | `device_budget_exhaustions_total` | counter | same | device budget ran out with work left |
//! | `device_passes_total` | counter | same | full passes over the device's rings |
//! | `worker_poll_rounds_total` | counter | `worker`,`core` | iterations of the poll loop |
//! | `worker_busy_ratio` | gauge | `worker`,`core` | CPU busy fraction of the worker (0..1) |
//! | `drops_total` | counter | `reason` | packets dropped or passed to the kernel, per reason |

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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

/// Counters of one ring (one traffic class on one device of one worker).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RingMetrics {
    pub worker: u32,
    pub device: u32,
    pub ring: u32,
    pub class: String,
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
    pub served: u64,
    pub budget_hits: u64,
    /// Time spent in the ring, seconds.
    pub latency: Histogram,
}

/// Counters of one device (a set of rings sharing a wake-up).
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
}

/// Everything `/metrics` shows, as plain data. The router builds one per scrape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    pub strategy: String,
    pub rings: Vec<RingMetrics>,
    pub devices: Vec<DeviceMetrics>,
    pub workers: Vec<WorkerMetrics>,
    /// `(reason, count)`, e.g. `("ttl_expired", 3)`.
    pub drops: Vec<(String, u64)>,
    /// `(class, packets)`: frames the XDP classifier steered to each class (all interfaces),
    /// independent of which ring serves the class under the running strategy.
    #[serde(default)]
    pub classes: Vec<(String, u64)>,
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

struct Out {
    s: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.s, "# HELP llrouter_{name} {}", escape_help(help));
        let _ = writeln!(self.s, "# TYPE llrouter_{name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, String)], v: f64) {
        let _ = write!(self.s, "llrouter_{name}");
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
}

fn ring_labels(r: &RingMetrics) -> Vec<(&'static str, String)> {
    vec![
        ("worker", r.worker.to_string()),
        ("device", r.device.to_string()),
        ("ring", r.ring.to_string()),
        ("class", r.class.clone()),
    ]
}

/// Renders `snap` in the Prometheus text format 0.0.4.
pub fn render(snap: &MetricsSnapshot) -> String {
    let mut o = Out { s: String::new() };
    o.family(
        "info",
        "gauge",
        "llrouter build and running scheduling strategy.",
    );
    o.sample(
        "info",
        &[
            ("version", env!("CARGO_PKG_VERSION").to_string()),
            ("strategy", snap.strategy.clone()),
        ],
        1.0,
    );

    type RingField = fn(&RingMetrics) -> u64;
    let ring_counters: [(&str, &str, RingField); 5] = [
        (
            "ring_packets_total",
            "Packets that entered the ring.",
            |r| r.packets,
        ),
        ("ring_bytes_total", "Bytes that entered the ring.", |r| {
            r.bytes
        }),
        (
            "ring_drops_total",
            "Packets dropped because the ring was full.",
            |r| r.drops,
        ),
        (
            "ring_served_total",
            "Packets the poll engine took from the ring.",
            |r| r.served,
        ),
        (
            "ring_budget_hits_total",
            "Times the ring budget ran out with packets left in the ring.",
            |r| r.budget_hits,
        ),
    ];
    for (name, help, f) in ring_counters {
        o.family(name, "counter", help);
        for r in &snap.rings {
            o.sample(name, &ring_labels(r), f(r) as f64);
        }
    }

    o.family(
        "ring_latency_seconds",
        "histogram",
        "Time a packet spent in its ring, from XDP receive to processing.",
    );
    for r in &snap.rings {
        let base = ring_labels(r);
        let h = &r.latency;
        let mut cum = 0u64;
        for (i, b) in h.bounds.iter().enumerate() {
            cum += h.counts.get(i).copied().unwrap_or(0);
            let mut l = base.clone();
            l.push(("le", format_value(*b)));
            o.sample("ring_latency_seconds_bucket", &l, cum as f64);
        }
        let total = h.count();
        let mut l = base.clone();
        l.push(("le", "+Inf".into()));
        o.sample("ring_latency_seconds_bucket", &l, total as f64);
        o.sample("ring_latency_seconds_sum", &base, h.sum);
        o.sample("ring_latency_seconds_count", &base, total as f64);
    }

    type DevField = fn(&DeviceMetrics) -> u64;
    let dev_counters: [(&str, &str, DevField); 4] = [
        (
            "device_wakeups_total",
            "Wake-ups that put the device on the poll list (interrupts taken).",
            |d| d.wakeups,
        ),
        (
            "device_rearms_total",
            "Times the device left the poll list with every ring empty and re-armed its wake-up.",
            |d| d.rearms,
        ),
        (
            "device_budget_exhaustions_total",
            "Times the device budget ran out with packets left.",
            |d| d.budget_exhaustions,
        ),
        (
            "device_passes_total",
            "Full passes over the device's rings.",
            |d| d.passes,
        ),
    ];
    for (name, help, f) in dev_counters {
        o.family(name, "counter", help);
        for d in &snap.devices {
            o.sample(
                name,
                &[
                    ("worker", d.worker.to_string()),
                    ("device", d.device.to_string()),
                ],
                f(d) as f64,
            );
        }
    }

    let wl = |w: &WorkerMetrics| {
        vec![
            ("worker", w.worker.to_string()),
            ("core", w.core.to_string()),
        ]
    };
    o.family(
        "worker_poll_rounds_total",
        "counter",
        "Iterations of the worker's poll loop.",
    );
    for w in &snap.workers {
        o.sample("worker_poll_rounds_total", &wl(w), w.poll_rounds as f64);
    }
    o.family(
        "worker_busy_ratio",
        "gauge",
        "CPU busy fraction of the worker thread over the last interval (0..1).",
    );
    for w in &snap.workers {
        o.sample("worker_busy_ratio", &wl(w), w.busy_ratio);
    }

    o.family(
        "drops_total",
        "counter",
        "Packets dropped or passed to the kernel, by reason.",
    );
    for (reason, n) in &snap.drops {
        o.sample("drops_total", &[("reason", reason.clone())], *n as f64);
    }

    if !snap.classes.is_empty() {
        o.family(
            "class_packets_total",
            "counter",
            "Packets the XDP classifier steered to the class (before its ring).",
        );
        for (class, n) in &snap.classes {
            o.sample(
                "class_packets_total",
                &[("class", class.clone())],
                *n as f64,
            );
        }
    }
    o.s
}

/// `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Largest request head accepted (request line plus headers).
pub const MAX_REQUEST: usize = 8 * 1024;
/// Per-connection read/write timeout.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once; more are closed at once.
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
        let active = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::Builder::new()
            .name("llr-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop2.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
                        tracing::warn!("metrics: too many connections, closing one");
                        continue; // dropped: closed
                    }
                    active.fetch_add(1, Ordering::AcqRel);
                    let snapshot = snapshot.clone();
                    let active2 = active.clone();
                    let spawned = std::thread::Builder::new()
                        .name("llr-metrics-conn".into())
                        .spawn(move || {
                            if let Err(e) = serve_one(stream, &*snapshot) {
                                tracing::debug!("metrics connection: {e}");
                            }
                            active2.fetch_sub(1, Ordering::AcqRel);
                        });
                    if spawned.is_err() {
                        // the closure (and its stream) was dropped: closed; undo the count
                        active.fetch_sub(1, Ordering::AcqRel);
                        tracing::warn!("metrics: cannot spawn a connection thread");
                    }
                }
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

fn serve_one(
    mut s: TcpStream,
    snapshot: &(dyn Fn() -> MetricsSnapshot + Send + Sync),
) -> io::Result<()> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
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
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(()); // closed before a full request
        }
        buf.extend_from_slice(&chunk[..n]);
    };
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
            }],
            drops: vec![("ttl_expired".into(), 3), ("no_route".into(), 5)],
            classes: vec![("rt".into(), 1000)],
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
                find(samples, "llrouter_ring_drops_total", &l).value,
                r.drops as f64
            );
            assert_eq!(
                find(samples, "llrouter_ring_served_total", &l).value,
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
            find(samples, "llrouter_device_wakeups_total", &[]).value,
            d.wakeups as f64
        );
        assert_eq!(
            find(samples, "llrouter_device_rearms_total", &[]).value,
            d.rearms as f64
        );
        assert_eq!(
            find(samples, "llrouter_device_budget_exhaustions_total", &[]).value,
            d.budget_exhaustions as f64
        );
        assert_eq!(
            find(samples, "llrouter_device_passes_total", &[]).value,
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
        for (reason, n) in &snap.drops {
            assert_eq!(
                find(samples, "llrouter_drops_total", &[("reason", reason)]).value,
                *n as f64
            );
        }
        assert_eq!(
            find(samples, "llrouter_info", &[("strategy", "ll-wfq")]).value,
            1.0
        );
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
}
