//! `llrouter top`'s frame: per-class rates and ring-latency percentiles, wake-ups, budget
//! exhaustions, worker load, the busiest flows and the non-zero drop and pass reasons, in 80
//! columns.

use std::time::Duration;

use crate::metrics::MetricsSnapshot;

fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn fmt_lat(v: Option<f64>) -> String {
    v.map_or("-".into(), super::latency)
}

/// Columns of a frame: fits an 80×24 terminal.
pub const WIDTH: usize = 80;

/// Rate of a counter over the interval (`d` seconds), or its total on the first sample.
fn per_s(cur: u64, old: Option<u64>, secs: Option<f64>) -> f64 {
    match (old, secs) {
        (Some(o), Some(d)) => cur.saturating_sub(o) as f64 / d,
        _ => cur as f64,
    }
}

/// One frame as lines of at most [`WIDTH`] characters: rates over `prev` (elapsed, snapshot)
/// when given, totals otherwise. Counters that are zero (drop and pass reasons) are left out.
pub fn render(
    cur: &MetricsSnapshot,
    prev: Option<(Duration, &MetricsSnapshot)>,
    src: &str,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let secs = prev.map(|(d, _)| d.as_secs_f64()).filter(|d| *d > 0.0);
    let old = prev.map(|(_, p)| p);
    out.push(format!(
        "llrouter top — {} — {} — {src}",
        cur.strategy.map_or("-", |s| s.name()),
        match secs {
            Some(d) => format!("rates over {d:.1} s"),
            None => "first sample: totals".into(),
        }
    ));
    out.push(String::new());
    out.push(format!(
        "{:<10} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "class", "ring", "pkt/s", "Mbit/s", "drop/s", "p50", "p90", "p99", "bhit/s"
    ));
    for r in &cur.rings {
        let o = old.and_then(|p| {
            p.rings
                .iter()
                .find(|x| (x.worker, x.device, x.ring) == (r.worker, r.device, r.ring))
        });
        let hist = match (o, secs) {
            (Some(o), Some(_)) => r.latency.since(&o.latency),
            _ => r.latency.clone(),
        };
        out.push(format!(
            "{:<10} {:>4} {:>8} {:>8.2} {:>8} {:>8} {:>8} {:>8} {:>8}",
            clip(&r.class, 10),
            r.ring,
            fmt_rate(per_s(r.packets, o.map(|o| o.packets), secs)),
            per_s(r.bytes, o.map(|o| o.bytes), secs) * 8.0 / 1e6,
            fmt_rate(per_s(r.drops, o.map(|o| o.drops), secs)),
            fmt_lat(hist.quantile_bound(0.5)),
            fmt_lat(hist.quantile_bound(0.9)),
            fmt_lat(hist.quantile_bound(0.99)),
            fmt_rate(per_s(r.budget_hits, o.map(|o| o.budget_hits), secs)),
        ));
    }
    if !cur.interfaces.is_empty() {
        out.push(String::new());
        out.push(format!(
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "interface", "rx/s", "tx/s", "kernel/s", "drop/s", "err/s"
        ));
        for i in &cur.interfaces {
            let o = old.and_then(|p| p.interfaces.iter().find(|x| x.ifindex == i.ifindex));
            let r = |c: u64, f: fn(&crate::metrics::InterfaceMetrics) -> u64| {
                fmt_rate(per_s(c, o.map(f), secs))
            };
            out.push(format!(
                "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9}",
                clip(&i.interface, 16),
                r(i.rx_packets, |x| x.rx_packets),
                r(i.tx_packets, |x| x.tx_packets),
                r(i.kernel_pass_packets, |x| x.kernel_pass_packets),
                r(i.dropped_packets, |x| x.dropped_packets),
                r(i.errors, |x| x.errors),
            ));
        }
    }
    out.push(String::new());
    out.push(format!(
        "{:<6} {:>4} {:>6} {:>10}   {:<10} {:>9} {:>9} {:>9}",
        "worker", "core", "busy", "rounds/s", "engine dev", "wakeup/s", "rearm/s", "exhaust/s"
    ));
    let n = cur.workers.len().max(cur.devices.len());
    for k in 0..n {
        let w = cur.workers.get(k).map(|w| {
            let o = old.and_then(|p| p.workers.iter().find(|x| x.worker == w.worker));
            format!(
                "{:<6} {:>4} {:>5.1}% {:>10}",
                w.worker,
                w.core,
                w.busy_ratio * 100.0,
                fmt_rate(per_s(w.poll_rounds, o.map(|o| o.poll_rounds), secs))
            )
        });
        let d = cur.devices.get(k).map(|d| {
            let o = old.and_then(|p| {
                p.devices
                    .iter()
                    .find(|x| x.worker == d.worker && x.device == d.device)
            });
            format!(
                "{:<10} {:>9} {:>9} {:>9}",
                format!("{}/{}", d.worker, d.device),
                fmt_rate(per_s(d.wakeups, o.map(|o| o.wakeups), secs)),
                fmt_rate(per_s(d.rearms, o.map(|o| o.rearms), secs)),
                fmt_rate(per_s(
                    d.budget_exhaustions,
                    o.map(|o| o.budget_exhaustions),
                    secs
                )),
            )
        });
        out.push(format!(
            "{:<30}   {}",
            w.unwrap_or_default(),
            d.unwrap_or_default()
        ));
    }
    if !cur.flows.is_empty() {
        out.push(String::new());
        out.push(format!(
            "{:<24} {:>6} {:>9} {:>9} {:>9} {:>9} {:>6}",
            "flow", "cpu", "pkt/s", "qdrop/s", "edrop/s", "preempt/s", "queue"
        ));
        // The busiest flows first (by CPU over the interval, or in total on the first sample);
        // at most TOP_FLOWS of them, so thousands of flows do not scroll the rest away.
        let mut rows: Vec<(f64, String)> = cur
            .flows
            .iter()
            .map(|f| {
                let o = old.and_then(|p| p.flows.iter().find(|x| x.flow == f.flow));
                let cpu = match (o, secs) {
                    (Some(o), Some(d)) => (f.cpu_seconds - o.cpu_seconds).max(0.0) / d,
                    _ => f.cpu_seconds,
                };
                let r = |c: u64, g: fn(&crate::metrics::FlowMetrics) -> u64| {
                    fmt_rate(per_s(c, o.map(g), secs))
                };
                let cpu_text = match secs {
                    Some(_) => format!("{:.1}%", cpu * 100.0),
                    None => format!("{cpu:.2}s"),
                };
                let line = format!(
                    "{:<24} {:>6} {:>9} {:>9} {:>9} {:>9} {:>6}",
                    clip(&f.flow, 24),
                    cpu_text,
                    r(f.packets, |x| x.packets),
                    r(f.queue_drops, |x| x.queue_drops),
                    r(f.element_drops, |x| x.element_drops),
                    r(f.preemptions, |x| x.preemptions),
                    f.queue_len,
                );
                (cpu, line)
            })
            .collect();
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let more = rows.len().saturating_sub(TOP_FLOWS);
        out.extend(rows.into_iter().take(TOP_FLOWS).map(|(_, l)| l));
        if more > 0 {
            out.push(format!("… {more} more flows (llrouter ctl flow list)"));
        }
    }
    // Only the reasons that counted something: most of them are zero most of the time.
    for (title, list, before) in [
        ("dropped", &cur.drops, old.map(|p| &p.drops)),
        ("to kernel", &cur.kernel_pass, old.map(|p| &p.kernel_pass)),
    ] {
        let items: Vec<String> = list
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(reason, n)| {
                let o = before.and_then(|b| b.iter().find(|(r, _)| r == reason).map(|(_, v)| *v));
                match secs {
                    Some(_) => format!("{reason} {}/s", fmt_rate(per_s(*n, o.or(Some(0)), secs))),
                    None => format!("{reason} {n}"),
                }
            })
            .collect();
        if items.is_empty() {
            continue;
        }
        out.push(String::new());
        wrap(&mut out, &format!("{title}:"), &items);
    }
    for l in &mut out {
        *l = clip(l, WIDTH);
    }
    out
}

/// Flows shown at most.
const TOP_FLOWS: usize = 10;

/// `s` cut to `n` characters (the last one `…` when cut).
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.trim_end().to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// `title item, item, …` over as many lines of [`WIDTH`] as needed.
fn wrap(out: &mut Vec<String>, title: &str, items: &[String]) {
    let mut line = title.to_string();
    for (k, it) in items.iter().enumerate() {
        let sep = if k + 1 < items.len() { "," } else { "" };
        if line.chars().count() + 1 + it.chars().count() + sep.len() > WIDTH {
            out.push(line);
            line = " ".repeat(2);
        }
        line.push(' ');
        line.push_str(it);
        line.push_str(sep);
    }
    out.push(line);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{DeviceMetrics, Histogram, RingMetrics, WorkerMetrics};
    use std::time::Duration;

    fn snap(k: u64) -> MetricsSnapshot {
        let mut lat = Histogram::new(vec![10e-6, 100e-6, 1e-3]);
        for _ in 0..k * 10 {
            lat.observe(5e-6);
        }
        for _ in 0..k {
            lat.observe(50e-6);
        }
        MetricsSnapshot {
            strategy: Some(llr_core::sched::StrategyKind::LlWfq),
            rings: vec![RingMetrics {
                class: "rt".into(),
                packets: 1000 * k,
                bytes: 125_000 * k,
                drops: 10 * k,
                latency: lat,
                ..Default::default()
            }],
            devices: vec![DeviceMetrics {
                wakeups: 50 * k,
                ..Default::default()
            }],
            workers: vec![WorkerMetrics {
                core: 1,
                poll_rounds: 7 * k,
                busy_ratio: 0.5,
                ..Default::default()
            }],
            drops: vec![("no_route".into(), k)],
            ..Default::default()
        }
    }

    #[test]
    fn frame_shows_rates_and_percentiles() {
        let (a, b) = (snap(1), snap(3));
        let f = render(&b, Some((Duration::from_secs(2), &a)), "x").join("\n");
        // 2000 packets over 2 s = 1000 pkt/s; 250000 B / 2 s = 1 Mbit/s; 20 drops / 2 s = 10/s
        let line = f.lines().find(|l| l.starts_with("rt")).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[2], "1.0k", "{line}");
        assert_eq!(cols[3], "1.00");
        assert_eq!(cols[4], "10");
        assert_eq!(cols[5], "≤10µs"); // p50
        assert_eq!(cols[7], "≤100µs"); // p99: 2 of 22 in the interval are 50 µs
        assert!(f.contains("50.0%"));
        let first = render(&a, None, "x").join("\n");
        assert!(first.contains("first sample: totals"));
    }

    #[test]
    fn flows_busiest_first_and_bounded() {
        let with_flows = |k: u64| {
            let mut s = snap(k);
            s.flows = (0..15u64)
                .map(|i| crate::metrics::FlowMetrics {
                    flow: format!("flow{i}"),
                    // flow7 uses the most CPU: 0.25 s per step of k
                    cpu_seconds: k as f64 * if i == 7 { 0.25 } else { 0.01 },
                    packets: 100 * k,
                    queue_drops: if i == 7 { 4 * k } else { 0 },
                    ..Default::default()
                })
                .collect();
            s
        };
        let f = render(
            &with_flows(3),
            Some((Duration::from_secs(2), &with_flows(1))),
            "x",
        );
        let at = f.iter().position(|l| l.starts_with("flow ")).unwrap();
        let first: Vec<&str> = f[at + 1].split_whitespace().collect();
        // 0.5 s of CPU over 2 s; 200 packets / 2 s; 8 queue drops / 2 s
        assert_eq!(first[..4], ["flow7", "25.0%", "100", "4"], "{f:?}");
        assert_eq!(f.iter().filter(|l| l.starts_with("flow")).count(), 1 + 10);
        assert!(f.iter().any(|l| l.contains("5 more flows")), "{f:?}");
    }

    /// A router with many reasons, most of them zero, long names and big numbers.
    fn busy_snap(k: u64) -> MetricsSnapshot {
        let mut s = snap(k);
        s.drops = (0..23)
            .map(|i| (format!("reason_number_{i}"), if i == 5 { 7 * k } else { 0 }))
            .collect();
        s.kernel_pass = vec![("multicast".into(), 3 * k), ("local".into(), 0)];
        s.rings.push(RingMetrics {
            class: "a-very-long-class-name".into(),
            ring: 1,
            packets: u64::MAX / 4 * k.min(2),
            bytes: u64::MAX / 2,
            ..Default::default()
        });
        s.interfaces = vec![crate::metrics::InterfaceMetrics {
            interface: "an-interface-with-a-long-name".into(),
            ifindex: 7,
            rx_packets: 1_000_000 * k,
            tx_packets: 999_000 * k,
            dropped_packets: 5 * k,
            ..Default::default()
        }];
        s
    }

    #[test]
    fn fits_80_columns_and_hides_zero_counters() {
        let (a, b) = (busy_snap(1), busy_snap(2));
        let long_src = "/run/llrouter/a-socket-path-that-is-much-longer-than-the-terminal.sock";
        for f in [
            render(&b, Some((Duration::from_secs(1), &a)), long_src),
            render(&a, None, long_src),
        ] {
            for l in &f {
                assert!(
                    l.chars().count() <= WIDTH,
                    "{} chars: {l:?}",
                    l.chars().count()
                );
            }
            let text = f.join("\n");
            assert!(text.contains("reason_number_5"), "{text}");
            assert!(
                !text.contains("reason_number_4"),
                "zero reasons hidden: {text}"
            );
            assert!(text.contains("multicast") && !text.contains("local"));
            assert!(text.contains("an-interface-wi"), "interfaces shown: {text}");
            // the class table comes first, within a 24-line screen
            let rt = f.iter().position(|l| l.starts_with("rt ")).unwrap();
            assert!(rt < 24);
        }
        let f = render(&b, Some((Duration::from_secs(1), &a)), "x");
        let line = f.iter().find(|l| l.starts_with("an-interface")).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[1], "1.00M", "rx rate: {line}");
        assert_eq!(cols[4], "5", "drop rate: {line}");
    }
}
