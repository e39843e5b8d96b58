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

use llr_traffic::netns::{addr, Topology};
use serde::{Deserialize, Serialize};

use crate::measure::measure_once;
use crate::options::Options;
use crate::report::{self, Fixed};
use crate::router_proc::RT_TCP_PORT;
use crate::setup::prepare;
use crate::target::Active;
use crate::{LabError, Result, StepContext};

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
    /// MTU of every link of the topology (both ends), 576..=9000.
    pub mtu: u32,
    /// Segmentation, receive and checksum offloads of every link (veth's defaults: on).
    pub offloads: bool,
    /// The cases to run, in order.
    pub cases: Vec<Case>,
    /// Rate of the `paced` case's TCP flow (iperf3 `-b`), Mbit/s.
    pub pace_mbps: f64,
    /// Run the end hosts' receive (the iperf3 server's TCP stack, the client's ACK
    /// processing) on the generator's CPU, by RPS on their veths, for every target alike.
    /// Otherwise a veth transmit runs its peer host's receive in the transmitter's context:
    /// the kernel's forwarding softirq, or llrouter's transmit call, which bills a host's TCP
    /// stack to the router's CPU (on a real network the hosts are other machines).
    pub hosts_on_gen_cpu: bool,
}

/// One kind of iperf3 run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Case {
    /// The TCP flow alone, as fast as it goes (BE).
    Alone,
    /// The TCP flow alone at `pace_mbps`: below what the router carries, it should lose nothing.
    Paced,
    /// The TCP flow (BE) beside the BE overload.
    Overload,
    /// The TCP flow in the RT class beside the BE overload.
    Rt,
}

impl Case {
    /// Its name in the rows and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Case::Alone => "tcp-be",
            Case::Paced => "tcp-paced",
            Case::Overload => "tcp-be+overload",
            Case::Rt => "tcp-rt+overload",
        }
    }

    /// (beside the overload, in the RT class).
    fn shape(self) -> (bool, bool) {
        match self {
            Case::Alone | Case::Paced => (false, false),
            Case::Overload => (true, false),
            Case::Rt => (true, true),
        }
    }
}

/// One iperf3 measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IperfRow {
    pub round: u32,
    pub target: String,
    pub case: String,
    pub goodput_mbps: f64,
    pub retransmits: u64,
    /// Retransmitted segments per segment sent, in percent.
    pub retransmit_pct: f64,
    /// Frames the overload generator sent per second (0 without overload).
    pub overload_pps: f64,
    /// The router's CPU time per gigabit received, ms: llrouter's process (its workers, and
    /// the egress and the receiver's stack that run in their syscalls), or for the kernel the
    /// router CPUs' softirq time. Both come from the kernel's tick-sampled accounting: good for
    /// a busy router, coarse for a mostly idle one (the paced case).
    pub router_cpu_ms_per_gbit: f64,
}

/// What one iperf3 run measured.
struct Run {
    bps: f64,
    retransmits: u64,
    /// Segments the sender sent (bytes over the MSS).
    segments: f64,
}

/// Runs iperf3 from the gen namespace to the sink for `secs` (at `pace_mbps` if given).
fn iperf3(topo: &Topology, secs: f64, rt: bool, ipv6: bool, pace_mbps: Option<f64>) -> Result<Run> {
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
    let rate = pace_mbps.map(|m| format!("{m}M"));
    if let Some(r) = &rate {
        args.extend(["-b", r.as_str()]);
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
    let retransmits = end["sum_sent"]["retransmits"].as_u64().unwrap_or(0);
    let bytes = end["sum_sent"]["bytes"].as_f64().unwrap_or(0.0);
    let mss = v["start"]["tcp_mss_default"].as_f64().filter(|m| *m > 0.0);
    Ok(Run {
        bps,
        retransmits,
        segments: mss.map_or(0.0, |m| bytes / m),
    })
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
        if !(576..=9000).contains(&self.mtu) {
            return Err(LabError::invalid("mtu", "must be within 576..=9000"));
        }
        if self.cases.is_empty() {
            return Err(LabError::invalid("cases", "name at least one case"));
        }
        if !(self.pace_mbps > 0.0 && self.pace_mbps.is_finite()) {
            return Err(LabError::invalid(
                "pace",
                "must be a positive rate in Mbit/s",
            ));
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
        let _links = Links::set(&topo, self.mtu, self.offloads)?;
        let _hosts = self
            .hosts_on_gen_cpu
            .then(|| HostRps::set(&topo, c.gen_cpu))
            .transpose()?;
        let mut rows: Vec<IperfRow> = Vec::new();
        for round in 0..self.repeat {
            for t in &c.targets {
                let mut act = Active::start(&topo, t, c)?;
                for &case in &self.cases {
                    if stop.load(Ordering::Relaxed) {
                        return Err(LabError::Interrupted);
                    }
                    let cpu0 = act.router_cpu_ns();
                    let (run, pps) = self.case(&topo, &act, case)?;
                    let cpu = act.router_cpu_ns().saturating_sub(cpu0);
                    let gbit = run.bps * self.secs / 1e9;
                    // Below a megabit per second the ratio says nothing but "collapsed".
                    let per_gbit = |ns: u64| {
                        if run.bps >= 1e6 {
                            ns as f64 / 1e6 / gbit
                        } else {
                            f64::NAN
                        }
                    };
                    let row = IperfRow {
                        round,
                        target: t.label(),
                        case: case.name().to_string(),
                        goodput_mbps: run.bps / 1e6,
                        retransmits: run.retransmits,
                        retransmit_pct: if run.segments > 0.0 {
                            100.0 * run.retransmits as f64 / run.segments
                        } else {
                            f64::NAN
                        },
                        overload_pps: pps,
                        router_cpu_ms_per_gbit: per_gbit(cpu),
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
    fn case(&self, topo: &Topology, act: &Active<'_>, case: Case) -> Result<(Run, f64)> {
        let c = &self.options;
        let (overload, rt) = case.shape();
        if !overload {
            let pace = (case == Case::Paced).then_some(self.pace_mbps);
            return Ok((iperf3(topo, self.secs, rt, c.ipv6, pace)?, 0.0));
        }
        let oc = Options {
            point_secs: self.secs + 1.0,
            ..c.clone()
        };
        let done = AtomicBool::new(false);
        std::thread::scope(|s| -> Result<(Run, f64)> {
            let gen = s.spawn(|| measure_once(topo, act, &oc, self.overload, 0.0, &done));
            // Let the overload build up before the TCP flow starts.
            std::thread::sleep(Duration::from_millis(500));
            let r = iperf3(topo, self.secs, rt, c.ipv6, None);
            let p = gen
                .join()
                .map_err(|_| LabError::Failed("overload thread panicked".into()))??;
            Ok((r?, p.gen.achieved_pps))
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
    retransmit_pct: Fixed<3>,
    overload_pps: Fixed<0>,
    router_cpu_ms_per_gbit: Fixed<2>,
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
            retransmit_pct: Fixed(r.retransmit_pct),
            overload_pps: Fixed(r.overload_pps),
            router_cpu_ms_per_gbit: Fixed(r.router_cpu_ms_per_gbit),
        })
        .collect();
    report::write_csv(
        path,
        &lines,
        "round,target,case,goodput_mbps,retransmits,retransmit_pct,overload_pps,router_cpu_ms_per_gbit",
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

/// Median [min–max] goodput per target and case, the ratio to the kernel's median, and the
/// medians of retransmits and CPU per gigabit.
pub fn summary(rows: &[IperfRow]) -> String {
    let mut targets: Vec<&str> = Vec::new();
    let mut cases: Vec<&str> = Vec::new();
    for r in rows {
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
        if !cases.contains(&r.case.as_str()) {
            cases.push(&r.case);
        }
    }
    let mut out = String::from(
        "| target | case | goodput Mbit/s, median [min–max] | / kernel | retransmits, % of segments | router CPU ms/Gbit |\n|---|---|---|---|---|---|\n",
    );
    for case in cases {
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
            let med = |f: fn(&IperfRow) -> f64| median(sel.iter().map(|r| f(r)).collect());
            let (m, lo, hi) = med(|r| r.goodput_mbps);
            let (rp, rlo, rhi) = med(|r| r.retransmit_pct);
            let cpu: Vec<f64> = (sel.iter().map(|r| r.router_cpu_ms_per_gbit))
                .filter(|c| c.is_finite())
                .collect();
            let rc = if cpu.is_empty() {
                "–".to_string()
            } else {
                format!("{:.0}", median(cpu).0)
            };
            let ratio = km.map_or("–".to_string(), |k| format!("{:.2}", m / k));
            out.push_str(&format!(
                "| {t} | {case} | {m:.0} [{lo:.0}–{hi:.0}] | {ratio} | {rp:.2} [{rlo:.2}–{rhi:.2}] | {rc} |\n"
            ));
        }
    }
    out
}

/// Sets the MTU and offloads of every veth end of the topology; puts veth's defaults back on
/// drop (a `--name` topology outlives the study).
struct Links<'a> {
    topo: &'a Topology,
    mtu: bool,
    offloads_off: bool,
}

impl<'a> Links<'a> {
    fn ends(topo: &Topology) -> [(&llr_traffic::netns::Netns, &'static str); 4] {
        [
            (&topo.gen, addr::GEN_IF),
            (&topo.router, addr::RTR_IN_IF),
            (&topo.router, addr::RTR_OUT_IF),
            (&topo.sink, addr::SINK_IF),
        ]
    }

    /// `offloads` false turns TSO, GSO, GRO and checksum offload off; true leaves veth's
    /// defaults (TSO, GSO and checksum offload on, GRO off).
    fn set(topo: &'a Topology, mtu: u32, offloads: bool) -> Result<Links<'a>> {
        let links = Links {
            topo,
            mtu: mtu != 1500,
            offloads_off: !offloads,
        };
        for (ns, dev) in Self::ends(topo) {
            if links.mtu {
                let m = mtu.to_string();
                ns.ip(&["link", "set", "dev", dev, "mtu", &m])
                    .map_err(|e| LabError::Failed(format!("set the MTU of {dev}: {e:#}")))?;
            }
            if links.offloads_off {
                ethtool(
                    ns,
                    &[
                        "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
                    ],
                )?;
            }
        }
        Ok(links)
    }
}

/// RPS of the end hosts' veths to one CPU; off again on drop.
struct HostRps<'a> {
    topo: &'a Topology,
}

impl<'a> HostRps<'a> {
    fn ends(topo: &Topology) -> [(&llr_traffic::netns::Netns, &'static str); 2] {
        [(&topo.gen, addr::GEN_IF), (&topo.sink, addr::SINK_IF)]
    }

    fn steer(topo: &Topology, cpu: Option<usize>) -> Result<()> {
        for (ns, dev) in Self::ends(topo) {
            ns.set_rps(dev, cpu).step(|| format!("set RPS of {dev}"))?;
        }
        Ok(())
    }

    fn set(topo: &'a Topology, cpu: usize) -> Result<HostRps<'a>> {
        let h = HostRps { topo };
        Self::steer(topo, Some(cpu))?;
        Ok(h)
    }
}

impl Drop for HostRps<'_> {
    fn drop(&mut self) {
        let _ = Self::steer(self.topo, None);
    }
}

fn ethtool(ns: &llr_traffic::netns::Netns, args: &[&str]) -> Result<()> {
    let mut argv = vec!["ethtool"];
    argv.extend_from_slice(args);
    let out = ns
        .exec(&argv)
        .map_err(|e| LabError::Failed(format!("run ethtool (install ethtool): {e:#}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::Failed(format!(
            "ethtool {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl Drop for Links<'_> {
    fn drop(&mut self) {
        for (ns, dev) in Self::ends(self.topo) {
            if self.mtu {
                let _ = ns.ip(&["link", "set", "dev", dev, "mtu", "1500"]);
            }
            if self.offloads_off {
                let _ = ethtool(ns, &["-K", dev, "tso", "on", "gso", "on", "tx", "on"]);
            }
        }
    }
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
            retransmit_pct: 0.5,
            overload_pps: 0.0,
            router_cpu_ms_per_gbit: 100.0,
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
