//! `config`: the router's configuration loader, from TOML text to a validated, resolved
//! configuration, touching nothing on the host (interface names resolve through a made-up
//! table; the only host read is `validate`'s look at the online CPUs).
//!
//! Input: TOML text (invalid UTF-8 replaced). Properties: no panic; a configuration that loads
//! writes back to TOML (`to_toml`, as `llrouter` prints it) that loads again and writes the same
//! text; a configuration that resolves is consistent (one ifindex per interface, one BPF image
//! per rule, every class steered to a ring of the layout) and its poll engine and flows build.

use llr_core::sched::PollEngine;
use llr_router::config::RouterConfig;

/// Any plausible interface name "exists": non-empty, at most 15 bytes, no '/' or space
/// (index from a hash of the name, so two names may share one, as with altnames).
pub fn ifindex_of(name: &str) -> Option<u32> {
    if name.is_empty() || name.len() > 15 || name.contains(['/', ' ']) {
        return None;
    }
    let h = name
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    Some(2 + h % 1000)
}

pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(cfg) = RouterConfig::from_toml(&text) else {
        return;
    };
    // What the config writes back loads again, to the same text (compared as text: a NaN
    // float is not equal to itself).
    let out = cfg
        .to_toml()
        .unwrap_or_else(|e| panic!("a loaded config does not write back: {e}"));
    let again = RouterConfig::from_toml(&out)
        .unwrap_or_else(|e| panic!("the written config does not load: {e}\n{out}"));
    let out2 = again.to_toml().expect("writes back");
    assert_eq!(out, out2, "TOML round trip changes the config");
    let Ok(r) = cfg.clone().resolve(ifindex_of) else {
        return;
    };
    assert_eq!(r.ifindexes.len(), cfg.interfaces.len());
    assert_eq!(r.rules.len(), cfg.rules.len());
    assert_eq!(r.rule_images.len(), cfg.rules.len());
    assert_eq!(r.default_class as usize + 1, cfg.classes.len());
    assert_eq!(r.layout.class_to_ring.len(), cfg.classes.len());
    assert!(r
        .layout
        .class_to_ring
        .iter()
        .all(|&ring| ring < r.layout.rings.len()));
    assert!(r.rules.iter().all(|x| x.class < cfg.classes.len()));
    let _engine = PollEngine::new(&r.layout);
    if let Some(setup) = &r.flows {
        setup
            .build::<()>()
            .unwrap_or_else(|e| panic!("flows checked by resolve do not build: {e:?}"));
    }
}
