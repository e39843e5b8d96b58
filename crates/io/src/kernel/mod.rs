//! Mirrors the router namespace's interfaces, routes and neighbours into a `Forwarder` over
//! rtnetlink ([rtnetlink(7)]), so `ip route`, FRR or BIRD configure llrouter.
//!
//! - [`build`]: one dump of links, addresses, routes (table main) and neighbours, with the
//!   static configuration applied on top as an override.
//! - [`refresh_loop`] (a thread in the router's namespace): subscribes to `RTMGRP_LINK`,
//!   `RTMGRP_NEIGH`, `RTMGRP_IPV4_IFADDR`/`IPV6_IFADDR` and `RTMGRP_IPV4_ROUTE`/`IPV6_ROUTE`
//!   *before* dumping, then applies route and neighbour events incrementally (a batch of events
//!   under one write lock of the forwarder; a DIR-24-8 insert or delete, never a rebuild). Link
//!   and address events, a socket overrun (`ENOBUFS`) and every `period` trigger a full
//!   re-dump, which is *diffed* against what was applied, so only changes reach the forwarder.
//!   (IPv4 removes the routes of a downed link or a deleted address without notifications;
//!   the re-dump catches that.)
//!
//! What reaches the forwarder, per prefix: the static route if the configuration has one, else
//! the kernel's route of lowest metric in table main. Kernel routes that llrouter must not
//! forward to a next hop are installed too, so the forwarder's lookup finds them instead of
//! following a shorter prefix: blackhole, unreachable and prohibit with their [`RouteKind`]
//! (dropped, answered with ICMP as the kernel would), other kinds and routes through interfaces
//! that are not the router's as the kernel's (handed to it). Neighbours: every entry with a MAC that is not `FAILED` or
//! `INCOMPLETE`; static neighbours override.
//!
//! [rtnetlink(7)]: https://man7.org/linux/man-pages/man7/rtnetlink.7.html

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::Result;
use llr_core::classify::IpPrefix;
use llr_core::fwd::{Forwarder, Interface, Interfaces, NextHop};

/// A static route from the configuration (overrides the kernel's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticRoute {
    pub prefix: IpPrefix,
    pub ifindex: u32,
    pub gateway: Option<IpAddr>,
}

/// A static neighbour from the configuration (overrides the kernel's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticNeighbor {
    pub ifindex: u32,
    pub addr: IpAddr,
    pub mac: [u8; 6],
}

/// What to mirror.
#[derive(Debug, Clone, Default)]
pub struct MirrorSpec {
    /// The router's interfaces (their links and addresses are mirrored).
    pub ifindexes: Vec<u32>,
    /// Mirror kernel routes and neighbours (interfaces are always read).
    pub kernel_routes: bool,
    pub routes: Vec<StaticRoute>,
    pub neighbors: Vec<StaticNeighbor>,
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let v: Vec<u8> = s
        .split(':')
        .map(|h| u8::from_str_radix(h, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    v.try_into().ok()
}

/// Parses `addr/len`.
pub fn parse_prefix(s: &str) -> Option<IpPrefix> {
    let (a, l) = s.split_once('/')?;
    IpPrefix::new(a.parse().ok()?, l.parse().ok()?).ok()
}

mod netlink;
use netlink::*;

/// `(rx, tx)` queue counts of interface `ifindex` in the calling thread's namespace
/// (`IFLA_NUM_RX_QUEUES` / `IFLA_NUM_TX_QUEUES`: veth has `numrxqueues`, a NIC its channels).
pub fn queue_counts(ifindex: u32) -> Result<(u32, u32)> {
    let mut sock = NlSocket::new(0)?;
    netlink::queue_counts(&mut sock)?
        .get(&ifindex)
        .copied()
        .ok_or_else(|| anyhow::anyhow!("no interface with index {ifindex}"))
}

/// The kernel's mirror, with what has been applied to the forwarder (so updates are diffs).
struct KernelMirror {
    kernel: KernelView,
    static_routes: HashMap<IpPrefix, NextHop>,
    static_neigh: HashMap<(u32, IpAddr), [u8; 6]>,
    applied_routes: HashMap<IpPrefix, NextHop>,
    applied_neigh: HashMap<(u32, IpAddr), [u8; 6]>,
    applied_ifaces: Option<(Links, Addrs)>,
}

impl KernelMirror {
    fn new(spec: &MirrorSpec) -> KernelMirror {
        KernelMirror {
            kernel: KernelView::default(),
            static_routes: spec
                .routes
                .iter()
                .map(|r| {
                    (
                        r.prefix,
                        NextHop {
                            ifindex: r.ifindex,
                            gateway: r.gateway,
                        },
                    )
                })
                .collect(),
            static_neigh: spec
                .neighbors
                .iter()
                .map(|n| ((n.ifindex, n.addr), n.mac))
                .collect(),
            applied_routes: HashMap::new(),
            applied_neigh: HashMap::new(),
            applied_ifaces: None,
        }
    }

    fn desired_route(&self, p: &IpPrefix) -> Option<NextHop> {
        if let Some(nh) = self.static_routes.get(p) {
            return Some(*nh);
        }
        self.kernel
            .routes
            .get(p)?
            .iter()
            .min_by_key(|(m, _)| *m)
            .map(|(_, nh)| *nh)
    }

    fn desired_neigh(&self, k: &(u32, IpAddr)) -> Option<[u8; 6]> {
        self.static_neigh
            .get(k)
            .or_else(|| self.kernel.neighbors.get(k))
            .copied()
    }

    /// Brings one prefix of the forwarder to the desired state; errors name the prefix.
    fn sync_route(&mut self, f: &mut Forwarder, p: IpPrefix) -> Result<bool> {
        let want = self.desired_route(&p);
        if want == self.applied_routes.get(&p).copied() {
            return Ok(false);
        }
        match want {
            Some(nh) => {
                f.routes
                    .insert(p, nh)
                    .map_err(|e| anyhow::anyhow!("routes: {p}: {e}"))?;
                self.applied_routes.insert(p, nh);
            }
            None => {
                f.routes.remove(p);
                self.applied_routes.remove(&p);
            }
        }
        Ok(true)
    }

    fn sync_neigh(&mut self, f: &mut Forwarder, k: (u32, IpAddr)) -> bool {
        let want = self.desired_neigh(&k);
        if want == self.applied_neigh.get(&k).copied() {
            return false;
        }
        match want {
            Some(mac) => {
                f.neighbors.insert(k.0, k.1, mac);
                self.applied_neigh.insert(k, mac);
            }
            None => {
                f.neighbors.remove(k.0, k.1);
                self.applied_neigh.remove(&k);
            }
        }
        true
    }

    fn sync_ifaces(&mut self, f: &mut Forwarder) -> bool {
        let now = (self.kernel.links.clone(), self.kernel.addrs.clone());
        if self.applied_ifaces.as_ref() == Some(&now) {
            return false;
        }
        let mut ifs = Interfaces::new();
        for (&i, &(mac, mtu)) in &now.0 {
            ifs.upsert(Interface::new(i, mac, mtu));
            for &(ip, len) in now.1.get(&i).into_iter().flatten() {
                ifs.add_addr(i, ip, len);
            }
        }
        f.interfaces = ifs;
        self.applied_ifaces = Some(now);
        true
    }

    /// Applies everything (after a dump): every prefix and neighbour known to the kernel, the
    /// configuration or the forwarder. Returns the number of changed entries.
    fn sync_all(&mut self, f: &mut Forwarder) -> Result<usize> {
        let mut n = usize::from(self.sync_ifaces(f));
        let prefixes: HashSet<IpPrefix> = self
            .kernel
            .routes
            .keys()
            .chain(self.static_routes.keys())
            .chain(self.applied_routes.keys())
            .copied()
            .collect();
        for p in prefixes {
            n += usize::from(self.sync_route(f, p)?);
        }
        let neigh: HashSet<(u32, IpAddr)> = self
            .kernel
            .neighbors
            .keys()
            .chain(self.static_neigh.keys())
            .chain(self.applied_neigh.keys())
            .copied()
            .collect();
        for k in neigh {
            n += usize::from(self.sync_neigh(f, k));
        }
        Ok(n)
    }

    /// Applies one incremental change; `true` if the forwarder changed.
    fn apply(&mut self, f: &mut Forwarder, c: &KernelEvent) -> Result<bool> {
        match c {
            KernelEvent::RouteSet(p, metric, nh) => {
                set_route(&mut self.kernel.routes, *p, *metric, *nh);
                self.sync_route(f, *p)
            }
            KernelEvent::RouteDel(p, metric) => {
                if let Some(e) = self.kernel.routes.get_mut(p) {
                    e.retain(|(m, _)| m != metric);
                    if e.is_empty() {
                        self.kernel.routes.remove(p);
                    }
                }
                self.sync_route(f, *p)
            }
            KernelEvent::NeighSet(i, ip, mac) => {
                self.kernel.neighbors.insert((*i, *ip), *mac);
                Ok(self.sync_neigh(f, (*i, *ip)))
            }
            KernelEvent::NeighDel(i, ip) => {
                self.kernel.neighbors.remove(&(*i, *ip));
                Ok(self.sync_neigh(f, (*i, *ip)))
            }
            KernelEvent::Resync | KernelEvent::Ignore => Ok(false),
        }
    }
}

/// Builds a forwarder from the kernel's tables (calling thread's namespace) and the overrides.
pub fn build(spec: &MirrorSpec) -> Result<Forwarder> {
    let mut sock = NlSocket::new(0)?;
    let mut m = KernelMirror::new(spec);
    m.kernel = dump_view(&mut sock, spec)?;
    let mut f = Forwarder::new();
    m.sync_all(&mut f)?;
    Ok(f)
}

/// Counters of the route mirror.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MirrorStats {
    /// Netlink event messages received.
    pub events: u64,
    /// Full re-dumps (start, links/addresses, overruns, period).
    pub resyncs: u64,
    /// Forwarder entries changed.
    pub updates: u64,
    /// Event-socket overruns (ENOBUFS), each followed by a re-dump.
    pub overruns: u64,
}

/// Keeps `fwd` in step with the kernel until `stop` (run on a thread in the router's
/// namespace): netlink events applied as they arrive (checked for every 50 ms), plus a full
/// re-dump diffed against the forwarder every `period` and after link/address events or an
/// overrun. Errors are logged and the previous tables kept; the loop retries.
pub fn refresh_loop(
    spec: MirrorSpec,
    fwd: Arc<RwLock<Forwarder>>,
    period: Duration,
    stop: Arc<AtomicBool>,
) {
    let stats = run_mirror(&spec, &fwd, period, &stop, None);
    tracing::debug!("route mirror stopped: {stats:?}");
}

/// [`refresh_loop`] with its counters, published to `progress` after every batch if given.
pub fn run_mirror(
    spec: &MirrorSpec,
    fwd: &RwLock<Forwarder>,
    period: Duration,
    stop: &AtomicBool,
    progress: Option<&std::sync::Mutex<MirrorStats>>,
) -> MirrorStats {
    let mut st = MirrorStats::default();
    let period = period.max(Duration::from_millis(100));
    'outer: while !stop.load(Ordering::Relaxed) {
        // Subscribe first, dump second: a change between the two is seen as an event and
        // re-applied idempotently.
        let groups = RTMGRP_LINK
            | RTMGRP_IPV4_IFADDR
            | RTMGRP_IPV6_IFADDR
            | if spec.kernel_routes {
                RTMGRP_NEIGH | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE
            } else {
                0
            };
        let (mut events, mut dumper) = match (NlSocket::new(groups), NlSocket::new(0)) {
            (Ok(e), Ok(d)) => (e, d),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!("route mirror: {e:#}; retrying in 1 s");
                sleep_unless(stop, Duration::from_secs(1));
                continue;
            }
        };
        let mut mirror = KernelMirror::new(spec);
        // A new mirror knows nothing of what is in the forwarder: its first dump replaces the
        // forwarder's tables wholesale; later ones are diffs.
        let mut fresh_start = true;
        let mut need_resync = true;
        let mut last_resync = Instant::now();
        let mut batch: Vec<KernelEvent> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if need_resync || last_resync.elapsed() >= period {
                need_resync = false;
                last_resync = Instant::now();
                st.resyncs += 1;
                match dump_view(&mut dumper, spec) {
                    Ok(v) => {
                        mirror.kernel = v;
                        let mut f = fwd.write().unwrap_or_else(|e| e.into_inner());
                        if fresh_start {
                            fresh_start = false;
                            let mut fresh = Forwarder::new();
                            fresh.fragments = f.fragments;
                            fresh.max_frame = f.max_frame;
                            match mirror.sync_all(&mut fresh) {
                                Ok(n) => {
                                    st.updates += n as u64;
                                    *f = fresh;
                                }
                                Err(e) => tracing::warn!("route mirror: {e:#}"),
                            }
                        } else {
                            match mirror.sync_all(&mut f) {
                                Ok(n) => st.updates += n as u64,
                                Err(e) => tracing::warn!("route mirror: {e:#}"),
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!("route mirror: {e:#}");
                        sleep_unless(stop, Duration::from_millis(200));
                        continue 'outer;
                    }
                }
                if let Some(p) = progress {
                    *p.lock().unwrap_or_else(|e| e.into_inner()) = st;
                }
            }
            // Wait for events (bounded, so `stop` and the period are checked).
            if crate::sys::poll(&mut [crate::sys::poll_in(events.sock.as_raw_fd())], 50) == 0 {
                continue;
            }
            // Drain what is queued (bounded per turn so a storm cannot starve the stop check).
            for _ in 0..256 {
                match events.sock.recv(&mut &mut events.buf[..], 0) {
                    Ok(n) => {
                        for (_, _, fr) in frames(&events.buf[..n]) {
                            if let Frame::Msg(m) = fr {
                                st.events += 1;
                                batch.push(classify_event(&m, spec));
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        st.overruns += 1;
                        need_resync = true;
                    }
                    Err(e) => {
                        tracing::warn!("route mirror: netlink recv: {e}; re-subscribing");
                        continue 'outer;
                    }
                }
            }
            if batch.contains(&KernelEvent::Resync) {
                need_resync = true;
            }
            if !need_resync && !batch.is_empty() {
                let mut f = fwd.write().unwrap_or_else(|e| e.into_inner());
                for c in &batch {
                    match mirror.apply(&mut f, c) {
                        Ok(true) => st.updates += 1,
                        Ok(false) => {}
                        Err(e) => tracing::warn!("route mirror: {e:#}"),
                    }
                }
            }
            batch.clear();
            if let Some(p) = progress {
                *p.lock().unwrap_or_else(|e| e.into_inner()) = st;
            }
        }
    }
    st
}

fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IpPrefix {
        s.parse().unwrap()
    }

    fn nh(i: u32) -> NextHop {
        NextHop {
            ifindex: i,
            gateway: None,
        }
    }

    #[test]
    fn static_routes_override_kernel_and_lowest_metric_wins() {
        let spec = MirrorSpec {
            ifindexes: vec![2, 3],
            kernel_routes: true,
            routes: vec![StaticRoute {
                prefix: p("10.9.0.0/16"),
                ifindex: 3,
                gateway: None,
            }],
            neighbors: vec![],
        };
        let mut m = KernelMirror::new(&spec);
        let mut f = Forwarder::new();
        m.sync_all(&mut f).unwrap();
        let a: IpAddr = "10.9.1.1".parse().unwrap();
        assert_eq!(f.routes.lookup(a), Some(&nh(3)));
        // The kernel's route for the same prefix changes nothing, before or after deletion.
        assert!(!m
            .apply(&mut f, &KernelEvent::RouteSet(p("10.9.0.0/16"), 0, nh(2)))
            .unwrap());
        assert_eq!(f.routes.lookup(a), Some(&nh(3)));
        m.apply(&mut f, &KernelEvent::RouteDel(p("10.9.0.0/16"), 0))
            .unwrap();
        assert_eq!(f.routes.lookup(a), Some(&nh(3)));
        // Two metrics: the lower wins; deleting it falls back to the other.
        let b: IpAddr = "10.8.0.1".parse().unwrap();
        m.apply(&mut f, &KernelEvent::RouteSet(p("10.8.0.0/16"), 100, nh(2)))
            .unwrap();
        m.apply(&mut f, &KernelEvent::RouteSet(p("10.8.0.0/16"), 10, nh(3)))
            .unwrap();
        assert_eq!(f.routes.lookup(b), Some(&nh(3)));
        m.apply(&mut f, &KernelEvent::RouteDel(p("10.8.0.0/16"), 10))
            .unwrap();
        assert_eq!(f.routes.lookup(b), Some(&nh(2)));
        m.apply(&mut f, &KernelEvent::RouteDel(p("10.8.0.0/16"), 100))
            .unwrap();
        assert_eq!(f.routes.lookup(b), None);
    }

    #[test]
    fn neighbours_static_override_and_delete() {
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        let spec = MirrorSpec {
            ifindexes: vec![2],
            kernel_routes: true,
            routes: vec![],
            neighbors: vec![StaticNeighbor {
                ifindex: 2,
                addr: ip,
                mac: [2, 0, 0, 0, 0, 9],
            }],
        };
        let mut m = KernelMirror::new(&spec);
        let mut f = Forwarder::new();
        m.sync_all(&mut f).unwrap();
        m.apply(&mut f, &KernelEvent::NeighSet(2, ip, [2, 0, 0, 0, 0, 1]))
            .unwrap();
        assert_eq!(f.neighbors.get(2, ip), Some([2, 0, 0, 0, 0, 9]));
        let other: IpAddr = "10.0.0.3".parse().unwrap();
        m.apply(&mut f, &KernelEvent::NeighSet(2, other, [2, 0, 0, 0, 0, 3]))
            .unwrap();
        assert_eq!(f.neighbors.get(2, other), Some([2, 0, 0, 0, 0, 3]));
        m.apply(&mut f, &KernelEvent::NeighDel(2, other)).unwrap();
        assert_eq!(f.neighbors.get(2, other), None);
    }

    #[test]
    fn resync_diff_removes_what_the_kernel_forgot() {
        let spec = MirrorSpec {
            ifindexes: vec![2],
            kernel_routes: true,
            ..Default::default()
        };
        let mut m = KernelMirror::new(&spec);
        let mut f = Forwarder::new();
        set_route(&mut m.kernel.routes, p("10.1.0.0/16"), 0, nh(2));
        set_route(&mut m.kernel.routes, p("fd00::/8"), 0, nh(2));
        // two routes, and the (empty) interface set the first time
        assert_eq!(m.sync_all(&mut f).unwrap(), 3);
        assert_eq!(m.sync_all(&mut f).unwrap(), 0, "no change, no update");
        m.kernel.routes.remove(&p("10.1.0.0/16"));
        assert_eq!(m.sync_all(&mut f).unwrap(), 1);
        assert_eq!(f.routes.lookup("10.1.2.3".parse().unwrap()), None);
        assert!(f.routes.lookup("fd00::1".parse().unwrap()).is_some());
    }

    #[test]
    fn frames_splits_and_survives_garbage() {
        assert!(frames(&[]).is_empty());
        assert!(frames(&[0xff; 15]).is_empty());
        // A length past the buffer stops the walk instead of panicking.
        let mut b = [0u8; 32];
        b[0] = 200;
        assert!(frames(&b).is_empty());
    }
}
