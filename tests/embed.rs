//! The router embedded through `llr_router` (no CLI, no config file), in namespaces (root):
//! gen ns → router ns → sink ns. A `RouterConfig` built in code starts with `Router::start`;
//! once `wait_ready` says the worker loop runs, DSCP EF and best-effort datagrams go through;
//! they all arrive, the live counters and the final report count them in the right rings,
//! the control target answers in-process, and `stop()` leaves no XDP program attached.

mod common;
use common::{topology, xdp_attached, TempDir};

use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use llr_ops::ctl::{Command, ControlTarget};
use llr_router::{Router, RouterConfig, StartOptions};
use llr_traffic::netns::addr;

fn config(socket: std::path::PathBuf) -> RouterConfig {
    let mut cfg = RouterConfig::two_class(vec![addr::RTR_IN_IF.into(), addr::RTR_OUT_IF.into()]);
    cfg.control.socket = socket;
    cfg
}

/// Receives up to `want` datagrams within 4 s; returns how many arrived.
fn receive(s: UdpSocket, want: u64) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut got = 0;
        let t0 = Instant::now();
        while got < want && t0.elapsed() < Duration::from_secs(4) {
            if s.recv(&mut buf).is_ok() {
                got += 1;
            }
        }
        got
    })
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn embedded_router_forwards_counts_and_detaches() {
    llr_io::sys::require_root();
    let topo = topology("llremb");
    let tmp = TempDir::new("embed");
    let sock = tmp.join("ctl.sock");
    let cfg = config(sock.clone());
    let running = topo
        .router
        .run(move || Router::start(cfg, StartOptions::default()))
        .expect("enter the router namespace")
        .expect("router starts");
    assert!(
        running.wait_ready(Duration::from_secs(30)),
        "worker loop runs"
    );
    assert!(running.ready());
    assert_eq!(xdp_attached(&topo), 2, "a classifier on each interface");
    assert_eq!(running.control_socket(), sock.as_path());
    assert!(sock.exists(), "control socket bound");
    assert_eq!(
        running.metrics_addr(),
        None,
        "metrics off unless configured"
    );
    let names: Vec<&str> = running
        .interfaces()
        .iter()
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(names, [addr::RTR_IN_IF, addr::RTR_OUT_IF]);

    // The control target in-process: no file to reload, changes apply.
    let ctl = running.control();
    let e = ctl.handle(Command::Reload {}).unwrap_err();
    assert_eq!(e.field, "config", "{e:?}");
    assert_eq!(ctl.rules().len(), 1);
    ctl.budget_set("rt", llr_core::sched::Budget::packets(32).unwrap())
        .expect("budget.set");
    let status = ctl.handle(Command::Status {}).unwrap();
    assert_eq!(status["classes"][0]["budget"], 32, "{status}");
    assert!(status["config"].is_null(), "{status}");

    let sink = topo
        .sink
        .run(|| UdpSocket::bind("0.0.0.0:9000"))
        .unwrap()
        .unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let gen = topo
        .gen
        .run(|| UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    let (n_ef, n_be) = (120u64, 80u64);
    let got = receive(sink, n_ef + n_be);
    let to: SocketAddrV4 = SocketAddrV4::new(addr::SINK_V4.parse().unwrap(), 9000);
    let send = |n: u64, tos: i32| {
        llr_io::sys::setsockopt_int(gen.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, tos).unwrap();
        for i in 0..n {
            gen.send_to(&i.to_be_bytes(), to).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    send(n_ef, 46 << 2);
    send(n_be, 0);
    let got = got.join().unwrap();
    assert_eq!(got, n_ef + n_be, "every datagram arrived");

    // Live counters agree with what was sent.
    let live = running.snapshot();
    let served: Vec<u64> = live.rings.iter().map(|r| r.served).collect();
    assert_eq!(live.layout_rings, ["rt", "be"]);
    assert!(served[0] >= n_ef && served[1] >= n_be, "{served:?}");
    let m = running.metrics();
    let class = |n: &str| m.classes.iter().find(|(c, _)| c == n).map(|(_, v)| *v);
    assert_eq!(class("rt"), Some(n_ef), "{:?}", m.classes);

    let rep = running.stop().expect("report");
    eprintln!("{}", rep.worker);
    assert_eq!(rep.worker.rings, ["rt", "be"]);
    assert_eq!(
        rep.worker.forwarded,
        [n_ef, n_be],
        "EF in RT, the rest in BE"
    );
    let rin = rep
        .classifier
        .iter()
        .find(|(n, _)| n == addr::RTR_IN_IF)
        .expect("ingress classifier counters");
    assert_eq!(rin.1.per_class[0], n_ef);
    let tx: u64 = rep.worker.ports.iter().map(|p| p.tx).sum();
    assert_eq!(tx, n_ef + n_be, "{:?}", rep.worker.ports);
    assert_eq!(xdp_attached(&topo), 0, "XDP detached");
    assert!(!sock.exists(), "control socket removed");
}
