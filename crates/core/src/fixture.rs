//! A deterministic, realistic full Internet routing table, generated instead of downloaded: the
//! fixture of the full-table tests and benchmarks (issue 12).
//!
//! [`Fixture::generate`] turns a [`FixtureSpec`] (how many IPv4 and IPv6 prefixes, a seed, how
//! many next hops) into sorted prefix lists with next-hop indices. The same spec gives the same
//! table on every machine and every version of the `rand` crate (the generator carries its own
//! SplitMix64), so a measurement names its table by its spec.
//!
//! What makes it realistic:
//! - **Prefix lengths** follow the public tables (the shares in [`V4_SHARES`] and
//!   [`V6_SHARES`], with their sources);
//! - **clustering**: most prefixes sit inside *allocations* (IPv4 /18 blocks, IPv6 /32s) that
//!   hold many of them, as address space is handed out in blocks and announced piecemeal;
//! - **nesting**: more than half of the prefixes are more-specifics of another prefix of the
//!   table (potaroo counts 57 % in IPv6; the full fixture has 56 % in IPv4, 58 % in IPv6), so
//!   longest-prefix match matters: a /24 inside an announced /22 with another next hop;
//! - **next hops**: a few thousand, shared by the prefixes of one allocation most of the time
//!   (one origin, one best path), as in a table learned from a few neighbours.
//!
//! Addresses: IPv4 from the unicast space 1.0.0.0–223.255.255.255 without 10.0.0.0/8 (the
//! testbed uses 10.71.0.0/16 for its links and gateways), the private, shared, link-local,
//! loopback and documentation blocks; IPv6 from the five RIR /12s (2400::/12, 2600::/12,
//! 2800::/12, 2a00::/12, 2c00::/12), far from the testbed's fd71::/32. The routes are meant for
//! test namespaces only; installed on a host they would shadow real destinations.
//!
//! Nothing here performs I/O: writers (`ip -batch`, BIRD) live in `llr-lab`.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::collections::HashSet;

use crate::classify::IpPrefix;
use crate::FieldError;

/// IPv4 prefix-length shares, rounded from the public IPv4 table of 2024–2025 (about 1.0 M
/// entries; the CIDR Report and potaroo's AS131072 BGP table reports, bgp.potaroo.net/as2.0,
/// publish the per-length counts): /24 about 60 %, /22 and /23 together about 24 %, /16–/21
/// most of the rest, shorter ones rare, longer than /24 filtered by nearly everyone. The RIPE
/// NCC's RIS sees the same shape ("Visibility of prefix lengths in IPv4 and IPv6",
/// labs.ripe.net, 2019: /24s the majority, little beyond /24). Lengths that are not listed do
/// not occur. The shares add up to 1.
pub const V4_SHARES: &[(u8, f64)] = &[
    (8, 0.000_03),
    (9, 0.000_02),
    (10, 0.000_05),
    (11, 0.000_1),
    (12, 0.000_4),
    (13, 0.000_8),
    (14, 0.001_5),
    (15, 0.002_6),
    (16, 0.013_8),
    (17, 0.008_7),
    (18, 0.014_5),
    (19, 0.028),
    (20, 0.041),
    (21, 0.046),
    (22, 0.128),
    (23, 0.112),
    (24, 0.602_5),
];

/// IPv6 prefix-length shares, rounded from the public IPv6 table of 2024–2025 (about 220 k
/// entries, average prefix length 42.9, 57 % more-specifics: potaroo's AS131072 IPv6 BGP table
/// report, bgp.potaroo.net/v6/as2.0, April 2025; RIPE Labs 2019, as above: /32 and /48 are the
/// great majority, little beyond /48). /48 about 47 %, /32 about 16 %, then /44, /40, /36,
/// /46–/47 and /29. The shares add up to 1; their mean length is within 0.5 of potaroo's 42.9
/// (a test checks it).
pub const V6_SHARES: &[(u8, f64)] = &[
    (20, 0.000_5),
    (24, 0.000_5),
    (26, 0.000_5),
    (27, 0.000_5),
    (28, 0.004),
    (29, 0.02),
    (30, 0.005),
    (31, 0.003),
    (32, 0.16),
    (33, 0.015),
    (34, 0.01),
    (35, 0.005),
    (36, 0.04),
    (37, 0.005),
    (38, 0.01),
    (39, 0.005),
    (40, 0.075),
    (41, 0.005),
    (42, 0.01),
    (43, 0.005),
    (44, 0.085),
    (45, 0.01),
    (46, 0.035),
    (47, 0.025),
    (48, 0.466),
];

/// Most prefixes per family a spec may ask for (four times today's IPv4 table).
pub const MAX_PREFIXES: usize = 4_000_000;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixtureSpec {
    /// IPv4 prefixes.
    pub v4: usize,
    /// IPv6 prefixes.
    pub v6: usize,
    /// Seed: the same spec always gives the same table.
    pub seed: u64,
    /// Distinct next hops (indices `0..next_hops` in [`Route::next_hop`]).
    pub next_hops: u16,
}

impl FixtureSpec {
    /// Today's full table: 1 M IPv4 and 230 k IPv6 prefixes over 2000 next hops.
    pub fn full(seed: u64) -> FixtureSpec {
        FixtureSpec {
            v4: 1_000_000,
            v6: 230_000,
            seed,
            next_hops: 2000,
        }
    }

    /// Checks the sizes; errors name the field (`v4`, `v6`, `next-hops`).
    pub fn validate(&self) -> Result<(), FieldError> {
        for (field, n) in [("v4", self.v4), ("v6", self.v6)] {
            if n > MAX_PREFIXES {
                return Err(FieldError::new(
                    field,
                    format!("{n} prefixes; at most {MAX_PREFIXES}"),
                ));
            }
        }
        if self.next_hops == 0 {
            return Err(FieldError::new("next-hops", "must be at least 1"));
        }
        Ok(())
    }
}

/// One route of the fixture: a prefix (address in host order, host bits clear) and the index
/// of its next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route<A> {
    pub addr: A,
    pub len: u8,
    /// Index into the fixture's next hops: `0..spec.next_hops`.
    pub next_hop: u16,
}

/// An IPv4 route (`addr` as `u32`, as `Dir24_8` takes it).
pub type Route4 = Route<u32>;
/// An IPv6 route.
pub type Route6 = Route<u128>;

impl Route4 {
    /// The prefix as `IpPrefix`.
    pub fn prefix(&self) -> IpPrefix {
        IpPrefix::new(IpAddr::V4(Ipv4Addr::from(self.addr)), self.len)
            .expect("the generator clears host bits")
    }

    /// The `n`-th address of the prefix (wrapping inside it).
    pub fn host(&self, n: u64) -> Ipv4Addr {
        Ipv4Addr::from(self.addr | (n as u32 & host_mask(32, self.len) as u32))
    }
}

impl Route6 {
    /// The prefix as `IpPrefix`.
    pub fn prefix(&self) -> IpPrefix {
        IpPrefix::new(IpAddr::V6(Ipv6Addr::from(self.addr)), self.len)
            .expect("the generator clears host bits")
    }

    /// The `n`-th address of the prefix (wrapping inside it).
    pub fn host(&self, n: u128) -> Ipv6Addr {
        Ipv6Addr::from(self.addr | (n & host_mask(128, self.len)))
    }
}

impl fmt::Display for Route4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.addr), self.len)
    }
}

impl fmt::Display for Route6 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv6Addr::from(self.addr), self.len)
    }
}

/// Prefixes per length: `(length, count)` for the lengths that occur, shortest first.
pub type Histogram = Vec<(u8, usize)>;

/// A generated table: both families sorted by (address, length), no duplicate prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixture {
    pub spec: FixtureSpec,
    pub v4: Vec<Route4>,
    pub v6: Vec<Route6>,
}

impl Fixture {
    /// Generates the table of `spec` (about 3 s for the full table in a release build).
    pub fn generate(spec: FixtureSpec) -> Result<Fixture, FieldError> {
        spec.validate()?;
        // Independent streams per family: changing the IPv6 size leaves the IPv4 table alone.
        let v4 = Family::v4()
            .generate(spec.v4, spec.next_hops, &mut Rng::new(spec.seed ^ 0x0404))
            .into_iter()
            .map(|(a, len, nh)| Route4 {
                addr: a as u32,
                len,
                next_hop: nh,
            })
            .collect();
        let v6 = Family::v6()
            .generate(spec.v6, spec.next_hops, &mut Rng::new(spec.seed ^ 0x0606))
            .into_iter()
            .map(|(a, len, nh)| Route6 {
                addr: a,
                len,
                next_hop: nh,
            })
            .collect();
        Ok(Fixture { spec, v4, v6 })
    }

    /// Prefixes per length, `(length, count)` for the lengths that occur, IPv4 then IPv6.
    pub fn histogram(&self) -> (Histogram, Histogram) {
        fn hist(lens: impl Iterator<Item = u8>) -> Vec<(u8, usize)> {
            let mut h = [0usize; 129];
            for l in lens {
                h[usize::from(l)] += 1;
            }
            (0u8..=128)
                .zip(h)
                .filter(|&(_, n)| n > 0)
                .collect::<Vec<_>>()
        }
        (
            hist(self.v4.iter().map(|r| r.len)),
            hist(self.v6.iter().map(|r| r.len)),
        )
    }

    /// How many prefixes lie inside another prefix of the same family (more-specifics).
    pub fn nested(&self) -> (usize, usize) {
        fn count(routes: &[(u128, u8)], width: u8) -> usize {
            // Sorted by (address, length): every cover of a prefix comes before it, and a
            // prefix is nested iff it lies inside one of the covers still "open" on a stack.
            let mut stack: Vec<(u128, u8)> = Vec::new();
            let mut n = 0;
            for &(a, l) in routes {
                while let Some(&(sa, sl)) = stack.last() {
                    if sl < l && (a & net_mask(width, sl)) == sa {
                        break;
                    }
                    stack.pop();
                }
                n += usize::from(!stack.is_empty());
                stack.push((a, l));
            }
            n
        }
        let v4: Vec<(u128, u8)> = self.v4.iter().map(|r| (r.addr.into(), r.len)).collect();
        let v6: Vec<(u128, u8)> = self.v6.iter().map(|r| (r.addr, r.len)).collect();
        (count(&v4, 32), count(&v6, 128))
    }

    /// Slice `k` of `of`: the routes whose index (in either family's sorted list) is `k` mod
    /// `of` — spread over the whole address space, so withdrawing one slice touches every
    /// region of the table. The BIRD writer puts each slice in a protocol of its own.
    pub fn slice(&self, k: usize, of: usize) -> Fixture {
        let of = of.max(1);
        let pick = |i: usize| i % of == k;
        Fixture {
            spec: self.spec,
            v4: self
                .v4
                .iter()
                .enumerate()
                .filter(|(i, _)| pick(*i))
                .map(|(_, r)| *r)
                .collect(),
            v6: self
                .v6
                .iter()
                .enumerate()
                .filter(|(i, _)| pick(*i))
                .map(|(_, r)| *r)
                .collect(),
        }
    }

    /// `n` destinations drawn from the table (seeded): a random prefix of either family (in
    /// proportion to their sizes), then a random address inside it.
    pub fn destinations(&self, n: usize, seed: u64) -> Vec<IpAddr> {
        let mut rng = Rng::new(seed ^ 0xde57);
        let total = (self.v4.len() + self.v6.len()) as u64;
        if total == 0 {
            return Vec::new();
        }
        (0..n)
            .map(|_| {
                let i = rng.below(total) as usize;
                match self.v4.get(i) {
                    Some(r) => IpAddr::V4(r.host(rng.next())),
                    None => {
                        let r = &self.v6[i - self.v4.len()];
                        IpAddr::V6(r.host(u128::from(rng.next()) << 64 | u128::from(rng.next())))
                    }
                }
            })
            .collect()
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and fixed here, so the fixture never
/// changes with a dependency's version. Tests outside the crate seed it too.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is below 2^-40 for the sizes used here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn bits128(&mut self) -> u128 {
        u128::from(self.next()) << 64 | u128::from(self.next())
    }
}

fn net_mask(width: u8, len: u8) -> u128 {
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    if len == 0 {
        0
    } else {
        all & !(all >> len)
    }
}

fn host_mask(width: u8, len: u8) -> u128 {
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    all & !net_mask(width, len)
}

/// How one address family's table is laid out.
struct Family {
    width: u8,
    shares: &'static [(u8, f64)],
    /// Regions prefixes are drawn from (address, length).
    pool: Vec<(u128, u8)>,
    /// Blocks inside the pool that must never be overlapped.
    excluded: Vec<(u128, u8)>,
    /// Length of an allocation (a cluster of prefixes).
    block_len: u8,
    /// Prefixes per allocation, on average.
    per_block: usize,
    /// Chance that a prefix is a more-specific of one already placed.
    nest_p: f64,
    /// A more-specific lies at most this many bits below its cover.
    nest_span: u8,
    /// Chance that a prefix keeps the next hop of its allocation or cover.
    same_nh_p: f64,
}

fn v4(a: [u8; 4]) -> u128 {
    u128::from(u32::from(Ipv4Addr::from(a)))
}

fn v6(s: &str) -> u128 {
    u128::from(s.parse::<Ipv6Addr>().expect("a literal"))
}

impl Family {
    fn v4() -> Family {
        let excluded = [
            ([0, 0, 0, 0], 8),
            ([10, 0, 0, 0], 8),
            ([100, 64, 0, 0], 10),
            ([127, 0, 0, 0], 8),
            ([169, 254, 0, 0], 16),
            ([172, 16, 0, 0], 12),
            ([192, 0, 0, 0], 24),
            ([192, 0, 2, 0], 24),
            ([192, 168, 0, 0], 16),
            ([198, 18, 0, 0], 15),
            ([198, 51, 100, 0], 24),
            ([203, 0, 113, 0], 24),
        ]
        .into_iter()
        .map(|(a, l)| (v4(a), l))
        .collect::<Vec<_>>();
        Family {
            width: 32,
            shares: V4_SHARES,
            // Every unicast /8 but the excluded whole ones (0, 10, 127); 224/3 is multicast
            // and reserved.
            pool: (1u8..224)
                .filter(|o| ![10, 127].contains(o))
                .map(|o| (v4([o, 0, 0, 0]), 8))
                .collect(),
            excluded,
            block_len: 18,
            per_block: 12,
            nest_p: 0.42,
            nest_span: 8,
            same_nh_p: 0.8,
        }
    }

    fn v6() -> Family {
        Family {
            width: 128,
            shares: V6_SHARES,
            pool: ["2400::", "2600::", "2800::", "2a00::", "2c00::"]
                .into_iter()
                .map(|a| (v6(a), 12))
                .collect(),
            excluded: Vec::new(),
            block_len: 32,
            per_block: 3,
            nest_p: 0.53,
            nest_span: 16,
            same_nh_p: 0.8,
        }
    }

    fn overlaps_excluded(&self, a: u128, len: u8) -> bool {
        self.excluded.iter().any(|&(ea, el)| {
            let l = len.min(el);
            a & net_mask(self.width, l) == ea & net_mask(self.width, l)
        })
    }

    /// Whether a placed prefix (in `seen`) covers `(a, len)`.
    fn covered(&self, seen: &HashSet<(u128, u8)>, a: u128, len: u8) -> bool {
        let shortest = self.shares.first().map_or(0, |s| s.0);
        (shortest..len).any(|l| seen.contains(&(a & net_mask(self.width, l), l)))
    }

    /// A random prefix of length `len` inside `(base, base_len)` (`len >= base_len`).
    fn within(&self, rng: &mut Rng, base: u128, base_len: u8, len: u8) -> u128 {
        let free = net_mask(self.width, len) & host_mask(self.width, base_len);
        base | (rng.bits128() & free)
    }

    /// A random prefix of length `len` in the pool, clear of the excluded blocks (`None` if
    /// the draw hit one; the caller draws again).
    fn fresh(&self, rng: &mut Rng, len: u8) -> Option<u128> {
        let (base, base_len) = self.pool[rng.below(self.pool.len() as u64) as usize];
        let len = len.max(base_len);
        let a = self.within(rng, base, base_len, len);
        (!self.overlaps_excluded(a, len)).then_some(a)
    }

    /// Prefixes per length: the shares of `n`, rounded by largest remainder so they add up
    /// to exactly `n`.
    fn counts(&self, n: usize) -> Vec<(u8, usize)> {
        let total: f64 = self.shares.iter().map(|s| s.1).sum();
        let exact: Vec<f64> = self.shares.iter().map(|s| s.1 / total * n as f64).collect();
        let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
        let mut order: Vec<usize> = (0..exact.len()).collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (exact[a].fract(), exact[b].fract());
            rb.total_cmp(&ra).then(a.cmp(&b))
        });
        let short = n - counts.iter().sum::<usize>();
        for &i in order.iter().cycle().take(short) {
            counts[i] += 1;
        }
        self.shares.iter().map(|s| s.0).zip(counts).collect()
    }

    /// `(address, length, next hop)`, sorted by (address, length), no duplicates.
    fn generate(&self, n: usize, next_hops: u16, rng: &mut Rng) -> Vec<(u128, u8, u16)> {
        if n == 0 {
            return Vec::new();
        }
        let nh = |rng: &mut Rng| rng.below(u64::from(next_hops)) as u16;
        // Allocations: blocks of the pool that hold clusters of prefixes. Capped well below
        // the number of blocks the pool has, so drawing distinct ones stays quick.
        let capacity: u128 = self
            .pool
            .iter()
            .map(|&(_, l)| 1u128 << (self.block_len - l).min(100))
            .sum();
        let n_blocks = (n / self.per_block).clamp(16, (capacity / 4) as usize);
        let mut block_set = HashSet::with_capacity(n_blocks);
        let mut blocks: Vec<(u128, u16)> = Vec::with_capacity(n_blocks);
        let mut seen: HashSet<(u128, u8)> = HashSet::with_capacity(n);
        // Placed prefixes by length (address, next hop), the covers of longer ones.
        let mut by_len: Vec<Vec<(u128, u16)>> = vec![Vec::new(); usize::from(self.width) + 1];
        let mut out = Vec::with_capacity(n);
        for (len, count) in self.counts(n) {
            if len >= self.block_len {
                // Blocks that a shorter prefix covers whole are no place for fresh prefixes
                // (they would be nested by chance): replace them by uncovered ones.
                blocks.retain(|&(b, _)| !self.covered(&seen, b, self.block_len));
                let mut tries = 0u32;
                while blocks.len() < n_blocks && tries < 1 << 22 {
                    tries += 1;
                    if let Some(b) = self.fresh(rng, self.block_len) {
                        if !self.covered(&seen, b, self.block_len) && block_set.insert(b) {
                            blocks.push((b, nh(rng)));
                        }
                    }
                }
                assert!(!blocks.is_empty(), "fixture: no free allocation left");
            }
            let lo = len.saturating_sub(self.nest_span);
            let mut placed = 0;
            // Draws that failed in a row (a duplicate, or a fresh prefix inside a placed one).
            let mut fails = 0u32;
            while placed < count {
                let covers: usize = (lo..len).map(|l| by_len[usize::from(l)].len()).sum();
                // Crowded covers (every /24 of a /23 taken): after some failures, fresh.
                let nesting = covers > 0 && fails < 32 && rng.chance(self.nest_p);
                let candidate = if nesting {
                    // A more-specific of a random shorter prefix within `nest_span` bits.
                    let mut k = rng.below(covers as u64) as usize;
                    let mut pick = None;
                    for l in lo..len {
                        let v = &by_len[usize::from(l)];
                        if k < v.len() {
                            pick = Some((v[k], l));
                            break;
                        }
                        k -= v.len();
                    }
                    pick.map(|((ca, cnh), cl)| (self.within(rng, ca, cl, len), cnh))
                } else if len >= self.block_len {
                    let (b, bnh) = blocks[rng.below(blocks.len() as u64) as usize];
                    Some((self.within(rng, b, self.block_len, len), bnh))
                } else {
                    self.fresh(rng, len).map(|a| (a, nh(rng)))
                };
                let Some((a, inherited)) = candidate else {
                    continue;
                };
                // A prefix placed fresh should not land inside a placed one by chance (that
                // would nest far more than `nest_p` of the table once allocations fill up);
                // a few tries, then it may.
                let stray = !nesting && fails < 48 && self.covered(&seen, a, len);
                if stray || !seen.insert((a, len)) {
                    fails += 1;
                    assert!(fails < 1 << 24, "fixture: no room for /{len} prefixes");
                    continue;
                }
                fails = 0;
                let hop = if rng.chance(self.same_nh_p) {
                    inherited
                } else {
                    nh(rng)
                };
                by_len[usize::from(len)].push((a, hop));
                out.push((a, len, hop));
                placed += 1;
            }
        }
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v4: usize, v6: usize) -> FixtureSpec {
        FixtureSpec {
            v4,
            v6,
            seed: 7,
            next_hops: 2000,
        }
    }

    #[test]
    fn shares_add_up_and_v6_mean_matches_potaroo() {
        for shares in [V4_SHARES, V6_SHARES] {
            let s: f64 = shares.iter().map(|s| s.1).sum();
            assert!((s - 1.0).abs() < 1e-9, "{s}");
        }
        let mean: f64 = V6_SHARES.iter().map(|&(l, s)| f64::from(l) * s).sum();
        assert!((mean - 42.9).abs() < 0.5, "mean IPv6 length {mean}");
    }

    #[test]
    fn same_spec_same_table_and_seed_changes_it() {
        let a = Fixture::generate(spec(20_000, 4_000)).unwrap();
        let b = Fixture::generate(spec(20_000, 4_000)).unwrap();
        assert_eq!(a, b);
        let c = Fixture::generate(FixtureSpec {
            seed: 8,
            ..spec(20_000, 4_000)
        })
        .unwrap();
        assert_ne!(a.v4, c.v4);
        assert_ne!(a.v6, c.v6);
        // The families are independent streams.
        let d = Fixture::generate(spec(20_000, 1_000)).unwrap();
        assert_eq!(a.v4, d.v4);
    }

    #[test]
    fn sizes_lengths_and_uniqueness() {
        let f = Fixture::generate(spec(100_000, 20_000)).unwrap();
        assert_eq!((f.v4.len(), f.v6.len()), (100_000, 20_000));
        let (h4, h6) = f.histogram();
        let share = |h: &[(u8, usize)], len: u8, n: usize| {
            h.iter().find(|e| e.0 == len).map_or(0, |e| e.1) as f64 / n as f64
        };
        assert!((share(&h4, 24, 100_000) - 0.6026).abs() < 0.001, "{h4:?}");
        let v4_22_23 = share(&h4, 22, 100_000) + share(&h4, 23, 100_000);
        assert!((0.22..0.26).contains(&v4_22_23), "{h4:?}");
        assert!((share(&h6, 48, 20_000) - 0.466).abs() < 0.001, "{h6:?}");
        assert!(h4.iter().all(|e| (8..=24).contains(&e.0)), "{h4:?}");
        for w in f.v4.windows(2) {
            assert!(w[0] < w[1] && (w[0].addr, w[0].len) != (w[1].addr, w[1].len));
        }
        for w in f.v6.windows(2) {
            assert!((w[0].addr, w[0].len) < (w[1].addr, w[1].len));
        }
        for r in &f.v4 {
            assert_eq!(r.addr & !(net_mask(32, r.len) as u32), 0, "{r}");
            assert!(r.next_hop < 2000);
        }
        for r in &f.v6 {
            assert_eq!(r.addr & !net_mask(128, r.len), 0, "{r}");
        }
    }

    #[test]
    fn addresses_avoid_the_testbed_and_special_blocks() {
        let f = Fixture::generate(spec(200_000, 20_000)).unwrap();
        let fam = Family::v4();
        for r in &f.v4 {
            assert!(!fam.overlaps_excluded(r.addr.into(), r.len), "{r}");
            let first = r.addr >> 24;
            assert!((1..224).contains(&first), "{r}");
        }
        let fd71 = v6("fd71::");
        for r in &f.v6 {
            assert_eq!(r.addr >> 125, 1, "{r} in 2000::/3");
            assert_ne!(r.addr & net_mask(128, 32), fd71);
        }
    }

    #[test]
    fn clustered_and_nested_like_the_real_table() {
        let f = Fixture::generate(spec(100_000, 20_000)).unwrap();
        let (n4, n6) = f.nested();
        // Half of the prefixes are more-specifics (plus chance landings inside a cover).
        assert!((0.4..0.75).contains(&(n4 as f64 / 1e5)), "v4 nested {n4}");
        assert!((0.45..0.8).contains(&(n6 as f64 / 2e4)), "v6 nested {n6}");
        // Clustered: the /24s share far fewer /16s than random placement would give them.
        let s16: HashSet<u32> =
            f.v4.iter()
                .filter(|r| r.len == 24)
                .map(|r| r.addr >> 16)
                .collect();
        assert!(s16.len() < 10_000, "{} distinct /16s", s16.len());
        // A few thousand next hops, all used.
        let hops: HashSet<u16> = f.v4.iter().map(|r| r.next_hop).collect();
        assert!(hops.len() > 1900, "{}", hops.len());
    }

    #[test]
    fn nested_count_on_a_known_table() {
        let r = |a: [u8; 4], len| Route4 {
            addr: u32::from(Ipv4Addr::from(a)),
            len,
            next_hop: 0,
        };
        let f = Fixture {
            spec: spec(0, 0),
            v4: vec![
                r([1, 0, 0, 0], 16),
                r([1, 0, 1, 0], 24),
                r([1, 0, 2, 0], 23),
                r([1, 0, 3, 0], 24),
                r([1, 1, 0, 0], 24),
            ],
            v6: vec![],
        };
        assert_eq!(f.nested(), (3, 0));
    }

    #[test]
    fn destinations_fall_inside_their_prefixes() {
        let f = Fixture::generate(spec(5_000, 1_000)).unwrap();
        let d = f.destinations(2_000, 1);
        assert_eq!(d, f.destinations(2_000, 1));
        let v6 = d.iter().filter(|a| a.is_ipv6()).count();
        assert!((200..500).contains(&v6), "{v6} IPv6 of 2000");
        for a in d {
            let inside = match a {
                IpAddr::V4(a) => {
                    let a = u32::from(a);
                    f.v4.iter()
                        .any(|r| a & net_mask(32, r.len) as u32 == r.addr)
                }
                IpAddr::V6(a) => {
                    let a = u128::from(a);
                    f.v6.iter().any(|r| a & net_mask(128, r.len) == r.addr)
                }
            };
            assert!(inside, "{a}");
        }
    }

    #[test]
    fn slices_partition_the_table() {
        let f = Fixture::generate(spec(1_000, 300)).unwrap();
        let parts: Vec<Fixture> = (0..8).map(|k| f.slice(k, 8)).collect();
        assert_eq!(parts.iter().map(|p| p.v4.len()).sum::<usize>(), 1_000);
        assert_eq!(parts.iter().map(|p| p.v6.len()).sum::<usize>(), 300);
        let mut all: Vec<Route4> = parts.iter().flat_map(|p| p.v4.clone()).collect();
        all.sort();
        assert_eq!(all, f.v4);
        assert_eq!(parts[3].v4[1], f.v4[11]);
    }

    #[test]
    fn bad_specs_name_the_field() {
        let e = Fixture::generate(FixtureSpec {
            next_hops: 0,
            ..spec(1, 1)
        })
        .unwrap_err();
        assert_eq!(e.field, "next-hops");
        let e = Fixture::generate(spec(MAX_PREFIXES + 1, 0)).unwrap_err();
        assert_eq!(e.field, "v4");
        let empty = Fixture::generate(spec(0, 0)).unwrap();
        assert!(empty.v4.is_empty() && empty.destinations(10, 0).is_empty());
    }
}
