//! IPv6 longest-prefix match in a Poptrie (Asai and Ohara, "Poptrie: A Compressed Trie with
//! Population Count for Fast and Scalable Software IP Routing Table Lookup", SIGCOMM 2015).
//!
//! Layout, by prefix length:
//! - 25..=128: nodes of stride 6 starting at bits 24, 30, …, 126 (the last one's stride ends at
//!   128). A node is 24 bytes: a 64-bit `vector` marking which children are nodes, a 64-bit
//!   `leafvec` marking where a run of equal leaves starts among the other children, and the
//!   indices of its contiguous child-node array and leaf array. A child is found with one
//!   `popcnt`, so a node costs one cache line however sparse it is. Leaves are pushed: each holds
//!   the longest prefix longer than 24 covering its range, or 0. A /32 is two nodes and a leaf, a
//!   /48 four.
//! - A direct table indexed by the top 24 bits. Each entry is a `u64`: the low word is the root
//!   node of the region's trie (index + 1, 0 for none), the high word the region's longest prefix
//!   of length 17..=24. The table is 128 MiB of zeroed memory of which the kernel commits only
//!   the pages written: a full table's /24s sit in a few /12s.
//! - 0..=16: a table indexed by the top 16 bits, read only when the rest found nothing. A default
//!   route is 2^16 words there, not a write into every direct entry or node.
//!
//! Why our own: the Poptrie crates on crates.io (`poptrie`, `treebitmap`) rebuild on update or
//! take a lock against readers; the router needs lookups that never wait for the route mirror.
//!
//! Updates (one writer at a time, any number of readers): nothing a reader can reach is written
//! in place. An update rebuilds the node whose stride holds the prefix's end (with its subtree,
//! whose pushed leaves the prefix may change) into fresh arrays, copies the arrays on the path
//! above it, and publishes the new root with one atomic store of the direct entry. The old
//! arrays are reused once every registered [`Reader`](super::lpm::Reader) has passed a quiescent
//! point, as for the IPv4 table's groups. The writer keeps every prefix per length (the same
//! records as the IPv4 table) and, per node region, how many prefixes lie below it, which of its
//! children hold some, and the prefixes that end in its stride: a node is built from those alone.

use core::fmt;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::hash::FxBuild;
use super::lpm::{
    bits, depth_of, is_valid, leaf, mask, pages_in_use, zeroed_hot, LpmError, LpmMemory, Readers,
    Shadow, MAX_TAG, MAX_VALUE, TAG_SHIFT, VALID, VALUE_MASK,
};

/// Bits resolved by the direct table.
pub const DIRECT_BITS: u8 = 24;
/// Bits resolved by the short-prefix table.
const SHORT_BITS: u8 = 16;
const STRIDE: u8 = 6;
/// Node levels: nodes start at bits 24, 30, …, 126.
const LEVELS: usize = 18;
/// Capacity of the node and leaf arrays: zeroed memory reserved once and committed by the
/// kernel only where written (a full table of 230 k prefixes uses a few per cent of each).
const NODE_CAP: u32 = 1 << 22;
const LEAF_CAP: u32 = 1 << 23;
/// Room inserts leave free: a removal also builds its new nodes before it frees the old ones.
const NODE_RESERVE: u32 = NODE_CAP / 8;
const LEAF_RESERVE: u32 = LEAF_CAP / 8;

/// A node as the writer handles it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Node {
    vector: u64,
    leafvec: u64,
    /// First leaf.
    base0: u32,
    /// First child node.
    base1: u32,
}

impl Node {
    fn children(&self) -> u32 {
        self.vector.count_ones()
    }

    fn leaves(&self) -> u32 {
        self.leafvec.count_ones()
    }
}

/// Bitmap of the children at or before `c`.
#[inline(always)]
fn upto(c: u32) -> u64 {
    u64::MAX >> (63 - c)
}

/// The start bit of level `k`'s nodes.
fn level_bit(k: usize) -> u8 {
    DIRECT_BITS + STRIDE * k as u8
}

/// Child `c` of the level-`k` node of `region` (`k + 1 < LEVELS`).
fn child_region(k: usize, region: u128, c: u32) -> u128 {
    region | u128::from(c) << (128 - u32::from(level_bit(k + 1)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Nodes,
    Leaves,
}

/// Runs of 1..=64 slots in one fixed array: free lists per run length, then a bump pointer.
struct Arena {
    free: Vec<Vec<u32>>,
    next: u32,
    cap: u32,
    reserve: u32,
    /// Slots in live runs (for [`LpmMemory::groups_used`]).
    used: usize,
}

impl Arena {
    fn new(cap: u32, reserve: u32) -> Arena {
        Arena {
            free: vec![Vec::new(); 65],
            next: 0,
            cap,
            reserve,
            used: 0,
        }
    }

    fn alloc(&mut self, n: u32, keep_reserve: bool) -> Option<u32> {
        let at = match self.free[n as usize].pop() {
            Some(at) => at,
            None => {
                let limit = if keep_reserve {
                    self.cap - self.reserve
                } else {
                    self.cap
                };
                if self.next + n > limit {
                    return None;
                }
                self.next += n;
                self.next - n
            }
        };
        self.used += n as usize;
        Some(at)
    }

    /// Gives back a run that is out of use (retired and past its grace period, or never
    /// published).
    fn release(&mut self, at: u32, n: u32) {
        self.free[n as usize].push(at);
    }
}

/// The writer's record of one node region: a level-`k` node exists exactly for the regions
/// that hold a prefix longer than `level_bit(k)`, i.e. that have an end or a child.
#[derive(Debug, Default, Clone, Copy)]
struct Region {
    /// Children (6-bit steps) that are regions themselves.
    children: u64,
    /// Prefixes ending in this region's stride, as bits (two words, so that a map bucket is
    /// 8-byte aligned: 40 bytes instead of 48): the prefix `span` bits longer than the region's
    /// start whose bits after it are `p` is bit `2^span - 2 + p`, so that shorter prefixes come
    /// first. Their values are in the writer's per-length records.
    ends: [u64; 2],
}

impl Region {
    fn ends(&self) -> u128 {
        u128::from(self.ends[0]) | u128::from(self.ends[1]) << 64
    }

    fn set_ends(&mut self, e: u128) {
        self.ends = [e as u64, (e >> 64) as u64];
    }

    fn is_empty(&self) -> bool {
        self.children == 0 && self.ends == [0, 0]
    }
}

/// The bit of [`Region::ends`] for a prefix `span` (1..=6) bits into the region.
fn end_bit(span: u8, p: u128) -> u32 {
    (1u32 << span) - 2 + p as u32
}

/// A region's key: its first bits as two words (8-byte aligned, unlike a `u128`).
fn key(region: u128) -> [u64; 2] {
    [(region >> 64) as u64, region as u64]
}

/// The writer's side.
struct Writer {
    shadow: Shadow,
    /// Per level, the node regions by their first `level_bit(k)` bits.
    regions: Vec<HashMap<[u64; 2], Region, FxBuild>>,
    nodes: Arena,
    leaves: Arena,
    /// Retired runs: (kind, first slot, length, epoch of retirement), oldest first.
    pending: VecDeque<(Kind, u32, u32, u64)>,
    /// [`LpmMemory::first_level`] as last counted, until the next insert or removal: counting
    /// scans the whole first level (up to 128 MiB, mostly zero pages), under this lock, and
    /// the metrics ask for it on every scrape.
    first_level: Option<usize>,
}

impl Writer {
    fn arena(&mut self, k: Kind) -> &mut Arena {
        match k {
            Kind::Nodes => &mut self.nodes,
            Kind::Leaves => &mut self.leaves,
        }
    }

    /// Records a new prefix (`len > DIRECT_BITS`) in the regions above it.
    fn add(&mut self, net: u128, len: u8) {
        for k in 0..LEVELS {
            let o = level_bit(k);
            if o >= len {
                break;
            }
            let r = self.regions[k].entry(key(net & mask(o))).or_default();
            let span = len - o;
            if span <= STRIDE {
                r.set_ends(r.ends() | 1 << end_bit(span, bits(net, o, span) as u128));
            } else {
                r.children |= 1 << bits(net, o, STRIDE);
            }
        }
    }

    /// Forgets a recorded prefix: from its own region up, each region left with no end and no
    /// child goes, and with it its bit in the parent.
    fn forget(&mut self, net: u128, len: u8) {
        let mut child_gone = false;
        for k in (0..LEVELS).rev() {
            let o = level_bit(k);
            if o >= len {
                continue;
            }
            let span = len - o;
            let at = key(net & mask(o));
            let Some(r) = self.regions[k].get_mut(&at) else {
                continue;
            };
            if span <= STRIDE {
                r.set_ends(r.ends() & !(1 << end_bit(span, bits(net, o, span) as u128)));
            } else if child_gone {
                r.children &= !(1 << bits(net, o, STRIDE));
            }
            child_gone = r.is_empty();
            if child_gone {
                self.regions[k].remove(&at);
            }
        }
    }

    /// The longest prefix of length in `lo..=hi` covering `net`, as a leaf entry with its depth.
    fn best(&self, net: u128, lo: u8, hi: u8) -> u32 {
        (lo..=hi)
            .rev()
            .find_map(|l| Some(leaf(self.shadow.get(l, net & mask(l))? & VALUE_MASK, l)))
            .unwrap_or(0)
    }

    fn exists(&self, k: usize, region: u128) -> bool {
        self.regions
            .get(k)
            .is_some_and(|m| m.contains_key(&key(region)))
    }
}

/// Arrays an update has taken (given back if it fails) and retired (reusable after a grace
/// period once it is published).
#[derive(Default)]
struct Changes {
    taken: Vec<(Kind, u32, u32)>,
    retired: Vec<(Kind, u32, u32)>,
    keep_reserve: bool,
}

/// An IPv6 longest-prefix-match table mapping prefixes to values ≤ [`MAX_VALUE`].
///
/// Updates take `&self` and serialise on an internal lock; [`lookup`](Poptrie::lookup) never
/// locks.
pub struct Poptrie {
    /// Prefixes of length ≤ 16, leaf-pushed with their depth.
    short: Box<[AtomicU32]>,
    direct: Box<[AtomicU64]>,
    /// `[vector, leafvec, base0 | base1 << 32]`.
    nodes: Box<[[AtomicU64; 3]]>,
    leaves: Box<[AtomicU32]>,
    readers: Arc<Readers>,
    w: Mutex<Writer>,
}

impl fmt::Debug for Poptrie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Poptrie")
            .field("routes", &self.len())
            .finish()
    }
}

impl Default for Poptrie {
    fn default() -> Self {
        Self::new(Arc::default())
    }
}

impl Poptrie {
    /// An empty table whose arrays are reclaimed as `readers` allow.
    pub fn new(readers: Arc<Readers>) -> Poptrie {
        Poptrie {
            short: bytemuck::zeroed_slice_box(1 << SHORT_BITS),
            direct: bytemuck::zeroed_slice_box(1 << DIRECT_BITS),
            nodes: zeroed_hot(NODE_CAP as usize),
            leaves: zeroed_hot(LEAF_CAP as usize),
            readers,
            w: Mutex::new(Writer {
                shadow: Shadow::new(128),
                regions: (0..LEVELS).map(|_| HashMap::default()).collect(),
                nodes: Arena::new(NODE_CAP, NODE_RESERVE),
                leaves: Arena::new(LEAF_CAP, LEAF_RESERVE),
                pending: VecDeque::new(),
                first_level: None,
            }),
        }
    }

    /// The reader registry this table reclaims arrays against.
    pub fn readers(&self) -> &Arc<Readers> {
        &self.readers
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of the longest prefix containing `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let e = self.lookup_entry(addr)?;
        is_valid(e).then_some(e & VALUE_MASK)
    }

    /// [`lookup`](Poptrie::lookup) with the matching prefix's length: policy routing's
    /// `suppress_prefixlength` needs it.
    #[inline]
    pub fn lookup_len(&self, addr: u128) -> Option<(u32, u8)> {
        let e = self.lookup_entry(addr)?;
        is_valid(e).then_some((e & VALUE_MASK, depth_of(e)))
    }

    /// The leaf entry of the longest prefix containing `addr` (not valid if there is none).
    #[inline(always)]
    fn lookup_entry(&self, addr: u128) -> Option<u32> {
        // Acquire on the direct entry: every node and leaf reachable from it was written before
        // it was published, and none is written again until readers have moved on.
        let d = self
            .direct
            .get((addr >> (128 - DIRECT_BITS)) as usize)?
            .load(Ordering::Acquire);
        let mut e = 0;
        let root = d as u32;
        if root != 0 {
            let (mut at, mut rest) = (root - 1, addr << DIRECT_BITS);
            loop {
                match self.step(at, &mut rest)? {
                    Ok(child) => at = child,
                    Err(slot) => {
                        e = self.leaves.get(slot as usize)?.load(Ordering::Relaxed);
                        break;
                    }
                }
            }
        }
        self.resolve(addr, d, e)
    }

    /// One level down from node `at` by the top 6 bits of `rest` (which it shifts out; past
    /// bit 128, at the last level, zeros come in and the 2 real bits pick the run of children
    /// that the build filled for them): `Ok(child node)`, or `Err(leaf slot)`.
    #[inline(always)]
    fn step(&self, at: u32, rest: &mut u128) -> Option<Result<u32, u32>> {
        let n = self.nodes.get(at as usize)?;
        let c = (*rest >> (128 - u32::from(STRIDE))) as u32;
        *rest <<= STRIDE;
        let vector = n[0].load(Ordering::Relaxed);
        let bases = n[2].load(Ordering::Relaxed);
        Some(if vector >> c & 1 != 0 {
            Ok((bases >> 32) as u32 + (vector & upto(c)).count_ones() - 1)
        } else {
            let leafvec = n[1].load(Ordering::Relaxed);
            Err(bases as u32 + (leafvec & upto(c)).count_ones() - 1)
        })
    }

    /// The leaf entry for `addr` (not valid when no prefix holds it): from the leaf the nodes gave
    /// (`e`, 0 for none), else from its direct entry `d`'s prefix of 17..=24 bits, else the short table.
    #[inline(always)]
    fn resolve(&self, addr: u128, d: u64, mut e: u32) -> Option<u32> {
        if e == 0 {
            e = (d >> 32) as u32;
        }
        if e == 0 {
            e = self
                .short
                .get((addr >> (128 - SHORT_BITS)) as usize)?
                .load(Ordering::Acquire);
        }
        Some(e)
    }

    /// [`lookup`](Poptrie::lookup) of many addresses, `out[i]` for `addrs[i]` (as many as the
    /// shorter of the two holds).
    ///
    /// The lookups go down the trie together, one level for every address before the next, so
    /// their cache misses overlap: a lone lookup is a chain of dependent reads, and a branch
    /// mispredicted at its end throws away what the CPU had started of the next one.
    pub fn lookup_many(&self, addrs: &[u128], out: &mut [Option<u32>]) {
        const B: usize = 32;
        for (addrs, out) in addrs.chunks(B).zip(out.chunks_mut(B)) {
            let n = addrs.len().min(out.len());
            let mut d = [0u64; B];
            let mut rest = [0u128; B];
            let mut at = [0u32; B];
            let mut leaf = [0u32; B];
            let mut live = 0u32;
            for i in 0..n {
                d[i] = self
                    .direct
                    .get((addrs[i] >> (128 - DIRECT_BITS)) as usize)
                    .map_or(0, |x| x.load(Ordering::Acquire));
                rest[i] = addrs[i] << DIRECT_BITS;
                at[i] = (d[i] as u32).wrapping_sub(1);
                live |= u32::from(d[i] as u32 != 0) << i;
            }
            while live != 0 {
                let mut next = 0;
                let mut l = live;
                while l != 0 {
                    let i = l.trailing_zeros() as usize;
                    l &= l - 1;
                    match self.step(at[i], &mut rest[i]) {
                        Some(Ok(child)) => {
                            at[i] = child;
                            next |= 1 << i;
                        }
                        Some(Err(slot)) => leaf[i] = slot,
                        None => {}
                    }
                }
                live = next;
            }
            for i in 0..n {
                let e = if d[i] as u32 != 0 {
                    (self.leaves.get(leaf[i] as usize)).map_or(0, |e| e.load(Ordering::Relaxed))
                } else {
                    0
                };
                out[i] = self
                    .resolve(addrs[i], d[i], e)
                    .and_then(|e| is_valid(e).then_some(e & VALUE_MASK));
            }
        }
    }

    /// Number of installed prefixes.
    pub fn len(&self) -> usize {
        self.lock().shadow.len()
    }

    /// True if no prefix is installed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every installed prefix as `(network, len, value)`, in no particular order.
    pub fn to_vec(&self) -> Vec<(u128, u8, u32)> {
        self.lock().shadow.values(|net| net)
    }

    /// Calls `f(network, len, value)` for every installed prefix, in no particular order, under
    /// the writers' lock: updates wait for it, lookups do not.
    pub fn scan(&self, mut f: impl FnMut(u128, u8, u32)) {
        (self.lock().shadow).for_each(|net, len, x| f(net, len, x & VALUE_MASK));
    }

    /// The value stored for exactly this prefix.
    pub fn get(&self, prefix: u128, len: u8) -> Option<u32> {
        self.get_tagged(prefix, len).map(|(v, _)| v)
    }

    /// The value and the tag stored for exactly this prefix.
    pub fn get_tagged(&self, prefix: u128, len: u8) -> Option<(u32, u16)> {
        self.lock().shadow.tagged(len, prefix)
    }

    /// Memory by structure (computed by scanning: for reports, not the hot path).
    /// `first_level` is the pages of the short and direct tables that hold a route, `groups` the
    /// node and leaf memory ever written, `groups_used` the part live now, `shadow` the
    /// writer's records.
    pub fn memory(&self) -> LpmMemory {
        let mut w = self.lock();
        let first_level = *w.first_level.get_or_insert_with(|| {
            pages_in_use(&self.direct, |e| e.load(Ordering::Relaxed) != 0)
                + pages_in_use(&self.short, |e| e.load(Ordering::Relaxed) != 0)
        });
        let regions: usize = w
            .regions
            .iter()
            .map(|m| m.capacity() * (core::mem::size_of::<([u64; 2], Region)>() + 1))
            .sum();
        LpmMemory {
            first_level,
            groups: w.nodes.next as usize * 24 + w.leaves.next as usize * 4,
            groups_used: w.nodes.used * 24 + w.leaves.used * 4,
            shadow: w.shadow.bytes() + regions,
        }
    }

    /// Checks the structure against the writer's records: a node exists for exactly the
    /// regions that hold a longer prefix, every node's first leaf position starts a run, and
    /// the live arrays are exactly those reachable. For tests (walks the whole table).
    pub fn verify(&self) -> Result<(), String> {
        let w = self.lock();
        let (mut nodes, mut leaves) = (0usize, 0usize);
        // A root without a region is caught below: its arrays are in use but not reached.
        for region in w.regions[0]
            .keys()
            .map(|k| u128::from(k[0]) << 64 | u128::from(k[1]))
        {
            let root = self.direct[bits(region, 0, DIRECT_BITS)].load(Ordering::Relaxed) as u32;
            if root == 0 {
                return Err(format!("{region:#x}/{DIRECT_BITS}: no root for a region"));
            }
            nodes += 1;
            self.verify_node(&w, 0, region, self.node(root - 1), &mut nodes, &mut leaves)?;
        }
        if (nodes, leaves) != (w.nodes.used, w.leaves.used) {
            return Err(format!(
                "{nodes} nodes and {leaves} leaves reachable, {} and {} in use",
                w.nodes.used, w.leaves.used
            ));
        }
        Ok(())
    }

    fn verify_node(
        &self,
        w: &Writer,
        k: usize,
        region: u128,
        n: Node,
        nodes: &mut usize,
        leaves: &mut usize,
    ) -> Result<(), String> {
        if n.vector != u64::MAX && n.leafvec & (!n.vector & n.vector.wrapping_add(1)) == 0 {
            return Err(format!(
                "node {region:#x}/{}: first leaf starts no run",
                level_bit(k)
            ));
        }
        *nodes += n.children() as usize;
        *leaves += n.leaves() as usize;
        let mut j = 0;
        for c in 0..64u32 {
            let counted = k + 1 < LEVELS && w.exists(k + 1, child_region(k, region, c));
            if (n.vector >> c & 1 == 1) != counted {
                return Err(format!(
                    "{region:#x}/{} child {c}: node against the records",
                    level_bit(k)
                ));
            }
            if counted {
                let child = child_region(k, region, c);
                self.verify_node(w, k + 1, child, self.node(n.base1 + j), nodes, leaves)?;
                j += 1;
            }
        }
        Ok(())
    }

    /// Installs or replaces `prefix/len` (host bits ignored) with tag 0; returns the previous
    /// value.
    pub fn insert(&self, prefix: u128, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        self.insert_tagged(prefix, len, value, 0)
    }

    /// Installs or replaces `prefix/len` (host bits ignored), keeping `tag` (≤ [`MAX_TAG`])
    /// beside it for [`get_tagged`](Poptrie::get_tagged); returns the previous value.
    pub fn insert_tagged(
        &self,
        prefix: u128,
        len: u8,
        value: u32,
        tag: u16,
    ) -> Result<Option<u32>, LpmError> {
        if len > 128 {
            return Err(LpmError::BadLength);
        }
        if value > MAX_VALUE {
            return Err(LpmError::ValueTooLarge);
        }
        if tag > MAX_TAG {
            return Err(LpmError::TagTooLarge);
        }
        let net = prefix & mask(len);
        let mut w = self.lock();
        w.first_level = None;
        let old = w
            .shadow
            .insert(len, net, value | u32::from(tag) << TAG_SHIFT);
        let old_value = old.map(|x| x & VALUE_MASK);
        if old_value == Some(value) {
            // The same route: only the tag changed, which lookups never see.
            return Ok(old_value);
        }
        if len <= DIRECT_BITS {
            self.write_short(net, len, leaf(value, len), |e| {
                !is_valid(e) || depth_of(e) <= len
            });
            return Ok(old_value);
        }
        if old.is_none() {
            w.add(net, len);
        }
        if let Err(e) = self.update(&mut w, net, len, true) {
            match old {
                Some(x) => w.shadow.insert(len, net, x),
                None => {
                    w.forget(net, len);
                    w.shadow.remove(len, net)
                }
            };
            return Err(e);
        }
        Ok(old_value)
    }

    /// Removes `prefix/len`; its addresses fall back to the next-shorter covering prefix.
    ///
    /// A removal builds the region's new nodes before it frees the old ones, from room that
    /// inserts leave free ([`NODE_RESERVE`]). Should a single region outgrow even that, the
    /// prefix stays installed and `None` is returned.
    pub fn remove(&self, prefix: u128, len: u8) -> Option<u32> {
        if len > 128 {
            return None;
        }
        let net = prefix & mask(len);
        let mut w = self.lock();
        w.first_level = None;
        let old = w.shadow.remove(len, net)?;
        if len <= DIRECT_BITS {
            // The prefix has left the records: the best of the tier's lengths up to `len` is
            // the next shorter one.
            let lo = if len <= SHORT_BITS { 0 } else { SHORT_BITS + 1 };
            let repl = w.best(net, lo, len);
            self.write_short(net, len, repl, |e| is_valid(e) && depth_of(e) == len);
            return Some(old & VALUE_MASK);
        }
        w.forget(net, len);
        if self.update(&mut w, net, len, false).is_err() {
            w.add(net, len);
            w.shadow.insert(len, net, old);
            return None;
        }
        Some(old & VALUE_MASK)
    }

    /// Writes `new` into every entry of `net/len` (≤ 24) that satisfies `pred`: the short
    /// table for lengths ≤ 16, the direct entries' high words for 17..=24.
    fn write_short(&self, net: u128, len: u8, new: u32, pred: impl Fn(u32) -> bool) {
        if len <= SHORT_BITS {
            let first = bits(net, 0, SHORT_BITS);
            for e in &self.short[first..first + (1 << (SHORT_BITS - len))] {
                if pred(e.load(Ordering::Relaxed)) {
                    e.store(new, Ordering::Release);
                }
            }
        } else {
            let first = bits(net, 0, DIRECT_BITS);
            for d in &self.direct[first..first + (1 << (DIRECT_BITS - len))] {
                let x = d.load(Ordering::Relaxed);
                if pred((x >> 32) as u32) {
                    d.store(u64::from(new) << 32 | (x & 0xffff_ffff), Ordering::Release);
                }
            }
        }
    }

    fn node(&self, at: u32) -> Node {
        let n = &self.nodes[at as usize];
        let b = n[2].load(Ordering::Relaxed);
        Node {
            vector: n[0].load(Ordering::Relaxed),
            leafvec: n[1].load(Ordering::Relaxed),
            base0: b as u32,
            base1: (b >> 32) as u32,
        }
    }

    fn set_node(&self, at: u32, v: Node) {
        let n = &self.nodes[at as usize];
        n[0].store(v.vector, Ordering::Relaxed);
        n[1].store(v.leafvec, Ordering::Relaxed);
        n[2].store(
            u64::from(v.base0) | u64::from(v.base1) << 32,
            Ordering::Relaxed,
        );
    }

    /// Rebuilds what `net/len` (longer than the direct bits, already in the writer's records)
    /// changes, and publishes it.
    fn update(
        &self,
        w: &mut Writer,
        net: u128,
        len: u8,
        keep_reserve: bool,
    ) -> Result<(), LpmError> {
        let mut ch = Changes {
            keep_reserve,
            ..Changes::default()
        };
        let t = bits(net, 0, DIRECT_BITS);
        match self.rebuild(w, net, len, t, &mut ch) {
            Err(e) => {
                for &(k, at, n) in &ch.taken {
                    let a = w.arena(k);
                    a.used -= n as usize;
                    a.release(at, n);
                }
                Err(e)
            }
            Ok(root) => {
                let d = &self.direct[t];
                let x = d.load(Ordering::Relaxed);
                d.store((x & !0xffff_ffff) | u64::from(root), Ordering::Release);
                if !ch.retired.is_empty() {
                    // After the store: a reader that still sees an old array started before it.
                    let epoch = self.readers.retire();
                    for (k, at, n) in ch.retired {
                        w.arena(k).used -= n as usize;
                        w.pending.push_back((k, at, n, epoch));
                    }
                }
                Ok(())
            }
        }
    }

    /// The new root word of direct entry `t` after `net/len` changed.
    fn rebuild(
        &self,
        w: &mut Writer,
        net: u128,
        len: u8,
        t: usize,
        ch: &mut Changes,
    ) -> Result<u32, LpmError> {
        let root = self.direct[t].load(Ordering::Relaxed) as u32;
        let top = net & mask(DIRECT_BITS);
        let wanted = w.exists(0, top);
        if root == 0 {
            if !wanted {
                return Ok(0);
            }
            let n = self.build(w, 0, top, 0, ch)?;
            let at = self.alloc(w, Kind::Nodes, 1, ch)?;
            self.set_node(at, n);
            return Ok(at + 1);
        }
        if !wanted {
            self.retire_below(self.node(root - 1), ch);
            ch.retired.push((Kind::Nodes, root - 1, 1));
            return Ok(0);
        }
        // Down the path while the child towards `net` stays a node: (array, its length, the
        // path's node in it).
        let mut path = vec![(root - 1, 1u32, 0u32)];
        let mut k = 0;
        loop {
            let &(a, _, p) = path.last().unwrap_or(&(0, 1, 0));
            let node = self.node(a + p);
            let o = level_bit(k);
            if len <= o + STRIDE || k + 1 == LEVELS {
                break;
            }
            let c = bits(net, o, STRIDE) as u32;
            let before = node.vector >> c & 1 == 1;
            let after = w.exists(k + 1, net & mask(o + STRIDE));
            if !(before && after) {
                break;
            }
            let i = (node.vector & upto(c)).count_ones() - 1;
            path.push((node.base1, node.children(), i));
            k += 1;
        }
        let o = level_bit(k);
        let inherited = w.best(net, DIRECT_BITS + 1, o) & (VALID | VALUE_MASK);
        let mut val = self.build(w, k, net & mask(o), inherited, ch)?;
        for (depth, &(a, n, p)) in path.iter().enumerate().rev() {
            if depth + 1 == path.len() {
                self.retire_below(self.node(a + p), ch);
            }
            let copy = self.alloc(w, Kind::Nodes, n, ch)?;
            for j in 0..n {
                self.set_node(copy + j, if j == p { val } else { self.node(a + j) });
            }
            ch.retired.push((Kind::Nodes, a, n));
            if depth == 0 {
                return Ok(copy + 1);
            }
            let (pa, _, pp) = path[depth - 1];
            val = Node {
                base1: copy,
                ..self.node(pa + pp)
            };
        }
        Ok(0)
    }

    /// Builds the level-`k` node of `region` and everything below it from the writer's
    /// records; `inherited` is the leaf for what no longer prefix covers.
    fn build(
        &self,
        w: &mut Writer,
        k: usize,
        region: u128,
        inherited: u32,
        ch: &mut Changes,
    ) -> Result<Node, LpmError> {
        let o = level_bit(k);
        let mut best = [inherited; 64];
        let mut node = Node::default();
        if let Some(r) = w.regions[k].get(&key(region)).copied() {
            let mut ends = r.ends();
            while ends != 0 {
                let bit = ends.trailing_zeros();
                ends &= ends - 1;
                let span = (31 - (bit + 2).leading_zeros()) as u8;
                let p = u128::from(bit + 2 - (1 << span));
                let len = o + span;
                if let Some(v) = w.shadow.get(len, region | p << (128 - u32::from(len))) {
                    let width = 1usize << (STRIDE - span);
                    let first = p as usize * width;
                    best[first..first + width].fill(VALID | (v & VALUE_MASK));
                }
            }
            if k + 1 < LEVELS {
                node.vector = r.children;
            }
        }
        let mut children = Vec::with_capacity(node.children() as usize);
        let mut v = node.vector;
        while v != 0 {
            let c = v.trailing_zeros();
            v &= v - 1;
            let child = child_region(k, region, c);
            children.push(self.build(w, k + 1, child, best[c as usize], ch)?);
        }
        let mut leaves: Vec<u32> = Vec::new();
        for (c, &b) in best.iter().enumerate() {
            if node.vector >> c & 1 == 0 && leaves.last() != Some(&b) {
                node.leafvec |= 1 << c;
                leaves.push(b);
            }
        }
        if !children.is_empty() {
            node.base1 = self.alloc(w, Kind::Nodes, children.len() as u32, ch)?;
            for (j, &c) in children.iter().enumerate() {
                self.set_node(node.base1 + j as u32, c);
            }
        }
        if !leaves.is_empty() {
            node.base0 = self.alloc(w, Kind::Leaves, leaves.len() as u32, ch)?;
            for (j, &l) in leaves.iter().enumerate() {
                self.leaves[(node.base0 + j as u32) as usize].store(l, Ordering::Relaxed);
            }
        }
        Ok(node)
    }

    /// Retires the arrays under `n` (not the one holding `n`).
    fn retire_below(&self, n: Node, ch: &mut Changes) {
        for j in 0..n.children() {
            self.retire_below(self.node(n.base1 + j), ch);
        }
        if n.children() > 0 {
            ch.retired.push((Kind::Nodes, n.base1, n.children()));
        }
        if n.leaves() > 0 {
            ch.retired.push((Kind::Leaves, n.base0, n.leaves()));
        }
    }

    fn alloc(&self, w: &mut Writer, kind: Kind, n: u32, ch: &mut Changes) -> Result<u32, LpmError> {
        if w.arena(kind).free[n as usize].is_empty() && !w.pending.is_empty() {
            let min = self.readers.min_seen();
            while let Some(&(k, at, len, epoch)) = w.pending.front() {
                if epoch >= min {
                    break;
                }
                w.pending.pop_front();
                w.arena(k).release(at, len);
            }
        }
        let at = w
            .arena(kind)
            .alloc(n, ch.keep_reserve)
            .ok_or(LpmError::Full)?;
        ch.taken.push((kind, at, n));
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip6(s: &str) -> u128 {
        u128::from(s.parse::<std::net::Ipv6Addr>().unwrap())
    }

    #[test]
    fn nested_prefixes_and_the_fallback() {
        let t = Poptrie::default();
        t.insert(0, 0, 9).unwrap();
        t.insert(ip6("2001:db8::"), 32, 1).unwrap();
        t.insert(ip6("2001:db8:1::"), 48, 2).unwrap();
        t.insert(ip6("2001:db8:1:2::1"), 128, 4).unwrap();
        t.insert(ip6("2001::"), 16, 5).unwrap();
        assert_eq!(t.lookup(ip6("2001:db8:ffff::1")), Some(1));
        assert_eq!(t.lookup(ip6("2001:db8:1:ffff::1")), Some(2));
        assert_eq!(t.lookup(ip6("2001:db8:1:2::1")), Some(4));
        assert_eq!(
            t.lookup(ip6("2001:1::")),
            Some(5),
            "a /16 sits in the short table"
        );
        assert_eq!(t.lookup(ip6("2002::")), Some(9));
        assert_eq!(t.remove(0, 0), Some(9));
        assert_eq!(t.lookup(ip6("2002::")), None);
        assert_eq!(t.remove(ip6("2001:db8::"), 32), Some(1));
        assert_eq!(
            t.lookup(ip6("2001:db8:ffff::1")),
            Some(5),
            "falls back to the /16"
        );
        assert_eq!(t.verify(), Ok(()));
        let w = t.lock();
        let depth = w.regions.iter().filter(|m| !m.is_empty()).count();
        assert_eq!(depth, 18, "the /128 keeps a node at every level");
    }

    #[test]
    fn a_registered_reader_holds_back_array_reuse_until_quiescent() {
        let t = Poptrie::default();
        let r = t.readers().register();
        t.insert(ip6("2001:db8:1::"), 48, 1).unwrap();
        let high = |t: &Poptrie| t.lock().nodes.next;
        let after_first = high(&t);
        t.remove(ip6("2001:db8:1::"), 48);
        // The reader may still be inside the removed arrays: new ones are taken.
        t.insert(ip6("2001:db8:2::"), 48, 2).unwrap();
        assert!(high(&t) > after_first);
        let grown = high(&t);
        r.quiescent();
        t.remove(ip6("2001:db8:2::"), 48);
        t.insert(ip6("2001:db8:3::"), 48, 3).unwrap();
        assert_eq!(
            high(&t),
            grown,
            "arrays retired before the quiescent point were reused"
        );
        r.offline();
        let churn = |from: u128, to: u128| {
            for i in from..to {
                t.insert(ip6("2001:db8:4::") | i << 80, 48, 4).unwrap();
                t.remove(ip6("2001:db8:4::") | i << 80, 48);
            }
        };
        // The first round may take runs of lengths no retired run had; the same updates again
        // find every run they need retired.
        churn(0, 10);
        let steady = high(&t);
        churn(0, 10);
        churn(0, 10);
        assert_eq!(high(&t), steady, "an offline reader holds nothing back");
        assert_eq!(t.lookup(ip6("2001:db8:3::1")), Some(3));
        assert_eq!(t.verify(), Ok(()));
    }

    #[test]
    fn lookups_race_updates_without_wrong_answers() {
        // The writer flips nested prefixes, which rebuilds nodes and copies the path above them
        // under a reader that must only ever see values the table held.
        let t = Arc::new(Poptrie::default());
        t.insert(ip6("2001:db8::"), 32, 1).unwrap();
        let reader = t.clone();
        let rounds = super::super::lpm::race(
            t.readers(),
            move || {
                for x in 0..64u128 {
                    let a = ip6("2001:db8:1:2::") | x;
                    let v = reader.lookup(a);
                    assert!(matches!(v, Some(1..=3)), "{a:#x}: {v:?}");
                    let b = ip6("2001:db8:c8::") | x << 64;
                    let v = reader.lookup(b);
                    assert!(matches!(v, Some(1) | Some(4)), "{b:#x}: {v:?}");
                }
            },
            || {
                for _ in 0..5_000 {
                    t.insert(ip6("2001:db8:1::"), 48, 2).unwrap();
                    t.insert(ip6("2001:db8:1:2::"), 64, 3).unwrap();
                    t.insert(ip6("2001:db8:c8::"), 46, 4).unwrap();
                    t.remove(ip6("2001:db8:1:2::"), 64);
                    t.remove(ip6("2001:db8:c8::"), 46);
                    t.remove(ip6("2001:db8:1::"), 48);
                }
            },
        );
        assert!(rounds > 0);
        assert_eq!(t.verify(), Ok(()));
    }
}
