//! `bpf_diff`: the eBPF classifier (`bpf/classifier.c`, run with `BPF_PROG_TEST_RUN`) against
//! its Rust twin (`RuleSet::classify` plus the program's pass-to-kernel checks), on rule sets
//! and frames the fuzzer chooses. Needs root (loading BPF programs).
//!
//! Input: two header bytes (classes, strategy, number of rules; `tagged-frames`), [`RULE_BYTES`] per rule,
//! then the frame (14..=2048 bytes; others are skipped: XDP never sees them). A rule's fields
//! take the frame's own values (addresses, ports, VLAN, the flex word) when its "from frame"
//! bit is set, so rules match often; the fuzzer's bytes pick which fields, prefix lengths, range
//! widths and masks. Property: the program's verdict — to the kernel, or class c on ring
//! `class_to_ring[c]` — is the reference's, as in `crates/io/tests/classifier_agree.rs`:
//! - to the kernel if the destination MAC is multicast/broadcast, if the frame carries one
//!   802.1Q tag and `tagged-frames = "kernel"` (the second header byte's low bit clear), if `parse_frame` says
//!   non-IP, or if the frame parses and its destination is IPv6 multicast or link-local, or one
//!   of the router's addresses;
//! - otherwise class = `RuleSet::classify(frame, None, ingress)` (malformed frames included).

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use llr_core::classify::{Flex, IpPrefix, PortRange, Rule, RuleSet};
use llr_core::sched::{SchedConfig, StrategyKind};
use llr_core::wire::{parse_frame, IpVersion, PacketMeta, ParseError};
use llr_io::ebpf::{Classifier, FLAG_TAGGED_FORWARD, XDP_PASS};

/// Bytes that describe one rule.
pub const RULE_BYTES: usize = 16;
/// The router's own addresses (frames to them go to the kernel).
pub const LOCAL_V4: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 254);
pub const LOCAL_V6: u128 = 0xfd00_0002_0000_0000_0000_0000_0000_00fe;
/// The ingress ifindex presented to the program: the loopback, which every namespace has.
const INGRESS: u32 = 1;

const V4: [[u8; 4]; 4] = [
    [10, 0, 0, 1],
    [10, 1, 0, 1],
    [192, 168, 5, 9],
    [10, 1, 0, 254],
];
const V6: [u128; 4] = [
    0xfd00_0001_0000_0000_0000_0000_0000_0001,
    0xfd00_0002_0000_0000_0000_0000_0000_0001,
    0x2001_0db8_0000_0000_0000_0000_0000_00aa,
    LOCAL_V6,
];
const PORTS: [u16; 4] = [53, 1234, 5000, 65535];
const SPANS: [u16; 5] = [0, 1, 5, 100, 65535];
const STRATEGIES: [StrategyKind; 4] = [
    StrategyKind::Sq,
    StrategyKind::LlWfq,
    StrategyKind::Rr,
    StrategyKind::LlRr,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Kernel,
    Ring { class: u32, key: u32 },
}

/// The loaded program, reused for every input (rules are swapped in per input).
pub struct BpfDiff {
    c: Classifier,
}

thread_local! {
    static GLOBAL: RefCell<Option<BpfDiff>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's [`BpfDiff`], loading it on first use (panics if it cannot load).
pub fn with_global<R>(f: impl FnOnce(&mut BpfDiff) -> R) -> R {
    GLOBAL.with(|g| {
        let mut g = g.borrow_mut();
        let d = g.get_or_insert_with(|| BpfDiff::new().expect("load the classifier (root?)"));
        f(d)
    })
}

impl BpfDiff {
    /// Loads `bpf/classifier.o` into the kernel (not attached anywhere).
    pub fn new() -> anyhow::Result<Self> {
        let mut c = Classifier::load(0)?;
        c.set_local_addrs(&[IpAddr::V4(LOCAL_V4), IpAddr::V6(Ipv6Addr::from(LOCAL_V6))])?;
        Ok(BpfDiff { c })
    }

    pub fn run(&mut self, data: &[u8]) {
        let [h0, h1, rest @ ..] = data else {
            return;
        };
        let nclasses = 2 + usize::from(h0 & 3);
        let strategy = STRATEGIES[usize::from((h0 >> 2) & 3)];
        let nrules = usize::from(h0 >> 4) % 9;
        let Some((rule_bytes, frame)) = rest.split_at_checked(nrules * RULE_BYTES) else {
            return;
        };
        if !(14..=2048).contains(&frame.len()) {
            return;
        }
        let meta = parse_frame(frame).ok();
        let rules: Vec<Rule> = rule_bytes
            .chunks_exact(RULE_BYTES)
            .map(|b| decode_rule(b, nclasses, frame, meta.as_ref()))
            .collect();
        let names: Vec<String> = (0..nclasses).map(|i| format!("c{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let layout = SchedConfig::new(strategy, &names)
            .layout()
            .expect("layout of 2..5 classes");
        let default = nclasses - 1;
        let tagged_forward = h1 & 1 != 0;
        let flags = if tagged_forward {
            FLAG_TAGGED_FORWARD
        } else {
            0
        };
        let rs = RuleSet::with_rules(rules, default);
        let images = rs
            .to_bpf_map()
            .expect("at most 8 rules of at most 5 classes");
        self.c
            .set_rules(&images, default as u32, flags)
            .expect("set rules");
        self.c
            .set_class_rings(&layout.class_to_ring)
            .expect("set class rings");
        let want = reference(&rs, &layout.class_to_ring, frame, INGRESS, tagged_forward);
        let o = self
            .c
            .test_run(frame, Some(INGRESS))
            .expect("BPF_PROG_TEST_RUN");
        // No socket is bound: a redirect falls back to XDP_PASS, so the class/key counters
        // tell a redirect attempt from a pass to the kernel.
        assert_eq!(o.action, XDP_PASS, "action");
        let got = match (o.class, o.key) {
            (Some(class), Some(key)) => Verdict::Ring { class, key },
            (None, None) => Verdict::Kernel,
            other => panic!("inconsistent counters {other:?}"),
        };
        assert_eq!(
            got,
            want,
            "BPF {got:?}, Rust {want:?}\n  frame {} ({} bytes, parse {:?})\n  rules {:?}\n  class_to_ring {:?}",
            hex(frame),
            frame.len(),
            parse_frame(frame),
            rs.rules(),
            layout.class_to_ring
        );
    }
}

/// The Rust twin's verdict (see the module doc).
pub fn reference(
    rs: &RuleSet,
    class_to_ring: &[usize],
    f: &[u8],
    ingress: u32,
    tagged_forward: bool,
) -> Verdict {
    if f.len() >= 14 && f[0] & 1 == 1 {
        return Verdict::Kernel;
    }
    // One 802.1Q tag, the frame not oversize: the kernel's VLAN devices', whatever follows.
    let tag = |at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    if !tagged_forward
        && tag(12) == Some(0x8100)
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

fn bit(b: u16, i: u32) -> bool {
    b & (1 << i) != 0
}

/// One rule from [`RULE_BYTES`] bytes (see the module doc).
fn decode_rule(b: &[u8], nclasses: usize, frame: &[u8], meta: Option<&PacketMeta>) -> Rule {
    let present = u16::from_le_bytes([b[0], b[1]]);
    let from_frame = bit(present, 15);
    let m = meta.filter(|_| from_frame);
    let mut r = Rule::to_class(usize::from(b[2] & 0x7f) % nclasses);
    if bit(present, 0) {
        r.ifindex = Some(if b[2] & 0x80 != 0 { INGRESS } else { 999 });
    }
    let frame_vlan = m.and_then(|m| m.vlan);
    if bit(present, 1) {
        r.vlan_id = Some(match frame_vlan {
            Some(v) => v.id,
            None => u16::from_le_bytes([b[3], b[4]]) & 0xfff,
        });
    }
    if bit(present, 2) {
        r.vlan_pcp = Some(frame_vlan.map_or(b[5] & 7, |v| v.pcp));
    }
    let v6_bit = b[5] & 0x10 != 0;
    if bit(present, 3) {
        r.ip_version = Some(match m {
            Some(m) => m.version,
            None if v6_bit => IpVersion::V6,
            None => IpVersion::V4,
        });
    }
    if bit(present, 4) {
        r.proto = Some(m.map_or(b[6], |m| m.protocol));
    }
    if bit(present, 5) {
        r.dscp = Some(m.map_or(b[7] & 63, |m| m.dscp));
    }
    let prefix = |len_byte: u8, pick: u8, from: Option<(IpVersion, [u8; 16])>| {
        let (v6, addr) = match from {
            Some((IpVersion::V6, a)) => (true, u128::from_be_bytes(a)),
            Some((IpVersion::V4, a)) => (
                false,
                u128::from(u32::from_be_bytes([a[0], a[1], a[2], a[3]])),
            ),
            None if v6_bit => (true, V6[usize::from(pick & 3)]),
            None => (
                false,
                u128::from(u32::from_be_bytes(V4[usize::from(pick & 3)])),
            ),
        };
        if v6 {
            let len = len_byte % 129;
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpPrefix::new(IpAddr::V6(Ipv6Addr::from(addr & mask)), len)
        } else {
            let len = len_byte % 33;
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpPrefix::new(IpAddr::V4(Ipv4Addr::from(addr as u32 & mask)), len)
        }
        .expect("masked prefix")
    };
    if bit(present, 6) {
        r.src = Some(prefix(b[8], b[10], m.map(|m| (m.version, m.src))));
    }
    if bit(present, 7) {
        r.dst = Some(prefix(b[9], b[10] >> 2, m.map(|m| (m.version, m.dst))));
    }
    let range = |sel: u8, port: Option<u16>| {
        let base = port.unwrap_or(PORTS[usize::from(sel >> 6)]);
        let lo = base.saturating_sub(u16::from(sel & 7));
        let hi = lo.saturating_add(SPANS[usize::from((sel >> 3) & 7) % SPANS.len()]);
        PortRange::new(lo, hi).expect("lo <= hi")
    };
    let has_ports = m.filter(|m| m.has_ports);
    if bit(present, 8) {
        r.sport = Some(range(b[11], has_ports.map(|m| m.src_port)));
    }
    if bit(present, 9) {
        r.dport = Some(range(b[12], has_ports.map(|m| m.dst_port)));
    }
    if bit(present, 10) {
        let off = b[13] % 63;
        let mask = u16::from_le_bytes([b[14], b[15]]);
        let word = match frame.get(usize::from(off)..usize::from(off) + 2) {
            Some(w) if from_frame => u16::from_be_bytes([w[0], w[1]]),
            _ => u16::from_be_bytes([b[14], b[15]]),
        };
        r.flex = Some(Flex::new(off, word & mask, mask).expect("masked flex"));
    }
    r
}

fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect()
}
