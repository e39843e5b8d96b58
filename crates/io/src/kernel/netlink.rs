//! rtnetlink: the route socket, dumps and the decoding of link, address, route and neighbour
//! messages into what the mirror applies.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::{KernelError, Result};
use llr_core::classify::IpPrefix;
use llr_core::fwd::{NextHop, RouteKind, RouteTable, Rule, RuleAction};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteType,
};
use netlink_packet_route::rule::{
    RuleAction as NlAction, RuleAttribute, RuleFlags, RuleHeader, RuleMessage,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::{LinkFacts, MirrorSpec};

// rtnetlink multicast groups (linux/rtnetlink.h, the legacy RTMGRP_* bitmask for bind()).
pub(super) const RTMGRP_LINK: u32 = 0x1;
pub(super) const RTMGRP_NEIGH: u32 = 0x4;
pub(super) const RTMGRP_IPV4_IFADDR: u32 = 0x10;
pub(super) const RTMGRP_IPV4_ROUTE: u32 = 0x40;
pub(super) const RTMGRP_IPV6_IFADDR: u32 = 0x100;
pub(super) const RTMGRP_IPV6_ROUTE: u32 = 0x400;
pub(super) const RTMGRP_IPV4_RULE: u32 = 0x80;
/// RTNLGRP_IPV4_NETCONF (24) as a bind() bit: the kernel says when an IPv4 device setting
/// (`rp_filter`, `forwarding`) changes.
pub(super) const RTMGRP_IPV4_NETCONF: u32 = 1 << (24 - 1);
const RTM_NEWNETCONF: u16 = 80;
/// RTNLGRP_IPV6_RULE (19) as a bind() bit.
pub(super) const RTMGRP_IPV6_RULE: u32 = 1 << (19 - 1);
/// RTNLGRP_NEXTHOP (32): beyond the bind() bitmask, joined with NETLINK_ADD_MEMBERSHIP.
const RTNLGRP_NEXTHOP: u32 = 32;
/// RTM_NEWNEXTHOP, RTM_DELNEXTHOP, RTM_GETNEXTHOP (linux/rtnetlink.h; the parser has no
/// nexthop messages, so they are read here).
const RTM_NEWNEXTHOP: u16 = 104;
const RTM_DELNEXTHOP: u16 = 105;
const RTM_GETNEXTHOP: u16 = 106;
pub(super) const RT_TABLE_MAIN: u32 = 254;
pub(super) const RT_TABLE_LOCAL: u32 = 255;

/// Bytes per netlink receive; dumps send at most ~32 KiB per datagram.
pub(super) const RECV_BUF: usize = 1 << 16;

/// A netlink route socket: request/response for dumps, or bound to groups for events.
pub(super) struct NlSocket {
    pub(super) sock: Socket,
    pub(super) seq: u32,
    pub(super) buf: Vec<u8>,
}

impl NlSocket {
    /// A socket bound to `groups` (0: for dumps). `rcvbuf` bytes of receive buffer for an
    /// event socket: room for bursts (a routing daemon installing a full table); an overrun is
    /// recovered by a re-dump, which costs seconds with a full table.
    pub(super) fn new(groups: u32, rcvbuf: usize) -> Result<NlSocket> {
        let nl = |op| move |cause| KernelError::Netlink { op, cause };
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(nl("socket(NETLINK_ROUTE)"))?;
        sock.bind(&SocketAddr::new(0, groups)).map_err(nl("bind"))?;
        if groups != 0 {
            match crate::sys::set_rcvbuf(sock.as_raw_fd(), rcvbuf) {
                Some(got) if got < rcvbuf => tracing::warn!(
                    "route mirror: netlink receive buffer {got} bytes, not the {rcvbuf} asked \
                     for (not root: capped by net.core.rmem_max); bursts of route changes \
                     will overrun it and cost a full re-dump each"
                ),
                Some(_) => {}
                None => tracing::warn!("route mirror: netlink receive buffer not set"),
            }
            sock.set_non_blocking(true).map_err(nl("non-blocking"))?;
            // Nexthop objects: whether a group is resilient (a kernel before 5.3 has none).
            if groups & RTMGRP_IPV4_ROUTE != 0 {
                if let Err(e) = sock.add_membership(RTNLGRP_NEXTHOP) {
                    tracing::debug!("route mirror: no nexthop events: {e}");
                }
            }
        }
        Ok(NlSocket {
            sock,
            seq: 0,
            buf: vec![0; RECV_BUF],
        })
    }

    /// Sends a dump request and collects every answer up to `NLMSG_DONE`. Retries (a bounded
    /// number of times) when the kernel flags the dump as interrupted by a concurrent change.
    pub(super) fn dump(&mut self, req: RouteNetlinkMessage) -> Result<Vec<RouteNetlinkMessage>> {
        for _attempt in 0..5 {
            let mut got = Vec::new();
            if !self.dump_each(req.clone(), |m| got.push(m))? {
                return Ok(got);
            }
        }
        Err(KernelError::Dump(
            "dump interrupted 5 times in a row (tables changing too fast)".into(),
        ))
    }

    /// Sends a dump request and hands every answer to `f` as it is decoded, so a full routing
    /// table is never held as messages (a million routes as decoded messages are ~0.5 GB).
    /// Returns whether the kernel flagged the dump as interrupted (then what `f` got is not a
    /// consistent snapshot: start over).
    pub(super) fn dump_each(
        &mut self,
        req: RouteNetlinkMessage,
        mut f: impl FnMut(RouteNetlinkMessage),
    ) -> Result<bool> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut hdr = NetlinkHeader::default();
        hdr.flags = NLM_F_DUMP | NLM_F_REQUEST;
        hdr.sequence_number = seq;
        let mut msg = NetlinkMessage::new(hdr, NetlinkPayload::from(req));
        msg.finalize();
        let mut out = vec![0; msg.header.length as usize];
        msg.serialize(&mut out[..]);
        self.sock
            .send_to(&out, &SocketAddr::new(0, 0), 0)
            .map_err(|cause| KernelError::Netlink {
                op: "send dump request",
                cause,
            })?;
        let mut interrupted = false;
        // A full table dumps in about a second; this only catches a kernel that stopped.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if Instant::now() > deadline {
                return Err(KernelError::Dump("dump did not finish within 60 s".into()));
            }
            let n = self.sock.recv(&mut &mut self.buf[..], 0).map_err(|cause| {
                KernelError::Netlink {
                    op: "recv dump",
                    cause,
                }
            })?;
            for (h_flags, h_seq, m) in frames(&self.buf[..n]) {
                if h_seq != seq {
                    continue; // a stale answer to an earlier, abandoned request
                }
                if h_flags & NLM_F_DUMP_INTR != 0 {
                    interrupted = true;
                }
                match m {
                    Frame::Done => return Ok(interrupted),
                    Frame::Error(code) => {
                        return Err(KernelError::Dump(format!(
                            "dump request failed: {}",
                            std::io::Error::from_raw_os_error(-code)
                        )))
                    }
                    Frame::Msg(m) => f(m),
                    Frame::Other | Frame::NetConf | Frame::NextHop => {}
                }
            }
        }
    }

    /// The ids of the kernel's resilient nexthop groups (`ip nexthop … type resilient`):
    /// routes through them carry the id (RTA_NH_ID) beside their members. A kernel without
    /// nexthop objects has none.
    pub(super) fn resilient_groups(&mut self) -> Result<HashSet<u32>> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        // nlmsghdr, then struct nhmsg (family, scope, protocol, reserved, flags): all zero.
        let mut req = Vec::with_capacity(24);
        req.extend_from_slice(&24u32.to_ne_bytes());
        req.extend_from_slice(&RTM_GETNEXTHOP.to_ne_bytes());
        req.extend_from_slice(&(NLM_F_DUMP | NLM_F_REQUEST).to_ne_bytes());
        req.extend_from_slice(&seq.to_ne_bytes());
        req.extend_from_slice(&0u32.to_ne_bytes());
        req.extend_from_slice(&[0; 8]);
        let nl = |op| move |cause| KernelError::Netlink { op, cause };
        self.sock
            .send_to(&req, &SocketAddr::new(0, 0), 0)
            .map_err(nl("send nexthop dump request"))?;
        let mut out = HashSet::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if Instant::now() > deadline {
                return Err(KernelError::Dump(
                    "nexthop dump did not finish within 60 s".into(),
                ));
            }
            let n = (self.sock.recv(&mut &mut self.buf[..], 0)).map_err(nl("recv nexthop dump"))?;
            for m in messages(&self.buf[..n]) {
                if m.seq != seq {
                    continue;
                }
                match m.kind {
                    // NLMSG_DONE
                    3 => return Ok(out),
                    // NLMSG_ERROR: an error code (a kernel without nexthops: none) or an ACK
                    2 => {
                        let code = (m.bytes.get(16..20))
                            .map_or(0, |c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
                        if code == 0 || code == -libc::EOPNOTSUPP || code == -libc::EINVAL {
                            return Ok(out);
                        }
                        return Err(KernelError::Dump(format!(
                            "nexthop dump failed: {}",
                            std::io::Error::from_raw_os_error(-code)
                        )));
                    }
                    RTM_NEWNEXTHOP => {
                        if let Some(id) = resilient_group(&m.bytes[16..]) {
                            out.insert(id);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The id of the group an RTM_NEWNEXTHOP body (struct nhmsg, then attributes) describes, if
/// it is resilient: NHA_ID (1) and NHA_GROUP_TYPE (3) = NEXTHOP_GRP_TYPE_RES (1).
fn resilient_group(body: &[u8]) -> Option<u32> {
    let mut a = body.get(8..)?;
    let (mut id, mut resilient) = (None, false);
    while a.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([a[0], a[1]]));
        let kind = u16::from_ne_bytes([a[2], a[3]]) & 0x3fff;
        if len < 4 || len > a.len() {
            break;
        }
        let v = &a[4..len];
        match kind {
            1 if v.len() >= 4 => id = Some(u32::from_ne_bytes([v[0], v[1], v[2], v[3]])),
            3 if v.len() >= 2 => resilient = u16::from_ne_bytes([v[0], v[1]]) == 1,
            _ => {}
        }
        let adv = (len + 3) & !3;
        if adv >= a.len() {
            break;
        }
        a = &a[adv..];
    }
    id.filter(|_| resilient)
}

pub(super) enum Frame {
    Msg(RouteNetlinkMessage),
    /// RTM_NEWNETCONF (which the parser does not decode).
    NetConf,
    /// RTM_NEWNEXTHOP or RTM_DELNEXTHOP (neither does it decode these).
    NextHop,
    Done,
    Error(i32),
    Other,
}

/// Splits a netlink datagram into messages: (header flags, sequence number, payload). A message
/// the parser cannot decode (a newer kernel's attribute layout, say) is skipped, not fatal.
pub(super) fn frames(b: &[u8]) -> Vec<(u16, u32, Frame)> {
    messages(b)
        .map(|m| {
            let f = match NetlinkMessage::<RouteNetlinkMessage>::deserialize(m.bytes) {
                _ if m.kind == RTM_NEWNETCONF => Frame::NetConf,
                _ if m.kind == RTM_NEWNEXTHOP || m.kind == RTM_DELNEXTHOP => Frame::NextHop,
                Ok(x) => match x.payload {
                    NetlinkPayload::InnerMessage(x) => Frame::Msg(x),
                    NetlinkPayload::Done(_) => Frame::Done,
                    NetlinkPayload::Error(e) => match e.code {
                        Some(c) => Frame::Error(c.get()),
                        None => Frame::Other, // an ACK
                    },
                    _ => Frame::Other,
                },
                Err(e) => {
                    tracing::debug!("netlink: skipping undecodable message: {e}");
                    Frame::Other
                }
            };
            (m.flags, m.seq, f)
        })
        .collect()
}

/// One netlink message of a datagram, undecoded: its type, flags, sequence number and bytes
/// (header included).
pub(crate) struct RawMessage<'a> {
    pub(crate) kind: u16,
    pub(crate) flags: u16,
    pub(crate) seq: u32,
    /// The whole message, header included.
    pub(crate) bytes: &'a [u8],
}

/// The messages of a netlink datagram, as far as their lengths hold (4-byte aligned,
/// NLMSG_ALIGN).
pub(crate) fn messages(mut b: &[u8]) -> impl Iterator<Item = RawMessage<'_>> {
    std::iter::from_fn(move || {
        if b.len() < 16 {
            return None;
        }
        let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len < 16 || len > b.len() {
            return None;
        }
        let m = RawMessage {
            kind: u16::from_ne_bytes([b[4], b[5]]),
            flags: u16::from_ne_bytes([b[6], b[7]]),
            seq: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
            bytes: &b[..len],
        };
        b = b.get((len + 3) & !3..).unwrap_or(&[]);
        Some(m)
    })
}

/// ifindex → (MAC, MTU).
pub(super) type Links = BTreeMap<u32, ([u8; 6], u32)>;
/// ifindex → sorted (address, prefix length).
pub(super) type Addrs = BTreeMap<u32, Vec<(IpAddr, u8)>>;

/// The kernel's tables, as far as llrouter cares.
#[derive(Debug, Clone, Default)]
pub(super) struct KernelView {
    /// The router's links: ifindex → (MAC, MTU).
    pub(super) links: BTreeMap<u32, ([u8; 6], u32)>,
    /// The router's addresses: ifindex → (address, prefix length), sorted.
    pub(super) addrs: BTreeMap<u32, Vec<(IpAddr, u8)>>,
    /// Table main as dumped: prefix → entries (metric, next hop); taken out when applied.
    pub(super) routes: Routes,
    /// Resolved neighbours of the router's interfaces.
    pub(super) neighbors: HashMap<(u32, IpAddr), [u8; 6]>,
    /// The routing tables besides main and local: table → prefix → (metric, next hop).
    pub(super) tables: Tables,
    /// The routing rules, IPv4 and IPv6, in the kernel's order.
    pub(super) rules: (Vec<Rule>, Vec<Rule>),
    /// The router's interfaces enslaved to a VRF: ifindex → the VRF's table.
    pub(super) vrf: BTreeMap<u32, u32>,
    /// The ids of the kernel's resilient nexthop groups.
    pub(super) resilient: HashSet<u32>,
}

/// Routing tables besides main: table → prefix → (metric, next hop).
pub(super) type Tables = HashMap<u32, HashMap<IpPrefix, Vec<(u32, NextHop)>>>;

/// One decoded change.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum KernelEvent {
    /// Add or replace the route (prefix, metric) → next hop.
    RouteSet(IpPrefix, u32, NextHop),
    /// Remove the route (prefix, metric).
    RouteDel(IpPrefix, u32),
    /// A route of another table than main: (table, prefix, metric, next hop), or removed.
    TableRouteSet(u32, IpPrefix, u32, NextHop),
    TableRouteDel(u32, IpPrefix, u32),
    /// A routing rule changed: re-read the rules.
    Rules,
    NeighSet(u32, IpAddr, [u8; 6]),
    NeighDel(u32, IpAddr),
    /// One of the router's links went down or away, or lost an address: re-dump everything
    /// (IPv4 drops the routes through it without telling).
    Resync,
    /// One of the router's links or addresses changed otherwise (an XDP program attached, an
    /// MTU, an address added): re-read links and addresses only.
    Interfaces,
    Ignore,
}

/// An RTA_VIA gateway (an IPv6 next hop of an IPv4 route).
fn via_addr(v: &netlink_packet_route::route::RouteVia) -> Option<IpAddr> {
    use netlink_packet_route::route::RouteVia;
    match v {
        RouteVia::Inet(a) => Some(IpAddr::V4(*a)),
        RouteVia::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

pub(super) fn route_addr(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// Decodes a route message of any table but local: (table, prefix, metric, next hop). The next
/// hop of a route llrouter must not forward itself has the route's own interface (maybe not one
/// of the router's) or ifindex 0, so the forwarder passes matching packets to the kernel.
/// A multipath route's next hops are interned as a group in `groups` (the main table, which
/// every table's routes share groups with); a route with more groups than a table holds goes to
/// the kernel.
pub(super) fn decode_route(
    m: &RouteMessage,
    groups: &Groups<'_>,
) -> Option<(u32, IpPrefix, u32, NextHop)> {
    use netlink_packet_route::route::RouteNextHopFlags;
    let h: &RouteHeader = &m.header;
    let mut table = u32::from(h.table);
    let (mut dst, mut oif, mut gw, mut metric) = (None, None, None, 0u32);
    let mut hops: Vec<(NextHop, u16)> = Vec::new();
    let mut nhid = None;
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::NhId(id) => nhid = Some(*id),
            RouteAttribute::Destination(d) => dst = route_addr(d),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::Gateway(g) => gw = route_addr(g),
            RouteAttribute::Priority(p) => metric = *p,
            // Multipath routes and nexthop groups (the kernel lists a group's members here
            // with nexthop_compat_mode on, its default). Dead next hops take no flows.
            RouteAttribute::MultiPath(list) => {
                for nh in list {
                    if nh.flags.contains(RouteNextHopFlags::Dead) {
                        continue;
                    }
                    let g = nh.attributes.iter().find_map(|x| match x {
                        RouteAttribute::Gateway(g) => route_addr(g),
                        RouteAttribute::Via(v) => via_addr(v),
                        _ => None,
                    });
                    let hop = NextHop {
                        ifindex: nh.interface_index,
                        gateway: g,
                    };
                    hops.push((hop, u16::from(nh.hops) + 1));
                }
            }
            _ => {}
        }
    }
    if table == RT_TABLE_LOCAL || h.flags.contains(RouteFlags::Cloned) {
        return None;
    }
    let dst = match (dst, h.address_family) {
        (Some(d), _) => d,
        (None, AddressFamily::Inet) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        (None, AddressFamily::Inet6) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return None,
    };
    let prefix = IpPrefix::new(dst, h.destination_prefix_length).ok()?;
    let nh = match h.kind {
        RouteType::Unicast if hops.len() > 1 => {
            let interned = match nhid {
                Some(id) if groups.resilient.contains(&id) => {
                    groups.table.resilient_group_of(&hops)
                }
                _ => groups.table.group_of(&hops),
            };
            interned.unwrap_or(NextHop::special(RouteKind::Kernel))
        }
        RouteType::Unicast => {
            if let Some(&(one, _)) = hops.first() {
                oif = Some(one.ifindex);
                gw = one.gateway;
            }
            NextHop {
                ifindex: oif.unwrap_or(0),
                gateway: gw,
            }
        }
        RouteType::BlackHole => NextHop::special(RouteKind::Blackhole),
        RouteType::Unreachable => NextHop::special(RouteKind::Unreachable),
        RouteType::Prohibit => NextHop::special(RouteKind::Prohibit),
        RouteType::Throw => NextHop::special(RouteKind::Throw),
        _ => NextHop::special(RouteKind::Kernel),
    };
    Some((table, prefix, metric, nh))
}

/// Where route decoding interns multipath groups (the forwarder's main table), and which of
/// the kernel's nexthop groups are resilient.
pub(super) struct Groups<'a> {
    pub(super) table: &'a RouteTable,
    pub(super) resilient: &'a HashSet<u32>,
}

pub(super) fn decode_neigh(m: &NeighbourMessage) -> Option<(u32, IpAddr, Option<[u8; 6]>)> {
    let mut ip = None;
    let mut mac = None;
    for a in &m.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                ip = Some(IpAddr::V4(*v4))
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                ip = Some(IpAddr::V6(*v6))
            }
            NeighbourAttribute::LinkLayerAddress(l) => mac = <[u8; 6]>::try_from(&l[..]).ok(),
            _ => {}
        }
    }
    let usable = !matches!(
        m.header.state,
        NeighbourState::Failed | NeighbourState::Incomplete | NeighbourState::None
    );
    Some((m.header.ifindex, ip?, if usable { mac } else { None }))
}

pub(super) fn decode_link(m: &LinkMessage) -> (u32, [u8; 6], u32) {
    let mut mac = [0u8; 6];
    let mut mtu = 1500;
    for a in &m.attributes {
        match a {
            LinkAttribute::Address(a) => {
                if let Ok(x) = <[u8; 6]>::try_from(&a[..]) {
                    mac = x;
                }
            }
            LinkAttribute::Mtu(x) => mtu = *x,
            _ => {}
        }
    }
    (m.header.index, mac, mtu)
}

pub(super) fn decode_addr(m: &AddressMessage) -> Option<(u32, IpAddr, u8)> {
    // IFA_LOCAL is the interface's own address (differs from IFA_ADDRESS on point-to-point
    // links); IPv6 sends only IFA_ADDRESS.
    let mut local = None;
    let mut address = None;
    for a in &m.attributes {
        match a {
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Address(ip) => address = Some(*ip),
            _ => {}
        }
    }
    Some((m.header.index, local.or(address)?, m.header.prefix_len))
}

pub(super) fn classify_event(
    m: &RouteNetlinkMessage,
    spec: &MirrorSpec,
    groups: &Groups<'_>,
) -> KernelEvent {
    use RouteNetlinkMessage as M;
    match m {
        M::NewRoute(r) if spec.kernel_routes => match decode_route(r, groups) {
            Some((RT_TABLE_MAIN, p, metric, nh)) => KernelEvent::RouteSet(p, metric, nh),
            Some((t, p, metric, nh)) => KernelEvent::TableRouteSet(t, p, metric, nh),
            None => KernelEvent::Ignore,
        },
        M::DelRoute(r) if spec.kernel_routes => match decode_route(r, groups) {
            Some((RT_TABLE_MAIN, p, metric, _)) => KernelEvent::RouteDel(p, metric),
            Some((t, p, metric, _)) => KernelEvent::TableRouteDel(t, p, metric),
            None => KernelEvent::Ignore,
        },
        M::NewRule(_) | M::DelRule(_) if spec.kernel_routes => KernelEvent::Rules,
        M::NewNeighbour(n) if spec.kernel_routes => match decode_neigh(n) {
            Some((i, _, _)) if !spec.ifindexes.contains(&i) => KernelEvent::Ignore,
            Some((i, ip, Some(mac))) => KernelEvent::NeighSet(i, ip, mac),
            Some((i, ip, None)) => KernelEvent::NeighDel(i, ip),
            None => KernelEvent::Ignore,
        },
        M::DelNeighbour(n) if spec.kernel_routes => match decode_neigh(n) {
            Some((i, ip, _)) if spec.ifindexes.contains(&i) => KernelEvent::NeighDel(i, ip),
            _ => KernelEvent::Ignore,
        },
        M::NewLink(l) if spec.ifindexes.contains(&l.header.index) => {
            use netlink_packet_route::link::LinkFlags;
            if l.header.flags.contains(LinkFlags::Up | LinkFlags::LowerUp) {
                KernelEvent::Interfaces
            } else {
                KernelEvent::Resync
            }
        }
        M::DelLink(l) if spec.ifindexes.contains(&l.header.index) => KernelEvent::Resync,
        M::NewAddress(a) if spec.ifindexes.contains(&a.header.index) => KernelEvent::Interfaces,
        M::DelAddress(a) if spec.ifindexes.contains(&a.header.index) => KernelEvent::Resync,
        // Other links (the punt TAP, a BIRD peer's link) matter for their names and VRFs
        // only (routes through them arrive as route events): one may be a VRF or one a rule
        // names (`iif wg0`), coming, going or renamed, so the rules are read again with the
        // links' names (a few milliseconds).
        M::NewLink(_) | M::DelLink(_) if spec.kernel_routes => KernelEvent::Rules,
        _ => KernelEvent::Ignore,
    }
}

/// Reads the kernel's tables with netlink dumps (calling thread's namespace).
/// What the router checks of every interface of this namespace before it starts, by ifindex.
pub(super) fn link_facts(sock: &mut NlSocket) -> Result<BTreeMap<u32, LinkFacts>> {
    let mut out = BTreeMap::new();
    for m in sock.dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))? {
        if let RouteNetlinkMessage::NewLink(l) = m {
            let mut f = LinkFacts {
                num_rx_queues: 1,
                mtu: decode_link(&l).2,
            };
            for a in &l.attributes {
                if let LinkAttribute::NumRxQueues(n) = a {
                    f.num_rx_queues = *n;
                }
            }
            out.insert(l.header.index, f);
        }
    }
    Ok(out)
}

/// `groups`: where multipath routes intern their groups (the forwarder's main table).
pub(super) fn dump_view(
    sock: &mut NlSocket,
    spec: &MirrorSpec,
    groups: &RouteTable,
) -> Result<KernelView> {
    let mut v = KernelView::default();
    dump_interfaces(sock, spec, &mut v)?;
    if spec.kernel_routes {
        v.resilient = sock.resilient_groups()?;
    }
    dump_tables(sock, spec, &mut v, groups)?;
    Ok(v)
}

/// Reads the router's links and addresses into `v` (replacing what it had).
pub(super) fn dump_interfaces(
    sock: &mut NlSocket,
    spec: &MirrorSpec,
    v: &mut KernelView,
) -> Result<()> {
    v.links.clear();
    v.addrs.clear();
    for m in sock.dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))? {
        if let RouteNetlinkMessage::NewLink(l) = m {
            let (i, mac, mtu) = decode_link(&l);
            if spec.ifindexes.contains(&i) {
                v.links.insert(i, (mac, mtu));
            }
        }
    }
    for m in sock.dump(RouteNetlinkMessage::GetAddress(AddressMessage::default()))? {
        if let RouteNetlinkMessage::NewAddress(a) = m {
            if let Some((i, ip, len)) = decode_addr(&a) {
                if spec.ifindexes.contains(&i) {
                    v.addrs.entry(i).or_default().push((ip, len));
                }
            }
        }
    }
    for a in v.addrs.values_mut() {
        a.sort();
        a.dedup();
    }
    Ok(())
}

/// Reads table main and the neighbours into `v`.
fn dump_tables(
    sock: &mut NlSocket,
    spec: &MirrorSpec,
    v: &mut KernelView,
    groups: &RouteTable,
) -> Result<()> {
    if spec.kernel_routes {
        let resilient = v.resilient.clone();
        let groups = &Groups {
            table: groups,
            resilient: &resilient,
        };
        // Decoded as they arrive; an interrupted dump starts the routes over.
        let mut consistent = false;
        for _attempt in 0..5 {
            v.routes.clear();
            v.tables.clear();
            let mut interrupted = false;
            for fam in [AddressFamily::Inet, AddressFamily::Inet6] {
                let mut req = RouteMessage::default();
                req.header.address_family = fam;
                interrupted |= sock.dump_each(RouteNetlinkMessage::GetRoute(req), |m| {
                    if let RouteNetlinkMessage::NewRoute(r) = m {
                        match decode_route(&r, groups) {
                            Some((RT_TABLE_MAIN, p, metric, nh)) => v.routes.set(p, metric, nh),
                            Some((t, p, metric, nh)) => {
                                table_set(&mut v.tables, t, p, metric, Some(nh))
                            }
                            None => {}
                        }
                    }
                })?;
            }
            if !interrupted {
                consistent = true;
                break;
            }
        }
        if !consistent {
            return Err(KernelError::Dump(
                "route dump interrupted 5 times in a row (tables changing too fast)".into(),
            ));
        }
        dump_rules(sock, v)?;
        for m in sock.dump(RouteNetlinkMessage::GetNeighbour(
            NeighbourMessage::default(),
        ))? {
            if let RouteNetlinkMessage::NewNeighbour(n) = m {
                if let Some((i, ip, Some(mac))) = decode_neigh(&n) {
                    if spec.ifindexes.contains(&i) {
                        v.neighbors.insert((i, ip), mac);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Adds, replaces (`Some`) or removes (`None`) the route (`p`, `metric`) of table `t`.
pub(super) fn table_set(
    tables: &mut Tables,
    t: u32,
    p: IpPrefix,
    metric: u32,
    nh: Option<NextHop>,
) {
    let table = tables.entry(t).or_default();
    let routes = table.entry(p).or_default();
    routes.retain(|r| r.0 != metric);
    if let Some(nh) = nh {
        routes.push((metric, nh));
    }
    if routes.is_empty() {
        table.remove(&p);
    }
    if table.is_empty() {
        tables.remove(&t);
    }
}

/// Reads the routing rules of both families into `v.rules`, and the links' names and VRFs into
/// `v.vrf` (rules name interfaces; a VRF's slaves look up its table).
pub(super) fn dump_rules(sock: &mut NlSocket, v: &mut KernelView) -> Result<()> {
    let mut names: HashMap<String, u32> = HashMap::new();
    let mut vrf_table: HashMap<u32, u32> = HashMap::new();
    let mut master: HashMap<u32, u32> = HashMap::new();
    for m in sock.dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))? {
        let RouteNetlinkMessage::NewLink(l) = m else {
            continue;
        };
        let i = l.header.index;
        for a in &l.attributes {
            match a {
                LinkAttribute::IfName(n) => {
                    names.insert(n.clone(), i);
                }
                LinkAttribute::Controller(c) => {
                    master.insert(i, *c);
                }
                LinkAttribute::LinkInfo(info) => {
                    use netlink_packet_route::link::{InfoData, InfoVrf, LinkInfo};
                    for x in info {
                        if let LinkInfo::Data(InfoData::Vrf(d)) = x {
                            for a in d {
                                if let InfoVrf::TableId(t) = a {
                                    vrf_table.insert(i, *t);
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    v.vrf = v
        .links
        .keys()
        .filter_map(|i| {
            let m = master.get(i)?;
            Some((*i, *vrf_table.get(m)?))
        })
        .collect();
    let mut rules = (Vec::new(), Vec::new());
    for fam in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut req = RuleMessage::default();
        req.header.family = fam;
        for m in sock.dump(RouteNetlinkMessage::GetRule(req))? {
            if let RouteNetlinkMessage::NewRule(r) = m {
                let rule = decode_rule(&r, &names);
                match r.header.family {
                    AddressFamily::Inet => rules.0.push(rule),
                    AddressFamily::Inet6 => rules.1.push(rule),
                    _ => {}
                }
            }
        }
    }
    v.rules = rules;
    Ok(())
}

/// Decodes a rule; interface names become indices through `names` (an unknown name: an index
/// no interface has, which matches nothing, as the kernel's detached rule). A selector the
/// forwarder cannot evaluate makes the rule's action [`RuleAction::Kernel`].
pub(super) fn decode_rule(m: &RuleMessage, names: &HashMap<String, u32>) -> Rule {
    let h: &RuleHeader = &m.header;
    let mut r = Rule::new(0, RuleAction::Nop);
    r.invert = h.flags.contains(RuleFlags::Invert);
    let mut table = u32::from(h.table);
    let (mut src, mut dst) = (None, None);
    let (mut goto, mut mark, mut mask) = (None, None, None);
    let v6 = h.family == AddressFamily::Inet6;
    let mut kernel: Option<&'static str> = None;
    // `tos`: Linux matches an IPv4 rule's against the packet's RFC 1349 TOS bits only
    // (fib4_rule_match, IPTOS_RT_MASK), an IPv6 rule's against the DSCP (fib6_rule_match).
    if h.tos != 0 {
        r.dsfield = Some((h.tos, if v6 { 0xfc } else { 0x1c }));
    }
    let (mut dscp, mut dscp_mask, mut label, mut label_mask) = (None, None, None, None);
    let idx = |n: &str| Some(names.get(n).copied().unwrap_or(u32::MAX));
    for a in &m.attributes {
        match a {
            RuleAttribute::Priority(p) => r.priority = *p,
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::Source(a) => src = Some(*a),
            RuleAttribute::Destination(a) => dst = Some(*a),
            RuleAttribute::Iifname(n) => r.iif = idx(n),
            RuleAttribute::Oifname(n) => r.oif = idx(n),
            RuleAttribute::Goto(g) => goto = Some(*g),
            RuleAttribute::FwMark(v) => mark = Some(*v),
            RuleAttribute::FwMask(v) => mask = Some(*v),
            // No forwarded packet carries tunnel metadata: such a rule never matches.
            RuleAttribute::TunId(t) if *t != 0 => r.iif = Some(u32::MAX),
            RuleAttribute::TunId(_) => {}
            RuleAttribute::SuppressPrefixLen(n) if *n != u32::MAX => {
                r.suppress_prefixlen = Some((*n).min(128) as u8)
            }
            RuleAttribute::SuppressIfGroup(g) if *g != u32::MAX => {
                kernel = Some("suppress_ifgroup")
            }
            RuleAttribute::SuppressPrefixLen(_) | RuleAttribute::SuppressIfGroup(_) => {}
            RuleAttribute::L3MDev(on) => r.l3mdev = *on,
            // A forwarded packet, and an error the kernel sends about one, is uid 0 (the
            // netns's root: ip_route_input_slow's sock_net_uid(net, NULL)).
            RuleAttribute::UidRange(u) if u.start == 0 => {}
            RuleAttribute::UidRange(_) => r.iif = Some(u32::MAX),
            RuleAttribute::IpProtocol(p) => r.ipproto = Some(u8::from(*p)),
            RuleAttribute::SourcePortRange(p) => r.sport = Some((p.start, p.end)),
            RuleAttribute::DestinationPortRange(p) => r.dport = Some((p.start, p.end)),
            // Who installed the rule, and the realm it tags routes with: no selectors.
            RuleAttribute::Protocol(_) | RuleAttribute::Realm(_) => {}
            RuleAttribute::Other(nla) => match unknown_rule_attribute(nla) {
                Fra::Dscp(d) => dscp = Some(d),
                Fra::DscpMask(m) => dscp_mask = Some(m),
                Fra::FlowLabel(l) => label = Some(l),
                Fra::FlowLabelMask(m) => label_mask = Some(m),
                Fra::Nothing => {}
                Fra::Kernel(why) => kernel = Some(why),
            },
            _ => kernel = Some("an attribute llrouter does not know"),
        }
    }
    let prefix = |a: Option<IpAddr>, len: u8| a.and_then(|a| IpPrefix::new(a, len).ok());
    if h.src_len > 0 {
        r.src = prefix(src, h.src_len);
    }
    if h.dst_len > 0 {
        r.dst = prefix(dst, h.dst_len);
    }
    if let Some(v) = mark {
        r.fwmark = Some((v, mask.unwrap_or(u32::MAX)));
    }
    if let Some(d) = dscp {
        r.dsfield = Some((d << 2, dscp_mask.unwrap_or(0x3f) << 2));
    }
    if let Some(l) = label {
        r.flowlabel = Some((l, label_mask.unwrap_or(0xf_ffff)));
    }
    r.action = match (kernel, h.action) {
        (Some(why), _) => RuleAction::Kernel(why),
        (None, NlAction::ToTable) => RuleAction::Lookup(table),
        (None, NlAction::Goto) => goto.map_or(RuleAction::Nop, RuleAction::Goto),
        (None, NlAction::Nop) => RuleAction::Nop,
        (None, NlAction::Blackhole) => RuleAction::Blackhole,
        (None, NlAction::Unreachable) => RuleAction::Unreachable,
        (None, NlAction::Prohibit) => RuleAction::Prohibit,
        (None, _) => RuleAction::Kernel("an action llrouter does not know"),
    };
    r
}

/// A rule attribute the netlink crate does not decode (Linux 6.13's `dscp`, 6.15's flow label
/// and masks).
enum Fra {
    Dscp(u8),
    DscpMask(u8),
    FlowLabel(u32),
    FlowLabelMask(u32),
    /// Changes nothing: the port masks of Linux 6.15 sent as 0xffff (the whole port) with every
    /// port range, and padding.
    Nothing,
    /// Keeps llrouter from evaluating the rule, and why.
    Kernel(&'static str),
}

fn unknown_rule_attribute(nla: &netlink_packet_core::DefaultNla) -> Fra {
    use netlink_packet_core::Nla;
    const FRA_PAD: u16 = 18;
    const FRA_DSCP: u16 = 25;
    const FRA_FLOWLABEL: u16 = 26;
    const FRA_FLOWLABEL_MASK: u16 = 27;
    const FRA_SPORT_MASK: u16 = 28;
    const FRA_DPORT_MASK: u16 = 29;
    const FRA_DSCP_MASK: u16 = 30;
    let mut v = vec![0u8; nla.value_len()];
    nla.emit_value(&mut v);
    let be32 = |v: &[u8]| <[u8; 4]>::try_from(v).ok().map(u32::from_be_bytes);
    match (nla.kind(), v.as_slice()) {
        (FRA_PAD, _) => Fra::Nothing,
        (FRA_SPORT_MASK | FRA_DPORT_MASK, [0xff, 0xff]) => Fra::Nothing,
        (FRA_SPORT_MASK | FRA_DPORT_MASK, _) => Fra::Kernel("a port mask"),
        (FRA_DSCP, &[d]) => Fra::Dscp(d & 0x3f),
        (FRA_DSCP_MASK, &[m]) => Fra::DscpMask(m & 0x3f),
        (FRA_FLOWLABEL, v) if be32(v).is_some() => Fra::FlowLabel(be32(v).unwrap_or(0)),
        (FRA_FLOWLABEL_MASK, v) if be32(v).is_some() => Fra::FlowLabelMask(be32(v).unwrap_or(0)),
        (FRA_DSCP | FRA_DSCP_MASK | FRA_FLOWLABEL | FRA_FLOWLABEL_MASK, _) => {
            Fra::Kernel("a malformed dscp or flowlabel attribute")
        }
        _ => Fra::Kernel("an attribute llrouter does not know"),
    }
}

/// A dump of the kernel's routes (table main), held only while the mirror applies it (the mirror
/// keeps no copy of its own). Keyed compactly per family, since a full table is a million keys:
/// each entry is a packed key and `(metric << 32 | next-hop id)`, 16 bytes (IPv4) or 32 (IPv6)
/// beside hashbrown's control byte. A prefix with several metrics (rare) keeps its list aside.
#[derive(Debug, Clone, Default)]
pub(super) struct Routes {
    v4: HashMap<u64, u64>,
    v6: HashMap<(u64, u64, u8), u64>,
    many: HashMap<IpPrefix, Vec<(u32, u32)>>,
    hops: Vec<NextHop>,
    ids: HashMap<NextHop, u32>,
}

/// The packed value of a prefix whose entries are in `Routes::many`.
const MANY: u64 = u64::MAX;

enum Key {
    V4(u64),
    V6((u64, u64, u8)),
}

fn key(p: &IpPrefix) -> Key {
    match p.addr() {
        IpAddr::V4(a) => Key::V4(u64::from(u32::from(a)) << 8 | u64::from(p.len())),
        IpAddr::V6(a) => {
            let a = u128::from(a);
            Key::V6(((a >> 64) as u64, a as u64, p.len()))
        }
    }
}

fn pack(metric: u32, id: u32) -> u64 {
    u64::from(metric) << 32 | u64::from(id)
}

fn unpack(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

impl Routes {
    fn intern(&mut self, nh: NextHop) -> u32 {
        if let Some(&i) = self.ids.get(&nh) {
            return i;
        }
        let i = self.hops.len() as u32;
        self.hops.push(nh);
        self.ids.insert(nh, i);
        i
    }

    fn get(&self, p: &IpPrefix) -> Option<u64> {
        match key(p) {
            Key::V4(k) => self.v4.get(&k).copied(),
            Key::V6(k) => self.v6.get(&k).copied(),
        }
    }

    fn put(&mut self, p: &IpPrefix, v: Option<u64>) {
        match (key(p), v) {
            (Key::V4(k), Some(v)) => {
                self.v4.insert(k, v);
            }
            (Key::V4(k), None) => {
                self.v4.remove(&k);
            }
            (Key::V6(k), Some(v)) => {
                self.v6.insert(k, v);
            }
            (Key::V6(k), None) => {
                self.v6.remove(&k);
            }
        }
    }

    /// Adds or replaces the route (`p`, `metric`).
    pub(super) fn set(&mut self, p: IpPrefix, metric: u32, nh: NextHop) {
        let id = self.intern(nh);
        match self.get(&p) {
            None => self.put(&p, Some(pack(metric, id))),
            Some(MANY) => {
                let v = self.many.entry(p).or_default();
                match v.iter_mut().find(|(m, _)| *m == metric) {
                    Some(slot) => slot.1 = id,
                    None => v.push((metric, id)),
                }
            }
            Some(one) => {
                let (m, h) = unpack(one);
                if m == metric {
                    self.put(&p, Some(pack(metric, id)));
                } else {
                    self.many.insert(p, vec![(m, h), (metric, id)]);
                    self.put(&p, Some(MANY));
                }
            }
        }
    }

    /// Removes every route of `p`.
    #[cfg(test)]
    pub(super) fn remove(&mut self, p: &IpPrefix) {
        self.many.remove(p);
        self.put(p, None);
    }

    /// The routes of `p` as (metric, next hop) from a packed value.
    fn entries(&self, p: &IpPrefix, v: u64) -> Vec<(u32, NextHop)> {
        let hop = |(m, id): (u32, u32)| Some((m, *self.hops.get(id as usize)?));
        match v {
            MANY => (self.many.get(p).into_iter().flatten())
                .filter_map(|&e| hop(e))
                .collect(),
            one => hop(unpack(one)).into_iter().collect(),
        }
    }

    /// Every prefix with its routes (metric, next hop).
    pub(super) fn iter(&self) -> impl Iterator<Item = (IpPrefix, Vec<(u32, NextHop)>)> + '_ {
        let v4 = self.v4.iter().filter_map(|(&k, &v)| {
            let p = IpPrefix::new(IpAddr::V4(((k >> 8) as u32).into()), k as u8).ok()?;
            Some((p, self.entries(&p, v)))
        });
        let v6 = self.v6.iter().filter_map(|(&(hi, lo, len), &v)| {
            let a = u128::from(hi) << 64 | u128::from(lo);
            let p = IpPrefix::new(IpAddr::V6(a.into()), len).ok()?;
            Some((p, self.entries(&p, v)))
        });
        v4.chain(v6)
    }

    /// The routes of `p` as (metric, next hop).
    #[cfg(test)]
    fn routes_of(&self, p: &IpPrefix) -> Vec<(u32, NextHop)> {
        self.get(p).map(|v| self.entries(p, v)).unwrap_or_default()
    }

    /// The next hop of `p`'s lowest metric.
    #[cfg(test)]
    fn best(&self, p: &IpPrefix) -> Option<NextHop> {
        self.routes_of(p)
            .into_iter()
            .min_by_key(|r| r.0)
            .map(|r| r.1)
    }

    /// True if the kernel has a route for `p`.
    pub(super) fn contains(&self, p: &IpPrefix) -> bool {
        self.get(p).is_some()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    pub(super) fn clear(&mut self) {
        self.v4.clear();
        self.v6.clear();
        self.many.clear();
    }
}

#[cfg(test)]
mod routes_tests {
    use super::*;

    fn nh(i: u32) -> NextHop {
        NextHop {
            ifindex: i,
            gateway: None,
        }
    }

    #[test]
    fn lowest_metric_wins_and_several_metrics_are_kept() {
        let mut r = Routes::default();
        let p: IpPrefix = "10.0.0.0/8".parse().unwrap();
        let q: IpPrefix = "2001:db8::/48".parse().unwrap();
        r.set(p, 100, nh(1));
        assert_eq!(r.get(&p), Some(pack(100, 0)), "one route inline");
        r.set(p, 10, nh(2));
        r.set(p, 50, nh(3));
        assert_eq!(r.best(&p), Some(nh(2)));
        r.set(p, 10, nh(4));
        assert_eq!(r.best(&p), Some(nh(4)), "a metric's next hop is replaced");
        let mut all = r.routes_of(&p);
        all.sort_by_key(|e| e.0);
        assert_eq!(all, vec![(10, nh(4)), (50, nh(3)), (100, nh(1))]);
        r.set(q, 1024, nh(1));
        let mut it: Vec<_> = r.iter().collect();
        it.sort_by_key(|e| e.0.len());
        assert_eq!(it.len(), 2);
        assert_eq!((it[0].0, it[0].1.len()), (p, 3));
        assert_eq!(it[1], (q, vec![(1024, nh(1))]));
        r.remove(&p);
        assert_eq!((r.best(&p), r.len()), (None, 1));
        assert!(r.many.is_empty());
        assert_eq!(r.hops.len(), 4, "next hops interned once each");
    }
}

#[cfg(test)]
mod rule_tests {
    use super::*;
    use netlink_packet_core::DefaultNla;
    use netlink_packet_route::rule::RuleUidRange;

    fn rule(family: AddressFamily, tos: u8, attrs: Vec<RuleAttribute>) -> Rule {
        let mut m = RuleMessage::default();
        m.header.family = family;
        m.header.tos = tos;
        m.header.action = NlAction::Blackhole;
        m.attributes = attrs;
        decode_rule(&m, &HashMap::new())
    }

    #[test]
    fn tos_dscp_flowlabel_and_uidrange_are_evaluated_as_linux_does() {
        let r = rule(AddressFamily::Inet, 0x10, vec![]);
        assert_eq!(
            (r.dsfield, r.action),
            (Some((0x10, 0x1c)), RuleAction::Blackhole)
        );
        assert_eq!(
            r.describe(|i| i.to_string()),
            "0: from all tos 0x10 blackhole"
        );
        let r = rule(AddressFamily::Inet6, 0xb8, vec![]);
        assert_eq!(r.dsfield, Some((0xb8, 0xfc)));
        // Linux 6.13's dscp (the value in DSCP units) and 6.15's mask.
        let dscp = |d: u8| RuleAttribute::Other(DefaultNla::new(25, vec![d]));
        let r = rule(AddressFamily::Inet, 0, vec![dscp(46)]);
        assert_eq!(r.dsfield, Some((0xb8, 0xfc)));
        let mask = RuleAttribute::Other(DefaultNla::new(30, vec![0x38]));
        let r = rule(AddressFamily::Inet, 0, vec![dscp(8), mask]);
        assert_eq!(r.dsfield, Some((0x20, 0xe0)));
        assert_eq!(
            r.describe(|i| i.to_string()),
            "0: from all dscp 8/0x38 blackhole"
        );
        let label =
            |k: u16, v: u32| RuleAttribute::Other(DefaultNla::new(k, v.to_be_bytes().to_vec()));
        let r = rule(AddressFamily::Inet6, 0, vec![label(26, 0x12345)]);
        assert_eq!(r.flowlabel, Some((0x12345, 0xf_ffff)));
        let r = rule(
            AddressFamily::Inet6,
            0,
            vec![label(26, 0x100), label(27, 0xf00)],
        );
        assert_eq!(
            (r.flowlabel, r.action),
            (Some((0x100, 0xf00)), RuleAction::Blackhole)
        );
        let bad = RuleAttribute::Other(DefaultNla::new(26, vec![1, 2]));
        assert!(matches!(
            rule(AddressFamily::Inet6, 0, vec![bad]).action,
            RuleAction::Kernel(_)
        ));
        // A forwarded packet is uid 0: a range with 0 selects it, any other none.
        let uid = |start, end| RuleAttribute::UidRange(RuleUidRange { start, end });
        let r = rule(AddressFamily::Inet, 0, vec![uid(0, 0)]);
        assert_eq!((r.iif, r.action), (None, RuleAction::Blackhole));
        let r = rule(AddressFamily::Inet, 0, vec![uid(1000, 2000)]);
        assert_eq!((r.iif, r.action), (Some(u32::MAX), RuleAction::Blackhole));
        // Port masks other than the whole port stay the kernel's.
        let pm = RuleAttribute::Other(DefaultNla::new(28, vec![0xff, 0x00]));
        assert_eq!(
            rule(AddressFamily::Inet, 0, vec![pm]).action,
            RuleAction::Kernel("a port mask")
        );
    }
}
