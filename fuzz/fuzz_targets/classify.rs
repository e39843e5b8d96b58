#![no_main]
use libfuzzer_sys::fuzz_target;
use llr_core::classify::{RuleSet, RuleSpec};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the ingress interface; the rule text itself is fuzzed too.
    let Some((&ifindex, frame)) = data.split_first() else {
        return;
    };
    let names = ["rt".to_string(), "be".to_string()];
    let text = "class=rt dscp=46\nclass=rt proto=udp dport=5000-5100 dst=10.0.0.0/8\nclass=rt vlan=100 pcp=5\nclass=rt flex=14:0xb8/0xfc ifindex=3";
    let rules = text
        .lines()
        .filter_map(|l| l.parse::<RuleSpec>().ok()?.resolve(&names, |_| None).ok())
        .collect();
    let set = RuleSet::with_rules(rules, 1);
    let meta = llr_core::wire::parse_frame(frame).ok();
    assert_eq!(
        set.classify(frame, meta.as_ref(), u32::from(ifindex)),
        set.classify(frame, None, u32::from(ifindex))
    );
    if let Ok(s) = std::str::from_utf8(frame) {
        let _ = s
            .parse::<RuleSpec>()
            .map(|r| r.resolve(&names, |_| Some(1)));
    }
});
