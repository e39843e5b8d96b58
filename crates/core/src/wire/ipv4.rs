//! IPv4 headers ([RFC 791]).
//!
//! [RFC 791]: https://www.rfc-editor.org/rfc/rfc791

use super::{checksum, ParseError};

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const MIN_HEADER_LEN: usize = 20;

/// A checked view of an IPv4 packet: the header and the payload it announces are in the buffer.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Validates version, IHL and total length against the buffer (which may carry trailing padding).
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(ParseError::TruncatedL3);
        }
        if b[field::VER_IHL] >> 4 != 4 {
            return Err(ParseError::BadVersion);
        }
        let hl = usize::from(b[field::VER_IHL] & 0x0f) * 4;
        if hl < MIN_HEADER_LEN {
            return Err(ParseError::BadIhl);
        }
        if hl > b.len() {
            return Err(ParseError::TruncatedL3);
        }
        let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
        if total < hl || total > b.len() {
            return Err(ParseError::BadTotalLength);
        }
        Ok(Self { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        u16::from_be_bytes([self.b()[r.start], self.b()[r.start + 1]])
    }

    /// Header length in bytes (IHL × 4, at least 20).
    pub fn header_len(&self) -> usize {
        usize::from(self.b()[field::VER_IHL] & 0x0f) * 4
    }

    /// The TOS byte (DSCP << 2 | ECN).
    pub fn tos(&self) -> u8 {
        self.b()[field::TOS]
    }

    /// Differentiated services code point (TOS >> 2).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// Explicit congestion notification bits.
    pub fn ecn(&self) -> u8 {
        self.tos() & 3
    }

    /// Total length (header + payload) in bytes.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Identification field.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x4000 != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x2000 != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLG_OFF) & 0x1fff) << 3
    }

    /// True for any fragment: MF set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x3fff != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }

    /// Upper-layer protocol number.
    pub fn protocol(&self) -> u8 {
        self.b()[field::PROTOCOL]
    }

    /// Header checksum as stored.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// True if the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(&self.b()[..self.header_len()])
    }

    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        let s = &self.b()[field::SRC];
        [s[0], s[1], s[2], s[3]]
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        let s = &self.b()[field::DST];
        [s[0], s[1], s[2], s[3]]
    }

    /// The payload as announced by the total length (trailing padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn set_u16(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the TTL without touching the checksum.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the stored checksum.
    pub fn set_checksum(&mut self, c: u16) {
        self.set_u16(field::CHECKSUM, c);
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.buffer.as_ref()[..hl]);
        self.set_checksum(c);
    }

    /// Decrements the TTL by one and patches the checksum incrementally (RFC 1624); returns the new TTL.
    ///
    /// The caller checks `ttl() > 1` first; a TTL of 0 wraps to 255 here rather than panicking.
    pub fn decrement_ttl(&mut self) -> u8 {
        let b = self.buffer.as_ref();
        let old = u16::from_be_bytes([b[field::TTL], b[field::PROTOCOL]]);
        let ttl = b[field::TTL].wrapping_sub(1);
        let new = u16::from_be_bytes([ttl, b[field::PROTOCOL]]);
        let c = checksum::update_word(self.checksum(), old, new);
        self.set_ttl(ttl);
        self.set_checksum(c);
        ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 192.168.0.1 -> 192.168.0.199, UDP, TTL 64, total length 28, checksum filled.
    fn packet() -> [u8; 28] {
        let mut p = [
            0x45, 0xb8, 0x00, 0x1c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7, 0x04, 0xd2, 0x16, 0x2e, 0x00, 0x08, 0x00, 0x00,
        ];
        Ipv4Packet::new_checked(&mut p[..]).unwrap().fill_checksum();
        p
    }

    #[test]
    fn accessors() {
        let p = packet();
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert_eq!(ip.header_len(), 20);
        assert_eq!(ip.dscp(), 46);
        assert_eq!(ip.ecn(), 0);
        assert_eq!(ip.total_len(), 28);
        assert_eq!(ip.ident(), 0x1234);
        assert!(ip.dont_frag());
        assert!(!ip.is_fragment());
        assert_eq!(ip.ttl(), 64);
        assert_eq!(ip.protocol(), 17);
        assert_eq!(ip.src(), [192, 168, 0, 1]);
        assert_eq!(ip.dst(), [192, 168, 0, 199]);
        assert_eq!(ip.payload().len(), 8);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn rejects_bad_headers() {
        let p = packet();
        assert_eq!(
            Ipv4Packet::new_checked(&p[..19]).err(),
            Some(ParseError::TruncatedL3)
        );
        let mut q = p;
        q[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&q[..]).err(),
            Some(ParseError::BadVersion)
        );
        q[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&q[..]).err(),
            Some(ParseError::BadIhl)
        );
        q[0] = 0x48; // 32-byte header in a 28-byte buffer
        assert_eq!(
            Ipv4Packet::new_checked(&q[..]).err(),
            Some(ParseError::TruncatedL3)
        );
        let mut q = p;
        q[3] = 29;
        assert_eq!(
            Ipv4Packet::new_checked(&q[..]).err(),
            Some(ParseError::BadTotalLength)
        );
        q[3] = 19;
        assert_eq!(
            Ipv4Packet::new_checked(&q[..]).err(),
            Some(ParseError::BadTotalLength)
        );
    }

    #[test]
    fn fragments_are_recognised() {
        let mut p = packet();
        p[6] = 0x20; // MF
        assert!(Ipv4Packet::new_checked(&p[..]).unwrap().is_fragment());
        p[6] = 0x00;
        p[7] = 0x01; // offset 8
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert!(ip.is_fragment());
        assert_eq!(ip.frag_offset(), 8);
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut p = packet();
        let mut ip = Ipv4Packet::new_checked(&mut p[..]).unwrap();
        assert_eq!(ip.decrement_ttl(), 63);
        assert!(ip.verify_checksum());
        let inc = ip.checksum();
        ip.fill_checksum();
        assert_eq!(ip.checksum(), inc);
    }
}
