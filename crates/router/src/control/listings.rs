//! Listings and lookups: `fib` (paged out of the table, never copied whole), `fib.summary`,
//! `fib.get`, `neighbours`, `flow.list` (filtered, sorted, top N) and `flow.get`.

use std::net::IpAddr;

use llr_core::classify::IpPrefix;
use llr_core::flow::FlowInfo;
use llr_core::fwd::{RouteFilter, RouteSummary};
use llr_core::wire::build::{frame, FrameSpec};
use llr_ops::ctl::{CtlError, Listing};
use llr_ops::query::{
    Family, FlowLookupView, FlowQuery, FlowSort, LengthCount, ListingEnd, NextHopCount,
    PacketQuery, RouteLookupView, RouteQuery, RouteSummaryView,
};
use llr_ops::views::{format_mac, NeighbourView, RouteView};
use serde_json::Value;

use super::{config_words, err, prefix_of, RouterCtl, State};
use crate::metrics::name_of;

/// Routes taken from the table per scan: each scan is one pass over the writers' records
/// under their lock, so fewer, larger pages make a full listing cheaper, and this many routes
/// (about 40 bytes each while they wait to be sent) is all a listing holds.
const PAGE: usize = 16 * 1024;

/// Next hops `fib.summary` names (the rest are counted).
const SUMMARY_NEXT_HOPS: usize = 20;

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, CtlError> {
    serde_json::to_value(v).map_err(|e| err("result", e.to_string()))
}

impl State {
    /// The ifindex of `name` among the router's interfaces.
    fn router_ifindex(&self, field: &str, name: &str) -> Result<u32, CtlError> {
        self.interface_names()
            .into_iter()
            .find(|(_, n)| n == name)
            .map(|(i, _)| i)
            .ok_or_else(|| {
                err(
                    field,
                    format!(
                        "`{name}` is not one of the router's interfaces ({})",
                        self.cfg.interfaces.join(", ")
                    ),
                )
            })
    }

    fn route_filter(&self, q: &RouteQuery) -> Result<RouteFilter, CtlError> {
        Ok(RouteFilter {
            within: q.prefix.as_deref().map(prefix_of).transpose()?,
            ifindex: (q.dev.as_deref())
                .map(|d| self.router_ifindex("dev", d))
                .transpose()?,
            gateway: q.via,
            connected: q.connected,
            ipv6: q.family.map(|f| f == Family::Ipv6),
        })
    }
}

fn route_view(names: &[(u32, String)], p: &IpPrefix, nh: &llr_core::fwd::NextHop) -> RouteView {
    use llr_core::fwd::RouteKind as K;
    let dev = match nh.kind() {
        K::Unicast => name_of(names, nh.ifindex),
        K::Blackhole => "(blackhole)".into(),
        K::Unreachable => "(unreachable)".into(),
        K::Prohibit => "(prohibit)".into(),
        K::Throw => "(throw)".into(),
        K::Group => "(multipath)".into(),
        K::Kernel => "(the kernel's)".into(),
    };
    RouteView {
        prefix: p.to_string(),
        via: nh.gateway.map(|g| g.to_string()),
        dev,
        ifindex: nh.ifindex,
    }
}

/// The name of interface `i`: the router's, else any of the namespace's (rules name `lo` and
/// interfaces llrouter does not serve).
fn any_name(names: &[(u32, String)]) -> impl Fn(u32) -> String + '_ {
    move |i| match names.iter().find(|n| n.0 == i) {
        Some((_, n)) => n.clone(),
        None => llr_io::ebpf::ifname(i).unwrap_or_else(|_| name_of(names, i)),
    }
}

fn check_limit(limit: Option<usize>) -> Result<usize, CtlError> {
    match limit {
        Some(0) => Err(err("limit", "must be at least 1 (leave it out for all)")),
        Some(n) => Ok(n),
        None => Ok(usize::MAX),
    }
}

impl RouterCtl {
    /// `fib`: the routes `q` keeps, in `RouteKey` order, at most `limit`, page by page.
    pub fn list_fib(
        &self,
        limit: Option<usize>,
        q: &RouteQuery,
        out: &mut Listing<'_>,
    ) -> Result<Value, CtlError> {
        let limit = check_limit(limit)?;
        let (filter, names) = {
            let st = self.lock();
            (st.route_filter(q)?, st.interface_names())
        };
        let routes = self.fwd.routes();
        let mut after = None;
        let mut listed = 0usize;
        while listed < limit {
            let want = PAGE.min(limit - listed);
            let page = routes.page(after, want, &filter);
            for (p, nh) in &page {
                out.push(&route_view(&names, p, nh))?;
            }
            listed += page.len();
            match page.last() {
                Some(last) if page.len() == want => after = Some(last.0),
                _ => break,
            }
        }
        let total = routes.len() as u64;
        let matched = if listed < limit {
            listed as u64
        } else if filter == RouteFilter::default() {
            total
        } else {
            routes.summary(&filter, 0).total
        };
        to_value(&ListingEnd {
            listed: listed as u64,
            matched,
            total,
        })
    }

    /// Every route, for a caller in this process (tests comparing tables): `(routes, total)`.
    pub fn fib_all(&self) -> (Vec<RouteView>, usize) {
        use serde::Deserialize;
        let v = llr_ops::ctl::listing::collect("routes", |out| {
            self.list_fib(None, &RouteQuery::default(), out)
        })
        .expect("listing into memory");
        #[derive(serde::Deserialize)]
        struct Gathered {
            routes: Vec<RouteView>,
            total: usize,
        }
        let g = Gathered::deserialize(v).expect("route views");
        (g.routes, g.total)
    }

    /// `fib.summary`: counts by length and by next hop.
    pub fn fib_summary(&self, q: &RouteQuery) -> Result<RouteSummaryView, CtlError> {
        let (filter, names) = {
            let st = self.lock();
            (st.route_filter(q)?, st.interface_names())
        };
        let s: RouteSummary = self.fwd.routes().summary(&filter, SUMMARY_NEXT_HOPS);
        Ok(RouteSummaryView {
            total: s.total,
            by_length: (s.by_len.iter())
                .map(|(&(v6, length), &routes)| LengthCount {
                    family: if v6 { Family::Ipv6 } else { Family::Ipv4 },
                    length,
                    routes,
                })
                .collect(),
            by_next_hop: (s.by_nexthop.iter())
                .map(|(nh, routes)| NextHopCount {
                    via: nh.gateway.map(|g| g.to_string()),
                    dev: name_of(&names, nh.ifindex),
                    routes: *routes,
                })
                .collect(),
            next_hops: s.nexthops,
        })
    }

    /// The frame `p` describes, arriving on its `iif` (default: the first interface), and the
    /// class the classifier's rules give it: `(frame, iif index, iif name, class index)`.
    fn query_frame(
        &self,
        st: &State,
        p: &PacketQuery,
    ) -> Result<(Vec<u8>, u32, String, usize), CtlError> {
        let iif = match &p.iif {
            Some(n) => n.clone(),
            None => st.cfg.interfaces.first().cloned().unwrap_or_default(),
        };
        let ifindex = st.router_ifindex("iif", &iif)?;
        let src = match (p.src, p.dst) {
            (Some(s), d) if s.is_ipv4() != d.is_ipv4() => {
                return Err(err(
                    "src",
                    "source and destination are of different IP versions",
                ))
            }
            (Some(s), _) => s,
            (None, IpAddr::V4(_)) => IpAddr::V4(0.into()),
            (None, IpAddr::V6(_)) => IpAddr::V6(0u128.into()),
        };
        if p.dscp.is_some_and(|d| d > 63) {
            return Err(err("dscp", "must be within 0..=63"));
        }
        let f = frame(&FrameSpec {
            src,
            dst: p.dst,
            protocol: p.protocol().map_err(|e| err("proto", e))?,
            dscp: p.dscp.unwrap_or(0),
            src_port: p.sport.unwrap_or(0),
            dst_port: p.dport.unwrap_or(0),
            ..FrameSpec::default()
        });
        let class = self.rule_set(st, &st.rules)?.classify(&f, None, ifindex);
        Ok((f, ifindex, iif, class))
    }

    /// `fib.get`: what the forwarder does with one packet.
    pub fn fib_get(&self, p: &PacketQuery) -> Result<RouteLookupView, CtlError> {
        let st = self.lock();
        let (frame, ifindex, iif, class) = self.query_frame(&st, p)?;
        let names = st.interface_names();
        let class = st
            .cfg
            .classes
            .get(class)
            .map_or("?".into(), |c| c.name.clone());
        drop(st);
        let dst = p.dst;
        let fwd = self.fwd.load();
        let local = fwd
            .interfaces
            .iter()
            .any(|i| i.addrs.iter().any(|a| a.addr == dst));
        let routes = self.fwd.routes();
        let v6 = dst.is_ipv6();
        let (nh, route, rule, table) = if fwd.policy.is_plain(v6) {
            let nh = {
                let _reader = routes.reader();
                routes.lookup(dst)
            };
            // The prefix that matched: the longest one holding this next hop that contains dst.
            let max = if dst.is_ipv4() { 32 } else { 128 };
            let route = nh.and_then(|nh| {
                (0..=max).rev().find_map(|len| {
                    let net = IpPrefix::containing(dst, len);
                    (routes.get(net)?.0 == nh).then_some(net)
                })
            });
            (nh, route, None, None)
        } else {
            let meta =
                llr_core::wire::parse_frame(&frame).map_err(|e| err("packet", e.to_string()))?;
            let flow = llr_core::fwd::Flow::of(&frame, &meta, ifindex);
            let vrf = fwd.interfaces.get(ifindex).and_then(|i| i.vrf_table);
            let hit = {
                let _reader = routes.reader();
                fwd.policy.route_by(&routes, &flow, vrf)
            };
            let rule = hit.and_then(|h| fwd.policy.rules(v6).get(h.rule));
            let rule = rule.map(|r| r.describe(any_name(&names)));
            let route = hit.and_then(|h| h.route);
            (
                hit.map(|h| h.next_hop),
                route.map(|(_, len)| IpPrefix::containing(dst, len)),
                Some(rule.unwrap_or_else(|| "none: no rule found a route".into())),
                route.map(|(t, _)| t),
            )
        };
        // A multipath route: the member this packet's flow takes.
        let members = nh.and_then(|h| h.group_id()).and_then(|g| routes.group(g));
        let multipath: Vec<String> = (members.into_iter().flatten())
            .map(|m| {
                let via = m
                    .next_hop
                    .gateway
                    .map(|g| format!("via {g} "))
                    .unwrap_or_default();
                let dev = any_name(&names)(m.next_hop.ifindex);
                format!("{via}dev {dev} weight {}", m.weight)
            })
            .collect();
        let nh = match nh.and_then(|h| h.group_id()) {
            Some(g) => fwd.pick(&frame, g),
            None => nh,
        };
        let next_hop = nh.map(|h| h.gateway.unwrap_or(dst));
        let neighbour = nh
            .zip(next_hop)
            .and_then(|(h, a)| fwd.neighbors.get(h.ifindex, a))
            .map(|m| format_mac(&m));
        let mtu = nh
            .and_then(|h| fwd.interfaces.get(h.ifindex))
            .map(|i| i.mtu);
        use llr_core::fwd::RouteKind as K;
        let verdict = match nh.map(|h| h.kind()) {
            _ if local => "local: to the kernel",
            None | Some(K::Throw) => "no route: dropped, answered with ICMP net unreachable",
            Some(K::Blackhole) => "blackhole: dropped silently",
            Some(K::Unreachable) => "unreachable: dropped, answered with ICMP unreachable",
            Some(K::Prohibit) => {
                "prohibit: dropped, answered with ICMP administratively prohibited"
            }
            Some(K::Kernel | K::Group) => "the kernel's route: to the kernel",
            Some(K::Unicast) if neighbour.is_none() => {
                "no neighbour: held while the kernel resolves it"
            }
            Some(K::Unicast) => "forward",
        };
        Ok(RouteLookupView {
            dst: dst.to_string(),
            route: route.zip(nh).map(|(r, h)| route_view(&names, &r, &h)),
            next_hop: next_hop.map(|a| a.to_string()),
            neighbour,
            mtu,
            verdict: verdict.into(),
            class,
            iif,
            rule,
            table,
            multipath,
        })
    }

    /// `fib.rules`: the routing rules as the forwarder evaluates them.
    pub fn fib_rules(&self) -> llr_ops::query::RoutingRulesView {
        let names = self.lock().interface_names();
        let fwd = self.fwd.load();
        let p = &fwd.policy;
        let text = |v6: bool| -> Vec<String> {
            (p.rules(v6).iter())
                .map(|r| r.describe(any_name(&names)))
                .collect()
        };
        let mut tables: Vec<_> = (p.tables().iter())
            .map(|(&table, t)| llr_ops::query::TableSizeView {
                table,
                routes: t.len(),
            })
            .collect();
        tables.sort_by_key(|t| t.table);
        llr_ops::query::RoutingRulesView {
            ipv4: text(false),
            ipv6: text(true),
            ipv4_main_only: p.is_plain(false),
            ipv6_main_only: p.is_plain(true),
            tables,
        }
    }

    /// `neighbours`: by interface, then address; multicast entries are left out (they are
    /// never a next hop).
    pub fn list_neighbours(
        &self,
        limit: Option<usize>,
        dev: Option<&str>,
        out: &mut Listing<'_>,
    ) -> Result<Value, CtlError> {
        let limit = check_limit(limit)?;
        let (names, only) = {
            let st = self.lock();
            let only = dev.map(|d| st.router_ifindex("dev", d)).transpose()?;
            (st.interface_names(), only)
        };
        let fwd = self.fwd.load();
        let mut all: Vec<_> = fwd
            .neighbors
            .iter()
            .filter(|(i, a, _)| !a.is_multicast() && only.is_none_or(|o| o == *i))
            .collect();
        let total = fwd.neighbors.len() as u64;
        drop(fwd);
        all.sort_by_key(|(i, a, _)| (*i, a.is_ipv6(), *a));
        let matched = all.len() as u64;
        for (i, a, mac) in all.iter().take(limit) {
            out.push(&NeighbourView {
                ip: a.to_string(),
                mac: format_mac(mac),
                dev: name_of(&names, *i),
            })?;
        }
        to_value(&ListingEnd {
            listed: matched.min(limit as u64),
            matched,
            total,
        })
    }

    /// `flow.list`: the flows `q` keeps, in its order, at most its limit.
    pub fn list_flows(&self, q: &FlowQuery, out: &mut Listing<'_>) -> Result<Value, CtlError> {
        let limit = check_limit(q.limit)?;
        let mut all = self.flow_list()?;
        for f in &mut all {
            f.matches = config_words(&f.matches);
        }
        let total = all.len() as u64;
        let mut kept: Vec<&FlowInfo> = all.iter().filter(|f| keeps_flow(q, f)).collect();
        let key = |f: &FlowInfo| -> u64 {
            match q.sort {
                FlowSort::Name => 0,
                FlowSort::Cpu => f.stats.cpu_ns,
                FlowSort::Packets => f.stats.done,
                FlowSort::Bytes => f.elements.first().map_or(0, |e| e.bytes),
                FlowSort::Drops => {
                    f.stats.queue_drops + f.elements.iter().map(|e| e.dropped).sum::<u64>()
                }
            }
        };
        kept.sort_by(|a, b| key(b).cmp(&key(a)).then_with(|| a.name.cmp(&b.name)));
        let matched = kept.len() as u64;
        for f in kept.into_iter().take(limit) {
            out.push(f)?;
        }
        to_value(&ListingEnd {
            listed: matched.min(limit as u64),
            matched,
            total,
        })
    }

    /// `flow.get`: the class, flow and pipeline of one packet.
    pub fn flow_get(&self, p: &PacketQuery) -> Result<FlowLookupView, CtlError> {
        let st = self.lock();
        let (f, ifindex, iif, class) = self.query_frame(&st, p)?;
        let (_, flows) = st.scratch_flows()?;
        let id = flows.classify(&f, ifindex, class);
        let info = flows.list().into_iter().find(|i| i.id == id);
        Ok(FlowLookupView {
            class: st
                .cfg
                .classes
                .get(class)
                .map_or("?".into(), |c| c.name.clone()),
            iif,
            flow: info
                .as_ref()
                .map_or(format!("flow {id}"), |i| i.name.clone()),
            matches: info
                .as_ref()
                .map(|i| config_words(&i.matches))
                .unwrap_or_default(),
            pipeline: info.map(|i| i.pipeline).unwrap_or_default(),
        })
    }
}

fn keeps_flow(q: &FlowQuery, f: &FlowInfo) -> bool {
    q.name.as_deref().is_none_or(|n| f.name.contains(n))
        && (q.class.as_deref()).is_none_or(|c| f.class.as_deref() == Some(c))
        && (q.matches.as_deref()).is_none_or(|m| f.matches.contains(&config_words(m)))
}
