//! The lookup and the per-packet path with a full Internet table (the fixture: 1 M IPv4 +
//! 230 k IPv6 prefixes, nested, 2000 next hops; the sizes are in the benchmarks' names) and random destinations drawn from it, so the
//! table's memory is mostly cache-cold as on a router at an Internet edge. One iteration is a
//! batch of 32 packets (a grant), each to another random destination.
//!
//! `cargo bench -p llr-core --bench fulltable` (building the table takes ~10 s). The tables are
//! in 4 KiB pages, as the router's by default; `LLR_HUGE_PAGES=1` backs them as the router's
//! `huge-pages = true` does (`--bench pages` compares the two within one run).

mod common;
mod stride8;

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use llr_core::fixture::{Fixture, FixtureSpec};
use llr_core::fwd::lpm::{Multibit6, Readers, V6_STRIDES};
use llr_core::fwd::poptrie::Poptrie;
use llr_core::fwd::{Forwarder, NextHop, RouteHint, Verdict};
use llr_core::wire::build::{frame, FrameSpec};
use llr_core::wire::parse_frame;

/// Packets per iteration: one grant of the worker.
const BATCH: usize = 32;
/// Distinct destinations cycled through (far more than fit in the caches with the table).
const DESTS: usize = 1 << 16;

/// The gateway of next hop `i`: IPv4 172.16/12, IPv6 fd99::/16, all on interface 2.
fn gateway(i: u16, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::from([0xfd99, 0, 0, 0, 0, 0, 0, i + 1])
    } else {
        IpAddr::from([172, 16, (i >> 8) as u8, i as u8 + 1])
    }
}

fn forwarder(fx: &Fixture) -> Forwarder {
    let mut f = common::two_ports();
    for i in 0..fx.spec.next_hops {
        for v6 in [false, true] {
            f.neighbors.insert(2, gateway(i, v6), [2, 0, 0, 0, 0, 9]);
        }
    }
    let nh = |i: u16, v6: bool| NextHop {
        ifindex: 2,
        gateway: Some(gateway(i, v6)),
    };
    for r in &fx.v4 {
        f.routes.insert(r.prefix(), nh(r.next_hop, false)).unwrap();
    }
    for r in &fx.v6 {
        f.routes.insert(r.prefix(), nh(r.next_hop, true)).unwrap();
    }
    f
}

/// How a grant's frames are looked up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Grant {
    /// Together first, answers thrown away; then each frame looks its route up again.
    Warmed,
    /// Together first, each frame then forwarded by its answer.
    Routed,
    FrameByFrame,
}

/// Backs the tables built from here on with huge pages if `LLR_HUGE_PAGES` is set.
fn pages() {
    if std::env::var_os("LLR_HUGE_PAGES").is_some() {
        llr_io::sys::back_tables_with_huge_pages();
    }
}

fn fulltable(c: &mut Criterion) {
    pages();
    let fx = Fixture::generate(FixtureSpec::full(1)).expect("fixture");
    let fwd = forwarder(&fx);
    eprintln!("huge pages: {}", anon_huge_pages());
    let dsts = fx.destinations(4 * DESTS, 7);
    let v4: Vec<IpAddr> = dsts
        .iter()
        .filter(|a| a.is_ipv4())
        .copied()
        .take(DESTS)
        .collect();
    let v6: Vec<IpAddr> = dsts
        .iter()
        .filter(|a| a.is_ipv6())
        .copied()
        .take(DESTS)
        .collect();

    let mut g = c.benchmark_group("fulltable");
    g.throughput(Throughput::Elements(BATCH as u64));
    let (n4, n6) = (size(fx.v4.len()), size(fx.v6.len()));
    for (name, set) in [
        (format!("lookup_v4_{n4}"), &v4),
        (format!("lookup_v6_{n6}"), &v6),
    ] {
        lookups(&mut g, &name, set, |a| {
            fwd.routes.lookup(a).map_or(0, |n| n.ifindex)
        });
    }
    // The same lookups 32 at a time, as `route_many` does them for a grant.
    let (mut v4a, mut v6a) = (Vec::new(), Vec::new());
    for a in v4.iter().chain(&v6) {
        match a {
            IpAddr::V4(a) => v4a.push(u32::from(*a)),
            IpAddr::V6(a) => v6a.push(u128::from(*a)),
        }
    }
    batched(&mut g, &format!("lookup_v4_{n4}_batched"), &v4a, |a, o| {
        fwd.routes.lookup_v4_many(a, o)
    });
    batched(&mut g, &format!("lookup_v6_{n6}_batched"), &v6a, |a, o| {
        fwd.routes.lookup_v6_many(a, o)
    });
    // The whole forwarding step (parse, LPM, neighbour, TTL and checksum, rewrite) on 32
    // frames to different destinations out of the same DESTS as the lookups, so the table is as
    // cold as there. The 32 frames are copied from their templates into the grant's buffers
    // outside the timed part (the worker's frames arrive prefetched), so every packet is
    // forwarded, none expires. As the worker does, a grant is first warmed
    // (`Forwarder::warm_many`: every frame's lookup, so the misses overlap), then processed;
    // `_routed` keeps the warm pass's answers and forwards each frame by its own
    // (`route_many`, `process_routed`: what the worker does), `_unwarmed` processes frame by
    // frame.
    for (name, set, mode) in [
        (format!("forward_v4_{n4}"), &v4, Grant::Warmed),
        (format!("forward_v4_{n4}_routed"), &v4, Grant::Routed),
        (
            format!("forward_v4_{n4}_unwarmed"),
            &v4,
            Grant::FrameByFrame,
        ),
        (format!("forward_v6_{n6}"), &v6, Grant::Warmed),
        (format!("forward_v6_{n6}_routed"), &v6, Grant::Routed),
        (
            format!("forward_v6_{n6}_unwarmed"),
            &v6,
            Grant::FrameByFrame,
        ),
    ] {
        let frames: Vec<Vec<u8>> = set
            .iter()
            .map(|&dst| {
                let src = if dst.is_ipv4() {
                    "198.18.0.1".parse().unwrap()
                } else {
                    "2001:db8::1".parse().unwrap()
                };
                frame(&FrameSpec {
                    dst_mac: [2, 0, 0, 0, 0, 1],
                    src,
                    dst,
                    ..FrameSpec::default()
                })
            })
            .collect();
        for f in &frames {
            let mut b = f.clone();
            let m = parse_frame(f).unwrap();
            assert!(
                matches!(fwd.process_parsed(&mut b, &m, 1), Verdict::Tx { .. }),
                "every fixture destination is forwarded"
            );
        }
        let mut at = 0usize;
        g.bench_function(&name, |b| {
            b.iter_batched_ref(
                || {
                    (0..BATCH)
                        .map(|_| {
                            at = (at + 1) % frames.len();
                            frames[at].clone()
                        })
                        .collect::<Vec<_>>()
                },
                |grant| {
                    let mut n = 0u32;
                    let mut hints = [RouteHint::default(); BATCH];
                    if mode != Grant::FrameByFrame {
                        let frames: Vec<&[u8]> = grant.iter().map(|f| &f[..]).collect();
                        if mode == Grant::Routed {
                            fwd.route_many(black_box(&frames), &mut hints);
                        } else {
                            fwd.warm_many(black_box(&frames));
                        }
                    }
                    for (f, h) in grant.iter_mut().zip(&hints) {
                        if matches!(fwd.process_routed(black_box(f), 1, h), Verdict::Tx { .. }) {
                            n += 1;
                        }
                    }
                    n
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// IPv6 candidates at full-table size: the Poptrie (the table), the prefix trie llrouter used
/// first and multibit tries with two stride plans. Each is built from the fixture's prefixes;
/// its memory and build time are printed before it is timed.
fn v6_structures(c: &mut Criterion) {
    pages();
    const S24_8: &[u8] = &[24, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8];
    let fx = Fixture::generate(FixtureSpec::full(1)).expect("fixture");
    let dsts: Vec<u128> = fx
        .destinations(4 * DESTS, 7)
        .into_iter()
        .filter_map(|a| match a {
            IpAddr::V6(a) => Some(u128::from(a)),
            IpAddr::V4(_) => None,
        })
        .take(DESTS)
        .collect();
    let mut g = c.benchmark_group("v6_structure");
    g.throughput(Throughput::Elements(BATCH as u64));
    {
        let mut trie: prefix_trie::PrefixMap<(u128, u8), u32> = prefix_trie::PrefixMap::new();
        for r in &fx.v6 {
            if let IpAddr::V6(a) = r.prefix().addr() {
                trie.insert((u128::from(a), r.prefix().len()), u32::from(r.next_hop));
            }
        }
        lookups(&mut g, "prefix_trie", &dsts, |a| {
            trie.get_lpm(&(a, 128)).map_or(0, |(_, v)| *v)
        });
    }
    {
        let t = Poptrie::default();
        let secs = fill(&fx, |a, l, v| {
            t.insert(a, l, v).unwrap();
        });
        let m = t.memory();
        eprintln!("huge pages: {}", anon_huge_pages());
        eprintln!(
            "poptrie: {} prefixes in {secs:.2} s; direct table {:.1} MB touched, nodes and leaves {:.1} MB, records {:.1} MB",
            t.len(),
            m.first_level as f64 / 1e6,
            m.groups_used as f64 / 1e6,
            m.shadow as f64 / 1e6
        );
        lookups(&mut g, "poptrie", &dsts, |a| t.lookup(a).unwrap_or(0));
        // Batched as a grant is warmed.
        batched_ids(&mut g, "poptrie", &dsts, |a, o| t.lookup_many(a, o));
    }
    {
        let ps: Vec<(u128, u8, u32)> = (fx.v6.iter())
            .map(|r| (r.addr, r.len, u32::from(r.next_hop)))
            .collect();
        let t0 = std::time::Instant::now();
        let t = stride8::Stride8::build(&ps);
        let (direct, nodes) = t.memory();
        eprintln!(
            "poptrie8 (static): built in {:.2} s; direct table {:.1} MB touched, nodes and leaves {:.1} MB",
            t0.elapsed().as_secs_f64(),
            direct as f64 / 1e6,
            nodes as f64 / 1e6
        );
        // The same answers as the router's table for every destination, one by one and batched.
        let reference = Poptrie::default();
        fill(&fx, |a, l, v| {
            reference.insert(a, l, v).unwrap();
        });
        let mut many = vec![None; dsts.len()];
        t.lookup_many(&dsts, &mut many);
        for (&a, &m) in dsts.iter().zip(&many) {
            let want = reference.lookup(a);
            assert!(want.is_some(), "{a:#x}: a fixture destination has a route");
            assert_eq!((t.lookup(a), m), (want, want), "{a:#x}");
        }
        drop(reference);
        lookups(&mut g, "poptrie8", &dsts, |a| t.lookup(a).unwrap_or(0));
        batched_ids(&mut g, "poptrie8", &dsts, |a, o| t.lookup_many(a, o));
    }
    for (name, strides) in [("multibit_16_8_8_4", V6_STRIDES), ("multibit_24_8", S24_8)] {
        let t = Multibit6::with_strides(strides, std::sync::Arc::<Readers>::default());
        let secs = fill(&fx, |a, l, v| {
            t.insert(a, l, v).unwrap();
        });
        let m = t.memory();
        eprintln!(
            "{name}: {} prefixes in {secs:.2} s; first level {:.1} MB, groups {:.1} MB allocated / {:.1} MB used, shadow {:.1} MB",
            t.len(),
            m.first_level as f64 / 1e6,
            m.groups as f64 / 1e6,
            m.groups_used as f64 / 1e6,
            m.shadow as f64 / 1e6
        );
        lookups(&mut g, name, &dsts, |a| t.lookup(a).unwrap_or(0));
    }
    g.finish();
}

/// Inserts the fixture's IPv6 prefixes (next hop as value); returns the seconds it took.
fn fill(fx: &Fixture, mut insert: impl FnMut(u128, u8, u32)) -> f64 {
    let t0 = std::time::Instant::now();
    for r in &fx.v6 {
        if let IpAddr::V6(a) = r.prefix().addr() {
            insert(u128::from(a), r.prefix().len(), u32::from(r.next_hop));
        }
    }
    t0.elapsed().as_secs_f64()
}

/// The process's memory in huge pages, as `/proc/self/smaps_rollup` gives it.
fn anon_huge_pages() -> String {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("AnonHugePages:")
                    .map(|v| v.trim().to_string())
            })
        })
        .unwrap_or_else(|| "unknown".into())
}

/// `1000000` as `1M`, `230000` as `230k`.
fn size(n: usize) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else {
        format!("{}k", n / 1000)
    }
}

/// Times `lookup` over batches of [`BATCH`] destinations, cycling through `dests`.
fn lookups<A: Copy>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    dests: &[A],
    lookup: impl Fn(A) -> u32,
) {
    let mut at = 0usize;
    g.bench_function(name, |b| {
        b.iter(|| {
            let mut s = 0u32;
            for _ in 0..BATCH {
                let a = dests[at];
                at = (at + 1) % dests.len();
                s = s.wrapping_add(lookup(black_box(a)));
            }
            s
        })
    });
}

/// Times `many` over batches of [`BATCH`] destinations, cycling through `dests`.
fn batched<A: Copy + Default>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    dests: &[A],
    many: impl Fn(&[A], &mut [Option<NextHop>]),
) {
    let mut at = 0usize;
    g.bench_function(name, |b| {
        b.iter(|| {
            let mut addrs = [A::default(); BATCH];
            for a in &mut addrs {
                *a = dests[at];
                at = (at + 1) % dests.len();
            }
            let mut out = [None; BATCH];
            many(black_box(&addrs), &mut out);
            out.iter()
                .fold(0u32, |s, v| s.wrapping_add(v.map_or(0, |n| n.ifindex)))
        })
    });
}

/// `NAME_batched` over `dests` and `NAME_batched_hot` over 64 of them only (the table's lines
/// stay cached, so what is left is the instructions): batches of [`BATCH`] lookups by `many`.
fn batched_ids(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    dests: &[u128],
    many: impl Fn(&[u128], &mut [Option<u32>]),
) {
    for (name, set) in [
        (format!("{name}_batched"), dests),
        (format!("{name}_batched_hot"), &dests[..64]),
    ] {
        let mut at = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut addrs = [0u128; BATCH];
                for a in &mut addrs {
                    *a = set[at];
                    at = (at + 1) % set.len();
                }
                let mut out = [None; BATCH];
                many(black_box(&addrs), &mut out);
                out.iter().fold(0u32, |s, v| s.wrapping_add(v.unwrap_or(0)))
            })
        });
    }
}

/// An operator's listing of the whole table: pages of 16 k routes (what `ctl show fib --all`
/// asks the router for), each found by one scan under the writers' lock; and the summary
/// (counts by length and next hop) that `ctl show fib` prints for a large table.
fn listing(c: &mut Criterion) {
    use llr_core::fwd::RouteFilter;
    let fx = Fixture::generate(FixtureSpec::full(1)).expect("fixture");
    let fwd = forwarder(&fx);
    let total = fwd.routes.len();
    let name = size(total);
    let mut g = c.benchmark_group("listing");
    g.sample_size(10);
    g.throughput(Throughput::Elements(total as u64));
    g.bench_function(format!("page_all_{name}"), |b| {
        b.iter(|| {
            let (mut after, mut n) = (None, 0);
            loop {
                let page = fwd.routes.page(after, 16 * 1024, &RouteFilter::default());
                n += page.len();
                match page.last() {
                    Some(l) => after = Some(l.0),
                    None => break,
                }
            }
            assert_eq!(n, total);
            n
        })
    });
    g.bench_function(format!("summary_{name}"), |b| {
        b.iter(|| fwd.routes.summary(&RouteFilter::default(), 20).total)
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = fulltable, v6_structures, listing
}
criterion_main!(benches);
