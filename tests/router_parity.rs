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
        // 8 MB, not the default ~200 KB (some 300 small frames): a collector thread the host
        // descheduled for 100 ms must not lose frames the router delivered.
        assert!(
            llr_io::sys::set_rcvbuf(fd, 8 << 20).is_some(),
            "SO_RCVBUF: {}",
            std::io::Error::last_os_error()
        );
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

/// One crafted frame and what to call it: built from `spec`, stamped with its key (see
/// [`stamp`]), then changed by `edit`.
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
    let mut sum: u32 = (0..ihl.min(f.len() - 14))
        .step_by(2)
        .map(|i| u32::from(u16::from_be_bytes([f[14 + i], f[15 + i]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// `options` (a multiple of 4 bytes) inserted after a 20-byte IPv4 header.
fn ipv4_options(f: &mut Vec<u8>, options: &[u8]) {
    assert_eq!(options.len() % 4, 0);
    f.splice(34..34, options.iter().copied());
    f[14] = 0x45 + (options.len() / 4) as u8;
    let tot = u16::from_be_bytes([f[16], f[17]]) + options.len() as u16;
    f[16..18].copy_from_slice(&tot.to_be_bytes());
    ipv4_checksum(f);
}

/// Four bytes of IPv4 options (NOP, NOP, NOP, end of list).
fn with_ipv4_options(f: &mut Vec<u8>) {
    ipv4_options(f, &[1, 1, 1, 0]);
}

/// The IPv4 TOS byte set to `tos`.
fn ipv4_tos(f: &mut [u8], tos: u8) {
    f[15] = tos;
    ipv4_checksum(f);
}

/// The IPv6 traffic class set to `tc`.
fn ipv6_tc(f: &mut [u8], tc: u8) {
    f[14] = 0x60 | (tc >> 4);
    f[15] = (tc << 4) | (f[15] & 0xf);
}

/// The IPv4 flags and fragment offset field set to `v`.
fn ipv4_frag(f: &mut [u8], v: u16) {
    f[20..22].copy_from_slice(&v.to_be_bytes());
    ipv4_checksum(f);
}

/// An IPv6 extension header (`body` after its next-header byte) inserted before the upper
/// layer; `kind` is its protocol number.
fn ipv6_ext(f: &mut Vec<u8>, kind: u8, body: &[u8]) {
    assert_eq!((body.len() + 1) % 8, 0);
    let next = f[20];
    f.splice(54..54, std::iter::once(next).chain(body.iter().copied()));
    f[20] = kind;
    let plen = u16::from_be_bytes([f[18], f[19]]) + body.len() as u16 + 1;
    f[18..20].copy_from_slice(&plen.to_be_bytes());
}

/// An IPv6 hop-by-hop header of 8 bytes (PadN) before the UDP header.
fn with_hop_by_hop(f: &mut Vec<u8>) {
    ipv6_ext(f, 0, &[0, 1, 4, 0, 0, 0, 0]);
}

/// A hop-by-hop header holding one 4-byte option of type `opt` (then PadN of 0).
fn hop_by_hop_option(f: &mut Vec<u8>, opt: u8) {
    ipv6_ext(f, 0, &[0, opt, 2, 0, 0, 1, 0]);
}

/// An IPv6 fragment header with offset and M flag `off_m`, identification = the UDP source
/// port (the case's key, which a later fragment has no other place for).
fn ipv6_fragment(f: &mut Vec<u8>, off_m: u16) {
    let id = u32::from(u16::from_be_bytes([f[54], f[55]]));
    let mut body = vec![0u8];
    body.extend_from_slice(&off_m.to_be_bytes());
    body.extend_from_slice(&id.to_be_bytes());
    ipv6_ext(f, 44, &body);
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

/// A TCP SYN (data offset 5).
fn tcp_syn(f: &mut [u8]) {
    let l4 = if f[12] == 0x86 { 54 } else { 34 };
    f[l4 + 12] = 0x50;
    f[l4 + 13] = 0x02;
}

/// ICMP or ICMPv6 type and code of a frame built with protocol 1 or 58.
fn icmp_kind(f: &mut [u8], t: u8, c: u8) {
    let l4 = if f[12] == 0x86 { 54 } else { 34 };
    f[l4] = t;
    f[l4 + 1] = c;
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

fn with<F: FnOnce(&mut FrameSpec)>(mut spec: FrameSpec, f: F) -> FrameSpec {
    f(&mut spec);
    spec
}

fn cases() -> Vec<Case> {
    let (g4, s4, g6, s6) = (addr::GEN_V4, addr::SINK_V4, addr::GEN_V6, addr::SINK_V6);
    let (r4, r6) = (addr::RTR_IN_V4, addr::RTR_IN_V6);
    let big = |spec: FrameSpec, len: usize| with(spec, |s| s.payload_len = len);
    let proto = |spec: FrameSpec, p: u8| with(spec, |s| s.protocol = p);
    let l2 = |spec: FrameSpec, m: &str| with(spec, |s| s.dst_mac = mac(m));
    let cases = vec![
        plain("ipv4 forwarded", v4(g4, s4, 64)),
        plain("ipv4 ttl 2", v4(g4, s4, 2)),
        plain("ipv4 ttl 255", v4(g4, s4, 255)),
        plain("ipv4 ttl 1", v4(g4, s4, 1)),
        plain("ipv4 ttl 0", v4(g4, s4, 0)),
        plain("ipv4 ttl 1 with no route", v4(g4, "10.99.0.1", 1)),
        plain("ipv4 no route", v4(g4, "10.99.0.1", 64)),
        plain("ipv4 to 100.64.0.1 (no route)", v4(g4, "100.64.0.1", 64)),
        plain("ipv4 to 0.1.2.3 (no route)", v4(g4, "0.1.2.3", 64)),
        plain("ipv4 to 0.0.0.0", v4(g4, "0.0.0.0", 64)),
        plain("ipv4 to 127.0.0.1", v4(g4, "127.0.0.1", 64)),
        plain("ipv4 from 0.1.2.3", v4("0.1.2.3", s4, 64)),
        plain("ipv4 from 0.0.0.0", v4("0.0.0.0", s4, 64)),
        plain("ipv4 from the router's ingress address", v4(r4, s4, 64)),
        plain(
            "ipv4 from the router's egress address",
            v4(addr::RTR_OUT_V4, s4, 64),
        ),
        plain("ipv4 from the sink's own address", v4(s4, s4, 64)),
        plain("ipv4 from loopback", v4("127.0.0.1", s4, 64)),
        plain("ipv4 from multicast", v4("224.0.0.9", s4, 64)),
        plain("ipv4 from 255.255.255.255", v4("255.255.255.255", s4, 64)),
        plain("ipv4 from the ingress broadcast", v4("10.71.1.255", s4, 64)),
        plain("ipv4 to the sink's broadcast", v4(g4, "10.71.2.255", 64)),
        plain(
            "ipv4 to the sink's network address",
            v4(g4, "10.71.2.0", 64),
        ),
        plain("ipv4 to the ingress broadcast", v4(g4, "10.71.1.255", 64)),
        plain("ipv4 to 255.255.255.255", v4(g4, "255.255.255.255", 64)),
        plain("ipv4 to 224.0.0.1", v4(g4, "224.0.0.1", 64)),
        plain("ipv4 to 239.1.1.1", v4(g4, "239.1.1.1", 64)),
        plain("ipv4 to the router's ingress address", v4(g4, r4, 64)),
        plain(
            "ipv4 to the router's egress address",
            v4(g4, addr::RTR_OUT_V4, 64),
        ),
        plain(
            "ipv4 to the router's egress address, ttl 1",
            v4(g4, addr::RTR_OUT_V4, 1),
        ),
        plain("ipv4 from link-local", v4("169.254.1.1", s4, 64)),
        plain("ipv4 to link-local", v4(g4, "169.254.1.1", 64)),
        plain("ipv4 from class E", v4("240.0.0.1", s4, 64)),
        plain("ipv4 to class E", v4(g4, "240.0.0.1", 64)),
        plain("ipv4 dscp ef", with(v4(g4, s4, 64), |s| s.dscp = 46)),
        edited("ipv4 ecn ce", v4(g4, s4, 64), |f| ipv4_tos(f, 0x03)),
        edited("ipv4 tos 0xb8, ttl 1", v4(g4, s4, 1), |f| ipv4_tos(f, 0xb8)),
        edited("ipv4 tcp syn", proto(v4(g4, s4, 64), 6), |f| tcp_syn(f)),
        edited("ipv4 tcp syn, ttl 1", proto(v4(g4, s4, 1), 6), |f| {
            tcp_syn(f)
        }),
        edited("ipv4 icmp echo", proto(v4(g4, s4, 64), 1), |f| {
            icmp_kind(f, 8, 0)
        }),
        edited("ipv4 icmp echo, ttl 1", proto(v4(g4, s4, 1), 1), |f| {
            icmp_kind(f, 8, 0)
        }),
        edited(
            "ipv4 icmp error, ttl 1 (no error about an error)",
            proto(v4(g4, s4, 1), 1),
            |f| icmp_kind(f, 3, 1),
        ),
        plain("ipv4 gre", proto(v4(g4, s4, 64), 47)),
        plain("ipv4 protocol 253", proto(v4(g4, s4, 64), 253)),
        plain("ipv4 udp, no payload", big(v4(g4, s4, 64), 0)),
        edited("ipv4 bytes after total length", v4(g4, s4, 64), |f| {
            f.extend_from_slice(&[0xaa; 6])
        }),
        edited("ipv4 total length past the frame", v4(g4, s4, 64), |f| {
            f[17] += 20;
            ipv4_checksum(f);
        }),
        edited("ipv4 bad header checksum", v4(g4, s4, 64), |f| {
            f[24] ^= 0xff
        }),
        edited("ipv4 version 5", v4(g4, s4, 64), |f| {
            f[14] = 0x55;
            ipv4_checksum(f);
        }),
        edited("ipv4 header length 4", v4(g4, s4, 64), |f| {
            f[14] = 0x44;
            ipv4_checksum(f);
        }),
        edited("ipv4 with options", v4(g4, s4, 64), with_ipv4_options),
        edited("ipv4 options, ttl 1", v4(g4, s4, 1), with_ipv4_options),
        edited("ipv4 record route", v4(g4, s4, 64), |f| {
            ipv4_options(f, &[7, 7, 4, 0, 0, 0, 0, 1])
        }),
        edited("ipv4 timestamp, prespecified", v4(g4, s4, 64), |f| {
            ipv4_options(f, &[68, 12, 5, 3, 10, 99, 9, 9, 0, 0, 0, 0])
        }),
        edited("ipv4 router alert", v4(g4, s4, 64), |f| {
            ipv4_options(f, &[148, 4, 0, 0])
        }),
        edited("ipv4 loose source route", v4(g4, s4, 64), |f| {
            ipv4_options(f, &[131, 7, 4, 10, 71, 2, 1, 0])
        }),
        edited("ipv4 unknown option", v4(g4, s4, 64), |f| {
            ipv4_options(f, &[30, 4, 0, 0])
        }),
        edited("ipv4 option too short", v4(g4, s4, 64), |f| {
            ipv4_options(f, &[1, 1, 68, 2])
        }),
        edited("ipv4 first fragment", v4(g4, s4, 64), |f| first_fragment(f)),
        edited("ipv4 middle fragment", v4(g4, s4, 64), |f| {
            ipv4_frag(f, 0x2000 | 185)
        }),
        edited("ipv4 last fragment", v4(g4, s4, 64), |f| ipv4_frag(f, 185)),
        edited("ipv4 fragment, ttl 1", v4(g4, s4, 1), |f| {
            ipv4_frag(f, 0x2000 | 185)
        }),
        plain("ipv4 exactly the MTU, DF", big(v4(g4, s4, 64), 1372)),
        plain("ipv4 one byte over the MTU, DF", big(v4(g4, s4, 64), 1373)),
        plain("ipv4 too big with DF", big(v4(g4, s4, 64), 1450)),
        plain("ipv4 too big with DF, ttl 1", big(v4(g4, s4, 1), 1450)),
        edited("ipv4 too big without DF", big(v4(g4, s4, 64), 1450), |f| {
            without_df(f)
        }),
        edited(
            "ipv4 too big first fragment",
            big(v4(g4, s4, 64), 1450),
            |f| first_fragment(f),
        ),
        plain(
            "ipv4 link-layer broadcast",
            l2(v4(g4, s4, 64), "ff:ff:ff:ff:ff:ff"),
        ),
        plain(
            "ipv4 link-layer multicast",
            l2(v4(g4, s4, 64), "01:00:5e:00:00:01"),
        ),
        plain(
            "ipv4 to another host's MAC",
            l2(v4(g4, s4, 64), "02:00:00:00:01:99"),
        ),
        plain(
            "ipv4 vlan 100 (no such link)",
            with(v4(g4, s4, 64), |s| {
                s.vlan = Some(llr_core::wire::Vlan { id: 100, pcp: 0 })
            }),
        ),
        plain(
            "ipv4 to a silent host on the sink's link",
            v4(g4, "10.71.2.77", 64),
        ),
        plain(
            "ipv4 back out of its own link, via a gateway there",
            v4(g4, "10.86.1.1", 64),
        ),
        plain(
            "ipv4 to a host on the sender's own link",
            v4(g4, "10.71.1.3", 64),
        ),
        plain(
            "ipv4 back out of its own link, from off-link",
            v4("192.0.2.77", "10.86.1.1", 64),
        ),
        plain("ipv6 forwarded", v4(g6, s6, 64)),
        plain("ipv6 hop limit 2", v4(g6, s6, 2)),
        plain("ipv6 hop limit 255", v4(g6, s6, 255)),
        plain("ipv6 hop limit 1", v4(g6, s6, 1)),
        plain("ipv6 hop limit 0", v4(g6, s6, 0)),
        plain("ipv6 no route", v4(g6, "2001:db8::1", 64)),
        plain("ipv6 no route, hop limit 1", v4(g6, "2001:db8::1", 1)),
        plain("ipv6 to fd99::1 (no route)", v4(g6, "fd99::1", 64)),
        plain("ipv6 to ::", v4(g6, "::", 64)),
        plain("ipv6 to ::1", v4(g6, "::1", 64)),
        plain(
            "ipv6 to a v4-mapped address",
            v4(g6, "::ffff:10.71.2.1", 64),
        ),
        plain("ipv6 from ::", v4("::", s6, 64)),
        plain("ipv6 from loopback", v4("::1", s6, 64)),
        plain(
            "ipv6 from a v4-mapped address",
            v4("::ffff:10.0.0.1", s6, 64),
        ),
        plain("ipv6 from the router's ingress address", v4(r6, s6, 64)),
        plain("ipv6 from the sink's own address", v4(s6, s6, 64)),
        plain("ipv6 from multicast", v4("ff02::1", s6, 64)),
        plain("ipv6 from link-local", v4("fe80::1", s6, 64)),
        plain("ipv6 to ff0e::1", v4(g6, "ff0e::1", 64)),
        plain("ipv6 to ff02::1", v4(g6, "ff02::1", 64)),
        plain("ipv6 to the router's ingress address", v4(g6, r6, 64)),
        plain(
            "ipv6 to the router's egress address",
            v4(g6, addr::RTR_OUT_V6, 64),
        ),
        plain("ipv6 to the sink subnet's anycast", v4(g6, "fd71:2::", 64)),
        plain(
            "ipv6 traffic class ef",
            with(v4(g6, s6, 64), |s| s.dscp = 46),
        ),
        edited("ipv6 ecn ce", v4(g6, s6, 64), |f| f[15] |= 0x30),
        edited("ipv6 flow label", v4(g6, s6, 64), |f| {
            f[15] |= 0x0a;
            f[16] = 0xbc;
            f[17] = 0xde;
        }),
        plain(
            "ipv6 traffic class ef, hop limit 1",
            with(v4(g6, s6, 1), |s| s.dscp = 46),
        ),
        edited("ipv6 tcp syn", proto(v4(g6, s6, 64), 6), |f| tcp_syn(f)),
        edited("ipv6 icmpv6 echo", proto(v4(g6, s6, 64), 58), |f| {
            icmp_kind(f, 128, 0)
        }),
        edited(
            "ipv6 icmpv6 echo, hop limit 1",
            proto(v4(g6, s6, 1), 58),
            |f| icmp_kind(f, 128, 0),
        ),
        edited(
            "ipv6 icmpv6 error, hop limit 1 (no error about an error)",
            proto(v4(g6, s6, 1), 58),
            |f| icmp_kind(f, 1, 3),
        ),
        plain("ipv6 protocol 253", proto(v4(g6, s6, 64), 253)),
        plain("ipv6 no next header", proto(v4(g6, s6, 64), 59)),
        plain("ipv6 udp, no payload", big(v4(g6, s6, 64), 0)),
        edited("ipv6 bytes after the payload length", v4(g6, s6, 64), |f| {
            f.extend_from_slice(&[0xaa; 6])
        }),
        edited("ipv6 payload length past the frame", v4(g6, s6, 64), |f| {
            f[19] += 20
        }),
        edited("ipv6 version 4", v4(g6, s6, 64), |f| f[14] = 0x40),
        edited(
            "ipv6 with a hop-by-hop header",
            v4(g6, s6, 64),
            with_hop_by_hop,
        ),
        edited(
            "ipv6 hop-by-hop, hop limit 1",
            v4(g6, s6, 1),
            with_hop_by_hop,
        ),
        edited("ipv6 hop-by-hop router alert", v4(g6, s6, 64), |f| {
            ipv6_ext(f, 0, &[0, 5, 2, 0, 0, 1, 0])
        }),
        edited("ipv6 hop-by-hop option to skip", v4(g6, s6, 64), |f| {
            hop_by_hop_option(f, 0x1e)
        }),
        edited("ipv6 hop-by-hop option to discard", v4(g6, s6, 64), |f| {
            hop_by_hop_option(f, 0x5e)
        }),
        edited(
            "ipv6 hop-by-hop option to discard and answer",
            v4(g6, s6, 64),
            |f| hop_by_hop_option(f, 0x9e),
        ),
        edited(
            "ipv6 hop-by-hop option to answer unless multicast",
            v4(g6, s6, 64),
            |f| hop_by_hop_option(f, 0xde),
        ),
        edited(
            "ipv6 hop-by-hop longer than the packet",
            v4(g6, s6, 64),
            |f| ipv6_ext(f, 0, &[30, 1, 4, 0, 0, 0, 0]),
        ),
        edited("ipv6 destination options", v4(g6, s6, 64), |f| {
            ipv6_ext(f, 60, &[0, 1, 4, 0, 0, 0, 0])
        }),
        edited("ipv6 routing header type 0", v4(g6, s6, 64), |f| {
            let mut body = vec![2, 0, 1, 0, 0, 0, 0];
            body.extend_from_slice(&ip6("fd71:2::1"));
            ipv6_ext(f, 43, &body)
        }),
        edited("ipv6 atomic fragment", v4(g6, s6, 64), |f| {
            ipv6_fragment(f, 0)
        }),
        edited("ipv6 first fragment", v4(g6, s6, 64), |f| {
            ipv6_fragment(f, 1)
        }),
        edited("ipv6 later fragment", v4(g6, s6, 64), |f| {
            ipv6_fragment(f, 185 << 3)
        }),
        plain("ipv6 exactly the MTU", big(v4(g6, s6, 64), 1352)),
        plain("ipv6 one byte over the MTU", big(v4(g6, s6, 64), 1353)),
        plain("ipv6 too big", big(v4(g6, s6, 64), 1450)),
        plain("ipv6 too big, hop limit 1", big(v4(g6, s6, 1), 1450)),
        plain(
            "ipv6 link-layer broadcast",
            l2(v4(g6, s6, 64), "ff:ff:ff:ff:ff:ff"),
        ),
        plain(
            "ipv6 link-layer multicast",
            l2(v4(g6, s6, 64), "33:33:00:00:00:01"),
        ),
        plain(
            "ipv6 to another host's MAC",
            l2(v4(g6, s6, 64), "02:00:00:00:01:99"),
        ),
        plain(
            "ipv6 vlan 100 (no such link)",
            with(v4(g6, s6, 64), |s| {
                s.vlan = Some(llr_core::wire::Vlan { id: 100, pcp: 0 })
            }),
        ),
        plain(
            "ipv6 to a silent host on the sink's link",
            v4(g6, "fd71:2::77", 64),
        ),
        plain(
            "ipv6 back out of its own link, via a link-local gateway there",
            v4(g6, "fd86::1", 64),
        ),
        plain(
            "ipv6 to a host on the sender's own link",
            v4(g6, "fd71:1::3", 64),
        ),
        plain(
            "ipv6 back out of its own link, via a global gateway there",
            v4(g6, "fd87::1", 64),
        ),
        plain(
            "ipv6 back out of its own link, from off-link",
            v4("2001:db8:77::1", "fd86::1", 64),
        ),
    ];
    numbered(cases, 0)
}

fn ip6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

/// How many generator addresses [`own_source`] hands out.
const SOURCES: usize = 150;

/// Gives case `i` (counting from `first`) its own UDP source port, and, if it is from the
/// generator's address, its own source address: the kernel limits its ICMP errors per source
/// address (a burst of 5 or 6, then one a second, Debian's defaults, left as they are).
fn numbered(cases: Vec<Case>, first: usize) -> Vec<Case> {
    (cases.into_iter().enumerate())
        .map(|(i, mut c)| {
            let i = first + i;
            assert!(i < SOURCES, "case {i}: only {SOURCES} sources");
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
    for i in 0..SOURCES {
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

/// What happened to a case: the frames that reached the sink's link, and what came back to the
/// generator (ICMP errors quoting the case, TCP and UDP answers to its port), byte for byte
/// from the Ethernet header on, except what Linux does not let another router reproduce:
/// the IPv4 identification of a packet the router (or the sink) originates, and so its header
/// checksum (RFC 6864: any value is valid where DF is set or the packet is not fragmented);
/// the flow label of an ICMPv6 error (RFC 6437: the source picks it; Linux hashes its own
/// secret into it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    forwarded: bool,
    icmp: Vec<(u8, u8)>,
    at_sink: Vec<Vec<u8>>,
    back: Vec<Vec<u8>>,
}

/// The offset of the IP header in an Ethernet frame (one 802.1Q tag skipped).
fn l3_of(f: &[u8]) -> Option<usize> {
    let et = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    match et {
        0x0800 | 0x86dd => Some(14),
        0x8100 => matches!(
            u16::from_be_bytes([*f.get(16)?, *f.get(17)?]),
            0x0800 | 0x86dd
        )
        .then_some(18),
        _ => None,
    }
}

/// The upper-layer protocol of an IPv6 packet and where it starts, past hop-by-hop, routing,
/// destination options and fragment headers; for a later fragment, `(44, id)`: the low 16
/// bits of its identification.
fn ipv6_upper(p: &[u8]) -> Option<(u8, usize)> {
    let (mut next, mut at) = (*p.get(6)?, 40);
    loop {
        match next {
            0 | 43 | 60 => {
                let len = (usize::from(*p.get(at + 1)?) + 1) * 8;
                next = *p.get(at)?;
                at += len;
            }
            44 => {
                let off = u16::from_be_bytes([*p.get(at + 2)?, *p.get(at + 3)?]) & 0xfff8;
                if off != 0 {
                    return Some((
                        44,
                        usize::from(u16::from_be_bytes([*p.get(at + 6)?, *p.get(at + 7)?])),
                    ));
                }
                next = *p.get(at)?;
                at += 8;
            }
            _ => return Some((next, at)),
        }
    }
}

/// The key that ties an IP packet to its case: IPv4's identification (each case's is its
/// port); IPv6's TCP or UDP source port, ICMPv6's identifier field, or the first two bytes of
/// another upper layer (each case's port, see [`stamp`]).
fn key_of(p: &[u8]) -> Option<u16> {
    let at = match p.first()? >> 4 {
        4 => 4,
        6 => match ipv6_upper(p)? {
            (44, id) => return Some(id as u16),
            (58, l4) => l4 + 4,
            (_, l4) => l4,
        },
        _ => return None,
    };
    Some(u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?]))
}

/// For a packet that came back: the key of the packet an ICMP error quotes, or the destination
/// port of a TCP or UDP answer; and the error's (type, code).
fn answer_key(p: &[u8]) -> Option<(u16, Option<(u8, u8)>)> {
    let (proto, l4) = match p.first()? >> 4 {
        4 => (*p.get(9)?, usize::from(p[0] & 0xf) * 4),
        6 => ipv6_upper(p)?,
        _ => return None,
    };
    let (t, c) = (*p.get(l4)?, *p.get(l4 + 1)?);
    match proto {
        1 if matches!(t, 3 | 4 | 5 | 11 | 12) => Some((key_of(p.get(l4 + 8..)?)?, Some((t, c)))),
        58 if t < 128 => Some((key_of(p.get(l4 + 8..)?)?, Some((t, c)))),
        // A redirect quotes the packet in its redirected header option (RFC 4861 §4.6.3).
        58 if t == 137 => {
            let mut at = l4 + 40;
            loop {
                let (kind, units) = (*p.get(at)?, usize::from(*p.get(at + 1)?));
                if kind == 4 {
                    break Some((key_of(p.get(at + 8..)?)?, Some((t, c))));
                }
                if units == 0 {
                    break None;
                }
                at += units * 8;
            }
        }
        6 | 17 => Some((u16::from_be_bytes([*p.get(l4 + 2)?, *p.get(l4 + 3)?]), None)),
        _ => None,
    }
}

/// Writes case `i`'s key (see [`key_of`]) into its frame before the edit: IPv4's
/// identification (and the checksum again); for IPv6 other than TCP and UDP, the first bytes
/// of the upper layer (ICMPv6: its identifier).
fn stamp(f: &mut [u8], port: u16) {
    let Some(l3) = l3_of(f) else { return };
    match f[l3] >> 4 {
        4 => {
            f[l3 + 4..l3 + 6].copy_from_slice(&port.to_be_bytes());
            let ihl = usize::from(f[l3] & 0xf) * 4;
            f[l3 + 10] = 0;
            f[l3 + 11] = 0;
            let c = llr_core::wire::checksum::checksum(&f[l3..l3 + ihl]);
            f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        _ => {
            let at = match f[l3 + 6] {
                6 | 17 => return,
                58 => l3 + 44,
                _ => l3 + 40,
            };
            f[at..at + 2].copy_from_slice(&port.to_be_bytes());
        }
    }
}

/// An answer as compared: the IPv4 identification and header checksum zeroed, the IPv6 flow
/// label of an ICMPv6 error zeroed (see [`Outcome`]).
fn normalised(mut f: Vec<u8>) -> Vec<u8> {
    if let Some(l3) = l3_of(&f) {
        match f[l3] >> 4 {
            4 if f.len() >= l3 + 20 => {
                f[l3 + 4..l3 + 6].fill(0);
                f[l3 + 10..l3 + 12].fill(0);
            }
            6 if f.len() >= l3 + 40 && f[l3 + 6] == 58 => {
                f[l3 + 1] &= 0xf0;
                f[l3 + 2..l3 + 4].fill(0);
            }
            _ => {}
        }
    }
    f
}

/// An answer that came back: its case's key, the error's (type, code), the frame as compared.
type Answer = (u16, Option<(u8, u8)>, Vec<u8>);

/// Sends every case from the generator, 50 ms apart, and collects what arrives at the sink and
/// what comes back, until 4 s after the last: the kernel gives up on a neighbour after 3 s.
fn probe(t: &Topology, cases: &[Case]) -> Vec<Outcome> {
    let frames: Vec<Vec<u8>> = cases.iter().map(built).collect();
    let n = frames.len();
    let until = Instant::now() + Duration::from_millis(300 + 50 * n as u64 + 4000);
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
                std::thread::sleep(Duration::from_millis(50));
            }
            raw.collect(until)
        })
        .unwrap();
    let mut at_sink = sink.join().unwrap().unwrap();
    // UDP forwarded back out of the link it came in on (from the router's MAC there).
    let rtr_in = mac(addr::RTR_IN_MAC);
    at_sink.extend(
        back.iter()
            .filter(|f| {
                f[6..12] == rtr_in
                    && l3_of(f).is_some_and(|l3| {
                        let p = &f[l3..];
                        match p[0] >> 4 {
                            4 => p.get(9) == Some(&17),
                            _ => p.get(6) == Some(&17),
                        }
                    })
            })
            .cloned(),
    );
    let back: Vec<Answer> = (back.into_iter())
        .filter_map(|f| {
            let (key, err) = answer_key(f.get(l3_of(&f)?..)?)?;
            Some((key, err, normalised(f)))
        })
        .collect();
    (cases.iter())
        .map(|c| {
            let p = c.spec.src_port;
            let mine: Vec<Vec<u8>> = (at_sink.iter())
                .filter(|f| l3_of(f).and_then(|l3| key_of(&f[l3..])) == Some(p))
                .cloned()
                .collect();
            let mut answers: Vec<&Answer> = back.iter().filter(|b| b.0 == p).collect();
            answers.sort_by(|a, b| a.2.cmp(&b.2));
            Outcome {
                forwarded: !mine.is_empty(),
                icmp: answers.iter().filter_map(|a| a.1).collect(),
                at_sink: mine,
                back: answers.iter().map(|a| a.2.clone()).collect(),
            }
        })
        .collect()
}

/// Case `c`'s frame as sent.
fn built(c: &Case) -> Vec<u8> {
    let mut f = frame(&c.spec);
    stamp(&mut f, c.spec.src_port);
    (c.edit)(&mut f);
    f
}

/// What an outcome comes to, in words: forwarded (how many frames, TTL or hop limit as they
/// left), or dropped, and each answer with where it came from and, for an error, its MTU or
/// pointer.
fn said(o: &Outcome) -> String {
    let mut s = Vec::new();
    for f in &o.at_sink {
        let l3 = l3_of(f).unwrap_or(14);
        let hop = match f.get(l3).map(|b| b >> 4) {
            Some(4) => f.get(l3 + 8),
            _ => f.get(l3 + 7),
        };
        s.push(format!(
            "forwarded ({} B, ttl {})",
            f.len(),
            hop.copied().unwrap_or(0)
        ));
    }
    for f in &o.back {
        let l3 = l3_of(f).unwrap_or(14);
        let p = &f[l3..];
        let (from, proto, l4) = if p[0] >> 4 == 4 {
            let from = std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&p[12..16]).unwrap());
            (from.to_string(), p[9], usize::from(p[0] & 0xf) * 4)
        } else {
            let from = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&p[8..24]).unwrap());
            let (proto, l4) = ipv6_upper(p).unwrap_or((0, 40));
            (from.to_string(), proto, l4)
        };
        let who = if from == addr::SINK_V4 || from == addr::SINK_V6 {
            "the sink"
        } else {
            "the router"
        };
        let word = u32::from_be_bytes(p[l4 + 4..l4 + 8].try_into().unwrap());
        let (t, c) = (p[l4], p[l4 + 1]);
        s.push(match (proto, t, c) {
            (1, 3, 4) => format!("icmp 3/4 mtu {} from {who}", word & 0xffff),
            (1, 12, _) => format!("icmp 12/{c} pointer {} from {who}", word >> 24),
            (1, ..) => format!("icmp {t}/{c} from {who}"),
            (58, 2, _) => format!("icmpv6 2/{c} mtu {word} from {who}"),
            (58, 4, _) => format!("icmpv6 4/{c} pointer {word} from {who}"),
            (58, ..) => format!("icmpv6 {t}/{c} from {who}"),
            (6, ..) => format!("tcp answer from {who}"),
            _ => format!("protocol {proto} answer from {who}"),
        });
    }
    if s.is_empty() {
        "dropped".into()
    } else {
        s.join("; ")
    }
}

/// Where two outcomes differ: the first differing bytes of the first differing frame.
fn difference(k: &Outcome, o: &Outcome) -> String {
    let first = |a: &[Vec<u8>], b: &[Vec<u8>], what: &str| -> Option<String> {
        if a.len() != b.len() {
            return Some(format!("{what}: {} frames against {}", a.len(), b.len()));
        }
        a.iter().zip(b).enumerate().find_map(|(i, (x, y))| {
            (x != y).then(|| {
                let at: Vec<String> = (0..x.len().max(y.len()))
                    .filter(|&j| x.get(j) != y.get(j))
                    .take(6)
                    .map(|j| format!("@{j} {:02x?}/{:02x?}", x.get(j), y.get(j)))
                    .collect();
                format!(
                    "{what} frame {i} ({} B/{} B): {}",
                    x.len(),
                    y.len(),
                    at.join(" ")
                )
            })
        })
    };
    (first(&k.at_sink, &o.at_sink, "at the sink"))
        .or_else(|| first(&k.back, &o.back, "back"))
        .unwrap_or_default()
}

fn table(cases: &[Case], kernel: &[Outcome], ours: &[Outcome]) -> String {
    let mut s = String::new();
    for (c, (k, o)) in cases.iter().zip(kernel.iter().zip(ours)) {
        if k == o {
            s += &format!("  {:<52} {}\n", c.name, said(k));
        } else {
            s += &format!(
                "≠ {:<52} kernel: {}\n{:56}llrouter: {}\n{:56}{}\n",
                c.name,
                said(k),
                "",
                said(o),
                "",
                difference(k, o)
            );
        }
    }
    s
}

/// The frame kinds of [`each_frame_ends_as_the_kernel_ends_it`] and the policy test, as
/// docs/parity.md lists them: case, what the kernel does, llrouter's verdict.
fn docs_rows(cases: &[Case], kernel: &[Outcome], deviations: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (c, k) in cases.iter().zip(kernel) {
        let ours = match deviations.iter().find(|d| d.0 == c.name) {
            Some((_, why)) => format!("dropped: {why}"),
            None => "the same".into(),
        };
        s += &format!("| {} | {} | {} |\n", c.name, said(k), ours);
    }
    s
}

/// Checks that docs/parity.md holds `rows` between the markers `<!-- NAME -->` and
/// `<!-- /NAME -->`; with `LLR_BLESS=1` writes them there instead.
fn docs_table_is(name: &str, rows: &str) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/parity.md");
    let doc = std::fs::read_to_string(path).expect("docs/parity.md");
    let (open, close) = (format!("<!-- {name} -->\n"), format!("<!-- /{name} -->"));
    let a = doc.find(&open).map(|a| a + open.len());
    let b = doc.find(&close);
    let (Some(a), Some(b)) = (a, b) else {
        panic!("docs/parity.md has no {open:?} … {close:?}")
    };
    let head = "| frame | the kernel | llrouter |\n|---|---|---|\n";
    let want = format!("{head}{rows}");
    if std::env::var_os("LLR_BLESS").is_some() {
        let doc = format!("{}{want}{}", &doc[..a], &doc[b..]);
        std::fs::write(path, doc).expect("write docs/parity.md");
    } else if doc[a..b] != want {
        let had: Vec<&str> = doc[a..b].lines().collect();
        let saw: Vec<&str> = want.lines().collect();
        let gone: Vec<&&str> = had.iter().filter(|l| !saw.contains(l)).collect();
        let new: Vec<&&str> = saw.iter().filter(|l| !had.contains(l)).collect();
        panic!(
            "docs/parity.md's {name} table is not what this run saw (if the change is meant, \
             run the test again with LLR_BLESS=1 and commit docs/parity.md)\n\
             in the doc only: {gone:#?}\nseen only: {new:#?}"
        );
    }
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
    // The sink gives up reassembling a lone first fragment after 1 s (not 30 or 60), so its
    // "reassembly time exceeded" comes back within the probe that sent the fragment.
    t.sink.sysctl("net.ipv4.ipfrag_time", "1").unwrap();
    t.sink.sysctl("net.ipv6.ip6frag_time", "1").unwrap();
    // A gateway and a host on the generator's own link: frames routed back out of it.
    let inn = addr::RTR_IN_IF;
    ip_batch(
        &t,
        &format!(
            "neigh replace 10.71.1.2 lladdr {GW_IN_MAC} dev {inn} nud permanent
neigh replace 10.71.1.3 lladdr {HOST_IN_MAC} dev {inn} nud permanent
route add 10.86.0.0/16 via 10.71.1.2 dev {inn}
-6 neigh replace fe80::2 lladdr {GW_IN_MAC} dev {inn} nud permanent
-6 neigh replace fd71:1::2 lladdr {GW_IN_MAC} dev {inn} nud permanent
-6 neigh replace fd71:1::3 lladdr {HOST_IN_MAC} dev {inn} nud permanent
-6 route add fd86::/64 via fe80::2 dev {inn}
-6 route add fd87::/64 via fd71:1::2 dev {inn}
"
        ),
    );
    let cases = cases();
    assert!(cases.len() >= 100, "{} frame kinds", cases.len());
    let kernel = probe(&t, &cases);
    // The probe works: the plain frames went through, the expiring ones came back.
    let of = |name: &str| &kernel[cases.iter().position(|c| c.name == name).unwrap()];
    assert!(
        of("ipv4 forwarded").forwarded && of("ipv6 forwarded").forwarded,
        "{kernel:?}"
    );
    assert!(of("ipv4 ttl 1").icmp.contains(&(11, 0)));
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
    let tab = table(&cases, &kernel, &ours);
    eprintln!("{tab}");
    let mut wrong = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let ok = match DEVIATIONS.iter().find(|d| d.0 == c.name) {
            None => kernel[i] == ours[i],
            Some(_) => ours[i].at_sink.is_empty() && ours[i].back.is_empty(),
        };
        if !ok {
            wrong.push(c.name);
        }
    }
    assert!(wrong.is_empty(), "{wrong:?} differ:\n{tab}");
    docs_table_is("frames", &docs_rows(&cases, &kernel, DEVIATIONS));
}

/// A gateway and a host on the generator's link (neighbour entries only).
const GW_IN_MAC: &str = "02:00:00:00:01:02";
const HOST_IN_MAC: &str = "02:00:00:00:01:03";

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
    let mut rows = String::new();
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
        for (c, k) in cases.iter().zip(&kernel) {
            rows += &format!(
                "| rp_filter {mode}: {} | {} | the same |\n",
                c.name,
                said(k)
            );
        }
    }
    docs_table_is("rp_filter", &rows);
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
rule add to 10.93.0.0/16 uidrange 1000-2000 blackhole prio 196
rule add to 10.94.0.0/16 tos 0x10 blackhole prio 180
rule add to 10.90.0.0/16 table 100 suppress_ifgroup 5 prio 197
route add 10.90.0.0/16 via {s4} dev {out} table 100
route add 10.94.0.0/16 via {s4} dev {out}
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
-6 rule add to fd94::/16 tos 0xb8 blackhole prio 180
-6 route add fd94::/16 via {s6} dev {out}
-6 rule add to fd93::/16 uidrange 1000-2000 blackhole prio 196
-6 route add fd93::/16 via {s6} dev {out}
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
        plain(
            "ipv4 uidrange 0-0 prohibit (forwarded: uid 0)",
            v4(g4, "10.93.0.1", 64),
        ),
        edited(
            "ipv4 tos 0x10 rule, tos 0x10",
            v4(g4, "10.94.0.1", 64),
            |f| ipv4_tos(f, 0x10),
        ),
        edited(
            "ipv4 tos 0x10 rule, tos 0x12 (ecn)",
            v4(g4, "10.94.0.1", 64),
            |f| ipv4_tos(f, 0x12),
        ),
        edited(
            "ipv4 tos 0x10 rule, tos 0xb0",
            v4(g4, "10.94.0.1", 64),
            |f| ipv4_tos(f, 0xb0),
        ),
        edited(
            "ipv4 tos 0x10 rule, tos 0x08",
            v4(g4, "10.94.0.1", 64),
            |f| ipv4_tos(f, 0x08),
        ),
        edited(
            "ipv4 tos 0x10 rule, tos 0x04",
            v4(g4, "10.94.0.1", 64),
            |f| ipv4_tos(f, 0x04),
        ),
        plain(
            "ipv4 suppress_ifgroup rule, the kernel's",
            v4(g4, "10.90.0.1", 64),
        ),
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
        edited(
            "ipv6 tos 0xb8 rule, tclass 0xb8",
            v4(g6, "fd94::1", 64),
            |f| ipv6_tc(f, 0xb8),
        ),
        edited(
            "ipv6 tos 0xb8 rule, tclass 0xb9 (ecn)",
            v4(g6, "fd94::1", 64),
            |f| ipv6_tc(f, 0xb9),
        ),
        edited(
            "ipv6 tos 0xb8 rule, tclass 0xb0",
            v4(g6, "fd94::1", 64),
            |f| ipv6_tc(f, 0xb0),
        ),
        edited(
            "ipv6 tos 0xb8 rule, tclass 0x18",
            v4(g6, "fd94::1", 64),
            |f| ipv6_tc(f, 0x18),
        ),
        plain("ipv6 uidrange 1000-2000: not uid 0", v4(g6, "fd93::1", 64)),
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
        "  180: from all to 10.94.0.0/16 tos 0x10 blackhole\n",
        "  197: from all to 10.90.0.0/16 (to the kernel: suppress_ifgroup)\n",
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
    let rows = docs_rows(&cases, &kernel, &[]) + &docs_rows(&later, &kernel_later, &[]);
    docs_table_is("policy", &rows);
}

/// The second next hop on the sink's link (a neighbour entry only: the sink's veth sees its
/// frames too).
const HOP2_MAC: &str = "02:00:00:00:02:02";

/// The UDP source port of an untagged frame's IP packet, if it is UDP.
fn udp_sport(f: &[u8], l3: usize) -> Option<u16> {
    let p = f.get(l3..)?;
    let (proto, l4) = match p.first()? >> 4 {
        4 => (*p.get(9)?, usize::from(p[0] & 0xf) * 4),
        6 => ipv6_upper(p)?,
        _ => return None,
    };
    (proto == 17).then(|| Some(u16::from_be_bytes([*p.get(l4)?, *p.get(l4 + 1)?])))?
}

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
    // the ports. Changed while llrouter runs: the kernel announces no sysctl change, and the
    // mirror reads this one again every second.
    for fam in ["ipv4", "ipv6"] {
        let key = format!("net.{fam}.fib_multipath_hash_policy");
        t.router.sysctl(&key, "0").unwrap();
    }
    std::thread::sleep(Duration::from_millis(1500));
    let all_one = |k: usize| k == 0 || k == usize::from(flows);
    let ours = on_second_hop(
        "llrouter, L3",
        per_flow,
        &spread(&t, "10.90.1.1", flows, per_flow),
    );
    router.finish().unwrap();
    let kernel = on_second_hop(
        "kernel, L3",
        per_flow,
        &spread(&t, "10.90.1.1", flows, per_flow),
    );
    assert!(
        all_one(kernel) && all_one(ours),
        "L3: kernel {kernel}, llrouter {ours}"
    );
}

/// Per flow of [`spread`]: the index (0–3) of the next hop 10.71.2.(1+i) it arrived through,
/// by its destination MAC; asserts that every datagram arrived and no flow took two paths.
fn paths_of(who: &str, per_flow: usize, got: &[(Vec<[u8; 6]>, usize)]) -> Vec<usize> {
    let macs = [
        mac(addr::SINK_MAC),
        mac(HOP2_MAC),
        mac(HOP3_MAC),
        mac(HOP4_MAC),
    ];
    got.iter()
        .enumerate()
        .map(|(i, (m, n))| {
            assert_eq!(*n, per_flow, "{who}: flow {i}: {n} of {per_flow} arrived");
            assert_eq!(m.len(), 1, "{who}: flow {i} took {} paths", m.len());
            macs.iter()
                .position(|x| *x == m[0])
                .expect("one of the four")
        })
        .collect()
}

const HOP3_MAC: &str = "02:00:00:00:02:03";
const HOP4_MAC: &str = "02:00:00:00:02:04";

/// Path i's flows in `paths`, per path.
fn per_path(paths: &[usize]) -> [usize; 4] {
    let mut n = [0; 4];
    for &p in paths {
        n[p] += 1;
    }
    n
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn four_paths_a_thousand_flows_and_a_path_removed_while_running() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-ecmp4").expect("topology");
    let out = addr::RTR_OUT_IF;
    ip_batch(
        &t,
        &format!(
            "neigh replace 10.71.2.2 lladdr {HOP2_MAC} dev {out} nud permanent
neigh replace 10.71.2.3 lladdr {HOP3_MAC} dev {out} nud permanent
neigh replace 10.71.2.4 lladdr {HOP4_MAC} dev {out} nud permanent
nexthop add id 1 via 10.71.2.1 dev {out}
nexthop add id 2 via 10.71.2.2 dev {out}
nexthop add id 3 via 10.71.2.3 dev {out}
nexthop add id 4 via 10.71.2.4 dev {out}
nexthop add id 10 group 1/2/3/4 type resilient buckets 128
nexthop add id 11 group 1/2/3/4
route add 10.88.0.0/16 nhid 10
route add 10.87.0.0/16 nhid 11
"
        ),
    );
    // L4 hash; a fixed seed (Linux 6.11's fib_multipath_hash_seed, which llrouter takes too),
    // so that both runs are repeatable: each path's share of 1000 flows is binomial (sd 13.7
    // around 250), and 15 % either way (37.5, 2.7 sd) misses for about 2.5 % of seeds.
    t.router
        .sysctl("net.ipv4.fib_multipath_hash_policy", "1")
        .unwrap();
    t.router
        .sysctl("net.ipv4.fib_multipath_hash_seed", "20261129")
        .unwrap();
    let (flows, per_flow) = (1000u16, 2);
    let remove = "nexthop replace id 10 group 1/2/3 type resilient buckets 128\n";
    let restore = "nexthop replace id 10 group 1/2/3/4 type resilient buckets 128\n";
    let run = |who: &str, on_change: &dyn Fn()| -> (Vec<usize>, Vec<usize>, Vec<usize>) {
        let plain = paths_of(who, per_flow, &spread(&t, "10.87.1.1", flows, per_flow));
        let before = paths_of(who, per_flow, &spread(&t, "10.88.1.1", flows, per_flow));
        ip_batch(&t, remove);
        on_change();
        let after = paths_of(who, per_flow, &spread(&t, "10.88.1.1", flows, per_flow));
        (plain, before, after)
    };
    let kernel = run("kernel", &|| {});
    ip_batch(&t, restore);
    let dir = TempDir::new("ecmp4");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    // Route events reach the forwarder within a second.
    let ours = run("llrouter", &|| {
        std::thread::sleep(Duration::from_millis(1000))
    });
    router.finish().unwrap();
    for (who, (plain, before, after)) in [("kernel", &kernel), ("llrouter", &ours)] {
        eprintln!(
            "{who}: hash-threshold group {:?}, resilient group {:?}, after path 4 went {:?}",
            per_path(plain),
            per_path(before),
            per_path(after)
        );
        // A path removed moves only its own flows, and all of them.
        for (i, (b, a)) in before.iter().zip(after.iter()).enumerate() {
            if *b == 3 {
                assert_ne!(*a, 3, "{who}: flow {i} still on the removed path");
            } else {
                assert_eq!(a, b, "{who}: flow {i} moved from path {b} to {a}");
            }
        }
    }
    // llrouter's spread: each path within 15 % of its share (250 flows).
    for (what, paths) in [("hash-threshold", &ours.0), ("resilient", &ours.1)] {
        for (p, n) in per_path(paths).iter().enumerate() {
            assert!(
                (213..=287).contains(n),
                "llrouter, {what} group: path {p} took {n} of {flows} flows"
            );
        }
    }
}

/// What [`stream`] saw: per datagram (source index, sequence number), the destination MAC it
/// reached the sink's link with, if it did; and the ICMP errors that came back, per source.
struct Streamed {
    sent: Vec<(usize, u32, Instant)>,
    at_sink: std::collections::HashMap<(usize, u32), [u8; 6]>,
    icmp: Vec<Vec<(u8, u8)>>,
}

/// Sends UDP datagrams to `dst` from each of `sources` in turn, 1 ms apart, for `secs`,
/// calling `during` (from this thread) `at` seconds in; returns what arrived and came back.
fn stream(
    t: &Topology,
    sources: &[IpAddr],
    dst: &str,
    secs: f64,
    at: f64,
    during: &dyn Fn(),
) -> (Streamed, (Instant, Instant)) {
    let frames: Vec<(usize, u32, Vec<u8>)> = (0..(secs * 1000.0) as u32)
        .map(|seq| {
            let s = seq as usize % sources.len();
            let mut f = frame(&FrameSpec {
                src: sources[s],
                src_port: 30_000 + s as u16,
                ..v4(addr::GEN_V4, dst, 64)
            });
            f[42..46].copy_from_slice(&seq.to_be_bytes());
            (s, seq, f)
        })
        .collect();
    let until = Instant::now() + Duration::from_secs_f64(secs + 2.5);
    let sink = t
        .sink
        .spawn(move || Raw::open(addr::SINK_IF).collect(until));
    std::thread::sleep(Duration::from_millis(200));
    let sender = t.gen.spawn(move || {
        let raw = Raw::open(addr::GEN_IF);
        let mut sent = Vec::new();
        for (s, seq, f) in &frames {
            raw.send(f);
            sent.push((*s, *seq, Instant::now()));
            std::thread::sleep(Duration::from_millis(1));
        }
        (sent, raw.collect(until))
    });
    std::thread::sleep(Duration::from_secs_f64(at));
    let t0 = Instant::now();
    during();
    let change = (t0, Instant::now());
    let (sent, back) = sender.join().unwrap().unwrap();
    let got = sink.join().unwrap().unwrap();
    let mut at_sink = std::collections::HashMap::new();
    for f in &got {
        let Some(sport) = udp_sport(f, 14) else {
            continue;
        };
        let s = usize::from(sport.wrapping_sub(30_000));
        if s < sources.len() && f.len() >= 46 {
            let seq = u32::from_be_bytes([f[42], f[43], f[44], f[45]]);
            at_sink.insert((s, seq), <[u8; 6]>::try_from(&f[..6]).unwrap());
        }
    }
    let mut icmp = vec![Vec::new(); sources.len()];
    for f in &back {
        let Some(l3) = l3_of(f) else { continue };
        if let Some((port, Some(e))) = answer_key_udp(&f[l3..]) {
            let s = usize::from(port.wrapping_sub(30_000));
            if s < sources.len() {
                icmp[s].push(e);
            }
        }
    }
    (
        Streamed {
            sent,
            at_sink,
            icmp,
        },
        change,
    )
}

/// For an ICMP error: the UDP source port of the datagram it quotes, and (type, code).
fn answer_key_udp(p: &[u8]) -> Option<(u16, Option<(u8, u8)>)> {
    if p.first()? >> 4 != 4 || *p.get(9)? != 1 {
        return None;
    }
    let l4 = usize::from(p[0] & 0xf) * 4;
    let q = p.get(l4 + 8..)?;
    let ql4 = usize::from(q.first()? & 0xf) * 4;
    let port = u16::from_be_bytes([*q.get(ql4)?, *q.get(ql4 + 1)?]);
    Some((port, Some((p[l4], p[l4 + 1]))))
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn source_routing_to_two_uplinks_changed_while_traffic_runs() {
    llr_io::sys::require_root();
    let t = Topology::new("llr-srcrt").expect("topology");
    gen_sources(&t);
    let out = addr::RTR_OUT_IF;
    // Two uplinks on the sink's link: 10.71.2.1 (main) and 10.71.2.2 (table 201).
    ip_batch(
        &t,
        &format!(
            "neigh replace 10.71.2.2 lladdr {HOP2_MAC} dev {out} nud permanent
route add 10.85.0.0/16 via 10.71.2.1 dev {out}
route add 10.85.0.0/16 via 10.71.2.2 dev {out} table 201
route add blackhole 10.85.0.0/16 table 202
rule add from 10.71.1.128/25 lookup 201 prio 100
"
        ),
    );
    // A: main, then uplink 2; B: uplink 2, then main; C: then a prohibit rule; D: then a
    // blackhole table.
    let sources: Vec<IpAddr> = [10, 40, 41, 42]
        .iter()
        .map(|&i| own_source(false, i))
        .collect();
    let change = "rule del prio 100
rule add from 10.71.1.96/27 lookup 201 prio 100
rule add from 10.71.1.141 prohibit prio 90
rule add from 10.71.1.142 lookup 202 prio 91
";
    let undo = "rule del prio 100
rule del prio 90
rule del prio 91
rule add from 10.71.1.128/25 lookup 201 prio 100
";
    let (hop1, hop2) = (mac(addr::SINK_MAC), mac(HOP2_MAC));
    let check = |who: &str, (s, (c0, c1)): &(Streamed, (Instant, Instant))| {
        let mut late = [0usize; 4];
        for &(src, seq, when) in &s.sent {
            let got = s.at_sink.get(&(src, seq));
            // Before the change, and a second after it: as the rules said then.
            let (before, after) = (when < *c0, when > *c1 + Duration::from_secs(1));
            // A: main, then uplink 2; B: uplink 2, then main; C and D: uplink 2, then
            // prohibited and blackholed. In between: either, but A and B lose nothing.
            let want = if before {
                Some(Some(if src == 0 { hop1 } else { hop2 }))
            } else if after {
                Some(match src {
                    0 => Some(hop2),
                    1 => Some(hop1),
                    _ => None,
                })
            } else {
                assert!(
                    src >= 2 || got.is_some(),
                    "{who}: source {src} datagram {seq} lost during the change"
                );
                None
            };
            if let Some(w) = want {
                assert_eq!(got.copied(), w, "{who}: source {src}, datagram {seq}");
                if after {
                    late[src] += 1;
                }
            }
        }
        assert!(
            late.iter().all(|&n| n > 100),
            "{who}: too few after the change: {late:?}"
        );
        // C was prohibited: answered 3/13 (rate-limited by the kernel: one at least); D
        // blackholed: nothing.
        assert!(
            s.icmp[2].contains(&(3, 13)),
            "{who}: C's answers {:?}",
            s.icmp[2]
        );
        assert!(s.icmp[3].is_empty(), "{who}: D's answers {:?}", s.icmp[3]);
        assert!(
            s.icmp[0].is_empty() && s.icmp[1].is_empty(),
            "{who}: {:?}",
            s.icmp
        );
    };
    let kernel = stream(&t, &sources, "10.85.1.1", 3.0, 1.5, &|| {
        ip_batch(&t, change)
    });
    check("kernel", &kernel);
    ip_batch(&t, undo);
    let dir = TempDir::new("srcrt");
    let router = RouterThread::start(&t, dir.router_config(CONFIG));
    let ours = stream(&t, &sources, "10.85.1.1", 3.0, 1.5, &|| {
        ip_batch(&t, change)
    });
    router.finish().unwrap();
    check("llrouter", &ours);
}
