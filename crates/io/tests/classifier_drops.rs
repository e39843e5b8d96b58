//! The classifier's drop tables (`bpf/classifier.c`, run with `BPF_PROG_TEST_RUN`) against
//! their model, llr-core's `XdpDrops::lookup`, on seeded random prerouting rulesets and frames:
//! the same frames dropped, counted against the same slot with the same bytes; a replaced set
//! takes effect whole and hands back the final counts of the one it retires (root; fails
//! without it).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use llr_core::filter::xdp::{XdpDrops, ICMP_TYPE};
use llr_core::filter::{
    Action, BaseChain, Chain, Families, Filter, FilterPacket, Hook, Key, Match, Rule, RuleOrigin,
    ValueSet,
};
use llr_core::fixture::Rng;
use llr_core::wire::build::{frame, FrameSpec};
use llr_io::ebpf::{Classifier, XDP_DROP};

/// The ports of the frames and of the rules: few, so that they meet.
const PORTS: [u16; 4] = [53, 54, 7000, 7001];

/// The protocols of the frames and of the rules without a port: UDP, TCP, ICMP, ICMPv6.
const PROTOS: [u8; 4] = [17, 6, 1, 58];

/// The ICMP and ICMPv6 types of the frames and of the rules on a type.
const TYPES: [u8; 4] = [8, 0, 128, 129];

/// The loopback's index: what `BPF_PROG_TEST_RUN` presents as the ingress interface here.
const IIF: u32 = 1;

fn v4_of(r: &mut Rng) -> u128 {
    // 10.0.0.0/22: prefixes of the rules overlap often.
    u128::from(0x0a00_0000u32 + r.below(1024) as u32)
}

fn v6_of(r: &mut Rng) -> u128 {
    0xfd00_0000_0000_0000_0000_0000_0000_0000 + u128::from(r.below(1024) as u32)
}

fn addr_set(r: &mut Rng, v6: bool) -> ValueSet {
    let n = 1 + r.below(4);
    let ranges = (0..n)
        .map(|_| {
            let a = if v6 { v6_of(r) } else { v4_of(r) };
            let len = r.below(9) as u32; // a /22.. /32 (or /118.. /128) block
            let lo = a & !((1u128 << len) - 1);
            (lo, lo + (1u128 << len) - 1)
        })
        .collect();
    ValueSet::from_ranges(ranges)
}

fn rand_filter(r: &mut Rng) -> Filter {
    let mut origins = Vec::new();
    let mut origin = |kernel: bool| {
        origins.push(RuleOrigin {
            family: "inet".into(),
            table: "t".into(),
            chain: "c".into(),
            handle: origins.len() as u64 + 1,
            text: String::new(),
            kernel_because: kernel.then(|| "test".into()),
            conntrack: false,
        });
        (origins.len() - 1) as u32
    };
    let mut chains = Vec::new();
    for _ in 0..1 + r.below(2) {
        let policy_id = origin(false);
        let mut rules = Vec::new();
        for _ in 0..1 + r.below(6) {
            let v6 = r.below(2) == 1;
            let mut matches = Vec::new();
            let key = match (v6, r.below(2)) {
                (false, 0) => Key::Saddr4,
                (false, _) => Key::Daddr4,
                (true, 0) => Key::Saddr6,
                (true, _) => Key::Daddr6,
            };
            // One rule in four matches no address, one in three a port of TCP or UDP (as
            // nft writes `udp dport`, its protocol with it): the port table.
            if r.below(4) != 0 {
                matches.push(Match {
                    key,
                    negate: r.below(6) == 0,
                    set: addr_set(r, v6),
                });
            } else if v6 {
                matches.push(Match {
                    key: Key::NfProto,
                    negate: false,
                    set: ValueSet::single(6),
                });
            }
            let pair = r.below(3) == 0;
            let icmp_type = !pair && r.below(4) == 0;
            if icmp_type {
                // `icmp type echo-request` / `icmpv6 type { … }`: its protocol with it.
                matches.push(Match {
                    key: Key::L4Proto,
                    negate: false,
                    set: ValueSet::single(if r.below(2) == 0 { 1 } else { 58 }),
                });
                let mut types: Vec<(u128, u128)> = (0..1 + r.below(2))
                    .map(|_| u128::from(TYPES[r.below(TYPES.len() as u64) as usize]))
                    .map(|t| (t, t))
                    .collect();
                types.sort_unstable();
                matches.push(Match {
                    key: Key::L4Byte0,
                    negate: r.below(5) == 0,
                    set: ValueSet::from_ranges(types),
                });
            } else if !pair && r.below(4) == 0 {
                // A protocol without a port (`meta l4proto icmp`): ICMP included, one or two.
                let mut protos: Vec<(u128, u128)> = (0..1 + r.below(2))
                    .map(|_| PROTOS[r.below(PROTOS.len() as u64) as usize])
                    .map(|p| (u128::from(p), u128::from(p)))
                    .collect();
                protos.sort_unstable();
                matches.push(Match {
                    key: Key::L4Proto,
                    negate: false,
                    set: ValueSet::from_ranges(protos),
                });
            }
            if pair {
                matches.push(Match {
                    key: Key::L4Proto,
                    negate: false,
                    set: ValueSet::single(if r.below(2) == 0 { 17 } else { 6 }),
                });
                let lo = u128::from(PORTS[r.below(PORTS.len() as u64) as usize]);
                matches.push(Match {
                    key: if r.below(2) == 0 {
                        Key::L4Word0
                    } else {
                        Key::L4Word1
                    },
                    negate: false,
                    set: ValueSet::from_ranges(vec![(lo, lo + r.below(2) as u128)]),
                });
            }
            if r.below(5) == 0 {
                matches.push(Match {
                    key: Key::Iif,
                    negate: false,
                    set: ValueSet::single(if r.below(2) == 0 { u128::from(IIF) } else { 99 }),
                });
            }
            if r.below(6) == 0 {
                matches.push(Match {
                    key: Key::L4Word1,
                    negate: false,
                    set: ValueSet::single(53),
                });
            }
            let action = match r.below(8) {
                0 => Action::Accept,
                1 => Action::Continue,
                _ => Action::Drop,
            };
            rules.push(Rule {
                matches,
                action,
                id: origin(false),
            });
        }
        chains.push(Chain {
            rules,
            base: Some(BaseChain {
                hook: Hook::Prerouting,
                priority: r.below(3) as i32,
                families: Families::Both,
                policy_drop: false,
                policy_id,
                nat: false,
            }),
        });
    }
    Filter::new(chains, origins)
}

fn rand_frame(r: &mut Rng) -> (Vec<u8>, FilterPacket) {
    let v6 = r.below(2) == 1;
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        (
            Ipv6Addr::from(v6_of(r)).into(),
            Ipv6Addr::from(v6_of(r)).into(),
        )
    } else {
        (
            Ipv4Addr::from(v4_of(r) as u32).into(),
            Ipv4Addr::from(v4_of(r) as u32).into(),
        )
    };
    let payload_len = r.below(200) as usize;
    let mut port = || PORTS[r.below(PORTS.len() as u64) as usize];
    let (src_port, dst_port) = (port(), port());
    let protocol = match r.below(6) {
        0 => 6,
        1 => PROTOS[2 + r.below(2) as usize],
        _ => 17,
    };
    let f = frame(&FrameSpec {
        src,
        dst,
        protocol,
        src_port,
        dst_port,
        payload_len,
        ..FrameSpec::default()
    });
    let mut f = f;
    let meta = llr_core::wire::parse_frame(&f).expect("a valid frame");
    // ICMP's header is the builder's payload: its first byte is the type.
    if matches!(protocol, 1 | 58) {
        if let Some(b) = f.get_mut(usize::from(meta.l4_offset)) {
            *b = TYPES[r.below(TYPES.len() as u64) as usize];
        }
    }
    (f.clone(), FilterPacket::of(&f, &meta, IIF))
}

fn drops_of(c: &Classifier, gen: u32) -> Vec<(u64, u64)> {
    c.drop_counts(gen, llr_io::ebpf::MAX_DROPS)
        .expect("drop counters")
}

#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN (scripts/test.sh runs it as root)"]
fn the_classifier_drops_what_its_model_drops_and_counts_it_per_rule() {
    llr_io::sys::require_root();
    let mut c = Classifier::load(0).expect("load the classifier");
    c.assume_live(true);
    let (mut dropped, mut checked, mut with_slots, mut with_ports) = (0u64, 0u64, 0u64, 0u64);
    let (mut with_protos, mut with_types, mut by_type) = (0u64, 0u64, 0u64);
    let mut previous: Option<(XdpDrops, Vec<(u64, u64)>)> = None;
    for seed in 0..120u64 {
        let mut r = Rng::new(0xd80b_0000 + seed);
        let f = rand_filter(&mut r);
        let d = f.xdp_drops(IIF);
        with_slots += u64::from(!d.is_empty());
        with_ports += u64::from(d.has_ports(false) || d.has_ports(true));
        with_protos += u64::from(d.has_protos(false) || d.has_protos(true));
        let type_slot = |s: usize| {
            (d.ports.iter().flatten()).any(|e| e.port_dir == ICMP_TYPE && usize::from(e.slot) == s)
        };
        with_types += u64::from((0..d.slots.len()).any(type_slot));
        let (gen, retired) = c.set_drops(&d).expect("set the drops");
        // The generation replaced now is the one set two updates ago; its counts came back
        // final. One update ago's are still readable until the next call.
        if seed >= 1 {
            let (_, counts_then) = previous.as_ref().expect("set before");
            let live_then = drops_of(&c, gen ^ 1);
            assert_eq!(
                &live_then, counts_then,
                "seed {seed}: the previous set's counts"
            );
        }
        if seed >= 2 {
            assert!(retired.iter().all(|&(p, _)| p < 1 << 20), "seed {seed}");
        }
        assert!(
            drops_of(&c, gen).iter().all(|&x| x == (0, 0)),
            "seed {seed}: cleared"
        );
        let mut want = vec![(0u64, 0u64); llr_io::ebpf::MAX_DROPS];
        for i in 0..80 {
            let (fr, p) = rand_frame(&mut r);
            let model = d.lookup(&p);
            let out = c.test_run(&fr, Some(IIF)).expect("test run");
            checked += 1;
            assert_eq!(
                out.action == XDP_DROP,
                model.is_some(),
                "seed {seed} frame {i}: XDP action {} but the model says {model:?} ({p:?})",
                out.action
            );
            if let Some(s) = model {
                dropped += 1;
                by_type += u64::from(type_slot(s) && matches!(p.l4proto, 1 | 58));
                want[s].0 += 1;
                want[s].1 += u64::from(p.len);
                // The model is the kernel's verdict (llr-core's property test); say it here.
                assert!(matches!(
                    f.eval(Hook::Prerouting, &p),
                    llr_core::filter::Decision::Drop(id) if id == d.slots[s].rule
                ));
            }
        }
        let got = drops_of(&c, gen);
        let n = d.slots.len();
        assert_eq!(&got[..n], &want[..n], "seed {seed}: per-slot counts");
        assert!(
            got[n..].iter().all(|&x| x == (0, 0)),
            "seed {seed}: unused slots"
        );
        previous = Some((d, want));
    }
    // Not a vacuous run: some sets drop in XDP, some frames are dropped and some are not.
    assert!(
        with_slots >= 40,
        "{with_slots} of 120 rule sets had XDP drops"
    );
    assert!(
        with_ports >= 20,
        "{with_ports} of 120 rule sets had port drops"
    );
    assert!(
        with_protos >= 15,
        "{with_protos} of 120 rule sets had protocol drops"
    );
    assert!(
        with_types >= 15 && by_type >= 20,
        "{with_types} of 120 rule sets had ICMP type drops, {by_type} frames dropped by one"
    );
    assert!(
        dropped >= checked / 10 && dropped <= checked * 9 / 10,
        "{dropped} of {checked} frames dropped"
    );
    let st = c.stats().expect("stats");
    assert_eq!(st.drop_firewall, dropped);
    // An empty set stops every drop.
    c.set_drops(&XdpDrops::default()).expect("clear");
    let mut r = Rng::new(7);
    for _ in 0..50 {
        let (fr, _) = rand_frame(&mut r);
        assert_ne!(c.test_run(&fr, Some(IIF)).expect("run").action, XDP_DROP);
    }
}
