//! The Internet checksum: full computation ([RFC 1071]) and incremental update ([RFC 1624]).
//!
//! [RFC 1071]: https://www.rfc-editor.org/rfc/rfc1071
//! [RFC 1624]: https://www.rfc-editor.org/rfc/rfc1624

/// Folds a 32-bit accumulator into a 16-bit ones'-complement sum.
#[inline]
pub fn fold(mut sum: u32) -> u16 {
    // Two rounds suffice: after the first the value is at most 0x1fffe.
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// Ones'-complement sum of `data` as big-endian 16-bit words (odd length padded with a zero byte).
///
/// Sums 32-bit words into a 64-bit accumulator (2^16 ≡ 1 mod 0xffff, so the fold at the end
/// gives the same 16-bit sum): about four times fewer additions than word by word, which matters
/// when the forwarder completes the checksum of a full-size segment.
#[inline]
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    fold64(sum_words(data))
}

/// The unfolded 64-bit accumulator of [`ones_complement_sum`], to combine with other parts
/// (a pseudo header) before folding.
#[inline]
pub fn sum_words(data: &[u8]) -> u64 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        sum += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    sum + u64::from(u32::from_be_bytes(tail))
}

/// Folds a 64-bit accumulator of big-endian words into a 16-bit ones'-complement sum.
#[inline]
pub fn fold64(mut sum: u64) -> u16 {
    // Three rounds: after the second the value is at most 2^32, after the third below it.
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    fold(sum as u32)
}

/// Unfolded sum of the TCP/UDP pseudo header (RFC 793 / RFC 768 for IPv4, RFC 8200 §8.1 for
/// IPv6): the addresses, the protocol and the upper-layer length.
#[inline]
pub fn pseudo_header_sum(v6: bool, src: &[u8; 16], dst: &[u8; 16], protocol: u8, len: u32) -> u64 {
    // Fixed-size word reads, no loop: this runs for every forwarded TCP/UDP packet.
    let w = |a: &[u8; 16], i: usize| {
        u64::from(u32::from_be_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]))
    };
    let mut sum = w(src, 0) + w(dst, 0) + u64::from(protocol) + u64::from(len);
    if v6 {
        for i in [4, 8, 12] {
            sum += w(src, i) + w(dst, i);
        }
    }
    sum
}

/// The RFC 1071 checksum of `data`: the complement of its ones'-complement sum.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// True if `data` (which contains its own checksum field) sums to 0xffff, i.e. verifies.
#[inline]
pub fn verify(data: &[u8]) -> bool {
    ones_complement_sum(data) == 0xffff
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit word of the covered data changes `old` → `new`.
#[inline]
pub fn update_word(csum: u16, old: u16, new: u16) -> u16 {
    // HC' = ~(~HC + ~m + m'); eqn. 3 rather than eqn. 2 avoids producing -0 (0xffff → 0x0000 issue).
    let sum = u32::from(!csum) + u32::from(!old) + u32::from(new);
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 §3: sum of 0001 f203 f4f5 f6f7 is 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&data), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    /// The word-by-word definition, to check the 32-bit-word accumulator against.
    fn reference_sum(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for c in data.chunks(2) {
            let w = u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]);
            sum += u32::from(w);
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn word_accumulator_matches_reference_for_every_length() {
        let mut x: u32 = 0x1234_5678;
        let data: Vec<u8> = (0..9100)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (x >> 24) as u8
            })
            .collect();
        for len in (0..64).chain([1499, 1500, 1501, 9000, 9017]) {
            assert_eq!(
                ones_complement_sum(&data[..len]),
                reference_sum(&data[..len]),
                "len {len}"
            );
        }
        assert_eq!(
            ones_complement_sum(&[0xff; 9000]),
            reference_sum(&[0xff; 9000])
        );
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(ones_complement_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn incremental_matches_full_recompute() {
        let mut hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = checksum(&hdr);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(verify(&hdr));
        for _ in 0..64 {
            let old = u16::from_be_bytes([hdr[8], hdr[9]]);
            hdr[8] = hdr[8].wrapping_sub(1);
            let new = u16::from_be_bytes([hdr[8], hdr[9]]);
            let inc = update_word(u16::from_be_bytes([hdr[10], hdr[11]]), old, new);
            hdr[10..12].copy_from_slice(&[0, 0]);
            let full = checksum(&hdr);
            assert_eq!(inc, full);
            hdr[10..12].copy_from_slice(&inc.to_be_bytes());
            assert!(verify(&hdr));
        }
    }
}
