//! Forwards one IPv4 UDP frame N times (for instruction counts under callgrind).
use llr_core::fwd::{Forwarder, Interface, NextHop};
use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::parse_frame;
use std::hint::black_box;
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(1_000_000, |s| s.parse().unwrap());
    let mut f = Forwarder::new();
    f.interfaces
        .upsert(Interface::new(1, [2, 0, 0, 0, 0, 1], 1500));
    f.interfaces
        .upsert(Interface::new(2, [2, 0, 0, 0, 0, 2], 1500));
    let gw = "10.1.0.1".parse().unwrap();
    f.routes
        .insert(
            "10.2.0.0/16".parse().unwrap(),
            NextHop {
                ifindex: 2,
                gateway: Some(gw),
            },
        )
        .unwrap();
    f.neighbors.insert(2, gw, [2, 0, 0, 0, 0, 9]);
    let tmpl = frame(&FrameSpec {
        dst_mac: [2, 0, 0, 0, 0, 1],
        dst: "10.2.3.4".parse().unwrap(),
        ..FrameSpec::default()
    });
    let mut buf = tmpl.clone();
    let mut ok = 0u64;
    for _ in 0..n {
        buf.copy_from_slice(&tmpl);
        let m = parse_frame(black_box(&buf)).unwrap();
        if matches!(
            black_box(f.process_parsed(&mut buf, &m, 1)),
            llr_core::fwd::Verdict::Tx { .. }
        ) {
            ok += 1;
        }
    }
    println!("{ok}");
}
