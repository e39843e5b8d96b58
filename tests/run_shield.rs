//! `llrouter run --shield` (root: namespaces, veth, XDP, the cgroup v1 cpuset hierarchy): while
//! the router runs, the machine's other movable tasks sit in a cpuset without the worker's
//! core, the router's own threads stay outside it, and all of it is given back when the router
//! stops.

mod common;
use common::{topology, wait_for_line, Running, TempDir};

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn cpuset_root() -> PathBuf {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let dir = mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && f[2] == "cgroup" && f[3].split(',').any(|o| o == "cpuset"))
        .map(|f| f[1].to_string())
        .expect("a cgroup v1 cpuset hierarchy (the shield needs one)");
    PathBuf::from(dir)
}

fn read(p: &std::path::Path, name: &str) -> String {
    let prefixed = p.join(format!("cpuset.{name}"));
    std::fs::read_to_string(if prefixed.exists() {
        prefixed
    } else {
        p.join(name)
    })
    .unwrap_or_default()
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn shield_keeps_the_worker_core_and_gives_it_back() {
    llr_io::sys::require_root();
    let root = cpuset_root();
    let topo = topology("llrshld");
    let dir = TempDir::new("run-shield");
    let cfg = dir.router_config(
        "interfaces = [\"veth-rin\", \"veth-rout\"]\ncores = [1]\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n[control]\nsocket = \"CTL\"\n",
    );
    // nsenter, not `ip netns exec` (which remounts /sys and hides the cpuset hierarchy)
    let mut child = Running(
        Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", topo.router.name()))
            .arg(env!("CARGO_BIN_EXE_llrouter"))
            .args(["run", "--shield", "--duration", "4", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start llrouter"),
    );
    let pid = child.0.id();
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let said = wait_for_line(&mut err, "CPU shield over core(s) 1");
    let set = root.join(format!("llr-shield-{pid}"));
    assert!(set.is_dir(), "{} while the router runs", set.display());
    let cpus = read(&set, "cpus");
    assert_eq!(
        cpus.trim(),
        "0",
        "the shield's cpuset holds the other core only"
    );
    let shielded: Vec<u32> = read(&set, "tasks")
        .lines()
        .filter_map(|t| t.parse().ok())
        .collect();
    assert!(shielded.len() > 10, "tasks moved: {}", shielded.len());
    assert!(
        shielded.contains(&std::process::id()),
        "this test's own process is one of the tasks moved off core 1"
    );
    let own: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    assert!(own.len() >= 3, "router threads: {own:?}");
    assert!(
        own.iter().all(|t| !shielded.contains(t)),
        "the router's own threads stay outside the shield"
    );
    let status = child.0.wait().expect("wait");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    assert!(status.success(), "{said}{rest}");
    assert!(
        !set.exists(),
        "the shield is released when the router stops"
    );
    let back = read(&root, "tasks");
    assert!(
        back.lines().any(|t| t == std::process::id().to_string()),
        "this test's process is back in the root cpuset"
    );
}
