//! The probe header the generator writes at the start of every UDP payload and the sink reads.
//!
//! Layout (little endian, 22 bytes, offsets from the start of the UDP payload — 22 bytes is
//! exactly the UDP payload of a 64-byte IPv4 frame without FCS):
//!
//! | offset | size | field                                                        |
//! |-------:|-----:|--------------------------------------------------------------|
//! | 0      | 2    | magic `b"LP"`                                                |
//! | 2      | 1    | version ([`VERSION`])                                        |
//! | 3      | 1    | traffic class (0 = RT, 1 = BE by the generator's convention) |
//! | 4      | 2    | flow id                                                      |
//! | 6      | 8    | sequence number within the flow, from 0                      |
//! | 14     | 8    | send timestamp, ns of `CLOCK_MONOTONIC`                       |
//!
//! The eBPF generator (`bpf/gen.c`) rewrites `seq` and `tx_ns` at these offsets on every run, so
//! the offsets are part of the contract: [`SEQ_OFFSET`], [`TS_OFFSET`].

use thiserror::Error;

/// `b"LP"`.
pub const MAGIC: [u8; 2] = *b"LP";
/// Current header version.
pub const VERSION: u8 = 1;
/// Encoded header length in bytes.
pub const LEN: usize = 22;
/// Offset of the flow id.
pub const FLOW_OFFSET: usize = 4;
/// Offset of the sequence number.
pub const SEQ_OFFSET: usize = 6;
/// Offset of the send timestamp.
pub const TS_OFFSET: usize = 14;

/// A decoded probe header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Probe {
    pub class: u8,
    pub flow: u16,
    pub seq: u64,
    pub tx_ns: u64,
}

/// Why a payload is not a probe.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProbeError {
    #[error("payload of {0} bytes is shorter than the {LEN}-byte probe header")]
    Truncated(usize),
    #[error("bad magic {0:02x?}")]
    BadMagic([u8; 2]),
    #[error("unsupported probe version {0}")]
    BadVersion(u8),
}

impl Probe {
    /// Writes the header into the first [`LEN`] bytes of `buf`.
    pub fn encode(&self, buf: &mut [u8]) -> Result<(), ProbeError> {
        let Some(b) = buf.get_mut(..LEN) else {
            return Err(ProbeError::Truncated(buf.len()));
        };
        b[0..2].copy_from_slice(&MAGIC);
        b[2] = VERSION;
        b[3] = self.class;
        b[4..6].copy_from_slice(&self.flow.to_le_bytes());
        b[6..14].copy_from_slice(&self.seq.to_le_bytes());
        b[14..22].copy_from_slice(&self.tx_ns.to_le_bytes());
        Ok(())
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        // Cannot fail: the buffer has exactly LEN bytes.
        let _ = self.encode(&mut b);
        b
    }

    /// Reads a header from the start of `buf` (trailing padding is allowed).
    pub fn decode(buf: &[u8]) -> Result<Probe, ProbeError> {
        let Some(b) = buf.get(..LEN) else {
            return Err(ProbeError::Truncated(buf.len()));
        };
        let magic = [b[0], b[1]];
        if magic != MAGIC {
            return Err(ProbeError::BadMagic(magic));
        }
        if b[2] != VERSION {
            return Err(ProbeError::BadVersion(b[2]));
        }
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or_default());
        Ok(Probe {
            class: b[3],
            flow: u16_at(FLOW_OFFSET),
            seq: u64_at(SEQ_OFFSET),
            tx_ns: u64_at(TS_OFFSET),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_layout() {
        let p = Probe {
            class: 3,
            flow: 0x0102,
            seq: 0x1122_3344_5566_7788,
            tx_ns: u64::MAX - 1,
        };
        let mut buf = [0xaau8; 64];
        p.encode(&mut buf).unwrap();
        assert_eq!(&buf[..2], b"LP");
        assert_eq!(buf[3], 3);
        assert_eq!(buf[FLOW_OFFSET], 0x02);
        assert_eq!(buf[SEQ_OFFSET], 0x88);
        assert_eq!(buf[TS_OFFSET], 0xfe);
        assert_eq!(buf[LEN], 0xaa, "must not write past the header");
        assert_eq!(Probe::decode(&buf).unwrap(), p);
        assert_eq!(Probe::decode(&p.to_bytes()).unwrap(), p);
    }

    #[test]
    fn malformed_is_rejected() {
        let good = Probe::default().to_bytes();
        assert_eq!(
            Probe::decode(&good[..LEN - 1]),
            Err(ProbeError::Truncated(LEN - 1))
        );
        assert_eq!(Probe::decode(&[]), Err(ProbeError::Truncated(0)));
        let mut b = good;
        b[0] = b'X';
        assert!(matches!(Probe::decode(&b), Err(ProbeError::BadMagic(_))));
        let mut b = good;
        b[2] = 2;
        assert_eq!(Probe::decode(&b), Err(ProbeError::BadVersion(2)));
        assert_eq!(
            Probe::default().encode(&mut [0u8; 10]),
            Err(ProbeError::Truncated(10))
        );
    }
}
