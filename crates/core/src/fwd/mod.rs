//! Forwarding: longest-prefix-match routes, neighbours, interfaces and the per-packet decision.
//!
//! [`Forwarder::process`] turns a received frame into a [`Verdict`]: transmit it (rewritten in
//! place: TTL/hop limit, IPv4 checksum, MACs), hand it to the kernel ([`PassReason`]: everything the
//! host itself must see or answer), or drop it ([`DropReason`]: malformed). It allocates nothing.

pub(crate) mod hash;
pub mod icmp;
pub mod lpm;
pub mod policy;
pub mod poptrie;
mod shared;
mod tables;

use core::fmt;
use core::net::IpAddr;

pub use icmp::{IcmpKind, IcmpLimiter, IcmpLimits};
pub use lpm::{
    set_hot_array_advice, Lpm4, LpmError, LpmMemory, Reader, Readers, MAX_TAG, MAX_VALUE,
};
pub use policy::{Flow, Hit, Policy, Rule, RuleAction, SmallTable};
/// The IPv6 table.
pub use poptrie::Poptrie as Lpm6;
pub use shared::{ForwarderGuard, SharedForwarder};
pub use tables::{
    Interface, Interfaces, IpPrefixAddr, Member, Multipath, Neighbors, NextHop, RouteError,
    RouteFilter, RouteKey, RouteKind, RouteMemory, RouteSummary, RouteTable,
};

use crate::filter::{Decision, Filter, FilterPacket, Hook};
use crate::wire::{
    self, checksum, ethernet, EthernetFrame, IpVersion, Ipv4Packet, PacketMeta, ParseError,
};

/// Why a frame goes to the kernel instead of being forwarded here: what the host itself must
/// see or answer. The classifier hands almost all of these to the kernel in XDP already; the
/// ones that reach the worker are re-injected into the kernel by the caller (llr-io's punt
/// device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PassReason {
    /// ARP, LLDP and anything else that is not IPv4/IPv6 (ND is caught by `Multicast`/`Local`).
    NonIp,
    /// The ingress interface is not configured in [`Interfaces`].
    UnknownIngress,
    /// Broadcast or multicast destination MAC.
    L2Multicast,
    /// Addressed to one of the router's own addresses.
    Local,
    /// IP multicast destination (224.0.0.0/4, ff00::/8).
    Multicast,
    /// Limited or directed broadcast of a connected subnet.
    Broadcast,
    /// IPv4 options: the kernel processes them.
    IpOptions,
    /// A fragment, with [`FragmentPolicy::Pass`].
    Fragment,
    /// The route is the kernel's: through an interface llrouter does not serve, or of a kind
    /// only the kernel handles ([`RouteKind::Kernel`]).
    KernelRoute,
    /// An IPv6 hop-by-hop header: the kernel processes it.
    HopByHop,
    /// An 802.1Q tag: the kernel's VLAN devices route it (or drop it, without one).
    Vlan,
}

impl PassReason {
    /// Every variant, in index order.
    pub const ALL: [PassReason; 11] = [
        PassReason::NonIp,
        PassReason::UnknownIngress,
        PassReason::L2Multicast,
        PassReason::Local,
        PassReason::Multicast,
        PassReason::Broadcast,
        PassReason::IpOptions,
        PassReason::Fragment,
        PassReason::KernelRoute,
        PassReason::HopByHop,
        PassReason::Vlan,
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
            PassReason::Local => "local",
            PassReason::Multicast => "multicast",
            PassReason::Broadcast => "broadcast",
            PassReason::IpOptions => "ip_options",
            PassReason::Fragment => "fragment",
            PassReason::KernelRoute => "kernel_route",
            PassReason::HopByHop => "hop_by_hop",
            PassReason::Vlan => "vlan",
        }
    }
}

impl fmt::Display for PassReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a frame is not forwarded and not handed to the kernel either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The parser rejected it (never [`ParseError::NonIp`], which is passed).
    Parse(ParseError),
    /// The IPv4 header checksum does not verify.
    BadChecksum,
    /// Destination MAC is neither the ingress interface's nor multicast (the kernel would
    /// discard it as "otherhost" too).
    OtherHost,
    /// Addresses no router forwards (0.0.0.0, 127/8, 240/4, ::, ::1, multicast source, an
    /// IPv4 source of the router's own).
    Martian,
    /// Link-local source or destination (169.254.0.0/16, fe80::/10): never routed.
    LinkLocal,
    /// TTL or hop limit ≤ 1 (answered with ICMP time exceeded unless rate-limited).
    TtlExpired,
    /// No route (answered with ICMP unreachable unless rate-limited).
    NoRoute,
    /// An `unreachable` or `prohibit` route (answered with ICMP unless rate-limited).
    Unreachable,
    /// A `blackhole` route: dropped silently.
    Blackhole,
    /// Larger than the egress MTU and not to be fragmented (answered with fragmentation needed
    /// / packet too big unless rate-limited).
    TooBig,
    /// The next hop's MAC did not resolve (answered with ICMP host unreachable when the wait
    /// ends).
    NoNeighbor,
    /// Dropped or rejected by the host's firewall ([`crate::filter`]).
    Filtered,
    /// The source fails reverse-path filtering (`rp_filter` of the ingress interface: no
    /// unicast route back to it, or, strict, not through that interface).
    RpFilter,
}

impl DropReason {
    /// The variants after the parse errors, in index order.
    const OTHERS: [DropReason; 12] = [
        DropReason::BadChecksum,
        DropReason::OtherHost,
        DropReason::Martian,
        DropReason::LinkLocal,
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::Unreachable,
        DropReason::Blackhole,
        DropReason::TooBig,
        DropReason::NoNeighbor,
        DropReason::Filtered,
        DropReason::RpFilter,
    ];

    /// Number of distinct indices.
    pub const COUNT: usize = ParseError::ALL.len() + Self::OTHERS.len();

    /// Stable index: the parse error's index, then the others in declaration order.
    pub fn index(self) -> usize {
        match self {
            DropReason::Parse(e) => e.index(),
            other => {
                ParseError::ALL.len()
                    + Self::OTHERS
                        .iter()
                        .position(|&o| o == other)
                        .unwrap_or_default()
            }
        }
    }

    /// The reason with index `i`, if any.
    pub fn from_index(i: usize) -> Option<Self> {
        match ParseError::ALL.get(i) {
            Some(&e) => Some(DropReason::Parse(e)),
            None => Self::OTHERS.get(i - ParseError::ALL.len()).copied(),
        }
    }

    /// True for frames that were broken on arrival (as opposed to well-formed packets the
    /// router declines to forward).
    pub fn is_malformed(self) -> bool {
        matches!(self, DropReason::Parse(_) | DropReason::BadChecksum)
    }

    /// Short snake_case name for metrics.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Parse(e) => e.name(),
            DropReason::BadChecksum => "bad_checksum",
            DropReason::OtherHost => "other_host",
            DropReason::Martian => "martian",
            DropReason::LinkLocal => "link_local",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoRoute => "no_route",
            DropReason::Unreachable => "unreachable_route",
            DropReason::Blackhole => "blackhole",
            DropReason::TooBig => "too_big",
            DropReason::NoNeighbor => "no_neighbor",
            DropReason::Filtered => "filtered",
            DropReason::RpFilter => "rp_filter",
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
    /// IPv4 without DF, larger than the egress MTU: the frame was rewritten in place (TTL,
    /// MACs, L4 checksum); send it in fragments ([`icmp::fragment_v4`]) of at most `mtu`.
    Fragment {
        /// Egress interface index.
        ifindex: u32,
        /// The egress MTU.
        mtu: u32,
    },
    /// Not forwarded (counted as `drop`); the source is owed the ICMP error `error`, which
    /// [`Forwarder::icmp_error`] writes into the (unmodified) frame if the rate limit allows.
    Icmp {
        /// The drop reason of the original packet.
        drop: DropReason,
        /// The error to answer with.
        error: IcmpKind,
    },
    /// As `Tx` (the frame rewritten, to be sent on `ifindex`, which is the ingress), and the
    /// sender, a host on that link, is owed a redirect as Linux sends it (IPv4 with
    /// `send_redirects` on, to `gateway`, big-endian; IPv6 always, `gateway` 0: the verdict
    /// stays small, the slow path looks the target up again): [`Forwarder::icmp_error`] with
    /// [`IcmpKind::Redirect`] over a copy of the forwarded frame.
    Redirect {
        /// Egress (and ingress) interface index.
        ifindex: u32,
        /// Frame length to transmit.
        len: u32,
        /// The next hop the sender should use.
        gateway: u32,
    },
    /// Hand the (unmodified) frame to the kernel.
    Pass(PassReason),
    /// Drop and count.
    Drop(DropReason),
}

/// What to do with IP fragments (the parser reports them; ports are unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FragmentPolicy {
    /// Route them like any packet (no reassembly is needed to forward), as a router does.
    #[default]
    Forward,
    /// Hand them to the kernel.
    Pass,
    /// Drop them as [`ParseError::Fragment`].
    Drop,
}

/// What the router does with frames that carry an 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaggedFrames {
    /// Hand them to the kernel ([`PassReason::Vlan`]): its VLAN device for the tag routes
    /// them as the host is configured, and with none drops them, as without llrouter.
    #[default]
    Kernel,
    /// Route them with the tag kept: between 802.1Q trunks that carry the same VLANs, where
    /// the VLAN is a class, not a link of its own. The kernel has no such mode.
    Forward,
}

/// Frames [`Forwarder::route_many`] looks up at a time at most (a grant's batch).
pub const ROUTE_BATCH: usize = 64;

/// A frame's route, looked up with its batch ([`Forwarder::route_many`]) before the frame is
/// processed ([`Forwarder::process_routed`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteHint {
    dst: HintDst,
    next_hop: Option<NextHop>,
    /// The next hop's MAC as the neighbour table had it; `None`: look it up when processing.
    next_mac: Option<Mac>,
}

impl RouteHint {
    /// No route known: the frame is looked up as [`Forwarder::process`] does.
    pub const NONE: RouteHint = RouteHint {
        dst: HintDst::None,
        next_hop: None,
        next_mac: None,
    };

    /// The batch's answer for `dst`; the MAC is filled in afterwards.
    fn routed(dst: HintDst, next_hop: Option<NextHop>) -> RouteHint {
        RouteHint {
            dst,
            next_hop,
            next_mac: None,
        }
    }
}

/// The destination a hint was looked up for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum HintDst {
    #[default]
    None,
    V4(u32),
    V6(u128),
}

impl HintDst {
    /// The destination of an untagged IPv4 or IPv6 frame, read at its fixed offset before
    /// the frame is parsed (`None` for anything else, or a frame too short).
    #[inline(always)]
    fn of(frame: &[u8]) -> HintDst {
        match frame.get(12..14) {
            Some([0x08, 0x00]) => frame
                .get(30..34)
                .and_then(|d| <[u8; 4]>::try_from(d).ok())
                .map_or(HintDst::None, |d| HintDst::V4(u32::from_be_bytes(d))),
            Some([0x86, 0xdd]) => frame
                .get(38..54)
                .and_then(|d| <[u8; 16]>::try_from(d).ok())
                .map_or(HintDst::None, |d| HintDst::V6(u128::from_be_bytes(d))),
            _ => HintDst::None,
        }
    }
}

/// The per-packet forwarding engine: tables plus policy; [`process`](Forwarder::process) is `&self`.
///
/// Cloning is cheap and shares the route table (`Arc`): the neighbour and interface tables are
/// small and replaced as a whole (clone, change, publish), the route table is updated in place
/// without stopping lookups.
#[derive(Debug, Default, Clone)]
pub struct Forwarder {
    /// Routes.
    pub routes: std::sync::Arc<RouteTable>,
    /// Neighbour MACs.
    pub neighbors: Neighbors,
    /// The router's interfaces.
    pub interfaces: Interfaces,
    /// Fragment handling.
    pub fragments: FragmentPolicy,
    /// Tagged frames: the kernel's, or routed with the tag kept.
    pub tagged: TaggedFrames,
    /// The route table does not hold every route it should (more than the router's route limit):
    /// every packet that would be routed goes to the kernel, which has them all, rather than
    /// follow a shorter prefix of an incomplete table.
    pub routes_incomplete: bool,
    /// Largest accepted frame (see [`wire::DEFAULT_MAX_FRAME`]).
    pub max_frame: usize,
    /// The host's firewall on the forwarding path (empty: nothing to evaluate).
    pub filter: std::sync::Arc<Filter>,
    /// The kernel's routing rules and the tables besides main they select.
    pub policy: std::sync::Arc<Policy>,
    /// How multipath routes spread flows.
    pub multipath: Multipath,
}

impl Forwarder {
    /// A forwarder with empty tables and default policy.
    pub fn new() -> Self {
        Forwarder {
            max_frame: wire::DEFAULT_MAX_FRAME,
            ..Forwarder::default()
        }
    }

    /// Looks up `frame`'s destination and throws the answer away, so that the lookup in
    /// [`Forwarder::process`] finds the table's entries in the cache. Run over every frame of a
    /// batch before any of them is processed, the batch's cache misses overlap instead of
    /// queueing one after another: with a full Internet table (~60 MB of IPv4 first level and
    /// IPv6 groups) nearly every lookup of a random destination misses. DPDK's l3fwd looks up a
    /// burst the same way. Frames it cannot read (not untagged IPv4/IPv6, too short) are left
    /// alone: `process` decides about them.
    #[inline]
    pub fn warm(&self, frame: &[u8]) {
        // The route only: warming the next hop's neighbour entry as well made a grant slower
        // (2.8–3.2 against 2.2–2.3 µs in `cargo bench --bench fulltable`), its lookup being a
        // chain behind the route's, while the neighbour table stays in the caches.
        match HintDst::of(frame) {
            HintDst::V4(a) => {
                std::hint::black_box(self.routes.lookup_v4(a));
            }
            HintDst::V6(a) => {
                std::hint::black_box(self.routes.lookup_v6(a));
            }
            HintDst::None => {}
        }
    }

    /// [`warm`](Forwarder::warm) for a whole batch at once: the IPv6 lookups go down the trie
    /// together ([`Poptrie::lookup_many`](poptrie::Poptrie::lookup_many)), so their chains of
    /// reads overlap as the IPv4 lookups' single reads already do frame by frame.
    pub fn warm_many(&self, frames: &[&[u8]]) {
        let mut hints = [RouteHint::NONE; ROUTE_BATCH];
        for chunk in frames.chunks(ROUTE_BATCH) {
            self.route_many(chunk, &mut hints);
            std::hint::black_box(&hints);
        }
    }

    /// Looks up the routes of a batch of frames together, as [`warm_many`](Self::warm_many)
    /// does, and keeps the answers: `hints[i]` for `frames[i]` (at most [`ROUTE_BATCH`]).
    /// [`process_routed`](Self::process_routed) then uses a frame's answer instead of looking
    /// its route up a second time. A frame whose destination it cannot read at the fixed
    /// offsets (not untagged IPv4 or IPv6, too short) gets an empty hint.
    pub fn route_many(&self, frames: &[&[u8]], hints: &mut [RouteHint]) {
        // The scratch arrays are sized for the batch: a grant of a few frames (ll-wfq's BE
        // budget of 4) would otherwise spend more on zeroing 64-entry arrays (~5 KB) than on
        // its lookups.
        if frames.len() <= 8 {
            self.route_batch::<8>(frames, hints);
        } else {
            self.route_batch::<ROUTE_BATCH>(frames, hints);
        }
    }

    #[inline(always)]
    fn route_batch<const N: usize>(&self, frames: &[&[u8]], hints: &mut [RouteHint]) {
        let mut v4 = [0u32; N];
        let mut at4 = [0u8; N];
        let mut n4 = 0;
        let mut v6 = [0u128; N];
        let mut at = [0u8; N];
        let mut n = 0;
        for (i, (frame, hint)) in frames.iter().zip(hints.iter_mut()).enumerate() {
            *hint = RouteHint::NONE;
            if i >= N {
                continue; // beyond the batch: looked up when processed
            }
            match HintDst::of(frame) {
                HintDst::V4(a) => {
                    v4[n4] = a;
                    at4[n4] = i as u8;
                    n4 += 1;
                }
                HintDst::V6(a) => {
                    v6[n] = a;
                    at[n] = i as u8;
                    n += 1;
                }
                HintDst::None => {}
            }
        }
        if n4 > 0 {
            let mut out = [None; N];
            self.routes.lookup_v4_many(&v4[..n4], &mut out);
            for k in 0..n4 {
                hints[usize::from(at4[k])] = RouteHint::routed(HintDst::V4(v4[k]), out[k]);
            }
        }
        if n > 0 {
            let mut out = [None; N];
            self.routes.lookup_v6_many(&v6[..n], &mut out);
            for k in 0..n {
                hints[usize::from(at[k])] = RouteHint::routed(HintDst::V6(v6[k]), out[k]);
            }
        }
        // The next hops' MACs in a pass of their own, after every route has arrived: each is
        // a hash probe whose miss would otherwise wait in the middle of its frame's processing.
        for h in hints.iter_mut().take(frames.len()) {
            if let Some(nh) = h.next_hop {
                let to = match (nh.gateway, h.dst) {
                    (Some(gw), _) => Some(gw),
                    (None, HintDst::V4(a)) => Some(core::net::IpAddr::V4(a.into())),
                    (None, HintDst::V6(a)) => Some(core::net::IpAddr::V6(a.into())),
                    (None, HintDst::None) => None,
                };
                h.next_mac = to.and_then(|to| self.neighbors.get(nh.ifindex, to));
            }
        }
    }

    /// Takes over what a forwarder rebuilt from the kernel's tables does not know from them:
    /// the router's own settings (fragments, tagged frames, frame size) and the host
    /// firewall's filter. Every rebuild goes through here, so none forgets one.
    pub fn keep_settings_of(&mut self, cur: &Forwarder) {
        self.fragments = cur.fragments;
        self.tagged = cur.tagged;
        self.max_frame = cur.max_frame;
        self.filter = cur.filter.clone();
    }

    /// Parses `frame` and decides; on `Tx` the frame has been rewritten in place.
    #[inline]
    pub fn process(&self, frame: &mut [u8], ingress_ifindex: u32) -> Verdict {
        self.process_routed(frame, ingress_ifindex, &RouteHint::NONE)
    }

    /// [`process`](Self::process) with the frame's route as [`route_many`](Self::route_many)
    /// found it: used if it is for the destination the frame holds now, else looked up again.
    /// The route, and the next hop's MAC if the batch found one, are then as of the batch's
    /// lookup, a few µs earlier, as if the frame had been forwarded then.
    #[inline]
    pub fn process_routed(
        &self,
        frame: &mut [u8],
        ingress_ifindex: u32,
        hint: &RouteHint,
    ) -> Verdict {
        let max = if self.max_frame == 0 {
            wire::DEFAULT_MAX_FRAME
        } else {
            self.max_frame
        };
        match wire::parse_frame_max(frame, max) {
            Ok(m) => self.decide(frame, &m, ingress_ifindex, hint),
            Err(ParseError::NonIp) => Verdict::Pass(PassReason::NonIp),
            Err(e) => Verdict::Drop(DropReason::Parse(e)),
        }
    }

    /// Decides for a frame already parsed into `meta` (which must be `parse_frame(frame)`'s value).
    ///
    /// Three steps, each returning early with the verdict of a packet that is not forwarded:
    /// [`admit`](Self::admit) (is it ours to route), [`route`](Self::route) (where to), and
    /// [`rewrite`](Self::rewrite) (next hop's MAC, TTL, checksums).
    pub fn process_parsed(
        &self,
        frame: &mut [u8],
        meta: &PacketMeta,
        ingress_ifindex: u32,
    ) -> Verdict {
        self.decide(frame, meta, ingress_ifindex, &RouteHint::NONE)
    }

    #[inline(always)]
    fn decide(
        &self,
        frame: &mut [u8],
        meta: &PacketMeta,
        ingress_ifindex: u32,
        hint: &RouteHint,
    ) -> Verdict {
        let Some(ingress) = self.interfaces.get(ingress_ifindex) else {
            return Verdict::Pass(PassReason::UnknownIngress);
        };
        if let Some(v) = self.admit(frame, meta, ingress.mac) {
            return v;
        }
        // The kernel's order: prerouting before the route lookup and the TTL check, forward
        // and postrouting after the MTU check (ip_forward), before the neighbour.
        let filtering = !self.filter.is_empty();
        let mut seen = None;
        if filtering && self.filter.has(Hook::Prerouting) {
            let p = FilterPacket::of(frame, meta, ingress_ifindex);
            if let Some(v) = Self::filtered(&self.filter, Hook::Prerouting, &p, frame, meta) {
                return v;
            }
            seen = Some(p);
        }
        // The kernel routes (and answers "no route") before ip_forward checks the TTL, and
        // validates the source against the route back (rp_filter) in between.
        let (nh, egress, hinted_mac) = match self.route(frame, meta, ingress, hint) {
            Ok(r) => r,
            Err(v) => return v,
        };
        if ingress.rp_filter != 0 && meta.version == IpVersion::V4 && !self.source_ok(meta, ingress)
        {
            return Verdict::Drop(DropReason::RpFilter);
        }
        if meta.ttl <= 1 {
            return Self::answer(frame, meta, DropReason::TtlExpired, IcmpKind::TimeExceeded);
        }
        let l3 = usize::from(meta.l3_offset);
        let too_big = u32::from(meta.total_len) > egress.mtu;
        // Only IPv4 without DF may be fragmented on the way (IPv6: RFC 8200 §5, never).
        let fragment = too_big
            && meta.version == IpVersion::V4
            && frame.get(l3 + 6).is_some_and(|b| b & 0x40 == 0);
        if too_big && !fragment {
            let mtu = IcmpKind::TooBig { mtu: egress.mtu };
            return Self::answer(frame, meta, DropReason::TooBig, mtu);
        }
        if filtering {
            let mut p = seen.unwrap_or_else(|| FilterPacket::of(frame, meta, ingress_ifindex));
            p.oif = nh.ifindex;
            for hook in [Hook::Forward, Hook::Postrouting] {
                if let Some(v) = Self::filtered(&self.filter, hook, &p, frame, meta) {
                    return v;
                }
            }
        }
        let next = match (hinted_mac, nh.gateway) {
            (Some(mac), _) => Some(mac),
            (None, Some(gw)) => self.neighbors.get(nh.ifindex, gw),
            (None, None) => self.neighbors.get(nh.ifindex, meta.dst_ip()),
        };
        let Some(next_mac) = next else {
            return Verdict::Drop(DropReason::NoNeighbor);
        };
        if let Some(v) = Self::rewrite(frame, meta, next_mac, egress.mac) {
            return v;
        }
        if fragment {
            return Verdict::Fragment {
                ifindex: nh.ifindex,
                mtu: egress.mtu,
            };
        }
        // Bytes past the IP packet's length (padding, trailers) stay behind, as the kernel
        // trims them on receive.
        let len = (l3 + usize::from(meta.total_len)).min(frame.len());
        // IPv6 has no send_redirects: Linux's ip6_forward always redirects.
        if nh.ifindex == ingress_ifindex
            && (ingress.send_redirects || meta.version == IpVersion::V6)
        {
            if let Some(gateway) = self.redirect_to(meta, ingress, nh) {
                return Verdict::Redirect {
                    ifindex: nh.ifindex,
                    len: len as u32,
                    gateway,
                };
            }
        }
        Verdict::Tx {
            ifindex: nh.ifindex,
            len,
        }
    }

    /// The next hop an IPv4 sender on `ingress`'s link is redirected to, when its packet leaves
    /// by that link again: as Linux's __mkroute_input (the source on a subnet of the link)
    /// and ip_rt_send_redirect (the route's gateway, or the destination itself on-link).
    #[cold]
    fn redirect_to(&self, meta: &PacketMeta, ingress: &Interface, nh: NextHop) -> Option<u32> {
        use core::net::IpAddr as A;
        if meta.version == IpVersion::V6 {
            return self.redirect_target_v6(meta, ingress, nh).map(|_| 0);
        }
        if !ingress.on_link(IpVersion::V4, &meta.src) {
            return None;
        }
        match nh.gateway {
            Some(A::V4(g)) => Some(u32::from(g)),
            Some(A::V6(_)) => None,
            None => Some(meta.dst_v4()),
        }
    }

    /// The target of the IPv6 redirect owed for `meta`'s packet, routed to `nh` back out of
    /// `ingress`, and the router's link-local address there to send it from; as Linux's
    /// `ndisc_send_redirect`: the target is the gateway if it is link-local or the destination
    /// itself (on-link), the source is a neighbour (link-local or in one of the link's
    /// prefixes), and the router has a link-local address on the link.
    fn redirect_target_v6(
        &self,
        meta: &PacketMeta,
        ingress: &Interface,
        nh: NextHop,
    ) -> Option<([u8; 16], [u8; 16])> {
        use core::net::IpAddr as A;
        let link_local = |a: u128| a >> 118 == 0xfe80 >> 6;
        let ll = ingress.addrs.iter().find_map(|a| match a.addr {
            A::V6(x) if link_local(u128::from(x)) => Some(x.octets()),
            _ => None,
        })?;
        if !link_local(u128::from_be_bytes(meta.src)) && !ingress.on_link(IpVersion::V6, &meta.src)
        {
            return None;
        }
        let target = match nh.gateway {
            Some(A::V6(g)) if link_local(u128::from(g)) => g.octets(),
            Some(_) => return None,
            None => meta.dst,
        };
        Some((target, ll))
    }

    /// Whether a frame that arrived on an interface with `ingress_mac` is one this router
    /// forwards: addressed to it at L2, a valid header, addresses it may route, no options, a
    /// fragment only when the policy allows, TTL left. `None`: go on.
    #[inline(always)]
    fn admit(&self, frame: &[u8], meta: &PacketMeta, ingress_mac: [u8; 6]) -> Option<Verdict> {
        use DropReason as D;
        use PassReason as P;
        // `meta` came from a successful parse, so the Ethernet header and the IP header exist.
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return Some(Verdict::Drop(D::Parse(ParseError::Runt)));
        };
        let dst_mac = eth.dst();
        if dst_mac[0] & 1 != 0 {
            return Some(Verdict::Pass(P::L2Multicast));
        }
        if dst_mac != ingress_mac {
            return Some(Verdict::Drop(D::OtherHost));
        }
        if meta.vlan.is_some() && self.tagged == TaggedFrames::Kernel {
            return Some(Verdict::Pass(P::Vlan));
        }
        let l3 = usize::from(meta.l3_offset);
        let hdr_len = usize::from(meta.l4_offset) - l3;
        match meta.version {
            IpVersion::V4 => {
                let Some(hdr) = frame.get(l3..l3 + hdr_len) else {
                    return Some(Verdict::Drop(D::Parse(ParseError::TruncatedL3)));
                };
                if !checksum::verify(hdr) {
                    return Some(Verdict::Drop(D::BadChecksum));
                }
                if let Some(v) = self.check_v4_addrs(meta) {
                    return Some(v);
                }
                if hdr_len > wire::ipv4::MIN_HEADER_LEN {
                    return Some(Verdict::Pass(P::IpOptions));
                }
            }
            IpVersion::V6 => {
                if let Some(v) = self.check_v6_addrs(meta) {
                    return Some(v);
                }
                if frame.get(l3 + 6) == Some(&wire::ipv6::next_header::HOP_BY_HOP) {
                    return Some(Verdict::Pass(P::HopByHop));
                }
            }
        }
        if meta.is_fragment {
            match self.fragments {
                FragmentPolicy::Forward => {}
                FragmentPolicy::Pass => return Some(Verdict::Pass(P::Fragment)),
                FragmentPolicy::Drop => return Some(Verdict::Drop(D::Parse(ParseError::Fragment))),
            }
        }
        None
    }

    /// The verdict of the firewall's `hook` on `p`, unless it lets the packet go on.
    #[inline]
    fn filtered(
        filter: &Filter,
        hook: Hook,
        p: &FilterPacket,
        frame: &[u8],
        meta: &PacketMeta,
    ) -> Option<Verdict> {
        match filter.eval(hook, p) {
            Decision::Accept => None,
            Decision::Drop(_) => Some(Verdict::Drop(DropReason::Filtered)),
            Decision::Reject(k, _) => {
                Some(Self::answer(frame, meta, DropReason::Filtered, k.icmp()))
            }
            // The classifier hands such a family to the kernel before it reaches a ring
            // (`Filter::kernel_families`); frames already queued when the ruleset changed
            // are dropped: handed over from here they would reach the kernel on another
            // interface, and rules on the input interface would judge them wrongly.
            Decision::Kernel(_) => Some(Verdict::Drop(DropReason::Filtered)),
        }
    }

    /// The route of the packet's destination, its egress interface and, from the hint, the
    /// next hop's MAC; `Err`: the verdict of a packet without a usable unicast route.
    #[inline(always)]
    fn route(
        &self,
        frame: &[u8],
        meta: &PacketMeta,
        ingress: &Interface,
        hint: &RouteHint,
    ) -> Result<(NextHop, &Interface, Option<Mac>), Verdict> {
        use DropReason as D;
        if self.routes_incomplete {
            return Err(Verdict::Pass(PassReason::KernelRoute));
        }
        // The batch's hint is a main-table lookup: good only while the rules reduce to main.
        let hinted = self.policy.is_plain(meta.version == IpVersion::V6)
            && match (meta.version, hint.dst) {
                (IpVersion::V4, HintDst::V4(a)) => a == meta.dst_v4(),
                (IpVersion::V6, HintDst::V6(a)) => a == meta.dst_v6(),
                _ => false,
            };
        let (nh, mac) = if hinted {
            (hint.next_hop, hint.next_mac)
        } else {
            (self.lookup(frame, meta, ingress), None)
        };
        let Some(mut nh) = nh else {
            return Err(Self::answer(
                frame,
                meta,
                D::NoRoute,
                IcmpKind::NetUnreachable,
            ));
        };
        let mut mac = mac;
        if nh.group_id().is_some() {
            nh = (self.member(nh, frame, meta)).unwrap_or(NextHop::special(RouteKind::Kernel));
            mac = None;
        }
        match nh.kind() {
            RouteKind::Unicast => {}
            RouteKind::Blackhole => return Err(Verdict::Drop(D::Blackhole)),
            RouteKind::Unreachable => {
                // Linux answers an IPv6 `unreachable` route with "no route" (1/0, as
                // ip6_pkt_discard), IPv4's with host unreachable.
                let e = match meta.version {
                    IpVersion::V4 => IcmpKind::HostUnreachable,
                    IpVersion::V6 => IcmpKind::NetUnreachable,
                };
                return Err(Self::answer(frame, meta, D::Unreachable, e));
            }
            RouteKind::Prohibit => {
                let e = IcmpKind::Prohibited;
                return Err(Self::answer(frame, meta, D::Unreachable, e));
            }
            // A group's members are unicast routes: none left here.
            RouteKind::Kernel | RouteKind::Group => {
                return Err(Verdict::Pass(PassReason::KernelRoute))
            }
            // With the default rules a throw in main leaves nothing to look in.
            RouteKind::Throw => {
                let e = IcmpKind::NetUnreachable;
                return Err(Self::answer(frame, meta, D::NoRoute, e));
            }
        }
        match self.interfaces.get(nh.ifindex) {
            Some(egress) => Ok((nh, egress, mac)),
            None => Err(Verdict::Pass(PassReason::KernelRoute)),
        }
    }

    /// The multipath hash of `meta`'s flow, or with `reversed` of the flow back to its source
    /// (the router's answer).
    #[inline]
    fn flow_hash(&self, frame: &[u8], meta: &PacketMeta, reversed: bool) -> u32 {
        let v6 = meta.version == IpVersion::V6;
        let l3 = usize::from(meta.l3_offset);
        let label = match frame.get(l3 + 1..l3 + 4) {
            Some(b) if v6 => u32::from_be_bytes([0, b[0], b[1], b[2]]) & 0xf_ffff,
            _ => 0,
        };
        let (src, dst) = (
            addr_bits(meta.version, &meta.src),
            addr_bits(meta.version, &meta.dst),
        );
        let ports = (meta.src_port, meta.dst_port);
        if reversed {
            let ports = (ports.1, ports.0);
            self.multipath
                .hash(v6, dst, src, meta.protocol, ports, label)
        } else {
            self.multipath
                .hash(v6, src, dst, meta.protocol, ports, label)
        }
    }

    /// The interface and address whose link-layer address `frame` waits for (its next hop as
    /// [`process`](Self::process) routes it: rules, tables, multipath), for the kernel to
    /// resolve; `None` if it is not routed to a next hop.
    pub fn next_hop_for(&self, frame: &[u8], ingress_ifindex: u32) -> Option<(u32, IpAddr)> {
        let meta = wire::parse_frame(frame).ok()?;
        let ingress = self.interfaces.get(ingress_ifindex)?;
        let nh = self.member(self.lookup(frame, &meta, ingress)?, frame, &meta)?;
        (nh.kind() == RouteKind::Unicast).then(|| (nh.ifindex, nh.gateway.unwrap_or(meta.dst_ip())))
    }

    /// The member of multipath group `id` that `frame`'s flow takes (for operator views; the
    /// forwarder picks the same in [`process`](Self::process)).
    pub fn pick(&self, frame: &[u8], id: u32) -> Option<NextHop> {
        let meta = wire::parse_frame(frame).ok()?;
        self.member(NextHop::group(id), frame, &meta)
    }

    /// The route of `meta`'s destination, before multipath: by table main alone while the
    /// rules reduce to it, else through the rules.
    #[inline]
    fn lookup(&self, frame: &[u8], meta: &PacketMeta, ingress: &Interface) -> Option<NextHop> {
        match meta.version {
            _ if !self.policy.is_plain(meta.version == IpVersion::V6) => {
                self.policy_route(frame, meta, ingress)
            }
            IpVersion::V4 => self.routes.lookup_v4(meta.dst_v4()),
            IpVersion::V6 => self.routes.lookup_v6(meta.dst_v6()),
        }
    }

    /// The member of a multipath next hop that `meta`'s flow takes; any other next hop as it
    /// is (`None`: a group the table does not know).
    #[inline]
    fn member(&self, nh: NextHop, frame: &[u8], meta: &PacketMeta) -> Option<NextHop> {
        match nh.group_id() {
            Some(g) => self.routes.pick(g, self.flow_hash(frame, meta, false)),
            None => Some(nh),
        }
    }

    /// The route of a forwarded packet through the policy rules.
    #[inline(never)]
    fn policy_route(
        &self,
        frame: &[u8],
        meta: &PacketMeta,
        ingress: &Interface,
    ) -> Option<NextHop> {
        let flow = Flow::of(frame, meta, ingress.ifindex);
        self.policy.route(&self.routes, &flow, ingress.vrf_table)
    }

    /// The route back to `meta`'s source, as the kernel looks it up for a packet of its own
    /// (input interface loopback) from `from`, of protocol `proto` with ports `ports`
    /// (source, destination).
    fn route_back(
        &self,
        meta: &PacketMeta,
        from: u128,
        proto: u8,
        ports: (u16, u16),
        vrf: Option<u32>,
    ) -> Option<NextHop> {
        let v6 = meta.version == IpVersion::V6;
        let src = addr_bits(meta.version, &meta.src);
        if self.policy.is_plain(v6) {
            return if v6 {
                self.routes.lookup_v6(src)
            } else {
                self.routes.lookup_v4(src as u32)
            };
        }
        // Linux routes its ICMP errors with their own TOS (0xc0 and the packet's TOS bits),
        // ICMPv6 errors with traffic class and flow label 0.
        let dsfield = if v6 {
            0
        } else {
            0xc0 | (((meta.dscp << 2) | meta.ecn) & 0x1e)
        };
        let flow = Flow {
            v6,
            src: from,
            dst: src,
            iif: policy::LOOPBACK_IFINDEX,
            proto,
            sport: ports.0,
            dport: ports.1,
            dsfield,
            flowlabel: 0,
        };
        self.policy.route(&self.routes, &flow, vrf)
    }

    /// Rewrites a packet for its next hop: L4 checksum completed if partial, TTL / hop limit
    /// down by one (IPv4 header checksum updated), MACs. `None`: done.
    #[inline(always)]
    fn rewrite(
        frame: &mut [u8],
        meta: &PacketMeta,
        next_mac: [u8; 6],
        egress_mac: [u8; 6],
    ) -> Option<Verdict> {
        let l3 = usize::from(meta.l3_offset);
        wire::l4::complete_partial_checksum(frame, meta);
        match meta.version {
            IpVersion::V4 => {
                let Ok(mut ip) = Ipv4Packet::new_checked(&mut frame[l3..]) else {
                    return Some(Verdict::Drop(DropReason::Parse(ParseError::TruncatedL3)));
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
            return Some(Verdict::Drop(DropReason::Parse(ParseError::Runt)));
        };
        eth.set_dst(next_mac);
        eth.set_src(egress_mac);
        None
    }

    /// The verdict for a packet the router drops with `drop` and may answer with `error`.
    fn answer(frame: &[u8], meta: &PacketMeta, drop: DropReason, error: IcmpKind) -> Verdict {
        if icmp::may_answer(frame, meta) {
            Verdict::Icmp { drop, error }
        } else {
            Verdict::Drop(drop)
        }
    }

    /// Turns the frame of a [`Verdict::Icmp`] into the ICMP error `error` (see
    /// [`icmp::build_error`]; `buf` is the frame's whole buffer, its first bytes the frame as
    /// received) and routes it back to the source: `Tx` on success, else `Drop` with the reason
    /// the answer could not be sent (no route back, no address to send from).
    ///
    /// The answer's L2 next hop is the neighbour the route names, or, when the route back
    /// leads out of the ingress interface and that neighbour is unknown, the frame's own
    /// source MAC: the previous hop, which is the way back.
    pub fn icmp_error(
        &self,
        buf: &mut [u8],
        meta: &PacketMeta,
        ingress_ifindex: u32,
        error: IcmpKind,
        id: u16,
    ) -> Verdict {
        use DropReason as D;
        let v6 = meta.version == IpVersion::V6;
        // An IPv6 redirect: its target and link-local source, looked up again (see
        // `Verdict::Redirect`).
        let redirect6 = match error {
            IcmpKind::Redirect { .. } if v6 => {
                let found = self.interfaces.get(ingress_ifindex).and_then(|ingress| {
                    let nh = self.member(self.lookup(buf, meta, ingress)?, buf, meta)?;
                    (nh.ifindex == ingress_ifindex)
                        .then(|| self.redirect_target_v6(meta, ingress, nh))
                        .flatten()
                });
                match found {
                    Some(t) => Some(t),
                    None => return Verdict::Drop(D::NoRoute),
                }
            }
            _ => None,
        };
        let src = match redirect6.map(|(_, ll)| core::net::IpAddr::from(ll)) {
            Some(ll) => Some(ll),
            None => self.interfaces.source_addr(ingress_ifindex, v6),
        };
        let src = match src {
            Some(core::net::IpAddr::V4(a)) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&a.octets());
                b
            }
            Some(core::net::IpAddr::V6(a)) => a.octets(),
            None => return Verdict::Drop(D::NoRoute),
        };
        // A TCP reset goes back with the ports swapped; an ICMP error has none.
        let (proto, ports) = match error {
            IcmpKind::TcpReset => (meta.protocol, (meta.dst_port, meta.src_port)),
            _ if v6 => (wire::l4::proto::ICMPV6, (0, 0)),
            _ => (wire::l4::proto::ICMP, (0, 0)),
        };
        let vrf = self
            .interfaces
            .get(ingress_ifindex)
            .and_then(|i| i.vrf_table);
        let mut back = self.route_back(meta, addr_bits(meta.version, &src), proto, ports, vrf);
        if let Some(g) = back.and_then(|nh| nh.group_id()) {
            back = self.routes.pick(g, self.flow_hash(buf, meta, true));
        }
        let Some(nh) = back.filter(|nh| nh.kind() == RouteKind::Unicast) else {
            return Verdict::Drop(D::NoRoute);
        };
        let Some(egress) = self.interfaces.get(nh.ifindex) else {
            return Verdict::Drop(D::NoRoute);
        };
        let prev_hop = EthernetFrame::new_checked(&*buf).map(|e| e.src()).ok();
        let next = match nh.gateway {
            Some(gw) => self.neighbors.get(nh.ifindex, gw),
            None => self.neighbors.get(nh.ifindex, meta.src_ip()),
        }
        // A redirect quotes a forwarded frame, whose source MAC is already the router's.
        .or(prev_hop.filter(|_| {
            nh.ifindex == ingress_ifindex && !matches!(error, IcmpKind::Redirect { .. })
        }));
        let Some(next_mac) = next else {
            return Verdict::Drop(D::NoNeighbor);
        };
        let built = match (error, redirect6) {
            (IcmpKind::TcpReset, _) => icmp::build_tcp_reset(buf, meta),
            (_, Some((target, _))) => {
                let mac = self.neighbors.get(ingress_ifindex, IpAddr::from(target));
                icmp::build_redirect_v6(buf, meta, &src, &target, mac)
            }
            _ => icmp::build_error(buf, meta, error, &src, id),
        };
        let Some(len) = built else {
            return Verdict::Drop(D::Parse(ParseError::TruncatedL3));
        };
        let Ok(mut eth) = EthernetFrame::new_checked(&mut *buf) else {
            return Verdict::Drop(D::Parse(ParseError::Runt));
        };
        eth.set_dst(next_mac);
        eth.set_src(egress.mac);
        Verdict::Tx {
            ifindex: nh.ifindex,
            len,
        }
    }

    /// Reverse-path filtering as Linux's `fib_validate_source`: the source needs a unicast
    /// route back; in strict mode (1) through the ingress interface, in loose mode (2) through
    /// any.
    fn source_ok(&self, m: &PacketMeta, ingress: &Interface) -> bool {
        let to = addr_bits(m.version, &m.dst);
        let ports = (m.dst_port, m.src_port);
        match self.route_back(m, to, m.protocol, ports, ingress.vrf_table) {
            Some(nh) if matches!(nh.kind(), RouteKind::Unicast | RouteKind::Kernel) => {
                ingress.rp_filter == 2 || nh.ifindex == ingress.ifindex
            }
            // As fib_info_nh_uses_dev: strict is content with any member on the interface.
            Some(nh) if nh.kind() == RouteKind::Group => {
                let members = nh.group_id().and_then(|g| self.routes.group(g));
                ingress.rp_filter == 2
                    || members
                        .is_some_and(|g| g.iter().any(|m| m.next_hop.ifindex == ingress.ifindex))
            }
            _ => false,
        }
    }

    fn check_v4_addrs(&self, m: &PacketMeta) -> Option<Verdict> {
        let d = m.dst_v4();
        let s = u32::from_be_bytes([m.src[0], m.src[1], m.src[2], m.src[3]]);
        if d >> 28 == 0xe {
            return Some(Verdict::Pass(PassReason::Multicast));
        }
        if d == u32::MAX || self.interfaces.is_broadcast_v4(d) {
            return Some(Verdict::Pass(PassReason::Broadcast));
        }
        if self.interfaces.is_local_v4(d) {
            return Some(Verdict::Pass(PassReason::Local));
        }
        // As Linux since 5.3: of 0.0.0.0/8 only 0.0.0.0 is a martian, the rest is unicast
        // (routed like any address, so no route answers net unreachable); so is 240.0.0.0/4 as
        // a destination. A source that is one of the router's own addresses fails the
        // kernel's source validation. Unlike Linux, a class E source is dropped (RFC 1812
        // §5.3.7).
        let martian = |a: u32| a == 0 || a >> 24 == 127;
        if martian(d) || martian(s) || s >> 28 >= 0xe || self.interfaces.is_local_v4(s) {
            return Some(Verdict::Drop(DropReason::Martian));
        }
        if d >> 16 == 0xa9fe || s >> 16 == 0xa9fe {
            return Some(Verdict::Drop(DropReason::LinkLocal));
        }
        None
    }

    fn check_v6_addrs(&self, m: &PacketMeta) -> Option<Verdict> {
        let d = m.dst_v6();
        let s = u128::from_be_bytes(m.src);
        if d >> 120 == 0xff {
            return Some(Verdict::Pass(PassReason::Multicast));
        }
        if self.interfaces.is_local_v6(d) {
            return Some(Verdict::Pass(PassReason::Local));
        }
        // To `::` the kernel looks a route up as for any other address (no route: 1/0).
        if d == 1 || s <= 1 || s >> 120 == 0xff {
            return Some(Verdict::Drop(DropReason::Martian));
        }
        if d >> 118 == 0x3fa || s >> 118 == 0x3fa {
            return Some(Verdict::Drop(DropReason::LinkLocal));
        }
        None
    }
}

/// An address of `meta`'s layout (IPv4 in the first 4 bytes) as the bits policy routing
/// compares (IPv4 in the low 32).
#[inline]
fn addr_bits(version: IpVersion, a: &[u8; 16]) -> u128 {
    match version {
        IpVersion::V4 => u128::from(u32::from_be_bytes([a[0], a[1], a[2], a[3]])),
        IpVersion::V6 => u128::from_be_bytes(*a),
    }
}

/// Re-exported so callers can name MACs without reaching into `wire`.
pub type Mac = ethernet::Mac;

#[cfg(test)]
mod tests;
