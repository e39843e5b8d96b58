//! Longest-prefix match in a leaf-pushed multibit trie of atomic entries: lookups never wait for
//! an update and take no lock.
//!
//! IPv4 is DIR-24-8 (Gupta, Lin, McKeown, INFOCOM 1998; DPDK's `rte_lpm`): a 2^24-entry table
//! indexed by the top 24 bits and 256-entry groups for the /24s that hold longer prefixes, so a
//! lookup is one or two memory reads. IPv6 uses the same machinery with more levels (strides in
//! [`V6_STRIDES`], chosen by `cargo bench -p llr-core --bench fulltable`, see
//! docs/datapath.md, "The forwarding table"). Every entry records the length of the prefix that wrote it, so an
//! insert only overwrites entries of shorter prefixes and a removal restores the next-shorter
//! covering prefix, found in the writer's per-length shadow of every prefix.
//!
//! Concurrency (one writer at a time, any number of readers):
//! - Entries are `AtomicU32`; a reader sees each entry either before or after an update, and a
//!   prefix spanning many entries may be half-written for an instant (each packet then follows
//!   either the old or the new route, as with `rte_lpm`).
//! - A new group is filled completely before the parent entry that points to it is stored with
//!   `Release`; readers load entries with `Acquire` (a plain load on x86).
//! - Groups are never moved: the pool grows by whole chunks reached through `OnceLock`s.
//! - A group folded back into its parent is only reused once every registered [`Reader`] has
//!   passed a quiescent point after the fold (quiescent-state-based reclamation, as
//!   `rte_lpm_rcu_qsbr_add`), so a reader preempted between two levels never follows a pointer
//!   into a group that now belongs to another prefix.

use core::hash::Hash;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::hash::FxBuild;

/// Largest value a route can carry (22 bits: the rest of an entry is flags and the depth).
pub const MAX_VALUE: u32 = (1 << 22) - 1;
/// Largest tag a prefix can carry: the writer's record of a prefix is a `u32` of which the value
/// takes 22 bits, so the other 10 hold something the table's owner keeps beside the route at no
/// extra cost (the route mirror: the kernel route's metric). Lookups never see it.
pub const MAX_TAG: u16 = (1 << 10) - 1;
pub(super) const TAG_SHIFT: u32 = 22;

// Entry layout: bit 31 valid, bit 30 group pointer, bits 22..30 prefix length (0..=128), bits
// 0..22 value (or group index when bit 30 is set).
pub(super) const VALID: u32 = 1 << 31;
pub(super) const EXT: u32 = 1 << 30;
const DEPTH_SHIFT: u32 = 22;
pub(super) const VALUE_MASK: u32 = MAX_VALUE;
/// Groups per level: indices must fit the value bits.
const MAX_GROUPS: u32 = MAX_VALUE + 1;

/// IPv4: DIR-24-8.
pub const V4_STRIDES: &[u8] = &[24, 8];
/// IPv6: a 2^16 first level, 8-bit strides to /32 (where the RIRs allocate), then 4-bit strides,
/// so the many /48s of a full table share small groups (see the module docs).
pub const V6_STRIDES: &[u8] = &[
    16, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
];

pub(super) fn leaf(value: u32, depth: u8) -> u32 {
    VALID | (u32::from(depth) << DEPTH_SHIFT) | value
}

pub(super) fn depth_of(e: u32) -> u8 {
    ((e >> DEPTH_SHIFT) & 0xff) as u8
}

pub(super) fn is_valid(e: u32) -> bool {
    e & VALID != 0
}

/// Left-aligned mask of `len` bits.
pub(super) fn mask(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

/// The `s` bits of `key` (left-aligned) after the first `o`.
#[inline(always)]
pub(super) fn bits(key: u128, o: u8, s: u8) -> usize {
    ((key << o) >> (128 - u32::from(s))) as usize
}

/// Errors of [`Lpm`] updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpmError {
    /// Prefix length above the address width.
    BadLength,
    /// Value above [`MAX_VALUE`].
    ValueTooLarge,
    /// Every group of a level is in use.
    Full,
    /// Tag above [`MAX_TAG`].
    TagTooLarge,
}

impl core::fmt::Display for LpmError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LpmError::BadLength => f.write_str("prefix length above the address width"),
            LpmError::ValueTooLarge => write!(f, "value above {MAX_VALUE}"),
            LpmError::Full => write!(f, "more than {MAX_GROUPS} groups at one level"),
            LpmError::TagTooLarge => write!(f, "tag above {MAX_TAG}"),
        }
    }
}

impl std::error::Error for LpmError {}

/// An address type the trie can hold.
pub trait LpmKey: Copy + Eq + Hash + Send + Sync + 'static {
    /// Address width.
    const BITS: u8;
    /// The address left-aligned in 128 bits.
    fn to_bits(self) -> u128;
    /// The inverse of [`to_bits`](LpmKey::to_bits).
    fn from_bits(b: u128) -> Self;
}

impl LpmKey for u32 {
    const BITS: u8 = 32;
    #[inline(always)]
    fn to_bits(self) -> u128 {
        u128::from(self) << 96
    }
    fn from_bits(b: u128) -> Self {
        (b >> 96) as u32
    }
}

impl LpmKey for u128 {
    const BITS: u8 = 128;
    #[inline(always)]
    fn to_bits(self) -> u128 {
        self
    }
    fn from_bits(b: u128) -> Self {
        b
    }
}

/// Zeroed atomics straight from the allocator, so untouched pages of a large first level cost
/// no memory.
fn zeroed(n: usize) -> Box<[AtomicU32]> {
    bytemuck::zeroed_slice_box(n)
}

/// Arrays smaller than this are left to the allocator: a huge page is 2 MiB, and the TLB holds
/// a small array's pages anyway.
const HOT_ARRAY_MIN: usize = 4 << 20;

static HOT_ARRAY_ADVICE: OnceLock<fn(usize, usize)> = OnceLock::new();

/// Installs what the process does with a table array that lookups read at random (the IPv4
/// first level, the IPv6 trie's nodes and leaves), given its address and length in bytes,
/// before anything is written to it. The I/O layer asks the kernel for huge pages there
/// (`llr_io::sys::back_tables_with_huge_pages`): with 4 KiB pages nearly every lookup in a
/// full table misses the TLB, and in a virtual machine a miss walks two page tables. Without
/// it (the simulator, tests) the arrays are plain zeroed memory. Returns false if advice was
/// already installed (the first stays).
pub fn set_hot_array_advice(advice: fn(usize, usize)) -> bool {
    HOT_ARRAY_ADVICE.set(advice).is_ok()
}

/// Bytes of the 4 KiB pages of `a` (from its start) that hold an entry `used` says is set: what
/// of a lazily committed first-level array a table has written.
pub(super) fn pages_in_use<T>(a: &[T], used: impl Fn(&T) -> bool) -> usize {
    const PAGE: usize = 4096;
    a.chunks(PAGE / core::mem::size_of::<T>())
        .filter(|p| p.iter().any(&used))
        .count()
        * PAGE
}

/// A zeroed array that lookups read at random: as [`zeroed`], then, if large, handed to the
/// installed advice while none of it is committed.
pub(super) fn zeroed_hot<T: bytemuck::Zeroable>(n: usize) -> Box<[T]> {
    let b: Box<[T]> = bytemuck::zeroed_slice_box(n);
    let bytes = core::mem::size_of_val(&*b);
    if bytes >= HOT_ARRAY_MIN {
        if let Some(advise) = HOT_ARRAY_ADVICE.get() {
            advise(b.as_ptr() as usize, bytes);
        }
    }
    b
}

/// The groups of one level: chunks of about 256 KiB, allocated once and never moved.
struct Pool {
    stride: u8,
    /// log2 of the groups per chunk.
    chunk_log: u32,
    chunks: Box<[OnceLock<Box<[AtomicU32]>>]>,
}

impl Pool {
    fn new(stride: u8) -> Pool {
        let chunk_log = 16u32.saturating_sub(u32::from(stride));
        let n = (MAX_GROUPS >> chunk_log) as usize;
        Pool {
            stride,
            chunk_log,
            chunks: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    #[inline(always)]
    fn group(&self, g: u32) -> Option<&[AtomicU32]> {
        let chunk = self.chunks.get((g >> self.chunk_log) as usize)?.get()?;
        let size = 1usize << self.stride;
        let off = ((g & ((1 << self.chunk_log) - 1)) as usize) << self.stride;
        chunk.get(off..off + size)
    }

    /// Makes group `g`'s chunk exist (the writer's only allocation).
    fn ensure(&self, g: u32) {
        let entries = 1usize << (self.chunk_log + u32::from(self.stride));
        if let Some(c) = self.chunks.get((g >> self.chunk_log) as usize) {
            c.get_or_init(|| zeroed(entries));
        }
    }

    fn chunk_bytes(&self) -> usize {
        let per = 4usize << (self.chunk_log + u32::from(self.stride));
        self.chunks.iter().filter(|c| c.get().is_some()).count() * per
    }
}

/// Quiescent-state tracking for the readers of one or more tables.
#[derive(Debug, Default)]
pub struct Readers {
    epoch: AtomicU64,
    slots: Mutex<Vec<Arc<AtomicU64>>>,
}

/// A registered reader (a worker thread). It holds back the reuse of groups retired after its
/// last quiescent point; dropping it (or [`offline`](Reader::offline)) releases them.
#[derive(Debug)]
pub struct Reader {
    readers: Arc<Readers>,
    slot: Arc<AtomicU64>,
}

const OFFLINE: u64 = u64::MAX;

impl Readers {
    fn lock(&self) -> MutexGuard<'_, Vec<Arc<AtomicU64>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a reader, online from now on.
    pub fn register(self: &Arc<Self>) -> Reader {
        let mut slots = self.lock();
        slots.retain(|s| Arc::strong_count(s) > 1);
        let slot = Arc::new(AtomicU64::new(self.epoch.load(Ordering::SeqCst)));
        slots.push(slot.clone());
        drop(slots);
        // Pairs with the writer's fence before it scans: either it sees this slot, or this
        // reader sees every entry stored before the writer's retirement.
        fence(Ordering::SeqCst);
        Reader {
            readers: self.clone(),
            slot,
        }
    }

    /// Starts a grace period: groups retired before this call are reusable once
    /// [`min_seen`](Readers::min_seen) exceeds the returned epoch.
    pub(super) fn retire(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::SeqCst)
    }

    /// The oldest epoch an online reader may still be reading under.
    pub(super) fn min_seen(&self) -> u64 {
        fence(Ordering::SeqCst);
        let slots = self.lock();
        slots
            .iter()
            .filter(|s| Arc::strong_count(s) > 1)
            .map(|s| s.load(Ordering::SeqCst))
            .min()
            .unwrap_or(OFFLINE)
    }
}

impl Reader {
    /// Declares that this reader holds no reference into any table (between grants).
    #[inline]
    pub fn quiescent(&self) {
        let e = self.readers.epoch.load(Ordering::Acquire);
        self.slot.store(e, Ordering::Release);
    }

    /// Before blocking (an idle worker sleeping): retired groups need not wait for this reader.
    pub fn offline(&self) {
        self.slot.store(OFFLINE, Ordering::Release);
    }

    /// After [`offline`](Reader::offline), before the next lookup.
    pub fn online(&self) {
        let e = self.readers.epoch.load(Ordering::SeqCst);
        self.slot.store(e, Ordering::SeqCst);
        // As in `register`: the writer's scan and this reader's next loads cannot both miss.
        fence(Ordering::SeqCst);
    }

    /// True if this reader is registered with `readers`.
    pub fn belongs_to(&self, readers: &Arc<Readers>) -> bool {
        Arc::ptr_eq(&self.readers, readers)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.slot.store(OFFLINE, Ordering::Release);
    }
}

/// The writer's record of every prefix: one map per length, each keyed by the network's top bits
/// in the narrowest key that holds them (a /48 is 12 bytes a bucket instead of 32 as a `u128`
/// with its alignment), each value the route's value and tag (`value | tag << 22`).
#[derive(Default)]
pub(super) struct Shadow {
    /// Lengths 0..=32.
    short: Vec<HashMap<u32, u32, FxBuild>>,
    /// Lengths 33..=64.
    mid: Vec<HashMap<[u32; 2], u32, FxBuild>>,
    /// Lengths 65..=128.
    long: Vec<HashMap<[u32; 4], u32, FxBuild>>,
}

/// `net` (left-aligned) as the key words of a map: the top `n` 32-bit words.
fn words<const N: usize>(net: u128) -> [u32; N] {
    core::array::from_fn(|i| (net >> (96 - 32 * i)) as u32)
}

fn unwords(w: &[u32]) -> u128 {
    w.iter()
        .enumerate()
        .fold(0, |a, (i, &x)| a | u128::from(x) << (96 - 32 * i))
}

impl Shadow {
    pub(super) fn new(bits: u8) -> Shadow {
        // Lengths 0..=min(bits, hi).
        let upto = |hi: u8| usize::from(bits.min(hi)) + 1;
        Shadow {
            short: (0..upto(32)).map(|_| HashMap::default()).collect(),
            mid: (upto(32)..upto(64)).map(|_| HashMap::default()).collect(),
            long: (upto(64)..upto(128)).map(|_| HashMap::default()).collect(),
        }
    }

    pub(super) fn get(&self, len: u8, net: u128) -> Option<u32> {
        let l = usize::from(len);
        match len {
            0..=32 => self.short.get(l)?.get(&words::<1>(net)[0]),
            33..=64 => self.mid.get(l - 33)?.get(&words::<2>(net)),
            _ => self.long.get(l - 65)?.get(&words::<4>(net)),
        }
        .copied()
    }

    pub(super) fn insert(&mut self, len: u8, net: u128, v: u32) -> Option<u32> {
        let l = usize::from(len);
        match len {
            0..=32 => self.short.get_mut(l)?.insert(words::<1>(net)[0], v),
            33..=64 => self.mid.get_mut(l - 33)?.insert(words::<2>(net), v),
            _ => self.long.get_mut(l - 65)?.insert(words::<4>(net), v),
        }
    }

    pub(super) fn remove(&mut self, len: u8, net: u128) -> Option<u32> {
        let l = usize::from(len);
        match len {
            0..=32 => self.short.get_mut(l)?.remove(&words::<1>(net)[0]),
            33..=64 => self.mid.get_mut(l - 33)?.remove(&words::<2>(net)),
            _ => self.long.get_mut(l - 65)?.remove(&words::<4>(net)),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.short.iter().map(HashMap::len).sum::<usize>()
            + self.mid.iter().map(HashMap::len).sum::<usize>()
            + self.long.iter().map(HashMap::len).sum::<usize>()
    }

    /// The value and the tag of exactly `net/len` (host bits ignored).
    pub(super) fn tagged(&self, len: u8, net: u128) -> Option<(u32, u16)> {
        let x = self.get(len, net & mask(len))?;
        Some((x & VALUE_MASK, (x >> TAG_SHIFT) as u16))
    }

    /// Every prefix as `(network, len, value)`, the tags left out.
    pub(super) fn values<K>(&self, key: impl Fn(u128) -> K) -> Vec<(K, u8, u32)> {
        let mut v = Vec::with_capacity(self.len());
        self.for_each(|net, len, x| v.push((key(net), len, x & VALUE_MASK)));
        v
    }

    /// Every prefix as `(network, len, value | tag << 22)`.
    pub(super) fn for_each(&self, mut f: impl FnMut(u128, u8, u32)) {
        for (l, m) in self.short.iter().enumerate() {
            m.iter().for_each(|(k, &v)| f(unwords(&[*k]), l as u8, v));
        }
        for (l, m) in self.mid.iter().enumerate() {
            m.iter().for_each(|(k, &v)| f(unwords(k), l as u8 + 33, v));
        }
        for (l, m) in self.long.iter().enumerate() {
            m.iter().for_each(|(k, &v)| f(unwords(k), l as u8 + 65, v));
        }
    }

    /// Buckets × bucket size (an estimate of the allocator's share).
    pub(super) fn bytes(&self) -> usize {
        fn b<K, V>(m: &HashMap<K, V, FxBuild>) -> usize {
            m.capacity() * (core::mem::size_of::<(K, V)>() + 1)
        }
        self.short.iter().map(b).sum::<usize>()
            + self.mid.iter().map(b).sum::<usize>()
            + self.long.iter().map(b).sum::<usize>()
    }
}

/// The writer's side: every prefix per length, and group bookkeeping.
struct Writer {
    shadow: Shadow,
    free: Vec<Vec<u32>>,
    next: Vec<u32>,
    /// Retired groups: (level, group, epoch of retirement), oldest first.
    pending: VecDeque<(u8, u32, u64)>,
    /// [`LpmMemory::first_level`] as last counted, until the next insert or removal: counting
    /// scans the whole first level (up to 128 MiB, mostly zero pages), under this lock, and
    /// the metrics ask for it on every scrape.
    first_level: Option<usize>,
}

/// Memory held by a table, by structure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LpmMemory {
    /// Pages of the first level that hold a route (the rest was never touched: zero pages the
    /// kernel has not committed).
    pub first_level: usize,
    /// Allocated group chunks, all levels.
    pub groups: usize,
    /// Groups in use.
    pub groups_used: usize,
    /// The writer's per-length maps of every prefix (capacity × entry size, an estimate of the
    /// allocator's share).
    pub shadow: usize,
}

/// A longest-prefix-match table of `K` addresses mapping prefixes to values ≤ [`MAX_VALUE`].
///
/// Updates take `&self` and serialise on an internal lock; [`lookup`](Lpm::lookup) never locks.
pub struct Lpm<K: LpmKey> {
    strides: &'static [u8],
    top: Box<[AtomicU32]>,
    /// `pools[l]` holds level `l`'s groups (`pools[0]` is unused: level 0 is `top`).
    pools: Box<[Pool]>,
    readers: Arc<Readers>,
    w: Mutex<Writer>,
    key: core::marker::PhantomData<K>,
}

impl<K: LpmKey> core::fmt::Debug for Lpm<K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lpm")
            .field("bits", &K::BITS)
            .field("strides", &self.strides)
            .field("routes", &self.len())
            .finish()
    }
}

/// IPv4 table (DIR-24-8).
pub type Lpm4 = Lpm<u32>;
/// The multibit trie for IPv6 addresses: the IPv6 table is a [`Poptrie`](super::poptrie::Poptrie)
/// (a fifth of the memory and a fraction of the reads); this shape stays for comparison.
pub type Multibit6 = Lpm<u128>;

impl Default for Lpm<u32> {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for Lpm<u128> {
    fn default() -> Self {
        Self::new()
    }
}

impl Lpm<u32> {
    /// An empty IPv4 table (64 MiB of zeroed, lazily committed memory for the first level).
    pub fn new() -> Self {
        Self::with_strides(V4_STRIDES, Arc::default())
    }

    /// IPv4 lookup with DIR-24-8's two levels unrolled.
    #[inline(always)]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let mut e = self.top.get((addr >> 8) as usize)?.load(Ordering::Acquire);
        if e & EXT != 0 {
            let g = self.pools.get(1)?.group(e & VALUE_MASK)?;
            e = g.get((addr & 0xff) as usize)?.load(Ordering::Acquire);
        }
        (e & VALID != 0).then_some(e & VALUE_MASK)
    }

    /// [`lookup`](Self::lookup) with the matching prefix's length: policy routing's
    /// `suppress_prefixlength` needs it.
    #[inline]
    pub fn lookup_len(&self, addr: u32) -> Option<(u32, u8)> {
        let mut e = self.top.get((addr >> 8) as usize)?.load(Ordering::Acquire);
        if e & EXT != 0 {
            let g = self.pools.get(1)?.group(e & VALUE_MASK)?;
            e = g.get((addr & 0xff) as usize)?.load(Ordering::Acquire);
        }
        (e & VALID != 0).then_some((e & VALUE_MASK, depth_of(e)))
    }

    /// [`lookup`](Self::lookup) of many addresses, `out[i]` for `addrs[i]` (as many as the
    /// shorter of the two holds).
    ///
    /// All first-level entries are read before any is looked at. In a loop of whole lookups
    /// each read feeds a branch, and the reorder buffer fills with the instructions behind a
    /// few of those cache misses before the next ones are issued; read in a pass of their own,
    /// a batch's misses are in flight together.
    pub fn lookup_many(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        const B: usize = 64;
        for (addrs, out) in addrs.chunks(B).zip(out.chunks_mut(B)) {
            let n = addrs.len().min(out.len());
            let mut e = [0u32; B];
            for i in 0..n {
                e[i] = self
                    .top
                    .get((addrs[i] >> 8) as usize)
                    .map_or(0, |x| x.load(Ordering::Acquire));
            }
            for i in 0..n {
                if e[i] & EXT != 0 {
                    e[i] = self
                        .pools
                        .get(1)
                        .and_then(|p| p.group(e[i] & VALUE_MASK))
                        .and_then(|g| g.get((addrs[i] & 0xff) as usize))
                        .map_or(0, |x| x.load(Ordering::Acquire));
                }
            }
            for i in 0..n {
                out[i] = (e[i] & VALID != 0).then_some(e[i] & VALUE_MASK);
            }
        }
    }
}

impl Lpm<u128> {
    /// An empty IPv6 table with the default strides.
    pub fn new() -> Self {
        Self::with_strides(V6_STRIDES, Arc::default())
    }

    /// IPv6 lookup.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        self.lookup_bits(addr)
    }
}

/// One prefix's write: the entry `new` goes into the leaf entries of `net/len` that satisfy
/// `pred` (an insert skips entries of longer prefixes; a removal takes only its own).
struct EntryWrite<'a> {
    net: u128,
    len: u8,
    new: u32,
    pred: &'a dyn Fn(u32) -> bool,
}

impl<K: LpmKey> Lpm<K> {
    /// An empty table with these strides (summing to the address width, each after the first at
    /// most 8 bits), whose groups are reclaimed as `readers` allow.
    ///
    /// # Panics
    /// On strides that do not fit the address width: a programming error, not input.
    pub fn with_strides(strides: &'static [u8], readers: Arc<Readers>) -> Self {
        let total: u32 = strides.iter().map(|&s| u32::from(s)).sum();
        assert!(
            total == u32::from(K::BITS) && strides.iter().skip(1).all(|&s| (1..=8).contains(&s)),
            "strides {strides:?} do not cover {} bits in steps of at most 8",
            K::BITS
        );
        let levels = strides.len();
        Lpm {
            strides,
            top: zeroed_hot(1 << strides[0]),
            pools: (0..levels)
                .map(|l| Pool::new(if l == 0 { 1 } else { strides[l] }))
                .collect(),
            readers,
            w: Mutex::new(Writer {
                shadow: Shadow::new(K::BITS),
                free: vec![Vec::new(); levels],
                next: vec![0; levels],
                pending: VecDeque::new(),
                first_level: None,
            }),
            key: core::marker::PhantomData,
        }
    }

    /// The reader registry this table reclaims groups against.
    pub fn readers(&self) -> &Arc<Readers> {
        &self.readers
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of the longest prefix containing `key`.
    #[inline]
    pub fn lookup_bits(&self, key: K) -> Option<u32> {
        let key = key.to_bits();
        let s0 = self.strides[0];
        let mut e = self.top.get(bits(key, 0, s0))?.load(Ordering::Acquire);
        let mut o = s0;
        let mut l = 1;
        while e & EXT != 0 {
            let s = *self.strides.get(l)?;
            let g = self.pools.get(l)?.group(e & VALUE_MASK)?;
            e = g.get(bits(key, o, s))?.load(Ordering::Acquire);
            o += s;
            l += 1;
        }
        (e & VALID != 0).then_some(e & VALUE_MASK)
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
    pub fn to_vec(&self) -> Vec<(K, u8, u32)> {
        self.lock().shadow.values(K::from_bits)
    }

    /// Calls `f(network, len, value)` for every installed prefix, in no particular order, under
    /// the writers' lock: updates wait for it, lookups do not.
    pub fn scan(&self, mut f: impl FnMut(K, u8, u32)) {
        (self.lock().shadow).for_each(|net, len, x| f(K::from_bits(net), len, x & VALUE_MASK));
    }

    /// The value stored for exactly this prefix.
    pub fn get(&self, prefix: K, len: u8) -> Option<u32> {
        self.get_tagged(prefix, len).map(|(v, _)| v)
    }

    /// The value and the tag stored for exactly this prefix.
    pub fn get_tagged(&self, prefix: K, len: u8) -> Option<(u32, u16)> {
        self.lock().shadow.tagged(len, prefix.to_bits())
    }

    /// Memory by structure (computed by scanning: for reports, not the hot path).
    pub fn memory(&self) -> LpmMemory {
        let mut w = self.lock();
        let first_level = *w
            .first_level
            .get_or_insert_with(|| pages_in_use(&self.top, |e| e.load(Ordering::Relaxed) != 0));
        let groups = self.pools.iter().skip(1).map(Pool::chunk_bytes).sum();
        let groups_used = (1..self.strides.len())
            .map(|l| {
                let n = w.next[l] as usize - w.free[l].len();
                let pend = w.pending.iter().filter(|p| usize::from(p.0) == l).count();
                (n - pend.min(n)) * (4usize << self.strides[l])
            })
            .sum();
        let shadow = w.shadow.bytes();
        LpmMemory {
            first_level,
            groups,
            groups_used,
            shadow,
        }
    }

    /// Installs or replaces `prefix/len` (host bits ignored) with tag 0; returns the previous
    /// value.
    pub fn insert(&self, prefix: K, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        self.insert_tagged(prefix, len, value, 0)
    }

    /// Installs or replaces `prefix/len` (host bits ignored), keeping `tag` (≤ [`MAX_TAG`])
    /// beside it for [`get_tagged`](Lpm::get_tagged); returns the previous value.
    pub fn insert_tagged(
        &self,
        prefix: K,
        len: u8,
        value: u32,
        tag: u16,
    ) -> Result<Option<u32>, LpmError> {
        if len > K::BITS {
            return Err(LpmError::BadLength);
        }
        if value > MAX_VALUE {
            return Err(LpmError::ValueTooLarge);
        }
        if tag > MAX_TAG {
            return Err(LpmError::TagTooLarge);
        }
        let net = prefix.to_bits() & mask(len);
        let mut w = self.lock();
        w.first_level = None;
        let old = w.shadow.get(len, net);
        if old.is_some_and(|x| x & VALUE_MASK == value) {
            // The same route: the entries already hold it, only the tag may change.
        } else {
            // Overwrite entries from shorter (or equal: a replacement) prefixes; longer ones stay.
            let pred = |e: u32| !is_valid(e) || depth_of(e) <= len;
            let t = EntryWrite {
                net,
                len,
                new: leaf(value, len),
                pred: &pred,
            };
            self.write(&mut w, (0, 0, 0), &t)?;
        }
        let old = w
            .shadow
            .insert(len, net, value | u32::from(tag) << TAG_SHIFT);
        Ok(old.map(|x| x & VALUE_MASK))
    }

    /// Removes `prefix/len`; its addresses fall back to the next-shorter covering prefix.
    pub fn remove(&self, prefix: K, len: u8) -> Option<u32> {
        if len > K::BITS {
            return None;
        }
        let net = prefix.to_bits() & mask(len);
        let mut w = self.lock();
        w.first_level = None;
        let old = w.shadow.remove(len, net)? & VALUE_MASK;
        let repl = (0..len)
            .rev()
            .find_map(|l| {
                let v = w.shadow.get(l, net & mask(l))?;
                Some(leaf(v & VALUE_MASK, l))
            })
            .unwrap_or(0);
        // Only entries written by this very prefix carry its length inside its range. A removal
        // allocates no group, so it cannot fail.
        let pred = |e: u32| is_valid(e) && depth_of(e) == len;
        let t = EntryWrite {
            net,
            len,
            new: repl,
            pred: &pred,
        };
        let _ = self.write(&mut w, (0, 0, 0), &t);
        Some(old)
    }

    fn node(&self, level: usize, g: u32) -> &[AtomicU32] {
        if level == 0 {
            &self.top
        } else {
            // Only indices of allocated groups are ever stored or passed here.
            self.pools[level].group(g).unwrap_or(&[])
        }
    }

    /// Writes `t.new` into every leaf entry of `t.net/t.len` below node (`level`, `g`), whose
    /// entries start at bit `o`, that satisfies `t.pred`.
    fn write(
        &self,
        w: &mut Writer,
        (level, g, o): (usize, u32, u8),
        t: &EntryWrite<'_>,
    ) -> Result<(), LpmError> {
        let (net, len, new, pred) = (t.net, t.len, t.new, t.pred);
        let s = self.strides[level];
        if len <= o + s {
            // The prefix covers a range of this node's entries (all of them if len <= o).
            let first = bits(net, o, s);
            let count = 1usize << (o + s - len.max(o));
            for i in first..first + count {
                let e = self.node(level, g)[i].load(Ordering::Relaxed);
                if e & EXT != 0 {
                    self.write(w, (level + 1, e & VALUE_MASK, o + s), t)?;
                    self.try_collapse(w, level, g, i, o + s);
                } else if pred(e) {
                    self.node(level, g)[i].store(new, Ordering::Release);
                }
            }
        } else {
            let i = bits(net, o, s);
            let e = self.node(level, g)[i].load(Ordering::Relaxed);
            if e & EXT != 0 {
                self.write(w, (level + 1, e & VALUE_MASK, o + s), t)?;
                self.try_collapse(w, level, g, i, o + s);
            } else if pred(e) {
                // Only an insert gets here (a removal refuses the shorter prefix's entry): fill a
                // new group with the entry it replaces, write into it, then publish it.
                let child = self.alloc(w, level + 1, e)?;
                self.write(w, (level + 1, child, o + s), t)?;
                self.node(level, g)[i].store(VALID | EXT | child, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Folds the group under entry `i` of node (`level`, `g`) back into that entry once no
    /// prefix longer than the group's start (`child_o`) is left in it.
    fn try_collapse(&self, w: &mut Writer, level: usize, g: u32, i: usize, child_o: u8) {
        let e = self.node(level, g)[i].load(Ordering::Relaxed);
        if e & EXT == 0 {
            return;
        }
        let child = e & VALUE_MASK;
        let entries = self.node(level + 1, child);
        // Entries of depth <= child_o all come from the one longest prefix covering the whole
        // group, so they are identical and the group can be replaced by any of them.
        let foldable = entries.iter().all(|x| {
            let x = x.load(Ordering::Relaxed);
            x & EXT == 0 && (!is_valid(x) || depth_of(x) <= child_o)
        });
        if foldable {
            let first = entries.first().map_or(0, |x| x.load(Ordering::Relaxed));
            self.node(level, g)[i].store(first, Ordering::Release);
            let epoch = self.readers.retire();
            w.pending.push_back((level as u8 + 1, child, epoch));
        }
    }

    fn alloc(&self, w: &mut Writer, level: usize, fill: u32) -> Result<u32, LpmError> {
        if w.free[level].is_empty() && !w.pending.is_empty() {
            let min = self.readers.min_seen();
            while let Some(&(l, g, epoch)) = w.pending.front() {
                if epoch >= min {
                    break;
                }
                w.pending.pop_front();
                w.free[usize::from(l)].push(g);
            }
        }
        let g = match w.free[level].pop() {
            Some(g) => g,
            None => {
                let g = w.next[level];
                if g >= MAX_GROUPS {
                    return Err(LpmError::Full);
                }
                self.pools[level].ensure(g);
                w.next[level] += 1;
                g
            }
        };
        for x in self.node(level, g) {
            x.store(fill, Ordering::Relaxed);
        }
        Ok(g)
    }
}

/// Runs `check` in a registered reader thread, quiescent between rounds, while `update` runs
/// here; returns the reader's rounds. Shared by the tables' race tests.
#[cfg(test)]
pub(super) fn race(
    readers: &Arc<Readers>,
    check: impl Fn() + Send + 'static,
    update: impl FnOnce(),
) -> u64 {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (readers, stop) = (readers.clone(), stop.clone());
        std::thread::spawn(move || {
            let r = readers.register();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                check();
                r.quiescent();
                n += 1;
            }
            n
        })
    };
    update();
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    fn ip6(s: &str) -> u128 {
        u128::from(s.parse::<std::net::Ipv6Addr>().unwrap())
    }

    #[test]
    fn overlapping_prefixes_insert_and_remove() {
        let t = Lpm4::new();
        t.insert(ip("10.0.0.0"), 8, 1).unwrap();
        t.insert(ip("10.1.0.0"), 16, 2).unwrap();
        t.insert(ip("10.1.2.0"), 24, 3).unwrap();
        t.insert(ip("10.1.2.128"), 25, 4).unwrap();
        t.insert(ip("10.1.2.200"), 32, 5).unwrap();
        assert_eq!(t.lookup(ip("10.9.9.9")), Some(1));
        assert_eq!(t.lookup(ip("10.1.9.9")), Some(2));
        assert_eq!(t.lookup(ip("10.1.2.1")), Some(3));
        assert_eq!(t.lookup(ip("10.1.2.129")), Some(4));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(5));
        assert_eq!(t.lookup(ip("11.0.0.0")), None);
        // A shorter prefix inserted later must not shadow longer ones.
        t.insert(ip("0.0.0.0"), 0, 9).unwrap();
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(5));
        assert_eq!(t.lookup(ip("11.0.0.0")), Some(9));
        assert_eq!(t.remove(ip("10.1.2.128"), 25), Some(4));
        assert_eq!(t.lookup(ip("10.1.2.129")), Some(3));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(5));
        assert_eq!(t.remove(ip("10.1.2.200"), 32), Some(5));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(3));
        // The group has been folded back; with no registered reader it is reused at once.
        assert_eq!(t.lock().pending.len(), 1);
        t.insert(ip("10.1.3.7"), 32, 6).unwrap();
        assert!(t.lock().pending.is_empty());
        assert_eq!(t.lock().next[1], 1, "the folded group was reused");
        assert_eq!(t.remove(ip("10.1.0.0"), 16), Some(2));
        assert_eq!(t.lookup(ip("10.1.9.9")), Some(1));
        assert_eq!(t.lookup(ip("10.1.2.1")), Some(3));
        assert_eq!(t.remove(ip("0.0.0.0"), 0), Some(9));
        assert_eq!(t.lookup(ip("11.0.0.0")), None);
        assert_eq!(t.remove(ip("0.0.0.0"), 0), None);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn replace_and_errors() {
        let t = Lpm4::new();
        assert_eq!(t.insert(ip("192.168.1.0"), 24, 1), Ok(None));
        assert_eq!(t.insert(ip("192.168.1.77"), 24, 2), Ok(Some(1)));
        assert_eq!(t.lookup(ip("192.168.1.5")), Some(2));
        assert_eq!(t.get(ip("192.168.1.0"), 24), Some(2));
        assert_eq!(t.insert(0, 33, 1), Err(LpmError::BadLength));
        assert_eq!(t.insert(0, 8, MAX_VALUE + 1), Err(LpmError::ValueTooLarge));
        assert_eq!(t.remove(ip("192.168.2.0"), 30), None);
    }

    #[test]
    fn tags_ride_beside_values_and_lookups_never_see_them() {
        let t = Lpm4::new();
        assert_eq!(t.insert_tagged(ip("10.0.0.0"), 8, 7, MAX_TAG), Ok(None));
        assert_eq!(t.get_tagged(ip("10.0.0.0"), 8), Some((7, MAX_TAG)));
        assert_eq!(t.lookup(ip("10.1.2.3")), Some(7));
        assert_eq!(t.to_vec(), vec![(ip("10.0.0.0"), 8, 7)]);
        // The same value with another tag: only the record changes, not one entry.
        let entry = t.top[(ip("10.0.0.0") >> 8) as usize].load(Ordering::Relaxed);
        t.top[(ip("10.0.0.0") >> 8) as usize].store(entry ^ 1, Ordering::Relaxed);
        assert_eq!(t.insert_tagged(ip("10.0.0.0"), 8, 7, 3), Ok(Some(7)));
        assert_eq!(
            t.lookup(ip("10.0.0.1")),
            Some(6),
            "entries left as they were"
        );
        t.top[(ip("10.0.0.0") >> 8) as usize].store(entry, Ordering::Relaxed);
        assert_eq!(t.get_tagged(ip("10.0.0.0"), 8), Some((7, 3)));
        assert_eq!(t.insert(ip("10.0.0.0"), 8, 8), Ok(Some(7)));
        assert_eq!(t.get_tagged(ip("10.0.0.0"), 8), Some((8, 0)));
        assert_eq!(t.lookup(ip("10.1.2.3")), Some(8));
        assert_eq!(
            t.insert_tagged(ip("10.0.0.0"), 8, 8, MAX_TAG + 1),
            Err(LpmError::TagTooLarge)
        );
        // A removal falls back to the covering prefix's value, not its tagged record.
        t.insert_tagged(ip("10.1.0.0"), 16, 9, 5).unwrap();
        t.insert_tagged(ip("0.0.0.0"), 0, 1, MAX_TAG).unwrap();
        assert_eq!(t.remove(ip("10.0.0.0"), 8), Some(8));
        assert_eq!(t.lookup(ip("10.2.0.0")), Some(1));
        assert_eq!(t.remove(ip("10.1.0.0"), 16), Some(9));
        assert_eq!(t.lookup(ip("10.1.0.0")), Some(1));
    }

    #[test]
    fn ipv6_records_of_every_key_width() {
        // Lengths 0..=32, 33..=64 and 65..=128 are kept in maps of different key widths.
        let t = Multibit6::new();
        let nets = [
            (ip6("2001::"), 16),
            (ip6("2001:db8::"), 32),
            (ip6("2001:db8:8000::"), 33),
            (ip6("2001:db8:1::"), 48),
            (ip6("2001:db8:1:2::"), 64),
            (ip6("2001:db8:1:2:8000::"), 65),
            (ip6("2001:db8:1:2::1"), 128),
            (0, 0),
        ];
        for (i, &(n, l)) in nets.iter().enumerate() {
            t.insert_tagged(n, l, i as u32, i as u16 + 1).unwrap();
        }
        for (i, &(n, l)) in nets.iter().enumerate() {
            assert_eq!(
                t.get_tagged(n | 1, l),
                Some((i as u32, i as u16 + 1)),
                "/{l}"
            );
        }
        let mut all = t.to_vec();
        all.sort_by_key(|e| e.2);
        let want: Vec<(u128, u8, u32)> = (nets.iter().enumerate())
            .map(|(i, &(n, l))| (n, l, i as u32))
            .collect();
        assert_eq!(all, want);
        assert_eq!(t.len(), nets.len());
        assert_eq!(t.lookup(ip6("2001:db8:1:2:8000::5")), Some(5));
        assert_eq!(t.remove(ip6("2001:db8:1:2:8000::"), 65), Some(5));
        assert_eq!(t.lookup(ip6("2001:db8:1:2:8000::5")), Some(4));
        assert_eq!(t.get(ip6("2001:db8:1:2:8000::"), 65), None);
    }

    #[test]
    fn a_registered_reader_holds_back_group_reuse_until_quiescent() {
        let t = Lpm4::new();
        let r = t.readers().register();
        t.insert(ip("10.1.2.3"), 32, 1).unwrap();
        t.remove(ip("10.1.2.3"), 32);
        // The reader has not passed a quiescent point since the fold: a new group is taken.
        t.insert(ip("10.9.9.9"), 32, 2).unwrap();
        assert_eq!(t.lock().next[1], 2);
        assert_eq!(t.lock().pending.len(), 1);
        r.quiescent();
        t.remove(ip("10.9.9.9"), 32);
        t.insert(ip("10.7.7.7"), 32, 3).unwrap();
        assert_eq!(t.lock().next[1], 2, "the first folded group was reused");
        assert_eq!(t.lock().pending.len(), 1, "the second waits for the reader");
        r.offline();
        t.insert(ip("10.8.8.8"), 32, 4).unwrap();
        assert!(
            t.lock().pending.is_empty(),
            "an offline reader holds nothing back"
        );
        r.online();
        drop(r);
        assert_eq!(t.lookup(ip("10.7.7.7")), Some(3));
        assert_eq!(t.lookup(ip("10.8.8.8")), Some(4));
    }

    #[test]
    fn ipv6_nested_prefixes() {
        let t = Multibit6::new();
        t.insert(ip6("2001:db8::"), 32, 1).unwrap();
        t.insert(ip6("2001:db8:1::"), 48, 2).unwrap();
        t.insert(ip6("2001:db8:1:2::"), 64, 3).unwrap();
        t.insert(ip6("2001:db8:1:2::1"), 128, 4).unwrap();
        t.insert(ip6("2001:db8:1:2::1"), 127, 5).unwrap();
        assert_eq!(t.lookup(ip6("2001:db8:ffff::1")), Some(1));
        assert_eq!(t.lookup(ip6("2001:db8:1:ffff::1")), Some(2));
        assert_eq!(t.lookup(ip6("2001:db8:1:2::5")), Some(3));
        assert_eq!(t.lookup(ip6("2001:db8:1:2::1")), Some(4));
        assert_eq!(t.lookup(ip6("2001:db8:1:2::0")), Some(5));
        assert_eq!(t.lookup(ip6("2001:db9::")), None);
        assert_eq!(t.remove(ip6("2001:db8:1:2::1"), 128), Some(4));
        assert_eq!(t.lookup(ip6("2001:db8:1:2::1")), Some(5));
        assert_eq!(t.remove(ip6("2001:db8:1::"), 48), Some(2));
        assert_eq!(t.lookup(ip6("2001:db8:1:ffff::1")), Some(1));
        assert_eq!(t.lookup(ip6("2001:db8:1:2::1")), Some(5));
        t.remove(ip6("2001:db8:1:2::1"), 127);
        t.remove(ip6("2001:db8:1:2::"), 64);
        t.remove(ip6("2001:db8::"), 32);
        assert!(t.is_empty());
        // Every group was folded back: only the first level holds anything, and it is empty.
        let w = t.lock();
        let used: u32 = (1..w.next.len())
            .map(|l| w.next[l] - w.free[l].len() as u32)
            .sum();
        assert_eq!(used as usize, w.pending.len());
    }

    #[test]
    fn lookups_race_updates_without_wrong_answers() {
        // A reader thread looks up two addresses while the writer flips nested prefixes: each
        // answer must be one the table held at some point (never a value of another prefix).
        let t = Arc::new(Lpm4::new());
        t.insert(ip("10.0.0.0"), 8, 1).unwrap();
        let reader = t.clone();
        let rounds = race(
            t.readers(),
            move || {
                for x in 0..64u32 {
                    let a = ip("10.1.2.0") | x;
                    let v = reader.lookup(a);
                    assert!(matches!(v, Some(1) | Some(2) | Some(3)), "{a:#x}: {v:?}");
                    let b = ip("10.200.0.0") | x;
                    let v = reader.lookup(b);
                    assert!(matches!(v, Some(1) | Some(4)), "{b:#x}: {v:?}");
                }
            },
            || {
                for _ in 0..20_000 {
                    t.insert(ip("10.1.2.0"), 24, 2).unwrap();
                    t.insert(ip("10.1.2.0"), 27, 3).unwrap();
                    t.insert(ip("10.200.0.0"), 26, 4).unwrap();
                    t.remove(ip("10.1.2.0"), 27);
                    t.remove(ip("10.200.0.0"), 26);
                    t.remove(ip("10.1.2.0"), 24);
                }
            },
        );
        assert!(rounds > 0);
    }
}
