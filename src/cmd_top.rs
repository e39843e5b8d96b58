//! `llrouter top`: a live terminal view of a running router, polling `ctl counters`.

use anyhow::{bail, Context, Result};
use clap::Args as ClapArgs;
use llr_ops::ctl::{Command, CtlClient, DEFAULT_SOCKET};
use llr_ops::metrics::MetricsSnapshot;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Live view of a running router: per-class packet and drop rates, ring-latency percentiles,
/// wake-ups, budget exhaustions and worker load, refreshed every INTERVAL.
///
/// Polls the control socket (`ctl counters`). Stops after --count refreshes or on Ctrl-C.
/// Latency percentiles are bucket upper bounds of the interval's ring-latency histogram.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Control socket of the router.
    #[arg(long, short = 's', default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many refreshes (default: until Ctrl-C).
    #[arg(long)]
    pub count: Option<u64>,
    /// Print screens one after another instead of redrawing (for logs and pipes).
    #[arg(long)]
    pub plain: bool,
}

pub fn run(args: Args) -> Result<()> {
    if !(args.interval.is_finite() && args.interval >= 0.05) {
        bail!("--interval: must be at least 0.05 s");
    }
    let interval = Duration::from_secs_f64(args.interval);
    let timeout = interval.max(Duration::from_secs(2));
    let mut client: Option<CtlClient> = None;
    let mut prev: Option<(Instant, MetricsSnapshot)> = None;
    let mut shown = 0u64;
    let mut stdout = std::io::stdout();
    loop {
        let started = Instant::now();
        // (re)connect lazily: the server closes idle connections, and the router may restart
        let snap = (|| -> Result<MetricsSnapshot> {
            if client.is_none() {
                client = Some(CtlClient::connect(&args.socket, timeout)?);
            }
            let reply = client
                .as_mut()
                .expect("connected above")
                .call(&Command::Counters {});
            let reply = match reply {
                Ok(r) => r,
                Err(e) => {
                    client = None;
                    return Err(e.into());
                }
            };
            let v = reply
                .into_result()
                .map_err(|e| anyhow::anyhow!("counters rejected: {e}"))?;
            serde_json::from_value(v).context("counters reply is not a metrics snapshot")
        })();
        let now = Instant::now();
        let screen = match &snap {
            Ok(s) => render(
                s,
                prev.as_ref().map(|(t, p)| (now.duration_since(*t), p)),
                &args.socket.display().to_string(),
            ),
            Err(e) => format!("llrouter top — {}: {e:#}\n", args.socket.display()),
        };
        if args.plain {
            let _ = writeln!(stdout, "{screen}");
        } else {
            // home + clear screen, then the frame
            let _ = write!(stdout, "\x1b[H\x1b[2J{screen}");
        }
        let _ = stdout.flush();
        if let Ok(s) = snap {
            prev = Some((now, s));
        }
        shown += 1;
        if args.count.is_some_and(|c| shown >= c) {
            break;
        }
        std::thread::sleep(interval.saturating_sub(started.elapsed()));
    }
    Ok(())
}

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
    match v {
        None => "-".into(),
        Some(x) if x.is_infinite() => ">max".into(),
        Some(x) if x < 1e-3 => format!("≤{:.0}µs", x * 1e6),
        Some(x) => format!("≤{:.1}ms", x * 1e3),
    }
}

/// One frame: rates over `prev` (elapsed, snapshot) when given, totals otherwise.
pub fn render(
    cur: &MetricsSnapshot,
    prev: Option<(Duration, &MetricsSnapshot)>,
    src: &str,
) -> String {
    let mut s = String::new();
    let secs = prev.map(|(d, _)| d.as_secs_f64()).filter(|d| *d > 0.0);
    let _ = writeln!(
        s,
        "llrouter top — {src} — strategy {} — {}",
        cur.strategy,
        match secs {
            Some(d) => format!("rates over {d:.1} s"),
            None => "first sample: totals".into(),
        }
    );
    let _ = writeln!(
        s,
        "\n{:<10} {:>3} {:>4} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "class", "wrk", "ring", "pkt/s", "Mbit/s", "drop/s", "p50", "p90", "p99", "budgethit"
    );
    let key = |w: u32, d: u32, r: u32| (w, d, r);
    let old: HashMap<_, _> = prev
        .map(|(_, p)| {
            p.rings
                .iter()
                .map(|r| (key(r.worker, r.device, r.ring), r))
                .collect()
        })
        .unwrap_or_default();
    for r in &cur.rings {
        let o = old.get(&key(r.worker, r.device, r.ring));
        let (pk, by, dr, bh, hist) = match (o, secs) {
            (Some(o), Some(d)) => (
                r.packets.saturating_sub(o.packets) as f64 / d,
                r.bytes.saturating_sub(o.bytes) as f64 / d,
                r.drops.saturating_sub(o.drops) as f64 / d,
                r.budget_hits.saturating_sub(o.budget_hits) as f64 / d,
                r.latency.since(&o.latency),
            ),
            _ => (
                r.packets as f64,
                r.bytes as f64,
                r.drops as f64,
                r.budget_hits as f64,
                r.latency.clone(),
            ),
        };
        let _ = writeln!(
            s,
            "{:<10} {:>3} {:>4} {:>10} {:>10.2} {:>10} {:>9} {:>9} {:>9} {:>9}",
            r.class,
            r.worker,
            r.ring,
            fmt_rate(pk),
            by * 8.0 / 1e6,
            fmt_rate(dr),
            fmt_lat(hist.quantile_bound(0.5)),
            fmt_lat(hist.quantile_bound(0.9)),
            fmt_lat(hist.quantile_bound(0.99)),
            fmt_rate(bh)
        );
    }
    let _ = writeln!(
        s,
        "\n{:<8} {:>6} {:>10} {:>10} {:>12}",
        "device", "worker", "wakeup/s", "rearm/s", "exhaust/s"
    );
    for d in &cur.devices {
        let o = prev.and_then(|(_, p)| {
            p.devices
                .iter()
                .find(|x| x.worker == d.worker && x.device == d.device)
        });
        let rate = |c: u64, f: fn(&llr_ops::metrics::DeviceMetrics) -> u64| match (o, secs) {
            (Some(o), Some(t)) => fmt_rate(c.saturating_sub(f(o)) as f64 / t),
            _ => c.to_string(),
        };
        let _ = writeln!(
            s,
            "{:<8} {:>6} {:>10} {:>10} {:>12}",
            d.device,
            d.worker,
            rate(d.wakeups, |x| x.wakeups),
            rate(d.rearms, |x| x.rearms),
            rate(d.budget_exhaustions, |x| x.budget_exhaustions)
        );
    }
    let _ = writeln!(
        s,
        "\n{:<8} {:>5} {:>7} {:>12}",
        "worker", "core", "busy", "rounds/s"
    );
    for w in &cur.workers {
        let o = prev.and_then(|(_, p)| p.workers.iter().find(|x| x.worker == w.worker));
        let rounds = match (o, secs) {
            (Some(o), Some(t)) => fmt_rate(w.poll_rounds.saturating_sub(o.poll_rounds) as f64 / t),
            _ => w.poll_rounds.to_string(),
        };
        let _ = writeln!(
            s,
            "{:<8} {:>5} {:>6.1}% {:>12}",
            w.worker,
            w.core,
            w.busy_ratio * 100.0,
            rounds
        );
    }
    if !cur.drops.is_empty() {
        let _ = writeln!(s, "\ndrops by reason (total):");
        for (reason, n) in &cur.drops {
            let _ = writeln!(s, "  {reason:<20} {n}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use llr_ops::ctl::{CtlError, CtlServer};
    use llr_ops::metrics::{DeviceMetrics, Histogram, RingMetrics, WorkerMetrics};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    fn snap(k: u64) -> MetricsSnapshot {
        let mut lat = Histogram::new(vec![10e-6, 100e-6, 1e-3]);
        for _ in 0..k * 10 {
            lat.observe(5e-6);
        }
        for _ in 0..k {
            lat.observe(50e-6);
        }
        MetricsSnapshot {
            strategy: "ll-wfq".into(),
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
            classes: vec![],
        }
    }

    #[test]
    fn frame_shows_rates_and_percentiles() {
        let (a, b) = (snap(1), snap(3));
        let f = render(&b, Some((Duration::from_secs(2), &a)), "x");
        // 2000 packets over 2 s = 1000 pkt/s; 250000 B / 2 s = 1 Mbit/s; 20 drops / 2 s = 10/s
        let line = f.lines().find(|l| l.starts_with("rt")).unwrap();
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cols[3], "1.0k", "{line}");
        assert_eq!(cols[4], "1.00");
        assert_eq!(cols[5], "10");
        assert_eq!(cols[6], "≤10µs"); // p50
        assert_eq!(cols[8], "≤100µs"); // p99: 2 of 22 in the interval are 50 µs
        assert!(f.contains("50.0%"));
        let first = render(&a, None, "x");
        assert!(first.contains("first sample: totals"));
    }

    #[test]
    fn polls_a_server_count_times() {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "llr-top-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let calls = Arc::new(AtomicU64::new(0));
        let c2 = calls.clone();
        let target = Arc::new(move |cmd: Command| -> Result<serde_json::Value, CtlError> {
            match cmd {
                Command::Counters {} => {
                    let k = c2.fetch_add(1, Ordering::SeqCst) + 1;
                    Ok(serde_json::to_value(snap(k)).unwrap())
                }
                _ => Err(CtlError::new("cmd", "unsupported")),
            }
        });
        let srv = CtlServer::bind(&path, target).unwrap();
        run(Args {
            socket: path.clone(),
            interval: 0.05,
            count: Some(3),
            plain: true,
        })
        .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
