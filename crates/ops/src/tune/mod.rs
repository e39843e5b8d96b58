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

mod host;
mod irq;
mod plan;
mod sizing;
mod stat;
#[cfg(test)]
mod tests;

pub use host::{apply, device_aliases, sample, Applied};
pub use irq::{
    action_matches, device_irqs, format_cpumask, irq_belongs, parse_cpu_list, parse_cpumask,
    parse_interrupts, unknown_devices, virtio_alias, DeviceIrq, IrqLine,
};
pub use plan::{plan, BufferSizing, IrqAffinity, RingSizing, TuneInput, TuneParams, TunePlan};
pub use sizing::{parse_net_dev, ring_size, socket_buffer_bytes};
pub use stat::{
    busy_fractions, core_loads, parse_proc_stat, percentile, pick_worker_core, CoreLoad, CpuTimes,
    StatSnapshot,
};

/// A tuning error naming the offending input (a file, a field or an option) and the reason.
pub type TuneError = llr_core::FieldError;

type Result<T> = std::result::Result<T, TuneError>;
