//! The only parts that touch the file system: sampling `/proc` and `/sys`, and writing IRQ
//! affinities.

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    core_loads, irq_belongs, parse_interrupts, parse_proc_stat, virtio_alias, CoreLoad, Result,
    StatSnapshot, TuneError, TuneInput, TunePlan,
};

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
/// (by name or through `aliases`, see [`device_irqs`](super::device_irqs)). `sleep` is called
/// between samples (tests pass a no-op).
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

/// Watches the cores' load: reads `<proc_root>/stat` every `interval` and hands every window of
/// `samples` readings (`samples − 1` intervals; a window starts with the last reading of the one
/// before, so nothing falls between them) to `emit` as per-core loads, with the window's index
/// from 0. Stops after `count` windows, or when `stop` says so between readings; returns the
/// windows emitted. `sleep` is called between readings (tests pass a no-op).
pub fn watch(
    proc_root: &Path,
    samples: usize,
    interval: Duration,
    count: Option<usize>,
    mut sleep: impl FnMut(Duration),
    mut stop: impl FnMut() -> bool,
    mut emit: impl FnMut(usize, &[CoreLoad]) -> Result<()>,
) -> Result<usize> {
    if samples < 2 {
        return Err(TuneError::new(
            "samples",
            format!("{samples}: need at least 2"),
        ));
    }
    let path = proc_root.join("stat");
    let read = || -> Result<StatSnapshot> {
        let t = std::fs::read_to_string(&path)
            .map_err(|e| TuneError::new(path.display().to_string(), e.to_string()))?;
        parse_proc_stat(&t)
    };
    let mut window = vec![read()?];
    let mut emitted = 0;
    while count.is_none_or(|c| emitted < c) {
        if stop() {
            break;
        }
        sleep(interval);
        window.push(read()?);
        if window.len() == samples {
            emit(emitted, &core_loads(&window)?)?;
            emitted += 1;
            let last = window.pop().expect("a full window");
            window = vec![last];
        }
    }
    Ok(emitted)
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
