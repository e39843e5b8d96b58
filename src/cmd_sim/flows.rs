//! `llrouter sim flows`: flow pipelines on simulated traffic, and the quantum sweep.

use crate::cli_util::{table, us, usage};
use clap::Args;
use llr_core::values::Values;
use serde_json::{json, Value};
use std::path::PathBuf;

/// `llrouter sim flows`.
#[derive(Args, Debug, Clone)]
pub struct FlowsArgs {
    /// The simulation: classes, [flow-scheduler], [[flows]], [[acls]], [[traffic]], [cost]
    /// (examples/flows/, docs/flows.md).
    #[arg(long)]
    pub config: PathBuf,
    /// Rerun with every flow's quantum qᵢ (and the default) set to each of these values, in µs,
    /// and print latency, throughput and context switches against qᵢ: 1,5,10,20,50.
    #[arg(long)]
    pub quantum_us: Option<Values>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn flows(a: FlowsArgs) -> anyhow::Result<()> {
    use llr_sim::flows::{run, FlowSimConfig};
    let path = a.config.display().to_string();
    let bad = |e: llr_core::error::FieldError| usage("config", format!("{path}: {e}"));
    let text =
        std::fs::read_to_string(&a.config).map_err(|e| usage("config", format!("{path}: {e}")))?;
    let cfg = FlowSimConfig::from_toml(&text).map_err(bad)?;
    let Some(list) = &a.quantum_us else {
        let r = run(&cfg).map_err(bad)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print!("{}", flows_report(&r));
        }
        return Ok(());
    };
    let qs = list.0.clone();
    // Check each value as the config would, naming the flag rather than the file.
    for &q in &qs {
        cfg.with_quantum_us(q)
            .flow_scheduler
            .defaults()
            .map_err(|e| usage("quantum-us", e.reason))?;
    }
    let results: Vec<llr_sim::flows::FlowSimResult> = {
        use rayon::prelude::*;
        qs.par_iter()
            .map(|&q| run(&cfg.with_quantum_us(q)))
            .collect::<Result<_, _>>()
            .map_err(bad)?
    };
    if a.json {
        let rows: Vec<Value> = qs
            .iter()
            .zip(&results)
            .map(|(q, r)| json!({ "quantum_us": q, "result": r }))
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", quantum_table(&qs, &results));
    }
    Ok(())
}

/// One run: per-flow table and totals.
pub fn flows_report(r: &llr_sim::flows::FlowSimResult) -> String {
    let secs = r.sim_ns as f64 / 1e9;
    let rows: Vec<Vec<String>> = r
        .flows
        .iter()
        .map(|f| {
            let share = match f.share {
                llr_core::flow::Share::Weight(w) => format!("w{w}"),
                llr_core::flow::Share::Cpu(c) => format!("cpu {c}"),
            };
            let lat = |ns: u64| {
                if f.forwarded == 0 {
                    "-".to_string()
                } else {
                    us(ns as f64)
                }
            };
            vec![
                format!("{}{}", f.name, if f.latency_sensitive { " *" } else { "" }),
                share,
                if f.id == llr_core::flow::INPUT {
                    "-".to_string()
                } else {
                    us(f.quantum_ns as f64)
                },
                format!("{:.1}", 100.0 * f.cpu_share),
                f.done.to_string(),
                format!("{:.1}", f.forwarded as f64 / secs / 1e3),
                format!("{}/{}/{}", f.ring_drops, f.queue_drops, f.element_drops),
                lat(f.p50_ns),
                lat(f.p99_ns),
                lat(f.max_ns),
                f.preemptions.to_string(),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "flow",
            "share",
            "q µs",
            "cpu%",
            "done",
            "fwd kpps",
            "drops ring/queue/elem",
            "p50 µs",
            "p99 µs",
            "max µs",
            "preempted",
        ],
        &rows,
    );
    out.push_str(&format!(
        "* latency-sensitive (open-loop traffic only)\n{:.0} ms simulated: {} of {} offered \
         packets forwarded ({:.1} kpps), busy {:.1} % (switching {:.1} %), {:.0} switches/s, \
         {} flows installed\n",
        secs * 1e3,
        r.forwarded,
        r.offered,
        r.throughput_pps / 1e3,
        100.0 * r.busy_ns as f64 / r.sim_ns as f64,
        100.0 * r.switch_overhead_ns as f64 / r.sim_ns as f64,
        r.switches_per_sec,
        r.flows_installed,
    ));
    out
}

/// Latency-sensitive flows' p99 and max, throughput and switches against the quantum.
pub fn quantum_table(qs: &[f64], results: &[llr_sim::flows::FlowSimResult]) -> String {
    let ls: Vec<&str> = results
        .first()
        .map(|r| {
            r.flows
                .iter()
                .filter(|f| f.latency_sensitive)
                .map(|f| f.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let mut header: Vec<String> = vec!["q µs".into()];
    for n in &ls {
        header.push(format!("{n} p99 µs"));
        header.push(format!("{n} max µs"));
    }
    for h in ["kpps", "switches/s", "switching %"] {
        header.push(h.into());
    }
    let rows: Vec<Vec<String>> = qs
        .iter()
        .zip(results)
        .map(|(q, r)| {
            let mut row = vec![format!("{q}")];
            for n in &ls {
                let f = r.flow(n);
                row.push(f.map_or("-".into(), |f| us(f.p99_ns as f64)));
                row.push(f.map_or("-".into(), |f| us(f.max_ns as f64)));
            }
            row.push(format!("{:.1}", r.throughput_pps / 1e3));
            row.push(format!("{:.0}", r.switches_per_sec));
            row.push(format!(
                "{:.1}",
                100.0 * r.switch_overhead_ns as f64 / r.sim_ns as f64
            ));
            row
        })
        .collect();
    let h: Vec<&str> = header.iter().map(String::as_str).collect();
    table(&h, &rows)
}
