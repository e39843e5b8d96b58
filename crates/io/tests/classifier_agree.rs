//! The eBPF classifier (`bpf/classifier.c`, run with `BPF_PROG_TEST_RUN`) against llr-core's
//! `RuleSet::classify` on seeded random rule sets over every field and random, mutated and
//! malformed frames (root; skipped otherwise).
//!
//! The reference for one frame:
//! - to the kernel (XDP_PASS, no class) if the destination MAC is multicast/broadcast, if
//!   `parse_frame` says non-IP, or if the frame parses and its destination is IPv6 multicast or
//!   link-local, or one of the router's addresses (TTL / hop-limit expiry is classified like
//!   any frame: the worker answers it);
//! - otherwise class = `RuleSet::classify(frame, None, ingress)` and XSKMAP key =
//!   `layout.class_to_ring[class]` (malformed frames included: they reach user space, which
//!   counts and drops them by reason).
//!
//! Set `LLR_AGREE_SEED` to replay one seed, `LLR_AGREE_SETS` to change the number of rule sets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use llr_core::classify::{Flex, IpPrefix, PortRange, Rule, RuleSet};
use llr_core::sched::{SchedConfig, StrategyKind};
use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::{parse_frame, IpVersion, ParseError, Vlan};
use llr_io::ebpf::{Classifier, XDP_PASS};

/// SplitMix64: small, seeded, good enough to spread test cases.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const V4: [[u8; 4]; 4] = [
    [10, 0, 0, 1],
    [10, 1, 0, 1],
    [10, 1, 200, 7],
    [192, 168, 5, 9],
];
const V6: [u128; 3] = [
    0xfd00_0001_0000_0000_0000_0000_0000_0001,
    0xfd00_0002_0000_0000_0000_0000_0000_0001,
    0x2001_0db8_0000_0000_0000_0000_0000_00aa,
];
const LOCAL_V4: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 254);
const LOCAL_V6: u128 = 0xfd00_0002_0000_0000_0000_0000_0000_00fe;
const PROTOS: [u8; 6] = [6, 17, 132, 1, 58, 47];
const DSCPS: [u8; 4] = [0, 46, 10, 63];
const PORTS: [u16; 5] = [53, 1234, 5000, 5005, 65535];
const VLANS: [u16; 4] = [0, 10, 20, 4095];

fn rand_v4(r: &mut Rng) -> Ipv4Addr {
    if r.chance(0.1) {
        return LOCAL_V4;
    }
    Ipv4Addr::from(r.pick(&V4))
}

fn rand_v6(r: &mut Rng) -> Ipv6Addr {
    match r.below(12) {
        0 => Ipv6Addr::from(LOCAL_V6),
        1 => "ff02::1".parse().unwrap(),
        2 => "fe80::1".parse().unwrap(),
        _ => Ipv6Addr::from(r.pick(&V6)),
    }
}

fn rand_prefix(r: &mut Rng, v6: bool) -> IpPrefix {
    if v6 {
        let a = u128::from(rand_v6(r));
        let any = r.below(129) as u8;
        let len = r.pick(&[0u8, 16, 31, 32, 64, 127, 128, any]);
        let m = if len == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(len))
        };
        IpPrefix::new(IpAddr::V6(Ipv6Addr::from(a & m)), len).unwrap()
    } else {
        let a = u32::from(rand_v4(r));
        let any = r.below(33) as u8;
        let len = r.pick(&[0u8, 8, 16, 23, 24, 32, any]);
        let m = if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        };
        IpPrefix::new(IpAddr::V4(Ipv4Addr::from(a & m)), len).unwrap()
    }
}

fn rand_range(r: &mut Rng) -> PortRange {
    let lo = r.pick(&PORTS).saturating_sub(r.below(3) as u16);
    let hi = lo.saturating_add(r.pick(&[0u16, 1, 5, 100, 65535]));
    PortRange::new(lo, hi).unwrap()
}

fn rand_rule(r: &mut Rng, nclasses: usize, sample: &[u8]) -> Rule {
    let mut x = Rule::to_class(r.below(nclasses as u64) as usize);
    if r.chance(0.08) {
        x.ifindex = Some(r.pick(&[1, 999]));
    }
    if r.chance(0.15) {
        x.vlan_id = Some(r.pick(&VLANS));
    }
    if r.chance(0.1) {
        x.vlan_pcp = Some(r.below(8) as u8);
    }
    if r.chance(0.1) {
        x.ip_version = Some(if r.chance(0.5) {
            IpVersion::V6
        } else {
            IpVersion::V4
        });
    }
    if r.chance(0.3) {
        x.proto = Some(r.pick(&PROTOS));
    }
    if r.chance(0.25) {
        x.dscp = Some(r.pick(&DSCPS));
    }
    if r.chance(0.2) {
        let v6 = r.chance(0.4);
        x.src = Some(rand_prefix(r, v6));
    }
    if r.chance(0.2) {
        let v6 = r.chance(0.4);
        x.dst = Some(rand_prefix(r, v6));
    }
    if r.chance(0.25) {
        x.sport = Some(rand_range(r));
    }
    if r.chance(0.25) {
        x.dport = Some(rand_range(r));
    }
    if r.chance(0.15) {
        let off = r.below(63) as u8;
        let any = r.next() as u16;
        let mask = r.pick(&[0xffffu16, 0x00ff, 0xff00, 0x00fc, 0xfc00, any]);
        // Usually the word of a real frame, so the match hits now and then.
        let word = match sample.get(usize::from(off)..usize::from(off) + 2) {
            Some(b) if r.chance(0.7) => u16::from_be_bytes([b[0], b[1]]),
            _ => r.next() as u16,
        };
        x.flex = Some(Flex::new(off, word & mask, mask).unwrap());
    }
    x
}

fn rand_frame(r: &mut Rng) -> Vec<u8> {
    let v6 = r.chance(0.4);
    let (src, dst) = if v6 {
        (IpAddr::V6(rand_v6(r)), IpAddr::V6(rand_v6(r)))
    } else {
        (IpAddr::V4(rand_v4(r)), IpAddr::V4(rand_v4(r)))
    };
    let spec = FrameSpec {
        dst_mac: if r.chance(0.04) {
            [0x01, 0, 0x5e, 0, 0, 1]
        } else {
            [0x02, 0, 0, 0, 0, 1]
        },
        vlan: r.chance(0.3).then(|| Vlan {
            id: r.pick(&VLANS),
            pcp: r.below(8) as u8,
        }),
        src,
        dst,
        protocol: r.pick(&PROTOS),
        dscp: r.pick(&DSCPS),
        ttl: r.pick(&[64, 64, 64, 2, 1, 0]),
        src_port: r.pick(&PORTS),
        dst_port: r.pick(&PORTS),
        payload_len: r.below(80) as usize,
        ..FrameSpec::default()
    };
    let mut f = frame(&spec);
    let l3 = if spec.vlan.is_some() { 18 } else { 14 };
    if r.chance(0.5) {
        for _ in 0..=r.below(3) {
            mutate(r, &mut f, l3, v6);
        }
    }
    f
}

/// One random damage to the frame.
fn mutate(r: &mut Rng, f: &mut Vec<u8>, l3: usize, v6: bool) {
    let n = f.len();
    match r.below(11) {
        0 => f.truncate(14 + r.below(n as u64 - 13) as usize),
        1 => {
            let i = r.below(n.min(80) as u64) as usize;
            f[i] = r.next() as u8;
        }
        2 if f.len() >= l3 => {
            let et: u16 = r.pick(&[0x0806, 0x88a8, 0x8100, 0x9100, 0x86dd, 0x0800, 0x88cc]);
            f[l3 - 2..l3].copy_from_slice(&et.to_be_bytes());
        }
        3 => {
            // stack another 802.1Q (or QinQ) tag outside
            let tpid: u16 = r.pick(&[0x8100, 0x88a8]);
            let mut tag = tpid.to_be_bytes().to_vec();
            tag.extend_from_slice(&[0x20, 0x07]);
            f.splice(12..12, tag);
        }
        4 if !v6 && f.len() > l3 => f[l3] = 0x40 | (r.below(16) as u8),
        5 if f.len() > l3 + 6 => {
            let v = r.next() as u16 % (n as u16 + 20);
            let at = if v6 { l3 + 4 } else { l3 + 2 };
            f[at..at + 2].copy_from_slice(&v.to_be_bytes());
        }
        6 if !v6 && f.len() > l3 + 8 => {
            // fragment: MF and/or an offset
            f[l3 + 6] = r.pick(&[0x20, 0x00, 0x20]);
            f[l3 + 7] = r.pick(&[0, 1, 0xb9]);
        }
        7 if v6 && f.len() >= l3 + 40 => {
            for _ in 0..=r.below(5) {
                push_ext(r, f, l3);
            }
        }
        8 => {
            let extra = r.below(40) as usize;
            f.extend((0..extra).map(|_| r.next() as u8));
        }
        9 if f.len() > l3 + 10 => f[if v6 { l3 + 7 } else { l3 + 8 }] = r.pick(&[0, 1, 2]),
        _ => {
            // the L4 header cut short: IP length shrinks to a few bytes of it
            if f.len() > l3 + 44 {
                let hl = if v6 { 40 } else { usize::from(f[l3] & 0xf) * 4 };
                let cut = (hl + r.below(8) as usize) as u16;
                if v6 {
                    f[l3 + 4..l3 + 6].copy_from_slice(&(cut - 40).to_be_bytes());
                } else {
                    f[l3 + 2..l3 + 4].copy_from_slice(&cut.to_be_bytes());
                }
            }
        }
    }
}

/// Inserts an IPv6 extension header (hop-by-hop, routing, destination options or fragment)
/// right after the fixed header, usually with a consistent payload length.
fn push_ext(r: &mut Rng, f: &mut Vec<u8>, l3: usize) {
    let kind = r.pick(&[0u8, 43, 60, 44]);
    let nh = f[l3 + 6];
    let hdr: Vec<u8> = if kind == 44 {
        vec![nh, 0, 0, r.pick(&[0, 1]), 0, 0, 0, 9]
    } else {
        let units = r.pick(&[0u8, 0, 1, 3]);
        let mut h = vec![0u8; (usize::from(units) + 1) * 8];
        h[0] = nh;
        h[1] = units;
        h
    };
    f[l3 + 6] = kind;
    let plen = u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]);
    let grow = if r.chance(0.85) { hdr.len() as u16 } else { 0 };
    f[l3 + 4..l3 + 6].copy_from_slice(&plen.wrapping_add(grow).to_be_bytes());
    f.splice(l3 + 40..l3 + 40, hdr);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Kernel,
    Ring { class: u32, key: u32 },
}

fn reference(rs: &RuleSet, class_to_ring: &[usize], f: &[u8], ingress: u32) -> Verdict {
    if f.len() >= 14 && f[0] & 1 == 1 {
        return Verdict::Kernel;
    }
    // One 802.1Q tag, the frame not oversize: the kernel's VLAN devices', whatever follows.
    let tag = |at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    if tag(12) == Some(0x8100)
        && !matches!(tag(16), None | Some(0x8100 | 0x88a8 | 0x9100))
        && f.len() <= llr_core::wire::DEFAULT_MAX_FRAME
    {
        return Verdict::Kernel;
    }
    match parse_frame(f) {
        Err(ParseError::NonIp) => return Verdict::Kernel,
        Ok(m) => {
            let d = m.dst_ip();
            let local = match d {
                IpAddr::V4(a) => a == LOCAL_V4,
                IpAddr::V6(a) => u128::from(a) == LOCAL_V6,
            };
            let v6_special = matches!(d, IpAddr::V6(a) if a.is_multicast()
                || (a.segments()[0] & 0xffc0) == 0xfe80);
            if local || v6_special {
                return Verdict::Kernel;
            }
        }
        Err(_) => {}
    }
    let class = rs.classify(f, None, ingress);
    Verdict::Ring {
        class: class as u32,
        key: class_to_ring[class] as u32,
    }
}

fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn bpf_and_rust_classifiers_agree() {
    llr_io::sys::require_root();
    let sets: u64 = std::env::var("LLR_AGREE_SETS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let seeds: Vec<u64> = match std::env::var("LLR_AGREE_SEED") {
        Ok(s) => vec![s.parse().expect("LLR_AGREE_SEED: a u64")],
        Err(_) => (0..sets).map(|i| 0x5eed_0000 + i).collect(),
    };
    let frames_per_set = 60;
    let t0 = std::time::Instant::now();
    let mut checked = 0u64;
    let mut kernel = 0u64;
    let mut malformed = 0u64;
    let mut hits = 0u64;
    let mut failures = Vec::new();
    // One program per layout shape; rules are swapped in per seed.
    for seed in seeds {
        let mut r = Rng(seed);
        let nclasses = 2 + r.below(3) as usize;
        let names: Vec<String> = (0..nclasses).map(|i| format!("c{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        // SQ puts every class on one ring; the others keep one ring per class.
        let strategy = r.pick(&[StrategyKind::Sq, StrategyKind::LlWfq, StrategyKind::Rr]);
        let layout = SchedConfig::new(strategy, &names).layout().expect("layout");
        let sample = rand_frame(&mut r);
        let nrules = 1 + r.below(8) as usize;
        let rules: Vec<Rule> = (0..nrules)
            .map(|_| rand_rule(&mut r, nclasses, &sample))
            .collect();
        let default = nclasses - 1;
        let rs = RuleSet::with_rules(rules, default);
        // Every other rule set runs on the multi-buffer (xdp.frags) build of the program: the
        // same code, so the same answers.
        let mut c = Classifier::load_for(default as u32, seed % 2 == 1).expect("load classifier");
        c.set_rules(&rs.to_bpf_map().expect("bpf image"), default as u32, 0)
            .unwrap();
        c.set_class_rings(&layout.class_to_ring).unwrap();
        c.set_local_addrs(&[IpAddr::V4(LOCAL_V4), IpAddr::V6(Ipv6Addr::from(LOCAL_V6))])
            .unwrap();
        for _ in 0..frames_per_set {
            let f = rand_frame(&mut r);
            let want = reference(&rs, &layout.class_to_ring, &f, 1);
            let o = c.test_run(&f, Some(1)).expect("BPF_PROG_TEST_RUN");
            // No socket is bound: a redirect falls back to XDP_PASS, so the class/key counters
            // tell a redirect attempt from a pass to the kernel.
            assert_eq!(o.action, XDP_PASS);
            let got = match (o.class, o.key) {
                (Some(class), Some(key)) => Verdict::Ring { class, key },
                (None, None) => Verdict::Kernel,
                other => panic!("inconsistent counters {other:?}"),
            };
            checked += 1;
            match want {
                Verdict::Kernel => kernel += 1,
                Verdict::Ring { class, .. } if class as usize != default => hits += 1,
                _ => {}
            }
            if parse_frame(&f).is_err_and(|e| e.is_malformed()) {
                malformed += 1;
            }
            if got != want && failures.len() < 10 {
                failures.push(format!(
                    "seed {seed}: frame {} ({} bytes, parse {:?})\n  rules {:?}\n  layout {:?}: bpf {got:?}, rust {want:?}",
                    hex(&f),
                    f.len(),
                    parse_frame(&f).map(|m| (m.version, m.protocol, m.dscp, m.ttl, m.has_ports)),
                    rs.rules(),
                    layout.class_to_ring,
                ));
            }
        }
    }
    eprintln!(
        "{checked} frames checked in {:.1} s: {kernel} to the kernel, {malformed} malformed, {hits} matched a rule of a non-default class; {} disagreements",
        t0.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "BPF and Rust disagree:\n{}",
        failures.join("\n")
    );
    // The generator must really exercise every outcome.
    assert!(kernel > checked / 20 && malformed > checked / 20 && hits > checked / 20);
}

/// The documented flex spellings of "DSCP EF in an untagged IPv4 frame" (a big-endian 2-byte
/// read) match EF and nothing else, in Rust and in BPF; the tempting `offset = 15, value =
/// 0xb8, mask = 0xfc` compares the TOS byte's *neighbour* and does not.
#[test]
fn flex_ef_spellings() {
    let ef = frame(&FrameSpec {
        dscp: 46,
        ..FrameSpec::default()
    });
    let be = frame(&FrameSpec::default());
    let flex = |o, v, m| {
        let mut r = Rule::to_class(0);
        r.flex = Some(Flex::new(o, v, m).unwrap());
        RuleSet::with_rules(vec![r], 1)
    };
    let good = [flex(14, 0x00b8, 0x00fc), flex(15, 0xb800, 0xfc00)];
    let wrong = flex(15, 0x00b8, 0x00fc);
    for rs in &good {
        assert_eq!(rs.classify(&ef, None, 1), 0);
        assert_eq!(rs.classify(&be, None, 1), 1);
    }
    assert_eq!(wrong.classify(&ef, None, 1), 1);
    // The Rust half above runs everywhere; the BPF half needs root, which CI has.
    if !llr_io::sys::is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the BPF half of this test needs root and CI runs as root"
        );
        eprintln!("BPF half not run: needs root");
        return;
    }
    for rs in good.iter().chain([&wrong]) {
        let mut c = Classifier::load(1).expect("load classifier");
        c.set_rules(&rs.to_bpf_map().unwrap(), 1, 0).unwrap();
        c.set_class_rings(&[0, 1]).unwrap();
        for f in [&ef, &be] {
            let o = c.test_run(f, None).unwrap();
            assert_eq!(o.class, Some(rs.classify(f, None, 1) as u32));
        }
    }
}
