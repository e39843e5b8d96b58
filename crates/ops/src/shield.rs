//! A CPU shield: for as long as it lives, every task on the machine that may move (ordinary
//! processes, unbound kernel threads, unbound workqueues) runs on the CPUs outside the shielded
//! ones, so that a router worker pinned to a shielded CPU shares it with nothing but its own
//! interrupts and per-CPU kernel threads.
//!
//! Why: the worker is an ordinary (CFS) thread. Whatever else wakes up on its CPU — a build, a
//! shell, `rcu_preempt`, a kworker — gets time slices of a scheduler tick or more, during
//! which the RT ring is not served: the millisecond RT tails on the testbed were that
//! (docs/operations.md, "Threads and cores"). A real-time priority does not help: the kernel's fair server then
//! takes 50 ms a second for the starved tasks in one piece. `isolcpus=` on the kernel command
//! line is the lasting answer; this is the one a running machine allows, the same as
//! `cset shield --kthread on` (the `cpuset` package), with the cleanup kept in our own hands.
//!
//! It works on the cgroup v1 cpuset hierarchy: a cpuset `llr-shield-<pid>` over the other CPUs
//! receives every task of the root cpuset except the calling process's own threads, which stay
//! in the root and so do the processes it starts later (the router, `ip`). Dropping the shield
//! moves them all back, with the affinity tasks had pinned themselves to. A shield whose
//! process died (SIGKILL) is released by the next [`CpuShield::new`] or by [`sweep_stale`]. On a machine without a cgroup v1 cpuset hierarchy
//! (cgroup v2 only) it refuses with the reason; there, a cpuset partition or `isolcpus=` is the
//! way.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

const PREFIX: &str = "llr-shield-";

/// A live shield (see the module documentation); released on drop or by [`CpuShield::release`].
#[derive(Debug)]
pub struct CpuShield {
    /// The cpuset hierarchy's root and the shield's cpuset, `None` once released.
    held: Option<Held>,
    moved: usize,
}

#[derive(Debug)]
struct Held {
    root: PathBuf,
    dir: PathBuf,
    /// The unbound workqueues' CPU mask before, restored on release.
    wq_mask: Option<String>,
    /// Tasks moved whose own affinity was narrower than the machine (a pinned worker of another
    /// router, say), with it and their start time, set back on release unless the tid was
    /// reused. Kernels before 6.2 reset a task's affinity to its cpuset's CPUs when it moves;
    /// later ones keep the affinity the task asked for and restore it themselves (so on this
    /// project's CI kernel the root test's check of it passes without this).
    pinned: Vec<Pinned>,
}

#[derive(Debug)]
struct Pinned {
    tid: u32,
    start: String,
    cpus: BTreeSet<usize>,
}

const WQ_MASK: &str = "/sys/devices/virtual/workqueue/cpumask";

impl CpuShield {
    /// Shields `cpus`: moves every movable task but the caller's own threads to the other
    /// online CPUs. Fails, naming the reason, if `cpus` covers every online CPU or names one
    /// that is not online, without a cgroup v1 cpuset hierarchy, when not root, or while a
    /// live process holds another shield.
    pub fn new(cpus: &BTreeSet<usize>) -> Result<CpuShield> {
        let online = crate::cpus::online();
        if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
            bail!("CPU shield: CPU {c} is not online (online: {online:?})");
        }
        let others: BTreeSet<usize> = online.difference(cpus).copied().collect();
        if others.is_empty() {
            bail!("CPU shield: shielding {cpus:?} leaves no CPU for the rest of the machine");
        }
        let root = cpuset_root()?;
        sweep_stale_in(&root)?;
        let dir = root.join(format!("{PREFIX}{}", std::process::id()));
        fs::create_dir(&dir)
            .with_context(|| format!("CPU shield: cannot create {}", dir.display()))?;
        let held = Held {
            root: root.clone(),
            dir: dir.clone(),
            wq_mask: None,
            pinned: Vec::new(),
        };
        // From here on `shield` owns the cpuset: an error below releases it on drop.
        let mut shield = CpuShield {
            held: Some(held),
            moved: 0,
        };
        let mems = fs::read_to_string(knob(&root, "mems"))?;
        fs::write(knob(&dir, "cpus"), crate::cpus::format_cpu_list(&others))
            .with_context(|| format!("CPU shield: cannot give {} the CPUs", dir.display()))?;
        fs::write(knob(&dir, "mems"), mems.trim())?;
        if let Ok(old) = fs::read_to_string(WQ_MASK) {
            if fs::write(WQ_MASK, hex_mask(&others)).is_ok() {
                if let Some(h) = shield.held.as_mut() {
                    h.wq_mask = Some(old.trim().to_owned());
                }
            }
        }
        // Tasks forked while we move are caught by a second pass; a few passes settle it.
        for _ in 0..4 {
            let (n, pinned) = move_tasks(&root, &dir, true, &online)?;
            shield.moved += n;
            if let Some(h) = shield.held.as_mut() {
                h.pinned.extend(pinned);
            }
            if n == 0 {
                break;
            }
        }
        Ok(shield)
    }

    /// How many tasks were moved off the shielded CPUs.
    pub fn moved(&self) -> usize {
        self.moved
    }

    /// Moves every task back and removes the cpuset; the second call does nothing.
    pub fn release(&mut self) -> Result<()> {
        let Some(held) = self.held.take() else {
            return Ok(());
        };
        if let Some(mask) = &held.wq_mask {
            let _ = fs::write(WQ_MASK, mask);
        }
        let r = release_dir(&held.root, &held.dir);
        for p in &held.pinned {
            if start_time(p.tid).as_deref() == Some(p.start.as_str()) {
                let _ = llr_io::sys::set_affinity_of(p.tid, &p.cpus);
            }
        }
        r
    }
}

impl Drop for CpuShield {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            tracing::warn!("CPU shield: {e:#}");
        }
    }
}

/// Whether this machine has what a shield needs (a cgroup v1 cpuset hierarchy; root is
/// checked when one is made).
pub fn supported() -> bool {
    cpuset_root().is_ok()
}

/// Releases shields left by processes that no longer run (killed before they could release).
/// Their moved tasks get every CPU of the root cpuset back; the pins they had are lost with the
/// holder.
/// `Ok(0)` where there is no cpuset hierarchy.
pub fn sweep_stale() -> Result<usize> {
    match cpuset_root() {
        Ok(root) => sweep_stale_in(&root),
        Err(_) => Ok(0),
    }
}

fn sweep_stale_in(root: &Path) -> Result<usize> {
    let mut released = 0;
    for e in fs::read_dir(root)?.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let alive = Path::new("/proc").join(pid).exists();
        if alive && pid != std::process::id().to_string() {
            bail!(
                "CPU shield: process {pid} holds one already ({}); one shield at a time",
                e.path().display()
            );
        }
        if !alive {
            // The workqueue mask of a killed holder cannot be known: give it every CPU.
            let all = crate::cpus::online();
            let _ = fs::write(WQ_MASK, hex_mask(&all));
            release_dir(root, &e.path())?;
            released += 1;
        }
    }
    Ok(released)
}

fn release_dir(root: &Path, dir: &Path) -> Result<()> {
    // A task forked in the shield while we move comes back on the next pass; rmdir fails
    // (EBUSY) until the cpuset is empty.
    for _ in 0..20 {
        move_tasks(dir, root, false, &BTreeSet::new())?;
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", dir.display())),
        }
    }
    bail!(
        "CPU shield: {} still has tasks after 20 passes",
        dir.display()
    )
}

/// Moves the tasks of cpuset `from` into `to`, skipping the calling process's threads when
/// `skip_self`. Tasks that cannot move (per-CPU kernel threads: EINVAL) or have exited
/// (ESRCH) are left. Returns how many moved, and those among them whose affinity was
/// narrower than `online` (none when `online` is empty).
fn move_tasks(
    from: &Path,
    to: &Path,
    skip_self: bool,
    online: &BTreeSet<usize>,
) -> Result<(usize, Vec<Pinned>)> {
    let tasks = fs::read_to_string(from.join("tasks"))
        .with_context(|| format!("cannot read {}/tasks", from.display()))?;
    let own: BTreeSet<u32> = if skip_self {
        own_threads()
    } else {
        BTreeSet::new()
    };
    let mut sink = fs::OpenOptions::new()
        .write(true)
        .open(to.join("tasks"))
        .with_context(|| format!("cannot open {}/tasks", to.display()))?;
    let mut moved = 0;
    let mut pinned = Vec::new();
    for tid in tasks.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
        if own.contains(&tid) {
            continue;
        }
        let narrow = (!online.is_empty())
            .then(|| affinity_of(tid))
            .flatten()
            .filter(|cpus| cpus != online)
            .zip(start_time(tid));
        // One tid per write: the kernel takes one per write(2).
        if sink.write_all(tid.to_string().as_bytes()).is_ok() {
            moved += 1;
            if let Some((cpus, start)) = narrow {
                pinned.push(Pinned { tid, start, cpus });
            }
        }
    }
    Ok((moved, pinned))
}

fn affinity_of(tid: u32) -> Option<BTreeSet<usize>> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    crate::cpus::parse_cpu_list(list.trim()).ok()
}

/// Field 22 of `/proc/TID/stat` (start time in ticks): with the tid, it names one task.
fn start_time(tid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    crate::cpus::stat_field(&stat, 22).map(str::to_owned)
}

fn own_threads() -> BTreeSet<u32> {
    fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The mount point of the cgroup v1 cpuset hierarchy.
fn cpuset_root() -> Result<PathBuf> {
    let mounts = fs::read_to_string("/proc/mounts").context("cannot read /proc/mounts")?;
    cpuset_mount_in(&mounts).map(PathBuf::from).context(
        "CPU shield: no cgroup v1 cpuset hierarchy is mounted here (cgroup v2 only? or under \
         `ip netns exec`, which remounts /sys: enter the namespace with `nsenter \
         --net=/run/netns/NAME` instead); isolate the router's CPU with isolcpus= or a cpuset \
         partition instead",
    )
}

fn cpuset_mount_in(mounts: &str) -> Option<&str> {
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset")).then(|| f[1])
    })
}

/// A cpuset file: `cpuset.cpus`, or `cpus` where the hierarchy is mounted with `noprefix`.
fn knob(dir: &Path, name: &str) -> PathBuf {
    let prefixed = dir.join(format!("cpuset.{name}"));
    if prefixed.exists() {
        prefixed
    } else {
        dir.join(name)
    }
}

/// The workqueue mask format: hex, 32-bit groups separated by commas, most significant first.
fn hex_mask(cpus: &BTreeSet<usize>) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    (0..words)
        .rev()
        .map(|w| {
            let bits = (cpus.iter())
                .filter(|&&c| c / 32 == w)
                .fold(0u32, |m, &c| m | 1 << (c % 32));
            format!("{bits:08x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_v1_cpuset_mount_and_not_a_v2_one() {
        let m = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n\
                 cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                 cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n";
        assert_eq!(cpuset_mount_in(m), Some("/sys/fs/cgroup/cpuset"));
        let v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n\
                  cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\n";
        assert_eq!(cpuset_mount_in(v2), None);
    }

    #[test]
    fn workqueue_masks() {
        assert_eq!(hex_mask(&[0].into()), "00000001");
        assert_eq!(hex_mask(&[0, 2, 3].into()), "0000000d");
        assert_eq!(hex_mask(&[1, 33].into()), "00000002,00000002");
    }
}
