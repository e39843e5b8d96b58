//! A tuning plan as text: the per-core table, the router config lines and the commands that
//! set the proposed IRQ affinities.

use super::{IrqPlacement, TunePlan};

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
    use crate::tune::{self, TuneParams};
    use std::time::Duration;

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
