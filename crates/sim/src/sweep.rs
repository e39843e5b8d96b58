//! Sweeps: many independent simulations (strategies × values of one parameter) run in parallel,
//! flattened into one row per (strategy, value, class) and written as `results.csv`.

use std::io::Write;
use std::path::Path;

use llr_core::sched::StrategyKind;
use rayon::prelude::*;
use serde::Serialize;

use crate::{SimConfig, SimError, SimResult};

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
    pub strategy: String,
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
                strategy: p.strategy.name().to_string(),
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
            });
        }
    }
    rows
}

/// Writes `rows` as CSV with a header line (the columns of [`SweepRow`], in order).
pub fn write_csv(path: &Path, rows: &[SweepRow]) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(f, "strategy,param,value,class,sent,delivered,dropped,mean_ns,p50_ns,p99_ns,p999_ns,max_ns,utilization,wakeups_per_sec,offered_load")?;
    for r in rows {
        writeln!(
            f,
            "{},{},{},{},{},{},{},{:.1},{},{},{},{},{:.4},{:.1},{:.4}",
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
            r.offered_load
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
            (rows[0].strategy.as_str(), rows[2].strategy.as_str()),
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
