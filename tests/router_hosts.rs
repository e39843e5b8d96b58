//! Ordinary hosts through llrouter (root; fails under `CI=true` if it cannot run): plain UDP and
//! TCP sockets with the veth defaults (transmit checksum offload on, so frames reach the router
//! with *partial* L4 checksums), IPv4 and IPv6, and what a router owes the hosts around it
//! (RFC 1812 / RFC 4443): time exceeded, unreachable, fragmentation needed / packet too big,
//! fragmentation of non-DF packets, path-MTU discovery, and frames for the kernel reaching it.
//!
//! The router namespace runs at the *default* sysctls (IPv4 and IPv6 forwarding off): every
//! answer checked here comes from llrouter, not from the kernel.

mod common;
use common::{count, RouterThread, TempDir};

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use llr_traffic::netns::{addr, Topology};

// Rings of 2048 (not 512): the UDP checks count every datagram, and the unpinned worker in
// interrupt mode, beside another test of this file, may be off its core for longer than 512
// entries last at the bursts' 30 kpps (17 ms).
const CONFIG: &str = r#"
interfaces = ["veth-rin", "veth-rout"]
strategy = "ll-wfq"
wake = "interrupt"
[[classes]]
name = "rt"
budget = 60
[[classes]]
name = "be"
budget = 4
[[rules]]
class = "rt"
proto = "tcp"
dst_port = "5301"
[rings]
rx-size = 2048
fill-size = 4096
[control]
socket = "CTL"
"#;

/// The testbed topology with its hosts at veth defaults (checksum offload on) and the router
/// namespace back at the kernel's default sysctls (no forwarding).
fn hosts(prefix: &str) -> Topology {
    let t = Topology::new(prefix).expect("topology");
    t.router.sysctl("net.ipv4.ip_forward", "0").unwrap();
    t.router
        .sysctl("net.ipv6.conf.all.forwarding", "0")
        .unwrap();
    t
}

fn v4(a: &str) -> IpAddr {
    a.parse().unwrap()
}

/// The wildcard address of `dst`'s family, with `port`.
fn wildcard(dst: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(
        if dst.is_ipv6() {
            v4("::")
        } else {
            v4("0.0.0.0")
        },
        port,
    )
}

/// Sends `n` datagrams of `len` bytes (each stamped with its number) from the gen namespace
/// to `dst:port` and counts the intact ones arriving at the sink.
fn udp_through(t: &Topology, dst: IpAddr, port: u16, n: u32, len: usize) -> u32 {
    let bind = wildcard(dst, port);
    let rx = t.sink.spawn(move || {
        let s = UdpSocket::bind(bind).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        // A 4 MB receive buffer: this test is about checksums, not about a receiver that
        // falls behind while another test shares the CPUs.
        let _ = llr_io::sys::setsockopt_int(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            4 << 20,
        );
        let mut got = 0u32;
        let mut buf = vec![0u8; 65536];
        while let Ok(k) = s.recv(&mut buf) {
            let i = u32::from_be_bytes(buf[..4].try_into().unwrap());
            if k == len
                && buf[4..k]
                    .iter()
                    .enumerate()
                    .all(|(j, &b)| b == pattern(i, j))
            {
                got += 1;
            }
        }
        got
    });
    std::thread::sleep(Duration::from_millis(200));
    t.gen
        .run(move || {
            let s = UdpSocket::bind(wildcard(dst, 0)).unwrap();
            for i in 0..n {
                let mut m = vec![0u8; len];
                m[..4].copy_from_slice(&i.to_be_bytes());
                for (j, b) in m[4..].iter_mut().enumerate() {
                    *b = pattern(i, j);
                }
                s.send_to(&m, SocketAddr::new(dst, port)).unwrap();
                if i % 8 == 7 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        })
        .unwrap();
    rx.join().unwrap().unwrap()
}

fn pattern(i: u32, j: usize) -> u8 {
    (i as usize * 31 + j * 7) as u8
}

/// A TCP transfer of `bytes` from gen to `dst:port`, checked byte for byte at the sink;
/// returns whether it completed intact within `limit`.
fn tcp_through(t: &Topology, dst: IpAddr, port: u16, bytes: usize, limit: Duration) -> bool {
    let bind = wildcard(dst, port);
    let rx = t.sink.spawn(move || {
        let l = TcpListener::bind(bind).unwrap();
        l.set_nonblocking(true).unwrap();
        let t0 = Instant::now();
        let mut s = loop {
            match l.accept() {
                Ok((s, _)) => break s,
                Err(_) if t0.elapsed() < limit => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => return false,
            }
        };
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(limit)).unwrap();
        let mut got = Vec::with_capacity(bytes);
        let mut buf = vec![0u8; 65536];
        while got.len() < bytes {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => got.extend_from_slice(&buf[..k]),
            }
        }
        got.len() == bytes && got.iter().enumerate().all(|(j, &b)| b == pattern(7, j))
    });
    std::thread::sleep(Duration::from_millis(200));
    let sent = t.gen.run(move || {
        let mut s = TcpStream::connect_timeout(&SocketAddr::new(dst, port), limit).ok()?;
        s.set_write_timeout(Some(limit)).unwrap();
        let data: Vec<u8> = (0..bytes).map(|j| pattern(7, j)).collect();
        s.write_all(&data).ok()?;
        s.shutdown(std::net::Shutdown::Write).ok()?;
        Some(())
    });
    let ok = rx.join().unwrap().unwrap();
    ok && sent.unwrap().is_some()
}

/// `netstat`-style counters of a namespace: (UDP InCsumErrors, TCP InCsumErrors).
fn csum_errors(ns: &llr_traffic::netns::Netns) -> (u64, u64) {
    let out = ns.exec(&["cat", "/proc/net/snmp"]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let field = |proto: &str, name: &str| -> u64 {
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(proto)).collect();
        let keys: Vec<&str> = lines[0].split_whitespace().collect();
        let vals: Vec<&str> = lines[1].split_whitespace().collect();
        let i = keys.iter().position(|k| *k == name).unwrap();
        vals[i].parse().unwrap()
    };
    (field("Udp:", "InCsumErrors"), field("Tcp:", "InCsumErrors"))
}

/// Runs `argv` in `ns` and returns its stdout and stderr, whatever its exit status.
fn exec_text(ns: &llr_traffic::netns::Netns, argv: &[&str]) -> String {
    let o = ns.command(argv[0]).args(&argv[1..]).output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn plain_udp_and_tcp_cross_with_partial_checksums() {
    llr_io::sys::require_root();
    let t = hosts("llr-hosts");
    let offload = exec_text(&t.gen, &["ethtool", "-k", addr::GEN_IF]);
    assert!(
        offload.contains("tx-checksumming: on"),
        "the hosts keep veth's checksum offload: {offload}"
    );
    let dir = TempDir::new("hosts");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let sink4 = v4(addr::SINK_V4);
    let sink6 = v4(addr::SINK_V6);
    let n = 2000;
    let udp4 = udp_through(&t, sink4, 5400, n, 200);
    let udp6 = udp_through(&t, sink6, 5401, n, 1200);
    // BE and an RT rule (dst_port 5301 is TCP in the RT class).
    let tcp4 = tcp_through(&t, sink4, 5300, 1 << 20, Duration::from_secs(10));
    let tcp6 = tcp_through(&t, sink6, 5300, 1 << 20, Duration::from_secs(10));
    let tcp4_rt = tcp_through(&t, sink4, 5301, 1 << 20, Duration::from_secs(10));
    let tcp6_rt = tcp_through(&t, sink6, 5301, 1 << 20, Duration::from_secs(10));
    let errors = csum_errors(&t.sink);
    let rep = router.finish().unwrap().expect("report");
    eprintln!("{}", rep.worker);
    assert_eq!((udp4, udp6), (n, n), "every UDP datagram intact (v4, v6)");
    assert!(
        tcp4 && tcp6,
        "1 MB TCP, BE class, intact: v4 {tcp4} v6 {tcp6}"
    );
    assert!(
        tcp4_rt && tcp6_rt,
        "1 MB TCP, RT class, intact: v4 {tcp4_rt} v6 {tcp6_rt}"
    );
    assert_eq!(errors, (0, 0), "no checksum errors at the receiver");
    assert!(
        rep.worker.forwarded[0] > 1000,
        "the RT rule carried the TCP flow on port 5301: {:?}",
        rep.worker.forwarded
    );
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn icmp_errors_come_from_llrouter() {
    llr_io::sys::require_root();
    let t = hosts("llr-icmp");
    // A 1400-byte link towards the sink, a route to nowhere and the kinds of non-unicast routes.
    t.router
        .ip(&["link", "set", addr::RTR_OUT_IF, "mtu", "1400"])
        .unwrap();
    t.router
        .ip(&["route", "add", "unreachable", "10.72.0.0/16"])
        .unwrap();
    t.router
        .ip(&["route", "add", "prohibit", "10.73.0.0/16"])
        .unwrap();
    t.router
        .ip(&["route", "add", "blackhole", "10.74.0.0/16"])
        .unwrap();
    let dir = TempDir::new("icmp");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ping = |args: &[&str]| {
        let mut argv = vec!["ping", "-n", "-c", "1", "-W", "2"];
        argv.extend_from_slice(args);
        exec_text(&t.gen, &argv)
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["-t", "1", addr::SINK_V4],
            "From 10.71.1.254 icmp_seq=1 Time to live exceeded",
        ),
        (
            vec!["-6", "-t", "1", addr::SINK_V6],
            "From fd71:1::fe icmp_seq=1 Time exceeded: Hop limit",
        ),
        (
            vec!["-M", "do", "-s", "1450", addr::SINK_V4],
            "Frag needed and DF set (mtu = 1400)",
        ),
        (
            vec!["-6", "-M", "do", "-s", "1450", addr::SINK_V6],
            "Packet too big: mtu=1400",
        ),
        (vec!["10.99.0.1"], "Destination Net Unreachable"),
        (vec!["-6", "fd99::1"], "Destination unreachable: No route"),
        (vec!["10.72.0.1"], "Destination Host Unreachable"),
        (vec!["10.73.0.1"], "Packet filtered"),
    ];
    let mut failures = Vec::new();
    for (args, want) in &cases {
        let out = ping(args);
        if !out.contains(want) {
            failures.push(format!("ping {args:?}: want `{want}`, got:\n{out}"));
        }
    }
    // Blackhole: silence (no answer at all within the wait).
    let out = ping(&["10.74.0.1"]);
    if out.contains("From ") {
        failures.push(format!("blackhole answered: {out}"));
    }
    // The MTU follows the kernel at run time.
    t.router
        .ip(&["link", "set", addr::RTR_OUT_IF, "mtu", "1300"])
        .unwrap();
    let t0 = Instant::now();
    let mut out = String::new();
    while t0.elapsed() < Duration::from_secs(5) {
        out = ping(&["-M", "do", "-s", "1350", addr::SINK_V4]);
        if out.contains("mtu = 1300") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if !out.contains("mtu = 1300") {
        failures.push(format!("MTU change not followed: {out}"));
    }
    let rep = router.finish().unwrap().expect("report");
    eprintln!("{}", rep.worker);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(count(&rep.worker.drop, "blackhole"), 1);
    assert!(count(&rep.worker.events, "icmp_sent_time_exceeded") >= 2);
    assert!(count(&rep.worker.events, "icmp_sent_too_big") >= 2);
    assert!(count(&rep.worker.events, "icmp_sent_unreachable") >= 4);
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn path_mtu_discovery_fragmentation_and_tracepath() {
    llr_io::sys::require_root();
    let t = hosts("llr-pmtu");
    // Only the router's egress is 1400: the sink still advertises a 1460-byte MSS, so the
    // sender must learn the path MTU from llrouter's "fragmentation needed" / "packet too big".
    t.router
        .ip(&["link", "set", addr::RTR_OUT_IF, "mtu", "1400"])
        .unwrap();
    let dir = TempDir::new("pmtu");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    // First, before the host learns the path MTU (it would fragment itself afterwards):
    // Non-DF UDP of 1500 bytes on the wire: fragmented by llrouter, reassembled by the sink.
    let frag = t.sink.spawn(|| {
        let s = UdpSocket::bind("0.0.0.0:5410").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = vec![0u8; 4096];
        let mut whole = 0;
        while let Ok(k) = s.recv(&mut buf) {
            if k == 1472 && buf[..k].iter().enumerate().all(|(j, &b)| b == j as u8) {
                whole += 1;
            }
        }
        whole
    });
    std::thread::sleep(Duration::from_millis(200));
    t.gen
        .run(|| {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            let (fd, dont) = (s.as_raw_fd(), libc::IP_PMTUDISC_DONT);
            llr_io::sys::setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, dont).unwrap();
            let m: Vec<u8> = (0..1472).map(|j| j as u8).collect();
            for _ in 0..10 {
                s.send_to(&m, (addr::SINK_V4, 5410)).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .unwrap();
    let whole = frag.join().unwrap().unwrap();
    // A 1 MB upload into the smaller link: the sender learns 1400 from llrouter's answers.
    let up4 = tcp_through(
        &t,
        v4(addr::SINK_V4),
        5310,
        1 << 20,
        Duration::from_secs(15),
    );
    let up6 = tcp_through(
        &t,
        v4(addr::SINK_V6),
        5310,
        1 << 20,
        Duration::from_secs(15),
    );
    // tracepath lists the router as hop 1 and finds the path MTU.
    let tp4 = exec_text(&t.gen, &["tracepath", "-n", "-m", "4", addr::SINK_V4]);
    let tp6 = exec_text(&t.gen, &["tracepath", "-6", "-n", "-m", "4", addr::SINK_V6]);
    let rep = router.finish().unwrap().expect("report");
    eprintln!("{}\n{tp4}\n{tp6}", rep.worker);
    assert!(up4, "1 MB TCP upload into a 1400-byte link (IPv4 PMTUD)");
    assert!(up6, "1 MB TCP upload into a 1400-byte link (IPv6 PMTUD)");
    assert_eq!(whole, 10, "non-DF 1500-byte datagrams arrive whole");
    assert!(count(&rep.worker.events, "fragments_sent") >= 20);
    for (tp, hop) in [(&tp4, addr::RTR_IN_V4), (&tp6, addr::RTR_IN_V6)] {
        assert!(
            tp.lines()
                .any(|l| l.trim_start().starts_with("1:") && l.contains(hop)),
            "tracepath shows the router as hop 1:\n{tp}"
        );
        assert!(
            tp.contains("pmtu 1400"),
            "tracepath finds the path MTU:\n{tp}"
        );
    }
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn frames_for_the_kernel_reach_it_through_the_punt_device() {
    llr_io::sys::require_root();
    let t = hosts("llr-punt");
    // The kernel forwards what llrouter punts (IP options are the kernel's to process).
    t.router.sysctl("net.ipv4.ip_forward", "1").unwrap();
    // A route through an interface llrouter does not serve (one end of a veth pair inside the
    // router namespace, its neighbour fixed): the kernel's route.
    t.router
        .ip(&[
            "link", "add", "llr-k0", "type", "veth", "peer", "name", "llr-k1",
        ])
        .unwrap();
    for l in ["llr-k0", "llr-k1"] {
        t.router.ip(&["link", "set", l, "up"]).unwrap();
    }
    t.router
        .ip(&["route", "add", "10.75.0.0/16", "dev", "llr-k0"])
        .unwrap();
    t.router
        .ip(&[
            "neigh",
            "add",
            "10.75.0.9",
            "lladdr",
            "02:00:00:00:75:09",
            "dev",
            "llr-k0",
            "nud",
            "permanent",
        ])
        .unwrap();
    let dir = TempDir::new("punt");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let punt = exec_text(&t.router, &["ip", "link", "show", "llr-punt"]);
    assert!(punt.contains("llr-punt"), "punt device exists: {punt}");
    // No address of its own (its address events would make the route mirror re-dump).
    std::thread::sleep(Duration::from_millis(1500));
    let addrs = exec_text(&t.router, &["ip", "addr", "show", "dev", "llr-punt"]);
    assert!(
        !addrs.contains("inet"),
        "punt device has no addresses: {addrs}"
    );
    let rx = t.sink.spawn(|| {
        let s = UdpSocket::bind("0.0.0.0:5420").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let mut n = 0;
        let mut buf = [0u8; 64];
        while s.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    });
    std::thread::sleep(Duration::from_millis(200));
    t.gen
        .run(|| {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            // Four bytes of options: NOP NOP NOP EOL.
            let opts = [1u8, 1, 1, 0];
            // SAFETY: a valid socket and a 4-byte buffer that outlives the call.
            let r = unsafe {
                libc::setsockopt(
                    s.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_OPTIONS,
                    opts.as_ptr().cast(),
                    opts.len() as libc::socklen_t,
                )
            };
            assert_eq!(r, 0);
            for _ in 0..20 {
                s.send_to(b"options", (addr::SINK_V4, 5420)).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .unwrap();
    let got = rx.join().unwrap().unwrap();
    // 15 datagrams to that route: the kernel transmits them on llr-k0.
    let kernel_if_tx = || -> u64 {
        let out = t
            .router
            .ip(&["-j", "-s", "link", "show", "llr-k0"])
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["stats64"]["tx"]["packets"].as_u64().unwrap()
    };
    let before = kernel_if_tx();
    t.gen
        .run(|| {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            for _ in 0..15 {
                s.send_to(b"kernel route", ("10.75.0.9", 5421)).unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let to_kernel_if = kernel_if_tx() - before;
    let rep = router.finish().unwrap().expect("report");
    eprintln!("{}", rep.worker);
    assert_eq!(count(&rep.worker.pass, "ip_options"), 20);
    assert_eq!(count(&rep.worker.pass, "kernel_route"), 15);
    assert_eq!(count(&rep.worker.events, "punted"), 35);
    assert_eq!(
        got, 20,
        "the kernel forwarded every punted packet with options"
    );
    // llr-k0 may also send an IPv6 router solicitation of its own in that window.
    assert!(
        (15..=17).contains(&to_kernel_if),
        "the kernel routed every punted packet out of its own interface: {to_kernel_if}"
    );
    let gone = exec_text(&t.router, &["ip", "link", "show", "llr-punt"]);
    assert!(
        !gone.contains("state"),
        "the punt device is gone with the router: {gone}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn first_packets_to_an_unresolved_neighbour_wait_for_it() {
    llr_io::sys::require_root();
    let t = hosts("llr-neigh");
    // The testbed fixes every neighbour; this router must find the sink's address itself.
    t.router
        .ip(&["neigh", "del", addr::SINK_V4, "dev", addr::RTR_OUT_IF])
        .unwrap();
    let dir = TempDir::new("neigh");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let n: u32 = 40;
    let rx = t.sink.spawn(move || {
        let s = UdpSocket::bind("0.0.0.0:5430").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(3000)))
            .unwrap();
        let mut seqs = Vec::new();
        let mut buf = [0u8; 64];
        while let Ok(k) = s.recv(&mut buf) {
            if k == 4 {
                seqs.push(u32::from_be_bytes(buf[..4].try_into().unwrap()));
            }
            if seqs.len() == n as usize {
                break;
            }
        }
        seqs
    });
    std::thread::sleep(Duration::from_millis(200));
    // A burst, faster than ARP resolves.
    t.gen
        .run(move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            for i in 0..n {
                s.send_to(&i.to_be_bytes(), (addr::SINK_V4, 5430)).unwrap();
            }
        })
        .unwrap();
    let seqs = rx.join().unwrap().unwrap();
    let rep = router.finish().unwrap().expect("report");
    let held = count(&rep.worker.events, "neighbor_held");
    let released = count(&rep.worker.events, "neighbor_released");
    eprintln!("{}", rep.worker);
    assert!(
        held > 0,
        "the burst met an unresolved neighbour (else this test shows nothing)"
    );
    assert_eq!(count(&rep.worker.drop, "no_neighbor"), 0, "none dropped");
    assert_eq!(released, held, "every held frame was sent");
    assert_eq!(seqs, (0..n).collect::<Vec<u32>>(), "all arrived, in order");
}

/// Sets the MTU of every link of `t` (both ends) to `mtu`, and the router's egress to
/// `egress`.
fn set_mtus(t: &Topology, mtu: u32, egress: u32) {
    let m = mtu.to_string();
    let e = egress.to_string();
    t.gen.ip(&["link", "set", addr::GEN_IF, "mtu", &m]).unwrap();
    t.router
        .ip(&["link", "set", addr::RTR_IN_IF, "mtu", &m])
        .unwrap();
    t.router
        .ip(&["link", "set", addr::RTR_OUT_IF, "mtu", &e])
        .unwrap();
    t.sink
        .ip(&["link", "set", addr::SINK_IF, "mtu", &e])
        .unwrap();
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn jumbo_frames_cross_whole_in_both_families() {
    llr_io::sys::require_root();
    let t = hosts("llr-jumbo");
    set_mtus(&t, 9000, 9000);
    let dir = TempDir::new("jumbo");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let sock = dir.join("ctl.sock");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["ctl", "--socket", &sock.display().to_string(), "status"])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        status.contains("multi-buffer") && status.contains("MTU 9000"),
        "the status names the multi-buffer datapath: {status}"
    );
    let ping = |args: &[&str]| {
        let mut argv = vec!["ping", "-n", "-c", "2", "-i", "0.3", "-W", "2"];
        argv.extend_from_slice(args);
        exec_text(&t.gen, &argv)
    };
    let mut failures = Vec::new();
    // 8000-byte payloads with DF (IPv6 never fragments on the way), and the largest frame.
    for args in [
        vec!["-M", "do", "-s", "8000", addr::SINK_V4],
        vec!["-6", "-M", "do", "-s", "8000", addr::SINK_V6],
        vec!["-M", "do", "-s", "8972", addr::SINK_V4],
        vec!["-6", "-M", "do", "-s", "8952", addr::SINK_V6],
    ] {
        let out = ping(&args);
        if !out.contains(" 0% packet loss") {
            failures.push(format!("ping {args:?}:\n{out}"));
        }
    }
    // 1 MB over TCP, both families: with MTU 9000 end to end the segments are ~8960 bytes.
    // Then 48 MB, many times the Tx ring (1024 descriptors, ~340 three-chunk frames): a Tx
    // path that leaves a ring's worth of frames behind stalls there for good. It goes to the
    // RT port (budget 60): grants of 32 frames, ~96 descriptors, which a receive call must
    // read whole, never leaving the last chunks of a frame for the next one.
    for (dst, port, bytes) in [
        (v4(addr::SINK_V4), 5330, 1 << 20),
        (v4(addr::SINK_V6), 5330, 1 << 20),
        (v4(addr::SINK_V4), 5301, 48 << 20),
    ] {
        if !tcp_through(&t, dst, port, bytes, Duration::from_secs(10)) {
            failures.push(format!("TCP {bytes} bytes to {dst} did not arrive intact"));
        }
    }
    let report = router.finish().unwrap().expect("report");
    let ports = &report.worker.ports;
    let multi: u64 = ports.iter().map(|p| p.rx_multi).sum();
    let broken: u64 = ports.iter().map(|p| p.rx_broken).sum();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // 50 MB in ~8960-byte segments is over 5000 jumbo frames, each in 3 chunks.
    assert!(multi > 5000, "frames came in several chunks: {multi}");
    assert_eq!(broken, 0, "no multi-buffer frame was broken");
    assert_eq!(
        count(&report.worker.pass, "non_ip"),
        0,
        "no frame passed for a non-IP one (the tail of a cut frame would)"
    );
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn jumbo_frames_larger_than_the_egress_mtu_get_icmp_or_fragments() {
    llr_io::sys::require_root();
    let t = hosts("llr-jumbo2");
    set_mtus(&t, 9000, 1500);
    let dir = TempDir::new("jumbo2");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ping = |args: &[&str]| {
        let mut argv = vec!["ping", "-n", "-c", "1", "-W", "2"];
        argv.extend_from_slice(args);
        exec_text(&t.gen, &argv)
    };
    let mut failures = Vec::new();
    // In this order: once the host has learnt the path MTU from llrouter's "frag needed" it
    // fragments (or refuses) by itself, and the router would see only small frames.
    for (args, want) in [
        // TTL 1 on a jumbo frame: time exceeded, as for any size.
        (
            vec!["-M", "do", "-t", "1", "-s", "8000", addr::SINK_V4],
            "Time to live exceeded",
        ),
        // Without DF, IPv4 is fragmented by llrouter and reassembled by the sink.
        (
            vec!["-M", "dont", "-s", "8000", addr::SINK_V4],
            "bytes from 10.71.2.1",
        ),
        (
            vec!["-M", "do", "-s", "8000", addr::SINK_V4],
            "Frag needed and DF set (mtu = 1500)",
        ),
        (
            vec!["-6", "-M", "do", "-s", "8000", addr::SINK_V6],
            "Packet too big: mtu=1500",
        ),
    ] {
        let out = ping(&args);
        if !out.contains(want) {
            failures.push(format!("ping {args:?}: want `{want}`, got:\n{out}"));
        }
    }
    router.finish().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
