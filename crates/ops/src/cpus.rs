//! CPU sets: which CPUs the machine has, which the process may use, and where the router's
//! helper threads (control, metrics, route mirror) run so that they stay off the workers' cores.
//!
//! The decisions are pure ([`parse_cpu_list`], [`helper_cpus`]); the file system and the
//! affinity syscalls are touched only in [`online`], [`allowed`] and [`set_affinity`] (the latter
//! two from `llr_io::sys`).

use std::collections::BTreeSet;

/// Parses a kernel CPU list (`0-3,8,10-11`, as in `/sys/devices/system/cpu/online`).
pub fn parse_cpu_list(text: &str) -> Result<BTreeSet<usize>, String> {
    let mut out = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let num = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{part}` is not a CPU number or range"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("`{part}`: range runs backwards"));
                }
                out.extend(a..=b);
            }
            None => {
                out.insert(num(part)?);
            }
        }
    }
    Ok(out)
}

/// Formats a CPU set as a kernel CPU list (`0-3,8`).
pub fn format_cpu_list(cpus: &BTreeSet<usize>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut it = cpus.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end = it.next().expect("peeked");
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

/// Where helper threads run: `configured` when given, else every `allowed` CPU that is not a
/// worker's; when that leaves nothing (a one-CPU machine, or workers on every allowed CPU), all
/// of `allowed` — helpers then share with the worker rather than not run.
pub fn helper_cpus(
    allowed: &BTreeSet<usize>,
    workers: &[usize],
    configured: Option<&[usize]>,
) -> BTreeSet<usize> {
    if let Some(c) = configured {
        return c.iter().copied().collect();
    }
    let rest: BTreeSet<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !workers.contains(c))
        .collect();
    if rest.is_empty() {
        allowed.clone()
    } else {
        rest
    }
}

/// The machine's online CPUs (`/sys/devices/system/cpu/online`; the number of configured
/// processors when that file cannot be read). Independent of the calling thread's affinity.
pub fn online() -> BTreeSet<usize> {
    if let Ok(text) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        if let Ok(s) = parse_cpu_list(&text) {
            if !s.is_empty() {
                return s;
            }
        }
    }
    let n = llr_io::sys::cpus_configured().unwrap_or(1);
    (0..n as usize).collect()
}

/// Why `cpu` cannot be used, given the `online` CPUs; `None` when it is online.
pub fn problem(cpu: usize, online: &BTreeSet<usize>) -> Option<String> {
    if online.contains(&cpu) {
        return None;
    }
    Some(format!(
        "CPU {cpu} does not exist: this machine has {} online CPU{} ({})",
        online.len(),
        if online.len() == 1 { "" } else { "s" },
        online
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    ))
}

/// The affinity syscalls live in `llr_io::sys` (the one home of raw calls); named here after
/// what the CPU-set decisions above use them for.
pub use llr_io::sys::{affinity as allowed, set_affinity};

/// Tasks of other processes that may run on `cpu` (`pid`, `comm`): ordinary threads whose
/// affinity includes it. Per-CPU kernel threads (bound to one CPU, part of any CPU's life) and
/// the calling process's own threads are left out. Each one that wakes up there takes the CPU
/// from a worker pinned to it for a scheduler tick or more; `isolcpus=`, a cpuset or the
/// testbed's `--shield` keep them off.
pub fn sharing(cpu: usize) -> Vec<(u32, String)> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for pid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if pid == me {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if pinned_by_kernel(&stat) {
            continue;
        }
        if let Some(name) = shares(&status, cpu) {
            out.push((pid, name));
        }
    }
    out
}

/// A kernel thread whose affinity nobody may change (`PF_NO_SETAFFINITY` in the flags of
/// `/proc/PID/stat`, field 9).
fn pinned_by_kernel(stat: &str) -> bool {
    const PF_NO_SETAFFINITY: u64 = 0x0400_0000;
    stat_field(stat, 9)
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|f| f & PF_NO_SETAFFINITY != 0)
}

/// Field `n` (1-based, as in proc(5)) of a `/proc/PID/stat` line, for `n` ≥ 3: counted after
/// the name's closing parenthesis, since the name may hold spaces and parentheses.
pub(crate) fn stat_field(stat: &str, n: usize) -> Option<&str> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)
}

/// The task's name when its `/proc/PID/status` shows an affinity including `cpu`, and it is
/// not a kernel thread bound to one CPU.
fn shares(status: &str, cpu: usize) -> Option<String> {
    let field = |k: &str| {
        (status.lines())
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim())
    };
    let allowed = parse_cpu_list(field("Cpus_allowed_list:")?).ok()?;
    // Kernel threads have no memory map: no VmSize line.
    let kthread = field("VmSize:").is_none();
    (allowed.contains(&cpu) && !(kthread && allowed.len() == 1))
        .then(|| field("Name:").unwrap_or("?").to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[usize]) -> BTreeSet<usize> {
        v.iter().copied().collect()
    }

    #[test]
    fn cpu_lists_parse_and_format() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            set(&[0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("0").unwrap(), set(&[0]));
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert_eq!(
            format_cpu_list(&set(&[0, 1, 2, 3, 8, 10, 11])),
            "0-3,8,10-11"
        );
        assert_eq!(format_cpu_list(&set(&[5])), "5");
    }

    #[test]
    fn helpers_avoid_the_workers() {
        let all = set(&[0, 1, 2, 3]);
        assert_eq!(helper_cpus(&all, &[1], None), set(&[0, 2, 3]));
        assert_eq!(helper_cpus(&all, &[], None), all);
        // nothing left: share rather than not run
        assert_eq!(helper_cpus(&set(&[1]), &[1], None), set(&[1]));
        assert_eq!(helper_cpus(&all, &[1], Some(&[3])), set(&[3]));
    }

    #[test]
    fn the_machine_has_cpus_whatever_this_thread_is_pinned_to() {
        let online = online();
        assert!(!online.is_empty());
        let before = allowed().unwrap();
        assert!(before.is_subset(&online) || before.len() <= online.len());
        // pin this test thread to one CPU: the machine's count must not change
        let one = set(&[*before.iter().next().unwrap()]);
        set_affinity(&one).unwrap();
        assert_eq!(allowed().unwrap(), one);
        assert_eq!(super::online(), online);
        set_affinity(&before).unwrap();
    }

    #[test]
    fn a_task_shares_a_cpu_in_its_affinity_unless_it_is_a_bound_kernel_thread() {
        let user = "Name:\tbash\nVmSize:\t  8000 kB\nCpus_allowed_list:\t0-1\n";
        assert_eq!(shares(user, 1).as_deref(), Some("bash"));
        assert_eq!(shares(user, 2), None);
        let confined = "Name:\tbash\nVmSize:\t  8000 kB\nCpus_allowed_list:\t0\n";
        assert_eq!(shares(confined, 1), None);
        let percpu = "Name:\tksoftirqd/1\nCpus_allowed_list:\t1\n";
        assert_eq!(shares(percpu, 1), None);
        let unbound = "Name:\trcu_preempt\nCpus_allowed_list:\t0-1\n";
        assert_eq!(shares(unbound, 1).as_deref(), Some("rcu_preempt"));
        assert_eq!(shares("Name:\tx\n", 1), None);
        let rescuer = "2 (kworker/R-a b) I 2 0 0 0 -1 69238880 0 0 0 0";
        assert!(
            pinned_by_kernel(rescuer),
            "flags 0x4208060 hold PF_NO_SETAFFINITY"
        );
        assert!(!pinned_by_kernel(
            "15 (rcu_preempt) I 2 0 0 0 -1 2129984 0 0"
        ));
        assert!(!pinned_by_kernel("garbage"));
    }
}
