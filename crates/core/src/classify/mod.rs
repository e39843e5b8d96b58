//! Classifier rules: the Flow Director match set mapping frames to traffic classes.
//!
//! A [`RuleSet`] is an ordered list of [`Rule`]s; the first rule whose every named field matches
//! decides the class, and a frame no rule matches goes to the set's default (lowest) class.
//! The eBPF XDP classifier mirrors the same rules from [`Rule::to_bpf_bytes`], so the matching
//! semantics below are a contract with `bpf/classifier.c`:
//!
//! - **ifindex**: equal to the ingress interface index.
//! - **vlan_id / vlan_pcp**: the frame carries exactly one 802.1Q tag (outer EtherType 0x8100,
//!   inner EtherType not a VLAN TPID) with this id / PCP. Untagged, stacked and QinQ frames never
//!   match; frames shorter than their L2 header never match.
//! - **L3 fields** (ip_version, proto, dscp, src, dst, ports) match only when [`parse_frame`]
//!   succeeds: a non-IP or malformed frame (any [`ParseError`](crate::wire::ParseError), including
//!   oversize > 9018 bytes and truncated TCP/UDP/SCTP headers) matches no rule naming an L3 field.
//!   IPv4 header checksums are not verified.
//! - **src / dst**: the packet has the prefix's IP version and its address lies in the prefix;
//!   an IPv4 prefix never matches an IPv6 packet and vice versa.
//! - **proto**: the IPv4 protocol, or for IPv6 the upper-layer protocol after at most
//!   [`MAX_EXT_HEADERS`](crate::wire::ipv6::MAX_EXT_HEADERS) hop-by-hop / routing / destination-options /
//!   fragment headers.
//! - **dscp**: IPv4 TOS >> 2, IPv6 traffic class >> 2.
//! - **sport / dport**: the packet is TCP, UDP or SCTP and *not a fragment* (neither the first nor
//!   later fragments carry ports for this purpose; IPv4 MF=1 or offset≠0, or an IPv6 Fragment
//!   header), and the port lies in the inclusive range.
//! - **flex**: the frame is at least `offset + 2` bytes long and
//!   `((frame[offset] << 8) | frame[offset + 1]) & mask == value` (value is stored pre-masked).
//!   `offset` counts from the start of the Ethernet header, so it does not move with a VLAN tag.

mod bpf;
mod spec;

use core::fmt;
use core::net::IpAddr;
use core::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::sched::ClassId;
use crate::wire::{parse_frame, parse_l2, IpVersion, PacketMeta};

pub use bpf::{bpf_field, BPF_MAX_RULES, BPF_RULE_SIZE};
pub use spec::{FlexSpec, NumOrText, RuleError, RuleSpec};

/// An IP prefix with its host bits zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

impl IpPrefix {
    /// Builds a prefix; errors if `len` is too long for the family or host bits are set.
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, String> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(format!("prefix length {len} > {max}"));
        }
        let p = IpPrefix { addr, len };
        let masked = p.network_of(addr);
        if masked != addr {
            return Err(format!("host bits set (did you mean {}/{len}?)", masked));
        }
        Ok(p)
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for a zero-length (default) prefix.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// IPv4 or IPv6.
    pub fn version(&self) -> IpVersion {
        if self.addr.is_ipv4() {
            IpVersion::V4
        } else {
            IpVersion::V6
        }
    }

    /// The prefix of length `len` that holds `a` (host bits cleared); `len` is capped at the
    /// family's width.
    pub fn containing(a: IpAddr, len: u8) -> IpPrefix {
        let len = len.min(if a.is_ipv4() { 32 } else { 128 });
        let p = IpPrefix { addr: a, len };
        IpPrefix {
            addr: p.network_of(a),
            len,
        }
    }

    fn network_of(&self, a: IpAddr) -> IpAddr {
        match a {
            IpAddr::V4(a) => IpAddr::V4((u32::from(a) & mask32(self.len)).into()),
            IpAddr::V6(a) => IpAddr::V6((u128::from(a) & mask128(self.len)).into()),
        }
    }

    /// True if the address `a` (layout of [`PacketMeta::src`]) of version `v` lies in the prefix.
    #[inline]
    pub fn contains_bytes(&self, v: IpVersion, a: &[u8; 16]) -> bool {
        match (self.addr, v) {
            (IpAddr::V4(p), IpVersion::V4) => {
                let x = u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
                (x ^ u32::from(p)) & mask32(self.len) == 0
            }
            (IpAddr::V6(p), IpVersion::V6) => {
                (u128::from_be_bytes(*a) ^ u128::from(p)) & mask128(self.len) == 0
            }
            _ => false,
        }
    }

    /// True if the std address lies in the prefix.
    pub fn contains(&self, a: IpAddr) -> bool {
        match a {
            IpAddr::V4(x) => {
                let mut b = [0; 16];
                b[..4].copy_from_slice(&x.octets());
                self.contains_bytes(IpVersion::V4, &b)
            }
            IpAddr::V6(x) => self.contains_bytes(IpVersion::V6, &x.octets()),
        }
    }
}

/// Network mask of an IPv4 prefix length (0..=32).
pub(crate) fn mask32(len: u8) -> u32 {
    u32::MAX
        .checked_shl(32 - u32::from(len.min(32)))
        .unwrap_or(0)
}

/// Network mask of an IPv6 prefix length (0..=128).
pub(crate) fn mask128(len: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(len.min(128)))
        .unwrap_or(0)
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for IpPrefix {
    type Err = String;
    /// Parses `addr/len`, or a bare address as a host prefix.
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("`{a}` is not an IP address"))?;
        let len = match l {
            Some(l) => l
                .parse::<u8>()
                .map_err(|_| format!("`{l}` is not a prefix length"))?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        IpPrefix::new(addr, len)
    }
}

impl Serialize for IpPrefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IpPrefix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// An inclusive port range `lo..=hi` with `lo <= hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    lo: u16,
    hi: u16,
}

impl PortRange {
    /// Builds the range, or `None` if `lo > hi`.
    pub fn new(lo: u16, hi: u16) -> Option<Self> {
        (lo <= hi).then_some(PortRange { lo, hi })
    }

    /// A single port.
    pub fn single(p: u16) -> Self {
        PortRange { lo: p, hi: p }
    }

    /// Lowest port.
    pub fn lo(&self) -> u16 {
        self.lo
    }

    /// Highest port (inclusive).
    pub fn hi(&self) -> u16 {
        self.hi
    }

    /// True if `p` is in the range.
    #[inline]
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi)
        }
    }
}

impl FromStr for PortRange {
    type Err = String;
    /// Parses `N` or `LO-HI`.
    fn from_str(s: &str) -> Result<Self, String> {
        let port = |t: &str| -> Result<u16, String> {
            let n: i64 = t
                .trim()
                .parse()
                .map_err(|_| format!("`{t}` is not a port"))?;
            u16::try_from(n).map_err(|_| format!("{n} is not a port"))
        };
        match s.split_once('-') {
            Some((a, b)) => {
                let (lo, hi) = (port(a)?, port(b)?);
                PortRange::new(lo, hi).ok_or_else(|| format!("empty range {lo}-{hi}"))
            }
            None => Ok(PortRange::single(port(s)?)),
        }
    }
}

impl Serialize for PortRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Highest allowed flex offset: the two bytes must lie in the first 64 bytes of the frame.
pub const FLEX_MAX_OFFSET: u8 = 62;

/// A 2-byte big-endian value compared under a mask at a fixed frame offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "FlexSpec", into = "FlexSpec")]
pub struct Flex {
    offset: u8,
    value: u16,
    mask: u16,
}

impl Flex {
    /// Builds the match; errors if `offset` > [`FLEX_MAX_OFFSET`] or `value` has bits outside `mask`.
    pub fn new(offset: u8, value: u16, mask: u16) -> Result<Self, String> {
        if offset > FLEX_MAX_OFFSET {
            return Err(format!(
                "offset {offset} is past {FLEX_MAX_OFFSET} (the 2 bytes must be in the first 64)"
            ));
        }
        if value & !mask != 0 {
            return Err(format!("value {value:#x} has bits outside mask {mask:#x}"));
        }
        Ok(Flex {
            offset,
            value,
            mask,
        })
    }

    /// Offset from the start of the Ethernet header.
    pub fn offset(&self) -> u8 {
        self.offset
    }

    /// Value (already masked).
    pub fn value(&self) -> u16 {
        self.value
    }

    /// Mask.
    pub fn mask(&self) -> u16 {
        self.mask
    }

    /// True if the frame is long enough and its masked bytes equal the value.
    #[inline]
    pub fn matches(&self, frame: &[u8]) -> bool {
        let o = usize::from(self.offset);
        match frame.get(o..o + 2) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]) & self.mask == self.value,
            None => false,
        }
    }
}

impl TryFrom<FlexSpec> for Flex {
    type Error = String;
    fn try_from(s: FlexSpec) -> Result<Self, String> {
        s.resolve()
    }
}

impl From<Flex> for FlexSpec {
    fn from(f: Flex) -> Self {
        FlexSpec {
            offset: i64::from(f.offset),
            value: i64::from(f.value),
            mask: i64::from(f.mask),
        }
    }
}

/// One classifier rule: every `Some` field must match; `class` is the target class index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Ingress interface index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifindex: Option<u32>,
    /// 802.1Q VLAN id (single-tagged frames only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_id: Option<u16>,
    /// 802.1Q priority code point (single-tagged frames only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_pcp: Option<u8>,
    /// IP version; a rule whose prefixes disagree with it never matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_version: Option<IpVersion>,
    /// Upper-layer protocol number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<u8>,
    /// DSCP (0..=63).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<u8>,
    /// Source prefix (implies its IP version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpPrefix>,
    /// Destination prefix (implies its IP version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<IpPrefix>,
    /// Source port range (TCP/UDP/SCTP non-fragments only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<PortRange>,
    /// Destination port range (TCP/UDP/SCTP non-fragments only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<PortRange>,
    /// Masked 2-byte compare in the first 64 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flex: Option<Flex>,
    /// Target class index.
    pub class: ClassId,
}

impl Rule {
    /// A rule matching everything, sending to `class`; set fields to narrow it.
    pub fn to_class(class: ClassId) -> Self {
        Rule {
            class,
            ..Rule::default()
        }
    }

    /// The IP version the rule requires: explicit or implied by a prefix; `Err` if they conflict.
    pub fn required_version(&self) -> Result<Option<IpVersion>, RuleError> {
        let mut v = self.ip_version;
        for p in [self.src, self.dst].into_iter().flatten() {
            match v {
                Some(x) if x != p.version() => {
                    return Err(RuleError::new(
                        "ip_version",
                        "contradicts the IP version of src/dst",
                    ))
                }
                _ => v = Some(p.version()),
            }
        }
        Ok(v)
    }

    /// True if the rule names any field read from the IP header or beyond.
    pub fn needs_l3(&self) -> bool {
        self.ip_version.is_some()
            || self.proto.is_some()
            || self.dscp.is_some()
            || self.src.is_some()
            || self.dst.is_some()
            || self.sport.is_some()
            || self.dport.is_some()
    }

    /// True if the rule names a VLAN field.
    pub fn needs_vlan(&self) -> bool {
        self.vlan_id.is_some() || self.vlan_pcp.is_some()
    }

    /// Matches the rule given the L2 result and the full parse (see the module doc for semantics).
    #[inline]
    pub fn matches(
        &self,
        frame: &[u8],
        vlan: Option<crate::wire::Vlan>,
        meta: Option<&PacketMeta>,
        ingress_ifindex: u32,
    ) -> bool {
        if self.ifindex.is_some_and(|i| i != ingress_ifindex) {
            return false;
        }
        if self.needs_vlan() {
            let Some(v) = vlan else { return false };
            if self.vlan_id.is_some_and(|id| id != v.id)
                || self.vlan_pcp.is_some_and(|p| p != v.pcp)
            {
                return false;
            }
        }
        if let Some(f) = &self.flex {
            if !f.matches(frame) {
                return false;
            }
        }
        if !self.needs_l3() {
            return true;
        }
        let Some(m) = meta else { return false };
        if self.ip_version.is_some_and(|v| v != m.version)
            || self.proto.is_some_and(|p| p != m.protocol)
            || self.dscp.is_some_and(|d| d != m.dscp)
        {
            return false;
        }
        if self
            .src
            .is_some_and(|p| !p.contains_bytes(m.version, &m.src))
            || self
                .dst
                .is_some_and(|p| !p.contains_bytes(m.version, &m.dst))
        {
            return false;
        }
        if self.sport.is_some() || self.dport.is_some() {
            if !m.has_ports {
                return false;
            }
            if self.sport.is_some_and(|r| !r.contains(m.src_port))
                || self.dport.is_some_and(|r| !r.contains(m.dst_port))
            {
                return false;
            }
        }
        true
    }
}

/// An ordered rule list: first match wins, no match → the default (lowest) class.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    default_class: ClassId,
    needs_l3: bool,
    needs_vlan: bool,
}

impl RuleSet {
    /// An empty set sending everything to `default_class` (by convention the last class index).
    pub fn new(default_class: ClassId) -> Self {
        RuleSet {
            rules: Vec::new(),
            default_class,
            needs_l3: false,
            needs_vlan: false,
        }
    }

    /// A set with these rules, in order.
    pub fn with_rules(rules: Vec<Rule>, default_class: ClassId) -> Self {
        let mut s = RuleSet::new(default_class);
        for r in rules {
            s.push(r);
        }
        s
    }

    /// Appends a rule (lowest precedence so far).
    pub fn push(&mut self, rule: Rule) {
        self.needs_l3 |= rule.needs_l3();
        self.needs_vlan |= rule.needs_vlan();
        self.rules.push(rule);
    }

    /// The rules, in precedence order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The class of unmatched frames.
    pub fn default_class(&self) -> ClassId {
        self.default_class
    }

    /// Classifies a frame; `meta`, if given, must be `parse_frame(frame)`'s `Ok` value.
    ///
    /// With `meta = None` the frame is parsed here, and only if some rule needs L3 fields.
    #[inline]
    pub fn classify(
        &self,
        frame: &[u8],
        meta: Option<&PacketMeta>,
        ingress_ifindex: u32,
    ) -> ClassId {
        if self.rules.is_empty() {
            return self.default_class;
        }
        let parsed;
        let meta = match meta {
            Some(m) => Some(m),
            None if self.needs_l3 => {
                parsed = parse_frame(frame).ok();
                parsed.as_ref()
            }
            None => None,
        };
        let vlan = match meta {
            Some(m) => m.vlan,
            None if self.needs_vlan => parse_l2(frame).ok().and_then(|l| l.vlan),
            None => None,
        };
        for r in &self.rules {
            if r.matches(frame, vlan, meta, ingress_ifindex) {
                return r.class;
            }
        }
        self.default_class
    }

    /// The BPF map image of the rules, or an error if there are more than [`BPF_MAX_RULES`] or a
    /// class index does not fit the map's byte.
    pub fn to_bpf_map(&self) -> Result<Vec<[u8; BPF_RULE_SIZE]>, RuleError> {
        if self.rules.len() > BPF_MAX_RULES {
            return Err(RuleError::new(
                "rules",
                format!(
                    "{} rules, the eBPF classifier holds at most {BPF_MAX_RULES}",
                    self.rules.len()
                ),
            ));
        }
        self.rules
            .iter()
            .map(|r| {
                if r.class > usize::from(u8::MAX) {
                    Err(RuleError::new(
                        "class",
                        format!("class index {} > 255", r.class),
                    ))
                } else {
                    Ok(r.to_bpf_bytes())
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
