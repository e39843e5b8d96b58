//! The tuning plan: everything decided from one sampled input, without I/O.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{
    core_loads, device_irqs, format_cpumask, parse_cpumask, parse_interrupts, parse_net_dev,
    parse_proc_stat, pick_worker_core, ring_size, socket_buffer_bytes, CoreLoad, Result, TuneError,
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
