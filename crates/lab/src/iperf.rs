//! `testbed iperf`: TCP goodput of ordinary hosts (`iperf3`, plain sockets, the veth's default
//! offloads) through each target, alone and beside a BE overload from the generator.
//!
//! Three cases per target and round: the TCP flow alone (BE), beside the overload as BE, and
//! beside the overload in llrouter's RT class (port [`RT_TCP_PORT`], which the testbed's
//! rules put in RT in both directions, so the ACKs are RT too; also marked DSCP EF, which the
//! kernel target ignores). Goodput is what the iperf3 server received.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use llr_io::netns::{addr, Topology};
use serde::{Deserialize, Serialize};

use crate::measure::measure_once;
use crate::options::Options;
use crate::report::{self, Fixed};
use crate::router_proc::RT_TCP_PORT;
use crate::sweep::prepare;
use crate::target::Active;
use crate::{LabError, Result};

/// The `iperf` study.
#[derive(Debug, Clone)]
pub struct IperfStudy {
    pub options: Options,
    /// Seconds per iperf3 run, [1, 120].
    pub secs: f64,
    /// Offered rate of the BE overload beside the TCP flow, packets per second.
    pub overload: f64,
    /// Rounds (targets interleaved within each round), 1..=20.
    pub repeat: u32,
}

/// One iperf3 measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
fn iperf3(topo: &Topology, secs: f64, rt: bool, ipv6: bool) -> Result<(f64, u64)> {
    let dst = if ipv6 { addr::SINK_V6 } else { addr::SINK_V4 };
    let port = if rt { RT_TCP_PORT } else { 5201 }.to_string();
    let mut server = topo
        .sink
        .command("iperf3")
        .args(["-s", "-1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| LabError::io("start iperf3 -s in the sink namespace (install iperf3)", e))?;
    std::thread::sleep(Duration::from_millis(300));
    let t = format!("{secs}");
    let mut args = vec!["-c", dst, "-p", &port, "-t", &t, "-J"];
    if rt {
        args.extend(["-S", "184"]); // TOS 0xb8 = DSCP EF
    }
    let out = topo.gen.command("iperf3").args(&args).output();
    let _ = server.kill();
    let _ = server.wait();
    let out = out.map_err(|e| LabError::io("run iperf3 -c in the gen namespace", e))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        LabError::Failed(format!(
            "iperf3 output: {}: {e}",
            String::from_utf8_lossy(&out.stderr)
        ))
    })?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(LabError::Failed(format!("iperf3: {e}")));
    }
    let end = &v["end"];
    let bps = end["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| LabError::Failed("iperf3: no end.sum_received.bits_per_second".into()))?;
    let retr = end["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    Ok((bps, retr))
}

impl IperfStudy {
    /// Checks every option before anything changes on the host.
    pub fn check(&self) -> Result<()> {
        self.options.check()?;
        if !(self.secs >= 1.0 && self.secs <= 120.0) {
            return Err(LabError::invalid("secs", "must be within [1, 120]"));
        }
        if !(self.overload > 0.0 && self.overload.is_finite()) {
            return Err(LabError::invalid("overload", "must be a positive rate"));
        }
        if self.repeat == 0 || self.repeat > 20 {
            return Err(LabError::invalid("repeat", "must be within 1..=20"));
        }
        Ok(())
    }

    /// Runs every case on every target, each round; `on_row` sees each row as it is measured.
    /// Writes `iperf.csv` into the output directory and returns the rows.
    pub fn run(
        &self,
        stop: &AtomicBool,
        on_row: &mut dyn FnMut(&IperfRow),
    ) -> Result<Vec<IperfRow>> {
        self.check()?;
        if Command::new("iperf3").arg("--version").output().is_err() {
            return Err(LabError::Failed(
                "iperf3 is not installed (scripts/install-deps.sh installs it)".into(),
            ));
        }
        let c = &self.options;
        let (topo, _shield) = prepare(c)?;
        let mut rows: Vec<IperfRow> = Vec::new();
        for round in 0..self.repeat {
            for t in &c.targets {
                let mut act = Active::start(&topo, t, c)?;
                for (case, overload, rt) in CASES {
                    if stop.load(Ordering::Relaxed) {
                        return Err(LabError::Interrupted);
                    }
                    let (bps, retr, pps) = self.case(&topo, &act, overload, rt)?;
                    let row = IperfRow {
                        round,
                        target: t.label(),
                        case: case.to_string(),
                        goodput_mbps: bps / 1e6,
                        retransmits: retr,
                        overload_pps: pps,
                    };
                    on_row(&row);
                    rows.push(row);
                }
                act.finish()?;
            }
        }
        write_rows(&self.csv_path(), &rows)?;
        Ok(rows)
    }

    /// Where [`IperfStudy::run`] writes the rows.
    pub fn csv_path(&self) -> std::path::PathBuf {
        self.options.out.join("iperf.csv")
    }

    /// One case: iperf3 alone, or beside the BE overload. Returns (goodput bit/s, retransmits,
    /// overload packets/s sent).
    fn case(
        &self,
        topo: &Topology,
        act: &Active<'_>,
        overload: bool,
        rt: bool,
    ) -> Result<(f64, u64, f64)> {
        let c = &self.options;
        if !overload {
            let (bps, retr) = iperf3(topo, self.secs, rt, c.ipv6)?;
            return Ok((bps, retr, 0.0));
        }
        let oc = Options {
            point_secs: self.secs + 1.0,
            ..c.clone()
        };
        let done = AtomicBool::new(false);
        std::thread::scope(|s| -> Result<(f64, u64, f64)> {
            let gen = s.spawn(|| measure_once(topo, act, &oc, self.overload, 0.0, &done));
            // Let the overload build up before the TCP flow starts.
            std::thread::sleep(Duration::from_millis(500));
            let r = iperf3(topo, self.secs, rt, c.ipv6);
            let p = gen
                .join()
                .map_err(|_| LabError::Failed("overload thread panicked".into()))??;
            let (bps, retr) = r?;
            Ok((bps, retr, p.gen.achieved_pps))
        })
    }
}

/// A line of `iperf.csv`.
#[derive(Serialize)]
struct CsvLine<'a> {
    round: u32,
    target: &'a str,
    case: &'a str,
    goodput_mbps: Fixed<3>,
    retransmits: u64,
    overload_pps: Fixed<0>,
}

fn write_rows(path: &Path, rows: &[IperfRow]) -> Result<()> {
    let lines: Vec<CsvLine<'_>> = rows
        .iter()
        .map(|r| CsvLine {
            round: r.round,
            target: &r.target,
            case: &r.case,
            goodput_mbps: Fixed(r.goodput_mbps),
            retransmits: r.retransmits,
            overload_pps: Fixed(r.overload_pps),
        })
        .collect();
    report::write_csv(
        path,
        &lines,
        "round,target,case,goodput_mbps,retransmits,overload_pps",
    )
    .map(|_| ())
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
