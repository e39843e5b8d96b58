//! Tests of the snapshot types, the text rendering (checked by parsing it back) and the HTTP
//! endpoint.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
                if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
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
        strategy: Some(StrategyKind::LlWfq),
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
                grants: 40,
                grant_seconds: 0.0025,
                tx_flushes: 40,
                tx_flush_seconds: 0.0032,
                tx_flushed_frames: 480,
                budget: 60,
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
                grants: 950,
                grant_seconds: 0.125,
                tx_flushes: 59,
                tx_flush_seconds: 0.0051,
                tx_flushed_frames: 950,
                budget: 4,
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
            stall_max_seconds: 0.00008,
        }],
        drops: vec![("ttl_expired".into(), 3), ("no_route".into(), 5)],
        kernel_pass: vec![("multicast".into(), 7)],
        icmp: vec![("time_exceeded".into(), 50, 950)],
        slow_path: vec![("punted".into(), 3)],
        classes: vec![("rt".into(), 1000)],
        strategies: vec![StrategyKind::Sq, StrategyKind::LlWfq],
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
        flows: vec![FlowMetrics {
            flow: "video".into(),
            cpu_seconds: 0.5,
            packets: 1000,
            queue_drops: 3,
            element_drops: 2,
            preemptions: 7,
            queue_len: 4,
        }],
        fib_routes: vec![("ipv4".into(), 1_000_000), ("ipv6".into(), 200_000)],
        fib_memory: vec![("v4_tbl24".into(), 67_108_864), ("nexthops".into(), 98_304)],
        mirror: Some(MirrorMetrics {
            events: 1_200_000,
            resyncs: 3,
            overruns: 2,
            updates: 1_199_990,
        }),
        filter_rules: vec![
            FilterRuleMetrics {
                family: "inet".into(),
                table: "filter".into(),
                chain: "forward".into(),
                handle: 0,
                packets: 9,
                bytes: 900,
                ..Default::default()
            },
            FilterRuleMetrics {
                family: "inet".into(),
                table: "filter".into(),
                chain: "forward".into(),
                handle: 7,
                packets: 100,
                bytes: 6_400,
                xdp_packets: 60,
                xdp_bytes: 3_840,
            },
        ],
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
        for (name, want) in [
            ("llrouter_ring_packets_total", r.packets as f64),
            ("llrouter_ring_bytes_total", r.bytes as f64),
            ("llrouter_ring_dropped_packets_total", r.drops as f64),
            ("llrouter_ring_served_packets_total", r.served as f64),
            ("llrouter_ring_budget_hits_total", r.budget_hits as f64),
            ("llrouter_ring_grants_total", r.grants as f64),
            ("llrouter_ring_grant_seconds_total", r.grant_seconds),
            ("llrouter_ring_tx_flushes_total", r.tx_flushes as f64),
            ("llrouter_ring_tx_flush_seconds_total", r.tx_flush_seconds),
            (
                "llrouter_ring_tx_flushed_frames_total",
                r.tx_flushed_frames as f64,
            ),
            (
                "llrouter_ring_latency_seconds_count",
                r.latency.count() as f64,
            ),
            ("llrouter_ring_latency_seconds_sum", r.latency.sum),
        ] {
            assert_eq!(find(samples, name, &l).value, want, "{name}");
        }
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
        let v = find(samples, "llrouter_strategy", &[("strategy", s.name())]).value;
        assert_eq!(v, if Some(*s) == snap.strategy { 1.0 } else { 0.0 }, "{s}");
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
        "_waits_total",
        "_preemptions_total",
        "_grants_total",
        "_flushes_total",
        "_frames_total",
        "_events_total",
        "_resyncs_total",
        "_overruns_total",
        "_updates_total",
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
    let flow = |name| find(&parse(&text).unwrap(), name, &[("flow", "video")]).value;
    assert_eq!(flow("llrouter_flow_cpu_seconds_total"), 0.5);
    assert_eq!(flow("llrouter_flow_preemptions_total"), 7.0);
    assert_eq!(flow("llrouter_flow_queue_packets"), 4.0);
    let samples = parse(&text).unwrap();
    let fib = |name, l: (&str, &str)| find(&samples, name, &[l]).value;
    assert_eq!(fib("llrouter_fib_routes", ("family", "ipv6")), 200_000.0);
    assert_eq!(
        fib("llrouter_fib_memory_bytes", ("structure", "v4_tbl24")),
        67_108_864.0
    );
    let rule = |name, handle| {
        let l = [
            ("family", "inet"),
            ("table", "filter"),
            ("chain", "forward"),
            ("handle", handle),
        ];
        find(&samples, name, &l).value
    };
    assert_eq!(rule("llrouter_filter_rule_packets_total", "7"), 100.0);
    assert_eq!(rule("llrouter_filter_rule_bytes_total", "7"), 6_400.0);
    assert_eq!(rule("llrouter_filter_rule_packets_total", "0"), 9.0);
    assert_eq!(rule("llrouter_filter_rule_xdp_packets_total", "7"), 60.0);
    assert_eq!(rule("llrouter_filter_rule_xdp_bytes_total", "7"), 3_840.0);
    assert_eq!(rule("llrouter_filter_rule_xdp_packets_total", "0"), 0.0);
    let one = |name| find(&samples, name, &[]).value;
    assert_eq!(one("llrouter_mirror_events_total"), 1_200_000.0);
    assert_eq!(one("llrouter_mirror_overruns_total"), 2.0);
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
    a.strategy = Some(StrategyKind::Sq);
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
    assert!(me.max_fds >= me.open_fds);
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
    assert!(text.contains("llrouter_icmp_ratelimited_packets_total{type=\"time_exceeded\"} 950"));
    assert!(text.contains("llrouter_slow_path_packets_total{event=\"punted\"} 3"));
}

/// The Grafana dashboard (grafana/llrouter.json) names only metrics the endpoint serves, with
/// labels they carry: a renamed metric or label breaks this test, not the operator's panels.
#[test]
fn the_dashboard_names_metrics_that_exist() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../grafana/llrouter.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("dashboard")).expect("JSON");
    let samples = parse(&render(&snap())).expect("rendered text parses");
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            exprs.push((
                t["expr"].as_str().expect("expr").to_string(),
                t["legendFormat"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    exprs.push((
        dash["templating"]["list"][1]["query"]
            .as_str()
            .unwrap()
            .to_string(),
        String::new(),
    ));
    assert!(exprs.len() >= 12, "{exprs:?}");
    let mut names = 0;
    for (e, legend) in &exprs {
        // every metric the expression names
        let used: Vec<&str> = e
            .match_indices("llrouter_")
            .map(|(i, _)| {
                let rest = &e[i..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .collect();
        assert!(!used.is_empty(), "{e}");
        for name in &used {
            names += 1;
            let of: Vec<&Sample> = samples.iter().filter(|s| s.name == *name).collect();
            assert!(!of.is_empty(), "{name} (in `{e}`) is not served");
            // labels grouped by or shown in the legend (`instance` and `le` come from
            // Prometheus and the histogram)
            let mut labels: Vec<String> = Vec::new();
            for seg in e.split("by (").skip(1) {
                labels.extend(
                    seg.split(')')
                        .next()
                        .unwrap()
                        .split(',')
                        .map(|l| l.trim().to_string()),
                );
            }
            for seg in legend.split("{{").skip(1) {
                labels.push(seg.split("}}").next().unwrap().trim().to_string());
            }
            for l in labels.iter().filter(|l| *l != "instance" && *l != "le") {
                let by_expr_only = !legend.contains(&format!("{{{{{l}}}}}"));
                let carried = of.iter().any(|s| s.labels.contains_key(l));
                // a `by (x)` naming a label of another metric of the same expression is fine
                assert!(
                    carried || by_expr_only && used.len() > 1,
                    "{name} has no label `{l}` (in `{e}`, legend `{legend}`)"
                );
            }
        }
    }
    assert!(names >= 18, "{names}");
}
