//! The host firewall's cost per packet (`llr_core::filter`), as FD.io CSIT measures ACLs: a
//! forward chain of 1, 10, 50 and 1 000 rules none of which matches the traffic (every packet
//! walks them all to the policy), and a blocklist set of 10 000 prefixes that half the
//! packets hit. Packets are random IPv4/UDP, the filter compiled from nft's JSON.
//!
//! `cargo bench -p llr-core --bench filter`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use llr_core::filter::nft::compile;
use llr_core::filter::{Decision, Filter, FilterPacket, Hook};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const PACKETS: usize = 4096;

fn ruleset(items: &[String]) -> String {
    format!("{{\"nftables\": [{}]}}", items.join(","))
}

fn chain() -> String {
    r#"{"chain": {"family": "inet", "table": "f", "name": "fw", "handle": 1, "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}}"#.into()
}

/// `ip saddr 192.0.2.N udp dport 1000+N drop`, for N in 0..n: no random packet comes from
/// 192.0.2.0/24 to those ports, so each walks every rule.
fn rules(n: usize) -> Filter {
    let mut items = vec![chain()];
    for i in 0..n {
        items.push(format!(
            r#"{{"rule": {{"family": "inet", "table": "f", "chain": "fw", "handle": {}, "expr": [{{"match": {{"op": "==", "left": {{"payload": {{"protocol": "ip", "field": "saddr"}}}}, "right": "198.51.{}.{}"}}}}, {{"match": {{"op": "==", "left": {{"payload": {{"protocol": "udp", "field": "dport"}}}}, "right": {}}}}}, {{"drop": null}}]}}}}"#,
            i + 2,
            i / 250,
            i % 250,
            1000 + i
        ));
    }
    compile(&ruleset(&items), &[]).unwrap().filter
}

/// A set of 10 000 random /24s and one rule dropping their destinations.
fn blocklist(rng: &mut Xoshiro256PlusPlus) -> (Filter, Vec<u32>) {
    let nets: Vec<u32> = (0..10_000)
        .map(|_| rng.random::<u32>() & 0xffff_ff00)
        .collect();
    let elems: Vec<String> = nets
        .iter()
        .map(|&n| {
            format!(
                r#"{{"prefix": {{"addr": "{}", "len": 24}}}}"#,
                std::net::Ipv4Addr::from(n)
            )
        })
        .collect();
    let items = vec![
        format!(
            r#"{{"set": {{"family": "inet", "name": "block", "table": "f", "type": "ipv4_addr", "handle": 3, "flags": ["interval"], "elem": [{}]}}}}"#,
            elems.join(",")
        ),
        chain(),
        r#"{"rule": {"family": "inet", "table": "f", "chain": "fw", "handle": 4, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "@block"}}, {"drop": null}]}}"#.into(),
    ];
    (compile(&ruleset(&items), &[]).unwrap().filter, nets)
}

fn packet(src: u32, dst: u32, dport: u16) -> FilterPacket {
    let mut l4 = [0u8; 4];
    l4[..2].copy_from_slice(&40000u16.to_be_bytes());
    l4[2..].copy_from_slice(&dport.to_be_bytes());
    FilterPacket {
        v6: false,
        src: u128::from(src),
        dst: u128::from(dst),
        l4proto: 17,
        nexthdr: 17,
        dscp: 0,
        len: 64,
        l4: Some(l4),
        iif: 2,
        oif: 3,
        ct_state: llr_core::filter::CT_ESTABLISHED,
    }
}

fn run(f: &Filter, pkts: &[FilterPacket]) -> usize {
    pkts.iter()
        .filter(|p| matches!(f.eval(Hook::Forward, p), Decision::Drop(_)))
        .count()
}

fn bench(c: &mut Criterion) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(45);
    let random: Vec<FilterPacket> = (0..PACKETS)
        .map(|_| packet(rng.random(), rng.random(), rng.random_range(1..1000)))
        .collect();
    let mut g = c.benchmark_group("filter_rules");
    g.throughput(Throughput::Elements(PACKETS as u64));
    for n in [0, 1, 10, 50, 1000] {
        let f = rules(n);
        assert_eq!(run(&f, &random), 0, "no packet matches");
        g.bench_with_input(BenchmarkId::from_parameter(n), &f, |b, f| {
            b.iter(|| run(black_box(f), black_box(&random)))
        });
    }
    g.finish();
    let (f, nets) = blocklist(&mut rng);
    // Half the packets to a blocked /24, half to random addresses.
    let mixed: Vec<FilterPacket> = (0..PACKETS)
        .map(|i| {
            let dst = if i % 2 == 0 {
                nets[rng.random_range(0..nets.len())] | rng.random_range(0..256)
            } else {
                rng.random()
            };
            packet(rng.random(), dst, 53)
        })
        .collect();
    assert!(run(&f, &mixed) >= PACKETS / 2);
    let mut g = c.benchmark_group("filter_set");
    g.throughput(Throughput::Elements(PACKETS as u64));
    g.bench_function("10k_prefixes", |b| {
        b.iter(|| run(black_box(&f), black_box(&mixed)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
