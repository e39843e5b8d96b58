//! The simulator against queueing theory (pure model: no wake-up cost, rings large enough).

use llr_core::sched::{AutoBudgetSpec, AutoTarget, SchedConfig, StrategyKind};
use llr_sim::model;
use llr_sim::{
    run, run_phases, Arrivals, Interrupts, Rate, ServiceDist, ServiceModel, SimConfig, Steering,
};

const X: f64 = 1_000.0;

fn cfg(
    strategy: StrategyKind,
    classes: &[&str],
    shares: &[f64],
    util: f64,
    dist: ServiceDist,
) -> SimConfig {
    SimConfig {
        sched: SchedConfig::new(strategy, classes),
        shares: shares.to_vec(),
        cores: 1,
        steering: Steering::Rss,
        flows: 100,
        rate: Rate::Utilization(util),
        packet_size: 128,
        service: ServiceModel {
            override_ns: Some(X),
            dist,
            ..ServiceModel::default()
        },
        extra_latency: false,
        ring_size: 1 << 22,
        wakeup_cost_ns: 0.0,
        interrupts: Interrupts::Napi,
        arrivals: Arrivals::Poisson,
        packets: 3_000_000,
        seed: 7,
    }
}

fn within(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * want
}

#[test]
fn md1_mean_wait_matches_pollaczek_khinchine() {
    for rho in [0.3, 0.6, 0.8] {
        let r = run(&cfg(
            StrategyKind::Sq,
            &["all"],
            &[1.0],
            rho,
            ServiceDist::Deterministic,
        ))
        .unwrap();
        let want = rho * X / (2.0 * (1.0 - rho));
        let got = r.classes[0].mean_wait_ns;
        assert!(
            within(got, want, 0.03),
            "M/D/1 rho={rho}: wait {got:.1} ns, theory {want:.1} ns"
        );
        assert_eq!(r.classes[0].dropped, 0);
    }
}

#[test]
fn mm1_mean_wait_matches_theory() {
    for rho in [0.3, 0.6, 0.8] {
        let r = run(&cfg(
            StrategyKind::Sq,
            &["all"],
            &[1.0],
            rho,
            ServiceDist::Exponential,
        ))
        .unwrap();
        let want = rho * X / (1.0 - rho);
        let got = r.classes[0].mean_wait_ns;
        assert!(
            within(got, want, 0.03),
            "M/M/1 rho={rho}: wait {got:.1} ns, theory {want:.1} ns"
        );
    }
}

/// Cobham: W_k = W0 / ((1 − σ_{k−1})(1 − σ_k)), W0 = Σ λ_i E[S_i²] / 2.
fn cobham(shares: &[f64], rho: f64, second_moment: f64) -> Vec<f64> {
    let lambda = rho / X;
    let w0: f64 = shares
        .iter()
        .map(|s| s * lambda * second_moment / 2.0)
        .sum();
    let mut sigma_prev = 0.0;
    shares
        .iter()
        .map(|s| {
            let sigma = sigma_prev + s * rho;
            let w = w0 / ((1.0 - sigma_prev) * (1.0 - sigma));
            sigma_prev = sigma;
            w
        })
        .collect()
}

#[test]
fn prio_matches_cobham_two_and_three_classes() {
    let cases: [(&[&str], &[f64]); 2] = [
        (&["rt", "be"], &[0.3, 0.7]),
        (&["hi", "mid", "lo"], &[0.2, 0.3, 0.5]),
    ];
    for (names, shares) in cases {
        for (dist, m2) in [
            (ServiceDist::Deterministic, X * X),
            (ServiceDist::Exponential, 2.0 * X * X),
        ] {
            for rho in [0.5, 0.8] {
                let r = run(&cfg(StrategyKind::Prio, names, shares, rho, dist)).unwrap();
                let want = cobham(shares, rho, m2);
                for (k, c) in r.classes.iter().enumerate() {
                    assert!(
                        within(c.mean_wait_ns, want[k], 0.03),
                        "{names:?} {dist:?} rho={rho} class {}: wait {:.1} ns, Cobham {:.1} ns",
                        c.name,
                        c.mean_wait_ns,
                        want[k]
                    );
                }
            }
        }
    }
}

#[test]
fn utilization_equals_offered_load_below_saturation() {
    for strategy in [
        StrategyKind::Sq,
        StrategyKind::LlWfq,
        StrategyKind::Rr,
        StrategyKind::Wfq,
    ] {
        for rho in [0.2, 0.5, 0.9] {
            let mut c = cfg(
                strategy,
                &["rt", "be"],
                &[0.3, 0.7],
                rho,
                ServiceDist::Deterministic,
            );
            c.packets = 500_000;
            let r = run(&c).unwrap();
            assert!(
                within(r.utilization, rho, 0.02),
                "{strategy} rho={rho}: utilisation {}",
                r.utilization
            );
        }
    }
}

#[test]
fn overload_drops_only_at_full_rings_and_conserves_packets() {
    for strategy in [
        StrategyKind::Sq,
        StrategyKind::Rr,
        StrategyKind::LlRr,
        StrategyKind::LlWfq,
        StrategyKind::Prio,
    ] {
        let mut c = cfg(
            strategy,
            &["rt", "be"],
            &[0.3, 0.7],
            1.5,
            ServiceDist::Deterministic,
        );
        c.packets = 400_000;
        c.ring_size = 512;
        let r = run(&c).unwrap();
        let mut total_dropped = 0;
        for k in &r.classes {
            assert_eq!(k.delivered + k.dropped, k.sent, "{strategy} {}", k.name);
            total_dropped += k.dropped;
        }
        assert!(
            total_dropped > 0,
            "{strategy}: 1.5× overload with 512-slot rings must drop"
        );
        // With rings large enough to hold everything, nothing is dropped at the same load.
        c.ring_size = 1 << 22;
        let r = run(&c).unwrap();
        assert!(
            r.classes
                .iter()
                .all(|k| k.dropped == 0 && k.delivered == k.sent),
            "{strategy}"
        );
    }
}

#[test]
fn ll_wfq_rt_wait_never_exceeds_tmax_with_cbr() {
    for util in [0.5, 0.9, 1.3] {
        for be_budget in [2u32, 4, 8] {
            let mut c = cfg(
                StrategyKind::LlWfq,
                &["rt", "be"],
                &[0.3, 0.7],
                util,
                ServiceDist::Deterministic,
            );
            c.sched = c.sched.with_budgets(&[60, be_budget]);
            c.arrivals = Arrivals::Cbr;
            c.ring_size = 512;
            c.packets = 500_000;
            let r = run(&c).unwrap();
            let rho_rt = 0.3 * util;
            let tmax = model::tmax_ns(be_budget, X, rho_rt).unwrap();
            let rt = &r.classes[0];
            assert!(rt.delivered > 100_000);
            assert_eq!(rt.dropped, 0, "util={util} b={be_budget}: RT lost packets");
            assert!(
                rt.max_wait_ns <= tmax + 1e-6,
                "util={util} b={be_budget}: RT max wait {} ns > Tmax {tmax} ns",
                rt.max_wait_ns
            );
        }
    }
}

/// `budget = "auto"` in one run whose RT share climbs: each phase's BE budget is Eq. 2 for the
/// ρRT it measured, it falls as ρRT rises, and the RT p99 stays within the target (CBR RT
/// arrivals: smooth, as Eq. 1 assumes) while a budget of at least 1 can meet it. A fixed
/// budget of 16 in the same run does not.
#[test]
fn auto_budget_keeps_rt_within_its_target_as_the_rt_share_climbs() {
    let shares = [0.1, 0.2, 0.3, 0.4];
    let target_ns = 10_000u64;
    let mut c = cfg(
        StrategyKind::LlWfq,
        &["rt", "be"],
        &[shares[0], 1.0 - shares[0]],
        1.5,
        ServiceDist::Deterministic,
    );
    c.arrivals = Arrivals::Cbr;
    c.packets = 200_000;
    let phases: Vec<Vec<f64>> = shares.iter().map(|&s| vec![s, 1.0 - s]).collect();
    let mut fixed = c.clone();
    fixed.sched = fixed.sched.with_budgets(&[60, 16]);
    c.sched.classes[1].budget = llr_core::sched::Budget::Auto;
    c.sched.auto_budget = Some(AutoBudgetSpec {
        target: AutoTarget::Ns(target_ns),
        window_ns: 200_000,
    });
    let auto = run_phases(&c, &phases).unwrap();
    let fixed = run_phases(&fixed, &phases).unwrap();
    let mut last = u32::MAX;
    for ((share, a), f) in shares.iter().zip(&auto).zip(&fixed) {
        let reading = a.auto_budget.expect("a reading per phase");
        // ρRT is the RT share of 1.5 × capacity.
        assert!(
            (reading.rho_rt - 1.5 * share).abs() < 0.05,
            "{share}: {reading:?}"
        );
        let m = target_ns as f64 / reading.x_ns;
        assert_eq!(reading.budget, model::max_budget(m, reading.rho_rt).max(1));
        assert!(
            reading.budget <= last,
            "{share}: the budget rose: {reading:?}"
        );
        last = reading.budget;
        let (rt, rt_fixed) = (&a.classes[0], &f.classes[0]);
        assert_eq!(rt.dropped, 0, "{share}: RT lost packets");
        assert!(
            (rt.p99_ns as f64) <= target_ns as f64,
            "{share}: RT p99 {} ns over the {target_ns} ns target (b = {})",
            rt.p99_ns,
            reading.budget
        );
        assert!(
            rt_fixed.p99_ns as f64 > target_ns as f64,
            "{share}: a BE budget of 16 should miss the target: RT p99 {} ns",
            rt_fixed.p99_ns
        );
    }
}

/// A fixed cost per grant: under overload with both classes always waiting, SQ's 64-frame
/// grants spread it over 64 frames, LL-WFQ's cycle of a 60-frame RT and a 4-frame BE grant
/// over 32 — throughput 1/(x + c_g/64) and 1/(x + c_g/32); without it both forward 1/x.
#[test]
fn a_per_grant_cost_makes_small_grants_dearer() {
    let forwarded = |strategy, grant_ns: f64| {
        let mut c = cfg(
            strategy,
            &["rt", "be"],
            &[0.5, 0.5],
            3.0,
            ServiceDist::Deterministic,
        );
        c.ring_size = 512;
        c.packets = 600_000;
        c.service.grant_ns = grant_ns;
        let r = run(&c).unwrap();
        let delivered: u64 = r.classes.iter().map(|k| k.delivered).sum();
        delivered as f64 * 1e9 / r.sim_time_ns
    };
    let (sq0, wfq0) = (
        forwarded(StrategyKind::Sq, 0.0),
        forwarded(StrategyKind::LlWfq, 0.0),
    );
    for v in [sq0, wfq0] {
        assert!((v * X / 1e9 - 1.0).abs() < 0.01, "no grant cost: {v} pps");
    }
    let c_g = 2_000.0;
    let (sq, wfq) = (
        forwarded(StrategyKind::Sq, c_g),
        forwarded(StrategyKind::LlWfq, c_g),
    );
    let sq_model = 1e9 / (X + c_g / 64.0);
    assert!(
        (sq / sq_model - 1.0).abs() < 0.01,
        "sq {sq} pps, model {sq_model}"
    );
    let wfq_model = 1e9 / (X + c_g / 32.0);
    assert!(
        (wfq / wfq_model - 1.0).abs() < 0.01,
        "ll-wfq {wfq} pps, model {wfq_model}"
    );
}

#[test]
fn low_latency_strategies_protect_rt_under_overload() {
    let mut base = cfg(
        StrategyKind::Sq,
        &["rt", "be"],
        &[0.3, 0.7],
        1.5,
        ServiceDist::Deterministic,
    );
    base.ring_size = 512;
    base.packets = 400_000;
    let sq = run(&base).unwrap();
    base.sched = SchedConfig::new(StrategyKind::LlWfq, &["rt", "be"]);
    let wfq = run(&base).unwrap();
    assert!(sq.classes[0].dropped > 0, "SQ drops RT under overload");
    assert_eq!(wfq.classes[0].dropped, 0, "LL-WFQ keeps every RT packet");
    assert!(wfq.classes[0].p99_ns * 10 < sq.classes[0].p99_ns);
}

#[test]
fn wakeup_cost_shows_napi_effect() {
    // With a wake-up cost, light load takes an interrupt per packet; heavy load polls.
    let mut c = cfg(
        StrategyKind::LlWfq,
        &["rt", "be"],
        &[0.3, 0.7],
        0.05,
        ServiceDist::Deterministic,
    );
    c.wakeup_cost_ns = 500.0;
    c.packets = 200_000;
    let light = run(&c).unwrap();
    c.rate = Rate::Utilization(0.9);
    let heavy = run(&c).unwrap();
    let per_pkt = |r: &llr_sim::SimResult| {
        r.wakeups as f64 / r.classes.iter().map(|k| k.sent).sum::<u64>() as f64
    };
    assert!(
        per_pkt(&light) > 0.9,
        "light load: {} wake-ups per packet",
        per_pkt(&light)
    );
    assert!(
        per_pkt(&heavy) < 0.5,
        "heavy load: {} wake-ups per packet",
        per_pkt(&heavy)
    );
}

#[test]
fn bad_input_names_the_field() {
    let mut c = cfg(
        StrategyKind::Sq,
        &["rt", "be"],
        &[0.3, 0.7],
        0.5,
        ServiceDist::Deterministic,
    );
    c.cores = 0;
    assert!(run(&c).unwrap_err().to_string().starts_with("cores:"));
    let mut c = cfg(
        StrategyKind::Sq,
        &["rt", "be"],
        &[1.3, -0.3],
        0.5,
        ServiceDist::Deterministic,
    );
    assert!(run(&c).unwrap_err().to_string().starts_with("classes:"));
    c.shares = vec![0.5];
    assert!(run(&c).unwrap_err().to_string().starts_with("classes:"));
}

/// Bursts of N at constant gaps, served one at a time (D^N/D/1 without overlap, ρ < 1): the
/// k-th packet of a burst waits k·x, so the mean wait is x·(N − 1)/2 exactly, every burst is
/// one wake-up, and each packet's class follows the shares.
#[test]
fn batch_arrivals_wait_for_the_packets_ahead_in_their_burst() {
    const N: u32 = 8;
    let mut c = cfg(
        StrategyKind::Sq,
        &["rt", "be"],
        &[0.3, 0.7],
        0.5,
        ServiceDist::Deterministic,
    );
    c.arrivals = Arrivals::Batch { size: N };
    c.packets = 400_000;
    let r = run(&c).unwrap();
    let sent: u64 = r.classes.iter().map(|k| k.sent).sum();
    let delivered: u64 = r.classes.iter().map(|k| k.delivered).sum();
    assert_eq!((sent, delivered), (400_000, 400_000));
    let waited: f64 = r
        .classes
        .iter()
        .map(|k| k.mean_wait_ns * k.delivered as f64)
        .sum::<f64>()
        / delivered as f64;
    let want = X * f64::from(N - 1) / 2.0;
    assert!(
        within(waited, want, 1e-6),
        "mean wait {waited:.1} ns, want {want:.1}"
    );
    assert_eq!(r.wakeups, 400_000 / u64::from(N), "one wake-up per burst");
    let rt = r.classes[0].sent as f64 / sent as f64;
    assert!((rt - 0.3).abs() < 0.005, "RT share {rt:.4}");
    // Poisson arrivals at the same load wake the core far more often.
    c.arrivals = Arrivals::Poisson;
    assert!(run(&c).unwrap().wakeups > 2 * r.wakeups);
}
