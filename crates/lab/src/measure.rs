//! One measurement point: the generator (gen ns) and sink (sink ns) as threads of this process
//! pinned to the generator CPU, the router's CPU time, backlog drops and wake-ups read around
//! them, summarised in a [`Row`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llr_traffic::gen::{GenReport, CLASS_BE, CLASS_RT};
use llr_traffic::netns::{addr, Topology};
use llr_traffic::sink::{OpenSink, SinkReport};
use serde::{Deserialize, Serialize};

use crate::options::{Options, Target};
use crate::target::Active;
use crate::traffic;
use crate::{bound, host, LabError, Result, StepContext};
use llr_ops::metrics::MetricsSnapshot;
use llr_ops::tune::StatSnapshot;

/// One measurement point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Repetition (1-based) of the whole per-target measurement (`--repeat`).
    pub round: u32,
    pub target: String,
    pub rt_share: f64,
    pub offered_pps: f64,
    pub sent_pps: f64,
    pub sent_rt: u64,
    pub sent_be: u64,
    pub recv_rt: u64,
    pub recv_be: u64,
    pub loss_rt: f64,
    pub loss_be: f64,
    pub reordered: u64,
    pub throughput_pps: f64,
    pub rt_mean_us: f64,
    pub rt_p50_us: f64,
    pub rt_p99_us: f64,
    pub rt_p999_us: f64,
    pub be_mean_us: f64,
    pub be_p50_us: f64,
    pub be_p99_us: f64,
    pub be_p999_us: f64,
    /// Packets dropped at the router CPU's input backlog (/proc/net/softnet_stat column 2).
    pub backlog_drops: u64,
    /// Router CPU time during the point (llrouter process, or the router CPU's softirq), s.
    pub router_cpu_s: f64,
    /// Router CPU time per forwarded packet, ns (the service time when the CPU is saturated).
    pub router_ns_per_pkt: f64,
    /// Wake-ups per second of traffic (llrouter: engine device wake-ups; kernel: NET_RX
    /// softirqs on the router CPU); NaN when not readable.
    pub wakeups_per_s: f64,
    /// The highest steal time of any CPU during the point, % of that CPU (the hypervisor ran
    /// something else); NaN when /proc/stat could not be read.
    pub steal_pct: f64,
    /// Softirq time of the router CPU during the point, %.
    pub router_softirq_pct: f64,
    /// Times the point was measured: more than 1 when steal exceeded [`STEAL_LIMIT_PCT`].
    pub attempts: u32,
    /// Paper 000's model at this point ([`crate::bound`]; llrouter `ll-wfq`/`ll-rr` only, NaN
    /// or empty otherwise): the worker's CPU ns per frame served (x), the RT utilisation ρRT,
    /// the BE ring budget b, `Tmax = b·x/(1−ρRT)` in µs (NaN when ρRT ≥ 1), the RT ring's
    /// time-in-ring p99 as its histogram bucket (low, high] in µs, and whether that p99 is within
    /// Tmax (`yes`, `no`, or `bucket` when Tmax falls inside it).
    #[serde(default)]
    pub x_ns: f64,
    #[serde(default)]
    pub rho_rt: f64,
    #[serde(default)]
    pub be_budget: u32,
    #[serde(default)]
    pub tmax_us: f64,
    #[serde(default)]
    pub rt_ring_p99_lo_us: f64,
    #[serde(default)]
    pub rt_ring_p99_us: f64,
    #[serde(default)]
    pub within_tmax: String,
    /// Frames per generator burst, and Eq. 1 for arrivals in such bursts (the like-for-like
    /// bound: [`llr_core::sched::bound::tmax_burst_ns`]) with the p99's verdict against it.
    #[serde(default)]
    pub arrival_burst: u32,
    #[serde(default = "nan")]
    pub tmax_burst_us: f64,
    #[serde(default)]
    pub within_tmax_burst: String,
    /// Datagrams the sink's kernel dropped for full socket buffers (the application's loss,
    /// after the router's).
    #[serde(default)]
    pub sink_drops: u64,
    /// llrouter targets: frames, worker CPU ns and transmit flushes per grant of the highest
    /// ring (NaN under `sq`) and of the lowest ring (`sq`: its only ring) — what calibrates the
    /// simulator's grant and flush costs.
    #[serde(default)]
    pub hi_frames_per_grant: f64,
    #[serde(default)]
    pub hi_ns_per_grant: f64,
    #[serde(default)]
    pub lo_frames_per_grant: f64,
    #[serde(default)]
    pub lo_ns_per_grant: f64,
    #[serde(default)]
    pub hi_flushes_per_grant: f64,
    #[serde(default)]
    pub lo_flushes_per_grant: f64,
    /// llrouter targets: `tx-hold-us` (how long RT frames may wait for a transmit batch).
    #[serde(default)]
    pub tx_hold_us: Option<u32>,
    /// The same over every ring: what the grant and flush costs are fitted to.
    #[serde(default)]
    pub frames_per_grant: f64,
    #[serde(default)]
    pub flushes_per_grant: f64,
    #[serde(default)]
    pub ns_per_grant: f64,
    /// Over every ring, per grant: the worker's ns inside transmit flushes (part of
    /// `ns_per_grant`) and the frames those flushes sent — what splits a frame's cost into
    /// its receive and transmit parts.
    #[serde(default = "nan")]
    pub flush_ns_per_grant: f64,
    #[serde(default = "nan")]
    pub flushed_per_grant: f64,
    /// llrouter targets: where packets were lost inside the router during the point — drops
    /// of the highest-priority ring (RT under ll-wfq; every class under sq) and the router's
    /// other drops (all reasons: no route, egress queue full, …) — so a loss at the sink can be
    /// told apart from one in the router.
    #[serde(default)]
    pub hi_ring_drops: u64,
    #[serde(default)]
    pub router_drops: u64,
    /// llrouter targets: the worker's longest grant since the router started, µs (its longest
    /// stall: a route update, the CPU taken away, …).
    #[serde(default = "nan")]
    pub stall_max_us: f64,
    /// llrouter targets: during the point, how long the workers waited for their CPU while
    /// runnable, µs, and how many times another task took it from them ([`host::Preemption`];
    /// NaN and empty for the kernel).
    #[serde(default = "nan")]
    pub worker_wait_us: f64,
    #[serde(default)]
    pub worker_preemptions: Option<u64>,
    /// CPU time of the forwarding threads per forwarded packet, ns: llrouter's workers (the
    /// scheduler's count, so steal and the other threads are left out), or the router CPU's
    /// softirq for the kernel. At a load the router keeps up with, this is the price of its
    /// strategy per packet, which the wall-clock rate hides in the VM's noise.
    #[serde(default = "nan")]
    pub worker_ns_per_pkt: f64,
}

fn nan() -> f64 {
    f64::NAN
}

/// A point during which some CPU lost more than this share (%) to steal is measured once more
/// (the less noisy of the two is kept, and it stays flagged if both were noisy).
pub const STEAL_LIMIT_PCT: f64 = 5.0;

/// What one point measured besides the generator and sink reports.
#[derive(Debug, Clone, Default)]
pub struct PointExtra {
    /// Backlog drops on the router CPU (kernel targets).
    pub drops: u64,
    /// Datagrams the sink's kernel dropped for full socket buffers during the point.
    pub sink_drops: u64,
    /// Router CPU time during the point, ns.
    pub router_cpu_ns: u64,
    /// The forwarding threads' CPU time during the point, ns.
    pub worker_cpu_ns: u64,
    /// llrouter's workers: the CPU taken from them during the point.
    pub worker_preemption: Option<host::Preemption>,
    /// Wake-ups during the point, if they could be read.
    pub wakeups: Option<u64>,
    /// Highest steal of any CPU and the router CPU's softirq share, % (NaN: unreadable).
    pub steal_pct: f64,
    pub router_softirq_pct: f64,
    /// Times measured.
    pub attempts: u32,
    /// The router's counters before and after the point (llrouter targets).
    pub counters: Option<(MetricsSnapshot, MetricsSnapshot)>,
    /// The router's counters near the end of the traffic, while it still ran (llrouter
    /// targets): the budgets in force then (`budget = "auto"` moves them afterwards).
    pub during: Option<MetricsSnapshot>,
    /// The llrouter target's `tx-hold-us`.
    pub tx_hold_us: Option<u32>,
    /// Frames per generator burst (1: frame by frame), for the bound with bursts.
    pub burst: u32,
}

/// The reports of one point.
#[derive(Debug, Clone)]
pub struct Point {
    pub gen: GenReport,
    pub sink: SinkReport,
    pub extra: PointExtra,
}

impl Point {
    /// The point as a row of round 1.
    pub fn row(&self, target: &Target, rt_share: f64) -> Row {
        row(target, rt_share, &self.gen, &self.sink, &self.extra)
    }
}

/// The router-side counters before a point.
struct Before {
    drops: u64,
    sink_drops: u64,
    cpu_ns: u64,
    worker_ns: u64,
    worker_pre: Option<host::Preemption>,
    wakeups: Option<u64>,
    stat: Option<StatSnapshot>,
    counters: Option<MetricsSnapshot>,
}

pub(crate) fn read_stat() -> Option<StatSnapshot> {
    llr_ops::tune::parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?).ok()
}

/// The highest steal share of any CPU, and `router_cpu`'s softirq share, between two reads (%).
fn noise(a: &StatSnapshot, b: &StatSnapshot, router_cpu: usize) -> (f64, f64) {
    let share = |cpu: usize, f: fn(&llr_ops::tune::CpuTimes) -> u64| -> Option<f64> {
        let (x, y) = (a.get(&cpu)?, b.get(&cpu)?);
        let total = (y.busy() + y.idle_all()).checked_sub(x.busy() + x.idle_all())?;
        (total > 0).then(|| f(y).saturating_sub(f(x)) as f64 * 100.0 / total as f64)
    };
    let steal = a
        .keys()
        .filter_map(|&c| share(c, |t| t.steal))
        .fold(f64::NAN, f64::max);
    let softirq = share(router_cpu, |t| t.softirq).unwrap_or(f64::NAN);
    (steal, softirq)
}

impl Before {
    fn read(act: &Active<'_>, router_cpu: usize) -> Before {
        Before {
            drops: host::softnet_drops(router_cpu),
            sink_drops: act.sink_udp_errors(),
            cpu_ns: act.router_cpu_ns(),
            worker_ns: act.worker_cpu_ns(),
            worker_pre: act.worker_preemption(),
            wakeups: act.wakeups(),
            stat: read_stat(),
            counters: act.counters(),
        }
    }

    fn extra(&self, act: &Active<'_>, router_cpu: usize) -> PointExtra {
        PointExtra {
            drops: host::softnet_drops(router_cpu).saturating_sub(self.drops),
            sink_drops: act.sink_udp_errors().saturating_sub(self.sink_drops),
            router_cpu_ns: act.router_cpu_ns().saturating_sub(self.cpu_ns),
            worker_cpu_ns: act.worker_cpu_ns().saturating_sub(self.worker_ns),
            worker_preemption: act
                .worker_preemption()
                .zip(self.worker_pre)
                .map(|(b, a)| b.since(a)),
            wakeups: self
                .wakeups
                .zip(act.wakeups())
                .map(|(a, b)| b.saturating_sub(a)),
            steal_pct: f64::NAN,
            router_softirq_pct: f64::NAN,
            attempts: 1,
            counters: self.counters.clone().zip(act.counters()),
            during: None,
            tx_hold_us: act.tx_hold_us,
            burst: 1,
        }
        .with_noise(self.stat.as_ref(), read_stat().as_ref(), router_cpu)
    }
}

impl PointExtra {
    fn with_noise(
        mut self,
        a: Option<&StatSnapshot>,
        b: Option<&StatSnapshot>,
        router_cpu: usize,
    ) -> PointExtra {
        if let (Some(a), Some(b)) = (a, b) {
            (self.steal_pct, self.router_softirq_pct) = noise(a, b, router_cpu);
        }
        self
    }

    /// Steal above [`STEAL_LIMIT_PCT`] on some CPU.
    pub fn noisy(&self) -> bool {
        self.steal_pct > STEAL_LIMIT_PCT
    }
}

/// Sends one point's traffic at `rate` packets/s (0: as fast as the generator goes) through
/// the running target and measures it; a point with steal above [`STEAL_LIMIT_PCT`] is measured
/// once more and the less noisy one kept (`attempts` says so). `stop` ends the generator early.
pub fn measure(
    topo: &Topology,
    act: &Active<'_>,
    c: &Options,
    rate: f64,
    rt_share: f64,
    stop: &AtomicBool,
) -> Result<Point> {
    let first = measure_once(topo, act, c, rate, rt_share, stop)?;
    if !first.extra.noisy() || stop.load(Ordering::Relaxed) {
        return Ok(first);
    }
    tracing::info!(
        "{}: {rate} pps: {:.1} % steal during the point; measuring it again",
        act.target(),
        first.extra.steal_pct
    );
    let second = measure_once(topo, act, c, rate, rt_share, stop)?;
    let mut kept = if second.extra.steal_pct < first.extra.steal_pct {
        second
    } else {
        first
    };
    kept.extra.attempts = 2;
    Ok(kept)
}

/// One measurement of a point, as [`measure`] without the retry (iperf runs it beside its own
/// traffic, where a retry would not measure the same thing).
pub fn measure_once(
    topo: &Topology,
    act: &Active<'_>,
    c: &Options,
    rate: f64,
    rt_share: f64,
    stop: &AtomicBool,
) -> Result<Point> {
    let cfg = traffic::gen_config(c, rate, rt_share)?;
    let (backend, gen_cpu) = (c.gen_backend, c.gen_cpu);
    let sink_cfg = traffic::sink_config(c);
    let mut sink = topo
        .sink
        .run(|| OpenSink::open(sink_cfg, &c.sink_backend.on(addr::SINK_IF)))
        .and_then(|r| r)
        .step(|| "sink".into())?;
    steer_sink_receive(topo, c, matches!(sink, OpenSink::Udp(_)))?;
    let before = Before::read(act, c.router_cpu);
    let sink_stop = AtomicBool::new(false);
    let gen_done = AtomicBool::new(false);
    let mut during = None;
    let (gen, sink_rep) = std::thread::scope(|sc| -> Result<(GenReport, SinkReport)> {
        // The router's budgets while the traffic runs: one snapshot at 90 % of the point.
        let sampler = sc.spawn(|| {
            c.keep_off_router_cpus();
            let at = Instant::now() + Duration::from_secs_f64(c.point_secs * 0.9);
            while Instant::now() < at {
                if gen_done.load(Ordering::Relaxed) {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let snap = act.counters();
            // Taken after the generator stopped: not during the traffic after all.
            snap.filter(|_| !gen_done.load(Ordering::Relaxed))
        });
        let h = sc.spawn(|| {
            c.keep_off_router_cpus();
            // The UDP sink receives on this thread (the XDP sink only reads maps).
            if matches!(sink, OpenSink::Udp(_)) {
                let _ = llr_traffic::gen::pin_to_cpu(gen_cpu);
                // The sink shares the generator's core: let it preempt the generator.
                let _ = llr_traffic::gen::set_fifo(50);
            }
            sink.run(&sink_stop)
        });
        let g = topo.gen.run(|| {
            let _ = llr_traffic::gen::pin_to_cpu(gen_cpu);
            // Other work on the generator's core (builds) should not thin the offered load.
            let _ = llr_io::sys::set_nice(-10);
            llr_traffic::gen::run(&cfg, backend, stop)
        });
        let g = g.and_then(|r| r);
        gen_done.store(true, Ordering::Relaxed);
        during = sampler.join().ok().flatten();
        if g.is_err() || stop.load(Ordering::Relaxed) {
            sink_stop.store(true, Ordering::Relaxed);
        }
        let s = h
            .join()
            .map_err(|_| LabError::Failed("sink thread panicked".into()))?
            .step(|| "sink".into())?;
        Ok((g.step(|| "generator".into())?, s))
    })?;
    let extra = PointExtra {
        during,
        burst: c.arrival_burst(),
        ..before.extra(act, c.router_cpu)
    };
    drop(sink); // detaches the XDP sink
    Ok(Point {
        gen,
        sink: sink_rep,
        extra,
    })
}

/// Where the sink's receive runs. A veth transmit hands the frame to its peer on the sending
/// CPU, so without this the sink veth's receive (its XDP program or the UDP stack) runs in
/// softirq on the router's CPU, billed to whatever target transmitted. Here it runs on the
/// generator's CPU instead when `sink_on_gen_cpu` asks: RPS to that CPU (the UDP sink's
/// backlog) and, once the XDP sink has given the veth its NAPI, threaded NAPI with the thread
/// pinned there. Otherwise both are turned off (the default placement).
fn steer_sink_receive(topo: &Topology, c: &Options, udp: bool) -> Result<()> {
    let net = format!("/sys/class/net/{}", addr::SINK_IF);
    let sh = |cmd: String| topo.sink.exec(&["sh", "-c", &cmd]);
    (topo.sink)
        .set_rps(addr::SINK_IF, c.sink_on_gen_cpu.then_some(c.gen_cpu))
        .step(|| "RPS for the sink veth".into())?;
    if !c.sink_on_gen_cpu {
        // Refused when the veth has no NAPI (UDP sink): then there is nothing threaded.
        let _ = sh(format!("echo 0 > {net}/threaded"));
        return Ok(());
    }
    if udp {
        return Ok(());
    }
    sh(format!("echo 1 > {net}/threaded")).step(|| "threaded NAPI for the sink veth".into())?;
    // It shares the generator's CPU and must not wait behind it (the veth's ring would
    // overflow and count as loss): real-time priority, as the UDP sink's thread has.
    let threads = host::napi_threads(addr::SINK_IF);
    if threads.is_empty() {
        return Err(LabError::Failed(
            "no NAPI thread appeared for the sink veth".into(),
        ));
    }
    host::pin_threads(&threads, c.gen_cpu)
        .and_then(|()| host::fifo_threads(&threads, 50))
        .map_err(|e| LabError::Failed(format!("sink NAPI thread: {e}")))
}

/// The row of a point (round 1).
pub fn row(target: &Target, rt_share: f64, g: &GenReport, s: &SinkReport, x: &PointExtra) -> Row {
    let class = |k: u8| {
        s.classes
            .iter()
            .find(|c| c.class == k)
            .cloned()
            .unwrap_or_default()
    };
    let (rt, be) = (class(CLASS_RT), class(CLASS_BE));
    let loss = |sent: u64, got: u64| {
        if sent == 0 {
            0.0
        } else {
            sent.saturating_sub(got) as f64 / sent as f64
        }
    };
    let u = |ns: u64| ns as f64 / 1000.0;
    let received = rt.seq.unique + be.seq.unique;
    let secs = g.duration_s.max(1e-9);
    let m = (x.counters.as_ref())
        .and_then(|(a, b)| bound::at_point(a, b, g.sent_rt, g.duration_s, x.burst))
        .map(|m| match &x.during {
            Some(d) => m.with_budget_from(d),
            None => m,
        });
    let (hi, lo) = (x.counters.as_ref()).map_or((None, None), |(a, b)| bound::grant_shapes(a, b));
    let all = (x.counters.as_ref()).and_then(|(a, b)| bound::grant_total(a, b));
    let (p99_lo, p99_hi) = m
        .and_then(|m| m.rt_ring_p99_us)
        .unwrap_or((f64::NAN, f64::NAN));
    Row {
        round: 1,
        target: target.label(),
        rt_share,
        offered_pps: g.offered_pps,
        sent_pps: g.achieved_pps,
        sent_rt: g.sent_rt,
        sent_be: g.sent_be,
        recv_rt: rt.seq.unique,
        recv_be: be.seq.unique,
        loss_rt: loss(g.sent_rt, rt.seq.unique),
        loss_be: loss(g.sent_be, be.seq.unique),
        reordered: rt.seq.reordered + be.seq.reordered,
        throughput_pps: received as f64 / secs,
        rt_mean_us: rt.latency.mean / 1000.0,
        rt_p50_us: u(rt.latency.p50),
        rt_p99_us: u(rt.latency.p99),
        rt_p999_us: u(rt.latency.p999),
        be_mean_us: be.latency.mean / 1000.0,
        be_p50_us: u(be.latency.p50),
        be_p99_us: u(be.latency.p99),
        be_p999_us: u(be.latency.p999),
        backlog_drops: x.drops,
        router_cpu_s: x.router_cpu_ns as f64 / 1e9,
        wakeups_per_s: x.wakeups.map_or(f64::NAN, |w| w as f64 / secs),
        router_ns_per_pkt: if received > 0 {
            x.router_cpu_ns as f64 / received as f64
        } else {
            0.0
        },
        steal_pct: x.steal_pct,
        router_softirq_pct: x.router_softirq_pct,
        attempts: x.attempts,
        x_ns: m.map_or(f64::NAN, |m| m.x_ns),
        rho_rt: m.map_or(f64::NAN, |m| m.rho_rt),
        be_budget: m.map_or(0, |m| m.be_budget),
        tmax_us: m.and_then(|m| m.tmax_us).unwrap_or(f64::NAN),
        rt_ring_p99_lo_us: p99_lo,
        rt_ring_p99_us: p99_hi,
        within_tmax: (m.and_then(|m| m.verdict())).map_or(String::new(), |v| v.name().into()),
        arrival_burst: x.burst,
        sink_drops: x.sink_drops,
        tmax_burst_us: m.and_then(|m| m.tmax_burst_us).unwrap_or(f64::NAN),
        within_tmax_burst: (m.and_then(|m| m.verdict_burst()))
            .map_or(String::new(), |v| v.name().into()),
        hi_frames_per_grant: hi.map_or(f64::NAN, |g| g.frames_per_grant),
        hi_ns_per_grant: hi.map_or(f64::NAN, |g| g.ns_per_grant),
        lo_frames_per_grant: lo.map_or(f64::NAN, |g| g.frames_per_grant),
        lo_ns_per_grant: lo.map_or(f64::NAN, |g| g.ns_per_grant),
        hi_flushes_per_grant: hi.map_or(f64::NAN, |g| g.flushes_per_grant),
        lo_flushes_per_grant: lo.map_or(f64::NAN, |g| g.flushes_per_grant),
        tx_hold_us: x.tx_hold_us,
        frames_per_grant: all.map_or(f64::NAN, |g| g.frames_per_grant),
        flushes_per_grant: all.map_or(f64::NAN, |g| g.flushes_per_grant),
        ns_per_grant: all.map_or(f64::NAN, |g| g.ns_per_grant),
        flush_ns_per_grant: all.map_or(f64::NAN, |g| g.flush_ns_per_grant),
        flushed_per_grant: all.map_or(f64::NAN, |g| g.flushed_per_grant),
        hi_ring_drops: (x.counters.as_ref()).map_or(0, |(a, b)| {
            bound::ring_delta(a, b, |r| r == 0, |r| r.drops as f64) as u64
        }),
        router_drops: (x.counters.as_ref()).map_or(0, |(a, b)| drops(a, b)),
        stall_max_us: (x.counters.as_ref()).map_or(f64::NAN, |(_, b)| {
            b.workers
                .iter()
                .map(|w| w.stall_max_seconds * 1e6)
                .fold(0.0, f64::max)
        }),
        worker_wait_us: x
            .worker_preemption
            .map_or(f64::NAN, |p| p.wait_ns as f64 / 1e3),
        worker_preemptions: x.worker_preemption.map(|p| p.switches),
        worker_ns_per_pkt: if received > 0 && x.worker_cpu_ns > 0 {
            x.worker_cpu_ns as f64 / received as f64
        } else {
            f64::NAN
        },
    }
}

/// The router's drops of every reason between two snapshots (ring-full drops are not among
/// them: see [`bound::ring_delta`]).
fn drops(a: &MetricsSnapshot, b: &MetricsSnapshot) -> u64 {
    let sum = |s: &MetricsSnapshot| -> u64 { s.drops.iter().map(|(_, n)| n).sum() };
    sum(b).saturating_sub(sum(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_the_worst_cpu_steal_and_the_router_cpu_softirq() {
        //            user nice system idle iowait irq softirq steal
        let a = "cpu  0 0 0 0 0 0 0 0\ncpu0 100 0 0 100 0 0 0 0\ncpu1 100 0 0 100 0 0 50 10\n";
        // over the interval: cpu0 200 ticks, 30 of them steal (15 %); cpu1 184 ticks, 80 of them
        // softirq and 4 steal
        let b = "cpu  0 0 0 0 0 0 0 0\ncpu0 200 0 0 170 0 0 0 30\ncpu1 200 0 0 100 0 0 130 14\n";
        let (pa, pb) = (
            llr_ops::tune::parse_proc_stat(a).unwrap(),
            llr_ops::tune::parse_proc_stat(b).unwrap(),
        );
        let (steal, softirq) = noise(&pa, &pb, 1);
        assert!((steal - 15.0).abs() < 1e-9, "{steal}");
        assert!((softirq - 80.0 * 100.0 / 184.0).abs() < 1e-9, "{softirq}");
        let x = PointExtra {
            steal_pct: steal,
            ..Default::default()
        };
        assert!(x.noisy());
        // unchanged counters: no share to speak of
        assert!(noise(&pa, &pa, 1).0.is_nan());
    }
}
