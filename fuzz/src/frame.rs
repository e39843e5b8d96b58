//! `frame`: the frame parser and the Rust classifier on arbitrary bytes.
//!
//! Input: one byte for the ingress ifindex (low 2 bits), then the frame. Properties: the parser
//! never panics and what it reports lies inside the frame; the L2 view agrees with the full
//! parse; a frame's class is the same whether `classify` parses it itself or is handed the
//! parse, and is the class of the first rule that matches.

use std::sync::OnceLock;

use llr_core::classify::{RuleSet, RuleSpec};
use llr_core::wire::{checksum, parse_frame, parse_frame_max, parse_l2, ParseError};

/// A rule set naming every field (three classes; `be` is the default).
pub fn rules() -> &'static RuleSet {
    static R: OnceLock<RuleSet> = OnceLock::new();
    R.get_or_init(|| {
        let names: Vec<String> = ["rt", "mid", "be"].map(String::from).to_vec();
        let rules = RULES
            .iter()
            .map(|r| {
                r.parse::<RuleSpec>()
                    .and_then(|s| s.resolve(&names, |_| None))
                    .unwrap_or_else(|e| panic!("{r}: {e}"))
            })
            .collect();
        RuleSet::with_rules(rules, 2)
    })
}

/// The rules of [`rules`], in the one-line syntax.
pub const RULES: [&str; 8] = [
    "class=rt dscp=46",
    "class=mid proto=udp dport=5000-5100 dst=10.0.0.0/8",
    "class=rt vlan=100 pcp=5",
    "class=mid src=2001:db8::/32 sport=1-1024",
    "class=rt flex=14:0xb8/0xfc",
    "class=mid ifindex=3 ipver=6",
    "class=rt proto=sctp sport=9",
    "class=mid proto=tcp src=192.168.0.0/16 dst=10.1.0.0/16 dport=80",
];

pub fn run(data: &[u8]) {
    let Some((&b, f)) = data.split_first() else {
        return;
    };
    let ingress = u32::from(b & 3);
    let parsed = parse_frame(f);
    match &parsed {
        Ok(m) => {
            let l3 = usize::from(m.l3_offset);
            let l4 = usize::from(m.l4_offset);
            assert!(l3 == 14 || l3 == 18, "l3 offset {l3}");
            assert!(
                l3 < l4 && l4 <= f.len(),
                "l4 offset {l4}, l3 {l3}, len {}",
                f.len()
            );
            assert!(
                l3 + usize::from(m.total_len) <= f.len(),
                "total length past the frame"
            );
            assert!(
                l4 <= l3 + usize::from(m.total_len),
                "l4 offset past the IP length"
            );
            assert!(!m.has_ports || !m.is_fragment, "ports of a fragment");
            assert!(m.dscp < 64 && m.ecn < 4);
            let l2 = parse_l2(f).expect("a parsed frame has a valid L2 header");
            assert_eq!(l2.vlan, m.vlan);
            assert_eq!(l2.l3_offset, l3);
            if m.version == llr_core::wire::IpVersion::V4 {
                // Any IPv4 header: the checksum helpers take it without panicking.
                let _ = checksum::verify(&f[l3..l4.min(l3 + 60)]);
            }
        }
        Err(ParseError::Oversize) => assert!(f.len() > llr_core::wire::DEFAULT_MAX_FRAME),
        Err(_) => {}
    }
    // A smaller maximum changes nothing but Oversize.
    let max = 64 + usize::from(b >> 2) * 16;
    match parse_frame_max(f, max) {
        Err(ParseError::Oversize) => assert!(f.len() > max),
        other => assert_eq!(other, parsed, "parse_frame_max({max}) differs"),
    }
    let rs = rules();
    let c = rs.classify(f, None, ingress);
    assert!(c <= 2);
    let vlan = match &parsed {
        Ok(m) => m.vlan,
        Err(_) => parse_l2(f).ok().and_then(|l| l.vlan),
    };
    let first = rs
        .rules()
        .iter()
        .find(|r| r.matches(f, vlan, parsed.as_ref().ok(), ingress))
        .map_or(rs.default_class(), |r| r.class);
    assert_eq!(c, first, "classify is not the first matching rule");
    if let Ok(m) = &parsed {
        assert_eq!(
            rs.classify(f, Some(m), ingress),
            c,
            "meta given or not, same class"
        );
    }
}
