//! The tuning plan: everything decided from one sampled input, without I/O.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{
    core_loads, device_irqs, format_cpumask, irq_queue, parse_cpumask, parse_interrupts,
    parse_net_dev, parse_proc_stat, pick_worker_cores, ring_size, socket_buffer_bytes, CoreLoad,
    Result, TuneError,
};

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
    /// Device → virtio device naming its queue interrupts
    /// ([`virtio_alias`](super::virtio_alias)).
    pub aliases: BTreeMap<String, String>,
}

/// Where the devices' interrupts go when there are several workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum IrqPlacement {
    /// `OffWorkers` when at least one online core is not a worker, else `OnWorkers`.
    #[default]
    Auto,
    /// Paper 002: the packet-processing cores take no device interrupts; every interrupt gets
    /// the mask of the cores that are not workers.
    OffWorkers,
    /// Queue `q`'s interrupts on the core of the worker that serves queue `q` (paper 001: the
    /// IRQ of an Rx ring goes to the core the ring is pinned to), so a queue's softirq work
    /// stays on its worker's core and never piles up on one spare core; the device's other
    /// interrupts (link, config) and queues no worker serves go off the workers if possible.
    OnWorkers,
}

impl IrqPlacement {
    pub fn name(self) -> &'static str {
        match self {
            IrqPlacement::Auto => "auto",
            IrqPlacement::OffWorkers => "off-workers",
            IrqPlacement::OnWorkers => "on-workers",
        }
    }
}

/// What to tune for.
#[derive(Debug, Clone)]
pub struct TuneParams {
    /// Devices whose interrupts to keep off the worker and whose arrival rate sizes the rings.
    pub devices: Vec<String>,
    /// Cores the workers may use (all when `None`).
    pub candidates: Option<BTreeSet<usize>>,
    /// Worker threads, one per core (the router's `cores = [..]`); at least 1.
    pub workers: usize,
    /// Rx queues each worker owns: worker `w` serves queues `w·q … w·q+q−1` (1 with RSS;
    /// the number of classes with `steering = "queues"` / `"ntuple"`).
    pub queues_per_worker: usize,
    pub irq_placement: IrqPlacement,
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

impl TuneParams {
    /// The longest worker stall a ring absorbs by default, µs.
    pub const DEFAULT_STALL_US: u64 = 1000;
    /// The driver's ring limits assumed by default (`ethtool -g` gives the real ones).
    pub const DEFAULT_RING_MIN: u32 = 64;
    pub const DEFAULT_RING_MAX: u32 = 4096;
    /// One-way delay to the peers assumed by default, µs.
    pub const DEFAULT_DELAY_US: u64 = 100;
}

impl Default for TuneParams {
    fn default() -> Self {
        TuneParams {
            devices: Vec::new(),
            candidates: None,
            workers: 1,
            queues_per_worker: 1,
            irq_placement: IrqPlacement::Auto,
            rate_pps: None,
            stall: Duration::from_micros(Self::DEFAULT_STALL_US),
            ring_min: Self::DEFAULT_RING_MIN,
            ring_max: Self::DEFAULT_RING_MAX,
            bandwidth_bps: None,
            one_way_delay: Duration::from_micros(Self::DEFAULT_DELAY_US),
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
    /// The queue the interrupt serves, when its name says ([`irq_queue`]).
    pub queue: Option<u32>,
    /// The worker that serves that queue, if any.
    pub worker: Option<usize>,
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
    /// The first worker's core (`worker_cores[0]`).
    pub worker_core: usize,
    /// Worker `i`'s core, best first: the router's `cores = [..]`.
    pub worker_cores: Vec<usize>,
    /// Online cores that are not workers: the interrupts' and helper threads' cores (empty:
    /// everything shares the workers' cores).
    pub spare_cores: Vec<usize>,
    /// The placement used (`Auto` resolved).
    pub irq_placement: IrqPlacement,
    pub queues_per_worker: usize,
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

    let n = params.workers;
    let candidates = (cores.iter())
        .filter(|c| {
            params
                .candidates
                .as_ref()
                .is_none_or(|s| s.contains(&c.core))
        })
        .count();
    if n == 0 {
        return Err(TuneError::new("workers", "0: at least one worker"));
    }
    if n > candidates {
        return Err(TuneError::new(
            "workers",
            format!(
                "{n} workers, but only {candidates} candidate core{} (one worker per core)",
                if candidates == 1 { "" } else { "s" }
            ),
        ));
    }
    if params.queues_per_worker == 0 {
        return Err(TuneError::new(
            "queues_per_worker",
            "0: a worker serves at least one queue",
        ));
    }
    let worker_cores = pick_worker_cores(&cores, params.candidates.as_ref(), &irq_cores, n);
    let worker_core = worker_cores[0];
    let workers: BTreeSet<usize> = worker_cores.iter().copied().collect();
    let spare: BTreeSet<usize> = online.difference(&workers).copied().collect();
    let placement = match params.irq_placement {
        IrqPlacement::Auto if spare.is_empty() => IrqPlacement::OnWorkers,
        IrqPlacement::Auto => IrqPlacement::OffWorkers,
        IrqPlacement::OffWorkers if spare.is_empty() => {
            return Err(TuneError::new(
                "irq",
                format!(
                    "off-workers: every online core is a worker ({n} of {}), none is left for \
                     the interrupts; use on-workers or fewer workers",
                    online.len()
                ),
            ))
        }
        p => p,
    };
    let carriers: Vec<usize> = worker_cores
        .iter()
        .copied()
        .filter(|c| irq_cores.contains_key(c))
        .collect();
    if !carriers.is_empty() && placement == IrqPlacement::OffWorkers {
        warnings.push(format!(
            "worker core{} {carriers:?} serve{} device interrupts now; the masks below move \
             them off",
            if carriers.len() == 1 { "" } else { "s" },
            if carriers.len() == 1 { "s" } else { "" },
        ));
    }
    if spare.is_empty() {
        warnings.push(format!(
            "{n} worker{} on {} online core{}: no core is left over, so the workers share their \
             cores with the devices' interrupts (queue i's on the core of the worker serving it, \
             where its softirq preempts the worker) and with the helper threads (control, \
             metrics, route mirror)",
            if n == 1 { "" } else { "s" },
            online.len(),
            if online.len() == 1 { "" } else { "s" },
        ));
    }

    // Which worker serves a queue: worker w owns queues w·q … w·q+q−1.
    let qpw = params.queues_per_worker;
    let worker_of = |queue: Option<u32>| queue.map(|q| q as usize / qpw).filter(|w| *w < n);
    let off_workers = if spare.is_empty() {
        online.clone()
    } else {
        spare.clone()
    };
    let mut irqs = Vec::new();
    for d in dirqs {
        let alias = input.aliases.get(&d.device).map(String::as_str);
        let queue = irq_queue(&d.action, &d.device, alias);
        let worker = worker_of(queue);
        let target: BTreeSet<usize> = match (placement, worker) {
            (IrqPlacement::OnWorkers, Some(w)) => [worker_cores[w]].into(),
            _ => off_workers.clone(),
        };
        let current = input.affinity.get(&d.irq).map(|s| s.trim().to_string());
        let change = match &current {
            Some(c) => parse_cpumask(c).map(|m| m != target).unwrap_or(true),
            None => true,
        };
        irqs.push(IrqAffinity {
            irq: d.irq,
            device: d.device,
            action: d.action,
            queue,
            worker,
            serving_cores: d.serving_cores,
            current,
            proposed: format_cpumask(&target),
            change,
        });
    }
    queue_warnings(&irqs, params, n, &mut warnings);
    let queue_irqs = irqs.iter().filter(|i| i.queue.is_some()).count();
    if placement == IrqPlacement::OffWorkers && n > 1 && spare.len() < n && queue_irqs > 1 {
        warnings.push(format!(
            "{} spare core{} take{} the interrupts of every queue of {n} workers: in copy mode \
             their softirq runs the XDP program and copies every frame, which can saturate them \
             (paper 002's single-core bottleneck); if it does, --irq on-workers puts each \
             queue's interrupts on its worker's core",
            spare.len(),
            if spare.len() == 1 { "" } else { "s" },
            if spare.len() == 1 { "s" } else { "" },
        ));
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
        worker_cores,
        spare_cores: spare.into_iter().collect(),
        irq_placement: placement,
        queues_per_worker: qpw,
        irqs,
        ring,
        socket_buffer,
        warnings,
    })
}

/// Warnings about a device's queues against the workers: too few queues leave a worker without
/// traffic, queues beyond the workers' get traffic (RSS spreads over every queue) that no worker
/// serves. Only for devices whose queue interrupts were found (veth has none).
fn queue_warnings(irqs: &[IrqAffinity], params: &TuneParams, n: usize, w: &mut Vec<String>) {
    let need = n * params.queues_per_worker;
    for d in &params.devices {
        let queues: BTreeSet<u32> = (irqs.iter())
            .filter(|i| &i.device == d)
            .filter_map(|i| i.queue)
            .collect();
        let Some(&top) = queues.last() else { continue };
        let have = top as usize + 1;
        if have < need {
            w.push(format!(
                "{d}: interrupts of {have} queue{} found, {} {need} (worker i serves queue \
                 {}): `ethtool -L {d} combined {need}` if the NIC has them",
                if have == 1 { "" } else { "s" },
                if n == 1 {
                    "the worker needs".to_string()
                } else {
                    format!("the {n} workers need")
                },
                if params.queues_per_worker == 1 {
                    "i".to_string()
                } else {
                    format!(
                        "i·{q} … i·{q}+{}",
                        params.queues_per_worker - 1,
                        q = params.queues_per_worker
                    )
                }
            ));
        } else if have > need {
            let served = if need == 1 {
                "queue 0".to_string()
            } else {
                format!("queues 0–{}", need - 1)
            };
            w.push(format!(
                "{d}: {have} queues, but {} only {served}: RSS also puts traffic into the \
                 others, which no worker serves — `ethtool -L {d} combined {need}` (or \
                 `ethtool -X {d} equal {need}`)",
                if n == 1 {
                    "the worker serves".to_string()
                } else {
                    format!("the {n} workers serve")
                },
            ));
        }
    }
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
