//! The classifier in a family whose firewall reads connection state (`bpf/classifier.c`, run
//! with `BPF_PROG_TEST_RUN`): only frames of the connections in `llr_ct` stay with llrouter,
//! and of TCP only those without SYN, FIN or RST; every other frame of the family goes to the
//! kernel, counted; the other family is untouched (root; fails without it).

use std::net::IpAddr;

use llr_core::filter::FamilyMode;
use llr_core::wire::build::{frame, FrameSpec};
use llr_io::conntrack::Tuple;
use llr_io::ebpf::{Classifier, XDP_PASS};

const IIF: u32 = 1;

fn tcp(src: &str, dst: &str, sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    let mut f = frame(&FrameSpec {
        src,
        dst,
        protocol: 6,
        src_port: sport,
        dst_port: dport,
        payload_len: 100,
        ..FrameSpec::default()
    });
    let l4 = 14 + if src.is_ipv6() { 40 } else { 20 };
    f[l4 + 13] = flags;
    f
}

fn udp(src: &str, dst: &str, sport: u16, dport: u16) -> Vec<u8> {
    frame(&FrameSpec {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        protocol: 17,
        src_port: sport,
        dst_port: dport,
        payload_len: 100,
        ..FrameSpec::default()
    })
}

fn tuple(src: &str, dst: &str, sport: u16, dport: u16, proto: u8) -> Tuple {
    Tuple {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        sport,
        dport,
        proto,
    }
}

const ACK: u8 = 0x10;
const PSH_ACK: u8 = 0x18;

#[test]
#[ignore = "needs root: BPF_PROG_TEST_RUN (scripts/test.sh runs it as root)"]
fn only_frames_of_carried_connections_stay_with_llrouter() {
    llr_io::sys::require_root();
    let mut c = Classifier::load(0).expect("load the classifier");
    c.assume_live(true);
    let kept = |c: &Classifier, f: &[u8]| c.test_run(f, Some(IIF)).unwrap().class.is_some();
    let t4 = tuple("10.0.0.1", "10.1.0.1", 40000, 80, 6);
    let u6 = tuple("fd00::1", "fd01::1", 5000, 53, 17);
    let ack4 = tcp("10.0.0.1", "10.1.0.1", 40000, 80, PSH_ACK);
    let back4 = tcp("10.1.0.1", "10.0.0.1", 80, 40000, ACK);
    let dgram6 = udp("fd00::1", "fd01::1", 5000, 53);
    // Before: everything is llrouter's.
    assert!(kept(&c, &ack4) && kept(&c, &dgram6));
    c.set_family_modes([FamilyMode::Conntrack, FamilyMode::Llrouter])
        .unwrap();
    let before = c.stats().unwrap().pass_conntrack;
    // IPv4 of no known connection: the kernel's; IPv6 untouched.
    let out = c.test_run(&ack4, Some(IIF)).unwrap();
    assert_eq!((out.action, out.class), (XDP_PASS, None));
    assert!(kept(&c, &dgram6));
    assert_eq!(c.stats().unwrap().pass_conntrack, before + 1);
    for t in [t4, t4.reversed()] {
        assert!(c.ct_insert(t.bpf_key()).unwrap());
    }
    assert_eq!(c.ct_seen(&t4.bpf_key()).unwrap(), Some(0));
    assert!(kept(&c, &ack4) && kept(&c, &back4));
    let seen = c.ct_seen(&t4.bpf_key()).unwrap().unwrap();
    assert!(seen > 0, "the classifier stamps the entry it used");
    // A second insert keeps the stamp.
    assert!(c.ct_insert(t4.bpf_key()).unwrap());
    assert_eq!(c.ct_seen(&t4.bpf_key()).unwrap(), Some(seen));
    // State changes are the kernel's: SYN, FIN, RST, and a segment without ACK.
    for flags in [0x02, 0x12, 0x11, 0x14, 0x04, 0x08, 0x00] {
        let f = tcp("10.0.0.1", "10.1.0.1", 40000, 80, flags);
        assert!(!kept(&c, &f), "TCP flags {flags:#x}");
    }
    // Another port, another protocol with the same ports: not this connection.
    assert!(!kept(&c, &tcp("10.0.0.1", "10.1.0.1", 40001, 80, ACK)));
    assert!(!kept(&c, &udp("10.0.0.1", "10.1.0.1", 40000, 80)));
    // IPv6 in conntrack mode too.
    c.set_family_modes([FamilyMode::Conntrack, FamilyMode::Conntrack])
        .unwrap();
    assert!(!kept(&c, &dgram6));
    assert!(c.ct_insert(u6.bpf_key()).unwrap());
    assert!(kept(&c, &dgram6));
    assert!(
        !kept(&c, &udp("fd01::1", "fd00::1", 53, 5000)),
        "only the direction put in"
    );
    // Removed: back to the kernel. The kernel's mode wins over the table.
    c.ct_remove(&t4.bpf_key()).unwrap();
    c.ct_remove(&t4.bpf_key()).unwrap();
    assert!(!kept(&c, &ack4) && kept(&c, &back4));
    c.set_family_modes([FamilyMode::Kernel, FamilyMode::Conntrack])
        .unwrap();
    assert!(!kept(&c, &back4));
    c.set_family_modes([FamilyMode::Llrouter; 2]).unwrap();
    assert!(kept(&c, &ack4) && kept(&c, &udp("fd01::1", "fd00::1", 53, 5000)));
}
