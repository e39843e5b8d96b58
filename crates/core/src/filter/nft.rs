//! Compiles the host's nftables ruleset, as `nft -j list ruleset` prints it (libnftables-json(5),
//! schema 1), into a [`Filter`].
//!
//! Compiled: base chains of `type filter` on the prerouting, forward and postrouting hooks of
//! tables in the `ip`, `ip6` and `inet` families, and every regular chain they reach; matches on
//! `meta nfproto/l4proto/length/iif/oif/iifname/oifname` (names with a trailing `*`),
//! `ip saddr/daddr/protocol/dscp`, `ip6 saddr/daddr/nexthdr/dscp`, `th/tcp/udp/udplite/sctp/dccp
//! sport/dport`, `icmp/icmpv6 type/code`, with `==`, `!=`, `in`, `<`, `<=`, `>`, `>=`,
//! against values, prefixes, ranges, anonymous sets and named sets of those; the statement
//! `counter`; the verdicts `accept`, `drop`, `continue`, `return`, `jump`, `goto` and `reject`
//! with an ICMP port/net/host unreachable or administratively prohibited, or a TCP reset.
//!
//! `ct state` matches and NAT chains are compiled too, for established connections only: they
//! make their family a [`FamilyMode::Conntrack`](super::FamilyMode) one (the module doc of
//! [`super`]).
//!
//! Anything else becomes [`Action::Kernel`] at the first expression llrouter cannot evaluate,
//! with the reason: other `ct` keys, NAT statements outside NAT chains, `log`, `limit`, marks,
//! raw payload offsets, iptables extensions (`xt`), ….
//! Tables of the `netdev` family with a base chain on an interface llrouter serves run before
//! nothing llrouter does (XDP comes first): their rules send that interface's packets to the
//! kernel. `bridge` and `arp` tables see no routed packet and are left out.

use std::collections::HashMap;

use serde_json::Value;

use super::{
    Action, BaseChain, Chain, Families, Filter, Hook, Key, Match, RejectKind, Rule, RuleOrigin,
    ValueSet,
};

/// The ruleset could not be read at all (not what a rule says, which is never an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nft's JSON ruleset: {0}")]
pub struct NftError(String);

/// [`compile`]'s answer.
#[derive(Debug)]
pub struct Compiled {
    /// The filter to run.
    pub filter: Filter,
}

impl Compiled {
    /// The rules whose packets go to the kernel, with the reason.
    pub fn kernel_rules(&self) -> Vec<&RuleOrigin> {
        self.filter.kernel_rules().collect()
    }
}

/// Compiles `json` (the output of `nft -j list ruleset`); `ifaces` are the interfaces the
/// router serves, by name and index, against which interface names are resolved (packets
/// cross no other interface on llrouter's path).
pub fn compile(json: &str, ifaces: &[(String, u32)]) -> Result<Compiled, NftError> {
    let root: Value = serde_json::from_str(json).map_err(|e| NftError(format!("not JSON: {e}")))?;
    let items = root
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or_else(|| NftError("no \"nftables\" array".into()))?;
    let mut b = Builder {
        ifaces,
        sets: HashMap::new(),
        chain_idx: HashMap::new(),
        chains: Vec::new(),
        origins: Vec::new(),
        dormant: Vec::new(),
    };
    for it in items {
        if let Some(t) = it.get("table") {
            let dormant = t
                .get("flags")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x == "dormant"));
            if dormant {
                b.dormant.push((s(t, "family"), s(t, "name")));
            }
        }
        if let Some(set) = it.get("set").or_else(|| it.get("map")) {
            let key = (s(set, "family"), s(set, "table"), s(set, "name"));
            b.sets.insert(key, set.clone());
        }
    }
    // Chains first, so that rules can name chains declared after them.
    for it in items {
        let Some(c) = it.get("chain") else { continue };
        let (family, table, name) = (s(c, "family"), s(c, "table"), s(c, "name"));
        if !matches!(family.as_str(), "ip" | "ip6" | "inet" | "netdev") {
            continue;
        }
        if b.dormant.contains(&(family.clone(), table.clone())) {
            continue;
        }
        let base = b.base_of(c, &family, &table, &name)?;
        let idx = u16::try_from(b.chains.len()).map_err(|_| NftError("too many chains".into()))?;
        b.chain_idx.insert((family, table, name), idx);
        b.chains.push((
            Chain {
                rules: Vec::new(),
                base,
            },
            chain_kind(c),
        ));
    }
    for it in items {
        let Some(r) = it.get("rule") else { continue };
        let key = (s(r, "family"), s(r, "table"), s(r, "chain"));
        let Some(&idx) = b.chain_idx.get(&key) else {
            continue;
        };
        let rule = b.rule(r, idx)?;
        b.chains[usize::from(idx)].0.rules.push(rule);
    }
    // A netdev chain sees frames before anything of llrouter's; it runs on the interface it is
    // bound to only, which `Builder::base_of` made its first match.
    let chains = b.chains.into_iter().map(|(c, _)| c).collect();
    Ok(Compiled {
        filter: Filter::new(chains, b.origins),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChainKind {
    Filter,
    Nat,
    Other,
}

fn chain_kind(c: &Value) -> ChainKind {
    match c.get("type").and_then(Value::as_str) {
        Some("nat") => ChainKind::Nat,
        Some("filter") | None => ChainKind::Filter,
        Some(_) => ChainKind::Other,
    }
}

fn s(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(x)) => x.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

type SetKey = (String, String, String);

struct Builder<'a> {
    ifaces: &'a [(String, u32)],
    sets: HashMap<SetKey, Value>,
    chain_idx: HashMap<SetKey, u16>,
    chains: Vec<(Chain, ChainKind)>,
    origins: Vec<RuleOrigin>,
    dormant: Vec<(String, String)>,
}

/// Why a rule cannot be evaluated by llrouter.
struct Unsupported(String);

impl Builder<'_> {
    fn origin(&mut self, o: RuleOrigin) -> u32 {
        self.origins.push(o);
        (self.origins.len() - 1) as u32
    }

    fn base_of(
        &mut self,
        c: &Value,
        family: &str,
        table: &str,
        name: &str,
    ) -> Result<Option<BaseChain>, NftError> {
        let Some(hook) = c.get("hook").and_then(Value::as_str) else {
            return Ok(None);
        };
        let hook = match (family, hook) {
            (_, "prerouting") => Hook::Prerouting,
            (_, "forward") => Hook::Forward,
            (_, "postrouting") => Hook::Postrouting,
            ("netdev", "ingress") => Hook::Prerouting,
            ("netdev", "egress") => Hook::Postrouting,
            // input, output: packets of the host itself, which the kernel carries.
            _ => return Ok(None),
        };
        if family == "netdev" && !self.serves_device(c) {
            return Ok(None);
        }
        let families = match family {
            "ip" => Families::V4,
            "ip6" => Families::V6,
            _ => Families::Both,
        };
        let priority = c
            .get("prio")
            .and_then(Value::as_i64)
            .ok_or_else(|| NftError(format!("chain {family} {table} {name}: no numeric prio")))?;
        let policy = c.get("policy").and_then(Value::as_str).unwrap_or("accept");
        let policy_drop = policy == "drop";
        let policy_id = self.origin(RuleOrigin {
            family: family.into(),
            table: table.into(),
            chain: name.into(),
            handle: 0,
            text: format!("policy {policy}"),
            kernel_because: None,
            conntrack: chain_kind(c) == ChainKind::Nat,
        });
        Ok(Some(BaseChain {
            hook,
            priority: priority.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
            families,
            policy_drop,
            policy_id,
            nat: chain_kind(c) == ChainKind::Nat,
        }))
    }

    fn serves_device(&self, c: &Value) -> bool {
        let mut names: Vec<&str> = Vec::new();
        match c.get("dev") {
            Some(Value::String(d)) => names.push(d),
            Some(Value::Array(a)) => names.extend(a.iter().filter_map(Value::as_str)),
            _ => {}
        }
        names
            .iter()
            .any(|n| self.ifaces.iter().any(|(m, _)| m == n))
    }

    fn rule(&mut self, r: &Value, chain: u16) -> Result<Rule, NftError> {
        let (family, table, cname) = (s(r, "family"), s(r, "table"), s(r, "chain"));
        let handle = r.get("handle").and_then(Value::as_u64).unwrap_or(0);
        let exprs = r
            .get("expr")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let text = exprs.iter().map(render).collect::<Vec<_>>().join(" ");
        let kind = self.chains[usize::from(chain)].1;
        let mut matches = Vec::new();
        let mut action = Action::Continue;
        let mut because = None;
        // A NAT chain runs for a connection's first packet only, which the kernel forwards; its
        // rules are not compiled (and never run: `BaseChain::nat`).
        let nat = kind == ChainKind::Nat && family != "netdev";
        if family == "netdev" {
            because = Some("a netdev chain: llrouter's XDP program sees the frame first".into());
        } else if kind == ChainKind::Other {
            because = Some("a chain of a type other than filter".into());
        }
        if because.is_none() && !nat {
            for (i, e) in exprs.iter().enumerate() {
                let step = self.expr(e, &family, &table, &mut matches);
                match step {
                    Ok(None) => {}
                    Ok(Some(a)) => {
                        action = a;
                        if i + 1 < exprs.len() {
                            // A verdict ends the rule; nft prints none after it.
                            because = Some("statements after the verdict".into());
                        }
                        break;
                    }
                    Err(Unsupported(why)) => {
                        because = Some(why);
                        break;
                    }
                }
            }
        }
        if because.is_some() || nat {
            action = Action::Kernel;
        }
        let conntrack = nat || matches.iter().any(|m| m.key == Key::CtState);
        let id = self.origin(RuleOrigin {
            family,
            table,
            chain: cname,
            handle,
            text,
            kernel_because: because,
            conntrack,
        });
        Ok(Rule {
            matches,
            action,
            id,
        })
    }

    /// One expression: a match (pushed), a statement that changes nothing (`None`), or the
    /// rule's verdict.
    fn expr(
        &self,
        e: &Value,
        family: &str,
        table: &str,
        matches: &mut Vec<Match>,
    ) -> Result<Option<Action>, Unsupported> {
        let Some((name, body)) = e.as_object().and_then(|o| o.iter().next()) else {
            return Err(Unsupported(format!(
                "an expression llrouter cannot read: {e}"
            )));
        };
        let chain_ref = |body: &Value| -> Result<u16, Unsupported> {
            let target = body.get("target").and_then(Value::as_str).unwrap_or("");
            let key = (family.to_string(), table.to_string(), target.to_string());
            self.chain_idx
                .get(&key)
                .copied()
                .ok_or_else(|| Unsupported(format!("a jump to unknown chain {target}")))
        };
        let action = match name.as_str() {
            "match" => {
                self.push_match(body, family, table, matches)?;
                return Ok(None);
            }
            "counter" => return Ok(None),
            "accept" => Action::Accept,
            "drop" => Action::Drop,
            "continue" => Action::Continue,
            "return" => Action::Return,
            "jump" => Action::Jump(chain_ref(body)?),
            "goto" => Action::Goto(chain_ref(body)?),
            "reject" => Action::Reject(reject_kind(body, family)?),
            "xt" => {
                let what = body.get("type").and_then(Value::as_str).unwrap_or("");
                let n = body.get("name").and_then(Value::as_str).unwrap_or("");
                return Err(Unsupported(format!(
                    "an iptables extension (xt {what} {n})"
                )));
            }
            other => {
                return Err(Unsupported(format!(
                    "the statement `{other}`, which llrouter does not carry out"
                )))
            }
        };
        Ok(Some(action))
    }

    fn push_match(
        &self,
        body: &Value,
        family: &str,
        table: &str,
        matches: &mut Vec<Match>,
    ) -> Result<(), Unsupported> {
        let op = body.get("op").and_then(Value::as_str).unwrap_or("==");
        let left = body.get("left").unwrap_or(&Value::Null);
        let right = body.get("right").unwrap_or(&Value::Null);
        let (key, ty, dep) = field(left)?;
        if let Some(p) = dep {
            matches.push(Match {
                key: Key::L4Proto,
                negate: false,
                set: ValueSet::single(u128::from(p)),
            });
        }
        let ranges = self.values(right, ty, family, table)?;
        let (negate, set) = match op {
            "==" | "in" => (false, ValueSet::from_ranges(ranges)),
            "!=" => (true, ValueSet::from_ranges(ranges)),
            "<" | "<=" | ">" | ">=" => {
                let &[(v, w)] = ranges.as_slice() else {
                    return Err(Unsupported(format!("`{op}` against a set")));
                };
                if v != w {
                    return Err(Unsupported(format!("`{op}` against a range")));
                }
                let r = match op {
                    "<" if v == 0 => vec![],
                    "<" => vec![(0, v - 1)],
                    "<=" => vec![(0, v)],
                    ">" => vec![(v.saturating_add(1), u128::MAX)],
                    _ => vec![(v, u128::MAX)],
                };
                (false, ValueSet::from_ranges(r))
            }
            other => return Err(Unsupported(format!("the operator `{other}`"))),
        };
        matches.push(Match { key, negate, set });
        Ok(())
    }

    /// The ranges a right-hand side stands for.
    fn values(
        &self,
        v: &Value,
        ty: Ty,
        family: &str,
        table: &str,
    ) -> Result<Vec<(u128, u128)>, Unsupported> {
        match v {
            Value::String(name) if name.starts_with('@') => {
                let key = (family.to_string(), table.to_string(), name[1..].to_string());
                let set = self
                    .sets
                    .get(&key)
                    .ok_or_else(|| Unsupported(format!("the unknown set {name}")))?;
                if set.get("map").is_some() || set.get("data").is_some() {
                    return Err(Unsupported(format!("the map {name}")));
                }
                let elems = set
                    .get("elem")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut out = Vec::with_capacity(elems.len());
                for e in &elems {
                    out.extend(self.values(e, ty, family, table)?);
                }
                Ok(out)
            }
            Value::Object(o) if o.contains_key("set") => {
                let mut out = Vec::new();
                for e in o["set"].as_array().into_iter().flatten() {
                    out.extend(self.values(e, ty, family, table)?);
                }
                Ok(out)
            }
            Value::Array(a) => {
                let mut out = Vec::new();
                for e in a {
                    out.extend(self.values(e, ty, family, table)?);
                }
                Ok(out)
            }
            Value::Object(o) if o.contains_key("elem") => {
                let val = o["elem"].get("val").unwrap_or(&Value::Null);
                self.values(val, ty, family, table)
            }
            Value::Object(o) if o.contains_key("prefix") => {
                let p = &o["prefix"];
                let addr = scalar(p.get("addr").unwrap_or(&Value::Null), ty)?;
                let len = p.get("len").and_then(Value::as_u64).unwrap_or(0) as u32;
                let bits = match ty {
                    Ty::Addr4 => 32,
                    Ty::Addr6 => 128,
                    _ => return Err(Unsupported("a prefix of a non-address field".into())),
                };
                if len > bits {
                    return Err(Unsupported(format!("a prefix length {len}")));
                }
                let host = if len == bits {
                    0
                } else {
                    (u128::MAX >> (128 - bits)) >> len
                };
                Ok(vec![(addr & !host, addr | host)])
            }
            Value::Object(o) if o.contains_key("range") => {
                let r = o["range"].as_array().cloned().unwrap_or_default();
                let [lo, hi] = r.as_slice() else {
                    return Err(Unsupported("a range without two ends".into()));
                };
                Ok(vec![(scalar(lo, ty)?, scalar(hi, ty)?)])
            }
            Value::String(name) if matches!(ty, Ty::IfName | Ty::IfIndex) => {
                Ok(self.interfaces(name, ty == Ty::IfName))
            }
            Value::Number(_) if ty == Ty::IfIndex => {
                let i = v.as_u64().unwrap_or(0);
                Ok(vec![(u128::from(i), u128::from(i))])
            }
            other => {
                let x = scalar(other, ty)?;
                Ok(vec![(x, x)])
            }
        }
    }

    /// The served interfaces `name` names: equal, or with a trailing `*` a prefix (the kernel
    /// compares names; an interface llrouter does not serve carries none of its packets).
    fn interfaces(&self, name: &str, wildcard_ok: bool) -> Vec<(u128, u128)> {
        let (stem, wild) = match name.strip_suffix('*') {
            Some(stem) if wildcard_ok && !stem.ends_with('\\') => (stem, true),
            _ => (name, false),
        };
        let stem = stem.replace("\\*", "*");
        self.ifaces
            .iter()
            .filter(|(n, _)| {
                if wild {
                    n.starts_with(&stem)
                } else {
                    *n == stem
                }
            })
            .map(|&(_, i)| (u128::from(i), u128::from(i)))
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Addr4,
    Addr6,
    Proto,
    Port,
    Icmp4Type,
    Icmp6Type,
    Number,
    Dscp,
    NfProto,
    EtherType,
    IfName,
    IfIndex,
    CtState,
}

/// The key a left-hand side reads, the type of its values and the transport protocol it
/// implies (nft adds that dependency to `tcp dport` and the like).
fn field(left: &Value) -> Result<(Key, Ty, Option<u8>), Unsupported> {
    if let Some(p) = left.get("payload") {
        let proto = p.get("protocol").and_then(Value::as_str);
        let f = p.get("field").and_then(Value::as_str);
        let (Some(proto), Some(f)) = (proto, f) else {
            return Err(Unsupported(format!("a raw payload match ({p})")));
        };
        let transport = match proto {
            "tcp" => Some(6),
            "udp" => Some(17),
            "udplite" => Some(136),
            "sctp" => Some(132),
            "dccp" => Some(33),
            _ => None,
        };
        return match (proto, f) {
            ("ip", "saddr") => Ok((Key::Saddr4, Ty::Addr4, None)),
            ("ip", "daddr") => Ok((Key::Daddr4, Ty::Addr4, None)),
            ("ip", "protocol") => Ok((Key::IpProtocol, Ty::Proto, None)),
            ("ip", "dscp") => Ok((Key::Dscp4, Ty::Dscp, None)),
            ("ip6", "saddr") => Ok((Key::Saddr6, Ty::Addr6, None)),
            ("ip6", "daddr") => Ok((Key::Daddr6, Ty::Addr6, None)),
            ("ip6", "nexthdr") => Ok((Key::Ip6NextHdr, Ty::Proto, None)),
            ("ip6", "dscp") => Ok((Key::Dscp6, Ty::Dscp, None)),
            ("th", "sport") => Ok((Key::L4Word0, Ty::Port, None)),
            ("th", "dport") => Ok((Key::L4Word1, Ty::Port, None)),
            (_, "sport") if transport.is_some() => Ok((Key::L4Word0, Ty::Port, transport)),
            (_, "dport") if transport.is_some() => Ok((Key::L4Word1, Ty::Port, transport)),
            ("icmp", "type") => Ok((Key::L4Byte0, Ty::Icmp4Type, Some(1))),
            ("icmp", "code") => Ok((Key::L4Byte1, Ty::Number, Some(1))),
            ("icmpv6", "type") => Ok((Key::L4Byte0, Ty::Icmp6Type, Some(58))),
            ("icmpv6", "code") => Ok((Key::L4Byte1, Ty::Number, Some(58))),
            _ => Err(Unsupported(format!("the field `{proto} {f}`"))),
        };
    }
    if let Some(m) = left.get("meta") {
        let k = m.get("key").and_then(Value::as_str).unwrap_or("");
        return match k {
            "l4proto" => Ok((Key::L4Proto, Ty::Proto, None)),
            "nfproto" => Ok((Key::NfProto, Ty::NfProto, None)),
            "protocol" => Ok((Key::NfProto, Ty::EtherType, None)),
            "length" => Ok((Key::Length, Ty::Number, None)),
            "iif" => Ok((Key::Iif, Ty::IfIndex, None)),
            "oif" => Ok((Key::Oif, Ty::IfIndex, None)),
            "iifname" => Ok((Key::Iif, Ty::IfName, None)),
            "oifname" => Ok((Key::Oif, Ty::IfName, None)),
            _ => Err(Unsupported(format!("`meta {k}`"))),
        };
    }
    if let Some(c) = left.get("ct") {
        let k = c.get("key").and_then(Value::as_str).unwrap_or("");
        if k == "state" && c.get("dir").is_none() {
            return Ok((Key::CtState, Ty::CtState, None));
        }
        return Err(Unsupported(format!("`ct {k}` (connection tracking)")));
    }
    Err(Unsupported(format!("the match on {left}")))
}

/// One value of type `ty` as a number.
fn scalar(v: &Value, ty: Ty) -> Result<u128, Unsupported> {
    let bad = || Unsupported(format!("the value {v}"));
    if let Some(n) = v.as_u64() {
        return match ty {
            // A number for `ct state` would be a bit mask: nft prints names.
            Ty::Addr4 | Ty::Addr6 | Ty::IfName | Ty::CtState => Err(bad()),
            _ => Ok(u128::from(n)),
        };
    }
    let t = v.as_str().ok_or_else(bad)?;
    let n: Option<u128> = match ty {
        Ty::Addr4 => t
            .parse::<std::net::Ipv4Addr>()
            .ok()
            .map(|a| u32::from(a).into()),
        Ty::Addr6 => t.parse::<std::net::Ipv6Addr>().ok().map(u128::from),
        Ty::Proto => proto_number(t).map(u128::from),
        Ty::Port => t.parse().ok(),
        Ty::Icmp4Type => icmp4_type(t).map(u128::from),
        Ty::Icmp6Type => icmp6_type(t).map(u128::from),
        Ty::Number => t.parse().ok(),
        Ty::Dscp => dscp(t).map(u128::from),
        Ty::NfProto => match t {
            "ipv4" => Some(4),
            "ipv6" => Some(6),
            _ => None,
        },
        // `meta protocol`: the EtherType; only IPv4 and IPv6 packets are forwarded here, so any
        // other value simply never matches.
        Ty::EtherType => match t {
            "ip" => Some(4),
            "ip6" => Some(6),
            _ => Some(0),
        },
        // One bit per state: a packet is in exactly one, so nft's bit test (`in`) of a list
        // of names is membership.
        Ty::CtState => match t {
            "invalid" => Some(super::CT_INVALID),
            "established" => Some(super::CT_ESTABLISHED),
            "related" => Some(super::CT_RELATED),
            "new" => Some(super::CT_NEW),
            "untracked" => Some(super::CT_UNTRACKED),
            _ => None,
        }
        .map(u128::from),
        Ty::IfName | Ty::IfIndex => None,
    };
    n.ok_or_else(bad)
}

fn proto_number(t: &str) -> Option<u8> {
    Some(match t {
        "icmp" => 1,
        "igmp" => 2,
        "ipip" | "ipencap" => 4,
        "tcp" => 6,
        "udp" => 17,
        "ipv6" => 41,
        "gre" => 47,
        "esp" => 50,
        "ah" => 51,
        "ipv6-icmp" | "icmpv6" => 58,
        "udplite" => 136,
        "sctp" => 132,
        "dccp" => 33,
        "ospf" => 89,
        "vrrp" => 112,
        "l2tp" => 115,
        "hopopts" => 0,
        "routing" => 43,
        "fragment" => 44,
        "dstopts" => 60,
        "comp" => 108,
        "mh" => 135,
        _ => return t.parse().ok(),
    })
}

fn icmp4_type(t: &str) -> Option<u8> {
    Some(match t {
        "echo-reply" => 0,
        "destination-unreachable" => 3,
        "source-quench" => 4,
        "redirect" => 5,
        "echo-request" => 8,
        "router-advertisement" => 9,
        "router-solicitation" => 10,
        "time-exceeded" => 11,
        "parameter-problem" => 12,
        "timestamp-request" => 13,
        "timestamp-reply" => 14,
        "info-request" => 15,
        "info-reply" => 16,
        "address-mask-request" => 17,
        "address-mask-reply" => 18,
        _ => return t.parse().ok(),
    })
}

fn icmp6_type(t: &str) -> Option<u8> {
    Some(match t {
        "destination-unreachable" => 1,
        "packet-too-big" => 2,
        "time-exceeded" => 3,
        "parameter-problem" => 4,
        "echo-request" => 128,
        "echo-reply" => 129,
        "mld-listener-query" => 130,
        "mld-listener-report" => 131,
        "mld-listener-done" | "mld-listener-reduction" => 132,
        "nd-router-solicit" => 133,
        "nd-router-advert" => 134,
        "nd-neighbor-solicit" => 135,
        "nd-neighbor-advert" => 136,
        "nd-redirect" => 137,
        "router-renumbering" => 138,
        "ind-neighbor-solicit" => 141,
        "ind-neighbor-advert" => 142,
        "mld2-listener-report" => 143,
        _ => return t.parse().ok(),
    })
}

fn dscp(t: &str) -> Option<u8> {
    if let Some(n) = t.strip_prefix("cs").and_then(|d| d.parse::<u8>().ok()) {
        return (n <= 7).then_some(n * 8);
    }
    if let Some(d) = t.strip_prefix("af") {
        let (c, p) = (
            d.get(0..1)?.parse::<u8>().ok()?,
            d.get(1..2)?.parse::<u8>().ok()?,
        );
        return ((1..=4).contains(&c) && (1..=3).contains(&p)).then_some(c * 8 + p * 2);
    }
    Some(match t {
        "ef" => 46,
        "va" => 44,
        "le" => 1,
        _ => return t.parse().ok(),
    })
}

/// `reject`'s ICMP error; `tcp reset` and the rarer codes go to the kernel.
fn reject_kind(body: &Value, family: &str) -> Result<RejectKind, Unsupported> {
    let ty = body.get("type").and_then(Value::as_str);
    let code = body.get("expr").and_then(Value::as_str);
    let unsupported = || {
        Unsupported(format!("`reject` {body} (llrouter sends a TCP reset, ICMP port, host or net unreachable and admin-prohibited only)"))
    };
    let _ = family;
    match (ty, code) {
        (None, None) | (_, Some("port-unreachable")) if ty != Some("tcp reset") => {
            Ok(RejectKind::PortUnreachable)
        }
        (Some("icmp" | "icmpx"), Some("net-unreachable"))
        | (Some("icmpv6" | "icmpx"), Some("no-route")) => Ok(RejectKind::NetUnreachable),
        (Some("icmp" | "icmpx"), Some("host-unreachable"))
        | (Some("icmpv6"), Some("addr-unreachable")) => Ok(RejectKind::HostUnreachable),
        (Some("icmp" | "icmpv6" | "icmpx"), Some("admin-prohibited")) => {
            Ok(RejectKind::AdminProhibited)
        }
        (Some("tcp reset"), _) => Ok(RejectKind::TcpReset),
        _ => Err(unsupported()),
    }
}

/// A short rendering of one expression, in nft's own words where it is easy.
fn render(e: &Value) -> String {
    let Some((name, body)) = e.as_object().and_then(|o| o.iter().next()) else {
        return e.to_string();
    };
    match name.as_str() {
        "match" => {
            let op = body.get("op").and_then(Value::as_str).unwrap_or("==");
            let left = body.get("left").map(render_left).unwrap_or_default();
            let right = body.get("right").map(render_value).unwrap_or_default();
            match op {
                "==" | "in" => format!("{left} {right}"),
                _ => format!("{left} {op} {right}"),
            }
        }
        "counter" => "counter".into(),
        "jump" | "goto" => format!("{name} {}", s(body, "target")),
        "reject" if body.is_null() => "reject".into(),
        "reject" => format!("reject with {} {}", s(body, "type"), s(body, "expr"))
            .trim_end()
            .to_string(),
        "xt" => format!("xt {} {}", s(body, "type"), s(body, "name")),
        _ if body.is_null() => name.clone(),
        _ => format!("{name} {body}"),
    }
}

fn render_left(v: &Value) -> String {
    if let Some(p) = v.get("payload") {
        return format!("{} {}", s(p, "protocol"), s(p, "field"));
    }
    if let Some(m) = v.get("meta") {
        return format!("meta {}", s(m, "key"));
    }
    if let Some(c) = v.get("ct") {
        return format!("ct {}", s(c, "key"));
    }
    v.to_string()
}

fn render_value(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Number(n) => n.to_string(),
        Value::Array(a) => a.iter().map(render_value).collect::<Vec<_>>().join(","),
        Value::Object(o) if o.contains_key("set") => {
            let inner = o["set"]
                .as_array()
                .map(|a| a.iter().map(render_value).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            format!("{{ {inner} }}")
        }
        Value::Object(o) if o.contains_key("prefix") => {
            format!("{}/{}", s(&o["prefix"], "addr"), s(&o["prefix"], "len"))
        }
        Value::Object(o) if o.contains_key("range") => {
            let r = o["range"].as_array().cloned().unwrap_or_default();
            r.iter().map(render_value).collect::<Vec<_>>().join("-")
        }
        other => other.to_string(),
    }
}
