//! The CPU shield on the real cpuset hierarchy (root): what it moves, what it leaves, that it
//! puts everything back, and that a killed holder's shield is released by the next one.
//! One test function: a process holds one shield at a time.

use std::collections::BTreeSet;
use std::fs;
use std::process::{Child, Command};

use llr_ops::shield::{self, CpuShield};

fn allowed(pid: u32) -> BTreeSet<usize> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let list = (status.lines())
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    llr_ops::cpus::parse_cpu_list(list.trim()).unwrap()
}

fn sleeper() -> Child {
    Command::new("sleep").arg("60").spawn().unwrap()
}

fn cpuset_root() -> String {
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    (mounts.lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset"))
        .expect("a cgroup v1 cpuset hierarchy (the shield needs one)")[1]
        .to_owned()
}

struct Reap(Vec<Child>);
impl Drop for Reap {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
#[ignore = "needs root"]
fn the_shield_moves_everyone_else_off_and_back() {
    llr_io::sys::require_root();
    let online = llr_ops::cpus::online();
    assert!(online.len() >= 2, "needs two CPUs");
    let target = *online.iter().next_back().unwrap();
    let rest: BTreeSet<usize> = online.iter().copied().filter(|&c| c != target).collect();
    let wq = "/sys/devices/virtual/workqueue/cpumask";
    let wq_before = fs::read_to_string(wq).ok();
    let mut kids = Reap(vec![sleeper()]);
    let before = kids.0[0].id();
    assert_eq!(allowed(before), online);
    // A task pinned to the shielded CPU (another router's worker, say): moved off meanwhile,
    // and pinned again afterwards (a cpuset move resets a task's affinity).
    let t = target.to_string();
    kids.0.push(
        Command::new("taskset")
            .args(["-c", &t, "sleep", "60"])
            .spawn()
            .unwrap(),
    );
    let pinned = kids.0[1].id();
    let only_target: BTreeSet<usize> = [target].into();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while allowed(pinned) != only_target {
        assert!(std::time::Instant::now() < deadline, "taskset did not pin");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }

    let mut s = CpuShield::new(&[target].into()).unwrap();
    assert!(s.moved() >= 1, "at least the sleeper moved");
    assert_eq!(
        allowed(before),
        rest,
        "a process started before is confined"
    );
    assert_eq!(allowed(pinned), rest, "a task pinned there too");
    assert!(
        llr_io::sys::affinity().unwrap().contains(&target),
        "the holder itself keeps the shielded CPU"
    );
    kids.0.push(sleeper());
    assert_eq!(
        allowed(kids.0[2].id()),
        online,
        "a process the holder starts (the router) may use it"
    );
    let err = format!("{:#}", CpuShield::new(&[target].into()).unwrap_err());
    assert!(err.contains("already") || err.contains("exists"), "{err}");
    let err = format!("{:#}", CpuShield::new(&online).unwrap_err());
    assert!(err.contains("leaves no CPU"), "{err}");
    s.release().unwrap();
    assert_eq!(allowed(before), online, "released: back on every CPU");
    assert_eq!(
        allowed(pinned),
        only_target,
        "and the pinned task on its own again"
    );
    assert_eq!(fs::read_to_string(wq).ok(), wq_before);
    s.release().unwrap();
    drop(s);

    // A holder killed before it released: its cpuset stays with the tasks in it, until the
    // next shield (or a sweep) finds the holder gone.
    let root = cpuset_root();
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let stale = format!("{root}/llr-shield-{dead_pid}");
    fs::create_dir(&stale).unwrap();
    let knob = |n: &str| {
        let p = format!("{stale}/cpuset.{n}");
        if fs::metadata(&p).is_ok() {
            p
        } else {
            format!("{stale}/{n}")
        }
    };
    let mems = fs::read_to_string(format!("{root}/cpuset.mems"))
        .or_else(|_| fs::read_to_string(format!("{root}/mems")))
        .unwrap();
    fs::write(knob("cpus"), rest.iter().next().unwrap().to_string()).unwrap();
    fs::write(knob("mems"), mems.trim()).unwrap();
    fs::write(format!("{stale}/tasks"), before.to_string()).unwrap();
    assert_ne!(allowed(before), online);
    assert_eq!(shield::sweep_stale().unwrap(), 1);
    assert!(fs::metadata(&stale).is_err(), "the stale cpuset is gone");
    assert_eq!(allowed(before), online, "its task is back on every CPU");
}
