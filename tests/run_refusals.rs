//! The common mistakes of starting a router get one clear line and the right exit status
//! (root: namespaces, veth, XDP): no privileges, an interface another router holds (exit 2),
//! an interface that is down and an empty table (warnings, and word when the link comes up).

mod common;
use common::{topology, Running, TempDir};

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_llrouter");

fn config(dir: &TempDir, name: &str, extra: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "interfaces = [\"veth-rin\", \"veth-rout\"]\n{extra}\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n[control]\nsocket = \"{}\"\n",
            dir.join(&format!("{name}.sock")).display()
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// `llrouter run` in namespace `ns`, optionally as `nobody` without capabilities.
fn run_in(ns: &str, args: &[&str], unprivileged: bool) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]);
    if unprivileged {
        c.args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ]);
    }
    c.arg(BIN).arg("run").args(args).env_remove("RUST_LOG");
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn output(c: &mut Command) -> Output {
    c.output().expect("run llrouter")
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn refusals_name_the_cause_and_exit_2() {
    llr_io::sys::require_root();
    let topo = topology("llrref");
    let ns = topo.router.name().to_string();
    let dir = TempDir::new("refusals");
    let a = config(&dir, "a.toml", "");
    let b = config(&dir, "b.toml", "");

    // without privileges: one line naming the capabilities, exit 2, nothing attached
    let o = output(&mut run_in(&ns, &["--config", &b, "--duration", "1"], true));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("llrouter run needs root, or the capabilities CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF; this process lacks CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(common::xdp_attached(&topo), 0);

    // a second router on the interfaces of a running one: named, with what holds them
    let first = Running(
        run_in(&ns, &["--config", &a, "--duration", "20"], false)
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while common::xdp_attached(&topo) < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "first router not up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = output(&mut run_in(
        &ns,
        &["--config", &b, "--duration", "1"],
        false,
    ));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "veth-rin rx queue 0 is held by another AF_XDP socket: another llrouter runs on it"
        ),
        "{err}"
    );
    assert!(!err.contains("os error 16"), "{err}");
    drop(first);
    let t0 = Instant::now();
    while common::xdp_attached(&topo) > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "first router left XDP behind"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // another program's XDP on an interface: named, with how to free the interface
    let sink = topo
        .router
        .run(|| {
            llr_traffic::sink::XdpSink::attach("veth-rin", llr_traffic::sink::SinkConfig::default())
        })
        .unwrap()
        .expect("attach the XDP sink");
    let o = output(&mut run_in(
        &ns,
        &["--config", &b, "--duration", "1"],
        false,
    ));
    drop(sink);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("veth-rin is in use: the XDP program `llr_sink` (id "),
        "{err}"
    );
    assert!(err.contains("or leave veth-rin out"), "{err}");
    let t0 = Instant::now();
    while common::xdp_attached(&topo) > 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "XDP left behind");
        std::thread::sleep(Duration::from_millis(100));
    }

    // an interface that is down and an empty table: warned about, and the link's return said
    topo.router
        .ip(&["link", "set", "veth-rout", "down"])
        .unwrap();
    let c = config(&dir, "c.toml", "kernel-routes = false");
    let mut child = run_in(&ns, &["--config", &c, "--duration", "3"], false);
    let up = std::thread::spawn({
        let ns = ns.clone();
        move || {
            std::thread::sleep(Duration::from_millis(1500));
            Command::new("ip")
                .args(["-n", &ns, "link", "set", "veth-rout", "up"])
                .status()
                .unwrap()
        }
    });
    let o = output(&mut child);
    assert!(up.join().unwrap().success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("veth-rout is down: nothing is forwarded through it until it is up"),
        "{err}"
    );
    assert!(err.contains("veth-rout is up"), "{err}");
    assert!(err.contains("the forwarding table is empty"), "{err}");
}
