//! Checking a configuration and resolving its names against this host.

use llr_core::classify::{Rule, RuleSet};
use llr_core::flow::{AclSpec, FlowSchedConfig, FlowSpec, Flows};
use llr_core::sched::{Layout, SchedConfig};
use llr_core::FieldError;
use llr_io::kernel::{parse_mac, parse_prefix, StaticNeighbor, StaticRoute};

use super::{ConfigError, RouterConfig};

/// A checked configuration, resolved against the interfaces of the calling namespace.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub cfg: RouterConfig,
    pub ifindexes: Vec<u32>,
    pub layout: Layout,
    pub rule_images: Vec<[u8; 64]>,
    /// The resolved rules (first match wins), as `rule_images` encodes them.
    pub rules: Vec<Rule>,
    pub default_class: u32,
    pub routes: Vec<StaticRoute>,
    pub neighbors: Vec<StaticNeighbor>,
    /// The flows each worker builds (`None`: flows off).
    pub flows: Option<std::sync::Arc<FlowSetup>>,
}

/// What a worker needs to build its flows ([`llr_core::flow::Flows`]), checked.
#[derive(Debug, Clone)]
pub struct FlowSetup {
    pub cfg: FlowSchedConfig,
    pub classes: Vec<String>,
    pub specs: Vec<FlowSpec>,
    pub acls: Vec<AclSpec>,
    /// Interface names a match may use (`ifname`), with their index.
    pub ifnames: Vec<(String, u32)>,
    /// The classes' configured `weight`s: those of their default global flows.
    pub class_weights: Vec<Option<u32>>,
}

impl FlowSetup {
    /// The flows of `cfg` on interfaces `ifindexes` (in `cfg.interfaces` order); `None` when
    /// flows are off (no `[flow-scheduler]` and no `[[flows]]`). Not checked: see [`build`].
    ///
    /// [`build`]: FlowSetup::build
    pub fn of(cfg: &RouterConfig, ifindexes: &[u32]) -> Option<FlowSetup> {
        if cfg.flow_scheduler.is_none() && cfg.flows.is_empty() {
            return None;
        }
        Some(FlowSetup {
            cfg: cfg.flow_scheduler.clone().unwrap_or_default(),
            classes: cfg.classes.iter().map(|c| c.name.clone()).collect(),
            specs: cfg.flows.clone(),
            acls: cfg.acls.clone(),
            ifnames: cfg
                .interfaces
                .iter()
                .cloned()
                .zip(ifindexes.iter().copied())
                .collect(),
            class_weights: cfg.classes.iter().map(|c| c.weight).collect(),
        })
    }

    pub fn ifindex_of(&self, name: &str) -> Option<u32> {
        self.ifnames
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, i)| i)
    }

    /// A worker's flows.
    pub fn build<P>(&self) -> Result<Flows<P>, FieldError> {
        let mut f = Flows::new(&self.cfg, &self.classes, &self.specs, &self.acls, &|n| {
            self.ifindex_of(n)
        })?;
        for (c, w) in self.class_weights.iter().enumerate() {
            if let Some(w) = *w {
                f.set_class_weight(c, w)
                    .map_err(|e| FieldError::new(format!("classes[{c}].weight"), e.reason))?;
            }
        }
        Ok(f)
    }
}

impl RouterConfig {
    /// The scheduler configuration (checked by `layout()`).
    pub fn sched(&self) -> Result<SchedConfig, ConfigError> {
        let strategy = self.strategy;
        Ok(SchedConfig {
            strategy,
            classes: self.classes.clone(),
            device_budget: self.device_budget,
            time_slice_ns: self.time_slice_ns,
            auto_budget: self.auto_budget.as_ref().map(|a| a.spec()).transpose()?,
        })
    }

    /// `worker-priority` with the wake-up mode `wake` (the configured one, or one asked for at
    /// run time), against the kernel's real-time throttling.
    pub fn check_realtime_wake(&self, wake: llr_io::xsk::WakeMode) -> Result<(), ConfigError> {
        check_worker_priority(self.worker_priority, wake, rt_throttle_us().0)
    }

    /// Checks everything that does not need the interfaces; errors name the field.
    pub fn validate(&self) -> Result<Layout, ConfigError> {
        if self.interfaces.is_empty() {
            bail!("interfaces", "at least one interface is required");
        }
        for (i, n) in self.interfaces.iter().enumerate() {
            if self.interfaces[..i].contains(n) {
                bail!("interfaces", "`{n}` is listed twice");
            }
        }
        for (i, c) in self.cores.iter().enumerate() {
            if self.cores[..i].contains(c) {
                bail!("cores", "core {c} is listed twice (one worker per core)");
            }
        }
        if self.cores.len() > llr_io::ebpf::MAX_QUEUES {
            bail!(
                "cores",
                "{} workers; at most {}",
                self.cores.len(),
                llr_io::ebpf::MAX_QUEUES
            );
        }
        // The machine's CPUs, not this thread's affinity (a pinned thread sees one).
        let online = llr_ops::cpus::online();
        let list = llr_ops::cpus::format_cpu_list(&online);
        if let Some(c) = self.cores.iter().find(|c| !online.contains(c)) {
            bail!("cores", "core {c} does not exist (online CPUs: {list})");
        }
        if let Some(h) = &self.helper_cores {
            if h.is_empty() {
                bail!("helper-cores", "give at least one core (or leave it out)");
            }
            if let Some(c) = h.iter().find(|c| !online.contains(c)) {
                bail!(
                    "helper-cores",
                    "core {c} does not exist (online CPUs: {list})"
                );
            }
        }
        self.check_realtime_wake(self.wake)?;
        if self.batch == 0 {
            bail!("batch", "must be at least 1");
        }
        if self.tx_batch == 0 || self.tx_batch > 2048 {
            bail!(
                "tx-batch",
                "must be within 1..=2048 (frames held before a transmit kick)"
            );
        }
        if self.tx_hold_us > 1000 {
            bail!(
                "tx-hold-us",
                "must be within 0..=1000 (µs the higher classes' frames may wait for tx-batch)"
            );
        }
        if self.route_refresh_ms == 0 {
            bail!("route-refresh-ms", "must be at least 1");
        }
        if self.netlink_buffer_kb != 0 && !(64..=1 << 20).contains(&self.netlink_buffer_kb) {
            bail!(
                "netlink-buffer-kb",
                "{} KiB; must be 0 (the default, 16 MiB) or within 64..=1048576",
                self.netlink_buffer_kb
            );
        }
        if self.acl_rules > 65_536 {
            bail!(
                "acl-rules",
                "{} rules; at most 65536 (one per UDP port)",
                self.acl_rules
            );
        }
        if self.cost_ns > 1_000_000 {
            bail!(
                "cost-ns",
                "{} ns per packet; at most 1000000 (1 ms)",
                self.cost_ns
            );
        }
        self.rings.validate()?;
        self.icmp.limits()?;
        if let Some(m) = &self.metrics {
            m.addr()?;
        }
        if self.control.socket.as_os_str().is_empty() {
            bail!("control.socket", "must not be empty");
        }
        let layout = self.sched()?.layout()?;
        if layout.rings.len() > llr_io::ebpf::MAX_CLASSES {
            bail!("classes", "at most {} rings", llr_io::ebpf::MAX_CLASSES);
        }
        Ok(layout)
    }

    /// Validates and resolves names with `ifindex_of` (the calling namespace's interfaces).
    pub fn resolve(
        self,
        ifindex_of: impl Fn(&str) -> Option<u32>,
    ) -> Result<Resolved, ConfigError> {
        let layout = self.validate()?;
        let mut ifindexes = Vec::new();
        for n in &self.interfaces {
            ifindexes.push(ifindex_of(n).ok_or_else(|| {
                ConfigError::field("interfaces", format!("no interface named `{n}`"))
            })?);
        }
        let names: Vec<String> = self.classes.iter().map(|c| c.name.clone()).collect();
        let default_class = (names.len() - 1) as u32;
        let mut rules = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            rules
                .push(r.resolve(&names, &ifindex_of).map_err(|e| {
                    ConfigError::field(format!("rules[{i}].{}", e.field), e.reason)
                })?);
        }
        let set = RuleSet::with_rules(rules.clone(), default_class as usize);
        let rule_images = set
            .to_bpf_map()
            .map_err(|e| ConfigError::field("rules", format!("{}: {}", e.field, e.reason)))?;
        let mut routes = Vec::new();
        for (i, r) in self.routes.iter().enumerate() {
            let prefix = parse_prefix(&r.prefix).ok_or_else(|| {
                ConfigError::field(
                    format!("routes[{i}].prefix"),
                    format!("`{}` is not an addr/len prefix", r.prefix),
                )
            })?;
            let ifindex = ifindex_of(&r.dev).ok_or_else(|| {
                ConfigError::field(
                    format!("routes[{i}].dev"),
                    format!("no interface named `{}`", r.dev),
                )
            })?;
            if !ifindexes.contains(&ifindex) {
                bail!(
                    format!("routes[{i}].dev"),
                    "`{}` is not one of the router's interfaces",
                    r.dev
                );
            }
            routes.push(StaticRoute {
                prefix,
                ifindex,
                gateway: r.via,
            });
        }
        let mut neighbors = Vec::new();
        for (i, n) in self.neighbors.iter().enumerate() {
            let mac = parse_mac(&n.mac).ok_or_else(|| {
                ConfigError::field(
                    format!("neighbors[{i}].mac"),
                    format!("`{}` is not a MAC address", n.mac),
                )
            })?;
            let ifindex = ifindex_of(&n.dev).ok_or_else(|| {
                ConfigError::field(
                    format!("neighbors[{i}].dev"),
                    format!("no interface named `{}`", n.dev),
                )
            })?;
            neighbors.push(StaticNeighbor {
                ifindex,
                addr: n.ip,
                mac,
            });
        }
        let flows = if let Some(setup) = FlowSetup::of(&self, &ifindexes) {
            // Checked here, once: every worker builds the same flows from it.
            setup.build::<()>().map_err(|e| {
                let field = if ["flows[", "acls[", "classes["]
                    .iter()
                    .any(|p| e.field.starts_with(p))
                {
                    e.field
                } else {
                    format!("flow-scheduler.{}", e.field)
                };
                ConfigError::field(field, e.reason)
            })?;
            Some(std::sync::Arc::new(setup))
        } else if !self.acls.is_empty() {
            bail!(
                "acls",
                "ACLs are used by flows' pipelines; there are no flows"
            );
        } else {
            None
        };
        let mut cfg = self;
        if flows.is_some() && cfg.rings.hold_frames == 0 {
            // Frames wait in flow queues between the rings and Tx; without chunks of their own
            // they would leave the fill rings short.
            cfg.rings.hold_frames = 8192;
        }
        Ok(Resolved {
            cfg,
            ifindexes,
            layout,
            rule_images,
            rules,
            default_class,
            routes,
            neighbors,
            flows,
        })
    }
}

/// The kernel's real-time throttling, µs: `sched_rt_runtime_us` (how much of each period
/// real-time tasks may take from a core; -1: all of it) and `sched_rt_period_us`. `None` where
/// the kernel does not say.
pub(crate) fn rt_throttle_us() -> (Option<i64>, Option<i64>) {
    let read = |f: &str| -> Option<i64> {
        std::fs::read_to_string(format!("/proc/sys/kernel/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    (read("sched_rt_runtime_us"), read("sched_rt_period_us"))
}

/// `worker-priority` against the wake-up mode and the kernel's real-time throttling.
fn check_worker_priority(
    prio: u8,
    wake: llr_io::xsk::WakeMode,
    rt_runtime_us: Option<i64>,
) -> Result<(), ConfigError> {
    if prio > 99 {
        bail!(
            "worker-priority",
            "{prio} is no SCHED_FIFO priority: give 1–99, or 0 for the normal scheduler"
        );
    }
    // A busy-polling real-time worker never yields its core; only the throttling ever takes it
    // back for the kernel's own threads there.
    if prio > 0 && wake == llr_io::xsk::WakeMode::Busy && rt_runtime_us == Some(-1) {
        bail!(
            "worker-priority",
            "a real-time worker with wake = \"busy\" never leaves its core, and \
             /proc/sys/kernel/sched_rt_runtime_us = -1 lets nothing else run there, not even \
             the kernel's own threads: set it back to 950000, or use wake = \"interrupt\""
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_worker_priority;
    use llr_io::xsk::WakeMode;

    #[test]
    fn worker_priority_is_a_fifo_priority_and_never_an_unthrottled_busy_loop() {
        for p in [0, 1, 51, 99] {
            check_worker_priority(p, WakeMode::Busy, Some(950_000)).unwrap();
        }
        let e = check_worker_priority(100, WakeMode::Interrupt, Some(950_000)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "worker-priority: 100 is no SCHED_FIFO priority: give 1–99, or 0 for the normal scheduler"
        );
        let e = check_worker_priority(51, WakeMode::Busy, Some(-1)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("worker-priority: a real-time worker with wake = \"busy\""),
            "{e}"
        );
        // Without throttling, a worker that sleeps when idle, or one at the normal scheduler,
        // is fine; so is a kernel that does not say.
        check_worker_priority(51, WakeMode::Interrupt, Some(-1)).unwrap();
        check_worker_priority(51, WakeMode::Adaptive, Some(-1)).unwrap();
        check_worker_priority(0, WakeMode::Busy, Some(-1)).unwrap();
        check_worker_priority(51, WakeMode::Busy, None).unwrap();
    }
}
