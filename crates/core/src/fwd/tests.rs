use super::*;
use crate::wire::build::{frame, FrameSpec};
use crate::wire::{parse_frame, Vlan};
use core::net::IpAddr;

const IN_MAC: Mac = [0x02, 0, 0, 0, 0, 1];
const OUT_MAC: Mac = [0x02, 0, 0, 0, 0, 0xee];
const GW_MAC: Mac = [0x02, 0, 0, 0, 0, 0x99];
const HOST_MAC: Mac = [0x02, 0, 0, 0, 0, 0x55];

fn p(s: &str) -> crate::classify::IpPrefix {
    s.parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Interface 1 (10.0.0.254/24, 2001:db8::fe/64) in, interface 2 (10.1.0.254/24, 2001:db8:1::fe/64)
/// out; 10.1.0.0/24 connected, 10.2.0.0/16 via 10.1.0.1, default v6 via 2001:db8:1::1.
fn forwarder() -> Forwarder {
    let mut f = Forwarder::new();
    f.interfaces.upsert(Interface::new(1, IN_MAC, 1500));
    f.interfaces.upsert(Interface::new(2, OUT_MAC, 1500));
    f.interfaces.add_addr(1, ip("10.0.0.254"), 24);
    f.interfaces.add_addr(2, ip("10.1.0.254"), 24);
    f.interfaces.add_addr(1, ip("2001:db8::fe"), 64);
    let on2 = NextHop {
        ifindex: 2,
        gateway: None,
    };
    f.routes.insert(p("10.1.0.0/24"), on2).unwrap();
    f.routes
        .insert(
            p("10.2.0.0/16"),
            NextHop {
                ifindex: 2,
                gateway: Some(ip("10.1.0.1")),
            },
        )
        .unwrap();
    f.routes
        .insert(
            p("::/0"),
            NextHop {
                ifindex: 2,
                gateway: Some(ip("2001:db8:1::1")),
            },
        )
        .unwrap();
    f.routes
        .insert(
            p("10.9.0.0/16"),
            NextHop {
                ifindex: 7,
                gateway: None,
            },
        )
        .unwrap();
    f.neighbors.insert(2, ip("10.1.0.1"), GW_MAC);
    f.neighbors.insert(2, ip("10.1.0.1"), GW_MAC);
    f.neighbors.insert(2, ip("10.1.0.7"), HOST_MAC);
    f.neighbors.insert(2, ip("2001:db8:1::1"), GW_MAC);
    f
}

fn spec(dst: &str) -> FrameSpec {
    FrameSpec {
        dst_mac: IN_MAC,
        dst: ip(dst),
        ..FrameSpec::default()
    }
}

fn spec6(dst: &str) -> FrameSpec {
    FrameSpec {
        src: ip("2001:db8::1"),
        ..spec(dst)
    }
}

fn run(f: &Forwarder, s: &FrameSpec) -> (Verdict, Vec<u8>) {
    let mut b = frame(s);
    let v = f.process(&mut b, 1);
    (v, b)
}

#[test]
fn forwards_via_gateway_with_valid_checksum() {
    let f = forwarder();
    let s = spec("10.2.3.4");
    let before = frame(&s);
    let (v, after) = run(&f, &s);
    assert_eq!(
        v,
        Verdict::Tx {
            ifindex: 2,
            len: before.len()
        }
    );
    assert_eq!(&after[..6], &GW_MAC);
    assert_eq!(&after[6..12], &OUT_MAC);
    let ip4 = &after[14..34];
    assert_eq!(ip4[8], 63);
    assert!(checksum::verify(ip4));
    let mut recomputed = ip4.to_vec();
    recomputed[10..12].copy_from_slice(&[0, 0]);
    assert_eq!(
        checksum::checksum(&recomputed).to_be_bytes(),
        [ip4[10], ip4[11]]
    );
    // Only TTL, checksum and MACs changed.
    for (i, (a, b)) in before.iter().zip(&after).enumerate() {
        if !(i < 12 || i == 22 || i == 24 || i == 25) {
            assert_eq!(a, b, "byte {i}");
        }
    }
}

#[test]
fn a_tagged_frame_is_the_kernels_vlan_devices() {
    let f = forwarder();
    let s = FrameSpec {
        vlan: Some(Vlan { id: 7, pcp: 3 }),
        ..spec("10.2.3.4")
    };
    assert_eq!(run(&f, &s).0, Verdict::Pass(PassReason::Vlan));
}

#[test]
fn bytes_past_the_ip_length_stay_behind() {
    let f = forwarder();
    for s in [spec("10.2.3.4"), spec6("2001:db8:5::1")] {
        let mut b = frame(&s);
        let n = b.len();
        b.extend_from_slice(&[0xaa; 6]);
        assert_eq!(
            f.process(&mut b, 1),
            Verdict::Tx { ifindex: 2, len: n },
            "{:?}",
            s.dst
        );
    }
}

#[test]
fn forwards_on_link_and_ipv6() {
    let f = forwarder();
    let (v, b) = run(&f, &spec("10.1.0.7"));
    assert!(matches!(v, Verdict::Tx { ifindex: 2, .. }));
    assert_eq!(&b[..6], &HOST_MAC);
    let (v, b) = run(&f, &spec6("2001:db8:5::1"));
    assert!(matches!(v, Verdict::Tx { ifindex: 2, .. }));
    assert_eq!(b[14 + 7], 63);
    assert_eq!(&b[..6], &GW_MAC);
}

#[test]
fn pass_drop_and_icmp_reasons() {
    let f = forwarder();
    let pass = |s: FrameSpec| run(&f, &s).0;
    use DropReason as D;
    use PassReason as P;
    let icmp = |drop, error| Verdict::Icmp { drop, error };
    assert_eq!(pass(spec("10.0.0.254")), Verdict::Pass(P::Local));
    assert_eq!(pass(spec("10.1.0.255")), Verdict::Pass(P::Broadcast));
    assert_eq!(pass(spec("255.255.255.255")), Verdict::Pass(P::Broadcast));
    assert_eq!(pass(spec("224.0.0.5")), Verdict::Pass(P::Multicast));
    assert_eq!(pass(spec("169.254.1.1")), Verdict::Drop(D::LinkLocal));
    assert_eq!(pass(spec("127.0.0.1")), Verdict::Drop(D::Martian));
    assert_eq!(pass(spec("0.0.0.0")), Verdict::Drop(D::Martian));
    // A class E destination is routed, as in Linux; a class E source is not.
    assert_eq!(
        pass(spec("240.0.0.1")),
        icmp(D::NoRoute, IcmpKind::NetUnreachable)
    );
    assert_eq!(
        pass(FrameSpec {
            src: ip("240.0.0.1"),
            ..spec("10.2.0.1")
        }),
        Verdict::Drop(D::Martian)
    );
    // The rest of 0.0.0.0/8 is unicast, as in Linux: no route here.
    assert_eq!(
        pass(spec("0.1.2.3")),
        icmp(D::NoRoute, IcmpKind::NetUnreachable)
    );
    let from = |src: &str, dst: &str| FrameSpec {
        src: ip(src),
        ..spec(dst)
    };
    assert!(matches!(
        pass(from("0.1.2.3", "10.2.0.1")),
        Verdict::Tx { .. }
    ));
    assert_eq!(pass(from("0.0.0.0", "10.2.0.1")), Verdict::Drop(D::Martian));
    // One of the router's own addresses as the source, from outside: a martian (IPv4); IPv6
    // forwards it, as the kernel does.
    for own in ["10.0.0.254", "10.1.0.254"] {
        assert_eq!(pass(from(own, "10.2.0.1")), Verdict::Drop(D::Martian));
    }
    assert!(matches!(
        pass(from("2001:db8::fe", "2001:db8:5::1")),
        Verdict::Tx { .. }
    ));
    assert_eq!(
        pass(spec("10.3.0.1")),
        icmp(D::NoRoute, IcmpKind::NetUnreachable)
    );
    // A route through interface 7, which the router does not serve: the kernel's.
    assert_eq!(pass(spec("10.9.0.1")), Verdict::Pass(P::KernelRoute));
    assert_eq!(pass(spec("10.1.0.8")), Verdict::Drop(D::NoNeighbor));
    for ttl in [0, 1] {
        assert_eq!(
            pass(FrameSpec {
                ttl,
                ..spec("10.2.0.1")
            }),
            icmp(D::TtlExpired, IcmpKind::TimeExceeded)
        );
    }
    // The builder sets DF: too big answers "fragmentation needed" with the egress MTU.
    assert_eq!(
        pass(FrameSpec {
            payload_len: 1500,
            ..spec("10.2.0.1")
        }),
        icmp(D::TooBig, IcmpKind::TooBig { mtu: 1500 })
    );
    assert_eq!(
        pass(FrameSpec {
            payload_len: 1500,
            ..spec6("2001:db8:5::1")
        }),
        icmp(D::TooBig, IcmpKind::TooBig { mtu: 1500 })
    );
    assert_eq!(
        pass(FrameSpec {
            dst_mac: [0xff; 6],
            ..spec("10.2.0.1")
        }),
        Verdict::Pass(P::L2Multicast)
    );
    assert_eq!(
        pass(FrameSpec {
            dst_mac: HOST_MAC,
            ..spec("10.2.0.1")
        }),
        Verdict::Drop(D::OtherHost)
    );
    assert_eq!(pass(spec6("2001:db8::fe")), Verdict::Pass(P::Local));
    assert_eq!(pass(spec6("ff02::1")), Verdict::Pass(P::Multicast));
    assert_eq!(pass(spec6("fe80::1")), Verdict::Drop(D::LinkLocal));
    let mut b = frame(&spec("10.2.0.1"));
    assert_eq!(f.process(&mut b, 9), Verdict::Pass(P::UnknownIngress));
    let mut arp = frame(&spec("10.2.0.1"));
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(f.process(&mut arp, 1), Verdict::Pass(P::NonIp));
}

#[test]
fn route_kinds() {
    let f = forwarder();
    for (prefix, kind) in [
        ("10.20.0.0/16", RouteKind::Blackhole),
        ("10.21.0.0/16", RouteKind::Unreachable),
        ("10.22.0.0/16", RouteKind::Prohibit),
        ("10.23.0.0/16", RouteKind::Kernel),
        ("10.24.0.0/16", RouteKind::Throw),
        ("2001:db8:21::/48", RouteKind::Unreachable),
    ] {
        f.routes.insert(p(prefix), NextHop::special(kind)).unwrap();
        assert_eq!(NextHop::special(kind).kind(), kind);
    }
    let v = |d: &str| run(&f, &spec(d)).0;
    assert_eq!(v("10.20.1.1"), Verdict::Drop(DropReason::Blackhole));
    assert_eq!(
        v("10.21.1.1"),
        Verdict::Icmp {
            drop: DropReason::Unreachable,
            error: IcmpKind::HostUnreachable
        }
    );
    assert_eq!(
        v("10.22.1.1"),
        Verdict::Icmp {
            drop: DropReason::Unreachable,
            error: IcmpKind::Prohibited
        }
    );
    assert_eq!(v("10.23.1.1"), Verdict::Pass(PassReason::KernelRoute));
    // A throw in main, with the default rules: nothing left to look in.
    let no_route = Verdict::Icmp {
        drop: DropReason::NoRoute,
        error: IcmpKind::NetUnreachable,
    };
    assert_eq!(v("10.24.1.1"), no_route);
    // IPv6 answers an unreachable route with "no route" (1/0), as Linux does.
    assert_eq!(
        run(&f, &spec6("2001:db8:21::1")).0,
        Verdict::Icmp {
            drop: DropReason::Unreachable,
            error: IcmpKind::NetUnreachable
        }
    );
}

#[test]
fn icmp_error_goes_back_out_of_the_ingress_from_its_address() {
    let f = forwarder();
    f.routes
        .insert(
            p("10.0.0.0/24"),
            NextHop {
                ifindex: 1,
                gateway: None,
            },
        )
        .unwrap();
    let s = FrameSpec {
        ttl: 1,
        ..spec("10.2.0.1")
    };
    let orig = frame(&s);
    let mut buf = vec![0u8; 2048];
    buf[..orig.len()].copy_from_slice(&orig);
    let m = parse_frame(&orig).unwrap();
    let Verdict::Icmp { error, .. } = f.process(&mut buf[..orig.len()], 1) else {
        panic!("ttl 1 must be answered");
    };
    let v = f.icmp_error(&mut buf, &m, 1, error, 9);
    let Verdict::Tx { ifindex, len } = v else {
        panic!("{v:?}");
    };
    assert_eq!(ifindex, 1);
    let out = &buf[..len];
    // No neighbour entry for 10.0.0.1: the previous hop's MAC (the frame's source) is used.
    assert_eq!(&out[..6], &s.src_mac);
    assert_eq!(&out[6..12], &IN_MAC);
    let r = parse_frame(out).unwrap();
    assert_eq!(
        r.src_ip(),
        ip("10.0.0.254"),
        "the ingress interface's address"
    );
    assert_eq!(r.dst_ip(), ip("10.0.0.1"));
    assert_eq!((out[34], out[35]), (11, 0));
    assert_eq!(
        &out[42..],
        &orig[14..],
        "the original packet as received (TTL 1)"
    );
}

#[test]
fn large_ipv4_without_df_is_fragmented_with_a_complete_checksum() {
    let f = forwarder();
    let s = FrameSpec {
        payload_len: 1500,
        ..spec("10.2.0.1")
    };
    let mut b = frame(&s);
    b[20] = 0; // clear DF
    Ipv4Packet::new_checked(&mut b[14..])
        .unwrap()
        .fill_checksum();
    let v = f.process(&mut b, 1);
    assert_eq!(
        v,
        Verdict::Fragment {
            ifindex: 2,
            mtu: 1500
        }
    );
    assert_eq!(&b[..6], &GW_MAC, "rewritten before fragmenting");
    assert_eq!(b[22], 63);
}

#[test]
fn icmp_error_needs_a_route_back() {
    let f = forwarder();
    // The test forwarder has no route to the sources on interface 1 (10.0.0.0/24).
    let s = FrameSpec {
        ttl: 1,
        ..spec("10.2.0.1")
    };
    let orig = frame(&s);
    let m = parse_frame(&orig).unwrap();
    let mut buf = vec![0u8; 2048];
    buf[..orig.len()].copy_from_slice(&orig);
    assert_eq!(
        f.icmp_error(&mut buf, &m, 1, IcmpKind::TimeExceeded, 0),
        Verdict::Drop(DropReason::NoRoute)
    );
}

#[test]
fn pass_and_drop_leave_frame_untouched() {
    let f = forwarder();
    let s = FrameSpec {
        ttl: 1,
        ..spec("10.2.0.1")
    };
    let (_, b) = run(&f, &s);
    assert_eq!(b, frame(&s));
}

#[test]
fn fragments_follow_policy() {
    let mut f = forwarder();
    let mut b = frame(&spec("10.2.0.1"));
    b[20] = 0x20; // MF
    Ipv4Packet::new_checked(&mut b[14..])
        .unwrap()
        .fill_checksum();
    assert!(
        matches!(f.process(&mut b.clone(), 1), Verdict::Tx { .. }),
        "a router forwards fragments by default"
    );
    f.fragments = FragmentPolicy::Pass;
    assert_eq!(
        f.process(&mut b.clone(), 1),
        Verdict::Pass(PassReason::Fragment)
    );
    f.fragments = FragmentPolicy::Drop;
    assert_eq!(
        f.process(&mut b.clone(), 1),
        Verdict::Drop(DropReason::Parse(ParseError::Fragment))
    );
    f.fragments = FragmentPolicy::Forward;
    assert!(matches!(f.process(&mut b, 1), Verdict::Tx { .. }));
}

#[test]
fn drop_reasons() {
    let f = forwarder();
    let mut b = frame(&spec("10.2.0.1"));
    b[24] ^= 0x55; // corrupt checksum
    assert_eq!(f.process(&mut b, 1), Verdict::Drop(DropReason::BadChecksum));
    let mut b = frame(&spec("10.2.0.1"));
    b[14] = 0x43;
    assert_eq!(
        f.process(&mut b, 1),
        Verdict::Drop(DropReason::Parse(ParseError::BadIhl))
    );
    assert_eq!(
        f.process(&mut [0u8; 10], 1),
        Verdict::Drop(DropReason::Parse(ParseError::Runt))
    );
    for i in 0..DropReason::COUNT {
        assert_eq!(DropReason::from_index(i).unwrap().index(), i);
    }
    assert_eq!(DropReason::from_index(DropReason::COUNT), None);
    for (i, r) in PassReason::ALL.iter().enumerate() {
        assert_eq!(r.index(), i);
    }
}

#[test]
fn ip_options_go_to_the_kernel() {
    let f = forwarder();
    let base = frame(&spec("10.2.0.1"));
    // Rebuild with a 4-byte NOP option block: IHL 6.
    let mut b = base[..34].to_vec();
    b.extend_from_slice(&[1, 1, 1, 0]);
    b.extend_from_slice(&base[34..]);
    b[14] = 0x46;
    let tl = u16::from_be_bytes([b[16], b[17]]) + 4;
    b[16..18].copy_from_slice(&tl.to_be_bytes());
    Ipv4Packet::new_checked(&mut b[14..])
        .unwrap()
        .fill_checksum();
    assert!(parse_frame(&b).is_ok());
    assert_eq!(f.process(&mut b, 1), Verdict::Pass(PassReason::IpOptions));
    // IPv6 with an 8-byte hop-by-hop header (PadN), counted apart.
    let base = frame(&spec6("2001:db8:5::1"));
    let mut b = base[..54].to_vec();
    b.extend_from_slice(&[base[20], 0, 1, 4, 0, 0, 0, 0]);
    b.extend_from_slice(&base[54..]);
    b[20] = 0;
    let pl = u16::from_be_bytes([b[18], b[19]]) + 8;
    b[18..20].copy_from_slice(&pl.to_be_bytes());
    assert!(parse_frame(&b).is_ok());
    assert_eq!(f.process(&mut b, 1), Verdict::Pass(PassReason::HopByHop));
}

#[test]
fn route_table_replace_and_remove() {
    let f = forwarder();
    let old = f
        .routes
        .insert(
            p("10.2.0.0/16"),
            NextHop {
                ifindex: 2,
                gateway: Some(ip("10.1.0.7")),
            },
        )
        .unwrap();
    assert_eq!(old.unwrap().gateway, Some(ip("10.1.0.1")));
    let (v, b) = run(&f, &spec("10.2.0.1"));
    assert!(matches!(v, Verdict::Tx { .. }));
    assert_eq!(&b[..6], &HOST_MAC);
    assert!(f.routes.remove(p("10.2.0.0/16")).is_some());
    let unreachable = Verdict::Icmp {
        drop: DropReason::NoRoute,
        error: IcmpKind::NetUnreachable,
    };
    assert_eq!(run(&f, &spec("10.2.0.1")).0, unreachable);
    assert!(f.routes.remove(p("::/0")).is_some());
    assert_eq!(run(&f, &spec6("2001:db8:5::1")).0, unreachable);
}

#[test]
fn ethernet_padding_on_a_short_frame_is_forwarded_not_counted() {
    // A 42-byte UDP/IPv4 frame (no payload) as a NIC delivers it: padded to the 60-byte
    // Ethernet minimum with zeros after the IP datagram.
    let f = forwarder();
    let s = FrameSpec {
        payload_len: 0,
        ..spec("10.2.3.4")
    };
    let bare = frame(&s);
    assert_eq!(bare.len(), 42);
    let mut padded = bare.clone();
    padded.resize(60, 0);
    let m = parse_frame(&padded).expect("padding is not malformed");
    assert_eq!(m.total_len, 28, "the IP length, not the frame's");
    let v = f.process(&mut padded, 1);
    assert_eq!(
        v,
        Verdict::Tx {
            ifindex: 2,
            len: 42
        },
        "forwarded without the padding, as the kernel trims it (the egress NIC pads again)"
    );
    assert_eq!(padded[22], 63, "TTL decremented");
    assert!(
        checksum::verify(&padded[14..34]),
        "IP checksum over the header only"
    );
    assert_eq!(&padded[42..], &[0u8; 18], "padding untouched");
}

/// Forwarded v4 and v6, no route, another host's MAC, a VLAN tag, too short.
fn mixed_frames() -> Vec<Vec<u8>> {
    let specs = [
        spec("10.2.3.4"),
        spec6("2001:db8:9::1"),
        spec("10.1.0.7"),
        spec("192.0.2.1"),
        FrameSpec {
            dst_mac: [2, 0, 0, 0, 0, 0x42],
            ..spec("10.2.3.4")
        },
        FrameSpec {
            vlan: Some(Vlan { id: 5, pcp: 0 }),
            ..spec("10.2.3.4")
        },
    ];
    let mut frames: Vec<Vec<u8>> = specs.iter().map(frame).collect();
    frames.push(vec![0u8; 20]);
    frames
}

/// Each frame forwarded by its hint gives the verdict and bytes it gets looked up alone.
fn assert_routed_as_alone(f: &Forwarder, frames: &[Vec<u8>], hints: &[RouteHint], what: &str) {
    for (i, b) in frames.iter().enumerate() {
        let (mut a, mut c) = (b.clone(), b.clone());
        let plain = f.process(&mut a, 1);
        let routed = f.process_routed(&mut c, 1, &hints[i]);
        assert_eq!((plain, &a), (routed, &c), "{what}: frame {i}");
    }
}

#[test]
fn a_batch_looked_up_together_is_forwarded_as_frame_by_frame() {
    let f = forwarder();
    let frames = mixed_frames();
    let views: Vec<&[u8]> = frames.iter().map(|b| &b[..]).collect();
    let mut hints = [RouteHint::default(); ROUTE_BATCH];
    f.route_many(&views, &mut hints);
    assert_routed_as_alone(&f, &frames, &hints, "one batch");
    // A hint is only taken for the destination it was looked up for: the first frame's hint
    // on the second frame changes nothing.
    let mut b = frames[1].clone();
    let mut c = frames[1].clone();
    assert_eq!(f.process(&mut b, 1), f.process_routed(&mut c, 1, &hints[0]));
}

/// Batches around the scratch arrays' sizes (8, and [`ROUTE_BATCH`]) give every frame its
/// own answer; frames past [`ROUTE_BATCH`] get an empty hint, never one a previous batch left.
#[test]
fn batches_of_every_size_are_forwarded_as_frame_by_frame() {
    let f = forwarder();
    let mixed = mixed_frames();
    let all: Vec<Vec<u8>> = (0..ROUTE_BATCH + 6)
        .map(|i| mixed[i % mixed.len()].clone())
        .collect();
    // Hints left by a batch of other frames: slots 6 to the end hold an answer for 10.2.3.4.
    let first = vec![&all[0][..]; ROUTE_BATCH];
    for n in [1, 7, 8, 9, ROUTE_BATCH - 1, ROUTE_BATCH, ROUTE_BATCH + 6] {
        let mut hints = vec![RouteHint::NONE; ROUTE_BATCH + 6];
        f.route_many(&first, &mut hints[6..]);
        assert_ne!(
            hints[ROUTE_BATCH + 5],
            RouteHint::NONE,
            "a routed hint to start from"
        );
        let views: Vec<&[u8]> = all[..n].iter().map(|b| &b[..]).collect();
        f.route_many(&views, &mut hints);
        for (i, h) in hints.iter().enumerate().take(n).skip(ROUTE_BATCH) {
            assert_eq!(*h, RouteHint::NONE, "batch of {n}: frame {i} is past it");
        }
        assert_routed_as_alone(&f, &all[..n], &hints, &format!("batch of {n}"));
    }
}

#[test]
fn a_hint_spares_the_second_lookup() {
    let f = forwarder();
    let b = frame(&spec6("2001:db8:9::1"));
    let mut hints = [RouteHint::default(); 1];
    f.route_many(&[&b[..]], &mut hints);
    // The route goes between the batch's lookup and the frame's turn: the frame leaves by the
    // route it was looked up with, as if it had been forwarded a moment earlier.
    f.routes.remove(p("::/0")).unwrap();
    let (mut a, mut c) = (b.clone(), b.clone());
    let plain = f.process(&mut a, 1);
    assert!(!matches!(plain, Verdict::Tx { .. }), "{plain:?}");
    assert!(matches!(
        f.process_routed(&mut c, 1, &hints[0]),
        Verdict::Tx { ifindex: 2, .. }
    ));
}

#[test]
fn a_hint_carries_the_next_hops_mac_as_of_the_batch() {
    let mut f = forwarder();
    // Through a gateway and to a connected host (whose own address is the neighbour's key).
    let frames = [frame(&spec("10.2.3.4")), frame(&spec("10.1.0.7"))];
    let views: Vec<&[u8]> = frames.iter().map(|b| &b[..]).collect();
    let mut hints = [RouteHint::default(); 2];
    f.route_many(&views, &mut hints);
    let moved = [2, 0, 0, 0, 0, 0x77];
    f.neighbors.insert(2, ip("10.1.0.1"), moved);
    f.neighbors.insert(2, ip("10.1.0.7"), moved);
    for (i, (b, old)) in frames.iter().zip([GW_MAC, HOST_MAC]).enumerate() {
        let (mut a, mut c) = (b.clone(), b.clone());
        assert!(matches!(f.process(&mut a, 1), Verdict::Tx { .. }));
        assert!(matches!(
            f.process_routed(&mut c, 1, &hints[i]),
            Verdict::Tx { .. }
        ));
        assert_eq!(a[..6], moved, "frame {i}: looked up now");
        assert_eq!(c[..6], old, "frame {i}: as the batch found it");
    }
    // A neighbour the batch did not find is looked up when the frame is processed.
    f.neighbors.remove(2, ip("10.1.0.7"));
    f.route_many(&views[1..], &mut hints[..1]);
    f.neighbors.insert(2, ip("10.1.0.7"), moved);
    let mut c = frames[1].clone();
    assert!(matches!(
        f.process_routed(&mut c, 1, &hints[0]),
        Verdict::Tx { .. }
    ));
    assert_eq!(c[..6], moved);
}

#[test]
fn a_tcp_reset_answers_for_the_destination_as_the_kernel_builds_it() {
    let f = forwarder();
    f.routes
        .insert(
            p("10.0.0.0/24"),
            NextHop {
                ifindex: 1,
                gateway: None,
            },
        )
        .unwrap();
    for (flags, payload) in [(0x02u8, 0usize), (0x18, 100), (0x14, 0)] {
        let s = FrameSpec {
            protocol: crate::wire::l4::proto::TCP,
            src_port: 40000,
            dst_port: 22,
            payload_len: payload,
            ..spec("10.2.0.1")
        };
        let mut orig = frame(&s);
        // A 20-byte header with the flags, seq 1000 and ack 7000.
        orig[46] = 5 << 4;
        orig[47] = flags;
        orig[38..42].copy_from_slice(&1000u32.to_be_bytes());
        orig[42..46].copy_from_slice(&7000u32.to_be_bytes());
        let m = parse_frame(&orig).unwrap();
        let mut buf = vec![0u8; 2048];
        buf[..orig.len()].copy_from_slice(&orig);
        let v = f.icmp_error(&mut buf, &m, 1, IcmpKind::TcpReset, 9);
        if flags & 0x04 != 0 {
            assert!(matches!(v, Verdict::Drop(_)), "no RST for a RST: {v:?}");
            continue;
        }
        let Verdict::Tx { ifindex: 1, len } = v else {
            panic!("{v:?}");
        };
        let out = &buf[..len];
        assert_eq!(len, 14 + 20 + 20);
        let r = parse_frame(out).unwrap();
        // From the segment's destination, not from the router; ports swapped.
        assert_eq!((r.src_ip(), r.dst_ip()), (ip("10.2.0.1"), ip("10.0.0.1")));
        assert_eq!((r.src_port, r.dst_port), (22, 40000));
        assert_eq!((r.ttl, out[20] & 0x40), (64, 0x40), "TTL 64, DF");
        assert!(crate::wire::checksum::verify(&out[14..34]));
        let tcp = &out[34..54];
        let (seq, ack) = (
            u32::from_be_bytes(tcp[4..8].try_into().unwrap()),
            u32::from_be_bytes(tcp[8..12].try_into().unwrap()),
        );
        if flags & 0x10 != 0 {
            assert_eq!(
                (seq, ack, tcp[13]),
                (7000, 0, 0x04),
                "RST at the segment's ACK"
            );
        } else {
            assert_eq!((seq, ack, tcp[13]), (0, 1001, 0x14), "RST+ACK of the SYN");
        }
        let pseudo = crate::wire::checksum::pseudo_header_sum(
            false,
            &r.src,
            &r.dst,
            crate::wire::l4::proto::TCP,
            20,
        );
        assert_eq!(
            crate::wire::checksum::fold64(pseudo + crate::wire::checksum::sum_words(tcp)),
            0xffff,
            "TCP checksum"
        );
    }
}

#[test]
fn reverse_path_filter_strict_and_loose_and_the_kernels_order_of_checks() {
    use DropReason as D;
    let mut f = forwarder();
    let on = |ifindex| NextHop {
        ifindex,
        gateway: None,
    };
    // Routes back: the frames' usual source 10.0.0.1 on interface 1, 10.5.0.0/16 through 2,
    // 10.6.0.0/16 a blackhole; nothing for 192.0.2.0/24.
    f.routes.insert(p("10.0.0.0/24"), on(1)).unwrap();
    f.routes.insert(p("10.5.0.0/16"), on(2)).unwrap();
    (f.routes)
        .insert(p("10.6.0.0/16"), NextHop::special(RouteKind::Blackhole))
        .unwrap();
    let set_mode = |f: &mut Forwarder, mode: u8| {
        let mut i = f.interfaces.get(1).unwrap().clone();
        i.rp_filter = mode;
        f.interfaces.upsert(i);
    };
    let from = |src: &str| FrameSpec {
        src: ip(src),
        ..spec("10.2.0.1")
    };
    let sent = |v: &Verdict| matches!(v, Verdict::Tx { .. });
    for (mode, on_link, other_side, no_route, blackholed) in [
        (0u8, true, true, true, true),
        (1, true, false, false, false),
        (2, true, true, false, false),
    ] {
        set_mode(&mut f, mode);
        let v = |src| run(&f, &from(src)).0;
        assert_eq!(sent(&v("10.0.0.1")), on_link, "mode {mode}");
        assert_eq!(sent(&v("10.5.0.9")), other_side, "mode {mode}");
        assert_eq!(sent(&v("192.0.2.1")), no_route, "mode {mode}");
        assert_eq!(sent(&v("10.6.0.9")), blackholed, "mode {mode}");
        if mode != 0 {
            assert_eq!(v("192.0.2.1"), Verdict::Drop(D::RpFilter));
        }
    }
    // IPv6 has no rp_filter.
    assert!(sent(&run(&f, &spec6("2001:db8:5::1")).0));
    // As the kernel: no route is answered before the TTL is looked at, the source is validated
    // before it too.
    set_mode(&mut f, 1);
    let ttl1 = |src: &str, dst: &str| {
        run(
            &f,
            &FrameSpec {
                ttl: 1,
                src: ip(src),
                ..spec(dst)
            },
        )
        .0
    };
    assert_eq!(
        ttl1("10.0.0.1", "10.3.0.1"),
        Verdict::Icmp {
            drop: D::NoRoute,
            error: IcmpKind::NetUnreachable
        }
    );
    assert_eq!(ttl1("192.0.2.1", "10.2.0.1"), Verdict::Drop(D::RpFilter));
    assert_eq!(
        ttl1("10.0.0.1", "10.2.0.1"),
        Verdict::Icmp {
            drop: D::TtlExpired,
            error: IcmpKind::TimeExceeded
        }
    );
}

#[test]
fn multipath_spreads_flows_by_weight_and_keeps_each_flow_on_one_path() {
    let mut f = forwarder();
    f.neighbors.insert(2, ip("10.1.0.2"), HOST_MAC);
    let a = NextHop {
        ifindex: 2,
        gateway: Some(ip("10.1.0.1")),
    };
    let b = NextHop {
        ifindex: 2,
        gateway: Some(ip("10.1.0.2")),
    };
    let g = f.routes.group_of(&[(a, 1), (b, 3)]).unwrap();
    assert_eq!(g.kind(), RouteKind::Group);
    assert_eq!(
        f.routes.group_of(&[(b, 3), (a, 1)]),
        Ok(g),
        "interned once, in any order"
    );
    f.routes.insert(p("10.50.0.0/16"), g).unwrap();
    let to = |f: &Forwarder, sport: u16, src: &str| {
        let s = FrameSpec {
            src: ip(src),
            src_port: sport,
            ..spec("10.50.1.1")
        };
        let (v, out) = run(f, &s);
        assert!(matches!(v, Verdict::Tx { ifindex: 2, .. }), "{v:?}");
        EthernetFrame::new_checked(&out[..]).unwrap().dst()
    };
    for (policy, per_port) in [(1u8, true), (0, false)] {
        f.multipath = Multipath {
            policy_v4: policy,
            policy_v6: policy,
            seed: 7,
        };
        let mut on_b = 0;
        let n = 2000;
        for port in 0..n {
            let mac = to(&f, 10_000 + port, "10.0.0.1");
            assert_eq!(
                mac,
                to(&f, 10_000 + port, "10.0.0.1"),
                "a flow keeps its path"
            );
            on_b += usize::from(mac == HOST_MAC);
        }
        if per_port {
            // Weight 3 of 4: 1500 expected; 5 standard deviations (19.4) either way.
            assert!(
                (1403..=1597).contains(&on_b),
                "policy 1: {on_b} of {n} on b"
            );
        } else {
            assert!(
                on_b == 0 || on_b == n as usize,
                "policy 0 ignores ports: {on_b}"
            );
        }
    }
    // Policy 0 spreads by address instead.
    let on_b = (0..200)
        .filter(|i| to(&f, 1, &format!("10.0.{}.{}", i / 100, 1 + i % 100)) == HOST_MAC)
        .count();
    // 150 expected; 5 standard deviations (6.1) either way.
    assert!((120..=180).contains(&on_b), "{on_b} of 200 sources on b");
}

#[test]
fn a_resilient_group_moves_only_the_flows_of_a_member_that_goes() {
    let t = RouteTable::new();
    let hop = |i: u8| NextHop {
        ifindex: 2,
        gateway: Some(IpAddr::from([10, 1, 0, i])),
    };
    let four: Vec<(NextHop, u16)> = (1..=4).map(|i| (hop(i), 1)).collect();
    let g4 = t.resilient_group_of(&four).unwrap().group_id().unwrap();
    assert!(t.is_resilient(g4));
    let h4 = t.group_of(&four).unwrap().group_id().unwrap();
    assert!(
        !t.is_resilient(h4),
        "the same members, hash-threshold: another group"
    );
    let g3 = t
        .resilient_group_of(&four[..3])
        .unwrap()
        .group_id()
        .unwrap();
    let h3 = t.group_of(&four[..3]).unwrap().group_id().unwrap();
    // Flow hashes as the forwarder makes them: well mixed, 31 bits.
    let mix = |mut x: u64| {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^ (x >> 33)
    };
    let hashes: Vec<u32> = (0..4000u64)
        .map(|i| mix(i + 1) as u32 & 0x7fff_ffff)
        .collect();
    let (mut per, mut moved, mut moved_threshold) = ([0usize; 5], 0, 0);
    for &h in &hashes {
        let before = t.pick(g4, h).unwrap();
        let after = t.pick(g3, h).unwrap();
        per[usize::from(match before.gateway {
            Some(IpAddr::V4(a)) => a.octets()[3],
            _ => 0,
        })] += 1;
        if before != hop(4) {
            assert_eq!(
                before, after,
                "hash {h}: its member stayed, so must the flow"
            );
        } else {
            moved += 1;
        }
        moved_threshold += usize::from(t.pick(h4, h) != t.pick(h3, h));
    }
    // Equal weights: 1000 each expected, 5 standard deviations (27) either way.
    for (i, n) in per.iter().enumerate().skip(1) {
        assert!((863..=1137).contains(n), "member {i}: {n} of 4000");
    }
    assert_eq!(moved, per[4]);
    // Hash-threshold, for contrast, moves flows between members that stay (the kernel's
    // multipath routes and plain groups do too).
    assert!(
        moved_threshold > 2 * moved,
        "{moved_threshold} against {moved}"
    );
    // Weights count: 1:3.
    let w = t
        .resilient_group_of(&[(hop(1), 1), (hop(2), 3)])
        .unwrap()
        .group_id()
        .unwrap();
    let on2 = hashes
        .iter()
        .filter(|&&h| t.pick(w, h) == Some(hop(2)))
        .count();
    // 3000 expected of 4000, 5 standard deviations (137) either way.
    assert!(
        (2863..=3137).contains(&on2),
        "{on2} of 4000 on the weight-3 member"
    );
}

#[test]
fn an_ipv6_packet_routed_back_out_of_its_link_is_redirected_as_linux_does() {
    let mut f = forwarder();
    f.interfaces.add_addr(1, ip("fe80::fe"), 64);
    let back = |gw: &str| NextHop {
        ifindex: 1,
        gateway: Some(ip(gw)),
    };
    f.routes
        .insert(p("2001:db8:5::/48"), back("fe80::1"))
        .unwrap();
    f.routes
        .insert(p("2001:db8:6::/48"), back("2001:db8::2"))
        .unwrap();
    let on1 = NextHop {
        ifindex: 1,
        gateway: None,
    };
    f.routes.insert(p("2001:db8::/64"), on1).unwrap();
    f.neighbors.insert(1, ip("fe80::1"), GW_MAC);
    f.neighbors.insert(1, ip("2001:db8::1"), HOST_MAC);
    fn redirect(f: &Forwarder, dst: &str, from: &str) -> (Vec<u8>, Vec<u8>, Verdict) {
        let s = FrameSpec {
            src: ip(from),
            ttl: 9,
            payload_len: 31,
            ..spec(dst)
        };
        let orig = frame(&s);
        let mut b = orig.clone();
        let v = f.process(&mut b, 1);
        (orig, b, v)
    }
    // Via a link-local gateway on the sender's link: forwarded, and the sender redirected.
    let (orig, fwd, v) = redirect(&f, "2001:db8:5::9", "2001:db8::1");
    let Verdict::Redirect {
        ifindex: 1, len, ..
    } = v
    else {
        panic!("{v:?}");
    };
    assert_eq!(&fwd[..6], &GW_MAC, "the packet goes on");
    let m = parse_frame(&fwd[..len as usize]).unwrap();
    let mut buf = vec![0u8; 2048];
    buf[..fwd.len()].copy_from_slice(&fwd);
    let v = f.icmp_error(&mut buf, &m, 1, IcmpKind::Redirect { gateway: 0 }, 1);
    let Verdict::Tx { ifindex: 1, len } = v else {
        panic!("{v:?}");
    };
    let out = &buf[..len];
    assert_eq!((&out[..6], &out[6..12]), (&HOST_MAC[..], &IN_MAC[..]));
    let r = parse_frame(out).unwrap();
    assert_eq!(
        (r.src_ip(), r.dst_ip()),
        (ip("fe80::fe"), ip("2001:db8::1"))
    );
    assert_eq!(
        &out[14..18],
        &[0x60, 0, 0, 0],
        "traffic class and flow label 0"
    );
    assert_eq!((out[20], out[21]), (58, 255), "ICMPv6, hop limit 255");
    let msg = &out[54..];
    assert_eq!(&msg[..2], &[137, 0]);
    assert_eq!(&msg[8..24], &ip6("fe80::1"), "the target: the gateway");
    assert_eq!(&msg[24..40], &ip6("2001:db8:5::9"), "the destination");
    assert_eq!(
        &msg[40..48],
        &[2, 1, GW_MAC[0], GW_MAC[1], GW_MAC[2], GW_MAC[3], GW_MAC[4], GW_MAC[5]]
    );
    // The packet is 40 + 8 + 31 = 79 bytes: the option holds (79 + 8) & !7 = 80 bytes, the
    // packet's first 72 as it arrived (hop limit 9).
    assert_eq!(&msg[48..56], &[4, 10, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&msg[56..], &orig[14..14 + 72]);
    assert_eq!(msg.len(), 56 + 72);
    let pseudo = crate::wire::checksum::pseudo_header_sum(
        true,
        &ip6("fe80::fe"),
        &ip6("2001:db8::1"),
        58,
        msg.len() as u32,
    );
    assert_eq!(
        crate::wire::checksum::fold64(pseudo + crate::wire::checksum::sum_words(msg)),
        0xffff,
        "checksum"
    );
    // To a host on the link itself: the target is the destination; its MAC unknown, no option.
    let (_, fwd, v) = redirect(&f, "2001:db8::77", "2001:db8::1");
    assert!(matches!(v, Verdict::Drop(DropReason::NoNeighbor)), "{v:?}");
    f.neighbors.insert(1, ip("2001:db8::77"), OUT_MAC);
    let (orig, fwd2, v) = redirect(&f, "2001:db8::77", "2001:db8::1");
    let Verdict::Redirect { len, .. } = v else {
        panic!("{v:?}");
    };
    drop(fwd);
    let m = parse_frame(&fwd2[..len as usize]).unwrap();
    let mut buf = vec![0u8; 2048];
    buf[..fwd2.len()].copy_from_slice(&fwd2);
    let Verdict::Tx { len, .. } =
        f.icmp_error(&mut buf, &m, 1, IcmpKind::Redirect { gateway: 0 }, 1)
    else {
        panic!()
    };
    let msg = &buf[54..len];
    assert_eq!(
        &msg[8..24],
        &ip6("2001:db8::77"),
        "the target: the destination"
    );
    assert_eq!(&msg[24..40], &ip6("2001:db8::77"));
    assert_eq!(msg[40], 2, "its MAC is known now: the option");
    assert_eq!(&msg[56..], &orig[14..14 + 72]);
    // No redirect: via a global gateway (RFC 4861 §8.2: the target must be link-local), from
    // a source off the link, or with no link-local address to send from.
    let (_, _, v) = redirect(&f, "2001:db8:6::9", "2001:db8::1");
    assert!(matches!(v, Verdict::Tx { .. } | Verdict::Drop(_)), "{v:?}");
    assert!(!matches!(v, Verdict::Redirect { .. }));
    f.neighbors.insert(1, ip("2001:db8::2"), OUT_MAC);
    let (_, _, v) = redirect(&f, "2001:db8:6::9", "2001:db8::1");
    assert!(matches!(v, Verdict::Tx { ifindex: 1, .. }), "{v:?}");
    let (_, _, v) = redirect(&f, "2001:db8:5::9", "2001:db8:99::1");
    assert!(matches!(v, Verdict::Tx { ifindex: 1, .. }), "{v:?}");
}

fn ip6(s: &str) -> [u8; 16] {
    s.parse::<core::net::Ipv6Addr>().unwrap().octets()
}
