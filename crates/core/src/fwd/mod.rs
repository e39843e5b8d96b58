//! Forwarding: longest-prefix-match routes, neighbours, interfaces and the per-packet decision.
//!
//! [`Forwarder::process`] turns a received frame into a [`Verdict`]: transmit it (rewritten in
//! place: TTL/hop limit, IPv4 checksum, MACs), hand it to the kernel ([`PassReason`]: everything the
//! host itself must see or answer), or drop it ([`DropReason`]: malformed). It allocates nothing.

mod dir24_8;
mod hash;
mod tables;

use core::fmt;

pub use dir24_8::{Dir24_8, LpmError, MAX_VALUE};
pub use tables::{
    Interface, Interfaces, IpPrefixAddr, Lpm6, Neighbors, NextHop, RouteError, RouteTable,
};

use crate::wire::{
    self, checksum, ethernet, EthernetFrame, IpVersion, Ipv4Packet, PacketMeta, ParseError,
};

/// Why a frame goes to the kernel instead of being forwarded here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PassReason {
    /// ARP, LLDP and anything else that is not IPv4/IPv6 (ND is caught by `Multicast`/`Local`).
    NonIp,
    /// The ingress interface is not configured in [`Interfaces`].
    UnknownIngress,
    /// Broadcast or multicast destination MAC.
    L2Multicast,
    /// Destination MAC is not the ingress interface's (the kernel will discard it as otherhost).
    OtherHost,
    /// Addressed to one of the router's own addresses.
    Local,
    /// IP multicast destination (224.0.0.0/4, ff00::/8).
    Multicast,
    /// Limited or directed broadcast of a connected subnet.
    Broadcast,
    /// Link-local source or destination (169.254.0.0/16, fe80::/10): never routed.
    LinkLocal,
    /// Addresses no router forwards (0/8, 127/8, 240/4, ::, ::1, multicast source).
    Martian,
    /// IPv4 options or an IPv6 hop-by-hop header: the kernel processes them.
    IpOptions,
    /// A fragment, with [`FragmentPolicy::Pass`].
    Fragment,
    /// TTL or hop limit ≤ 1: the kernel sends ICMP time exceeded.
    TtlExpired,
    /// No route (or a route to an unconfigured interface): the kernel answers unreachable.
    NoRoute,
    /// Larger than the egress MTU: the kernel fragments or sends "packet too big".
    MtuExceeded,
    /// The next hop's MAC is unknown: the kernel resolves it and forwards this packet itself.
    NoNeighbor,
}

impl PassReason {
    /// Every variant, in index order.
    pub const ALL: [PassReason; 15] = [
        PassReason::NonIp,
        PassReason::UnknownIngress,
        PassReason::L2Multicast,
        PassReason::OtherHost,
        PassReason::Local,
        PassReason::Multicast,
        PassReason::Broadcast,
        PassReason::LinkLocal,
        PassReason::Martian,
        PassReason::IpOptions,
        PassReason::Fragment,
        PassReason::TtlExpired,
        PassReason::NoRoute,
        PassReason::MtuExceeded,
        PassReason::NoNeighbor,
    ];

    /// Stable index into [`PassReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short snake_case name for metrics.
    pub fn name(self) -> &'static str {
        match self {
            PassReason::NonIp => "non_ip",
            PassReason::UnknownIngress => "unknown_ingress",
            PassReason::L2Multicast => "l2_multicast",
            PassReason::OtherHost => "other_host",
            PassReason::Local => "local",
            PassReason::Multicast => "multicast",
            PassReason::Broadcast => "broadcast",
            PassReason::LinkLocal => "link_local",
            PassReason::Martian => "martian",
            PassReason::IpOptions => "ip_options",
            PassReason::Fragment => "fragment",
            PassReason::TtlExpired => "ttl_expired",
            PassReason::NoRoute => "no_route",
            PassReason::MtuExceeded => "mtu_exceeded",
            PassReason::NoNeighbor => "no_neighbor",
        }
    }
}

impl fmt::Display for PassReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a frame is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The parser rejected it (never [`ParseError::NonIp`], which is passed).
    Parse(ParseError),
    /// The IPv4 header checksum does not verify.
    BadChecksum,
}

impl DropReason {
    /// Number of distinct indices.
    pub const COUNT: usize = ParseError::ALL.len() + 1;

    /// Stable index: the parse error's index, then `BadChecksum`.
    pub fn index(self) -> usize {
        match self {
            DropReason::Parse(e) => e.index(),
            DropReason::BadChecksum => ParseError::ALL.len(),
        }
    }

    /// The reason with index `i`, if any.
    pub fn from_index(i: usize) -> Option<Self> {
        match ParseError::ALL.get(i) {
            Some(&e) => Some(DropReason::Parse(e)),
            None if i == ParseError::ALL.len() => Some(DropReason::BadChecksum),
            None => None,
        }
    }

    /// Short snake_case name for metrics.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Parse(e) => e.name(),
            DropReason::BadChecksum => "bad_checksum",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The forwarding decision for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The frame was rewritten in place; send its first `len` bytes on `ifindex`.
    Tx {
        /// Egress interface index.
        ifindex: u32,
        /// Frame length to transmit.
        len: usize,
    },
    /// Hand the (unmodified) frame to the kernel.
    Pass(PassReason),
    /// Drop and count.
    Drop(DropReason),
}

/// What to do with IP fragments (the parser reports them; ports are unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FragmentPolicy {
    /// Route them like any packet (no reassembly is needed to forward).
    Forward,
    /// Hand them to the kernel.
    #[default]
    Pass,
    /// Drop them as [`ParseError::Fragment`].
    Drop,
}

/// The per-packet forwarding engine: tables plus policy; [`process`](Forwarder::process) is `&self`.
#[derive(Debug, Default)]
pub struct Forwarder {
    /// Routes.
    pub routes: RouteTable,
    /// Neighbour MACs.
    pub neighbors: Neighbors,
    /// The router's interfaces.
    pub interfaces: Interfaces,
    /// Fragment handling.
    pub fragments: FragmentPolicy,
    /// Largest accepted frame (see [`wire::DEFAULT_MAX_FRAME`]).
    pub max_frame: usize,
}

impl Forwarder {
    /// A forwarder with empty tables and default policy.
    pub fn new() -> Self {
        Forwarder {
            max_frame: wire::DEFAULT_MAX_FRAME,
            ..Forwarder::default()
        }
    }

    /// Parses `frame` and decides; on `Tx` the frame has been rewritten in place.
    #[inline]
    pub fn process(&self, frame: &mut [u8], ingress_ifindex: u32) -> Verdict {
        let max = if self.max_frame == 0 {
            wire::DEFAULT_MAX_FRAME
        } else {
            self.max_frame
        };
        match wire::parse_frame_max(frame, max) {
            Ok(m) => self.process_parsed(frame, &m, ingress_ifindex),
            Err(ParseError::NonIp) => Verdict::Pass(PassReason::NonIp),
            Err(e) => Verdict::Drop(DropReason::Parse(e)),
        }
    }

    /// Decides for a frame already parsed into `meta` (which must be `parse_frame(frame)`'s value).
    pub fn process_parsed(
        &self,
        frame: &mut [u8],
        meta: &PacketMeta,
        ingress_ifindex: u32,
    ) -> Verdict {
        use PassReason as P;
        let Some(ingress) = self.interfaces.get(ingress_ifindex) else {
            return Verdict::Pass(P::UnknownIngress);
        };
        // `meta` came from a successful parse, so the Ethernet header and the IP header exist.
        let Ok(eth) = EthernetFrame::new_checked(&*frame) else {
            return Verdict::Drop(DropReason::Parse(ParseError::Runt));
        };
        let dst_mac = eth.dst();
        if dst_mac[0] & 1 != 0 {
            return Verdict::Pass(P::L2Multicast);
        }
        if dst_mac != ingress.mac {
            return Verdict::Pass(P::OtherHost);
        }
        let l3 = usize::from(meta.l3_offset);
        let hdr_len = usize::from(meta.l4_offset) - l3;
        match meta.version {
            IpVersion::V4 => {
                let Some(hdr) = frame.get(l3..l3 + hdr_len) else {
                    return Verdict::Drop(DropReason::Parse(ParseError::TruncatedL3));
                };
                if !checksum::verify(hdr) {
                    return Verdict::Drop(DropReason::BadChecksum);
                }
                if let Some(r) = self.check_v4_addrs(meta) {
                    return Verdict::Pass(r);
                }
                if hdr_len > wire::ipv4::MIN_HEADER_LEN {
                    return Verdict::Pass(P::IpOptions);
                }
            }
            IpVersion::V6 => {
                if let Some(r) = self.check_v6_addrs(meta) {
                    return Verdict::Pass(r);
                }
                if frame.get(l3 + 6) == Some(&wire::ipv6::next_header::HOP_BY_HOP) {
                    return Verdict::Pass(P::IpOptions);
                }
            }
        }
        if meta.is_fragment {
            match self.fragments {
                FragmentPolicy::Forward => {}
                FragmentPolicy::Pass => return Verdict::Pass(P::Fragment),
                FragmentPolicy::Drop => {
                    return Verdict::Drop(DropReason::Parse(ParseError::Fragment))
                }
            }
        }
        if meta.ttl <= 1 {
            return Verdict::Pass(P::TtlExpired);
        }
        let nh = match meta.version {
            IpVersion::V4 => self.routes.lookup_v4(meta.dst_v4()),
            IpVersion::V6 => self.routes.lookup_v6(meta.dst_v6()),
        };
        let Some(nh) = nh else {
            return Verdict::Pass(P::NoRoute);
        };
        let Some(egress) = self.interfaces.get(nh.ifindex) else {
            return Verdict::Pass(P::NoRoute);
        };
        if u32::from(meta.total_len) > egress.mtu {
            return Verdict::Pass(P::MtuExceeded);
        }
        let next = match nh.gateway {
            Some(gw) => self.neighbors.get(nh.ifindex, gw),
            None => self.neighbors.get(nh.ifindex, meta.dst_ip()),
        };
        let Some(next_mac) = next else {
            return Verdict::Pass(P::NoNeighbor);
        };
        match meta.version {
            IpVersion::V4 => {
                let Ok(mut ip) = Ipv4Packet::new_checked(&mut frame[l3..]) else {
                    return Verdict::Drop(DropReason::Parse(ParseError::TruncatedL3));
                };
                ip.decrement_ttl();
            }
            IpVersion::V6 => {
                // Hop limit is byte 7 of the fixed header; IPv6 has no header checksum.
                if let Some(h) = frame.get_mut(l3 + 7) {
                    *h = meta.ttl - 1;
                }
            }
        }
        let Ok(mut eth) = EthernetFrame::new_checked(&mut *frame) else {
            return Verdict::Drop(DropReason::Parse(ParseError::Runt));
        };
        eth.set_dst(next_mac);
        eth.set_src(egress.mac);
        Verdict::Tx {
            ifindex: nh.ifindex,
            len: frame.len(),
        }
    }

    fn check_v4_addrs(&self, m: &PacketMeta) -> Option<PassReason> {
        let d = m.dst_v4();
        let s = u32::from_be_bytes([m.src[0], m.src[1], m.src[2], m.src[3]]);
        if d >> 28 == 0xe {
            return Some(PassReason::Multicast);
        }
        if d == u32::MAX || self.interfaces.is_broadcast_v4(d) {
            return Some(PassReason::Broadcast);
        }
        if self.interfaces.is_local_v4(d) {
            return Some(PassReason::Local);
        }
        let martian = |a: u32| a >> 24 == 0 || a >> 24 == 127;
        if martian(d) || martian(s) || d >> 28 == 0xf || s >> 28 >= 0xe {
            return Some(PassReason::Martian);
        }
        if d >> 16 == 0xa9fe || s >> 16 == 0xa9fe {
            return Some(PassReason::LinkLocal);
        }
        None
    }

    fn check_v6_addrs(&self, m: &PacketMeta) -> Option<PassReason> {
        let d = m.dst_v6();
        let s = u128::from_be_bytes(m.src);
        if d >> 120 == 0xff {
            return Some(PassReason::Multicast);
        }
        if self.interfaces.is_local_v6(d) {
            return Some(PassReason::Local);
        }
        if d <= 1 || s <= 1 || s >> 120 == 0xff {
            return Some(PassReason::Martian);
        }
        if d >> 118 == 0x3fa || s >> 118 == 0x3fa {
            return Some(PassReason::LinkLocal);
        }
        None
    }
}

/// Re-exported so callers can name MACs without reaching into `wire`.
pub type Mac = ethernet::Mac;

#[cfg(test)]
mod tests;
