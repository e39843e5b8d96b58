//! Every configuration in `examples/` runs and `llrouter ctl reload` of it unchanged succeeds
//! (root; skipped otherwise). Only what a namespace test must change is changed: the interface
//! names (mapped onto the topology's router ports, everywhere they appear) and the control socket
//! (a per-test path). The examples' `cores = [1]` stays: helper threads must run off the worker's
//! core, and the CPU check must count the machine's CPUs, not the pinned thread's.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command as Proc;
use std::time::{Duration, Instant};

use common::{topology, RouterThread, TempDir};
use llr_traffic::netns::addr;

/// The example with its interface names mapped onto the router namespace's and `socket` as its
/// control socket.
fn adapt(example: &str, socket: &Path) -> String {
    let mut v: toml::Value = toml::from_str(example).expect("example parses as TOML");
    let names: Vec<String> = v["interfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let ours = [addr::RTR_IN_IF, addr::RTR_OUT_IF];
    assert!(names.len() <= ours.len(), "example uses more ports");
    fn rename(v: &mut toml::Value, from: &[String], to: &[&str]) {
        match v {
            toml::Value::String(s) => {
                if let Some(i) = from.iter().position(|n| n == s) {
                    *s = to[i].to_string();
                }
            }
            toml::Value::Array(a) => a.iter_mut().for_each(|x| rename(x, from, to)),
            toml::Value::Table(t) => t.iter_mut().for_each(|(_, x)| rename(x, from, to)),
            _ => {}
        }
    }
    rename(&mut v, &names, &ours);
    v["control"]["socket"] = toml::Value::String(socket.display().to_string());
    toml::to_string(&v).unwrap()
}

fn ctl(socket: &Path, args: &[&str]) -> std::process::Output {
    Proc::new(env!("CARGO_BIN_EXE_llrouter"))
        .arg("ctl")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .expect("run llrouter ctl")
}

/// Cpus_allowed_list of this process's threads whose name starts with `prefix`.
fn thread_cpus(prefix: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let comm = comm.trim().to_string();
        if !comm.starts_with(prefix) {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        if let Some(l) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
            out.push((comm, l.split_once(':').unwrap().1.trim().to_string()));
        }
    }
    out
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn reload_of_every_example_succeeds() {
    llr_io::sys::require_root();
    let online = llr_ops::cpus::online();
    if !online.contains(&1) {
        eprintln!("skipped: the examples pin their worker to core 1; this machine has no core 1");
        return;
    }
    let mut examples: Vec<PathBuf> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
    examples.sort();
    assert!(examples.len() >= 3, "examples found: {examples:?}");
    let topo = topology("llrrel");
    for ex in &examples {
        let name = ex.file_stem().unwrap().to_string_lossy().to_string();
        let dir = TempDir::new(&format!("reload-{name}"));
        let sock = dir.join("ctl.sock");
        let cfg = dir.join("router.toml");
        std::fs::write(&cfg, adapt(&std::fs::read_to_string(ex).unwrap(), &sock)).unwrap();
        let router = RouterThread::spawn(&topo, cfg);
        let t0 = Instant::now();
        loop {
            let o = ctl(&sock, &["--json", "status"]);
            if o.status.success() {
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                if v["device_budget"].as_u64().unwrap_or(0) > 0 {
                    break;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "{name}: router not ready: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // the helpers run off the worker's core 1
        let helpers = thread_cpus("llr-");
        assert!(
            helpers.iter().any(|(n, _)| n == "llr-ctl"),
            "{name}: threads {helpers:?}"
        );
        // (`llr-rules` and `llr-rcu-grace` belong to the worker: a rules change in flight)
        let ours = [
            "llr-ctl",
            "llr-ctl-conn",
            "llr-metrics",
            "llr-metrics-con",
            "llr-mirror",
        ];
        for (n, cpus) in helpers.iter().filter(|(n, _)| ours.contains(&n.as_str())) {
            let set = llr_ops::cpus::parse_cpu_list(cpus).unwrap();
            assert!(
                !set.contains(&1),
                "{name}: helper thread {n} may run on the worker's core 1 ({cpus})"
            );
        }
        let o = ctl(&sock, &["reload"]);
        let stderr = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{name}: ctl reload failed: {stderr}");
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("reloaded"),
            "{name}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        let rep = router.finish();
        assert!(rep.is_ok(), "{name}: router run: {:?}", rep.err());
    }
}
