//! The host's firewall on llrouter's forwarding path: read at start (refused, naming the rule,
//! when a rule cannot be honoured and `firewall.unsupported = "refuse"`), watched while running
//! (nftables change notifications, legacy iptables polled), compiled by
//! [`llr_core::filter::nft`] and published to the workers with the forwarder.
//!
//! A change made while running cannot be refused: the kernel has already taken it. Its rules
//! llrouter cannot evaluate then hand the packets that reach them to the kernel, and a ruleset
//! that cannot be read at all hands every packet to the kernel, until it can be read again.
//! Either way nothing the host forbids is forwarded by llrouter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use llr_core::filter::nft::compile;
use llr_core::filter::xdp::XdpDrops;
use llr_core::filter::{
    Action, BaseChain, Chain, Families, FamilyMode, Filter, Hook, RuleOrigin, RuleReport,
};
use llr_core::fwd::SharedForwarder;
use llr_io::netfilter::{self, NftWatch};
pub use llr_ops::views::FilterView;

use crate::config::{FirewallConfig, FirewallMode, Unsupported};
use crate::steer::Classifiers;

/// The firewall's state, shared with the control plane.
#[derive(Debug, Default)]
pub struct FirewallState {
    cfg: FirewallConfig,
    inner: Mutex<StateInner>,
    /// What the classifiers dropped for which rule.
    xdp: Mutex<XdpAccount>,
    /// The classifiers whose drop counters are read (set at the first publication).
    classifiers: OnceLock<Arc<Mutex<Classifiers>>>,
    /// The connections llrouter carries for the kernel's conntrack ([`crate::conntrack`]).
    pub conntrack: Arc<crate::conntrack::CtCounters>,
}

/// A rule across reloads: family, table, chain, handle.
type RuleKey = (String, String, String, u64);

fn rule_key(o: &RuleOrigin) -> RuleKey {
    (o.family.clone(), o.table.clone(), o.chain.clone(), o.handle)
}

/// The classifiers' drops, by rule: their counters are per slot of a drop-table generation,
/// and the slots of a generation belong to the filter it was computed from.
#[derive(Debug, Default)]
struct XdpAccount {
    /// The final counts of generations replaced since start.
    base: HashMap<RuleKey, (u64, u64)>,
    /// Per interface and generation: the rules each slot counts for (its rule and the
    /// policies its packets crossed).
    slots: HashMap<u32, [Vec<Vec<RuleKey>>; 2]>,
    /// Rules left out of the tables last time, to say so once per change.
    left_out: Vec<RuleKey>,
}

#[derive(Debug, Default)]
struct StateInner {
    summary: String,
    error: Option<String>,
    loads: u64,
}

impl FirewallState {
    /// The view of the filter `fwd` runs now.
    pub fn view(&self, fwd: &SharedForwarder) -> FilterView {
        let filter = fwd.load().filter.clone();
        let rules = self.report(&filter);
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let families = (filter.family_modes().iter())
            .map(|m| {
                match m {
                    FamilyMode::Llrouter => "llrouter",
                    FamilyMode::Conntrack => "conntrack",
                    FamilyMode::Kernel => "kernel",
                }
                .to_string()
            })
            .collect();
        FilterView {
            mode: mode_name(self.cfg.mode).into(),
            unsupported: unsupported_name(self.cfg.unsupported).into(),
            summary: s.summary.clone(),
            error: s.error.clone(),
            loads: s.loads,
            rules,
            families,
            carried_connections: self.conntrack.carried.load(Ordering::Relaxed),
            taken_connections: self.conntrack.taken.load(Ordering::Relaxed),
        }
    }

    /// Every rule and policy of `filter` with its counts: the workers' and the classifiers'.
    pub fn report(&self, filter: &Filter) -> Vec<RuleReport> {
        let xdp = self.xdp_counts();
        let mut rules = filter.report();
        for r in &mut rules {
            if let Some(&(p, b)) = xdp.get(&rule_key(&r.origin)) {
                r.xdp_packets = p;
                r.xdp_bytes = b;
                r.packets += p;
                r.bytes += b;
            }
        }
        rules
    }

    /// Installs in every classifier the drops it can take for `filter` (none with the
    /// firewall off), keeping the counts of the ones replaced.
    pub fn publish_drops(&self, filter: &Filter, classifiers: &Arc<Mutex<Classifiers>>) {
        let _ = self.classifiers.set(classifiers.clone());
        let mut cl = classifiers.lock().unwrap_or_else(|e| e.into_inner());
        let mut guard = self.xdp.lock().unwrap_or_else(|e| e.into_inner());
        let acct = &mut *guard;
        let mut left_out = Vec::new();
        for (ifindex, c) in cl.iter_mut() {
            let d = if self.cfg.mode == FirewallMode::Off {
                XdpDrops::default()
            } else {
                filter.xdp_drops(ifindex)
            };
            left_out.extend(
                d.left_out
                    .iter()
                    .map(|&id| rule_key(&filter.origins[id as usize])),
            );
            let keys: Vec<Vec<RuleKey>> = (d.slots.iter())
                .map(|s| {
                    std::iter::once(s.rule)
                        .chain(s.crossed.iter().copied())
                        .map(|id| rule_key(&filter.origins[id as usize]))
                        .collect()
                })
                .collect();
            let n = d.slots.len();
            match c.set_drops(&d) {
                Ok((gen, retired)) => {
                    let gens = acct.slots.entry(ifindex).or_default();
                    let old = std::mem::replace(&mut gens[gen as usize], keys);
                    for (keys, (p, b)) in old.iter().zip(retired) {
                        for k in keys {
                            let e = acct.base.entry(k.clone()).or_default();
                            e.0 += p;
                            e.1 += b;
                        }
                    }
                    tracing::debug!("firewall: ifindex {ifindex}: {n} rule(s) dropped in XDP");
                }
                Err(e) => tracing::error!(
                    "firewall: ifindex {ifindex}: cannot install the drops of the XDP \
                     classifier: {e}; the workers drop those packets"
                ),
            }
        }
        left_out.sort();
        left_out.dedup();
        if !left_out.is_empty() && left_out != acct.left_out {
            tracing::warn!(
                "firewall: {} drop rule(s) that the XDP classifier could take do not fit its \
                 tables ({} rules, {} prefixes per table): the workers drop their packets",
                left_out.len(),
                llr_core::filter::xdp::MAX_SLOTS,
                llr_core::filter::xdp::MAX_PREFIXES
            );
        }
        acct.left_out = left_out;
    }

    /// What the classifiers dropped, by rule: replaced generations and both live ones.
    fn xdp_counts(&self) -> HashMap<RuleKey, (u64, u64)> {
        let Some(classifiers) = self.classifiers.get() else {
            return HashMap::new();
        };
        let cl = classifiers.lock().unwrap_or_else(|e| e.into_inner());
        let acct = self.xdp.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = acct.base.clone();
        for (ifindex, c) in cl.iter() {
            let Some(gens) = acct.slots.get(&ifindex) else {
                continue;
            };
            for (gen, slots) in gens.iter().enumerate() {
                let Ok(counts) = c.drop_counts(gen as u32, slots.len()) else {
                    continue;
                };
                for (keys, (p, b)) in slots.iter().zip(counts) {
                    for k in keys {
                        let e = out.entry(k.clone()).or_default();
                        e.0 += p;
                        e.1 += b;
                    }
                }
            }
        }
        out
    }
}

fn mode_name(m: FirewallMode) -> &'static str {
    match m {
        FirewallMode::Host => "host",
        FirewallMode::Off => "off",
    }
}

fn unsupported_name(u: Unsupported) -> &'static str {
    match u {
        Unsupported::Refuse => "refuse",
        Unsupported::Kernel => "kernel",
    }
}

/// The setting that hands a rule's packets to the kernel, for messages.
const KERNEL_HINT: &str = "set [firewall] unsupported = \"kernel\" to hand the packets that \
reach it to the kernel (which forwards them only with forwarding on), or [firewall] mode = \"off\" to \
forward without the host's ruleset";

/// A filter read from the host, and what to say about it.
pub struct Loaded {
    /// The filter.
    pub filter: Filter,
    /// One line for the log and `show filter`.
    pub summary: String,
    /// Rules whose packets go to the kernel, one line each with the reason.
    pub kernel_rules: Vec<String>,
}

/// Reads and compiles the host's ruleset; `ifaces` are the served interfaces.
pub fn load(ifaces: &[(String, u32)]) -> Result<Loaded, String> {
    let legacy = netfilter::legacy_rules().map_err(|e| e.to_string())?;
    if !legacy.is_empty() {
        // Legacy iptables rules are not compiled: all forwarded packets go to the kernel.
        let origins = legacy
            .iter()
            .map(|l| RuleOrigin {
                family: "iptables-legacy".into(),
                table: l.split(':').next().unwrap_or("").into(),
                chain: String::new(),
                handle: 0,
                text: l.clone(),
                kernel_because: Some(
                    "legacy iptables rules are not compiled by llrouter (use iptables-nft, \
                     Debian's default)"
                        .into(),
                ),
                conntrack: false,
            })
            .collect::<Vec<_>>();
        let kernel_rules = origins.iter().map(|o| o.text.clone()).collect();
        return Ok(Loaded {
            filter: everything_to_kernel(origins),
            summary: format!(
                "{} legacy iptables rule(s) on the forwarding path: every forwarded packet goes \
                 to the kernel",
                legacy.len()
            ),
            kernel_rules,
        });
    }
    let json = netfilter::read_ruleset().map_err(|e| e.to_string())?;
    let compiled = compile(&json, ifaces).map_err(|e| e.to_string())?;
    let f = compiled.filter;
    let kernel_rules: Vec<String> = f
        .kernel_rules()
        .map(|o| {
            format!(
                "{o} ({})",
                o.kernel_because.as_deref().unwrap_or("not evaluated")
            )
        })
        .collect();
    let base = f.hooks.iter().map(Vec::len).sum::<usize>();
    let rules = f.origins.iter().filter(|o| o.handle != 0).count();
    let summary = if f.is_empty() {
        "no netfilter chain on the forwarding path".to_string()
    } else {
        let hooks: Vec<&str> = Hook::ALL
            .iter()
            .filter(|&&h| f.has(h))
            .map(|h| h.name())
            .collect();
        let ct: Vec<&str> = (f.family_modes().iter().zip(["IPv4", "IPv6"]))
            .filter(|(m, _)| **m == FamilyMode::Conntrack)
            .map(|(_, n)| n)
            .collect();
        format!(
            "{rules} rule(s) in {base} base chain(s) on {} enforced by llrouter{}{}",
            hooks.join(", "),
            if ct.is_empty() {
                String::new()
            } else {
                format!(
                    "; the ruleset reads connection state: the kernel forwards each {} \
                     connection until it is established, llrouter the rest of it",
                    ct.join(" and ")
                )
            },
            if kernel_rules.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} rule(s) hand the packets reaching them to the kernel",
                    kernel_rules.len()
                )
            }
        )
    };
    Ok(Loaded {
        filter: f,
        summary,
        kernel_rules,
    })
}

/// A filter that hands every packet to the kernel: what runs while the ruleset cannot be read
/// or is one llrouter does not compile at all. `origins` name why (at least one is made up).
fn everything_to_kernel(mut origins: Vec<RuleOrigin>) -> Filter {
    if origins.is_empty() {
        origins.push(RuleOrigin {
            family: String::new(),
            table: String::new(),
            chain: String::new(),
            handle: 0,
            text: "the host's ruleset could not be read".into(),
            kernel_because: Some("unknown ruleset".into()),
            conntrack: false,
        });
    }
    let policy_id = origins.len() as u32;
    origins.push(RuleOrigin {
        family: "llrouter".into(),
        table: String::new(),
        chain: String::new(),
        handle: 0,
        text: "everything to the kernel".into(),
        kernel_because: None,
        conntrack: false,
    });
    let chain = Chain {
        rules: vec![llr_core::filter::Rule {
            matches: Vec::new(),
            action: Action::Kernel,
            id: 0,
        }],
        base: Some(BaseChain {
            hook: Hook::Prerouting,
            priority: i32::MIN,
            families: Families::Both,
            policy_drop: false,
            policy_id,
            nat: false,
        }),
    };
    Filter::new(vec![chain], origins)
}

/// The host's firewall at start: the filter to publish first, or the refusal.
pub fn at_start(
    cfg: &FirewallConfig,
    ifaces: &[(String, u32)],
) -> Result<(Filter, Arc<FirewallState>), String> {
    let state = Arc::new(FirewallState {
        cfg: *cfg,
        ..FirewallState::default()
    });
    if cfg.mode == FirewallMode::Off {
        let note = match load(ifaces) {
            Ok(l) if !l.filter.is_empty() => format!(
                "firewall.mode = \"off\": the host's ruleset ({}) is NOT applied to the packets \
                 llrouter forwards",
                l.summary
            ),
            _ => "firewall.mode = \"off\": llrouter does not filter".to_string(),
        };
        tracing::warn!("{note}");
        state.set(note, None);
        return Ok((Filter::default(), state));
    }
    let l = load(ifaces).map_err(|e| {
        format!(
            "cannot read the host's firewall: {e}; llrouter does not forward what it cannot \
             check (set [firewall] mode = \"off\" to forward without the host's ruleset)"
        )
    })?;
    if cfg.unsupported == Unsupported::Refuse && !l.kernel_rules.is_empty() {
        let more = match l.kernel_rules.len() {
            1 => String::new(),
            n => format!(" (and {} more: `llrouter run --check` lists them)", n - 1),
        };
        return Err(format!(
            "the host's firewall has a rule llrouter cannot honour: {}{more}; {KERNEL_HINT}",
            l.kernel_rules[0]
        ));
    }
    for k in &l.kernel_rules {
        tracing::warn!("firewall: packets reaching {k} go to the kernel");
    }
    if let Some(off) = conntrack_without_forwarding(&l.filter) {
        if cfg.unsupported == Unsupported::Refuse {
            return Err(off);
        }
        tracing::warn!("{off}");
    }
    warn_forwarding_off(&l);
    tracing::info!("firewall: {}", l.summary);
    state.set(l.summary, None);
    Ok((l.filter, state))
}

/// A family whose connections the kernel must forward until they are established, with the
/// kernel's forwarding off: no connection through llrouter would ever be established.
fn conntrack_without_forwarding(f: &Filter) -> Option<String> {
    let modes = f.family_modes();
    for (i, (path, fam, sysctl)) in [
        (
            "/proc/sys/net/ipv4/ip_forward",
            "IPv4",
            "net.ipv4.ip_forward",
        ),
        (
            "/proc/sys/net/ipv6/conf/all/forwarding",
            "IPv6",
            "net.ipv6.conf.all.forwarding",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        if modes[i] != FamilyMode::Conntrack
            || !std::fs::read_to_string(path).is_ok_and(|v| v.trim() == "0")
        {
            continue;
        }
        let rule = (f.origins.iter())
            .find(|o| o.conntrack && o.handle != 0)
            .map(|o| o.to_string())
            .unwrap_or_default();
        return Some(format!(
            "the host's firewall reads connection state ({rule}): the kernel forwards each \
             {fam} connection until it is established, and {fam} forwarding is off in the \
             kernel ({sysctl} = 0), so no {fam} connection could be established through \
             llrouter; set {sysctl}=1, or set [firewall] unsupported = \"kernel\" to start \
             anyway"
        ));
    }
    None
}

/// The kernel forwards the packets handed to it only with forwarding on.
fn warn_forwarding_off(l: &Loaded) {
    if l.kernel_rules.is_empty() {
        return;
    }
    for (path, fam) in [
        ("/proc/sys/net/ipv4/ip_forward", "IPv4"),
        ("/proc/sys/net/ipv6/conf/all/forwarding", "IPv6"),
    ] {
        if std::fs::read_to_string(path).is_ok_and(|v| v.trim() == "0") {
            tracing::warn!(
                "firewall: {fam} forwarding is off in the kernel ({path} = 0): the {fam} \
                 packets llrouter hands to it for the rules above are dropped"
            );
        }
    }
}

impl FirewallState {
    fn set(&self, summary: String, error: Option<String>) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.summary = summary;
        s.error = error;
        s.loads += 1;
    }
}

/// Watches the host's ruleset until `stop` and publishes every change to `fwd`.
pub fn watch(
    state: Arc<FirewallState>,
    fwd: Arc<SharedForwarder>,
    classifiers: Arc<Mutex<Classifiers>>,
    ifaces: Vec<(String, u32)>,
    stop: Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    if state.cfg.mode == FirewallMode::Off {
        return None;
    }
    let mut nl = match NftWatch::new() {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::error!("firewall: {e}; the ruleset is read every second instead");
            None
        }
    };
    let spawned = std::thread::Builder::new()
        .name("llr-firewall".into())
        .spawn(move || {
            // Legacy iptables sends no notification, and a failed read is retried: both polled.
            let poll_every = Duration::from_secs(1);
            let mut last_poll = Instant::now();
            let mut last_legacy = netfilter::legacy_rules().ok();
            let mut failing = false;
            while !stop.load(Ordering::Relaxed) {
                let changed = match nl.as_mut() {
                    Some(w) => w.wait(Duration::from_millis(200)),
                    None => {
                        std::thread::sleep(Duration::from_millis(200));
                        last_poll.elapsed() >= poll_every
                    }
                };
                let mut due = changed || (failing && last_poll.elapsed() >= poll_every);
                if !due && last_poll.elapsed() >= poll_every {
                    last_poll = Instant::now();
                    let legacy = netfilter::legacy_rules().ok();
                    due = legacy != last_legacy;
                    last_legacy = legacy;
                }
                if !due {
                    continue;
                }
                last_poll = Instant::now();
                // A transaction of many rules sends many notifications: read once after them.
                if let Some(w) = nl.as_mut() {
                    while w.wait(Duration::from_millis(20)) {}
                }
                failing = !reload(&state, &fwd, &classifiers, &ifaces);
            }
        });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::error!("firewall: cannot start the watcher thread: {e}");
            None
        }
    }
}

/// Reads the ruleset again and publishes it; false if it could not be read (everything then
/// goes to the kernel).
fn reload(
    state: &FirewallState,
    fwd: &SharedForwarder,
    classifiers: &Arc<Mutex<Classifiers>>,
    ifaces: &[(String, u32)],
) -> bool {
    let (filter, ok) = match load(ifaces) {
        Ok(l) => {
            for k in &l.kernel_rules {
                if state.cfg.unsupported == Unsupported::Refuse {
                    tracing::error!(
                        "firewall: a rule llrouter cannot honour was added while running: {k}; \
                         the packets reaching it go to the kernel ({KERNEL_HINT})"
                    );
                } else {
                    tracing::warn!("firewall: packets reaching {k} go to the kernel");
                }
            }
            warn_forwarding_off(&l);
            tracing::info!("firewall: reloaded: {}", l.summary);
            state.set(l.summary, None);
            (l.filter, true)
        }
        Err(e) => {
            tracing::error!(
                "firewall: cannot read the host's ruleset: {e}; every forwarded packet goes to \
                 the kernel until it can"
            );
            state.set(
                "the ruleset cannot be read: everything to the kernel".into(),
                Some(e),
            );
            (everything_to_kernel(Vec::new()), false)
        }
    };
    // A family whose frames the kernel gets more of (conntrack: those of connections llrouter
    // was not told of; kernel: all) goes to it before the filter that says so is published,
    // and stays until the filter that no longer says so is.
    let old = fwd.load().filter.family_modes();
    let new = filter.family_modes();
    set_family_modes(classifiers, [old[0].max(new[0]), old[1].max(new[1])]);
    let filter = Arc::new(filter);
    fwd.update(|f| {
        filter.carry_counters(&f.filter);
        f.filter = filter.clone();
    });
    set_family_modes(classifiers, new);
    state.publish_drops(&filter, classifiers);
    ok
}

/// Tells the classifiers (before the rings) who forwards each family.
pub fn set_family_modes(classifiers: &Mutex<Classifiers>, modes: [FamilyMode; 2]) {
    let mut c = classifiers.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = c.set_family_modes(modes) {
        tracing::error!("firewall: cannot set IPv4, IPv6 to {modes:?} in the classifiers: {e}");
    }
}

/// What `llrouter run --check` and `--dry-run` say about the host's firewall: lines to print,
/// and the refusal a start would meet, if any. A ruleset that cannot be read here (not root,
/// no nft) is said, not refused: the check does not forward.
pub fn describe(cfg: &FirewallConfig, served: &[(String, u32)]) -> (Vec<String>, Option<String>) {
    let mut lines = Vec::new();
    if cfg.mode == FirewallMode::Off {
        lines.push(
            "firewall: mode off: llrouter forwards without the host's netfilter ruleset".into(),
        );
        return (lines, None);
    }
    match load(served) {
        Err(e) => {
            lines.push(format!(
                "firewall: cannot read the host's ruleset here: {e}"
            ));
            (lines, None)
        }
        Ok(l) => {
            lines.push(format!("firewall: {}", l.summary));
            let refuse = cfg.unsupported == Unsupported::Refuse && !l.kernel_rules.is_empty();
            for k in &l.kernel_rules {
                let what = if refuse {
                    "cannot honour"
                } else {
                    "hands to the kernel the packets reaching"
                };
                lines.push(format!("firewall: llrouter {what} {k}"));
            }
            for o in l.filter.origins.iter().filter(|o| o.conntrack) {
                lines.push(format!(
                    "firewall: {o}: evaluated for established connections (the kernel judges \
                     a connection's first packets)"
                ));
            }
            let mut refusal = refuse.then(|| {
                format!(
                    "the host's firewall has {} rule(s) llrouter cannot honour (listed above); \
                     {KERNEL_HINT}",
                    l.kernel_rules.len()
                )
            });
            if let Some(off) = conntrack_without_forwarding(&l.filter) {
                if cfg.unsupported == Unsupported::Refuse {
                    refusal.get_or_insert(off);
                } else {
                    lines.push(format!("firewall: {off}"));
                }
            }
            (lines, refusal)
        }
    }
}
