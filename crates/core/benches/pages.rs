//! What huge pages under the route tables buy, measured the way this noisy VM allows: the same
//! full tables (1 M IPv4 + 230 k IPv6 prefixes, the fixture of `--bench fulltable`) built twice
//! in one process, once in 4 KiB pages and once with the router's huge-page advice, and timed in
//! alternation, round after round, so that both sides of a ratio see the same hour. Prints per
//! lookup kind the median and range of each side and of the per-round ratio.
//!
//! `cargo bench -p llr-core --bench pages` (`PAGES_ROUNDS`, default 15; `PAGES_MS`, ms per
//! side per round, default 150).

use std::hint::black_box;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llr_core::fixture::{Fixture, FixtureSpec};
use llr_core::fwd::poptrie::Poptrie;
use llr_core::fwd::Lpm4;

const BATCH: usize = 32;
const DESTS: usize = 1 << 16;

/// Whether tables built now get the huge-page advice.
static HUGE: AtomicBool = AtomicBool::new(false);

fn advise(addr: usize, len: usize) {
    if HUGE.load(Ordering::Relaxed) {
        llr_io::sys::advise_huge_pages(addr, len);
    }
}

struct Tables {
    v4: Lpm4,
    v6: Poptrie,
}

fn build(fx: &Fixture, huge: bool) -> Tables {
    HUGE.store(huge, Ordering::Relaxed);
    let r0 = smaps("Rss:");
    let t = Tables {
        v4: Lpm4::new(),
        v6: Poptrie::default(),
    };
    for r in &fx.v4 {
        if let IpAddr::V4(a) = r.prefix().addr() {
            t.v4.insert(u32::from(a), r.prefix().len(), u32::from(r.next_hop))
                .expect("insert");
        }
    }
    let r1 = smaps("Rss:");
    for r in &fx.v6 {
        if let IpAddr::V6(a) = r.prefix().addr() {
            t.v6.insert(u128::from(a), r.prefix().len(), u32::from(r.next_hop))
                .expect("insert");
        }
    }
    eprintln!(
        "huge {huge}: IPv4 {} kB, IPv6 {} kB",
        r1 - r0,
        smaps("Rss:") - r1
    );
    t
}

fn smaps(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                let v = l.strip_prefix(field)?.trim().trim_end_matches(" kB");
                v.parse().ok()
            })
        })
        .unwrap_or(0)
}

#[derive(Clone, Copy)]
enum Kind {
    V4,
    V6Batched,
    V6Lone,
}

const KINDS: [(Kind, &str); 3] = [
    (Kind::V4, "IPv4 DIR-24-8, one after another"),
    (Kind::V6Batched, "IPv6 Poptrie, 32 together"),
    (Kind::V6Lone, "IPv6 Poptrie, one after another"),
];

/// Lookups of `kind` in `t` for `budget`, starting at `*at` in the destinations: (wall ns,
/// thread CPU ns) per lookup.
fn run(
    t: &Tables,
    kind: Kind,
    v4: &[u32],
    v6: &[u128],
    at: &mut usize,
    budget: Duration,
) -> (f64, f64) {
    let (t0, c0) = (Instant::now(), llr_io::sys::thread_cpu_ns());
    let mut n = 0u64;
    let mut sum = 0u32;
    while t0.elapsed() < budget {
        for _ in 0..64 {
            match kind {
                Kind::V4 => {
                    for _ in 0..BATCH {
                        *at = (*at + 1) % v4.len();
                        sum = sum.wrapping_add(t.v4.lookup(black_box(v4[*at])).unwrap_or(0));
                    }
                }
                Kind::V6Lone => {
                    for _ in 0..BATCH {
                        *at = (*at + 1) % v6.len();
                        sum = sum.wrapping_add(t.v6.lookup(black_box(v6[*at])).unwrap_or(0));
                    }
                }
                Kind::V6Batched => {
                    let mut addrs = [0u128; BATCH];
                    for a in &mut addrs {
                        *at = (*at + 1) % v6.len();
                        *a = v6[*at];
                    }
                    let mut out = [None; BATCH];
                    t.v6.lookup_many(black_box(&addrs), &mut out);
                    sum = out.iter().fold(sum, |s, v| s.wrapping_add(v.unwrap_or(0)));
                }
            }
            n += BATCH as u64;
        }
    }
    black_box(sum);
    let wall = t0.elapsed().as_nanos() as f64 / n as f64;
    let cpu = (llr_io::sys::thread_cpu_ns() - c0) as f64 / n as f64;
    (wall, cpu)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median [min–max] with `p` decimals.
fn line(v: &[f64], p: usize) -> String {
    let mut s = v.to_vec();
    let m = median(&mut s);
    format!("{m:.p$} [{:.p$}–{:.p$}]", s[0], s[s.len() - 1])
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let rounds = env("PAGES_ROUNDS", 15) as usize;
    let budget = Duration::from_millis(env("PAGES_MS", 150));
    assert!(llr_core::fwd::set_hot_array_advice(advise));

    let fx = Fixture::generate(FixtureSpec::full(1)).expect("fixture");
    let dsts = fx.destinations(4 * DESTS, 7);
    let v4: Vec<u32> = (dsts.iter())
        .filter_map(|a| match a {
            IpAddr::V4(a) => Some(u32::from(*a)),
            IpAddr::V6(_) => None,
        })
        .take(DESTS)
        .collect();
    let v6: Vec<u128> = (dsts.iter())
        .filter_map(|a| match a {
            IpAddr::V6(a) => Some(u128::from(*a)),
            IpAddr::V4(_) => None,
        })
        .take(DESTS)
        .collect();

    let (rss0, huge0) = (smaps("Rss:"), smaps("AnonHugePages:"));
    let small = build(&fx, false);
    let (rss1, huge1) = (smaps("Rss:"), smaps("AnonHugePages:"));
    let huge = build(&fx, true);
    let (rss2, huge2) = (smaps("Rss:"), smaps("AnonHugePages:"));
    println!(
        "{} IPv4 + {} IPv6 prefixes; resident: 4 KiB pages {:.1} MB, huge pages {:.1} MB ({:.1} MB of it in huge pages)",
        fx.v4.len(),
        fx.v6.len(),
        (rss1 - rss0) as f64 / 1e3,
        (rss2 - rss1) as f64 / 1e3,
        (huge2 - huge1 - (huge1 - huge0)) as f64 / 1e3,
    );

    println!("{rounds} rounds of {} ms per side, alternating which goes first; ns per lookup, median [range]", budget.as_millis());
    println!("| lookup | 4 KiB wall | huge wall | huge / 4 KiB wall | 4 KiB CPU | huge CPU | huge / 4 KiB CPU |");
    println!("|---|---|---|---|---|---|---|");
    for (kind, name) in KINDS {
        let (mut sw, mut hw, mut rw, mut sc, mut hc, mut rc) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut at = 0;
        // A round's first side warms nothing for the second: each has tables of its own.
        run(&small, kind, &v4, &v6, &mut at, budget);
        run(&huge, kind, &v4, &v6, &mut at, budget);
        for r in 0..rounds {
            let (s, h) = if r % 2 == 0 {
                let s = run(&small, kind, &v4, &v6, &mut at, budget);
                (s, run(&huge, kind, &v4, &v6, &mut at, budget))
            } else {
                let h = run(&huge, kind, &v4, &v6, &mut at, budget);
                (run(&small, kind, &v4, &v6, &mut at, budget), h)
            };
            sw.push(s.0);
            hw.push(h.0);
            rw.push(h.0 / s.0);
            sc.push(s.1);
            hc.push(h.1);
            rc.push(h.1 / s.1);
        }
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            line(&sw, 1),
            line(&hw, 1),
            line(&rw, 3),
            line(&sc, 1),
            line(&hc, 1),
            line(&rc, 3)
        );
    }
}
