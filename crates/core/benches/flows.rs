//! The flow path's fixed costs: the per-packet flow lookup with thousands of installed flows,
//! and a scheduler turn (pick, one element, charge) with few and many eligible flows.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use llr_core::classify::RuleSpec;
use llr_core::flow::{
    FlowParams, FlowSched, FlowSchedConfig, FlowSpec, Flows, Next, Pipeline, Progress, Share,
};
use llr_core::wire::build::{frame, FrameSpec};

const PACKETS: usize = 1024;

fn exact(i: usize) -> FlowSpec {
    let m = format!(
        "proto=udp src=10.{}.{}.1/32 dst=10.200.0.1/32 sport={} dport=5000",
        i / 250,
        i % 250,
        1024 + i
    );
    FlowSpec {
        name: format!("conn{i}"),
        matches: Some(RuleSpec::parse_match(&m).unwrap()),
        ..Default::default()
    }
}

fn packet(i: usize) -> Vec<u8> {
    frame(&FrameSpec {
        src: format!("10.{}.{}.1", i / 250, i % 250).parse().unwrap(),
        dst: "10.200.0.1".parse().unwrap(),
        protocol: 17,
        src_port: (1024 + i) as u16,
        dst_port: 5000,
        ..Default::default()
    })
}

fn lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("flow_lookup");
    g.throughput(Throughput::Elements(PACKETS as u64));
    let classes = vec!["rt".to_string(), "be".to_string()];
    for n in [0usize, 100, 10_000] {
        let mut specs: Vec<FlowSpec> = (0..n).map(exact).collect();
        // and 16 wildcard flows, none of which the packets match
        for k in 0..16 {
            let m = format!("proto=tcp dst=172.{k}.0.0/16");
            specs.push(FlowSpec {
                name: format!("wild{k}"),
                matches: Some(RuleSpec::parse_match(&m).unwrap()),
                ..Default::default()
            });
        }
        let cfg = FlowSchedConfig {
            max_flows: 20_000,
            ..Default::default()
        };
        let flows: Flows<()> = Flows::new(&cfg, &classes, &specs, &[], &|_| None).unwrap();
        // packets of installed flows, spread over the table (a miss for n = 0)
        let pkts: Vec<Vec<u8>> = (0..PACKETS)
            .map(|i| packet((i * 7919) % n.max(1)))
            .collect();
        g.bench_with_input(BenchmarkId::new("exact_flows", n), &pkts, |b, pkts| {
            b.iter(|| {
                for p in pkts {
                    black_box(flows.classify(black_box(p), 1, 1));
                }
            })
        });
    }
    g.finish();
}

fn turns(c: &mut Criterion) {
    let mut g = c.benchmark_group("flow_turn");
    for eligible in [3usize, 1000] {
        let mut s = FlowSched::<u32>::new(FlowParams::default(), 20_000).unwrap();
        for i in 0..10_000 {
            s.add(
                &format!("idle{i}"),
                FlowParams::default(),
                Pipeline::forward_only(),
            )
            .unwrap();
        }
        let ids: Vec<u32> = (0..eligible)
            .map(|i| {
                let p = FlowParams {
                    share: Share::Weight(1 + (i % 5) as u32),
                    quantum_ns: 1,
                    queue_limit: 4,
                };
                s.add(&format!("f{i}"), p, Pipeline::forward_only())
                    .unwrap()
            })
            .collect();
        for &id in &ids {
            s.enqueue(id, 0).unwrap();
        }
        // One turn = pick + one packet through `forward` + charge (the flow goes idle), then a
        // packet arrives for it again (back into the eligible set).
        g.bench_function(BenchmarkId::new("pick_run_charge", eligible), |b| {
            b.iter(|| {
                let Next::Flow(id) = s.pick() else {
                    unreachable!("flows stay backlogged")
                };
                black_box(s.run_turn(id, |_, _, p| {
                    black_box(p);
                    (Progress::Finished, 300)
                }));
                s.enqueue(id, 0).unwrap();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lookup, turns);
criterion_main!(benches);
