//! Ethernet II frames and the IEEE 802.1Q VLAN tag.

use super::ParseError;

/// A 6-byte MAC address.
pub type Mac = [u8; 6];

/// EtherType values the router distinguishes.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ tag some switches still emit.
    pub const QINQ_OLD: u16 = 0x9100;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const TCI: Range<usize> = 14..16;
    pub const INNER_ETHERTYPE: Range<usize> = 16..18;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// Length of the 802.1Q tag inserted after the source address.
pub const VLAN_TAG_LEN: usize = 4;

/// The parts of an 802.1Q tag that classification uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vlan {
    /// VLAN identifier (12 bits).
    pub id: u16,
    /// Priority code point (3 bits).
    pub pcp: u8,
}

/// A checked view of an Ethernet II frame (at least [`HEADER_LEN`] bytes).
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer`, failing with [`ParseError::Runt`] if it is shorter than an Ethernet header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Runt);
        }
        Ok(Self { buffer })
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    pub fn dst(&self) -> Mac {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        m
    }

    /// Source MAC address.
    pub fn src(&self) -> Mac {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        m
    }

    /// The outer EtherType (0x8100 for a tagged frame).
    pub fn ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Parses the optional single 802.1Q tag: the VLAN, the inner EtherType and the L3 offset.
    ///
    /// Stacked tags (802.1Q inside 802.1Q, or any 802.1ad/QinQ outer tag) are
    /// [`ParseError::StackedVlan`]; a tagged frame shorter than 18 bytes is [`ParseError::Runt`].
    pub fn l2_info(&self) -> Result<L2Info, ParseError> {
        let b = self.buffer.as_ref();
        match self.ethertype() {
            ethertype::VLAN => {
                if b.len() < HEADER_LEN + VLAN_TAG_LEN {
                    return Err(ParseError::Runt);
                }
                let tci = u16::from_be_bytes([b[field::TCI.start], b[field::TCI.start + 1]]);
                let inner = u16::from_be_bytes([
                    b[field::INNER_ETHERTYPE.start],
                    b[field::INNER_ETHERTYPE.start + 1],
                ]);
                if is_vlan_tpid(inner) {
                    return Err(ParseError::StackedVlan);
                }
                Ok(L2Info {
                    vlan: Some(Vlan {
                        id: tci & 0x0fff,
                        pcp: (tci >> 13) as u8,
                    }),
                    ethertype: inner,
                    l3_offset: HEADER_LEN + VLAN_TAG_LEN,
                })
            }
            ethertype::QINQ | ethertype::QINQ_OLD => Err(ParseError::StackedVlan),
            et => Ok(L2Info {
                vlan: None,
                ethertype: et,
                l3_offset: HEADER_LEN,
            }),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst(&mut self, mac: Mac) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&mac);
    }

    /// Sets the source MAC address.
    pub fn set_src(&mut self, mac: Mac) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&mac);
    }
}

fn is_vlan_tpid(et: u16) -> bool {
    matches!(et, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD)
}

/// What the layer-2 header says about the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L2Info {
    /// The 802.1Q tag, if the frame carries exactly one.
    pub vlan: Option<Vlan>,
    /// The EtherType of the payload (inner one for tagged frames).
    pub ethertype: u16,
    /// Offset of the L3 header in the frame (14 or 18).
    pub l3_offset: usize,
}

/// Parses the Ethernet header and optional VLAN tag of `frame`.
pub fn parse_l2(frame: &[u8]) -> Result<L2Info, ParseError> {
    EthernetFrame::new_checked(frame)?.l2_info()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAGGED: [u8; 18] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x81, 0x00, 0xa0, 0x64, 0x08, 0x00,
    ];

    #[test]
    fn tagged_frame_yields_vlan_and_inner_type() {
        let l2 = parse_l2(&TAGGED).unwrap();
        assert_eq!(l2.vlan, Some(Vlan { id: 100, pcp: 5 }));
        assert_eq!(l2.ethertype, ethertype::IPV4);
        assert_eq!(l2.l3_offset, 18);
        let f = EthernetFrame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(f.dst(), [0, 1, 2, 3, 4, 5]);
        assert_eq!(f.src(), [6, 7, 8, 9, 10, 11]);
    }

    #[test]
    fn stacked_and_qinq_are_errors() {
        let mut f = TAGGED;
        f[16..18].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse_l2(&f), Err(ParseError::StackedVlan));
        let mut f = TAGGED;
        f[12..14].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(parse_l2(&f), Err(ParseError::StackedVlan));
    }

    #[test]
    fn short_frames_are_runts() {
        assert_eq!(parse_l2(&TAGGED[..13]), Err(ParseError::Runt));
        assert_eq!(parse_l2(&TAGGED[..17]), Err(ParseError::Runt));
    }

    #[test]
    fn setters_rewrite_addresses() {
        let mut buf = TAGGED;
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst([0xaa; 6]);
        f.set_src([0xbb; 6]);
        assert_eq!(
            &buf[..12],
            &[0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb]
        );
    }
}
