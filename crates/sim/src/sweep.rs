//! Sweeps: many independent simulations (strategies × values of one parameter) run in parallel,
//! flattened into one row per (strategy, value, class) and written as `results.csv`; and the
//! loss-free capacity of a configuration by bisection over the offered load ([`capacity`]),
//! written as `capacity.csv`.

use std::io::Write;
use std::path::Path;

use llr_core::sched::StrategyKind;
use rayon::prelude::*;
use serde::Serialize;

use crate::{hash_bound, Rate, SimConfig, SimError, SimResult};

/// One point of a sweep: a strategy, the swept parameter's value and the full configuration.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    pub strategy: StrategyKind,
    pub value: f64,
    pub config: SimConfig,
}

/// One row of a sweep's results: a class at one (strategy, value) point.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub strategy: StrategyKind,
    pub param: String,
    pub value: f64,
    pub class: String,
    pub sent: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub utilization: f64,
    pub wakeups_per_sec: f64,
    /// Offered load relative to capacity (`utilization` is the busy fraction, at most 1).
    pub offered_load: f64,
    pub cores: usize,
    pub steering: String,
    /// This class's packets delivered per second of simulated time.
    pub delivered_pps: f64,
}

/// Offered load relative to the capacity of `cores` (the busy fraction cannot exceed 1, this
/// can).
pub fn offered_load(r: &SimResult, cores: usize) -> f64 {
    r.offered_pps * r.service_ns / 1e9 / cores.max(1) as f64
}

/// Runs every point on `threads` threads (0: one per core), calling `done` after each; the
/// results are in the order of `points`. Also returns the number of threads used.
pub fn run(
    points: &[SweepPoint],
    threads: usize,
    done: impl Fn() + Sync,
) -> Result<(Vec<SimResult>, usize), SimError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool of the requested size");
    let results = pool.install(|| {
        points
            .par_iter()
            .map(|p| {
                let r = crate::run(&p.config);
                done();
                r
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    Ok((results, pool.current_num_threads()))
}

/// One row per class of every result, `param` naming the swept parameter.
pub fn rows(param: &str, points: &[SweepPoint], results: &[SimResult]) -> Vec<SweepRow> {
    let mut rows = Vec::new();
    for (p, r) in points.iter().zip(results) {
        for c in &r.classes {
            rows.push(SweepRow {
                strategy: p.strategy,
                param: param.to_string(),
                value: p.value,
                class: c.name.clone(),
                sent: c.sent,
                delivered: c.delivered,
                dropped: c.dropped,
                mean_ns: c.mean_ns,
                p50_ns: c.p50_ns,
                p99_ns: c.p99_ns,
                p999_ns: c.p999_ns,
                max_ns: c.max_ns,
                utilization: r.utilization,
                wakeups_per_sec: r.wakeups_per_sec,
                offered_load: offered_load(r, r.core_utilization.len()),
                cores: p.config.cores,
                steering: r.steering.name().to_string(),
                delivered_pps: c.delivered as f64 * 1e9 / r.sim_time_ns,
            });
        }
    }
    rows
}

/// Writes `rows` as CSV with a header line (the columns of [`SweepRow`], in order).
pub fn write_csv(path: &Path, rows: &[SweepRow]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "strategy,param,value,class,sent,delivered,dropped,mean_ns,p50_ns,p99_ns,p999_ns,max_ns,utilization,wakeups_per_sec,offered_load,cores,steering,delivered_pps")?;
    for r in rows {
        writeln!(
            f,
            "{},{},{},{},{},{},{},{:.1},{},{},{},{},{:.4},{:.1},{:.4},{},{},{:.1}",
            r.strategy,
            r.param,
            r.value,
            r.class,
            r.sent,
            r.delivered,
            r.dropped,
            r.mean_ns,
            r.p50_ns,
            r.p99_ns,
            r.p999_ns,
            r.max_ns,
            r.utilization,
            r.wakeups_per_sec,
            r.offered_load,
            r.cores,
            r.steering,
            r.delivered_pps
        )?;
    }
    f.flush()
}

/// The loss-free capacity of one configuration.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Capacity {
    /// The highest offered load, relative to all cores' capacity, found with no core losing
    /// more than the tolerance of what it was offered (0 when even the first probe lost more).
    pub utilization: f64,
    /// The same as packets per second offered over all classes.
    pub offered_pps: f64,
    /// Packets per second delivered at that load.
    pub delivered_pps: f64,
    /// Loss (fraction of the offered packets) at that load, over all cores.
    pub loss: f64,
    /// The largest loss of one core (fraction of what that core was offered) at that load.
    pub worst_core_loss: f64,
    /// The load at which the flow hash's busiest core reaches 100 % ([`hash_bound`]).
    pub hash_bound: f64,
    /// Whether `utilization` is the top of the search range (the capacity may be higher).
    pub at_least: bool,
    /// Simulations run.
    pub runs: u32,
}

/// Top of the bisection range: a core can deliver at most 100 %, so any loss-free load lies
/// below 1; the margin above it makes the first probe lossy for a certain, however balanced
/// the flows.
pub const CAPACITY_MAX_UTILIZATION: f64 = 1.25;

/// Bisection steps of `sim sweep --capacity`: 1.25 / 2^10 ≈ 0.0012 of the cores' capacity.
pub const CAPACITY_STEPS: u32 = 10;

/// The highest offered load at which no core loses more than `tolerance` (a fraction) of the
/// packets it was offered, by `steps` halvings of `(0, CAPACITY_MAX_UTILIZATION]` (resolution
/// `1.25 / 2^steps`). Per core, because a total over many cores would let one saturated core
/// lose `cores ×` the tolerance unnoticed. Every probe runs `base` with only the rate changed
/// and the same seed — with Poisson arrivals and deterministic service the same draws at
/// compressed times — so the probes see the same traffic, only faster, and the loss they
/// measure rises with the load as a bisection needs.
///
/// A finite run overstates the capacity a little: the rings absorb up to `rings × ring_size`
/// packets of overload per core before they drop, so with `n` packets per core the result can
/// lie up to about `rings × ring_size / n` above the long-run value (1 M packets per core and
/// two 512-slot rings: +0.1 %).
pub fn capacity(base: &SimConfig, tolerance: f64, steps: u32) -> Result<Capacity, SimError> {
    if !(0.0..1.0).contains(&tolerance) {
        return Err(SimError::Config(llr_core::sched::ConfigError::new(
            "loss-tolerance",
            format!("{tolerance}; a fraction of the offered packets within [0, 1)"),
        )));
    }
    let probe = |u: f64| -> Result<SimResult, SimError> {
        let mut c = base.clone();
        c.rate = Rate::Utilization(u);
        crate::run(&c)
    };
    let worst_core_loss = |r: &SimResult| {
        (r.per_core.iter())
            .map(|pc| {
                let sent: u64 = pc.sent.iter().sum();
                pc.dropped.iter().sum::<u64>() as f64 / sent.max(1) as f64
            })
            .fold(0.0, f64::max)
    };
    let found = |u: f64, r: &SimResult, runs: u32, at_least: bool| {
        let (sent, dropped, delivered) = (r.classes.iter())
            .fold((0u64, 0u64, 0u64), |(s, d, v), k| {
                (s + k.sent, d + k.dropped, v + k.delivered)
            });
        Capacity {
            utilization: u,
            offered_pps: r.offered_pps,
            delivered_pps: delivered as f64 * 1e9 / r.sim_time_ns,
            loss: dropped as f64 / sent.max(1) as f64,
            worst_core_loss: worst_core_loss(r),
            hash_bound: hash_bound(base),
            at_least,
            runs,
        }
    };
    let top = probe(CAPACITY_MAX_UTILIZATION)?;
    if worst_core_loss(&top) <= tolerance {
        return Ok(found(CAPACITY_MAX_UTILIZATION, &top, 1, true));
    }
    let (mut lo, mut hi) = (0.0, CAPACITY_MAX_UTILIZATION);
    let mut best: Option<(f64, SimResult)> = None;
    for _ in 0..steps {
        let mid = (lo + hi) / 2.0;
        let r = probe(mid)?;
        if worst_core_loss(&r) <= tolerance {
            lo = mid;
            best = Some((mid, r));
        } else {
            hi = mid;
        }
    }
    Ok(match best {
        Some((u, r)) => found(u, &r, steps + 1, false),
        // Not even the lowest probe was loss-free.
        None => Capacity {
            utilization: 0.0,
            offered_pps: 0.0,
            delivered_pps: 0.0,
            loss: 0.0,
            worst_core_loss: 0.0,
            hash_bound: hash_bound(base),
            at_least: false,
            runs: steps + 1,
        },
    })
}

/// [`capacity`] of every point on `threads` threads (0: one per core), calling `done` after
/// each point; results in the order of `points`.
pub fn capacities(
    points: &[SweepPoint],
    tolerance: f64,
    steps: u32,
    threads: usize,
    done: impl Fn() + Sync,
) -> Result<Vec<Capacity>, SimError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool of the requested size");
    pool.install(|| {
        points
            .par_iter()
            .map(|p| {
                let c = capacity(&p.config, tolerance, steps);
                done();
                c
            })
            .collect()
    })
}

/// One row of `capacity.csv`.
#[derive(Debug, Clone, Serialize)]
pub struct CapacityRow {
    pub strategy: StrategyKind,
    pub param: String,
    pub value: f64,
    pub cores: usize,
    pub steering: String,
    pub flows: usize,
    pub loss_tolerance: f64,
    #[serde(flatten)]
    pub capacity: Capacity,
}

/// The rows of `capacity.csv`, one per point.
pub fn capacity_rows(
    param: &str,
    points: &[SweepPoint],
    caps: &[Capacity],
    tolerance: f64,
) -> Vec<CapacityRow> {
    points
        .iter()
        .zip(caps)
        .map(|(p, c)| CapacityRow {
            strategy: p.strategy,
            param: param.to_string(),
            value: p.value,
            cores: p.config.cores,
            steering: p.config.steering.name().to_string(),
            flows: p.config.flows,
            loss_tolerance: tolerance,
            capacity: c.clone(),
        })
        .collect()
}

/// Writes `rows` as CSV with a header line.
pub fn write_capacity_csv(path: &Path, rows: &[CapacityRow]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "strategy,param,value,cores,steering,flows,loss_tolerance,utilization,offered_pps,delivered_pps,loss,worst_core_loss,hash_bound,at_least,runs")?;
    for r in rows {
        let c = &r.capacity;
        writeln!(
            f,
            "{},{},{},{},{},{},{},{:.5},{:.1},{:.1},{:.6},{:.6},{:.5},{},{}",
            r.strategy,
            r.param,
            r.value,
            r.cores,
            r.steering,
            r.flows,
            r.loss_tolerance,
            c.utilization,
            c.offered_pps,
            c.delivered_pps,
            c.loss,
            c.worst_core_loss,
            c.hash_bound,
            c.at_least,
            c.runs
        )?;
    }
    f.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use llr_core::sched::SchedConfig;

    fn point(strategy: StrategyKind, u: f64) -> SweepPoint {
        let config = SimConfig::paper000(SchedConfig::new(strategy, &["rt", "be"]), 0.3, u, 20_000);
        SweepPoint {
            strategy,
            value: u,
            config,
        }
    }

    #[test]
    fn rows_follow_points_and_conserve_packets() {
        let pts = vec![
            point(StrategyKind::Sq, 0.5),
            point(StrategyKind::LlWfq, 1.5),
        ];
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let (res, _) = run(&pts, 2, || {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(calls.into_inner(), 2);
        let rows = rows("utilization", &pts, &res);
        assert_eq!(rows.len(), 4, "two classes per point");
        assert_eq!(
            (rows[0].strategy.name(), rows[2].strategy.name()),
            ("sq", "ll-wfq")
        );
        for r in &rows {
            assert_eq!(r.sent, r.delivered + r.dropped, "{r:?}");
        }
        assert!(rows[2].offered_load > 1.4 && rows[0].offered_load < 0.6);
        let dir = std::env::temp_dir().join(format!("llr-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("results.csv");
        write_csv(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(text.lines().count(), 5);
        assert!(text
            .lines()
            .nth(3)
            .unwrap()
            .starts_with("ll-wfq,utilization,1.5,rt,"));
    }
}
