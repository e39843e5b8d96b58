//! Host tuning helpers after paper 002 (Orosz, "Performance optimization of packet processing on
//! multi-core Linux systems"): sample per-core load, pick the least-loaded core for the worker,
//! keep device interrupts off it, and size rings and socket buffers.
//!
//! Everything that decides is pure and takes file *text* as input ([`parse_proc_stat`],
//! [`parse_interrupts`], [`parse_net_dev`], [`plan`]), so tests run on synthetic `/proc`
//! snapshots. Only [`sample`] (reads `<proc_root>/…` over a window) and [`apply`] (writes
//! `<proc_root>/irq/N/smp_affinity`) touch the file system.
//!
//! # Formulas
//! - **Busy fraction** of a core between two `/proc/stat` samples:
//!   `Δ(user+nice+system+irq+softirq+steal) / Δ(that + idle+iowait)`. `guest`/`guest_nice` are
//!   already contained in `user`/`nice` and are not counted twice.
//! - **Percentiles**: nearest-rank on the per-interval busy fractions of a core:
//!   `p_q = sorted[ceil(q·n) − 1]`; the ECDF is the list of `(value, i/n)` steps.
//! - **Worker core**: the candidate with the smallest `(p90, p99, mean)` compared at a resolution
//!   of 0.1 % busy (smaller differences are noise); remaining ties go to the core serving the
//!   fewest of the named devices' interrupts, then to the **highest-numbered** core (core 0
//!   usually carries timers, housekeeping and unpinned interrupts).
//! - **Ring size**: `N = clamp(next_pow2(ceil(λ · T_stall)), ring_min, ring_max)` where `λ` is the
//!   peak per-interval arrival rate (packets/s, summed over the named devices, from
//!   `/proc/net/dev`, or given) and `T_stall` the longest stall of the worker the ring must absorb
//!   without loss. `ring_min`/`ring_max` are the driver's limits (`ethtool -g`), both powers of two.
//! - **Socket buffer** (paper 002, eq. 1): `bytes = ceil(k · 2 · B · D_oneway / 8)`, `B` the link
//!   bandwidth in bit/s, `D_oneway` the one-way delay, `k ≥ 1` a safety factor — the
//!   bandwidth-delay product of a round trip. Suggested as `net.core.rmem_max`/`wmem_max` and
//!   `SO_RCVBUF`/`SO_SNDBUF`.
//! - **IRQ affinity**: every interrupt of a named device gets the mask of all online cores except
//!   the worker (Linux cpumask hex, 32-bit groups separated by commas, most significant first).

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A tuning error naming the offending input (a file, a field or an option) and the reason.
pub type TuneError = llr_core::FieldError;

type Result<T> = std::result::Result<T, TuneError>;

// ---------------------------------------------------------------------------------------------
// /proc/stat

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

/// Picks the worker core among `loads` restricted to `candidates` (all when `None`); see the
/// module doc for the order and tie-break. `irq_cores[c]` is how many named-device interrupts
/// core `c` currently serves.
pub fn pick_worker_core(
    loads: &[CoreLoad],
    candidates: Option<&BTreeSet<usize>>,
    irq_cores: &BTreeMap<usize, u32>,
) -> Option<usize> {
    // 0.1 % resolution: differences below it are sampling noise and count as ties.
    let q = |v: f64| (v * 1000.0).round() as i64;
    loads
        .iter()
        .filter(|l| candidates.is_none_or(|c| c.contains(&l.core)))
        .min_by_key(|l| {
            (
                q(l.p90),
                q(l.p99),
                q(l.mean),
                irq_cores.get(&l.core).copied().unwrap_or(0),
                std::cmp::Reverse(l.core),
            )
        })
        .map(|l| l.core)
}

// ---------------------------------------------------------------------------------------------
// /proc/interrupts

/// One numbered interrupt line of `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqLine {
    pub irq: u32,
    /// Interrupt count per core (core number → count).
    pub counts: BTreeMap<usize, u64>,
    /// Action names (the last column, split at commas), e.g. `["eth0-TxRx-0"]`.
    pub actions: Vec<String>,
    /// The whole description after the counts.
    pub description: String,
}

/// Parses the numbered lines of `/proc/interrupts` (NMI, LOC, … are skipped).
pub fn parse_interrupts(text: &str) -> Result<Vec<IrqLine>> {
    let mut lines = text.lines();
    let header = lines
        .next()
        .ok_or_else(|| TuneError::new("/proc/interrupts", "empty"))?;
    let cpus: Vec<usize> = header
        .split_whitespace()
        .map(|h| {
            h.strip_prefix("CPU")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| {
                    TuneError::new("/proc/interrupts header", format!("bad column {h:?}"))
                })
        })
        .collect::<Result<_>>()?;
    if cpus.is_empty() {
        return Err(TuneError::new("/proc/interrupts header", "no CPU columns"));
    }
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(irq) = name.trim().parse::<u32>() else {
            continue; // NMI, LOC, ERR, MIS, ...
        };
        let mut rest = rest.trim_start();
        let mut counts = BTreeMap::new();
        for &cpu in &cpus {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let tok = &rest[..end];
            let Ok(v) = tok.parse::<u64>() else { break };
            counts.insert(cpu, v);
            rest = rest[end..].trim_start();
        }
        if counts.len() != cpus.len() {
            return Err(TuneError::new(
                format!("/proc/interrupts line {}", i + 2),
                format!("IRQ {irq}: {} counts for {} CPUs", counts.len(), cpus.len()),
            ));
        }
        let description = rest.trim().to_string();
        // Action names follow the chip/hwirq/type columns; with several handlers they are
        // separated by ", ", so take everything after the last run of 2+ spaces… which the
        // kernel does not guarantee. Use the tokens that contain no space after the last
        // column instead: the last token, plus earlier ones ending in ','.
        let toks: Vec<&str> = description.split_whitespace().collect();
        let mut actions = Vec::new();
        if let Some(last) = toks.last() {
            actions.push(last.trim_end_matches(',').to_string());
            for t in toks.iter().rev().skip(1) {
                match t.strip_suffix(',') {
                    Some(a) => actions.push(a.to_string()),
                    None => break,
                }
            }
            actions.reverse();
        }
        out.push(IrqLine {
            irq,
            counts,
            actions,
            description,
        });
    }
    Ok(out)
}

/// Whether an action name belongs to `device`: equal, or `device` followed by a separator
/// (`eth0-TxRx-0`, `eth0:rx`, `mlx5_comp0@pci…`), so `eth1` does not match `eth10`.
pub fn action_matches(action: &str, device: &str) -> bool {
    match action.strip_prefix(device) {
        Some("") => true,
        Some(rest) => rest.starts_with(['-', ':', '@', '.', '_']),
        None => false,
    }
}

/// The virtio device behind a network interface, from the target of its
/// `/sys/class/net/<dev>/device` link (`../../../virtio2` → `virtio2`): virtio-net names its
/// queue interrupts after that device (`virtio2-input.0`), not after the interface.
pub fn virtio_alias(device_link: &str) -> Option<String> {
    let name = device_link
        .trim()
        .trim_end_matches('/')
        .rsplit('/')
        .next()?;
    let n = name.strip_prefix("virtio")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| name.to_string())
}

/// Whether an interrupt action belongs to `device`: by its own name ([`action_matches`]), or,
/// for a virtio NIC whose virtio device is `alias`, by a queue interrupt of that device
/// (`virtio2-input.0`, `virtio2-output.0`; not `virtio2-config`).
pub fn irq_belongs(action: &str, device: &str, alias: Option<&str>) -> bool {
    action_matches(action, device)
        || alias.is_some_and(|v| {
            action
                .strip_prefix(v)
                .is_some_and(|rest| rest.starts_with("-input.") || rest.starts_with("-output."))
        })
}

/// Those of `devices` that `/proc/net/dev` (`net_dev`, its text) does not list, in order.
pub fn unknown_devices(net_dev: &str, devices: &[String]) -> Result<Vec<String>> {
    let known = parse_net_dev(net_dev)?;
    Ok(devices
        .iter()
        .filter(|d| !known.contains_key(d.as_str()))
        .cloned()
        .collect())
}

/// An interrupt of a named device, with the cores that served it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceIrq {
    pub irq: u32,
    pub device: String,
    pub action: String,
    /// Cores whose count rose during the window (or is non-zero with one snapshot).
    pub serving_cores: Vec<usize>,
}

/// The interrupts of `devices`, with serving cores from the count deltas `before → after`
/// (`after = None`: any non-zero count). `aliases` maps a device to the virtio device whose
/// queue interrupts are its own ([`virtio_alias`]).
pub fn device_irqs(
    before: &[IrqLine],
    after: Option<&[IrqLine]>,
    devices: &[String],
    aliases: &BTreeMap<String, String>,
) -> Vec<DeviceIrq> {
    let mut out = Vec::new();
    for line in after.unwrap_or(before) {
        let Some((device, action)) = line.actions.iter().find_map(|a| {
            devices
                .iter()
                .find(|d| irq_belongs(a, d, aliases.get(*d).map(String::as_str)))
                .map(|d| (d.clone(), a.clone()))
        }) else {
            continue;
        };
        let base = after.and_then(|_| before.iter().find(|b| b.irq == line.irq));
        let serving_cores = line
            .counts
            .iter()
            .filter(|(cpu, n)| {
                let b = base.and_then(|b| b.counts.get(cpu)).copied().unwrap_or(0);
                **n > b
            })
            .map(|(cpu, _)| *cpu)
            .collect();
        out.push(DeviceIrq {
            irq: line.irq,
            device,
            action,
            serving_cores,
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// cpumask

/// Formats a set of cores as a Linux cpumask (`/proc/irq/N/smp_affinity`): hex, in 32-bit
/// groups separated by commas, most significant first; e.g. `{0,1}` → `3`, `{33}` → `2,00000000`.
pub fn format_cpumask(cores: &BTreeSet<usize>) -> String {
    let Some(&top) = cores.iter().next_back() else {
        return "0".into();
    };
    let mut groups = vec![0u32; top / 32 + 1];
    for &c in cores {
        groups[c / 32] |= 1 << (c % 32);
    }
    let mut s = String::new();
    for (i, g) in groups.iter().rev().enumerate() {
        if i == 0 {
            s.push_str(&format!("{g:x}"));
        } else {
            s.push_str(&format!(",{g:08x}"));
        }
    }
    s
}

/// Parses a Linux cpumask (the inverse of [`format_cpumask`], also accepting zero-padding).
pub fn parse_cpumask(text: &str) -> Result<BTreeSet<usize>> {
    let mut out = BTreeSet::new();
    let groups: Vec<&str> = text.trim().split(',').collect();
    for (i, g) in groups.iter().rev().enumerate() {
        let v = u32::from_str_radix(g, 16)
            .map_err(|_| TuneError::new("smp_affinity", format!("bad cpumask {text:?}")))?;
        for b in 0..32 {
            if v & (1 << b) != 0 {
                out.insert(i * 32 + b);
            }
        }
    }
    Ok(out)
}

/// Parses a kernel CPU list (`/sys/devices/system/cpu/online`, `Cpus_allowed_list`): `0-3,5`
/// ([`crate::cpus::parse_cpu_list`], with this module's error type).
pub fn parse_cpu_list(text: &str) -> Result<BTreeSet<usize>> {
    crate::cpus::parse_cpu_list(text)
        .map_err(|e| TuneError::new("cpu list", format!("bad CPU list {text:?}: {e}")))
}

// ---------------------------------------------------------------------------------------------
// /proc/net/dev

/// Received packets per interface from `/proc/net/dev`.
pub fn parse_net_dev(text: &str) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if name.contains('|') || name.contains(' ') {
            continue;
        }
        // columns: rx bytes, rx packets, ...
        let pkts = rest
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| {
                TuneError::new(
                    format!("/proc/net/dev line {}", i + 1),
                    format!("no rx packet count for {name}"),
                )
            })?;
        out.insert(name.to_string(), pkts);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// sizes

/// Smallest power of two ≥ `n` (1 for 0), saturating at 2^63.
fn next_pow2(n: u64) -> u64 {
    n.max(1).checked_next_power_of_two().unwrap_or(1 << 63)
}

/// Ring size in descriptors: `clamp(next_pow2(ceil(rate_pps · stall)), min, max)`.
pub fn ring_size(rate_pps: f64, stall: Duration, min: u32, max: u32) -> Result<u32> {
    if !rate_pps.is_finite() || rate_pps < 0.0 {
        return Err(TuneError::new(
            "rate_pps",
            format!("{rate_pps} is not a rate"),
        ));
    }
    for (f, v) in [("ring_min", min), ("ring_max", max)] {
        if !v.is_power_of_two() {
            return Err(TuneError::new(f, format!("{v} is not a power of two")));
        }
    }
    if min > max {
        return Err(TuneError::new(
            "ring_min",
            format!("{min} is larger than ring_max {max}"),
        ));
    }
    let need = (rate_pps * stall.as_secs_f64()).ceil();
    let need = if need >= u64::MAX as f64 {
        u64::MAX
    } else {
        need as u64
    };
    Ok(next_pow2(need).clamp(min as u64, max as u64) as u32)
}

/// Socket buffer in bytes: `ceil(k · 2 · B · D_oneway / 8)` (paper 002, eq. 1).
pub fn socket_buffer_bytes(bandwidth_bps: f64, one_way_delay: Duration, k: f64) -> Result<u64> {
    if !bandwidth_bps.is_finite() || bandwidth_bps <= 0.0 {
        return Err(TuneError::new(
            "bandwidth",
            format!("{bandwidth_bps} bit/s is not a bandwidth"),
        ));
    }
    if !k.is_finite() || k < 1.0 {
        return Err(TuneError::new("k", format!("{k} must be at least 1")));
    }
    Ok((k * 2.0 * bandwidth_bps * one_way_delay.as_secs_f64() / 8.0).ceil() as u64)
}

// ---------------------------------------------------------------------------------------------
// the plan

/// Raw material of one tuning run: snapshots of `/proc` files over a window.
#[derive(Debug, Clone, Default)]
pub struct TuneInput {
    /// `/proc/stat` texts, one per sample, `interval` apart.
    pub stat: Vec<String>,
    pub interval: Duration,
    /// `/proc/interrupts` at the start and the end of the window.
    pub interrupts_before: Option<String>,
    pub interrupts_after: Option<String>,
    /// `/proc/net/dev` texts, one per sample (may be empty when the rate is given).
    pub net_dev: Vec<String>,
    /// Current `smp_affinity` per IRQ, where readable.
    pub affinity: BTreeMap<u32, String>,
    /// Device → virtio device naming its queue interrupts ([`virtio_alias`]).
    pub aliases: BTreeMap<String, String>,
}

/// What to tune for.
#[derive(Debug, Clone)]
pub struct TuneParams {
    /// Devices whose interrupts to keep off the worker and whose arrival rate sizes the rings.
    pub devices: Vec<String>,
    /// Cores the worker may use (all when `None`).
    pub candidates: Option<BTreeSet<usize>>,
    /// Arrival rate in packets/s; measured from `/proc/net/dev` when `None`.
    pub rate_pps: Option<f64>,
    pub stall: Duration,
    pub ring_min: u32,
    pub ring_max: u32,
    /// Link bandwidth in bit/s and one-way delay for the socket buffers; skipped when `None`.
    pub bandwidth_bps: Option<f64>,
    pub one_way_delay: Duration,
    pub k: f64,
}

impl Default for TuneParams {
    fn default() -> Self {
        TuneParams {
            devices: Vec::new(),
            candidates: None,
            rate_pps: None,
            stall: Duration::from_millis(1),
            ring_min: 64,
            ring_max: 4096,
            bandwidth_bps: None,
            one_way_delay: Duration::from_micros(100),
            k: 1.0,
        }
    }
}

/// A proposed `/proc/irq/N/smp_affinity` change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqAffinity {
    pub irq: u32,
    pub device: String,
    pub action: String,
    pub serving_cores: Vec<usize>,
    /// Current mask, if it could be read.
    pub current: Option<String>,
    pub proposed: String,
    /// Whether `proposed` differs from `current` (`true` when current is unknown).
    pub change: bool,
}

/// Ring sizing result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RingSizing {
    /// Peak per-interval arrival rate (packets/s) used.
    pub rate_pps: f64,
    /// Whether the rate was measured (vs. given).
    pub measured: bool,
    pub stall_us: u64,
    pub ring_min: u32,
    pub ring_max: u32,
    pub ring_size: u32,
}

/// Socket buffer result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BufferSizing {
    pub bandwidth_bps: f64,
    pub one_way_delay_us: u64,
    pub k: f64,
    pub bytes: u64,
}

/// The outcome of a tuning run: what `llrouter tune` shows and, with `--apply`, partly writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunePlan {
    pub interval_ms: u64,
    pub cores: Vec<CoreLoad>,
    pub worker_core: usize,
    pub irqs: Vec<IrqAffinity>,
    pub ring: Option<RingSizing>,
    pub socket_buffer: Option<BufferSizing>,
    /// Things the operator should know (e.g. a device with no interrupts found).
    pub warnings: Vec<String>,
}

/// Decides everything from the sampled input. Pure: no I/O.
pub fn plan(input: &TuneInput, params: &TuneParams) -> Result<TunePlan> {
    let snaps = input
        .stat
        .iter()
        .map(|t| parse_proc_stat(t))
        .collect::<Result<Vec<_>>>()?;
    let cores = core_loads(&snaps)?;
    let online: BTreeSet<usize> = cores.iter().map(|c| c.core).collect();
    let mut warnings = Vec::new();

    if let Some(c) = &params.candidates {
        if let Some(bad) = c.iter().find(|c| !online.contains(c)) {
            return Err(TuneError::new(
                "cores",
                format!("core {bad} is not online (online: {online:?})"),
            ));
        }
    }

    let before = match &input.interrupts_before {
        Some(t) => Some(parse_interrupts(t)?),
        None => None,
    };
    let after = match &input.interrupts_after {
        Some(t) => Some(parse_interrupts(t)?),
        None => None,
    };
    let dirqs = match (&before, &after) {
        (Some(b), a) => device_irqs(b, a.as_deref(), &params.devices, &input.aliases),
        (None, Some(a)) => device_irqs(a, None, &params.devices, &input.aliases),
        (None, None) => Vec::new(),
    };
    for d in &params.devices {
        if !dirqs.iter().any(|i| &i.device == d) {
            warnings.push(format!(
                "no interrupt of device {d} in /proc/interrupts (virtual device, or IRQ named \
                 differently?)"
            ));
        }
    }
    let mut irq_cores: BTreeMap<usize, u32> = BTreeMap::new();
    for i in &dirqs {
        for c in &i.serving_cores {
            *irq_cores.entry(*c).or_default() += 1;
        }
    }

    let worker_core = pick_worker_core(&cores, params.candidates.as_ref(), &irq_cores)
        .ok_or_else(|| TuneError::new("cores", "no candidate core"))?;

    let rest: BTreeSet<usize> = online
        .iter()
        .copied()
        .filter(|c| *c != worker_core)
        .collect();
    let mut irqs = Vec::new();
    if rest.is_empty() && !dirqs.is_empty() {
        warnings.push(format!(
            "only core {worker_core} is online: interrupts cannot be moved off the worker"
        ));
    } else {
        let proposed = format_cpumask(&rest);
        for d in dirqs {
            let current = input.affinity.get(&d.irq).map(|s| s.trim().to_string());
            let change = match &current {
                Some(c) => parse_cpumask(c).map(|m| m != rest).unwrap_or(true),
                None => true,
            };
            irqs.push(IrqAffinity {
                irq: d.irq,
                device: d.device,
                action: d.action,
                serving_cores: d.serving_cores,
                current,
                proposed: proposed.clone(),
                change,
            });
        }
    }

    let ring = match params.rate_pps {
        Some(r) => Some((r, false)),
        None => measured_rate(input, &params.devices, &mut warnings)?.map(|r| (r, true)),
    }
    .map(|(rate, measured)| {
        ring_size(rate, params.stall, params.ring_min, params.ring_max).map(|n| RingSizing {
            rate_pps: rate,
            measured,
            stall_us: params.stall.as_micros() as u64,
            ring_min: params.ring_min,
            ring_max: params.ring_max,
            ring_size: n,
        })
    })
    .transpose()?;

    let socket_buffer = params
        .bandwidth_bps
        .map(|b| {
            socket_buffer_bytes(b, params.one_way_delay, params.k).map(|bytes| BufferSizing {
                bandwidth_bps: b,
                one_way_delay_us: params.one_way_delay.as_micros() as u64,
                k: params.k,
                bytes,
            })
        })
        .transpose()?;

    Ok(TunePlan {
        interval_ms: input.interval.as_millis() as u64,
        cores,
        worker_core,
        irqs,
        ring,
        socket_buffer,
        warnings,
    })
}

/// Peak per-interval receive rate summed over `devices`, or `None` without data.
fn measured_rate(
    input: &TuneInput,
    devices: &[String],
    warnings: &mut Vec<String>,
) -> Result<Option<f64>> {
    if devices.is_empty() || input.net_dev.len() < 2 {
        return Ok(None);
    }
    if input.interval.is_zero() {
        return Err(TuneError::new("interval", "must be positive"));
    }
    let snaps = input
        .net_dev
        .iter()
        .map(|t| parse_net_dev(t))
        .collect::<Result<Vec<_>>>()?;
    for d in devices {
        if !snaps[0].contains_key(d) {
            warnings.push(format!("device {d} not in /proc/net/dev: rate not counted"));
        }
    }
    let mut peak = 0.0f64;
    for w in snaps.windows(2) {
        let mut pkts = 0u64;
        for d in devices {
            if let (Some(a), Some(b)) = (w[0].get(d), w[1].get(d)) {
                pkts += b.saturating_sub(*a);
            }
        }
        peak = peak.max(pkts as f64 / input.interval.as_secs_f64());
    }
    Ok(Some(peak))
}

// ---------------------------------------------------------------------------------------------
// I/O

/// The virtio device of each of `devices` that is a virtio NIC, from
/// `<sys_root>/class/net/<dev>/device` (see [`virtio_alias`]).
pub fn device_aliases(sys_root: &Path, devices: &[String]) -> BTreeMap<String, String> {
    devices
        .iter()
        .filter_map(|d| {
            let link =
                std::fs::read_link(sys_root.join("class/net").join(d).join("device")).ok()?;
            Some((d.clone(), virtio_alias(&link.to_string_lossy())?))
        })
        .collect()
}

/// Reads `<proc_root>/stat` (and `net/dev`) `samples` times, `interval` apart, plus
/// `interrupts` at both ends and the current affinities of every numbered IRQ of `devices`
/// (by name or through `aliases`, see [`device_irqs`]). `sleep` is called between samples
/// (tests pass a no-op).
pub fn sample(
    proc_root: &Path,
    samples: usize,
    interval: Duration,
    devices: &[String],
    aliases: &BTreeMap<String, String>,
    mut sleep: impl FnMut(Duration),
) -> Result<TuneInput> {
    if samples < 2 {
        return Err(TuneError::new(
            "samples",
            format!("{samples}: need at least 2"),
        ));
    }
    let read = |rel: &str| -> Result<String> {
        let p = proc_root.join(rel);
        std::fs::read_to_string(&p)
            .map_err(|e| TuneError::new(p.display().to_string(), e.to_string()))
    };
    let want_net = !devices.is_empty();
    let mut input = TuneInput {
        interval,
        interrupts_before: read("interrupts").ok(),
        aliases: aliases.clone(),
        ..TuneInput::default()
    };
    for i in 0..samples {
        if i > 0 {
            sleep(interval);
        }
        input.stat.push(read("stat")?);
        if want_net {
            if let Ok(t) = read("net/dev") {
                input.net_dev.push(t);
            }
        }
    }
    input.interrupts_after = read("interrupts").ok();
    if let Some(t) = input
        .interrupts_after
        .as_ref()
        .or(input.interrupts_before.as_ref())
    {
        for line in parse_interrupts(t)? {
            if line.actions.iter().any(|a| {
                devices
                    .iter()
                    .any(|d| irq_belongs(a, d, aliases.get(d).map(String::as_str)))
            }) {
                if let Ok(m) = read(&format!("irq/{}/smp_affinity", line.irq)) {
                    input.affinity.insert(line.irq, m.trim().to_string());
                }
            }
        }
    }
    Ok(input)
}

/// Outcome of writing one affinity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Applied {
    pub irq: u32,
    pub path: PathBuf,
    pub mask: String,
    /// `None` on success, else the error text.
    pub error: Option<String>,
}

/// Writes every proposed mask that differs from the current one to
/// `<proc_root>/irq/N/smp_affinity`. Continues past failures (some interrupts, e.g. managed
/// ones, refuse to move: EIO) and reports each one.
pub fn apply(plan: &TunePlan, proc_root: &Path) -> Vec<Applied> {
    plan.irqs
        .iter()
        .filter(|i| i.change)
        .map(|i| {
            let path = proc_root.join(format!("irq/{}/smp_affinity", i.irq));
            let error = std::fs::write(&path, format!("{}\n", i.proposed))
                .err()
                .map(|e| e.to_string());
            Applied {
                irq: i.irq,
                path,
                mask: i.proposed.clone(),
                error,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc/stat` text with `(busy, idle)` ticks per core.
    fn stat(cores: &[(u64, u64)]) -> String {
        let mut s = String::from("cpu  1 2 3 4 5 6 7 8 0 0\n");
        for (i, (busy, idle)) in cores.iter().enumerate() {
            // spread busy over user/system/softirq to exercise the sum
            let (u, sy, si) = (busy / 2, busy / 4, busy - busy / 2 - busy / 4);
            s.push_str(&format!("cpu{i} {u} 0 {sy} {idle} 0 0 {si} 0 0 0\n"));
        }
        s.push_str("intr 12345 0 0\nctxt 999\nbtime 1700000000\n");
        s
    }

    /// Cumulative snapshots from per-interval (busy fraction ×100) per core.
    fn series(per_interval: &[&[u64]]) -> Vec<String> {
        let n = per_interval[0].len();
        let mut acc = vec![(1000u64, 1000u64); n];
        let mut out = vec![stat(&acc)];
        for iv in per_interval {
            for (c, b) in iv.iter().enumerate() {
                acc[c].0 += b;
                acc[c].1 += 100 - b;
            }
            out.push(stat(&acc));
        }
        out
    }

    const INTERRUPTS: &str = "\
           CPU0       CPU1       CPU2       CPU3
  0:         44          0          0          0   IO-APIC   2-edge      timer
  9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
 24:       1000          0          0          0   PCI-MSI 524288-edge      eth0-TxRx-0
 25:          0       2000          0          0   PCI-MSI 524289-edge      eth0-TxRx-1
 26:          5          0          0          0   PCI-MSI 524290-edge      eth0
 27:          0          0          0        300   PCI-MSI 1048576-edge      eth10-TxRx-0
 28:          0          0          7          0   PCI-MSI 1048577-edge      ahci[0000:00:1f.2], eth1
NMI:          0          0          0          0   Non-maskable interrupts
LOC:     123456     654321     111111     222222   Local timer interrupts
ERR:          0
";

    #[test]
    fn parses_stat_and_busy_fraction() {
        let a = parse_proc_stat(&stat(&[(100, 300), (0, 400)])).unwrap();
        let b = parse_proc_stat(&stat(&[(150, 350), (40, 460)])).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[&0].busy(), 100);
        let f = busy_fractions(&a, &b).unwrap();
        assert!((f[&0] - 0.5).abs() < 1e-12);
        assert!((f[&1] - 0.4).abs() < 1e-12);
        // no time elapsed → error naming the core
        let e = busy_fractions(&a, &a).unwrap_err();
        assert_eq!(e.field, "/proc/stat cpu0");
        // backwards
        assert!(busy_fractions(&b, &a)
            .unwrap_err()
            .reason
            .contains("backwards"));
    }

    #[test]
    fn bad_stat_names_line() {
        let e = parse_proc_stat("cpu 1 2 3 4\ncpu0 1 x 3 4\n").unwrap_err();
        assert_eq!(e.field, "/proc/stat line 2");
        assert!(parse_proc_stat("cpu0 1 2\n")
            .unwrap_err()
            .reason
            .contains("at least 4"));
        assert!(parse_proc_stat("intr 1\n").is_err());
    }

    #[test]
    fn percentiles_nearest_rank() {
        let s: Vec<f64> = (1..=10).map(|i| i as f64 / 10.0).collect();
        assert_eq!(percentile(&s, 0.5), 0.5);
        assert_eq!(percentile(&s, 0.9), 0.9);
        assert_eq!(percentile(&s, 0.99), 1.0);
        assert_eq!(percentile(&s, 0.0), 0.1);
        let l = CoreLoad::from_samples(3, vec![0.3, 0.1, 0.2, 0.4]);
        assert_eq!(l.p50, 0.2);
        assert_eq!(l.max, 0.4);
        assert!((l.mean - 0.25).abs() < 1e-12);
        assert_eq!(
            l.ecdf,
            vec![(0.1, 0.25), (0.2, 0.5), (0.3, 0.75), (0.4, 1.0)]
        );
    }

    #[test]
    fn picks_least_loaded_core() {
        // core 2 is idle most of the time but has one spike; core 1 is steady 5 %;
        // core 0 and 3 are busy. p90 over 10 samples = 9th value.
        let iv: Vec<[u64; 4]> = (0..10)
            .map(|i| [80, 5, if i == 9 { 90 } else { 0 }, 50])
            .collect();
        let ivr: Vec<&[u64]> = iv.iter().map(|a| &a[..]).collect();
        let snaps: Vec<_> = series(&ivr)
            .iter()
            .map(|t| parse_proc_stat(t).unwrap())
            .collect();
        let loads = core_loads(&snaps).unwrap();
        assert_eq!(loads.len(), 4);
        assert_eq!(loads[2].p90, 0.0);
        assert_eq!(loads[2].max, 0.9);
        let none = BTreeMap::new();
        assert_eq!(pick_worker_core(&loads, None, &none), Some(2));
        // restricted to {0, 1, 3} → 1
        let cand: BTreeSet<usize> = [0, 1, 3].into();
        assert_eq!(pick_worker_core(&loads, Some(&cand), &none), Some(1));
    }

    #[test]
    fn tie_break_fewest_irqs_then_highest_core() {
        let loads: Vec<CoreLoad> = (0..4)
            .map(|c| CoreLoad::from_samples(c, vec![0.0, 0.0005]))
            .collect();
        let none = BTreeMap::new();
        assert_eq!(pick_worker_core(&loads, None, &none), Some(3));
        let irq: BTreeMap<usize, u32> = [(3, 1), (2, 2)].into();
        assert_eq!(pick_worker_core(&loads, None, &irq), Some(1));
    }

    #[test]
    fn interrupts_parse_and_match_devices() {
        let lines = parse_interrupts(INTERRUPTS).unwrap();
        assert_eq!(lines.len(), 7);
        assert_eq!(lines[2].irq, 24);
        assert_eq!(lines[2].counts[&0], 1000);
        assert_eq!(lines[2].actions, vec!["eth0-TxRx-0"]);
        assert_eq!(lines[6].actions, vec!["ahci[0000:00:1f.2]", "eth1"]);
        let d = device_irqs(
            &lines,
            None,
            &["eth0".into(), "eth1".into()],
            &BTreeMap::new(),
        );
        let irqs: Vec<u32> = d.iter().map(|i| i.irq).collect();
        assert_eq!(irqs, vec![24, 25, 26, 28]); // not 27 (eth10)
        assert_eq!(d[1].serving_cores, vec![1]);
        assert_eq!(d[3].device, "eth1");
        // with a second snapshot, serving cores come from deltas
        let after = INTERRUPTS.replace(" 24:       1000          0", " 24:       1000         10");
        let after = parse_interrupts(&after).unwrap();
        let d = device_irqs(&lines, Some(&after), &["eth0".into()], &BTreeMap::new());
        assert_eq!(d[0].serving_cores, vec![1]);
        assert!(d[1].serving_cores.is_empty());
        // bad input names the line
        let e = parse_interrupts("CPU0 CPU1\n 5: 1 x foo\n").unwrap_err();
        assert_eq!(e.field, "/proc/interrupts line 2");
        assert!(parse_interrupts("").is_err());
    }

    /// A virtio NIC: /proc/interrupts names its queues after the virtio device, which only
    /// sysfs relates to the interface.
    #[test]
    fn virtio_nic_queues_found_through_sysfs() {
        const VIRTIO: &str = "\
           CPU0       CPU1
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0       1440 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:        904          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 41:       2044          0 PCI-MSIX-0000:00:04.0   1-edge      virtio20-input.0
 42:          0       3970 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx
";
        assert_eq!(virtio_alias("../../../virtio2").as_deref(), Some("virtio2"));
        assert_eq!(
            virtio_alias("../../../virtio2/\n").as_deref(),
            Some("virtio2")
        );
        assert_eq!(virtio_alias("../../../0000:00:1f.6"), None);
        assert_eq!(virtio_alias("virtio"), None);
        let lines = parse_interrupts(VIRTIO).unwrap();
        let eth0 = vec!["eth0".to_string()];
        assert!(device_irqs(&lines, None, &eth0, &BTreeMap::new()).is_empty());

        // A synthetic sysfs tree: eth0 → virtio2, as on a KVM guest.
        let sys = tree("sys");
        let dev = sys.join("devices/pci0000:00/0000:00:03.0/virtio2");
        std::fs::create_dir_all(sys.join("class/net/eth0")).unwrap();
        std::fs::create_dir_all(&dev).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:00:03.0/virtio2",
            sys.join("class/net/eth0/device"),
        )
        .unwrap();
        let aliases = device_aliases(&sys, &eth0);
        assert_eq!(aliases.get("eth0").map(String::as_str), Some("virtio2"));
        let d = device_irqs(&lines, None, &eth0, &aliases);
        // The queues, not the config interrupt nor virtio20's.
        assert_eq!(d.iter().map(|i| i.irq).collect::<Vec<_>>(), vec![38, 39]);
        assert_eq!(d[0].serving_cores, vec![1]);
        assert_eq!(d[0].device, "eth0");
        assert_eq!(d[1].action, "virtio2-output.0");
        std::fs::remove_dir_all(&sys).unwrap();
    }

    #[test]
    fn cpu_lists() {
        let s = |v: &[usize]| v.iter().copied().collect::<BTreeSet<_>>();
        assert_eq!(parse_cpu_list("0-1\n").unwrap(), s(&[0, 1]));
        assert_eq!(parse_cpu_list("0,2-4,7").unwrap(), s(&[0, 2, 3, 4, 7]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
    }

    #[test]
    fn unknown_devices_are_named() {
        let net = NET_DEV.replace("PKTS", "1");
        let devs = vec!["eth0".to_string(), "nosuch0".to_string(), "lo".to_string()];
        assert_eq!(unknown_devices(&net, &devs).unwrap(), vec!["nosuch0"]);
    }

    #[test]
    fn cpumask_round_trip() {
        let s = |v: &[usize]| v.iter().copied().collect::<BTreeSet<_>>();
        assert_eq!(format_cpumask(&s(&[0, 1])), "3");
        assert_eq!(format_cpumask(&s(&[0, 2, 3])), "d");
        assert_eq!(format_cpumask(&s(&[33])), "2,00000000");
        assert_eq!(format_cpumask(&s(&[])), "0");
        assert_eq!(
            parse_cpumask("00000000,0000000f").unwrap(),
            s(&[0, 1, 2, 3])
        );
        assert_eq!(parse_cpumask("2,00000001\n").unwrap(), s(&[0, 33]));
        assert!(parse_cpumask("zz").is_err());
    }

    #[test]
    fn ring_and_buffer_formulas() {
        // 1 Mpps × 1 ms = 1000 → 1024
        assert_eq!(
            ring_size(1e6, Duration::from_millis(1), 64, 4096).unwrap(),
            1024
        );
        // exact power of two stays
        assert_eq!(
            ring_size(512e3, Duration::from_millis(1), 64, 4096).unwrap(),
            512
        );
        // clamped both ways
        assert_eq!(
            ring_size(10.0, Duration::from_millis(1), 64, 4096).unwrap(),
            64
        );
        assert_eq!(
            ring_size(1e8, Duration::from_millis(1), 64, 4096).unwrap(),
            4096
        );
        assert_eq!(
            ring_size(0.0, Duration::from_millis(1), 64, 4096).unwrap(),
            64
        );
        assert_eq!(
            ring_size(1e6, Duration::from_millis(1), 100, 4096)
                .unwrap_err()
                .field,
            "ring_min"
        );
        assert_eq!(
            ring_size(1e6, Duration::from_millis(1), 128, 64)
                .unwrap_err()
                .field,
            "ring_min"
        );
        assert_eq!(
            ring_size(f64::NAN, Duration::from_millis(1), 64, 64)
                .unwrap_err()
                .field,
            "rate_pps"
        );
        // 10 Gbit/s, 100 µs one-way, k=1: 2·1e10·1e-4/8 = 250000 bytes
        assert_eq!(
            socket_buffer_bytes(1e10, Duration::from_micros(100), 1.0).unwrap(),
            250_000
        );
        assert_eq!(
            socket_buffer_bytes(1e9, Duration::from_millis(1), 2.0).unwrap(),
            500_000
        );
        assert_eq!(
            socket_buffer_bytes(1e9, Duration::from_millis(1), 0.5)
                .unwrap_err()
                .field,
            "k"
        );
        assert_eq!(
            socket_buffer_bytes(0.0, Duration::from_millis(1), 1.0)
                .unwrap_err()
                .field,
            "bandwidth"
        );
    }

    const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 6000000  PKTS    0    0    0     0          0         0        0       0    0    0    0     0       0          0
";

    fn tree(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "llr-ops-tune-{}-{}-{}",
            std::process::id(),
            tag,
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    }

    #[test]
    fn plan_then_apply_writes_masks_into_temp_tree() {
        // cores 0..3; core 1 is the least loaded but serves eth0's IRQ 25.
        let iv: Vec<[u64; 4]> = (0..5).map(|_| [60, 2, 30, 40]).collect();
        let ivr: Vec<&[u64]> = iv.iter().map(|a| &a[..]).collect();
        let mut input = TuneInput {
            stat: series(&ivr),
            interval: Duration::from_millis(500),
            interrupts_before: Some(INTERRUPTS.into()),
            interrupts_after: None,
            net_dev: [0u64, 100_000, 300_000, 350_000]
                .iter()
                .map(|p| NET_DEV.replace("PKTS", &p.to_string()))
                .collect(),
            affinity: BTreeMap::new(),
            aliases: BTreeMap::new(),
        };
        input.affinity.insert(24, "f".into());
        input.affinity.insert(25, "d".into()); // already {0,2,3}
        let params = TuneParams {
            devices: vec!["eth0".into()],
            bandwidth_bps: Some(1e9),
            one_way_delay: Duration::from_millis(1),
            ..TuneParams::default()
        };
        let p = plan(&input, &params).unwrap();
        assert_eq!(p.worker_core, 1);
        assert_eq!(p.irqs.len(), 3);
        assert!(p.irqs.iter().all(|i| i.proposed == "d"));
        assert_eq!(
            p.irqs.iter().map(|i| i.change).collect::<Vec<_>>(),
            vec![true, false, true]
        );
        // peak 200000 packets per 0.5 s = 400 kpps × 1 ms = 400 → 512
        let r = p.ring.as_ref().unwrap();
        assert!(r.measured);
        assert_eq!(r.rate_pps, 400_000.0);
        assert_eq!(r.ring_size, 512);
        assert_eq!(p.socket_buffer.as_ref().unwrap().bytes, 250_000);
        // JSON round trip has the fields the docs promise
        let j = serde_json::to_value(&p).unwrap();
        assert_eq!(j["worker_core"], 1);
        assert_eq!(j["cores"][1]["p99"], 0.02);

        // apply into a temp tree: only IRQs 24 and 26 are written
        let root = tree("apply");
        for irq in [24, 25, 26] {
            let d = root.join(format!("irq/{irq}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("smp_affinity"), "f\n").unwrap();
        }
        let done = apply(&p, &root);
        assert_eq!(done.len(), 2);
        assert!(done.iter().all(|a| a.error.is_none()));
        let read = |irq: u32| {
            std::fs::read_to_string(root.join(format!("irq/{irq}/smp_affinity"))).unwrap()
        };
        assert_eq!(read(24), "d\n");
        assert_eq!(read(25), "f\n"); // untouched: plan said no change
        assert_eq!(read(26), "d\n");
        // a missing file is reported, not a panic
        std::fs::remove_dir_all(root.join("irq/26")).unwrap();
        let done = apply(&p, &root);
        assert!(done[1].error.is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn sample_reads_tree_and_plan_rejects_bad_candidates() {
        let root = tree("sample");
        std::fs::create_dir_all(root.join("net")).unwrap();
        std::fs::create_dir_all(root.join("irq/24")).unwrap();
        std::fs::write(root.join("interrupts"), INTERRUPTS).unwrap();
        std::fs::write(root.join("irq/24/smp_affinity"), "00000003\n").unwrap();
        std::fs::write(root.join("net/dev"), NET_DEV.replace("PKTS", "5")).unwrap();
        let snaps = series(&[&[10, 20, 30, 40], &[10, 20, 30, 0]]);
        let mut k = 0;
        // the sleep hook rewrites /proc/stat: a fake clock
        std::fs::write(root.join("stat"), &snaps[0]).unwrap();
        let input = sample(
            &root,
            3,
            Duration::from_millis(10),
            &["eth0".into()],
            &BTreeMap::new(),
            |_| {
                k += 1;
                std::fs::write(root.join("stat"), &snaps[k]).unwrap();
            },
        )
        .unwrap();
        assert_eq!(input.stat.len(), 3);
        assert_eq!(input.net_dev.len(), 3);
        assert_eq!(
            input.affinity.get(&24).map(String::as_str),
            Some("00000003")
        );
        let p = plan(&input, &TuneParams::default()).unwrap();
        assert_eq!(p.worker_core, 0);
        let params = TuneParams {
            candidates: Some([7].into()),
            ..TuneParams::default()
        };
        assert_eq!(plan(&input, &params).unwrap_err().field, "cores");
        assert_eq!(
            sample(&root, 1, Duration::ZERO, &[], &BTreeMap::new(), |_| {})
                .unwrap_err()
                .field,
            "samples"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
