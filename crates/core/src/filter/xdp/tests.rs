use proptest::prelude::*;

use super::super::nft::compile;
use super::super::*;
use super::*;

const LAN: u32 = 2;
const WAN: u32 = 3;

fn ifaces() -> Vec<(String, u32)> {
    vec![("lan0".into(), LAN), ("wan".into(), WAN)]
}

/// A ruleset in nft's own syntax, as `nft -j` lists it: compiled by the real nft when the test
/// machine has it is not needed here; the JSON is written out.
fn ruleset(items: &[String]) -> String {
    let mut all = vec![
        r#"{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}"#
            .to_string(),
    ];
    all.extend(items.iter().cloned());
    format!("{{\"nftables\": [{}]}}", all.join(","))
}

fn chain(family: &str, name: &str, hook: &str, prio: i32, policy: &str) -> String {
    format!(
        r#"{{"chain": {{"family": "{family}", "table": "t", "name": "{name}", "handle": 1, "type": "filter", "hook": "{hook}", "prio": {prio}, "policy": "{policy}"}}}}"#
    )
}

fn rule(family: &str, chain: &str, handle: u64, expr: &str) -> String {
    format!(
        r#"{{"rule": {{"family": "{family}", "table": "t", "chain": "{chain}", "handle": {handle}, "expr": [{expr}]}}}}"#
    )
}

fn saddr(proto: &str, op: &str, right: &str) -> String {
    format!(
        r#"{{"match": {{"op": "{op}", "left": {{"payload": {{"protocol": "{proto}", "field": "saddr"}}}}, "right": {right}}}}}"#
    )
}

fn daddr(proto: &str, right: &str) -> String {
    format!(
        r#"{{"match": {{"op": "==", "left": {{"payload": {{"protocol": "{proto}", "field": "daddr"}}}}, "right": {right}}}}}"#
    )
}

fn prefix(a: &str, len: u8) -> String {
    format!(r#"{{"prefix": {{"addr": "{a}", "len": {len}}}}}"#)
}

const DROP: &str = r#"{"drop": null}"#;
const ACCEPT: &str = r#"{"accept": null}"#;
const IIF_LAN: &str =
    r#"{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "lan0"}}"#;
const UDP_53: &str = r#"{"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 53}}"#;

fn filter(items: &[String]) -> Filter {
    compile(&ruleset(items), &ifaces()).unwrap().filter
}

fn v4(src: [u8; 4], dst: [u8; 4]) -> FilterPacket {
    FilterPacket {
        v6: false,
        src: u128::from(u32::from_be_bytes(src)),
        dst: u128::from(u32::from_be_bytes(dst)),
        l4proto: 17,
        nexthdr: 17,
        dscp: 0,
        len: 100,
        l4: Some([0, 1, 0, 53]),
        iif: LAN,
        oif: 0,
        ct_state: crate::filter::CT_ESTABLISHED,
    }
}

/// The rule text of the slot that drops `p`, if any.
fn dropped_by(f: &Filter, d: &XdpDrops, p: &FilterPacket) -> Option<String> {
    d.lookup(p)
        .map(|s| f.origins[d.slots[s].rule as usize].handle.to_string())
}

/// Each packet is dropped in XDP by the rule of the handle given (or not at all), and the
/// kernel's evaluation drops it by that same rule wherever the model drops it.
fn assert_drops(f: &Filter, d: &XdpDrops, cases: &[(FilterPacket, Option<&str>)]) {
    for (p, want) in cases {
        assert_eq!(dropped_by(f, d, p).as_deref(), *want, "{p:?}");
        if let Some(s) = d.lookup(p) {
            assert_eq!(f.eval(Hook::Prerouting, p), Decision::Drop(d.slots[s].rule));
        }
    }
}

#[test]
fn a_prerouting_blocklist_is_dropped_in_xdp_and_a_forward_drop_is_not() {
    let f = filter(&[
        chain("inet", "pre", "prerouting", -150, "accept"),
        rule(
            "inet",
            "pre",
            5,
            &format!(
                "{}, {DROP}",
                saddr(
                    "ip",
                    "==",
                    &format!(
                        r#"{{"set": [{}, "192.0.2.7"]}}"#,
                        prefix("198.51.100.0", 24)
                    )
                )
            ),
        ),
        chain("inet", "fw", "forward", 0, "accept"),
        rule(
            "inet",
            "fw",
            6,
            &format!("{}, {DROP}", daddr("ip", r#""10.0.0.1""#)),
        ),
    ]);
    let d = f.xdp_drops(LAN);
    assert_eq!(d.slots.len(), 1, "{d:?}");
    assert_eq!(d.prefixes[0][0].len(), 2);
    assert!(d.prefixes[0][1].is_empty() && !d.has_family(true));
    assert_eq!(
        dropped_by(&f, &d, &v4([198, 51, 100, 9], [10, 0, 0, 1])).as_deref(),
        Some("5")
    );
    assert_eq!(
        dropped_by(&f, &d, &v4([192, 0, 2, 7], [10, 0, 0, 2])).as_deref(),
        Some("5")
    );
    // The forward chain's drop depends on the route (an ICMP error comes first without one).
    assert_eq!(dropped_by(&f, &d, &v4([192, 0, 2, 8], [10, 0, 0, 1])), None);
}

fn port_match(proto: &str, field: &str, right: &str) -> String {
    format!(
        r#"{{"match": {{"op": "==", "left": {{"payload": {{"protocol": "{proto}", "field": "{field}"}}}}, "right": {right}}}}}"#
    )
}

/// The handles of the rules the classifier drops for, in slot order.
fn slot_handles(f: &Filter, d: &XdpDrops) -> Vec<u64> {
    (d.slots.iter())
        .map(|s| f.origins[s.rule as usize].handle)
        .collect()
}

fn with_ports(mut p: FilterPacket, proto: u8, sport: u16, dport: u16) -> FilterPacket {
    p.l4proto = proto;
    p.nexthdr = proto;
    let (s, d) = (sport.to_be_bytes(), dport.to_be_bytes());
    p.l4 = Some([s[0], s[1], d[0], d[1]]);
    p
}

#[test]
fn port_drops_with_and_without_an_address_are_taken_in_xdp() {
    let f = filter(&[
        chain("inet", "pre", "prerouting", -150, "accept"),
        // The issue's first example: one host's UDP port.
        rule(
            "inet",
            "pre",
            5,
            &format!(
                "{}, {}, {DROP}",
                daddr("ip", r#""10.0.0.1""#),
                port_match("udp", "dport", "7777")
            ),
        ),
        rule(
            "inet",
            "pre",
            6,
            &format!(
                "{}, {DROP}",
                port_match("tcp", "dport", r#"{"set": [22, 80]}"#)
            ),
        ),
        rule(
            "inet",
            "pre",
            7,
            &format!("{}, {DROP}", saddr("ip", "==", &prefix("192.0.2.0", 24))),
        ),
        // ICMP has no ports, but a type the classifier reads (in either family: an IPv6
        // packet may carry ICMP too).
        rule(
            "inet",
            "pre",
            8,
            &format!("{}, {DROP}", port_match("icmp", "type", "8")),
        ),
    ]);
    let d = f.xdp_drops(LAN);
    let handles = slot_handles(&f, &d);
    // IPv4: all four; IPv6: the port drop without an address and the ICMP type.
    assert_eq!(handles, [5, 6, 7, 8, 6, 8], "{d:?}");
    assert!(d.has_ports(false) && d.has_ports(true));
    let host = v4([198, 51, 100, 1], [10, 0, 0, 1]);
    let other = v4([198, 51, 100, 1], [10, 0, 0, 2]);
    let blocked_src = v4([192, 0, 2, 9], [10, 0, 0, 1]);
    let cases = [
        (with_ports(host, 17, 40000, 7777), Some("5")),
        (with_ports(other, 17, 40000, 7777), None),
        (with_ports(host, 17, 7777, 40000), None),
        (with_ports(host, 6, 40000, 7777), None),
        (with_ports(other, 6, 40000, 22), Some("6")),
        (with_ports(other, 6, 40000, 80), Some("6")),
        (with_ports(other, 17, 40000, 22), None),
        // Both an address drop and an earlier port drop: the earlier rule.
        (with_ports(blocked_src, 17, 1, 7777), Some("5")),
        (with_ports(blocked_src, 17, 1, 7778), Some("7")),
        // A non-first fragment carries no ports: only the address drops apply.
        (
            FilterPacket {
                l4: None,
                ..with_ports(blocked_src, 17, 1, 7777)
            },
            Some("7"),
        ),
        (
            FilterPacket {
                l4: None,
                ..with_ports(host, 17, 1, 7777)
            },
            None,
        ),
    ];
    for (p, want) in cases {
        assert_eq!(dropped_by(&f, &d, &p).as_deref(), want, "{p:?}");
        // The kernel's decision, by the same rule.
        let got = f.eval(Hook::Prerouting, &p);
        if let Some(h) = want {
            let Decision::Drop(id) = got else {
                panic!("{p:?}: {got:?}")
            };
            assert_eq!(f.origins[id as usize].handle.to_string(), h);
        }
    }
}

#[test]
fn a_port_accept_before_a_port_drop_keeps_it_in_the_workers_only_where_they_meet() {
    let f = filter(&[
        chain("inet", "pre", "prerouting", -150, "accept"),
        rule(
            "inet",
            "pre",
            5,
            &format!("{}, {ACCEPT}", port_match("udp", "dport", "53")),
        ),
        rule(
            "inet",
            "pre",
            6,
            &format!("{}, {DROP}", port_match("udp", "dport", "7777")),
        ),
        rule(
            "inet",
            "pre",
            7,
            &format!(
                "{}, {DROP}",
                port_match("udp", "dport", r#"{"set": [53, 54]}"#)
            ),
        ),
    ]);
    let d = f.xdp_drops(LAN);
    let handles = slot_handles(&f, &d);
    // 7777 cannot meet the accept of port 53; the set {53, 54} can.
    assert_eq!(handles, [6, 6], "{d:?}");
}

#[test]
fn a_rule_before_that_may_match_the_same_packets_keeps_the_drop_in_the_workers() {
    let bl = format!("{}, {DROP}", saddr("ip", "==", &prefix("198.51.100.0", 24)));
    let pre = || chain("ip", "pre", "prerouting", 0, "accept");
    // An accept of some of those packets ends the chain before the drop.
    let accept_some = format!("{}, {ACCEPT}", saddr("ip", "==", r#""198.51.100.1""#));
    // A counter would count them.
    let counter = r#"{"counter": {"packets": 0, "bytes": 0}}"#.to_string();
    for before in [accept_some, counter] {
        let f = filter(&[
            pre(),
            rule("ip", "pre", 1, &before),
            rule("ip", "pre", 2, &bl),
        ]);
        assert!(f.xdp_drops(LAN).is_empty(), "before: {before}");
    }
    // A drop by port is taken in XDP too, first: the kernel counts the earlier rule.
    let f = filter(&[
        pre(),
        rule("ip", "pre", 1, &format!("{UDP_53}, {DROP}")),
        rule("ip", "pre", 2, &bl),
    ]);
    let d = f.xdp_drops(LAN);
    assert_eq!(d.slots.len(), 2, "{d:?}");
    let mut p = v4([198, 51, 100, 3], [10, 0, 0, 1]);
    assert_eq!(dropped_by(&f, &d, &p).as_deref(), Some("1"));
    p.l4 = Some([0, 1, 0, 54]);
    assert_eq!(dropped_by(&f, &d, &p).as_deref(), Some("2"));
    // Rules that cannot meet those packets do not matter.
    for before in [
        format!("{}, {ACCEPT}", saddr("ip", "==", r#""198.51.101.1""#)),
        format!("{}, {ACCEPT}", saddr("ip6", "==", r#""2001:db8::1""#)),
        format!(
            r#"{{"match": {{"op": "==", "left": {{"meta": {{"key": "iifname"}}}}, "right": "wan"}}}}, {ACCEPT}"#
        ),
    ] {
        let f = filter(&[
            pre(),
            rule("ip", "pre", 1, &before),
            rule("ip", "pre", 2, &bl),
        ]);
        assert_eq!(f.xdp_drops(LAN).slots.len(), 1, "before: {before}");
    }
    // A chain of lower priority with a drop policy decides what reaches the later chains.
    let f = filter(&[
        chain("ip", "first", "prerouting", -10, "drop"),
        rule("ip", "first", 1, ACCEPT),
        pre(),
        rule("ip", "pre", 2, &bl),
    ]);
    assert!(f.xdp_drops(LAN).is_empty());
    // An accept-policy chain before: its policy is counted with the drop.
    let f = filter(&[
        chain("ip", "first", "prerouting", -10, "accept"),
        pre(),
        rule("ip", "pre", 2, &bl),
    ]);
    let d = f.xdp_drops(LAN);
    assert_eq!(d.slots.len(), 1);
    assert_eq!(d.slots[0].crossed.len(), 1);
    assert_eq!(f.origins[d.slots[0].crossed[0] as usize].chain, "first");
}

#[test]
fn interface_negation_and_overlapping_rules() {
    let f = filter(&[
        chain("inet", "pre", "prerouting", 0, "accept"),
        // lan0 only
        rule(
            "inet",
            "pre",
            1,
            &format!(
                "{IIF_LAN}, {}, {DROP}",
                daddr("ip", &prefix("203.0.113.0", 24))
            ),
        ),
        // a /25 inside rule 1's /24, and a source rule: rule 1 keeps its packets
        rule(
            "inet",
            "pre",
            2,
            &format!("{}, {DROP}", daddr("ip", &prefix("203.0.113.128", 25))),
        ),
        rule(
            "inet",
            "pre",
            3,
            &format!("{}, {DROP}", saddr("ip", "==", &prefix("100.64.0.0", 10))),
        ),
        // every IPv6 source but one prefix
        rule(
            "inet",
            "pre",
            4,
            &format!("{}, {DROP}", saddr("ip6", "!=", &prefix("2001:db8::", 32))),
        ),
    ]);
    let lan = f.xdp_drops(LAN);
    let wan = f.xdp_drops(WAN);
    assert_eq!(lan.slots.len(), 4);
    assert_eq!(wan.slots.len(), 3);
    let p = v4([100, 64, 1, 1], [203, 0, 113, 200]);
    assert_eq!(dropped_by(&f, &lan, &p).as_deref(), Some("1"));
    assert_eq!(
        f.eval(Hook::Prerouting, &p),
        Decision::Drop(lan.slots[0].rule)
    );
    let mut q = p;
    q.iif = WAN;
    assert_eq!(dropped_by(&f, &wan, &q).as_deref(), Some("2"));
    q.dst = u128::from(u32::from_be_bytes([203, 0, 113, 5]));
    assert_eq!(dropped_by(&f, &wan, &q).as_deref(), Some("3"));
    let mut r = v4([0; 4], [0; 4]);
    r.v6 = true;
    r.src = u128::from("2001:db8::5".parse::<std::net::Ipv6Addr>().unwrap());
    assert_eq!(dropped_by(&f, &lan, &r), None);
    r.src = u128::from("2001:db9::5".parse::<std::net::Ipv6Addr>().unwrap());
    assert_eq!(dropped_by(&f, &lan, &r).as_deref(), Some("4"));
    r.src = u128::MAX;
    assert_eq!(dropped_by(&f, &lan, &r).as_deref(), Some("4"));
    r.src = 0;
    assert_eq!(dropped_by(&f, &lan, &r).as_deref(), Some("4"));
}

#[test]
fn ranges_become_the_fewest_prefixes() {
    let mut out = Vec::new();
    cidrs(0, u128::MAX, 128, &mut out);
    assert_eq!(out, vec![(0, 0)]);
    out.clear();
    cidrs(0, u128::from(u32::MAX), 32, &mut out);
    assert_eq!(out, vec![(0, 0)]);
    out.clear();
    // 10.0.0.1 – 10.0.0.6: .1/32 .2/31 .4/31 .6/32
    cidrs(0x0a00_0001, 0x0a00_0006, 32, &mut out);
    let lens: Vec<u8> = out.iter().map(|p| p.1).collect();
    assert_eq!(lens, vec![32, 31, 31, 32]);
    out.clear();
    cidrs(u128::MAX - 1, u128::MAX, 128, &mut out);
    assert_eq!(out, vec![(u128::MAX - 1, 127)]);
    assert_eq!(
        subtract(&[(0, 100), (200, u128::MAX)], &[(10, 20), (90, 210)]),
        vec![(0, 9), (21, 89), (211, u128::MAX)]
    );
    assert_eq!(subtract(&[(5, 5)], &[(0, 4), (6, 9)]), vec![(5, 5)]);
    assert_eq!(
        effective(&ValueSet::single(0), true, 32),
        vec![(1, 0xffff_ffff)]
    );
}

#[test]
fn a_ten_thousand_prefix_blocklist_fits() {
    let set: Vec<String> = (0..10_000u32)
        .map(|i| {
            prefix(
                &std::net::Ipv4Addr::from(0x0a00_0000 + (i << 8)).to_string(),
                24,
            )
        })
        .collect();
    let f = filter(&[
        chain("inet", "pre", "prerouting", 0, "accept"),
        rule(
            "inet",
            "pre",
            1,
            &format!(
                "{}, {DROP}",
                saddr("ip", "==", &format!(r#"{{"set": [{}]}}"#, set.join(",")))
            ),
        ),
    ]);
    let d = f.xdp_drops(LAN);
    assert_eq!(d.slots.len(), 1);
    // adjacent /24s merge: 10.0.0.0 – 10.39.15.255 is 10.0.0.0/11, /13, /15 … /20
    assert!(d.prefixes[0][0].len() < 20, "{}", d.prefixes[0][0].len());
    assert!(d.left_out.is_empty());
}

// The exactness the classifier relies on: whatever `lookup` drops, the kernel's prerouting
// hook (`Filter::eval`) drops by the same rule, and counts that rule and the crossed policies
// and nothing else.

fn arb_match() -> impl Strategy<Value = Match> {
    let addr_set = prop::collection::vec((0u128..16, 0u128..4), 1..3)
        .prop_map(|v| ValueSet::from_ranges(v.into_iter().map(|(lo, n)| (lo, lo + n)).collect()));
    (
        prop::sample::select(vec![
            Key::Saddr4,
            Key::Daddr4,
            Key::Saddr6,
            Key::Daddr6,
            Key::Iif,
            Key::NfProto,
            Key::L4Word1,
            Key::L4Word0,
            Key::L4Byte0,
            Key::L4Proto,
            Key::L4Proto,
            Key::Oif,
        ]),
        any::<bool>(),
        addr_set,
        prop::sample::select(vec![1u128, 2]),
    )
        .prop_map(|(key, negate, set, one)| {
            let set = match key {
                Key::Iif | Key::Oif => ValueSet::single(one),
                Key::NfProto => ValueSet::single(if one == 1 { 4 } else { 6 }),
                // UDP, TCP, and ICMP and ICMPv6, whose ports the classifier does not read
                // (their types it does).
                Key::L4Proto => ValueSet::from_ranges(
                    set.ranges()
                        .iter()
                        .map(|&(lo, _)| [17u128, 6, 1, 58][(lo % 4) as usize])
                        .map(|p| (p, p))
                        .collect(),
                ),
                Key::L4Word0 | Key::L4Word1 | Key::L4Byte0 => ValueSet::from_ranges(
                    set.ranges()
                        .iter()
                        .map(|&(lo, hi)| (lo % 6, hi % 6))
                        .filter(|(lo, hi)| lo <= hi)
                        .collect(),
                ),
                _ => set,
            };
            Match { key, negate, set }
        })
}

fn arb_action(user: u16) -> impl Strategy<Value = Action> {
    prop::sample::select(vec![
        Action::Continue,
        Action::Accept,
        Action::Drop,
        Action::Drop,
        Action::Drop,
        Action::Reject(RejectKind::PortUnreachable),
        Action::Kernel,
        Action::Jump(user),
        Action::Return,
    ])
}

/// A protocol and a port of it, as nft writes `udp dport 3` (the pair the port table takes),
/// a protocol alone (ICMP too), an ICMP or ICMPv6 type (`icmp type 3`), or nothing.
fn arb_port_pair() -> impl Strategy<Value = Vec<Match>> {
    (
        0u8..5,
        prop::sample::select(vec![6u128, 17]),
        any::<bool>(),
        0u128..6,
        0u128..2,
    )
        .prop_map(|(on, proto, src, lo, n)| {
            if on == 0 {
                return Vec::new();
            }
            if on == 3 {
                let p = [1u128, 17, 6][(lo % 3) as usize];
                return vec![Match {
                    key: Key::L4Proto,
                    negate: false,
                    set: ValueSet::single(p),
                }];
            }
            if on == 4 {
                return vec![
                    Match {
                        key: Key::L4Proto,
                        negate: false,
                        set: ValueSet::single(if src { 1 } else { 58 }),
                    },
                    Match {
                        key: Key::L4Byte0,
                        negate: n == 1,
                        set: ValueSet::from_ranges(vec![(lo, lo + n)]),
                    },
                ];
            }
            vec![
                Match {
                    key: Key::L4Proto,
                    negate: false,
                    set: ValueSet::single(proto),
                },
                Match {
                    key: if src { Key::L4Word0 } else { Key::L4Word1 },
                    negate: false,
                    set: ValueSet::from_ranges(vec![(lo, lo + n)]),
                },
            ]
        })
}

fn arb_rules(user: u16) -> impl Strategy<Value = Vec<(Vec<Match>, Action)>> {
    prop::collection::vec(
        (
            prop::collection::vec(arb_match(), 0..3),
            arb_port_pair(),
            arb_action(user),
        )
            .prop_map(|(mut m, pair, a)| {
                m.extend(pair);
                (m, a)
            }),
        0..6,
    )
}

fn arb_filter() -> impl Strategy<Value = Filter> {
    let base = (
        -2i32..3,
        prop::sample::select(vec![Families::V4, Families::V6, Families::Both]),
        any::<bool>(),
        arb_rules(3),
    );
    (
        prop::collection::vec(base, 1..4),
        prop::collection::vec(
            (prop::collection::vec(arb_match(), 0..3), Just(Action::Drop)),
            0..3,
        ),
    )
        .prop_map(|(bases, user_rules)| {
            let mut origins = Vec::new();
            let mut origin = |family: &str, kernel: bool| {
                origins.push(RuleOrigin {
                    family: family.into(),
                    table: "t".into(),
                    chain: "c".into(),
                    handle: 0,
                    text: String::new(),
                    kernel_because: kernel.then(|| "test".into()),
                    conntrack: false,
                });
                (origins.len() - 1) as u32
            };
            let mut chains = Vec::new();
            let n = bases.len();
            for (priority, families, policy_drop, rules) in bases {
                let policy_id = origin("inet", false);
                let rules = rules
                    .into_iter()
                    .map(|(matches, action)| {
                        // Jumps go to the user chain, placed after the base chains.
                        let action = match action {
                            Action::Jump(_) => Action::Jump(n as u16),
                            a => a,
                        };
                        Rule {
                            matches,
                            action,
                            id: origin("inet", action == Action::Kernel),
                        }
                    })
                    .collect();
                chains.push(Chain {
                    rules,
                    base: Some(BaseChain {
                        hook: Hook::Prerouting,
                        priority,
                        families,
                        policy_drop,
                        policy_id,
                        nat: false,
                    }),
                });
            }
            let rules = user_rules
                .into_iter()
                .map(|(matches, action)| Rule {
                    matches,
                    action,
                    id: origin("inet", false),
                })
                .collect();
            chains.push(Chain { rules, base: None });
            Filter::new(chains, origins)
        })
}

fn arb_packet() -> impl Strategy<Value = FilterPacket> {
    (
        (any::<bool>(), 0u128..20, 0u128..20, 1u32..3),
        (
            0u8..6,
            0u8..6,
            prop::sample::select(vec![17u8, 6, 1, 58]),
            0u8..8,
        ),
    )
        .prop_map(
            |((v6, src, dst, iif), (sport, dport, proto, frag))| FilterPacket {
                v6,
                src,
                dst,
                l4proto: proto,
                nexthdr: proto,
                dscp: 0,
                len: 100,
                // One packet in eight a non-first fragment. ICMP's first byte is its type.
                l4: (frag != 0).then_some(if ICMP_PROTOS.contains(&proto) {
                    [sport, dport, 0, 0]
                } else {
                    [0, sport, 0, dport]
                }),
                iif,
                oif: 0,
                ct_state: crate::filter::CT_ESTABLISHED,
            },
        )
}

fn counts(f: &Filter) -> Vec<u64> {
    f.report().iter().map(|r| r.packets).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn what_xdp_drops_the_kernel_drops_by_the_same_rule(
        f in arb_filter(),
        packets in prop::collection::vec(arb_packet(), 1..12),
    ) {
        let drops = [f.xdp_drops(1), f.xdp_drops(2)];
        for p in packets {
            let d = &drops[p.iif as usize - 1];
            let Some(s) = d.lookup(&p) else { continue };
            let before = counts(&f);
            let got = f.eval(Hook::Prerouting, &p);
            prop_assert_eq!(got, Decision::Drop(d.slots[s].rule));
            let after = counts(&f);
            let mut want: Vec<u64> = before.clone();
            want[d.slots[s].rule as usize] += 1;
            for &c in &d.slots[s].crossed {
                want[c as usize] += 1;
            }
            prop_assert_eq!(after, want);
        }
    }
}

#[test]
fn the_property_is_not_vacuous() {
    // The generator above makes filters whose drops the classifier takes: count how often.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut filters, mut with_drops, mut with_ports, mut with_protos) = (0, 0, 0, 0);
    let mut with_types = 0;
    for _ in 0..500 {
        let f = arb_filter().new_tree(&mut runner).unwrap().current();
        filters += 1;
        let d = f.xdp_drops(1);
        if !d.is_empty() {
            with_drops += 1;
        }
        if d.has_ports(false) || d.has_ports(true) {
            with_ports += 1;
        }
        if d.has_protos(false) || d.has_protos(true) {
            with_protos += 1;
        }
        if d.ports.iter().flatten().any(|e| e.port_dir == ICMP_TYPE) {
            with_types += 1;
        }
    }
    assert!(
        with_types * 25 > filters,
        "{with_types} of {filters} with ICMP type drops"
    );
    assert!(
        with_protos * 25 > filters,
        "{with_protos} of {filters} with protocol drops"
    );
    assert!(with_drops * 5 > filters, "{with_drops} of {filters}");
    // Port drops need a protocol and a port match in one rule: rarer, not absent.
    assert!(
        with_ports * 25 > filters,
        "{with_ports} of {filters} with port drops"
    );
}

fn l4proto(op: &str, right: &str) -> String {
    format!(
        r#"{{"match": {{"op": "{op}", "left": {{"meta": {{"key": "l4proto"}}}}, "right": {right}}}}}"#
    )
}

#[test]
fn protocol_drops_without_a_port_are_taken_in_xdp_fragments_and_icmp_included() {
    let f = filter(&[
        chain("inet", "pre", "prerouting", -150, "accept"),
        // ICMP from one network, then any SCTP, then everything but TCP (255 protocols: too
        // many entries, the workers take it).
        rule(
            "inet",
            "pre",
            5,
            &format!(
                "{}, {}, {DROP}",
                l4proto("==", r#""icmp""#),
                saddr("ip", "==", &prefix("198.51.100.0", 24))
            ),
        ),
        rule(
            "inet",
            "pre",
            6,
            &format!(
                "{}, {DROP}",
                l4proto("==", r#"{"set": ["sctp", "ipv6-icmp"]}"#)
            ),
        ),
        rule(
            "inet",
            "pre",
            7,
            &format!("{}, {DROP}", l4proto("!=", r#""tcp""#)),
        ),
    ]);
    let d = f.xdp_drops(LAN);
    assert_eq!(slot_handles(&f, &d), vec![5, 6, 6], "{d:?}");
    assert!(d.has_protos(false) && d.has_protos(true));
    assert!(!d.has_ports(false) && !d.has_ports(true));
    let icmp = |src: [u8; 4]| FilterPacket {
        l4proto: 1,
        nexthdr: 1,
        l4: Some([8, 0, 0, 0]),
        ..v4(src, [10, 0, 0, 1])
    };
    let cases = [
        (icmp([198, 51, 100, 9]), Some("5")),
        (icmp([192, 0, 2, 1]), None),
        // A non-first fragment still says its protocol.
        (
            FilterPacket {
                l4: None,
                ..icmp([198, 51, 100, 9])
            },
            Some("5"),
        ),
        (
            with_ports(v4([192, 0, 2, 1], [10, 0, 0, 1]), 132, 1, 2),
            Some("6"),
        ),
        (with_ports(v4([192, 0, 2, 1], [10, 0, 0, 1]), 6, 1, 2), None),
    ];
    assert_drops(&f, &d, &cases);
    // The rule the workers keep still drops UDP there.
    let udp = v4([192, 0, 2, 1], [10, 0, 0, 1]);
    assert_eq!(d.lookup(&udp), None);
    assert!(matches!(f.eval(Hook::Prerouting, &udp), Decision::Drop(_)));
}

fn icmp_type(proto: &str, op: &str, right: &str) -> String {
    format!(
        r#"{{"match": {{"op": "{op}", "left": {{"payload": {{"protocol": "{proto}", "field": "type"}}}}, "right": {right}}}}}"#
    )
}

#[test]
fn icmp_type_drops_are_taken_in_xdp_and_code_drops_are_not() {
    let f = filter(&[
        chain("inet", "pre", "prerouting", -150, "accept"),
        // Disjoint from the drop below: it does not keep it from XDP.
        rule(
            "inet",
            "pre",
            4,
            &format!("{}, {ACCEPT}", icmp_type("icmp", "==", r#""echo-reply""#)),
        ),
        rule(
            "inet",
            "pre",
            5,
            &format!(
                "{}, {}, {DROP}",
                icmp_type("icmp", "==", r#""echo-request""#),
                daddr("ip", &prefix("10.0.0.0", 8))
            ),
        ),
        rule(
            "inet",
            "pre",
            6,
            &format!(
                "{}, {DROP}",
                icmp_type(
                    "icmpv6",
                    "==",
                    r#"{"set": ["echo-request", "nd-router-advert"]}"#
                )
            ),
        ),
        // The code is not read by the classifier: the workers take it.
        rule(
            "inet",
            "pre",
            7,
            &format!(
                r#"{{"match": {{"op": "==", "left": {{"payload": {{"protocol": "icmp", "field": "code"}}}}, "right": 1}}}}, {DROP}"#
            ),
        ),
    ]);
    let d = f.xdp_drops(LAN);
    // `icmpv6 type` in an inet table: a packet of either family may carry ICMPv6.
    assert_eq!(slot_handles(&f, &d), vec![5, 6, 6], "{d:?}");
    assert!(
        d.has_ports(false) && d.has_ports(true),
        "fragments go to the workers"
    );
    assert!(!d.has_protos(false));
    let icmp = |dst: [u8; 4], ty: u8, code: u8| FilterPacket {
        l4proto: 1,
        nexthdr: 1,
        l4: Some([ty, code, 0, 0]),
        ..v4([192, 0, 2, 1], dst)
    };
    let v6 = |ty: u8| FilterPacket {
        v6: true,
        src: 0x2001_0db8 << 96,
        dst: (0x2001_0db8 << 96) | 1,
        l4proto: 58,
        nexthdr: 58,
        l4: Some([ty, 0, 0, 0]),
        ..v4([0; 4], [0; 4])
    };
    let cases = [
        (icmp([10, 1, 2, 3], 8, 0), Some("5")),
        (icmp([10, 1, 2, 3], 0, 0), None),
        (icmp([192, 0, 2, 9], 8, 0), None),
        // Without its header (a non-first fragment) no type matches, in the kernel either.
        (
            FilterPacket {
                l4: None,
                ..icmp([10, 1, 2, 3], 8, 0)
            },
            None,
        ),
        (v6(128), Some("6")),
        (v6(134), Some("6")),
        (v6(129), None),
        // UDP whose first byte is 8 is no echo request.
        (
            FilterPacket {
                l4: Some([8, 0, 0, 53]),
                ..v4([192, 0, 2, 1], [10, 1, 2, 3])
            },
            None,
        ),
    ];
    assert_drops(&f, &d, &cases);
    // The code rule still drops, in the workers.
    let code = icmp([192, 0, 2, 9], 3, 1);
    assert_eq!(d.lookup(&code), None);
    assert!(matches!(f.eval(Hook::Prerouting, &code), Decision::Drop(_)));
}
