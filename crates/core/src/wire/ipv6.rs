//! IPv6 headers ([RFC 8200]) and the walk over extension headers.
//!
//! [RFC 8200]: https://www.rfc-editor.org/rfc/rfc8200

use super::ParseError;

mod field {
    use core::ops::Range;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// Extension headers [`Ipv6Packet::upper_layer`] steps over (at most [`MAX_EXT_HEADERS`] of them).
pub mod next_header {
    /// Hop-by-hop options.
    pub const HOP_BY_HOP: u8 = 0;
    /// Routing header.
    pub const ROUTING: u8 = 43;
    /// Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Destination options.
    pub const DEST_OPTS: u8 = 60;
}

/// Bound on the extension-header walk, so a hostile chain costs a fixed amount of work (and the
/// eBPF classifier, which needs a bounded loop, can follow the same rule).
pub const MAX_EXT_HEADERS: usize = 4;

/// A checked view of an IPv6 packet: the fixed header and the announced payload are in the buffer.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// The upper-layer header found after the extension headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpperLayer {
    /// Protocol number of the upper layer (the last Next Header value).
    pub protocol: u8,
    /// Offset of the upper-layer header from the start of the IPv6 header.
    pub offset: usize,
    /// True if a Fragment header was crossed.
    pub is_fragment: bool,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Validates the version and that the payload length fits in the buffer.
    ///
    /// A payload length of 0 (a jumbogram, RFC 2675) is rejected as [`ParseError::BadTotalLength`]
    /// unless the packet really has no payload (next header 59).
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::TruncatedL3);
        }
        if b[0] >> 4 != 6 {
            return Err(ParseError::BadVersion);
        }
        let plen = usize::from(u16::from_be_bytes([b[4], b[5]]));
        if HEADER_LEN + plen > b.len() || (plen == 0 && b[field::NEXT_HEADER] != 59) {
            return Err(ParseError::BadTotalLength);
        }
        Ok(Self { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Traffic class byte (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        let b = self.b();
        (b[0] << 4) | (b[1] >> 4)
    }

    /// Differentiated services code point (traffic class >> 2).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// Explicit congestion notification bits.
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 3
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        let b = self.b();
        u32::from_be_bytes([0, b[1] & 0x0f, b[2], b[3]])
    }

    /// Payload length in bytes (extension headers included).
    pub fn payload_len(&self) -> u16 {
        let b = self.b();
        u16::from_be_bytes([b[field::PAYLOAD_LEN.start], b[field::PAYLOAD_LEN.start + 1]])
    }

    /// Next Header of the fixed header.
    pub fn next_header(&self) -> u8 {
        self.b()[field::NEXT_HEADER]
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.b()[field::SRC]);
        a
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.b()[field::DST]);
        a
    }

    /// Walks hop-by-hop, routing, destination-options and fragment headers to the upper layer.
    ///
    /// Errors with [`ParseError::BadExtHeaders`] if a header runs past the payload or the chain
    /// is longer than [`MAX_EXT_HEADERS`].
    pub fn upper_layer(&self) -> Result<UpperLayer, ParseError> {
        let end = HEADER_LEN + usize::from(self.payload_len());
        let b = &self.b()[..end];
        let mut nh = self.next_header();
        let mut off = HEADER_LEN;
        let mut is_fragment = false;
        for _ in 0..=MAX_EXT_HEADERS {
            let len = match nh {
                next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DEST_OPTS => {
                    if off + 2 > end {
                        return Err(ParseError::BadExtHeaders);
                    }
                    (usize::from(b[off + 1]) + 1) * 8
                }
                next_header::FRAGMENT => {
                    is_fragment = true;
                    8
                }
                _ => {
                    return Ok(UpperLayer {
                        protocol: nh,
                        offset: off,
                        is_fragment,
                    })
                }
            };
            if off + len > end {
                return Err(ParseError::BadExtHeaders);
            }
            nh = b[off];
            off += len;
        }
        Err(ParseError::BadExtHeaders)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the hop limit (IPv6 has no header checksum to patch).
    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = h;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2001:db8::1 -> 2001:db8::2, traffic class 0xb8 (EF), UDP, hop limit 64, 8-byte payload.
    pub(crate) const PACKET: [u8; 48] = [
        0x6b, 0x80, 0x00, 0x00, 0x00, 0x08, 0x11, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 1, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0x04, 0xd2,
        0x16, 0x2e, 0x00, 0x08, 0x00, 0x00,
    ];

    #[test]
    fn accessors() {
        let ip = Ipv6Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(ip.traffic_class(), 0xb8);
        assert_eq!(ip.dscp(), 46);
        assert_eq!(ip.payload_len(), 8);
        assert_eq!(ip.hop_limit(), 64);
        assert_eq!(ip.src()[15], 1);
        assert_eq!(ip.dst()[15], 2);
        assert_eq!(
            ip.upper_layer().unwrap(),
            UpperLayer {
                protocol: 17,
                offset: 40,
                is_fragment: false
            }
        );
    }

    #[test]
    fn rejects_bad_lengths_and_version() {
        assert_eq!(
            Ipv6Packet::new_checked(&PACKET[..39]).err(),
            Some(ParseError::TruncatedL3)
        );
        assert_eq!(
            Ipv6Packet::new_checked(&PACKET[..47]).err(),
            Some(ParseError::BadTotalLength)
        );
        let mut p = PACKET;
        p[0] = 0x4b;
        assert_eq!(
            Ipv6Packet::new_checked(&p[..]).err(),
            Some(ParseError::BadVersion)
        );
    }

    #[test]
    fn fragment_header_is_reported() {
        let mut p = [0u8; 56];
        p[..40].copy_from_slice(&PACKET[..40]);
        p[5] = 16;
        p[6] = next_header::FRAGMENT;
        p[40] = 17; // fragment header: next header UDP, offset 0, M=1
        p[43] = 1;
        let ul = Ipv6Packet::new_checked(&p[..])
            .unwrap()
            .upper_layer()
            .unwrap();
        assert_eq!(ul.protocol, 17);
        assert_eq!(ul.offset, 48);
        assert!(ul.is_fragment);
    }

    #[test]
    fn overlong_extension_header_is_an_error() {
        let mut p = PACKET;
        p[6] = next_header::HOP_BY_HOP;
        p[41] = 1; // claims 16 bytes, only 8 present
        let ip = Ipv6Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.upper_layer(), Err(ParseError::BadExtHeaders));
    }
}
