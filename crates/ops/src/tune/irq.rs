//! Device interrupts from `/proc/interrupts` and the cpumasks of their affinities.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

use super::{parse_net_dev, Result, TuneError};

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

/// The queue an interrupt of `device` serves, from its action name: the number that ends it
/// after a separator (`eth0-TxRx-3` → 3, `eth0-rx-1` → 1, sfc's `eth0-2` → 2,
/// `virtio2-input.0` → 0 with `alias` `virtio2`). `None` for the device's other interrupts (`eth0`, `eth0:lsc`, `virtio2-config`)
/// and for actions of other devices.
pub fn irq_queue(action: &str, device: &str, alias: Option<&str>) -> Option<u32> {
    if !irq_belongs(action, device, alias) {
        return None;
    }
    let rest = action
        .strip_prefix(device)
        .filter(|r| !r.is_empty())
        .or_else(|| alias.and_then(|a| action.strip_prefix(a)))?;
    let digits = rest.len() - rest.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, num) = rest.split_at(rest.len() - digits);
    // The number must stand apart (`-3`, `.0`), not end a word (`eth0:lsc2`).
    if digits == 0 || !head.ends_with(['-', '.', '_', ':']) {
        return None;
    }
    num.parse().ok()
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
