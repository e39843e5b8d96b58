//! Fairness between interfaces (paper 004: NAPI serves its devices round robin, so one flooded
//! interface cannot starve another). Root: namespaces, veth, XDP.
//!
//! One worker serves both of the router's interfaces: each grant starts reading at the next
//! interface's socket (`Device::recv_warmed` rotates its cursor), so an interface gets the
//! first frames of every other grant whatever the other one offers.
//! - `flooded_interfaces_share_the_worker`: traffic in both directions, each far beyond what the
//!   worker forwards (both ingress sockets drop frames with their rings full, at least a fifth
//!   of what reached them, or the test is void and fails): the two get the same number of
//!   frames served, within 10 %. A fifth, not a half: both generators share core 0, and on a
//!   slower host (CI's) each sent about 630 kpps, so a socket dropped 1.2 M frames beside the
//!   1.33 M the worker took from it. A light interface (the other test) drops none, so a fifth
//!   is far beyond what an interface the worker keeps up with loses.
//! - `a_flood_does_not_starve_a_light_interface`: one direction flooded, the other at 20 kpps:
//!   the light one loses nothing in the router.
//!
//! The rings hold 4096 frames, not the default 512: at 20 kpps 512 entries last 26 ms, and on
//! this 2-core VM the worker's core is now and then taken away for longer than that (a full
//! test run lost 577 of 79 744 light frames, its ring unserved for about 55 ms), which is the
//! host's doing, not the router's. 4096 entries ride out 200 ms, and a light interface the
//! worker starved would still overflow them within the first tenth of its 4 s.

mod common;
use common::{topology, RouterThread, TempDir};

use std::process::{Command, Stdio};
use std::sync::Mutex;

use llr_traffic::netns::{addr, Netns};

/// One test at a time: both pin their worker to core 1 and their generators to core 0, and two
/// at once would share those cores (the harness runs a binary's tests in parallel).
static SERIAL: Mutex<()> = Mutex::new(());

const CONFIG: &str = r#"
interfaces = ["veth-rin", "veth-rout"]
cores = [1]
wake = "busy"
strategy = "sq"
[rings]
rx-size = 4096
fill-size = 8192
[[classes]]
name = "be"
[control]
socket = "CTL"
"#;

/// `llrouter gen` in `ns` towards `dst` for 4 s (bpf-live, on core 0): the frames it sent.
fn gen(ns: &Netns, dst: &str, rate: u64) -> std::thread::JoinHandle<u64> {
    let mut c = Command::new("ip");
    c.args([
        "netns",
        "exec",
        ns.name(),
        env!("CARGO_BIN_EXE_llrouter"),
        "gen",
    ])
    .args(["--dst", dst, "--rate", &rate.to_string()])
    .args(["--duration", "4", "--cpu", "0", "--backend", "bpf-live"])
    .args(["--no-dscp", "--json"])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    std::thread::spawn(move || {
        let o = c.output().expect("run llrouter gen");
        assert!(
            o.status.success(),
            "gen: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("gen --json");
        v["sent"].as_u64().expect("sent")
    })
}

/// Runs the router while gen → sink at `forward` pps and sink → gen at `backward` pps; returns
/// per ingress interface (veth-rin, veth-rout): (frames sent to it, frames the worker took
/// from it, frames its socket dropped with the ring full).
fn run(tag: &str, forward: u64, backward: u64) -> [(u64, u64, u64); 2] {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = topology(&format!("llrfair-{tag}"));
    let dir = TempDir::new(&format!("fairness-{tag}"));
    let rin = topo.router.ifindex("veth-rin").expect("ifindex");
    let rout = topo.router.ifindex("veth-rout").expect("ifindex");
    let router = RouterThread::start(&topo, dir.router_config(CONFIG));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let fwd = gen(&topo.gen, addr::SINK_V4, forward);
    let back = gen(&topo.sink, addr::GEN_V4, backward);
    let sent = [fwd.join().expect("gen"), back.join().expect("gen")];
    std::thread::sleep(std::time::Duration::from_millis(300));
    let rep = router.finish().expect("router run").expect("router report");
    let port = |ifindex: u32| {
        (rep.worker.ports.iter())
            .find(|p| p.ifindex == ifindex)
            .unwrap_or_else(|| panic!("no port {ifindex}: {:?}", rep.worker.ports))
            .clone()
    };
    let (a, b) = (port(rin), port(rout));
    eprintln!("{tag}: sent {sent:?}; veth-rin {a:?}; veth-rout {b:?}");
    [
        (sent[0], a.rx, a.kernel_rx_ring_full),
        (sent[1], b.rx, b.kernel_rx_ring_full),
    ]
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn flooded_interfaces_share_the_worker() {
    llr_io::sys::require_root();
    let [(_, a, a_full), (_, b, b_full)] = run("both", 2_000_000, 2_000_000);
    assert!(
        a_full * 4 > a && b_full * 4 > b,
        "both interfaces must be flooded for the split to be the router's: ring-full drops \
         {a_full} and {b_full} against {a} and {b} served"
    );
    let ratio = a as f64 / b as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "served {a} from veth-rin and {b} from veth-rout: {ratio:.3}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn a_flood_does_not_starve_a_light_interface() {
    llr_io::sys::require_root();
    let [(_, a, a_full), (light_sent, b, b_full)] = run("light", 2_000_000, 20_000);
    assert!(
        a_full * 4 > a,
        "veth-rin must be flooded (a fifth of what reached it dropped): {a_full} dropped, {a} \
         served"
    );
    assert!(light_sent > 70_000, "the light side sent {light_sent}");
    // Its ring (4096) and fill ring (8192) hold 200 ms of the light side's 20 kpps: a worker
    // that left it unserved for longer fails here; a host that takes the worker's core for
    // 100 ms (a CI run lost 1 frame with rings of 2048) does not.
    assert_eq!(
        b_full, 0,
        "the light interface's socket dropped frames with its ring full ({b} served of {light_sent})"
    );
    assert!(
        b >= light_sent,
        "the light interface: {b} served of {light_sent} sent"
    );
}
