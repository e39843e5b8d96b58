//! Writes the seed corpus of every target into `fuzz/corpus/TARGET/` (or the directory given):
//! real frames from `llr_core::wire::build`, the project's rule syntax, control requests as
//! `CtlClient` encodes them, and the router example configs.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --bin seeds [DIR]`

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use llr_core::flow::FlowSpec;
use llr_core::sched::StrategyKind;
use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::Vlan;
use llr_fuzz::bpf_diff::RULE_BYTES;
use llr_ops::ctl::{Command, WakeMode, VERSION};
use llr_router::config::RouterConfig;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Named frames: every protocol and header shape the parser knows, and the forwarder's cases.
fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let d = FrameSpec::default;
    let v6 = |s: FrameSpec| FrameSpec {
        src: ip("2001:db8::1"),
        dst: ip("2001:db8:5::1"),
        ..s
    };
    let mut out = vec![
        ("udp4", frame(&d())),
        (
            "udp4-ef-vlan100",
            frame(&FrameSpec {
                dscp: 46,
                vlan: Some(Vlan { id: 100, pcp: 5 }),
                ..d()
            }),
        ),
        (
            "tcp4-http",
            frame(&FrameSpec {
                protocol: 6,
                src: ip("192.168.1.7"),
                dst: ip("10.1.2.3"),
                dst_port: 80,
                ..d()
            }),
        ),
        (
            "sctp4",
            frame(&FrameSpec {
                protocol: 132,
                src_port: 9,
                ..d()
            }),
        ),
        ("icmp4", frame(&FrameSpec { protocol: 1, ..d() })),
        (
            "gre4",
            frame(&FrameSpec {
                protocol: 47,
                ..d()
            }),
        ),
        ("udp4-ttl1", frame(&FrameSpec { ttl: 1, ..d() })),
        (
            "udp4-to-router",
            frame(&FrameSpec {
                dst: ip("10.0.0.254"),
                ..d()
            }),
        ),
        (
            "udp4-1400",
            frame(&FrameSpec {
                payload_len: 1400,
                ..d()
            }),
        ),
        ("udp6", frame(&v6(d()))),
        (
            "tcp6-af11",
            frame(&v6(FrameSpec {
                protocol: 6,
                dscp: 10,
                ..d()
            })),
        ),
        (
            "icmp6",
            frame(&v6(FrameSpec {
                protocol: 58,
                ..d()
            })),
        ),
        ("udp6-hop1", frame(&v6(FrameSpec { ttl: 1, ..d() }))),
        (
            "udp6-1600",
            frame(&v6(FrameSpec {
                payload_len: 1600,
                ..d()
            })),
        ),
        (
            "udp6-multicast",
            frame(&v6(FrameSpec {
                dst: ip("ff02::1"),
                dst_mac: [0x33, 0x33, 0, 0, 0, 1],
                ..d()
            })),
        ),
    ];
    // IPv4 without DF, larger than the egress MTU: fragmented on the way.
    let mut big = frame(&FrameSpec {
        payload_len: 1600,
        ..d()
    });
    big[20] = 0;
    fix_v4_checksum(&mut big, 14);
    out.push(("udp4-1600-nodf", big));
    // A fragment (MF set).
    let mut frag = frame(&d());
    frag[20] = 0x20;
    fix_v4_checksum(&mut frag, 14);
    out.push(("udp4-fragment", frag));
    // IPv4 with options (IHL 6).
    let mut opt = frame(&d());
    opt.splice(34..34, [1, 1, 1, 0]);
    opt[14] = 0x46;
    let tl = u16::from_be_bytes([opt[16], opt[17]]) + 4;
    opt[16..18].copy_from_slice(&tl.to_be_bytes());
    fix_v4_checksum(&mut opt, 14);
    out.push(("udp4-options", opt));
    // IPv6 with hop-by-hop, routing and fragment headers before UDP.
    let mut ext = frame(&v6(d()));
    let (l3, nh) = (14, 14 + 6);
    let hdrs = [
        vec![43, 0, 0, 0, 0, 0, 0, 0], // hop-by-hop → routing
        vec![44, 0, 0, 0, 0, 0, 0, 0], // routing → fragment
        vec![17, 0, 0, 0, 0, 0, 0, 9], // fragment (offset 0, M=0) → UDP
    ];
    ext[nh] = 0;
    let add: usize = hdrs.iter().map(Vec::len).sum();
    let plen = u16::from_be_bytes([ext[l3 + 4], ext[l3 + 5]]) + add as u16;
    ext[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
    ext.splice(l3 + 40..l3 + 40, hdrs.concat());
    out.push(("udp6-ext-headers", ext));
    // ARP request (not IP) and a QinQ-tagged frame.
    out.push((
        "arp",
        vec![
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 2, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4,
            0, 1, 2, 0, 0, 0, 0, 2, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 254,
        ],
    ));
    let mut qinq = frame(&FrameSpec {
        vlan: Some(Vlan { id: 20, pcp: 0 }),
        ..d()
    });
    qinq.splice(12..12, [0x88, 0xa8, 0, 10]);
    out.push(("udp4-qinq", qinq));
    out
}

fn fix_v4_checksum(f: &mut [u8], l3: usize) {
    let hl = usize::from(f[l3] & 0xf) * 4;
    f[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
    let c = llr_core::wire::checksum::checksum(&f[l3..l3 + hl]);
    f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
}

const RULE_LINES: [&str; 14] = [
    "class=rt dscp=46",
    "class=rt proto=udp dport=5000-5100 dst=10.0.0.0/8",
    "class=rt vlan=100 pcp=5",
    "class=mid src=2001:db8::/32 sport=1-1024 ipver=6",
    "class=rt flex=14:0x00b8/0x00fc",
    "class=mid ifname=eth0 proto=tcp dst_port=443",
    "class=mid ifindex=3 proto=sctp src_port=9",
    "class=be proto=icmpv6 dst=fd00:2::/64",
    "class=rt src=10.0.0.1 dst=10.1.0.0/16 proto=17 sport=1234 dport=5000",
    "class=mid iif=veth-rin proto=gre",
    "class=rt flex=0x10:0xb800/0xfc00 vlan=4095",
    "match proto=udp dst_port=5000-5999 dst=10.0.2.0/24",
    "match ifname=eth1 dscp=10",
    "match src=192.168.0.0/16",
];

fn commands() -> Vec<Command> {
    let flow: FlowSpec = llr_router::config::RouterConfig::from_toml(include_str!(
        "../../../examples/router-flows.toml"
    ))
    .expect("router-flows.toml loads")
    .flows
    .remove(0);
    vec![
        Command::Status {},
        Command::Counters {},
        Command::Interfaces {},
        Command::Fib {
            limit: Some(10),
            query: Default::default(),
        },
        Command::Neighbours {
            limit: None,
            dev: None,
        },
        Command::RulesList {},
        Command::RulesAdd {
            rule: "class=rt proto=udp dport=5000-5100".into(),
        },
        Command::RulesRemove { id: 3 },
        Command::BudgetSet {
            class: "rt".into(),
            budget: llr_core::sched::Budget::packets(60).expect("not 0"),
        },
        Command::DeviceBudgetSet { budget: 64 },
        Command::StrategySet {
            strategy: StrategyKind::LlWfq,
        },
        Command::WakeupSet {
            mode: WakeMode::Adaptive,
            spin_us: Some(50),
        },
        Command::RouteAdd {
            prefix: "10.9.0.0/16".into(),
            via: Some("10.0.2.1".into()),
            dev: "veth-rout".into(),
        },
        Command::RouteRemove {
            prefix: "2001:db8::/32".into(),
        },
        Command::Reload {},
        Command::FlowList {
            query: Default::default(),
        },
        Command::FlowAdd {
            flow: Box::new(flow.clone()),
        },
        Command::FlowSet {
            flow: Box::new(flow),
        },
        Command::FlowDel {
            name: "video".into(),
        },
    ]
}

/// A request line as `CtlClient::call` writes it.
fn request_line(cmd: &Command, id: u64) -> Vec<u8> {
    let mut v = serde_json::to_value(cmd).unwrap();
    let o = v.as_object_mut().unwrap();
    o.insert("version".into(), VERSION.into());
    o.insert("id".into(), id.into());
    let mut line = serde_json::to_vec(&v).unwrap();
    line.push(b'\n');
    line
}

/// A `bpf_diff` input: header, rules (each: present bits, class, bytes), frame.
fn bpf_input(classes: u8, strategy: u8, rules: &[[u8; RULE_BYTES]], f: &[u8]) -> Vec<u8> {
    let h0 = (classes - 2) | (strategy << 2) | ((rules.len() as u8) << 4);
    let mut v = vec![h0, 0];
    for r in rules {
        v.extend_from_slice(r);
    }
    v.extend_from_slice(f);
    v
}

/// A rule of `bpf_diff`'s encoding: `present` field bits (bit 15: values from the frame).
fn bpf_rule(present: u16, class: u8, rest: [u8; 13]) -> [u8; RULE_BYTES] {
    let mut r = [0u8; RULE_BYTES];
    r[..2].copy_from_slice(&present.to_le_bytes());
    r[2] = class;
    r[3..].copy_from_slice(&rest);
    r
}

fn write(dir: &Path, target: &str, name: &str, data: &[u8]) {
    let d = dir.join(target);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join(name), data).unwrap();
}

fn main() {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    let frames = frames();
    for (name, f) in &frames {
        let mut input = vec![1u8];
        input.extend_from_slice(f);
        write(&dir, "frame", name, &input);
        write(&dir, "forward", name, &input);
    }
    // Frames from another interface: the frame target's ifindex=3 rule, the forwarder's
    // unknown ingress.
    let mut v6 = vec![3u8];
    v6.extend_from_slice(&frames.iter().find(|(n, _)| *n == "udp6").unwrap().1);
    write(&dir, "frame", "udp6-ifindex3", &v6);
    write(&dir, "forward", "udp6-ifindex3", &v6);

    for (i, l) in RULE_LINES.iter().enumerate() {
        write(&dir, "rules", &format!("rule{i:02}"), l.as_bytes());
    }
    write(&dir, "rules", "all", RULE_LINES.join("\n").as_bytes());

    for (i, c) in commands().iter().enumerate() {
        let mut input = vec![255u8];
        input.extend(request_line(c, i as u64 + 1));
        write(&dir, "ctl", &format!("{:02}-{}", i, c.name()), &input);
    }
    let mut pipelined = vec![7u8];
    for (i, c) in commands().iter().take(4).enumerate() {
        pipelined.extend(request_line(c, i as u64));
    }
    write(&dir, "ctl", "pipelined", &pipelined);
    write(&dir, "ctl", "bad-json", b"\x40{\"version\":1,\"id\":\"x\",\"cmd\":\"budget.set\",\"class\":\"rt\",\"budget\":-1}\n{\"version\":2,\"cmd\":\"status\"}\n[1,2]\n{\"version\":1,\"cmd\":\"nope\",\"id\":null}\n");

    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for name in [
        "router-flows.toml",
        "router-ll-wfq.toml",
        "router-vlan.toml",
    ] {
        let text = std::fs::read_to_string(examples.join(name)).unwrap();
        RouterConfig::from_toml(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        write(&dir, "config", name, text.as_bytes());
    }
    let two = RouterConfig::two_class(vec!["eth0".into(), "eth1".into()]);
    write(
        &dir,
        "config",
        "two-class.toml",
        two.to_toml().unwrap().as_bytes(),
    );
    write(
        &dir,
        "config",
        "routes-neighbors.toml",
        br#"interfaces = ["a", "b"]
strategy = "prio"
cores = [0, 1]
helper-cores = [0]
[[classes]]
name = "rt"
budget = 8
[[classes]]
name = "mid"
[[classes]]
name = "be"
[[rules]]
class = "mid"
proto = "tcp"
dst_port = "80-443"
src = "2001:db8::/32"
[[routes]]
prefix = "10.9.0.0/16"
dev = "b"
via = "10.0.2.1"
[[routes]]
prefix = "2001:db8:9::/48"
dev = "a"
[[neighbors]]
ip = "10.0.2.1"
mac = "02:00:00:00:00:09"
dev = "b"
[metrics]
listen = "127.0.0.1:9877"
[icmp]
rate = 100
burst = 10
per-host-interval-ms = 0
"#,
    );

    let pick = |n: &str| frames.iter().find(|(x, _)| *x == n).unwrap().1.clone();
    let from_frame = 1 << 15;
    let all_l3 = (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9);
    let zero = [0u8; 13];
    write(
        &dir,
        "bpf_diff",
        "no-rules",
        &bpf_input(2, 1, &[], &pick("udp4")),
    );
    write(
        &dir,
        "bpf_diff",
        "l3-from-frame",
        &bpf_input(
            3,
            1,
            &[bpf_rule(
                from_frame | all_l3,
                0,
                [0, 0, 0, 0, 0, 24, 16, 0, 0x0a, 0x1b, 0, 0, 0],
            )],
            &pick("tcp4-http"),
        ),
    );
    write(
        &dir,
        "bpf_diff",
        "vlan-flex",
        &bpf_input(
            4,
            3,
            &[
                bpf_rule(from_frame | (1 << 1) | (1 << 2), 1, zero),
                bpf_rule(
                    from_frame | (1 << 10),
                    2,
                    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 14, 0xfc, 0],
                ),
            ],
            &pick("udp4-ef-vlan100"),
        ),
    );
    write(
        &dir,
        "bpf_diff",
        "v6-ext",
        &bpf_input(
            5,
            2,
            &[
                bpf_rule(
                    (1 << 0) | (1 << 4) | (1 << 9),
                    0x81,
                    [0, 0, 0x10, 17, 0, 0, 0, 0, 0, 0x5a, 0, 0, 0],
                ),
                bpf_rule(
                    from_frame | (1 << 7),
                    2,
                    [0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0],
                ),
            ],
            &pick("udp6-ext-headers"),
        ),
    );
    write(
        &dir,
        "bpf_diff",
        "fragment",
        &bpf_input(
            2,
            0,
            &[bpf_rule(from_frame | (1 << 9), 0, zero)],
            &pick("udp4-fragment"),
        ),
    );
    write(
        &dir,
        "bpf_diff",
        "to-router",
        &bpf_input(
            2,
            1,
            &[bpf_rule(0, 0, zero)],
            &frame(&FrameSpec {
                dst: ip("10.1.0.254"),
                ..FrameSpec::default()
            }),
        ),
    );
    write(
        &dir,
        "bpf_diff",
        "qinq",
        &bpf_input(3, 1, &[bpf_rule(1 << 1, 0, zero)], &pick("udp4-qinq")),
    );
    write(
        &dir,
        "bpf_diff",
        "arp",
        &bpf_input(2, 1, &[bpf_rule(0, 0, zero)], &pick("arp")),
    );
    println!("seeds written to {}", dir.display());
}
