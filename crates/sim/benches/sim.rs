//! Simulated packets per second for the two-class paper-000 scenario.
//! Run: `cargo bench -p llr-sim --bench sim`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use llr_core::sched::{SchedConfig, StrategyKind};
use llr_sim::{run, SimConfig};

fn bench(c: &mut Criterion) {
    const PACKETS: u64 = 1_000_000;
    let mut g = c.benchmark_group("sim_2class_1core");
    g.throughput(Throughput::Elements(PACKETS));
    g.sample_size(10);
    for strategy in [
        StrategyKind::Sq,
        StrategyKind::Rr,
        StrategyKind::LlRr,
        StrategyKind::LlWfq,
        StrategyKind::Prio,
        StrategyKind::LlWfqSlice,
    ] {
        let cfg = SimConfig::paper000(SchedConfig::new(strategy, &["rt", "be"]), 0.3, 0.9, PACKETS);
        g.bench_function(strategy.name(), |b| b.iter(|| run(&cfg).unwrap()));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
