//! Checked, zero-copy packet views and the one-call frame parser.
//!
//! Views follow smoltcp: `new_checked` validates lengths once so no accessor can index out of
//! bounds, and setters exist only for mutable buffers. [`parse_frame`] reads everything the
//! classifier and the forwarder need into a small [`PacketMeta`] in one pass.

pub mod checksum;
pub mod ethernet;
pub mod ipv4;
pub mod ipv6;
pub mod l4;

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use ethernet::{parse_l2, EthernetFrame, L2Info, Mac, Vlan};
pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;
pub use l4::{IcmpPacket, TcpPacket, UdpPacket};

/// Largest frame [`parse_frame`] accepts: a 9000-byte MTU plus Ethernet header and one VLAN tag.
pub const DEFAULT_MAX_FRAME: usize = 9018;

/// Why a frame could not be parsed; `Copy`, with a stable [`index`](ParseError::index) for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Shorter than its Ethernet header (14 bytes, 18 with a VLAN tag).
    Runt,
    /// Longer than the configured maximum frame size.
    Oversize,
    /// More than one VLAN tag, or an 802.1ad (QinQ) tag.
    StackedVlan,
    /// Not IPv4 or IPv6 (ARP, LLDP, ...): not malformed, it belongs to the kernel.
    NonIp,
    /// The buffer ends inside the IP header.
    TruncatedL3,
    /// The IP version field disagrees with the EtherType.
    BadVersion,
    /// IPv4 IHL below 5.
    BadIhl,
    /// IPv4 total length outside [IHL·4, buffer], or IPv6 payload length past the buffer.
    BadTotalLength,
    /// An IPv6 extension header runs past the payload, or the chain is too long.
    BadExtHeaders,
    /// A TCP, UDP or SCTP header (of a non-fragment) is cut short by the IP length.
    TruncatedL4,
    /// A fragment, where the caller's policy refuses them (the parser itself reports them in
    /// [`PacketMeta::is_fragment`]).
    Fragment,
}

impl ParseError {
    /// Every variant, in index order.
    pub const ALL: [ParseError; 11] = [
        ParseError::Runt,
        ParseError::Oversize,
        ParseError::StackedVlan,
        ParseError::NonIp,
        ParseError::TruncatedL3,
        ParseError::BadVersion,
        ParseError::BadIhl,
        ParseError::BadTotalLength,
        ParseError::BadExtHeaders,
        ParseError::TruncatedL4,
        ParseError::Fragment,
    ];

    /// Stable index into [`ParseError::ALL`], for per-reason counter arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short snake_case name for metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            ParseError::Runt => "runt",
            ParseError::Oversize => "oversize",
            ParseError::StackedVlan => "stacked_vlan",
            ParseError::NonIp => "non_ip",
            ParseError::TruncatedL3 => "truncated_l3",
            ParseError::BadVersion => "bad_version",
            ParseError::BadIhl => "bad_ihl",
            ParseError::BadTotalLength => "bad_total_length",
            ParseError::BadExtHeaders => "bad_ext_headers",
            ParseError::TruncatedL4 => "truncated_l4",
            ParseError::Fragment => "fragment",
        }
    }

    /// False only for [`ParseError::NonIp`], which is traffic for the kernel rather than garbage.
    pub fn is_malformed(self) -> bool {
        self != ParseError::NonIp
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for ParseError {}

/// IP version of a parsed packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl IpVersion {
    /// 4 or 6.
    pub fn number(self) -> u8 {
        match self {
            IpVersion::V4 => 4,
            IpVersion::V6 => 6,
        }
    }
}

/// What the datapath needs to know about a frame, read in one pass by [`parse_frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketMeta {
    /// The single 802.1Q tag, if any.
    pub vlan: Option<Vlan>,
    /// Offset of the IP header in the frame.
    pub l3_offset: u16,
    /// Offset of the transport header in the frame (after IPv4 options / IPv6 extension headers).
    pub l4_offset: u16,
    /// IPv4 or IPv6.
    pub version: IpVersion,
    /// Source address in network order; IPv4 uses the first 4 bytes, the rest are zero.
    pub src: [u8; 16],
    /// Destination address, same layout as `src`.
    pub dst: [u8; 16],
    /// Upper-layer protocol (IPv6: after the extension headers).
    pub protocol: u8,
    /// DSCP (IPv4 TOS >> 2, IPv6 traffic class >> 2).
    pub dscp: u8,
    /// ECN bits.
    pub ecn: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// L4 source port, 0 unless [`has_ports`](PacketMeta::has_ports).
    pub src_port: u16,
    /// L4 destination port, 0 unless [`has_ports`](PacketMeta::has_ports).
    pub dst_port: u16,
    /// IP length: IPv4 total length, IPv6 40 + payload length.
    pub total_len: u16,
    /// IPv4 MF or non-zero offset; IPv6 with a Fragment header.
    pub is_fragment: bool,
    /// True for TCP, UDP and SCTP non-fragments (ports of any fragment, even the first, are not read).
    pub has_ports: bool,
}

impl PacketMeta {
    /// Source address as a std `IpAddr`.
    pub fn src_ip(&self) -> IpAddr {
        addr_of(self.version, &self.src)
    }

    /// Destination address as a std `IpAddr`.
    pub fn dst_ip(&self) -> IpAddr {
        addr_of(self.version, &self.dst)
    }

    /// IPv4 destination as a host-order integer (meaningless for IPv6).
    pub fn dst_v4(&self) -> u32 {
        u32::from_be_bytes([self.dst[0], self.dst[1], self.dst[2], self.dst[3]])
    }

    /// IPv6 destination as a host-order integer.
    pub fn dst_v6(&self) -> u128 {
        u128::from_be_bytes(self.dst)
    }
}

fn addr_of(v: IpVersion, a: &[u8; 16]) -> IpAddr {
    match v {
        IpVersion::V4 => IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
        IpVersion::V6 => IpAddr::V6(Ipv6Addr::from(*a)),
    }
}

/// Parses a frame of at most [`DEFAULT_MAX_FRAME`] bytes; see [`parse_frame_max`].
#[inline]
pub fn parse_frame(frame: &[u8]) -> Result<PacketMeta, ParseError> {
    parse_frame_max(frame, DEFAULT_MAX_FRAME)
}

/// Parses Ethernet, one optional VLAN tag, IPv4 or IPv6 and the ports, for frames up to `max_frame`.
///
/// Does not verify the IPv4 header checksum: the classifier must agree with the eBPF program,
/// which does not either; the forwarder checks it before rewriting.
pub fn parse_frame_max(frame: &[u8], max_frame: usize) -> Result<PacketMeta, ParseError> {
    if frame.len() > max_frame {
        return Err(ParseError::Oversize);
    }
    let l2 = parse_l2(frame)?;
    let l3 = &frame[l2.l3_offset..];
    let mut m = PacketMeta {
        vlan: l2.vlan,
        l3_offset: l2.l3_offset as u16,
        l4_offset: 0,
        version: IpVersion::V4,
        src: [0; 16],
        dst: [0; 16],
        protocol: 0,
        dscp: 0,
        ecn: 0,
        ttl: 0,
        src_port: 0,
        dst_port: 0,
        total_len: 0,
        is_fragment: false,
        has_ports: false,
    };
    let (l4_off, l4_end) = match l2.ethertype {
        ethernet::ethertype::IPV4 => {
            let ip = Ipv4Packet::new_checked(l3)?;
            m.src[..4].copy_from_slice(&ip.src());
            m.dst[..4].copy_from_slice(&ip.dst());
            m.protocol = ip.protocol();
            m.dscp = ip.dscp();
            m.ecn = ip.ecn();
            m.ttl = ip.ttl();
            m.total_len = ip.total_len();
            m.is_fragment = ip.is_fragment();
            (ip.header_len(), usize::from(ip.total_len()))
        }
        ethernet::ethertype::IPV6 => {
            let ip = Ipv6Packet::new_checked(l3)?;
            let ul = ip.upper_layer()?;
            m.version = IpVersion::V6;
            m.src = ip.src();
            m.dst = ip.dst();
            m.protocol = ul.protocol;
            m.dscp = ip.dscp();
            m.ecn = ip.ecn();
            m.ttl = ip.hop_limit();
            m.total_len = (ipv6::HEADER_LEN + usize::from(ip.payload_len())) as u16;
            m.is_fragment = ul.is_fragment;
            (ul.offset, usize::from(m.total_len))
        }
        _ => return Err(ParseError::NonIp),
    };
    m.l4_offset = (l2.l3_offset + l4_off) as u16;
    if !m.is_fragment && l4::has_ports(m.protocol) {
        let min = match m.protocol {
            l4::proto::TCP => 20,
            l4::proto::UDP => 8,
            _ => 12, // SCTP common header
        };
        // l4_off <= l4_end <= l3.len() was established by the IP views above.
        let l4 = &l3[l4_off..l4_end];
        if l4.len() < min {
            return Err(ParseError::TruncatedL4);
        }
        m.src_port = u16::from_be_bytes([l4[0], l4[1]]);
        m.dst_port = u16::from_be_bytes([l4[2], l4[3]]);
        m.has_ports = true;
    }
    Ok(m)
}

/// Builders of valid frames for tests and benches (not part of the wire format itself).
pub mod build {
    use super::*;

    /// Parameters of a synthetic frame; [`Default`] is a 64-byte untagged IPv4/UDP frame.
    #[derive(Debug, Clone, Copy)]
    pub struct FrameSpec {
        /// Destination MAC.
        pub dst_mac: Mac,
        /// Source MAC.
        pub src_mac: Mac,
        /// Optional 802.1Q tag.
        pub vlan: Option<Vlan>,
        /// Source address (its family decides IPv4 or IPv6).
        pub src: IpAddr,
        /// Destination address (must be the same family as `src`).
        pub dst: IpAddr,
        /// IP protocol.
        pub protocol: u8,
        /// DSCP.
        pub dscp: u8,
        /// TTL / hop limit.
        pub ttl: u8,
        /// Source port (written for TCP/UDP/SCTP).
        pub src_port: u16,
        /// Destination port.
        pub dst_port: u16,
        /// Bytes after the transport header.
        pub payload_len: usize,
    }

    impl Default for FrameSpec {
        fn default() -> Self {
            FrameSpec {
                dst_mac: [0x02, 0, 0, 0, 0, 1],
                src_mac: [0x02, 0, 0, 0, 0, 2],
                vlan: None,
                src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                dst: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)),
                protocol: l4::proto::UDP,
                dscp: 0,
                ttl: 64,
                src_port: 1234,
                dst_port: 5000,
                payload_len: 18,
            }
        }
    }

    /// Builds the frame into a new vector, with valid IPv4 and UDP lengths and IPv4 checksum.
    pub fn frame(s: &FrameSpec) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&s.dst_mac);
        f.extend_from_slice(&s.src_mac);
        if let Some(v) = s.vlan {
            f.extend_from_slice(&ethernet::ethertype::VLAN.to_be_bytes());
            f.extend_from_slice(&((u16::from(v.pcp) << 13) | (v.id & 0x0fff)).to_be_bytes());
        }
        let l4_len = match s.protocol {
            l4::proto::TCP => 20,
            l4::proto::UDP => 8,
            l4::proto::SCTP => 12,
            _ => 4,
        };
        let ip_payload = (l4_len + s.payload_len) as u16;
        let l3 = f.len() + 2;
        match (s.src, s.dst) {
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                f.extend_from_slice(&ethernet::ethertype::IPV6.to_be_bytes());
                let tc = s.dscp << 2;
                f.extend_from_slice(&[0x60 | (tc >> 4), tc << 4, 0, 0]);
                f.extend_from_slice(&ip_payload.to_be_bytes());
                f.extend_from_slice(&[s.protocol, s.ttl]);
                f.extend_from_slice(&src.octets());
                f.extend_from_slice(&dst.octets());
            }
            (src, dst) => {
                let v4 = |a: IpAddr| match a {
                    IpAddr::V4(a) => a.octets(),
                    IpAddr::V6(_) => [0; 4],
                };
                f.extend_from_slice(&ethernet::ethertype::IPV4.to_be_bytes());
                f.extend_from_slice(&[0x45, s.dscp << 2]);
                f.extend_from_slice(&(ip_payload + 20).to_be_bytes());
                f.extend_from_slice(&[0, 0, 0x40, 0, s.ttl, s.protocol, 0, 0]);
                f.extend_from_slice(&v4(src));
                f.extend_from_slice(&v4(dst));
                let c = checksum::checksum(&f[l3..l3 + 20]);
                f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
            }
        }
        let l4 = f.len();
        f.resize(l4 + l4_len + s.payload_len, 0);
        if l4::has_ports(s.protocol) {
            f[l4..l4 + 2].copy_from_slice(&s.src_port.to_be_bytes());
            f[l4 + 2..l4 + 4].copy_from_slice(&s.dst_port.to_be_bytes());
        }
        if s.protocol == l4::proto::UDP {
            f[l4 + 4..l4 + 6].copy_from_slice(&((8 + s.payload_len) as u16).to_be_bytes());
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::build::{frame, FrameSpec};
    use super::*;

    // A real-looking 64-byte frame: 02:00:00:00:00:02 -> 02:00:00:00:00:01, VLAN 100 PCP 5,
    // 10.0.0.1:1234 -> 10.1.0.1:5000 UDP, DSCP 46, TTL 64, checksum valid.
    const TAGGED_UDP: [u8; 64] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x81, 0x00, 0xa0,
        0x64, 0x08, 0x00, 0x45, 0xb8, 0x00, 0x2e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0x05,
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x01, 0x00, 0x01, 0x04, 0xd2, 0x13, 0x88, 0x00, 0x1a, 0x00,
        0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    const ARP: [u8; 42] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 2, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4,
        0, 1, 2, 0, 0, 0, 0, 2, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 254,
    ];

    #[test]
    fn static_tagged_udp_frame() {
        let m = parse_frame(&TAGGED_UDP).unwrap();
        assert_eq!(m.vlan, Some(Vlan { id: 100, pcp: 5 }));
        assert_eq!(m.l3_offset, 18);
        assert_eq!(m.l4_offset, 38);
        assert_eq!(m.version, IpVersion::V4);
        assert_eq!(m.src_ip(), "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(m.dst_ip(), "10.1.0.1".parse::<IpAddr>().unwrap());
        assert_eq!((m.protocol, m.dscp, m.ecn, m.ttl), (17, 46, 0, 64));
        assert_eq!((m.src_port, m.dst_port, m.has_ports), (1234, 5000, true));
        assert_eq!(m.total_len, 46);
        assert!(!m.is_fragment);
        // The static bytes carry a correct checksum (computed by hand, checked here).
        assert!(Ipv4Packet::new_checked(&TAGGED_UDP[18..])
            .unwrap()
            .verify_checksum());
    }

    #[test]
    fn builder_matches_static_bytes() {
        let f = frame(&FrameSpec {
            vlan: Some(Vlan { id: 100, pcp: 5 }),
            dscp: 46,
            ..FrameSpec::default()
        });
        assert_eq!(&f[..], &TAGGED_UDP[..f.len()]);
    }

    #[test]
    fn ipv6_frame() {
        let f = frame(&FrameSpec {
            src: "2001:db8::1".parse().unwrap(),
            dst: "2001:db8:1::1".parse().unwrap(),
            protocol: l4::proto::TCP,
            dscp: 10,
            ttl: 3,
            ..FrameSpec::default()
        });
        let m = parse_frame(&f).unwrap();
        assert_eq!(m.version, IpVersion::V6);
        assert_eq!(m.dst_ip(), "2001:db8:1::1".parse::<IpAddr>().unwrap());
        assert_eq!((m.protocol, m.dscp, m.ttl, m.dst_port), (6, 10, 3, 5000));
        assert_eq!(m.l4_offset, 54);
        assert_eq!(usize::from(m.total_len), f.len() - 14);
    }

    #[test]
    fn each_error_kind() {
        assert_eq!(parse_frame(&TAGGED_UDP[..13]), Err(ParseError::Runt));
        assert_eq!(parse_frame(&[0u8; 9019]), Err(ParseError::Oversize));
        assert_eq!(parse_frame_max(&TAGGED_UDP, 63), Err(ParseError::Oversize));
        let mut f = TAGGED_UDP;
        f[16..18].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse_frame(&f), Err(ParseError::StackedVlan));
        assert_eq!(parse_frame(&ARP), Err(ParseError::NonIp));
        assert!(!ParseError::NonIp.is_malformed());
        assert_eq!(parse_frame(&TAGGED_UDP[..37]), Err(ParseError::TruncatedL3));
        let mut f = TAGGED_UDP;
        f[18] = 0x65;
        assert_eq!(parse_frame(&f), Err(ParseError::BadVersion));
        f[18] = 0x43;
        assert_eq!(parse_frame(&f), Err(ParseError::BadIhl));
        let mut f = TAGGED_UDP;
        f[21] = 47; // one byte past the buffer would still fit: make it really too long
        f[20] = 0x01;
        assert_eq!(parse_frame(&f), Err(ParseError::BadTotalLength));
        let mut f = TAGGED_UDP;
        f[21] = 24; // IP total 24: only 4 bytes of UDP
        assert_eq!(parse_frame(&f), Err(ParseError::TruncatedL4));
    }

    #[test]
    fn fragments_are_reported_without_ports() {
        let mut f = TAGGED_UDP;
        f[24] = 0x20; // MF, offset 0: even the first fragment has no ports in the meta
        let m = parse_frame(&f).unwrap();
        assert!(m.is_fragment);
        assert!(!m.has_ports);
        assert_eq!((m.src_port, m.dst_port), (0, 0));
    }

    #[test]
    fn error_indices_are_stable_and_dense() {
        for (i, e) in ParseError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert!(!e.name().is_empty());
        }
    }
}
