//! `worker-priority` (root: namespaces, veth, XDP): the workers run at SCHED_FIFO with the
//! priority asked for and the router's other threads at the normal scheduler, the start-up line
//! says so, and a priority the scheduler refuses stops the start with the field named.

mod common;
use common::{topology, wait_for_line, Running, TempDir};

use std::io::BufReader;
use std::process::{Command, Stdio};

/// `(name, policy, rt_priority)` of every thread of `pid`, from /proc/PID/task/TID/stat
/// (fields 40 and 41, counted after the parenthesised name, which may hold spaces).
fn threads(pid: u32) -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let p = e.unwrap().path();
        let Ok(stat) = std::fs::read_to_string(p.join("stat")) else {
            continue;
        };
        let (open, close) = (stat.find('(').unwrap(), stat.rfind(')').unwrap());
        let name = stat[open + 1..close].to_string();
        // After ")": field 3 (state) is the first; rt_priority is field 40, policy field 41.
        let f: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        out.push((name, f[41 - 3].parse().unwrap(), f[40 - 3].parse().unwrap()));
    }
    out
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn workers_run_at_the_fifo_priority_asked_for_and_nothing_else_does() {
    llr_io::sys::require_root();
    let topo = topology("llrprio");
    let dir = TempDir::new("run-priority");
    let cfg = dir.router_config(
        "interfaces = [\"veth-rin\", \"veth-rout\"]\ncores = [1]\nworker-priority = 7\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n[control]\nsocket = \"CTL\"\n",
    );
    let mut child = Running(
        Command::new("ip")
            .args(["netns", "exec", topo.router.name()])
            .arg(env!("CARGO_BIN_EXE_llrouter"))
            .args(["run", "--duration", "4", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start llrouter"),
    );
    let pid = child.0.id();
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let said = wait_for_line(&mut err, "routing between");
    assert!(said.contains("1 worker at SCHED_FIFO 7"), "{said}");
    // `ip netns exec` execs the router in place: its pid is the child's.
    let t = threads(pid);
    let workers: Vec<_> = t.iter().filter(|t| t.0.starts_with("llr-worker")).collect();
    assert_eq!(workers.len(), 1, "{t:?}");
    assert_eq!((workers[0].1, workers[0].2), (1, 7), "SCHED_FIFO 7: {t:?}");
    let others: Vec<_> = t
        .iter()
        .filter(|t| !t.0.starts_with("llr-worker"))
        .collect();
    assert!(others.len() >= 2, "{t:?}");
    assert!(
        others.iter().all(|t| t.1 == 0 && t.2 == 0),
        "helper threads at the normal scheduler: {t:?}"
    );
    let status = child.0.wait().expect("wait");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    assert!(status.success(), "{said}{rest}");
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn a_priority_the_scheduler_refuses_stops_the_start_naming_the_field() {
    llr_io::sys::require_root();
    let topo = topology("llrpriono");
    let dir = TempDir::new("run-priority-refused");
    let cfg = dir.router_config(
        "interfaces = [\"veth-rin\", \"veth-rout\"]\nworker-priority = 7\n[[classes]]\nname = \"be\"\n[control]\nsocket = \"CTL\"\n",
    );
    // Root without CAP_SYS_NICE (gone from the bounding set, so the exec does not get it
    // back): the scheduler refuses SCHED_FIFO.
    let o = Command::new("ip")
        .args(["netns", "exec", topo.router.name()])
        .args(["setpriv", "--bounding-set=-sys_nice", "--"])
        .arg(env!("CARGO_BIN_EXE_llrouter"))
        .args(["run", "--duration", "2", "--config"])
        .arg(&cfg)
        .output()
        .expect("setpriv (util-linux)");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("worker-priority: SCHED_FIFO 7 for worker 0: Operation not permitted"),
        "{err}"
    );
    assert!(
        Command::new("ip")
            .args(["-n", topo.router.name(), "link", "show"])
            .output()
            .map(|o| !String::from_utf8_lossy(&o.stdout).contains(" xdp"))
            .unwrap(),
        "no XDP program left after the refused start"
    );
}
