//! Routes, neighbours and interfaces: the state the forwarder reads per packet.

use core::fmt;
use core::net::IpAddr;
use std::collections::HashMap;

use prefix_trie::PrefixMap;

use super::dir24_8::{Dir24_8, MAX_VALUE};
use super::hash::FxBuild;
use crate::classify::{mask128, IpPrefix};
use crate::wire::Mac;

/// Where a route sends packets: an interface and, unless the destination is on-link, a gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// Egress interface index.
    pub ifindex: u32,
    /// Gateway address; `None` for a connected (on-link) route.
    pub gateway: Option<IpAddr>,
}

/// What a route does with the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// Forward to the next hop.
    Unicast,
    /// `blackhole`: drop silently.
    Blackhole,
    /// `unreachable`: drop, answer ICMP host unreachable.
    Unreachable,
    /// `prohibit`: drop, answer ICMP administratively prohibited.
    Prohibit,
    /// The kernel's business (a route through an interface llrouter does not serve, `throw`,
    /// ...): the packet is handed to the kernel.
    Kernel,
}

impl NextHop {
    // Kernel interface indices are positive `int`s, so the top of the u32 range is free for
    // the route kinds that have no interface; 0 (no interface) means the kernel's.
    const BLACKHOLE: u32 = u32::MAX;
    const UNREACHABLE: u32 = u32::MAX - 1;
    const PROHIBIT: u32 = u32::MAX - 2;

    /// The next hop of a route of `kind` that has no interface (any kind but `Unicast`).
    pub const fn special(kind: RouteKind) -> NextHop {
        let ifindex = match kind {
            RouteKind::Blackhole => Self::BLACKHOLE,
            RouteKind::Unreachable => Self::UNREACHABLE,
            RouteKind::Prohibit => Self::PROHIBIT,
            RouteKind::Kernel | RouteKind::Unicast => 0,
        };
        NextHop {
            ifindex,
            gateway: None,
        }
    }

    /// What the route does; `Unicast` routes whose interface the router does not serve are
    /// the caller's to recognise.
    #[inline]
    pub fn kind(&self) -> RouteKind {
        match self.ifindex {
            0 => RouteKind::Kernel,
            Self::BLACKHOLE => RouteKind::Blackhole,
            Self::UNREACHABLE => RouteKind::Unreachable,
            Self::PROHIBIT => RouteKind::Prohibit,
            _ => RouteKind::Unicast,
        }
    }
}

/// A route table update that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// More distinct next hops than the 24-bit DIR-24-8 value can index.
    TooManyNextHops,
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::TooManyNextHops => write!(f, "more than {MAX_VALUE} distinct next hops"),
        }
    }
}

impl std::error::Error for RouteError {}

/// IPv6 longest-prefix match over `prefix-trie`, mapping prefixes to next-hop ids.
#[derive(Clone, Default)]
pub struct Lpm6 {
    map: PrefixMap<(u128, u8), u32>,
}

impl fmt::Debug for Lpm6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lpm6")
            .field("routes", &self.map.len())
            .finish()
    }
}

impl Lpm6 {
    /// Installs or replaces a prefix; returns the previous value.
    pub fn insert(&mut self, addr: u128, len: u8, value: u32) -> Option<u32> {
        let len = len.min(128);
        self.map.insert((addr & mask128(len), len), value)
    }

    /// Removes a prefix.
    pub fn remove(&mut self, addr: u128, len: u8) -> Option<u32> {
        let len = len.min(128);
        self.map.remove(&(addr & mask128(len), len))
    }

    /// The value of the longest prefix containing `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        self.map.get_lpm(&(addr, 128)).map(|(_, v)| *v)
    }

    /// Number of prefixes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Every prefix as `(network, len, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (u128, u8, u32)> + '_ {
        self.map.iter().map(|((a, l), &v)| (a, l, v))
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }
}

/// IPv4 (DIR-24-8) and IPv6 (trie) routes to interned next hops.
///
/// Next hops are stored once and referenced by id; ids are not reclaimed when their last route
/// goes, which bounds memory by the number of distinct next hops ever seen (2^24).
#[derive(Debug, Default)]
pub struct RouteTable {
    v4: Option<Box<Dir24_8>>,
    v6: Lpm6,
    nexthops: Vec<NextHop>,
    ids: HashMap<NextHop, u32>,
}

impl RouteTable {
    /// An empty table (the 64 MiB IPv4 first level is allocated at the first IPv4 route).
    pub fn new() -> Self {
        Self::default()
    }

    fn intern(&mut self, nh: NextHop) -> Result<u32, RouteError> {
        if let Some(&id) = self.ids.get(&nh) {
            return Ok(id);
        }
        let id = u32::try_from(self.nexthops.len())
            .ok()
            .filter(|&i| i <= MAX_VALUE)
            .ok_or(RouteError::TooManyNextHops)?;
        self.nexthops.push(nh);
        self.ids.insert(nh, id);
        Ok(id)
    }

    fn nh(&self, id: Option<u32>) -> Option<&NextHop> {
        self.nexthops.get(id? as usize)
    }

    /// Installs or replaces the route for `prefix`; returns the previous next hop.
    pub fn insert(&mut self, prefix: IpPrefix, nh: NextHop) -> Result<Option<NextHop>, RouteError> {
        let id = self.intern(nh)?;
        let old = match prefix.addr() {
            IpAddr::V4(a) => self
                .v4
                .get_or_insert_with(|| Box::new(Dir24_8::new()))
                .insert(u32::from(a), prefix.len(), id)
                .ok()
                .flatten(),
            IpAddr::V6(a) => self.v6.insert(u128::from(a), prefix.len(), id),
        };
        Ok(self.nh(old).copied())
    }

    /// Removes the route for exactly `prefix`.
    pub fn remove(&mut self, prefix: IpPrefix) -> Option<NextHop> {
        let old = match prefix.addr() {
            IpAddr::V4(a) => self.v4.as_mut()?.remove(u32::from(a), prefix.len()),
            IpAddr::V6(a) => self.v6.remove(u128::from(a), prefix.len()),
        };
        self.nh(old).copied()
    }

    /// Longest-prefix match for an IPv4 address (host order).
    #[inline]
    pub fn lookup_v4(&self, addr: u32) -> Option<&NextHop> {
        self.nh(self.v4.as_ref()?.lookup(addr))
    }

    /// Longest-prefix match for an IPv6 address (host order).
    #[inline]
    pub fn lookup_v6(&self, addr: u128) -> Option<&NextHop> {
        self.nh(self.v6.lookup(addr))
    }

    /// Longest-prefix match for any address.
    pub fn lookup(&self, addr: IpAddr) -> Option<&NextHop> {
        match addr {
            IpAddr::V4(a) => self.lookup_v4(u32::from(a)),
            IpAddr::V6(a) => self.lookup_v6(u128::from(a)),
        }
    }

    /// Every route (IPv4 first, then IPv6; unordered within a family), for operator views.
    pub fn iter(&self) -> impl Iterator<Item = (IpPrefix, NextHop)> + '_ {
        let v4 = self
            .v4
            .iter()
            .flat_map(|t| t.iter())
            .map(|(net, len, id)| (IpAddr::V4(net.into()), len, id));
        let v6 = self
            .v6
            .iter()
            .map(|(net, len, id)| (IpAddr::V6(net.into()), len, id));
        v4.chain(v6)
            .filter_map(|(a, len, id)| Some((IpPrefix::new(a, len).ok()?, *self.nh(Some(id))?)))
    }

    /// Number of routes (both families).
    pub fn len(&self) -> usize {
        self.v4.as_ref().map_or(0, |t| t.len()) + self.v6.len()
    }

    /// True if there are no routes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Neighbour (ARP / ND) cache: (interface, address) → MAC.
///
/// Keyed by interface as well as address because link-local IPv6 gateways (fe80::1) repeat on
/// every link.
#[derive(Debug, Clone, Default)]
pub struct Neighbors {
    map: HashMap<(u32, u128), Mac, FxBuild>,
}

fn key(a: IpAddr) -> u128 {
    // IPv4 as the IPv4-mapped IPv6 address, so both families share one key type.
    match a {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl Neighbors {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the MAC of `addr` on `ifindex`; returns the previous one.
    pub fn insert(&mut self, ifindex: u32, addr: IpAddr, mac: Mac) -> Option<Mac> {
        self.map.insert((ifindex, key(addr)), mac)
    }

    /// Forgets `addr` on `ifindex`.
    pub fn remove(&mut self, ifindex: u32, addr: IpAddr) -> Option<Mac> {
        self.map.remove(&(ifindex, key(addr)))
    }

    /// The MAC of `addr` on `ifindex`.
    #[inline]
    pub fn get(&self, ifindex: u32, addr: IpAddr) -> Option<Mac> {
        self.map.get(&(ifindex, key(addr))).copied()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every entry as `(ifindex, address, MAC)`, for operator views. IPv4-mapped IPv6 keys come
    /// back as IPv4 (that is how IPv4 entries are stored).
    pub fn iter(&self) -> impl Iterator<Item = (u32, IpAddr, Mac)> + '_ {
        self.map.iter().map(|(&(i, k), &mac)| {
            let a = core::net::Ipv6Addr::from(k);
            let addr = match a.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(a),
            };
            (i, addr, mac)
        })
    }
}

/// One of the router's interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Kernel interface index.
    pub ifindex: u32,
    /// Its MAC address (source of forwarded frames, and the only unicast MAC accepted).
    pub mac: Mac,
    /// IP MTU in bytes.
    pub mtu: u32,
    /// Its addresses with prefix lengths.
    pub addrs: Vec<IpPrefixAddr>,
}

/// An interface address with its subnet length (`10.0.0.1/24`: host bits kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPrefixAddr {
    /// The address.
    pub addr: IpAddr,
    /// The subnet prefix length.
    pub len: u8,
}

impl Interface {
    /// An interface without addresses.
    pub fn new(ifindex: u32, mac: Mac, mtu: u32) -> Self {
        Interface {
            ifindex,
            mac,
            mtu,
            addrs: Vec::new(),
        }
    }
}

/// The router's interfaces, with the local and broadcast addresses precomputed for the fast path.
#[derive(Debug, Clone, Default)]
pub struct Interfaces {
    list: Vec<Interface>,
    local4: Vec<u32>,
    bcast4: Vec<u32>,
    local6: Vec<u128>,
}

impl Interfaces {
    /// No interfaces.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces (by ifindex) an interface.
    pub fn upsert(&mut self, iface: Interface) {
        match self.list.iter_mut().find(|i| i.ifindex == iface.ifindex) {
            Some(slot) => *slot = iface,
            None => self.list.push(iface),
        }
        self.rebuild();
    }

    /// Removes an interface.
    pub fn remove(&mut self, ifindex: u32) -> Option<Interface> {
        let pos = self.list.iter().position(|i| i.ifindex == ifindex)?;
        let i = self.list.remove(pos);
        self.rebuild();
        Some(i)
    }

    /// Adds an address to an existing interface; false if the interface is unknown.
    pub fn add_addr(&mut self, ifindex: u32, addr: IpAddr, len: u8) -> bool {
        let Some(i) = self.list.iter_mut().find(|i| i.ifindex == ifindex) else {
            return false;
        };
        i.addrs.push(IpPrefixAddr { addr, len });
        self.rebuild();
        true
    }

    fn rebuild(&mut self) {
        self.local4.clear();
        self.bcast4.clear();
        self.local6.clear();
        for a in self.list.iter().flat_map(|i| &i.addrs) {
            match a.addr {
                IpAddr::V4(v) => {
                    let v = u32::from(v);
                    self.local4.push(v);
                    // /31 and /32 have no broadcast address (RFC 3021).
                    if a.len < 31 {
                        self.bcast4.push(v | !crate::classify::mask32(a.len));
                    }
                }
                IpAddr::V6(v) => self.local6.push(u128::from(v)),
            }
        }
    }

    /// The interface with this index.
    #[inline]
    pub fn get(&self, ifindex: u32) -> Option<&Interface> {
        // A router has a handful of interfaces: a scan beats hashing.
        self.list.iter().find(|i| i.ifindex == ifindex)
    }

    /// All interfaces.
    pub fn iter(&self) -> impl Iterator<Item = &Interface> {
        self.list.iter()
    }

    /// The router's address to answer from on `ifindex` for `version`: the interface's first
    /// address of that family (for IPv6 a global one before a link-local one), else the first
    /// of any interface, as Linux picks the source of its ICMP errors.
    pub fn source_addr(&self, ifindex: u32, v6: bool) -> Option<IpAddr> {
        let fits = |a: &&IpPrefixAddr| a.addr.is_ipv6() == v6;
        let global = |a: &&IpPrefixAddr| match a.addr {
            IpAddr::V6(x) => x.segments()[0] & 0xffc0 != 0xfe80,
            IpAddr::V4(_) => true,
        };
        let on = self.get(ifindex).map(|i| i.addrs.as_slice()).unwrap_or(&[]);
        let all = self.list.iter().flat_map(|i| &i.addrs);
        on.iter()
            .filter(fits)
            .find(global)
            .or_else(|| all.clone().filter(fits).find(global))
            .or_else(|| on.iter().find(fits))
            .map(|a| a.addr)
    }

    /// True if `a` (host order) is one of the router's IPv4 addresses.
    #[inline]
    pub fn is_local_v4(&self, a: u32) -> bool {
        self.local4.contains(&a)
    }

    /// True if `a` is the directed broadcast address of a connected IPv4 subnet.
    #[inline]
    pub fn is_broadcast_v4(&self, a: u32) -> bool {
        self.bcast4.contains(&a)
    }

    /// True if `a` is one of the router's IPv6 addresses.
    #[inline]
    pub fn is_local_v6(&self, a: u128) -> bool {
        self.local6.contains(&a)
    }
}

#[cfg(test)]
mod dump_tests {
    use super::*;

    #[test]
    fn routes_and_neighbours_iterate_as_inserted() {
        let mut t = RouteTable::new();
        let p4 = IpPrefix::new("10.1.0.0".parse().unwrap(), 16).unwrap();
        let p6 = IpPrefix::new("fd00::".parse().unwrap(), 64).unwrap();
        let nh = NextHop {
            ifindex: 3,
            gateway: Some("10.0.0.1".parse().unwrap()),
        };
        t.insert(p4, nh).unwrap();
        t.insert(
            p6,
            NextHop {
                ifindex: 4,
                gateway: None,
            },
        )
        .unwrap();
        let mut all: Vec<(IpPrefix, NextHop)> = t.iter().collect();
        all.sort_by_key(|(p, _)| p.len());
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], (p4, nh));
        assert_eq!(all[1].0, p6);
        let mut n = Neighbors::new();
        n.insert(3, "10.0.0.1".parse().unwrap(), [2, 0, 0, 0, 0, 1]);
        n.insert(4, "fe80::1".parse().unwrap(), [2, 0, 0, 0, 0, 2]);
        let mut v: Vec<_> = n.iter().collect();
        v.sort_by_key(|e| e.0);
        assert_eq!(v[0], (3, "10.0.0.1".parse().unwrap(), [2, 0, 0, 0, 0, 1]));
        assert_eq!(v[1].1, "fe80::1".parse::<IpAddr>().unwrap());
    }
}
