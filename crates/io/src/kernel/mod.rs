//! Mirrors the router namespace's interfaces, routes and neighbours into a `Forwarder` over
//! rtnetlink ([rtnetlink(7)]), so `ip route`, FRR or BIRD configure llrouter.
//!
//! - [`build`]: one dump of links, addresses, routes (table main) and neighbours, with the
//!   static configuration applied on top as an override.
//! - [`refresh_loop`] (a thread in the router's namespace): subscribes to `RTMGRP_LINK`,
//!   `RTMGRP_NEIGH`, `RTMGRP_IPV4_IFADDR`/`IPV6_IFADDR` and `RTMGRP_IPV4_ROUTE`/`IPV6_ROUTE`
//!   *before* dumping, then applies route and neighbour events incrementally (a DIR-24-8 insert
//!   or delete, never a rebuild). Link and address events, a socket overrun (`ENOBUFS`, with a
//!   16 MiB receive buffer by default) and a long safety `period` (`route-refresh-ms`, 5 minutes by
//!   default) trigger a full re-dump, which is *diffed* against what was applied, so only
//!   changes reach the forwarder. (IPv4 removes the routes of a downed link or a deleted
//!   address without notifications; the re-dump catches that.) Idle, the thread sleeps in
//!   poll(). Dumps are decoded as they arrive, never held as messages.
//! - The kernel's table is not kept twice: a prefix with one kernel route is described by the
//!   forwarding table's own record of it (the next hop, the metric as a tag beside it); the
//!   mirror keeps aside only the prefixes the table does not describe (several metrics, a
//!   static route in their place, left out by `max-routes` or refused). A re-dump is diffed
//!   against the table itself.
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What failed in reading the kernel's tables or applying them to the forwarder.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A netlink socket call (`op`: socket, bind, send, recv) failed.
    #[error("netlink: {op}: {cause}")]
    Netlink {
        op: &'static str,
        cause: std::io::Error,
    },
    /// A dump did not complete: the kernel refused it, kept interrupting it, or stopped.
    #[error("netlink: {0}")]
    Dump(String),
    /// The forwarder refused a route of the kernel's.
    #[error("routes: {prefix}: {reason}")]
    Route { prefix: IpPrefix, reason: String },
    /// No interface with this index in the calling thread's namespace.
    #[error("no interface with index {0}")]
    NoInterface(u32),
}

type Result<T, E = KernelError> = std::result::Result<T, E>;
use llr_core::classify::IpPrefix;
use llr_core::fwd::{
    Forwarder, Interface, Interfaces, Multipath, NextHop, Policy, RouteTable, SharedForwarder,
    SmallTable, MAX_TAG,
};

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
    /// Bytes of receive buffer for the event socket (`netlink-buffer-kb`; 0:
    /// [`DEFAULT_EVENT_BUFFER`]). Events beyond it are lost to an overrun and a re-dump.
    pub event_buffer: usize,
}

/// The event socket's receive buffer unless configured: a routing daemon installing a full
/// table sends tens of thousands of route events a second, each taking ~1 KiB of buffer
/// (the kernel counts each message's whole allocation), so this holds a few thousand of them
/// while the mirror applies the ones before (the route mirror's overruns are counted in
/// `llrouter_mirror_overruns_total`). Memory is only used while events wait.
pub const DEFAULT_EVENT_BUFFER: usize = 16 << 20;

impl MirrorSpec {
    /// The event socket's receive buffer in bytes.
    pub fn event_buffer(&self) -> usize {
        if self.event_buffer == 0 {
            DEFAULT_EVENT_BUFFER
        } else {
            self.event_buffer
        }
    }
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

pub(crate) mod netlink;
mod watch;
use netlink::*;
pub use watch::ProtoRouteWatch;

/// What the router checks of an interface before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkFacts {
    /// Allocated rx queues (`IFLA_NUM_RX_QUEUES`); fewer may be active ([`active_rx_queues`]).
    pub num_rx_queues: u32,
    pub mtu: u32,
}

/// [`LinkFacts`] of interface `ifindex` in the calling thread's namespace.
pub fn link_facts(ifindex: u32) -> Result<LinkFacts> {
    let mut sock = NlSocket::new(0, 0)?;
    netlink::link_facts(&mut sock)?
        .get(&ifindex)
        .copied()
        .ok_or(KernelError::NoInterface(ifindex))
}

/// The rx queues of interface `name` (index `ifindex`) that can receive traffic now: the
/// channels in use (`ethtool -l`), which is what RSS spreads frames over and what an AF_XDP
/// socket may bind to. The allocated count (`IFLA_NUM_RX_QUEUES`) can be larger: a default veth
/// allocates one per CPU and uses one. Drivers without channels report the allocated count.
pub fn active_rx_queues(name: &str, ifindex: u32) -> Result<u32> {
    match crate::sys::ethtool_channels(name) {
        Ok(c) if c.rx_queues() > 0 => Ok(c.rx_queues()),
        _ => Ok(link_facts(ifindex)?.num_rx_queues.max(1)),
    }
}

/// What the interface table is built from: links, addresses, the VRF table and the
/// `rp_filter` mode of each.
type IfaceState = (Links, Addrs, BTreeMap<u32, u32>, BTreeMap<u32, (u8, bool)>);

/// The kernel's routes for one prefix: (metric, next hop), in no particular order.
type KernelRoutes = Vec<(u32, NextHop)>;

/// The kernel's mirror, with what has been applied to the forwarder (so updates are diffs).
///
/// The kernel's routes are not kept beside the forwarding table: a prefix with one kernel route,
/// installed as it is, is described by the table's own record of it (the next hop, and the
/// metric as an interned tag: [`RouteTable::insert_tagged`]). Only the prefixes whose table
/// entry does not tell their kernel routes are kept here, in `others`.
struct KernelMirror {
    /// Links, addresses and neighbours; a dump's routes are taken out as it is applied.
    kernel: KernelView,
    /// The kernel's routes of every prefix the table does not describe: several metrics, a
    /// static route in their place, left out by max-routes or refused by the table, or a metric
    /// that got no tag. Never an empty list.
    others: HashMap<IpPrefix, KernelRoutes>,
    /// Metric by tag − 1 (tag 0: the entry is not a kernel route of its own, see `others`).
    metrics: Vec<u32>,
    tags: HashMap<u32, u16>,
    static_routes: HashMap<IpPrefix, NextHop>,
    static_neigh: HashMap<(u32, IpAddr), [u8; 6]>,
    /// Prefixes the forwarder refused: tried again at the next re-dump.
    failed: HashSet<IpPrefix>,
    applied_neigh: HashMap<(u32, IpAddr), [u8; 6]>,
    /// Links, addresses, VRF tables and `rp_filter` modes as last published.
    applied_ifaces: Option<IfaceState>,
    /// The rules or a table besides main changed since the policy was last published.
    policy_dirty: bool,
    /// Mirror the kernel's rules (else the forwarder keeps the default ones).
    kernel_rules: bool,
    /// The rules handed to the kernel that have been warned about.
    kernel_rules_said: HashSet<String>,
    /// The multipath hash as published.
    multipath: Option<Multipath>,
    multipath_seed: u64,
    max_routes: usize,
    /// Prefixes left out because the table was at `max_routes`: while any is, the forwarder
    /// is incomplete; they go in as soon as there is room.
    limited: HashSet<IpPrefix>,
}

/// The kernel's reverse-path filter mode for IPv4 arriving on `ifindex`: the larger of
/// `conf/all/rp_filter` and `conf/<interface>/rp_filter` (0 when they cannot be read). Read
/// when the interfaces are (re)built: at start, on a link or address change, and on
/// RTM_NEWNETCONF (which the kernel sends for `rp_filter`).
///
/// With it, `send_redirects`: on if `all` or the interface's is (Linux's IN_DEV_ORCONF). The
/// kernel announces no change of it: the mirror reads it again every [`SYSCTL_PERIOD`].
#[cfg(not(test))]
fn ipv4_conf_of(ifindex: u32) -> (u8, bool) {
    let read = |name: &str, key: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/conf/{name}/{key}"))
            .ok()
            .and_then(|v| v.trim().parse::<u8>().ok())
            .unwrap_or(0)
    };
    let name = crate::ebpf::ifname(ifindex);
    let dev = |key| name.as_deref().map(|n| read(n, key)).unwrap_or(0);
    let rp_filter = read("all", "rp_filter").max(dev("rp_filter")).min(2);
    let redirects = read("all", "send_redirects") != 0 || dev("send_redirects") != 0;
    (rp_filter, redirects)
}

/// Unit tests build interfaces of made-up indices: no host sysctl leaks into them.
#[cfg(test)]
fn ipv4_conf_of(_ifindex: u32) -> (u8, bool) {
    (0, false)
}

/// The kernel's `fib_multipath_hash_policy` of IPv4 and IPv6 (0 when unreadable). Read with
/// the interfaces, as `rp_filter`.
fn multipath_policies() -> (u8, u8) {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|v| v.trim().parse::<u8>().ok())
            .unwrap_or(0)
    };
    (
        read("/proc/sys/net/ipv4/fib_multipath_hash_policy"),
        read("/proc/sys/net/ipv6/fib_multipath_hash_policy"),
    )
}

/// The kernel's `fib_multipath_hash_seed` (Linux 6.11; both families), if the operator set
/// one: then llrouter's hash takes it too, so that a run is repeatable as the kernel's is. 0
/// (the default: a random seed) and an older kernel leave llrouter's own random seed.
fn multipath_seed_set() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/net/ipv4/fib_multipath_hash_seed")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&s| s != 0)
        .map(u64::from)
}

/// How often the mirror reads the sysctls the kernel sends no event for.
const SYSCTL_PERIOD: Duration = Duration::from_secs(1);

/// A seed of this router's own for the multipath hash.
fn multipath_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

impl KernelMirror {
    fn new(spec: &MirrorSpec) -> KernelMirror {
        KernelMirror {
            kernel: KernelView::default(),
            others: HashMap::new(),
            metrics: Vec::new(),
            tags: HashMap::new(),
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
            failed: HashSet::new(),
            applied_neigh: HashMap::new(),
            applied_ifaces: None,
            policy_dirty: false,
            kernel_rules: spec.kernel_routes,
            kernel_rules_said: HashSet::new(),
            multipath: None,
            multipath_seed: multipath_seed(),
            max_routes: spec.max_routes,
            limited: HashSet::new(),
        }
    }

    /// Whether the forwarder lacks routes it should hold (see [`MirrorSpec::max_routes`]).
    fn incomplete(&self) -> bool {
        !self.limited.is_empty()
    }

    /// The tag that stands for `metric` in the table; 0 once every tag is taken (a table sees
    /// a handful of metrics, so that is a daemon gone wild, and its routes go to `others`).
    fn tag(&mut self, metric: u32) -> u16 {
        if let Some(&t) = self.tags.get(&metric) {
            return t;
        }
        if self.metrics.len() >= usize::from(MAX_TAG) {
            return 0;
        }
        self.metrics.push(metric);
        let t = self.metrics.len() as u16;
        self.tags.insert(metric, t);
        t
    }

    /// The kernel's routes for `p`, from `others` or else the table `t`'s record of it.
    fn kernel_routes(&self, t: &RouteTable, p: &IpPrefix) -> KernelRoutes {
        if let Some(k) = self.others.get(p) {
            return k.clone();
        }
        match t.get(*p) {
            Some((nh, tag)) if tag > 0 => (self.metrics.get(usize::from(tag) - 1))
                .map(|&m| vec![(m, nh)])
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Makes table `t` hold for `p` what the configuration and the kernel's routes `k` call for
    /// (the static route, else the route of lowest metric), and keeps `k` in `others` unless
    /// the table's record tells it. Returns whether the forwarder's route for `p` changed (or a
    /// refused one was tried again); an error names the prefix the table refused.
    fn set(&mut self, t: &RouteTable, p: IpPrefix, k: KernelRoutes) -> Result<bool> {
        let (want, tag) = match (self.static_routes.get(&p), k.as_slice()) {
            (Some(nh), _) => (Some(*nh), 0),
            (None, &[(metric, nh)]) => (Some(nh), self.tag(metric)),
            (None, k) => (k.iter().min_by_key(|r| r.0).map(|r| r.1), 0),
        };
        let held = t.get(p);
        let retry = self.failed.remove(&p);
        let changed = held.map(|h| h.0) != want || retry;
        let (result, holds) = if changed || held.map(|h| h.1) != want.map(|_| tag) {
            match self.apply_route(t, p, want, tag) {
                Ok(holds) => (Ok(changed), holds),
                Err(e) => (Err(e), false),
            }
        } else {
            if want.is_none() {
                self.limited.remove(&p);
            }
            (Ok(false), true)
        };
        if (holds && tag > 0) || k.is_empty() {
            self.others.remove(&p);
        } else {
            self.others.insert(p, k);
        }
        result
    }

    /// Installs what the limit left out, as far as there is room now.
    fn retry_limited(&mut self, routes: &RouteTable) -> usize {
        if self.limited.is_empty() || routes.len() >= self.max_routes {
            return 0;
        }
        let mut n = 0;
        let waiting: Vec<IpPrefix> = self.limited.drain().collect();
        for p in waiting {
            let k = self.kernel_routes(routes, &p);
            match self.set(routes, p, k) {
                Ok(_) => n += 1,
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

    fn desired_neigh(&self, k: &(u32, IpAddr)) -> Option<[u8; 6]> {
        self.static_neigh
            .get(k)
            .or_else(|| self.kernel.neighbors.get(k))
            .copied()
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

    /// The multipath hash if it changed (its policies are sysctls, read when the interfaces
    /// are).
    fn multipath_update(&mut self) -> Option<Update> {
        let (policy_v4, policy_v6) = multipath_policies();
        let now = Multipath {
            policy_v4,
            policy_v6,
            seed: multipath_seed_set().unwrap_or(self.multipath_seed),
        };
        (self.multipath != Some(now)).then(|| {
            self.multipath = Some(now);
            Update::Multipath(now)
        })
    }

    /// The interfaces (and the multipath hash, read with them), as far as they changed.
    fn ifaces_update(&mut self) -> Vec<Update> {
        let mut u: Vec<Update> = self.multipath_update().into_iter().collect();
        u.extend(self.interfaces_update());
        u
    }

    fn interfaces_update(&mut self) -> Option<Update> {
        let now = (
            self.kernel.links.clone(),
            self.kernel.addrs.clone(),
            self.kernel.vrf.clone(),
            (self.kernel.links.keys())
                .map(|&i| (i, ipv4_conf_of(i)))
                .collect::<BTreeMap<u32, (u8, bool)>>(),
        );
        if self.applied_ifaces.as_ref() == Some(&now) {
            return None;
        }
        let mut ifs = Interfaces::new();
        for (&i, &(mac, mtu)) in &now.0 {
            let mut iface = Interface::new(i, mac, mtu);
            let (rp_filter, send_redirects) = now.3.get(&i).copied().unwrap_or((0, false));
            iface.rp_filter = rp_filter;
            iface.send_redirects = send_redirects;
            iface.vrf_table = now.2.get(&i).copied();
            ifs.upsert(iface);
            for &(ip, len) in now.1.get(&i).into_iter().flatten() {
                ifs.add_addr(i, ip, len);
            }
        }
        self.applied_ifaces = Some(now);
        Some(Update::Interfaces(Box::new(ifs)))
    }

    /// The policy to publish if the rules or the tables besides main changed: each prefix's
    /// route of lowest metric, the kernel's rules (the default ones when llrouter does not
    /// mirror the kernel's routes).
    fn policy_update(&mut self) -> Option<Update> {
        if !std::mem::take(&mut self.policy_dirty) {
            return None;
        }
        let (r4, r6) = &self.kernel.rules;
        if !self.kernel_rules || (r4.is_empty() && r6.is_empty()) {
            return Some(Update::Policy(Arc::new(Policy::default())));
        }
        // Said once per rule, when it appears: what of it the kernel decides.
        let name = |i: u32| crate::ebpf::ifname(i).unwrap_or_else(|_| format!("ifindex {i}"));
        let mut now = HashSet::new();
        for (fam, r) in (r4.iter().map(|r| ("IPv4", r))).chain(r6.iter().map(|r| ("IPv6", r))) {
            if let llr_core::fwd::RuleAction::Kernel(why) = r.action {
                let text = format!("{fam} rule {}", r.describe(name));
                if !self.kernel_rules_said.contains(&text) {
                    tracing::warn!(
                        "routing: {text}: llrouter cannot evaluate its {why}; packets that reach                          it and match its other selectors go to the kernel (counted as                          reason=\"worker_kernel_route\")"
                    );
                }
                now.insert(text);
            }
        }
        self.kernel_rules_said = now;
        let tables = (self.kernel.tables.iter())
            .map(|(&t, routes)| {
                let best = routes
                    .iter()
                    .filter_map(|(p, k)| Some((*p, k.iter().min_by_key(|r| r.0)?.1)));
                (t, SmallTable::new(best))
            })
            .collect();
        Some(Update::Policy(Arc::new(Policy::new(
            r4.clone(),
            r6.clone(),
            tables,
        ))))
    }

    /// Takes a new dump: its routes are diffed against table `t` and what differs is written
    /// into it at once; interface and neighbour changes are left in `small`. Returns how many
    /// of the forwarder's routes changed.
    fn resync(&mut self, t: &RouteTable, mut view: KernelView, small: &mut Vec<Update>) -> usize {
        let dump = std::mem::take(&mut view.routes);
        self.policy_dirty |= view.rules != self.kernel.rules || view.tables != self.kernel.tables;
        self.kernel = view;
        small.extend(self.ifaces_update());
        small.extend(self.policy_update());
        let mut n = 0;
        let mut one = |m: &mut Self, p: IpPrefix, k: KernelRoutes| match m.set(t, p, k) {
            Ok(changed) => n += usize::from(changed),
            Err(e) => tracing::warn!("route mirror: {e:#}"),
        };
        // Prefixes the dump lacks first (they make room under max-routes): the table's, then
        // the rest of what the mirror knows; a prefix met twice is set twice to the same.
        let gone: Vec<IpPrefix> = (t.iter().map(|(p, _)| p))
            .chain(self.others.keys().copied())
            .chain(self.static_routes.keys().copied())
            .chain(self.failed.iter().copied())
            .filter(|p| !dump.contains(p))
            .collect();
        for p in gone {
            one(self, p, Vec::new());
        }
        for (p, k) in dump.iter() {
            one(self, p, k);
        }
        drop(dump);
        let neigh: HashSet<(u32, IpAddr)> = self
            .kernel
            .neighbors
            .keys()
            .chain(self.static_neigh.keys())
            .chain(self.applied_neigh.keys())
            .copied()
            .collect();
        small.extend(neigh.into_iter().filter_map(|k| self.neigh_update(k)));
        n
    }

    /// Applies one event: a route change at once into table `t`, a neighbour change as an
    /// update left in `small`. Returns whether the forwarder's route changed.
    fn event(&mut self, t: &RouteTable, c: &KernelEvent, small: &mut Vec<Update>) -> Result<bool> {
        match c {
            KernelEvent::RouteSet(p, metric, nh) => {
                let mut k = self.kernel_routes(t, p);
                match k.iter_mut().find(|r| r.0 == *metric) {
                    Some(r) => r.1 = *nh,
                    None => k.push((*metric, *nh)),
                }
                self.set(t, *p, k)
            }
            KernelEvent::RouteDel(p, metric) => {
                let mut k = self.kernel_routes(t, p);
                k.retain(|r| r.0 != *metric);
                self.set(t, *p, k)
            }
            KernelEvent::NeighSet(i, ip, mac) => {
                self.kernel.neighbors.insert((*i, *ip), *mac);
                small.extend(self.neigh_update((*i, *ip)));
                Ok(false)
            }
            KernelEvent::NeighDel(i, ip) => {
                self.kernel.neighbors.remove(&(*i, *ip));
                small.extend(self.neigh_update((*i, *ip)));
                Ok(false)
            }
            KernelEvent::TableRouteSet(t, p, metric, nh) => {
                netlink::table_set(&mut self.kernel.tables, *t, *p, *metric, Some(*nh));
                self.policy_dirty = true;
                Ok(false)
            }
            KernelEvent::TableRouteDel(t, p, metric) => {
                netlink::table_set(&mut self.kernel.tables, *t, *p, *metric, None);
                self.policy_dirty = true;
                Ok(false)
            }
            KernelEvent::Resync
            | KernelEvent::Interfaces
            | KernelEvent::Rules
            | KernelEvent::Ignore => Ok(false),
        }
    }

    /// Writes route `nh` (or its absence) for `p` with `tag` into `routes`, unless max-routes
    /// leaves it out. Returns whether the table now holds it. A route the table refuses is
    /// remembered, so the next re-dump tries it again; the error names the prefix.
    fn apply_route(
        &mut self,
        routes: &RouteTable,
        p: IpPrefix,
        nh: Option<NextHop>,
        tag: u16,
    ) -> Result<bool> {
        match nh {
            Some(_)
                if self.max_routes > 0
                    && routes.len() >= self.max_routes
                    && !routes.contains(p) =>
            {
                self.limited.insert(p);
                Ok(false)
            }
            Some(nh) => {
                self.limited.remove(&p);
                if let Err(e) = routes.insert_tagged(p, nh, tag) {
                    self.failed.insert(p);
                    return Err(KernelError::Route {
                        prefix: p,
                        reason: e.to_string(),
                    });
                }
                Ok(true)
            }
            None => {
                self.limited.remove(&p);
                routes.remove(p);
                Ok(true)
            }
        }
    }

    /// Applies a batch to the running forwarder: `batch` writes route changes in place, one at a
    /// time, into the table the workers read (no lock: they never wait) and returns how many
    /// changed; the neighbour and interface changes it leaves are made on one copy of the small
    /// tables, published once at the end. Returns how many forwarder entries changed.
    fn apply_live(
        &mut self,
        fwd: &SharedForwarder,
        batch: impl FnOnce(&mut Self, &RouteTable, &mut Vec<Update>) -> usize,
    ) -> usize {
        let routes = fwd.routes();
        let was = self.incomplete();
        let mut small = Vec::new();
        let mut n = batch(self, &routes, &mut small);
        small.extend(self.policy_update());
        n += self.retry_limited(&routes);
        self.report_limit(was, &routes);
        if fwd.load().routes_incomplete != self.incomplete() {
            let inc = self.incomplete();
            fwd.update(|f| f.routes_incomplete = inc);
        }
        if !small.is_empty() {
            n += fwd.update(|f| {
                let n = small.len();
                small.into_iter().for_each(|u| apply_update(f, u));
                n
            });
        }
        n
    }

    /// One event applied at once (tests).
    #[cfg(test)]
    fn apply(&mut self, f: &mut Forwarder, c: &KernelEvent) -> Result<bool> {
        let routes = f.routes.clone();
        let mut small = Vec::new();
        let changed = self.event(&routes, c, &mut small)?;
        let any = !small.is_empty();
        small.into_iter().for_each(|u| apply_update(f, u));
        Ok(changed || any)
    }

    /// [`KernelMirror::resync`] applied to a forwarder nobody else sees yet. A route the
    /// forwarder refuses is logged and retried at the next re-dump (the rest goes in).
    fn sync_all(&mut self, f: &mut Forwarder, view: KernelView) -> usize {
        let was = self.incomplete();
        let routes = f.routes.clone();
        let mut small = Vec::new();
        let mut n = self.resync(&routes, view, &mut small);
        n += small.len();
        small.into_iter().for_each(|u| apply_update(f, u));
        self.report_limit(was, &routes);
        f.routes_incomplete = self.incomplete();
        n
    }
}

/// A change to the forwarder's small tables (routes are written into the shared table).
#[derive(Debug)]
enum Update {
    Neigh((u32, IpAddr), Option<[u8; 6]>),
    Interfaces(Box<Interfaces>),
    Policy(Arc<Policy>),
    Multipath(Multipath),
}

fn apply_update(f: &mut Forwarder, u: Update) {
    match u {
        Update::Neigh((i, ip), Some(mac)) => {
            f.neighbors.insert(i, ip, mac);
        }
        Update::Neigh((i, ip), None) => {
            f.neighbors.remove(i, ip);
        }
        Update::Interfaces(ifs) => f.interfaces = *ifs,
        Update::Policy(p) => f.policy = p,
        Update::Multipath(m) => f.multipath = m,
    }
}

/// Builds a forwarder from the kernel's tables (calling thread's namespace) and the overrides.
pub fn build(spec: &MirrorSpec) -> Result<Forwarder> {
    let mut sock = NlSocket::new(0, 0)?;
    let mut m = KernelMirror::new(spec);
    let mut f = Forwarder::new();
    let view = dump_view(&mut sock, spec, &f.routes)?;
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
    let events = NlSocket::new(event_groups(spec), spec.event_buffer())?;
    let mut dumper = NlSocket::new(0, 0)?;
    let mut mirror = KernelMirror::new(spec);
    let mut f = Forwarder::new();
    let view = dump_view(&mut dumper, spec, &f.routes)?;
    mirror.sync_all(&mut f, view);
    // The dump is gone now, but glibc keeps the freed heap pages of its maps resident until
    // trimmed, and the mirror thread only trims after its own dumps (minutes away).
    crate::sys::release_free_memory();
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
        | RTMGRP_IPV4_NETCONF
        | RTMGRP_IPV4_IFADDR
        | RTMGRP_IPV6_IFADDR
        | if spec.kernel_routes {
            RTMGRP_NEIGH
                | RTMGRP_IPV4_ROUTE
                | RTMGRP_IPV6_ROUTE
                | RTMGRP_IPV4_RULE
                | RTMGRP_IPV6_RULE
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
/// Its counters go to `progress` after every batch, counting on from what `progress` holds (a
/// restarted mirror keeps its counters monotonic).
pub fn refresh_loop(
    spec: MirrorSpec,
    fwd: Arc<SharedForwarder>,
    period: Duration,
    stop: Arc<AtomicBool>,
    seed: Option<Seed>,
    progress: Arc<std::sync::Mutex<MirrorStats>>,
) {
    let stats = run_mirror(&spec, &fwd, period, &stop, Some(&progress), seed);
    tracing::debug!("route mirror stopped: {stats:?}");
}

/// [`refresh_loop`] with its counters, published to `progress` after every batch if given
/// (counting on from what it holds). With a `seed` (from [`build_seeded`], whose forwarder
/// `fwd` holds) it starts from that dump; without, or after a netlink error, it dumps first.
pub fn run_mirror(
    spec: &MirrorSpec,
    fwd: &SharedForwarder,
    period: Duration,
    stop: &AtomicBool,
    progress: Option<&std::sync::Mutex<MirrorStats>>,
    mut seed: Option<Seed>,
) -> MirrorStats {
    let mut st = progress.map_or_else(MirrorStats::default, |p| {
        *p.lock().unwrap_or_else(|e| e.into_inner())
    });
    let period = period.max(Duration::from_millis(100));
    'outer: while !stop.load(Ordering::Relaxed) {
        let seeded = seed.take();
        let from_seed = seeded.is_some();
        // Subscribe first, dump second: a change between the two is seen as an event and
        // re-applied idempotently.
        let (mut events, mut dumper, mut mirror) = match seeded {
            Some(s) => (s.events, s.dumper, s.mirror),
            None => match (
                NlSocket::new(event_groups(spec), spec.event_buffer()),
                NlSocket::new(0, 0),
            ) {
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
        let mut last_sysctls = Instant::now();
        let mut batch: Vec<KernelEvent> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if need_resync || last_resync.elapsed() >= period {
                need_resync = false;
                last_resync = Instant::now();
                st.resyncs += 1;
                // A fresh start builds a new forwarder, whose table interns the groups.
                let mut fresh = fresh_start.then(Forwarder::new);
                let groups = fresh
                    .as_ref()
                    .map_or_else(|| fwd.routes(), |f| f.routes.clone());
                match dump_view(&mut dumper, spec, &groups) {
                    Ok(v) => {
                        if let Some(mut fresh) = fresh.take() {
                            fresh_start = false;
                            // Built aside and published: workers move to it at their next grant.
                            st.updates += mirror.sync_all(&mut fresh, v) as u64;
                            fresh.keep_settings_of(&fwd.load_full());
                            fwd.replace(fresh);
                        } else {
                            let n = mirror.apply_live(fwd, |m, t, small| m.resync(t, v, small));
                            st.updates += n as u64;
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
            // The sysctls the kernel announces no change of (fib_multipath_hash_policy and
            // _seed, send_redirects): read again every second, published only if they moved.
            if last_sysctls.elapsed() >= SYSCTL_PERIOD {
                last_sysctls = Instant::now();
                st.updates += mirror.apply_live(fwd, |m, _, small| {
                    small.extend(m.ifaces_update());
                    0
                }) as u64;
            }
            // Wait for events (bounded, so `stop` and the period are checked).
            if crate::sys::poll(&mut [crate::sys::poll_in(events.sock.as_raw_fd())], 50) == 0 {
                continue;
            }
            // Drain what is queued (bounded per turn so a storm cannot starve the stop check).
            let table = fwd.routes();
            let mut resilient = mirror.kernel.resilient.clone();
            for _ in 0..256 {
                match events.sock.recv(&mut &mut events.buf[..], 0) {
                    Ok(n) => {
                        for (_, _, fr) in frames(&events.buf[..n]) {
                            match fr {
                                Frame::Msg(m) => {
                                    st.events += 1;
                                    let groups = netlink::Groups {
                                        table: &table,
                                        resilient: &resilient,
                                    };
                                    batch.push(classify_event(&m, spec, &groups));
                                }
                                // A nexthop object changed: which groups are resilient is
                                // read again before the route events that follow it (the
                                // kernel announces a group's routes after the group).
                                Frame::NextHop if spec.kernel_routes => {
                                    st.events += 1;
                                    match dumper.resilient_groups() {
                                        Ok(s) => resilient = s,
                                        Err(e) => {
                                            tracing::warn!("route mirror: {e:#}");
                                            need_resync = true;
                                        }
                                    }
                                }
                                // An IPv4 device setting changed (rp_filter, forwarding):
                                // the interfaces are read again with their sysctls.
                                Frame::NetConf => {
                                    st.events += 1;
                                    batch.push(KernelEvent::Interfaces);
                                }
                                _ => {}
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        st.overruns += 1;
                        need_resync = true;
                        // A fresh subscription before the re-dump: the old socket's queue
                        // holds events older than the dump, and while it stays congested
                        // the kernel drops new events without another ENOBUFS, so a change
                        // made after the dump could be lost silently.
                        match NlSocket::new(event_groups(spec), spec.event_buffer()) {
                            Ok(fresh) => events = fresh,
                            Err(e) => {
                                tracing::warn!("route mirror: {e:#}; re-subscribing");
                                continue 'outer;
                            }
                        }
                        break;
                    }
                    Err(e) => {
                        tracing::warn!("route mirror: netlink recv: {e}; re-subscribing");
                        continue 'outer;
                    }
                }
            }
            mirror.kernel.resilient = resilient;
            if batch.contains(&KernelEvent::Resync) {
                need_resync = true;
            } else if batch.contains(&KernelEvent::Interfaces)
                || batch.contains(&KernelEvent::Rules)
            {
                // Links, addresses and rules only: cheap, whatever the size of the routing
                // table.
                let rules = spec.kernel_routes;
                match dump_interfaces(&mut dumper, spec, &mut mirror.kernel).and_then(|()| {
                    let was = mirror.kernel.rules.clone();
                    if rules {
                        netlink::dump_rules(&mut dumper, &mut mirror.kernel)?;
                    }
                    mirror.policy_dirty |= mirror.kernel.rules != was;
                    Ok(())
                }) {
                    Ok(()) => {
                        let n = mirror.apply_live(fwd, |m, _, small| {
                            small.extend(m.ifaces_update());
                            0
                        });
                        st.updates += n as u64;
                    }
                    Err(e) => {
                        tracing::warn!("route mirror: {e:#}");
                        need_resync = true;
                    }
                }
            }
            if !need_resync && !batch.is_empty() {
                let n = mirror.apply_live(fwd, |m, t, small| {
                    let mut n = 0;
                    for c in &batch {
                        match m.event(t, c, small) {
                            Ok(changed) => n += usize::from(changed),
                            Err(e) => tracing::warn!("route mirror: {e:#}"),
                        }
                    }
                    n
                });
                st.updates += n as u64;
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
            event_buffer: 0,
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
        assert!(
            m.others.is_empty(),
            "the kernel has no route left to remember"
        );
    }

    fn one_family_spec() -> MirrorSpec {
        MirrorSpec {
            ifindexes: vec![2],
            kernel_routes: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_prefix_with_one_route_is_kept_by_the_table_alone() {
        let mut m = KernelMirror::new(&one_family_spec());
        let mut f = Forwarder::new();
        let (q, q6) = (p("10.1.0.0/16"), p("2001:db8::/48"));
        let mut view = KernelView::default();
        view.routes.set(q, 50, nh(2));
        view.routes.set(q6, 1024, nh(3));
        m.sync_all(&mut f, view);
        assert!(m.others.is_empty());
        assert_eq!(m.kernel_routes(&f.routes, &q), vec![(50, nh(2))]);
        assert_eq!(m.kernel_routes(&f.routes, &q6), vec![(1024, nh(3))]);
        // A second metric: the lower wins, and both are kept aside.
        let a: IpAddr = "10.1.2.3".parse().unwrap();
        assert!(m
            .apply(&mut f, &KernelEvent::RouteSet(q, 5, nh(3)))
            .unwrap());
        assert_eq!(f.routes.lookup(a), Some(nh(3)));
        assert_eq!(m.others.len(), 1);
        // The higher metric's next hop changes: the forwarder does not, the mirror remembers.
        assert!(!m
            .apply(&mut f, &KernelEvent::RouteSet(q, 50, nh(4)))
            .unwrap());
        assert_eq!(f.routes.lookup(a), Some(nh(3)));
        // Deleting the lower metric reveals it, and the table alone tells the prefix again.
        assert!(m.apply(&mut f, &KernelEvent::RouteDel(q, 5)).unwrap());
        assert_eq!(f.routes.lookup(a), Some(nh(4)));
        assert!(m.others.is_empty());
        assert_eq!(m.kernel_routes(&f.routes, &q), vec![(50, nh(4))]);
        assert!(m
            .apply(&mut f, &KernelEvent::RouteSet(q, 50, nh(2)))
            .unwrap());
        assert!(!m.apply(&mut f, &KernelEvent::RouteDel(q, 7)).unwrap());
        assert_eq!(
            f.routes.lookup(a),
            Some(nh(2)),
            "an unknown metric removes nothing"
        );
        assert!(m.apply(&mut f, &KernelEvent::RouteDel(q, 50)).unwrap());
        assert_eq!(f.routes.lookup(a), None);
        assert_eq!((m.others.len(), f.routes.len()), (0, 1));
    }

    #[test]
    fn a_redump_diffs_every_metric_of_a_prefix() {
        let mut m = KernelMirror::new(&one_family_spec());
        let mut f = Forwarder::new();
        let (q, gone) = (p("10.8.0.0/16"), p("10.9.0.0/16"));
        let a: IpAddr = "10.8.0.1".parse().unwrap();
        let mut view = KernelView::default();
        view.routes.set(q, 10, nh(2));
        view.routes.set(q, 20, nh(3));
        view.routes.set(gone, 0, nh(2));
        assert_eq!(
            m.sync_all(&mut f, view),
            4,
            "two routes, the interfaces and the multipath hash"
        );
        assert_eq!(f.routes.lookup(a), Some(nh(2)));
        // The re-dump after an overrun: the higher metric moved, a prefix is gone.
        let mut view = KernelView::default();
        view.routes.set(q, 10, nh(2));
        view.routes.set(q, 20, nh(4));
        assert_eq!(
            m.sync_all(&mut f, view),
            1,
            "only the gone prefix changes the forwarder"
        );
        assert_eq!(f.routes.lookup("10.9.0.1".parse().unwrap()), None);
        let mut k = m.kernel_routes(&f.routes, &q);
        k.sort_by_key(|r| r.0);
        assert_eq!(k, vec![(10, nh(2)), (20, nh(4))]);
        // The lower metric gone in the next dump: the dumped higher one takes over.
        let mut view = KernelView::default();
        view.routes.set(q, 20, nh(4));
        assert_eq!(m.sync_all(&mut f, view), 1);
        assert_eq!(f.routes.lookup(a), Some(nh(4)));
        assert!(m.others.is_empty());
        assert_eq!(m.sync_all(&mut f, KernelView::default()), 1);
        assert!(f.routes.is_empty());
        assert!(m.others.is_empty());
    }

    #[test]
    fn metrics_beyond_the_tags_are_kept_aside() {
        let mut m = KernelMirror::new(&one_family_spec());
        let mut f = Forwarder::new();
        let n = usize::from(MAX_TAG) + 3;
        let q = |i: usize| p(&format!("10.{}.{}.0/24", i / 256, i % 256));
        let mut view = KernelView::default();
        for i in 0..n {
            view.routes.set(q(i), i as u32, nh(2));
        }
        m.sync_all(&mut f, view);
        assert_eq!(f.routes.len(), n);
        assert_eq!(m.others.len(), 3, "three metrics got no tag");
        for i in 0..n {
            assert_eq!(m.kernel_routes(&f.routes, &q(i)), vec![(i as u32, nh(2))]);
        }
        // Which metrics got a tag depends on the dump's order: count those that did not.
        let mut aside = 3;
        for i in [0, n - 1] {
            let untagged = m.others.contains_key(&q(i));
            m.apply(&mut f, &KernelEvent::RouteDel(q(i), i as u32 + 1))
                .unwrap();
            assert!(f.routes.contains(q(i)), "another metric: nothing to delete");
            assert_eq!(m.others.contains_key(&q(i)), untagged);
            m.apply(&mut f, &KernelEvent::RouteDel(q(i), i as u32))
                .unwrap();
            assert!(!f.routes.contains(q(i)));
            aside -= usize::from(untagged);
        }
        assert_eq!((f.routes.len(), m.others.len()), (n - 2, aside));
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
            event_buffer: 0,
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
        // two routes, and the (empty) interface set and the multipath hash the first time
        assert_eq!(m.sync_all(&mut f, view.clone()), 4);
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
        m.apply_live(&f, |m, t, small| m.resync(t, view.clone(), small));
        let cur = f.load();
        assert_eq!(cur.routes.len(), 2, "the limit holds");
        assert_eq!(m.others.len(), 1, "the route left out is remembered aside");
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
        m.apply_live(&f, |m, t, small| {
            (events.iter())
                .map(|e| usize::from(m.event(t, e, small).unwrap()))
                .sum()
        });
        let cur = f.load();
        assert_eq!(cur.routes.len(), 2);
        assert!(!cur.routes_incomplete);
        for s in ["10.2.0.1", "10.3.0.1"] {
            assert!(cur.routes.lookup(s.parse().unwrap()).is_some(), "{s}");
        }
        assert!(m.others.is_empty(), "once in, the table tells it");
        for s in ["10.2.0.0/16", "10.3.0.0/16"] {
            assert_eq!(m.kernel_routes(&cur.routes, &p(s)), vec![(0, nh(2))]);
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
