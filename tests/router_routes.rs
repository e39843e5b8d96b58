//! Routes changed with `ip route` in the router namespace steer the live router's traffic
//! (root; skipped otherwise). Probes gen → sink (10.71.2.1:9000) go through four phases:
//! 1. the connected route: every probe reaches the sink;
//! 2. a more specific `10.71.2.1/32 via 10.71.1.1 dev veth-rin` (back towards the gen): the
//!    probes leave the router on veth-rin, seen on the gen veth with TTL 63 (forwarded), none at
//!    the sink;
//! 3. that route replaced by `blackhole 10.71.2.1/32`: the forwarder drops the probes silently
//!    (drop `blackhole`, no ICMP); none anywhere;
//! 4. the blackhole deleted: forwarding to the sink resumes, every probe arrives.

mod common;
use common::{topology, RouterThread, TempDir};

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llr_traffic::netns::addr;

/// A raw AF_PACKET socket receiving IPv4 frames on `ifindex`.
struct RawRx(i32);

impl RawRx {
    fn open(ifindex: u32) -> std::io::Result<RawRx> {
        let proto = (libc::ETH_P_IP as u16).to_be();
        // SAFETY: plain socket(2) call.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = RawRx(fd);
        // SAFETY: sockaddr_ll and timeval are plain data passed with their exact sizes.
        unsafe {
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = proto;
            sll.sll_ifindex = ifindex as i32;
            if libc::bind(
                fd,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 100_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
        }
        Ok(s)
    }

    fn recv(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: buf is a live buffer of buf.len() bytes.
        let n = unsafe { libc::recv(self.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        (n > 0).then_some(n as usize)
    }
}

impl Drop for RawRx {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.0) };
    }
}

/// The router's configuration: ll-wfq over two classes, with `extra` top-level settings.
fn config(extra: &str) -> String {
    format!(
        r#"
interfaces = ["veth-rin", "veth-rout"]
strategy = "ll-wfq"
{extra}
[control]
socket = "CTL"
[[classes]]
name = "rt"
[[classes]]
name = "be"
"#
    )
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn ip_route_changes_steer_live_traffic() {
    llr_io::sys::require_root();
    let topo = topology("llrrt");
    let tmp = TempDir::new("routes");
    let cfg = tmp.router_config(&config("route-refresh-ms = 100"));
    let router = RouterThread::start(&topo, cfg);

    // counters: probes at the sink, forwarded probes (TTL 63) seen back on the gen veth
    let at_sink = Arc::new(AtomicU64::new(0));
    let at_gen = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sink = topo
        .sink
        .run(|| UdpSocket::bind("0.0.0.0:9000"))
        .unwrap()
        .unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let gen_if = topo.gen.ifindex(addr::GEN_IF).unwrap();
    let tap = topo.gen.run(move || RawRx::open(gen_if)).unwrap().unwrap();
    let (c1, d1) = (at_sink.clone(), done.clone());
    let t_sink = std::thread::spawn(move || {
        let mut b = [0u8; 64];
        while !d1.load(Ordering::Relaxed) {
            if sink.recv(&mut b).is_ok() {
                c1.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let (c2, d2) = (at_gen.clone(), done.clone());
    let sink_oct: [u8; 4] = addr::SINK_V4
        .parse::<std::net::Ipv4Addr>()
        .unwrap()
        .octets();
    let t_tap = std::thread::spawn(move || {
        let mut b = [0u8; 256];
        while !d2.load(Ordering::Relaxed) {
            if let Some(n) = tap.recv(&mut b) {
                // IPv4 from the router, TTL 63, to the sink, UDP port 9000
                let ip = &b[14..n];
                if ip.len() >= 24
                    && ip[8] == 63
                    && ip[9] == 17
                    && ip[16..20] == sink_oct
                    && ip[22..24] == 9000u16.to_be_bytes()
                {
                    c2.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    let gen = topo
        .gen
        .run(|| UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    let dst = SocketAddr::new(addr::SINK_V4.parse().unwrap(), 9000);
    const N: u64 = 50;
    // Sends N probes and returns (at sink, at gen) deltas once they settle (bounded).
    let phase = || {
        let (s0, g0) = (
            at_sink.load(Ordering::Relaxed),
            at_gen.load(Ordering::Relaxed),
        );
        for i in 0..N {
            gen.send_to(&i.to_be_bytes(), dst).unwrap();
            std::thread::sleep(Duration::from_micros(300));
        }
        let t0 = Instant::now();
        let mut last = (u64::MAX, u64::MAX);
        loop {
            std::thread::sleep(Duration::from_millis(150));
            let now = (
                at_sink.load(Ordering::Relaxed) - s0,
                at_gen.load(Ordering::Relaxed) - g0,
            );
            if now == last && (now.0 + now.1 >= N || t0.elapsed() > Duration::from_millis(600))
                || t0.elapsed() > Duration::from_secs(3)
            {
                return now;
            }
            last = now;
        }
    };
    let settle = || std::thread::sleep(Duration::from_millis(300)); // mirror: events in ms
    let host = format!("{}/32", addr::SINK_V4);

    let p1 = phase();
    topo.router
        .ip(&[
            "route",
            "add",
            &host,
            "via",
            addr::GEN_V4,
            "dev",
            addr::RTR_IN_IF,
        ])
        .unwrap();
    settle();
    let p2 = phase();
    topo.router
        .ip(&["route", "replace", "blackhole", &host])
        .unwrap();
    settle();
    let p3 = phase();
    topo.router
        .ip(&["route", "del", "blackhole", &host])
        .unwrap();
    settle();
    let p4 = phase();

    done.store(true, Ordering::Relaxed);
    t_sink.join().unwrap();
    t_tap.join().unwrap();
    let rep = router.finish().unwrap().expect("report");
    eprintln!("{}", rep.worker);
    eprintln!("phases (sink, back at gen): {p1:?} {p2:?} {p3:?} {p4:?}");
    let dropped = |n: &str| common::count(&rep.worker.drop, n);
    assert_eq!(p1, (N, 0), "connected route: all at the sink");
    assert_eq!(p2, (0, N), "/32 via the gen: all sent back out of veth-rin");
    assert_eq!(p3, (0, 0), "blackhole: none anywhere");
    assert_eq!(p4, (N, 0), "blackhole removed: all at the sink again");
    assert_eq!(
        dropped("blackhole"),
        N,
        "blackholed probes dropped silently"
    );
    assert_eq!(rep.worker.forwarded.iter().sum::<u64>(), 3 * N);
}

/// With more kernel routes than `max-routes`, the forwarder never serves a partial table: it is
/// marked incomplete (status says so) and every routed packet goes to the kernel, which holds
/// every route and forwards it; once routes are deleted below the limit, llrouter forwards
/// again.
#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn beyond_max_routes_routed_packets_go_to_the_kernel() {
    use llr_ops::ctl::{Command, CtlClient};
    llr_io::sys::require_root();
    let topo = topology("llrmx");
    let tmp = TempDir::new("maxroutes");
    // The connected routes are a handful; 40 more exceed 30.
    let cfg = tmp.router_config(&config("max-routes = 30"));
    let router = RouterThread::start(&topo, cfg);
    let sock = tmp.join("ctl.sock");
    let status = || {
        let mut c = CtlClient::connect(&sock, Duration::from_secs(2)).expect("connect");
        c.call(&Command::Status {})
            .expect("status")
            .into_result()
            .expect("status reply")
    };
    let wait_for = |what: &str, cond: &dyn Fn(&serde_json::Value) -> bool| {
        let t0 = Instant::now();
        loop {
            let v = status();
            if cond(&v) {
                return v;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "{what}: {v}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let v = wait_for("complete at start", &|v| v["routes_incomplete"] == false);
    assert_eq!(v["max_routes"], 30, "{v}");
    let batch: String = (0..40)
        .map(|i| {
            format!(
                "route add 10.200.{i}.0/24 via {} dev veth-rout\n",
                addr::SINK_V4
            )
        })
        .collect();
    let file = tmp.join("routes.batch");
    std::fs::write(&file, &batch).unwrap();
    topo.router
        .ip(&["-batch", &file.display().to_string()])
        .unwrap();
    let v = wait_for("incomplete", &|v| v["routes_incomplete"] == true);
    assert_eq!(
        v["routes"], 30,
        "the forwarder holds exactly the limit: {v}"
    );

    let gen = common::udp_in(&topo.gen, "0.0.0.0:0", 300);
    let sink = common::udp_in(&topo.sink, "0.0.0.0:9000", 300);
    let dst = SocketAddr::new(addr::SINK_V4.parse().unwrap(), 9000);
    const N: usize = 20;
    let probe = || {
        for i in 0..N {
            gen.send_to(&(i as u64).to_be_bytes(), dst).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut b = [0u8; 64];
        (0..N).filter(|_| sink.recv(&mut b).is_ok()).count()
    };
    // Incomplete: the kernel forwards them (all arrive), llrouter forwards none.
    assert_eq!(probe(), N, "the kernel forwards what llrouter hands it");

    let del: String = (0..35)
        .map(|i| format!("route del 10.200.{i}.0/24\n"))
        .collect();
    std::fs::write(&file, &del).unwrap();
    topo.router
        .ip(&["-batch", &file.display().to_string()])
        .unwrap();
    let v = wait_for("complete again", &|v| v["routes_incomplete"] == false);
    let kept = v["routes"].as_u64().unwrap();
    assert!(kept < 30, "{v}");
    // Complete: llrouter forwards them itself.
    assert_eq!(probe(), N, "llrouter forwards again");

    let rep = router.finish().unwrap().expect("report");
    let passed = common::count(&rep.worker.pass, "kernel_route");
    let forwarded: u64 = rep.worker.forwarded.iter().sum();
    eprintln!("kernel_route passes {passed}, forwarded {forwarded}");
    assert_eq!(
        passed, N as u64,
        "while incomplete, every probe went to the kernel"
    );
    assert_eq!(
        forwarded, N as u64,
        "once complete, llrouter forwarded every probe"
    );
}

/// `ctl -j counters`' kernel-pass count for `reason`.
fn kernel_pass(sock: &std::path::Path, reason: &str) -> u64 {
    let (code, out, err) = common::ctl_bin(sock, &["-j", "counters"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    (v["kernel_pass"].as_array().unwrap().iter())
        .find(|p| p[0] == reason)
        .map_or(0, |p| p[1].as_u64().unwrap())
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn an_address_added_while_running_is_the_kernels_from_xdp_on() {
    llr_io::sys::require_root();
    let topo = topology("llrla");
    let tmp = TempDir::new("localaddr");
    let cfg = tmp.router_config(&config(""));
    let router = RouterThread::start(&topo, cfg);
    let sock = tmp.join("ctl.sock");
    let (v4, v6) = ("10.71.2.200", "fd71:2::200");
    for (fam, a) in [("-4", format!("{v4}/24")), ("-6", format!("{v6}/64"))] {
        let o = topo
            .router
            .command("ip")
            .args([fam, "addr", "add", &a, "dev", addr::RTR_OUT_IF, "nodad"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // The mirror sees the address at once; the classifiers within the second after.
    std::thread::sleep(Duration::from_millis(2500));
    let (x0, w0) = (
        kernel_pass(&sock, "local"),
        kernel_pass(&sock, "worker_local"),
    );
    let s4 = topo
        .gen
        .run(|| UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    let s6 = topo.gen.run(|| UdpSocket::bind("[::]:0")).unwrap().unwrap();
    for _ in 0..10 {
        s4.send_to(b"to the router", (v4, 9)).unwrap();
        s6.send_to(b"to the router", (v6, 9)).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (x1, w1) = (
        kernel_pass(&sock, "local"),
        kernel_pass(&sock, "worker_local"),
    );
    router.finish().unwrap();
    assert!(
        x1 - x0 >= 20,
        "the classifier handed them to the kernel: {x0} -> {x1}"
    );
    assert_eq!(w1, w0, "none went through a worker and the punt device");
}
