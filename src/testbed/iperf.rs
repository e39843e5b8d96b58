//! `testbed iperf`: TCP goodput of ordinary hosts (`iperf3`, plain sockets, the veth's default
//! offloads) through each target, alone and beside a BE overload from the generator.
//!
//! Three cases per target and round: the TCP flow alone (BE), beside the overload as BE, and
//! beside the overload in llrouter's RT class (port [`RT_TCP_PORT`], which the testbed's
//! rules put in RT in both directions, so the ACKs are RT too; also marked DSCP EF, which the
//! kernel target ignores). Goodput is what the iperf3 server received.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use llr_io::netns::addr;

use crate::cli_util::usage;

use super::{check_common, measure, targets, topology, Active, Common, RT_TCP_PORT};
use crate::cmd_gen::stop_on_signal;

/// Options of `testbed iperf`.
#[derive(Debug, Args, Clone)]
pub struct IperfArgs {
    #[command(flatten)]
    pub common: Common,
    /// Seconds per iperf3 run.
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Offered rate of the BE overload beside the TCP flow, packets per second.
    #[arg(long, default_value_t = 3_000_000.0)]
    pub overload: f64,
    /// Rounds (targets interleaved within each round); the report gives medians and ranges.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
}

/// One iperf3 measurement.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IperfRow {
    pub round: u32,
    pub target: String,
    pub case: String,
    pub goodput_mbps: f64,
    pub retransmits: u64,
    /// Frames the overload generator sent per second (0 without overload).
    pub overload_pps: f64,
}

const CASES: [(&str, bool, bool); 3] = [
    ("tcp-be", false, false),
    ("tcp-be+overload", true, false),
    ("tcp-rt+overload", true, true),
];

/// Runs iperf3 from the gen namespace to the sink for `secs`; returns (goodput bit/s,
/// retransmits).
fn iperf3(topo: &llr_io::netns::Topology, secs: f64, rt: bool, ipv6: bool) -> Result<(f64, u64)> {
    let dst = if ipv6 { addr::SINK_V6 } else { addr::SINK_V4 };
    let port = if rt { RT_TCP_PORT } else { 5201 }.to_string();
    let mut server = topo
        .sink
        .command("iperf3")
        .args(["-s", "-1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("start iperf3 -s in the sink namespace (install iperf3)")?;
    std::thread::sleep(Duration::from_millis(300));
    let t = format!("{secs}");
    let mut args = vec!["-c", dst, "-p", &port, "-t", &t, "-J"];
    if rt {
        args.extend(["-S", "184"]); // TOS 0xb8 = DSCP EF
    }
    let out = topo.gen.command("iperf3").args(&args).output();
    let _ = server.kill();
    let _ = server.wait();
    let out = out.context("run iperf3 -c in the gen namespace")?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("iperf3 output: {}", String::from_utf8_lossy(&out.stderr)))?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        bail!("iperf3: {e}");
    }
    let end = &v["end"];
    let bps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .context("iperf3: no end.sum_received.bits_per_second")?;
    let retr = end["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    Ok((bps, retr))
}

/// `testbed iperf`.
pub fn run_iperf(a: IperfArgs) -> Result<()> {
    let c = &a.common;
    check_common(c)?;
    if !(a.secs >= 1.0 && a.secs <= 120.0) {
        return Err(usage("secs", "must be within [1, 120]"));
    }
    if !(a.overload > 0.0 && a.overload.is_finite()) {
        return Err(usage("overload", "must be a positive rate"));
    }
    if a.repeat == 0 || a.repeat > 20 {
        return Err(usage("repeat", "must be within 1..=20"));
    }
    if Command::new("iperf3").arg("--version").output().is_err() {
        bail!("iperf3 is not installed (scripts/install-deps.sh installs it)");
    }
    let tg = targets(c)?;
    std::fs::create_dir_all(&c.out).with_context(|| format!("create {}", c.out.display()))?;
    let stop = stop_on_signal();
    let topo = topology(c)?;
    let mut rows: Vec<IperfRow> = Vec::new();
    for round in 0..a.repeat {
        for t in &tg {
            let mut act = Active::start(&topo, t, c)?;
            for (case, overload, rt) in CASES {
                if stop.load(Ordering::Relaxed) {
                    bail!("interrupted");
                }
                let (bps, retr, pps) = if overload {
                    let mut oc = c.clone();
                    oc.point_secs = a.secs + 1.0;
                    let done = AtomicBool::new(false);
                    std::thread::scope(|s| -> Result<(f64, u64, f64)> {
                        let gen = s.spawn(|| measure(&topo, &act, &oc, a.overload, 0.0, &done));
                        // Let the overload build up before the TCP flow starts.
                        std::thread::sleep(Duration::from_millis(500));
                        let r = iperf3(&topo, a.secs, rt, c.ipv6);
                        let (g, _, _) = gen
                            .join()
                            .map_err(|_| anyhow::anyhow!("overload thread panicked"))??;
                        let (bps, retr) = r?;
                        Ok((bps, retr, g.achieved_pps))
                    })?
                } else {
                    let (bps, retr) = iperf3(&topo, a.secs, rt, c.ipv6)?;
                    (bps, retr, 0.0)
                };
                let row = IperfRow {
                    round,
                    target: t.label(),
                    case: case.to_string(),
                    goodput_mbps: bps / 1e6,
                    retransmits: retr,
                    overload_pps: pps,
                };
                eprintln!(
                    "round {round} {:<18} {case:<17} {:>9.1} Mbit/s  retransmits {:>6}  overload {:>8.0} pps",
                    row.target, row.goodput_mbps, row.retransmits, row.overload_pps
                );
                rows.push(row);
            }
            act.finish()?;
        }
    }
    let path = c.out.join("iperf.csv");
    write_rows(&path, &rows)?;
    println!("{}", summary(&rows));
    println!("rows: {}", path.display());
    Ok(())
}

fn write_rows(path: &PathBuf, rows: &[IperfRow]) -> Result<()> {
    let mut s = String::from("round,target,case,goodput_mbps,retransmits,overload_pps\n");
    for r in rows {
        s.push_str(&format!(
            "{},{},{},{:.3},{},{:.0}\n",
            r.round, r.target, r.case, r.goodput_mbps, r.retransmits, r.overload_pps
        ));
    }
    std::fs::write(path, s).with_context(|| format!("write {}", path.display()))
}

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let m = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (m, v[0], v[v.len() - 1])
}

/// Median [min–max] goodput per target and case, and the ratio to the kernel's median.
pub fn summary(rows: &[IperfRow]) -> String {
    let mut targets: Vec<&str> = Vec::new();
    for r in rows {
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
    }
    let mut out = String::from(
        "| target | case | goodput Mbit/s, median [min–max] | / kernel | retransmits (median) |\n|---|---|---|---|---|\n",
    );
    for (case, _, _) in CASES {
        let kernel = rows
            .iter()
            .filter(|r| r.target == "kernel" && r.case == case)
            .map(|r| r.goodput_mbps)
            .collect::<Vec<_>>();
        let km = (!kernel.is_empty()).then(|| median(kernel).0);
        for t in &targets {
            let sel: Vec<&IperfRow> = rows
                .iter()
                .filter(|r| r.target == *t && r.case == case)
                .collect();
            if sel.is_empty() {
                continue;
            }
            let (m, lo, hi) = median(sel.iter().map(|r| r.goodput_mbps).collect());
            let (rm, _, _) = median(sel.iter().map(|r| r.retransmits as f64).collect());
            let ratio = km.map_or("–".to_string(), |k| format!("{:.2}", m / k));
            out.push_str(&format!(
                "| {t} | {case} | {m:.0} [{lo:.0}–{hi:.0}] | {ratio} | {rm:.0} |\n"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(target: &str, case: &str, g: f64) -> IperfRow {
        IperfRow {
            round: 0,
            target: target.into(),
            case: case.into(),
            goodput_mbps: g,
            retransmits: 1,
            overload_pps: 0.0,
        }
    }

    #[test]
    fn summary_gives_medians_ranges_and_ratio_to_kernel() {
        let rows = vec![
            row("kernel", "tcp-be", 1000.0),
            row("kernel", "tcp-be", 3000.0),
            row("llrouter:ll-wfq", "tcp-be", 1500.0),
            row("llrouter:ll-wfq", "tcp-be", 500.0),
            row("llrouter:ll-wfq", "tcp-be", 1000.0),
        ];
        let s = summary(&rows);
        assert!(
            s.contains("| kernel | tcp-be | 2000 [1000–3000] | 1.00 |"),
            "{s}"
        );
        assert!(
            s.contains("| llrouter:ll-wfq | tcp-be | 1000 [500–1500] | 0.50 |"),
            "{s}"
        );
    }
}
