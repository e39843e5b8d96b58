//! The drops of the host's firewall that the XDP classifier takes before the rings, so that a
//! flood the ruleset forbids costs the workers nothing.
//!
//! A rule qualifies when the XDP program can take exactly the kernel's decision for every
//! packet it covers, the counters included:
//! - it is a `drop` in a base chain of the prerouting hook (or a netdev ingress chain), the
//!   first hook a packet meets: no route, TTL or MTU check comes before it, so the kernel
//!   drops these packets whether they would be forwarded, delivered to the host or answered
//!   with an ICMP error;
//! - it matches on one address (source or destination, a value, a prefix, a set, or `!=` one),
//!   on the input interface, on the family, on the transport protocol (`meta l4proto`,
//!   `ip protocol`: a few values, any protocol, ICMP included), and on one port (source or
//!   destination: values or a small set) of TCP, UDP or SCTP named by its protocol match,
//!   or on the type of ICMP or ICMPv6 (`icmp type`, `icmpv6 type`; not the code), which the
//!   classifier reads;
//! - no rule before it (earlier in its chain, or in a base chain of lower priority) can match a
//!   packet it covers, unless that rule is itself such a drop: such a rule would be counted, or
//!   end the chain, or answer the packet. A chain before it with a `drop` policy ends the search
//!   (its rules decide which packets go on).
//!
//! Per interface and family, the qualifying rules without a port become two longest-prefix
//! tables (source and destination) of disjoint prefixes, each prefix naming the first rule that
//! covers it. Those with a port become one more table, keyed by protocol, port direction, port
//! and address direction before the address prefix (a rule without an address covers both
//! address directions), disjoint the same way within each protocol, port and direction; a
//! frame looks it up four times (each port against each address). A rule with a protocol and
//! no port has its entries there too, under port direction [`ANY_PORT`] and port 0, which every
//! frame of the family looks up twice more (its protocol against each address), fragments and
//! frames without ports included: the protocol is in every piece. A rule on an ICMP type has
//! its entries under port direction [`ICMP_TYPE`], the type as the port, which ICMP frames look
//! up twice more. A frame found in several
//! takes the earliest rule. Fragments do not carry ports in every piece: where a family has
//! port drops, the classifier leaves fragments to the workers. [`XdpDrops::lookup`] is that
//! program's model, which the tests hold to [`Filter::eval`].

use super::{Action, Filter, FilterPacket, Hook, Key, Rule, ValueSet};

/// Rules the classifier can drop for, per interface.
pub const MAX_SLOTS: usize = 256;
/// Prefixes per table (family and direction) and interface.
pub const MAX_PREFIXES: usize = 65_536;
/// Entries of the port table per family and interface.
pub const MAX_PORT_ENTRIES: usize = 65_536;
/// The protocols whose ports the classifier reads (its `l4_min`): TCP, UDP, SCTP.
pub const PORT_PROTOS: [u8; 3] = [6, 17, 132];
/// [`PortPrefix::port_dir`] of a rule that matches a protocol and no port: every port.
pub const ANY_PORT: u8 = 2;
/// [`PortPrefix::port_dir`] of a rule on an ICMP type (`icmp type`, `icmpv6 type`): the port
/// is the type, the first byte of the transport header.
pub const ICMP_TYPE: u8 = 3;
/// The protocols whose type the classifier reads: ICMP and ICMPv6 (either family).
pub const ICMP_PROTOS: [u8; 2] = [1, 58];
/// Protocols a rule without a port may name before the workers take it instead (`!= tcp`
/// names 255).
const MAX_RULE_PROTOS: usize = 16;

/// One prefix of a drop table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropPrefix {
    /// The address; IPv4 in the low 32 bits.
    pub addr: u128,
    /// The prefix length.
    pub len: u8,
    /// The rule: an index into [`XdpDrops::slots`].
    pub slot: u16,
}

/// One entry of the port table: a protocol, one of its ports in one direction, and an address
/// prefix in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortPrefix {
    pub proto: u8,
    /// 0: the source port, 1: the destination port, [`ANY_PORT`]: the protocol matches
    /// whatever the ports (`port` is 0), [`ICMP_TYPE`]: `port` is an ICMP type.
    pub port_dir: u8,
    pub port: u16,
    /// 0: the source address, 1: the destination address.
    pub addr_dir: u8,
    /// The address; IPv4 in the low 32 bits.
    pub addr: u128,
    /// The address prefix's length.
    pub len: u8,
    /// The rule: an index into [`XdpDrops::slots`].
    pub slot: u16,
}

/// A rule the classifier drops for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropSlot {
    /// The rule's id (its counters).
    pub rule: u32,
    /// The policies (accept) of the base chains a packet crossed before the rule's chain: the
    /// kernel counts them too.
    pub crossed: Vec<u32>,
}

/// What the classifier of one interface drops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XdpDrops {
    /// The rules, in the order the kernel meets them.
    pub slots: Vec<DropSlot>,
    /// `[IPv4, IPv6][source, destination]`: disjoint prefixes.
    pub prefixes: [[Vec<DropPrefix>; 2]; 2],
    /// `[IPv4, IPv6]`: the port table.
    pub ports: [Vec<PortPrefix>; 2],
    /// Rules that qualify but did not fit ([`MAX_SLOTS`], [`MAX_PREFIXES`]): the workers drop
    /// their packets.
    pub left_out: Vec<u32>,
}

impl XdpDrops {
    /// True when nothing is dropped in XDP.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether a table of the family has prefixes.
    pub fn has_family(&self, v6: bool) -> bool {
        self.prefixes[usize::from(v6)].iter().any(|t| !t.is_empty())
            || !self.ports[usize::from(v6)].is_empty()
    }

    /// Whether the family's port table has entries for ports or ICMP types, which only the
    /// first piece of a fragmented packet carries (the classifier then leaves fragments to the
    /// workers).
    pub fn has_ports(&self, v6: bool) -> bool {
        self.ports[usize::from(v6)]
            .iter()
            .any(|e| e.port_dir != ANY_PORT)
    }

    /// Whether the family's port table has entries for protocols without a port.
    pub fn has_protos(&self, v6: bool) -> bool {
        self.ports[usize::from(v6)]
            .iter()
            .any(|e| e.port_dir == ANY_PORT)
    }

    /// The slot whose rule drops `p`, as the classifier finds it: the longest (here: the only)
    /// prefix of each table covering the address, the earliest of the rules found. One
    /// difference: where the family has port drops the classifier leaves every fragment to
    /// the workers, and a `FilterPacket` does not say whether it is a first fragment.
    pub fn lookup(&self, p: &FilterPacket) -> Option<usize> {
        let w = width(p.v6);
        let t = &self.prefixes[usize::from(p.v6)];
        let hit = |list: &[DropPrefix], a: u128| {
            list.iter()
                .find(|e| covers(e.addr, e.len, a, w))
                .map(|e| usize::from(e.slot))
        };
        let mut best = [hit(&t[0], p.src), hit(&t[1], p.dst)]
            .into_iter()
            .flatten()
            .min();
        let addr = [p.src, p.dst];
        // The ports, where the classifier reads them (not in a non-first fragment).
        let port = p.l4.filter(|_| PORT_PROTOS.contains(&p.l4proto)).map(|l4| {
            [
                u16::from_be_bytes([l4[0], l4[1]]),
                u16::from_be_bytes([l4[2], l4[3]]),
            ]
        });
        let icmp_type = (p.l4)
            .filter(|_| ICMP_PROTOS.contains(&p.l4proto))
            .map(|l4| u16::from(l4[0]));
        for e in &self.ports[usize::from(p.v6)] {
            let port_ok = match (e.port_dir, port) {
                (ANY_PORT, _) => true,
                (ICMP_TYPE, _) => icmp_type == Some(e.port),
                (d, Some(port)) => port[usize::from(d)] == e.port,
                (_, None) => false,
            };
            if e.proto == p.l4proto
                && port_ok
                && covers(e.addr, e.len, addr[usize::from(e.addr_dir)], w)
            {
                let s = usize::from(e.slot);
                best = Some(best.map_or(s, |b| b.min(s)));
            }
        }
        best
    }
}

fn width(v6: bool) -> u32 {
    if v6 {
        128
    } else {
        32
    }
}

fn all_ones(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// Whether the prefix `addr/len` covers `a` (family width `w`).
fn covers(addr: u128, len: u8, a: u128, w: u32) -> bool {
    let len = u32::from(len);
    len == 0 || (a ^ addr) >> (w - len) == 0
}

/// A rule's one address match, as the classifier can look it up.
struct Candidate {
    /// 0: source, 1: destination.
    dir: usize,
    /// The addresses it covers, sorted and disjoint.
    ranges: Vec<(u128, u128)>,
    /// Whether the rule matched an address at all (else `ranges` is the whole family).
    has_addr: bool,
    /// Its port match, if any.
    port: Option<PortMatch>,
}

/// A rule's port match, with the protocols its protocol match allows.
struct PortMatch {
    protos: Vec<u8>,
    /// 0: source, 1: destination, [`ANY_PORT`]: no port match (`ports` is `[(0, 0)]`),
    /// [`ICMP_TYPE`]: `ports` are ICMP types.
    dir: usize,
    ports: Vec<(u128, u128)>,
}

/// A group of the port table: family, protocol, port direction, port, address direction.
type PortGroup = (usize, u8, usize, u16, usize);

/// Ports a rule may name before the workers take it instead (each is an entry per protocol and
/// address prefix).
const MAX_RULE_PORTS: u128 = 1024;

fn port_key(k: Key) -> Option<usize> {
    match k {
        Key::L4Word0 => Some(0),
        Key::L4Word1 => Some(1),
        _ => None,
    }
}

fn proto_key(v6: bool, k: Key) -> bool {
    matches!((v6, k), (_, Key::L4Proto) | (false, Key::IpProtocol))
}

/// The address key of `dir` in the family.
fn addr_key(v6: bool, k: Key) -> Option<usize> {
    match (v6, k) {
        (false, Key::Saddr4) | (true, Key::Saddr6) => Some(0),
        (false, Key::Daddr4) | (true, Key::Daddr6) => Some(1),
        _ => None,
    }
}

/// Whether the field is never there for the family at prerouting (the rule cannot match).
fn absent(v6: bool, k: Key) -> bool {
    match k {
        Key::Saddr4 | Key::Daddr4 | Key::IpProtocol | Key::Dscp4 => v6,
        Key::Saddr6 | Key::Daddr6 | Key::Ip6NextHdr | Key::Dscp6 => !v6,
        Key::Oif => true,
        _ => false,
    }
}

/// The addresses a match on an address key covers, within the family's width.
fn effective(set: &ValueSet, negate: bool, w: u32) -> Vec<(u128, u128)> {
    let r = set.ranges();
    if !negate {
        return r;
    }
    let max = all_ones(w);
    let mut out = Vec::new();
    let mut next = Some(0u128);
    for (lo, hi) in r {
        if let Some(n) = next {
            if lo > n {
                out.push((n, lo - 1));
            }
        }
        next = hi.checked_add(1);
    }
    if let Some(n) = next {
        if n <= max {
            out.push((n, max));
        }
    }
    out
}

/// Whether the statically known matches (interface, family) let the rule match.
fn static_ok(rule: &Rule, v6: bool, iif: u32) -> bool {
    rule.matches.iter().all(|m| {
        let v = match m.key {
            Key::Iif => u128::from(iif),
            Key::NfProto => {
                if v6 {
                    6
                } else {
                    4
                }
            }
            k => return !absent(v6, k),
        };
        m.set.contains(v) != m.negate
    })
}

fn candidate(rule: &Rule, v6: bool, iif: u32) -> Option<Candidate> {
    if rule.action != Action::Drop || !static_ok(rule, v6, iif) {
        return None;
    }
    let w = width(v6);
    let mut addr = None;
    let mut protos: Option<Vec<(u128, u128)>> = None;
    let mut port: Option<(usize, Vec<(u128, u128)>)> = None;
    for m in &rule.matches {
        match m.key {
            Key::Iif | Key::NfProto => {}
            Key::L4Byte0 => {
                if port.is_some() {
                    return None;
                }
                port = Some((usize::from(ICMP_TYPE), effective(&m.set, m.negate, 8)));
            }
            k if proto_key(v6, k) => {
                if protos.is_some() {
                    return None;
                }
                protos = Some(effective(&m.set, m.negate, 8));
            }
            k => {
                if let Some(dir) = port_key(k) {
                    if port.is_some() {
                        return None;
                    }
                    port = Some((dir, effective(&m.set, m.negate, 16)));
                    continue;
                }
                let dir = addr_key(v6, k)?;
                if addr.is_some() {
                    return None;
                }
                addr = Some((dir, effective(&m.set, m.negate, w)));
            }
        }
    }
    let port = match (port, protos) {
        (None, None) => None,
        // A protocol alone: one entry per protocol under ANY_PORT, whatever the protocol.
        (None, Some(protos)) => {
            let n: u128 = protos.iter().map(|(lo, hi)| hi - lo + 1).sum();
            if n == 0 || n > MAX_RULE_PROTOS as u128 {
                return None;
            }
            let list = (protos.iter())
                .flat_map(|&(lo, hi)| lo..=hi)
                .map(|p| u8::try_from(p).ok())
                .collect::<Option<Vec<u8>>>()?;
            Some(PortMatch {
                protos: list,
                dir: usize::from(ANY_PORT),
                ports: vec![(0, 0)],
            })
        }
        // Only where the classifier reads the ports, for every protocol the rule allows.
        (Some(_), None) => return None,
        (Some((dir, ports)), Some(protos)) => {
            // The first byte is a type where the classifier reads it as one (ICMP), a port's
            // high byte elsewhere: each kind only where the classifier reads it.
            let readable: &[u8] = if dir == usize::from(ICMP_TYPE) {
                &ICMP_PROTOS
            } else {
                &PORT_PROTOS
            };
            let mut list = Vec::new();
            for (lo, hi) in protos {
                for p in lo..=hi {
                    let p = u8::try_from(p).ok()?;
                    if !readable.contains(&p) {
                        return None;
                    }
                    list.push(p);
                }
            }
            let n: u128 = ports.iter().map(|(lo, hi)| hi - lo + 1).sum();
            if list.is_empty() || n == 0 || n > MAX_RULE_PORTS {
                return None;
            }
            Some(PortMatch {
                protos: list,
                dir,
                ports,
            })
        }
    };
    let (dir, ranges, has_addr) = match addr {
        Some((dir, r)) => (dir, r, true),
        None => (0, vec![(0, all_ones(w))], false),
    };
    (!ranges.is_empty()).then_some(Candidate {
        dir,
        ranges,
        has_addr,
        port,
    })
}

/// Whether `rule` can match a packet of the family on `iif` that `c` covers.
fn may_overlap(rule: &Rule, v6: bool, iif: u32, c: &Candidate) -> bool {
    if !static_ok(rule, v6, iif) {
        return false;
    }
    rule.matches.iter().all(|m| {
        if let Some(dir) = addr_key(v6, m.key) {
            return !c.has_addr
                || dir != c.dir
                || intersects(&effective(&m.set, m.negate, width(v6)), &c.ranges);
        }
        let Some(pm) = &c.port else { return true };
        if proto_key(v6, m.key) {
            let mine: Vec<(u128, u128)> = pm.protos.iter().map(|&p| (p.into(), p.into())).collect();
            return intersects(
                &effective(&m.set, m.negate, 8),
                &ValueSet::from_ranges(mine).ranges(),
            );
        }
        match (m.key, port_key(m.key)) {
            (_, Some(dir)) if dir == pm.dir => {
                intersects(&effective(&m.set, m.negate, 16), &pm.ports)
            }
            (Key::L4Byte0, _) if pm.dir == usize::from(ICMP_TYPE) => {
                intersects(&effective(&m.set, m.negate, 8), &pm.ports)
            }
            _ => true,
        }
    })
}

fn intersects(a: &[(u128, u128)], b: &[(u128, u128)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].1 < b[j].0 {
            i += 1;
        } else if b[j].1 < a[i].0 {
            j += 1;
        } else {
            return true;
        }
    }
    false
}

/// `a` without `b` (both sorted and disjoint).
fn subtract(a: &[(u128, u128)], b: &[(u128, u128)]) -> Vec<(u128, u128)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(lo, hi) in a {
        let mut lo = Some(lo);
        while j < b.len() && b[j].1 < lo.unwrap_or(u128::MAX) {
            j += 1;
        }
        let mut k = j;
        while let Some(l) = lo {
            match b.get(k) {
                Some(&(blo, bhi)) if blo <= hi => {
                    if blo > l {
                        out.push((l, blo - 1));
                    }
                    lo = bhi.checked_add(1).filter(|&n| n <= hi);
                    k += 1;
                }
                _ => {
                    out.push((l, hi));
                    lo = None;
                }
            }
        }
    }
    out
}

/// The prefixes covering `[lo, hi]` exactly, fewest first-to-last.
fn cidrs(mut lo: u128, hi: u128, w: u32, out: &mut Vec<(u128, u8)>) {
    loop {
        let mut k = if lo == 0 {
            w
        } else {
            lo.trailing_zeros().min(w)
        };
        while k > 0 && all_ones(k) > hi - lo {
            k -= 1;
        }
        out.push((lo, (w - k) as u8));
        match lo.checked_add(all_ones(k)) {
            Some(end) if end < hi => lo = end + 1,
            _ => return,
        }
    }
}

impl Filter {
    /// The drops the classifier of interface `iif` can take ([module doc](self)).
    pub fn xdp_drops(&self, iif: u32) -> XdpDrops {
        let mut out = XdpDrops::default();
        let mut cands: Vec<(usize, usize, Candidate)> = Vec::new();
        for v6 in [false, true] {
            let netdev = |c: u16| {
                let b = self.chains[usize::from(c)].base;
                b.is_some_and(|b| self.origins[b.policy_id as usize].family == "netdev")
            };
            let mut order: Vec<u16> = self.hooks[Hook::Prerouting as usize]
                .iter()
                .copied()
                .filter(|&c| {
                    let b = self.chains[usize::from(c)].base;
                    b.is_some_and(|b| b.families.sees(v6))
                })
                .collect();
            // A netdev ingress chain runs before any prerouting chain, whatever its priority.
            order.sort_by_key(|&c| !netdev(c));
            let mut prior: Vec<(&Rule, bool)> = Vec::new();
            let mut crossed = Vec::new();
            for c in order {
                let chain = &self.chains[usize::from(c)];
                for rule in &chain.rules {
                    let mut ok = false;
                    if let Some(cand) = candidate(rule, v6, iif) {
                        if (prior.iter()).all(|&(q, drop)| drop || !may_overlap(q, v6, iif, &cand))
                        {
                            out.slots.push(DropSlot {
                                rule: rule.id,
                                crossed: crossed.clone(),
                            });
                            cands.push((out.slots.len() - 1, usize::from(v6), cand));
                            ok = true;
                        }
                    }
                    prior.push((rule, ok));
                }
                let Some(base) = chain.base else { break };
                if base.policy_drop {
                    // What goes on is what a rule of this chain accepted.
                    break;
                }
                crossed.push(base.policy_id);
            }
        }
        let mut covered: [[Vec<(u128, u128)>; 2]; 2] = Default::default();
        let mut covered_ports: std::collections::HashMap<PortGroup, Vec<(u128, u128)>> =
            std::collections::HashMap::new();
        let mut cut = out.slots.len().min(MAX_SLOTS);
        let mut scratch = Vec::new();
        for (slot, f, c) in &cands {
            if *slot >= cut {
                break;
            }
            if let Some(pm) = &c.port {
                let w = width(*f == 1);
                let mut entries = Vec::new();
                let mut grown = Vec::new();
                // Without an address the rule covers both address directions.
                let addr_dirs: &[usize] = if c.has_addr {
                    &[c.dir][..]
                } else {
                    &[0, 1][..]
                };
                for &proto in &pm.protos {
                    for &(lo, hi) in &pm.ports {
                        for port in lo..=hi {
                            let port = port as u16;
                            for &ad in addr_dirs {
                                let key = (*f, proto, pm.dir, port, ad);
                                let done = covered_ports.get(&key).map_or(&[][..], |v| &v[..]);
                                scratch.clear();
                                for (a, b) in subtract(&c.ranges, done) {
                                    cidrs(a, b, w, &mut scratch);
                                }
                                entries.extend(scratch.iter().map(|&(addr, len)| PortPrefix {
                                    proto,
                                    port_dir: pm.dir as u8,
                                    port,
                                    addr_dir: ad as u8,
                                    addr,
                                    len,
                                    slot: *slot as u16,
                                }));
                                grown.push(key);
                            }
                        }
                    }
                }
                if out.ports[*f].len() + entries.len() > MAX_PORT_ENTRIES {
                    cut = *slot;
                    break;
                }
                out.ports[*f].extend(entries);
                for key in grown {
                    let mut all = covered_ports.remove(&key).unwrap_or_default();
                    all.extend_from_slice(&c.ranges);
                    covered_ports.insert(key, ValueSet::from_ranges(all).ranges());
                }
                continue;
            }
            scratch.clear();
            for (lo, hi) in subtract(&c.ranges, &covered[*f][c.dir]) {
                cidrs(lo, hi, width(*f == 1), &mut scratch);
            }
            let table = &mut out.prefixes[*f][c.dir];
            if table.len() + scratch.len() > MAX_PREFIXES {
                cut = *slot;
                break;
            }
            table.extend(scratch.iter().map(|&(addr, len)| DropPrefix {
                addr,
                len,
                slot: *slot as u16,
            }));
            let mut all = std::mem::take(&mut covered[*f][c.dir]);
            all.extend_from_slice(&c.ranges);
            covered[*f][c.dir] = ValueSet::from_ranges(all).ranges();
        }
        if cut < out.slots.len() {
            out.left_out = out.slots[cut..].iter().map(|s| s.rule).collect();
            out.slots.truncate(cut);
            for t in out.prefixes.iter_mut().flatten() {
                t.retain(|p| usize::from(p.slot) < cut);
            }
            for t in &mut out.ports {
                t.retain(|p| usize::from(p.slot) < cut);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
