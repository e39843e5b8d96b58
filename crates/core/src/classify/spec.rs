//! Rules as written by people: TOML `[[rules]]` tables and the one-line CLI syntax.
//!
//! A [`RuleSpec`] names classes and interfaces by string and keeps numbers wide, so that
//! [`RuleSpec::resolve`] can say which field is wrong and why ("dst_port: 70000 is not a port").

use core::fmt;
use core::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{Flex, IpPrefix, PortRange, Rule};
use crate::wire::l4::proto;
use crate::wire::IpVersion;

/// A rule that could not be built: the field (as spelled in the config) and the reason.
pub type RuleError = crate::FieldError;

/// A value given either as a number or as text (`proto = 17` or `"udp"`, `dst_port = 53` or `"5000-5100"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NumOrText {
    /// A plain integer.
    Num(i64),
    /// Anything else, interpreted by the field.
    Text(String),
}

impl fmt::Display for NumOrText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumOrText::Num(n) => write!(f, "{n}"),
            NumOrText::Text(s) => f.write_str(s),
        }
    }
}

impl NumOrText {
    fn parse_text(s: &str) -> Self {
        match parse_int(s) {
            Some(n) => NumOrText::Num(n),
            None => NumOrText::Text(s.to_string()),
        }
    }
}

/// `flex = { offset = 14, value = 0x00b8, mask = 0x00fc }` (DSCP EF of an untagged IPv4 frame:
/// the big-endian word at 14 is version/IHL, TOS; same as `offset = 15, value = 0xb800,
/// mask = 0xfc00`); the mask defaults to 0xffff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlexSpec {
    /// Byte offset from the start of the Ethernet header (0..=62).
    pub offset: i64,
    /// The 16-bit value.
    pub value: i64,
    /// The 16-bit mask.
    #[serde(default = "full_mask")]
    pub mask: i64,
}

fn full_mask() -> i64 {
    0xffff
}

impl FlexSpec {
    /// Checks ranges and builds the [`Flex`] match (reason only; the field is `flex`).
    pub fn resolve(&self) -> Result<Flex, String> {
        let off = u8::try_from(self.offset)
            .map_err(|_| format!("offset {} is out of range", self.offset))?;
        let word = |what: &str, n: i64| {
            u16::try_from(n).map_err(|_| format!("{what} {n} does not fit 16 bits"))
        };
        Flex::new(off, word("value", self.value)?, word("mask", self.mask)?)
    }
}

impl fmt::Display for FlexSpec {
    /// `OFFSET:VALUE/MASK`, value and mask in hex; a negative number (parsed, not yet rejected
    /// by [`resolve`](FlexSpec::resolve)) in decimal, as `{:#x}` would print its two's
    /// complement, which does not parse back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = |n: i64| {
            if n < 0 {
                n.to_string()
            } else {
                format!("{n:#x}")
            }
        };
        write!(
            f,
            "{}:{}/{}",
            self.offset,
            word(self.value),
            word(self.mask)
        )
    }
}

impl FromStr for FlexSpec {
    type Err = String;
    /// Parses `OFFSET:VALUE[/MASK]`, numbers decimal or 0x-hex.
    fn from_str(s: &str) -> Result<Self, String> {
        let (off, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("`{s}` is not OFFSET:VALUE[/MASK]"))?;
        let (val, mask) = match rest.split_once('/') {
            Some((v, m)) => (v, Some(m)),
            None => (rest, None),
        };
        let num = |t: &str| parse_int(t).ok_or_else(|| format!("`{t}` is not a number"));
        Ok(FlexSpec {
            offset: num(off)?,
            value: num(val)?,
            mask: match mask {
                Some(m) => num(m)?,
                None => full_mask(),
            },
        })
    }
}

fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// A rule as configured: classes and interfaces by name, numbers unchecked until [`resolve`](RuleSpec::resolve).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Target class name (required in a classifier rule; absent in a flow's `match`).
    #[serde(default)]
    pub class: String,
    /// Ingress interface by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifname: Option<String>,
    /// Ingress interface by index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifindex: Option<i64>,
    /// VLAN id (0..=4095).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<i64>,
    /// VLAN PCP (0..=7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp: Option<i64>,
    /// IP version (4 or 6).
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "ipver")]
    pub ip_version: Option<i64>,
    /// Protocol: number or tcp, udp, icmp, icmpv6, sctp, gre, esp, ah.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<NumOrText>,
    /// DSCP (0..=63).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<i64>,
    /// Source prefix, `addr/len` or a bare address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
    /// Destination prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<String>,
    /// Source port or `lo-hi`.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "sport")]
    pub src_port: Option<NumOrText>,
    /// Destination port or `lo-hi`.
    #[serde(default, skip_serializing_if = "Option::is_none", alias = "dport")]
    pub dst_port: Option<NumOrText>,
    /// Masked 2-byte compare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flex: Option<FlexSpec>,
}

const PROTO_NAMES: [(&str, u8); 9] = [
    ("icmp", proto::ICMP),
    ("tcp", proto::TCP),
    ("udp", proto::UDP),
    ("icmpv6", proto::ICMPV6),
    ("ipv6-icmp", proto::ICMPV6),
    ("sctp", proto::SCTP),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
];

fn ranged<T: TryFrom<i64>>(
    field: &'static str,
    what: &str,
    n: i64,
    max: i64,
) -> Result<T, RuleError> {
    if (0..=max).contains(&n) {
        T::try_from(n).map_err(|_| RuleError::new(field, format!("{n} is not {what}")))
    } else {
        Err(RuleError::new(
            field,
            format!("{n} is not {what} (0-{max})"),
        ))
    }
}

fn ports(field: &'static str, v: &NumOrText) -> Result<PortRange, RuleError> {
    match v {
        NumOrText::Num(n) => u16::try_from(*n)
            .map(PortRange::single)
            .map_err(|_| RuleError::new(field, format!("{n} is not a port"))),
        NumOrText::Text(s) => s.parse().map_err(|e| RuleError::new(field, e)),
    }
}

impl RuleSpec {
    /// Checks every field and builds the [`Rule`]; class names index into `class_names`.
    pub fn resolve(
        &self,
        class_names: &[String],
        ifindex_of: impl Fn(&str) -> Option<u32>,
    ) -> Result<Rule, RuleError> {
        if self.class.is_empty() {
            return Err(RuleError::new(
                "class",
                format!(
                    "missing: name the class of the rule ({})",
                    class_names.join(", ")
                ),
            ));
        }
        let class = class_names
            .iter()
            .position(|c| *c == self.class)
            .ok_or_else(|| {
                RuleError::new(
                    "class",
                    format!(
                        "unknown class `{}` (known: {})",
                        self.class,
                        class_names.join(", ")
                    ),
                )
            })?;
        if class > usize::from(u8::MAX) {
            return Err(RuleError::new("class", "more than 256 classes"));
        }
        let mut r = self.resolve_match(ifindex_of)?;
        r.class = class;
        Ok(r)
    }

    /// Checks and builds the match fields only (the rule's `class` is left 0): a flow's match.
    pub fn resolve_match(
        &self,
        ifindex_of: impl Fn(&str) -> Option<u32>,
    ) -> Result<Rule, RuleError> {
        let ifindex = match (&self.ifname, self.ifindex) {
            (Some(_), Some(_)) => {
                return Err(RuleError::new("ifname", "give ifname or ifindex, not both"))
            }
            (Some(n), None) => Some(
                ifindex_of(n)
                    .ok_or_else(|| RuleError::new("ifname", format!("no interface `{n}`")))?,
            ),
            (None, Some(i)) if i >= 1 && i <= i64::from(u32::MAX) => Some(i as u32),
            (None, Some(i)) => {
                return Err(RuleError::new(
                    "ifindex",
                    format!("{i} is not an interface index"),
                ))
            }
            (None, None) => None,
        };
        let mut r = Rule {
            ifindex,
            ..Rule::default()
        };
        r.vlan_id = self
            .vlan
            .map(|v| ranged("vlan", "a VLAN id", v, 4095))
            .transpose()?;
        r.vlan_pcp = self
            .pcp
            .map(|v| ranged("pcp", "a priority code point", v, 7))
            .transpose()?;
        r.dscp = self
            .dscp
            .map(|v| ranged("dscp", "a DSCP", v, 63))
            .transpose()?;
        r.ip_version = match self.ip_version {
            None => None,
            Some(4) => Some(IpVersion::V4),
            Some(6) => Some(IpVersion::V6),
            Some(v) => return Err(RuleError::new("ip_version", format!("{v} is not 4 or 6"))),
        };
        r.proto = match &self.proto {
            None => None,
            Some(NumOrText::Num(n)) => Some(ranged("proto", "a protocol number", *n, 255)?),
            Some(NumOrText::Text(t)) => Some(
                PROTO_NAMES
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(t))
                    .map(|&(_, p)| p)
                    .ok_or_else(|| RuleError::new("proto", format!("unknown protocol `{t}`")))?,
            ),
        };
        let prefix = |field, s: &Option<String>| {
            s.as_ref()
                .map(|s| {
                    s.parse::<IpPrefix>()
                        .map_err(|e| RuleError::new(field, format!("`{s}`: {e}")))
                })
                .transpose()
        };
        r.src = prefix("src", &self.src)?;
        r.dst = prefix("dst", &self.dst)?;
        if let (Some(s), Some(d)) = (r.src, r.dst) {
            if s.version() != d.version() {
                return Err(RuleError::new(
                    "dst",
                    "src and dst are of different IP versions",
                ));
            }
        }
        r.required_version()?;
        r.sport = self
            .src_port
            .as_ref()
            .map(|p| ports("src_port", p))
            .transpose()?;
        r.dport = self
            .dst_port
            .as_ref()
            .map(|p| ports("dst_port", p))
            .transpose()?;
        if let Some(p) = r.proto {
            if (r.sport.is_some() || r.dport.is_some()) && !crate::wire::l4::has_ports(p) {
                let f = if r.sport.is_some() {
                    "src_port"
                } else {
                    "dst_port"
                };
                return Err(RuleError::new(f, format!("protocol {p} has no ports")));
            }
        }
        r.flex = self
            .flex
            .map(|f| f.resolve().map_err(|e| RuleError::new("flex", e)))
            .transpose()?;
        Ok(r)
    }
}

impl fmt::Display for RuleSpec {
    /// The one-line syntax, canonical key order: `class=rt proto=udp dport=5000-5100 dst=10.1.0.0/16`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "class={}", self.class)?;
        if let Some(v) = &self.ifname {
            write!(f, " ifname={v}")?;
        }
        if let Some(v) = self.ifindex {
            write!(f, " ifindex={v}")?;
        }
        if let Some(v) = self.vlan {
            write!(f, " vlan={v}")?;
        }
        if let Some(v) = self.pcp {
            write!(f, " pcp={v}")?;
        }
        if let Some(v) = self.ip_version {
            write!(f, " ipver={v}")?;
        }
        if let Some(v) = &self.proto {
            write!(f, " proto={v}")?;
        }
        if let Some(v) = self.dscp {
            write!(f, " dscp={v}")?;
        }
        if let Some(v) = &self.src {
            write!(f, " src={v}")?;
        }
        if let Some(v) = &self.dst {
            write!(f, " dst={v}")?;
        }
        if let Some(v) = &self.src_port {
            write!(f, " sport={v}")?;
        }
        if let Some(v) = &self.dst_port {
            write!(f, " dport={v}")?;
        }
        if let Some(v) = &self.flex {
            write!(f, " flex={v}")?;
        }
        Ok(())
    }
}

impl FromStr for RuleSpec {
    type Err = RuleError;
    /// Parses `key=value` words; keys as in Display, plus the config names as aliases.
    fn from_str(s: &str) -> Result<Self, RuleError> {
        RuleSpec::parse_words(s, true)
    }
}

impl RuleSpec {
    /// A flow's match in the one-line syntax: the rule's words without `class`.
    pub fn parse_match(s: &str) -> Result<RuleSpec, RuleError> {
        RuleSpec::parse_words(s, false)
    }

    fn parse_words(s: &str, need_class: bool) -> Result<RuleSpec, RuleError> {
        let mut r = RuleSpec::default();
        let mut has_class = false;
        for word in s.split_whitespace() {
            let (k, v) = word
                .split_once('=')
                .ok_or_else(|| RuleError::new("rule", format!("`{word}` is not key=value")))?;
            fn set<T>(slot: &mut Option<T>, field: &'static str, v: T) -> Result<(), RuleError> {
                if slot.replace(v).is_some() {
                    return Err(RuleError::new(field, "given twice"));
                }
                Ok(())
            }
            let int = |field: &'static str| {
                parse_int(v).ok_or_else(|| RuleError::new(field, format!("`{v}` is not a number")))
            };
            match k {
                "class" => {
                    if has_class {
                        return Err(RuleError::new("class", "given twice"));
                    }
                    has_class = true;
                    r.class = v.to_string();
                }
                "ifname" | "if" | "iif" => set(&mut r.ifname, "ifname", v.to_string())?,
                "ifindex" => set(&mut r.ifindex, "ifindex", int("ifindex")?)?,
                "vlan" => set(&mut r.vlan, "vlan", int("vlan")?)?,
                "pcp" => set(&mut r.pcp, "pcp", int("pcp")?)?,
                "ipver" | "ip_version" => set(&mut r.ip_version, "ip_version", int("ip_version")?)?,
                "proto" => set(&mut r.proto, "proto", NumOrText::parse_text(v))?,
                "dscp" => set(&mut r.dscp, "dscp", int("dscp")?)?,
                "src" => set(&mut r.src, "src", v.to_string())?,
                "dst" => set(&mut r.dst, "dst", v.to_string())?,
                "sport" | "src_port" => set(&mut r.src_port, "src_port", NumOrText::parse_text(v))?,
                "dport" | "dst_port" => set(&mut r.dst_port, "dst_port", NumOrText::parse_text(v))?,
                "flex" => set(
                    &mut r.flex,
                    "flex",
                    v.parse().map_err(|e| RuleError::new("flex", e))?,
                )?,
                _ => return Err(RuleError::new("rule", format!("unknown key `{k}`"))),
            }
        }
        if !need_class && has_class {
            return Err(RuleError::new(
                "class",
                "a flow's match has no class= (the flow's own `class` names it)",
            ));
        }
        if need_class && (!has_class || r.class.is_empty()) {
            return Err(RuleError::new(
                "class",
                "missing (every rule needs class=NAME)",
            ));
        }
        Ok(r)
    }
}
