use super::*;
use crate::wire::build::{frame, FrameSpec};
use crate::wire::{checksum, parse_frame};
use core::net::IpAddr;

fn spec(src: &str, dst: &str, payload_len: usize) -> FrameSpec {
    FrameSpec {
        src: src.parse::<IpAddr>().unwrap(),
        dst: dst.parse::<IpAddr>().unwrap(),
        payload_len,
        ..FrameSpec::default()
    }
}

fn addr16(a: &str) -> [u8; 16] {
    match a.parse::<IpAddr>().unwrap() {
        IpAddr::V4(v) => {
            let mut b = [0; 16];
            b[..4].copy_from_slice(&v.octets());
            b
        }
        IpAddr::V6(v) => v.octets(),
    }
}

/// The frame in a 2048-byte buffer, as a UMEM chunk holds it.
fn in_chunk(f: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 2048];
    b[..f.len()].copy_from_slice(f);
    b
}

#[test]
fn time_exceeded_v4_quotes_the_packet_and_verifies() {
    let orig = frame(&spec("10.0.0.1", "10.1.0.9", 100));
    let m = parse_frame(&orig).unwrap();
    let mut buf = in_chunk(&orig);
    let router = addr16("10.0.0.254");
    let len = build_error(&mut buf, &m, IcmpKind::TimeExceeded, &router, 7).unwrap();
    let out = &buf[..len];
    let r = parse_frame(out).unwrap();
    assert_eq!(r.protocol, proto::ICMP);
    assert_eq!(r.src, router);
    assert_eq!(r.dst, m.src);
    assert_eq!(usize::from(r.total_len), 20 + 8 + usize::from(m.total_len));
    assert!(checksum::verify(&out[14..34]), "IP header checksum");
    assert!(checksum::verify(&out[34..]), "ICMP checksum");
    assert_eq!((out[34], out[35]), (11, 0));
    // The whole original IP packet follows the 8-byte ICMP header, unchanged.
    assert_eq!(&out[42..], &orig[14..]);
}

#[test]
fn v4_quote_is_capped_at_576_bytes() {
    let orig = frame(&spec("10.0.0.1", "10.1.0.9", 1400));
    let m = parse_frame(&orig).unwrap();
    let mut buf = in_chunk(&orig);
    let len = build_error(
        &mut buf,
        &m,
        IcmpKind::NetUnreachable,
        &addr16("10.0.0.254"),
        1,
    )
    .unwrap();
    assert_eq!(len - 14, 576);
    assert_eq!((buf[34], buf[35]), (3, 0));
    assert_eq!(&buf[42..len], &orig[14..14 + 576 - 28]);
    assert!(checksum::verify(&buf[34..len]));
}

#[test]
fn frag_needed_carries_the_mtu() {
    let orig = frame(&spec("10.0.0.1", "10.1.0.9", 1400));
    let m = parse_frame(&orig).unwrap();
    let mut buf = in_chunk(&orig);
    let len = build_error(
        &mut buf,
        &m,
        IcmpKind::TooBig { mtu: 1400 },
        &addr16("10.0.0.254"),
        1,
    )
    .unwrap();
    assert_eq!((buf[34], buf[35]), (3, 4));
    assert_eq!(u16::from_be_bytes([buf[40], buf[41]]), 1400);
    assert!(checksum::verify(&buf[34..len]));
}

#[test]
fn packet_too_big_v6_has_mtu_pseudo_header_checksum_and_1280_cap() {
    let orig = frame(&spec("2001:db8::1", "2001:db8:1::9", 1400));
    let m = parse_frame(&orig).unwrap();
    let mut buf = in_chunk(&orig);
    let router = addr16("2001:db8::fe");
    let len = build_error(&mut buf, &m, IcmpKind::TooBig { mtu: 1280 }, &router, 0).unwrap();
    assert_eq!(len - 14, 1280, "as much as fits in the minimum MTU");
    let r = parse_frame(&buf[..len]).unwrap();
    assert_eq!((r.protocol, r.src, r.dst), (proto::ICMPV6, router, m.src));
    let icmp = &buf[54..len];
    assert_eq!((icmp[0], icmp[1]), (2, 0));
    assert_eq!(
        u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]]),
        1280
    );
    let pseudo = checksum::pseudo_header_sum(true, &r.src, &r.dst, 58, icmp.len() as u32);
    assert_eq!(checksum::fold64(pseudo + checksum::sum_words(icmp)), 0xffff);
    assert_eq!(&icmp[8..], &orig[14..14 + 1280 - 48]);
}

#[test]
fn v6_codes() {
    let orig = frame(&spec("2001:db8::1", "2001:db8:1::9", 10));
    let m = parse_frame(&orig).unwrap();
    for (kind, ty, code) in [
        (IcmpKind::TimeExceeded, 3, 0),
        (IcmpKind::NetUnreachable, 1, 0),
        (IcmpKind::HostUnreachable, 1, 3),
        (IcmpKind::Prohibited, 1, 1),
    ] {
        let mut buf = in_chunk(&orig);
        build_error(&mut buf, &m, kind, &addr16("2001:db8::fe"), 0).unwrap();
        assert_eq!((buf[54], buf[55]), (ty, code), "{kind:?}");
    }
}

#[test]
fn a_buffer_without_room_for_header_and_8_bytes_is_refused() {
    let orig = frame(&spec("10.0.0.1", "10.1.0.9", 100));
    let m = parse_frame(&orig).unwrap();
    let mut small = orig[..14 + 20 + 8 + 20 + 8 - 1].to_vec();
    assert_eq!(
        build_error(
            &mut small,
            &m,
            IcmpKind::TimeExceeded,
            &addr16("10.0.0.254"),
            0
        ),
        None
    );
}

#[test]
fn never_answer_errors_non_first_fragments_or_bad_sources() {
    let echo = FrameSpec {
        protocol: proto::ICMP,
        ..spec("10.0.0.1", "10.1.0.9", 20)
    };
    let mut f = frame(&echo);
    f[34] = 8; // echo request
    assert!(may_answer(&f, &parse_frame(&f).unwrap()));
    f[34] = 3; // destination unreachable: an error
    assert!(!may_answer(&f, &parse_frame(&f).unwrap()));
    f[34] = 11;
    assert!(!may_answer(&f, &parse_frame(&f).unwrap()));

    let mut f = frame(&spec("10.0.0.1", "10.1.0.9", 20));
    assert!(may_answer(&f, &parse_frame(&f).unwrap()));
    f[14 + 6] = 0x20; // MF, offset 0: the first fragment may be answered
    assert!(may_answer(&f, &parse_frame(&f).unwrap()));
    f[14 + 7] = 0x10; // offset 16 bytes
    assert!(!may_answer(&f, &parse_frame(&f).unwrap()));

    for src in ["0.0.0.0", "224.0.0.5", "255.255.255.255"] {
        let f = frame(&spec(src, "10.1.0.9", 20));
        assert!(!may_answer(&f, &parse_frame(&f).unwrap()), "{src}");
    }

    let icmp6 = FrameSpec {
        protocol: proto::ICMPV6,
        ..spec("2001:db8::1", "2001:db8:1::9", 20)
    };
    let mut f = frame(&icmp6);
    f[54] = 128; // echo request
    assert!(may_answer(&f, &parse_frame(&f).unwrap()));
    f[54] = 1; // an error
    assert!(!may_answer(&f, &parse_frame(&f).unwrap()));
}

#[test]
fn fragments_reassemble_to_the_original() {
    for (payload, mtu) in [(1472usize, 1400usize), (1472, 576), (3000, 1500), (100, 68)] {
        let mut orig = frame(&spec("10.0.0.1", "10.1.0.9", payload));
        for (i, b) in orig[42..].iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        orig[20] = 0; // the builder sets DF
        let total = orig.len() - 14;
        let mut data = vec![0u8; total - 20];
        let mut seen = 0;
        let mut k = 0;
        let mut last_mf = true;
        let mut out = vec![0u8; 4096];
        while let Some(len) = fragment_v4(&orig, 14, mtu, k, &mut out) {
            let ip = &out[14..len];
            assert!(ip.len() <= mtu, "fragment of {} > mtu {mtu}", ip.len());
            assert!(checksum::verify(&ip[..20]));
            assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), ip.len());
            let fo = u16::from_be_bytes([ip[6], ip[7]]);
            let off = usize::from(fo & 0x1fff) * 8;
            last_mf = fo & 0x2000 != 0;
            data[off..off + ip.len() - 20].copy_from_slice(&ip[20..]);
            seen += ip.len() - 20;
            assert_eq!(&out[..14], &orig[..14]);
            k += 1;
        }
        assert!(k >= 2, "{payload} over {mtu}: {k} fragments");
        assert_eq!(fragment_count(&orig, 14, mtu), Some(k), "count agrees");
        assert!(!last_mf, "the last fragment clears MF");
        assert_eq!(seen, total - 20);
        assert_eq!(&data[..], &orig[34..]);
    }
}

#[test]
fn df_and_fragments_of_fragments() {
    let mut df = frame(&spec("10.0.0.1", "10.1.0.9", 2000));
    df[20] = 0x40;
    let mut out = vec![0u8; 4096];
    assert_eq!(fragment_v4(&df, 14, 1500, 0, &mut out), None);
    assert_eq!(fragment_count(&df, 14, 1500), None);
    // A middle fragment (offset 800 bytes, MF) split again keeps its offsets and MF on all.
    let mut mid = frame(&spec("10.0.0.1", "10.1.0.9", 2000));
    mid[20..22].copy_from_slice(&(0x2000u16 | 100).to_be_bytes());
    let mut k = 0;
    while let Some(len) = fragment_v4(&mid, 14, 1000, k, &mut out) {
        let fo = u16::from_be_bytes([out[20], out[21]]);
        assert!(fo & 0x2000 != 0);
        assert_eq!(usize::from(fo & 0x1fff), 100 + k * (976 / 8));
        assert!(len - 14 <= 1000);
        k += 1;
    }
    assert_eq!(k, 3);
}

#[test]
fn limiter_bucket_and_rate() {
    let lim = IcmpLimits {
        rate: 100,
        burst: 10,
        per_dest_interval_ns: 0,
        per_dest_burst: 1,
    };
    let mut l = IcmpLimiter::new(lim, 0);
    let d = addr16("10.0.0.1");
    let sent = (0..100)
        .filter(|_| l.allow(IcmpKind::TimeExceeded, &d, 0))
        .count();
    assert_eq!(sent, 10, "burst");
    // Another class has its own bucket.
    assert!(l.allow(IcmpKind::NetUnreachable, &d, 0));
    // One second later: 100 more at most (and the bucket is capped at the burst).
    let mut sent = 0;
    for i in 0..10_000u64 {
        if l.allow(IcmpKind::TimeExceeded, &d, 1_000_000_000 + i * 100_000) {
            sent += 1;
        }
    }
    // 1 s of offers at 10 kHz: the burst (10) plus ~100 per s over the second.
    assert!((100..=111).contains(&sent), "{sent}");
}

#[test]
fn limiter_per_destination() {
    let mut l = IcmpLimiter::new(IcmpLimits::default(), 0);
    let a = addr16("10.0.0.1");
    let b = addr16("10.0.0.2");
    let to_a = (0..20)
        .filter(|_| l.allow(IcmpKind::TimeExceeded, &a, 0))
        .count();
    assert_eq!(to_a, 6, "per-host burst");
    assert!(
        l.allow(IcmpKind::TimeExceeded, &b, 0),
        "another host has its own"
    );
    assert!(!l.allow(IcmpKind::TimeExceeded, &a, 500_000_000));
    assert!(l.allow(IcmpKind::TimeExceeded, &a, 1_000_000_000));
    let mut off = IcmpLimiter::new(
        IcmpLimits {
            rate: 0,
            ..IcmpLimits::default()
        },
        0,
    );
    assert!(!off.allow(IcmpKind::TimeExceeded, &a, 0));
}

#[test]
fn limits_are_shared_between_workers() {
    let l = IcmpLimits::default();
    assert_eq!(l.share(1), l);
    let two = l.share(2);
    assert_eq!((two.rate, two.burst, two.per_dest_burst), (500, 25, 3));
    assert_eq!(two.per_dest_interval_ns, 2_000_000_000);
    let off = IcmpLimits { rate: 0, ..l }.share(4);
    assert_eq!(off.rate, 0, "off stays off");
    assert_eq!(
        IcmpLimits { burst: 1, ..l }.share(8).burst,
        1,
        "never 0 when on"
    );
}
