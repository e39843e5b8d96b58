//! What a router owes the hosts around it: ICMP and ICMPv6 errors ([RFC 1812] §4.3,
//! [RFC 4443]), their rate limit, and IPv4 fragmentation ([RFC 791]) for packets larger than the
//! egress MTU that allow it.
//!
//! All of it is pure: the error is written into the frame buffer it answers (the original
//! packet is moved back to make room for the new headers), fragments into buffers the caller
//! hands in, and the rate limiter takes the time as an argument.
//!
//! [RFC 791]: https://www.rfc-editor.org/rfc/rfc791
//! [RFC 1812]: https://www.rfc-editor.org/rfc/rfc1812
//! [RFC 4443]: https://www.rfc-editor.org/rfc/rfc4443

use crate::wire::{checksum, l4::proto, IpVersion, PacketMeta};

/// The errors the forwarder sends, independent of the IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcmpKind {
    /// TTL / hop limit expired in transit (traceroute's answer).
    TimeExceeded,
    /// No route to the destination network.
    NetUnreachable,
    /// An `unreachable` route: the destination host cannot be reached.
    HostUnreachable,
    /// A `prohibit` route: communication administratively prohibited.
    Prohibited,
    /// Larger than the next hop's MTU and not to be fragmented: IPv4 "fragmentation needed and
    /// DF set", IPv6 "packet too big" — what path-MTU discovery waits for.
    TooBig {
        /// The next hop's MTU.
        mtu: u32,
    },
    /// A firewall's `reject`: port unreachable (IPv4 3/3, IPv6 1/4), as the kernel's default.
    PortUnreachable,
    /// A firewall's `reject with tcp reset`: not ICMP but a TCP RST ([`build_tcp_reset`]),
    /// limited and counted with the unreachable errors.
    TcpReset,
    /// A redirect for a packet forwarded back out of the link it came in on (the packet is
    /// forwarded too): IPv4 host redirect (5/1) to `gateway` (the next hop, as a big-endian
    /// address); IPv6 a Neighbor Discovery redirect ([`build_redirect_v6`]), whose target
    /// [`Forwarder::icmp_error`](super::Forwarder::icmp_error) looks up again (`gateway` 0).
    Redirect {
        /// The better next hop (IPv4).
        gateway: u32,
    },
}

impl IcmpKind {
    /// Rate-limit bucket and counter index: time exceeded, unreachable, too big.
    pub fn class(self) -> usize {
        match self {
            IcmpKind::TimeExceeded => 0,
            IcmpKind::NetUnreachable
            | IcmpKind::HostUnreachable
            | IcmpKind::Prohibited
            | IcmpKind::PortUnreachable
            | IcmpKind::TcpReset => 1,
            IcmpKind::TooBig { .. } => 2,
            IcmpKind::Redirect { .. } => 3,
        }
    }

    /// Names of the classes of [`IcmpKind::class`], for counters.
    pub const CLASS_NAMES: [&'static str; 4] =
        ["time_exceeded", "unreachable", "too_big", "redirect"];

    /// (type, code, the 32-bit field after the checksum) for `version`.
    fn wire(self, version: IpVersion) -> (u8, u8, u32) {
        match (version, self) {
            (IpVersion::V4, IcmpKind::TimeExceeded) => (11, 0, 0),
            (IpVersion::V4, IcmpKind::NetUnreachable) => (3, 0, 0),
            (IpVersion::V4, IcmpKind::HostUnreachable) => (3, 1, 0),
            // RFC 1812 §5.2.7.1: code 13, as Linux answers a `prohibit` route.
            (IpVersion::V4, IcmpKind::Prohibited) => (3, 13, 0),
            (IpVersion::V4, IcmpKind::TooBig { mtu }) => (3, 4, mtu.min(0xffff)),
            (IpVersion::V4, IcmpKind::PortUnreachable) => (3, 3, 0),
            (IpVersion::V6, IcmpKind::PortUnreachable) => (1, 4, 0),
            (IpVersion::V6, IcmpKind::TimeExceeded) => (3, 0, 0),
            (IpVersion::V6, IcmpKind::NetUnreachable) => (1, 0, 0),
            (IpVersion::V6, IcmpKind::HostUnreachable) => (1, 3, 0),
            (IpVersion::V6, IcmpKind::Prohibited) => (1, 1, 0),
            (IpVersion::V6, IcmpKind::TooBig { mtu }) => (2, 0, mtu),
            (IpVersion::V4, IcmpKind::Redirect { gateway }) => (5, 1, gateway),
            // Built by `build_redirect_v6`: a Neighbor Discovery message of its own.
            (IpVersion::V6, IcmpKind::Redirect { .. }) => (137, 0, 0),
            // Built by `build_tcp_reset`, never as an ICMP message.
            (_, IcmpKind::TcpReset) => (0, 0, 0),
        }
    }
}

/// True if `meta`'s packet may be answered with an ICMP error at all: not an ICMP error itself
/// (RFC 1812 §4.3.2.7, RFC 4443 §2.4 e.1), not a non-first fragment, not from an unspecified,
/// multicast or broadcast source (multicast/broadcast destinations never reach this point:
/// the forwarder hands them to the kernel first).
pub fn may_answer(frame: &[u8], meta: &PacketMeta) -> bool {
    let l3 = usize::from(meta.l3_offset);
    let l4 = usize::from(meta.l4_offset);
    match meta.version {
        IpVersion::V4 => {
            let Some(h) = frame.get(l3..l3 + 20) else {
                return false;
            };
            let frag_off = u16::from_be_bytes([h[6], h[7]]) & 0x1fff;
            let src = u32::from_be_bytes([meta.src[0], meta.src[1], meta.src[2], meta.src[3]]);
            if frag_off != 0 || src == 0 || src == u32::MAX || src >> 28 == 0xe {
                return false;
            }
            if meta.protocol == proto::ICMP {
                // Only echo request/reply, timestamp, info and address mask messages (types 0, 8,
                // 13-18) may be answered; anything else is an error or unknown.
                return matches!(frame.get(l4), Some(0 | 8 | 13..=18));
            }
            true
        }
        IpVersion::V6 => {
            if meta.src == [0; 16] || meta.src[0] == 0xff {
                return false;
            }
            if meta.is_fragment && !first_v6_fragment(frame, meta) {
                return false;
            }
            if meta.protocol == proto::ICMPV6 && !meta.is_fragment {
                // Types 0-127 are errors (RFC 4443 §2.1).
                return frame.get(l4).is_some_and(|&t| t >= 128);
            }
            true
        }
    }
}

/// Whether an IPv6 fragment is the first one (offset 0): walks the extension headers again,
/// which only fragments pay for.
pub(crate) fn first_v6_fragment(frame: &[u8], meta: &PacketMeta) -> bool {
    let l3 = usize::from(meta.l3_offset);
    let mut nh = frame.get(l3 + 6).copied().unwrap_or(0);
    let mut off = l3 + 40;
    for _ in 0..8 {
        match nh {
            44 => {
                return frame
                    .get(off + 2..off + 4)
                    .is_some_and(|b| u16::from_be_bytes([b[0], b[1]]) & 0xfff8 == 0)
            }
            0 | 43 | 60 => {
                let (Some(&next), Some(&len)) = (frame.get(off), frame.get(off + 1)) else {
                    return false;
                };
                nh = next;
                off += (usize::from(len) + 1) * 8;
            }
            _ => return false,
        }
    }
    false
}

/// Writes the IPv6 redirect (RFC 4861 §4.5, §8.2) for the packet of `buf` (parsed into `meta`:
/// forwarded, its hop limit already one lower) into `buf` itself, as Linux's
/// `ndisc_send_redirect` builds it: from `src` (the router's link-local address) to the
/// packet's source, hop limit 255, traffic class and flow label 0; `target` the better first
/// hop, the destination the packet's own; a target link-layer address option when the target's
/// link-layer address `target_mac` is known; a redirected header option quoting as much of the
/// packet as keeps the message within 1280 bytes, in whole 8-byte units. The L2 header stays
/// where it is (the caller sets the MACs). Returns the frame's new length; `None` if `buf`
/// cannot hold the message.
pub fn build_redirect_v6(
    buf: &mut [u8],
    meta: &PacketMeta,
    src: &[u8; 16],
    target: &[u8; 16],
    target_mac: Option<[u8; 6]>,
) -> Option<usize> {
    let l3 = usize::from(meta.l3_offset);
    let pkt_len = usize::from(meta.total_len);
    let optlen = if target_mac.is_some() { 8 } else { 0 };
    let rd_len = (1280 - 40 - 40 - optlen).min(pkt_len + 8) & !7;
    let quote = rd_len - 8;
    let msg_at = l3 + 40;
    let rd_at = msg_at + 40 + optlen;
    let end = rd_at + rd_len;
    if buf.len() < end || buf.len() < l3 + quote {
        return None;
    }
    // The quote first: it moves the packet over the room the headers take.
    buf.copy_within(l3..l3 + quote, rd_at + 8);
    // Linux sends the redirect before it decrements the hop limit: the quote carries the
    // packet as it arrived.
    buf[rd_at + 8 + 7] = buf[rd_at + 8 + 7].wrapping_add(1);
    buf[rd_at..rd_at + 8].copy_from_slice(&[4, (rd_len / 8) as u8, 0, 0, 0, 0, 0, 0]);
    if let Some(mac) = target_mac {
        buf[msg_at + 40..msg_at + 42].copy_from_slice(&[2, 1]);
        buf[msg_at + 42..msg_at + 48].copy_from_slice(&mac);
    }
    buf[msg_at..msg_at + 8].copy_from_slice(&[137, 0, 0, 0, 0, 0, 0, 0]);
    buf[msg_at + 8..msg_at + 24].copy_from_slice(target);
    buf[msg_at + 24..msg_at + 40].copy_from_slice(&meta.dst);
    let icmp_len = end - msg_at;
    let dst = meta.src;
    let h = &mut buf[l3..l3 + 40];
    h[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 0, proto::ICMPV6, 255]);
    h[4..6].copy_from_slice(&(icmp_len as u16).to_be_bytes());
    h[8..24].copy_from_slice(src);
    h[24..40].copy_from_slice(&dst);
    let pseudo = checksum::pseudo_header_sum(true, src, &dst, proto::ICMPV6, icmp_len as u32);
    let c = !checksum::fold64(pseudo + checksum::sum_words(&buf[msg_at..end]));
    buf[msg_at + 2..msg_at + 4].copy_from_slice(&c.to_be_bytes());
    Some(end)
}

/// Rewrites the TCP segment of `meta` in `buf` into the RST the kernel's `reject with tcp
/// reset` sends (nf_reject's `nf_reject_ip_tcphdr_put`): from the segment's destination to its
/// source, ports swapped; `seq` = the segment's ACK number if it had ACK, else `seq` 0 and
/// ACK of everything it carried (SYN and FIN count one); no options, window 0; IPv4 with DF,
/// ID 0, TTL 64; IPv6 hop limit 64. Returns the frame's new length; `None` for a segment that
/// gets no RST (not TCP, itself a RST, a non-first fragment, cut short).
pub fn build_tcp_reset(buf: &mut [u8], meta: &PacketMeta) -> Option<usize> {
    if meta.protocol != proto::TCP || !meta.has_ports {
        return None;
    }
    let l3 = usize::from(meta.l3_offset);
    let l4 = usize::from(meta.l4_offset);
    let tcp: [u8; 20] = buf.get(l4..l4 + 20)?.try_into().ok()?;
    let flags = tcp[13];
    if flags & 0x04 != 0 {
        return None;
    }
    let doff = usize::from(tcp[12] >> 4) * 4;
    let ip_total = usize::from(meta.total_len);
    let payload = ip_total.checked_sub((l4 - l3) + doff)? as u32;
    let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
    let (rseq, rack, rflags) = if flags & 0x10 != 0 {
        (
            u32::from_be_bytes([tcp[8], tcp[9], tcp[10], tcp[11]]),
            0,
            0x04,
        )
    } else {
        let syn_fin = u32::from(flags & 0x02 != 0) + u32::from(flags & 0x01 != 0);
        (0, seq.wrapping_add(payload + syn_fin), 0x14)
    };
    let (v6, ip_hdr) = match meta.version {
        IpVersion::V4 => (false, 20),
        IpVersion::V6 => (true, 40),
    };
    let at = l3 + ip_hdr;
    let end = at + 20;
    if buf.len() < end {
        return None;
    }
    let (src, dst) = (meta.dst, meta.src);
    let mut th = [0u8; 20];
    th[0..2].copy_from_slice(&tcp[2..4]);
    th[2..4].copy_from_slice(&tcp[0..2]);
    th[4..8].copy_from_slice(&rseq.to_be_bytes());
    th[8..12].copy_from_slice(&rack.to_be_bytes());
    th[12] = 5 << 4;
    th[13] = rflags;
    let pseudo = checksum::pseudo_header_sum(v6, &src, &dst, proto::TCP, 20);
    let c = !checksum::fold64(pseudo + checksum::sum_words(&th));
    th[16..18].copy_from_slice(&c.to_be_bytes());
    buf[at..end].copy_from_slice(&th);
    if v6 {
        let h = &mut buf[l3..l3 + 40];
        h[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 20, proto::TCP, 64]);
        h[8..24].copy_from_slice(&src);
        h[24..40].copy_from_slice(&dst);
    } else {
        let h = &mut buf[l3..l3 + 20];
        h[..12].copy_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, proto::TCP, 0, 0]);
        h[12..16].copy_from_slice(&src[..4]);
        h[16..20].copy_from_slice(&dst[..4]);
        let c = checksum::checksum(h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
    }
    Some(end)
}

/// Largest ICMP error datagram: RFC 1812 §4.3.2.3 (576 bytes for IPv4) and RFC 4443 §2.4 c
/// (the IPv6 minimum MTU, 1280).
fn max_error_len(v: IpVersion) -> usize {
    match v {
        IpVersion::V4 => 576,
        IpVersion::V6 => 1280,
    }
}

/// Writes the ICMP error `kind` answering the packet of `buf` (parsed into `meta`, as received:
/// TTL not yet decremented) into `buf` itself, from `src` (the router's address) back to the
/// packet's source, and returns the new frame length. The L2 header (and its VLAN tag) stays
/// where it is: the caller rewrites the MACs when it routes the answer. `buf` is the whole room
/// the frame may grow into; `id` is the IPv4 identification.
///
/// Returns `None` if `buf` cannot even hold the headers plus the quoted IP header and 8 bytes.
pub fn build_error(
    buf: &mut [u8],
    meta: &PacketMeta,
    kind: IcmpKind,
    src: &[u8; 16],
    id: u16,
) -> Option<usize> {
    let v = meta.version;
    let l3 = usize::from(meta.l3_offset);
    let ip_hdr = match v {
        IpVersion::V4 => 20,
        IpVersion::V6 => 40,
    };
    let orig_len = usize::from(meta.total_len);
    let min_quote = usize::from(meta.l4_offset) - l3 + 8;
    let room = buf.len().checked_sub(l3 + ip_hdr + 8)?;
    let quote = orig_len
        .min(max_error_len(v) - ip_hdr - 8)
        .min(room)
        .min(buf.len() - l3);
    if quote < min_quote.min(orig_len) {
        return None;
    }
    let icmp_at = l3 + ip_hdr;
    buf.copy_within(l3..l3 + quote, icmp_at + 8);
    let (ty, code, rest) = kind.wire(v);
    let icmp_len = 8 + quote;
    buf[icmp_at] = ty;
    buf[icmp_at + 1] = code;
    buf[icmp_at + 2..icmp_at + 4].copy_from_slice(&[0, 0]);
    buf[icmp_at + 4..icmp_at + 8].copy_from_slice(&rest.to_be_bytes());
    let dst = meta.src;
    match v {
        IpVersion::V4 => {
            let total = (ip_hdr + icmp_len) as u16;
            let h = &mut buf[l3..l3 + 20];
            // Precedence 0xc0 (internetwork control) and the packet's own TOS bits (0x1e):
            // what Linux's icmp_send() sets on its errors; no DF.
            let tos = 0xc0 | (((meta.dscp << 2) | meta.ecn) & 0x1e);
            h[..12].copy_from_slice(&[0x45, tos, 0, 0, 0, 0, 0, 0, 64, proto::ICMP, 0, 0]);
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[4..6].copy_from_slice(&id.to_be_bytes());
            h[12..16].copy_from_slice(&src[..4]);
            h[16..20].copy_from_slice(&dst[..4]);
            let c = checksum::checksum(h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            let c = checksum::checksum(&buf[icmp_at..icmp_at + icmp_len]);
            buf[icmp_at + 2..icmp_at + 4].copy_from_slice(&c.to_be_bytes());
        }
        IpVersion::V6 => {
            let h = &mut buf[l3..l3 + 40];
            h[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 0, proto::ICMPV6, 64]);
            h[4..6].copy_from_slice(&(icmp_len as u16).to_be_bytes());
            h[8..24].copy_from_slice(src);
            h[24..40].copy_from_slice(&dst);
            let pseudo =
                checksum::pseudo_header_sum(true, src, &dst, proto::ICMPV6, icmp_len as u32);
            let c =
                !checksum::fold64(pseudo + checksum::sum_words(&buf[icmp_at..icmp_at + icmp_len]));
            buf[icmp_at + 2..icmp_at + 4].copy_from_slice(&c.to_be_bytes());
        }
    }
    Some(icmp_at + icmp_len)
}

/// Turns the packet of `frame` (parsed into `meta`, as received) into the packet as it would
/// have left: TTL or hop limit one lower (the IPv4 checksum patched). An error raised after
/// the router has forwarded, such as a failed neighbour resolution, quotes the packet so:
/// Linux's neighbour layer answers from the packet it was about to send. False if the TTL is
/// already 1 or less, or the header is not where `meta` says.
pub fn as_forwarded(frame: &mut [u8], meta: &PacketMeta) -> bool {
    let l3 = usize::from(meta.l3_offset);
    if meta.ttl <= 1 {
        return false;
    }
    match meta.version {
        IpVersion::V4 => match frame
            .get_mut(l3..)
            .map(crate::wire::ipv4::Ipv4Packet::new_checked)
        {
            Some(Ok(mut p)) => {
                p.decrement_ttl();
                true
            }
            _ => false,
        },
        IpVersion::V6 => match frame.get_mut(l3 + 7) {
            Some(h) => {
                *h -= 1;
                true
            }
            None => false,
        },
    }
}

/// How many fragments [`fragment_v4`] makes of the IPv4 packet in `frame` for an egress MTU of
/// `mtu`; `None` if it cannot be fragmented (DF set, options, MTU below 68, bad length).
pub fn fragment_count(frame: &[u8], l3: usize, mtu: usize) -> Option<usize> {
    let h = frame.get(l3..l3 + 20)?;
    if h[0] != 0x45 || mtu < 68 || u16::from_be_bytes([h[6], h[7]]) & 0x4000 != 0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let data = total
        .checked_sub(20)
        .filter(|_| l3 + total <= frame.len())?;
    Some(data.div_ceil((mtu - 20) & !7))
}

/// Writes fragment `k` of the IPv4 packet in `frame` (L2 header at 0, IPv4 header without
/// options at `l3`, already rewritten for the egress) into `out`, for an egress MTU of `mtu`,
/// and returns its frame length; `None` when `k` is past the last fragment, `out` is too small
/// or the packet cannot be fragmented (DF set, options, MTU below 68).
///
/// Offsets are relative to the packet's own: a fragment of a fragment keeps its place in the
/// original datagram, and only the very last piece of a last fragment clears MF (RFC 791).
pub fn fragment_v4(frame: &[u8], l3: usize, mtu: usize, k: usize, out: &mut [u8]) -> Option<usize> {
    let h = frame.get(l3..l3 + 20)?;
    if h[0] != 0x45 || mtu < 68 {
        return None;
    }
    let flags_off = u16::from_be_bytes([h[6], h[7]]);
    if flags_off & 0x4000 != 0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let data = frame.get(l3 + 20..l3 + total)?;
    let per = (mtu - 20) & !7;
    let start = k.checked_mul(per)?;
    if start >= data.len() {
        return None;
    }
    let end = (start + per).min(data.len());
    let len = l3 + 20 + (end - start);
    let o = out.get_mut(..len)?;
    o[..l3 + 20].copy_from_slice(&frame[..l3 + 20]);
    o[l3 + 20..].copy_from_slice(&data[start..end]);
    let more = end < data.len() || flags_off & 0x2000 != 0;
    let off = (flags_off & 0x1fff) as usize + start / 8;
    let fo = (off as u16 & 0x1fff) | if more { 0x2000 } else { 0 };
    let ip = &mut o[l3..l3 + 20];
    ip[2..4].copy_from_slice(&((20 + end - start) as u16).to_be_bytes());
    ip[6..8].copy_from_slice(&fo.to_be_bytes());
    ip[10..12].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    Some(len)
}

/// Rate limits of the ICMP errors the router sends (RFC 1812 §4.3.2.8, RFC 4443 §2.4 f), with
/// Linux's defaults: every class of error (time exceeded, unreachable, too big) its own token
/// bucket of `rate` per second and `burst` (`net.ipv4.icmp_msgs_per_sec` = 1000,
/// `icmp_msgs_burst` = 50), and per destination host one message per `per_dest_interval_ns`
/// with a burst of `per_dest_burst` (`icmp_ratelimit` = 1000 ms, burst 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IcmpLimits {
    /// Messages per second per class; 0 sends none.
    pub rate: u32,
    /// Bucket depth per class.
    pub burst: u32,
    /// Per destination host: at most one message per this many ns (0: no per-host limit).
    pub per_dest_interval_ns: u64,
    /// Per destination host: bucket depth.
    pub per_dest_burst: u32,
}

impl IcmpLimits {
    /// One of `n` workers' part of these limits, so that `n` workers together send no more
    /// than one would: rates and bursts divided (rounded up, a non-zero one stays ≥ 1), the
    /// per-host interval multiplied.
    pub fn share(self, n: u32) -> IcmpLimits {
        let n = n.max(1);
        let part = |v: u32| if v == 0 { 0 } else { v.div_ceil(n).max(1) };
        IcmpLimits {
            rate: part(self.rate),
            burst: part(self.burst),
            per_dest_interval_ns: self.per_dest_interval_ns.saturating_mul(u64::from(n)),
            per_dest_burst: part(self.per_dest_burst),
        }
    }
}

impl Default for IcmpLimits {
    fn default() -> Self {
        IcmpLimits {
            rate: 1000,
            burst: 50,
            per_dest_interval_ns: 1_000_000_000,
            per_dest_burst: 6,
        }
    }
}

/// A token bucket in integer nanoseconds: `tokens` scaled by `interval` so no float is needed.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Credit in ns: one token is `interval` ns of credit.
    credit: u64,
    last: u64,
}

impl Bucket {
    fn take(&mut self, now: u64, interval: u64, burst: u32) -> bool {
        let cap = interval.saturating_mul(u64::from(burst.max(1)));
        self.credit = self
            .credit
            .saturating_add(now.saturating_sub(self.last))
            .min(cap);
        self.last = now;
        if self.credit >= interval {
            self.credit -= interval;
            true
        } else {
            false
        }
    }
}

/// Slots of the per-destination table: direct-mapped, so a flood from many sources costs a
/// bounded table and at worst shares a slot (a stricter limit, never a looser one per slot).
const DEST_SLOTS: usize = 1024;

/// The rate limiter of [`IcmpLimits`]; one per worker (no sharing, no locks).
#[derive(Debug, Clone)]
pub struct IcmpLimiter {
    limits: IcmpLimits,
    classes: [Bucket; 4],
    dests: Vec<(u128, Bucket)>,
}

impl IcmpLimiter {
    /// A limiter whose buckets start full at time `now`.
    pub fn new(limits: IcmpLimits, now: u64) -> Self {
        let mut l = IcmpLimiter {
            limits,
            classes: [Bucket::default(); 4],
            dests: Vec::new(),
        };
        l.reset(limits, now);
        l
    }

    /// New limits (buckets refilled).
    pub fn reset(&mut self, limits: IcmpLimits, now: u64) {
        self.limits = limits;
        let interval = self.class_interval();
        for b in &mut self.classes {
            *b = Bucket {
                credit: interval.saturating_mul(u64::from(limits.burst.max(1))),
                last: now,
            };
        }
        self.dests.clear();
    }

    /// The limits in force.
    pub fn limits(&self) -> IcmpLimits {
        self.limits
    }

    fn class_interval(&self) -> u64 {
        1_000_000_000 / u64::from(self.limits.rate.max(1))
    }

    /// Whether an error of `kind` to `dst` may be sent at `now` (ns); takes the tokens if so.
    pub fn allow(&mut self, kind: IcmpKind, dst: &[u8; 16], now: u64) -> bool {
        if self.limits.rate == 0 {
            return false;
        }
        let di = self.limits.per_dest_interval_ns;
        if di > 0 {
            if self.dests.is_empty() {
                self.dests = vec![(u128::MAX, Bucket::default()); DEST_SLOTS];
            }
            let key = u128::from_be_bytes(*dst);
            let slot = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) >> 118)
                as usize
                % DEST_SLOTS;
            let burst = self.limits.per_dest_burst;
            let e = &mut self.dests[slot];
            if e.0 != key {
                *e = (
                    key,
                    Bucket {
                        credit: di.saturating_mul(u64::from(burst.max(1))),
                        last: now,
                    },
                );
            }
            // Look without taking, so a class-limited message does not use up the host's credit.
            let mut probe = e.1;
            if !probe.take(now, di, burst) {
                e.1 = probe;
                return false;
            }
            let interval = self.class_interval();
            if !self.classes[kind.class()].take(now, interval, self.limits.burst) {
                return false;
            }
            self.dests[slot].1 = probe;
            true
        } else {
            let interval = self.class_interval();
            self.classes[kind.class()].take(now, interval, self.limits.burst)
        }
    }
}

#[cfg(test)]
mod tests;
