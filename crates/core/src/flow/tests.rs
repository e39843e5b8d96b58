use super::element::{self, Cx, Pkt, Step};
use super::*;
use crate::wire::build::{frame, FrameSpec};
use crate::wire::checksum;

/// A packet in these tests: its flow's per-element cost and an arrival time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct P {
    arrived: u64,
    seq: u64,
}

/// Runs the scheduler in virtual time, every flow backlogged with `backlog` packets refilled
/// after each turn; `cost(flow, pos)` is the CPU time of element `pos` of `flow`'s packets.
fn run_backlogged(
    s: &mut FlowSched<P>,
    flows: &[FlowId],
    turns: usize,
    cost: impl Fn(FlowId, usize) -> u64,
) -> u64 {
    let mut now = 0u64;
    let mut seq = 0;
    for _ in 0..turns {
        for &f in flows {
            while s.view(f).unwrap().queue_len < 4 {
                seq += 1;
                s.enqueue(f, P { arrived: now, seq }).unwrap();
            }
        }
        match s.pick() {
            Next::Flow(f) => {
                let t = s.run_turn(f, |_, pos, p| {
                    let c = cost(f, pos);
                    (
                        if pos < 1 {
                            Progress::Next(p)
                        } else {
                            Progress::Finished
                        },
                        c,
                    )
                });
                now += t.cost_ns;
            }
            other => panic!("{other:?}"),
        }
    }
    now
}

fn weighted(w: u32) -> FlowParams {
    FlowParams {
        share: Share::Weight(w),
        quantum_ns: 5_000,
        queue_limit: 64,
    }
}

/// One element before forward, so every packet is two steps: `pos` 0 and 1.
fn one_element() -> Pipeline {
    Pipeline::new(vec![Box::new(element::Count)])
}

fn cpu_shares(s: &FlowSched<P>, flows: &[FlowId]) -> Vec<f64> {
    let cpu: Vec<f64> = flows
        .iter()
        .map(|&f| s.view(f).unwrap().stats.cpu_ns as f64)
        .collect();
    let total: f64 = cpu.iter().sum();
    cpu.iter().map(|c| c / total).collect()
}

#[test]
fn weights_1_2_5_get_their_cpu_share_with_equal_costs() {
    let mut s = FlowSched::<P>::new(weighted(1), 16).unwrap();
    let ids: Vec<FlowId> = [1, 2, 5]
        .iter()
        .map(|&w| s.add(&format!("w{w}"), weighted(w), one_element()).unwrap())
        .collect();
    run_backlogged(&mut s, &ids, 20_000, |_, _| 500);
    let got = cpu_shares(&s, &ids);
    for (g, want) in got.iter().zip([1.0 / 8.0, 2.0 / 8.0, 5.0 / 8.0]) {
        assert!((g / want - 1.0).abs() < 0.05, "shares {got:?}");
    }
}

#[test]
fn cpu_time_not_packets_is_shared_when_costs_differ() {
    let mut s = FlowSched::<P>::new(weighted(1), 16).unwrap();
    let ids: Vec<FlowId> = [1, 2, 5]
        .iter()
        .map(|&w| s.add(&format!("w{w}"), weighted(w), one_element()).unwrap())
        .collect();
    // Flow w2's packets cost 10 µs, the others' 1 µs (half per step).
    let heavy = ids[1];
    run_backlogged(
        &mut s,
        &ids,
        40_000,
        |f, _| if f == heavy { 5_000 } else { 500 },
    );
    let got = cpu_shares(&s, &ids);
    for (g, want) in got.iter().zip([1.0 / 8.0, 2.0 / 8.0, 5.0 / 8.0]) {
        assert!((g / want - 1.0).abs() < 0.05, "shares {got:?}");
    }
    // ...which in packets is far from 1:2:5: the heavy flow sends ~10× fewer per CPU share.
    let done = |i: usize| s.view(ids[i]).unwrap().stats.done as f64;
    assert!(done(1) / done(0) < 0.5, "{} vs {}", done(1), done(0));
}

#[test]
fn guaranteed_fraction_holds_against_many_weighted_flows() {
    let mut s = FlowSched::<P>::new(weighted(1), 64).unwrap();
    let g = s
        .add(
            "guaranteed",
            FlowParams {
                share: Share::Cpu(0.4),
                ..weighted(1)
            },
            one_element(),
        )
        .unwrap();
    let mut ids = vec![g];
    for i in 0..10 {
        ids.push(s.add(&format!("f{i}"), weighted(3), one_element()).unwrap());
    }
    run_backlogged(&mut s, &ids, 40_000, |_, _| 700);
    let got = cpu_shares(&s, &ids)[0];
    assert!((got / 0.4 - 1.0).abs() < 0.05, "guaranteed flow got {got}");
    let too_much = FlowParams {
        share: Share::Cpu(0.7),
        ..weighted(1)
    };
    let e = s.add("x", too_much, one_element()).unwrap_err();
    assert_eq!(e.field, "cpu", "{e}");
}

/// Paper 003 §3.1: a latency-sensitive flow beside a flow whose packets cost 50 µs in five
/// 10 µs elements waits about one element plus its quantum, not a whole packet.
#[test]
fn preemption_bounds_the_wait_by_an_element_not_a_packet() {
    for quantum_ns in [1_000u64, 10_000, 50_000] {
        let mut s = FlowSched::<P>::new(weighted(1), 16).unwrap();
        let five = Pipeline::new(
            (0..5)
                .map(|_| element::parse("work(us=10)", &()).unwrap())
                .collect(),
        );
        let heavy = s
            .add(
                "heavy",
                FlowParams {
                    quantum_ns,
                    ..weighted(1)
                },
                five,
            )
            .unwrap();
        let light = s
            .add("light", weighted(1), Pipeline::forward_only())
            .unwrap();
        let mut now = 0u64;
        let mut next_light = 3_000u64;
        let mut waits = Vec::new();
        for _ in 0..20_000 {
            while s.view(heavy).unwrap().queue_len < 8 {
                s.enqueue(
                    heavy,
                    P {
                        arrived: now,
                        seq: 0,
                    },
                )
                .unwrap();
            }
            // Light packets arrive now and then (Poisson-ish, deterministic spread); they are
            // seen at turn boundaries, as the live input flow sees its rings.
            while next_light <= now {
                let _ = s.enqueue(
                    light,
                    P {
                        arrived: next_light,
                        seq: 0,
                    },
                );
                next_light += 173_000 + (next_light * 7919) % 97_000;
            }
            let Next::Flow(f) = s.pick() else { panic!() };
            let t = s.run_turn(f, |pl, pos, p| {
                if f == light {
                    waits.push(now - p.arrived);
                    (Progress::Finished, 1_000)
                } else if pos < pl.len() {
                    (Progress::Next(p), 10_000)
                } else {
                    (Progress::Finished, 200)
                }
            });
            now += t.cost_ns;
        }
        waits.sort_unstable();
        let max = *waits.last().unwrap();
        // Bound: the heavy turn runs ≥ q then finishes its element (≤ 10 µs), plus one light
        // packet queued ahead (1 µs).
        let bound = quantum_ns + 10_000 + 1_000;
        assert!(waits.len() > 50, "{} light packets", waits.len());
        assert!(max <= bound, "q={quantum_ns}: max wait {max} > {bound}");
        if quantum_ns < 50_000 {
            assert!(
                max < 50_000,
                "q={quantum_ns}: waited a whole packet ({max} ns)"
            );
            assert!(s.view(heavy).unwrap().stats.preemptions > 0);
        }
    }
}

#[test]
fn idle_flows_are_never_visited() {
    let mut s = FlowSched::<P>::new(weighted(1), 20_000).unwrap();
    for i in 0..10_000 {
        s.add(&format!("idle{i}"), weighted(1), Pipeline::forward_only())
            .unwrap();
    }
    let a = s.add("a", weighted(1), one_element()).unwrap();
    let b = s.add("b", weighted(1), one_element()).unwrap();
    run_backlogged(&mut s, &[a, b], 1_000, |_, _| 100);
    let visited: u64 = s
        .views()
        .filter(|v| v.id != a && v.id != b)
        .map(|v| v.stats.turns)
        .sum();
    assert_eq!(visited, 0);
    assert!(s.eligible() <= 2);
    assert_eq!(
        s.views().find(|v| v.id == a).unwrap().stats.turns
            + s.views().find(|v| v.id == b).unwrap().stats.turns,
        1_000
    );
}

#[test]
fn input_flow_is_scheduled_by_its_share() {
    let mut s = FlowSched::<P>::new(weighted(1), 4).unwrap();
    let f = s.add("f", weighted(3), one_element()).unwrap();
    let (mut input_ns, mut flow_ns) = (0u64, 0u64);
    for _ in 0..10_000 {
        s.set_input_ready(true);
        while s.view(f).unwrap().queue_len < 4 {
            s.enqueue(f, P { arrived: 0, seq: 0 }).unwrap();
        }
        match s.pick() {
            Next::Input => {
                input_ns += 2_000;
                s.input_done(2_000, true);
            }
            Next::Flow(id) => {
                flow_ns += s
                    .run_turn(id, |_, pos, p| {
                        (
                            if pos == 0 {
                                Progress::Next(p)
                            } else {
                                Progress::Finished
                            },
                            700,
                        )
                    })
                    .cost_ns
            }
            Next::Idle => panic!(),
        }
    }
    let share = input_ns as f64 / (input_ns + flow_ns) as f64;
    assert!((share / 0.25 - 1.0).abs() < 0.05, "input share {share}");
}

#[test]
fn removing_and_shrinking_hand_packets_back() {
    let mut s = FlowSched::<P>::new(weighted(1), 4).unwrap();
    let f = s
        .add(
            "f",
            weighted(1),
            Pipeline::new(
                (0..3)
                    .map(|_| element::parse("count", &()).unwrap())
                    .collect(),
            ),
        )
        .unwrap();
    for seq in 0..10 {
        s.enqueue(f, P { arrived: 0, seq }).unwrap();
    }
    // Stop a packet mid-pipeline: a 1 ns quantum ends the turn after one element.
    s.set(
        f,
        FlowParams {
            quantum_ns: 1,
            ..weighted(1)
        },
    )
    .unwrap();
    assert_eq!(s.pick(), Next::Flow(f));
    let t = s.run_turn(f, |_, _, p| (Progress::Next(p), 5));
    assert!(t.mid_packet);
    let dropped = s
        .set(
            f,
            FlowParams {
                queue_limit: 4,
                ..weighted(1)
            },
        )
        .unwrap();
    assert_eq!(
        dropped.iter().map(|p| p.seq).collect::<Vec<_>>(),
        [5, 6, 7, 8, 9]
    );
    let rest = s.remove(f).unwrap();
    assert_eq!(
        rest.iter().map(|p| p.seq).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert_eq!(s.eligible(), 0, "a removed flow leaves the eligible set");
    assert!(s.remove(f).is_err());
    assert_eq!(s.pick(), Next::Idle);
}

#[test]
fn bad_parameters_name_the_field() {
    let mut s = FlowSched::<P>::new(weighted(1), 1).unwrap();
    let e = s.add("z", weighted(0), Pipeline::default()).unwrap_err();
    assert_eq!(e.field, "weight");
    let e = s
        .add(
            "q",
            FlowParams {
                quantum_ns: 0,
                ..weighted(1)
            },
            Pipeline::default(),
        )
        .unwrap_err();
    assert_eq!(e.field, "quantum-us");
    s.add("one", weighted(1), Pipeline::default()).unwrap();
    let e = s.add("two", weighted(1), Pipeline::default()).unwrap_err();
    assert_eq!(e.field, "flows", "{e}");
    assert_eq!(s.len(), 1, "refused flows leave nothing behind");
}

fn udp(src: &str, dst: &str, sport: u16, dport: u16, dscp: u8) -> Vec<u8> {
    frame(&FrameSpec {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        protocol: 17,
        src_port: sport,
        dst_port: dport,
        dscp,
        ..Default::default()
    })
}

fn spec(name: &str, m: &str) -> FlowSpec {
    FlowSpec {
        name: name.into(),
        matches: Some(crate::classify::RuleSpec::parse_match(m).unwrap()),
        ..Default::default()
    }
}

fn classes() -> Vec<String> {
    vec!["rt".into(), "be".into()]
}

fn no_if(_: &str) -> Option<u32> {
    None
}

/// One BE flow `name` matching everything, with `pipeline` and the ACL `acl` it may name.
fn one_flow(name: &str, pipeline: &[&str], acl: AclSpec) -> Flows<P> {
    Flows::new(
        &FlowSchedConfig::default(),
        &classes(),
        &[FlowSpec {
            name: name.into(),
            class: Some("be".into()),
            pipeline: pipeline.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }],
        &[acl],
        &no_if,
    )
    .unwrap()
}

#[test]
fn lookup_order_exact_then_precedence_then_class() {
    let exact = spec(
        "conn",
        "proto=udp src=10.0.0.1/32 dst=10.1.0.1/32 sport=1000 dport=2000",
    );
    let wide = spec("video", "proto=udp dst=10.1.0.0/16");
    let mut narrow = spec("voice", "proto=udp dst=10.1.0.0/24 dport=2000-2999");
    narrow.precedence = Some(5);
    let mut cls = FlowSpec {
        name: "rt-all".into(),
        class: Some("rt".into()),
        ..Default::default()
    };
    cls.weight = Some(4);
    let f: Flows<P> = Flows::new(
        &FlowSchedConfig::default(),
        &classes(),
        &[exact, wide, narrow, cls],
        &[],
        &no_if,
    )
    .unwrap();
    let id = |n: &str| f.sched.find(n).unwrap();
    let pkt = udp("10.0.0.1", "10.1.0.1", 1000, 2000, 0);
    assert_eq!(f.classify(&pkt, 1, 1), id("conn"));
    let pkt = udp("10.0.0.2", "10.1.0.1", 1000, 2000, 0);
    assert_eq!(f.classify(&pkt, 1, 1), id("voice"), "precedence 5 before 0");
    let pkt = udp("10.0.0.2", "10.1.9.1", 1000, 2000, 0);
    assert_eq!(f.classify(&pkt, 1, 1), id("video"));
    let pkt = udp("10.0.0.2", "10.9.0.1", 1000, 2000, 0);
    assert_eq!(
        f.classify(&pkt, 1, 0),
        id("rt-all"),
        "class rt's global flow"
    );
    assert_eq!(
        f.classify(&pkt, 1, 1),
        id("class:be"),
        "default global flow"
    );
    assert_eq!(
        f.classify(&[0u8; 10], 1, 1),
        id("class:be"),
        "malformed: class flow"
    );
}

#[test]
fn config_errors_name_the_flow_and_field_and_change_nothing() {
    let cfg = FlowSchedConfig::default();
    let bad = |s: FlowSpec| {
        Flows::<P>::new(&cfg, &classes(), &[s], &[], &no_if)
            .err()
            .unwrap()
    };
    let mut s = spec("x", "proto=udp");
    s.pipeline = vec!["crypt(aes)".into()];
    let e = bad(s);
    assert_eq!(e.field, "flows[x].pipeline");
    assert!(e.reason.contains("unknown element `crypt`"), "{e}");
    let mut s = spec("x", "proto=udp");
    s.weight = Some(0);
    assert_eq!(bad(s).field, "flows[x].weight");
    let mut s = spec("x", "proto=udp");
    s.quantum_us = Some(0.0);
    assert_eq!(bad(s).field, "flows[x].quantum-us");
    let mut s = spec("x", "proto=udp");
    s.pipeline = vec!["forward".into(), "count".into()];
    assert!(bad(s).reason.contains("last element"));

    let mut f: Flows<P> = Flows::new(
        &cfg,
        &classes(),
        &[spec("a", "proto=udp dst=10.0.0.0/8")],
        &[],
        &no_if,
    )
    .unwrap();
    let before = f.list();
    let e = f.add(&spec("b", "dst=10.1.0.0/16"), &no_if).unwrap_err();
    assert_eq!(e.field, "precedence", "{e}");
    assert!(e.reason.contains("`a`"), "{e}");
    let mut b = spec("b", "dst=10.1.0.0/16");
    b.precedence = Some(1);
    f.add(&b, &no_if).unwrap();
    assert!(
        f.add(&spec("c", "proto=tcp dst=10.0.0.0/8"), &no_if)
            .is_ok(),
        "tcp and udp never overlap"
    );
    assert_eq!(
        f.add(&spec("a", "proto=sctp"), &no_if).unwrap_err().field,
        "name"
    );
    let _ = before;

    let small = FlowSchedConfig {
        max_flows: 2,
        ..cfg.clone()
    };
    let e = Flows::<P>::new(
        &small,
        &classes(),
        &[
            spec("a", "proto=udp"),
            spec("b", "proto=tcp"),
            spec("c", "proto=icmp"),
        ],
        &[],
        &no_if,
    )
    .err()
    .unwrap();
    assert_eq!(e.field, "flows[c].flows", "{e}");
}

#[test]
fn set_and_remove_at_run_time() {
    let mut f: Flows<P> = Flows::new(
        &FlowSchedConfig::default(),
        &classes(),
        &[spec("v", "proto=udp dst=10.1.0.0/16")],
        &[],
        &no_if,
    )
    .unwrap();
    let pkt = udp("10.0.0.2", "10.1.9.1", 1, 2, 0);
    let v = f.sched.find("v").unwrap();
    assert_eq!(f.classify(&pkt, 1, 1), v);
    let set = FlowSpec {
        name: "v".into(),
        weight: Some(7),
        pipeline: vec!["work(us=3)".into()],
        ..Default::default()
    };
    f.set(&set, &no_if).unwrap();
    let info = f.list().into_iter().find(|i| i.name == "v").unwrap();
    assert_eq!(info.share, Share::Weight(7));
    assert_eq!(info.pipeline, ["work(ns=3000)", "forward"]);
    assert_eq!(info.matches, "proto=udp dst=10.1.0.0/16");
    let mut moved = set.clone();
    moved.matches = Some(crate::classify::RuleSpec::parse_match("proto=tcp").unwrap());
    assert_eq!(f.set(&moved, &no_if).unwrap_err().field, "match");
    f.remove("v").unwrap();
    assert_eq!(f.classify(&pkt, 1, 1), f.sched.find("class:be").unwrap());
    assert!(f.remove("v").is_err());
    assert!(
        f.remove("class:be").is_err(),
        "class flows are not removable"
    );
}

fn run_el(e: &mut dyn element::Element, frame: &mut [u8], now_ns: u64) -> Step {
    let len = frame.len();
    let mut spent = 0;
    let mut spend = |ns| spent += ns;
    let mut cx = Cx {
        now_ns,
        spend: &mut spend,
    };
    e.process(
        &mut Pkt {
            frame,
            len,
            ingress: 1,
        },
        &mut cx,
    )
}

#[test]
fn meter_polices_at_its_rate() {
    let mut m = element::parse("meter(pps=1000,burst=10)", &()).unwrap();
    let mut pkt = udp("10.0.0.1", "10.0.0.2", 1, 2, 0);
    // 10 000 packets over one second at 10 kpps: the burst plus ~1000 pass.
    let passed = (0..10_000u64)
        .filter(|i| run_el(m.as_mut(), &mut pkt, i * 100_000) == Step::Next)
        .count();
    assert!((1005..=1011).contains(&passed), "{passed}");
    let mut mark = element::parse("meter(pps=1,burst=1,exceed=dscp:10)", &()).unwrap();
    assert_eq!(run_el(mark.as_mut(), &mut pkt, 0), Step::Next);
    assert_eq!(run_el(mark.as_mut(), &mut pkt, 1), Step::Next);
    let m = crate::wire::parse_frame(&pkt).unwrap();
    assert_eq!(m.dscp, 10, "exceeding packet remarked");
}

#[test]
fn dscp_rewrite_keeps_the_ipv4_checksum_valid() {
    let mut e = element::parse("dscp(set=46)", &()).unwrap();
    let mut pkt = udp("10.0.0.1", "10.0.0.2", 1, 2, 8);
    assert_eq!(run_el(e.as_mut(), &mut pkt, 0), Step::Next);
    let m = crate::wire::parse_frame(&pkt).unwrap();
    assert_eq!(m.dscp, 46);
    let l3 = m.l3_offset as usize;
    assert!(
        checksum::verify(&pkt[l3..l3 + 20]),
        "header checksum still valid"
    );
    let mut v6 = udp("2001:db8::1", "2001:db8::2", 1, 2, 8);
    e.process(
        &mut Pkt {
            len: v6.len(),
            frame: &mut v6,
            ingress: 1,
        },
        &mut Cx {
            now_ns: 0,
            spend: &mut |_| {},
        },
    );
    assert_eq!(crate::wire::parse_frame(&v6).unwrap().dscp, 46);
}

#[test]
fn acl_and_work_elements() {
    let acl = AclSpec {
        name: "no-dns".into(),
        default: None,
        rules: vec!["class=deny proto=udp dport=53".parse().unwrap()],
    };
    let mut f = one_flow("guest", &["acl(no-dns)", "work(us=2)"], acl);
    let id = f.sched.find("guest").unwrap();
    let mut dns = udp("10.0.0.1", "10.0.0.2", 1, 53, 0);
    let mut web = udp("10.0.0.1", "10.0.0.2", 1, 80, 0);
    assert_eq!(f.classify(&dns, 1, 1), id);
    f.sched.enqueue(id, P { arrived: 0, seq: 0 }).unwrap();
    f.sched.enqueue(id, P { arrived: 0, seq: 1 }).unwrap();
    assert_eq!(f.sched.pick(), Next::Flow(id));
    let mut spent = 0u64;
    let mut outcomes = Vec::new();
    f.sched.run_turn(id, |pl, pos, p| {
        if pos == pl.len() {
            outcomes.push((p.seq, "forward"));
            return (Progress::Finished, 0);
        }
        let buf: &mut Vec<u8> = if p.seq == 0 { &mut dns } else { &mut web };
        let len = buf.len();
        let mut spend = |ns| spent += ns;
        let mut cx = Cx {
            now_ns: 0,
            spend: &mut spend,
        };
        match pl.run(
            pos,
            &mut Pkt {
                frame: buf,
                len,
                ingress: 1,
            },
            &mut cx,
        ) {
            Step::Next => (Progress::Next(p), 0),
            Step::Jump(k) => (Progress::At(p, usize::from(k)), 0),
            Step::Drop => {
                outcomes.push((p.seq, "dropped"));
                (Progress::Finished, 0)
            }
        }
    });
    assert_eq!(outcomes, [(0, "dropped"), (1, "forward")]);
    assert_eq!(spent, 2_000, "work ran for the permitted packet only");
    let info = f.list().into_iter().find(|i| i.name == "guest").unwrap();
    assert_eq!(info.elements[0].dropped, 1);
    assert_eq!(info.elements[1].packets, 1);
    let e = Flows::<P>::new(
        &FlowSchedConfig::default(),
        &classes(),
        &[FlowSpec {
            name: "g".into(),
            class: Some("be".into()),
            pipeline: vec!["acl(nope)".into()],
            ..Default::default()
        }],
        &[],
        &no_if,
    )
    .err()
    .unwrap();
    assert!(e.reason.contains("no ACL named `nope`"), "{e}");
}

#[test]
fn element_text_round_trips() {
    for t in [
        "count",
        "meter(pps=1000,burst=32,exceed=drop)",
        "meter(bps=8000000,burst=1500,exceed=dscp:8)",
        "dscp(set=46)",
        "work(ns=10000)",
    ] {
        assert_eq!(element::parse(t, &()).unwrap().text(), t);
    }
    assert!(element::parse("meter(pps=10,colour=red)", &())
        .unwrap_err()
        .reason
        .contains("unknown parameter `colour`"));
    assert!(element::parse("work(us=x)", &()).is_err());
}

/// Weighted flows share what the *active* guaranteed flows leave: idle installed flows change
/// nothing, and a guaranteed flow gets its fraction, not more, while weighted flows want CPU.
#[test]
fn idle_flows_do_not_dilute_weighted_shares() {
    for idle in [0, 10_000] {
        let mut s = FlowSched::<P>::new(weighted(1), 20_000).unwrap();
        for i in 0..idle {
            s.add(&format!("idle{i}"), weighted(1), Pipeline::forward_only())
                .unwrap();
        }
        let g = s
            .add(
                "g",
                FlowParams {
                    share: Share::Cpu(0.4),
                    ..weighted(1)
                },
                one_element(),
            )
            .unwrap();
        let a = s.add("a", weighted(1), one_element()).unwrap();
        let b = s.add("b", weighted(3), one_element()).unwrap();
        run_backlogged(&mut s, &[g, a, b], 40_000, |_, _| 600);
        let got = cpu_shares(&s, &[g, a, b]);
        for (x, want) in got.iter().zip([0.4, 0.15, 0.45]) {
            assert!((x / want - 1.0).abs() < 0.05, "{idle} idle flows: {got:?}");
        }
    }
}

/// A pipeline with `branch` and `goto` is a graph: an if/else whose arms rejoin. Voice packets
/// (the ACL permits them) are remarked, the rest pay for `work`; both are counted at the end,
/// and each element counts only the packets that went through it.
#[test]
fn branch_and_goto_make_a_graph() {
    let voice = AclSpec {
        name: "voice".into(),
        default: Some("deny".into()),
        rules: vec!["class=permit proto=udp dport=5000".parse().unwrap()],
    };
    let pipeline = [
        "branch(voice,to=3)",
        "work(ns=20000)",
        "goto(to=4)",
        "dscp(set=46)",
        "count",
    ];
    let mut f = one_flow("g", &pipeline, voice);
    let id = f.sched.find("g").unwrap();
    let mut pkts = [
        udp("10.0.0.1", "10.0.0.2", 1, 5000, 0),
        udp("10.0.0.1", "10.0.0.2", 1, 80, 0),
    ];
    for seq in 0..2 {
        f.sched.enqueue(id, P { arrived: 0, seq }).unwrap();
    }
    assert_eq!(f.sched.pick(), Next::Flow(id));
    let mut spent = [0u64; 2];
    let mut paths: [Vec<usize>; 2] = Default::default();
    f.sched.run_turn(id, |pl, pos, p| {
        let i = p.seq as usize;
        paths[i].push(pos);
        if pos == pl.len() {
            return (Progress::Finished, 0);
        }
        let buf = &mut pkts[i];
        let len = buf.len();
        let mut spend = |ns| spent[i] += ns;
        let mut cx = Cx {
            now_ns: 0,
            spend: &mut spend,
        };
        let pkt = &mut Pkt {
            frame: buf,
            len,
            ingress: 1,
        };
        match pl.run(pos, pkt, &mut cx) {
            Step::Next => (Progress::Next(p), 0),
            Step::Jump(k) => (Progress::At(p, usize::from(k)), 0),
            Step::Drop => (Progress::Finished, 0),
        }
    });
    assert_eq!(
        paths[0],
        [0, 3, 4, 5],
        "voice: branch, dscp, count, forward"
    );
    assert_eq!(
        paths[1],
        [0, 1, 2, 4, 5],
        "other: branch, work, goto, count, forward"
    );
    assert_eq!(spent, [0, 20_000]);
    assert_eq!(crate::wire::parse_frame(&pkts[0]).unwrap().dscp, 46);
    assert_eq!(crate::wire::parse_frame(&pkts[1]).unwrap().dscp, 0);
    let info = f.list().into_iter().find(|i| i.name == "g").unwrap();
    let counts: Vec<u64> = info.elements.iter().map(|e| e.packets).collect();
    assert_eq!(counts, [2, 1, 1, 1, 2]);
    assert_eq!(
        &info.pipeline[..5],
        &pipeline[..],
        "the text form round-trips"
    );
}

/// A jump that does not go forward would make a cycle (or jump nowhere): refused, naming the
/// pipeline, the element and the targets allowed.
#[test]
fn jumps_only_go_forward() {
    let acls = std::collections::BTreeMap::from([(
        "v".to_string(),
        crate::classify::RuleSet::with_rules(Vec::new(), 0),
    )]);
    let ok = Pipeline::parse(&["goto(to=2)", "count", "branch(v,to=3)"], &acls).unwrap();
    assert_eq!(ok.len(), 3);
    for (p, want) in [
        (
            &["count", "goto(to=1)"][..],
            "`goto(to=1)` at element 1: a jump goes forward, to 2..=2",
        ),
        (
            &["goto(to=0)"][..],
            "at element 0: a jump goes forward, to 1..=1",
        ),
        (
            &["branch(v,to=5)", "count"][..],
            "to 1..=2 (2 is the forwarding decision)",
        ),
    ] {
        let e = Pipeline::parse(p, &acls).unwrap_err();
        assert_eq!(e.field, "pipeline");
        assert!(e.reason.contains(want), "{p:?}: {e}");
    }
    for (t, want) in [
        ("goto", "give the element to go on at: to=K"),
        ("branch(to=2)", "give the ACL's name"),
        ("branch(nope,to=2)", "no ACL named `nope`"),
        ("goto(to=2,x=1)", "unknown parameter `x`"),
    ] {
        let e = element::parse(t, &acls).unwrap_err();
        assert!(e.reason.contains(want), "{t}: {e}");
    }
}
