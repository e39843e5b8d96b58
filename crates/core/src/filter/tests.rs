use super::nft::compile;
use super::*;

const LAN: u32 = 2;
const WAN: u32 = 3;

fn ifaces() -> Vec<(String, u32)> {
    vec![("lan0".into(), LAN), ("wan".into(), WAN)]
}

/// `nft -j list ruleset` of a ruleset, as nft 1.0.6 printed it, from its items.
fn ruleset(items: &[&str]) -> String {
    let mut all = vec![
        r#"{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}"#
            .to_string(),
    ];
    all.extend(items.iter().map(|s| s.to_string()));
    format!("{{\"nftables\": [{}]}}", all.join(","))
}

fn chain(family: &str, table: &str, name: &str, hook: &str, prio: i32, policy: &str) -> String {
    format!(
        r#"{{"chain": {{"family": "{family}", "table": "{table}", "name": "{name}", "handle": 1, "type": "filter", "hook": "{hook}", "prio": {prio}, "policy": "{policy}"}}}}"#
    )
}

fn rule(family: &str, table: &str, chain: &str, handle: u64, expr: &str) -> String {
    format!(
        r#"{{"rule": {{"family": "{family}", "table": "{table}", "chain": "{chain}", "handle": {handle}, "expr": [{expr}]}}}}"#
    )
}

fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16) -> FilterPacket {
    let mut l4 = [0u8; 4];
    l4[..2].copy_from_slice(&sport.to_be_bytes());
    l4[2..].copy_from_slice(&dport.to_be_bytes());
    FilterPacket {
        v6: false,
        src: u128::from(u32::from_be_bytes(src)),
        dst: u128::from(u32::from_be_bytes(dst)),
        l4proto: proto,
        nexthdr: proto,
        dscp: 0,
        len: 100,
        l4: Some(l4),
        iif: LAN,
        oif: WAN,
        ct_state: crate::filter::CT_ESTABLISHED,
    }
}

fn v6(src: &str, dst: &str, proto: u8, dport: u16) -> FilterPacket {
    let a = |s: &str| u128::from(s.parse::<std::net::Ipv6Addr>().unwrap());
    let mut p = v4([0; 4], [0; 4], proto, 1000, dport);
    p.v6 = true;
    p.src = a(src);
    p.dst = a(dst);
    p
}

const DROP_7777: &str = r#"{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "10.0.0.1"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 7777}}, {"drop": null}"#;

fn forward(f: &Filter, p: &FilterPacket) -> Decision {
    f.eval(Hook::Forward, p)
}

#[test]
fn stateless_drop_by_address_protocol_and_port() {
    let js = ruleset(&[
        &chain("inet", "filt", "fw", "forward", 0, "accept"),
        &rule("inet", "filt", "fw", 4, DROP_7777),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    assert_eq!(
        forward(&f, &v4([10, 1, 0, 1], [10, 0, 0, 1], 17, 5, 7777)),
        Decision::Drop(1)
    );
    // Another port, another host, TCP to the same port, IPv6: not this rule's.
    for p in [
        v4([10, 1, 0, 1], [10, 0, 0, 1], 17, 5, 7778),
        v4([10, 1, 0, 1], [10, 0, 0, 2], 17, 5, 7777),
        v4([10, 1, 0, 1], [10, 0, 0, 1], 6, 5, 7777),
        v6("2001:db8::1", "2001:db8::2", 17, 7777),
    ] {
        assert_eq!(forward(&f, &p), Decision::Accept, "{p:?}");
    }
    // The other hooks have no chain.
    let p = v4([10, 1, 0, 1], [10, 0, 0, 1], 17, 5, 7777);
    assert_eq!(f.eval(Hook::Prerouting, &p), Decision::Accept);
    let r = f.report();
    assert_eq!((r[1].origin.handle, r[1].packets, r[1].bytes), (4, 1, 100));
    assert_eq!(r[1].origin.text, "ip daddr 10.0.0.1 udp dport 7777 drop");
}

#[test]
fn a_port_of_a_non_first_fragment_matches_neither_equal_nor_unequal() {
    let ne = r#"{"match": {"op": "!=", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 53}}, {"drop": null}"#;
    let js = ruleset(&[
        &chain("ip", "t", "fw", "forward", 0, "accept"),
        &rule("ip", "t", "fw", 2, ne),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    let mut p = v4([1, 1, 1, 1], [2, 2, 2, 2], 17, 5, 80);
    assert_eq!(forward(&f, &p), Decision::Drop(1));
    p.l4 = None;
    assert_eq!(forward(&f, &p), Decision::Accept);
}

#[test]
fn a_named_interval_set_of_ten_thousand_prefixes() {
    // 10 000 /24s spread over 10.0.0.0/8 and 100.64.0.0/10, plus ranges and single hosts.
    let mut elems = Vec::new();
    let mut nets = Vec::new();
    for i in 0u32..10_000 {
        let net = if i % 2 == 0 {
            0x0a00_0000 | ((i * 1543) % 65536) << 8
        } else {
            0x6440_0000 | ((i * 769) % 16384) << 8
        };
        nets.push(net);
        let a = std::net::Ipv4Addr::from(net);
        elems.push(format!(r#"{{"prefix": {{"addr": "{a}", "len": 24}}}}"#));
    }
    elems.push(r#"{"range": ["192.0.2.10", "192.0.2.20"]}"#.into());
    elems.push(r#""198.51.100.7""#.into());
    let set = format!(
        r#"{{"set": {{"family": "inet", "name": "block", "table": "f", "type": "ipv4_addr", "handle": 3, "flags": ["interval"], "elem": [{}]}}}}"#,
        elems.join(",")
    );
    let js = ruleset(&[
        &set,
        &chain("inet", "f", "fw", "forward", 0, "accept"),
        &rule(
            "inet",
            "f",
            "fw",
            5,
            r#"{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "@block"}}, {"counter": {"packets": 0, "bytes": 0}}, {"drop": null}"#,
        ),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    let blocked = |a: u32| {
        nets.contains(&(a & 0xffff_ff00))
            || (0xc000_020a..=0xc000_0214).contains(&a)
            || a == 0xc633_6407
    };
    // Every address of a few sets, their neighbours, and a sweep with a odd step.
    let mut probes: Vec<u32> = vec![
        0xc000_0209,
        0xc000_020a,
        0xc000_0214,
        0xc000_0215,
        0xc633_6407,
    ];
    for &n in nets.iter().take(50) {
        probes.extend([n.wrapping_sub(1), n, n + 255, n + 256]);
    }
    probes.extend(
        (0..20_000u32).map(|i| 0x0a00_0000u32.wrapping_add(i.wrapping_mul(2_654_435_761) >> 4)),
    );
    for a in probes {
        let p = v4([1, 1, 1, 1], a.to_be_bytes(), 17, 1, 2);
        let want = if blocked(a) {
            Decision::Drop(1)
        } else {
            Decision::Accept
        };
        assert_eq!(forward(&f, &p), want, "{}", std::net::Ipv4Addr::from(a));
    }
}

#[test]
fn policy_drop_with_interfaces_and_protocols() {
    // A router firewall without connection tracking: the LAN out, ICMP both ways, policy drop.
    let js = ruleset(&[
        &chain("inet", "f", "fw", "forward", 0, "drop"),
        &rule(
            "inet",
            "f",
            "fw",
            2,
            r#"{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "lan*"}}, {"match": {"op": "!=", "left": {"meta": {"key": "oifname"}}, "right": "lan0"}}, {"accept": null}"#,
        ),
        &rule(
            "inet",
            "f",
            "fw",
            3,
            r#"{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": {"set": ["icmp", "ipv6-icmp"]}}}, {"accept": null}"#,
        ),
        &rule(
            "inet",
            "f",
            "fw",
            4,
            r#"{"match": {"op": "==", "left": {"payload": {"protocol": "icmpv6", "field": "type"}}, "right": "echo-request"}}, {"accept": null}"#,
        ),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    let out = v4([192, 168, 1, 2], [8, 8, 8, 8], 6, 40000, 443);
    assert_eq!(forward(&f, &out), Decision::Accept);
    let mut back = v4([8, 8, 8, 8], [192, 168, 1, 2], 6, 443, 40000);
    (back.iif, back.oif) = (WAN, LAN);
    assert_eq!(forward(&f, &back), Decision::Drop(0));
    back.l4proto = 1;
    assert_eq!(forward(&f, &back), Decision::Accept);
    let mut hairpin = out;
    hairpin.oif = LAN;
    assert_eq!(forward(&f, &hairpin), Decision::Drop(0));
    let mut ping6 = v6("2001:db8::1", "2001:db8::2", 58, 0);
    (ping6.iif, ping6.oif) = (WAN, LAN);
    ping6.l4 = Some([128, 0, 0, 0]);
    assert_eq!(forward(&f, &ping6), Decision::Accept);
    let counts: Vec<u64> = f.report().iter().map(|r| r.packets).collect();
    assert_eq!(counts, [2, 1, 2, 0]);
}

#[test]
fn base_chains_run_in_priority_order_and_accept_ends_only_its_own() {
    let js = ruleset(&[
        &chain("ip", "late", "fw", "forward", 10, "accept"),
        &rule("ip", "late", "fw", 2, DROP_7777),
        &chain("inet", "early", "fw", "forward", -10, "accept"),
        &rule(
            "inet",
            "early",
            "fw",
            2,
            r#"{"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 7777}}, {"accept": null}"#,
        ),
        &rule(
            "inet",
            "early",
            "fw",
            3,
            r#"{"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 9}}, {"reject": {"type": "icmpx", "expr": "admin-prohibited"}}"#,
        ),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    let p = v4([1, 1, 1, 1], [10, 0, 0, 1], 17, 5, 7777);
    assert!(matches!(forward(&f, &p), Decision::Drop(_)));
    let p = v4([1, 1, 1, 1], [10, 0, 0, 1], 17, 5, 9);
    assert!(matches!(
        forward(&f, &p),
        Decision::Reject(RejectKind::AdminProhibited, _)
    ));
}

#[test]
fn jump_return_and_goto() {
    let sub = r#"{"chain": {"family": "inet", "table": "f", "name": "sub", "handle": 2}}"#;
    let js = ruleset(&[
        &chain("inet", "f", "fw", "forward", 0, "accept"),
        sub,
        &rule(
            "inet",
            "f",
            "fw",
            3,
            r#"{"match": {"op": "==", "left": {"payload": {"protocol": "ip6", "field": "saddr"}}, "right": {"prefix": {"addr": "2001:db8::", "len": 32}}}}, {"jump": {"target": "sub"}}"#,
        ),
        &rule(
            "inet",
            "f",
            "fw",
            4,
            r#"{"match": {"op": "==", "left": {"payload": {"protocol": "th", "field": "dport"}}, "right": 53}}, {"drop": null}"#,
        ),
        &rule(
            "inet",
            "f",
            "sub",
            5,
            r#"{"match": {"op": "==", "left": {"payload": {"protocol": "ip6", "field": "nexthdr"}}, "right": "udp"}}, {"return": null}"#,
        ),
        &rule("inet", "f", "sub", 6, r#"{"drop": null}"#),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    // Returned from sub, then dropped by the rule after the jump.
    let p = v6("2001:db8::1", "2001:db9::1", 17, 53);
    assert!(matches!(forward(&f, &p), Decision::Drop(id) if f.origins[id as usize].handle == 4));
    let p = v6("2001:db8::1", "2001:db9::1", 17, 80);
    assert_eq!(forward(&f, &p), Decision::Accept);
    let p = v6("2001:db8::1", "2001:db9::1", 6, 80);
    assert!(matches!(forward(&f, &p), Decision::Drop(id) if f.origins[id as usize].handle == 6));
    let p = v6("2001:dc8::1", "2001:db9::1", 6, 80);
    assert_eq!(forward(&f, &p), Decision::Accept);
}

#[test]
fn what_llrouter_cannot_evaluate_goes_to_the_kernel_at_its_place() {
    let js = ruleset(&[
        &chain("inet", "f", "fw", "forward", 0, "drop"),
        &rule("inet", "f", "fw", 2, DROP_7777),
        &rule(
            "inet",
            "f",
            "fw",
            3,
            r#"{"match": {"op": "==", "left": {"payload": {"protocol": "tcp", "field": "dport"}}, "right": 22}}, {"match": {"op": "==", "left": {"ct": {"key": "mark"}}, "right": 1}}, {"accept": null}"#,
        ),
        &rule(
            "inet",
            "f",
            "fw",
            4,
            r#"{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}}, {"log": null}, {"drop": null}"#,
        ),
    ]);
    let c = compile(&js, &ifaces()).unwrap();
    let f = &c.filter;
    let why: Vec<(u64, String)> = c
        .kernel_rules()
        .iter()
        .map(|o| (o.handle, o.kernel_because.clone().unwrap()))
        .collect();
    assert_eq!(why.len(), 2, "{why:?}");
    assert!(why[0].1.contains("ct mark"), "{why:?}");
    assert!(why[1].1.contains("`log`"), "{why:?}");
    assert_eq!(f.family_modes(), [FamilyMode::Kernel; 2]);
    // Dropped before the unknown rule: llrouter drops it, as the kernel would.
    assert!(matches!(
        forward(f, &v4([1, 1, 1, 1], [10, 0, 0, 1], 17, 1, 7777)),
        Decision::Drop(_)
    ));
    // Reaches the ct rule: the kernel decides.
    let ssh = v4([1, 1, 1, 1], [10, 0, 0, 2], 6, 1, 22);
    assert!(matches!(forward(f, &ssh), Decision::Kernel(id) if f.origins[id as usize].handle == 3));
    // Fails the ct rule's first (evaluable) match, then meets the log.
    let web = v4([1, 1, 1, 1], [10, 0, 0, 2], 6, 1, 80);
    assert!(matches!(forward(f, &web), Decision::Kernel(id) if f.origins[id as usize].handle == 4));
    // UDP passes neither, and the policy drops it.
    let udp = v4([1, 1, 1, 1], [10, 0, 0, 2], 17, 1, 80);
    assert!(matches!(forward(f, &udp), Decision::Drop(0)));
}

/// A typical router's firewall, with NAT for the uplink, as `nft -j` prints it.
fn typical_router() -> String {
    ruleset(&[
        &chain("inet", "fw", "fwd", "forward", 0, "drop"),
        &rule(
            "inet",
            "fw",
            "fwd",
            2,
            r#"{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}}, {"accept": null}"#,
        ),
        &rule(
            "inet",
            "fw",
            "fwd",
            3,
            r#"{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "invalid"}}, {"drop": null}"#,
        ),
        &rule(
            "inet",
            "fw",
            "fwd",
            4,
            r#"{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "lan0"}}, {"accept": null}"#,
        ),
        &rule(
            "inet",
            "fw",
            "fwd",
            5,
            r#"{"match": {"op": "!=", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 9}}, {"drop": null}"#,
        ),
        r#"{"chain": {"family": "ip", "table": "nat", "name": "post", "handle": 1, "type": "nat", "hook": "postrouting", "prio": 100, "policy": "accept"}}"#,
        &rule(
            "ip",
            "nat",
            "post",
            2,
            r#"{"match": {"op": "==", "left": {"meta": {"key": "oifname"}}, "right": "wan"}}, {"masquerade": null}"#,
        ),
    ])
}

#[test]
fn connection_state_and_nat_chains_make_the_family_conntracks() {
    let c = compile(&typical_router(), &ifaces()).unwrap();
    let f = &c.filter;
    assert!(c.kernel_rules().is_empty(), "{:?}", c.kernel_rules());
    assert_eq!(f.family_modes(), [FamilyMode::Conntrack; 2]);
    assert_eq!(f.kernel_families(), (false, false));
    let conntrack: Vec<u64> = (f.origins.iter())
        .filter(|o| o.conntrack)
        .map(|o| o.handle)
        .collect();
    // The NAT chain's policy (handle 0; chains are read before rules), the three `ct state`
    // rules and the NAT chain's rule.
    assert_eq!(conntrack, [0, 2, 3, 5, 2]);
    // A packet of an established connection from the WAN side is accepted by the first rule;
    // an invalid one would be dropped, a new one from the WAN side too (the policy): the
    // kernel judges those, llrouter never sees them.
    let mut p = v4([1, 1, 1, 1], [10, 0, 0, 2], 17, 1, 9);
    p.iif = WAN;
    p.oif = LAN;
    assert_eq!(forward(f, &p), Decision::Accept);
    p.ct_state = CT_INVALID;
    assert!(matches!(forward(f, &p), Decision::Drop(id) if f.origins[id as usize].handle == 3));
    p.ct_state = CT_NEW;
    assert!(matches!(forward(f, &p), Decision::Drop(id) if f.origins[id as usize].handle == 0));
    p.ct_state = CT_UNTRACKED;
    assert!(matches!(forward(f, &p), Decision::Drop(id) if f.origins[id as usize].handle == 5));
    // The NAT chain does not run for established connections (nor is anything counted).
    p.ct_state = CT_ESTABLISHED;
    assert_eq!(f.eval(Hook::Postrouting, &p), Decision::Accept);
    assert!(f
        .report()
        .iter()
        .all(|r| r.origin.table != "nat" || r.packets == 0));
}

#[test]
fn a_family_is_the_kernels_when_it_also_has_a_rule_llrouter_cannot_evaluate() {
    let js = ruleset(&[
        &chain("ip", "f", "fwd", "forward", 0, "accept"),
        &rule(
            "ip",
            "f",
            "fwd",
            2,
            r#"{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "invalid"}}, {"drop": null}"#,
        ),
        &chain("ip6", "g", "fwd", "forward", 0, "accept"),
        &rule(
            "ip6",
            "g",
            "fwd",
            2,
            r#"{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "invalid"}}, {"drop": null}"#,
        ),
        &rule(
            "ip6",
            "g",
            "fwd",
            3,
            r#"{"match": {"op": "==", "left": {"ct": {"key": "direction"}}, "right": "original"}}, {"accept": null}"#,
        ),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    assert_eq!(
        f.family_modes(),
        [FamilyMode::Conntrack, FamilyMode::Kernel]
    );
    // Only IPv4 tables: IPv6 stays llrouter's.
    let js = ruleset(&[
        &chain("ip", "f", "fwd", "forward", 0, "accept"),
        &rule(
            "ip",
            "f",
            "fwd",
            2,
            r#"{"match": {"op": "==", "left": {"ct": {"key": "state"}}, "right": {"set": ["new", "untracked"]}}}, {"drop": null}"#,
        ),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    assert_eq!(
        f.family_modes(),
        [FamilyMode::Conntrack, FamilyMode::Llrouter]
    );
    let mut p = v4([1, 1, 1, 1], [10, 0, 0, 2], 17, 1, 9);
    assert_eq!(forward(&f, &p), Decision::Accept);
    p.ct_state = CT_UNTRACKED;
    assert!(matches!(forward(&f, &p), Decision::Drop(_)));
}

#[test]
fn iptables_nft_rules_compile_and_their_extensions_go_to_the_kernel() {
    let js = ruleset(&[
        r#"{"table": {"family": "ip", "name": "filter", "handle": 3}}"#,
        &chain("ip", "filter", "FORWARD", "forward", 0, "accept"),
        &rule(
            "ip",
            "filter",
            "FORWARD",
            2,
            r#"{"match": {"op": "==", "left": {"meta": {"key": "iifname"}}, "right": "wan"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "10.0.0.1"}}, {"match": {"op": "==", "left": {"payload": {"protocol": "udp", "field": "dport"}}, "right": 7777}}, {"counter": {"packets": 0, "bytes": 0}}, {"drop": null}"#,
        ),
        &rule(
            "ip",
            "filter",
            "FORWARD",
            3,
            r#"{"xt": {"type": "match", "name": "conntrack"}}, {"counter": {"packets": 0, "bytes": 0}}, {"accept": null}"#,
        ),
    ]);
    let c = compile(&js, &ifaces()).unwrap();
    let mut p = v4([1, 1, 1, 1], [10, 0, 0, 1], 17, 1, 7777);
    p.iif = WAN;
    assert!(matches!(forward(&c.filter, &p), Decision::Drop(_)));
    p.iif = LAN;
    assert!(matches!(forward(&c.filter, &p), Decision::Kernel(_)));
    let k = c.kernel_rules();
    assert_eq!(k.len(), 1);
    assert_eq!(
        k[0].to_string(),
        "table ip filter, chain FORWARD, rule handle 3: xt match conntrack counter accept"
    );
    assert!(k[0]
        .kernel_because
        .as_deref()
        .unwrap()
        .contains("xt match conntrack"));
}

#[test]
fn input_and_output_chains_and_dormant_tables_are_not_the_forwarding_path() {
    let js = ruleset(&[
        &chain("inet", "f", "in", "input", 0, "drop"),
        &chain("inet", "f", "out", "output", 0, "drop"),
        r#"{"table": {"family": "inet", "name": "z", "handle": 9, "flags": ["dormant"]}}"#,
        &chain("inet", "z", "fw", "forward", 0, "drop"),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    assert!(f.is_empty());
}

#[test]
fn counters_survive_a_reload_of_the_same_rules() {
    let js = ruleset(&[
        &chain("inet", "filt", "fw", "forward", 0, "accept"),
        &rule("inet", "filt", "fw", 4, DROP_7777),
    ]);
    let old = compile(&js, &ifaces()).unwrap().filter;
    let p = v4([10, 1, 0, 1], [10, 0, 0, 1], 17, 5, 7777);
    for _ in 0..3 {
        old.eval(Hook::Forward, &p);
    }
    let new = compile(&js, &ifaces()).unwrap().filter;
    new.carry_counters(&old);
    new.eval(Hook::Forward, &p);
    assert_eq!(new.report()[1].packets, 4);
}

#[test]
fn value_sets_merge_and_search() {
    let s = ValueSet::from_ranges(vec![(10, 20), (21, 30), (5, 7), (40, 40), (3, 2)]);
    assert_eq!(s.len(), 3);
    for (v, want) in [
        (4, false),
        (5, true),
        (8, false),
        (10, true),
        (30, true),
        (31, false),
        (40, true),
        (41, false),
    ] {
        assert_eq!(s.contains(v), want, "{v}");
    }
    assert!(!ValueSet::default().contains(0));
}

#[test]
fn bad_json_is_an_error_not_an_empty_filter() {
    assert!(compile("{", &ifaces()).is_err());
    assert!(compile("{\"x\": 1}", &ifaces()).is_err());
}

#[test]
fn counts_from_many_threads_add_up() {
    let js = ruleset(&[
        &chain("inet", "filt", "fw", "forward", 0, "accept"),
        &rule("inet", "filt", "fw", 4, DROP_7777),
    ]);
    let f = compile(&js, &ifaces()).unwrap().filter;
    let hit = v4([10, 1, 0, 1], [10, 0, 0, 1], 17, 5, 7777);
    let miss = v4([10, 1, 0, 1], [10, 0, 0, 1], 17, 5, 7778);
    // More threads than shards, so the shared shard's atomic adds are counted too.
    std::thread::scope(|s| {
        for _ in 0..20 {
            s.spawn(|| {
                for _ in 0..1000 {
                    f.eval(Hook::Forward, &hit);
                    f.eval(Hook::Forward, &miss);
                }
            });
        }
    });
    let r = f.report();
    assert_eq!((r[0].packets, r[1].packets), (20_000, 20_000));
    assert_eq!(r[1].bytes, 20_000 * 100);
}
