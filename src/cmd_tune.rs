//! `llrouter tune`: host tuning after paper 002 — per-core load percentiles, the worker cores,
//! IRQ affinities, ring and socket-buffer sizes. Shows a plan; changes nothing without `--apply`.

use crate::cli_util::usage;
use anyhow::{bail, Result};
use clap::{Args as ClapArgs, ValueEnum};
use llr_ops::tune::{self, IrqPlacement, TuneError, TuneParams, TunePlan};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// Where the devices' interrupts go (see `llrouter tune --help`).
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum IrqArg {
    /// off-workers when a core is left over, else on-workers.
    Auto,
    /// Every device interrupt on the cores that are not workers (paper 002).
    OffWorkers,
    /// Queue i's interrupts on the core of the worker serving queue i.
    OnWorkers,
}

impl From<IrqArg> for IrqPlacement {
    fn from(a: IrqArg) -> Self {
        match a {
            IrqArg::Auto => IrqPlacement::Auto,
            IrqArg::OffWorkers => IrqPlacement::OffWorkers,
            IrqArg::OnWorkers => IrqPlacement::OnWorkers,
        }
    }
}

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
    /// Cores the workers may run on, e.g. "1,2,3" (default: every online core).
    #[arg(long, value_delimiter = ',')]
    pub cores: Vec<usize>,
    /// Worker threads to place, one per core (the router's `cores = [..]`).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Rx queues per worker: 1 with RSS (worker i serves queue i); the number of classes with
    /// `steering = "queues"` or `"ntuple"` (worker i serves queues i·Q … i·Q+Q−1).
    #[arg(long, default_value_t = 1)]
    pub queues_per_worker: usize,
    /// Where the devices' interrupts go: off-workers (paper 002), on-workers (queue i's on
    /// worker i's core), auto (off-workers when a core is left over, else on-workers).
    #[arg(long, value_enum, default_value_t = IrqArg::Auto)]
    pub irq: IrqArg,
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
        "workers" => "workers",
        "queues_per_worker" => "queues-per-worker",
        "irq" => "irq",
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
    if args.workers == 0 {
        return Err(usage(
            "workers",
            "0: at least one worker (the router runs one per core in `cores = [..]`)",
        ));
    }
    if args.queues_per_worker == 0 {
        return Err(usage(
            "queues-per-worker",
            "0: a worker serves at least one queue",
        ));
    }
    if !args.cores.is_empty() || args.workers > 1 {
        let stat = args.proc_root.join("stat");
        let text = std::fs::read_to_string(&stat)
            .map_err(|e| anyhow::anyhow!("{}: {e}", stat.display()))?;
        let online = tune::parse_proc_stat(&text).map_err(tune_err)?;
        let online: Vec<usize> = online.keys().copied().collect();
        if let Some(c) = args.cores.iter().find(|c| !online.contains(c)) {
            return Err(usage(
                "cores",
                format!("core {c} is not online (online: {online:?})"),
            ));
        }
        let candidates: BTreeSet<usize> = if args.cores.is_empty() {
            online.iter().copied().collect()
        } else {
            args.cores.iter().copied().collect()
        };
        if args.workers > candidates.len() {
            return Err(usage(
                "workers",
                format!(
                    "{} workers, but only {} {} (one worker per core): {:?}",
                    args.workers,
                    candidates.len(),
                    if args.cores.is_empty() {
                        "cores are online"
                    } else {
                        "cores in --cores"
                    },
                    candidates
                ),
            ));
        }
        if args.irq == IrqArg::OffWorkers && args.workers == online.len() {
            return Err(usage(
                "irq",
                format!(
                    "off-workers with {} workers on {} online cores: none is left for the \
                     interrupts; use --irq on-workers or fewer --workers",
                    args.workers,
                    online.len()
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
        workers: args.workers,
        queues_per_worker: args.queues_per_worker,
        irq_placement: args.irq.into(),
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
        print!("{}", render(&plan, &args.proc_root));
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

/// The router config lines of a plan: the workers' cores in worker order (worker i serves
/// queue i) and, when cores are left over, the helper threads' cores.
pub fn config_lines(p: &TunePlan) -> Vec<String> {
    let list = |v: &[usize]| {
        v.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = vec![format!("cores = [{}]", list(&p.worker_cores))];
    if !p.spare_cores.is_empty() {
        out.push(format!("helper-cores = [{}]", list(&p.spare_cores)));
    }
    out
}

/// The shell commands that set the proposed affinities that differ from the current ones.
pub fn mask_commands(p: &TunePlan, proc_root: &std::path::Path) -> Vec<String> {
    p.irqs
        .iter()
        .filter(|i| i.change)
        .map(|i| {
            format!(
                "echo {} > {}",
                i.proposed,
                proc_root
                    .join(format!("irq/{}/smp_affinity", i.irq))
                    .display()
            )
        })
        .collect()
}

/// Human-readable plan.
pub fn render(p: &TunePlan, proc_root: &std::path::Path) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let pct = |v: f64| format!("{:5.1}%", v * 100.0);
    let several = p.worker_cores.len() > 1;
    let _ = writeln!(
        s,
        "per-core busy fraction over {} intervals of {} ms:",
        p.cores.first().map_or(0, |c| c.samples.len()),
        p.interval_ms
    );
    let _ = writeln!(s, "  core    mean     p50     p90     p99     max");
    for c in &p.cores {
        let mark = match p.worker_cores.iter().position(|w| *w == c.core) {
            Some(i) if several => format!("  <- worker {i}"),
            Some(_) => "  <- worker".to_string(),
            None => String::new(),
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
    if several {
        let _ = writeln!(s, "worker cores (worker 0 first): {:?}", p.worker_cores);
    } else {
        let _ = writeln!(s, "worker core: {}", p.worker_core);
    }
    let _ = writeln!(s, "router config:");
    for l in config_lines(p) {
        let _ = writeln!(s, "  {l}");
    }
    if !p.irqs.is_empty() {
        let how = match p.irq_placement {
            IrqPlacement::OnWorkers => {
                "queue i's interrupts on the core of the worker serving it, the rest off the \
                 workers where a core is left"
                    .to_string()
            }
            _ => format!(
                "keep device interrupts off the worker core{} {:?}",
                if several { "s" } else { "" },
                p.worker_cores
            ),
        };
        let _ = writeln!(s, "IRQ affinities ({how}):");
        for i in &p.irqs {
            let queue = match (i.queue, i.worker) {
                (Some(q), Some(w)) if several || p.queues_per_worker > 1 => {
                    format!(" queue {q} (worker {w})")
                }
                (Some(q), None) => format!(" queue {q} (no worker)"),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "  irq {:>4} {:<20}{queue} served by {:?}: {} -> {}{}",
                i.irq,
                i.action,
                i.serving_cores,
                i.current.as_deref().unwrap_or("?"),
                i.proposed,
                if i.change { "" } else { " (unchanged)" }
            );
        }
        let cmds = mask_commands(p, proc_root);
        if !cmds.is_empty() {
            let _ = writeln!(s, "commands (as root; --apply runs them):");
            for c in cmds {
                let _ = writeln!(s, "  {c}");
            }
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
    fn render_prints_config_line_and_mask_commands() {
        // Three cores: core 0 busy and serving eth0's interrupts; two workers.
        let stat = |t: u64| {
            format!(
                "cpu0 {} 0 0 {} 0 0 0 0\ncpu1 {} 0 0 {} 0 0 0 0\ncpu2 {} 0 0 {} 0 0 0 0\n",
                50 * t,
                50 * t,
                t,
                99 * t,
                0,
                100 * t
            )
        };
        let interrupts = "           CPU0       CPU1       CPU2\n\
                          24:        900          0          0   PCI-MSI 1-edge   eth0-TxRx-0\n\
                          25:        800          0          0   PCI-MSI 2-edge   eth0-TxRx-1\n";
        let input = tune::TuneInput {
            stat: (1..=3).map(stat).collect(),
            interval: Duration::from_millis(100),
            interrupts_before: Some(interrupts.into()),
            affinity: [(24, "7".to_string()), (25, "1".to_string())].into(),
            ..Default::default()
        };
        let params = TuneParams {
            devices: vec!["eth0".into()],
            workers: 2,
            ..TuneParams::default()
        };
        let plan = tune::plan(&input, &params).unwrap();
        let text = render(&plan, std::path::Path::new("/x/proc"));
        assert!(text.contains("cores = [2, 1]"), "{text}");
        assert!(text.contains("helper-cores = [0]"), "{text}");
        assert!(
            text.contains("<- worker 0") && text.contains("<- worker 1"),
            "{text}"
        );
        // IRQ 24 moves to core 0; IRQ 25 is there already: one command
        assert_eq!(
            mask_commands(&plan, std::path::Path::new("/x/proc")),
            vec!["echo 1 > /x/proc/irq/24/smp_affinity"]
        );
        assert!(text.contains("queue 1 (worker 1)"), "{text}");
        assert!(text.contains("spare core takes the interrupts"), "{text}");
    }

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
        let text = render(&plan, std::path::Path::new("/proc"));
        println!("{text}");
        assert!(text.contains("<- worker"));
        assert!(!plan.cores.is_empty());
    }
}
