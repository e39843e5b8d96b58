//! Host tuning helpers after paper 002 (Orosz, "Performance optimization of packet processing on
//! multi-core Linux systems"): sample per-core load, pick the least-loaded cores for the
//! workers, place device interrupts off them (or a queue's on its worker's core), and size
//! rings and socket buffers.
//!
//! Paper 002 studies a NIC with a *single* input queue: its receive softirq is serialised on
//! one core, so it dedicates the least-loaded core to it and keeps the other interrupts off that
//! core. For several queues it only says that the optimum is a dedicated queue per core (and
//! that one large flow brings back the single-core limit). With several workers there are
//! therefore two placements, both offered ([`IrqPlacement`]): paper 002's rule applied to every
//! worker (device interrupts on the cores that are not workers), or paper 001's "IRQ of an Rx
//! ring on the core the ring is pinned to" (queue i's interrupts on worker i's core) — the only
//! choice when no core is left over, and the one that spreads the softirq work when few are.
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
//! - **Worker cores** ([`pick_worker_cores`]): `n` distinct candidates, idle ones (p90 ≤
//!   [`IDLE_P90`]) first and among them those serving none of the named devices' interrupts;
//!   then the smallest `(p90, p99, mean)` compared at a resolution of 0.1 % busy (smaller
//!   differences are noise); remaining ties go to the core serving the fewest of the named
//!   devices' interrupts, then to the **highest-numbered** core (core 0 usually carries timers,
//!   housekeeping and unpinned interrupts). Worker `i` serves Rx queue `i` (or queues
//!   `i·q … i·q+q−1` with `q` queues per worker).
//! - **Ring size**: `N = clamp(next_pow2(ceil(λ · T_stall)), ring_min, ring_max)` where `λ` is the
//!   peak per-interval arrival rate (packets/s, summed over the named devices, from
//!   `/proc/net/dev`, or given) and `T_stall` the longest stall of the worker the ring must absorb
//!   without loss. `ring_min`/`ring_max` are the driver's limits (`ethtool -g`), both powers of two.
//! - **Socket buffer** (paper 002, eq. 1): `bytes = ceil(k · 2 · B · D_oneway / 8)`, `B` the link
//!   bandwidth in bit/s, `D_oneway` the one-way delay, `k ≥ 1` a safety factor — the
//!   bandwidth-delay product of a round trip. Suggested as `net.core.rmem_max`/`wmem_max` and
//!   `SO_RCVBUF`/`SO_SNDBUF`.
//! - **IRQ affinity** (Linux cpumask hex, 32-bit groups separated by commas, most significant
//!   first): off-workers — every interrupt of a named device gets the mask of all online cores
//!   except the workers; on-workers — a queue interrupt ([`irq_queue`]) of a queue served by
//!   worker `i` gets worker `i`'s core, the device's other interrupts the non-workers (all
//!   cores when there are none). Auto: off-workers when a core is left over.

mod args;
mod host;
mod irq;
mod plan;
mod render;
mod sizing;
mod stat;
#[cfg(test)]
mod tests;

pub use args::{flag_error, CheckError, TuneArgs};
pub use host::{apply, device_aliases, sample, watch, Applied};
pub use irq::{
    action_matches, device_irqs, format_cpumask, irq_belongs, irq_queue, parse_cpu_list,
    parse_cpumask, parse_interrupts, unknown_devices, virtio_alias, DeviceIrq, IrqLine,
};
pub use plan::{
    plan, BufferSizing, IrqAffinity, IrqPlacement, RingSizing, TuneInput, TuneParams, TunePlan,
};
pub use render::{config_lines, mask_commands, render};
pub use sizing::{parse_net_dev, ring_size, socket_buffer_bytes};
pub use stat::{
    busy_fractions, core_loads, parse_proc_stat, percentile, pick_worker_core, pick_worker_cores,
    CoreLoad, CpuTimes, StatSnapshot, TailFit, IDLE_P90, LONG_TAIL_FACTOR, TAIL_MIN_SAMPLES,
};

/// A tuning error naming the offending input (a file, a field or an option) and the reason.
pub type TuneError = llr_core::FieldError;

type Result<T> = std::result::Result<T, TuneError>;
