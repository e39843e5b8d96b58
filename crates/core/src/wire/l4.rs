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
}
