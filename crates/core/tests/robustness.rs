//! Random and mutated-valid frames through the parser, the classifier and the forwarder must
//! never panic, and every verdict must leave a sane frame. Runs with every `cargo test`; the
//! AFL++ targets `frame` and `forward` of fuzz/ (`scripts/fuzz.sh`, docs/fuzzing.md) check the
//! same properties with coverage feedback.

use std::net::IpAddr;
use std::sync::OnceLock;

use llr_core::classify::{RuleSet, RuleSpec};
use llr_core::fwd::{Forwarder, Interface, NextHop, Verdict};
use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::{checksum, parse_frame, IpVersion, Vlan};
use proptest::prelude::*;

const IN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

fn forwarder() -> &'static Forwarder {
    static F: OnceLock<Forwarder> = OnceLock::new();
    F.get_or_init(|| {
        let mut f = Forwarder::new();
        f.interfaces.upsert(Interface::new(1, IN_MAC, 9000));
        f.interfaces
            .upsert(Interface::new(2, [0x02, 0, 0, 0, 0, 2], 1500));
        f.interfaces.add_addr(1, "10.0.0.254".parse().unwrap(), 24);
        for (p, gw) in [("0.0.0.0/0", "10.1.0.1"), ("::/0", "2001:db8:1::1")] {
            let gw: IpAddr = gw.parse().unwrap();
            f.routes
                .insert(
                    p.parse().unwrap(),
                    NextHop {
                        ifindex: 2,
                        gateway: Some(gw),
                    },
                )
                .unwrap();
            f.neighbors.insert(2, gw, [0x02, 0, 0, 0, 0, 9]);
        }
        f
    })
}

fn rules() -> &'static RuleSet {
    static R: OnceLock<RuleSet> = OnceLock::new();
    R.get_or_init(|| {
        let names: Vec<String> = ["rt", "mid", "be"].map(String::from).to_vec();
        let rules = [
            "class=rt dscp=46",
            "class=mid proto=udp dport=5000-5100 dst=10.0.0.0/8",
            "class=rt vlan=100 pcp=5",
            "class=mid src=2001:db8::/32 sport=1-1024",
            "class=rt flex=14:0xb8/0xfc",
            "class=mid ifindex=3 ipver=6",
        ]
        .iter()
        .map(|r| {
            r.parse::<RuleSpec>()
                .unwrap()
                .resolve(&names, |_| None)
                .unwrap()
        })
        .collect();
        RuleSet::with_rules(rules, 2)
    })
}

fn spec() -> impl Strategy<Value = FrameSpec> {
    (
        any::<bool>(),
        prop::option::of((0u16..4096, 0u8..8)),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        prop::sample::select(vec![1u8, 6, 17, 58, 132, 47]),
        0u8..64,
        any::<u8>(),
        any::<(u16, u16)>(),
        0usize..80,
    )
        .prop_map(
            |(v6, vlan, s, d, protocol, dscp, ttl, (sp, dp), payload_len)| {
                let (src, dst) = if v6 {
                    (IpAddr::from(s), IpAddr::from(d))
                } else {
                    (
                        IpAddr::from([s[0], s[1], s[2], s[3]]),
                        IpAddr::from([d[0], d[1], d[2], d[3]]),
                    )
                };
                FrameSpec {
                    dst_mac: IN_MAC,
                    vlan: vlan.map(|(id, pcp)| Vlan { id, pcp }),
                    src,
                    dst,
                    protocol,
                    dscp,
                    ttl,
                    src_port: sp,
                    dst_port: dp,
                    payload_len,
                    ..FrameSpec::default()
                }
            },
        )
}

/// Flips bytes, truncates, and optionally repairs the IPv4 checksum so deeper paths are reached.
fn mutate(mut f: Vec<u8>, flips: &[(usize, u8)], cut: Option<usize>, fix: bool) -> Vec<u8> {
    for &(i, x) in flips {
        let n = f.len();
        f[i % n] ^= x;
    }
    if let Some(c) = cut {
        let n = f.len();
        f.truncate(c % (n + 1));
    }
    if fix {
        if let Ok(m) = parse_frame(&f) {
            if m.version == IpVersion::V4 {
                let l3 = usize::from(m.l3_offset);
                let hl = usize::from(m.l4_offset) - l3;
                f[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
                let c = checksum::checksum(&f[l3..l3 + hl]);
                f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
            }
        }
    }
    f
}

fn check_everything(f: &[u8], ingress: u32) -> Result<(), TestCaseError> {
    let parsed = parse_frame(f);
    if let Ok(m) = &parsed {
        prop_assert!(m.l3_offset == 14 || m.l3_offset == 18);
        prop_assert!(usize::from(m.l4_offset) <= f.len());
        prop_assert!(usize::from(m.l3_offset) + usize::from(m.total_len) <= f.len());
        prop_assert!(!m.has_ports || !m.is_fragment);
    }
    let rs = rules();
    let c = rs.classify(f, None, ingress);
    prop_assert!(c <= 2);
    if let Ok(m) = &parsed {
        prop_assert_eq!(
            rs.classify(f, Some(m), ingress),
            c,
            "meta given or not, same class"
        );
    }
    let mut buf = f.to_vec();
    // as the worker does: every frame's lookup warmed first (must not panic on any input)
    forwarder().warm(f);
    match forwarder().process(&mut buf, ingress) {
        Verdict::Tx { ifindex, len } => {
            let m = parsed.expect("Tx only for parsed frames");
            prop_assert_eq!(ifindex, 2);
            let l3 = usize::from(m.l3_offset);
            // bytes past the IP length stay behind; a tagged frame is the kernel's
            prop_assert_eq!(len, l3 + usize::from(m.total_len));
            prop_assert!(m.vlan.is_none());
            let after = parse_frame(&buf).expect("rewritten frame still parses");
            prop_assert_eq!(after.ttl, m.ttl - 1);
            if m.version == IpVersion::V4 {
                prop_assert!(checksum::verify(&buf[l3..usize::from(m.l4_offset)]));
            }
            // Beyond the MACs only TTL/hop limit, the IPv4 checksum and a partial L4 checksum
            // (completed) may change.
            let l4sum = llr_core::wire::l4::checksum_offset(m.protocol)
                .filter(|_| m.has_ports)
                .map(|o| usize::from(m.l4_offset) + o);
            for i in 12..f.len() {
                let allowed = l4sum.is_some_and(|o| i == o || i == o + 1)
                    || match m.version {
                        IpVersion::V4 => [l3 + 8, l3 + 10, l3 + 11].contains(&i),
                        IpVersion::V6 => i == l3 + 7,
                    };
                if !allowed {
                    prop_assert_eq!(f[i], buf[i], "byte {} changed", i);
                }
            }
        }
        Verdict::Pass(_) | Verdict::Drop(_) => {
            prop_assert_eq!(&buf[..], f, "pass/drop must not modify")
        }
        Verdict::Icmp { error, .. } => {
            prop_assert_eq!(&buf[..], f, "an ICMP verdict leaves the frame as received");
            let m = parsed.expect("ICMP only for parsed frames");
            let mut chunk = vec![0u8; 2048.max(f.len())];
            chunk[..f.len()].copy_from_slice(f);
            if let Verdict::Tx { len, .. } =
                forwarder().icmp_error(&mut chunk, &m, ingress, error, 1)
            {
                let r = parse_frame(&chunk[..len]).expect("an ICMP error parses");
                prop_assert_eq!(r.dst, m.src);
            }
        }
        Verdict::Fragment { mtu, .. } => {
            let m = parsed.expect("fragments only for parsed frames");
            let mut out = vec![0u8; 2048];
            let mut k = 0;
            while let Some(len) = llr_core::fwd::icmp::fragment_v4(
                &buf,
                usize::from(m.l3_offset),
                mtu as usize,
                k,
                &mut out,
            ) {
                prop_assert!(parse_frame(&out[..len]).is_ok());
                k += 1;
            }
            prop_assert!(k >= 2);
        }
        // The test's forwarder sends no redirects: no interface has send_redirects on (IPv4)
        // or a link-local address to send one from (IPv6).
        Verdict::Redirect { .. } => prop_assert!(false, "a redirect without send_redirects"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(f in prop::collection::vec(any::<u8>(), 0..200), ingress in 0u32..4) {
        check_everything(&f, ingress)?;
    }

    #[test]
    fn valid_frames(s in spec(), ingress in 1u32..4) {
        let f = frame(&s);
        prop_assert!(parse_frame(&f).is_ok());
        check_everything(&f, ingress)?;
    }

    #[test]
    fn mutated_valid_frames(
        s in spec(),
        flips in prop::collection::vec((any::<usize>(), 1u8..=255), 0..4),
        cut in prop::option::weighted(0.2, any::<usize>()),
        fix in any::<bool>(),
    ) {
        let f = mutate(frame(&s), &flips, cut, fix);
        check_everything(&f, 1)?;
    }
}

#[test]
fn valid_frames_are_forwarded_often_enough_to_test_the_tx_path() {
    // Guards the property tests above against silently never reaching the rewrite.
    let mut tx = 0;
    for ttl in [2u8, 64, 255] {
        for dst in ["10.2.0.1", "192.0.2.1", "2001:db8:5::1"] {
            let src: IpAddr = if dst.contains(':') {
                "2001:db8::1"
            } else {
                "10.0.0.1"
            }
            .parse()
            .unwrap();
            let mut f = frame(&FrameSpec {
                dst_mac: IN_MAC,
                src,
                dst: dst.parse().unwrap(),
                ttl,
                ..FrameSpec::default()
            });
            tx += usize::from(matches!(forwarder().process(&mut f, 1), Verdict::Tx { .. }));
        }
    }
    assert_eq!(tx, 9);
}
