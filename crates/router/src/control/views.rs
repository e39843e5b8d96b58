//! What the control plane reports: status, counters, interfaces, the forwarder's tables, rules.

use std::net::IpAddr;
use std::time::Duration;

use llr_core::fwd::NextHop;
use llr_core::sched::Budget;
use llr_io::ebpf::FLAG_TIMESTAMP;
use llr_ops::ctl::RuleEntry;
use llr_ops::metrics::MetricsSnapshot;
use llr_ops::views::{
    format_mac, ClassStatus, InterfaceView, MirrorView, RingStatus, StaticRouteView, StatusView,
    WorkerStatus,
};

use super::{rule_text, RouterCtl};
use crate::metrics::{name_of, to_metrics, WorkerPart};

impl RouterCtl {
    /// `status`: version, uptime, interfaces, strategy and budgets, wake-up, workers, rules.
    pub fn status(&self) -> StatusView {
        let snaps: Vec<_> = self.links.iter().map(|l| l.latest()).collect();
        let snap = snaps[0].clone();
        let st = self.lock();
        let classes = (st.cfg.classes.iter().enumerate())
            .map(|(i, c)| {
                let ring = snap.class_to_ring.get(i).copied();
                ClassStatus {
                    name: c.name.clone(),
                    ring,
                    budget: ring.and_then(|r| snap.ring_budgets.get(r).copied()),
                    configured_budget: Some(c.budget).filter(|b| *b != Budget::Default),
                }
            })
            .collect();
        let static_routes = (st.cfg.routes.iter())
            .map(|r| StaticRouteView {
                prefix: r.prefix.clone(),
                via: r.via.map(|v| v.to_string()),
                dev: r.dev.clone(),
            })
            .collect();
        let m = self.mirror_stats();
        StatusView {
            version: env!("CARGO_PKG_VERSION").into(),
            config: self.config_path.as_ref().map(|p| p.display().to_string()),
            uptime_s: self.started.elapsed().as_secs_f64(),
            interfaces: st.cfg.interfaces.clone(),
            strategy: snap.strategy.unwrap_or(st.cfg.strategy),
            device_budget: snap.device_budget,
            classes,
            rings: (snap.layout_rings.iter().zip(&snap.ring_budgets))
                .map(|(n, b)| RingStatus {
                    name: n.clone(),
                    budget: *b,
                })
                .collect(),
            auto_budget: snap.auto_budget,
            wakeup: snap.wake,
            spin_us: snap.spin_us,
            workers: (snaps.iter().enumerate())
                .map(|(w, s)| WorkerStatus {
                    worker: w as u32,
                    core: st.cfg.cores.get(w).copied(),
                    busy_ratio: s.busy_ratio,
                })
                .collect(),
            helper_cores: Some(llr_ops::cpus::format_cpu_list(&self.helper_cpus)),
            rules: st.rules.len(),
            routes: self.fwd.routes().len(),
            routes_incomplete: self.fwd.load().routes_incomplete,
            max_routes: st.spec.max_routes,
            mirror: MirrorView {
                events: m.events,
                resyncs: m.resyncs,
                overruns: m.overruns,
                updates: m.updates,
            },
            static_routes,
            changes_applied: self.changes_applied(),
            ready: snaps.iter().all(|s| s.seq > 0),
            steering: st.cfg.steering.name().into(),
            datapath: self.datapath(),
            timestamps: self.flags & FLAG_TIMESTAMP != 0,
            metrics: (self.metrics_addr.lock().unwrap_or_else(|e| e.into_inner()))
                .map(|a| a.to_string()),
        }
    }

    /// A metrics snapshot (asks every worker for fresh counters, waiting up to `wait`).
    pub fn metrics(&self, wait: Duration) -> MetricsSnapshot {
        let snaps = crate::worker::ctl::fresh_all(&self.links, wait);
        let (names, cores, ifs) = {
            let st = self.lock();
            (
                st.cfg
                    .classes
                    .iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>(),
                st.cfg.cores.clone(),
                st.interface_names(),
            )
        };
        let classifier = self.classifiers().stats();
        let parts: Vec<WorkerPart<'_>> = (snaps.iter().enumerate())
            .map(|(w, s)| WorkerPart {
                worker: w as u32,
                core: cores.get(w).copied().unwrap_or(0) as u32,
                snap: s,
            })
            .collect();
        let mut m = to_metrics(&parts, &classifier, &names, &ifs);
        m.filter_rules = (self.filter().rules.into_iter())
            .map(|r| llr_ops::metrics::FilterRuleMetrics {
                family: r.origin.family,
                table: r.origin.table,
                chain: r.origin.chain,
                handle: r.origin.handle,
                packets: r.packets,
                bytes: r.bytes,
                xdp_packets: r.xdp_packets,
                xdp_bytes: r.xdp_bytes,
            })
            .collect();
        let routes = self.fwd.routes();
        let (v4, v6) = routes.len_by_family();
        m.fib_routes = vec![("ipv4".into(), v4 as u64), ("ipv6".into(), v6 as u64)];
        m.fib_memory = (routes.memory().parts().into_iter())
            .map(|(s, b)| (s.to_string(), b as u64))
            .collect();
        let s = self.mirror_stats();
        m.mirror = Some(llr_ops::metrics::MirrorMetrics {
            events: s.events,
            resyncs: s.resyncs,
            overruns: s.overruns,
            updates: s.updates,
        });
        m
    }

    /// The rules in first-match order, with their ids.
    pub fn rules(&self) -> Vec<RuleEntry> {
        self.lock()
            .rules
            .iter()
            .map(|(id, r)| RuleEntry {
                id: *id,
                rule: rule_text(r),
            })
            .collect()
    }

    /// The interfaces as the forwarder sees them, with their counters.
    pub fn interfaces(&self) -> Vec<InterfaceView> {
        let counters = self.metrics(Duration::from_millis(50)).interfaces;
        let names = self.lock().interface_names();
        let fwd = self.fwd.load();
        names
            .into_iter()
            .map(|(i, name)| {
                let f = fwd.interfaces.get(i);
                InterfaceView {
                    counters: counters
                        .iter()
                        .find(|c| c.ifindex == i)
                        .cloned()
                        .unwrap_or_default(),
                    name,
                    ifindex: i,
                    mtu: f.map_or(0, |f| f.mtu),
                    mac: f.map_or("-".into(), |f| format_mac(&f.mac)),
                    addrs: f.map_or(Vec::new(), |f| {
                        f.addrs
                            .iter()
                            .map(|a| format!("{}/{}", a.addr, a.len))
                            .collect()
                    }),
                }
            })
            .collect()
    }

    /// The forwarder's answer for `dst`: the next hop its longest-prefix match finds, as the
    /// workers would use it (`None`: no route). The in-process counterpart of `ip route get`,
    /// for tests that compare llrouter's table with the kernel's.
    pub fn route_get(&self, dst: IpAddr) -> Option<NextHop> {
        let routes = self.fwd.routes();
        // Registered for the lookup, so no group it walks is reused under it.
        let _reader = routes.reader();
        routes.lookup(dst)
    }

    /// How many routes the forwarder holds (both families), without building the `fib` view.
    pub fn route_count(&self) -> usize {
        self.fwd.routes().len()
    }

    /// The name of interface `ifindex` as the router knows it (`ifindex N` if unknown).
    pub fn interface_name(&self, ifindex: u32) -> String {
        name_of(&self.lock().interface_names(), ifindex)
    }
}
