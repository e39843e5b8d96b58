//! The host's firewall through llrouter (root; fails under `CI=true` if it cannot run): real
//! `nft` and `iptables` rulesets in the router's namespace, plain sockets from the generator
//! namespace to the sink namespace. What the kernel would forbid, llrouter must not forward;
//! what it cannot evaluate it refuses at start, or hands to the kernel when told to.

mod common;
use common::{count, ctl_bin, RouterThread, TempDir, LL_WFQ_CONFIG as CONFIG};

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use llr_traffic::netns::{addr, Netns, Topology};

fn ip(a: &str) -> IpAddr {
    a.parse().unwrap()
}

fn any(dst: IpAddr, port: u16) -> SocketAddr {
    let a = if dst.is_ipv6() {
        ip("::")
    } else {
        ip("0.0.0.0")
    };
    SocketAddr::new(a, port)
}

/// Loads `ruleset` (nft syntax) into `ns`, replacing what was there.
fn nft(ns: &Netns, ruleset: &str) {
    let o = ns
        .command("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(format!("flush ruleset\n{ruleset}").as_bytes())?;
            c.wait_with_output()
        })
        .expect("run nft");
    assert!(
        o.status.success(),
        "nft -f: {}\n{ruleset}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn run(ns: &Netns, argv: &[&str]) {
    let o = ns.command(argv[0]).args(&argv[1..]).output().unwrap();
    assert!(
        o.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Sends `n` datagrams from the generator to `dst:port` and counts those the sink receives.
fn udp_through(t: &Topology, dst: IpAddr, port: u16, n: u32) -> u32 {
    let bind = any(dst, port);
    let rx = t.sink.spawn(move || {
        let s = UdpSocket::bind(bind).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(700)))
            .unwrap();
        let mut got = 0;
        let mut buf = [0u8; 2048];
        while s.recv(&mut buf).is_ok() {
            got += 1;
        }
        got
    });
    std::thread::sleep(Duration::from_millis(150));
    t.gen
        .run(move || {
            let s = UdpSocket::bind(any(dst, 0)).unwrap();
            for i in 0..n {
                s.send_to(&i.to_be_bytes(), SocketAddr::new(dst, port))
                    .unwrap();
                if i % 16 == 15 {
                    std::thread::sleep(Duration::from_micros(300));
                }
            }
        })
        .unwrap();
    rx.join().unwrap().unwrap()
}

/// A TCP connection from `from` to `to_addr:port` in `to` completes and carries a few bytes.
fn tcp_connects(from: &Netns, to: &Netns, to_addr: IpAddr, port: u16) -> bool {
    let bind = any(to_addr, port);
    let l = to.run(move || TcpListener::bind(bind)).unwrap().unwrap();
    l.set_nonblocking(true).unwrap();
    let client = from.spawn(move || {
        use std::io::{Read, Write};
        let mut s =
            TcpStream::connect_timeout(&SocketAddr::new(to_addr, port), Duration::from_secs(2))
                .ok()?;
        s.write_all(b"ping").ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut b = [0u8; 4];
        s.read_exact(&mut b).ok()?;
        Some(b == *b"pong")
    });
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        if let Ok((mut s, _)) = l.accept() {
            use std::io::{Read, Write};
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut b = [0u8; 4];
            if s.read_exact(&mut b).is_ok() {
                let _ = s.write_all(b"pong");
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    client.join().unwrap().unwrap() == Some(true)
}

/// What a connected UDP socket in the generator learns from sending to `dst:port` where
/// nothing listens: `ConnectionRefused` when an ICMP port unreachable came back.
fn udp_answer(t: &Topology, dst: IpAddr, port: u16) -> ErrorKind {
    t.gen
        .run(move || {
            let s = UdpSocket::bind(any(dst, 0)).unwrap();
            s.connect(SocketAddr::new(dst, port)).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut kind = ErrorKind::TimedOut;
            for _ in 0..3 {
                let _ = s.send(b"x");
                let mut b = [0u8; 16];
                match s.recv(&mut b) {
                    Err(e) if e.kind() == ErrorKind::WouldBlock => kind = ErrorKind::TimedOut,
                    Err(e) => return e.kind(),
                    Ok(_) => return ErrorKind::Other,
                }
            }
            kind
        })
        .unwrap()
}

/// How a TCP connect from the generator to `dst:port` ends within 2 s.
fn tcp_answer(t: &Topology, dst: IpAddr, port: u16) -> ErrorKind {
    t.gen
        .run(move || {
            match TcpStream::connect_timeout(&SocketAddr::new(dst, port), Duration::from_secs(2)) {
                Ok(_) => ErrorKind::Other,
                Err(e) => e.kind(),
            }
        })
        .unwrap()
}

/// `ctl show filter -j`: (handle, text, packets) per rule.
fn filter_rows(sock: &std::path::Path) -> Vec<(u64, String, u64)> {
    let (code, out, err) = ctl_bin(sock, &["-j", "show", "filter"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["handle"].as_u64().unwrap(),
                r["text"].as_str().unwrap().to_string(),
                r["packets"].as_u64().unwrap(),
            )
        })
        .collect()
}

const STATELESS: &str = r#"
table inet llrtest {
  chain fw {
    type filter hook forward priority 0; policy accept;
    ip daddr 10.71.2.1 udp dport 7777 drop
    ip6 daddr fd71:2::1 udp dport 7777 drop
    iifname "veth-rin" meta l4proto udp th dport 7780 drop
    ip6 nexthdr udp udp dport 7781 drop
  }
}
"#;

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn stateless_rules_drop_by_address_port_protocol_and_interface() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fws").expect("topology");
    nft(&t.router, STATELESS);
    let (s4, s6) = (ip(addr::SINK_V4), ip(addr::SINK_V6));
    // The reference: the kernel forwarding with the same ruleset.
    // 100 datagrams to each (destination, port): both families, each rule and one port no
    // rule names.
    let probe = || {
        [
            (s4, 7777),
            (s6, 7777),
            (s4, 7778),
            (s6, 7780),
            (s6, 7781),
            (s4, 7781),
        ]
        .map(|(dst, port)| udp_through(&t, dst, port, 100))
    };
    let kernel = probe();
    assert_eq!(kernel, [0, 0, 100, 0, 0, 100], "the kernel's answer");
    let dir = TempDir::new("fw-stateless");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ours = probe();
    let rows = filter_rows(&dir.join("ctl.sock"));
    let (code, counters, err) = ctl_bin(&dir.join("ctl.sock"), &["-j", "counters"]);
    assert_eq!(code, 0, "{err}");
    let m: serde_json::Value = serde_json::from_str(&counters).unwrap();
    let metric: Vec<(u64, u64)> = (m["filter_rules"].as_array().unwrap().iter())
        .map(|r| {
            (
                r["handle"].as_u64().unwrap(),
                r["packets"].as_u64().unwrap(),
            )
        })
        .filter(|&(h, _)| h != 0)
        .collect();
    let rep = router.finish().unwrap().unwrap();
    assert_eq!(ours, kernel, "llrouter against the kernel");
    assert_eq!(
        metric.iter().map(|m| m.1).collect::<Vec<_>>(),
        [100, 100, 100, 100],
        "the metrics' per-rule counts: {metric:?}"
    );
    // llrouter forwarded the allowed ones itself, and dropped the rest itself.
    assert!(
        rep.worker.forwarded.iter().sum::<u64>() >= 200,
        "{}",
        rep.worker
    );
    assert_eq!(count(&rep.worker.drop, "filtered"), 400, "{}", rep.worker);
    let hits: Vec<u64> = rows.iter().filter(|r| r.0 != 0).map(|r| r.2).collect();
    assert_eq!(hits, [100, 100, 100, 100], "{rows:?}");
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn a_set_of_ten_thousand_prefixes_and_a_rule_changed_while_running() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwset").expect("topology");
    // 10 000 /24s in 10.100/16 … 10.139/16, and the sink's /24 among them.
    let mut elems: Vec<String> = (0..10_000u32)
        .map(|i| format!("10.{}.{}.0/24", 100 + i / 250, i % 250))
        .collect();
    elems.push("10.71.2.0/24".into());
    let set = format!(
        "table ip llrtest {{\n set block {{ type ipv4_addr; flags interval; elements = {{ {} }} }}\n \
         chain fw {{ type filter hook forward priority 0; policy accept; }}\n}}\n",
        elems.join(", ")
    );
    nft(&t.router, &set);
    let (s4, s6) = (ip(addr::SINK_V4), ip(addr::SINK_V6));
    let dir = TempDir::new("fw-set");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    assert_eq!(
        udp_through(&t, s4, 7000, 100),
        100,
        "no rule uses the set yet"
    );
    // Added while running: in effect within a second.
    run(
        &t.router,
        &[
            "nft", "add", "rule", "ip", "llrtest", "fw", "ip", "daddr", "@block", "drop",
        ],
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(udp_through(&t, s4, 7000, 100), 0, "the set's rule drops");
    assert_eq!(
        udp_through(&t, s6, 7000, 100),
        100,
        "IPv6 is not in an ip table"
    );
    // An element removed from the set while running.
    run(
        &t.router,
        &[
            "nft",
            "delete",
            "element",
            "ip",
            "llrtest",
            "block",
            "{ 10.71.2.0/24 }",
        ],
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(udp_through(&t, s4, 7000, 100), 100, "the sink left the set");
    // And the whole table removed.
    run(&t.router, &["nft", "delete", "table", "ip", "llrtest"]);
    std::thread::sleep(Duration::from_secs(1));
    let (code, out, _) = ctl_bin(&dir.join("ctl.sock"), &["show", "filter"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("no netfilter chain on the forwarding path"),
        "{out}"
    );
    router.finish().unwrap();
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn reject_is_answered_like_the_kernel_answers_it() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwrej").expect("topology");
    nft(
        &t.router,
        "table inet llrtest {\n chain fw {\n type filter hook forward priority 0;\n \
         udp dport 7790 reject\n udp dport 7791 reject with icmpx type admin-prohibited\n \
         tcp dport 7792 reject with tcp reset\n }\n}\n",
    );
    let (s4, s6) = (ip(addr::SINK_V4), ip(addr::SINK_V6));
    let probe = || {
        let udp =
            [(s4, 7790), (s6, 7790), (s4, 7791), (s6, 7791)].map(|(d, p)| udp_answer(&t, d, p));
        let tcp = [s4, s6].map(|d| tcp_answer(&t, d, 7792));
        (udp, tcp)
    };
    let kernel = probe();
    // The kernel: port unreachable refuses the connection; admin-prohibited is a host
    // unreachable-like error the socket reports as such; the reset refuses the connection
    // at once (without it the connect would time out).
    assert_eq!(kernel.0[0], ErrorKind::ConnectionRefused, "{kernel:?}");
    assert_eq!(kernel.0[1], ErrorKind::ConnectionRefused, "{kernel:?}");
    assert_eq!(kernel.1, [ErrorKind::ConnectionRefused; 2], "{kernel:?}");
    let dir = TempDir::new("fw-reject");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ours = probe();
    let rep = router.finish().unwrap().unwrap();
    assert_eq!(ours, kernel, "llrouter against the kernel");
    assert!(count(&rep.worker.drop, "filtered") >= 6, "{}", rep.worker);
}

const ROUTER_FIREWALL: &str = r#"
table inet llrtest {
  chain fw {
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    ct state invalid drop
    iifname "veth-rin" accept
    meta l4proto { icmp, ipv6-icmp } accept
  }
}
table ip llrnat {
  chain post { type nat hook postrouting priority 100; oifname "veth-rout" masquerade; }
}
"#;

/// Starts the router with [`CONFIG`] in the topology's router namespace and returns the
/// refusal's message (the start must be refused, as a refusal).
fn refused_start(t: &Topology, tag: &str) -> String {
    let dir = TempDir::new(tag);
    let cfg = llr_router::RouterConfig::load(&dir.router_config(CONFIG)).unwrap();
    let err = t
        .router
        .run(move || llr_router::Router::start(cfg, Default::default()).err())
        .unwrap()
        .expect("the start is refused");
    assert!(err.is_refusal(), "{err}");
    err.to_string()
}

/// A stateful firewall with a rule llrouter cannot evaluate (`log`).
const REFUSED_FIREWALL: &str = r#"
table inet llrtest {
  chain fw {
    type filter hook forward priority 0; policy drop;
    ct state established,related accept
    tcp dport 22 log prefix "ssh " accept
    iifname "veth-rin" accept
  }
}
table ip llrnat {
  chain post { type nat hook postrouting priority 100; oifname "veth-rout" masquerade; }
}
"#;

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn a_ruleset_llrouter_cannot_honour_is_refused_naming_the_rule() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwref").expect("topology");
    nft(&t.router, REFUSED_FIREWALL);
    let out = t
        .router
        .command(env!("CARGO_BIN_EXE_llrouter"))
        .args(["run", "--check", "--config"])
        .arg(TempDir::new("fw-refuse").router_config(CONFIG))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    for needle in [
        "cannot honour table inet llrtest, chain fw, rule handle",
        "tcp dport 22 log",
        "unsupported = \"kernel\"",
        // What it can honour, and how: the stateful rules and the NAT chain.
        "ct state established,related accept: evaluated for established connections",
        "table ip llrnat, chain post, rule handle",
        "masquerade",
    ] {
        assert!(
            stdout.contains(needle) || stderr.contains(needle),
            "{needle:?} in:\n{stdout}{stderr}"
        );
    }
    // And the start itself, before any XDP program is attached.
    let msg = refused_start(&t, "fw-refuse2");
    assert!(
        msg.contains("rule handle") && msg.contains("tcp dport 22 log"),
        "{msg}"
    );
    assert_eq!(common::xdp_attached(&t), 0);
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn a_stateful_ruleset_needs_the_kernels_forwarding_for_the_first_packets() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwfo").expect("topology");
    nft(
        &t.router,
        ROUTER_FIREWALL.split("table ip llrnat").next().unwrap(),
    );
    t.router.sysctl("net.ipv4.ip_forward", "0").unwrap();
    let msg = refused_start(&t, "fw-fwoff");
    for needle in [
        "net.ipv4.ip_forward = 0",
        "ct state",
        "unsupported = \"kernel\"",
    ] {
        assert!(msg.contains(needle), "{needle:?} in {msg}");
    }
    assert_eq!(common::xdp_attached(&t), 0);
}

/// `bytes` sent over one TCP connection from `from` to `to_addr:port` in `to`: what the
/// receiver read before the sender's FIN (0 if the connection failed).
fn tcp_bulk(from: &Netns, to: &Netns, to_addr: IpAddr, port: u16, bytes: usize) -> usize {
    let bind = any(to_addr, port);
    let l = to.run(move || TcpListener::bind(bind)).unwrap().unwrap();
    let rx = std::thread::spawn(move || {
        use std::io::Read;
        let (mut s, _) = l.accept().ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut got = 0;
        let mut b = vec![0u8; 64 * 1024];
        loop {
            match s.read(&mut b) {
                Ok(0) => return Some(got),
                Ok(n) => got += n,
                Err(_) => return None,
            }
        }
    });
    let sent = from
        .run(move || {
            use std::io::Write;
            let mut s =
                TcpStream::connect_timeout(&SocketAddr::new(to_addr, port), Duration::from_secs(2))
                    .ok()?;
            s.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
            let chunk = vec![0x5au8; 64 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len());
                s.write_all(&chunk[..n]).ok()?;
                left -= n;
            }
            s.shutdown(std::net::Shutdown::Write).ok()?;
            Some(bytes)
        })
        .unwrap();
    let got = rx.join().unwrap();
    match (sent, got) {
        (Some(_), Some(g)) => g,
        _ => 0,
    }
}

/// A UDP conversation: the generator (LAN) sends one datagram to the sink, the sink answers,
/// then the sink sends `n` more, one every `gap`, which the generator counts.
fn udp_conversation(t: &Topology, sink: IpAddr, port: u16, n: u32, gap: Duration) -> u32 {
    let gen_bind = any(sink, port);
    let g = t
        .gen
        .run(move || UdpSocket::bind(gen_bind))
        .unwrap()
        .unwrap();
    let s_bind = any(sink, port + 1);
    let s = t
        .sink
        .run(move || UdpSocket::bind(s_bind))
        .unwrap()
        .unwrap();
    g.send_to(b"hello", SocketAddr::new(sink, port + 1))
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 64];
    let Ok((_, peer)) = s.recv_from(&mut b) else {
        return 0;
    };
    s.send_to(b"hi", peer).unwrap();
    g.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    if g.recv(&mut b).is_err() {
        return 0;
    }
    // The answer established the entry: give the router a moment to take the connection.
    std::thread::sleep(Duration::from_millis(300));
    let rx = std::thread::spawn(move || {
        g.set_read_timeout(Some(Duration::from_millis(800)))
            .unwrap();
        let mut got = 0;
        let mut b = [0u8; 64];
        while g.recv(&mut b).is_ok() {
            got += 1;
        }
        got
    });
    for i in 0..n {
        s.send_to(&i.to_be_bytes(), peer).unwrap();
        std::thread::sleep(gap);
    }
    rx.join().unwrap()
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn a_stateful_router_firewall_lets_the_lan_out_not_the_wan_in_and_llrouter_carries_the_rest() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwct").expect("topology");
    // The masquerade would hide the generator's address from the sink; NAT is its own test.
    nft(
        &t.router,
        ROUTER_FIREWALL.split("table ip llrnat").next().unwrap(),
    );
    // Short UDP timeouts, so that the conversation below outlives them: the kernel entry
    // stays only if llrouter extends it while it carries the datagrams (else the next one
    // from the WAN side is new, and the policy drops it).
    t.router
        .sysctl("net.netfilter.nf_conntrack_udp_timeout", "2")
        .unwrap();
    t.router
        .sysctl("net.netfilter.nf_conntrack_udp_timeout_stream", "3")
        .unwrap();
    let (g4, s4, g6, s6) = (
        ip(addr::GEN_V4),
        ip(addr::SINK_V4),
        ip(addr::GEN_V6),
        ip(addr::SINK_V6),
    );
    let dir = TempDir::new("fw-ct");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let lan_out4 = tcp_connects(&t.gen, &t.sink, s4, 7100);
    let lan_out6 = tcp_connects(&t.gen, &t.sink, s6, 7101);
    let wan_in4 = tcp_connects(&t.sink, &t.gen, g4, 7102);
    let wan_in6 = tcp_connects(&t.sink, &t.gen, g6, 7103);
    let wan_udp = {
        let rx = t.gen.spawn(|| {
            let s = UdpSocket::bind("0.0.0.0:7104").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut b = [0u8; 64];
            s.recv(&mut b).is_ok()
        });
        std::thread::sleep(Duration::from_millis(100));
        t.sink
            .run(move || {
                let s = UdpSocket::bind("0.0.0.0:0").unwrap();
                for _ in 0..5 {
                    s.send_to(b"x", SocketAddr::new(g4, 7104)).unwrap();
                }
            })
            .unwrap();
        rx.join().unwrap().unwrap()
    };
    // 8 MiB a transfer: the kernel forwards what comes before the router takes the connection
    // (the conntrack event, then the map's entry), which on a slow host can be a sizable share
    // of a short transfer; the bound below stays far from what llrouter carries either way.
    const BULK: usize = 8 << 20;
    let bulk4 = tcp_bulk(&t.gen, &t.sink, s4, 7110, BULK);
    let bulk6 = tcp_bulk(&t.gen, &t.sink, s6, 7111, BULK);
    // 5 s of datagrams from the WAN side on a connection the LAN side opened. Its kernel
    // entry is alive at the end (a dump leaves out, and evicts, expired ones; the garbage
    // collector alone may take longer to notice): llrouter extended it.
    let alive = |port: u16| {
        t.router
            .run(|| llr_io::conntrack::Conntrack::open().and_then(|mut c| c.dump()))
            .unwrap()
            .expect("dump the connection table")
            .iter()
            .any(|e| e.orig.proto == 17 && e.orig.dport == port)
    };
    let conv4 = udp_conversation(&t, s4, 7120, 100, Duration::from_millis(50));
    let alive4 = alive(7121);
    let conv6 = udp_conversation(&t, s6, 7122, 100, Duration::from_millis(50));
    let alive6 = alive(7123);
    let (code, out, err) = ctl_bin(&dir.join("ctl.sock"), &["-j", "show", "filter"]);
    let rep = router.finish().unwrap().unwrap();
    assert!(lan_out4 && lan_out6, "LAN → WAN: {lan_out4} {lan_out6}");
    assert!(!wan_in4 && !wan_in6, "WAN → LAN: {wan_in4} {wan_in6}");
    assert!(!wan_udp, "an unsolicited datagram from the WAN");
    // Whole transfers, FIN included: the kernel accepted the FIN it saw after llrouter had
    // carried the segments (window tracking relaxed).
    assert_eq!(
        (bulk4, bulk6),
        (BULK, BULK),
        "bulk TCP through the firewall"
    );
    // 2 × 8 MiB is ~11 600 full segments and their ACKs; the kernel saw the handshakes, the
    // FINs and what came before the router took the connection.
    let carried: u64 = rep.worker.forwarded.iter().sum();
    assert!(
        carried >= 6_000,
        "llrouter forwarded {carried} frames: {}",
        rep.worker
    );
    assert_eq!(
        (conv4, conv6),
        (100, 100),
        "datagrams from the WAN side of a LAN connection"
    );
    assert!(
        alive4 && alive6,
        "the conversations' conntrack entries, extended by llrouter: {alive4} {alive6}"
    );
    assert_eq!(code, 0, "{err}");
    let view: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        view["families"],
        serde_json::json!(["conntrack", "conntrack"]),
        "{view}"
    );
    assert!(view["taken_connections"].as_u64().unwrap() >= 4, "{view}");
    let to_kernel: u64 = rep.classifier.iter().map(|(_, s)| s.pass_conntrack).sum();
    assert!(to_kernel > 0, "the first packets went to the kernel");
    assert!(
        view["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["text"] == "ct state established,related accept"
                && r["packets"].as_u64().unwrap() >= 6_000),
        "{view}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn iptables_rules_are_honoured_too() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwipt").expect("topology");
    nft(&t.router, "");
    run(
        &t.router,
        &[
            "iptables",
            "-A",
            "FORWARD",
            "-d",
            addr::SINK_V4,
            "-p",
            "udp",
            "--dport",
            "7777",
            "-j",
            "DROP",
        ],
    );
    run(
        &t.router,
        &[
            "ip6tables",
            "-A",
            "FORWARD",
            "-d",
            addr::SINK_V6,
            "-p",
            "udp",
            "--dport",
            "7777",
            "-j",
            "DROP",
        ],
    );
    let (s4, s6) = (ip(addr::SINK_V4), ip(addr::SINK_V6));
    let dir = TempDir::new("fw-ipt");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let got = [
        udp_through(&t, s4, 7777, 100),
        udp_through(&t, s6, 7777, 100),
        udp_through(&t, s4, 7778, 100),
    ];
    let rep = router.finish().unwrap().unwrap();
    assert_eq!(got, [0, 0, 100]);
    assert_eq!(count(&rep.worker.drop, "filtered"), 200, "{}", rep.worker);
    // Legacy iptables is not compiled: a start is refused, naming the line.
    run(
        &t.router,
        &[
            "iptables-legacy",
            "-A",
            "FORWARD",
            "-p",
            "tcp",
            "--dport",
            "23",
            "-j",
            "DROP",
        ],
    );
    let cfg = llr_router::RouterConfig::load(&dir.router_config(CONFIG)).unwrap();
    let err = t
        .router
        .run(move || llr_router::Router::start(cfg, Default::default()).err())
        .unwrap()
        .expect("refused");
    assert!(err.to_string().contains("-A FORWARD -p tcp"), "{err}");
}

/// `ctl show filter -j`: the rows of rule `handle`'s (packets, packets dropped in XDP).
fn rule_counts(sock: &std::path::Path, text_has: &str) -> (u64, u64) {
    let (code, out, err) = ctl_bin(sock, &["-j", "show", "filter"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["rules"].as_array().unwrap();
    let r = (rows.iter())
        .find(|r| r["text"].as_str().unwrap().contains(text_has))
        .unwrap_or_else(|| panic!("no rule with {text_has:?}: {out}"));
    (
        r["packets"].as_u64().unwrap(),
        r["xdp_packets"].as_u64().unwrap(),
    )
}

const BLOCKLIST: &str = r#"
table inet llrtest {
  set block4 { type ipv4_addr; flags interval; elements = { 10.71.2.2, 192.0.2.0/24 } }
  chain pre {
    type filter hook prerouting priority -150; policy accept;
    ip daddr @block4 drop
    ip6 daddr fd71:2::2 drop
    ip daddr 10.71.2.1 udp dport 7777 drop
    meta l4proto udp th dport { 7777, 7779 } drop
    meta l4proto icmp ip daddr 10.71.2.1 drop
    ip6 daddr fd71:2::1 icmpv6 type echo-request drop
  }
}
"#;

/// Echo requests `from` sends to `dst` (`n` of them, 10 ms apart), and the replies it got.
fn echo_replies(from: &Netns, dst: IpAddr, n: u32) -> u32 {
    let out = from
        .command("ping")
        .args(["-n", "-q", "-c", &n.to_string(), "-i", "0.01", "-W", "1"])
        .arg(dst.to_string())
        .output()
        .expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    // "20 packets transmitted, 0 received, 100% packet loss, time 190ms"
    let received = (text.split(',').find(|p| p.contains("received")))
        .and_then(|p| p.split_whitespace().next()?.parse().ok());
    received.unwrap_or_else(|| panic!("ping's summary: {text}"))
}

/// Echo requests per family to the address whose ICMP is dropped.
const ECHOES: u32 = 20;

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn a_blocked_flood_is_dropped_before_the_rings_and_counted_against_its_rule() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwxdp").expect("topology");
    // A second address on the sink, blocked; the first stays open.
    run(
        &t.sink,
        &["ip", "addr", "add", "10.71.2.2/24", "dev", addr::SINK_IF],
    );
    run(
        &t.sink,
        &[
            "ip",
            "addr",
            "add",
            "fd71:2::2/64",
            "dev",
            addr::SINK_IF,
            "nodad",
        ],
    );
    for a in ["10.71.2.2", "fd71:2::2"] {
        run(
            &t.router,
            &[
                "ip",
                "neigh",
                "replace",
                a,
                "lladdr",
                addr::SINK_MAC,
                "dev",
                addr::RTR_OUT_IF,
                "nud",
                "permanent",
            ],
        );
    }
    nft(&t.router, BLOCKLIST);
    let (b4, b6, open4) = (ip("10.71.2.2"), ip("fd71:2::2"), ip(addr::SINK_V4));
    let open6 = ip(addr::SINK_V6);
    let n = 3000;
    // The blocked addresses, then the blocked ports of the open ones (by address and port,
    // and by port alone in IPv6), then what stays open.
    let probe = || {
        [
            udp_through(&t, b4, 7000, n),
            udp_through(&t, b6, 7000, n),
            udp_through(&t, open4, 7777, n),
            udp_through(&t, open6, 7779, n),
            udp_through(&t, open4, 7000, 200),
            udp_through(&t, open6, 7778, 200),
            echo_replies(&t.gen, open4, ECHOES),
            echo_replies(&t.gen, open6, ECHOES),
        ]
    };
    let kernel = probe();
    assert_eq!(kernel, [0, 0, 0, 0, 200, 200, 0, 0], "the kernel's answer");
    let dir = TempDir::new("fw-xdp");
    let sock = dir.join("ctl.sock");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ours = probe();
    let (v4_all, v4_xdp) = rule_counts(&sock, "@block4");
    let (v6_all, v6_xdp) = rule_counts(&sock, "fd71:2::2");
    let (p4_all, p4_xdp) = rule_counts(&sock, "udp dport 7777");
    // nft lists `meta l4proto udp th dport {…}` as `udp dport {…}`.
    let (p_all, p_xdp) = rule_counts(&sock, "udp dport { 7777");
    // A protocol drop without a port (ICMP), and an ICMPv6 type drop.
    let (i4_all, i4_xdp) = rule_counts(&sock, "meta l4proto icmp");
    let (i6_all, i6_xdp) = rule_counts(&sock, "icmpv6 type echo-request");
    let (code, counters, err) = ctl_bin(&sock, &["-j", "counters"]);
    assert_eq!(code, 0, "{err}");
    let m: serde_json::Value = serde_json::from_str(&counters).unwrap();
    let xdp_metric: u64 = (m["filter_rules"].as_array().unwrap().iter())
        .map(|r| r["xdp_packets"].as_u64().unwrap())
        .sum();
    // Removed while running: the drops leave the classifier with the rule.
    run(
        &t.router,
        &["nft", "flush", "chain", "inet", "llrtest", "pre"],
    );
    std::thread::sleep(Duration::from_secs(1));
    let after = udp_through(&t, b4, 7000, 100);
    let rep = router.finish().unwrap().unwrap();
    assert_eq!(ours, kernel, "llrouter against the kernel");
    assert_eq!(after, 100, "the flushed rule still dropped");
    // Every blocked datagram was dropped in XDP: the workers never saw one.
    assert_eq!((v4_all, v4_xdp), (u64::from(n), u64::from(n)));
    assert_eq!((v6_all, v6_xdp), (u64::from(n), u64::from(n)));
    // Port drops too: no worker saw the datagrams to the blocked ports.
    assert_eq!((p4_all, p4_xdp), (u64::from(n), u64::from(n)));
    assert_eq!((p_all, p_xdp), (u64::from(n), u64::from(n)));
    let e = u64::from(ECHOES);
    assert_eq!((i4_all, i4_xdp), (e, e), "echo requests, IPv4");
    assert_eq!((i6_all, i6_xdp), (e, e), "echo requests, IPv6");
    assert_eq!(xdp_metric, 4 * u64::from(n) + 2 * e, "{counters}");
    let in_xdp: u64 = rep.classifier.iter().map(|(_, s)| s.drop_firewall).sum();
    assert_eq!(in_xdp, 4 * u64::from(n) + 2 * e);
    assert_eq!(count(&rep.worker.drop, "filtered"), 0, "{}", rep.worker);
    assert!(
        rep.worker.forwarded.iter().sum::<u64>() >= 300,
        "{}",
        rep.worker
    );
}

/// `ctl show filter -j`: who forwards IPv4 and IPv6, and the packets of the rule `text`.
fn families_and_count(sock: &std::path::Path, text: &str) -> (serde_json::Value, u64) {
    let (code, out, err) = ctl_bin(sock, &["-j", "show", "filter"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let n = (v["rules"].as_array().unwrap().iter())
        .filter(|r| r["text"] == text)
        .map(|r| r["packets"].as_u64().unwrap())
        .sum();
    (v["families"].clone(), n)
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn a_stateful_ruleset_added_while_running_and_translated_connections_left_to_the_kernel() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwnat").expect("topology");
    nft(&t.router, "");
    let (g4, s4) = (ip(addr::GEN_V4), ip(addr::SINK_V4));
    let dir = TempDir::new("fw-nat");
    let sock = dir.join("ctl.sock");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    const EST: &str = "ct state established,related accept";
    let (fam0, _) = families_and_count(&sock, EST);
    nft(
        &t.router,
        ROUTER_FIREWALL.split("table ip llrnat").next().unwrap(),
    );
    std::thread::sleep(Duration::from_secs(1));
    let (fam1, _) = families_and_count(&sock, EST);
    let wan_in = tcp_connects(&t.sink, &t.gen, g4, 7140);
    let lan_out = tcp_connects(&t.gen, &t.sink, s4, 7141);
    // 8 MiB, not 2: as in the typical firewall's test, the kernel forwards what comes before
    // the router takes the connection, and 1 500 frames would be most of a 2 MiB transfer.
    const BULK: usize = 8 << 20;
    let (_, c0) = families_and_count(&sock, EST);
    let plain = tcp_bulk(&t.gen, &t.sink, s4, 7142, BULK);
    let (_, c1) = families_and_count(&sock, EST);
    // The masquerade: the sink sees the router's address, and the kernel keeps the
    // connection (llrouter does not translate).
    nft(&t.router, ROUTER_FIREWALL);
    std::thread::sleep(Duration::from_secs(1));
    let (fam2, c2) = families_and_count(&sock, EST);
    let natted = tcp_bulk(&t.gen, &t.sink, s4, 7143, BULK);
    let (_, c3) = families_and_count(&sock, EST);
    router.finish().unwrap().unwrap();
    let both = |m: &str| serde_json::json!([m, m]);
    assert_eq!(fam0, both("llrouter"));
    assert_eq!(fam1, both("conntrack"), "a ct rule added while running");
    assert!(
        !wan_in && lan_out,
        "WAN → LAN {wan_in}, LAN → WAN {lan_out}"
    );
    assert_eq!((plain, natted), (BULK, BULK));
    // ~5 800 full segments and their ACKs, less what the kernel saw first.
    assert!(c1 - c0 >= 1_500, "llrouter carried {} frames", c1 - c0);
    assert_eq!(fam2, both("conntrack"));
    assert!(
        c3 - c2 < 20,
        "llrouter carried {} frames of a translated connection",
        c3 - c2
    );
}
