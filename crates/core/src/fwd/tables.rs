//! Routes, neighbours and interfaces: the state the forwarder reads per packet.

use core::fmt;
use core::net::IpAddr;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::hash::FxBuild;
use super::lpm::{Lpm4, LpmError, LpmMemory, Reader, Readers, MAX_VALUE, V4_STRIDES};
use super::poptrie::Poptrie as Lpm6;
use crate::classify::IpPrefix;
use crate::wire::{IpVersion, Mac};

mod listing;
pub use listing::{RouteFilter, RouteKey, RouteSummary};

/// Where a route sends packets: an interface and, unless the destination is on-link, a gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// Egress interface index.
    pub ifindex: u32,
    /// Gateway address; `None` for a connected (on-link) route.
    pub gateway: Option<IpAddr>,
}

/// What a route does with the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// Forward to the next hop.
    Unicast,
    /// `blackhole`: drop silently.
    Blackhole,
    /// `unreachable`: drop, answer ICMP host unreachable.
    Unreachable,
    /// `prohibit`: drop, answer ICMP administratively prohibited.
    Prohibit,
    /// The kernel's business (a route through an interface llrouter does not serve, a `nat`
    /// or `local` route in the main table, ...): the packet is handed to the kernel.
    Kernel,
    /// `throw`: the table has no route here; policy routing goes on with the next rule (with
    /// no rule left, no route).
    Throw,
    /// Equal-cost (or weighted) multipath: one of a group's next hops, chosen per flow
    /// ([`RouteTable::group`], [`Multipath`]).
    Group,
}

impl NextHop {
    // Kernel interface indices are positive `int`s, so the top of the u32 range is free for
    // the route kinds that have no interface; 0 (no interface) means the kernel's.
    const BLACKHOLE: u32 = u32::MAX;
    const UNREACHABLE: u32 = u32::MAX - 1;
    const PROHIBIT: u32 = u32::MAX - 2;
    const THROW: u32 = u32::MAX - 3;
    /// Next hops from here up to the kinds above name a multipath group (its id added).
    const GROUP_BASE: u32 = 0xf000_0000;
    /// Most multipath groups a table interns.
    pub const MAX_GROUPS: u32 = 1 << 16;

    /// The next hop that stands for multipath group `id` (< [`NextHop::MAX_GROUPS`]).
    pub const fn group(id: u32) -> NextHop {
        NextHop {
            ifindex: Self::GROUP_BASE + id,
            gateway: None,
        }
    }

    /// The group id of a [`RouteKind::Group`] next hop.
    #[inline]
    pub fn group_id(&self) -> Option<u32> {
        (self.kind() == RouteKind::Group).then(|| self.ifindex - Self::GROUP_BASE)
    }

    /// The next hop of a route of `kind` that has no interface (any kind but `Unicast`).
    pub const fn special(kind: RouteKind) -> NextHop {
        let ifindex = match kind {
            RouteKind::Blackhole => Self::BLACKHOLE,
            RouteKind::Unreachable => Self::UNREACHABLE,
            RouteKind::Prohibit => Self::PROHIBIT,
            RouteKind::Throw => Self::THROW,
            RouteKind::Kernel | RouteKind::Unicast | RouteKind::Group => 0,
        };
        NextHop {
            ifindex,
            gateway: None,
        }
    }

    /// What the route does; `Unicast` routes whose interface the router does not serve are
    /// the caller's to recognise.
    #[inline]
    pub fn kind(&self) -> RouteKind {
        match self.ifindex {
            0 => RouteKind::Kernel,
            Self::BLACKHOLE => RouteKind::Blackhole,
            Self::UNREACHABLE => RouteKind::Unreachable,
            Self::PROHIBIT => RouteKind::Prohibit,
            Self::THROW => RouteKind::Throw,
            i if (Self::GROUP_BASE..Self::GROUP_BASE + Self::MAX_GROUPS).contains(&i) => {
                RouteKind::Group
            }
            _ => RouteKind::Unicast,
        }
    }
}

/// A route table update that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// More distinct next hops than an entry's value can index.
    TooManyNextHops,
    /// The table refused the prefix (a level ran out of groups).
    Table(LpmError),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::TooManyNextHops => write!(f, "more than {MAX_VALUE} distinct next hops"),
            RouteError::Table(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RouteError {}

/// Interned next hops, readable without a lock: written once before the id that names them is
/// published in a table entry (`Release`), never changed, never moved.
struct NextHops {
    /// Three words per next hop: ifindex | family << 32, then the gateway's high and low halves.
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
    ids: Mutex<HashMap<NextHop, u32>>,
}

const NH_CHUNK_LOG: u32 = 12;

impl Default for NextHops {
    fn default() -> Self {
        NextHops {
            chunks: (0..=(MAX_VALUE >> NH_CHUNK_LOG))
                .map(|_| OnceLock::new())
                .collect(),
            ids: Mutex::default(),
        }
    }
}

impl NextHops {
    fn intern(&self, nh: NextHop) -> Result<u32, RouteError> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = ids.get(&nh) {
            return Ok(id);
        }
        let id = u32::try_from(ids.len())
            .ok()
            .filter(|&i| i <= MAX_VALUE)
            .ok_or(RouteError::TooManyNextHops)?;
        let Some(chunk) = self.chunks.get((id >> NH_CHUNK_LOG) as usize) else {
            return Err(RouteError::TooManyNextHops);
        };
        let chunk = chunk.get_or_init(|| bytemuck::zeroed_slice_box(3 << NH_CHUNK_LOG));
        let at = ((id & ((1 << NH_CHUNK_LOG) - 1)) * 3) as usize;
        let (fam, gw) = match nh.gateway {
            None => (0u64, 0u128),
            Some(IpAddr::V4(a)) => (4, u128::from(u32::from(a))),
            Some(IpAddr::V6(a)) => (6, u128::from(a)),
        };
        chunk[at].store(u64::from(nh.ifindex) | fam << 32, Ordering::Relaxed);
        chunk[at + 1].store((gw >> 64) as u64, Ordering::Relaxed);
        chunk[at + 2].store(gw as u64, Ordering::Relaxed);
        ids.insert(nh, id);
        Ok(id)
    }

    #[inline(always)]
    fn get(&self, id: u32) -> Option<NextHop> {
        let chunk = self.chunks.get((id >> NH_CHUNK_LOG) as usize)?.get()?;
        let at = ((id & ((1 << NH_CHUNK_LOG) - 1)) * 3) as usize;
        let w0 = chunk.get(at)?.load(Ordering::Relaxed);
        let gateway = match w0 >> 32 {
            0 => None,
            fam => {
                let hi = chunk.get(at + 1)?.load(Ordering::Relaxed);
                let lo = chunk.get(at + 2)?.load(Ordering::Relaxed);
                let gw = u128::from(hi) << 64 | u128::from(lo);
                Some(if fam == 4 {
                    IpAddr::V4((gw as u32).into())
                } else {
                    IpAddr::V6(gw.into())
                })
            }
        };
        Some(NextHop {
            ifindex: w0 as u32,
            gateway,
        })
    }

    fn len(&self) -> usize {
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn bytes(&self) -> usize {
        let chunks = self.chunks.iter().filter(|c| c.get().is_some()).count();
        let map = self
            .ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .capacity();
        chunks * (24 << NH_CHUNK_LOG) + map * (core::mem::size_of::<(NextHop, u32)>() + 1)
    }
}

/// One next hop of a multipath group, with the top of its share of the 31-bit hash space
/// (Linux's hash-threshold selection, RFC 2992: a flow takes the first member whose bound is
/// not below its hash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// The next hop.
    pub next_hop: NextHop,
    /// Its weight (1..=256, as `ip route … nexthop … weight W`).
    pub weight: u16,
    upper: u32,
}

/// Interned multipath groups, readable without a lock: written once before the id that names
/// them is published in a route, never changed, never moved (as [`NextHops`]).
struct Groups {
    chunks: Box<[OnceLock<GroupChunk>]>,
    ids: Mutex<HashMap<GroupKey, u32>>,
}

/// A group as interned: its members (next hop, weight) in a fixed order, and resilient or not.
type GroupKey = (Vec<(NextHop, u16)>, bool);

const GROUP_CHUNK_LOG: u32 = 8;

/// A group's members, and whether it is resilient ([`RouteTable::resilient_group_of`]).
struct Group {
    members: Box<[Member]>,
    resilient: bool,
}

/// 2^GROUP_CHUNK_LOG groups, each set once.
type GroupChunk = Box<[OnceLock<Group>]>;

impl Default for Groups {
    fn default() -> Self {
        Groups {
            chunks: (0..NextHop::MAX_GROUPS >> GROUP_CHUNK_LOG)
                .map(|_| OnceLock::new())
                .collect(),
            ids: Mutex::default(),
        }
    }
}

impl Groups {
    fn intern(&self, members: &[(NextHop, u16)], resilient: bool) -> Result<NextHop, RouteError> {
        let mut key: Vec<(NextHop, u16)> = members.iter().map(|&(n, w)| (n, w.max(1))).collect();
        key.sort_by_key(|(n, _)| (n.ifindex, n.gateway));
        let key = (key, resilient);
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = ids.get(&key) {
            return Ok(NextHop::group(id));
        }
        let id = u32::try_from(ids.len())
            .ok()
            .filter(|&i| i < NextHop::MAX_GROUPS)
            .ok_or(RouteError::TooManyNextHops)?;
        let total: u64 = key.0.iter().map(|m| u64::from(m.1)).sum();
        let mut sum = 0u64;
        // Linux's fib_rebalance: each member's bound is its cumulative weight's share of 2^31,
        // less one.
        let group: Box<[Member]> = (key.0.iter())
            .map(|&(next_hop, weight)| {
                sum += u64::from(weight);
                let upper = ((sum << 31).div_ceil(total.max(1))) as u32 - 1;
                Member {
                    next_hop,
                    weight,
                    upper,
                }
            })
            .collect();
        let chunk = self.chunks[(id >> GROUP_CHUNK_LOG) as usize]
            .get_or_init(|| (0..1 << GROUP_CHUNK_LOG).map(|_| OnceLock::new()).collect());
        let group = Group {
            members: group,
            resilient,
        };
        let _ = chunk[(id & ((1 << GROUP_CHUNK_LOG) - 1)) as usize].set(group);
        ids.insert(key, id);
        Ok(NextHop::group(id))
    }

    #[inline]
    fn get(&self, id: u32) -> Option<&Group> {
        let chunk = self.chunks.get((id >> GROUP_CHUNK_LOG) as usize)?.get()?;
        chunk
            .get((id & ((1 << GROUP_CHUNK_LOG) - 1)) as usize)?
            .get()
    }
}

/// The member of a resilient group a flow of hash `hash` takes: weighted rendezvous hashing
/// (highest random weight). Each member scores the flow by a hash of the flow and the member's
/// own identity, scaled by its weight; the lowest `-ln(u) / weight` wins. A member's score
/// does not depend on the others, so removing one moves only the flows it carried and adding
/// one takes flows only onto it: what Linux's resilient groups (`ip nexthop … type
/// resilient`) promise with their bucket table, without one to keep.
fn rendezvous(members: &[Member], hash: u32) -> Option<&Member> {
    members
        .iter()
        .map(|m| {
            let gw = match m.next_hop.gateway {
                Some(IpAddr::V4(a)) => u128::from(u32::from(a)),
                Some(IpAddr::V6(a)) => u128::from(a),
                None => 0,
            };
            let id = (gw as u64) ^ ((gw >> 64) as u64) ^ (u64::from(m.next_hop.ifindex) << 40);
            let h = splitmix(id ^ u64::from(hash).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            // u in (0, 1]: 53 random bits, never 0.
            let u = ((h >> 11) + 1) as f64 / (1u64 << 53) as f64;
            (-u.ln() / f64::from(m.weight.max(1)), m)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, m)| m)
}

/// SplitMix64's finaliser: a well-mixed 64-bit value of `x`.
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// How a multipath route spreads flows: which fields of a packet its hash covers (the kernel's
/// `fib_multipath_hash_policy` per family) and the hash's seed (random per router, so that
/// routers in a row do not all split the same way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Multipath {
    /// IPv4: 0 addresses, 1 addresses, protocol and ports, 2 the inner packet's addresses
    /// (taken as 0: llrouter does not look into tunnels), 3 custom fields (taken as 1).
    pub policy_v4: u8,
    /// IPv6: as IPv4; policy 0 hashes the flow label and next header too.
    pub policy_v6: u8,
    /// Mixed into every hash.
    pub seed: u64,
}

impl Multipath {
    /// The 31-bit hash of a flow: `src`, `dst` (IPv4 in the low 32 bits), protocol, ports and
    /// IPv6 flow label, of which the family's policy takes its fields.
    #[inline]
    pub fn hash(
        &self,
        v6: bool,
        src: u128,
        dst: u128,
        proto: u8,
        ports: (u16, u16),
        label: u32,
    ) -> u32 {
        let policy = if v6 { self.policy_v6 } else { self.policy_v4 };
        let l4 = matches!(policy, 1 | 3);
        let mut h = self.seed ^ 0x9e37_79b9_7f4a_7c15;
        let mut mix = |x: u64| {
            h = (h ^ x).wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 32;
        };
        mix(src as u64);
        mix((src >> 64) as u64);
        mix(dst as u64);
        mix((dst >> 64) as u64);
        if l4 {
            mix(u64::from(proto) << 32 | u64::from(ports.0) << 16 | u64::from(ports.1));
        } else if v6 {
            mix(u64::from(proto) << 32 | u64::from(label & 0xf_ffff));
        }
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        ((h ^ (h >> 29)) >> 33) as u32
    }
}

/// Memory held by a [`RouteTable`], by structure (see [`RouteTable::memory`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteMemory {
    /// IPv4 (DIR-24-8).
    pub v4: LpmMemory,
    /// IPv6.
    pub v6: LpmMemory,
    /// Interned next hops and their index.
    pub nexthops: usize,
}

impl RouteMemory {
    /// `(structure, bytes)`, as the metrics name them.
    pub fn parts(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("v4_tbl24", self.v4.first_level),
            ("v4_tbl8", self.v4.groups),
            ("v4_prefixes", self.v4.shadow),
            ("v6_first_level", self.v6.first_level),
            ("v6_groups", self.v6.groups),
            ("v6_prefixes", self.v6.shadow),
            ("nexthops", self.nexthops),
        ]
    }

    /// All of it.
    pub fn total(&self) -> usize {
        let f = |m: &LpmMemory| m.first_level + m.groups + m.shadow;
        f(&self.v4) + f(&self.v6) + self.nexthops
    }
}

/// IPv4 (DIR-24-8) and IPv6 routes to interned next hops.
///
/// Lookups take no lock and never wait for an update; updates (`&self`) serialise among
/// themselves. Next hops are stored once and referenced by id; ids are not reclaimed when their
/// last route goes, which bounds memory by the number of distinct next hops ever seen.
pub struct RouteTable {
    v4: Lpm4,
    v6: Lpm6,
    nexthops: NextHops,
    groups: Groups,
    readers: Arc<Readers>,
    count: AtomicUsize,
}

impl Default for RouteTable {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RouteTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteTable")
            .field("v4", &self.v4)
            .field("v6", &self.v6)
            .field("nexthops", &self.nexthops.len())
            .finish()
    }
}

impl RouteTable {
    /// An empty table (the IPv4 first level is 64 MiB of zero pages, committed as routes land).
    pub fn new() -> Self {
        let readers = Arc::<Readers>::default();
        RouteTable {
            v4: Lpm4::with_strides(V4_STRIDES, readers.clone()),
            v6: Lpm6::new(readers.clone()),
            nexthops: NextHops::default(),
            groups: Groups::default(),
            readers,
            count: AtomicUsize::new(0),
        }
    }

    /// Registers a reader (a worker): see [`Reader`]. Threads that only look up now and then
    /// (operator views) register for the duration of their lookups.
    pub fn reader(&self) -> Reader {
        self.readers.register()
    }

    /// True if `r` was registered with this table.
    pub fn is_reader(&self, r: &Reader) -> bool {
        r.belongs_to(&self.readers)
    }

    /// Installs or replaces the route for `prefix` (with tag 0); returns the previous next hop.
    pub fn insert(&self, prefix: IpPrefix, nh: NextHop) -> Result<Option<NextHop>, RouteError> {
        self.insert_tagged(prefix, nh, 0)
    }

    /// Installs or replaces the route for `prefix`, keeping `tag` (≤ [`MAX_TAG`](super::MAX_TAG)) beside
    /// it: spare bits of the table's own record of the prefix, so whoever writes the table can
    /// keep a little of its own state per route without a map of its own (the route mirror
    /// keeps which metric the kernel gave the route). Replacing a route by the same next hop
    /// only changes the tag. Returns the previous next hop.
    pub fn insert_tagged(
        &self,
        prefix: IpPrefix,
        nh: NextHop,
        tag: u16,
    ) -> Result<Option<NextHop>, RouteError> {
        let id = self.nexthops.intern(nh)?;
        let old = match prefix.addr() {
            IpAddr::V4(a) => self.v4.insert_tagged(u32::from(a), prefix.len(), id, tag),
            IpAddr::V6(a) => self.v6.insert_tagged(u128::from(a), prefix.len(), id, tag),
        }
        .map_err(RouteError::Table)?;
        if old.is_none() {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        Ok(old.and_then(|id| self.nexthops.get(id)))
    }

    /// The next hop that stands for a multipath group of `members` (next hop, weight ≥ 1),
    /// interned once: routes installed with it spread flows over the members by weight. The
    /// group stays for the table's life (bounded by the distinct groups ever seen).
    pub fn group_of(&self, members: &[(NextHop, u16)]) -> Result<NextHop, RouteError> {
        self.groups.intern(members, false)
    }

    /// [`group_of`](Self::group_of) for a resilient group (the kernel's `type resilient`
    /// nexthop groups): a flow keeps its member while that member stays, whatever else comes
    /// or goes ([`rendezvous`]), where hash-threshold moves flows between the members that
    /// stay.
    pub fn resilient_group_of(&self, members: &[(NextHop, u16)]) -> Result<NextHop, RouteError> {
        self.groups.intern(members, true)
    }

    /// The members of multipath group `id` ([`NextHop::group_id`]).
    #[inline]
    pub fn group(&self, id: u32) -> Option<&[Member]> {
        self.groups.get(id).map(|g| &g.members[..])
    }

    /// Whether group `id` is resilient.
    pub fn is_resilient(&self, id: u32) -> bool {
        self.groups.get(id).is_some_and(|g| g.resilient)
    }

    /// The member of group `id` a flow of 31-bit hash `hash` takes.
    #[inline]
    pub fn pick(&self, id: u32, hash: u32) -> Option<NextHop> {
        let g = self.groups.get(id)?;
        if g.resilient {
            return rendezvous(&g.members, hash).map(|m| m.next_hop);
        }
        (g.members.iter())
            .find(|m| hash <= m.upper)
            .or(g.members.last())
            .map(|m| m.next_hop)
    }

    /// Removes the route for exactly `prefix`.
    pub fn remove(&self, prefix: IpPrefix) -> Option<NextHop> {
        let old = match prefix.addr() {
            IpAddr::V4(a) => self.v4.remove(u32::from(a), prefix.len()),
            IpAddr::V6(a) => self.v6.remove(u128::from(a), prefix.len()),
        }?;
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.nexthops.get(old)
    }

    /// True if there is a route for exactly `prefix`.
    pub fn contains(&self, prefix: IpPrefix) -> bool {
        match prefix.addr() {
            IpAddr::V4(a) => self.v4.get(u32::from(a), prefix.len()).is_some(),
            IpAddr::V6(a) => self.v6.get(u128::from(a), prefix.len()).is_some(),
        }
    }

    /// The route for exactly `prefix` (not a longest-prefix match) and its tag, from the
    /// writers' side (takes the writers' lock: not for the packet path).
    pub fn get(&self, prefix: IpPrefix) -> Option<(NextHop, u16)> {
        let (id, tag) = match prefix.addr() {
            IpAddr::V4(a) => self.v4.get_tagged(u32::from(a), prefix.len()),
            IpAddr::V6(a) => self.v6.get_tagged(u128::from(a), prefix.len()),
        }?;
        Some((self.nexthops.get(id)?, tag))
    }

    /// Longest-prefix match for an IPv4 address (host order).
    #[inline]
    pub fn lookup_v4(&self, addr: u32) -> Option<NextHop> {
        self.nexthops.get(self.v4.lookup(addr)?)
    }

    /// [`lookup_v4`](Self::lookup_v4) with the matching prefix's length.
    #[inline]
    pub fn lookup_v4_len(&self, addr: u32) -> Option<(NextHop, u8)> {
        let (id, len) = self.v4.lookup_len(addr)?;
        Some((self.nexthops.get(id)?, len))
    }

    /// [`lookup_v6`](Self::lookup_v6) with the matching prefix's length.
    #[inline]
    pub fn lookup_v6_len(&self, addr: u128) -> Option<(NextHop, u8)> {
        let (id, len) = self.v6.lookup_len(addr)?;
        Some((self.nexthops.get(id)?, len))
    }

    /// [`lookup_v4`](Self::lookup_v4) of many addresses, `out[i]` for `addrs[i]` (as many as
    /// the shorter holds), with their cache misses overlapping.
    pub fn lookup_v4_many(&self, addrs: &[u32], out: &mut [Option<NextHop>]) {
        self.next_hops_many(addrs, out, |a, ids| self.v4.lookup_many(a, ids));
    }

    /// The next hops of a batched lookup: `ids_of` fills route ids for up to 64 addresses.
    fn next_hops_many<A>(
        &self,
        addrs: &[A],
        out: &mut [Option<NextHop>],
        ids_of: impl Fn(&[A], &mut [Option<u32>]),
    ) {
        let mut ids = [None; 64];
        for (addrs, out) in addrs.chunks(ids.len()).zip(out.chunks_mut(ids.len())) {
            ids_of(addrs, &mut ids);
            for (o, id) in out.iter_mut().zip(&ids) {
                *o = id.and_then(|id| self.nexthops.get(id));
            }
        }
    }

    /// Longest-prefix match for an IPv6 address (host order).
    #[inline]
    pub fn lookup_v6(&self, addr: u128) -> Option<NextHop> {
        self.nexthops.get(self.v6.lookup(addr)?)
    }

    /// [`lookup_v6`](Self::lookup_v6) of many addresses, `out[i]` for `addrs[i]` (as many as
    /// the shorter holds), going down the trie together so that their cache misses overlap.
    pub fn lookup_v6_many(&self, addrs: &[u128], out: &mut [Option<NextHop>]) {
        self.next_hops_many(addrs, out, |a, ids| self.v6.lookup_many(a, ids));
    }

    /// Longest-prefix match for any address.
    pub fn lookup(&self, addr: IpAddr) -> Option<NextHop> {
        match addr {
            IpAddr::V4(a) => self.lookup_v4(u32::from(a)),
            IpAddr::V6(a) => self.lookup_v6(u128::from(a)),
        }
    }

    /// Every route (IPv4 first, then IPv6; unordered within a family), for operator views: a
    /// copy taken under the writers' lock.
    pub fn iter(&self) -> impl Iterator<Item = (IpPrefix, NextHop)> + '_ {
        let v4 = self
            .v4
            .to_vec()
            .into_iter()
            .map(|(net, len, id)| (IpAddr::V4(net.into()), len, id));
        let v6 = self
            .v6
            .to_vec()
            .into_iter()
            .map(|(net, len, id)| (IpAddr::V6(net.into()), len, id));
        v4.chain(v6)
            .filter_map(|(a, len, id)| Some((IpPrefix::new(a, len).ok()?, self.nexthops.get(id)?)))
    }

    /// Number of IPv4 and IPv6 routes.
    pub fn len_by_family(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }

    /// Number of routes (both families).
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// True if there are no routes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Memory by structure (scans the tables: for reports, not the hot path).
    pub fn memory(&self) -> RouteMemory {
        RouteMemory {
            v4: self.v4.memory(),
            v6: self.v6.memory(),
            nexthops: self.nexthops.bytes(),
        }
    }
}

/// Neighbour (ARP / ND) cache: (interface, address) → MAC.
///
/// Keyed by interface as well as address because link-local IPv6 gateways (fe80::1) repeat on
/// every link.
#[derive(Debug, Clone, Default)]
pub struct Neighbors {
    map: HashMap<(u32, u128), Mac, FxBuild>,
}

fn key(a: IpAddr) -> u128 {
    // IPv4 as the IPv4-mapped IPv6 address, so both families share one key type.
    match a {
        IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
        IpAddr::V6(a) => u128::from(a),
    }
}

impl Neighbors {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the MAC of `addr` on `ifindex`; returns the previous one.
    pub fn insert(&mut self, ifindex: u32, addr: IpAddr, mac: Mac) -> Option<Mac> {
        self.map.insert((ifindex, key(addr)), mac)
    }

    /// Forgets `addr` on `ifindex`.
    pub fn remove(&mut self, ifindex: u32, addr: IpAddr) -> Option<Mac> {
        self.map.remove(&(ifindex, key(addr)))
    }

    /// The MAC of `addr` on `ifindex`.
    #[inline]
    pub fn get(&self, ifindex: u32, addr: IpAddr) -> Option<Mac> {
        self.map.get(&(ifindex, key(addr))).copied()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every entry as `(ifindex, address, MAC)`, for operator views. IPv4-mapped IPv6 keys come
    /// back as IPv4 (that is how IPv4 entries are stored).
    pub fn iter(&self) -> impl Iterator<Item = (u32, IpAddr, Mac)> + '_ {
        self.map.iter().map(|(&(i, k), &mac)| {
            let a = core::net::Ipv6Addr::from(k);
            let addr = match a.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(a),
            };
            (i, addr, mac)
        })
    }
}

/// One of the router's interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Kernel interface index.
    pub ifindex: u32,
    /// Its MAC address (source of forwarded frames, and the only unicast MAC accepted).
    pub mac: Mac,
    /// IP MTU in bytes.
    pub mtu: u32,
    /// Its addresses with prefix lengths.
    pub addrs: Vec<IpPrefixAddr>,
    /// Reverse-path filtering of IPv4 arriving on it: 0 off, 1 strict, 2 loose (the kernel's
    /// `rp_filter`, the larger of `all` and the interface's).
    pub rp_filter: u8,
    /// The routing table of the VRF (l3mdev) the interface is enslaved to, if any: policy
    /// routing's `l3mdev` rule looks up packets arriving on it there.
    pub vrf_table: Option<u32>,
    /// The kernel's `send_redirects` for IPv4 (`all` or the interface's): a packet routed back
    /// out of the interface it came in on, from a host on that link, earns its sender an ICMP
    /// redirect to the better next hop.
    pub send_redirects: bool,
}

/// An interface address with its subnet length (`10.0.0.1/24`: host bits kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPrefixAddr {
    /// The address.
    pub addr: IpAddr,
    /// The subnet prefix length.
    pub len: u8,
}

impl Interface {
    /// True if `a` (of version `v`, laid out as [`PacketMeta::src`](crate::wire::PacketMeta))
    /// lies in one of this interface's subnets (host routes, /32 and /128, are no subnet).
    pub fn on_link(&self, v: IpVersion, a: &[u8; 16]) -> bool {
        self.addrs.iter().any(|p| {
            p.len < if p.addr.is_ipv4() { 32 } else { 128 }
                && IpPrefix::containing(p.addr, p.len).contains_bytes(v, a)
        })
    }

    /// An interface without addresses.
    pub fn new(ifindex: u32, mac: Mac, mtu: u32) -> Self {
        Interface {
            ifindex,
            mac,
            mtu,
            addrs: Vec::new(),
            rp_filter: 0,
            vrf_table: None,
            send_redirects: false,
        }
    }
}

/// The subnet-router anycast address of `addr`/`len`: the prefix with the rest zero; none for
/// /127 and /128, as Linux's addrconf_join_anycast().
fn subnet_router_anycast(addr: core::net::Ipv6Addr, len: u8) -> Option<u128> {
    (len < 127).then(|| u128::from(addr) & !(u128::MAX.checked_shr(u32::from(len)).unwrap_or(0)))
}

/// The router's interfaces, with the local and broadcast addresses precomputed for the fast path.
#[derive(Debug, Clone, Default)]
pub struct Interfaces {
    list: Vec<Interface>,
    local4: Vec<u32>,
    bcast4: Vec<u32>,
    local6: Vec<u128>,
}

impl Interfaces {
    /// No interfaces.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces (by ifindex) an interface.
    pub fn upsert(&mut self, iface: Interface) {
        match self.list.iter_mut().find(|i| i.ifindex == iface.ifindex) {
            Some(slot) => *slot = iface,
            None => self.list.push(iface),
        }
        self.rebuild();
    }

    /// Removes an interface.
    pub fn remove(&mut self, ifindex: u32) -> Option<Interface> {
        let pos = self.list.iter().position(|i| i.ifindex == ifindex)?;
        let i = self.list.remove(pos);
        self.rebuild();
        Some(i)
    }

    /// Adds an address to an existing interface; false if the interface is unknown.
    pub fn add_addr(&mut self, ifindex: u32, addr: IpAddr, len: u8) -> bool {
        let Some(i) = self.list.iter_mut().find(|i| i.ifindex == ifindex) else {
            return false;
        };
        i.addrs.push(IpPrefixAddr { addr, len });
        self.rebuild();
        true
    }

    fn rebuild(&mut self) {
        self.local4.clear();
        self.bcast4.clear();
        self.local6.clear();
        for a in self.list.iter().flat_map(|i| &i.addrs) {
            match a.addr {
                IpAddr::V4(v) => {
                    let v = u32::from(v);
                    self.local4.push(v);
                    // /31 and /32 have no broadcast address (RFC 3021).
                    if a.len < 31 {
                        self.bcast4.push(v | !crate::classify::mask32(a.len));
                    }
                }
                IpAddr::V6(v) => {
                    self.local6.push(u128::from(v));
                    if let Some(a) = subnet_router_anycast(v, a.len) {
                        self.local6.push(a);
                    }
                }
            }
        }
        self.local6.sort_unstable();
        self.local6.dedup();
    }

    /// The router's own addresses: each interface's, and for IPv6 the subnet-router anycast
    /// address of each prefix (RFC 4291 section 2.6.1), which Linux joins on a forwarding
    /// interface: packets to them are the host's, not to be forwarded.
    pub fn local_addrs(&self) -> Vec<IpAddr> {
        let v4 = self.local4.iter().map(|&a| IpAddr::V4(a.into()));
        let v6 = self.local6.iter().map(|&a| IpAddr::V6(a.into()));
        v4.chain(v6).collect()
    }

    /// The interface with this index.
    #[inline]
    pub fn get(&self, ifindex: u32) -> Option<&Interface> {
        // A router has a handful of interfaces: a scan beats hashing.
        self.list.iter().find(|i| i.ifindex == ifindex)
    }

    /// All interfaces.
    pub fn iter(&self) -> impl Iterator<Item = &Interface> {
        self.list.iter()
    }

    /// The router's address to answer from on `ifindex` for `version`: the interface's first
    /// address of that family (for IPv6 a global one before a link-local one), else the first
    /// of any interface, as Linux picks the source of its ICMP errors.
    pub fn source_addr(&self, ifindex: u32, v6: bool) -> Option<IpAddr> {
        let fits = |a: &&IpPrefixAddr| a.addr.is_ipv6() == v6;
        let global = |a: &&IpPrefixAddr| match a.addr {
            IpAddr::V6(x) => x.segments()[0] & 0xffc0 != 0xfe80,
            IpAddr::V4(_) => true,
        };
        let on = self.get(ifindex).map(|i| i.addrs.as_slice()).unwrap_or(&[]);
        let all = self.list.iter().flat_map(|i| &i.addrs);
        on.iter()
            .filter(fits)
            .find(global)
            .or_else(|| all.clone().filter(fits).find(global))
            .or_else(|| on.iter().find(fits))
            .map(|a| a.addr)
    }

    /// True if `a` (host order) is one of the router's IPv4 addresses.
    #[inline]
    pub fn is_local_v4(&self, a: u32) -> bool {
        self.local4.contains(&a)
    }

    /// True if `a` is the directed broadcast address of a connected IPv4 subnet.
    #[inline]
    pub fn is_broadcast_v4(&self, a: u32) -> bool {
        self.bcast4.contains(&a)
    }

    /// True if `a` is one of the router's IPv6 addresses.
    #[inline]
    pub fn is_local_v6(&self, a: u128) -> bool {
        self.local6.contains(&a)
    }
}

#[cfg(test)]
mod dump_tests {
    use super::*;

    fn nh(i: u32) -> NextHop {
        NextHop {
            ifindex: i,
            gateway: None,
        }
    }

    #[test]
    fn get_is_exact_and_carries_the_tag() {
        let t = RouteTable::new();
        let p8: IpPrefix = "10.0.0.0/8".parse().unwrap();
        let p16: IpPrefix = "10.1.0.0/16".parse().unwrap();
        let p6: IpPrefix = "2001:db8::/48".parse().unwrap();
        t.insert_tagged(p8, nh(2), 5).unwrap();
        t.insert_tagged(p6, nh(3), super::super::MAX_TAG).unwrap();
        assert_eq!(t.get(p8), Some((nh(2), 5)));
        assert_eq!(t.get(p16), None, "an exact match, not the covering /8");
        assert_eq!(t.lookup("10.1.2.3".parse().unwrap()), Some(nh(2)));
        assert_eq!(t.get(p6), Some((nh(3), super::super::MAX_TAG)));
        // A new tag alone is a replacement that changes nothing the workers read.
        assert_eq!(t.insert_tagged(p8, nh(2), 6), Ok(Some(nh(2))));
        assert_eq!((t.get(p8), t.len()), (Some((nh(2), 6)), 2));
        assert_eq!(t.insert(p8, nh(4)), Ok(Some(nh(2))));
        assert_eq!(t.get(p8), Some((nh(4), 0)));
        assert_eq!(
            t.insert_tagged(p16, nh(2), super::super::MAX_TAG + 1),
            Err(RouteError::Table(LpmError::TagTooLarge))
        );
        assert_eq!(
            (t.get(p16), t.len()),
            (None, 2),
            "a refused route is not counted"
        );
        assert_eq!(t.remove(p8), Some(nh(4)));
        assert_eq!(t.get(p8), None);
    }

    #[test]
    fn routes_and_neighbours_iterate_as_inserted() {
        let t = RouteTable::new();
        let p4 = IpPrefix::new("10.1.0.0".parse().unwrap(), 16).unwrap();
        let p6 = IpPrefix::new("fd00::".parse().unwrap(), 64).unwrap();
        let nh = NextHop {
            ifindex: 3,
            gateway: Some("10.0.0.1".parse().unwrap()),
        };
        t.insert(p4, nh).unwrap();
        t.insert(
            p6,
            NextHop {
                ifindex: 4,
                gateway: None,
            },
        )
        .unwrap();
        let mut all: Vec<(IpPrefix, NextHop)> = t.iter().collect();
        all.sort_by_key(|(p, _)| p.len());
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], (p4, nh));
        assert_eq!(all[1].0, p6);
        assert_eq!(t.get(p4), Some((nh, 0)));
        let mut n = Neighbors::new();
        n.insert(3, "10.0.0.1".parse().unwrap(), [2, 0, 0, 0, 0, 1]);
        n.insert(4, "fe80::1".parse().unwrap(), [2, 0, 0, 0, 0, 2]);
        let mut v: Vec<_> = n.iter().collect();
        v.sort_by_key(|e| e.0);
        assert_eq!(v[0], (3, "10.0.0.1".parse().unwrap(), [2, 0, 0, 0, 0, 1]));
        assert_eq!(v[1].1, "fe80::1".parse::<IpAddr>().unwrap());
    }
}
