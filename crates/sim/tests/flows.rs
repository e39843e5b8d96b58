//! The flow scheduler's simulated twin on the example configurations (examples/flows/): CPU
//! shares, preemption against the quantum, the price of small quanta, idle flows, elements on
//! real frames in virtual time, and configuration errors. Deterministic and fast: the runs are
//! virtual time only.

use llr_sim::flows::{run, FlowSimConfig, FlowSimResult};

fn example(name: &str) -> FlowSimConfig {
    let path = format!("{}/../../examples/flows/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    FlowSimConfig::from_toml(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// CPU time of w1, w2, w5 normalised to their sum.
fn shares(r: &FlowSimResult) -> [f64; 3] {
    let cpu = |n: &str| r.flow(n).unwrap().cpu_ns as f64;
    let total = cpu("w1") + cpu("w2") + cpu("w5");
    [cpu("w1") / total, cpu("w2") / total, cpu("w5") / total]
}

fn assert_1_2_5(r: &FlowSimResult, what: &str) {
    let got = shares(r);
    for (g, want) in got.iter().zip([1.0 / 8.0, 2.0 / 8.0, 5.0 / 8.0]) {
        assert!((g / want - 1.0).abs() < 0.05, "{what}: shares {got:?}");
    }
}

#[test]
fn weights_1_2_5_share_cpu_time_with_equal_and_unequal_costs() {
    let r = run(&example("shares.toml")).unwrap();
    assert_1_2_5(&r, "equal costs");
    // Equal costs: packets follow CPU time.
    let done = |r: &FlowSimResult, n: &str| r.flow(n).unwrap().done as f64;
    assert!((done(&r, "w5") / done(&r, "w1") / 5.0 - 1.0).abs() < 0.05);

    let r = run(&example("shares-unequal.toml")).unwrap();
    assert_1_2_5(&r, "unequal costs");
    // w1's packets cost ~7× w2's (10.4 vs 1.5 µs with count and forward): in packets, far from
    // 1:2. A scheduler sharing packets instead of CPU time would give ~0.5 here.
    let ratio = done(&r, "w1") / done(&r, "w2");
    assert!(ratio < 0.1, "w1/w2 packets {ratio}");
}

/// Paper 003 §6.5.1 (CPU balance): with weight 1 the input flow may take only 1/9 of the CPU,
/// less than draining these flows' packets needs, and the heaviest-weighted flow runs dry. The
/// shares test above depends on the example's input-weight, so this shows it can fail.
#[test]
fn an_underprovisioned_input_flow_starves_the_heavy_weights() {
    let mut c = example("shares.toml");
    c.flow_scheduler.input_weight = 1;
    let r = run(&c).unwrap();
    let s = shares(&r);
    assert!(s[2] < 0.9 * 5.0 / 8.0, "w5 got {} anyway", s[2]);
}

/// The latency-sensitive flow beside a flow of five 10 µs elements: its worst wait is about one
/// element plus the heavy flow's quantum, and its p99 grows with the quantum.
#[test]
fn preemption_bounds_the_light_flows_wait_by_quantum_plus_one_element() {
    let base = example("preempt.toml");
    let cost = &base.cost;
    let input = cost.input_ns;
    let switch = cost.switch_ns;
    // The largest step of a bulk packet: a 10 µs work element (forwarding 1500 B is 3.7 µs).
    let element = 10_000.0;
    // Besides q + one element, a voice packet can wait for: the input turn it arrived during
    // and the one that drains it (each ≤ batch frames), three context switches (→ heavy,
    // → input, → voice), and its own service plus one earlier voice packet's (count and
    // forwarding of 128 B).
    let voice_service = cost.element_ns + 2.34 * 128.0 + 225.18;
    let slack = 2.0 * base.batch as f64 * input + 3.0 * switch + 2.0 * voice_service;
    let mut p99s = Vec::new();
    for q in [1.0, 5.0, 10.0, 20.0, 50.0] {
        let r = run(&base.with_quantum_us(q)).unwrap();
        let voice = r.flow("voice").unwrap();
        assert!(voice.latency_sensitive);
        assert!(voice.forwarded > 4_000, "{} voice packets", voice.forwarded);
        assert_eq!(voice.ring_drops + voice.queue_drops, 0);
        let bound = q * 1000.0 + element + slack;
        assert!(
            (voice.max_ns as f64) <= bound,
            "q={q} µs: voice waited {} ns > {bound}",
            voice.max_ns
        );
        if q < 40.0 {
            assert!(
                voice.max_ns < 50_000,
                "q={q} µs: voice waited a whole bulk packet ({} ns)",
                voice.max_ns
            );
            assert!(r.flow("bulk").unwrap().preemptions > 0);
        }
        p99s.push(voice.p99_ns);
    }
    // Non-decreasing (q = 5 and 10 µs both stop after one 10 µs element: equal), and clearly
    // larger at 50 µs than at 1 µs.
    assert!(p99s.windows(2).all(|w| w[0] <= w[1]), "p99s {p99s:?}");
    assert!(p99s[4] > 3 * p99s[0], "p99s {p99s:?}");
}

#[test]
fn small_quanta_cost_throughput_through_context_switches() {
    let base = example("shares.toml");
    let kpps = |c: &FlowSimConfig| run(c).unwrap().throughput_pps / 1e3;
    let t: Vec<f64> = [1.0, 5.0, 20.0, 50.0]
        .iter()
        .map(|&q| kpps(&base.with_quantum_us(q)))
        .collect();
    assert!(t.windows(2).all(|w| w[0] < w[1]), "kpps by q {t:?}");
    assert!(t[0] < 0.85 * t[3], "kpps by q {t:?}");
    // Without a switch cost, the quantum costs (almost) nothing: the price is the switches.
    let mut free = base.clone();
    free.cost.switch_ns = 0.0;
    let (small, large) = (
        kpps(&free.with_quantum_us(1.0)),
        kpps(&free.with_quantum_us(50.0)),
    );
    assert!((small / large - 1.0).abs() < 0.02, "{small} vs {large}");
}

/// The switch cost's log term: a switch costs switch-ns + per-doubling · log2(eligible), the
/// flows eligible once the next one is picked. With k backlogged flows that is k − 1 of them,
/// plus the input flow while the ring holds frames, so the mean overhead per switch lies
/// between the costs at k − 1 and k + 1.
#[test]
fn switch_cost_grows_with_the_log_of_the_eligible_flows() {
    let base = example("shares.toml");
    let k = base.traffic.len() as f64;
    let mut c = base.with_quantum_us(5.0);
    c.cost.switch_ns = 100.0;
    c.cost.switch_per_doubling_ns = 40.0;
    let r = run(&c).unwrap();
    let per = r.switch_overhead_ns as f64 / r.switches as f64;
    let (lo, hi) = (
        100.0 + 40.0 * (k - 1.0).log2(),
        100.0 + 40.0 * (k + 1.0).log2(),
    );
    assert!(
        r.switches > 1000 && per >= lo - 0.5 && per <= hi + 0.5,
        "{per} ns per switch over {} switches, expected {lo}..{hi}",
        r.switches
    );
    c.cost.switch_per_doubling_ns = 0.0;
    let fixed = run(&c).unwrap();
    assert_eq!(fixed.switch_overhead_ns, 100 * fixed.switches);
    c.cost.switch_per_doubling_ns = -1.0;
    let e = run(&c).unwrap_err();
    assert_eq!(e.field, "cost.switch-per-doubling-ns", "{e}");
}

#[test]
fn ten_thousand_idle_flows_cost_nothing() {
    let mut c = example("shares.toml");
    c.duration_ms = 50.0;
    let busy = run(&c).unwrap();
    c.idle_flows = 10_000;
    let idle = run(&c).unwrap();
    assert!(idle.flows_installed >= 10_000 + busy.flows_installed);
    let d = idle.throughput_pps / busy.throughput_pps - 1.0;
    assert!(d.abs() < 0.01, "throughput changed by {:.2} %", 100.0 * d);
    assert_eq!(
        idle.flows.len(),
        busy.flows.len(),
        "an idle flow saw a packet"
    );
    assert_eq!(idle.switches, busy.switches, "idle flows were scheduled");
    // Too many for the table: refused, naming the field.
    c.idle_flows = 20_000;
    assert_eq!(run(&c).unwrap_err().field, "idle-flows");
}

/// The elements are the router's, run on real frames in virtual time: a meter polices at its
/// configured rate, an ACL drops what it denies, and `work` costs what it says.
#[test]
fn real_elements_run_in_virtual_time() {
    let c = FlowSimConfig::from_toml(
        r#"
        duration-ms = 1000
        [[acls]]
        name = "no-dns"
        rules = [{ class = "deny", proto = "udp", dst_port = 53 }]
        [[flows]]
        name = "metered"
        match = { proto = "udp", dst_port = 5000 }
        pipeline = ["meter(pps=1000,burst=10)", "work(us=3)"]
        [[flows]]
        name = "guarded"
        match = { proto = "udp", src = "10.0.0.7" }
        precedence = 1
        pipeline = ["acl(no-dns)"]
        [[traffic]]
        pps = 5000
        arrivals = "cbr"
        [[traffic]]
        src = "10.0.0.7"
        dport = 53
        pps = 100
        [[traffic]]
        src = "10.0.0.7"
        dport = 80
        pps = 100
    "#,
    )
    .unwrap();
    let r = run(&c).unwrap();
    let m = r.flow("metered").unwrap();
    assert!(
        (1_000..=1_020).contains(&m.forwarded),
        "meter passed {}",
        m.forwarded
    );
    assert!(m.element_drops > 3_900, "{}", m.element_drops);
    // Forwarded packets each spent 3 µs in `work`, dropped ones only the meter's element-ns.
    let expect = m.forwarded * 3_000 + m.done * c.cost.element_ns as u64;
    assert!(m.cpu_ns >= expect, "{} < {expect}", m.cpu_ns);
    let g = r.flow("guarded").unwrap();
    assert!(g.element_drops > 50 && g.forwarded > 50, "{g:?}");
    assert_eq!(g.element_drops + g.forwarded, g.done);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let c = example("preempt.toml");
    assert_eq!(run(&c).unwrap(), run(&c).unwrap());
    let mut other = c.clone();
    other.seed = 2;
    assert_ne!(
        run(&c).unwrap().flow("voice").unwrap().forwarded,
        run(&other).unwrap().flow("voice").unwrap().forwarded
    );
}

#[test]
fn bad_configs_name_the_field() {
    let field = |toml: &str| {
        let c = FlowSimConfig::from_toml(toml).map_err(|e| e.field);
        match c {
            Err(f) => f,
            Ok(c) => run(&c).unwrap_err().field,
        }
    };
    let traffic = "[[traffic]]\npps = 1000\n";
    let flow = "[[flows]]\nname = \"x\"\nmatch = { proto = \"udp\" }\n";
    assert_eq!(
        field(&format!("{flow}weight = 0\n{traffic}")),
        "flows[x].weight"
    );
    assert_eq!(
        field(&format!("{flow}pipeline = [\"crypt\"]\n{traffic}")),
        "flows[x].pipeline"
    );
    assert_eq!(
        field(&format!("[flow-scheduler]\nquantum-us = 0\n{traffic}")),
        "flow-scheduler.quantum-us"
    );
    assert_eq!(
        field(&format!("[cost]\nswitch-ns = -1\n{traffic}")),
        "cost.switch-ns"
    );
    assert_eq!(field("[[traffic]]\nsize = 64\n"), "traffic[0].pps");
    assert_eq!(
        field("[[traffic]]\npps = 1\nbacklogged = true\n"),
        "traffic[0].pps"
    );
    assert_eq!(
        field(&format!(
            "{traffic}[[traffic]]\npps = 1\nclass = \"gold\"\n"
        )),
        "traffic[1].class"
    );
    assert_eq!(
        field("[[traffic]]\npps = 1\nsize = 20\n"),
        "traffic[0].size"
    );
    assert_eq!(
        field("[[traffic]]\npps = 1\nsrc = \"10.0.0.1\"\ndst = \"::1\"\n"),
        "traffic[0].dst"
    );
    assert_eq!(
        field("duration-ms = 0\n[[traffic]]\npps = 1\n"),
        "duration-ms"
    );
    assert_eq!(field("batch = 0\n[[traffic]]\npps = 1\n"), "batch");
    assert_eq!(field("seed = 1\n"), "traffic");
    // Schema errors (unknown or mistyped keys) name the line and the key.
    let e = FlowSimConfig::from_toml("seed = 1\n\n[cost]\nswitch = 3\n").unwrap_err();
    assert_eq!(e.field, "line 4", "{e}");
    assert!(e.reason.contains("unknown field `switch`"), "{e}");
}

/// A branching pipeline (examples/flows/branch.toml): voice, a third of the packets, skips the
/// 5 µs `work` that the rest pays for. Against the same flow with every packet through `work`
/// (a chain), the CPU per packet is lower by a third of 5 µs; the branch's own elements (one
/// more on the bulk arm: `goto`) are within the 15 % allowed.
#[test]
fn a_branch_spares_one_arm_the_other_arms_work() {
    let graph = example("branch.toml");
    let mut chain = graph.clone();
    chain.flows[0].pipeline = vec!["work(us=5)".into(), "dscp(set=46)".into(), "count".into()];
    let per_pkt = |c: &FlowSimConfig| {
        let r = run(c).unwrap();
        let f = r.flow("edge").unwrap();
        assert_eq!(f.forwarded, r.offered, "everything offered is forwarded");
        assert!(f.forwarded > 11_000, "{}", f.forwarded);
        f.cpu_ns as f64 / f.done as f64
    };
    let (g, c) = (per_pkt(&graph), per_pkt(&chain));
    let saved = c - g;
    assert!(
        (saved / (5000.0 / 3.0) - 1.0).abs() < 0.15,
        "graph {g:.0} ns, chain {c:.0} ns per packet: saved {saved:.0}"
    );
}
