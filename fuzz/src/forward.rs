//! `forward`: the forwarder on arbitrary frames.
//!
//! Input: one byte for the ingress ifindex (low 2 bits), then the frame. The forwarder has an
//! ingress interface 1 (MTU 9000, address 10.0.0.254/24), an egress 2 (MTU 1500, so large IPv4
//! frames are fragmented) and default routes for IPv4 and IPv6 via neighbours on 2. Properties
//! (those of `crates/core/tests/robustness.rs`): no panic; `Tx` only for parsed frames, which
//! still parse after the rewrite with the TTL one lower, a valid IPv4 checksum and nothing
//! changed beyond the MACs, TTL and checksums; `Pass`/`Drop`/`Icmp` leave the frame as it came;
//! an ICMP error built for it parses and goes back to the source; a fragmented frame gives at
//! least two fragments that parse.

use std::net::IpAddr;
use std::sync::OnceLock;

use llr_core::fwd::{Forwarder, Interface, NextHop, Verdict};
use llr_core::wire::{checksum, parse_frame, IpVersion};

/// MAC of the ingress interface.
pub const IN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

/// The forwarder (built once per process: its DIR-24-8 table is 64 MiB). Call before the fuzz
/// loop so forked runs inherit it.
pub fn forwarder() -> &'static Forwarder {
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

pub fn run(data: &[u8]) {
    let Some((&b, f)) = data.split_first() else {
        return;
    };
    let ingress = u32::from(b & 3);
    let parsed = parse_frame(f);
    let mut buf = f.to_vec();
    // The worker warms every frame's lookup before processing it: on any input that must
    // neither panic nor change the frame.
    forwarder().warm(f);
    match forwarder().process(&mut buf, ingress) {
        Verdict::Tx { ifindex, len } => {
            let m = parsed.expect("Tx only for parsed frames");
            assert_eq!(ifindex, 2);
            let l3 = usize::from(m.l3_offset);
            // Bytes past the IP packet (padding, trailers) stay behind, as the kernel trims them.
            assert_eq!(len, l3 + usize::from(m.total_len));
            let after = parse_frame(&buf).expect("rewritten frame still parses");
            assert_eq!(after.ttl, m.ttl - 1);
            assert_eq!(after.vlan, m.vlan);
            if m.version == IpVersion::V4 {
                assert!(checksum::verify(&buf[l3..usize::from(m.l4_offset)]));
            }
            let l4sum = llr_core::wire::l4::checksum_offset(m.protocol)
                .filter(|_| m.has_ports)
                .map(|o| usize::from(m.l4_offset) + o);
            for i in 12..len {
                let allowed = l4sum.is_some_and(|o| i == o || i == o + 1)
                    || match m.version {
                        IpVersion::V4 => [l3 + 8, l3 + 10, l3 + 11].contains(&i),
                        IpVersion::V6 => i == l3 + 7,
                    };
                assert!(allowed || f[i] == buf[i], "byte {i} changed");
            }
        }
        // Interface::new leaves send_redirects off and no interface has an IPv6 link-local
        // address (which an IPv6 redirect is sent from), as in robustness.rs.
        Verdict::Redirect { .. } => panic!("a redirect with no interface able to send one"),
        Verdict::Pass(_) | Verdict::Drop(_) => assert_eq!(&buf[..], f, "pass/drop must not modify"),
        Verdict::Icmp { error, .. } => {
            assert_eq!(&buf[..], f, "an ICMP verdict leaves the frame as received");
            let m = parsed.expect("ICMP only for parsed frames");
            let mut chunk = vec![0u8; 2048.max(f.len())];
            chunk[..f.len()].copy_from_slice(f);
            if let Verdict::Tx { len, .. } =
                forwarder().icmp_error(&mut chunk, &m, ingress, error, 1)
            {
                let r = parse_frame(&chunk[..len]).expect("an ICMP error parses");
                assert_eq!(r.dst, m.src);
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
                assert!(
                    parse_frame(&out[..len]).is_ok(),
                    "fragment {k} does not parse"
                );
                k += 1;
                assert!(k < 1000, "endless fragments");
            }
            assert!(k >= 2, "{k} fragments");
        }
    }
}
