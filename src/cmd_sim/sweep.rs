//! `llrouter sim sweep`: runs the points llr_sim builds, writes results.csv, capacity.csv and
//! the plots, and prints the summary.

use super::tables::{capacity_table, scaling_table};
use super::{sim_error, SweepArgs, SweepParam};
use crate::cli_util::{to_usage, usage};
use indicatif::{ProgressBar, ProgressStyle};
use llr_core::sched::StrategyKind;
use llr_lab::plot;
use llr_sim::sweep::{Capacity, SweepPoint, SweepRow, CAPACITY_STEPS};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

pub(super) fn sweep(s: SweepArgs) -> anyhow::Result<()> {
    let jobs = s.points().map_err(to_usage)?;
    let strategies = s.strategies.clone();
    std::fs::create_dir_all(&s.out)
        .map_err(|e| usage("out", format!("cannot create {}: {e}", s.out.display())))?;
    let pb = progress_bar(&s, jobs.len(), "sweep {param}");
    pb.set_message(s.param.name());
    let t0 = Instant::now();
    let (results, threads) =
        llr_sim::sweep::run(&jobs, s.jobs.unwrap_or(0), || pb.inc(1)).map_err(sim_error)?;
    pb.finish_and_clear();
    let elapsed = t0.elapsed();
    let rows = llr_sim::sweep::rows(s.param.name(), &jobs, &results);
    let csv = s.out.join("results.csv");
    llr_sim::sweep::write_csv(&csv, &rows)
        .map_err(|e| anyhow::anyhow!("write {}: {e}", csv.display()))?;
    let total_packets: u64 = jobs.iter().map(|p| p.config.packets).sum();
    let say = |line: String| {
        // With --json, stdout carries only the JSON document.
        if s.base.json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    say(format!(
        "{} runs, {} simulated packets in {:.1} s ({:.1} M packets/s over {} threads)",
        jobs.len(),
        total_packets,
        elapsed.as_secs_f64(),
        total_packets as f64 / elapsed.as_secs_f64() / 1e6,
        threads
    ));
    say(format!("wrote {}", csv.display()));
    let classes: Vec<String> = results
        .first()
        .map(|r| r.classes.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    for (name, title, path) in sweep_plots(s.param, &s.out) {
        match plot::line_chart(
            &path,
            &title,
            s.param.axis_label(),
            name,
            &series_of(&rows, &strategies, &classes, name),
            name != LOSS && name != DELIVERED,
        ) {
            Ok(()) => say(format!("wrote {}", path.display())),
            Err(e) => eprintln!("warning: plot {} skipped: {e}", path.display()),
        }
    }
    let caps = if s.capacity {
        Some(capacity(&s, &jobs, &say)?)
    } else {
        None
    };
    if !s.base.json {
        if s.param == SweepParam::Cores {
            print!("{}", scaling_table(&jobs, &results, caps.as_deref()));
        } else if let Some(c) = &caps {
            print!("{}", capacity_table(s.param, &jobs, c));
        }
    }
    if s.base.json {
        let mut doc = json!({ "param": s.param.name(), "rows": rows });
        if let Some(c) = &caps {
            doc["capacity"] = json!(llr_sim::sweep::capacity_rows(
                s.param.name(),
                &jobs,
                c,
                s.loss_tolerance / 100.0
            ));
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(())
}

/// `--capacity`: every point's loss-free capacity, `capacity.csv` and its plot.
fn capacity(
    s: &SweepArgs,
    jobs: &[SweepPoint],
    say: &dyn Fn(String),
) -> anyhow::Result<Vec<Capacity>> {
    let tol = s.loss_tolerance / 100.0;
    let pb = progress_bar(s, jobs.len(), "capacity");
    let t0 = Instant::now();
    let caps =
        llr_sim::sweep::capacities(jobs, tol, CAPACITY_STEPS, s.jobs.unwrap_or(0), || pb.inc(1))
            .map_err(sim_error)?;
    pb.finish_and_clear();
    let runs: u32 = caps.iter().map(|c| c.runs).sum();
    say(format!(
        "capacity: {} bisections ({runs} runs, loss ≤ {} %) in {:.1} s",
        caps.len(),
        s.loss_tolerance,
        t0.elapsed().as_secs_f64()
    ));
    let rows = llr_sim::sweep::capacity_rows(s.param.name(), jobs, &caps, tol);
    let csv = s.out.join("capacity.csv");
    llr_sim::sweep::write_capacity_csv(&csv, &rows)
        .map_err(|e| anyhow::anyhow!("write {}: {e}", csv.display()))?;
    say(format!("wrote {}", csv.display()));
    let series: Vec<plot::Series> = s
        .strategies
        .iter()
        .map(|st| plot::Series {
            label: st.name().to_string(),
            points: (jobs.iter().zip(&caps))
                .filter(|(p, _)| p.strategy == *st)
                .map(|(p, c)| (p.value, c.delivered_pps / 1e6))
                .collect(),
            group: st.name().to_string(),
            class: 0,
        })
        .collect();
    let path = s.out.join(format!("capacity_vs_{}.png", s.param.name()));
    let title = format!(
        "loss-free capacity (loss ≤ {} %) vs {}",
        s.loss_tolerance,
        s.param.axis_label()
    );
    match plot::line_chart(
        &path,
        &title,
        s.param.axis_label(),
        "delivered at capacity (Mpps)",
        &series,
        false,
    ) {
        Ok(()) => say(format!("wrote {}", path.display())),
        Err(e) => eprintln!("warning: plot {} skipped: {e}", path.display()),
    }
    Ok(caps)
}

/// y-axis label of the loss plot.
const LOSS: &str = "loss (% of offered)";
/// y-axis label of the delivered-rate plot (cores sweeps).
const DELIVERED: &str = "delivered (Mpps)";

/// The sweep's charts: (y-axis label, title, file), latency beside loss.
fn sweep_plots(param: SweepParam, out: &std::path::Path) -> Vec<(&'static str, String, PathBuf)> {
    let x = param.axis_label();
    let mut charts = vec![
        ("mean latency (µs)", "mean"),
        ("p99 latency (µs)", "p99"),
        (LOSS, "loss"),
    ];
    if param == SweepParam::Cores {
        charts.push((DELIVERED, "delivered"));
    }
    charts
        .into_iter()
        .map(|(label, file)| {
            let path = if file == "loss" || file == "delivered" {
                out.join(format!("{file}_vs_{}.png", param.name()))
            } else {
                out.join(format!("latency_{file}_vs_{}.png", param.name()))
            };
            (label, format!("{label} vs {x}"), path)
        })
        .collect()
}

/// One line per strategy and class of the metric named by `ylabel`. Latency lines leave out
/// points where nothing was delivered; loss lines keep every point.
fn series_of(
    rows: &[SweepRow],
    strategies: &[StrategyKind],
    classes: &[String],
    ylabel: &str,
) -> Vec<plot::Series> {
    let mut series = Vec::new();
    for st in strategies {
        for (ci, class) in classes.iter().enumerate() {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.strategy == *st && &r.class == class)
                .filter(|r| ylabel == LOSS || ylabel == DELIVERED || r.delivered > 0)
                .map(|r| {
                    let y = match ylabel {
                        LOSS => 100.0 * r.dropped as f64 / r.sent.max(1) as f64,
                        DELIVERED => r.delivered_pps / 1e6,
                        "mean latency (µs)" => r.mean_ns / 1000.0,
                        _ => r.p99_ns as f64 / 1000.0,
                    };
                    (r.value, y)
                })
                .collect();
            series.push(plot::Series {
                label: format!("{st} {class}"),
                points,
                group: st.name().to_string(),
                class: ci,
            });
        }
    }
    series
}

/// The progress bar of a sweep over `n` jobs (hidden with `--quiet` or `--json`).
fn progress_bar(s: &SweepArgs, n: usize, what: &str) -> ProgressBar {
    let pb = if s.quiet || s.base.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(n as u64)
    };
    pb.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {what} [{{bar:30}}] {{pos}}/{{len}} ({{elapsed}}, eta {{eta}})"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    pb
}
