//! gen ns → router ns (llrouter, in-process) → sink ns over veth (root; skipped otherwise):
//! forwarded with TTL decremented and valid checksums (the sink's kernel accepts the UDP
//! datagrams and reports the TTL), DSCP EF and rule-matched traffic served from the RT ring,
//! the rest from BE; ping to the router answered by its kernel; nothing left attached. IPv6:
//! datagrams arrive with the hop limit decremented once and a valid UDP checksum (the sink's
//! kernel verifies it; IPv6 UDP checksums are mandatory), DSCP EF through the RT ring.

mod common;
use common::{topology, xdp_attached, RouterThread, TempDir};

use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use llr_traffic::netns::addr;

const CONFIG: &str = r#"
interfaces = ["veth-rin", "veth-rout"]
strategy = "ll-wfq"
wake = "interrupt"
route-refresh-ms = 100
tx-hold-us = 0
[control]
socket = "CTL"
[[classes]]
name = "rt"
[[classes]]
name = "be"
[[rules]]
class = "rt"
dscp = 46
[[rules]]
class = "rt"
proto = "udp"
dst_port = "5000-5010"
"#;

fn setopt(fd: i32, level: i32, opt: i32, v: i32) {
    llr_io::sys::setsockopt_int(fd, level, opt, v).unwrap();
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn forwards_classifies_and_cleans_up() {
    llr_io::sys::require_root();
    let topo = topology("llrfwd");
    let tmp = TempDir::new("router-test");
    let cfg = tmp.router_config(CONFIG);
    let router = RouterThread::start(&topo, cfg);

    let sink = topo
        .sink
        .run(|| UdpSocket::bind("0.0.0.0:9000"))
        .unwrap()
        .unwrap();
    let sink_rule = topo
        .sink
        .run(|| UdpSocket::bind("0.0.0.0:5005"))
        .unwrap()
        .unwrap();
    for s in [&sink, &sink_rule] {
        setopt(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_RECVTTL, 1);
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
    }
    let gen = topo
        .gen
        .run(|| UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    let sink_ip = addr::SINK_V4.parse().unwrap();
    let (n_ef, n_rule, n_be) = (100u64, 50u64, 150u64);
    let reader = |s: UdpSocket, want: u64| {
        std::thread::spawn(move || {
            let mut got = 0;
            let mut ttls = Vec::new();
            let t0 = Instant::now();
            while got < want && t0.elapsed() < Duration::from_secs(4) {
                if let Some(ttl) = recv_ttl(&s) {
                    got += 1;
                    ttls.push(ttl);
                }
            }
            (got, ttls)
        })
    };
    let r1 = reader(sink, n_ef + n_be);
    let r2 = reader(sink_rule, n_rule);
    let send = |n: u64, port: u16| {
        for i in 0..n {
            gen.send_to(&i.to_be_bytes(), SocketAddrV4::new(sink_ip, port))
                .unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    setopt(gen.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, 46 << 2);
    send(n_ef, 9000);
    setopt(gen.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, 0);
    send(n_rule, 5005);
    send(n_be, 9000);
    // ping to the router: answered by the router's kernel (XDP_PASS for local addresses)
    let ping = topo
        .gen
        .exec(&["ping", "-c", "2", "-W", "1", "-i", "0.2", addr::RTR_IN_V4]);
    let (got, ttls) = r1.join().unwrap();
    let (got_rule, _) = r2.join().unwrap();
    let rep = router.finish().unwrap().expect("report");
    eprintln!("{}", rep.worker);
    eprintln!("{:?}", rep.classifier);

    assert!(ping.is_ok(), "ping to the router: {ping:?}");
    assert_eq!(
        got,
        n_ef + n_be,
        "datagrams to 9000 arrived (valid checksums)"
    );
    assert_eq!(got_rule, n_rule, "rule-matched datagrams arrived");
    assert!(
        ttls.iter().all(|&t| t == 63),
        "TTL decremented once: {ttls:?}"
    );
    assert_eq!(rep.worker.rings, vec!["rt", "be"]);
    assert_eq!(
        rep.worker.forwarded[0],
        n_ef + n_rule,
        "EF + rule-matched in RT"
    );
    assert_eq!(rep.worker.forwarded[1], n_be, "the rest in BE");
    // tx-hold-us = 0: every RT grant ends in a transmit flush; a BE grant only
    // once 16 frames wait (the worker's flush when it runs out of work is nobody's grant).
    assert_eq!(
        rep.worker.flushes[0], rep.worker.grants[0],
        "every RT grant flushed"
    );
    assert!(
        rep.worker.flushes[1] < rep.worker.grants[1] / 2,
        "BE grants of a frame or two wait for the batch: {:?} flushes of {:?} grants",
        rep.worker.flushes,
        rep.worker.grants
    );
    assert_eq!(xdp_attached(&topo), 0, "XDP detached");
}

/// Receives one datagram and returns its IP TTL (IP_RECVTTL control message).
fn recv_ttl(s: &UdpSocket) -> Option<u8> {
    recv_cmsg_u8(s, libc::IPPROTO_IP, libc::IP_TTL)
}

/// Receives one datagram and returns the `i32` control message `(level, ty)` as a byte
/// (`Some(0)` when the message is absent, `None` when nothing could be received).
fn recv_cmsg_u8(s: &UdpSocket, level: i32, ty: i32) -> Option<u8> {
    let mut buf = [0u8; 256];
    let mut cbuf = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below refers to a live local buffer with
    // the length given, for the duration of recvmsg.
    unsafe {
        let mut m: libc::msghdr = std::mem::zeroed();
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf.as_mut_ptr().cast();
        m.msg_controllen = std::mem::size_of_val(&cbuf);
        if libc::recvmsg(s.as_raw_fd(), &mut m, 0) < 0 {
            return None;
        }
        let mut c = libc::CMSG_FIRSTHDR(&m);
        while !c.is_null() {
            if (*c).cmsg_level == level && (*c).cmsg_type == ty {
                return Some(*(libc::CMSG_DATA(c) as *const i32) as u8);
            }
            c = libc::CMSG_NXTHDR(&m, c);
        }
    }
    Some(0)
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn forwards_ipv6_with_hop_limit_and_ef_through_rt() {
    llr_io::sys::require_root();
    let topo = topology("llrfwd6");
    let tmp = TempDir::new("router-test6");
    let cfg = tmp.router_config(CONFIG);
    let router = RouterThread::start(&topo, cfg);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let sink_ip: std::net::Ipv6Addr = addr::SINK_V6.parse().unwrap();
        let sink = topo
            .sink
            .run(|| UdpSocket::bind("[::]:9000"))
            .unwrap()
            .unwrap();
        setopt(
            sink.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_RECVHOPLIMIT,
            1,
        );
        sink.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let gen = topo.gen.run(|| UdpSocket::bind("[::]:0")).unwrap().unwrap();
        let (n_ef, n_be) = (100u64, 150u64);
        let r = std::thread::spawn(move || {
            let (mut got, mut hops) = (0u64, Vec::new());
            let t0 = Instant::now();
            while got < n_ef + n_be && t0.elapsed() < Duration::from_secs(5) {
                if let Some(h) = recv_hop_limit(&sink) {
                    got += 1;
                    hops.push(h);
                }
            }
            (got, hops)
        });
        let dst = std::net::SocketAddrV6::new(sink_ip, 9000, 0, 0);
        setopt(
            gen.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            46 << 2,
        );
        for i in 0..n_ef {
            gen.send_to(&i.to_be_bytes(), dst).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
        setopt(gen.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS, 0);
        for i in 0..n_be {
            gen.send_to(&i.to_be_bytes(), dst).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
        let (got, hops) = r.join().unwrap();
        (got, hops, n_ef, n_be)
    }));
    let rep = router.finish();
    let (got, hops, n_ef, n_be) = result.unwrap_or_else(|e| std::panic::resume_unwind(e));
    let rep = rep.unwrap().expect("report");
    eprintln!("{}", rep.worker);
    assert_eq!(
        got,
        n_ef + n_be,
        "every IPv6 datagram arrived (valid UDP checksum)"
    );
    assert!(
        hops.iter().all(|&h| h == 63),
        "hop limit decremented once: {hops:?}"
    );
    assert_eq!(rep.worker.forwarded[0], n_ef, "EF over IPv6 through RT");
    assert_eq!(rep.worker.forwarded[1], n_be, "the rest through BE");
}

/// Receives one datagram and returns its IPv6 hop limit (IPV6_RECVHOPLIMIT control message).
fn recv_hop_limit(s: &UdpSocket) -> Option<u8> {
    recv_cmsg_u8(s, libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT)
}
