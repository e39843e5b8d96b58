//! The IPv4 (DIR-24-8) and IPv6 tables agree with a naive linear longest-prefix match.

use std::collections::HashMap;

use llr_core::fwd::{Lpm4, Lpm6};
use proptest::prelude::*;

fn mask32(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

fn naive4(routes: &HashMap<(u32, u8), u32>, a: u32) -> Option<u32> {
    routes
        .iter()
        .filter(|((net, len), _)| a & mask32(*len) == *net)
        .max_by_key(|((_, len), _)| *len)
        .map(|(_, v)| *v)
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u32, u8, u32),
    /// Remove the n-th (modulo) currently installed prefix, or a random one if none.
    RemoveExisting(usize),
    RemoveRandom(u32, u8),
}

fn addr() -> impl Strategy<Value = u32> {
    // Half the addresses crowd into a few /24s under 10.0.0.0/14, so prefixes overlap at every
    // level, including several longer than /24 in the same extension group.
    prop_oneof![
        any::<u32>(),
        any::<u32>().prop_map(|r| 0x0a00_0000 | (r & 0x0003_01ff))
    ]
}

fn plen() -> impl Strategy<Value = u8> {
    // Short prefixes rewrite millions of entries: keep them rare so cases stay fast.
    prop_oneof![1 => 0u8..8, 7 => 8u8..=24, 8 => 25u8..=32]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (addr(), plen(), 0u32..1000).prop_map(|(a, l, v)| Op::Insert(a, l, v)),
        3 => any::<usize>().prop_map(Op::RemoveExisting),
        1 => (addr(), plen()).prop_map(|(a, l)| Op::RemoveRandom(a, l)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn dir24_8_matches_naive(ops in prop::collection::vec(op(), 1..40), probes in prop::collection::vec(any::<u32>(), 32)) {
        let t = Lpm4::new();
        let mut naive: HashMap<(u32, u8), u32> = HashMap::new();
        let mut interesting = probes.clone();
        for op in ops {
            match op {
                Op::Insert(a, l, v) => {
                    let old = t.insert_tagged(a, l, v, (v % 1024) as u16).unwrap();
                    prop_assert_eq!(old, naive.insert((a & mask32(l), l), v));
                    interesting.extend([a, a ^ 1, a | 0xff, a & !0xff, a.wrapping_add(1 << (32 - u32::from(l.max(1))))]);
                }
                Op::RemoveExisting(n) => {
                    let mut keys: Vec<_> = naive.keys().copied().collect();
                    keys.sort_unstable();
                    if let Some(&(net, l)) = keys.get(n % keys.len().max(1)) {
                        prop_assert_eq!(t.remove(net | (n as u32 & !mask32(l)), l), naive.remove(&(net, l)));
                    }
                }
                Op::RemoveRandom(a, l) => {
                    prop_assert_eq!(t.remove(a, l), naive.remove(&(a & mask32(l), l)));
                }
            }
            // Batched lookups (chunks of the batch size and a ragged end) give the same.
            let mut many = vec![None; interesting.len()];
            t.lookup_many(&interesting, &mut many);
            for (&a, &got) in interesting.iter().zip(&many) {
                let want = naive4(&naive, a);
                prop_assert_eq!(t.lookup(a), want, "addr {:#010x}", a);
                prop_assert_eq!(got, want, "addr {:#010x} batched", a);
            }
        }
        prop_assert_eq!(t.len(), naive.len());
        for (&(net, l), &v) in &naive {
            prop_assert_eq!(t.get_tagged(net, l), Some((v, (v % 1024) as u16)));
        }
    }

    #[test]
    fn lpm6_matches_naive(ops in prop::collection::vec((any::<u128>(), 0u8..=128, 0u32..100, any::<bool>()), 1..40), probes in prop::collection::vec(any::<u128>(), 16)) {
        let m = |l: u8| u128::MAX.checked_shl(128 - u32::from(l)).unwrap_or(0);
        let t = Lpm6::default();
        let mut naive: HashMap<(u128, u8), u32> = HashMap::new();
        let mut interesting = probes;
        for (a, l, v, ins) in ops {
            // Share the top 16 bits so prefixes nest; half share 44, so that groups of the
            // deeper (4-bit) levels fill, overlap and fold back too.
            let a = if v % 2 == 0 {
                (0x2001u128 << 112) | (a >> 16)
            } else {
                (0x2001_0db8_0123u128 << 80) | (a >> 44)
            };
            if ins {
                // The tag rides along with the value (checked by exact gets below).
                prop_assert_eq!(t.insert_tagged(a, l, v, v as u16).unwrap(), naive.insert((a & m(l), l), v));
            } else {
                prop_assert_eq!(t.remove(a, l), naive.remove(&(a & m(l), l)));
            }
            prop_assert_eq!(t.get_tagged(a, l), naive.get(&(a & m(l), l)).map(|&v| (v, v as u16)));
            interesting.extend([a, a ^ 1]);
            for &x in &interesting {
                let want = naive.iter().filter(|((n, l), _)| x & m(*l) == *n).max_by_key(|((_, l), _)| *l).map(|(_, v)| *v);
                prop_assert_eq!(t.lookup(x), want);
            }
        }
        // Every record comes back as it went in, whatever the width of its key.
        let mut all = t.to_vec();
        all.sort_unstable();
        let mut want: Vec<(u128, u8, u32)> = naive.iter().map(|(&(n, l), &v)| (n, l, v)).collect();
        want.sort_unstable();
        prop_assert_eq!(all, want);
    }
}

/// Prefixes crowded under one /32 with lengths around the Poptrie's node boundaries (20, 26,
/// 32, 38, 44, 50, …), so nodes are created, rebuilt, copied on the path and dropped again;
/// some short ones land in the direct table's fallback words.
fn crowded6() -> impl Strategy<Value = (u128, u8)> {
    let base = 0x2001_0db8u128 << 96;
    (
        any::<u128>(),
        prop_oneof![1 => 0u8..=20, 6 => 21u8..=56, 2 => 57u8..=128],
    )
        .prop_map(move |(r, l)| (base | (r >> 100) << 60 | (r & 0xff), l))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn poptrie_matches_naive_and_frees_everything(ops in prop::collection::vec((crowded6(), 0u32..8, any::<bool>()), 1..60)) {
        let m = |l: u8| u128::MAX.checked_shl(128 - u32::from(l)).unwrap_or(0);
        let t = Lpm6::default();
        let mut naive: HashMap<(u128, u8), u32> = HashMap::new();
        let mut probes = vec![0x2001_0db8u128 << 96, u128::MAX];
        for ((a, l), v, ins) in ops {
            if ins {
                prop_assert_eq!(t.insert(a, l, v).unwrap(), naive.insert((a & m(l), l), v));
            } else {
                prop_assert_eq!(t.remove(a, l), naive.remove(&(a & m(l), l)));
            }
            prop_assert_eq!(t.verify(), Ok(()));
            probes.extend([a, a ^ 1, a | !m(l), a & m(l), (a & m(l)).wrapping_sub(1)]);
            // Batched lookups (in chunks of the batch size and a ragged end) give the same.
            let mut many = vec![None; probes.len()];
            t.lookup_many(&probes, &mut many);
            for (&x, &got) in probes.iter().zip(&many) {
                let want = naive.iter().filter(|((n, l), _)| x & m(*l) == *n).max_by_key(|((_, l), _)| *l).map(|(_, v)| *v);
                prop_assert_eq!(t.lookup(x), want, "{:#x}", x);
                prop_assert_eq!(got, want, "{:#x} batched", x);
            }
        }
        for (n, l) in naive.keys().copied().collect::<Vec<_>>() {
            prop_assert!(t.remove(n, l).is_some());
        }
        prop_assert!(t.is_empty());
        let mem = t.memory();
        prop_assert_eq!(mem.groups_used, 0, "every node and leaf array was retired");
        prop_assert_eq!(mem.first_level, 0, "every direct entry is empty again");
    }
}

/// The first level's page count is kept between reports (counting it scans up to 128 MiB), so
/// a report must still see every insert and removal made since the last one.
#[test]
fn memory_reports_follow_inserts_and_removals() {
    let t4 = Lpm4::new();
    let empty = t4.memory().first_level;
    t4.insert(0x0a00_0000, 24, 1).unwrap();
    let one = t4.memory().first_level;
    assert!(
        one > empty,
        "a /24 commits a page of the first level: {empty} → {one}"
    );
    assert_eq!(t4.memory().first_level, one, "unchanged table, same count");
    t4.insert(0xc0a8_0000, 24, 2).unwrap();
    assert!(t4.memory().first_level > one, "a /24 on another page");
    t4.remove(0xc0a8_0000, 24).unwrap();
    assert_eq!(t4.memory().first_level, one);
    t4.remove(0x0a00_0000, 24).unwrap();
    assert_eq!(t4.memory().first_level, empty);

    let t6 = Lpm6::default();
    let empty = t6.memory().first_level;
    let net = 0x2001_0db8u128 << 96;
    t6.insert(net, 24, 1).unwrap();
    let one = t6.memory().first_level;
    assert!(one > empty, "a /24 is a direct entry: {empty} → {one}");
    assert_eq!(t6.memory().first_level, one);
    t6.insert(0x2a00u128 << 112, 16, 2).unwrap();
    assert!(
        t6.memory().first_level > one,
        "a /16 fills the short table's page"
    );
    t6.remove(0x2a00u128 << 112, 16).unwrap();
    t6.remove(net, 24).unwrap();
    assert_eq!(t6.memory().first_level, empty);
}
