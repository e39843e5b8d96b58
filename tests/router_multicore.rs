//! Several workers (root: namespaces, multi-queue veth, XDP).
//!
//! - Two workers on 2-queue veth: many UDP flows from plain sockets (IPv4 and IPv6) spread
//!   over the sender's two Tx queues (veth keeps the queue: Rx queue = sender's Tx queue); every
//!   datagram arrives once, in order within its flow, and both workers carry traffic. A budget
//!   change made while traffic flows is running on both workers when the call returns.
//! - `steering = "queues"`: the testbed's generator puts RT flows in queue 0 and BE flows in
//!   queue 1 (as a NIC's Flow Director or a switch would); the router, without rules, forwards
//!   RT in the RT ring only.
//! - One worker on 4-queue veth: it serves all four queues (not only queue 0), so UDP flows and
//!   TCP that the sender spreads over its four Tx queues all arrive, and the classifier hands no
//!   frame to the kernel for want of a socket; `--check`'s plan and the status say 4 queues.
//! - More workers than queues: a clear error naming `cores`, nothing left attached. The queues
//!   counted are the active ones (`ethtool -L`), not the allocated ones.

mod common;
use common::{xdp_attached, TempDir};

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use llr_router::{Router, RouterConfig, RouterError, StartOptions, Steering};
use llr_traffic::netns::{addr, Topology};

const FLOWS: u16 = 16;
const PER_FLOW: u32 = 60;

fn config(socket: std::path::PathBuf, cores: Vec<usize>) -> RouterConfig {
    let mut cfg = RouterConfig::two_class(vec![addr::RTR_IN_IF.into(), addr::RTR_OUT_IF.into()]);
    cfg.control.socket = socket;
    cfg.cores = cores;
    // Rings of 2048 (not 512): the tests count every frame at 20 kpps, and 512 entries last
    // 26 ms, less than a busy 2-core host now and then takes an unpinned worker's core away.
    cfg.rings.rx_size = 2048;
    cfg.rings.fill_size = 4096;
    cfg
}

/// A UDP socket bound to `addr` in the sink namespace, with a read timeout of `timeout_ms` and
/// room for a whole run: a receiver thread descheduled on a busy 2-core VM must not turn into
/// losses that are not the router's.
fn sink_socket(topo: &Topology, addr: &str, timeout_ms: u64) -> UdpSocket {
    let addr = addr.to_string();
    let s = topo
        .sink
        .run(move || UdpSocket::bind(addr.as_str()))
        .unwrap()
        .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(timeout_ms)))
        .unwrap();
    llr_io::sys::setsockopt_int(
        s.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        8 << 20,
    )
    .unwrap();
    s
}

/// Receives `(flow, seq)` datagrams on `s` until `want` arrived or 6 s passed, in arrival order.
fn receive(s: UdpSocket, want: usize) -> std::thread::JoinHandle<Vec<(u16, u32)>> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut got = Vec::new();
        let t0 = Instant::now();
        while got.len() < want && t0.elapsed() < Duration::from_secs(6) {
            if let Ok(n) = s.recv(&mut buf) {
                if n >= 6 {
                    let flow = u16::from_be_bytes([buf[0], buf[1]]);
                    let seq = u32::from_be_bytes([buf[2], buf[3], buf[4], buf[5]]);
                    got.push((flow, seq));
                }
            }
        }
        got
    })
}

/// Sends `PER_FLOW` datagrams on each of `FLOWS` sockets (one flow each, its own source port),
/// round robin over the flows, paced; `mid` is called once half of them are out.
fn send_flows(socks: &[UdpSocket], to: SocketAddr, mut mid: impl FnMut()) {
    for seq in 0..PER_FLOW {
        if seq == PER_FLOW / 2 {
            mid();
        }
        for (f, s) in socks.iter().enumerate() {
            let mut b = [0u8; 6];
            b[..2].copy_from_slice(&(f as u16).to_be_bytes());
            b[2..].copy_from_slice(&seq.to_be_bytes());
            s.send_to(&b, to).unwrap();
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// Every flow's datagrams arrived exactly once and in order.
fn check_flows(what: &str, got: &[(u16, u32)]) {
    let mut per: BTreeMap<u16, Vec<u32>> = BTreeMap::new();
    for &(f, s) in got {
        per.entry(f).or_default().push(s);
    }
    assert_eq!(per.len(), FLOWS as usize, "{what}: every flow arrived");
    for (f, seqs) in &per {
        let want: Vec<u32> = (0..PER_FLOW).collect();
        assert_eq!(
            seqs, &want,
            "{what}: flow {f} complete, no duplicate, in order"
        );
    }
}

#[test]
#[ignore = "needs root: network namespaces, multi-queue veth, XDP (scripts/test.sh runs it as root)"]
fn two_workers_forward_many_flows_in_order_and_share_changes() {
    llr_io::sys::require_root();
    let topo = Topology::with_queues("llrmc", 2).expect("topology");
    let tmp = TempDir::new("mc2");
    let cfg = config(tmp.join("ctl.sock"), vec![0, 1]);
    let running = topo
        .router
        .run(move || Router::start(cfg, StartOptions::default()))
        .expect("enter the router namespace")
        .expect("router starts");
    assert!(running.wait_ready(Duration::from_secs(30)), "workers run");
    assert_eq!(running.workers(), 2);
    // One punt TAP for the kernel, a queue of it per worker.
    let tap = topo.router.ip(&["-d", "link", "show", "llr-punt"]).unwrap();
    let tap = String::from_utf8_lossy(&tap.stdout).to_string();
    assert!(tap.contains("multi_queue numqueues 2"), "{tap}");
    assert!(
        running.summary().contains("2 workers"),
        "{}",
        running.summary()
    );

    let v4 = sink_socket(&topo, "0.0.0.0:9000", 200);
    let v6 = sink_socket(&topo, "[::]:9001", 200);
    let want = FLOWS as usize * PER_FLOW as usize;
    let (got4, got6) = (receive(v4, want), receive(v6, want));
    let socks = |bind: &'static str| -> Vec<UdpSocket> {
        (0..FLOWS)
            .map(|_| {
                topo.gen
                    .run(move || UdpSocket::bind(bind))
                    .unwrap()
                    .unwrap()
            })
            .collect()
    };
    let (s4, s6) = (socks("0.0.0.0:0"), socks("[::]:0"));
    // Half of the IPv4 flows are EF: both classes on both workers.
    for s in s4.iter().step_by(2) {
        llr_io::sys::setsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, 46 << 2)
            .unwrap();
    }
    let ctl = running.control();
    let mut budget_seen = Vec::new();
    send_flows(
        &s4,
        format!("{}:9000", addr::SINK_V4).parse().unwrap(),
        || {
            ctl.budget_set("be", llr_core::sched::Budget::packets(8).unwrap())
                .expect("budget.set under traffic");
            // After the reply no worker runs the old budget: each one's latest publication
            // (made before it acknowledged) shows the new one.
            budget_seen = running
                .snapshots()
                .iter()
                .map(|s| s.ring_budgets.get(1).copied())
                .collect();
        },
    );
    send_flows(
        &s6,
        format!("[{}]:9001", addr::SINK_V6).parse().unwrap(),
        || {},
    );
    assert_eq!(
        budget_seen,
        [Some(8), Some(8)],
        "both workers run the new budget"
    );
    check_flows("IPv4", &got4.join().unwrap());
    check_flows("IPv6", &got6.join().unwrap());

    let m = running.metrics();
    let workers: Vec<u32> = m.workers.iter().map(|w| w.worker).collect();
    assert_eq!(workers, [0, 1], "one metrics series per worker");
    let rep = running.stop().expect("report");
    eprintln!("{}", rep.worker);
    assert_eq!(rep.workers.len(), 2);
    for (w, s) in rep.workers.iter().enumerate() {
        let n: u64 = s.forwarded.iter().sum();
        assert!(n > 0, "worker {w} carried traffic: {:?}", s.forwarded);
    }
    let total: u64 = rep.worker.forwarded.iter().sum();
    assert_eq!(total, 2 * want as u64, "the report adds the workers up");
    assert_eq!(xdp_attached(&topo), 0, "XDP detached");
}

#[test]
#[ignore = "needs root: network namespaces, multi-queue veth, AF_XDP, XDP (scripts/test.sh runs it as root)"]
fn queue_steering_takes_the_class_from_the_queue() {
    llr_io::sys::require_root();
    let topo = Topology::with_queues("llrmq", 2).expect("topology");
    let tmp = TempDir::new("mq");
    let mut cfg = config(tmp.join("ctl.sock"), vec![]);
    cfg.rules.clear();
    cfg.steering = Steering::Queues;
    let running = topo
        .router
        .run(move || Router::start(cfg, StartOptions::default()))
        .expect("enter the router namespace")
        .expect("router starts");
    assert!(running.wait_ready(Duration::from_secs(30)), "worker runs");

    // The testbed's generator as a Flow Director: RT flows on Tx queue 0, BE flows on 1. Its
    // RT packets go to port 9001 and carry no DSCP, so nothing but the queue marks them.
    let counts: Vec<_> = [9000u16, 9001]
        .into_iter()
        .map(|port| {
            let s = sink_socket(&topo, &format!("0.0.0.0:{port}"), 300);
            std::thread::spawn(move || {
                let mut buf = [0u8; 128];
                let mut n = 0u64;
                let t0 = Instant::now();
                let mut last = Instant::now();
                while t0.elapsed() < Duration::from_secs(8)
                    && last.elapsed() < Duration::from_secs(2)
                {
                    if s.recv(&mut buf).is_ok() {
                        n += 1;
                        last = Instant::now();
                    }
                }
                n
            })
        })
        .collect();
    let gen_cfg = llr_traffic::gen::GenConfig {
        dst: addr::SINK_V4.parse().unwrap(),
        dst_port: 9000,
        rt_port: Some(9001),
        rt_dscp: false,
        rate_pps: 20_000.0,
        rt_share: 0.4,
        flows: 8,
        packets: Some(4000),
        duration: Some(Duration::from_secs(5)),
        queues: 2,
        tx_steer: llr_traffic::gen::TxSteer::Class,
        ..Default::default()
    };
    let stop = std::sync::atomic::AtomicBool::new(false);
    let sent = topo
        .gen
        .run(|| llr_traffic::gen::run(&gen_cfg, llr_traffic::gen::Backend::Xsk, &stop))
        .unwrap()
        .expect("generator");
    let got: Vec<u64> = counts.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(sent.sent_rt > 0 && sent.sent_be > 0, "{sent:?}");
    let rep = running.stop().expect("report");
    eprintln!("{}", rep.worker);
    assert_eq!(got, [sent.sent_be, sent.sent_rt], "every datagram arrived");
    assert_eq!(
        rep.worker.forwarded,
        [sent.sent_rt, sent.sent_be],
        "RT (queue 0) only through the RT ring, BE (queue 1) through BE"
    );
    let rin = (rep.classifier.iter())
        .find(|(n, _)| n == addr::RTR_IN_IF)
        .expect("ingress classifier");
    assert_eq!(
        &rin.1.per_class[..2],
        &[sent.sent_rt, sent.sent_be],
        "class by queue"
    );
    assert_eq!(rin.1.rule_hits, 0, "no rules consulted");
    assert_eq!(xdp_attached(&topo), 0, "XDP detached");
}

/// XDP-redirected frames per rx queue of `ifname` in `ns` (veth's `ethtool -S`).
fn xdp_redirects_per_queue(ns: &llr_traffic::netns::Netns, ifname: &str) -> Vec<u64> {
    let out = ns.exec(&["ethtool", "-S", ifname]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut per: BTreeMap<u32, u64> = BTreeMap::new();
    for l in text.lines() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("rx_queue_") {
            if let Some((q, tail)) = rest.split_once("_xdp_redirect:") {
                per.insert(q.parse().unwrap(), tail.trim().parse().unwrap());
            }
        }
    }
    per.into_values().collect()
}

/// A TCP transfer of `bytes` from gen to the sink at `to`, checked byte for byte; whether it
/// completed intact within 10 s.
fn tcp_intact(topo: &Topology, bind: &'static str, to: SocketAddr, bytes: usize) -> bool {
    use std::io::{Read, Write};
    let l = topo
        .sink
        .run(move || std::net::TcpListener::bind(bind))
        .unwrap()
        .unwrap();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = l.accept().ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let mut got = Vec::new();
        s.read_to_end(&mut got).ok()?;
        Some(got)
    });
    let sent = topo
        .gen
        .run(move || -> Option<()> {
            let mut s = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(5)).ok()?;
            s.set_write_timeout(Some(Duration::from_secs(10))).ok()?;
            let data: Vec<u8> = (0..bytes).map(|j| (j * 7 % 251) as u8).collect();
            s.write_all(&data).ok()?;
            s.shutdown(std::net::Shutdown::Write).ok()
        })
        .unwrap();
    let got = rx.join().unwrap();
    sent.is_some()
        && got.is_some_and(|g| {
            g.len() == bytes && g.iter().enumerate().all(|(j, &b)| b == (j * 7 % 251) as u8)
        })
}

#[test]
#[ignore = "needs root: network namespaces, multi-queue veth, XDP (scripts/test.sh runs it as root)"]
fn one_worker_serves_every_queue_of_a_four_queue_veth() {
    llr_io::sys::require_root();
    let topo = Topology::with_queues("llrm4", 4).expect("topology");
    let tmp = TempDir::new("mq4");
    let cfg = config(tmp.join("ctl.sock"), vec![]);
    let running = topo
        .router
        .run(move || Router::start(cfg, StartOptions::default()))
        .expect("enter the router namespace")
        .expect("router starts");
    assert!(running.wait_ready(Duration::from_secs(30)), "worker runs");
    let dp = running.control().datapath();
    let queues: Vec<u32> = dp.ports.iter().map(|p| p.rx_queues).collect();
    assert_eq!(queues, [4, 4], "every active queue has sockets: {dp:?}");
    let served: Vec<&[u32]> = dp.ports.iter().map(|p| p.queues.as_slice()).collect();
    assert_eq!(
        served,
        [[0, 1, 2, 3], [0, 1, 2, 3]],
        "and says which: {dp:?}"
    );
    assert!(
        running.summary().contains("veth-rin: ") && running.summary().contains("4 rx queues"),
        "the start line names the queues: {}",
        running.summary()
    );

    let v4 = sink_socket(&topo, "0.0.0.0:9000", 200);
    let want = FLOWS as usize * PER_FLOW as usize;
    let got4 = receive(v4, want);
    let socks: Vec<UdpSocket> = (0..FLOWS)
        .map(|_| {
            topo.gen
                .run(|| UdpSocket::bind("0.0.0.0:0"))
                .unwrap()
                .unwrap()
        })
        .collect();
    send_flows(
        &socks,
        format!("{}:9000", addr::SINK_V4).parse().unwrap(),
        || {},
    );
    check_flows("IPv4 over 4 queues", &got4.join().unwrap());
    let tcp4 = tcp_intact(
        &topo,
        "0.0.0.0:9100",
        format!("{}:9100", addr::SINK_V4).parse().unwrap(),
        1 << 20,
    );
    let tcp6 = tcp_intact(
        &topo,
        "[::]:9101",
        format!("[{}]:9101", addr::SINK_V6).parse().unwrap(),
        1 << 20,
    );
    let per_queue = xdp_redirects_per_queue(&topo.router, addr::RTR_IN_IF);
    let rep = running.stop().expect("report");
    eprintln!("{}", rep.worker);
    assert!(tcp4 && tcp6, "1 MB TCP intact: v4 {tcp4}, v6 {tcp6}");
    assert!(
        per_queue.iter().filter(|&&n| n > 0).count() >= 2,
        "the sender spread the flows over several queues (else this test shows nothing): {per_queue:?}"
    );
    for (name, c) in &rep.classifier {
        assert_eq!(c.no_socket, 0, "{name}: no frame found no socket");
    }
    assert_eq!(xdp_attached(&topo), 0, "XDP detached");
}

/// Starts a router with `cfg` in `topo`'s router namespace and returns the configuration error
/// it was refused with (panics if it started or failed otherwise).
fn refused(topo: &Topology, cfg: RouterConfig) -> String {
    let r = topo
        .router
        .run(move || Router::start(cfg, StartOptions::default()).map(|_| ()))
        .expect("enter the router namespace");
    match r {
        Err(RouterError::Config(e)) => e.to_string(),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn more_workers_than_queues_is_refused_naming_cores() {
    llr_io::sys::require_root();
    let topo = Topology::new("llrmx").expect("topology");
    let tmp = TempDir::new("mx");
    let s = refused(&topo, config(tmp.join("ctl.sock"), vec![0, 1]));
    assert!(
        s.starts_with("cores: veth-rin has 1 active rx queue; 2 workers need one rx queue each"),
        "{s}"
    );
    assert_eq!(xdp_attached(&topo), 0, "nothing attached");
    assert!(!tmp.join("ctl.sock").exists(), "no control socket left");
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn active_queues_count_not_allocated_ones() {
    llr_io::sys::require_root();
    // Two queues allocated, one in use: a socket may only bind to the one in use.
    let topo = Topology::with_queues("llrma", 2).expect("topology");
    for dev in [addr::RTR_IN_IF, addr::RTR_OUT_IF] {
        let o = topo
            .router
            .exec(&["ethtool", "-L", dev, "rx", "1", "tx", "1"])
            .unwrap();
        assert!(o.status.success(), "ethtool -L {dev}: {o:?}");
    }
    let tmp = TempDir::new("ma");
    let s = refused(&topo, config(tmp.join("ctl.sock"), vec![0, 1]));
    assert!(
        s.starts_with("cores: veth-rin has 1 active rx queue;") && s.contains("ethtool -L"),
        "{s}"
    );
    assert_eq!(xdp_attached(&topo), 0, "nothing attached");
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn an_mtu_larger_than_the_router_carries_is_refused_at_start() {
    llr_io::sys::require_root();
    let topo = Topology::new("llrmtu").expect("topology");
    // MTU 9000 is carried (multi-buffer, `router_hosts`); one byte more and frames could
    // exceed the classifier's and the parser's limit: refused up front, not dropped later.
    for (ns, dev) in [(&topo.gen, addr::GEN_IF), (&topo.router, addr::RTR_IN_IF)] {
        ns.ip(&["link", "set", "dev", dev, "mtu", "9001"]).unwrap();
    }
    let tmp = TempDir::new("mtu");
    let s = refused(&topo, config(tmp.join("ctl.sock"), vec![]));
    assert!(
        s.starts_with(
            "interfaces: veth-rin has MTU 9001; llrouter carries frames of up to 9018 bytes"
        ) && s.contains("ip link set veth-rin mtu 9000"),
        "{s}"
    );
    assert_eq!(xdp_attached(&topo), 0, "nothing attached");
}
