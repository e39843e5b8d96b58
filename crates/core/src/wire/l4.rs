//! Transport headers: the parts of UDP, TCP, SCTP and ICMP the router reads.

use super::ParseError;

/// IP protocol numbers the router names.
pub mod proto {
    /// ICMP for IPv4.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMP for IPv6.
    pub const ICMPV6: u8 = 58;
    /// SCTP.
    pub const SCTP: u8 = 132;
}

/// True for the protocols whose first four bytes are source and destination port.
pub fn has_ports(protocol: u8) -> bool {
    matches!(protocol, proto::TCP | proto::UDP | proto::SCTP)
}

/// A checked view of a UDP header (8 bytes).
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Length of the UDP header.
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer` if it holds a whole UDP header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(ParseError::TruncatedL4);
        }
        Ok(Self { buffer })
    }

    fn u16_at(&self, i: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[i], b[i + 1]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(2)
    }

    /// Length field (header + data).
    pub fn len(&self) -> u16 {
        self.u16_at(4)
    }

    /// True if the length field says there is no data.
    pub fn is_empty(&self) -> bool {
        self.len() <= 8
    }

    /// Checksum field (0 = none, IPv4 only).
    pub fn checksum(&self) -> u16 {
        self.u16_at(6)
    }
}

/// A checked view of a TCP header (20 bytes at least).
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Length of a TCP header without options.
    pub const MIN_HEADER_LEN: usize = 20;

    /// Wraps `buffer` if it holds a whole option-less TCP header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < Self::MIN_HEADER_LEN {
            return Err(ParseError::TruncatedL4);
        }
        Ok(Self { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.b()[0], self.b()[1]])
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.b()[2], self.b()[3]])
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        let b = self.b();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }

    /// The flag bits (FIN=0x01, SYN=0x02, RST=0x04, PSH=0x08, ACK=0x10, ...).
    pub fn flags(&self) -> u8 {
        self.b()[13]
    }
}

/// A checked view of an ICMP or ICMPv6 header (type, code, checksum).
#[derive(Debug, Clone)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    /// Length of the common ICMP header.
    pub const HEADER_LEN: usize = 4;

    /// Wraps `buffer` if it holds type, code and checksum.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(ParseError::TruncatedL4);
        }
        Ok(Self { buffer })
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[2], b[3]])
    }
}

/// Offset of the checksum field in a TCP or UDP header; `None` for other protocols.
pub fn checksum_offset(protocol: u8) -> Option<usize> {
    match protocol {
        proto::TCP => Some(16),
        proto::UDP => Some(6),
        _ => None,
    }
}

/// Completes a TCP or UDP checksum left *partial* by the sender's checksum offload, in place;
/// returns whether it did.
///
/// A host that offloads the checksum (`CHECKSUM_PARTIAL`; on by default on veth, virtio and
/// most NICs) writes only the folded pseudo-header sum into the field and leaves the rest to
/// the device. Over veth the frame reaches XDP in that state, and a router that forwards it
/// unchanged makes the receiver drop it (`UdpInCsumErrors`). A partial field equals the
/// pseudo-header sum exactly, so one comparison (a dozen additions) recognises it; only then is
/// the segment summed. A complete checksum equals that value by chance with probability 2⁻¹⁶;
/// such a segment is summed too and gets the same, correct checksum again, so the test needs no
/// other evidence. Fragments are never touched (the checksum covers the whole datagram).
///
/// `frame` must be the frame `meta` was parsed from.
#[inline]
pub fn complete_partial_checksum(frame: &mut [u8], meta: &super::PacketMeta) -> bool {
    use super::checksum::{fold64, pseudo_header_sum};
    if meta.is_fragment || !meta.has_ports {
        return false;
    }
    let Some(field) = checksum_offset(meta.protocol) else {
        return false;
    };
    let l4 = usize::from(meta.l4_offset);
    let end = usize::from(meta.l3_offset) + usize::from(meta.total_len);
    let Some(seg) = frame.get_mut(l4..end) else {
        return false;
    };
    let Some(f) = seg.get(field..field + 2) else {
        return false;
    };
    let stored = u16::from_be_bytes([f[0], f[1]]);
    let v6 = meta.version == super::IpVersion::V6;
    let pseudo = pseudo_header_sum(v6, &meta.src, &meta.dst, meta.protocol, seg.len() as u32);
    if stored != fold64(pseudo) {
        return false;
    }
    finish_checksum(seg, field, pseudo, meta.protocol == proto::UDP);
    true
}

/// Sums `seg` (with its checksum field at `field` zeroed) and the pseudo header, and writes the
/// checksum: the rare part of [`complete_partial_checksum`], kept out of the forwarding path.
#[cold]
#[inline(never)]
fn finish_checksum(seg: &mut [u8], field: usize, pseudo: u64, udp: bool) {
    use super::checksum::{fold64, sum_words};
    seg[field] = 0;
    seg[field + 1] = 0;
    let mut c = !fold64(pseudo + sum_words(seg));
    if c == 0 && udp {
        // RFC 768: a computed 0 is sent as all ones (0 means "no checksum").
        c = 0xffff;
    }
    seg[field..field + 2].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_fields_and_truncation() {
        let b = [0x04, 0xd2, 0x16, 0x2e, 0x00, 0x08, 0xab, 0xcd];
        let u = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(
            (u.src_port(), u.dst_port(), u.len(), u.checksum()),
            (1234, 5678, 8, 0xabcd)
        );
        assert!(u.is_empty());
        assert_eq!(
            UdpPacket::new_checked(&b[..7]).err(),
            Some(ParseError::TruncatedL4)
        );
    }

    #[test]
    fn tcp_and_icmp_fields() {
        let mut b = [0u8; 20];
        b[..4].copy_from_slice(&[0, 80, 0xc3, 0x50]);
        b[13] = 0x12;
        let t = TcpPacket::new_checked(&b[..]).unwrap();
        assert_eq!((t.src_port(), t.dst_port(), t.flags()), (80, 50000, 0x12));
        assert_eq!(
            TcpPacket::new_checked(&b[..19]).err(),
            Some(ParseError::TruncatedL4)
        );
        let i = IcmpPacket::new_checked(&[8u8, 0, 0xf7, 0xff][..]).unwrap();
        assert_eq!((i.msg_type(), i.code(), i.checksum()), (8, 0, 0xf7ff));
        assert!(has_ports(proto::SCTP) && !has_ports(proto::ICMP));
    }

    mod partial {
        use crate::wire::build::{frame, FrameSpec};
        use crate::wire::checksum::{fold64, pseudo_header_sum, sum_words};
        use crate::wire::{parse_frame, Vlan};
        use core::net::IpAddr;

        /// What a receiving host checks: pseudo header + segment sums to 0xffff.
        fn receiver_accepts(f: &[u8]) -> bool {
            let m = parse_frame(f).unwrap();
            let seg =
                &f[usize::from(m.l4_offset)..usize::from(m.l3_offset) + usize::from(m.total_len)];
            let v6 = m.version == crate::wire::IpVersion::V6;
            fold64(
                pseudo_header_sum(v6, &m.src, &m.dst, m.protocol, seg.len() as u32)
                    + sum_words(seg),
            ) == 0xffff
        }

        /// A frame as the sending host's offload leaves it: field = folded pseudo-header sum.
        fn partial_frame(spec: &FrameSpec, fill: u8) -> Vec<u8> {
            let mut f = frame(spec);
            let m = parse_frame(&f).unwrap();
            let l4 = usize::from(m.l4_offset);
            let end = usize::from(m.l3_offset) + usize::from(m.total_len);
            let hdr = if m.protocol == crate::wire::l4::proto::TCP {
                20
            } else {
                8
            };
            for (i, b) in f[l4 + hdr..end].iter_mut().enumerate() {
                *b = fill.wrapping_add(i as u8).wrapping_mul(31);
            }
            let v6 = m.version == crate::wire::IpVersion::V6;
            let p = pseudo_header_sum(v6, &m.src, &m.dst, m.protocol, (end - l4) as u32);
            let off = l4 + crate::wire::l4::checksum_offset(m.protocol).unwrap();
            f[off..off + 2].copy_from_slice(&fold64(p).to_be_bytes());
            f
        }

        fn specs() -> Vec<FrameSpec> {
            let mut v = Vec::new();
            for (src, dst) in [("10.0.0.1", "10.1.0.9"), ("2001:db8::1", "2001:db8:1::9")] {
                for proto in [crate::wire::l4::proto::UDP, crate::wire::l4::proto::TCP] {
                    for vlan in [None, Some(Vlan { id: 7, pcp: 5 })] {
                        for payload_len in [0, 1, 17, 1000, 1452] {
                            v.push(FrameSpec {
                                src: src.parse::<IpAddr>().unwrap(),
                                dst: dst.parse::<IpAddr>().unwrap(),
                                protocol: proto,
                                vlan,
                                payload_len,
                                ..FrameSpec::default()
                            });
                        }
                    }
                }
            }
            v
        }

        #[test]
        fn partial_checksums_are_completed_v4_v6_udp_tcp_vlan() {
            for (k, spec) in specs().iter().enumerate() {
                let mut f = partial_frame(spec, k as u8);
                assert!(
                    !receiver_accepts(&f),
                    "{spec:?}: a partial frame must fail the check"
                );
                let m = parse_frame(&f).unwrap();
                assert!(
                    crate::wire::l4::complete_partial_checksum(&mut f, &m),
                    "{spec:?}"
                );
                assert!(receiver_accepts(&f), "{spec:?}");
            }
        }

        #[test]
        fn complete_checksums_are_left_alone() {
            for (k, spec) in specs().iter().enumerate() {
                let mut f = partial_frame(spec, k as u8);
                let m = parse_frame(&f).unwrap();
                crate::wire::l4::complete_partial_checksum(&mut f, &m);
                let before = f.clone();
                assert!(
                    !crate::wire::l4::complete_partial_checksum(&mut f, &m),
                    "{spec:?}"
                );
                assert_eq!(f, before);
            }
        }

        #[test]
        fn fragments_and_other_protocols_are_not_touched() {
            let spec = FrameSpec {
                payload_len: 100,
                ..FrameSpec::default()
            };
            let mut f = partial_frame(&spec, 3);
            let l3 = 14;
            f[l3 + 6] |= 0x20; // MF: now a first fragment
            let m = parse_frame(&f).unwrap();
            let before = f.clone();
            assert!(!crate::wire::l4::complete_partial_checksum(&mut f, &m));
            assert_eq!(f, before);
            let icmp = FrameSpec {
                protocol: crate::wire::l4::proto::ICMP,
                ..FrameSpec::default()
            };
            let mut f = frame(&icmp);
            let m = parse_frame(&f).unwrap();
            assert!(!crate::wire::l4::complete_partial_checksum(&mut f, &m));
        }
    }
}
