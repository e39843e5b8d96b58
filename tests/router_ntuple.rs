//! `steering = "ntuple"` end to end on veth (root: namespaces, multi-queue veth, XDP), with a
//! fake `ethtool` first on PATH that records its calls (veth has no ntuple filters): the
//! router installs the filters it plans and the RSS table, records how to remove them, removes
//! them on a clean stop, and after `kill -9` the next start removes the stale ones before it
//! installs its own. No XDP program and no state file are left behind.

mod common;
use common::{xdp_attached, TempDir};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use llr_ops::ctl::{Command as Ctl, CtlClient as Client};
use llr_traffic::netns::{addr, Topology};

/// A fake `ethtool`: ntuple on, 2 combined channels, every call appended to `log`.
fn fake_ethtool(dir: &Path, log: &Path) {
    let script = format!(
        "#!/bin/sh\necho \"$*\" >> {}\ncase \"$1\" in\n  -k) printf 'Features for %s:\\nntuple-filters: on\\n' \"$2\";;\n  -l) printf 'Channel parameters for %s:\\nPre-set maximums:\\nCombined:\\t8\\nCurrent hardware settings:\\nCombined:\\t2\\n' \"$2\";;\nesac\nexit 0\n",
        log.display()
    );
    let p = dir.join("ethtool");
    std::fs::write(&p, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `llrouter run` in the router namespace with the fake ethtool first on PATH.
fn start(topo: &Topology, cfg: &Path, bin_dir: &Path) -> Child {
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("ip")
        .args(["netns", "exec", topo.router.name()])
        .arg(env!("CARGO_BIN_EXE_llrouter"))
        .args(["run", "--config"])
        .arg(cfg)
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn llrouter run")
}

/// Waits until the router's `status` says its workers run (bounded: 20 s).
fn wait_ready(child: &mut Child, sock: &Path) {
    let t0 = Instant::now();
    loop {
        if let Ok(mut c) = Client::connect(sock, Duration::from_secs(1)) {
            let ready = (c.call(&Ctl::Status {}).ok())
                .and_then(|r| r.into_result().ok())
                .is_some_and(|v| v["ready"] == true);
            if ready {
                return;
            }
        }
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("llrouter exited ({st}) before it was ready: {err}");
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "router not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills the child if a test fails while it runs.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
#[ignore = "needs root: network namespaces, multi-queue veth, XDP (scripts/test.sh runs it as root)"]
fn ntuple_filters_are_installed_removed_and_recovered_after_kill() {
    llr_io::sys::require_root();
    let topo = Topology::with_queues("llrnt", 2).expect("topology");
    let tmp = TempDir::new("ntuple");
    let log = tmp.join("ethtool.log");
    fake_ethtool(&tmp.0, &log);
    let sock = tmp.join("ctl.sock");
    let cfg = tmp.router_config(&format!(
        "interfaces = [\"{}\", \"{}\"]\nsteering = \"ntuple\"\n[control]\nsocket = \"CTL\"\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n[[rules]]\nclass = \"rt\"\ndscp = 46\n",
        addr::RTR_IN_IF,
        addr::RTR_OUT_IF
    ));
    let state = Path::new(&format!("{}.ntuple", sock.display())).to_path_buf();
    let calls = || std::fs::read_to_string(&log).unwrap_or_default();

    // 1. Start: the filters and the RSS table go in, the undo is recorded.
    let mut g = Guard(Some(start(&topo, &cfg, &tmp.0)));
    wait_ready(g.0.as_mut().unwrap(), &sock);
    let first = calls();
    for want in [
        format!("-K {} ntuple on", addr::RTR_IN_IF),
        format!("-X {} equal 1 start 1", addr::RTR_IN_IF),
        "action 0 loc 0".to_string(),
    ] {
        assert!(first.contains(&want), "`{want}` not installed:\n{first}");
    }
    assert!(!first.contains("delete"), "nothing to remove yet:\n{first}");
    let recorded = std::fs::read_to_string(&state).expect("state file written");
    assert!(
        recorded.contains(&format!("-N\t{}\tdelete\t0", addr::RTR_IN_IF)),
        "{recorded}"
    );
    assert_eq!(xdp_attached(&topo), 2);

    // 2. kill -9: nothing is removed; the state file and the programs stay.
    let mut c = g.0.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
    assert!(state.exists(), "a killed router leaves its state file");
    assert!(
        !calls().contains("delete"),
        "a killed router removes nothing"
    );
    std::fs::write(&log, "").unwrap();

    // 3. Restart: the stale filters come out first, then the new ones go in; the stale XDP
    //    programs are replaced, not doubled.
    g.0 = Some(start(&topo, &cfg, &tmp.0));
    wait_ready(g.0.as_mut().unwrap(), &sock);
    let second = calls();
    let del = second
        .find(&format!("-N {} delete 0", addr::RTR_IN_IF))
        .unwrap_or_else(|| panic!("stale filter not removed:\n{second}"));
    let reset = second
        .find(&format!("-X {} default", addr::RTR_IN_IF))
        .unwrap_or_else(|| panic!("stale RSS table not reset:\n{second}"));
    let install = second
        .find(&format!("-K {} ntuple on", addr::RTR_IN_IF))
        .unwrap_or_else(|| panic!("not installed again:\n{second}"));
    assert!(
        del < install && reset < install,
        "removed before installing:\n{second}"
    );
    assert_eq!(xdp_attached(&topo), 2, "one program per interface");
    std::fs::write(&log, "").unwrap();

    // 4. A clean stop removes the filters, the state file and the programs.
    let mut c = g.0.take().unwrap();
    let pid = c.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let t0 = Instant::now();
    let st = loop {
        if let Some(st) = c.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "router did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(st.success(), "clean exit: {st}");
    let last = calls();
    for want in [
        format!("-N {} delete 0", addr::RTR_IN_IF),
        format!("-X {} default", addr::RTR_IN_IF),
        format!("-X {} default", addr::RTR_OUT_IF),
    ] {
        assert!(last.contains(&want), "`{want}` not run on stop:\n{last}");
    }
    assert!(!state.exists(), "state file removed");
    assert_eq!(xdp_attached(&topo), 0, "XDP detached");
}
