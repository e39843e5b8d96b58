//! llrouter against the kernel, frame by frame (root; fails under `CI=true` if it cannot run):
//! crafted IPv4 and IPv6 frames sent from the generator namespace through the router namespace,
//! once with the kernel forwarding and once with llrouter attached, on one topology. Per frame
//! the outcome is whether it reached the sink and which ICMP error came back; the two must be
//! equal. Each frame carries its own UDP source port, which ICMP errors quote, so a reply is
//! matched to its frame.

mod common;
use common::{wait_for_line, RouterThread, Running, TempDir, LL_WFQ_CONFIG as CONFIG};

use std::net::IpAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use llr_core::wire::build::{frame, FrameSpec};
// The kernel's ICMP rate limits stay as Debian ships them: `icmp_ratelimit = 0` would also
// empty the per-source token bucket that the kernel's "no route" errors (ip_error) draw from.
use llr_traffic::netns::{addr, Topology};

fn mac(s: &str) -> [u8; 6] {
    llr_io::kernel::parse_mac(s).expect("a MAC address")
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A raw AF_PACKET socket on `ifname` of the calling thread's namespace, every protocol, with
/// a 50 ms receive timeout.
struct Raw(RawFd);

impl Raw {
    fn open(ifname: &str) -> Raw {
        let ifindex = llr_io::ebpf::ifindex(ifname).expect("interface");
        let all = (libc::ETH_P_ALL as u16).to_be() as i32;
        // SAFETY: plain socket(2) call.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, all) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let raw = Raw(fd);
        // SAFETY: sockaddr_ll and timeval are plain data passed with their exact sizes.
        unsafe {
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = all as u16;
            sll.sll_ifindex = ifindex as i32;
            let rc = libc::bind(
                fd,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
            let tv = libc::timeval {
                tv_sec: 0,
                tv_usec: 50_000,
            };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            );
        }
        raw
    }

    fn send(&self, f: &[u8]) {
        // SAFETY: f is a live buffer of f.len() bytes.
        let n = unsafe { libc::send(self.0, f.as_ptr().cast(), f.len(), 0) };
        assert!(n >= 0, "send: {}", std::io::Error::last_os_error());
    }

    /// Every frame received (not sent by us) until `until`.
    fn collect(&self, until: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 2048];
        while Instant::now() < until {
            // SAFETY: buf is a live buffer of buf.len() bytes; sll/len are out-parameters.
            let n = unsafe {
                let mut sll: libc::sockaddr_ll = std::mem::zeroed();
                let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
                let n = libc::recvfrom(
                    self.0,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut sll as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                );
                if n > 0 && sll.sll_pkttype == libc::PACKET_OUTGOING {
                    continue;
                }
                n
            };
            if n > 0 {
                out.push(buf[..n as usize].to_vec());
            }
        }
        out
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.0) };
    }
}

/// One crafted frame and what to call it: built from `spec`, then changed by `edit`.
struct Case {
    name: &'static str,
    spec: FrameSpec,
    edit: fn(&mut Vec<u8>),
}

fn plain(name: &'static str, spec: FrameSpec) -> Case {
    Case {
        name,
        spec,
        edit: |_| {},
    }
}

fn edited(name: &'static str, spec: FrameSpec, edit: fn(&mut Vec<u8>)) -> Case {
    Case { name, spec, edit }
}

/// The IPv4 header checksum of a frame, written again.
fn ipv4_checksum(f: &mut [u8]) {
    let ihl = usize::from(f[14] & 0xf) * 4;
    f[24] = 0;
    f[25] = 0;
    let mut sum: u32 = (0..ihl)
        .step_by(2)
        .map(|i| u32::from(u16::from_be_bytes([f[14 + i], f[15 + i]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// Four bytes of IPv4 options (NOP, NOP, NOP, end of list).
fn with_ipv4_options(f: &mut Vec<u8>) {
    f.splice(34..34, [1, 1, 1, 0]);
    f[14] = 0x46;
    let tot = u16::from_be_bytes([f[16], f[17]]) + 4;
    f[16..18].copy_from_slice(&tot.to_be_bytes());
    ipv4_checksum(f);
}

/// An IPv6 hop-by-hop header of 8 bytes (PadN) before the UDP header.
fn with_hop_by_hop(f: &mut Vec<u8>) {
    let next = f[20];
    f.splice(54..54, [next, 0, 1, 4, 0, 0, 0, 0]);
    f[20] = 0;
    let plen = u16::from_be_bytes([f[18], f[19]]) + 8;
    f[18..20].copy_from_slice(&plen.to_be_bytes());
}

/// DF cleared.
fn without_df(f: &mut [u8]) {
    f[20] &= !0x40;
    ipv4_checksum(f);
}

/// A first fragment: more fragments follow.
fn first_fragment(f: &mut [u8]) {
    f[20] = 0x20;
    ipv4_checksum(f);
}

/// The UDP source port that names case `i`.
fn port_of(i: usize) -> u16 {
    41_000 + i as u16
}

/// A UDP datagram from the generator to the router's MAC (`v4` builds IPv6 too).
fn v4(src: &str, dst: &str, ttl: u8) -> FrameSpec {
    FrameSpec {
        dst_mac: mac(addr::RTR_IN_MAC),
        src_mac: mac(addr::GEN_MAC),
        src: ip(src),
        dst: ip(dst),
        protocol: 17,
        ttl,
        dst_port: 7000,
        payload_len: 32,
        ..FrameSpec::default()
    }
}

fn cases() -> Vec<Case> {
    let (g4, s4, g6, s6) = (addr::GEN_V4, addr::SINK_V4, addr::GEN_V6, addr::SINK_V6);
    let cases = vec![
        plain("ipv4 forwarded", v4(g4, s4, 64)),
        plain("ipv4 ttl 1", v4(g4, s4, 1)),
        plain("ipv4 ttl 0", v4(g4, s4, 0)),
        plain("ipv4 ttl 1 with no route", v4(g4, "10.99.0.1", 1)),
        plain("ipv4 no route", v4(g4, "10.99.0.1", 64)),
        plain("ipv4 to 0.1.2.3 (no route)", v4(g4, "0.1.2.3", 64)),
        plain("ipv4 to 0.0.0.0", v4(g4, "0.0.0.0", 64)),
        plain("ipv4 from 0.1.2.3", v4("0.1.2.3", s4, 64)),
        plain("ipv4 from 0.0.0.0", v4("0.0.0.0", s4, 64)),
        plain(
            "ipv4 from the router's ingress address",
            v4(addr::RTR_IN_V4, s4, 64),
        ),
        plain(
            "ipv4 from the router's egress address",
            v4(addr::RTR_OUT_V4, s4, 64),
        ),
        plain("ipv4 from loopback", v4("127.0.0.1", s4, 64)),
        plain("ipv4 from multicast", v4("224.0.0.9", s4, 64)),
        plain("ipv4 to the sink's broadcast", v4(g4, "10.71.2.255", 64)),
        plain("ipv6 forwarded", v4(g6, s6, 64)),
        plain("ipv6 hop limit 1", v4(g6, s6, 1)),
        plain("ipv6 no route", v4(g6, "2001:db8::1", 64)),
        plain("ipv6 from loopback", v4("::1", s6, 64)),
        plain(
            "ipv6 from the router's ingress address",
            v4(addr::RTR_IN_V6, s6, 64),
        ),
        plain("ipv6 from multicast", v4("ff02::1", s6, 64)),
        plain("ipv4 from link-local", v4("169.254.1.1", s4, 64)),
        plain("ipv4 to link-local", v4(g4, "169.254.1.1", 64)),
        plain("ipv6 from link-local", v4("fe80::1", s6, 64)),
        plain("ipv4 from class E", v4("240.0.0.1", s4, 64)),
        plain("ipv4 to class E", v4(g4, "240.0.0.1", 64)),
        edited("ipv4 with options", v4(g4, s4, 64), with_ipv4_options),
        edited(
            "ipv6 with a hop-by-hop header",
            v4(g6, s6, 64),
            with_hop_by_hop,
        ),
        edited("ipv4 first fragment", v4(g4, s4, 64), |f| first_fragment(f)),
        plain(
            "ipv4 too big with DF",
            FrameSpec {
                payload_len: 1450,
                ..v4(g4, s4, 64)
            },
        ),
        edited(
            "ipv4 too big without DF",
            FrameSpec {
                payload_len: 1450,
                ..v4(g4, s4, 64)
            },
            |f| without_df(f),
        ),
        plain(
            "ipv6 too big",
            FrameSpec {
                payload_len: 1450,
                ..v4(g6, s6, 64)
            },
        ),
        plain(
            "ipv4 to a silent host on the sink's link",
            v4(g4, "10.71.2.77", 64),
        ),
        plain(
            "ipv6 to a silent host on the sink's link",
            v4(g6, "fd71:2::77", 64),
        ),
    ];
    numbered(cases, 0)
}

/// Gives case `i` (counting from `first`) its own UDP source port, and, if it is from the
/// generator's address, its own source address: the kernel limits its ICMP errors per source
/// address (a burst of 5 or 6, then one a second, Debian's defaults, left as they are).
fn numbered(cases: Vec<Case>, first: usize) -> Vec<Case> {
    (cases.into_iter().enumerate())
        .map(|(i, mut c)| {
            let i = first + i;
            c.spec.src_port = port_of(i);
            if c.spec.src == ip(addr::GEN_V4) {
                c.spec.src = own_source(false, i);
            } else if c.spec.src == ip(addr::GEN_V6) {
                c.spec.src = own_source(true, i);
            }
            c
        })
        .collect()
}

/// The generator's address for case `i`: 10.71.1.100 + i, fd71:1::100 + i.
fn own_source(v6: bool, i: usize) -> IpAddr {
    if v6 {
        IpAddr::from(std::net::Ipv6Addr::from(
            (0xfd71_0001u128 << 96) + 0x100 + i as u128,
        ))
    } else {
        IpAddr::from([10, 71, 1, 100 + i as u8])
    }
}

/// Neighbour entries in the router for the generator's per-case addresses ([`own_source`]).
fn gen_sources(t: &Topology) {
    let mut batch = String::new();
    for i in 0..64 {
        for v6 in [false, true] {
            batch += &format!(
                "neigh replace {} lladdr {} dev {} nud permanent\n",
                own_source(v6, i),
                addr::GEN_MAC,
                addr::RTR_IN_IF
            );
        }
    }
    ip_batch(t, &batch);
}

/// Runs `ip -batch` with `batch` in the router's namespace; every line must succeed. Lines
/// that start with `-6 ` go to `ip -6 -batch` (a batch line takes no options), after the others.
fn ip_batch(t: &Topology, batch: &str) {
    let (six, four): (Vec<&str>, Vec<&str>) = batch.lines().partition(|l| l.starts_with("-6 "));
    let six: Vec<&str> = six.iter().map(|l| &l[3..]).collect();
    for (fam, lines) in [(None, four), (Some("-6"), six)] {
        if !lines.is_empty() {
            ip_batch_of(t, fam, &(lines.join("\n") + "\n"));
        }
    }
}

fn ip_batch_of(t: &Topology, family: Option<&str>, batch: &str) {
    let batch = batch.to_string();
    let o = (t.router.command("ip"))
        .args(family.into_iter().chain(["-batch", "-"]))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(batch.as_bytes())?;
            c.wait_with_output()
        })
        .expect("ip -batch");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// What happened to each case: reached the sink, and the ICMP errors (type, code) that came back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    forwarded: bool,
    icmp: Vec<(u8, u8)>,
}

/// The UDP source port of a frame's IP packet at `l3`, if it is UDP.
fn udp_sport(f: &[u8], l3: usize) -> Option<u16> {
    let b = f.get(l3..)?;
    let (proto, l4) = match b.first()? >> 4 {
        4 => (*b.get(9)?, usize::from(b[0] & 0xf) * 4),
        // a hop-by-hop header is skipped
        6 if b.get(6) == Some(&0) => (*b.get(40)?, 40 + (usize::from(*b.get(41)?) + 1) * 8),
        6 => (*b.get(6)?, 40),
        _ => return None,
    };
    (proto == 17).then(|| Some(u16::from_be_bytes([*b.get(l4)?, *b.get(l4 + 1)?])))?
}

/// An ICMP or ICMPv6 error (not ND) in frame `f`: (type, code, the quoted UDP source port).
fn icmp_error(f: &[u8]) -> Option<(u8, u8, u16)> {
    let et = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    let (l4, proto) = match et {
        0x0800 => (14 + usize::from(f.get(14)? & 0xf) * 4, *f.get(23)?),
        0x86dd => (54, *f.get(20)?),
        _ => return None,
    };
    let (t, c) = (*f.get(l4)?, *f.get(l4 + 1)?);
    let error = match proto {
        1 => matches!(t, 3 | 11 | 12),
        58 => t < 128,
        _ => false,
    };
    if !error {
        return None;
    }
    Some((t, c, udp_sport(f, l4 + 8)?))
}

/// Sends every case from the generator, 100 ms apart, and collects what arrives at the sink and
/// what comes back, until 4 s after the last: the kernel gives up on a neighbour after 3 s.
fn probe(t: &Topology, cases: &[Case]) -> Vec<Outcome> {
    let frames: Vec<Vec<u8>> = (cases.iter())
        .map(|c| {
            let mut f = frame(&c.spec);
            (c.edit)(&mut f);
            f
        })
        .collect();
    let n = frames.len();
    let until = Instant::now() + Duration::from_millis(300 + 100 * n as u64 + 4000);
    let sink = t
        .sink
        .spawn(move || Raw::open(addr::SINK_IF).collect(until));
    std::thread::sleep(Duration::from_millis(200));
    let back = t
        .gen
        .run(move || {
            let raw = Raw::open(addr::GEN_IF);
            for f in &frames {
                raw.send(f);
                std::thread::sleep(Duration::from_millis(100));
            }
            raw.collect(until)
        })
        .unwrap();
    let at_sink = sink.join().unwrap().unwrap();
    (cases.iter())
        .map(|c| {
            let p = c.spec.src_port;
            Outcome {
                forwarded: at_sink.iter().any(|f| udp_sport(f, 14) == Some(p)),
                icmp: back
                    .iter()
                    .filter_map(|f| icmp_error(f))
                    .filter(|e| e.2 == p)
                    .map(|e| (e.0, e.1))
                    .collect(),
            }
        })
        .collect()
}

fn table(cases: &[Case], kernel: &[Outcome], ours: &[Outcome]) -> String {
    let mut s = String::new();
    for (c, (k, o)) in cases.iter().zip(kernel.iter().zip(ours)) {
        let mark = if k == o { " " } else { "≠" };
        s += &format!("{mark} {:<42} kernel {k:?}  llrouter {o:?}\n", c.name);
    }
    s
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn each_frame_ends_as_the_kernel_ends_it() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-par").expect("topology");
    gen_sources(&t);
    // A smaller MTU towards the sink: frames too big for it, with DF and without.
    t.router
        .ip(&["link", "set", addr::RTR_OUT_IF, "mtu", "1400"])
        .unwrap();
    let cases = cases();
    let kernel = probe(&t, &cases);
    // The probe works: the plain frames went through, the expiring ones came back.
    let of = |name: &str| &kernel[cases.iter().position(|c| c.name == name).unwrap()];
    assert!(
        of("ipv4 forwarded").forwarded && of("ipv6 forwarded").forwarded,
        "{kernel:?}"
    );
    assert_eq!(of("ipv4 ttl 1").icmp, vec![(11, 0)]);
    // What the kernel's run learnt about neighbours (failed entries answer at once) goes.
    for fam in ["-4", "-6"] {
        let o = (t.router.command("ip"))
            .args([fam, "neigh", "flush", "nud", "failed"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let dir = TempDir::new("parity");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ours = probe(&t, &cases);
    router.finish().unwrap();
    let t = table(&cases, &kernel, &ours);
    eprintln!("{t}");
    for (i, c) in cases.iter().enumerate() {
        match DEVIATIONS.iter().find(|d| d.0 == c.name) {
            None => assert_eq!(kernel[i], ours[i], "{}:\n{t}", c.name),
            Some((_, why)) => assert_eq!(
                ours[i],
                Outcome {
                    forwarded: false,
                    icmp: vec![]
                },
                "{} ({why}):\n{t}",
                c.name
            ),
        }
    }
}

/// Where llrouter decides otherwise than Linux, on purpose: it drops these silently.
const DEVIATIONS: &[(&str, &str)] = &[
    (
        "ipv4 from link-local",
        "RFC 3927 section 7: a router MUST NOT forward a packet with a link-local source",
    ),
    (
        "ipv4 to link-local",
        "RFC 3927 section 7: a router MUST NOT forward a packet with a link-local destination \
         (Linux answers no route here, and would forward it along a default route)",
    ),
    (
        "ipv4 from class E",
        "RFC 1812 section 5.3.7: a router SHOULD NOT forward a packet from a reserved address",
    ),
];

// Not compared: an IPv6 packet to a link-local address goes to the kernel in XDP (it is the
// link's, not llrouter's), and the kernel's own answer depends on its neighbour state (no route
// the first time, address unreachable after), so two runs of the kernel alone differ.

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn kernel_forwarding_off_is_said_at_start() {
    use std::io::BufReader;
    use std::process::{Command, Stdio};
    llr_io::sys::require_root();
    let t = Topology::new("llr-fwdoff").expect("topology");
    // Debian's defaults.
    t.router.sysctl("net.ipv4.ip_forward", "0").unwrap();
    t.router
        .sysctl("net.ipv6.conf.all.forwarding", "0")
        .unwrap();
    let dir = TempDir::new("fwd-off");
    let cfg = dir.router_config(CONFIG);
    let mut child = Running(
        Command::new("ip")
            .args(["netns", "exec", t.router.name()])
            .arg(env!("CARGO_BIN_EXE_llrouter"))
            .args(["run", "--duration", "20", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start llrouter"),
    );
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let said = wait_for_line(&mut err, "kernel forwarding is off for IPv6");
    assert!(
        said.contains("kernel forwarding is off for IPv4") && said.contains("IP options"),
        "{said}"
    );
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn reverse_path_filtering_as_rp_filter_says() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-rpf").expect("topology");
    let v4 = |src: &str, ttl: u8| FrameSpec {
        dst_mac: mac(addr::RTR_IN_MAC),
        src_mac: mac(addr::GEN_MAC),
        src: ip(src),
        dst: ip(addr::SINK_V4),
        protocol: 17,
        ttl,
        dst_port: 7000,
        payload_len: 32,
        ..FrameSpec::default()
    };
    let cases: Vec<Case> = [
        plain("from the generator's subnet", v4(addr::GEN_V4, 64)),
        plain(
            "from the sink's subnet, on the other side",
            v4("10.71.2.9", 64),
        ),
        plain("from an address with no route back", v4("192.0.2.1", 64)),
        plain("no route back, ttl 1", v4("192.0.2.1", 1)),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, mut c)| {
        c.spec.src_port = port_of(i);
        c
    })
    .collect();
    for (mode, want) in [
        ("1", [true, false, false, false]),
        ("2", [true, true, false, false]),
    ] {
        t.router.sysctl("net.ipv4.conf.all.rp_filter", "0").unwrap();
        let key = format!("net.ipv4.conf.{}.rp_filter", addr::RTR_IN_IF);
        t.router.sysctl(&key, mode).unwrap();
        let kernel = probe(&t, &cases);
        let dir = TempDir::new(&format!("rpf-{mode}"));
        let router = RouterThread::start(&t, dir.router_config(CONFIG));
        let ours = probe(&t, &cases);
        router.finish().unwrap();
        let tab = table(&cases, &kernel, &ours);
        let got: Vec<bool> = kernel.iter().map(|o| o.forwarded).collect();
        assert_eq!(got, want, "rp_filter {mode}: the kernel\n{tab}");
        assert_eq!(kernel, ours, "rp_filter {mode}\n{tab}");
    }
    // Changed while llrouter runs (the kernel announces it over netlink): strict, then loose.
    let key = format!("net.ipv4.conf.{}.rp_filter", addr::RTR_IN_IF);
    t.router.sysctl(&key, "1").unwrap();
    let dir = TempDir::new("rpf-live");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let strict: Vec<bool> = probe(&t, &cases).iter().map(|o| o.forwarded).collect();
    t.router.sysctl(&key, "2").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let loose: Vec<bool> = probe(&t, &cases).iter().map(|o| o.forwarded).collect();
    router.finish().unwrap();
    assert_eq!(strict, [true, false, false, false], "strict at start");
    assert_eq!(
        loose,
        [true, true, false, false],
        "loose half a second after the change"
    );
}

/// The host configuration of [`policy_routing_as_ip_rule_says`]: rules of both families, and
/// tables 100–103 beside main.
fn policy_config() -> String {
    let (s4, s6, g4, out, inn) = (
        addr::SINK_V4,
        addr::SINK_V6,
        addr::GEN_V4,
        addr::RTR_OUT_IF,
        addr::RTR_IN_IF,
    );
    let (bh4, bh6) = (own_source(false, 63), own_source(true, 63));
    let quiet4 = own_source(false, 62);
    format!(
        "rule add to 10.98.0.0/16 table 100 prio 100
route add blackhole 10.98.1.0/24 table 100
route add 10.98.2.0/24 via {s4} dev {out} table 100
route add throw 10.98.3.0/24 table 100
route add unreachable 10.98.4.0/24 table 100
route add prohibit 10.98.5.0/24 table 100
route add 10.98.3.0/24 via {s4} dev {out}
rule add from {bh4} blackhole prio 110
rule add iif {inn} ipproto udp dport 7001 prohibit prio 120
rule add to 10.97.0.0/16 goto 200 prio 130
rule add to 10.97.0.0/16 blackhole prio 140
rule add to 10.97.0.0/16 table 100 prio 200
route add 10.97.0.0/16 via {s4} dev {out} table 100
rule add to 10.96.0.0/16 table 102 suppress_prefixlength 16 prio 150
route add 10.96.0.0/16 via {g4} dev {inn} table 102
route add 10.96.1.0/24 via {s4} dev {out} table 102
rule add to 10.95.0.0/16 unreachable prio 160
rule add iif lo to {quiet4} blackhole prio 170
rule add not to 0.0.0.0/1 blackhole prio 175
rule add fwmark 0x1 to 10.92.0.0/16 blackhole prio 190
route add 10.92.0.0/16 via {s4} dev {out}
rule add not fwmark 51820 table 103 prio 191
rule add to 10.93.0.0/16 uidrange 0-0 prohibit prio 195
route add 10.91.0.0/16 via {s4} dev {out} table 103
-6 rule add to fd98::/16 table 100 prio 100
-6 route add blackhole fd98:1::/48 table 100
-6 route add fd98:2::/48 via {s6} dev {out} table 100
-6 route add throw fd98:3::/48 table 100
-6 route add unreachable fd98:4::/48 table 100
-6 route add prohibit fd98:5::/48 table 100
-6 route add fd98:3::/48 via {s6} dev {out}
-6 rule add from {bh6} blackhole prio 110
-6 rule add iif {inn} ipproto udp dport 7001 prohibit prio 120
-6 rule add to fd95::/32 unreachable prio 160
"
    )
}

fn policy_cases() -> Vec<Case> {
    let (g4, s4, g6, s6) = (addr::GEN_V4, addr::SINK_V4, addr::GEN_V6, addr::SINK_V6);
    let from = |a: IpAddr, dst: &str| FrameSpec {
        src: a,
        ..v4(g4, dst, 64)
    };
    let dport = |spec: FrameSpec| FrameSpec {
        dst_port: 7001,
        ..spec
    };
    let cases = vec![
        plain("ipv4 main still", v4(g4, s4, 64)),
        plain("ipv4 table 100 blackhole", v4(g4, "10.98.1.1", 64)),
        plain("ipv4 table 100 route", v4(g4, "10.98.2.1", 64)),
        plain("ipv4 table 100 throw, main routes", v4(g4, "10.98.3.1", 64)),
        plain("ipv4 table 100 unreachable", v4(g4, "10.98.4.1", 64)),
        plain("ipv4 table 100 prohibit", v4(g4, "10.98.5.1", 64)),
        plain(
            "ipv4 table 100 nothing, main nothing",
            v4(g4, "10.98.6.1", 64),
        ),
        plain(
            "ipv4 from a blackholed source",
            from(own_source(false, 63), s4),
        ),
        plain("ipv4 udp dport 7001 prohibited", dport(v4(g4, s4, 64))),
        plain("ipv4 goto past a blackhole", v4(g4, "10.97.0.1", 64)),
        plain("ipv4 /16 suppressed, main nothing", v4(g4, "10.96.2.1", 64)),
        plain("ipv4 /24 not suppressed", v4(g4, "10.96.1.1", 64)),
        plain("ipv4 rule unreachable", v4(g4, "10.95.0.1", 64)),
        plain(
            "ipv4 the way back blackholed (iif lo)",
            from(own_source(false, 62), "10.99.0.1"),
        ),
        plain("ipv4 not to 0/1: blackhole", v4(g4, "192.0.2.1", 64)),
        plain("ipv4 fwmark 1 never matches", v4(g4, "10.92.0.1", 64)),
        plain("ipv4 not fwmark 51820 table 103", v4(g4, "10.91.0.1", 64)),
        plain("ipv4 ttl 1 in table 100", v4(g4, "10.98.2.1", 1)),
        plain("ipv4 uidrange rule, the kernel's", v4(g4, "10.93.0.1", 64)),
        plain("ipv6 main still", v4(g6, s6, 64)),
        plain("ipv6 table 100 blackhole", v4(g6, "fd98:1::1", 64)),
        plain("ipv6 table 100 route", v4(g6, "fd98:2::1", 64)),
        plain("ipv6 table 100 throw, main routes", v4(g6, "fd98:3::1", 64)),
        plain("ipv6 table 100 unreachable", v4(g6, "fd98:4::1", 64)),
        plain("ipv6 table 100 prohibit", v4(g6, "fd98:5::1", 64)),
        plain(
            "ipv6 table 100 nothing, main nothing",
            v4(g6, "fd98:6::1", 64),
        ),
        plain(
            "ipv6 from a blackholed source",
            FrameSpec {
                src: own_source(true, 63),
                ..v4(g6, s6, 64)
            },
        ),
        plain("ipv6 udp dport 7001 prohibited", dport(v4(g6, s6, 64))),
        plain("ipv6 rule unreachable", v4(g6, "fd95::1", 64)),
    ];
    numbered(cases, 0)
}

/// What changes while llrouter runs, and the frames that tell: rule 100 goes (10.98.0.0/16 is
/// main's again: nothing there) and a blackhole rule comes for 10.71.2.0/24 (the sink).
const POLICY_CHANGE: &str = "rule del prio 100
-6 rule del prio 100
rule add to 10.71.2.0/24 blackhole prio 105
";

fn policy_change_cases(first: usize) -> Vec<Case> {
    let (g4, s4, g6) = (addr::GEN_V4, addr::SINK_V4, addr::GEN_V6);
    numbered(
        vec![
            plain(
                "after: ipv4 was table 100's blackhole",
                v4(g4, "10.98.1.1", 64),
            ),
            plain("after: ipv4 was table 100's route", v4(g4, "10.98.2.1", 64)),
            plain("after: ipv6 was table 100's route", v4(g6, "fd98:2::1", 64)),
            plain("after: ipv4 to the sink, now blackholed", v4(g4, s4, 64)),
            plain("after: control, no route", v4(g4, "10.99.0.1", 64)),
        ],
        first,
    )
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn policy_routing_as_ip_rule_says() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-prule").expect("topology");
    gen_sources(&t);
    ip_batch(&t, &policy_config());
    let cases = policy_cases();
    let later = policy_change_cases(cases.len());
    assert!(
        cases.len() + later.len() <= 62,
        "sources 62 and 63 are the rules'"
    );
    let kernel = probe(&t, &cases);
    ip_batch(&t, POLICY_CHANGE);
    let kernel_later = probe(&t, &later);
    // Back to the first configuration for llrouter's run.
    ip_batch(
        &t,
        "rule del prio 105\nrule add to 10.98.0.0/16 table 100 prio 100\n\
         -6 rule add to fd98::/16 table 100 prio 100\n",
    );
    // The probe tells the rules apart: the kernel forwarded, dropped and answered as set up.
    let of = |name: &str| &kernel[cases.iter().position(|c| c.name == name).unwrap()];
    let tab = table(&cases, &kernel, &kernel);
    assert!(of("ipv4 table 100 route").forwarded, "{tab}");
    assert!(!of("ipv4 table 100 blackhole").forwarded, "{tab}");
    assert_eq!(of("ipv4 table 100 prohibit").icmp, vec![(3, 13)], "{tab}");
    assert_eq!(
        of("ipv4 /16 suppressed, main nothing").icmp,
        vec![(3, 0)],
        "{tab}"
    );
    assert!(of("ipv6 table 100 route").forwarded, "{tab}");
    for fam in ["-4", "-6"] {
        let o = (t.router.command("ip"))
            .args([fam, "neigh", "flush", "nud", "failed"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let dir = TempDir::new("policy");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ours = probe(&t, &cases);
    // Operators see the rules as llrouter evaluates them, and which one routes a packet.
    let sock = dir.join("ctl.sock");
    let (code, rules, err) = common::ctl_bin(&sock, &["show", "fib", "rules"]);
    assert_eq!(code, 0, "{err}");
    for want in [
        "  100: from all to 10.98.0.0/16 lookup 100\n",
        &format!(
            "  120: from all iif {} ipproto 17 dport 7001 prohibit\n",
            addr::RTR_IN_IF
        ),
        "  150: from all to 10.96.0.0/16 lookup 102 suppress_prefixlength 16\n",
        "  191: not from all fwmark 0xca6c lookup 103\n",
        "  195: from all to 10.93.0.0/16 (to the kernel: uidrange)\n",
        "  table 102: 2 routes\n",
    ] {
        assert!(rules.contains(want), "{want:?} in:\n{rules}");
    }
    let (code, got, err) = common::ctl_bin(&sock, &["show", "fib", "10.98.2.1"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        got.contains("via route 10.98.2.0/24")
            && got.contains("rule 100: from all to 10.98.0.0/16 lookup 100, table 100"),
        "{got}"
    );
    let (_, got, _) = common::ctl_bin(&sock, &["show", "fib", "10.98.1.1"]);
    assert!(
        got.contains("via route 10.98.1.0/24 dev (blackhole)")
            && got.contains("blackhole: dropped silently"),
        "{got}"
    );
    ip_batch(&t, POLICY_CHANGE);
    // Rule events reach the forwarder within a second.
    std::thread::sleep(Duration::from_millis(1000));
    let ours_later = probe(&t, &later);
    router.finish().unwrap();
    let tab = table(&cases, &kernel, &ours) + &table(&later, &kernel_later, &ours_later);
    eprintln!("{tab}");
    // The change took effect in the kernel: table 100's blackhole and route are gone (main
    // has nothing there), and so is the sink.
    let no_route = vec![(3, 0)];
    assert!(
        kernel_later[0].icmp == no_route
            && kernel_later[1].icmp == no_route
            && !kernel_later[3].forwarded,
        "{tab}"
    );
    assert_eq!(kernel, ours, "\n{tab}");
    assert_eq!(kernel_later, ours_later, "\n{tab}");
}

/// The second next hop on the sink's link (a neighbour entry only: the sink's veth sees its
/// frames too).
const HOP2_MAC: &str = "02:00:00:00:02:02";

/// Sends `flows` UDP flows (source ports 20000…) of `per_flow` datagrams each, interleaved,
/// from the generator to `dst`, and returns per flow the destination MACs its datagrams
/// arrived at the sink's link with, and how many arrived.
fn spread(t: &Topology, dst: &str, flows: u16, per_flow: usize) -> Vec<(Vec<[u8; 6]>, usize)> {
    let src = if dst.contains(':') {
        addr::GEN_V6
    } else {
        addr::GEN_V4
    };
    let frames: Vec<Vec<u8>> = (0..per_flow)
        .flat_map(|_| 0..flows)
        .map(|i| {
            frame(&FrameSpec {
                src_port: 20_000 + i,
                ..v4(src, dst, 64)
            })
        })
        .collect();
    let until = Instant::now() + Duration::from_millis(300 + frames.len() as u64 / 2 + 1500);
    let sink = t
        .sink
        .spawn(move || Raw::open(addr::SINK_IF).collect(until));
    std::thread::sleep(Duration::from_millis(200));
    t.gen
        .run(move || {
            let raw = Raw::open(addr::GEN_IF);
            for f in &frames {
                raw.send(f);
                std::thread::sleep(Duration::from_micros(400));
            }
        })
        .unwrap();
    let got = sink.join().unwrap().unwrap();
    (0..flows)
        .map(|i| {
            let mine: Vec<&Vec<u8>> = (got.iter())
                .filter(|f| udp_sport(f, 14) == Some(20_000 + i))
                .collect();
            let mut macs: Vec<[u8; 6]> = mine.iter().map(|f| f[..6].try_into().unwrap()).collect();
            macs.sort();
            macs.dedup();
            (macs, mine.len())
        })
        .collect()
}

/// Of `spread`'s flows: how many took the second next hop; asserts that every datagram
/// arrived and that no flow was split over both.
fn on_second_hop(who: &str, per_flow: usize, got: &[(Vec<[u8; 6]>, usize)]) -> usize {
    let hop2 = mac(HOP2_MAC);
    for (i, (macs, n)) in got.iter().enumerate() {
        assert_eq!(
            *n, per_flow,
            "{who}: flow {i}: {n} of {per_flow} datagrams arrived"
        );
        assert_eq!(macs.len(), 1, "{who}: flow {i} took {} paths", macs.len());
    }
    got.iter().filter(|(m, _)| m[0] == hop2).count()
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn multipath_routes_spread_flows_as_the_kernel_does() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-ecmp").expect("topology");
    let out = addr::RTR_OUT_IF;
    ip_batch(
        &t,
        &format!(
            "neigh replace 10.71.2.2 lladdr {HOP2_MAC} dev {out} nud permanent
neigh replace fd71:2::2 lladdr {HOP2_MAC} dev {out} nud permanent
route add 10.90.0.0/16 nexthop via 10.71.2.1 dev {out} weight 1 nexthop via 10.71.2.2 dev {out} weight 3
route add fd90::/16 nexthop via fd71:2::1 dev {out} weight 1 nexthop via fd71:2::2 dev {out} weight 3
nexthop add id 1 via 10.71.2.1 dev {out}
nexthop add id 2 via 10.71.2.2 dev {out}
nexthop add id 10 group 1/2
route add 10.89.0.0/16 nhid 10
"
        ),
    );
    let (flows, per_flow) = (400u16, 3);
    // (destination, share of the second hop): weights 1 and 3, or a group of equals.
    let dests = [("10.90.1.1", 0.75), ("fd90::1", 0.75), ("10.89.1.1", 0.5)];
    let run = |who: &str| -> Vec<usize> {
        dests
            .iter()
            .map(|(d, _)| {
                on_second_hop(
                    &format!("{who} {d}"),
                    per_flow,
                    &spread(&t, d, flows, per_flow),
                )
            })
            .collect()
    };
    for fam in ["ipv4", "ipv6"] {
        let key = format!("net.{fam}.fib_multipath_hash_policy");
        t.router.sysctl(&key, "1").unwrap();
    }
    let kernel = run("kernel");
    let dir = TempDir::new("ecmp");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ours = run("llrouter");
    // An operator can ask which path a flow takes.
    let (code, got, err) = common::ctl_bin(
        &dir.join("ctl.sock"),
        &[
            "show",
            "fib",
            "10.90.1.1",
            "--sport",
            "20001",
            "--dport",
            "7000",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        got.contains("multipath, this flow's path of 2: via 10.71.2.1 dev veth-rout weight 1, via 10.71.2.2 dev veth-rout weight 3"),
        "{got}"
    );
    router.finish().unwrap();
    eprintln!("flows on the second next hop of {flows}: kernel {kernel:?}, llrouter {ours:?}");
    for (i, (d, share)) in dests.iter().enumerate() {
        // Each flow picks a path at random by its hash: binomial, and 5 standard deviations
        // either way of the weights' share fail one honest run in about 1.7 million.
        let n = f64::from(flows);
        let (mean, sd) = (n * share, (n * share * (1.0 - share)).sqrt());
        let ok = |k: usize| (k as f64 - mean).abs() <= 5.0 * sd;
        assert!(
            ok(kernel[i]),
            "{d}: the kernel put {} of {flows} on the second hop",
            kernel[i]
        );
        assert!(
            ok(ours[i]),
            "{d}: llrouter put {} of {flows} on the second hop",
            ours[i]
        );
    }
    // With the L3 policy (Linux's default) one source and destination is one path, whatever
    // the ports; read at start, as the kernel's other sysctls.
    for fam in ["ipv4", "ipv6"] {
        let key = format!("net.{fam}.fib_multipath_hash_policy");
        t.router.sysctl(&key, "0").unwrap();
    }
    let all_one = |k: usize| k == 0 || k == usize::from(flows);
    let kernel = on_second_hop(
        "kernel, L3",
        per_flow,
        &spread(&t, "10.90.1.1", flows, per_flow),
    );
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ours = on_second_hop(
        "llrouter, L3",
        per_flow,
        &spread(&t, "10.90.1.1", flows, per_flow),
    );
    router.finish().unwrap();
    assert!(
        all_one(kernel) && all_one(ours),
        "L3: kernel {kernel}, llrouter {ours}"
    );
}
