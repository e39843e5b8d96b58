//! Per-packet path (parse → classify → LPM → rewrite) and IPv4 LPM: DIR-24-8 vs prefix-trie (a dev-dependency kept for this comparison).

mod common;

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use llr_core::classify::{RuleSet, RuleSpec};
use llr_core::fwd::{Forwarder, Lpm4, NextHop, Policy, Rule, RuleAction, SmallTable, Verdict};
use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::parse_frame;
use prefix_trie::PrefixMap;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const LOOKUPS: usize = 4096;

/// Random routes with a BGP-like length mix (mostly /24, some shorter, a few longer).
fn routes(n: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<(u32, u8)> {
    (0..n)
        .map(|_| {
            let len = match rng.random_range(0..100) {
                0..60 => 24,
                60..80 => rng.random_range(16..24),
                80..90 => rng.random_range(8..16),
                _ => rng.random_range(25..=32),
            };
            let a: u32 = rng.random();
            (
                a & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0),
                len,
            )
        })
        .collect()
}

fn lpm(c: &mut Criterion) {
    let mut g = c.benchmark_group("lpm_v4");
    g.throughput(Throughput::Elements(LOOKUPS as u64));
    for n in [1_000usize, 100_000] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(n as u64);
        let rs = routes(n, &mut rng);
        let dir = Lpm4::new();
        let mut trie: PrefixMap<(u32, u8), u32> = PrefixMap::new();
        for (i, &(a, l)) in rs.iter().enumerate() {
            dir.insert(a, l, i as u32).unwrap();
            trie.insert((a, l), i as u32);
        }
        // Half the lookups hit a random route, half are random addresses (mostly misses or
        // short-prefix hits), so neither structure sees only its best case.
        let addrs: Vec<u32> = (0..LOOKUPS)
            .map(|i| {
                if i % 2 == 0 {
                    let (a, l) = rs[rng.random_range(0..rs.len())];
                    a | (rng.random::<u32>()
                        & !u32::MAX.checked_shl(32 - u32::from(l)).unwrap_or(0))
                } else {
                    rng.random()
                }
            })
            .collect();
        for &a in &addrs {
            assert_eq!(dir.lookup(a), trie.get_lpm(&(a, 32)).map(|(_, v)| *v));
        }
        g.bench_with_input(BenchmarkId::new("dir24_8", n), &addrs, |b, addrs| {
            b.iter(|| {
                let mut s = 0u32;
                for &a in addrs {
                    s = s.wrapping_add(dir.lookup(black_box(a)).unwrap_or(0));
                }
                s
            })
        });
        g.bench_with_input(BenchmarkId::new("prefix_trie", n), &addrs, |b, addrs| {
            b.iter(|| {
                let mut s = 0u32;
                for &a in addrs {
                    s = s.wrapping_add(trie.get_lpm(&(black_box(a), 32)).map_or(0, |(_, v)| *v));
                }
                s
            })
        });
    }
    g.finish();
}

fn setup() -> (Forwarder, RuleSet) {
    let mut f = common::two_ports();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for (a, l) in routes(1000, &mut rng) {
        let gw = IpAddr::from([10, 1, 0, 1 + (a % 8) as u8]);
        let _ = f.routes.insert(
            format!("{}/{l}", IpAddr::from(a.to_be_bytes()))
                .parse()
                .unwrap(),
            NextHop {
                ifindex: 2,
                gateway: Some(gw),
            },
        );
        f.neighbors.insert(2, gw, [2, 0, 0, 0, 0, 9]);
    }
    for (p, gw) in [
        ("10.2.0.0/16", "10.1.0.1"),
        ("2001:db8:5::/48", "2001:db8:1::1"),
    ] {
        let gw: IpAddr = gw.parse().unwrap();
        f.routes
            .insert(
                p.parse().unwrap(),
                NextHop {
                    ifindex: 2,
                    gateway: Some(gw),
                },
            )
            .unwrap();
        f.neighbors.insert(2, gw, [2, 0, 0, 0, 0, 9]);
    }
    let names: Vec<String> = ["rt", "be"].map(String::from).to_vec();
    // The packet matches none of the first three, so classify walks four rules.
    let rules = [
        "class=rt vlan=100 pcp=5",
        "class=rt src=192.168.0.0/16 proto=tcp",
        "class=rt dscp=46",
        "class=rt proto=udp dport=5000-5100 dst=10.0.0.0/8",
    ]
    .iter()
    .map(|r| {
        r.parse::<RuleSpec>()
            .unwrap()
            .resolve(&names, |_| None)
            .unwrap()
    })
    .collect();
    (f, RuleSet::with_rules(rules, 1))
}

fn per_packet(c: &mut Criterion) {
    let (fwd, rules) = setup();
    let v4 = frame(&FrameSpec {
        dst_mac: [2, 0, 0, 0, 0, 1],
        dst: "10.2.3.4".parse().unwrap(),
        ..FrameSpec::default()
    });
    let v6 = frame(&FrameSpec {
        dst_mac: [2, 0, 0, 0, 0, 1],
        src: "2001:db8::1".parse().unwrap(),
        dst: "2001:db8:5::1".parse().unwrap(),
        ..FrameSpec::default()
    });
    let mut g = c.benchmark_group("per_packet");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse", |b| b.iter(|| parse_frame(black_box(&v4))));
    g.bench_function("parse_classify", |b| {
        b.iter(|| {
            let m = parse_frame(black_box(&v4)).unwrap();
            rules.classify(&v4, Some(&m), 1)
        })
    });
    // The IPv6 packet matches no rule: it walks all four and lands in the default class.
    for (name, tmpl, class) in [("full_v4", &v4, 0), ("full_v6", &v6, 1)] {
        let mut buf = tmpl.clone();
        let mut m = parse_frame(tmpl).unwrap();
        assert_eq!(rules.classify(tmpl, Some(&m), 1), class);
        assert!(matches!(
            fwd.process_parsed(&mut buf, &m, 1),
            Verdict::Tx { .. }
        ));
        g.bench_function(name, |b| {
            b.iter(|| {
                // Restore the template (64 bytes) so every iteration forwards the same packet.
                buf.copy_from_slice(tmpl);
                m = parse_frame(black_box(&buf)).unwrap();
                let class = rules.classify(&buf, Some(&m), 1);
                (class, fwd.process_parsed(&mut buf, &m, 1))
            })
        });
    }
    // The same IPv4 packet with reverse-path filtering on its ingress (Debian's default:
    // loose), which looks up a route back to the source.
    let (mut rpf, _) = setup();
    let _ = rpf.routes.insert(
        "10.0.0.0/24".parse().unwrap(),
        NextHop {
            ifindex: 1,
            gateway: None,
        },
    );
    let mut i = rpf.interfaces.get(1).unwrap().clone();
    i.rp_filter = 2;
    rpf.interfaces.upsert(i);
    let mut buf = v4.clone();
    let mut m = parse_frame(&v4).unwrap();
    assert!(matches!(
        rpf.process_parsed(&mut buf, &m, 1),
        Verdict::Tx { .. }
    ));
    g.bench_function("full_v4_rp_filter_loose", |b| {
        b.iter(|| {
            buf.copy_from_slice(&v4);
            m = parse_frame(black_box(&buf)).unwrap();
            let class = rules.classify(&buf, Some(&m), 1);
            (class, rpf.process_parsed(&mut buf, &m, 1))
        })
    });
    // The same packet on a host with policy routing: three rules before main that it does not
    // match (a source, an input interface, a mark), so it walks them and looks up main.
    let (mut pol, _) = setup();
    let rule = |prio: u32, t: u32| Rule::new(prio, RuleAction::Lookup(t));
    let mut v4_rules = Policy::default().rules(false).to_vec();
    v4_rules.extend([
        Rule {
            src: Some("192.0.2.0/24".parse().unwrap()),
            ..rule(100, 100)
        },
        Rule {
            iif: Some(7),
            ..rule(101, 100)
        },
        Rule {
            fwmark: Some((1, u32::MAX)),
            ..rule(102, 100)
        },
    ]);
    let table = SmallTable::new([(
        "0.0.0.0/0".parse().unwrap(),
        NextHop {
            ifindex: 2,
            gateway: Some("10.1.0.1".parse().unwrap()),
        },
    )]);
    pol.policy = std::sync::Arc::new(Policy::new(
        v4_rules,
        Policy::default().rules(true).to_vec(),
        [(100, table)].into_iter().collect(),
    ));
    // And one whose route is a group of two next hops.
    let (mut ecmp, _) = setup();
    let (a, b2): (IpAddr, IpAddr) = ("10.1.0.1".parse().unwrap(), "10.1.0.2".parse().unwrap());
    ecmp.neighbors.insert(2, b2, [2, 0, 0, 0, 0, 8]);
    let hop = |gw| NextHop {
        ifindex: 2,
        gateway: Some(gw),
    };
    let group = ecmp.routes.group_of(&[(hop(a), 1), (hop(b2), 1)]).unwrap();
    ecmp.routes
        .insert("10.2.0.0/16".parse().unwrap(), group)
        .unwrap();
    ecmp.multipath.policy_v4 = 1;
    for (name, f) in [
        ("full_v4_policy_3_rules", &pol),
        ("full_v4_multipath", &ecmp),
    ] {
        let mut buf = v4.clone();
        let mut m = parse_frame(&v4).unwrap();
        assert!(matches!(
            f.process_parsed(&mut buf, &m, 1),
            Verdict::Tx { .. }
        ));
        g.bench_function(name, |b| {
            b.iter(|| {
                buf.copy_from_slice(&v4);
                m = parse_frame(black_box(&buf)).unwrap();
                let class = rules.classify(&buf, Some(&m), 1);
                (class, f.process_parsed(&mut buf, &m, 1))
            })
        });
    }
    g.finish();
    partial_checksums(c, &fwd);
}

/// The price of completing partial checksums: a 1500-byte UDP frame forwarded with a complete
/// checksum (only the pseudo-header comparison) and with a partial one (the segment summed).
fn partial_checksums(c: &mut Criterion, fwd: &Forwarder) {
    use llr_core::wire::checksum::{fold64, pseudo_header_sum};
    let mut g = c.benchmark_group("checksum_1500");
    g.throughput(Throughput::Elements(1));
    let spec = FrameSpec {
        dst_mac: [2, 0, 0, 0, 0, 1],
        dst: "10.2.3.4".parse().unwrap(),
        payload_len: 1472,
        ..FrameSpec::default()
    };
    let mut partial = frame(&spec);
    let m = parse_frame(&partial).unwrap();
    let p = pseudo_header_sum(false, &m.src, &m.dst, m.protocol, 1480);
    partial[40..42].copy_from_slice(&fold64(p).to_be_bytes());
    let mut complete = partial.clone();
    assert!(llr_core::wire::l4::complete_partial_checksum(
        &mut complete,
        &m
    ));
    for (name, tmpl) in [("complete", &complete), ("partial", &partial)] {
        let mut buf = tmpl.clone();
        g.bench_function(name, |b| {
            b.iter(|| {
                // Only the bytes the forwarder writes are restored (MACs, TTL, checksums).
                buf[..42].copy_from_slice(&tmpl[..42]);
                let m = parse_frame(black_box(&buf)).unwrap();
                fwd.process_parsed(&mut buf, &m, 1)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, per_packet, lpm);
criterion_main!(benches);
