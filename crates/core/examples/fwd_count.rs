//! Forwards one IPv4 UDP frame N times (for instruction counts under callgrind).
#[path = "../benches/common/mod.rs"]
mod common;

use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::parse_frame;
use std::hint::black_box;
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(1_000_000, |s| s.parse().unwrap());
    let f = common::one_route();
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
