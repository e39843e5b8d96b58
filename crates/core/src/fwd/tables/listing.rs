//! Routes for operator views: ordered pages and summaries.
//!
//! A page is found by scanning the writers' records and keeping the `n` smallest routes after a
//! cursor in a bounded heap, so a listing of any size holds one page, never a copy of the table
//! (1M IPv4 routes would be 20–40 MB as a sorted copy). Each scan holds the writers' lock for
//! one pass over the records; lookups never wait for it, route updates wait at most one pass.

use core::net::IpAddr;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use super::{NextHop, RouteTable};
use crate::classify::IpPrefix;

/// Which routes a listing keeps. Every field set must match.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteFilter {
    /// Routes inside this prefix, itself included (`ip route show root PREFIX`).
    pub within: Option<IpPrefix>,
    /// Routes out of this interface.
    pub ifindex: Option<u32>,
    /// Routes through this gateway.
    pub gateway: Option<IpAddr>,
    /// Connected (on-link) routes only (`Some(true)`) or routes via a gateway only
    /// (`Some(false)`).
    pub connected: Option<bool>,
    /// IPv4 only (`Some(false)`) or IPv6 only (`Some(true)`).
    pub ipv6: Option<bool>,
}

impl RouteFilter {
    fn wants_family(&self, v6: bool) -> bool {
        self.ipv6.is_none_or(|f| f == v6) && self.within.is_none_or(|p| p.addr().is_ipv6() == v6)
    }

    fn keeps_nexthop(&self, nh: &NextHop) -> bool {
        self.ifindex.is_none_or(|i| i == nh.ifindex)
            && self.gateway.is_none_or(|g| Some(g) == nh.gateway)
            && self.connected.is_none_or(|c| c == nh.gateway.is_none())
    }

    /// True if `p` passes the prefix and family parts.
    fn keeps_prefix(&self, p: &IpPrefix) -> bool {
        self.wants_family(p.addr().is_ipv6())
            && self
                .within
                .is_none_or(|w| w.len() <= p.len() && w.contains(p.addr()))
    }

    /// True if the route passes every part.
    pub fn keeps(&self, p: &IpPrefix, nh: &NextHop) -> bool {
        self.keeps_prefix(p) && self.keeps_nexthop(nh)
    }
}

/// The order of every listing: IPv4 before IPv6, then by network address, then shorter first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RouteKey {
    v6: bool,
    addr: u128,
    len: u8,
}

impl RouteKey {
    /// The key of `p`.
    pub fn of(p: &IpPrefix) -> RouteKey {
        let (v6, addr) = match p.addr() {
            IpAddr::V4(a) => (false, u128::from(u32::from(a))),
            IpAddr::V6(a) => (true, u128::from(a)),
        };
        RouteKey {
            v6,
            addr,
            len: p.len(),
        }
    }

    fn prefix(&self) -> Option<IpPrefix> {
        let a = if self.v6 {
            IpAddr::V6(self.addr.into())
        } else {
            IpAddr::V4((self.addr as u32).into())
        };
        IpPrefix::new(a, self.len).ok()
    }
}

/// Route counts of a table (or of what a filter keeps): by prefix length and by next hop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteSummary {
    /// Routes counted.
    pub total: u64,
    /// `(ipv6, length) → routes`, in order.
    pub by_len: BTreeMap<(bool, u8), u64>,
    /// Next hop → routes, most routes first (ties by next hop), at most `top` of them.
    pub by_nexthop: Vec<(NextHop, u64)>,
    /// Distinct next hops counted (more than `by_nexthop` holds when it was cut at `top`).
    pub nexthops: usize,
}

impl RouteTable {
    /// Calls `f` with every route's key and next hop id in the families `filter` wants.
    fn scan_keys(&self, filter: &RouteFilter, mut f: impl FnMut(RouteKey, u32)) {
        if filter.wants_family(false) {
            self.v4.scan(|net, len, id| {
                let addr = u128::from(net);
                f(
                    RouteKey {
                        v6: false,
                        addr,
                        len,
                    },
                    id,
                )
            });
        }
        if filter.wants_family(true) {
            self.v6.scan(|net, len, id| {
                f(
                    RouteKey {
                        v6: true,
                        addr: net,
                        len,
                    },
                    id,
                )
            });
        }
    }

    /// Whether the route `k` → next hop `id` passes `filter` (`memo` caches next hop verdicts).
    fn keeps(
        &self,
        filter: &RouteFilter,
        k: &RouteKey,
        id: u32,
        memo: &mut HashMap<u32, bool>,
    ) -> bool {
        let Some(p) = k.prefix() else { return false };
        if !filter.keeps_prefix(&p) {
            return false;
        }
        *memo.entry(id).or_insert_with(|| {
            self.nexthops
                .get(id)
                .is_some_and(|nh| filter.keeps_nexthop(&nh))
        })
    }

    /// The first `n` routes after `after` (all from the start when `None`) in [`RouteKey`]
    /// order that `filter` keeps. A listing pages through the table by passing the last prefix
    /// of each page as the next `after`; routes changed between pages show as they are when
    /// their page is taken, like a netlink dump.
    pub fn page(
        &self,
        after: Option<IpPrefix>,
        n: usize,
        filter: &RouteFilter,
    ) -> Vec<(IpPrefix, NextHop)> {
        if n == 0 {
            return Vec::new();
        }
        let after = after.as_ref().map(RouteKey::of);
        let mut heap: BinaryHeap<(RouteKey, u32)> = BinaryHeap::with_capacity(n.min(1 << 16) + 1);
        let mut memo = HashMap::new();
        let everything = *filter == RouteFilter::default();
        // Past the IPv4 routes, a page has no need to scan them.
        let mut scan = *filter;
        if after.is_some_and(|a| a.v6) {
            scan.ipv6 = Some(true);
        }
        self.scan_keys(&scan, |k, id| {
            if after.is_some_and(|a| k <= a)
                || heap.len() == n && heap.peek().is_some_and(|t| k >= t.0)
            {
                return;
            }
            if !everything && !self.keeps(filter, &k, id, &mut memo) {
                return;
            }
            heap.push((k, id));
            if heap.len() > n {
                heap.pop();
            }
        });
        heap.into_sorted_vec()
            .into_iter()
            .filter_map(|(k, id)| Some((k.prefix()?, self.nexthops.get(id)?)))
            .collect()
    }

    /// Counts of the routes `filter` keeps, by length and by next hop (the `top` next hops with
    /// the most routes).
    pub fn summary(&self, filter: &RouteFilter, top: usize) -> RouteSummary {
        let mut s = RouteSummary::default();
        let mut per_id: HashMap<u32, u64> = HashMap::new();
        let mut memo = HashMap::new();
        self.scan_keys(filter, |k, id| {
            if self.keeps(filter, &k, id, &mut memo) {
                s.total += 1;
                *s.by_len.entry((k.v6, k.len)).or_default() += 1;
                *per_id.entry(id).or_default() += 1;
            }
        });
        s.nexthops = per_id.len();
        let mut v: Vec<(NextHop, u64)> = (per_id.into_iter())
            .filter_map(|(id, c)| Some((self.nexthops.get(id)?, c)))
            .collect();
        v.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then_with(|| (a.0.ifindex, a.0.gateway).cmp(&(b.0.ifindex, b.0.gateway)))
        });
        v.truncate(top);
        s.by_nexthop = v;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IpPrefix {
        let (a, l) = s.split_once('/').unwrap();
        IpPrefix::new(a.parse().unwrap(), l.parse().unwrap()).unwrap()
    }

    fn nh(ifindex: u32, gw: Option<&str>) -> NextHop {
        NextHop {
            ifindex,
            gateway: gw.map(|g| g.parse().unwrap()),
        }
    }

    /// Paging with any page size yields the whole table once, in order, and filters keep
    /// exactly what they say.
    #[test]
    fn pages_cover_the_table_in_order() {
        let t = RouteTable::new();
        let mut want = Vec::new();
        for i in 0..300u32 {
            let v4 = IpPrefix::new(IpAddr::V4((0x0a00_0000 + (i << 8)).into()), 24).unwrap();
            let v6 = IpPrefix::new(
                IpAddr::V6((0x2001_0db8_u128 << 96 | u128::from(i) << 64).into()),
                64,
            )
            .unwrap();
            let hop = nh(2 + i % 3, (i % 2 == 0).then_some("10.255.0.1"));
            t.insert(v4, hop).unwrap();
            t.insert(v6, nh(2 + i % 3, None)).unwrap();
            want.push((v4, hop));
            want.push((v6, nh(2 + i % 3, None)));
        }
        for extra in ["10.0.0.0/8", "10.0.0.0/16", "0.0.0.0/0", "::/0"] {
            t.insert(p(extra), nh(9, None)).unwrap();
            want.push((p(extra), nh(9, None)));
        }
        want.sort_by_key(|(p, _)| RouteKey::of(p));
        for size in [1, 7, 64, 1000] {
            let mut got = Vec::new();
            let mut after = None;
            loop {
                let page = t.page(after, size, &RouteFilter::default());
                assert!(page.len() <= size);
                let Some(last) = page.last() else { break };
                after = Some(last.0);
                got.extend(page);
            }
            assert_eq!(got, want, "page size {size}");
        }
        let f = RouteFilter {
            within: Some(p("10.0.0.0/16")),
            ..Default::default()
        };
        let got = t.page(None, usize::MAX >> 1, &f);
        // 10.0.0.0/16 itself and the /24s inside it (i < 256), not 10.0.0.0/8
        assert_eq!(got.len(), 1 + 256);
        assert!(got
            .iter()
            .all(|(q, _)| f.within.unwrap().contains(q.addr()) && q.len() >= 16));
        let f = RouteFilter {
            ifindex: Some(3),
            connected: Some(false),
            ipv6: Some(false),
            ..Default::default()
        };
        let got = t.page(None, 1000, &f);
        let n = want.iter().filter(|(q, h)| f.keeps(q, h)).count();
        assert_eq!(got.len(), n);
        assert!(
            n > 0
                && got
                    .iter()
                    .all(|(q, h)| q.addr().is_ipv4() && h.ifindex == 3 && h.gateway.is_some())
        );

        let s = t.summary(&RouteFilter::default(), 2);
        assert_eq!(s.total, want.len() as u64);
        assert_eq!(s.by_len[&(false, 24)], 300);
        assert_eq!(s.by_len[&(true, 64)], 300);
        assert_eq!(s.by_len[&(true, 0)], 1);
        assert_eq!(s.by_nexthop.len(), 2);
        assert_eq!(s.nexthops, 7); // 3 ifs × (gw, none) for v4 share with v6's on-link + if 9
        assert!(s.by_nexthop[0].1 >= s.by_nexthop[1].1);
    }
}
