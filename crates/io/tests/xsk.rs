//! AF_XDP device and attach/detach in network namespaces (root; skipped with a message
//! otherwise): frames steered by DSCP into two rings, forwarded between ports with TTL
//! decremented, received by a UDP socket in the sink namespace; a SIGKILLed attacher leaves no
//! program behind.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llr_core::sched::RingView;
use llr_io::ebpf::{AttachMode, Classifier};
use llr_io::xsk::{Action, Device, PortSpec, XskOptions};
use llr_traffic::netns::{addr, Netns, Topology};

fn mac(s: &str) -> [u8; 6] {
    llr_io::kernel::parse_mac(s).expect("a MAC address")
}

/// `struct llr_rule` with only DSCP set.
fn dscp_rule(dscp: u8, class: u8) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0..4].copy_from_slice(&(1u32 << 4).to_le_bytes());
    b[12] = dscp;
    b[14] = class;
    b
}

/// Minimal IPv4 forwarding for the test: MACs, TTL and an incremental checksum update.
fn forward(frame: &mut [u8], len: u32, out_if: u32) -> Action {
    if len < 34 || frame[12..14] != [0x08, 0x00] {
        return Action::Drop;
    }
    frame[0..6].copy_from_slice(&mac(addr::SINK_MAC));
    frame[6..12].copy_from_slice(&mac(addr::RTR_OUT_MAC));
    frame[22] -= 1;
    // RFC 1624: HC' = ~(~HC + ~m + m'), the TTL/proto word dropped by 0x0100.
    let hc = u16::from_be_bytes([frame[24], frame[25]]);
    let mut sum = (!hc as u32) + 0xfeff;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    frame[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    Action::Tx {
        ifindex: out_if,
        len: len as usize,
    }
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn forwards_between_ports_and_steers_by_dscp() {
    llr_io::sys::require_root();
    let topo = Topology::new("llrxsk").expect("topology");
    // veth offloads the UDP checksum (CHECKSUM_PARTIAL): through AF_XDP the frame would leave
    // the router with only the pseudo-header sum. Real NICs finish it; here the sender must.
    topo.gen
        .exec(&["ethtool", "-K", addr::GEN_IF, "tx", "off"])
        .unwrap();
    let in_if = topo.router.ifindex(addr::RTR_IN_IF).unwrap();
    let out_if = topo.router.ifindex(addr::RTR_OUT_IF).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let stop2 = stop.clone();
    let router = topo.router.spawn(
        move || -> anyhow::Result<(Vec<u64>, Vec<llr_io::xsk::PortStats>, u64)> {
            let mk = || -> anyhow::Result<Classifier> {
                let mut c = Classifier::load(1)?;
                c.set_rules(&[dscp_rule(46, 0)], 1, 0)?;
                c.set_class_rings(&[0, 1])?;
                c.set_local_addrs(&[addr::RTR_IN_V4.parse()?, addr::RTR_OUT_V4.parse()?])?;
                Ok(c)
            };
            let ports = vec![
                PortSpec {
                    ifindex: in_if,
                    queue: 0,
                },
                PortSpec {
                    ifindex: out_if,
                    queue: 0,
                },
            ];
            let mut dev = Device::open(ports, 2, &XskOptions::default())?;
            // one classifier per interface, holding that interface's sockets
            let mut cls = Vec::new();
            for ifindex in [in_if, out_if] {
                let mut c = mk()?;
                for s in dev.sockets().iter().filter(|s| s.ifindex == ifindex) {
                    c.set_socket(s.queue, s.ring, s.fd)?;
                }
                c.attach(ifindex, AttachMode::Auto)?;
                cls.push(c);
            }
            ready_tx.send(()).unwrap();
            let mut served = vec![0u64; 2];
            let deadline = Instant::now() + Duration::from_secs(20);
            while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
                let mut any = 0;
                for (r, s) in served.iter_mut().enumerate() {
                    if dev.backlog(r) > 0 {
                        let n = dev.recv(r, 64, |f, len, _in| forward(f, len, out_if));
                        *s += n as u64;
                        any += n;
                    }
                }
                dev.flush();
                if any == 0 && !dev.egress_pending() {
                    dev.wait(10);
                }
            }
            let free = dev.free_chunks() as u64;
            drop(cls); // detached before the sockets close
            Ok((served, dev.port_stats(), free))
        },
    );
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("router ready");

    // sink: count datagrams
    let sink = topo
        .sink
        .run(|| UdpSocket::bind("0.0.0.0:9000"))
        .unwrap()
        .unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let total = 200u64 + 300;
    let reader = std::thread::spawn(move || {
        let mut got = 0u64;
        let mut buf = [0u8; 64];
        let t0 = Instant::now();
        while got < total && t0.elapsed() < Duration::from_secs(8) {
            if sink.recv_from(&mut buf).is_ok() {
                got += 1;
            }
        }
        got
    });
    let gen = topo
        .gen
        .run(|| UdpSocket::bind("0.0.0.0:0"))
        .unwrap()
        .unwrap();
    let dst = SocketAddrV4::new(addr::SINK_V4.parse::<Ipv4Addr>().unwrap(), 9000);
    let set_tos = |tos: libc::c_int| {
        // SAFETY: pointer to a live c_int with its exact size.
        let rc = unsafe {
            libc::setsockopt(
                gen.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_TOS,
                (&tos as *const libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(rc, 0);
    };
    let (n_ef, n_be) = (200u64, 300u64);
    set_tos(46 << 2);
    for i in 0..n_ef {
        gen.send_to(&i.to_be_bytes(), dst).unwrap();
        if i % 32 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    set_tos(0);
    for i in 0..n_be {
        gen.send_to(&i.to_be_bytes(), dst).unwrap();
        if i % 32 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let got = reader.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    if got < n_ef + n_be {
        let l = topo
            .sink
            .ip(&["-s", "link", "show", "dev", addr::SINK_IF])
            .unwrap();
        let snmp = topo.sink.exec(&["cat", "/proc/net/snmp"]).unwrap();
        eprintln!(
            "sink link:\n{}\nsnmp:\n{}",
            String::from_utf8_lossy(&l.stdout),
            String::from_utf8_lossy(&snmp.stdout)
        );
    }
    let (served, ports, free) = router.join().unwrap().unwrap().unwrap();
    eprintln!("served per ring {served:?}, sink got {got}, ports {ports:#?}, free chunks {free}");
    assert_eq!(served, vec![n_ef, n_be], "EF in ring 0, the rest in ring 1");
    assert_eq!(
        got,
        n_ef + n_be,
        "every frame forwarded with a valid checksum"
    );
    assert_eq!(ports[1].tx, n_ef + n_be);
}

/// Helper for `sigkill_leaves_nothing_attached`: attaches in `LLR_CHILD_NS` and sleeps.
#[test]
fn child_attach_and_sleep() {
    let Ok(ns) = std::env::var("LLR_CHILD_NS") else {
        return;
    };
    let ifname = std::env::var("LLR_CHILD_IF").unwrap();
    Netns::open(&ns).unwrap().enter().unwrap();
    let mut c = Classifier::load(0).unwrap();
    let i = llr_io::ebpf::ifindex(&ifname).unwrap();
    c.attach(i, AttachMode::Auto).unwrap();
    println!("ATTACHED");
    std::thread::sleep(Duration::from_secs(60));
}

fn has_xdp(ns: &Netns, ifname: &str) -> bool {
    ns.xdp_attached(ifname).unwrap()
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn sigkill_leaves_nothing_attached_and_restart_works() {
    llr_io::sys::require_root();
    let topo = Topology::new("llrkill").expect("topology");
    let ns = &topo.router;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_attach_and_sleep",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LLR_CHILD_NS", ns.name())
        .env("LLR_CHILD_IF", addr::RTR_IN_IF)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !has_xdp(ns, addr::RTR_IN_IF) && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(has_xdp(ns, addr::RTR_IN_IF), "child attached");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let t0 = Instant::now();
    while has_xdp(ns, addr::RTR_IN_IF) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !has_xdp(ns, addr::RTR_IN_IF),
        "bpf_link died with the process"
    );
    // a new start attaches, and dropping it detaches
    let name = ns.name().to_owned();
    ns.run(move || {
        let mut c = Classifier::load(0).unwrap();
        let i = llr_io::ebpf::ifindex(addr::RTR_IN_IF).unwrap();
        c.attach(i, AttachMode::Auto).unwrap();
        assert!(has_xdp(&Netns::open(&name).unwrap(), addr::RTR_IN_IF));
        drop(c);
        assert!(!has_xdp(&Netns::open(&name).unwrap(), addr::RTR_IN_IF));
    })
    .unwrap();
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn stale_netlink_program_is_replaced() {
    llr_io::sys::require_root();
    let topo = Topology::new("llrstale").expect("topology");
    let ns = &topo.router;
    // Attach llrouter's object the old way (netlink, survives its loader) with iproute2.
    let obj = std::env::temp_dir().join(format!("llr-classifier-{}.o", std::process::id()));
    std::fs::write(&obj, llr_io::bpf_objects::CLASSIFIER).unwrap();
    let r = ns.ip(&[
        "link",
        "set",
        "dev",
        addr::RTR_IN_IF,
        "xdpgeneric",
        "obj",
        obj.to_str().unwrap(),
        "sec",
        "xdp",
    ]);
    let _ = std::fs::remove_file(&obj);
    if let Err(e) = r {
        eprintln!("skipped: iproute2 cannot load the object here: {e:#}");
        return;
    }
    assert!(has_xdp(ns, addr::RTR_IN_IF));
    let name = ns.name().to_owned();
    ns.run(move || {
        let mut c = Classifier::load(0).unwrap();
        let i = llr_io::ebpf::ifindex(addr::RTR_IN_IF).unwrap();
        c.attach(i, AttachMode::Skb)
            .expect("replaces the stale program");
        drop(c);
        assert!(!has_xdp(&Netns::open(&name).unwrap(), addr::RTR_IN_IF));
    })
    .unwrap();
}

/// Detaching takes the program off the interface at once, even while a child that another
/// thread forked still holds a copy of the link's fd (between its fork and its exec): a router
/// that says it stopped has detached, whatever its other threads were spawning.
#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn detach_is_immediate_while_a_forked_child_holds_the_link() {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    llr_io::sys::require_root();
    let topo = Topology::new("llrfork").expect("topology");
    let ns = &topo.router;
    let name = ns.name().to_owned();
    ns.run(move || {
        let mut c = Classifier::load(0).unwrap();
        let i = llr_io::ebpf::ifindex(addr::RTR_IN_IF).unwrap();
        c.attach(i, AttachMode::Auto).unwrap();
        let (mut forked, tell) = std::os::unix::net::UnixStream::pair().unwrap();
        // The child says it exists, then stays 3 s before its exec with every fd of ours.
        let spawner = std::thread::spawn(move || {
            let fd = tell.as_raw_fd();
            let mut cmd = std::process::Command::new("true");
            // SAFETY: the closure runs in the forked child before exec and only calls write(2)
            // and nanosleep(2), both async-signal-safe, on a live fd and a local timespec.
            unsafe {
                cmd.pre_exec(move || {
                    libc::write(fd, b"x".as_ptr().cast(), 1);
                    let t = libc::timespec {
                        tv_sec: 3,
                        tv_nsec: 0,
                    };
                    libc::nanosleep(&t, std::ptr::null_mut());
                    Ok(())
                });
            }
            cmd.status().unwrap()
        });
        let mut b = [0u8; 1];
        forked.read_exact(&mut b).unwrap();
        let ns = Netns::open(&name).unwrap();
        assert!(has_xdp(&ns, addr::RTR_IN_IF), "attached");
        let t0 = Instant::now();
        c.detach().unwrap();
        let attached_after = has_xdp(&ns, addr::RTR_IN_IF);
        let checked_in = t0.elapsed();
        assert!(spawner.join().unwrap().success());
        assert!(
            checked_in < Duration::from_secs(2),
            "the check ran while the child still held the fd ({checked_in:?})"
        );
        assert!(
            !attached_after,
            "still attached after detach while a forked child held the link's fd"
        );
    })
    .unwrap();
}
