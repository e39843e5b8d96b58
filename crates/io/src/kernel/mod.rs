//! Mirrors the router namespace's interfaces, routes and neighbours into a `Forwarder` over
//! rtnetlink ([rtnetlink(7)]), so `ip route`, FRR or BIRD configure llrouter.
//!
//! - [`build`]: one dump of links, addresses, routes (table main) and neighbours, with the
//!   static configuration applied on top as an override.
//! - [`refresh_loop`] (a thread in the router's namespace): subscribes to `RTMGRP_LINK`,
//!   `RTMGRP_NEIGH`, `RTMGRP_IPV4_IFADDR`/`IPV6_IFADDR` and `RTMGRP_IPV4_ROUTE`/`IPV6_ROUTE`
//!   *before* dumping, then applies route and neighbour events incrementally (a DIR-24-8 insert
//!   or delete, never a rebuild). Link and address events, a socket overrun (`ENOBUFS`, with a
//!   4 MiB receive buffer) and a long safety `period` (`route-refresh-ms`, 5 minutes by
//!   default) trigger a full re-dump, which is *diffed* against what was applied, so only
//!   changes reach the forwarder. (IPv4 removes the routes of a downed link or a deleted
//!   address without notifications; the re-dump catches that.) Idle, the thread sleeps in
//!   poll(). Dumps are decoded as they arrive, never held as messages.
//! - Nothing the workers read is locked: routes are written in place into the lock-free table
//!   ([`llr_core::fwd::lpm`]), neighbour and interface changes are published as a new copy of
//!   those small tables ([`SharedForwarder::update`]), and a first dump is built aside and
//!   published whole.
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
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use llr_core::classify::IpPrefix;
use llr_core::fwd::{Forwarder, Interface, Interfaces, NextHop, RouteTable, SharedForwarder};

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
    /// Most routes the forwarder takes (0: no limit). Beyond it the forwarder is marked
    /// incomplete (`Forwarder::routes_incomplete`: routed packets go to the kernel) until the
    /// table fits again; routes are never silently missing.
    pub max_routes: usize,
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
    /// Whether the forwarder holds what `kernel` says (false until the first dump is applied:
    /// routes are diffed against the previous view, not kept twice).
    synced: bool,
    /// Prefixes the forwarder refused: tried again at the next re-dump.
    failed: HashSet<IpPrefix>,
    applied_neigh: HashMap<(u32, IpAddr), [u8; 6]>,
    applied_ifaces: Option<(Links, Addrs)>,
    max_routes: usize,
    /// Prefixes left out because the table was at `max_routes`: while any is, the forwarder
    /// is incomplete; they go in as soon as there is room.
    limited: HashSet<IpPrefix>,
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
            synced: false,
            failed: HashSet::new(),
            applied_neigh: HashMap::new(),
            applied_ifaces: None,
            max_routes: spec.max_routes,
            limited: HashSet::new(),
        }
    }

    /// Whether the forwarder lacks routes it should hold (see [`MirrorSpec::max_routes`]).
    fn incomplete(&self) -> bool {
        !self.limited.is_empty()
    }

    /// Installs what the limit left out, as far as there is room now.
    fn retry_limited(&mut self, routes: &RouteTable) -> usize {
        if self.limited.is_empty() || routes.len() >= self.max_routes {
            return 0;
        }
        let mut n = 0;
        let waiting: Vec<IpPrefix> = self.limited.drain().collect();
        for p in waiting {
            let want = self.desired_route(&p);
            match self.apply_route(routes, p, want) {
                Ok(()) => n += 1,
                Err(e) => tracing::warn!("route mirror: {e:#}"),
            }
        }
        n
    }

    /// Logs a change of completeness once, and says what to do about it.
    fn report_limit(&self, was: bool, routes: &RouteTable) {
        match (was, self.incomplete()) {
            (false, true) => tracing::error!(
                "routes: the kernel's table has more routes than max-routes = {} ({} left out): \
                 every routed packet goes to the kernel until the table fits (raise max-routes, \
                 or the memory limit it was derived from)",
                self.max_routes,
                self.limited.len()
            ),
            (true, false) => tracing::warn!(
                "routes: the table fits max-routes = {} again ({} routes): forwarding resumes",
                self.max_routes,
                routes.len()
            ),
            _ => {}
        }
    }

    fn desired_route(&self, p: &IpPrefix) -> Option<NextHop> {
        self.desired_in(&self.kernel, p)
    }

    /// What the forwarder should hold for `p` when the kernel's tables are `view`.
    fn desired_in(&self, view: &KernelView, p: &IpPrefix) -> Option<NextHop> {
        if let Some(nh) = self.static_routes.get(p) {
            return Some(*nh);
        }
        view.routes.best(p)
    }

    fn desired_neigh(&self, k: &(u32, IpAddr)) -> Option<[u8; 6]> {
        self.static_neigh
            .get(k)
            .or_else(|| self.kernel.neighbors.get(k))
            .copied()
    }

    /// The update that brings prefix `p` of the forwarder from `before` (what it holds) to the
    /// desired state.
    fn route_update(&mut self, p: IpPrefix, before: Option<NextHop>) -> Option<Update> {
        let want = self.desired_route(&p);
        if want == before && !self.failed.remove(&p) {
            return None;
        }
        Some(Update::Route(p, want))
    }

    fn neigh_update(&mut self, k: (u32, IpAddr)) -> Option<Update> {
        let want = self.desired_neigh(&k);
        if want == self.applied_neigh.get(&k).copied() {
            return None;
        }
        match want {
            Some(mac) => self.applied_neigh.insert(k, mac),
            None => self.applied_neigh.remove(&k),
        };
        Some(Update::Neigh(k, want))
    }

    fn ifaces_update(&mut self) -> Option<Update> {
        let now = (self.kernel.links.clone(), self.kernel.addrs.clone());
        if self.applied_ifaces.as_ref() == Some(&now) {
            return None;
        }
        let mut ifs = Interfaces::new();
        for (&i, &(mac, mtu)) in &now.0 {
            ifs.upsert(Interface::new(i, mac, mtu));
            for &(ip, len) in now.1.get(&i).into_iter().flatten() {
                ifs.add_addr(i, ip, len);
            }
        }
        self.applied_ifaces = Some(now);
        Some(Update::Interfaces(Box::new(ifs)))
    }

    /// Takes a new dump and returns everything that differs: every prefix of the old or the new
    /// view, the configuration, or refused before; every neighbour. Computed without the
    /// forwarder.
    fn resync(&mut self, view: KernelView) -> Vec<Update> {
        let old = std::mem::replace(&mut self.kernel, view);
        let mut out: Vec<Update> = self.ifaces_update().into_iter().collect();
        // Each prefix once, without collecting a set of a million prefixes: the new view's,
        // then the old view's that are gone, then configured or refused ones in neither.
        let new_view = std::mem::take(&mut self.kernel.routes);
        let gone = old.routes.prefixes().filter(|p| !new_view.contains(p));
        let rest: Vec<IpPrefix> = (self.static_routes.keys().chain(self.failed.iter()))
            .filter(|p| !new_view.contains(p) && !old.routes.contains(p))
            .copied()
            .collect();
        let prefixes: Vec<IpPrefix> = new_view.prefixes().chain(gone).chain(rest).collect();
        self.kernel.routes = new_view;
        let first = !self.synced;
        self.synced = true;
        for p in prefixes {
            let before = if first {
                None
            } else {
                self.desired_in(&old, &p)
            };
            out.extend(self.route_update(p, before));
        }
        drop(old);
        let neigh: HashSet<(u32, IpAddr)> = self
            .kernel
            .neighbors
            .keys()
            .chain(self.static_neigh.keys())
            .chain(self.applied_neigh.keys())
            .copied()
            .collect();
        out.extend(neigh.into_iter().filter_map(|k| self.neigh_update(k)));
        out
    }

    /// The update one event calls for, if any.
    fn plan_event(&mut self, c: &KernelEvent) -> Option<Update> {
        match c {
            KernelEvent::RouteSet(p, metric, nh) => {
                let before = self.desired_route(p);
                self.kernel.routes.set(*p, *metric, *nh);
                self.route_update(*p, before)
            }
            KernelEvent::RouteDel(p, metric) => {
                let before = self.desired_route(p);
                self.kernel.routes.del(p, *metric);
                self.route_update(*p, before)
            }
            KernelEvent::NeighSet(i, ip, mac) => {
                self.kernel.neighbors.insert((*i, *ip), *mac);
                self.neigh_update((*i, *ip))
            }
            KernelEvent::NeighDel(i, ip) => {
                self.kernel.neighbors.remove(&(*i, *ip));
                self.neigh_update((*i, *ip))
            }
            KernelEvent::Resync | KernelEvent::Interfaces | KernelEvent::Ignore => None,
        }
    }

    /// Writes one update into `f`. A route the forwarder refuses is logged and forgotten as
    /// applied, so the next re-dump tries it again; the error names the prefix.
    fn apply_update(&mut self, f: &mut Forwarder, u: Update) -> Result<()> {
        match u {
            Update::Route(p, nh) => self.apply_route(&f.routes, p, nh)?,
            Update::Neigh((i, ip), Some(mac)) => {
                f.neighbors.insert(i, ip, mac);
            }
            Update::Neigh((i, ip), None) => {
                f.neighbors.remove(i, ip);
            }
            Update::Interfaces(ifs) => f.interfaces = *ifs,
        }
        Ok(())
    }

    fn apply_route(&mut self, routes: &RouteTable, p: IpPrefix, nh: Option<NextHop>) -> Result<()> {
        match nh {
            Some(_)
                if self.max_routes > 0
                    && routes.len() >= self.max_routes
                    && !routes.contains(p) =>
            {
                self.limited.insert(p);
            }
            Some(nh) => {
                self.limited.remove(&p);
                if let Err(e) = routes.insert(p, nh) {
                    self.failed.insert(p);
                    anyhow::bail!("routes: {p}: {e}");
                }
            }
            None => {
                self.limited.remove(&p);
                routes.remove(p);
            }
        }
        Ok(())
    }

    /// Applies `updates` to the running forwarder: routes in place, one at a time, in the table
    /// the workers read (no lock: they never wait); neighbour and interface changes on one copy
    /// of the small tables, published once at the end. Returns how many were applied.
    fn apply_live(&mut self, fwd: &SharedForwarder, updates: Vec<Update>) -> usize {
        let routes = fwd.routes();
        let was = self.incomplete();
        let mut n = 0;
        let mut small = Vec::new();
        for u in updates {
            match u {
                Update::Route(p, nh) => match self.apply_route(&routes, p, nh) {
                    Ok(()) => n += 1,
                    Err(e) => tracing::warn!("route mirror: {e:#}"),
                },
                other => small.push(other),
            }
        }
        n += self.retry_limited(&routes);
        self.report_limit(was, &routes);
        if fwd.load().routes_incomplete != self.incomplete() {
            let inc = self.incomplete();
            fwd.update(|f| f.routes_incomplete = inc);
        }
        if !small.is_empty() {
            n += fwd.update(|f| {
                let mut n = 0;
                for u in small {
                    match self.apply_update(f, u) {
                        Ok(()) => n += 1,
                        Err(e) => tracing::warn!("route mirror: {e:#}"),
                    }
                }
                n
            });
        }
        n
    }

    /// One event applied at once (tests).
    #[cfg(test)]
    fn apply(&mut self, f: &mut Forwarder, c: &KernelEvent) -> Result<bool> {
        match self.plan_event(c) {
            Some(u) => self.apply_update(f, u).map(|()| true),
            None => Ok(false),
        }
    }

    /// [`KernelMirror::resync`] applied to a forwarder nobody else sees yet. A route the
    /// forwarder refuses is logged and retried at the next re-dump (the rest goes in).
    fn sync_all(&mut self, f: &mut Forwarder, view: KernelView) -> usize {
        let was = self.incomplete();
        let mut n = 0;
        for u in self.resync(view) {
            match self.apply_update(f, u) {
                Ok(()) => n += 1,
                Err(e) => tracing::warn!("route mirror: {e:#}"),
            }
        }
        self.report_limit(was, &f.routes);
        f.routes_incomplete = self.incomplete();
        n
    }
}

/// One change to the forwarder.
#[derive(Debug)]
enum Update {
    Route(IpPrefix, Option<NextHop>),
    Neigh((u32, IpAddr), Option<[u8; 6]>),
    Interfaces(Box<Interfaces>),
}

/// Builds a forwarder from the kernel's tables (calling thread's namespace) and the overrides.
pub fn build(spec: &MirrorSpec) -> Result<Forwarder> {
    let mut sock = NlSocket::new(0)?;
    let mut m = KernelMirror::new(spec);
    let view = dump_view(&mut sock, spec)?;
    let mut f = Forwarder::new();
    m.sync_all(&mut f, view);
    Ok(f)
}

/// What [`run_mirror`] needs to carry on from a [`build_seeded`] forwarder without dumping the
/// kernel's tables again: the event socket (subscribed before that dump) and the mirror's view.
pub struct Seed {
    events: NlSocket,
    dumper: NlSocket,
    mirror: KernelMirror,
}

/// [`build`], keeping what the mirror thread needs to start from it: with a full Internet table
/// a second dump at start costs seconds and a second copy of the table in memory. Events from
/// the moment of the dump on queue in the seed's socket, so nothing between the two is missed.
pub fn build_seeded(spec: &MirrorSpec) -> Result<(Forwarder, Seed)> {
    let events = NlSocket::new(event_groups(spec))?;
    let mut dumper = NlSocket::new(0)?;
    let mut mirror = KernelMirror::new(spec);
    let view = dump_view(&mut dumper, spec)?;
    let mut f = Forwarder::new();
    mirror.sync_all(&mut f, view);
    Ok((
        f,
        Seed {
            events,
            dumper,
            mirror,
        },
    ))
}

/// The netlink groups the mirror listens to.
fn event_groups(spec: &MirrorSpec) -> u32 {
    RTMGRP_LINK
        | RTMGRP_IPV4_IFADDR
        | RTMGRP_IPV6_IFADDR
        | if spec.kernel_routes {
            RTMGRP_NEIGH | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE
        } else {
            0
        }
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
    fwd: Arc<SharedForwarder>,
    period: Duration,
    stop: Arc<AtomicBool>,
    seed: Option<Seed>,
) {
    let stats = run_mirror(&spec, &fwd, period, &stop, None, seed);
    tracing::debug!("route mirror stopped: {stats:?}");
}

/// [`refresh_loop`] with its counters, published to `progress` after every batch if given.
/// With a `seed` (from [`build_seeded`], whose forwarder `fwd` holds) it starts from that dump;
/// without, or after a netlink error, it dumps first.
pub fn run_mirror(
    spec: &MirrorSpec,
    fwd: &SharedForwarder,
    period: Duration,
    stop: &AtomicBool,
    progress: Option<&std::sync::Mutex<MirrorStats>>,
    mut seed: Option<Seed>,
) -> MirrorStats {
    let mut st = MirrorStats::default();
    let period = period.max(Duration::from_millis(100));
    'outer: while !stop.load(Ordering::Relaxed) {
        let seeded = seed.take();
        let from_seed = seeded.is_some();
        // Subscribe first, dump second: a change between the two is seen as an event and
        // re-applied idempotently.
        let (mut events, mut dumper, mut mirror) = match seeded {
            Some(s) => (s.events, s.dumper, s.mirror),
            None => match (NlSocket::new(event_groups(spec)), NlSocket::new(0)) {
                (Ok(e), Ok(d)) => (e, d, KernelMirror::new(spec)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!("route mirror: {e:#}; retrying in 1 s");
                    sleep_unless(stop, Duration::from_secs(1));
                    continue;
                }
            },
        };
        // A new mirror knows nothing of what is in the forwarder: its first dump replaces the
        // forwarder's tables wholesale; later ones are diffs. A seeded one already matches it.
        let mut fresh_start = !from_seed;
        let mut need_resync = !from_seed;
        let mut last_resync = Instant::now();
        let mut batch: Vec<KernelEvent> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if need_resync || last_resync.elapsed() >= period {
                need_resync = false;
                last_resync = Instant::now();
                st.resyncs += 1;
                match dump_view(&mut dumper, spec) {
                    Ok(v) => {
                        if fresh_start {
                            fresh_start = false;
                            // Built aside and published: workers move to it at their next grant.
                            let mut fresh = Forwarder::new();
                            st.updates += mirror.sync_all(&mut fresh, v) as u64;
                            let cur = fwd.load_full();
                            fresh.fragments = cur.fragments;
                            fresh.max_frame = cur.max_frame;
                            drop(cur);
                            fwd.replace(fresh);
                        } else {
                            let plan = mirror.resync(v);
                            st.updates += mirror.apply_live(fwd, plan) as u64;
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
                crate::sys::release_free_memory();
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
            } else if batch.contains(&KernelEvent::Interfaces) {
                // Links and addresses only: cheap, whatever the size of the routing table.
                match dump_interfaces(&mut dumper, spec, &mut mirror.kernel) {
                    Ok(()) => {
                        let plan: Vec<Update> = mirror.ifaces_update().into_iter().collect();
                        st.updates += mirror.apply_live(fwd, plan) as u64;
                    }
                    Err(e) => {
                        tracing::warn!("route mirror: {e:#}");
                        need_resync = true;
                    }
                }
            }
            if !need_resync && !batch.is_empty() {
                let plan: Vec<Update> = batch.iter().filter_map(|c| mirror.plan_event(c)).collect();
                st.updates += mirror.apply_live(fwd, plan) as u64;
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
            max_routes: 0,
        };
        let mut m = KernelMirror::new(&spec);
        let mut f = Forwarder::new();
        m.sync_all(&mut f, KernelView::default());
        let a: IpAddr = "10.9.1.1".parse().unwrap();
        assert_eq!(f.routes.lookup(a), Some(nh(3)));
        // The kernel's route for the same prefix changes nothing, before or after deletion.
        assert!(!m
            .apply(&mut f, &KernelEvent::RouteSet(p("10.9.0.0/16"), 0, nh(2)))
            .unwrap());
        assert_eq!(f.routes.lookup(a), Some(nh(3)));
        m.apply(&mut f, &KernelEvent::RouteDel(p("10.9.0.0/16"), 0))
            .unwrap();
        assert_eq!(f.routes.lookup(a), Some(nh(3)));
        // Two metrics: the lower wins; deleting it falls back to the other.
        let b: IpAddr = "10.8.0.1".parse().unwrap();
        m.apply(&mut f, &KernelEvent::RouteSet(p("10.8.0.0/16"), 100, nh(2)))
            .unwrap();
        m.apply(&mut f, &KernelEvent::RouteSet(p("10.8.0.0/16"), 10, nh(3)))
            .unwrap();
        assert_eq!(f.routes.lookup(b), Some(nh(3)));
        m.apply(&mut f, &KernelEvent::RouteDel(p("10.8.0.0/16"), 10))
            .unwrap();
        assert_eq!(f.routes.lookup(b), Some(nh(2)));
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
            max_routes: 0,
        };
        let mut m = KernelMirror::new(&spec);
        let mut f = Forwarder::new();
        m.sync_all(&mut f, KernelView::default());
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
        let mut view = KernelView::default();
        view.routes.set(p("10.1.0.0/16"), 0, nh(2));
        view.routes.set(p("fd00::/8"), 0, nh(2));
        // two routes, and the (empty) interface set the first time
        assert_eq!(m.sync_all(&mut f, view.clone()), 3);
        assert_eq!(m.sync_all(&mut f, view.clone()), 0, "no change, no update");
        view.routes.remove(&p("10.1.0.0/16"));
        assert_eq!(m.sync_all(&mut f, view), 1);
        assert_eq!(f.routes.lookup("10.1.2.3".parse().unwrap()), None);
        assert!(f.routes.lookup("fd00::1".parse().unwrap()).is_some());
    }

    #[test]
    fn beyond_max_routes_the_forwarder_is_incomplete_until_the_table_fits() {
        let spec = MirrorSpec {
            ifindexes: vec![2],
            kernel_routes: true,
            max_routes: 2,
            ..Default::default()
        };
        let mut m = KernelMirror::new(&spec);
        let f = SharedForwarder::default();
        let mut view = KernelView::default();
        for s in ["10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16"] {
            view.routes.set(p(s), 0, nh(2));
        }
        let plan = m.resync(view.clone());
        m.apply_live(&f, plan);
        let cur = f.load();
        assert_eq!(cur.routes.len(), 2, "the limit holds");
        assert!(
            cur.routes_incomplete,
            "and the forwarder knows it lacks a route"
        );
        // Every routed packet of an incomplete forwarder goes to the kernel, even to a prefix
        // it holds (a held shorter prefix could be wrong for a left-out longer one).
        let mut fr = crate::kernel::tests::udp_to("10.1.0.9");
        let mut fwd = Forwarder::clone(&cur);
        fwd.interfaces
            .upsert(Interface::new(2, [2, 0, 0, 0, 0, 2], 1500));
        fwd.interfaces
            .upsert(Interface::new(1, [2, 0, 0, 0, 0, 1], 1500));
        assert_eq!(
            fwd.process(&mut fr, 1),
            llr_core::fwd::Verdict::Pass(llr_core::fwd::PassReason::KernelRoute)
        );
        drop(cur);
        // A route goes away in the kernel: the left-out one takes its place.
        assert_eq!(m.limited.len(), 1);
        let events = [KernelEvent::RouteDel(p("10.1.0.0/16"), 0)];
        let plan: Vec<Update> = events.iter().filter_map(|e| m.plan_event(e)).collect();
        m.apply_live(&f, plan);
        let cur = f.load();
        assert_eq!(cur.routes.len(), 2);
        assert!(!cur.routes_incomplete);
        for s in ["10.2.0.1", "10.3.0.1"] {
            assert!(cur.routes.lookup(s.parse().unwrap()).is_some(), "{s}");
        }
    }

    /// An Ethernet/IPv4/UDP frame to `dst` from 10.9.9.9, for the router's MAC 02:..:01.
    pub(super) fn udp_to(dst: &str) -> Vec<u8> {
        llr_core::wire::build::frame(&llr_core::wire::build::FrameSpec {
            dst_mac: [2, 0, 0, 0, 0, 1],
            src: "10.9.9.9".parse().unwrap(),
            dst: dst.parse().unwrap(),
            ..Default::default()
        })
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
