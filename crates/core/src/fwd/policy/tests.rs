use super::*;
use crate::fwd::{DropReason, Forwarder, IcmpKind, Interface, Verdict};
use crate::wire::build::{frame, FrameSpec};

fn p(s: &str) -> IpPrefix {
    s.parse().unwrap()
}

fn nh(i: u32) -> NextHop {
    NextHop {
        ifindex: i,
        gateway: None,
    }
}

fn v4(s: &str) -> u128 {
    u128::from(u32::from(s.parse::<core::net::Ipv4Addr>().unwrap()))
}

fn v6(s: &str) -> u128 {
    u128::from(s.parse::<core::net::Ipv6Addr>().unwrap())
}

fn flow(src: &str, dst: &str, iif: u32) -> Flow {
    let six = dst.contains(':');
    let a = |s| if six { v6(s) } else { v4(s) };
    Flow {
        v6: six,
        src: a(src),
        dst: a(dst),
        iif,
        proto: 17,
        sport: 1000,
        dport: 2000,
        dsfield: 0,
        flowlabel: 0,
    }
}

/// Main: 10.0.0.0/8 and 2001:db8::/32 on 2, a default route on 3 (both families).
fn main_table() -> RouteTable {
    let t = RouteTable::new();
    t.insert(p("10.0.0.0/8"), nh(2)).unwrap();
    t.insert(p("0.0.0.0/0"), nh(3)).unwrap();
    t.insert(p("2001:db8::/32"), nh(2)).unwrap();
    t.insert(p("::/0"), nh(3)).unwrap();
    t
}

/// The kernel's default rules with `extra` added, and `tables`.
fn policy(extra: Vec<Rule>, tables: Vec<(u32, Vec<(&str, NextHop)>)>) -> Policy {
    let d = Policy::default();
    let (mut r4, mut r6) = (d.rules(false).to_vec(), d.rules(true).to_vec());
    for r in extra {
        let six = matches!(r.dst.or(r.src).map(|p| p.addr()), Some(IpAddr::V6(_)));
        if six {
            r6.push(r);
        } else {
            r4.push(r);
        }
    }
    let tables = tables
        .into_iter()
        .map(|(id, routes)| {
            (
                id,
                SmallTable::new(routes.into_iter().map(|(q, n)| (p(q), n))),
            )
        })
        .collect();
    Policy::new(r4, r6, tables)
}

fn rule(priority: u32, action: RuleAction) -> Rule {
    Rule::new(priority, action)
}

#[test]
fn the_default_rules_route_by_main_alone() {
    let pol = Policy::default();
    assert!(pol.is_plain(false) && pol.is_plain(true));
    let main = main_table();
    assert_eq!(
        pol.route(&main, &flow("1.1.1.1", "10.1.2.3", 5), None),
        Some(nh(2))
    );
    assert_eq!(
        pol.route(&main, &flow("::1", "2001:db8::9", 5), None),
        Some(nh(2))
    );
    // An empty table selected unconditionally changes nothing; a non-empty one does.
    let empty = policy(vec![rule(100, RuleAction::Lookup(100))], vec![]);
    assert!(empty.is_plain(false));
    let full = policy(
        vec![rule(100, RuleAction::Lookup(100))],
        vec![(100, vec![("192.0.2.0/24", nh(4))])],
    );
    assert!(!full.is_plain(false) && full.is_plain(true));
}

#[test]
fn a_rule_selects_a_table_and_falls_through_when_it_has_no_route() {
    let main = main_table();
    let to = Rule {
        dst: Some(p("10.5.0.0/16")),
        ..rule(100, RuleAction::Lookup(100))
    };
    let pol = policy(
        vec![to],
        vec![(
            100,
            vec![
                ("10.5.1.0/24", NextHop::special(RouteKind::Blackhole)),
                ("10.5.2.0/24", nh(4)),
                ("10.5.2.128/25", NextHop::special(RouteKind::Throw)),
            ],
        )],
    );
    let r = |d: &str| pol.route(&main, &flow("1.1.1.1", d, 5), None);
    assert_eq!(r("10.5.1.1"), Some(NextHop::special(RouteKind::Blackhole)));
    assert_eq!(r("10.5.2.1"), Some(nh(4)));
    assert_eq!(r("10.5.2.200"), Some(nh(2)), "throw: on to main");
    assert_eq!(r("10.5.3.1"), Some(nh(2)), "no route in 100: on to main");
    assert_eq!(r("10.6.0.1"), Some(nh(2)), "not selected");
}

#[test]
fn selectors_source_interface_protocol_ports_mark_and_not() {
    let main = main_table();
    let t = |r: Rule| {
        policy(
            vec![r],
            vec![(7, vec![("0.0.0.0/0", nh(9)), ("::/0", nh(9))])],
        )
    };
    let base = rule(10, RuleAction::Lookup(7));
    let cases: Vec<(Rule, Flow, bool)> = vec![
        (
            Rule {
                src: Some(p("192.168.0.0/16")),
                ..base.clone()
            },
            flow("192.168.4.4", "10.0.0.1", 5),
            true,
        ),
        (
            Rule {
                src: Some(p("192.168.0.0/16")),
                ..base.clone()
            },
            flow("192.169.4.4", "10.0.0.1", 5),
            false,
        ),
        (
            Rule {
                iif: Some(5),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            true,
        ),
        (
            Rule {
                iif: Some(6),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            false,
        ),
        (
            Rule {
                iif: Some(u32::MAX),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            false,
        ),
        (
            Rule {
                oif: Some(5),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            false,
        ),
        (
            Rule {
                ipproto: Some(17),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            true,
        ),
        (
            Rule {
                ipproto: Some(6),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            false,
        ),
        (
            Rule {
                dport: Some((2000, 2000)),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            true,
        ),
        (
            Rule {
                dport: Some((2001, 3000)),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            false,
        ),
        (
            Rule {
                sport: Some((900, 1000)),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            true,
        ),
        // Forwarded packets carry mark 0.
        (
            Rule {
                fwmark: Some((0x1, 0xffff_ffff)),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            false,
        ),
        (
            Rule {
                fwmark: Some((0x1, 0xffff_ffff)),
                invert: true,
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            true,
        ),
        (
            Rule {
                fwmark: Some((0x100, 0xff)),
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            true,
        ),
        // `not` inverts the whole match, a detached iif included.
        (
            Rule {
                iif: Some(u32::MAX),
                invert: true,
                src: Some(p("0.0.0.0/0")),
                ..base.clone()
            },
            flow("1.1.1.1", "10.0.0.1", 5),
            true,
        ),
        (
            Rule {
                dst: Some(p("2001:db8:5::/48")),
                ..base.clone()
            },
            flow("2001:db8::1", "2001:db8:5::1", 5),
            true,
        ),
        (
            Rule {
                dst: Some(p("2001:db8:5::/48")),
                ..base.clone()
            },
            flow("2001:db8::1", "2001:db8:6::1", 5),
            false,
        ),
    ];
    // The DS field and the flow label, as (value, mask) the mirror decodes `tos`, `dscp` and
    // `flowlabel` into: an IPv4 `tos 0x10` looks at the RFC 1349 bits only.
    let ds = |v4: bool, sel: (u8, u8), dsfield: u8| {
        let (src, dst) = if v4 {
            ("1.1.1.1", "10.0.0.1")
        } else {
            ("2001:db8::1", "2001:db8:5::1")
        };
        let r = Rule {
            dsfield: Some(sel),
            dst: Some(p(if v4 { "10.0.0.0/8" } else { "2001:db8::/32" })),
            ..base.clone()
        };
        (
            r,
            Flow {
                dsfield,
                ..flow(src, dst, 5)
            },
        )
    };
    let mut cases = cases;
    for (v4, sel, dsfield, selected) in [
        (true, (0x10, 0x1c), 0x10, true),
        (true, (0x10, 0x1c), 0xb3, true),
        (true, (0x10, 0x1c), 0x08, false),
        (true, (0xb8, 0xfc), 0xb9, true),
        (true, (0xb8, 0xfc), 0xb0, false),
        (false, (0xb8, 0xfc), 0xba, true),
        (false, (0xb8, 0xfc), 0x18, false),
        // dscp 8/0x38 (0x20/0xe0 in place): the class selector bits only.
        (false, (0x20, 0xe0), 0x28, true),
        (false, (0x20, 0xe0), 0x48, false),
    ] {
        let (r, f) = ds(v4, sel, dsfield);
        cases.push((r, f, selected));
    }
    for (label, selected) in [(0x12345, true), (0x12344, false), (0x92345, false)] {
        let r = Rule {
            flowlabel: Some((0x12345, 0xf_ffff)),
            dst: Some(p("2001:db8::/32")),
            ..base.clone()
        };
        let f = Flow {
            flowlabel: label,
            ..flow("2001:db8::1", "2001:db8:5::1", 5)
        };
        cases.push((r, f, selected));
    }
    for (i, (r, f, selected)) in cases.into_iter().enumerate() {
        let want = if selected { nh(9) } else { nh(2) };
        assert_eq!(
            t(r.clone()).route(&main, &f, None),
            Some(want),
            "case {i}: {r:?}"
        );
    }
}

#[test]
fn actions_goto_nop_and_the_terminal_ones() {
    let main = main_table();
    let any = Some(p("0.0.0.0/0"));
    let f = flow("1.1.1.1", "10.0.0.1", 5);
    let with = |rules: Vec<Rule>| policy(rules, vec![(7, vec![("10.0.0.0/8", nh(9))])]);
    let bh = Rule {
        src: any,
        ..rule(10, RuleAction::Blackhole)
    };
    assert_eq!(
        with(vec![bh.clone()]).route(&main, &f, None),
        Some(NextHop::special(RouteKind::Blackhole))
    );
    let un = Rule {
        src: any,
        ..rule(10, RuleAction::Unreachable)
    };
    assert_eq!(with(vec![un]).route(&main, &f, None), None, "no route");
    let pr = Rule {
        src: any,
        ..rule(10, RuleAction::Prohibit)
    };
    assert_eq!(
        with(vec![pr]).route(&main, &f, None),
        Some(NextHop::special(RouteKind::Prohibit))
    );
    let k = Rule {
        src: any,
        ..rule(10, RuleAction::Kernel("uidrange"))
    };
    assert_eq!(
        with(vec![k]).route(&main, &f, None),
        Some(NextHop::special(RouteKind::Kernel))
    );
    // goto 30 skips the blackhole at 20 and lands on the lookup at 30.
    let go = Rule {
        src: any,
        ..rule(10, RuleAction::Goto(30))
    };
    let bh20 = Rule {
        priority: 20,
        ..bh.clone()
    };
    let at30 = Rule {
        src: any,
        ..rule(30, RuleAction::Lookup(7))
    };
    assert_eq!(
        with(vec![go.clone(), bh20.clone(), at30]).route(&main, &f, None),
        Some(nh(9))
    );
    // An unresolved goto is skipped; a nop too.
    let nowhere = Rule {
        src: any,
        ..rule(10, RuleAction::Goto(31))
    };
    assert_eq!(
        with(vec![nowhere, bh20.clone()]).route(&main, &f, None),
        Some(NextHop::special(RouteKind::Blackhole))
    );
    let nop = Rule {
        src: any,
        ..rule(10, RuleAction::Nop)
    };
    assert_eq!(with(vec![nop]).route(&main, &f, None), Some(nh(2)));
    // Rules of one priority keep their order.
    let first = Rule {
        src: any,
        ..rule(20, RuleAction::Lookup(7))
    };
    assert_eq!(
        with(vec![first.clone(), bh20.clone()]).route(&main, &f, None),
        Some(nh(9))
    );
    assert_eq!(
        with(vec![bh20, first]).route(&main, &f, None),
        Some(NextHop::special(RouteKind::Blackhole))
    );
}

#[test]
fn suppress_prefixlength_zero_skips_main_default_as_wg_quick_sets_it_up() {
    // wg-quick: `not fwmark 51820 table 51820` (a default route into the tunnel) and
    // `table main suppress_prefixlength 0` before it.
    let main = main_table();
    let tun = Rule {
        fwmark: Some((51820, 0xffff_ffff)),
        invert: true,
        ..rule(32765, RuleAction::Lookup(51820))
    };
    let sup = Rule {
        suppress_prefixlen: Some(0),
        src: Some(p("0.0.0.0/0")),
        ..rule(32764, RuleAction::Lookup(TABLE_MAIN))
    };
    let pol = policy(vec![sup, tun], vec![(51820, vec![("0.0.0.0/0", nh(8))])]);
    assert_eq!(
        pol.route(&main, &flow("1.1.1.1", "10.3.3.3", 5), None),
        Some(nh(2)),
        "specific: main"
    );
    assert_eq!(
        pol.route(&main, &flow("1.1.1.1", "8.8.8.8", 5), None),
        Some(nh(8)),
        "default: tunnel"
    );
    // A blackhole is an answer, never suppressed.
    main.insert(p("0.0.0.0/0"), NextHop::special(RouteKind::Blackhole))
        .unwrap();
    assert_eq!(
        pol.route(&main, &flow("1.1.1.1", "8.8.8.8", 5), None),
        Some(NextHop::special(RouteKind::Blackhole))
    );
}

#[test]
fn l3mdev_rules_look_up_the_input_interfaces_vrf() {
    let main = main_table();
    let l3 = Rule {
        l3mdev: true,
        ..rule(1000, RuleAction::Lookup(0))
    };
    let pol = policy(vec![l3], vec![(10, vec![("0.0.0.0/0", nh(7))])]);
    assert!(!pol.is_plain(false));
    let f = flow("1.1.1.1", "10.0.0.1", 5);
    assert_eq!(pol.route(&main, &f, Some(10)), Some(nh(7)));
    assert_eq!(
        pol.route(&main, &f, None),
        Some(nh(2)),
        "not in a VRF: main"
    );
    assert_eq!(
        pol.route(&main, &f, Some(11)),
        Some(nh(2)),
        "an empty VRF table: on"
    );
}

#[test]
fn small_tables_are_longest_prefix_and_small() {
    let t = SmallTable::new([
        (p("10.0.0.0/8"), nh(1)),
        (p("10.1.0.0/16"), nh(2)),
        (p("10.1.2.0/24"), nh(3)),
        (p("0.0.0.0/0"), nh(4)),
        (p("2001:db8::/32"), nh(5)),
        (p("2001:db8:1::/48"), nh(6)),
        (p("10.1.0.0/16"), nh(7)),
    ]);
    assert_eq!(t.len(), 6, "a later route replaces");
    assert_eq!(t.lookup(false, v4("10.1.2.3")), Some((nh(3), 24)));
    assert_eq!(t.lookup(false, v4("10.1.3.3")), Some((nh(7), 16)));
    assert_eq!(t.lookup(false, v4("10.2.3.3")), Some((nh(1), 8)));
    assert_eq!(t.lookup(false, v4("11.0.0.1")), Some((nh(4), 0)));
    assert_eq!(t.lookup(true, v6("2001:db8:1::5")), Some((nh(6), 48)));
    assert_eq!(t.lookup(true, v6("2001:db9::5")), None);
    let mut all: Vec<_> = t.iter().collect();
    all.sort_by_key(|r| (r.0.addr().is_ipv6(), r.0.len()));
    assert_eq!(all.first(), Some(&(p("0.0.0.0/0"), nh(4))));
    assert_eq!(all.len(), 6);
}

#[test]
fn the_forwarder_drops_answers_and_validates_sources_through_the_rules() {
    const IN: [u8; 6] = [2, 0, 0, 0, 0, 1];
    let mut f = Forwarder::new();
    f.interfaces.upsert(Interface::new(5, IN, 1500));
    f.interfaces
        .upsert(Interface::new(2, [2, 0, 0, 0, 0, 2], 1500));
    f.interfaces.add_addr(5, "10.9.0.254".parse().unwrap(), 24);
    f.interfaces.add_addr(2, "10.1.0.254".parse().unwrap(), 24);
    f.routes.insert(p("10.1.0.0/24"), nh(2)).unwrap();
    f.routes.insert(p("10.9.0.0/24"), nh(5)).unwrap();
    f.neighbors
        .insert(2, "10.1.0.7".parse().unwrap(), [2, 0, 0, 0, 0, 7]);
    let run = |f: &Forwarder, dst: &str| {
        let mut fr = frame(&FrameSpec {
            dst_mac: IN,
            src: "10.9.0.1".parse().unwrap(),
            dst: dst.parse().unwrap(),
            ..FrameSpec::default()
        });
        f.process(&mut fr, 5)
    };
    assert!(matches!(
        run(&f, "10.1.0.7"),
        Verdict::Tx { ifindex: 2, .. }
    ));
    let to = |a| Rule {
        dst: Some(p("10.1.0.7/32")),
        ..rule(100, a)
    };
    for (action, want) in [
        (RuleAction::Blackhole, Verdict::Drop(DropReason::Blackhole)),
        (
            RuleAction::Unreachable,
            Verdict::Icmp {
                drop: DropReason::NoRoute,
                error: IcmpKind::NetUnreachable,
            },
        ),
        (
            RuleAction::Prohibit,
            Verdict::Icmp {
                drop: DropReason::Unreachable,
                error: IcmpKind::Prohibited,
            },
        ),
    ] {
        f.policy = std::sync::Arc::new(policy(vec![to(action)], vec![]));
        assert_eq!(run(&f, "10.1.0.7"), want, "{action:?}");
    }
    // Strict rp_filter: the way back to 10.9.0.1 is through table 50, out of interface 2.
    f.policy = std::sync::Arc::new(policy(
        vec![Rule {
            dst: Some(p("10.9.0.0/24")),
            ..rule(100, RuleAction::Lookup(50))
        }],
        vec![(50, vec![("10.9.0.0/24", nh(2))])],
    ));
    assert!(matches!(
        run(&f, "10.1.0.7"),
        Verdict::Tx { ifindex: 2, .. }
    ));
    let mut ifs = f.interfaces.clone();
    let mut i5 = ifs.get(5).unwrap().clone();
    i5.rp_filter = 1;
    ifs.upsert(i5);
    f.interfaces = ifs;
    assert_eq!(run(&f, "10.1.0.7"), Verdict::Drop(DropReason::RpFilter));
}
