use super::*;
use crate::wire::build::{frame, FrameSpec};
use crate::wire::{l4::proto, Vlan};

const RT: ClassId = 0;
const BE: ClassId = 1;

fn names() -> Vec<String> {
    vec!["rt".into(), "be".into()]
}

fn ifindex_of(n: &str) -> Option<u32> {
    match n {
        "veth0" => Some(3),
        _ => None,
    }
}

fn rule(s: &str) -> Rule {
    s.parse::<RuleSpec>()
        .unwrap()
        .resolve(&names(), ifindex_of)
        .unwrap()
}

fn set(rules: &[&str]) -> RuleSet {
    RuleSet::with_rules(rules.iter().map(|r| rule(r)).collect(), BE)
}

#[test]
fn dscp_rule_matches_v4_and_v6() {
    let s = set(&["class=rt dscp=46"]);
    let ef = frame(&FrameSpec {
        dscp: 46,
        ..FrameSpec::default()
    });
    let ef6 = frame(&FrameSpec {
        dscp: 46,
        src: "2001:db8::1".parse().unwrap(),
        dst: "2001:db8::2".parse().unwrap(),
        ..FrameSpec::default()
    });
    let be = frame(&FrameSpec::default());
    assert_eq!(s.classify(&ef, None, 1), RT);
    assert_eq!(s.classify(&ef6, None, 1), RT);
    assert_eq!(s.classify(&be, None, 1), BE);
    let m = crate::wire::parse_frame(&ef).unwrap();
    assert_eq!(s.classify(&ef, Some(&m), 1), RT);
}

#[test]
fn five_tuple_rule() {
    let s = set(&["class=rt proto=udp dport=5000-5100 dst=10.1.0.0/16 src=10.0.0.0/8"]);
    let mut spec = FrameSpec::default();
    assert_eq!(s.classify(&frame(&spec), None, 1), RT);
    spec.dst_port = 5101;
    assert_eq!(s.classify(&frame(&spec), None, 1), BE);
    spec.dst_port = 5100;
    spec.dst = "10.2.0.1".parse().unwrap();
    assert_eq!(s.classify(&frame(&spec), None, 1), BE);
    spec.dst = "10.1.255.255".parse().unwrap();
    spec.protocol = proto::TCP;
    assert_eq!(s.classify(&frame(&spec), None, 1), BE);
}

#[test]
fn v4_prefix_never_matches_v6_packet() {
    let s = set(&["class=rt dst=0.0.0.0/0"]);
    let v6 = frame(&FrameSpec {
        src: "::1".parse().unwrap(),
        dst: "::2".parse().unwrap(),
        ..FrameSpec::default()
    });
    assert_eq!(s.classify(&v6, None, 1), BE);
    assert_eq!(s.classify(&frame(&FrameSpec::default()), None, 1), RT);
}

#[test]
fn ports_do_not_match_fragments() {
    let s = set(&["class=rt dport=5000"]);
    let mut f = frame(&FrameSpec::default());
    assert_eq!(s.classify(&f, None, 1), RT);
    f[20] |= 0x20; // MF on the first fragment
    assert_eq!(s.classify(&f, None, 1), BE);
}

#[test]
fn vlan_rules_match_only_single_tagged_frames() {
    let s = set(&["class=rt vlan=100 pcp=5"]);
    let tagged = frame(&FrameSpec {
        vlan: Some(Vlan { id: 100, pcp: 5 }),
        ..FrameSpec::default()
    });
    assert_eq!(s.classify(&tagged, None, 1), RT);
    let other_pcp = frame(&FrameSpec {
        vlan: Some(Vlan { id: 100, pcp: 4 }),
        ..FrameSpec::default()
    });
    assert_eq!(s.classify(&other_pcp, None, 1), BE);
    assert_eq!(s.classify(&frame(&FrameSpec::default()), None, 1), BE);
    // Tagged ARP: no L3 needed, the VLAN rule still applies.
    let mut arp = tagged[..18].to_vec();
    arp[16..18].copy_from_slice(&[0x08, 0x06]);
    arp.resize(60, 0);
    assert_eq!(s.classify(&arp, None, 1), RT);
}

#[test]
fn l3_rules_do_not_match_non_ip_or_malformed() {
    let s = set(&["class=rt ipver=4"]);
    let mut f = frame(&FrameSpec::default());
    f[14] = 0x44; // bad IHL
    assert_eq!(s.classify(&f, None, 1), BE);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(s.classify(&f, None, 1), BE);
    assert_eq!(s.classify(&[0u8; 3], None, 1), BE);
}

#[test]
fn ifindex_flex_and_first_match_wins() {
    let s = set(&[
        "class=be ifname=veth0 dscp=46",
        "class=rt flex=14:0xb8/0xfc",
    ]);
    let ef = frame(&FrameSpec {
        dscp: 46,
        ..FrameSpec::default()
    });
    // The word at 14 is version/IHL and TOS of an untagged frame; the mask keeps the DSCP bits
    // of the TOS (0xb8 = EF).
    assert_eq!(s.classify(&ef, None, 3), BE);
    assert_eq!(s.classify(&ef, None, 4), RT);
    assert_eq!(s.classify(&frame(&FrameSpec::default()), None, 4), BE);
    // Too short for the flex word: no match.
    assert_eq!(s.classify(&ef[..15], None, 4), BE);
    // Offset 15 reads TOS as the *high* byte: 0xb8 must then be shifted into place.
    let hi = set(&["class=rt flex=15:0xb800/0xfc00"]);
    assert_eq!(hi.classify(&ef, None, 4), RT);
}

#[test]
fn text_round_trip() {
    for s in [
        "class=rt dscp=46",
        "class=rt proto=udp dst=10.1.0.0/16 dport=5000-5100",
        "class=be ifname=veth0 vlan=100 pcp=5 ipver=6 proto=17 dscp=0 src=2001:db8::/32 sport=53 flex=15:0xb8/0xfc",
    ] {
        let spec: RuleSpec = s.parse().unwrap();
        let again: RuleSpec = spec.to_string().parse().unwrap();
        assert_eq!(spec, again, "{s}");
    }
    assert_eq!(
        "dport=53 class=rt".parse::<RuleSpec>().unwrap().to_string(),
        "class=rt dport=53"
    );
    // Found by fuzzing (fuzz/, target `rules`): negative flex numbers parse (resolve rejects
    // them later) and printed as 64-bit two's complement hex, which did not parse back.
    for s in [
        "class=rt flex=0:-1",
        "class=rt flex=1:0x10/-5",
        "class=rt flex=-3:0x1/0x1",
    ] {
        let spec: RuleSpec = s.parse().unwrap();
        let shown = spec.to_string();
        let again: RuleSpec = shown
            .parse()
            .unwrap_or_else(|e| panic!("{s} -> {shown}: {e}"));
        assert_eq!(spec, again, "{s} -> {shown}");
    }
    assert_eq!(
        "class=rt flex=2:-1/0xff"
            .parse::<RuleSpec>()
            .unwrap()
            .to_string(),
        "class=rt flex=2:-1/0xff"
    );
}

#[test]
fn resolve_errors_name_the_field() {
    let err = |s: &str| {
        s.parse::<RuleSpec>()
            .and_then(|r| r.resolve(&names(), ifindex_of))
            .unwrap_err()
            .to_string()
    };
    assert_eq!(err("class=rt dport=70000"), "dst_port: 70000 is not a port");
    assert_eq!(err("class=rt dport=9-3"), "dst_port: empty range 9-3");
    assert!(err("class=xx").starts_with("class: unknown class `xx`"));
    assert!(err("dscp=1").starts_with("class: missing"));
    assert_eq!(err("class=rt dscp=64"), "dscp: 64 is not a DSCP (0-63)");
    assert_eq!(
        err("class=rt vlan=4096"),
        "vlan: 4096 is not a VLAN id (0-4095)"
    );
    assert_eq!(err("class=rt pcp=x"), "pcp: `x` is not a number");
    assert_eq!(err("class=rt ifname=eth9"), "ifname: no interface `eth9`");
    assert_eq!(err("class=rt proto=foo"), "proto: unknown protocol `foo`");
    assert_eq!(
        err("class=rt proto=icmp dport=1"),
        "dst_port: protocol 1 has no ports"
    );
    assert!(err("class=rt src=10.0.0.1/8").contains("host bits set"));
    assert!(err("class=rt src=10.0.0.0/33").contains("prefix length 33 > 32"));
    assert!(err("class=rt src=10.0.0.0/8 dst=::/0").starts_with("dst: "));
    assert!(err("class=rt ipver=6 src=10.0.0.0/8").starts_with("ip_version: "));
    assert!(err("class=rt flex=63:1").starts_with("flex: offset 63"));
    assert!(err("class=rt flex=1:0x1ff/0xff").starts_with("flex: value"));
    assert_eq!(err("class=rt dscp=1 dscp=2"), "dscp: given twice");
    assert_eq!(err("class=rt bogus=1"), "rule: unknown key `bogus`");
}

#[test]
fn toml_rules_deserialize() {
    #[derive(serde::Deserialize)]
    struct Cfg {
        rules: Vec<RuleSpec>,
    }
    let cfg: Cfg = toml::from_str(
        r#"
        [[rules]]
        class = "rt"
        dscp = 46
        [[rules]]
        class = "rt"
        proto = "udp"
        dst_port = "5000-5100"
        src = "10.0.0.0/8"
        vlan = 100
        pcp = 5
        ifname = "veth0"
        flex = { offset = 15, value = 0xb8, mask = 0xfc }
        [[rules]]
        class = "be"
        sport = 53
        proto = 17
        "#,
    )
    .unwrap();
    let rules: Vec<Rule> = cfg
        .rules
        .iter()
        .map(|r| r.resolve(&names(), ifindex_of).unwrap())
        .collect();
    assert_eq!(rules[0], rule("class=rt dscp=46"));
    assert_eq!(
        rules[1],
        rule("class=rt proto=udp dport=5000-5100 src=10.0.0.0/8 vlan=100 pcp=5 if=veth0 flex=15:0xb8/0xfc")
    );
    assert_eq!(rules[2].sport, Some(PortRange::single(53)));
    assert!(toml::from_str::<Cfg>("[[rules]]\nclass = \"rt\"\ndcsp = 4\n").is_err());
    // Rule itself round-trips through serde.
    let back: Rule = toml::from_str(&toml::to_string(&rules[1]).unwrap()).unwrap();
    assert_eq!(back, rules[1]);
}

#[test]
fn bpf_layout() {
    let r = rule(
        "class=be ifindex=7 vlan=0x123 pcp=5 proto=udp dscp=46 src=10.0.0.0/8 dst=10.1.2.0/24 sport=1-2 dport=5000-5100 flex=15:0xb8/0xfc",
    );
    let b = r.to_bpf_bytes();
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    assert_eq!(u32::from_le_bytes([b[0], b[1], b[2], b[3]]), 0x7ff);
    assert_eq!(u32::from_le_bytes([b[4], b[5], b[6], b[7]]), 7);
    assert_eq!(u16_at(8), 0x123);
    assert_eq!(
        (b[10], b[11], b[12], b[13], b[14], b[15]),
        (5, 17, 46, 4, 1, 15)
    );
    assert_eq!((u16_at(16), u16_at(18)), (0xb8, 0xfc));
    assert_eq!(
        (u16_at(20), u16_at(22), u16_at(24), u16_at(26)),
        (1, 2, 5000, 5100)
    );
    assert_eq!(&b[28..32], &[10, 0, 0, 0]);
    assert_eq!(&b[44..48], &[10, 1, 2, 0]);
    assert!(b[32..44].iter().chain(&b[48..60]).all(|&x| x == 0));
    assert_eq!((b[60], b[61], b[62], b[63]), (8, 24, 0, 0));

    let v6 = rule("class=rt dst=2001:db8::/32").to_bpf_bytes();
    assert_eq!(
        u32::from_le_bytes([v6[0], v6[1], v6[2], v6[3]]),
        bpf_field::DST | bpf_field::IPVER
    );
    assert_eq!(v6[13], 6);
    assert_eq!(&v6[44..48], &[0x20, 0x01, 0x0d, 0xb8]);
    assert_eq!(v6[61], 32);

    let mut many = RuleSet::new(BE);
    for _ in 0..=BPF_MAX_RULES {
        many.push(Rule::to_class(RT));
    }
    assert_eq!(many.to_bpf_map().unwrap_err().field, "rules");
}

#[test]
fn conflicting_rule_never_matches_and_encodes_version_zero() {
    let mut r = rule("class=rt src=10.0.0.0/8");
    r.ip_version = Some(IpVersion::V6);
    let s = RuleSet::with_rules(vec![r], BE);
    assert_eq!(s.classify(&frame(&FrameSpec::default()), None, 1), BE);
    let b = r.to_bpf_bytes();
    assert_ne!(
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) & bpf_field::IPVER,
        0
    );
    assert_eq!(b[13], 0);
}

#[test]
fn containing_prefixes_cut_host_bits() {
    let p = |a: &str, l| IpPrefix::containing(a.parse().unwrap(), l).to_string();
    assert_eq!(p("10.1.2.3", 16), "10.1.0.0/16");
    assert_eq!(p("10.1.2.3", 0), "0.0.0.0/0");
    assert_eq!(p("10.1.2.3", 32), "10.1.2.3/32");
    assert_eq!(p("2001:db8::1", 32), "2001:db8::/32");
}
