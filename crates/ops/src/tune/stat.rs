//! Per-core load from `/proc/stat`: busy fractions, their distribution over the window, and
//! the worker core they point to.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use super::{Result, TuneError};

/// Cumulative CPU time counters of one core (in USER_HZ ticks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Ticks spent doing something (guest time is already inside user/nice).
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }
    /// Ticks spent idle (including waiting for I/O).
    pub fn idle_all(&self) -> u64 {
        self.idle + self.iowait
    }
}

/// Per-core counters of one `/proc/stat` read, keyed by core number.
pub type StatSnapshot = BTreeMap<usize, CpuTimes>;

/// Parses the `cpuN` lines of `/proc/stat` (the aggregate `cpu` line is ignored).
pub fn parse_proc_stat(text: &str) -> Result<StatSnapshot> {
    let mut out = BTreeMap::new();
    for (lineno, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        let Some(num) = name.strip_prefix("cpu") else {
            continue;
        };
        if num.is_empty() {
            continue; // aggregate line
        }
        let field = || format!("/proc/stat line {}", lineno + 1);
        let core: usize = num
            .parse()
            .map_err(|_| TuneError::new(field(), format!("bad cpu name {name:?}")))?;
        let vals: Vec<u64> = it
            .map(|v| v.parse::<u64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| TuneError::new(field(), "non-numeric counter"))?;
        if vals.len() < 4 {
            return Err(TuneError::new(
                field(),
                format!("{name} has {} counters, need at least 4", vals.len()),
            ));
        }
        let g = |i: usize| vals.get(i).copied().unwrap_or(0);
        out.insert(
            core,
            CpuTimes {
                user: g(0),
                nice: g(1),
                system: g(2),
                idle: g(3),
                iowait: g(4),
                irq: g(5),
                softirq: g(6),
                steal: g(7),
            },
        );
    }
    if out.is_empty() {
        return Err(TuneError::new("/proc/stat", "no cpuN lines"));
    }
    Ok(out)
}

/// Busy fraction per core between two snapshots. Cores missing from either snapshot are left
/// out; an interval in which a core's counters did not advance is an error (sampling too fast).
pub fn busy_fractions(prev: &StatSnapshot, next: &StatSnapshot) -> Result<BTreeMap<usize, f64>> {
    let mut out = BTreeMap::new();
    for (core, a) in prev {
        let Some(b) = next.get(core) else { continue };
        let (Some(db), Some(di)) = (
            b.busy().checked_sub(a.busy()),
            b.idle_all().checked_sub(a.idle_all()),
        ) else {
            return Err(TuneError::new(
                format!("/proc/stat cpu{core}"),
                "counters went backwards between samples",
            ));
        };
        let total = db + di;
        if total == 0 {
            return Err(TuneError::new(
                format!("/proc/stat cpu{core}"),
                "no time elapsed between samples (interval too short?)",
            ));
        }
        out.insert(*core, db as f64 / total as f64);
    }
    Ok(out)
}

/// Load distribution of one core over the sampling window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoreLoad {
    pub core: usize,
    /// Busy fraction of each interval, in time order.
    pub samples: Vec<f64>,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// ECDF steps `(busy fraction, P[X ≤ value])`, values ascending.
    pub ecdf: Vec<(f64, f64)>,
    /// The upper tail against the exponential fitted to the samples (paper 002 §IV.B); `None`
    /// with fewer than [`TAIL_MIN_SAMPLES`] samples or a core that was never busy.
    pub tail: Option<TailFit>,
}

/// How many times the fitted exponential's CCDF the samples' must be for [`TailFit::long_tail`].
pub const LONG_TAIL_FACTOR: f64 = 2.0;

/// Fewer samples than this say nothing about a tail: [`CoreLoad::tail`] is then `None`.
pub const TAIL_MIN_SAMPLES: usize = 20;

/// A core's load distribution against the exponential distribution fitted to it by maximum
/// likelihood, as paper 002 reads its CPU-load datasets: a tail that declines slower than the
/// exponential's is long (P[X > x] ~ c·x^−α, a straight line on log-log axes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TailFit {
    /// The exponential's rate λ = 1 / mean (its MLE).
    pub exp_rate: f64,
    /// P[X ≥ p90] of the samples, and the exponential's e^(−λ·p90).
    pub ccdf_p90: f64,
    pub exp_ccdf_p90: f64,
    /// P[X ≥ p99] of the samples, and the exponential's e^(−λ·p99).
    pub ccdf_p99: f64,
    pub exp_ccdf_p99: f64,
    /// α of a straight line ln P[X ≥ x] = ln c − α·ln x over the top decile of the samples, and
    /// that line's R² (NaN with fewer than 3 distinct values there).
    pub loglog_alpha: f64,
    pub loglog_r2: f64,
    /// Heavier than exponential: at p99 the samples' CCDF is at least [`LONG_TAIL_FACTOR`]
    /// times the fitted exponential's (a margin, so that the sampling noise of an exponential's
    /// own tail does not count). Only the upper tail decides: a power law's body can lie below
    /// the exponential with the same mean (at p90 a Pareto of α 1.5 has half its CCDF).
    pub long_tail: bool,
}

impl TailFit {
    /// The fit of ascending `sorted` (at least [`TAIL_MIN_SAMPLES`], mean above 0).
    pub fn of(sorted: &[f64]) -> Option<TailFit> {
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        if n < TAIL_MIN_SAMPLES || mean <= 0.0 {
            return None;
        }
        let rate = 1.0 / mean;
        // P[X ≥ x]: the share of samples at or above x (ties count, so the p99 of 100 samples
        // has at least 1 %).
        let ccdf = |x: f64| sorted.iter().filter(|&&v| v >= x).count() as f64 / n as f64;
        let (p90, p99) = (percentile(sorted, 0.90), percentile(sorted, 0.99));
        let top: Vec<(f64, f64)> = {
            let from = n - (n / 10).max(3);
            let mut pts: Vec<(f64, f64)> = (sorted[from..].iter())
                .filter(|&&x| x > 0.0)
                .map(|&x| (x.ln(), ccdf(x).ln()))
                .collect();
            pts.dedup_by(|a, b| a.0 == b.0);
            pts
        };
        let (alpha, r2) = match llr_core::stats::LineFit::of(&top) {
            Some(f) if top.len() >= 3 => (-f.slope, f.r2),
            _ => (f64::NAN, f64::NAN),
        };
        let (c90, c99) = (ccdf(p90), ccdf(p99));
        let (e90, e99) = ((-rate * p90).exp(), (-rate * p99).exp());
        Some(TailFit {
            exp_rate: rate,
            ccdf_p90: c90,
            exp_ccdf_p90: e90,
            ccdf_p99: c99,
            exp_ccdf_p99: e99,
            loglog_alpha: alpha,
            loglog_r2: r2,
            long_tail: c99 >= LONG_TAIL_FACTOR * e99,
        })
    }
}

/// Nearest-rank percentile of ascending `sorted` (non-empty), `q` in `[0, 1]`.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let rank = (q * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

impl CoreLoad {
    pub fn from_samples(core: usize, samples: Vec<f64>) -> Self {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let ecdf = sorted
            .iter()
            .enumerate()
            .map(|(i, v)| (*v, (i + 1) as f64 / n as f64))
            .collect();
        CoreLoad {
            core,
            mean: samples.iter().sum::<f64>() / n as f64,
            p50: percentile(&sorted, 0.50),
            p90: percentile(&sorted, 0.90),
            p99: percentile(&sorted, 0.99),
            max: sorted[n - 1],
            ecdf,
            tail: TailFit::of(&sorted),
            samples,
        }
    }
}

/// Per-core load distributions from `n ≥ 2` consecutive `/proc/stat` snapshots.
pub fn core_loads(snapshots: &[StatSnapshot]) -> Result<Vec<CoreLoad>> {
    if snapshots.len() < 2 {
        return Err(TuneError::new(
            "samples",
            format!(
                "need at least 2 /proc/stat samples, got {}",
                snapshots.len()
            ),
        ));
    }
    let mut series: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let cores: BTreeSet<usize> = snapshots
        .iter()
        .map(|s| s.keys().copied().collect::<BTreeSet<_>>())
        .reduce(|a, b| a.intersection(&b).copied().collect())
        .unwrap_or_default();
    for w in snapshots.windows(2) {
        for (core, f) in busy_fractions(&w[0], &w[1])? {
            if cores.contains(&core) {
                series.entry(core).or_default().push(f);
            }
        }
    }
    Ok(series
        .into_iter()
        .map(|(c, s)| CoreLoad::from_samples(c, s))
        .collect())
}

/// A core busy at most this fraction in 9 intervals out of 10 (p90) counts as idle for
/// [`pick_worker_cores`]: among idle cores, one that takes none of the devices' interrupts goes
/// first, because until an interrupt has moved every one of them preempts the worker, and
/// moving may fail (managed interrupts refuse with EIO). A busy core is never preferred over an
/// idle one for that reason: its load stays, an interrupt can be moved.
pub const IDLE_P90: f64 = 0.10;

/// Picks the worker core among `loads` restricted to `candidates` (all when `None`); see the
/// module doc for the order and tie-break. `irq_cores[c]` is how many named-device interrupts
/// core `c` currently serves. The first of [`pick_worker_cores`] for one worker.
pub fn pick_worker_core(
    loads: &[CoreLoad],
    candidates: Option<&BTreeSet<usize>>,
    irq_cores: &BTreeMap<usize, u32>,
) -> Option<usize> {
    pick_worker_cores(loads, candidates, irq_cores, 1)
        .first()
        .copied()
}

/// The `n` cores for `n` workers (fewer when there are fewer candidates), best first: idle
/// cores ([`IDLE_P90`]) before busy ones; among idle cores those serving none of the devices'
/// interrupts first; then the smallest `(p90, p99, mean)` at 0.1 % resolution, the fewest
/// device interrupts, the highest core number (core 0 usually carries timers, housekeeping and
/// unpinned interrupts). Distinct by construction: each core is taken once.
pub fn pick_worker_cores(
    loads: &[CoreLoad],
    candidates: Option<&BTreeSet<usize>>,
    irq_cores: &BTreeMap<usize, u32>,
    n: usize,
) -> Vec<usize> {
    // 0.1 % resolution: differences below it are sampling noise and count as ties.
    let q = |v: f64| (v * 1000.0).round() as i64;
    let mut ranked: Vec<&CoreLoad> = loads
        .iter()
        .filter(|l| candidates.is_none_or(|c| c.contains(&l.core)))
        .collect();
    ranked.sort_by_key(|l| {
        let irqs = irq_cores.get(&l.core).copied().unwrap_or(0);
        let busy = l.p90 > IDLE_P90;
        (
            busy,
            !busy && irqs > 0,
            q(l.p90),
            q(l.p99),
            q(l.mean),
            irqs,
            std::cmp::Reverse(l.core),
        )
    });
    ranked.into_iter().take(n).map(|l| l.core).collect()
}
