//! `llrouter tune`: host tuning after paper 002 — per-core load percentiles, the worker core,
//! IRQ affinities, ring and socket-buffer sizes. Shows a plan; changes nothing without `--apply`.

use crate::cli_util::usage;
use anyhow::{bail, Result};
use clap::Args as ClapArgs;
use llr_ops::tune::{self, TuneError, TuneParams, TunePlan};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// Sample per-core load and propose host settings for the router's worker (paper 002).
///
/// Reads <PROC_ROOT>/stat SAMPLES times, INTERVAL_MS apart, and reports the busy-fraction
/// percentiles (p50, p90, p99, max) of every core; picks the least-loaded core for the worker
/// (smallest p90, then p99, then mean, at 0.1 % resolution; then fewest device interrupts; then
/// the highest core number); finds the interrupts of --dev devices in <PROC_ROOT>/interrupts and
/// proposes smp_affinity masks that keep them off the worker core; sizes rings as
/// next_pow2(ceil(rate × stall)) clamped to [--ring-min, --ring-max], the rate measured from
/// <PROC_ROOT>/net/dev unless --rate-pps is given; and socket buffers as ceil(k·2·B·D/8) bytes
/// when --bandwidth-mbps is given.
///
/// Without --apply nothing is written. With --apply the proposed masks are written to
/// <PROC_ROOT>/irq/N/smp_affinity (root needed); failures are reported per IRQ.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Number of /proc/stat samples (at least 2; intervals = samples − 1).
    #[arg(long, default_value_t = 6)]
    pub samples: usize,
    /// Time between samples, in ms.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Network device whose interrupts to move and whose arrival rate sizes the rings
    /// (repeatable, or comma-separated).
    #[arg(long = "dev", value_delimiter = ',')]
    pub devices: Vec<String>,
    /// Cores the worker may run on, e.g. "1,2,3" (default: every online core).
    #[arg(long, value_delimiter = ',')]
    pub cores: Vec<usize>,
    /// Arrival rate in packets/s (default: the peak measured on --dev during sampling).
    #[arg(long)]
    pub rate_pps: Option<f64>,
    /// Longest worker stall the ring must absorb without loss, in µs.
    #[arg(long, default_value_t = 1000)]
    pub stall_us: u64,
    /// Smallest ring size the driver accepts (power of two).
    #[arg(long, default_value_t = 64)]
    pub ring_min: u32,
    /// Largest ring size the driver accepts (power of two; see `ethtool -g`).
    #[arg(long, default_value_t = 4096)]
    pub ring_max: u32,
    /// Link bandwidth in Mbit/s, for the socket-buffer size.
    #[arg(long)]
    pub bandwidth_mbps: Option<f64>,
    /// One-way delay to the peers in µs, for the socket-buffer size.
    #[arg(long, default_value_t = 100)]
    pub delay_us: u64,
    /// Safety factor k ≥ 1 of the socket-buffer formula.
    #[arg(long, default_value_t = 1.0)]
    pub k: f64,
    /// Root of the proc file system (tests point it at a synthetic tree).
    #[arg(long, default_value = "/proc")]
    pub proc_root: PathBuf,
    /// Root of sysfs, where a virtio NIC's interface is related to the virtio device that names
    /// its queue interrupts (`virtio2-input.0`).
    #[arg(long, default_value = "/sys")]
    pub sys_root: PathBuf,
    /// Write the proposed IRQ affinities.
    #[arg(long)]
    pub apply: bool,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A tuning error as a usage error (exit code 2) when it names an option, else as it is.
fn tune_err(e: TuneError) -> anyhow::Error {
    let flag = match e.field.as_str() {
        "samples" => "samples",
        "interval" => "interval-ms",
        "cores" => "cores",
        "rate_pps" => "rate-pps",
        "ring_min" => "ring-min",
        "ring_max" => "ring-max",
        "bandwidth" => "bandwidth-mbps",
        "k" => "k",
        _ => return e.into(),
    };
    usage(flag, e.reason)
}

/// Checks the options before the sampling window starts (seconds lost otherwise).
fn check(args: &Args) -> Result<()> {
    if args.samples < 2 {
        return Err(usage(
            "samples",
            format!(
                "{} is too few: at least 2 (the busy fraction is a difference of two samples)",
                args.samples
            ),
        ));
    }
    if args.interval_ms == 0 {
        return Err(usage("interval-ms", "must be at least 1 ms"));
    }
    // The ring formula's own checks, on a dummy rate: the same message now as after sampling.
    let rate = args.rate_pps.unwrap_or(0.0);
    tune::ring_size(
        rate,
        Duration::from_micros(args.stall_us),
        args.ring_min,
        args.ring_max,
    )
    .map_err(tune_err)?;
    if let Some(b) = args.bandwidth_mbps {
        tune::socket_buffer_bytes(b * 1e6, Duration::from_micros(args.delay_us), args.k)
            .map_err(tune_err)?;
    }
    if !args.cores.is_empty() {
        let stat = args.proc_root.join("stat");
        let text = std::fs::read_to_string(&stat)
            .map_err(|e| anyhow::anyhow!("{}: {e}", stat.display()))?;
        let online = tune::parse_proc_stat(&text).map_err(tune_err)?;
        if let Some(c) = args.cores.iter().find(|c| !online.contains_key(c)) {
            return Err(usage(
                "cores",
                format!(
                    "core {c} is not online (online: {:?})",
                    online.keys().collect::<Vec<_>>()
                ),
            ));
        }
    }
    if !args.devices.is_empty() {
        let net_dev = args.proc_root.join("net/dev");
        let text = std::fs::read_to_string(&net_dev)
            .map_err(|e| anyhow::anyhow!("{}: {e}", net_dev.display()))?;
        let unknown = tune::unknown_devices(&text, &args.devices).map_err(tune_err)?;
        if let Some(d) = unknown.first() {
            return Err(usage(
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

pub fn run(args: Args) -> Result<()> {
    check(&args)?;
    let interval = Duration::from_millis(args.interval_ms);
    let params = TuneParams {
        devices: args.devices.clone(),
        candidates: (!args.cores.is_empty())
            .then(|| args.cores.iter().copied().collect::<BTreeSet<_>>()),
        rate_pps: args.rate_pps,
        stall: Duration::from_micros(args.stall_us),
        ring_min: args.ring_min,
        ring_max: args.ring_max,
        bandwidth_bps: args.bandwidth_mbps.map(|m| m * 1e6),
        one_way_delay: Duration::from_micros(args.delay_us),
        k: args.k,
    };
    if !args.json {
        eprintln!(
            "sampling {} for {:.1} s ({} samples)…",
            args.proc_root.join("stat").display(),
            (args.samples - 1) as f64 * interval.as_secs_f64(),
            args.samples
        );
    }
    let aliases = tune::device_aliases(&args.sys_root, &args.devices);
    let input = tune::sample(
        &args.proc_root,
        args.samples,
        interval,
        &args.devices,
        &aliases,
        std::thread::sleep,
    )
    .map_err(tune_err)?;
    let plan = tune::plan(&input, &params).map_err(tune_err)?;
    let applied = if args.apply {
        Some(tune::apply(&plan, &args.proc_root))
    } else {
        None
    };
    if args.json {
        let v = serde_json::json!({ "plan": plan, "applied": applied });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render(&plan));
        match &applied {
            None if plan.irqs.iter().any(|i| i.change) => {
                println!("\n(nothing written; rerun with --apply to set the IRQ affinities)")
            }
            None => {}
            Some(done) => {
                println!();
                for a in done {
                    match &a.error {
                        None => println!("wrote {} to {}", a.mask, a.path.display()),
                        Some(e) => println!("FAILED {} to {}: {e}", a.mask, a.path.display()),
                    }
                }
                if done.is_empty() {
                    println!("nothing to write: every affinity already matches");
                }
            }
        }
    }
    if let Some(done) = &applied {
        let failed = done.iter().filter(|a| a.error.is_some()).count();
        if failed > 0 {
            bail!(
                "{failed} of {} IRQ affinities could not be written",
                done.len()
            );
        }
    }
    Ok(())
}

/// Human-readable plan.
pub fn render(p: &TunePlan) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let pct = |v: f64| format!("{:5.1}%", v * 100.0);
    let _ = writeln!(
        s,
        "per-core busy fraction over {} intervals of {} ms:",
        p.cores.first().map_or(0, |c| c.samples.len()),
        p.interval_ms
    );
    let _ = writeln!(s, "  core    mean     p50     p90     p99     max");
    for c in &p.cores {
        let mark = if c.core == p.worker_core {
            "  <- worker"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  {:>4}  {}  {}  {}  {}  {}{mark}",
            c.core,
            pct(c.mean),
            pct(c.p50),
            pct(c.p90),
            pct(c.p99),
            pct(c.max)
        );
    }
    let _ = writeln!(s, "worker core: {}", p.worker_core);
    if !p.irqs.is_empty() {
        let _ = writeln!(
            s,
            "IRQ affinities (keep device interrupts off core {}):",
            p.worker_core
        );
        for i in &p.irqs {
            let _ = writeln!(
                s,
                "  irq {:>4} {:<20} served by {:?}: {} -> {}{}",
                i.irq,
                i.action,
                i.serving_cores,
                i.current.as_deref().unwrap_or("?"),
                i.proposed,
                if i.change { "" } else { " (unchanged)" }
            );
        }
    }
    if let Some(r) = &p.ring {
        let _ = writeln!(
            s,
            "ring size: {} descriptors = next_pow2(ceil({:.0} pps × {} µs)) clamped to [{}, {}]{}",
            r.ring_size,
            r.rate_pps,
            r.stall_us,
            r.ring_min,
            r.ring_max,
            if r.measured { " (rate measured)" } else { "" }
        );
    }
    if let Some(b) = &p.socket_buffer {
        let _ = writeln!(
            s,
            "socket buffer: {} bytes = ceil({} · 2 · {:.0} bit/s · {} µs / 8); \
             sysctl net.core.rmem_max=net.core.wmem_max={}",
            b.bytes, b.k, b.bandwidth_bps, b.one_way_delay_us, b.bytes
        );
    }
    for w in &p.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_proc_plan_renders() {
        // Smoke test on this host's /proc: two quick samples must yield one row per core.
        let input = tune::sample(
            std::path::Path::new("/proc"),
            2,
            Duration::from_millis(50),
            &[],
            &Default::default(),
            std::thread::sleep,
        )
        .unwrap();
        let plan = tune::plan(&input, &TuneParams::default()).unwrap();
        let text = render(&plan);
        println!("{text}");
        assert!(text.contains("<- worker"));
        assert!(!plan.cores.is_empty());
    }
}
