//! Frames in several UMEM chunks (AF_XDP multi-buffer, `XDP_USE_SG`): a frame is a run of
//! descriptors, each but the last with `XDP_PKT_CONTD` set, on the rx ring as on the Tx ring.
//!
//! The worker's per-frame code (parse, classify, route, rewrite, ICMP, fragmentation) reads a
//! frame as one slice. A multi-buffer frame is therefore gathered into one scratch buffer,
//! handed over like any frame, and scattered back into its own chunks for transmission.
//! Jumbo frames are few per byte (a 9000-byte frame carries six 1500-byte ones), so the two
//! copies cost less than teaching every header parser about chunk boundaries would.

use std::collections::VecDeque;

use xdpilone::xdp::XdpDesc;

/// `XDP_PKT_CONTD` in a descriptor's options: the frame continues in the next descriptor.
pub(super) const XDP_PKT_CONTD: u32 = 1;
/// The `XDP_USE_SG` bind flag (Linux 6.6): frames may span several descriptors.
pub(super) const XDP_USE_SG: u16 = 1 << 4;
/// Descriptors one frame may take; a longer run is dropped as broken. The kernel makes at
/// most `MAX_SKB_FRAGS + 1` (18 with the default 17).
pub(super) const MAX_PKT_DESCS: usize = 32;
/// The largest multi-buffer frame gathered, in bytes (the scratch buffer's size).
pub const MAX_FRAME_MB: usize = 65536;

/// A held multi-buffer frame: its bytes, gathered, and the chunks after its first.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Gathered {
    pub(super) data: Box<[u8]>,
    pub(super) tail: Vec<u64>,
}

/// Whether `d` ends its frame.
#[inline(always)]
pub(super) fn ends_frame(d: &XdpDesc) -> bool {
    d.options & XDP_PKT_CONTD == 0
}

/// How many descriptors from the front of `q` fit in `cap` ring slots without cutting a frame:
/// a frame is handed to the kernel whole or not at all.
#[inline]
pub(super) fn whole_frames(q: &VecDeque<XdpDesc>, cap: usize) -> usize {
    let mut k = cap.min(q.len());
    if k < q.len() {
        while k > 0 && !ends_frame(&q[k - 1]) {
            k -= 1;
        }
    }
    k
}

/// How many descriptors the first frame of `q` takes (0 for an empty queue).
#[inline]
pub(super) fn first_frame_len(q: &VecDeque<XdpDesc>) -> usize {
    q.iter().position(ends_frame).map_or(q.len(), |i| i + 1)
}

/// How many of `q`'s first `k` descriptors end a frame (frames, not chunks, are counted).
#[inline]
pub(super) fn frames_in(q: &VecDeque<XdpDesc>, k: usize) -> usize {
    q.iter().take(k).filter(|d| ends_frame(d)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(contd: bool) -> XdpDesc {
        XdpDesc {
            addr: 0,
            len: 1,
            options: if contd { XDP_PKT_CONTD } else { 0 },
        }
    }

    #[test]
    fn whole_frames_never_cut_a_frame() {
        // frames: [a], [b b b], [c c]
        let q: VecDeque<XdpDesc> = [d(false), d(true), d(true), d(false), d(true), d(false)]
            .into_iter()
            .collect();
        assert_eq!(whole_frames(&q, 0), 0);
        assert_eq!(whole_frames(&q, 1), 1);
        assert_eq!(whole_frames(&q, 2), 1);
        assert_eq!(whole_frames(&q, 3), 1);
        assert_eq!(whole_frames(&q, 4), 4);
        assert_eq!(whole_frames(&q, 5), 4);
        assert_eq!(whole_frames(&q, 6), 6);
        assert_eq!(whole_frames(&q, 100), 6);
        assert_eq!(frames_in(&q, 6), 3);
        assert_eq!(first_frame_len(&q), 1);
        let tail: VecDeque<XdpDesc> = q.iter().skip(1).copied().collect();
        assert_eq!(first_frame_len(&tail), 3);
        assert_eq!(first_frame_len(&VecDeque::new()), 0);
        assert_eq!(frames_in(&q, 4), 2);
    }
}
