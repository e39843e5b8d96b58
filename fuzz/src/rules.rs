//! `rules`: the classifier rule parser (the one-line syntax of `rules.add`, `llrouter run
//! --rule` and `rules.list`) and what is built from a parsed rule.
//!
//! Input: text (invalid UTF-8 replaced), one rule per line; a line starting with `match ` is a
//! flow's match (`RuleSpec::parse_match`). Properties: no panic; a parsed rule prints
//! (`Display`, as `rules.list` shows it) to text that parses back to the same rule; a resolved
//! rule has a BPF image, survives a JSON round trip, and classifies a few real frames the same
//! whether `classify` parses them itself or not, as the first matching rule of the set.

use llr_core::classify::{Rule, RuleSet, RuleSpec};
use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::{parse_frame, Vlan};
use std::net::IpAddr;
use std::sync::OnceLock;

/// Class names rules may use.
pub const CLASSES: [&str; 3] = ["rt", "mid", "be"];

/// Interface names rules may use (`ifname=`), with their index.
pub fn ifindex_of(name: &str) -> Option<u32> {
    match name {
        "eth0" => Some(2),
        "eth1" => Some(3),
        "veth-rin" => Some(7),
        _ => None,
    }
}

/// A few real frames to classify with the parsed rules.
fn frames() -> &'static [Vec<u8>] {
    static F: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    F.get_or_init(|| {
        let v6 = |s: &str| s.parse::<IpAddr>().unwrap();
        let specs = [
            FrameSpec::default(),
            FrameSpec {
                dscp: 46,
                vlan: Some(Vlan { id: 100, pcp: 5 }),
                ..FrameSpec::default()
            },
            FrameSpec {
                protocol: 6,
                src_port: 443,
                dst_port: 5001,
                ..FrameSpec::default()
            },
            FrameSpec {
                src: v6("2001:db8::1"),
                dst: v6("fd00:2::1"),
                protocol: 17,
                dscp: 10,
                ..FrameSpec::default()
            },
        ];
        specs.iter().map(frame).collect()
    })
}

pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let names: Vec<String> = CLASSES.map(String::from).to_vec();
    let mut resolved: Vec<Rule> = Vec::new();
    for line in text.lines().take(64) {
        let (spec, is_match) = match line.strip_prefix("match ") {
            Some(m) => (RuleSpec::parse_match(m), true),
            None => (line.parse::<RuleSpec>(), false),
        };
        let Ok(spec) = spec else { continue };
        // What rules.list shows must read back as the same rule.
        let shown = spec.to_string();
        let back = if is_match {
            // Display always writes class=, empty for a flow's match.
            let rest = shown
                .strip_prefix("class=")
                .expect("Display starts with class=");
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            RuleSpec::parse_match(rest)
        } else {
            shown.parse::<RuleSpec>()
        };
        match back {
            Ok(b) => assert_eq!(
                b, spec,
                "`{line}` shows as `{shown}`, which reads back differently"
            ),
            Err(e) => panic!("`{line}` shows as `{shown}`, which does not parse: {e}"),
        }
        let rule = if is_match {
            spec.resolve_match(ifindex_of)
        } else {
            spec.resolve(&names, ifindex_of)
        };
        let Ok(rule) = rule else { continue };
        assert!(rule.class < CLASSES.len());
        let _ = rule.to_bpf_bytes();
        let json = serde_json::to_string(&rule).expect("a rule serialises");
        let again: Rule = serde_json::from_str(&json)
            .unwrap_or_else(|e| panic!("`{line}`: its JSON `{json}` does not read back: {e}"));
        assert_eq!(again, rule, "`{line}`: JSON round trip");
        resolved.push(rule);
    }
    let set = RuleSet::with_rules(resolved, CLASSES.len() - 1);
    let images = set.to_bpf_map().expect("64 rules of at most 3 classes fit");
    assert_eq!(images.len(), set.rules().len());
    for f in frames() {
        let m = parse_frame(f).expect("built frames parse");
        for ingress in [1, 2, 3, 7] {
            let c = set.classify(f, None, ingress);
            assert_eq!(c, set.classify(f, Some(&m), ingress));
            let first = set
                .rules()
                .iter()
                .find(|r| r.matches(f, m.vlan, Some(&m), ingress))
                .map_or(set.default_class(), |r| r.class);
            assert_eq!(c, first);
        }
    }
}
