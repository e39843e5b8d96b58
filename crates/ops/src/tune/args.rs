//! `llrouter tune`'s settings (the flags are derived from [`TuneArgs`] with the `clap`
//! feature), their checks before the sampling window, and the [`TuneParams`] they give.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use super::{IrqPlacement, TuneError, TuneParams};

/// Sample per-core load and propose host settings for the router's workers (paper 002).
///
/// Reads <PROC_ROOT>/stat SAMPLES times, INTERVAL_MS apart, and reports the busy-fraction
/// percentiles (p50, p90, p99, max) of every core; picks the --workers least-loaded distinct
/// cores for the workers (idle cores, p90 ≤ 10 %, first, and among them those serving none of the
/// --dev interrupts; then smallest p90, p99, mean at 0.1 % resolution; then fewest device
/// interrupts; then the highest core number) and prints them as the config line `cores = [..]`;
/// finds the interrupts of --dev devices in <PROC_ROOT>/interrupts and proposes smp_affinity
/// masks: off the workers (paper 002: the packet-processing cores take no device interrupts) or,
/// with --irq on-workers or when no core is left over, queue i's interrupts on worker i's core
/// (worker i serves Rx queue i; with --queues-per-worker Q, queues i·Q … i·Q+Q−1); sizes rings as
/// next_pow2(ceil(rate × stall)) clamped to [--ring-min, --ring-max], the rate measured from
/// <PROC_ROOT>/net/dev unless --rate-pps is given; and socket buffers as ceil(k·2·B·D/8) bytes
/// when --bandwidth-mbps is given.
///
/// Without --apply nothing is written. With --apply the proposed masks are written to
/// <PROC_ROOT>/irq/N/smp_affinity (root needed); failures are reported per IRQ.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TuneArgs {
    /// Number of /proc/stat samples (at least 2; intervals = samples − 1).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 6))]
    pub samples: usize,
    /// Time between samples, in ms.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1000))]
    pub interval_ms: u64,
    /// Network device whose interrupts to move and whose arrival rate sizes the rings
    /// (repeatable, or comma-separated).
    #[cfg_attr(feature = "clap", arg(long = "dev", value_delimiter = ','))]
    pub devices: Vec<String>,
    /// Cores the workers may run on, e.g. "1,2,3" (default: every online core).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub cores: Vec<usize>,
    /// Worker threads to place, one per core (the router's `cores = [..]`).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub workers: usize,
    /// Rx queues per worker: 1 with RSS (worker i serves queue i); the number of classes with
    /// `steering = "queues"` or `"ntuple"` (worker i serves queues i·Q … i·Q+Q−1).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub queues_per_worker: usize,
    /// Where the devices' interrupts go: off-workers (paper 002), on-workers (queue i's on
    /// worker i's core), auto (off-workers when a core is left over, else on-workers).
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = IrqPlacement::Auto))]
    pub irq: IrqPlacement,
    /// Arrival rate in packets/s (default: the peak measured on --dev during sampling).
    #[cfg_attr(feature = "clap", arg(long))]
    pub rate_pps: Option<f64>,
    /// Longest worker stall the ring must absorb without loss, in µs.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TuneParams::DEFAULT_STALL_US))]
    pub stall_us: u64,
    /// Smallest ring size the driver accepts (power of two).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TuneParams::DEFAULT_RING_MIN))]
    pub ring_min: u32,
    /// Largest ring size the driver accepts (power of two; see `ethtool -g`).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TuneParams::DEFAULT_RING_MAX))]
    pub ring_max: u32,
    /// Link bandwidth in Mbit/s, for the socket-buffer size.
    #[cfg_attr(feature = "clap", arg(long))]
    pub bandwidth_mbps: Option<f64>,
    /// One-way delay to the peers in µs, for the socket-buffer size.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TuneParams::DEFAULT_DELAY_US))]
    pub delay_us: u64,
    /// Safety factor k ≥ 1 of the socket-buffer formula.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1.0))]
    pub k: f64,
    /// Root of the proc file system (tests point it at a synthetic tree).
    #[cfg_attr(feature = "clap", arg(long, default_value = "/proc"))]
    pub proc_root: PathBuf,
    /// Root of sysfs, where a virtio NIC's interface is related to the virtio device that names
    /// its queue interrupts (`virtio2-input.0`).
    #[cfg_attr(feature = "clap", arg(long, default_value = "/sys"))]
    pub sys_root: PathBuf,
    /// Write the proposed IRQ affinities.
    #[cfg_attr(feature = "clap", arg(long))]
    pub apply: bool,
    /// Print the plan as JSON (with --watch: one JSON object per window and line).
    #[cfg_attr(feature = "clap", arg(long))]
    pub json: bool,
    /// Keep sampling: every --samples samples (a window, the next starting where the last
    /// ended), print each core's load statistics (mean, percentiles, the fitted exponential and
    /// the upper tail against it, paper 002) instead of a plan, until Ctrl-C or --count.
    #[cfg_attr(feature = "clap", arg(long))]
    pub watch: bool,
    /// With --watch: stop after this many windows.
    #[cfg_attr(feature = "clap", arg(long))]
    pub count: Option<usize>,
}

/// Why the settings cannot be used: a flag (a usage error), or a file of `--proc-root` that
/// cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{0}")]
    Flag(TuneError),
    #[error("{}: {err}", path.display())]
    Read { path: PathBuf, err: std::io::Error },
}

fn flag(field: &str, reason: impl Into<String>) -> CheckError {
    CheckError::Flag(TuneError::new(field, reason))
}

/// An error of the planner as one naming the flag it comes from, where it does.
pub fn flag_error(e: TuneError) -> Result<TuneError, TuneError> {
    let flag = match e.field.as_str() {
        "samples" => "samples",
        "interval" => "interval-ms",
        "cores" => "cores",
        "workers" => "workers",
        "queues_per_worker" => "queues-per-worker",
        "irq" => "irq",
        "rate_pps" => "rate-pps",
        "ring_min" => "ring-min",
        "ring_max" => "ring-max",
        "bandwidth" => "bandwidth-mbps",
        "k" => "k",
        _ => return Err(e),
    };
    Ok(TuneError::new(flag, e.reason))
}

fn to_flag(e: TuneError) -> CheckError {
    match flag_error(e) {
        Ok(f) => CheckError::Flag(f),
        Err(e) => CheckError::Flag(e),
    }
}

impl TuneArgs {
    /// Checks the options before the sampling window starts (seconds lost otherwise).
    pub fn check(&self) -> Result<(), CheckError> {
        if self.samples < 2 {
            return Err(flag(
                "samples",
                format!(
                    "{} is too few: at least 2 (the busy fraction is a difference of two samples)",
                    self.samples
                ),
            ));
        }
        if self.interval_ms == 0 {
            return Err(flag("interval-ms", "must be at least 1 ms"));
        }
        if self.count.is_some() && !self.watch {
            return Err(flag("count", "counts --watch windows; give --watch too"));
        }
        if self.count == Some(0) {
            return Err(flag("count", "0: at least one window"));
        }
        if self.watch && self.apply {
            return Err(flag(
                "apply",
                "--watch only watches; run `llrouter tune --apply` on its own to write affinities",
            ));
        }
        // The ring formula's own checks, on a dummy rate: the same message now as after sampling.
        let rate = self.rate_pps.unwrap_or(0.0);
        super::ring_size(
            rate,
            Duration::from_micros(self.stall_us),
            self.ring_min,
            self.ring_max,
        )
        .map_err(to_flag)?;
        if let Some(b) = self.bandwidth_mbps {
            super::socket_buffer_bytes(b * 1e6, Duration::from_micros(self.delay_us), self.k)
                .map_err(to_flag)?;
        }
        if self.workers == 0 {
            return Err(flag(
                "workers",
                "0: at least one worker (the router runs one per core in `cores = [..]`)",
            ));
        }
        if self.queues_per_worker == 0 {
            return Err(flag(
                "queues-per-worker",
                "0: a worker serves at least one queue",
            ));
        }
        if !self.cores.is_empty() || self.workers > 1 {
            let stat = self.proc_root.join("stat");
            let text = std::fs::read_to_string(&stat).map_err(|err| CheckError::Read {
                path: stat.clone(),
                err,
            })?;
            let online = super::parse_proc_stat(&text).map_err(to_flag)?;
            let online: Vec<usize> = online.keys().copied().collect();
            if let Some(c) = self.cores.iter().find(|c| !online.contains(c)) {
                return Err(flag(
                    "cores",
                    format!("core {c} is not online (online: {online:?})"),
                ));
            }
            let candidates: BTreeSet<usize> = if self.cores.is_empty() {
                online.iter().copied().collect()
            } else {
                self.cores.iter().copied().collect()
            };
            if self.workers > candidates.len() {
                return Err(flag(
                    "workers",
                    format!(
                        "{} workers, but only {} {} (one worker per core): {:?}",
                        self.workers,
                        candidates.len(),
                        if self.cores.is_empty() {
                            "cores are online"
                        } else {
                            "cores in --cores"
                        },
                        candidates
                    ),
                ));
            }
            if self.irq == IrqPlacement::OffWorkers && self.workers == online.len() {
                return Err(flag(
                    "irq",
                    format!(
                        "off-workers with {} workers on {} online cores: none is left for the \
                         interrupts; use --irq on-workers or fewer --workers",
                        self.workers,
                        online.len()
                    ),
                ));
            }
        }
        if !self.devices.is_empty() {
            let net_dev = self.proc_root.join("net/dev");
            let text = std::fs::read_to_string(&net_dev).map_err(|err| CheckError::Read {
                path: net_dev.clone(),
                err,
            })?;
            let unknown = super::unknown_devices(&text, &self.devices).map_err(to_flag)?;
            if let Some(d) = unknown.first() {
                return Err(flag(
                    "dev",
                    format!(
                        "no network device `{d}` here (not in {}; see `ip link`)",
                        net_dev.display()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The planner's parameters.
    pub fn params(&self) -> TuneParams {
        TuneParams {
            devices: self.devices.clone(),
            candidates: (!self.cores.is_empty())
                .then(|| self.cores.iter().copied().collect::<BTreeSet<_>>()),
            workers: self.workers,
            queues_per_worker: self.queues_per_worker,
            irq_placement: self.irq,
            rate_pps: self.rate_pps,
            stall: Duration::from_micros(self.stall_us),
            ring_min: self.ring_min,
            ring_max: self.ring_max,
            bandwidth_bps: self.bandwidth_mbps.map(|m| m * 1e6),
            one_way_delay: Duration::from_micros(self.delay_us),
            k: self.k,
        }
    }
}
