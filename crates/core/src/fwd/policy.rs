//! Policy routing: the kernel's rules (`ip rule`) and the routing tables they select.
//!
//! The rules are evaluated as Linux's `fib_rules_lookup` does: in priority order, a rule whose
//! selectors match the packet's flow acts; `lookup` consults a table and goes on with the next
//! rule when the table has no route (or a `throw` route, or a route the rule's
//! `suppress_prefixlength` suppresses); `goto` jumps to the first rule of the target priority;
//! `blackhole`, `unreachable` and `prohibit` end the lookup. With no rule left the packet has no
//! route.
//!
//! The main table is the forwarder's own [`RouteTable`] (a full Internet table fits it); every
//! other table a rule can select is a [`SmallTable`], whose memory is proportional to its routes,
//! so a table of a few routes costs a few hundred bytes instead of the main table's megabytes.
//! A [`Policy`] is immutable and replaced whole when a rule or a small table changes, like the
//! forwarder's other small tables.
//!
//! The local table (255) is not consulted here: the forwarder hands packets for the router's
//! own addresses to the kernel before it routes ([`super::PassReason::Local`]).
//! A rule with a selector llrouter cannot evaluate for a forwarded packet (`suppress_ifgroup`,
//! port masks) hands the packets that reach it, and match its other selectors, to the kernel
//! ([`RuleAction::Kernel`]), which evaluates it exactly.

use core::net::IpAddr;
use std::collections::HashMap;

use super::hash::FxBuild;
use super::{NextHop, RouteKind, RouteTable};
use crate::classify::IpPrefix;
use crate::wire::{IpVersion, PacketMeta};

/// The kernel's `default` table.
pub const TABLE_DEFAULT: u32 = 253;
/// The kernel's `main` table: the forwarder's [`RouteTable`].
pub const TABLE_MAIN: u32 = 254;
/// The kernel's `local` table.
pub const TABLE_LOCAL: u32 = 255;
/// The loopback interface's index: the input interface of packets the router itself sends (its
/// ICMP errors) and of the reverse lookups of source validation.
pub const LOOPBACK_IFINDEX: u32 = 1;

/// What a rule does with a packet its selectors match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleAction {
    /// Look the destination up in this table.
    Lookup(u32),
    /// Go on at the first rule of this priority (none: the rule is skipped, as the kernel
    /// skips an unresolved `goto`).
    Goto(u32),
    /// Nothing (go on).
    Nop,
    /// Drop silently.
    Blackhole,
    /// Drop; no route (ICMP net unreachable, ICMPv6 no route).
    Unreachable,
    /// Drop; administratively prohibited.
    Prohibit,
    /// The rule has a selector llrouter cannot evaluate: the kernel decides.
    Kernel(&'static str),
}

/// One rule: selectors and an action. A selector left `None` matches every packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Preference: lower first.
    pub priority: u32,
    /// `not`: the rule acts on the packets its selectors do *not* match.
    pub invert: bool,
    /// `from`.
    pub src: Option<IpPrefix>,
    /// `to`.
    pub dst: Option<IpPrefix>,
    /// `iif` as an interface index ([`LOOPBACK_IFINDEX`]: the router's own packets;
    /// `u32::MAX`: a name no interface has now, which matches nothing).
    pub iif: Option<u32>,
    /// `oif`: forwarded packets have no output interface when the rules are evaluated, so a
    /// rule with one never matches them (as in the kernel).
    pub oif: Option<u32>,
    /// `fwmark` (value, mask): forwarded packets carry mark 0 (a firewall that sets marks is
    /// not taken on by llrouter's filter), so this matches when `value & mask == 0`.
    pub fwmark: Option<(u32, u32)>,
    /// `ipproto`.
    pub ipproto: Option<u8>,
    /// `sport` range (inclusive).
    pub sport: Option<(u16, u16)>,
    /// `dport` range (inclusive).
    pub dport: Option<(u16, u16)>,
    /// `tos`, `dsfield` or `dscp` as (value, mask) over the packet's DS field (the whole TOS
    /// byte): matches when `dsfield & mask == value`. Linux compares an IPv4 rule's `tos` with
    /// the packet's RFC 1349 TOS bits only (mask 0x1c), an IPv6 rule's with the DSCP (0xfc),
    /// and `dscp N[/M]` with the DSCP (under `M`, 0x3f by default), each shifted into place.
    pub dsfield: Option<(u8, u8)>,
    /// `flowlabel` (value, mask), IPv6: matches when `flowlabel & mask == value`.
    pub flowlabel: Option<(u32, u32)>,
    /// `l3mdev`: the table is the VRF's of the input interface; matches only packets that
    /// arrive on an interface enslaved to a VRF.
    pub l3mdev: bool,
    /// `suppress_prefixlength`: a route found whose prefix is no longer than this is ignored.
    pub suppress_prefixlen: Option<u8>,
    /// What it does.
    pub action: RuleAction,
}

impl Rule {
    /// A rule of priority `priority` doing `action` for every packet.
    pub fn new(priority: u32, action: RuleAction) -> Rule {
        Rule {
            priority,
            invert: false,
            src: None,
            dst: None,
            iif: None,
            oif: None,
            fwmark: None,
            ipproto: None,
            sport: None,
            dport: None,
            dsfield: None,
            flowlabel: None,
            l3mdev: false,
            suppress_prefixlen: None,
            action,
        }
    }

    /// The rule in `ip rule`'s words (`100: from all to 10.0.0.0/8 lookup 100`), interfaces
    /// named by `name`.
    pub fn describe(&self, name: impl Fn(u32) -> String) -> String {
        let mut s = format!("{}:", self.priority);
        if self.invert {
            s += " not";
        }
        match self.src {
            Some(p) => s += &format!(" from {p}"),
            None => s += " from all",
        }
        if let Some(p) = self.dst {
            s += &format!(" to {p}");
        }
        if let Some((v, m)) = self.fwmark {
            s += &format!(" fwmark {v:#x}");
            if m != u32::MAX {
                s += &format!("/{m:#x}");
            }
        }
        let dev = |i: u32| match i {
            u32::MAX => "[detached]".to_string(),
            i => name(i),
        };
        if let Some(i) = self.iif {
            s += &format!(" iif {}", dev(i));
        }
        if let Some(i) = self.oif {
            s += &format!(" oif {}", dev(i));
        }
        if let Some(p) = self.ipproto {
            s += &format!(" ipproto {p}");
        }
        let range = |(a, b): (u16, u16)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        };
        if let Some(r) = self.sport {
            s += &format!(" sport {}", range(r));
        }
        if let Some(r) = self.dport {
            s += &format!(" dport {}", range(r));
        }
        match self.dsfield {
            Some((v, 0x1c | 0xfc)) => s += &format!(" tos {v:#04x}"),
            Some((v, m)) => s += &format!(" dscp {}/{:#x}", v >> 2, m >> 2),
            None => {}
        }
        if let Some((v, m)) = self.flowlabel {
            s += &format!(" flowlabel {v:#x}/{m:#x}");
        }
        if self.l3mdev {
            s += " lookup [l3mdev-table]";
        }
        match self.action {
            RuleAction::Lookup(_) if self.l3mdev => {}
            RuleAction::Lookup(TABLE_MAIN) => s += " lookup main",
            RuleAction::Lookup(TABLE_LOCAL) => s += " lookup local",
            RuleAction::Lookup(TABLE_DEFAULT) => s += " lookup default",
            RuleAction::Lookup(t) => s += &format!(" lookup {t}"),
            RuleAction::Goto(p) => s += &format!(" goto {p}"),
            RuleAction::Nop => s += " nop",
            RuleAction::Blackhole => s += " blackhole",
            RuleAction::Unreachable => s += " unreachable",
            RuleAction::Prohibit => s += " prohibit",
            RuleAction::Kernel(why) => s += &format!(" (to the kernel: {why})"),
        }
        if let Some(n) = self.suppress_prefixlen {
            s += &format!(" suppress_prefixlength {n}");
        }
        s
    }

    /// True if the rule has no selector and no suppressor: it acts on every packet.
    fn is_unconditional(&self) -> bool {
        *self
            == Rule {
                priority: self.priority,
                action: self.action,
                ..Rule::new(0, RuleAction::Nop)
            }
    }

    fn selects(&self, f: &Flow, vrf: Option<u32>) -> bool {
        let ok = self.src.is_none_or(|p| prefix_holds(&p, f.v6, f.src))
            && self.dst.is_none_or(|p| prefix_holds(&p, f.v6, f.dst))
            && self.iif.is_none_or(|i| i == f.iif)
            && self.oif.is_none()
            && self.fwmark.is_none_or(|(v, m)| v & m == 0)
            && self.ipproto.is_none_or(|p| p == f.proto)
            && self.sport.is_none_or(|(a, b)| (a..=b).contains(&f.sport))
            && self.dport.is_none_or(|(a, b)| (a..=b).contains(&f.dport))
            && self.dsfield.is_none_or(|(v, m)| f.dsfield & m == v)
            && self.flowlabel.is_none_or(|(v, m)| f.flowlabel & m == v)
            && (!self.l3mdev || vrf.is_some());
        ok != self.invert
    }
}

fn prefix_holds(p: &IpPrefix, v6: bool, a: u128) -> bool {
    match p.addr() {
        IpAddr::V4(n) if !v6 => {
            let m = crate::classify::mask32(p.len());
            (a as u32) & m == u32::from(n) & m
        }
        IpAddr::V6(n) if v6 => {
            let m = u128::MAX.checked_shl(128 - u32::from(p.len())).unwrap_or(0);
            a & m == u128::from(n) & m
        }
        _ => false,
    }
}

/// What the rules see of a packet: addresses (IPv4 in the low 32 bits), input interface,
/// protocol and ports (0 when the packet has none, or is a fragment), DS field and flow label
/// (IPv6; 0 for IPv4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flow {
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Source address.
    pub src: u128,
    /// Destination address.
    pub dst: u128,
    /// Input interface index.
    pub iif: u32,
    /// Upper-layer protocol.
    pub proto: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The DS field (IPv4 TOS byte, IPv6 traffic class), ECN bits included.
    pub dsfield: u8,
    /// The IPv6 flow label (20 bits).
    pub flowlabel: u32,
}

impl Flow {
    /// The flow of the packet of `frame` (parsed into `meta`) arriving on `iif`.
    pub fn of(frame: &[u8], meta: &PacketMeta, iif: u32) -> Flow {
        let v6 = meta.version == IpVersion::V6;
        let l3 = usize::from(meta.l3_offset);
        let flowlabel = match frame.get(l3 + 1..l3 + 4) {
            Some(b) if v6 => u32::from_be_bytes([0, b[0], b[1], b[2]]) & 0xf_ffff,
            _ => 0,
        };
        Flow {
            v6,
            src: super::addr_bits(meta.version, &meta.src),
            dst: super::addr_bits(meta.version, &meta.dst),
            iif,
            proto: meta.protocol,
            sport: meta.src_port,
            dport: meta.dst_port,
            dsfield: (meta.dscp << 2) | meta.ecn,
            flowlabel,
        }
    }
}

/// A routing table other than main: a hash map per prefix length, longest first. Lookups
/// probe one map per length present (a handful in the tables rules select: a default route,
/// a few site prefixes).
#[derive(Debug, Clone, Default)]
pub struct SmallTable {
    v4: Vec<(u8, HashMap<u32, NextHop, FxBuild>)>,
    v6: Vec<(u8, HashMap<u128, NextHop, FxBuild>)>,
    len: usize,
}

impl SmallTable {
    /// A table of `routes` (a later route for the same prefix replaces an earlier one).
    pub fn new(routes: impl IntoIterator<Item = (IpPrefix, NextHop)>) -> SmallTable {
        let mut t = SmallTable::default();
        for (p, nh) in routes {
            match p.addr() {
                IpAddr::V4(a) => {
                    let net = u32::from(a) & crate::classify::mask32(p.len());
                    Self::slot(&mut t.v4, p.len()).insert(net, nh);
                }
                IpAddr::V6(a) => {
                    let m = u128::MAX.checked_shl(128 - u32::from(p.len())).unwrap_or(0);
                    Self::slot(&mut t.v6, p.len()).insert(u128::from(a) & m, nh);
                }
            }
        }
        t.len = t.v4.iter().map(|l| l.1.len()).sum::<usize>()
            + t.v6.iter().map(|l| l.1.len()).sum::<usize>();
        t
    }

    fn slot<K>(
        levels: &mut Vec<(u8, HashMap<K, NextHop, FxBuild>)>,
        len: u8,
    ) -> &mut HashMap<K, NextHop, FxBuild> {
        let at = match levels.binary_search_by(|l| len.cmp(&l.0)) {
            Ok(i) => i,
            Err(i) => {
                levels.insert(i, (len, HashMap::default()));
                i
            }
        };
        &mut levels[at].1
    }

    /// The route of the longest prefix holding `addr` (IPv4 in the low 32 bits), with that
    /// prefix's length.
    pub fn lookup(&self, v6: bool, addr: u128) -> Option<(NextHop, u8)> {
        if v6 {
            self.v6.iter().find_map(|(len, m)| {
                let k = addr & u128::MAX.checked_shl(128 - u32::from(*len)).unwrap_or(0);
                m.get(&k).map(|nh| (*nh, *len))
            })
        } else {
            let a = addr as u32;
            self.v4.iter().find_map(|(len, m)| {
                m.get(&(a & crate::classify::mask32(*len)))
                    .map(|nh| (*nh, *len))
            })
        }
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the table has no route.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every route, for operator views.
    pub fn iter(&self) -> impl Iterator<Item = (IpPrefix, NextHop)> + '_ {
        let v4 = self.v4.iter().flat_map(|(len, m)| {
            m.iter().filter_map(move |(&n, &nh)| {
                Some((IpPrefix::new(IpAddr::V4(n.into()), *len).ok()?, nh))
            })
        });
        let v6 = self.v6.iter().flat_map(|(len, m)| {
            m.iter().filter_map(move |(&n, &nh)| {
                Some((IpPrefix::new(IpAddr::V6(n.into()), *len).ok()?, nh))
            })
        });
        v4.chain(v6)
    }
}

/// What [`Policy::route_by`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// The next hop (of any [`RouteKind`]).
    pub next_hop: NextHop,
    /// The index of the rule that decided, in [`Policy::rules`].
    pub rule: usize,
    /// The table and prefix length of the route, unless the rule's own action decided.
    pub route: Option<(u32, u8)>,
}

impl Hit {
    fn rule(kind: RouteKind, rule: usize) -> Hit {
        Hit {
            next_hop: NextHop::special(kind),
            rule,
            route: None,
        }
    }
}

/// The rules of both families and the tables they select besides main.
#[derive(Debug, Clone)]
pub struct Policy {
    v4: Vec<Rule>,
    v6: Vec<Rule>,
    /// Per rule, where its `goto` lands (index into the same list).
    goto4: Vec<Option<usize>>,
    goto6: Vec<Option<usize>>,
    tables: HashMap<u32, SmallTable>,
    plain4: bool,
    plain6: bool,
}

impl Default for Policy {
    /// The kernel's rules on a fresh namespace: local, main (and default, for IPv4, empty).
    fn default() -> Self {
        let rules = |v6: bool| {
            let mut r = vec![
                Rule::new(0, RuleAction::Lookup(TABLE_LOCAL)),
                Rule::new(32766, RuleAction::Lookup(TABLE_MAIN)),
            ];
            if !v6 {
                r.push(Rule::new(32767, RuleAction::Lookup(TABLE_DEFAULT)));
            }
            r
        };
        Policy::new(rules(false), rules(true), HashMap::new())
    }
}

impl Policy {
    /// The rules of each family in the kernel's order (by priority; rules of one priority in
    /// the order given), and the tables other than main.
    pub fn new(mut v4: Vec<Rule>, mut v6: Vec<Rule>, tables: HashMap<u32, SmallTable>) -> Policy {
        v4.sort_by_key(|r| r.priority);
        v6.sort_by_key(|r| r.priority);
        let gotos = |rules: &[Rule]| -> Vec<Option<usize>> {
            rules
                .iter()
                .map(|r| match r.action {
                    RuleAction::Goto(p) => rules.iter().position(|t| t.priority == p),
                    _ => None,
                })
                .collect()
        };
        let plain = |rules: &[Rule]| Self::reduces_to_main(rules, &tables);
        Policy {
            goto4: gotos(&v4),
            goto6: gotos(&v6),
            plain4: plain(&v4),
            plain6: plain(&v6),
            v4,
            v6,
            tables,
        }
    }

    /// True if `rules` route every packet as a lookup in main alone would: unconditional
    /// lookups in local, main and empty tables, and nothing else before main.
    fn reduces_to_main(rules: &[Rule], tables: &HashMap<u32, SmallTable>) -> bool {
        let empty = |t: u32| tables.get(&t).is_none_or(SmallTable::is_empty);
        for r in rules {
            match r.action {
                RuleAction::Lookup(TABLE_MAIN) if r.is_unconditional() => return true,
                RuleAction::Lookup(t) if r.is_unconditional() && (t == TABLE_LOCAL || empty(t)) => {
                }
                RuleAction::Nop if r.is_unconditional() => {}
                _ => return false,
            }
        }
        false
    }

    /// True if IPv4 (or IPv6, `v6`) routes as a lookup in main alone would, so the forwarder
    /// may use its batched main-table lookups.
    #[inline]
    pub fn is_plain(&self, v6: bool) -> bool {
        if v6 {
            self.plain6
        } else {
            self.plain4
        }
    }

    /// The rules of a family, in evaluation order.
    pub fn rules(&self, v6: bool) -> &[Rule] {
        if v6 {
            &self.v6
        } else {
            &self.v4
        }
    }

    /// The tables other than main, by id.
    pub fn tables(&self) -> &HashMap<u32, SmallTable> {
        &self.tables
    }

    /// The route of `flow`, as the kernel's rules pick it: the next hop (of any
    /// [`RouteKind`]), or `None` for no route (answered as "net unreachable", as is a rule's
    /// `unreachable`). `vrf` is the table of the VRF the input interface belongs to.
    pub fn route(&self, main: &RouteTable, flow: &Flow, vrf: Option<u32>) -> Option<NextHop> {
        self.route_by(main, flow, vrf).map(|h| h.next_hop)
    }

    /// [`route`](Self::route) with the rule that decided and the route it found, for operator
    /// views (`show fib ADDRESS`); `None`: no route.
    pub fn route_by(&self, main: &RouteTable, flow: &Flow, vrf: Option<u32>) -> Option<Hit> {
        let (rules, gotos) = if flow.v6 {
            (&self.v6, &self.goto6)
        } else {
            (&self.v4, &self.goto4)
        };
        let mut i = 0;
        // Gotos only jump forward (the kernel refuses others), so this ends.
        while let Some(r) = rules.get(i) {
            let at = i;
            i += 1;
            if !r.selects(flow, vrf) {
                continue;
            }
            let table = match r.action {
                RuleAction::Goto(_) => {
                    if let Some(&Some(t)) = gotos.get(at) {
                        i = i.max(t);
                    }
                    continue;
                }
                RuleAction::Nop => continue,
                RuleAction::Blackhole => return Some(Hit::rule(RouteKind::Blackhole, at)),
                RuleAction::Unreachable => return None,
                RuleAction::Prohibit => return Some(Hit::rule(RouteKind::Prohibit, at)),
                RuleAction::Kernel(_) => return Some(Hit::rule(RouteKind::Kernel, at)),
                RuleAction::Lookup(_) if r.l3mdev => match vrf {
                    Some(t) => t,
                    None => continue,
                },
                RuleAction::Lookup(t) => t,
            };
            let found = match table {
                TABLE_LOCAL => None,
                TABLE_MAIN if flow.v6 => main.lookup_v6_len(flow.dst),
                TABLE_MAIN => main.lookup_v4_len(flow.dst as u32),
                t => self
                    .tables
                    .get(&t)
                    .and_then(|t| t.lookup(flow.v6, flow.dst)),
            };
            let Some((nh, len)) = found else { continue };
            match nh.kind() {
                RouteKind::Throw => continue,
                RouteKind::Unicast | RouteKind::Kernel | RouteKind::Group
                    if r.suppress_prefixlen.is_some_and(|s| len <= s) =>
                {
                    continue
                }
                _ => {
                    return Some(Hit {
                        next_hop: nh,
                        rule: at,
                        route: Some((table, len)),
                    })
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
