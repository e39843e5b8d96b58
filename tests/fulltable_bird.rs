//! A routing daemon feeds llrouter a large table, and llrouter forwards as the kernel does
//! (root; issue 12). The operator's path, end to end:
//!
//! BIRD in the sink namespace announces the generated full-table fixture (`llr_core::fixture`,
//! 100 k IPv4 + 20 k IPv6 prefixes over 2000 next hops by default) over eBGP to BIRD in the
//! router namespace, which installs it in the kernel's main table; llrouter (started first,
//! `kernel_routes`) mirrors the kernel. The test
//! 1. measures the time until the kernel and then llrouter hold every route;
//! 2. checks 10 000 destinations drawn from the table: llrouter's LPM answer (next hop and
//!    egress) equals the kernel's `ip route get`, and llrouter's route set is exactly the
//!    fixture plus what it had before;
//! 3. churn: withdraws one eighth of the table (`birdc disable` of two static protocols),
//!    waits for llrouter to settle, checks again (the withdrawn destinations now follow a
//!    covering prefix or have no route, as in the kernel; no stale route left); then
//!    re-announces it and checks once more.
//!
//! Timings go to stderr (`-- --nocapture`). Scale: `LLR_FULLTABLE_V4`, `LLR_FULLTABLE_V6`
//! (and `LLR_FULLTABLE_SEED`); docs/fulltable.md runs it with the full 1 M + 200 k.

mod common;
use common::{topology, TempDir};

use std::collections::HashSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use llr_core::fixture::{Fixture, FixtureSpec};
use llr_lab::bird::{self, Bird};
use llr_lab::fulltable::{self, Gateways};
use llr_router::{control::RouterCtl, Router, RouterConfig, StartOptions};
use llr_traffic::netns::{addr, Netns};

/// Static protocols per family on the originator: one of them is the churn slice.
const SLICES: usize = 8;
const CHURN_SLICE: usize = 3;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
        })
        .unwrap_or(default)
}

type Answer = fulltable::RouteAnswer;

fn llrouter_answer(ctl: &RouterCtl, dst: IpAddr) -> Answer {
    ctl.route_get(dst)
        .map(|nh| (nh.gateway, ctl.interface_name(nh.ifindex)))
}

/// Compares llrouter with the kernel for `dsts`; panics listing the first differences.
/// Returns how many destinations had a route.
fn check(what: &str, ns: &Netns, tmp: &TempDir, ctl: &RouterCtl, dsts: &[IpAddr]) -> usize {
    let t0 = Instant::now();
    let kernel =
        fulltable::kernel_route_get(ns, &tmp.join("route-get.batch"), dsts).expect("ip route get");
    let mut wrong = Vec::new();
    let mut routed = 0;
    for d in dsts {
        let k = &kernel[d];
        let l = llrouter_answer(ctl, *d);
        routed += usize::from(k.is_some());
        if *k != l {
            wrong.push(format!("{d}: kernel {k:?}, llrouter {l:?}"));
        }
    }
    eprintln!(
        "fulltable: {what}: {} destinations, {routed} routed, {} differ ({:.2} s)",
        dsts.len(),
        wrong.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(
        wrong.is_empty(),
        "{what}: {} of {} destinations differ, e.g.\n{}",
        wrong.len(),
        dsts.len(),
        wrong[..wrong.len().min(10)].join("\n")
    );
    routed
}

/// The prefixes llrouter holds, as text (`1.2.3.0/24`).
fn llrouter_prefixes(ctl: &RouterCtl) -> HashSet<String> {
    let (rows, total) = ctl.fib_all();
    assert_eq!(rows.len(), total);
    rows.into_iter().map(|r| r.prefix).collect()
}

/// Asserts that llrouter holds exactly `want`, naming the first differences.
fn assert_routes(what: &str, ctl: &RouterCtl, want: &HashSet<String>) {
    let have = llrouter_prefixes(ctl);
    let stale: Vec<&String> = have.difference(want).take(10).collect();
    let missing: Vec<&String> = want.difference(&have).take(10).collect();
    assert!(
        stale.is_empty() && missing.is_empty(),
        "{what}: llrouter has {} routes, want {}; stale e.g. {stale:?}; missing e.g. {missing:?}",
        have.len(),
        want.len()
    );
}

fn fixture_prefixes(fx: &Fixture) -> HashSet<String> {
    let v4 = fx.v4.iter().map(|r| r.prefix().to_string());
    v4.chain(fx.v6.iter().map(|r| r.prefix().to_string()))
        .collect()
}

/// When the kernel and llrouter settled, measured from the change.
struct Settled {
    kernel: Duration,
    llrouter: Duration,
    /// Times llrouter's table was right and then went wrong again before the end of the quiet
    /// window (a re-dump that applied an older snapshot, say).
    regressions: u32,
}

/// Polls until the kernel holds `want_kernel` BIRD routes and llrouter exactly `want`
/// (counted cheaply first, then compared prefix by prefix), and llrouter stays so for `quiet`
/// (the mirror re-dumps on a timer: a stale snapshot must not bring a route back). Bounded by
/// `limit` since `t0`.
/// How long `settle` waits: from `t0`, until `limit`, for `quiet` without a change.
#[derive(Clone, Copy)]
struct Wait {
    t0: Instant,
    quiet: Duration,
    limit: Duration,
}

fn settle(
    what: &str,
    ns: &Netns,
    ctl: &RouterCtl,
    (want_kernel, want): ((usize, usize), &HashSet<String>),
    Wait { t0, quiet, limit }: Wait,
) -> Settled {
    let mut kernel_at = None;
    let mut right_since: Option<Duration> = None;
    let mut regressions = 0;
    loop {
        let k = fulltable::kernel_bird_routes(ns).expect("ip route show proto bird");
        if k == want_kernel && kernel_at.is_none() {
            kernel_at = Some(t0.elapsed());
        }
        if k != want_kernel && kernel_at.is_some() {
            // The kernel itself moved again (BIRD re-announcing): llrouter may follow it.
            eprintln!(
                "fulltable: {what}: the kernel changed again at {:.2} s: {k:?} BIRD routes",
                t0.elapsed().as_secs_f64()
            );
            kernel_at = None;
        }
        let count = ctl.route_count();
        let right = kernel_at.is_some() && count == want.len() && llrouter_prefixes(ctl) == *want;
        match (right, right_since) {
            (true, None) => right_since = Some(t0.elapsed()),
            (true, Some(since)) if t0.elapsed() - since >= quiet => {
                return Settled {
                    kernel: kernel_at.unwrap_or_default(),
                    llrouter: since,
                    regressions,
                };
            }
            (false, Some(since)) => {
                eprintln!(
                    "fulltable: {what}: llrouter's table was right at {:.2} s and wrong again at \
                     {:.2} s ({count} routes; kernel {k:?} BIRD routes)",
                    since.as_secs_f64(),
                    t0.elapsed().as_secs_f64()
                );
                regressions += 1;
                right_since = None;
            }
            _ => {}
        }
        if t0.elapsed() >= limit {
            assert_routes(what, ctl, want);
            panic!(
                "{what}: not settled within {limit:?}: kernel has {k:?} BIRD routes (want                  {want_kernel:?}), llrouter {count} routes (want {})",
                want.len()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP, BIRD (scripts/test.sh runs it as root)"]
fn bird_full_table_reaches_llrouter_as_in_the_kernel() {
    llr_io::sys::require_root();
    assert!(
        bird::available(),
        "BIRD 2 is missing: scripts/install-deps.sh installs the Debian package bird2"
    );
    let spec = FixtureSpec {
        v4: env_or("LLR_FULLTABLE_V4", 100_000),
        v6: env_or("LLR_FULLTABLE_V6", 20_000),
        seed: env_or("LLR_FULLTABLE_SEED", 12) as u64,
        next_hops: 2000,
    };
    let n = spec.v4 + spec.v6;
    // Honest bounds, measured: see docs/fulltable.md for the figures. Loading takes BIRD and
    // the kernel about 10 µs a route here and the mirror more; allow for a slow CI machine.
    let load_limit = Duration::from_secs(60) + Duration::from_micros(400) * n as u32;
    let t_gen = Instant::now();
    let fx = Fixture::generate(spec).expect("fixture");
    eprintln!(
        "fulltable: {} IPv4 + {} IPv6 prefixes generated in {:.2} s",
        fx.v4.len(),
        fx.v6.len(),
        t_gen.elapsed().as_secs_f64()
    );

    let topo = topology("llrft");
    let tmp = TempDir::new("fulltable");
    // The fixture's 2000 gateways live on the router–sink link.
    fulltable::add_gateway_net(&topo.router, &topo.sink).unwrap();
    let gw = Gateways::testbed(spec.next_hops).unwrap();
    let files = fulltable::write_dir(&tmp.join("fixture"), &fx, &gw, SLICES).unwrap();

    // llrouter first, with the kernel's table as it is before any BGP route.
    let mut cfg = RouterConfig::two_class(vec![addr::RTR_IN_IF.into(), addr::RTR_OUT_IF.into()]);
    cfg.control.socket = tmp.join("ctl.sock");
    cfg.kernel_routes = true;
    // Events do the mirroring; a short safety re-dump period here makes re-dumps happen during
    // the load and the churn, so that a re-dump bringing back a withdrawn route shows.
    // Re-dumps during load and churn unless told otherwise (LLR_FULLTABLE_REFRESH_MS; the
    // router's default is 5 minutes: events alone then carry the table).
    cfg.route_refresh_ms = env_or("LLR_FULLTABLE_REFRESH_MS", 500) as u64;
    let refresh_ms = cfg.route_refresh_ms;
    let (rtr_sessions, sink_sessions) = bird::testbed_sessions();
    let rtr_bird = Bird::start(
        &topo.router,
        "router",
        &bird::router_config(addr::RTR_OUT_V4.parse().unwrap(), &rtr_sessions),
    )
    .expect("BIRD in the router namespace");
    let running = topo
        .router
        .run(move || Router::start(cfg, StartOptions::default()))
        .expect("enter the router namespace")
        .expect("router starts");
    assert!(running.wait_ready(Duration::from_secs(30)), "worker runs");
    let ctl = running.control();
    let before = llrouter_prefixes(&ctl);
    let base = before.len();
    assert_eq!(ctl.route_count(), base);

    // The originator: BGP comes up, the table flows router BIRD → kernel → llrouter.
    let t0 = Instant::now();
    let sink_bird = Bird::start(
        &topo.sink,
        "originator",
        &bird::originator_config(
            addr::SINK_V4.parse().unwrap(),
            &sink_sessions,
            &files.bird_static,
        ),
    )
    .expect("BIRD in the sink namespace");
    let names: Vec<&str> = rtr_sessions.iter().map(|s| s.name.as_str()).collect();
    rtr_bird
        .wait_established(&names, Duration::from_secs(30))
        .expect("BGP sessions up");
    let t_est = t0.elapsed();
    let mut want = fixture_prefixes(&fx);
    want.extend(before.iter().cloned());
    // Long enough for three re-dumps at the test's 500 ms, at most 10 s with the router's
    // minutes-long default (then no re-dump falls in it: events alone must stay right).
    let quiet = Duration::from_millis(3 * refresh_ms)
        .clamp(Duration::from_millis(1500), Duration::from_secs(10));
    let load = settle(
        "load",
        &topo.router,
        &ctl,
        ((spec.v4, spec.v6), &want),
        Wait {
            t0,
            quiet,
            limit: load_limit,
        },
    );
    eprintln!(
        "fulltable: load of {n} routes (route-refresh-ms {refresh_ms}): BGP established after \
         {:.2} s, kernel complete after {:.2} s, llrouter complete after {:.2} s ({:.2} s after \
         the kernel; then unchanged for {:.1} s; {} regressions)",
        t_est.as_secs_f64(),
        load.kernel.as_secs_f64(),
        load.llrouter.as_secs_f64(),
        load.llrouter.saturating_sub(load.kernel).as_secs_f64(),
        quiet.as_secs_f64(),
        load.regressions
    );

    eprintln!("fulltable: mirror after load: {:?}", ctl.mirror_stats());
    // The same answers as the kernel.
    let dsts = fx.destinations(10_000, spec.seed);
    let routed = check("after load", &topo.router, &tmp, &ctl, &dsts);
    assert_eq!(
        routed,
        dsts.len(),
        "every destination of the table has a route"
    );

    // Churn: withdraw one slice of each family, then announce it again.
    let slice = fx.slice(CHURN_SLICE, SLICES);
    let gone = slice.destinations(2_000, spec.seed + 1);
    let mut sample = gone.clone();
    sample.extend(fx.destinations(2_000, spec.seed + 2));
    let t1 = Instant::now();
    for v6 in [false, true] {
        sink_bird
            .disable(&fulltable::static_protocol(v6, CHURN_SLICE))
            .expect("birdc disable");
    }
    let less = (spec.v4 - slice.v4.len(), spec.v6 - slice.v6.len());
    let mut want_less = want.clone();
    for p in fixture_prefixes(&slice) {
        want_less.remove(&p);
    }
    let w = settle(
        "withdrawal",
        &topo.router,
        &ctl,
        (less, &want_less),
        Wait {
            t0: t1,
            quiet,
            limit: load_limit,
        },
    );
    eprintln!(
        "fulltable: withdrawal of {} routes: kernel after {:.2} s, llrouter after {:.2} s \
         ({} regressions)",
        slice.v4.len() + slice.v6.len(),
        w.kernel.as_secs_f64(),
        w.llrouter.as_secs_f64(),
        w.regressions
    );
    eprintln!(
        "fulltable: mirror after withdrawal: {:?}",
        ctl.mirror_stats()
    );
    let still = check("after withdrawal", &topo.router, &tmp, &ctl, &sample);
    // Withdrawn destinations lost their route or fell back to a covering prefix: some must
    // have lost it, or the withdrawal did not happen.
    assert!(still < sample.len(), "the withdrawal removed routes");

    let t2 = Instant::now();
    for v6 in [false, true] {
        sink_bird
            .enable(&fulltable::static_protocol(v6, CHURN_SLICE))
            .expect("birdc enable");
    }
    let a = settle(
        "re-announcement",
        &topo.router,
        &ctl,
        ((spec.v4, spec.v6), &want),
        Wait {
            t0: t2,
            quiet,
            limit: load_limit,
        },
    );
    eprintln!(
        "fulltable: re-announcement: kernel after {:.2} s, llrouter after {:.2} s ({} \
         regressions)",
        a.kernel.as_secs_f64(),
        a.llrouter.as_secs_f64(),
        a.regressions
    );
    eprintln!(
        "fulltable: mirror after re-announcement: {:?}",
        ctl.mirror_stats()
    );
    let routed = check("after re-announcement", &topo.router, &tmp, &ctl, &sample);
    assert_eq!(routed, sample.len());
    // Once right, llrouter's table must stay right: a re-dump (every 500 ms here) that brings
    // back a withdrawn route, or drops a live one, is a forwarding error, not noise.
    for (what, r) in [
        ("load", load.regressions),
        ("withdrawal", w.regressions),
        ("re-announcement", a.regressions),
    ] {
        assert_eq!(
            r, 0,
            "{what}: llrouter's table went wrong again after it was right"
        );
    }

    drop(ctl);
    running.stop().expect("router stops");
    drop(sink_bird);
    drop(rtr_bird);
}
