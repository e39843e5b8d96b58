//! Several cores: the flow hash, steering layouts and the loss-free capacity (pure and fast:
//! small runs, deterministic seeds).

use llr_core::sched::{SchedConfig, StrategyKind};
use llr_sim::sweep::capacity;
use llr_sim::{core_shares, flow_cores, hash_bound, run, Rate, SimConfig, Steering};

/// Paper 000's two classes with `cores` cores, `flows` flows and `per_core` packets per core.
fn cfg(strategy: StrategyKind, cores: usize, flows: usize, per_core: u64) -> SimConfig {
    let mut c = SimConfig::paper000(
        SchedConfig::new(strategy, &["rt", "be"]),
        0.3,
        0.8,
        per_core * cores as u64,
    );
    c.cores = cores;
    c.flows = flows;
    c
}

#[test]
fn core_shares_sum_to_one_and_bound_the_load() {
    for (cores, flows) in [(1, 1), (1, 64), (4, 64), (16, 64), (16, 100_000)] {
        let c = cfg(StrategyKind::LlWfq, cores, flows, 1);
        let s = core_shares(&c);
        assert_eq!(s.len(), cores);
        assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{s:?}");
        let b = hash_bound(&c);
        assert!(b > 0.0 && b <= 1.0);
        if cores == 1 {
            assert_eq!(b, 1.0);
        }
    }
    // Many flows spread evenly; few flows leave the busiest core well above its fair share.
    assert!(hash_bound(&cfg(StrategyKind::LlWfq, 16, 100_000, 1)) > 0.97);
    assert!(hash_bound(&cfg(StrategyKind::LlWfq, 16, 32, 1)) < 0.6);
}

/// The simulated per-core load follows the flow hash: each core is offered its expected share.
#[test]
fn per_core_counts_follow_the_hash_and_conserve_packets() {
    let c = cfg(StrategyKind::LlWfq, 4, 12, 50_000);
    let r = run(&c).unwrap();
    let total: u64 = r.classes.iter().map(|k| k.sent).sum();
    let shares = core_shares(&c);
    assert_eq!(r.per_core.len(), 4);
    for (k, pc) in r.per_core.iter().enumerate() {
        let sent: u64 = pc.sent.iter().sum();
        let want = shares[k] * total as f64;
        assert!(
            (sent as f64 - want).abs() <= 0.02 * total as f64,
            "core {k}: {sent} sent, expected {want:.0}"
        );
        for i in 0..2 {
            assert_eq!(pc.sent[i], pc.delivered[i] + pc.dropped[i]);
        }
    }
    for (i, k) in r.classes.iter().enumerate() {
        assert_eq!(k.sent, r.per_core.iter().map(|p| p.sent[i]).sum::<u64>());
        assert_eq!(
            k.dropped,
            r.per_core.iter().map(|p| p.dropped[i]).sum::<u64>()
        );
    }
}

#[test]
fn class_steering_keeps_rt_on_its_cores_and_equals_rss() {
    // 12 flows: 4 RT flows, 8 BE flows over 4 cores; overload so the rings matter.
    let mut rss = cfg(StrategyKind::LlWfq, 4, 12, 40_000);
    rss.rate = Rate::Utilization(1.3);
    let mut class = rss.clone();
    class.steering = Steering::Class;
    let a = run(&rss).unwrap();
    let b = run(&class).unwrap();
    // The same hash, rings and engine: the same queueing network, draw for draw.
    assert_eq!(a.classes, b.classes);
    assert_eq!(a.per_core, b.per_core);
    assert_eq!(b.steering, Steering::Class);
    // RT only on the cores its flows hash to, and never lost there under ll-wfq.
    let rt_cores = &flow_cores(&class)[0];
    for pc in &b.per_core {
        let mine = rt_cores.contains(&pc.core);
        assert_eq!(pc.sent[0] > 0, mine, "core {}: {:?}", pc.core, pc.sent);
        assert_eq!(pc.dropped[0], 0, "core {} dropped RT", pc.core);
    }
    assert!(b.classes[1].dropped > 0, "1.3× overload must cost BE");
    // Hardware queues: one per core under RSS, one per (core, class) under class steering,
    // numbered as the live router does (worker·classes + class).
    assert_eq!(Steering::Rss.queues(4, 2), 4);
    assert_eq!(Steering::Class.queues(4, 2), 8);
    let qs: Vec<usize> = (0..4)
        .flat_map(|k| (0..2).map(move |c| Steering::Class.queue(k, c, 2)))
        .collect();
    assert_eq!(qs, (0..8).collect::<Vec<_>>());
    assert_eq!(Steering::Rss.queue(3, 1, 2), 3);
}

#[test]
fn many_flows_scale_capacity_linearly() {
    let one = capacity(&cfg(StrategyKind::LlWfq, 1, 100_000, 20_000), 0.001, 7).unwrap();
    // A short run lets the two 512-slot rings absorb a little overload (1024 of 20 000
    // packets): the capacity of one core comes out near 1, a few percent above at most.
    assert!(
        one.utilization > 0.9 && one.utilization < 1.06,
        "one core: {one:?}"
    );
    for cores in [2, 4, 8] {
        let c = capacity(&cfg(StrategyKind::LlWfq, cores, 100_000, 20_000), 0.001, 7).unwrap();
        let speedup = c.delivered_pps / one.delivered_pps;
        assert!(
            (speedup - cores as f64).abs() <= 0.06 * cores as f64,
            "{cores} cores: speedup {speedup:.2} ({c:?})"
        );
    }
}

#[test]
fn few_flows_make_rss_sublinear_as_the_hash_bound_says() {
    let one = capacity(&cfg(StrategyKind::LlWfq, 1, 16, 20_000), 0.001, 7).unwrap();
    let c8 = cfg(StrategyKind::LlWfq, 8, 16, 20_000);
    let bound = hash_bound(&c8);
    assert!(bound < 0.75, "16 flows on 8 cores: bound {bound}");
    let eight = capacity(&c8, 0.001, 7).unwrap();
    let speedup = eight.delivered_pps / one.delivered_pps;
    assert!(speedup < 0.8 * 8.0, "speedup {speedup:.2}");
    // The busiest core limits the rest: the simulated capacity sits at the hash bound.
    assert!(
        (eight.utilization - bound).abs() < 0.1 * bound,
        "capacity {} vs hash bound {bound}",
        eight.utilization
    );
    // Class steering uses the same hash: no better.
    let mut class = c8.clone();
    class.steering = Steering::Class;
    assert_eq!(capacity(&class, 0.001, 7).unwrap(), eight);
}

#[test]
fn bad_cores_and_steering_name_the_field() {
    let mut c = cfg(StrategyKind::LlWfq, 0, 64, 1000);
    c.packets = 1000;
    assert!(run(&c).unwrap_err().to_string().starts_with("cores:"));
    c.cores = 2000;
    assert!(run(&c).unwrap_err().to_string().starts_with("cores:"));
    let e = "flow".parse::<Steering>().unwrap_err();
    assert_eq!(e.field, "steering");
    assert!(e.reason.contains("rss") && e.reason.contains("class"));
    assert_eq!("class".parse::<Steering>().unwrap(), Steering::Class);
    // sq shares one ring between classes: no such layout under class steering.
    let mut sq = cfg(StrategyKind::Sq, 2, 64, 1000);
    sq.steering = Steering::Class;
    let e = run(&sq).unwrap_err().to_string();
    assert!(e.starts_with("steering:") && e.contains("sq"), "{e}");
    sq.steering = Steering::Rss;
    assert!(run(&sq).is_ok());
    let e = capacity(&cfg(StrategyKind::LlWfq, 1, 64, 1000), 1.5, 3).unwrap_err();
    assert!(e.to_string().starts_with("loss-tolerance:"), "{e}");
}
