//! The simulator's results as JSON and as text tables.

use crate::cli_util::{table, us};
use llr_sim::sweep::{offered_load, Capacity, SweepPoint};
use llr_sim::sweep_args::SweepParam;
use llr_sim::{SimConfig, SimResult, Steering};
use serde_json::{json, Map, Value};

/// The JSON object of one result, in the documented shape.
pub fn result_json(r: &SimResult, events_per_sec: Option<f64>) -> Value {
    let mut classes = Map::new();
    for c in &r.classes {
        classes.insert(
            c.name.clone(),
            serde_json::to_value(c).expect("serialisable"),
        );
    }
    let mut v = json!({
        "classes": classes,
        "utilization": r.utilization,
        "offered_load": offered_load(r, r.core_utilization.len()),
        "core_utilization": r.core_utilization,
        "wakeups_per_sec": r.wakeups_per_sec,
        "offered_pps": r.offered_pps,
        "service_ns": r.service_ns,
        "sim_time_ns": r.sim_time_ns,
        "budget_exhaustions": r.budget_exhaustions,
        "steering": r.steering,
        "per_core": r.per_core,
    });
    if let Some(e) = events_per_sec {
        v["events_per_sec"] = json!(e);
    }
    v
}

/// Per-class table of a result.
pub fn result_table(r: &SimResult) -> String {
    let rows: Vec<Vec<String>> = r
        .classes
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                c.sent.to_string(),
                c.delivered.to_string(),
                c.dropped.to_string(),
                format!(
                    "{:.2}",
                    if c.sent == 0 {
                        0.0
                    } else {
                        100.0 * c.dropped as f64 / c.sent as f64
                    }
                ),
                us(c.mean_ns),
                us(c.p50_ns as f64),
                us(c.p99_ns as f64),
                us(c.p999_ns as f64),
                us(c.max_ns as f64),
            ]
        })
        .collect();
    table(
        &[
            "class",
            "sent",
            "delivered",
            "dropped",
            "loss%",
            "mean µs",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
        ],
        &rows,
    )
}

/// Per-core table of a multi-core result: the hardware queues each core serves, its share of
/// the offered packets (against the flow hash's expectation) and its loss per class.
pub fn core_table(cfg: &SimConfig, r: &SimResult) -> String {
    let names: Vec<&str> = r.classes.iter().map(|c| c.name.as_str()).collect();
    let n = names.len();
    let total: u64 = r.classes.iter().map(|c| c.sent).sum();
    let expected = llr_sim::core_shares(cfg);
    let rows: Vec<Vec<String>> = r
        .per_core
        .iter()
        .map(|pc| {
            let queues: Vec<String> = match r.steering {
                Steering::Rss => vec![pc.core.to_string()],
                Steering::Class => (0..n)
                    .map(|c| format!("{}={}", r.steering.queue(pc.core, c, n), names[c]))
                    .collect(),
            };
            let sent: u64 = pc.sent.iter().sum();
            let mut row = vec![
                pc.core.to_string(),
                queues.join(" "),
                format!("{:.1}", 100.0 * sent as f64 / total.max(1) as f64),
                format!("{:.1}", 100.0 * expected[pc.core]),
                format!("{:.3}", r.core_utilization[pc.core]),
            ];
            for c in 0..n {
                row.push(format!(
                    "{:.2}",
                    100.0 * pc.dropped[c] as f64 / pc.sent[c].max(1) as f64
                ));
            }
            row
        })
        .collect();
    let loss_cols: Vec<String> = names.iter().map(|c| format!("{c} loss%")).collect();
    let mut header = vec!["core", "hw queue(s)", "share%", "hash share%", "busy"];
    header.extend(loss_cols.iter().map(String::as_str));
    table(&header, &rows)
}

/// `--param cores`: per strategy and core count, what was offered and delivered, loss, the
/// highest class's latency, the flow hash's imbalance and, with `--capacity`, the loss-free
/// capacity. Speedups are against the smallest core count of the same strategy.
pub(super) fn scaling_table(
    jobs: &[SweepPoint],
    results: &[SimResult],
    caps: Option<&[Capacity]>,
) -> String {
    let Some(first) = results.first() else {
        return String::new();
    };
    let top = first.classes[0].name.clone();
    let mpps = |v: f64| format!("{:.3}", v / 1e6);
    let delivered = |r: &SimResult| {
        r.classes.iter().map(|c| c.delivered).sum::<u64>() as f64 * 1e9 / r.sim_time_ns
    };
    // The smallest core count of each strategy is its reference.
    let base = |i: usize| -> usize {
        let st = jobs[i].strategy;
        (0..jobs.len())
            .filter(|&j| jobs[j].strategy == st)
            .min_by_key(|&j| jobs[j].config.cores)
            .unwrap_or(i)
    };
    let mut rows = Vec::new();
    for (i, (p, r)) in jobs.iter().zip(results).enumerate() {
        let b = base(i);
        let sent: u64 = r.classes.iter().map(|c| c.sent).sum();
        let dropped: u64 = r.classes.iter().map(|c| c.dropped).sum();
        let busiest = (r.per_core.iter())
            .map(|pc| pc.sent.iter().sum::<u64>())
            .max()
            .unwrap_or(0);
        let t = &r.classes[0];
        let mut row = vec![
            p.strategy.name().to_string(),
            p.config.cores.to_string(),
            mpps(r.offered_pps),
            mpps(delivered(r)),
            format!("{:.2}", delivered(r) / delivered(&results[b])),
            format!("{:.2}", 100.0 * dropped as f64 / sent.max(1) as f64),
            format!("{:.2}", 100.0 * t.dropped as f64 / t.sent.max(1) as f64),
            us(t.p99_ns as f64),
            format!(
                "{:.2}",
                busiest as f64 * p.config.cores as f64 / sent.max(1) as f64
            ),
            format!("{:.3}", llr_sim::hash_bound(&p.config)),
        ];
        if let Some(c) = caps {
            row.push(format!(
                "{:.3}{}",
                c[i].utilization,
                if c[i].at_least { "+" } else { "" }
            ));
            row.push(mpps(c[i].delivered_pps));
            row.push(format!(
                "{:.2}",
                c[i].delivered_pps / c[b].delivered_pps.max(1.0)
            ));
        }
        rows.push(row);
    }
    let (loss_h, p99_h) = (format!("{top} loss%"), format!("{top} p99 µs"));
    let mut header = vec![
        "strategy",
        "cores",
        "offered Mpps",
        "delivered Mpps",
        "speedup",
        "loss%",
        loss_h.as_str(),
        p99_h.as_str(),
        "busiest/fair",
        "hash bound",
    ];
    if caps.is_some() {
        header.extend(["capacity load", "capacity Mpps", "capacity speedup"]);
    }
    table(&header, &rows)
}

/// `--capacity` for a parameter other than cores: the capacity of every point.
pub(super) fn capacity_table(param: SweepParam, jobs: &[SweepPoint], caps: &[Capacity]) -> String {
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .zip(caps)
        .map(|(p, c)| {
            vec![
                p.strategy.name().to_string(),
                format!("{}", p.value),
                format!("{:.3}{}", c.utilization, if c.at_least { "+" } else { "" }),
                format!("{:.3}", c.delivered_pps / 1e6),
                format!("{:.3}", c.hash_bound),
            ]
        })
        .collect();
    table(
        &[
            "strategy",
            param.name(),
            "capacity load",
            "capacity Mpps",
            "hash bound",
        ],
        &rows,
    )
}
