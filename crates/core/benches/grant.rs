//! The worker's per-grant path on synthetic rings: the fixed CPU cost of a grant against its
//! per-frame cost.
//!
//! One grant is `engine.pick(&rings)`, then `Forwarder::process` on each of the `grant.max`
//! frames (64-byte IPv4/UDP, restored from a template first because `process` rewrites them in
//! place), then `engine.complete(grant, n, 0)`. Grants of n = 1, 4, 16 and 32 frames are timed,
//! and after the run t(n) = c_g + n·x is fitted by least squares to criterion's estimates, so
//! c_g is what a grant costs besides its frames and x what each frame adds.
//!
//! This is the user-space part only: engine bookkeeping and the forwarder. It leaves out what
//! the live worker (`crates/router/src/worker/poll_loop.rs`) also pays per grant: the AF_XDP ring
//! index reads and writes (rx, fill, completion, tx), the transmit syscall, the clock reads that
//! time the grant, the route-table load, the counters and the wake-up checks. Its frames sit in
//! L1 (two rings of 64 slots), where DMA'd frames would arrive cold; the 64-byte template copy
//! per frame, which the live path does not do, is in x. So c_g here is a lower bound of the
//! live one, and x most likely is too (the copy costs a few ns, a cold frame cache misses).
//!
//! Variants: `ll_wfq`, two rings (rt, be) with ring budget n each under the default device
//! budget of 64, so grants alternate between the rings and every 64/n grants the device budget
//! runs out; `sq`, the single ring of SQ, whose grant size is the device budget, set to n.
//!
//! `cargo bench -p llr-core --bench grant -- --warm-up-time 1 --measurement-time 3`

mod common;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::SystemTime;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use llr_core::fwd::{Forwarder, Verdict};
use llr_core::sched::{PollEngine, RingId, RingView, SchedConfig, StrategyKind};
use llr_core::wire::build::{frame, FrameSpec};

const SIZES: [u32; 4] = [1, 4, 16, 32];
/// Slots per synthetic ring: a grant never asks for more than 32, so a full ring stays
/// non-empty, and the frames walk through memory as a real ring's would.
const SLOTS: usize = 64;
const FRAME: usize = 64;
const INGRESS: u32 = 1;
const GROUP: &str = "grant";

/// Rings whose frames live in one buffer, like a UMEM; `backlog` is what the engine sees.
struct SynthRings {
    umem: Vec<u8>,
    head: Vec<usize>,
    backlog: Vec<usize>,
}

impl SynthRings {
    fn new(rings: usize, tmpl: &[u8]) -> Self {
        SynthRings {
            umem: tmpl.repeat(rings * SLOTS),
            head: vec![0; rings],
            backlog: vec![SLOTS; rings],
        }
    }
}

impl RingView for SynthRings {
    #[inline]
    fn backlog(&self, ring: RingId) -> usize {
        self.backlog[ring]
    }
}

fn forwarder() -> Forwarder {
    common::one_route()
}

/// One grant; returns how many frames were forwarded (all of them, checked in `setup`).
#[inline]
fn grant(engine: &mut PollEngine, rings: &mut SynthRings, fwd: &Forwarder, tmpl: &[u8]) -> u32 {
    let g = engine
        .pick(black_box(&*rings))
        .expect("the rings never run dry");
    let mut forwarded = 0;
    for _ in 0..g.max {
        let h = rings.head[g.ring];
        let off = (g.ring * SLOTS + h) * FRAME;
        let buf = &mut rings.umem[off..off + FRAME];
        buf.copy_from_slice(tmpl);
        if let Verdict::Tx { .. } = fwd.process(buf, INGRESS) {
            forwarded += 1;
        }
        rings.head[g.ring] = (h + 1) % SLOTS;
    }
    rings.backlog[g.ring] -= g.max as usize;
    engine.complete(g, g.max, 0);
    // The producer refills what was taken, so every grant sees the same full rings.
    rings.backlog[g.ring] += g.max as usize;
    forwarded
}

fn setup(kind: StrategyKind, n: u32, tmpl: &[u8]) -> (PollEngine, SynthRings) {
    let mut cfg = SchedConfig::new(kind, &["rt", "be"]);
    cfg = match kind {
        StrategyKind::Sq => {
            cfg.device_budget = n;
            cfg
        }
        _ => cfg.with_budgets(&[n, n]),
    };
    let layout = cfg.layout().unwrap();
    let mut engine = PollEngine::new(&layout);
    let mut rings = SynthRings::new(layout.rings.len(), tmpl);
    assert!(engine.wake(0));
    let fwd = forwarder();
    // A grant of another size, or a frame not forwarded, would time something else than
    // "n frames through the forwarder".
    for _ in 0..256 {
        let max = engine.clone().pick(&rings).unwrap().max;
        assert_eq!(max, n, "{kind}: a grant of {max} frames, not {n}");
        assert_eq!(grant(&mut engine, &mut rings, &fwd, tmpl), n);
    }
    assert!(
        engine.ring_stats().iter().all(|s| s.grants > 0),
        "{kind}: a ring got no grant"
    );
    (engine, rings)
}

fn grants(c: &mut Criterion) {
    let fwd = forwarder();
    let tmpl = frame(&FrameSpec {
        dst_mac: [2, 0, 0, 0, 0, 1],
        dst: "10.2.3.4".parse().unwrap(),
        payload_len: 22,
        ..FrameSpec::default()
    });
    assert_eq!(tmpl.len(), FRAME);
    let mut g = c.benchmark_group(GROUP);
    for (name, kind) in [("ll_wfq", StrategyKind::LlWfq), ("sq", StrategyKind::Sq)] {
        for n in SIZES {
            let (mut engine, mut rings) = setup(kind, n, &tmpl);
            g.throughput(Throughput::Elements(n.into()));
            g.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| grant(&mut engine, &mut rings, &fwd, &tmpl))
            });
        }
    }
    g.finish();
}

/// Where criterion writes its estimates, found as criterion finds it, except that the target
/// directory comes from this executable's path (target/<profile>/deps/grant-…) rather than
/// from `cargo metadata`.
fn criterion_home() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("CRITERION_HOME") {
        return Some(h.into());
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(t).join("criterion"));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.ancestors().nth(3)?.join("criterion"))
}

/// Criterion's typical time (slope, else mean) in ns, if this run wrote it: an estimate left
/// by an earlier run (a filtered or `--test` run writes none) must not enter the fit.
fn estimate(home: &std::path::Path, name: &str, n: u32, since: SystemTime) -> Option<f64> {
    let p = home.join(format!("{GROUP}/{name}/{n}/new/estimates.json"));
    if std::fs::metadata(&p).ok()?.modified().ok()? < since {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
    let e = if v["slope"].is_null() {
        &v["mean"]
    } else {
        &v["slope"]
    };
    e["point_estimate"].as_f64()
}

fn print_fit(since: SystemTime) {
    let Some(home) = criterion_home() else {
        return;
    };
    for name in ["ll_wfq", "sq"] {
        let pts: Option<Vec<(f64, f64)>> = SIZES
            .iter()
            .map(|&n| estimate(&home, name, n, since).map(|t| (f64::from(n), t)))
            .collect();
        let Some(pts) = pts else {
            continue;
        };
        let k = pts.len() as f64;
        let (mn, mt) = (
            pts.iter().map(|p| p.0).sum::<f64>() / k,
            pts.iter().map(|p| p.1).sum::<f64>() / k,
        );
        let sxy: f64 = pts.iter().map(|(n, t)| (n - mn) * (t - mt)).sum();
        let sxx: f64 = pts.iter().map(|(n, _)| (n - mn).powi(2)).sum();
        let x = sxy / sxx;
        let cg = mt - x * mn;
        println!("{GROUP}/{name}: t(n) = c_g + n·x fitted over n = {SIZES:?}");
        println!(
            "  c_g = {cg:.1} ns/grant, x = {x:.2} ns/frame (a grant costs as much as {:.1} frames)",
            cg / x
        );
        // On a noisy machine the drift between benchmarks (seconds apart) can exceed c_g,
        // and then the fit says nothing about it; t(1) bounds it whatever the drift.
        if !(0.0..=pts[0].1).contains(&cg) {
            println!(
                "  c_g is outside [0, t(1) = {:.1} ns]: noise dominates it; rerun on a quiet machine",
                pts[0].1
            );
        }
        for (n, t) in &pts {
            println!(
                "  n = {n:>2}: measured {t:>7.1} ns, fit {:>7.1} ns ({:+.1} %)",
                cg + n * x,
                100.0 * (t - cg - n * x) / t
            );
        }
    }
}

criterion_group!(benches, grants);

fn main() {
    let since = SystemTime::now();
    benches();
    Criterion::default().configure_from_args().final_summary();
    print_fit(since);
}
