//! The router's control target: `llr_ops::ctl::ControlTarget` for the control socket, and the
//! same commands as typed methods for a program that embeds the router.
//!
//! A change is validated on the caller's thread against the running state and applied in
//! steps: what is the workers' own (their poll engines, their wake-up mode) is handed to every
//! worker at once, each applies it between poll rounds; what the workers share (the
//! classifiers' rules and class→ring maps) is changed here. The change is recorded, and the
//! caller answered, only when every step is done — after the reply no worker runs the old
//! setting. A step that fails undoes the steps before it. One change at a time (the state
//! lock).

mod flows;
mod listings;
mod reload;
mod views;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::steer::{Classifiers, RuleImages};
use crate::worker::ctl::{Change, WorkerLink, WorkerSnapshot};
use llr_core::classify::{RuleError, RuleSet, RuleSpec};
use llr_core::fwd::SharedForwarder;
use llr_core::sched::{Budget, Layout, StrategyKind};
use llr_io::kernel::{self, MirrorSpec, StaticRoute};
use llr_io::xsk::WakeMode;
use llr_ops::ctl::{Command, ControlTarget, CtlError, Listing, RuleEntry};
use llr_ops::views::{
    BudgetChanged, DeviceBudgetChanged, InterfacesView, RouteAdded, RouteRemoved, RuleRemoved,
    RulesView, StaticRouteView, StrategyChanged, WakeupChanged, WakeupState,
};
use serde_json::Value;

use crate::config::{ConfigError, Resolved, RouteConfig, RouterConfig};
use crate::error::RouterError;
use crate::mirror::Mirror;

/// How long a change may wait for the worker to apply it.
pub const APPLY_TIMEOUT: Duration = Duration::from_millis(100);

/// The running configuration as the control plane sees it (changed only after the worker
/// confirmed a change).
struct State {
    cfg: RouterConfig,
    /// The configuration as its file last said (at start or the last reload): what `reload`
    /// tells the file's own edits from the undoing of control-socket changes by.
    file: RouterConfig,
    ifindexes: Vec<u32>,
    /// (id, rule) in first-match order.
    rules: Vec<(u64, RuleSpec)>,
    next_rule: u64,
    images: Vec<[u8; 64]>,
    default_class: u32,
    spec: MirrorSpec,
    mirror: Option<Mirror>,
}

impl State {
    /// The router's `(ifindex, name)` pairs.
    fn interface_names(&self) -> Vec<(u32, String)> {
        self.ifindexes
            .iter()
            .copied()
            .zip(self.cfg.interfaces.iter().cloned())
            .collect()
    }

    fn class_index(&self, class: &str) -> Result<usize, CtlError> {
        self.cfg
            .classes
            .iter()
            .position(|c| c.name == class)
            .ok_or_else(|| {
                let known: Vec<&str> = self.cfg.classes.iter().map(|c| c.name.as_str()).collect();
                err(
                    "class",
                    format!("unknown class `{class}` (known: {})", known.join(", ")),
                )
            })
    }
}

/// The router's control target (`llr_ops::ctl::ControlTarget`).
pub struct RouterCtl {
    /// The file `reload` re-reads (none for a configuration built in code).
    config_path: Option<PathBuf>,
    started: Instant,
    links: Vec<Arc<WorkerLink>>,
    classifiers: Arc<Mutex<Classifiers>>,
    fwd: Arc<SharedForwarder>,
    flags: u32,
    /// Where helper threads run.
    helper_cpus: BTreeSet<usize>,
    /// Serialises changes: one at a time, validated against the running state.
    state: Mutex<State>,
    /// Where metrics are served (for `status`).
    metrics_addr: Mutex<Option<std::net::SocketAddr>>,
    /// How the datapath runs (for `status`), known once the sockets are bound.
    datapath: Mutex<llr_ops::views::DatapathView>,
    /// Changes applied (`status`: `changes_applied`).
    changes: std::sync::atomic::AtomicU64,
    /// The route mirror's counters, kept across its restarts.
    mirror_stats: Arc<Mutex<kernel::MirrorStats>>,
    /// The host's firewall (for `filter`).
    firewall: Mutex<Option<Arc<crate::firewall::FirewallState>>>,
}

pub(crate) fn err(field: impl Into<String>, reason: impl Into<String>) -> CtlError {
    CtlError::new(field, reason)
}

/// The field and reason of a configuration error (without the file it came from).
fn config_err(e: &ConfigError) -> CtlError {
    match e.root() {
        ConfigError::Field { field, reason } => err(field.as_str(), reason.as_str()),
        other => err("config", other.to_string()),
    }
}

/// The layout of `cfg`'s scheduler settings, or the field and reason it is rejected for.
pub(super) fn sched_layout(cfg: &RouterConfig) -> Result<Layout, CtlError> {
    let sc = cfg.sched().map_err(|e| config_err(&e))?;
    sc.layout().map_err(|e| err(e.field, e.reason))
}

/// A rule in the one-line syntax with the configuration's field names (`dst_port`, not
/// `dport`), which the rule parser also reads.
pub fn rule_text(r: &RuleSpec) -> String {
    config_words(&r.to_string())
}

/// Rule-syntax text with the configuration's field names.
pub(crate) fn config_words(text: &str) -> String {
    text.split(' ')
        .map(|w| match w.split_once('=') {
            Some(("dport", v)) => format!("dst_port={v}"),
            Some(("sport", v)) => format!("src_port={v}"),
            Some(("ipver", v)) => format!("ip_version={v}"),
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A prefix from the control protocol.
fn prefix_of(prefix: &str) -> Result<llr_core::classify::IpPrefix, CtlError> {
    kernel::parse_prefix(prefix)
        .ok_or_else(|| err("prefix", format!("`{prefix}` is not an addr/len prefix")))
}

/// The parts of a running router the control plane drives.
pub(crate) struct CtlParts {
    pub config_path: Option<PathBuf>,
    pub spec: MirrorSpec,
    pub fwd: Arc<SharedForwarder>,
    pub links: Vec<Arc<WorkerLink>>,
    pub classifiers: Arc<Mutex<Classifiers>>,
    /// The classifier's flags (`FLAG_TIMESTAMP`, …).
    pub flags: u32,
    pub helper_cpus: BTreeSet<usize>,
}

impl RouterCtl {
    pub(crate) fn new(r: &Resolved, parts: CtlParts) -> RouterCtl {
        let CtlParts {
            config_path,
            spec,
            fwd,
            links,
            classifiers,
            flags,
            helper_cpus,
        } = parts;
        let rules: Vec<(u64, RuleSpec)> = r
            .cfg
            .rules
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u64 + 1, s.clone()))
            .collect();
        RouterCtl {
            config_path,
            started: Instant::now(),
            links,
            classifiers,
            fwd,
            flags,
            helper_cpus,
            state: Mutex::new(State {
                cfg: r.cfg.clone(),
                file: r.cfg.clone(),
                ifindexes: r.ifindexes.clone(),
                next_rule: rules.len() as u64 + 1,
                rules,
                images: r.rule_images.clone(),
                default_class: r.default_class,
                spec,
                mirror: None,
            }),
            metrics_addr: Mutex::new(None),
            firewall: Mutex::new(None),
            datapath: Mutex::default(),
            changes: std::sync::atomic::AtomicU64::new(0),
            mirror_stats: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running configuration (with the changes made through the control plane).
    pub fn config(&self) -> RouterConfig {
        self.lock().cfg.clone()
    }

    pub(crate) fn set_metrics_addr(&self, addr: Option<std::net::SocketAddr>) {
        *self.metrics_addr.lock().unwrap_or_else(|e| e.into_inner()) = addr;
    }

    pub(crate) fn set_firewall(&self, f: Arc<crate::firewall::FirewallState>) {
        *self.firewall.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    /// The host's firewall as the workers run it, with its counters.
    pub fn filter(&self) -> crate::firewall::FilterView {
        let f = self
            .firewall
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        f.map(|f| f.view(&self.fwd)).unwrap_or_default()
    }

    pub(crate) fn set_datapath(&self, d: llr_ops::views::DatapathView) {
        *self.datapath.lock().unwrap_or_else(|e| e.into_inner()) = d;
    }

    /// How the datapath runs: XDP mode, rx queues and zero-copy per interface, the kernel.
    pub fn datapath(&self) -> llr_ops::views::DatapathView {
        self.datapath
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Starts the kernel route mirror from `seed`, the dump the forwarder was built from.
    pub(crate) fn start_mirror(&self, seed: Option<kernel::Seed>) -> Result<(), RouterError> {
        let mut st = self.lock();
        let period = Duration::from_millis(st.cfg.route_refresh_ms);
        st.mirror = Some(Mirror::start(
            st.spec.clone(),
            self.fwd.clone(),
            period,
            self.helper_cpus.clone(),
            seed,
            self.mirror_stats.clone(),
        )?);
        Ok(())
    }

    /// Stops the route mirror (also done on drop).
    pub(crate) fn shutdown(&self) {
        drop(self.lock().mirror.take());
    }

    /// Counts an applied change.
    fn changed(&self) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The route mirror's counters since the start.
    pub fn mirror_stats(&self) -> kernel::MirrorStats {
        *self.mirror_stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes applied since the start.
    pub fn changes_applied(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Worker 0's latest snapshot (every worker runs the same layout).
    fn latest(&self) -> Arc<WorkerSnapshot> {
        self.links[0].latest()
    }

    /// Hands `change` to every worker at once and waits for all of them. If one refuses or
    /// does not pick it up in time, those that applied it get `undo`.
    fn to_workers(&self, change: Change, undo: Change) -> Result<(), CtlError> {
        let sent: Vec<_> = self.links.iter().map(|l| l.send(change.clone())).collect();
        let outcomes: Vec<Result<(), String>> =
            sent.into_iter().map(|s| s.wait(APPLY_TIMEOUT)).collect();
        let Some((w, e)) =
            (outcomes.iter().enumerate()).find_map(|(w, r)| Some((w, r.clone().err()?)))
        else {
            return Ok(());
        };
        for (l, r) in self.links.iter().zip(&outcomes) {
            if r.is_ok() {
                if let Err(e) = l.apply(undo.clone(), APPLY_TIMEOUT) {
                    tracing::error!("undoing a change a worker could not take: {e}");
                }
            }
        }
        let who = if self.links.len() > 1 {
            format!("worker {w}: ")
        } else {
            String::new()
        };
        Err(err("worker", format!("{who}{e}")))
    }

    fn classifiers(&self) -> std::sync::MutexGuard<'_, Classifiers> {
        self.classifiers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new layout: every worker's engine first, then the class→ring maps (frames that reach
    /// a ring the new engine does not serve in between are drained as orphans).
    fn apply_layout(&self, new: &Layout, old: &Layout) -> Result<(), CtlError> {
        self.to_workers(Change::Sched(new.clone()), Change::Sched(old.clone()))?;
        if let Err(e) = self
            .classifiers()
            .set_class_rings(&new.class_to_ring, &old.class_to_ring)
        {
            let _ = self.to_workers(Change::Sched(old.clone()), Change::Sched(new.clone()));
            return Err(err("class→ring map", e));
        }
        Ok(())
    }

    /// Validates a scheduler configuration and applies its layout.
    fn apply_sched(&self, st: &mut State, cfg: RouterConfig) -> Result<(), CtlError> {
        let layout = sched_layout(&cfg)?;
        let old = sched_layout(&st.cfg)?;
        self.apply_layout(&layout, &old)?;
        st.cfg = cfg;
        self.changed();
        Ok(())
    }

    fn apply_wake(&self, st: &State, wake: WakeMode, spin_us: u64) -> Result<(), CtlError> {
        self.to_workers(
            Change::Wake { wake, spin_us },
            Change::Wake {
                wake: st.cfg.wake,
                spin_us: st.cfg.spin_us,
            },
        )
    }

    fn apply_rules(&self, new: &RuleImages) -> Result<(), CtlError> {
        self.classifiers()
            .update_rules(new)
            .map_err(|e| err("rules", e))
    }

    /// `rules` resolved against the running classes and interfaces, as the classifier runs them.
    fn rule_set(&self, st: &State, rules: &[(u64, RuleSpec)]) -> Result<RuleSet, CtlError> {
        let names: Vec<String> = st.cfg.classes.iter().map(|c| c.name.clone()).collect();
        let mut out = Vec::new();
        for (id, s) in rules {
            out.push(
                s.resolve(&names, |n| llr_io::ebpf::ifindex(n).ok())
                    .map_err(|e| err(e.field, format!("rule {id}: {}", e.reason)))?,
            );
        }
        Ok(RuleSet::with_rules(out, st.default_class as usize))
    }

    /// Compiles `rules` against the running classes.
    fn compile_rules(
        &self,
        st: &State,
        rules: &[(u64, RuleSpec)],
    ) -> Result<Vec<[u8; 64]>, CtlError> {
        (self.rule_set(st, rules)?)
            .to_bpf_map()
            .map_err(|e| err(e.field, e.reason))
    }

    fn set_rules(&self, st: &mut State, rules: Vec<(u64, RuleSpec)>) -> Result<(), CtlError> {
        let images = self.compile_rules(st, &rules)?;
        self.apply_rules(&RuleImages {
            images: images.clone(),
            default_class: st.default_class,
            flags: self.flags,
        })?;
        st.rules = rules;
        st.images = images;
        self.changed();
        Ok(())
    }

    /// Rebuilds the forwarder for `spec` (static routes override the kernel's) and swaps it in,
    /// restarting the mirror with the new overrides.
    fn set_routes(&self, st: &mut State, spec: MirrorSpec) -> Result<(), CtlError> {
        let (mut f, seed) =
            kernel::build_seeded(&spec).map_err(|e| err("route", format!("{e:#}")))?;
        drop(st.mirror.take()); // the old mirror must not overwrite the new table
        {
            f.keep_settings_of(&self.fwd.load_full());
            self.fwd.replace(f);
        }
        let period = Duration::from_millis(st.cfg.route_refresh_ms);
        st.mirror = Some(
            Mirror::start(
                spec.clone(),
                self.fwd.clone(),
                period,
                self.helper_cpus.clone(),
                Some(seed),
                self.mirror_stats.clone(),
            )
            .map_err(|e| err("route", e.to_string()))?,
        );
        st.spec = spec;
        self.changed();
        Ok(())
    }

    /// `rules.add`: appends a rule (one-line syntax); returns its id.
    pub fn rules_add(&self, rule: &str) -> Result<RuleEntry, CtlError> {
        let spec: RuleSpec = rule
            .parse()
            .map_err(|e: RuleError| err(e.field, e.reason))?;
        let mut st = self.lock();
        let id = st.next_rule;
        let text = rule_text(&spec);
        let mut rules = st.rules.clone();
        rules.push((id, spec));
        self.set_rules(&mut st, rules)?;
        st.next_rule += 1;
        Ok(RuleEntry { id, rule: text })
    }

    /// `rules.remove`.
    pub fn rules_remove(&self, id: u64) -> Result<RuleRemoved, CtlError> {
        let mut st = self.lock();
        let Some(pos) = st.rules.iter().position(|(i, _)| *i == id) else {
            return Err(err("id", format!("no rule with id {id}")));
        };
        let mut rules = st.rules.clone();
        let (_, gone) = rules.remove(pos);
        self.set_rules(&mut st, rules)?;
        Ok(RuleRemoved {
            removed: RuleEntry {
                id,
                rule: rule_text(&gone),
            },
        })
    }

    /// `budget.set`: one class's ring budget.
    pub fn budget_set(&self, class: &str, budget: Budget) -> Result<BudgetChanged, CtlError> {
        let mut st = self.lock();
        let i = st.class_index(class)?;
        let snap = self.latest();
        let previous = (snap.class_to_ring.get(i)).and_then(|&r| snap.ring_budgets.get(r).copied());
        let mut cfg = st.cfg.clone();
        cfg.classes[i].budget = budget;
        self.apply_sched(&mut st, cfg)?;
        Ok(BudgetChanged {
            class: class.to_string(),
            budget,
            previous,
        })
    }

    /// `device_budget.set`.
    pub fn device_budget_set(&self, budget: u32) -> Result<DeviceBudgetChanged, CtlError> {
        if budget == 0 {
            return Err(err("budget", "must be at least 1"));
        }
        let mut st = self.lock();
        let previous = st.cfg.device_budget;
        let mut cfg = st.cfg.clone();
        cfg.device_budget = budget;
        self.apply_sched(&mut st, cfg)?;
        Ok(DeviceBudgetChanged {
            device_budget: budget,
            previous,
        })
    }

    /// `strategy.set`.
    pub fn strategy_set(&self, strategy: StrategyKind) -> Result<StrategyChanged, CtlError> {
        let mut st = self.lock();
        let previous = self.latest().strategy.unwrap_or(st.cfg.strategy);
        let mut cfg = st.cfg.clone();
        cfg.strategy = strategy;
        self.apply_sched(&mut st, cfg)?;
        Ok(StrategyChanged { strategy, previous })
    }

    /// `wakeup.set`: the idle wait mode (and the adaptive mode's spin).
    pub fn wakeup_set(
        &self,
        mode: WakeMode,
        spin_us: Option<u64>,
    ) -> Result<WakeupChanged, CtlError> {
        if spin_us.is_some() && mode != WakeMode::Adaptive {
            return Err(err("spin_us", "only the adaptive mode spins"));
        }
        if spin_us.is_some_and(|s| s > 1_000_000) {
            return Err(err("spin_us", "at most 1000000 (1 s)"));
        }
        let mut st = self.lock();
        st.cfg
            .check_realtime_wake(mode)
            .map_err(|e| config_err(&e))?;
        let spin = spin_us.unwrap_or(st.cfg.spin_us);
        let previous = WakeupState {
            wakeup: st.cfg.wake,
            spin_us: st.cfg.spin_us,
        };
        self.apply_wake(&st, mode, spin)?;
        st.cfg.wake = mode;
        st.cfg.spin_us = spin;
        self.changed();
        Ok(WakeupChanged {
            now: WakeupState {
                wakeup: mode,
                spin_us: spin,
            },
            previous,
        })
    }

    /// `route.add`: a static route (replacing one for the same prefix). Interface names are
    /// looked up in the calling thread's network namespace.
    pub fn route_add(
        &self,
        prefix: &str,
        via: Option<&str>,
        dev: &str,
    ) -> Result<RouteAdded, CtlError> {
        let p = prefix_of(prefix)?;
        let gw: Option<std::net::IpAddr> = match via {
            Some(v) => Some(
                v.parse()
                    .map_err(|_| err("via", format!("`{v}` is not an IP address")))?,
            ),
            None => None,
        };
        if gw.is_some_and(|g| g.is_ipv4() != p.addr().is_ipv4()) {
            return Err(err(
                "via",
                "gateway and prefix are of different IP versions",
            ));
        }
        let ifindex = llr_io::ebpf::ifindex(dev)
            .map_err(|_| err("dev", format!("no interface named `{dev}`")))?;
        let mut st = self.lock();
        if !st.ifindexes.contains(&ifindex) {
            return Err(err(
                "dev",
                format!("`{dev}` is not one of the router's interfaces"),
            ));
        }
        let mut spec = st.spec.clone();
        spec.routes.retain(|r| r.prefix != p);
        spec.routes.push(StaticRoute {
            prefix: p,
            ifindex,
            gateway: gw,
        });
        self.set_routes(&mut st, spec)?;
        let same = |r: &RouteConfig| kernel::parse_prefix(&r.prefix) == Some(p);
        let replaced = st.cfg.routes.iter().any(same);
        st.cfg.routes.retain(|r| !same(r));
        st.cfg.routes.push(RouteConfig {
            prefix: prefix.to_string(),
            dev: dev.to_string(),
            via: gw,
        });
        Ok(RouteAdded {
            route: StaticRouteView {
                prefix: prefix.to_string(),
                via: gw.map(|g| g.to_string()),
                dev: dev.to_string(),
            },
            replaced,
        })
    }

    /// `route.remove`: a static route (kernel routes are changed with `ip route`).
    pub fn route_remove(&self, prefix: &str) -> Result<RouteRemoved, CtlError> {
        let p = prefix_of(prefix)?;
        let mut st = self.lock();
        if !st.spec.routes.iter().any(|r| r.prefix == p) {
            return Err(err(
                "prefix",
                format!("no static route for {prefix} (kernel routes are changed with `ip route`)"),
            ));
        }
        let mut spec = st.spec.clone();
        spec.routes.retain(|r| r.prefix != p);
        self.set_routes(&mut st, spec)?;
        st.cfg
            .routes
            .retain(|r| kernel::parse_prefix(&r.prefix) != Some(p));
        Ok(RouteRemoved {
            removed: prefix.to_string(),
        })
    }
}

impl ControlTarget for RouterCtl {
    fn handle(&self, cmd: Command) -> Result<Value, CtlError> {
        match cmd {
            Command::Status {} => reply(Ok(self.status())),
            Command::Counters {} => reply(Ok(self.metrics(Duration::from_millis(50)))),
            Command::Filter {} => reply(Ok(self.filter())),
            Command::Interfaces {} => reply(Ok(InterfacesView {
                interfaces: self.interfaces(),
            })),
            Command::FibSummary { query } => reply(self.fib_summary(&query)),
            Command::FibGet { packet } => reply(self.fib_get(&packet)),
            Command::FibRules {} => reply(Ok(self.fib_rules())),
            Command::FlowGet { packet } => reply(self.flow_get(&packet)),
            Command::Fib { .. } | Command::Neighbours { .. } | Command::FlowList { .. } => {
                let key = cmd.listing_key().expect("a listing");
                llr_ops::ctl::listing::collect(key, |out| self.list(cmd, out))
            }
            Command::RulesList {} => reply(Ok(RulesView {
                rules: self.rules(),
            })),
            Command::RulesAdd { rule } => reply(self.rules_add(&rule)),
            Command::RulesRemove { id } => reply(self.rules_remove(id)),
            Command::BudgetSet { class, budget } => reply(self.budget_set(&class, budget)),
            Command::DeviceBudgetSet { budget } => reply(self.device_budget_set(budget)),
            Command::StrategySet { strategy } => reply(self.strategy_set(strategy)),
            Command::WakeupSet { mode, spin_us } => reply(self.wakeup_set(mode, spin_us)),
            Command::RouteAdd { prefix, via, dev } => {
                reply(self.route_add(&prefix, via.as_deref(), &dev))
            }
            Command::RouteRemove { prefix } => reply(self.route_remove(&prefix)),
            Command::Reload {} => reply(self.reload()),
            Command::FlowAdd { flow } => reply(self.flow_add(*flow)),
            Command::FlowSet { flow } => reply(self.flow_set(*flow)),
            Command::FlowDel { name } => reply(self.flow_del(&name)),
        }
    }

    fn list(&self, cmd: Command, out: &mut Listing<'_>) -> Result<Value, CtlError> {
        match cmd {
            Command::Fib { limit, query } => self.list_fib(limit, &query, out),
            Command::Neighbours { limit, dev } => self.list_neighbours(limit, dev.as_deref(), out),
            Command::FlowList { query } => self.list_flows(&query, out),
            other => Err(err("cmd", format!("{} is not a listing", other.name()))),
        }
    }
}

/// A typed reply as the JSON the protocol carries.
fn reply<T: serde::Serialize>(r: Result<T, CtlError>) -> Result<Value, CtlError> {
    serde_json::to_value(r?).map_err(|e| err("result", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_print_with_the_config_field_names() {
        let r: RuleSpec = "class=rt proto=udp sport=1 dport=5000-5010 ipver=4"
            .parse()
            .unwrap();
        let t = rule_text(&r);
        assert_eq!(
            t,
            "class=rt ip_version=4 proto=udp src_port=1 dst_port=5000-5010"
        );
        // and the parser reads it back
        assert_eq!(t.parse::<RuleSpec>().unwrap(), r);
    }
}
