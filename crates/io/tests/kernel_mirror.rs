//! The netlink route mirror in a namespace of its own (root; skipped otherwise): `ip route add`,
//! `ip route del`, `ip neigh replace`, `ip addr add` and `ip link set mtu` reach the forwarder
//! within a bound, and static entries override the kernel's.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llr_core::fwd::{Forwarder, NextHop, RouteKind, SharedForwarder};
use llr_io::kernel::{self, MirrorSpec, MirrorStats, StaticNeighbor, StaticRoute};
use llr_traffic::netns::Netns;

/// Bound on how long a kernel change may take to reach the forwarder.
const BOUND: Duration = Duration::from_secs(1);

/// Polls `cond` on the forwarder until it holds; returns the time it took, or panics with `what`.
fn within(fwd: &SharedForwarder, what: &str, cond: impl Fn(&Forwarder) -> bool) -> Duration {
    let t0 = Instant::now();
    loop {
        if cond(&fwd.load()) {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < BOUND,
            "{what}: not reflected within {BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Stops the mirror thread when dropped, so a failed assertion never leaves it running.
struct StopOnDrop(Arc<AtomicBool>);
impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A mirror thread in `ns` carrying on from `seed`, with a safety period of an hour: whatever a
/// test sees must come from events or the re-dumps they trigger. Stopped when the guard drops.
struct Mirror {
    stop: StopOnDrop,
    progress: Arc<Mutex<MirrorStats>>,
    thread: std::thread::JoinHandle<anyhow::Result<MirrorStats>>,
}

impl Mirror {
    fn start(
        ns: &Netns,
        spec: &MirrorSpec,
        fwd: &Arc<SharedForwarder>,
        seed: kernel::Seed,
    ) -> Mirror {
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Mutex::new(MirrorStats::default()));
        let thread = {
            let (spec, fwd, stop, progress) =
                (spec.clone(), fwd.clone(), stop.clone(), progress.clone());
            ns.spawn(move || {
                kernel::run_mirror(
                    &spec,
                    &fwd,
                    Duration::from_secs(3600),
                    &stop,
                    Some(&progress),
                    Some(seed),
                )
            })
        };
        Mirror {
            stop: StopOnDrop(stop),
            progress,
            thread,
        }
    }

    fn stats(&self) -> MirrorStats {
        *self.progress.lock().unwrap()
    }

    /// Stops the thread and returns its final counters.
    fn finish(self) -> MirrorStats {
        self.stop.0.store(true, Ordering::Relaxed);
        self.thread.join().unwrap().unwrap()
    }
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn kernel_changes_reach_the_forwarder_quickly() {
    llr_io::sys::require_root();
    let ns = Netns::new("llrmir").expect("netns");
    ns.ip(&[
        "link", "add", "mir-a", "type", "veth", "peer", "name", "mir-b",
    ])
    .unwrap();
    ns.ip(&[
        "link", "add", "mir-c", "type", "veth", "peer", "name", "mir-d",
    ])
    .unwrap();
    for i in ["mir-a", "mir-b", "mir-c", "mir-d"] {
        ns.ip(&["link", "set", i, "up"]).unwrap();
    }
    ns.ip(&["addr", "add", "10.80.0.1/24", "dev", "mir-a"])
        .unwrap();
    ns.ip(&["addr", "add", "fd80::1/64", "dev", "mir-a", "nodad"])
        .unwrap();
    let a = ns.ifindex("mir-a").unwrap();
    let b = ns.ifindex("mir-b").unwrap();
    let c = ns.ifindex("mir-c").unwrap();

    let spec = MirrorSpec {
        ifindexes: vec![a, b],
        kernel_routes: true,
        routes: vec![StaticRoute {
            prefix: "10.99.0.0/16".parse().unwrap(),
            ifindex: b,
            gateway: None,
        }],
        neighbors: vec![StaticNeighbor {
            ifindex: a,
            addr: "10.80.0.7".parse().unwrap(),
            mac: [2, 0, 0, 0, 0, 7],
        }],
        max_routes: 0,
        event_buffer: 0,
    };
    // Built and seeded: the mirror carries on from this one dump, no second one at start.
    let (f0, seed) = ns
        .run(|| kernel::build_seeded(&spec))
        .unwrap()
        .expect("build");
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    // The dump: connected routes of mir-a, its addresses, the static entries.
    assert_eq!(
        f0.routes.lookup(ip("10.80.0.9")).map(|n| n.ifindex),
        Some(a)
    );
    assert_eq!(f0.routes.lookup(ip("fd80::9")).map(|n| n.ifindex), Some(a));
    assert_eq!(
        f0.routes.lookup(ip("10.99.1.1")).map(|n| n.ifindex),
        Some(b)
    );
    assert!(f0
        .interfaces
        .is_local_v4(u32::from_be_bytes([10, 80, 0, 1])));
    assert_eq!(
        f0.neighbors.get(a, ip("10.80.0.7")),
        Some([2, 0, 0, 0, 0, 7])
    );

    let fwd = Arc::new(SharedForwarder::new(f0));
    // A change after the seed's dump and before the mirror thread runs: the seed's socket was
    // subscribed before the dump, so it arrives as an event.
    ns.ip(&["route", "add", "10.57.0.0/16", "dev", "mir-a"])
        .unwrap();
    let mirror = Mirror::start(&ns, &spec, &fwd, seed);
    within(&fwd, "route added between the seed and the mirror", |f| {
        f.routes.lookup(ip("10.57.1.1")).map(|n| n.ifindex) == Some(a)
    });
    assert_eq!(
        mirror.stats().resyncs,
        0,
        "a seeded mirror does not dump again at start"
    );

    let mut took = Vec::new();
    ns.ip(&[
        "route",
        "add",
        "10.50.0.0/16",
        "via",
        "10.80.0.2",
        "dev",
        "mir-a",
    ])
    .unwrap();
    took.push(within(&fwd, "ip route add", |f| {
        f.routes.lookup(ip("10.50.3.4"))
            == Some(NextHop {
                ifindex: a,
                gateway: Some(ip("10.80.0.2")),
            })
    }));
    ns.ip(&["route", "replace", "10.50.0.0/16", "dev", "mir-b"])
        .unwrap();
    took.push(within(&fwd, "ip route replace", |f| {
        f.routes.lookup(ip("10.50.3.4"))
            == Some(NextHop {
                ifindex: b,
                gateway: None,
            })
    }));
    ns.ip(&["route", "del", "10.50.0.0/16"]).unwrap();
    took.push(within(&fwd, "ip route del", |f| {
        f.routes.lookup(ip("10.50.3.4")).is_none()
    }));
    // IPv6
    ns.ip(&[
        "-6",
        "route",
        "add",
        "fd50::/32",
        "via",
        "fd80::2",
        "dev",
        "mir-a",
    ])
    .unwrap();
    took.push(within(&fwd, "ip -6 route add", |f| {
        f.routes.lookup(ip("fd50::1")).and_then(|n| n.gateway) == Some(ip("fd80::2"))
    }));
    // A route through an interface that is not the router's still shadows shorter prefixes:
    // the forwarder passes such packets to the kernel instead of forwarding them itself.
    ns.ip(&["route", "add", "10.80.0.128/25", "dev", "mir-c"])
        .unwrap();
    took.push(within(&fwd, "route via a foreign interface", |f| {
        f.routes.lookup(ip("10.80.0.200")).map(|n| n.ifindex) == Some(c)
    }));
    ns.ip(&["route", "add", "blackhole", "10.51.0.0/16"])
        .unwrap();
    took.push(within(&fwd, "blackhole route", |f| {
        f.routes.lookup(ip("10.51.0.1")).map(|n| n.kind()) == Some(RouteKind::Blackhole)
    }));
    // Neighbours
    ns.ip(&[
        "neigh",
        "replace",
        "10.80.0.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "mir-a",
    ])
    .unwrap();
    took.push(within(&fwd, "ip neigh replace", |f| {
        f.neighbors.get(a, ip("10.80.0.2")) == Some([2, 0, 0, 0, 0, 2])
    }));
    ns.ip(&[
        "neigh",
        "replace",
        "10.80.0.2",
        "lladdr",
        "02:00:00:00:00:22",
        "dev",
        "mir-a",
    ])
    .unwrap();
    took.push(within(&fwd, "ip neigh replace (new MAC)", |f| {
        f.neighbors.get(a, ip("10.80.0.2")) == Some([2, 0, 0, 0, 0, 0x22])
    }));
    ns.ip(&["neigh", "del", "10.80.0.2", "dev", "mir-a"])
        .unwrap();
    took.push(within(&fwd, "ip neigh del", |f| {
        f.neighbors.get(a, ip("10.80.0.2")).is_none()
    }));
    // Static entries win over the kernel's.
    ns.ip(&["route", "add", "10.99.0.0/16", "dev", "mir-a"])
        .unwrap();
    ns.ip(&[
        "neigh",
        "replace",
        "10.80.0.7",
        "lladdr",
        "02:00:00:00:00:77",
        "dev",
        "mir-a",
    ])
    .unwrap();
    // Order a later change after those two and wait for it: then they were seen too.
    ns.ip(&["route", "add", "10.52.0.0/16", "dev", "mir-a"])
        .unwrap();
    within(&fwd, "marker route", |f| {
        f.routes.lookup(ip("10.52.0.1")).is_some()
    });
    {
        let f = fwd.load();
        assert_eq!(
            f.routes.lookup(ip("10.99.1.1")).map(|n| n.ifindex),
            Some(b),
            "static route overrides the kernel's"
        );
        assert_eq!(
            f.neighbors.get(a, ip("10.80.0.7")),
            Some([2, 0, 0, 0, 0, 7]),
            "static neighbour overrides the kernel's"
        );
    }
    // Several metrics for one prefix: the lowest wins, deleting it reveals the next.
    let via = |f: &Forwarder| f.routes.lookup(ip("10.53.0.1")).map(|n| n.ifindex);
    ns.ip(&[
        "route",
        "add",
        "10.53.0.0/16",
        "dev",
        "mir-a",
        "metric",
        "100",
    ])
    .unwrap();
    ns.ip(&[
        "route",
        "add",
        "10.53.0.0/16",
        "dev",
        "mir-b",
        "metric",
        "10",
    ])
    .unwrap();
    took.push(within(&fwd, "a lower metric", |f| via(f) == Some(b)));
    ns.ip(&["route", "del", "10.53.0.0/16", "metric", "10"])
        .unwrap();
    took.push(within(&fwd, "the lower metric deleted", |f| {
        via(f) == Some(a)
    }));
    // The lower metric again, for the re-dump below.
    ns.ip(&[
        "route",
        "add",
        "10.53.0.0/16",
        "dev",
        "mir-b",
        "metric",
        "10",
    ])
    .unwrap();
    took.push(within(&fwd, "a lower metric again", |f| via(f) == Some(b)));
    // Links and addresses: a re-dump.
    ns.ip(&["addr", "add", "10.81.0.1/24", "dev", "mir-b"])
        .unwrap();
    took.push(within(&fwd, "ip addr add", |f| {
        f.interfaces.is_local_v4(u32::from_be_bytes([10, 81, 0, 1]))
    }));
    ns.ip(&["link", "set", "mir-b", "mtu", "1400"]).unwrap();
    took.push(within(&fwd, "ip link set mtu", |f| {
        f.interfaces.get(b).map(|i| i.mtu) == Some(1400)
    }));
    // Deleting the address removes its connected route without a netlink route event (IPv4);
    // the re-dump after the address event catches it.
    ns.ip(&["addr", "del", "10.81.0.1/24", "dev", "mir-b"])
        .unwrap();
    took.push(within(&fwd, "connected route gone with its address", |f| {
        f.routes.lookup(ip("10.81.0.5")).is_none()
            && !f.interfaces.is_local_v4(u32::from_be_bytes([10, 81, 0, 1]))
    }));
    // That was mir-b's last address: the kernel dropped the routes through mir-b with it, also
    // without an event, so the re-dump finds only the higher metric left.
    took.push(within(
        &fwd,
        "the lower metric gone with the address",
        |f| via(f) == Some(a),
    ));
    assert!(mirror.stats().resyncs > 0, "there was a re-dump");

    let st = mirror.finish();
    eprintln!("mirror {st:?}; update latencies {took:?}");
    assert!(st.events > 0);
    assert!(
        took.iter().all(|d| *d < BOUND),
        "every change within {BOUND:?}: {took:?}"
    );
}

/// Waits up to `bound` for `cond` on the forwarder; panics with `what` and the last state.
fn settles(
    fwd: &SharedForwarder,
    bound: Duration,
    what: &str,
    cond: impl Fn(&Forwarder) -> Result<(), String>,
) -> Duration {
    let t0 = Instant::now();
    loop {
        match cond(&fwd.load()) {
            Ok(()) => return t0.elapsed(),
            Err(e) if t0.elapsed() >= bound => panic!("{what}: not within {bound:?}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// A burst of route changes far beyond the event socket's buffer (the kernel's smallest, as a
/// daemon flooding a full table would overrun a default one): the socket overruns, events are
/// lost, and the re-dump that follows leaves the forwarder exactly as the kernel's table — no
/// route missing, none left over, no next hop stale.
#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn an_event_overrun_is_repaired_by_a_re_dump() {
    llr_io::sys::require_root();
    const N: u32 = 20_000;
    let ns = Netns::new("llrovr").expect("netns");
    ns.ip(&[
        "link", "add", "ovr-a", "type", "veth", "peer", "name", "ovr-b",
    ])
    .unwrap();
    for i in ["ovr-a", "ovr-b"] {
        ns.ip(&["link", "set", i, "up"]).unwrap();
    }
    ns.ip(&["addr", "add", "10.82.0.1/24", "dev", "ovr-a"])
        .unwrap();
    let a = ns.ifindex("ovr-a").unwrap();
    let b = ns.ifindex("ovr-b").unwrap();
    let spec = MirrorSpec {
        ifindexes: vec![a, b],
        kernel_routes: true,
        event_buffer: 4096,
        ..MirrorSpec::default()
    };
    let (f0, seed) = ns
        .run(|| kernel::build_seeded(&spec))
        .unwrap()
        .expect("build");
    let fwd = Arc::new(SharedForwarder::new(f0));
    // No periodic re-dump: only the overruns may trigger one.
    let mirror = Mirror::start(&ns, &spec, &fwd, seed);
    let net = |i: u32| format!("10.{}.{}.0/24", 100 + i / 256, i % 256);
    let host = |i: u32| -> IpAddr {
        format!("10.{}.{}.9", 100 + i / 256, i % 256)
            .parse()
            .unwrap()
    };
    let batch = |name: &str, lines: Vec<String>| {
        let p = std::env::temp_dir().join(format!("llr-overrun-{}-{name}", std::process::id()));
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        let r = ns.ip(&["-batch", p.to_str().unwrap()]);
        let _ = std::fs::remove_file(&p);
        r.unwrap();
    };
    let gw = |f: &Forwarder, i: u32| f.routes.lookup(host(i)).and_then(|n| n.gateway);
    let g2: IpAddr = "10.82.0.2".parse().unwrap();
    let g3: IpAddr = "10.82.0.3".parse().unwrap();

    batch(
        "add",
        (0..N)
            .map(|i| format!("route add {} via 10.82.0.2 dev ovr-a", net(i)))
            .collect(),
    );
    let loaded = settles(
        &fwd,
        Duration::from_secs(30),
        "the burst of adds",
        |f| match (0..N).find(|&i| gw(f, i) != Some(g2)) {
            Some(i) => Err(format!("{} -> {:?}", net(i), gw(f, i))),
            None => Ok(()),
        },
    );
    let after_add = mirror.stats();
    assert!(
        after_add.overruns > 0,
        "{N} route events into a 4 KiB buffer overran it: {after_add:?}"
    );
    assert!(
        after_add.resyncs > 0,
        "an overrun triggers a re-dump: {after_add:?}"
    );

    // Deletes and replaces in one burst: an event lost here would leave a stale route or
    // a stale next hop unless the re-dump repairs it.
    batch(
        "change",
        (0..N)
            .map(|i| match i % 3 {
                0 => format!("route del {}", net(i)),
                1 => format!("route replace {} via 10.82.0.3 dev ovr-a", net(i)),
                _ => format!("route replace {} via 10.82.0.2 dev ovr-a", net(i)),
            })
            .collect(),
    );
    let want = |i: u32| match i % 3 {
        0 => None,
        1 => Some(g3),
        _ => Some(g2),
    };
    let changed = settles(
        &fwd,
        Duration::from_secs(30),
        "the burst of changes",
        |f| match (0..N).find(|&i| gw(f, i) != want(i)) {
            Some(i) => Err(format!("{} -> {:?}, want {:?}", net(i), gw(f, i), want(i))),
            None => Ok(()),
        },
    );
    let routes = fwd.load().routes.len();
    let end = mirror.stats();
    eprintln!("after the adds {after_add:?}, after the changes {end:?}");
    // The second burst usually overruns the buffer too (4 of 5 runs here); whether the mirror
    // keeps up with one depends on the machine, so only the first burst's overrun is asserted
    // and both end states are.
    // Nothing but the kernel's table: the 2/3 kept, and the connected and local routes of
    // ovr-a (10.82.0.0/24 and, as llrouter keeps them, at most a handful more).
    let kept = (0..N).filter(|i| i % 3 != 0).count();
    assert!(
        routes >= kept && routes <= kept + 8,
        "{routes} routes in the forwarder, the kernel has {kept} of the burst"
    );
    let st = mirror.finish();
    eprintln!("overruns: loaded in {loaded:?}, changed in {changed:?}; mirror {st:?}");
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn rules_tables_and_the_links_rules_name_reach_the_forwarder() {
    llr_io::sys::require_root();
    let ns = Netns::new("llrrul").expect("netns");
    ns.ip(&[
        "link", "add", "rul-a", "type", "veth", "peer", "name", "rul-b",
    ])
    .unwrap();
    for i in ["rul-a", "rul-b"] {
        ns.ip(&["link", "set", i, "up"]).unwrap();
    }
    let (a, b) = (ns.ifindex("rul-a").unwrap(), ns.ifindex("rul-b").unwrap());
    let spec = MirrorSpec {
        ifindexes: vec![a, b],
        kernel_routes: true,
        ..MirrorSpec::default()
    };
    let (f0, seed) = ns
        .run(|| kernel::build_seeded(&spec))
        .unwrap()
        .expect("build");
    assert!(
        f0.policy.is_plain(false) && f0.policy.is_plain(true),
        "default rules"
    );
    let fwd = Arc::new(SharedForwarder::new(f0));
    let mirror = Mirror::start(&ns, &spec, &fwd, seed);
    let rule = |f: &Forwarder, prio: u32| {
        f.policy
            .rules(false)
            .iter()
            .find(|r| r.priority == prio)
            .cloned()
    };
    // A rule naming a link that does not exist yet matches nothing (the kernel's "detached")…
    ns.ip(&["rule", "add", "iif", "rul-later", "blackhole", "prio", "50"])
        .unwrap();
    within(&fwd, "ip rule add", |f| {
        rule(f, 50).is_some_and(|r| r.iif == Some(u32::MAX))
    });
    // …until the link comes.
    ns.ip(&[
        "link",
        "add",
        "rul-later",
        "type",
        "veth",
        "peer",
        "name",
        "rul-peer",
    ])
    .unwrap();
    let later = ns.ifindex("rul-later").unwrap();
    within(&fwd, "the named link created", |f| {
        rule(f, 50).is_some_and(|r| r.iif == Some(later))
    });
    // A table besides main, and the rule that selects it.
    ns.ip(&[
        "route",
        "add",
        "10.66.0.0/16",
        "dev",
        "rul-a",
        "table",
        "100",
    ])
    .unwrap();
    ns.ip(&[
        "rule",
        "add",
        "to",
        "10.66.0.0/16",
        "lookup",
        "100",
        "prio",
        "60",
    ])
    .unwrap();
    within(&fwd, "a route of table 100 and its rule", |f| {
        rule(f, 60).is_some()
            && f.policy.tables().get(&100).map(|t| t.len()) == Some(1)
            && !f.policy.is_plain(false)
    });
    ns.ip(&["rule", "del", "prio", "50"]).unwrap();
    ns.ip(&["rule", "del", "prio", "60"]).unwrap();
    ns.ip(&["route", "del", "10.66.0.0/16", "table", "100"])
        .unwrap();
    within(&fwd, "rules and the table gone", |f| {
        rule(f, 50).is_none() && f.policy.tables().is_empty() && f.policy.is_plain(false)
    });
    mirror.finish();
}
