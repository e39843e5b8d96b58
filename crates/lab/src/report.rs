//! What a study writes: CSV files (serde + `csv`, numbers at a fixed precision per column), PNG
//! plots and `report.md`.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Serialize, Serializer};

use crate::measure::Row;
use crate::options::{Options, Target};
use crate::plot::{line_chart, Series};
use crate::summary::Mlffr;
use crate::{choice_name, LabError, Result};
use llr_core::sched::StrategyKind;

/// A number written with `D` decimals (`{:.D}`; NaN as `NaN`).
#[derive(Debug, Clone, Copy)]
pub struct Fixed<const D: usize>(pub f64);

impl<const D: usize> Serialize for Fixed<D> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:.*}", D, self.0))
    }
}

/// A number written as Rust displays it (`0.001`, `0`).
#[derive(Debug, Clone, Copy)]
pub struct Shown(pub f64);

impl Serialize for Shown {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// A [`Row`] as a line of `results.csv` (column order and precision of the file format).
#[derive(Debug, Serialize)]
pub struct CsvRow<'a> {
    target: &'a str,
    rt_share: Shown,
    offered_pps: Fixed<0>,
    sent_pps: Fixed<0>,
    sent_rt: u64,
    sent_be: u64,
    recv_rt: u64,
    recv_be: u64,
    loss_rt: Fixed<6>,
    loss_be: Fixed<6>,
    reordered: u64,
    throughput_pps: Fixed<0>,
    rt_mean_us: Fixed<2>,
    rt_p50_us: Fixed<2>,
    rt_p99_us: Fixed<2>,
    rt_p999_us: Fixed<2>,
    be_mean_us: Fixed<2>,
    be_p50_us: Fixed<2>,
    be_p99_us: Fixed<2>,
    be_p999_us: Fixed<2>,
    backlog_drops: u64,
    router_cpu_s: Fixed<3>,
    router_ns_per_pkt: Fixed<1>,
    round: u32,
    wakeups_per_s: Fixed<0>,
    steal_pct: Fixed<1>,
    router_softirq_pct: Fixed<1>,
    attempts: u32,
    x_ns: Fixed<1>,
    rho_rt: Fixed<4>,
    be_budget: u32,
    tmax_us: Fixed<2>,
    rt_ring_p99_lo_us: Fixed<0>,
    rt_ring_p99_us: Fixed<0>,
    within_tmax: &'a str,
    hi_frames_per_grant: Fixed<2>,
    hi_ns_per_grant: Fixed<0>,
    lo_frames_per_grant: Fixed<2>,
    lo_ns_per_grant: Fixed<0>,
    hi_flushes_per_grant: Fixed<3>,
    lo_flushes_per_grant: Fixed<3>,
    frames_per_grant: Fixed<2>,
    flushes_per_grant: Fixed<3>,
    ns_per_grant: Fixed<0>,
    tx_hold_us: Option<u32>,
    flush_ns_per_grant: Fixed<0>,
    flushed_per_grant: Fixed<3>,
    hi_ring_drops: u64,
    router_drops: u64,
    stall_max_us: Fixed<1>,
    worker_ns_per_pkt: Fixed<1>,
    arrival_burst: u32,
    tmax_burst_us: Fixed<2>,
    within_tmax_burst: &'a str,
    sink_drops: u64,
    worker_wait_us: Fixed<1>,
    worker_preemptions: Option<u64>,
}

impl<'a> From<&'a Row> for CsvRow<'a> {
    fn from(r: &'a Row) -> CsvRow<'a> {
        CsvRow {
            target: &r.target,
            rt_share: Shown(r.rt_share),
            offered_pps: Fixed(r.offered_pps),
            sent_pps: Fixed(r.sent_pps),
            sent_rt: r.sent_rt,
            sent_be: r.sent_be,
            recv_rt: r.recv_rt,
            recv_be: r.recv_be,
            loss_rt: Fixed(r.loss_rt),
            loss_be: Fixed(r.loss_be),
            reordered: r.reordered,
            throughput_pps: Fixed(r.throughput_pps),
            rt_mean_us: Fixed(r.rt_mean_us),
            rt_p50_us: Fixed(r.rt_p50_us),
            rt_p99_us: Fixed(r.rt_p99_us),
            rt_p999_us: Fixed(r.rt_p999_us),
            be_mean_us: Fixed(r.be_mean_us),
            be_p50_us: Fixed(r.be_p50_us),
            be_p99_us: Fixed(r.be_p99_us),
            be_p999_us: Fixed(r.be_p999_us),
            backlog_drops: r.backlog_drops,
            router_cpu_s: Fixed(r.router_cpu_s),
            router_ns_per_pkt: Fixed(r.router_ns_per_pkt),
            round: r.round,
            wakeups_per_s: Fixed(r.wakeups_per_s),
            steal_pct: Fixed(r.steal_pct),
            router_softirq_pct: Fixed(r.router_softirq_pct),
            attempts: r.attempts,
            x_ns: Fixed(r.x_ns),
            rho_rt: Fixed(r.rho_rt),
            be_budget: r.be_budget,
            tmax_us: Fixed(r.tmax_us),
            rt_ring_p99_lo_us: Fixed(r.rt_ring_p99_lo_us),
            rt_ring_p99_us: Fixed(r.rt_ring_p99_us),
            within_tmax: &r.within_tmax,
            hi_frames_per_grant: Fixed(r.hi_frames_per_grant),
            hi_ns_per_grant: Fixed(r.hi_ns_per_grant),
            lo_frames_per_grant: Fixed(r.lo_frames_per_grant),
            lo_ns_per_grant: Fixed(r.lo_ns_per_grant),
            hi_flushes_per_grant: Fixed(r.hi_flushes_per_grant),
            lo_flushes_per_grant: Fixed(r.lo_flushes_per_grant),
            frames_per_grant: Fixed(r.frames_per_grant),
            flushes_per_grant: Fixed(r.flushes_per_grant),
            ns_per_grant: Fixed(r.ns_per_grant),
            tx_hold_us: r.tx_hold_us,
            flush_ns_per_grant: Fixed(r.flush_ns_per_grant),
            flushed_per_grant: Fixed(r.flushed_per_grant),
            hi_ring_drops: r.hi_ring_drops,
            router_drops: r.router_drops,
            stall_max_us: Fixed(r.stall_max_us),
            worker_ns_per_pkt: Fixed(r.worker_ns_per_pkt),
            arrival_burst: r.arrival_burst,
            tmax_burst_us: Fixed(r.tmax_burst_us),
            within_tmax_burst: &r.within_tmax_burst,
            sink_drops: r.sink_drops,
            worker_wait_us: Fixed(r.worker_wait_us),
            worker_preemptions: r.worker_preemptions,
        }
    }
}

/// A line of `mlffr.csv`.
#[derive(Debug, Serialize)]
pub struct MlffrCsvRow {
    target: String,
    round: u32,
    mlffr_pps: Fixed<0>,
    loss_tolerance: Shown,
    generator_limited: bool,
}

impl MlffrCsvRow {
    pub fn new(m: &Mlffr, tolerance: f64) -> MlffrCsvRow {
        MlffrCsvRow {
            target: m.target.clone(),
            round: m.round,
            mlffr_pps: Fixed(m.pps),
            loss_tolerance: Shown(tolerance),
            generator_limited: m.gen_limited,
        }
    }
}

/// The CSV text of `rows` with a header of `T`'s field names (`empty_header` when there are
/// no rows to take them from).
pub fn csv_text<T: Serialize>(rows: &[T], empty_header: &str) -> Result<String> {
    if rows.is_empty() {
        return Ok(format!("{empty_header}\n"));
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r).map_err(|source| LabError::Csv {
            what: "CSV".into(),
            source,
        })?;
    }
    let body = w
        .into_inner()
        .map_err(|e| LabError::Failed(format!("CSV: {e}")))?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Writes `rows` as CSV to `path` (see [`csv_text`]); returns the text.
pub fn write_csv<T: Serialize>(path: &Path, rows: &[T], empty_header: &str) -> Result<String> {
    let text = csv_text(rows, empty_header)?;
    std::fs::write(path, &text)
        .map_err(|e| LabError::io(format!("write {}", path.display()), e))?;
    Ok(text)
}

/// The header of `results.csv`.
pub const RESULTS_HEADER: &str = "target,rt_share,offered_pps,sent_pps,sent_rt,sent_be,recv_rt,recv_be,loss_rt,loss_be,reordered,throughput_pps,rt_mean_us,rt_p50_us,rt_p99_us,rt_p999_us,be_mean_us,be_p50_us,be_p99_us,be_p999_us,backlog_drops,router_cpu_s,router_ns_per_pkt,round,wakeups_per_s,steal_pct,router_softirq_pct,attempts,x_ns,rho_rt,be_budget,tmax_us,rt_ring_p99_lo_us,rt_ring_p99_us,within_tmax,hi_frames_per_grant,hi_ns_per_grant,lo_frames_per_grant,lo_ns_per_grant,hi_flushes_per_grant,lo_flushes_per_grant,frames_per_grant,flushes_per_grant,ns_per_grant,tx_hold_us,flush_ns_per_grant,flushed_per_grant,hi_ring_drops,router_drops,stall_max_us,worker_ns_per_pkt,arrival_burst,tmax_burst_us,within_tmax_burst,sink_drops,worker_wait_us,worker_preemptions";

/// The header of `mlffr.csv`.
pub const MLFFR_HEADER: &str = "target,round,mlffr_pps,loss_tolerance,generator_limited";

/// Writes measurement rows in the `results.csv` format.
pub fn write_rows(path: &Path, rows: &[Row]) -> Result<()> {
    let lines: Vec<CsvRow<'_>> = rows.iter().map(CsvRow::from).collect();
    write_csv(path, &lines, RESULTS_HEADER).map(|_| ())
}

/// The x value of a row in the load plots: what the router forwarded (kpps), not what was
/// asked of the generator, which may fall short of it.
fn forwarded_kpps(r: &Row) -> f64 {
    r.throughput_pps / 1000.0
}

/// A row's point for the RT (`true`) or BE line of a chart, if the row belongs on it.
type PointOf<'a> = dyn Fn(&Row, bool) -> Option<(f64, f64)> + 'a;

/// Rows of `target` in the order of the load asked of the generator (rounds of --repeat
/// interleave their loads), so that a line follows rising load even where its x (forwarded
/// load) falls back under overload — a bend that shows receive livelock.
fn by_load<'a>(rows: &'a [Row], target: &Target) -> Vec<&'a Row> {
    let mut v: Vec<&Row> = rows.iter().filter(|r| r.target == target.label()).collect();
    v.sort_by(|a, b| {
        a.offered_pps
            .total_cmp(&b.offered_pps)
            .then(a.sent_pps.total_cmp(&b.sent_pps))
    });
    v
}

/// Lines of `rows` of every target, RT and BE, at (x, y) given by `xy`, in load order.
fn class_series(rows: &[Row], tg: &[Target], xy: &PointOf<'_>) -> Vec<Series> {
    let mut series = Vec::new();
    for t in tg {
        for (ci, (cls, rt)) in [("RT", true), ("BE", false)].into_iter().enumerate() {
            let points: Vec<(f64, f64)> = by_load(rows, t)
                .into_iter()
                .filter_map(|r| xy(r, rt))
                .collect();
            series.push(Series {
                label: format!("{} {cls}", t.label()),
                points,
                group: t.label(),
                class: ci,
            });
        }
    }
    series
}

/// `series` with each line drawn left to right (for x axes other than load).
fn by_x(mut series: Vec<Series>) -> Vec<Series> {
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// One chart to draw: file name, title, axis labels, lines, logarithmic y.
struct Chart {
    name: &'static str,
    title: &'static str,
    x: &'static str,
    y: &'static str,
    series: Vec<Series>,
    log_y: bool,
}

fn p99(r: &Row, rt: bool) -> f64 {
    if rt {
        r.rt_p99_us
    } else {
        r.be_p99_us
    }
}

fn mean(r: &Row, rt: bool) -> f64 {
    if rt {
        r.rt_mean_us
    } else {
        r.be_mean_us
    }
}

/// The router's CPU over the point, % of one core (its CPU time per packet × packets per
/// second).
fn cpu_pct(r: &Row) -> f64 {
    100.0 * r.router_ns_per_pkt * r.throughput_pps / 1e9
}

/// Wake-ups per second of `t`'s rows that have them, against `x`.
fn wakeup_series(rows: &[Row], tg: &[Target], x: &dyn Fn(&Row) -> Option<f64>) -> Vec<Series> {
    tg.iter()
        .map(|t| {
            let points: Vec<(f64, f64)> = by_load(rows, t)
                .into_iter()
                .filter(|r| r.wakeups_per_s.is_finite())
                .filter_map(|r| Some((x(r)?, r.wakeups_per_s)))
                .collect();
            Series::new(t.label(), points)
        })
        .collect()
}

fn loss_pct(r: &Row, rt: bool) -> f64 {
    100.0 * if rt { r.loss_rt } else { r.loss_be }
}

/// The charts over load at the first RT share: p99 and mean latency over what was forwarded
/// (paper 000's Fig. 7a draws the mean), loss over what was sent (beside each other, so a low
/// p99 bought with lost packets shows as such), the router's CPU (Fig. 5b) and wake-ups.
fn load_charts(rows: &[Row], tg: &[Target], s0: f64) -> Vec<Chart> {
    let at_s0 = |r: &Row| r.rt_share == s0;
    let cpu = tg
        .iter()
        .map(|t| {
            let points: Vec<(f64, f64)> = by_load(rows, t)
                .into_iter()
                .filter(|r| at_s0(r) && r.throughput_pps > 0.0)
                .map(|r| (forwarded_kpps(r), cpu_pct(r)))
                .collect();
            Series::new(t.label(), points)
        })
        .collect();
    vec![
        Chart {
            name: "latency_vs_load.png",
            title: "p99 latency vs forwarded load",
            x: "forwarded load (kpps)",
            y: "p99 latency (µs)",
            series: class_series(rows, tg, &|r, rt| {
                at_s0(r).then(|| (forwarded_kpps(r), p99(r, rt)))
            }),
            log_y: true,
        },
        Chart {
            name: "mean_latency_vs_load.png",
            title: "mean latency vs forwarded load",
            x: "forwarded load (kpps)",
            y: "mean latency (µs)",
            series: class_series(rows, tg, &|r, rt| {
                at_s0(r).then(|| (forwarded_kpps(r), mean(r, rt)))
            }),
            log_y: true,
        },
        Chart {
            name: "loss_vs_load.png",
            title: "loss vs sent load",
            x: "sent load (kpps, what the generator achieved)",
            y: "loss (% of sent)",
            series: class_series(rows, tg, &|r, rt| {
                at_s0(r).then(|| (r.sent_pps / 1000.0, loss_pct(r, rt)))
            }),
            log_y: false,
        },
        Chart {
            name: "cpu_vs_load.png",
            title: "router CPU vs forwarded load (llrouter: its process; kernel: softirq on the router CPU)",
            x: "forwarded load (kpps)",
            y: "router CPU (% of one core)",
            series: cpu,
            log_y: false,
        },
        Chart {
            name: "wakeups_vs_load.png",
            title: "wake-ups vs load (llrouter: worker/device wake-ups; kernel: NET_RX softirqs on the router CPU)",
            x: "forwarded load (kpps)",
            y: "wake-ups per second",
            series: wakeup_series(rows, tg, &|r| at_s0(r).then(|| forwarded_kpps(r))),
            log_y: true,
        },
    ]
}

/// The charts over RT share at the highest load.
fn share_charts(rows: &[Row], tg: &[Target], l_max: f64) -> Vec<Chart> {
    let at_max = |r: &Row| r.offered_pps == l_max;
    let throughput = by_x(
        tg.iter()
            .map(|t| {
                Series::new(
                    t.label(),
                    rows.iter()
                        .filter(|r| r.target == t.label() && at_max(r))
                        .map(|r| (r.rt_share, r.throughput_pps / 1000.0))
                        .collect(),
                )
            })
            .collect(),
    );
    vec![
        Chart {
            name: "latency_vs_rt_share.png",
            title: "p99 latency vs RT share",
            x: "RT share",
            y: "p99 latency (µs)",
            series: by_x(class_series(rows, tg, &|r, rt| {
                at_max(r).then(|| (r.rt_share, p99(r, rt)))
            })),
            log_y: true,
        },
        Chart {
            name: "mean_latency_vs_rt_share.png",
            title: "mean latency vs RT share",
            x: "RT share",
            y: "mean latency (µs)",
            series: by_x(class_series(rows, tg, &|r, rt| {
                at_max(r).then(|| (r.rt_share, mean(r, rt)))
            })),
            log_y: true,
        },
        Chart {
            name: "wakeups_vs_rt_share.png",
            title:
                "wake-ups vs RT share (paper 000's Fig. 6a: interrupts; kernel: NET_RX softirqs)",
            x: "RT share",
            y: "wake-ups per second",
            series: by_x(wakeup_series(rows, tg, &|r| {
                at_max(r).then_some(r.rt_share)
            })),
            log_y: true,
        },
        Chart {
            name: "loss_vs_rt_share.png",
            title: "loss vs RT share",
            x: "RT share",
            y: "loss (% of sent)",
            series: by_x(class_series(rows, tg, &|r, rt| {
                at_max(r).then(|| (r.rt_share, loss_pct(r, rt)))
            })),
            log_y: false,
        },
        Chart {
            name: "throughput_vs_rt_share.png",
            title: "throughput vs RT share",
            x: "RT share",
            y: "forwarded (kpps)",
            series: throughput,
            log_y: false,
        },
    ]
}

/// Draws the sweep's charts into `out`; returns the files made (a chart that cannot be drawn
/// is logged and left out).
pub fn plots(
    out: &Path,
    rows: &[Row],
    tg: &[Target],
    loads: &[f64],
    shares: &[f64],
) -> Vec<String> {
    let mut charts = Vec::new();
    if loads.len() > 1 {
        charts.extend(load_charts(rows, tg, shares[0]));
    }
    if shares.len() > 1 {
        charts.extend(share_charts(rows, tg, *loads.last().unwrap_or(&0.0)));
    }
    let mut made = Vec::new();
    for ch in charts {
        match line_chart(
            &out.join(ch.name),
            ch.title,
            ch.x,
            ch.y,
            &ch.series,
            ch.log_y,
        ) {
            Ok(()) => made.push(ch.name.to_owned()),
            Err(e) => tracing::warn!("plot {}: {e}", ch.name),
        }
    }
    made
}

/// Loss above this share of what was sent counts as the router's (noise on a VM stays below).
const LOSS_NOTE_THRESHOLD: f64 = 0.001;

/// What limited a point, for the findings: the generator only when it fell short of the
/// offered rate *and* the router forwarded what it got; when the router lost packets too, it
/// was overloaded even at the lower rate the generator reached.
pub fn limit_note(r: &Row) -> String {
    let short = r.offered_pps > 0.0 && r.sent_pps < 0.95 * r.offered_pps;
    let sent = (r.sent_rt + r.sent_be) as f64;
    let lost = r.loss_rt * r.sent_rt as f64 + r.loss_be * r.sent_be as f64;
    let loss = if sent > 0.0 { lost / sent } else { 0.0 };
    match (short, loss > LOSS_NOTE_THRESHOLD) {
        (true, false) => " (below the offered rate, and the router forwarded all of it: the generator, not the router, was the limit)".into(),
        (true, true) => format!(
            " (below the offered rate, and still {:.1} % lost: the router was overloaded at the rate the generator reached)",
            loss * 100.0
        ),
        (false, true) => format!(" ({:.1} % lost: the router was the limit)", loss * 100.0),
        (false, false) => String::new(),
    }
}

/// The setup paragraph of `report.md`.
fn setup_md(c: &Options) -> String {
    format!(
        "gen ns → router ns → sink ns over two veth pairs ({}), frame size {} B (no FCS), {} flows, {} gaps, {} s per point. \
         Generator `{}`, sink `{}`, threads pinned to CPU {}; router on {} (kernel: RPS; llrouter: {}, wake {}, budgets rt,be = {}, device budget {}, cost {} ns, tx batch {}, tx hold {} µs, Rx ring {} per class); generator bursts of {} frames{}. \
         Latency: sink CLOCK_MONOTONIC − send timestamp (bpf_ktime_get_ns in the XDP programs), per packet; xdp sink: log-linear buckets of 1/32 (3.1 %) resolution, udp sink: HDR. \
         Loss: 1 − unique received / sent per class. Noisy 2-core VM: repeat runs before trusting small differences.\n",
        if c.ipv6 { "IPv6" } else { "IPv4" },
        c.size, c.flows, choice_name(&c.gaps), c.point_secs, choice_name(&c.gen_backend),
        choice_name(&c.sink_backend), c.gen_cpu, cpus_md(c), workers_md(c), choice_name(&c.wake),
        match c.auto_budget_us {
            Some(us) => format!("{},auto (ll-wfq: target {us} µs, Eq. 2)", c.budgets.rt),
            None => c.budgets.to_string(),
        },
        c.device_budget, c.cost_ns, c.tx_batch, c.tx_hold_us, c.rx_size, c.gen_batch,
        if c.shield {
            "; every other task of the machine kept off the router's CPUs (`--shield`)"
        } else {
            "; other tasks of the machine may run on the router's CPUs (no `--shield`)"
        }
    )
}

/// `CPU 1` or `CPUs 1, 0 (veth: 2 queues)`.
fn cpus_md(c: &Options) -> String {
    let cpus = c.router_cpus();
    if cpus.len() == 1 && c.veth_queues() == 1 {
        return format!("CPU {}", cpus[0]);
    }
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    format!(
        "CPU{} {} (veth: {} queues)",
        if cpus.len() == 1 { "" } else { "s" },
        list.join(", "),
        c.veth_queues()
    )
}

/// `worker pinned` or `2 workers pinned, steering queues`.
fn workers_md(c: &Options) -> String {
    let w = if c.workers == 1 {
        "worker pinned".to_string()
    } else {
        format!("{} workers pinned, one per queue", c.workers)
    };
    match c.steering {
        llr_router::Steering::Xdp => w,
        s => format!(
            "{w}, steering {} (the generator puts each class in its own queue)",
            s.name()
        ),
    }
}

/// One finding per target: RT and BE p99 from its lowest to its highest load, loss there.
fn findings_md(s: &mut String, rows: &[Row]) {
    // Each target once, in order of first appearance (rounds interleave the targets).
    let mut targets: Vec<&str> = Vec::new();
    for r in rows {
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
    }
    for t in targets {
        let tr: Vec<&Row> = rows.iter().filter(|r| r.target == t).collect();
        let (Some(lo), Some(hi)) = (
            tr.iter()
                .min_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps)),
            tr.iter()
                .max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps)),
        ) else {
            continue;
        };
        let ratio = if lo.rt_p99_us > 0.0 {
            hi.rt_p99_us / lo.rt_p99_us
        } else {
            f64::NAN
        };
        let _ = writeln!(
            s,
            "- {t}: from {:.0} to {:.0} pps offered, RT p99 goes {:.1} → {:.1} µs (×{:.2}), BE p99 {:.1} → {:.1} µs; RT loss at the highest load {:.3} %, BE {:.3} %; generator achieved {:.0} pps at the highest setting{}.",
            lo.offered_pps, hi.offered_pps, lo.rt_p99_us, hi.rt_p99_us, ratio, lo.be_p99_us, hi.be_p99_us,
            hi.loss_rt * 100.0, hi.loss_be * 100.0, hi.sent_pps,
            limit_note(hi)
        );
    }
    noise_md(s, rows);
}

/// How noisy the machine was: steal time during the points (the hypervisor running others).
fn noise_md(s: &mut String, rows: &[Row]) {
    let max = rows.iter().map(|r| r.steal_pct).fold(f64::NAN, f64::max);
    if max.is_nan() {
        return;
    }
    let retried = rows.iter().filter(|r| r.attempts > 1).count();
    let still = rows
        .iter()
        .filter(|r| r.steal_pct > crate::measure::STEAL_LIMIT_PCT)
        .count();
    let _ = writeln!(
        s,
        "- noise: the most steal any CPU had during a point was {max:.1} %; {retried} of {} points were measured twice (steal above {} %), {still} of them still above it (flagged in the `steal_pct` column).",
        rows.len(),
        crate::measure::STEAL_LIMIT_PCT
    );
}

/// The model section: per llrouter point with a budget-limited BE ring, paper 000's Eq. 1 with
/// the measured x and ρRT against the RT ring's measured time-in-ring p99.
fn model_md(s: &mut String, rows: &[Row]) {
    let with: Vec<&Row> = rows.iter().filter(|r| !r.within_tmax.is_empty()).collect();
    if with.is_empty() {
        return;
    }
    s.push_str("\n## Paper 000's bound (Eq. 1) at each point\n\n\
        x: the worker's CPU time per frame served (all rings); ρRT: RT packets sent per second × x; \
        b: the BE ring budget; Tmax = b·x/(1−ρRT), the longest an RT frame should wait in its ring \
        when RT arrivals are smooth; RT ring p99: the worker's time-in-ring histogram (XDP receive → \
        served; its buckets, steps of 1.5–2×, make it a range). The sink's RT p99 also holds the path \
        outside the router (veth, generator and sink batching). With ρRT at 0.5 or more, the \
        bound grows without limit as ρRT → 1 and RT is protected only as far as RT alone fits. \
        Eq. 1 assumes frames that arrive one by one; the generator sends bursts of B frames \
        (`--gen-batch`; 1 for the `xsk` backend, which paces frame by frame) that reach the \
        ring together, where an RT frame can find up to B − 1 of its own burst ahead of it. \
        TB = (b + B − 1)·x/(1−ρRT) is the bound for such arrivals (every frame of a burst RT, \
        the worst case), and the like-for-like verdict is the one against TB; the one against \
        Tmax is Eq. 1's own, which holds as written only for B = 1.\n\n\
        | target | RT share | offered pps | fwd pps | x ns | ρRT | b | Tmax µs | B | TB µs | RT ring p99 µs | within TB | within Tmax | sink RT p99 µs |\n\
        |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in with {
        let us = |t: f64| {
            if t.is_nan() {
                "∞ (ρRT ≥ 1)".to_string()
            } else {
                format!("{t:.2}")
            }
        };
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.3} | {} | {} | {} | {} | {:.0}–{:.0} | {} | {} | {:.1} |",
            r.target,
            r.rt_share,
            r.offered_pps,
            r.throughput_pps,
            r.x_ns,
            r.rho_rt,
            r.be_budget,
            us(r.tmax_us),
            r.arrival_burst,
            us(r.tmax_burst_us),
            r.rt_ring_p99_lo_us,
            r.rt_ring_p99_us,
            r.within_tmax_burst,
            r.within_tmax,
            r.rt_p99_us
        );
    }
}

/// The per-grant cost section: `ns per grant = c_g + flushes · c_f + frames · x` over all rings
/// of each overloaded llrouter point (`c_g + frames · x` when the flushes do not vary enough to
/// tell them apart), the forwarded rates of ll-wfq and ll-rr against sq paired round by round,
/// and what the simulator with those costs predicts for the same ratios.
/// Which `testbed run` points the worker's grant and flush costs are fitted over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CostPoints {
    /// The overloaded ones (BE loss > 1 %), whose forwarding rates the simulator then
    /// predicts from the fitted costs.
    #[default]
    Overloaded,
    /// The ones below saturation (BE loss ≤ 1 %): a load every target carries, as the CPU per
    /// packet is measured. Costs and the simulator's flags only: no rate is limited there, so
    /// there is no forwarding ratio to predict.
    BelowSaturation,
}

/// The `at` points of `rows` a cost fit takes: llrouter's plain poll loop (a strategy, not its
/// flow path, whose turns are not grants) with grant counters.
fn cost_points(rows: &[Row], at: CostPoints) -> Vec<&Row> {
    (rows.iter())
        .filter(|r| {
            (r.target.strip_prefix("llrouter:")).is_some_and(|k| k.parse::<StrategyKind>().is_ok())
        })
        .filter(|r| (r.loss_be > 0.01) == (at == CostPoints::Overloaded))
        .filter(|r| {
            r.frames_per_grant.is_finite()
                && r.flushes_per_grant.is_finite()
                && r.ns_per_grant.is_finite()
        })
        .collect()
}

// With the worker's time inside flushes counted, a frame's cost also splits into its receive
// part (at service) and its transmit part (in the flush), as the live worker pays them; the
// three-way fit uses the same points without the flushes' time.
fn split_points(over: &[&Row]) -> Vec<llr_sim::model::SplitPoint> {
    (over.iter())
        .map(|r| llr_sim::model::SplitPoint {
            round: r.round,
            frames: r.frames_per_grant,
            flushes: r.flushes_per_grant,
            flushed: r.flushed_per_grant,
            ns: r.ns_per_grant,
            flush_ns: r.flush_ns_per_grant,
        })
        .collect()
}

/// The receive/transmit split of the worker's costs, where every part came out non-negative.
fn fit_split(split_pts: &[llr_sim::model::SplitPoint]) -> Option<llr_sim::model::SplitCost> {
    llr_sim::model::fit_split_cost(split_pts).filter(|k| {
        [k.grant_ns, k.frame_ns, k.flush_ns, k.flush_frame_ns]
            .iter()
            .all(|v| *v >= 0.0)
    })
}

/// One strategy's CPU per packet against sq's below saturation: live, one ratio per round,
/// and the calibrated simulator's busy time against sq's at the same rate and share.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuRatio {
    pub kind: StrategyKind,
    pub rt_share: f64,
    pub offered_pps: f64,
    pub live: Vec<f64>,
    pub sim: Option<f64>,
}

/// The simulator calibrated from a run's points below saturation (`testbed costs
/// --below-saturation`): the worker's fitted costs, the generator's burst it replays, and
/// each strategy's CPU ratio to sq, live and simulated.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub cost: llr_sim::model::SplitCost,
    pub burst: u32,
    pub ratios: Vec<CpuRatio>,
}

/// [`Calibration`] of `rows` run with `c`; `None` when no split of the costs is identified.
pub fn calibrate(c: &Options, rows: &[Row]) -> Option<Calibration> {
    let over = cost_points(rows, CostPoints::BelowSaturation);
    let cost = fit_split(&split_points(&over))?;
    let burst = over.first().map_or(1, |r| r.arrival_burst.max(1));
    Some(Calibration {
        cost,
        burst,
        ratios: cpu_ratios(c, &over, cost, burst),
    })
}

fn grant_cost_md(s: &mut String, c: &Options, rows: &[Row], at: CostPoints) {
    let over = cost_points(rows, at);
    let split_pts = split_points(&over);
    let pts: Vec<llr_sim::model::GrantPoint> = split_pts.iter().map(Into::into).collect();
    let cost = llr_sim::model::fit_grant_flush_cost(&pts).or_else(|| {
        let two: Vec<(f64, f64)> = pts.iter().map(|p| (p.frames, p.ns)).collect();
        let (grant_ns, frame_ns) = llr_sim::model::fit_grant_cost(&two)?;
        Some(llr_sim::model::GrantCost {
            grant_ns,
            flush_ns: 0.0,
            frame_ns,
        })
    });
    let Some(cost) = cost else {
        return;
    };
    let (c_g, c_f, x) = (cost.grant_ns, cost.flush_ns, cost.frame_ns);
    let split = fit_split(&split_pts);
    // A negative cost is no cost: the points did not vary enough to tell grants from flushes,
    // and a simulator fed with it would predict nothing.
    let identified = c_g >= 0.0 && c_f >= 0.0;
    let which = match at {
        CostPoints::Overloaded => "overloaded llrouter points (BE loss > 1 %)",
        CostPoints::BelowSaturation => "llrouter points below saturation (BE loss ≤ 1 %)",
    };
    let _ = write!(
        s,
        "\n## The cost of a grant (issue 16)\n\nFitted over the {} {which}, every ring together: \
         ns per grant = c_g + flushes · c_f + frames · x with **c_g = {c_g:.0} ns, c_f = {c_f:.0} ns, x = {x:.0} ns** \
         (x one per round, as the machine's speed moves between rounds; the median shown and used). \
         A flush is the transmit kick after a grant of a higher ring (once its frames waited `tx-hold-us` or the batch is full) \
         or after the lowest ring's once `tx-batch` frames wait; it sends the frames of earlier grants too, which is why the fit \
         takes every ring together. The worker caps a grant at 32 frames.\n\n\
         | target | frames per grant | flushes per grant | ns per grant | fit | highest ring: frames, flushes per grant | lowest ring: frames, flushes per grant |\n|---|---|---|---|---|---|---|\n",
        over.len()
    );
    for r in &over {
        let ring = |n: f64, f: f64| {
            if n.is_finite() && f.is_finite() {
                format!("{n:.1}, {f:.2}")
            } else {
                "—".into()
            }
        };
        let _ = writeln!(
            s,
            "| {} (RT {}, {:.0} pps) | {:.1} | {:.3} | {:.0} | {:.0} | {} | {} |",
            r.target,
            r.rt_share,
            r.offered_pps,
            r.frames_per_grant,
            r.flushes_per_grant,
            r.ns_per_grant,
            c_g + r.flushes_per_grant * c_f + r.frames_per_grant * x,
            ring(r.hi_frames_per_grant, r.hi_flushes_per_grant),
            ring(r.lo_frames_per_grant, r.lo_flushes_per_grant),
        );
    }
    if at == CostPoints::BelowSaturation {
        if !identified && split.is_some() {
            s.push_str("\nThe three-way fit above has a negative cost: below saturation every target's flushes grow with its \
                frames, so grants cannot be told from flushes that way. The split below measures the flushes' time directly.\n");
        }
        let burst = over.first().map_or(1, |r| r.arrival_burst.max(1));
        calibration_md(s, identified.then_some(cost), split, burst);
        if let Some(k) = split {
            cpu_ratio_md(s, c, &over, k, burst);
        }
        return;
    }
    // Within a round the targets ran back to back; across rounds the machine's speed wanders
    // more than the ratio does, so each round gives one ratio.
    let paired = |label: &str, share: f64, hold: Option<u32>| -> Vec<f64> {
        (over.iter())
            .filter(|r| r.target == label && r.rt_share == share && r.tx_hold_us == hold)
            .filter_map(|r| {
                let sq = over.iter().find(|q| {
                    q.target == "llrouter:sq"
                        && q.rt_share == share
                        && q.round == r.round
                        && q.tx_hold_us == hold
                })?;
                Some(r.throughput_pps / sq.throughput_pps)
            })
            .collect()
    };
    let mut points: Vec<(Option<u32>, f64)> =
        over.iter().map(|r| (r.tx_hold_us, r.rt_share)).collect();
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    points.dedup();
    // The simulator gets the rate the generator reached at that share (the sq points').
    let sent = |share: f64| -> Option<f64> {
        let v: Vec<f64> = (over.iter())
            .filter(|r| r.target == "llrouter:sq" && r.rt_share == share)
            .map(|r| r.sent_pps)
            .collect();
        crate::summary::spread(&v).map(|(m, _, _)| m)
    };
    let sim = |kind: StrategyKind,
               share: f64,
               hold: Option<u32>,
               split: Option<llr_sim::model::SplitCost>|
     -> Option<f64> {
        // Without the split, a frame's whole cost is paid at its service.
        let k = split.unwrap_or(llr_sim::model::SplitCost {
            grant_ns: c_g.max(0.0),
            frame_ns: x,
            flush_ns: c_f.max(0.0),
            flush_frame_ns: 0.0,
        });
        let mut cfg = replay_config(c, kind, share, hold, k, 300_000);
        if let Some(pps) = sent(share).filter(|p| *p > 0.0) {
            cfg.rate = llr_sim::Rate::Pps(pps);
        }
        let r = llr_sim::run(&cfg).ok()?;
        let delivered: u64 = r.classes.iter().map(|k| k.delivered).sum();
        Some(delivered as f64 * 1e9 / r.sim_time_ns)
    };
    let mut lines = String::new();
    for (hold, share) in points {
        for (label, kind) in [
            ("llrouter:ll-wfq", StrategyKind::LlWfq),
            ("llrouter:ll-rr", StrategyKind::LlRr),
        ] {
            let ratios = paired(label, share, hold);
            let Some((med, lo, hi)) = crate::summary::spread(&ratios) else {
                continue;
            };
            let predicted = match identified.then(|| {
                (
                    sim(StrategyKind::Sq, share, hold, None),
                    sim(kind, share, hold, None),
                )
            }) {
                Some((Some(a), Some(b))) if a > 0.0 => format!("**{:.3}**", b / a),
                _ => "—".into(),
            };
            let split_col = match split.map(|k| {
                (
                    sim(StrategyKind::Sq, share, hold, Some(k)),
                    sim(kind, share, hold, Some(k)),
                )
            }) {
                Some((Some(a), Some(b))) if a > 0.0 => format!(" **{:.3}** |", b / a),
                _ if split.is_some() => " — |".into(),
                _ => String::new(),
            };
            let _ = writeln!(
                lines,
                "| {} | {share} | {} | {} | **{med:.3}** | {lo:.3}–{hi:.3} | {predicted} |{split_col}",
                hold.map_or("—".into(), |h| h.to_string()),
                &label["llrouter:".len()..],
                ratios.len()
            );
        }
    }
    if !identified {
        s.push_str("\nA negative cost: these points cannot tell the cost of a grant from that of a flush (with `tx-hold-us` above 0 every \
            strategy flushes about once per `tx-batch` frames under overload). Calibrate with `--tx-hold-us 0`, where ll-wfq and ll-rr \
            flush after every RT grant and sq once per grant; the costs do not depend on the hold. No simulator prediction from this fit.\n");
    }
    if !lines.is_empty() {
        if let Some(k) = split {
            let _ = write!(
                s,
                "\nWith the worker's time inside transmit flushes counted apart, a frame's cost splits into its receive part, paid at its \
                 service, and its transmit part, paid in the flush that sends it (one per-frame cost per round for each; medians): \
                 **receive {:.0} ns per grant + {:.0} ns per frame, transmit {:.0} ns per flush + {:.0} ns per frame flushed**. \
                 The last column runs the simulator with that split: a grant then lasts as long as it does live, which is what \
                 `tx-hold-us` is measured against.\n",
                k.grant_ns, k.frame_ns, k.flush_ns, k.flush_frame_ns
            );
        }
        let (head, rule) = if split.is_some() {
            (" sim, split |", "---|")
        } else {
            ("", "")
        };
        let _ = write!(
            s,
            "\nForwarded pps against sq's in the same round (median and range over rounds), and the simulator's ratio at the rate sq's generator reached (median) with the fitted c_g, c_f and x:\n\n\
            | tx-hold-us | RT share | target | rounds | ratio to sq | range | sim ratio |{head}\n|---|---|---|---|---|---|---|{rule}\n"
        );
        s.push_str(&lines);
    }
}

/// The simulator set up as the testbed ran `kind` (the runs' ring budgets, ll-rr's both BE's;
/// device budget, ring size, transmit batch and grant cap) at RT share `share` and
/// `tx-hold-us` `hold` (the runs' default if unrecorded), paying the worker's costs `k`, for
/// `packets` arrivals in overload; the caller sets the rate and the arrivals it replays.
fn replay_config(
    c: &Options,
    kind: StrategyKind,
    share: f64,
    hold: Option<u32>,
    k: llr_sim::model::SplitCost,
    packets: u64,
) -> llr_sim::SimConfig {
    let budgets = if kind == StrategyKind::LlRr {
        [c.budgets.be.get(), c.budgets.be.get()]
    } else {
        [c.budgets.rt.get(), c.budgets.be.get()]
    };
    let sched = llr_core::sched::SchedConfig::new(kind, &["rt", "be"]).with_budgets(&budgets);
    let mut cfg = llr_sim::SimConfig::paper000(sched, share, 3.0, packets);
    cfg.sched.device_budget = c.device_budget;
    cfg.ring_size = c.rx_size as usize;
    cfg.service.override_ns = Some(k.frame_ns.max(1.0));
    cfg.service.grant_ns = k.grant_ns;
    cfg.service.flush_ns = k.flush_ns;
    cfg.service.flush_frame_ns = k.flush_frame_ns;
    cfg.service.tx_batch = c.tx_batch;
    cfg.service.tx_hold_ns = u64::from(hold.unwrap_or(c.tx_hold_us)) * 1000;
    cfg.service.max_grant = 32;
    cfg
}

/// The simulator's flags for the fitted costs: the receive/transmit split where it was
/// identified (a grant then lasts as long as it does live), else the three-way fit.
fn calibration_md(
    s: &mut String,
    cost: Option<llr_sim::model::GrantCost>,
    split: Option<llr_sim::model::SplitCost>,
    burst: u32,
) {
    let flags = match (split, cost) {
        (Some(k), _) => format!(
            "--service-ns {:.0} --grant-ns {:.0} --flush-ns {:.0} --flush-frame-ns {:.0}",
            k.frame_ns.max(1.0),
            k.grant_ns,
            k.flush_ns,
            k.flush_frame_ns
        ),
        (None, Some(g)) => format!(
            "--service-ns {:.0} --grant-ns {:.0} --flush-ns {:.0}",
            g.frame_ns.max(1.0),
            g.grant_ns,
            g.flush_ns
        ),
        (None, None) => {
            s.push_str("\nA negative cost: these points cannot tell the cost of a grant from that of a flush or a frame; \
                add targets whose grants differ in size (sq, rr, ll-rr, ll-wfq in the same rounds). No calibration.\n");
            return;
        }
    };
    if let Some(k) = split {
        let _ = write!(
            s,
            "\nReceive {:.0} ns per grant + {:.0} ns per frame, transmit {:.0} ns per flush + {:.0} ns per frame flushed \
             (one per-frame cost per round for each; medians).\n",
            k.grant_ns, k.frame_ns, k.flush_ns, k.flush_frame_ns
        );
    }
    let arrivals = if burst > 1 {
        format!(" --arrivals batch --batch-size {burst}")
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "\nThe simulator, calibrated: `llrouter sim {flags}{arrivals}` (the generator's bursts as its arrivals)"
    );
}

/// Below saturation: each strategy's CPU per packet against sq's in the same round, live, and
/// the calibrated simulator's busy time against sq's at the same offered rate and share, with
/// the generator's bursts.
fn cpu_ratios(
    c: &Options,
    rows: &[&Row],
    k: llr_sim::model::SplitCost,
    burst: u32,
) -> Vec<CpuRatio> {
    let sim_busy = |kind: StrategyKind, r: &Row| -> Option<f64> {
        let mut cfg = replay_config(c, kind, r.rt_share, r.tx_hold_us, k, 400_000);
        cfg.rate = llr_sim::Rate::Pps(r.offered_pps);
        if burst > 1 {
            cfg.arrivals = llr_sim::Arrivals::Batch { size: burst };
        }
        Some(llr_sim::run(&cfg).ok()?.utilization)
    };
    let mut out = Vec::new();
    let mut points: Vec<(f64, f64)> = rows.iter().map(|r| (r.rt_share, r.offered_pps)).collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    points.dedup();
    for (share, pps) in points {
        let at = |r: &&&Row| r.rt_share == share && r.offered_pps == pps;
        let Some(sq_row) = rows.iter().filter(at).find(|r| r.target == "llrouter:sq") else {
            continue;
        };
        let sim_sq = sim_busy(StrategyKind::Sq, sq_row);
        for kind in [StrategyKind::Rr, StrategyKind::LlRr, StrategyKind::LlWfq] {
            let label = format!("llrouter:{}", kind.name());
            let live: Vec<f64> = (rows.iter().filter(at))
                .filter(|r| r.target == label)
                .filter_map(|r| {
                    let sq = rows
                        .iter()
                        .filter(at)
                        .find(|q| q.target == "llrouter:sq" && q.round == r.round)?;
                    Some(r.router_ns_per_pkt / sq.router_ns_per_pkt)
                })
                .filter(|x| x.is_finite())
                .collect();
            if live.is_empty() {
                continue;
            }
            let row = rows.iter().filter(at).find(|r| r.target == label);
            let sim = match (sim_sq, row.and_then(|r| sim_busy(kind, r))) {
                (Some(a), Some(b)) if a > 0.0 => Some(b / a),
                _ => None,
            };
            out.push(CpuRatio {
                kind,
                rt_share: share,
                offered_pps: pps,
                live,
                sim,
            });
        }
    }
    out
}

/// [`cpu_ratios`] as a table.
fn cpu_ratio_md(
    s: &mut String,
    c: &Options,
    rows: &[&Row],
    k: llr_sim::model::SplitCost,
    burst: u32,
) {
    let mut lines = String::new();
    for r in cpu_ratios(c, rows, k, burst) {
        let Some((med, lo, hi)) = crate::summary::spread(&r.live) else {
            continue;
        };
        let sim = r.sim.map_or("—".into(), |v| format!("**{v:.3}**"));
        let _ = writeln!(
            lines,
            "| {} | {:.0} | {} | {} | **{med:.3}** | {lo:.3}–{hi:.3} | {sim} |",
            r.rt_share,
            r.offered_pps,
            r.kind.name(),
            r.live.len()
        );
    }
    if !lines.is_empty() {
        s.push_str(
            "\nCPU per forwarded packet against sq's in the same round (median and range over rounds), and the calibrated \
             simulator's busy time against sq's at the same offered rate:\n\n\
             | RT share | offered pps | target | rounds | live ratio to sq | range | sim ratio |\n|---|---|---|---|---|---|---|\n",
        );
        s.push_str(&lines);
    }
}

/// The rows of `results.csv` files of several runs, each run's rounds numbered after the last
/// one's (its round r becomes 1000·k + r for the k-th file), so that a fit with one per-frame
/// cost per round and the pairing of targets within a round stay within one run.
pub fn read_runs(paths: &[&Path]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (k, p) in paths.iter().enumerate() {
        let text = std::fs::read_to_string(p)
            .map_err(|e| LabError::io(format!("read {}", p.display()), e))?;
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        for (i, r) in rd.deserialize::<Row>().enumerate() {
            let mut r = r.map_err(|e| {
                LabError::invalid("results", format!("{} row {}: {e}", p.display(), i + 1))
            })?;
            r.round += 1000 * k as u32;
            rows.push(r);
        }
    }
    Ok(rows)
}

/// The grant and flush costs fitted over the `at` points of `rows` (e.g. [`read_runs`] of
/// runs at several `tx-hold-us`); for overloaded points also the ratios to sq per hold and
/// share and the simulator's ratios, below saturation the simulator's flags. Empty when no
/// llrouter point with grant counters is of the kind asked for.
pub fn costs_md(c: &Options, rows: &[Row], at: CostPoints) -> String {
    let mut s = String::new();
    grant_cost_md(&mut s, c, rows, at);
    s
}

/// `report.md` of a sweep: setup, the rows, findings, targets not measured, plots.
pub fn report_md(c: &Options, rows: &[Row], plots: &[String], errors: &[String]) -> String {
    let mut s = String::from("# llrouter testbed run\n\n## Setup\n\n");
    s.push_str(&setup_md(c));
    s.push('\n');
    s.push_str("## Results\n\n| target | RT share | offered pps | sent pps | fwd pps | RT loss | BE loss | RT p50 µs | RT p99 µs | BE p50 µs | BE p99 µs | backlog drops | router ns/pkt | wake-ups/s | steal % |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.4} | {:.4} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.0} | {:.0} | {:.1}{} |",
            r.target, r.rt_share, r.offered_pps, r.sent_pps, r.throughput_pps, r.loss_rt, r.loss_be,
            r.rt_p50_us, r.rt_p99_us, r.be_p50_us, r.be_p99_us, r.backlog_drops, r.router_ns_per_pkt,
            r.wakeups_per_s, r.steal_pct,
            if r.steal_pct > crate::measure::STEAL_LIMIT_PCT { " (noisy)" } else { "" }
        );
    }
    model_md(&mut s, rows);
    grant_cost_md(&mut s, c, rows, CostPoints::Overloaded);
    s.push_str("\n## Findings (computed from the rows above)\n\n");
    findings_md(&mut s, rows);
    for e in errors {
        let _ = writeln!(s, "- not measured: {e}");
    }
    if !plots.is_empty() {
        s.push_str("\n## Plots\n\n");
        for p in plots {
            let _ = writeln!(s, "![{p}]({p})");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mean-latency, CPU and wake-up charts carry the rows' values: the mean (not the
    /// p99) per class, the CPU as ns per packet × packets per second, wake-ups against the RT
    /// share at the highest load only.
    #[test]
    fn mean_cpu_and_wakeup_charts_carry_the_rows() {
        let t = Target::Llrouter(StrategyKind::LlWfq);
        let row = |offered: f64, share: f64| Row {
            target: t.label(),
            offered_pps: offered,
            sent_pps: offered,
            throughput_pps: offered,
            rt_share: share,
            rt_mean_us: offered / 1e3,
            rt_p99_us: 1e6,
            be_mean_us: 2.0 * offered / 1e3,
            router_ns_per_pkt: 500.0,
            wakeups_per_s: share * 1e4,
            ..Default::default()
        };
        let rows = [row(1e5, 0.1), row(2e5, 0.1), row(2e5, 0.3), row(1e5, 0.3)];
        let tg = [t];
        let by_name = |charts: Vec<Chart>, name: &str| {
            charts
                .into_iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("no {name}"))
                .series
        };
        let mean = by_name(load_charts(&rows, &tg, 0.1), "mean_latency_vs_load.png");
        assert_eq!(mean[0].points, [(100.0, 100.0), (200.0, 200.0)]);
        assert_eq!(mean[1].points, [(100.0, 200.0), (200.0, 400.0)]);
        let cpu = by_name(load_charts(&rows, &tg, 0.1), "cpu_vs_load.png");
        // 500 ns per packet at 100 and 200 kpps: 5 % and 10 % of a core
        assert_eq!(cpu[0].points, [(100.0, 5.0), (200.0, 10.0)]);
        let w = by_name(share_charts(&rows, &tg, 2e5), "wakeups_vs_rt_share.png");
        assert_eq!(w[0].points, [(0.1, 1000.0), (0.3, 3000.0)]);
        let m = by_name(
            share_charts(&rows, &tg, 2e5),
            "mean_latency_vs_rt_share.png",
        );
        assert_eq!(m[0].points, [(0.1, 200.0), (0.3, 200.0)]);
    }

    #[test]
    fn limit_note_blames_the_generator_only_without_loss() {
        let r = |offered: f64, sent: f64, loss_be: f64| Row {
            offered_pps: offered,
            sent_pps: sent,
            sent_rt: 300,
            sent_be: 700,
            loss_be,
            ..Default::default()
        };
        // Short of the offered rate, nothing lost: the generator was the limit.
        assert!(limit_note(&r(2e6, 1.5e6, 0.0)).contains("the generator, not the router"));
        // Short of it and 49 % lost (sq at 2 Mpps): the router, not the generator.
        let n = limit_note(&r(2e6, 1.5e6, 0.7));
        assert!(!n.contains("the generator, not the router"), "{n}");
        assert!(
            n.contains("49.0 % lost") && n.contains("router was overloaded"),
            "{n}"
        );
        // Rate reached and loss: the router.
        assert!(limit_note(&r(2e6, 2e6, 0.7)).contains("router was the limit"));
        assert_eq!(limit_note(&r(2e6, 2e6, 0.0)), "");
    }

    #[test]
    fn the_grant_cost_is_fitted_over_overloaded_rows_and_simulated() {
        // Per point over every ring: (frames, flushes) per grant, ns from the plane
        // 1000 + 500·flushes + 2000·frames exactly.
        let t = |n: f64, f: f64| 1000.0 + 500.0 * f + 2000.0 * n;
        let row = |target: &str, round: u32, all: (f64, f64), fwd: f64| Row {
            target: target.into(),
            round,
            rt_share: 0.3,
            offered_pps: 3e6,
            loss_be: 0.5,
            throughput_pps: fwd,
            frames_per_grant: all.0,
            flushes_per_grant: all.1,
            ns_per_grant: t(all.0, all.1),
            hi_frames_per_grant: all.0 + 1.0,
            hi_flushes_per_grant: 1.0,
            ..Default::default()
        };
        let none = (f64::NAN, f64::NAN);
        let rows = [
            row("llrouter:sq", 1, (32.0, 1.0), 480_000.0),
            row("llrouter:ll-wfq", 1, (6.0, 0.4), 440_000.0),
            row("llrouter:ll-rr", 1, (4.0, 0.3), 432_000.0),
            row("kernel", 1, none, 400_000.0),
            // A slower round: the ratio within it is what counts.
            row("llrouter:sq", 2, (32.0, 1.0), 400_000.0),
            row("llrouter:ll-wfq", 2, (6.0, 0.4), 380_000.0),
        ];
        let c = Options::new(&[Target::Kernel], "/tmp".into());
        let mut s = String::new();
        grant_cost_md(&mut s, &c, &rows, CostPoints::Overloaded);
        assert!(
            s.contains("c_g = 1000 ns, c_f = 500 ns, x = 2000 ns"),
            "{s}"
        );
        // Round 1: 440/480 = 0.917, round 2: 380/400 = 0.950.
        assert!(
            s.contains("| 0.3 | ll-wfq | 2 | **0.933** | 0.917–0.950 | **"),
            "{s}"
        );
        assert!(
            s.contains("| 0.3 | ll-rr | 1 | **0.900** | 0.900–0.900 | **"),
            "{s}"
        );
        // The same frames and flushes fitted without flushes: the two-way fit is the fallback.
        let flat: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                flushes_per_grant: 1.0,
                ns_per_grant: 1000.0 + 2000.0 * r.frames_per_grant,
                ..r.clone()
            })
            .collect();
        let mut s = String::new();
        grant_cost_md(&mut s, &c, &flat, CostPoints::Overloaded);
        assert!(s.contains("c_g = 1000 ns, c_f = 0 ns, x = 2000 ns"), "{s}");
        assert!(!s.contains("cannot tell"), "{s}");
        // A fit with a negative cost is shown, called what it is, and not simulated.
        let odd: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                ns_per_grant: 1000.0 - 500.0 * r.flushes_per_grant + 2000.0 * r.frames_per_grant,
                ..r.clone()
            })
            .collect();
        let mut s = String::new();
        grant_cost_md(&mut s, &c, &odd, CostPoints::Overloaded);
        assert!(s.contains("c_f = -500 ns"), "{s}");
        assert!(
            s.contains("cannot tell the cost of a grant from that of a flush"),
            "{s}"
        );
        assert!(
            s.contains("| 0.3 | ll-wfq | 2 | **0.933** | 0.917–0.950 | — |"),
            "{s}"
        );
        // Not overloaded: nothing to fit.
        let calm: Vec<Row> = rows
            .iter()
            .map(|r| Row {
                loss_be: 0.0,
                ..r.clone()
            })
            .collect();
        let mut s = String::new();
        grant_cost_md(&mut s, &c, &calm, CostPoints::Overloaded);
        assert!(s.is_empty(), "{s}");
    }

    #[test]
    fn below_saturation_the_costs_calibrate_the_simulator() {
        // Receive 265 ns a grant + x a frame (x one per round), transmit 1200 ns a flush +
        // 1300 ns a frame flushed, exactly.
        let row = |target: &str, round: u32, x: f64, frames: f64, flushes: f64| {
            let flushed = frames;
            let flush_ns = 1200.0 * flushes + 1300.0 * flushed;
            Row {
                target: target.into(),
                round,
                rt_share: 0.3,
                offered_pps: 2e5,
                throughput_pps: 2e5,
                loss_be: 0.0,
                frames_per_grant: frames,
                flushes_per_grant: flushes,
                flushed_per_grant: flushed,
                flush_ns_per_grant: flush_ns,
                ns_per_grant: 265.0 + x * frames + flush_ns,
                router_ns_per_pkt: match target {
                    "llrouter:sq" => 1000.0,
                    "llrouter:rr" => 1010.0,
                    _ => 1050.0,
                },
                arrival_burst: 32,
                ..Default::default()
            }
        };
        let mut rows = Vec::new();
        for (round, x) in [(1, 70.0), (2, 76.0), (3, 90.0)] {
            rows.push(row("llrouter:sq", round, x, 32.0, 1.0));
            rows.push(row("llrouter:rr", round, x, 16.0, 0.5));
            rows.push(row("llrouter:ll-wfq", round, x, 4.5, 0.22));
        }
        // An overloaded point is not one of them.
        rows.push(Row {
            loss_be: 0.5,
            ns_per_grant: 1e6,
            ..row("llrouter:ll-rr", 1, 70.0, 5.0, 0.3)
        });
        let c = Options::new(&[Target::Kernel], "/tmp".into());
        let mut s = String::new();
        grant_cost_md(&mut s, &c, &rows, CostPoints::BelowSaturation);
        assert!(
            s.contains("Fitted over the 9 llrouter points below saturation"),
            "{s}"
        );
        assert!(
            s.contains("Receive 265 ns per grant + 76 ns per frame, transmit 1200 ns per flush + 1300 ns per frame flushed"),
            "{s}"
        );
        assert!(
            s.contains("`llrouter sim --service-ns 76 --grant-ns 265 --flush-ns 1200 --flush-frame-ns 1300 --arrivals batch --batch-size 32`"),
            "{s}"
        );
        assert!(
            !s.contains("Forwarded pps against sq's"),
            "no forwarding ratios below saturation: {s}"
        );
        // CPU per packet against sq's, live per round, beside the calibrated simulator's: its
        // ll-wfq, with a flush after every RT grant and BE grants of 4, pays more than sq.
        let line = |target: &str| {
            s.lines()
                .find(|l| l.starts_with(&format!("| 0.3 | 200000 | {target} | 3 |")))
                .unwrap_or_else(|| panic!("no {target} line: {s}"))
                .to_string()
        };
        assert!(line("rr").contains("| **1.010** | 1.010–1.010 |"), "{s}");
        let wfq = line("ll-wfq");
        assert!(wfq.contains("| **1.050** | 1.050–1.050 |"), "{s}");
        let sim: f64 = wfq
            .trim_end_matches(" |")
            .rsplit("**")
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert!(sim > 1.0 && sim < 1.5, "sim ratio {sim}: {wfq}");
        // The typed calibration the results topic reads is the table's, and a flow-path
        // point (its turns are not grants) is left out of the fit.
        let mut with_flows = rows.clone();
        with_flows.push(Row {
            ns_per_grant: 1e6,
            ..row("llrouter:ll-wfq+flows", 1, 70.0, 5.0, 0.3)
        });
        let cal = calibrate(&c, &with_flows).expect("a calibration");
        assert_eq!(cal.burst, 32);
        let k = cal.cost;
        let near = |a: f64, b: f64| (a - b).abs() < 0.5;
        assert!(near(k.grant_ns, 265.0) && near(k.frame_ns, 76.0), "{k:?}");
        assert!(
            near(k.flush_ns, 1200.0) && near(k.flush_frame_ns, 1300.0),
            "{k:?}"
        );
        let of = |kind| cal.ratios.iter().find(|r| r.kind == kind).unwrap();
        assert_eq!(of(StrategyKind::LlWfq).live, [1.05; 3]);
        assert!((of(StrategyKind::LlWfq).sim.unwrap() - sim).abs() < 1e-3);
        assert!(cal.ratios.iter().all(|r| r.kind != StrategyKind::LlRr));
        // The same rows asked for overloaded points: only the one, too few to fit.
        let mut s = String::new();
        grant_cost_md(&mut s, &c, &rows[..9], CostPoints::Overloaded);
        assert!(s.is_empty(), "{s}");
    }

    #[test]
    fn the_simulator_pays_for_the_flushes_the_worker_makes() {
        // With only a flush cost, sq (one flush per 32-frame grant) forwards more than ll-wfq
        // (a flush after every RT grant), and both forward less than without it; letting RT
        // frames wait for the batch gives ll-wfq most of it back.
        let run = |kind: StrategyKind, flush_ns: f64, hold_ns: u64| -> f64 {
            let budgets = [60, 4];
            let sched =
                llr_core::sched::SchedConfig::new(kind, &["rt", "be"]).with_budgets(&budgets);
            let mut cfg = llr_sim::SimConfig::paper000(sched, 0.15, 3.0, 100_000);
            cfg.service.override_ns = Some(1000.0);
            cfg.service.flush_ns = flush_ns;
            cfg.service.tx_hold_ns = hold_ns;
            cfg.service.max_grant = 32;
            let r = llr_sim::run(&cfg).unwrap();
            let delivered: u64 = r.classes.iter().map(|k| k.delivered).sum();
            delivered as f64 * 1e9 / r.sim_time_ns
        };
        let at = |kind, flush_ns| run(kind, flush_ns, 0);
        let (sq0, wfq0) = (at(StrategyKind::Sq, 0.0), at(StrategyKind::LlWfq, 0.0));
        let (sq, wfq) = (
            at(StrategyKind::Sq, 5000.0),
            at(StrategyKind::LlWfq, 5000.0),
        );
        assert!((wfq0 / sq0 - 1.0).abs() < 0.02, "{sq0} {wfq0}");
        assert!(sq < sq0 && wfq < wfq0, "{sq0} {sq} {wfq0} {wfq}");
        assert!(wfq / sq < 0.95, "{sq} {wfq}");
        // Held, every flush carries the 16-frame batch at best against sq's 32-frame grants:
        // (1000 + 5000/32) / (1000 + 5000/16) = 0.881.
        let held = run(StrategyKind::LlWfq, 5000.0, 20_000);
        assert!(held > wfq * 1.1, "{sq} {wfq} {held}");
        assert!((held / sq - 0.881).abs() < 0.03, "{sq} {wfq} {held}");
    }

    #[test]
    fn csv_keeps_the_columns_and_their_precision() {
        let r = Row {
            round: 2,
            target: "llrouter:ll-wfq".into(),
            rt_share: 0.3,
            offered_pps: 20000.4,
            loss_rt: 0.5,
            rt_p99_us: 12.345,
            router_cpu_s: 0.1234,
            router_ns_per_pkt: 812.34,
            wakeups_per_s: f64::NAN,
            steal_pct: 7.25,
            router_softirq_pct: 41.0,
            attempts: 2,
            hi_ring_drops: 3,
            stall_max_us: 812.25,
            worker_ns_per_pkt: 640.06,
            arrival_burst: 32,
            tmax_burst_us: 40.127,
            within_tmax_burst: "yes".into(),
            sink_drops: 17,
            worker_wait_us: 1234.56,
            worker_preemptions: Some(9),
            ..Default::default()
        };
        let text = csv_text(&[CsvRow::from(&r)], "").unwrap();
        let mut lines = text.lines();
        // The header is the serialized field names, in file order.
        assert_eq!(lines.next(), Some(RESULTS_HEADER));
        assert_eq!(
            lines.next(),
            Some("llrouter:ll-wfq,0.3,20000,0,0,0,0,0,0.500000,0.000000,0,0,0.00,0.00,12.35,0.00,0.00,0.00,0.00,0.00,0,0.123,812.3,2,NaN,7.2,41.0,2,0.0,0.0000,0,0.00,0,0,,0.00,0,0.00,0,0.000,0.000,0.00,0.000,0,,0,0.000,3,0,812.2,640.1,32,40.13,yes,17,1234.6,9")
        );
        assert_eq!(
            csv_text::<CsvRow<'_>>(&[], RESULTS_HEADER).unwrap(),
            format!("{RESULTS_HEADER}\n")
        );
        let m = Mlffr {
            target: "kernel".into(),
            round: 1,
            pps: 123456.7,
            gen_limited: true,
        };
        let text = csv_text(&[MlffrCsvRow::new(&m, 0.001)], "").unwrap();
        assert_eq!(
            text,
            format!("{MLFFR_HEADER}\nkernel,1,123457,0.001,true\n")
        );
    }
}
