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
        err.contains("veth-rin is in use: another llrouter runs on it"),
        "{err}"
    );
    assert!(
        !err.contains("replacing a stale"),
        "a running router's program is not stale: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
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

/// Runs `ethtool ARGS` in the router's namespace; it must succeed.
fn ethtool(topo: &llr_traffic::netns::Topology, args: &[&str]) {
    let o = topo.router.command("ethtool").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "ethtool {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
#[ignore = "needs root: network namespaces, multi-queue veth, XDP (scripts/test.sh runs it as root)"]
fn queues_added_while_running_are_named_at_once_and_their_frames_too() {
    llr_io::sys::require_root();
    use llr_traffic::netns::addr;
    use std::io::BufReader;
    use std::net::UdpSocket;
    let topo = llr_traffic::netns::Topology::with_queues("llrqch", 4).expect("topology");
    // Two of veth-rin's four queues active at start, as `ethtool -L` leaves a NIC.
    ethtool(&topo, &["-L", "veth-rin", "rx", "2", "tx", "2"]);
    let ns = topo.router.name().to_string();
    let dir = TempDir::new("qchange");
    let c = config(&dir, "q.toml", "kernel-routes = true");
    let mut child = Running(
        run_in(&ns, &["--config", &c, "--duration", "20"], false)
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    common::wait_for_line(&mut err, "routing between");
    let sock = dir.join("q.toml.sock");
    let (code, status, e) = common::ctl_bin(&sock, &["status"]);
    assert_eq!(code, 0, "{e}");
    assert!(
        status.contains("veth-rin: rx queues 0, 1 served"),
        "{status}"
    );
    // Two more queues while it runs: said at once, with what to do.
    ethtool(&topo, &["-L", "veth-rin", "rx", "4", "tx", "4"]);
    common::wait_for_line(
        &mut err,
        "veth-rin: 4 active rx queues now; llrouter serves 2 (queues 0..1)",
    );
    // Their frames go to the kernel, and the warning names the queues they came on.
    let socks: Vec<UdpSocket> = (0..64)
        .map(|_| {
            topo.gen
                .run(|| UdpSocket::bind("0.0.0.0:0"))
                .unwrap()
                .unwrap()
        })
        .collect();
    for _ in 0..5 {
        for s in &socks {
            s.send_to(&[7u8; 64], (addr::SINK_V4, 9000)).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let said = common::wait_for_line(&mut err, "found no socket");
    let line = said
        .lines()
        .find(|l| l.contains("found no socket"))
        .unwrap();
    assert!(
        line.contains("they arrived on rx queue 2") || line.contains("they arrived on rx queue 3"),
        "{line}"
    );
    assert!(
        !line.contains("queue 0") && !line.contains("queue 1,"),
        "{line}"
    );
}
