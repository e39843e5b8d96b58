//! The host's packet filter, evaluated on the forwarding path: the netfilter hooks a forwarded
//! packet crosses in the kernel (prerouting, forward, postrouting), with the chains, rules and
//! verdicts compiled from the host's ruleset ([`nft`]).
//!
//! Semantics follow nftables:
//! - every base chain of a hook whose family sees the packet (`ip`: IPv4, `ip6`: IPv6, `inet`:
//!   both) runs, in priority order; `accept` ends that chain only, `drop` and `reject` end the
//!   packet's path;
//! - a rule matches when every match in it matches, left to right; a match whose field cannot
//!   be read (a port of a non-first fragment, an IPv4 field of an IPv6 packet) makes the rule
//!   not match, whichever its operator (the kernel's `NFT_BREAK`);
//! - `jump` returns to the next rule at the end of the called chain or on `return`, `goto`
//!   does not; the end of a base chain applies its policy.
//!
//! What llrouter cannot evaluate itself (NAT statements, logging, marks, …) is compiled to
//! [`Action::Kernel`] at the place of the rule: a packet that reaches that rule is handed to
//! the kernel, which runs the whole ruleset itself. Every earlier decision llrouter takes is one
//! the kernel would take too, so the split never lets through what the ruleset forbids.
//!
//! Connection state (`ct state`) and NAT chains make their family a [`FamilyMode::Conntrack`]
//! one: the kernel forwards every packet of a connection until its conntrack entry is
//! established, and llrouter carries only the packets of established connections (as an
//! nftables flowtable does). For those, `ct state` is `established` ([`CT_ESTABLISHED`]), and
//! NAT chains do not run: the kernel runs them for a connection's first packet only, and
//! connections it translated stay with the kernel.

pub mod nft;
pub mod xdp;

use core::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::fwd::IcmpKind;
use crate::wire::{IpVersion, PacketMeta};

/// The netfilter hooks of a forwarded packet, in the order it crosses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    /// Before the route lookup.
    Prerouting,
    /// After the route lookup, for packets not addressed to the host.
    Forward,
    /// On the way out.
    Postrouting,
}

impl Hook {
    /// Every hook, in order.
    pub const ALL: [Hook; 3] = [Hook::Prerouting, Hook::Forward, Hook::Postrouting];

    /// The nftables name.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Prerouting => "prerouting",
            Hook::Forward => "forward",
            Hook::Postrouting => "postrouting",
        }
    }
}

/// The address families a table's chains see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Families {
    /// `ip`.
    V4,
    /// `ip6`.
    V6,
    /// `inet`.
    Both,
}

impl Families {
    fn sees(self, v6: bool) -> bool {
        match self {
            Families::V4 => !v6,
            Families::V6 => v6,
            Families::Both => true,
        }
    }
}

/// What the filter reads of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterPacket {
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Source address; IPv4 in the low 32 bits.
    pub src: u128,
    /// Destination address; IPv4 in the low 32 bits.
    pub dst: u128,
    /// The upper-layer protocol (after IPv6 extension headers): `meta l4proto`, `ip protocol`.
    pub l4proto: u8,
    /// IPv6: the fixed header's next-header field (`ip6 nexthdr`); IPv4: the protocol.
    pub nexthdr: u8,
    /// DSCP.
    pub dscp: u8,
    /// The IP packet's length (`meta length` at these hooks).
    pub len: u16,
    /// The first four bytes of the transport header, when the packet is not a non-first
    /// fragment and carries them: what `th`, `tcp`, `udp`, `sctp`, `icmp` fields read.
    pub l4: Option<[u8; 4]>,
    /// Ingress interface index.
    pub iif: u32,
    /// Egress interface index, 0 before the route lookup.
    pub oif: u32,
    /// `ct state`, one of the `CT_*` bits.
    pub ct_state: u8,
}

/// `ct state invalid` (nftables' bit for each state).
pub const CT_INVALID: u8 = 1;
/// `ct state established`.
pub const CT_ESTABLISHED: u8 = 2;
/// `ct state related`.
pub const CT_RELATED: u8 = 4;
/// `ct state new`.
pub const CT_NEW: u8 = 8;
/// `ct state untracked`.
pub const CT_UNTRACKED: u8 = 64;

impl FilterPacket {
    /// The view of a parsed frame that arrived on `iif`.
    pub fn of(frame: &[u8], meta: &PacketMeta, iif: u32) -> FilterPacket {
        let v6 = meta.version == IpVersion::V6;
        let addr = |a: &[u8; 16]| {
            if v6 {
                u128::from_be_bytes(*a)
            } else {
                u128::from(u32::from_be_bytes([a[0], a[1], a[2], a[3]]))
            }
        };
        let l3 = usize::from(meta.l3_offset);
        let nexthdr = if v6 {
            frame.get(l3 + 6).copied().unwrap_or(meta.protocol)
        } else {
            meta.protocol
        };
        let l4 = if first_fragment_or_whole(frame, meta) {
            let o = usize::from(meta.l4_offset);
            frame.get(o..o + 4).map(|b| [b[0], b[1], b[2], b[3]])
        } else {
            None
        };
        FilterPacket {
            v6,
            src: addr(&meta.src),
            dst: addr(&meta.dst),
            l4proto: meta.protocol,
            nexthdr,
            dscp: meta.dscp,
            len: meta.total_len,
            l4,
            iif,
            oif: 0,
            // The filter runs for the packets llrouter carries: in a family whose ruleset reads
            // `ct state`, the classifier hands every packet to the kernel but those of the
            // established connections it was told of (`FamilyMode::Conntrack`); in any other
            // family nothing reads it.
            ct_state: CT_ESTABLISHED,
        }
    }
}

/// Whether the transport header is at `meta.l4_offset`: not a fragment, or the first one.
fn first_fragment_or_whole(frame: &[u8], meta: &PacketMeta) -> bool {
    if !meta.is_fragment {
        return true;
    }
    let l3 = usize::from(meta.l3_offset);
    match meta.version {
        IpVersion::V4 => frame
            .get(l3 + 6..l3 + 8)
            .is_some_and(|b| u16::from_be_bytes([b[0], b[1]]) & 0x1fff == 0),
        IpVersion::V6 => crate::fwd::icmp::first_v6_fragment(frame, meta),
    }
}

/// A field a match reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    /// 4 or 6 (`meta nfproto`).
    NfProto,
    /// `meta l4proto`.
    L4Proto,
    /// `ip protocol` (IPv4 packets only).
    IpProtocol,
    /// `ip6 nexthdr` (IPv6 packets only).
    Ip6NextHdr,
    /// `ip saddr`.
    Saddr4,
    /// `ip daddr`.
    Daddr4,
    /// `ip6 saddr`.
    Saddr6,
    /// `ip6 daddr`.
    Daddr6,
    /// `ip dscp` (IPv4 only).
    Dscp4,
    /// `ip6 dscp` (IPv6 only).
    Dscp6,
    /// `meta length`.
    Length,
    /// Transport bytes 0–1 (`th sport`, `tcp sport`, …).
    L4Word0,
    /// Transport bytes 2–3 (`th dport`, …).
    L4Word1,
    /// Transport byte 0 (`icmp type`, `icmpv6 type`).
    L4Byte0,
    /// Transport byte 1 (`icmp code`, `icmpv6 code`).
    L4Byte1,
    /// Ingress interface index (`iif`, `iifname` resolved).
    Iif,
    /// Egress interface index (`oif`, `oifname` resolved).
    Oif,
    /// `ct state`.
    CtState,
}

impl Key {
    #[inline]
    fn read(self, p: &FilterPacket) -> Option<u128> {
        let v = match self {
            Key::NfProto => {
                if p.v6 {
                    6
                } else {
                    4
                }
            }
            Key::L4Proto => u128::from(p.l4proto),
            Key::IpProtocol if !p.v6 => u128::from(p.l4proto),
            Key::Ip6NextHdr if p.v6 => u128::from(p.nexthdr),
            Key::Saddr4 if !p.v6 => p.src,
            Key::Daddr4 if !p.v6 => p.dst,
            Key::Saddr6 if p.v6 => p.src,
            Key::Daddr6 if p.v6 => p.dst,
            Key::Dscp4 if !p.v6 => u128::from(p.dscp),
            Key::Dscp6 if p.v6 => u128::from(p.dscp),
            Key::Length => u128::from(p.len),
            Key::L4Word0 => p.l4.map(|b| u128::from(u16::from_be_bytes([b[0], b[1]])))?,
            Key::L4Word1 => p.l4.map(|b| u128::from(u16::from_be_bytes([b[2], b[3]])))?,
            Key::L4Byte0 => p.l4.map(|b| u128::from(b[0]))?,
            Key::L4Byte1 => p.l4.map(|b| u128::from(b[1]))?,
            Key::Iif => u128::from(p.iif),
            Key::Oif if p.oif != 0 => u128::from(p.oif),
            Key::CtState => u128::from(p.ct_state),
            _ => return None,
        };
        Some(v)
    }
}

/// A set of values as sorted, disjoint, non-adjacent inclusive ranges: a single address, a
/// prefix, a port range and a 10 000-prefix blocklist are all one binary search. One range is
/// kept inline (no pointer to follow), and sets whose values all fit 32 bits (IPv4 addresses,
/// ports, protocols) search 8-byte entries instead of 32-byte ones: `cargo bench --bench
/// filter` measured the difference (docs/firewall.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueSet {
    repr: Repr,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum Repr {
    #[default]
    Empty,
    One(u128, u128),
    Narrow(Vec<(u32, u32)>),
    Wide(Vec<(u128, u128)>),
}

impl ValueSet {
    /// The union of `ranges` (each `lo ≤ hi`; others are ignored).
    pub fn from_ranges(mut ranges: Vec<(u128, u128)>) -> ValueSet {
        ranges.retain(|&(lo, hi)| lo <= hi);
        ranges.sort_unstable();
        let mut out: Vec<(u128, u128)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        let narrow = u128::from(u32::MAX);
        let repr = match out.as_slice() {
            [] => Repr::Empty,
            &[(lo, hi)] => Repr::One(lo, hi),
            _ if out.iter().all(|&(_, hi)| hi <= narrow) => {
                Repr::Narrow(out.iter().map(|&(lo, hi)| (lo as u32, hi as u32)).collect())
            }
            _ => Repr::Wide(out),
        };
        ValueSet { repr }
    }

    /// One value.
    pub fn single(v: u128) -> ValueSet {
        ValueSet {
            repr: Repr::One(v, v),
        }
    }

    /// Whether `v` is in the set.
    #[inline]
    pub fn contains(&self, v: u128) -> bool {
        match &self.repr {
            Repr::Empty => false,
            &Repr::One(lo, hi) => lo <= v && v <= hi,
            Repr::Narrow(r) => {
                let Ok(v) = u32::try_from(v) else {
                    return false;
                };
                let i = r.partition_point(|&(_, hi)| hi < v);
                r.get(i).is_some_and(|&(lo, _)| lo <= v)
            }
            Repr::Wide(r) => {
                let i = r.partition_point(|&(_, hi)| hi < v);
                r.get(i).is_some_and(|&(lo, _)| lo <= v)
            }
        }
    }

    /// The number of disjoint ranges.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Empty => 0,
            Repr::One(..) => 1,
            Repr::Narrow(r) => r.len(),
            Repr::Wide(r) => r.len(),
        }
    }

    /// True for the empty set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ranges, sorted, disjoint and not adjacent.
    pub fn ranges(&self) -> Vec<(u128, u128)> {
        match &self.repr {
            Repr::Empty => Vec::new(),
            &Repr::One(lo, hi) => vec![(lo, hi)],
            Repr::Narrow(r) => r
                .iter()
                .map(|&(lo, hi)| (u128::from(lo), u128::from(hi)))
                .collect(),
            Repr::Wide(r) => r.clone(),
        }
    }
}

/// One match of a rule: `key` read from the packet is (or, negated, is not) in `set`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// The field.
    pub key: Key,
    /// `!=`.
    pub negate: bool,
    /// The values.
    pub set: ValueSet,
}

impl Match {
    #[inline]
    fn matches(&self, p: &FilterPacket) -> bool {
        match self.key.read(p) {
            Some(v) => self.set.contains(v) != self.negate,
            None => false,
        }
    }
}

/// What a rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Count and go on (a rule with no verdict).
    Continue,
    /// End this base chain: the packet goes on to the next base chain of the hook.
    Accept,
    /// Drop.
    Drop,
    /// Drop and answer with this ICMP error.
    Reject(RejectKind),
    /// Run chain `n` (an index into [`Filter`]'s chains), then come back.
    Jump(u16),
    /// Run chain `n` and do not come back.
    Goto(u16),
    /// Back to the calling chain (in a base chain: its policy).
    Return,
    /// llrouter cannot evaluate this rule: the packet is the kernel's
    /// ([`Filter::kernel_families`]).
    Kernel,
}

/// The ICMP error of a `reject`, per the packet's family (`icmpx` kinds map to both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RejectKind {
    /// Port unreachable: the default.
    PortUnreachable,
    /// Net unreachable (IPv6: no route).
    NetUnreachable,
    /// Host unreachable (IPv6: address unreachable).
    HostUnreachable,
    /// Administratively prohibited.
    AdminProhibited,
    /// `tcp reset`: a TCP RST from the segment's destination.
    TcpReset,
}

impl RejectKind {
    /// The ICMP error llrouter sends.
    pub fn icmp(self) -> IcmpKind {
        match self {
            RejectKind::PortUnreachable => IcmpKind::PortUnreachable,
            RejectKind::NetUnreachable => IcmpKind::NetUnreachable,
            RejectKind::HostUnreachable => IcmpKind::HostUnreachable,
            RejectKind::AdminProhibited => IcmpKind::Prohibited,
            RejectKind::TcpReset => IcmpKind::TcpReset,
        }
    }
}

/// Where a rule came from, for refusals, `ctl show filter` and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleOrigin {
    /// `ip`, `ip6`, `inet`, ….
    pub family: String,
    /// The table.
    pub table: String,
    /// The chain.
    pub chain: String,
    /// The rule's handle (0 for a chain's policy).
    pub handle: u64,
    /// The rule as the operator reads it (a short rendering), or the policy.
    pub text: String,
    /// Why llrouter hands packets reaching it to the kernel, if it does.
    pub kernel_because: Option<String>,
    /// It reads connection state or belongs to a NAT chain: its family is a
    /// [`FamilyMode::Conntrack`] one.
    #[serde(default)]
    pub conntrack: bool,
}

/// A compiled rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Every one must match.
    pub matches: Vec<Match>,
    /// What follows.
    pub action: Action,
    /// Index into [`Filter::origins`], for counters.
    pub id: u32,
}

/// A chain: its rules and, for a base chain, its hook, priority, families and policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The rules, in order.
    pub rules: Vec<Rule>,
    /// `Some` for a base chain.
    pub base: Option<BaseChain>,
}

/// A base chain's attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseChain {
    /// The hook.
    pub hook: Hook,
    /// Lower runs first.
    pub priority: i32,
    /// The families it sees.
    pub families: Families,
    /// `accept` or `drop` at its end.
    pub policy_drop: bool,
    /// Counter index of the policy.
    pub policy_id: u32,
    /// A NAT chain: the kernel runs it for a connection's first packet only, so it never runs
    /// for the established connections llrouter carries.
    pub nat: bool,
}

/// The outcome of one hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Go on.
    Accept,
    /// Drop (rule or policy `id`).
    Drop(u32),
    /// Drop and answer (rule `id`).
    Reject(RejectKind, u32),
    /// Hand the packet to the kernel (rule `id`).
    Kernel(u32),
}

/// Counter shards: one for each of the first `SHARDS` threads that evaluate a filter (the
/// workers), so that a worker counts with a plain load and store on lines no other thread
/// writes: with one shared counter, workers on different cores would bounce its line on every
/// packet of a busy rule. Threads past them share the last shard, with atomic adds.
const SHARDS: usize = 16;

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed).min(SHARDS);
}

/// Packets and bytes per rule and per shard.
#[derive(Debug, Default)]
struct Counters {
    /// `(SHARDS + 1) × stride` words: shard-major, then `[packets, bytes]` per rule.
    words: Box<[AtomicU64]>,
    /// Words per shard, a whole number of cache lines.
    stride: usize,
}

impl Counters {
    fn new(rules: usize) -> Counters {
        let stride = (rules * 2).div_ceil(8) * 8;
        Counters {
            words: (0..(SHARDS + 1) * stride)
                .map(|_| AtomicU64::new(0))
                .collect(),
            stride,
        }
    }

    #[inline]
    fn add(&self, id: u32, bytes: u64) {
        let shard = SHARD.with(|s| *s);
        let at = shard * self.stride + id as usize * 2;
        let (Some(p), Some(b)) = (self.words.get(at), self.words.get(at + 1)) else {
            return;
        };
        if shard < SHARDS {
            // This thread is the shard's only writer.
            p.store(p.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            b.store(b.load(Ordering::Relaxed) + bytes, Ordering::Relaxed);
        } else {
            p.fetch_add(1, Ordering::Relaxed);
            b.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// (packets, bytes) of rule `id`, summed over the shards.
    fn get(&self, id: usize) -> (u64, u64) {
        let mut sum = (0, 0);
        for s in 0..=SHARDS {
            let at = s * self.stride + id * 2;
            sum.0 += self.words[at].load(Ordering::Relaxed);
            sum.1 += self.words[at + 1].load(Ordering::Relaxed);
        }
        sum
    }

    /// Adds to rule `id` from outside the datapath (the shared shard).
    fn carry(&self, id: usize, (packets, bytes): (u64, u64)) {
        let at = SHARDS * self.stride + id * 2;
        self.words[at].fetch_add(packets, Ordering::Relaxed);
        self.words[at + 1].fetch_add(bytes, Ordering::Relaxed);
    }
}

/// How deep `jump`s nest: the kernel's limit (`NFT_JUMP_STACK_SIZE`).
pub const MAX_JUMP_DEPTH: usize = 16;

/// The compiled filter of every hook.
#[derive(Debug, Default)]
pub struct Filter {
    /// Every chain; `Jump`/`Goto` index into it.
    pub chains: Vec<Chain>,
    /// Per hook ([`Hook::ALL`] order), the base chains' indices by priority.
    pub hooks: [Vec<u16>; 3],
    /// Per rule and policy, where it came from.
    pub origins: Vec<RuleOrigin>,
    /// Per rule and policy (same index as `origins`): what it matched.
    counters: Counters,
}

impl Filter {
    /// A filter from its chains and the rule origins (`Rule::id` and `BaseChain::policy_id`
    /// index `origins`); base chains are sorted into their hooks by priority.
    pub fn new(chains: Vec<Chain>, origins: Vec<RuleOrigin>) -> Filter {
        let mut hooks: [Vec<u16>; 3] = Default::default();
        for (i, c) in chains.iter().enumerate() {
            if let Some(b) = c.base {
                let h = Hook::ALL.iter().position(|&x| x == b.hook).unwrap_or(0);
                hooks[h].push(i as u16);
            }
        }
        for h in &mut hooks {
            h.sort_by_key(|&i| chains[usize::from(i)].base.map(|b| b.priority));
        }
        let counters = Counters::new(origins.len());
        Filter {
            chains,
            hooks,
            origins,
            counters,
        }
    }

    /// True when no hook has a base chain: nothing to evaluate.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.hooks.iter().all(|h| h.is_empty())
    }

    /// Whether `hook` has base chains.
    #[inline]
    pub fn has(&self, hook: Hook) -> bool {
        !self.hooks[hook as usize].is_empty()
    }

    /// Runs `hook`'s base chains on `p`; counts every rule that matched.
    pub fn eval(&self, hook: Hook, p: &FilterPacket) -> Decision {
        for &c in &self.hooks[hook as usize] {
            let chain = &self.chains[usize::from(c)];
            let Some(base) = chain.base else { continue };
            if !base.families.sees(p.v6) || base.nat {
                continue;
            }
            match self.run_base(c, p) {
                Some(Decision::Accept) => {}
                Some(d) => return d,
                None if base.policy_drop => {
                    self.count(base.policy_id, p);
                    return Decision::Drop(base.policy_id);
                }
                None => self.count(base.policy_id, p),
            }
        }
        Decision::Accept
    }

    /// One base chain: `Some` with a verdict, or `None` when it ran to its end (policy).
    fn run_base(&self, base: u16, p: &FilterPacket) -> Option<Decision> {
        let mut stack: [(u16, u32); MAX_JUMP_DEPTH] = [(0, 0); MAX_JUMP_DEPTH];
        let mut depth = 0;
        let (mut chain, mut at) = (base, 0usize);
        loop {
            let rules = &self.chains[usize::from(chain)].rules;
            let Some(rule) = rules.get(at) else {
                // End of a chain: back to the caller, or the base chain's policy.
                if depth == 0 {
                    return None;
                }
                depth -= 1;
                (chain, at) = (stack[depth].0, stack[depth].1 as usize);
                continue;
            };
            at += 1;
            if !rule.matches.iter().all(|m| m.matches(p)) {
                continue;
            }
            self.count(rule.id, p);
            match rule.action {
                Action::Continue => {}
                Action::Accept => return Some(Decision::Accept),
                Action::Drop => return Some(Decision::Drop(rule.id)),
                Action::Reject(k) => return Some(Decision::Reject(k, rule.id)),
                Action::Kernel => return Some(Decision::Kernel(rule.id)),
                Action::Jump(to) => {
                    if depth == MAX_JUMP_DEPTH {
                        // The kernel refuses rulesets that nest deeper; never silently skip.
                        return Some(Decision::Kernel(rule.id));
                    }
                    stack[depth] = (chain, at as u32);
                    depth += 1;
                    (chain, at) = (to, 0);
                }
                Action::Goto(to) => (chain, at) = (to, 0),
                Action::Return => {
                    if depth == 0 {
                        return None;
                    }
                    depth -= 1;
                    (chain, at) = (stack[depth].0, stack[depth].1 as usize);
                }
            }
        }
    }

    #[inline]
    fn count(&self, id: u32, p: &FilterPacket) {
        self.counters.add(id, u64::from(p.len));
    }

    /// Takes over the counts of `old`'s rules that are still here (same family, table, chain
    /// and handle), so that a reload does not reset what the operator watches.
    pub fn carry_counters(&self, old: &Filter) {
        use std::collections::HashMap;
        let key = |o: &RuleOrigin| (o.family.clone(), o.table.clone(), o.chain.clone(), o.handle);
        let before: HashMap<_, usize> = (old.origins.iter().enumerate())
            .map(|(i, o)| (key(o), i))
            .collect();
        for (i, o) in self.origins.iter().enumerate() {
            if let Some(&j) = before.get(&key(o)) {
                self.counters.carry(i, old.counters.get(j));
            }
        }
    }

    /// Every rule and policy with its counts.
    pub fn report(&self) -> Vec<RuleReport> {
        (self.origins.iter().enumerate())
            .map(|(i, o)| {
                let (packets, bytes) = self.counters.get(i);
                RuleReport {
                    origin: o.clone(),
                    packets,
                    bytes,
                    xdp_packets: 0,
                    xdp_bytes: 0,
                }
            })
            .collect()
    }

    /// Who forwards each family's packets, `[IPv4, IPv6]`: the kernel where a packet can meet
    /// a rule llrouter cannot evaluate; llrouter for established connections only where the
    /// ruleset reads connection state; llrouter otherwise.
    pub fn family_modes(&self) -> [FamilyMode; 2] {
        let mut m = [FamilyMode::Llrouter; 2];
        let mut raise = |family: &str, to: FamilyMode| {
            let (v4, v6) = match family {
                "ip" => (true, false),
                "ip6" => (false, true),
                _ => (true, true),
            };
            for (i, on) in [v4, v6].into_iter().enumerate() {
                if on && m[i] < to {
                    m[i] = to;
                }
            }
        };
        for o in &self.origins {
            if o.kernel_because.is_some() {
                raise(&o.family, FamilyMode::Kernel);
            } else if o.conntrack {
                raise(&o.family, FamilyMode::Conntrack);
            }
        }
        m
    }

    /// The families (IPv4, IPv6) whose packets all go to the kernel before the rings.
    pub fn kernel_families(&self) -> (bool, bool) {
        let [v4, v6] = self.family_modes();
        (v4 == FamilyMode::Kernel, v6 == FamilyMode::Kernel)
    }

    /// The rules whose packets go to the kernel.
    pub fn kernel_rules(&self) -> impl Iterator<Item = &RuleOrigin> {
        self.origins.iter().filter(|o| o.kernel_because.is_some())
    }
}

/// Who forwards a family's packets ([`Filter::family_modes`]); ordered from llrouter to the
/// kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FamilyMode {
    /// llrouter, judging every packet by the compiled filter.
    Llrouter,
    /// The kernel until a connection is established in its conntrack table, then llrouter.
    Conntrack,
    /// The kernel, every packet.
    Kernel,
}

/// One line of [`Filter::report`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleReport {
    /// The rule.
    #[serde(flatten)]
    pub origin: RuleOrigin,
    /// Packets it matched.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of these, the packets the XDP classifier dropped (or, for a policy, that crossed it on
    /// their way to such a drop) before the rings.
    #[serde(default)]
    pub xdp_packets: u64,
    /// Their bytes.
    #[serde(default)]
    pub xdp_bytes: u64,
}

impl fmt::Display for RuleOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "table {} {}, chain {}, ",
            self.family, self.table, self.chain
        )?;
        if self.handle == 0 {
            write!(f, "{}", self.text)
        } else {
            write!(f, "rule handle {}: {}", self.handle, self.text)
        }
    }
}

#[cfg(test)]
mod tests;
