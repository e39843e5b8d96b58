//! The router's configuration: the TOML schema of `llrouter run --config`, also built in code
//! (`RouterConfig { interfaces, classes, ..Default::default() }`). Unknown keys are errors;
//! validation names the field.
//!
//! ```toml
//! interfaces = ["veth-rin", "veth-rout"]
//! cores = [1]                # one worker per core, worker i on rx queue i
//! worker-priority = 0        # SCHED_FIFO 1–99 for the workers; 0: the normal scheduler
//! strategy = "ll-wfq"
//! device-budget = 64
//! wake = "interrupt"          # interrupt | busy | adaptive
//! steering = "xdp"            # xdp (eBPF classifier) | ntuple (NIC filters, ethtool -N)
//!                             # | queues (the class is the rx queue's: w × classes + c)
//! [[classes]]
//! name = "rt"
//! budget = 60
//! [[classes]]
//! name = "be"
//! budget = 4
//! [[rules]]
//! class = "rt"
//! dscp = 46
//! ```

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use llr_core::classify::RuleSpec;
use llr_core::flow::{AclSpec, FlowSchedConfig, FlowSpec};
use llr_core::sched::{AutoBudgetSpec, ClassSpec, SchedConfig, StrategyKind};
use llr_io::ebpf::AttachMode;
use llr_io::xsk::{WakeMode, XskOptions};
use serde::{Deserialize, Serialize};

/// A configuration that does not load or does not check out.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A field and why it is rejected (`field` as spelled in the file: `tx-batch`, `rules[0].dscp`).
    #[error("{field}: {reason}")]
    Field { field: String, reason: String },
    /// The file could not be read.
    #[error("read {}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    /// Not TOML, or not this schema (unknown key, wrong type).
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    /// `err`, found in the file at `path`.
    #[error("config {}: {err}", path.display())]
    File {
        path: PathBuf,
        err: Box<ConfigError>,
    },
}

impl ConfigError {
    /// A [`ConfigError::Field`].
    pub fn field(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The innermost error, without the file it came from.
    pub fn root(&self) -> &ConfigError {
        match self {
            ConfigError::File { err, .. } => err.root(),
            e => e,
        }
    }
}

impl From<llr_core::sched::ConfigError> for ConfigError {
    fn from(e: llr_core::sched::ConfigError) -> Self {
        ConfigError::Field {
            field: e.field,
            reason: e.reason,
        }
    }
}

/// Returns a [`ConfigError::Field`] naming `field`, the rest formatted as the reason.
macro_rules! bail {
    ($field:expr, $($reason:tt)+) => {
        return Err(ConfigError::field($field, format!($($reason)+)))
    };
}

// After `bail!`, which it uses.
mod resolve;
pub(crate) use resolve::rt_throttle_us;
pub use resolve::{FlowSetup, Resolved};

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}
fn default_strategy() -> StrategyKind {
    StrategyKind::LlWfq
}
fn default_device_budget() -> u32 {
    SchedConfig::DEFAULT_DEVICE_BUDGET
}
fn default_time_slice() -> u64 {
    SchedConfig::DEFAULT_TIME_SLICE_NS
}
fn default_true() -> bool {
    true
}
fn default_spin() -> u64 {
    RouterConfig::DEFAULT_SPIN_US
}
fn default_batch() -> u32 {
    RouterConfig::DEFAULT_BATCH
}
fn default_tx_batch() -> u32 {
    llr_core::sched::TxPolicy::DEFAULT_BATCH
}
fn default_tx_hold_us() -> u32 {
    llr_core::sched::TxPolicy::DEFAULT_HOLD_US
}
/// Kernel routes and neighbours arrive as netlink events; the periodic re-dump is only a
/// safety net (a full table takes a second of CPU to dump and diff), so it is rare.
/// Memory per route assumed when `max-routes` comes from a memory limit: the full-table
/// fixture measured ~110 bytes per route beyond the fixed parts below (prefix maps, IPv6
/// groups, the mirror's view; docs/results.md, "Full table and BIRD"), rounded up for re-dumps and slack.
pub const BYTES_PER_ROUTE: u64 = 160;
/// Memory kept for everything but per-route state: rings, UMEM, maps and threads (55 MB
/// resident measured with no routes) and the IPv4 first level (64 MiB, most of it touched once
/// the table is large).
pub const BASE_BYTES: u64 = 160 << 20;

/// The route limit a memory limit allows (at least 1: a limit that leaves no room for routes
/// still means "limited").
pub fn auto_max_routes(memory_limit: u64) -> u64 {
    (memory_limit.saturating_sub(BASE_BYTES) / BYTES_PER_ROUTE).max(1)
}

/// `max-routes` as it applies: the configured one, or one derived from `memory_limit` (the
/// cgroup's), or none (0).
pub fn effective_max_routes(configured: u64, memory_limit: Option<u64>) -> u64 {
    match (configured, memory_limit) {
        (0, Some(m)) => auto_max_routes(m),
        (c, _) => c,
    }
}

fn default_refresh() -> u64 {
    300_000
}

/// How packets reach the per-class rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Steering {
    /// The eBPF XDP classifier redirects each frame to its class's AF_XDP socket (one queue).
    #[default]
    Xdp,
    /// NIC ntuple (Flow Director) filters steer each class to its own hardware queue
    /// (`ethtool -N … action Q`), one socket per queue (`llr_io::ntuple`); one worker.
    Ntuple,
    /// Something outside llrouter (a NIC configured by hand, a switch, the testbed's
    /// generator) already puts class c of worker w into hardware queue `w × classes + c`; the
    /// classifier only redirects by queue index (no rules).
    Queues,
}

impl Steering {
    /// The config / CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            Steering::Xdp => "xdp",
            Steering::Ntuple => "ntuple",
            Steering::Queues => "queues",
        }
    }
}

/// A static route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// `addr/len`.
    pub prefix: String,
    /// Egress interface name.
    pub dev: String,
    /// Next hop (absent: directly connected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<IpAddr>,
}

/// `[control]`: the control socket of `llrouter ctl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ControlConfig {
    /// Unix socket path (mode 0600).
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
}

fn default_socket() -> PathBuf {
    llr_ops::ctl::DEFAULT_SOCKET.into()
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            socket: default_socket(),
        }
    }
}

/// `[metrics]`: the Prometheus endpoint (off unless the section is present).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MetricsConfig {
    /// `addr:port`; loopback unless `allow-remote = true`.
    pub listen: String,
    #[serde(default)]
    pub allow_remote: bool,
}

impl MetricsConfig {
    /// The checked listen address.
    pub fn addr(&self) -> Result<std::net::SocketAddr, ConfigError> {
        let a: std::net::SocketAddr = self.listen.parse().map_err(|_| {
            ConfigError::field(
                "metrics.listen",
                format!("`{}` is not addr:port (e.g. 127.0.0.1:9877)", self.listen),
            )
        })?;
        if !a.ip().is_loopback() && !self.allow_remote {
            return Err(ConfigError::field(
                "metrics.listen",
                format!("{a} is not a loopback address; set metrics.allow-remote = true to serve metrics beyond this host"),
            ));
        }
        Ok(a)
    }
}

/// `[icmp]`: the ICMP errors the router sends (time exceeded, unreachable, fragmentation
/// needed / packet too big) and the frames it hands to the kernel. Defaults are Linux's
/// (`icmp_msgs_per_sec` 1000, `icmp_msgs_burst` 50, `icmp_ratelimit` 1000 ms per host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct IcmpConfig {
    /// Errors per second, per type (0: send none).
    pub rate: u32,
    /// Burst per type.
    pub burst: u32,
    /// At most one error per this many ms to one host (0: no per-host limit).
    pub per_host_interval_ms: u64,
    /// Per-host burst.
    pub per_host_burst: u32,
    /// Frames for the kernel that reached the worker, per second, through the punt TAP
    /// `llr-punt` (0: drop them instead, counted as `punt_dropped`).
    pub punt_rate: u32,
}

impl Default for IcmpConfig {
    fn default() -> Self {
        let d = llr_core::fwd::IcmpLimits::default();
        IcmpConfig {
            rate: d.rate,
            burst: d.burst,
            per_host_interval_ms: d.per_dest_interval_ns / 1_000_000,
            per_host_burst: d.per_dest_burst,
            punt_rate: 10_000,
        }
    }
}

impl IcmpConfig {
    /// The limits for the worker; errors name the field.
    pub fn limits(&self) -> Result<llr_core::fwd::IcmpLimits, ConfigError> {
        if self.rate > 1_000_000 {
            bail!("icmp.rate", "{} per second; at most 1000000", self.rate);
        }
        if self.rate > 0 && self.burst == 0 {
            bail!("icmp.burst", "must be at least 1 when icmp.rate is not 0");
        }
        if self.per_host_interval_ms > 3_600_000 {
            bail!("icmp.per-host-interval-ms", "at most 3600000 (one hour)");
        }
        if self.per_host_interval_ms > 0 && self.per_host_burst == 0 {
            bail!(
                "icmp.per-host-burst",
                "must be at least 1 when icmp.per-host-interval-ms is not 0"
            );
        }
        Ok(llr_core::fwd::IcmpLimits {
            rate: self.rate,
            burst: self.burst,
            per_dest_interval_ns: self.per_host_interval_ms * 1_000_000,
            per_dest_burst: self.per_host_burst,
        })
    }
}

/// `[firewall]`: what llrouter does with the host's netfilter ruleset (nftables, iptables-nft,
/// iptables-legacy) for the packets it forwards. See docs/firewall.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct FirewallConfig {
    /// `host`: enforce the host's ruleset; `off`: forward without it (said at start).
    pub mode: FirewallMode,
    /// A rule llrouter cannot evaluate itself: `refuse` to start, naming it, or hand the
    /// packets that reach it to the `kernel`, which runs the whole ruleset on them.
    pub unsupported: Unsupported,
}

/// `firewall.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FirewallMode {
    /// The host's ruleset, read at start and whenever it changes.
    #[default]
    Host,
    /// No filtering by llrouter: the operator's explicit choice.
    Off,
}

/// `firewall.unsupported`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unsupported {
    /// Refuse to start.
    #[default]
    Refuse,
    /// Hand the packets that reach such a rule to the kernel.
    Kernel,
}

/// A static neighbour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighborConfig {
    pub ip: IpAddr,
    pub mac: String,
    pub dev: String,
}

/// `[auto-budget]`: what the worker aims for when it sets the budgets of the classes with
/// `budget = "auto"` (paper 000's Eq. 2, `b ≤ m·(1 − ρRT)`): the highest class's time in its
/// ring within `target-us` microseconds, or within `service-times` times the measured cost of a
/// frame (paper 000's `T* = m·x`); exactly one of the two. `window-ms`: how long each
/// measurement of ρRT and x runs (default 100).
///
/// ```toml
/// [[classes]]
/// name = "be"
/// budget = "auto"
/// [auto-budget]
/// target-us = 20
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AutoBudgetConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_times: Option<u32>,
    #[serde(default = "default_auto_window_ms")]
    pub window_ms: u64,
}

fn default_auto_window_ms() -> u64 {
    AutoBudgetSpec::DEFAULT_WINDOW_NS / 1_000_000
}

impl AutoBudgetConfig {
    /// The scheduler's form; errors name the field (`auto-budget.target-us`).
    pub fn spec(&self) -> Result<AutoBudgetSpec, ConfigError> {
        AutoBudgetSpec::new(self.target_us, self.service_times, self.window_ms)
            .map_err(|e| ConfigError::field(format!("auto-budget.{}", e.field), e.reason))
    }
}

/// The whole file. `Default` gives every optional field its default and no interfaces or
/// classes (both required).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RouterConfig {
    /// Interfaces to route between (at least one).
    pub interfaces: Vec<String>,
    /// CPU cores of the workers: one worker per core, worker i on `cores[i]` serving rx queue
    /// i of every interface (`steering = "queues"`: queues i×classes .. (i+1)×classes−1).
    /// Empty: one unpinned worker on queue 0.
    #[serde(default)]
    pub cores: Vec<usize>,
    /// CPU cores of the helper threads (control, metrics, route mirror); default: every core
    /// the process may use except the workers'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helper_cores: Option<Vec<usize>>,
    /// SCHED_FIFO priority of the worker threads, 1–99; 0 (the default): the normal scheduler.
    /// A real-time worker is not preempted by ordinary tasks, nor by real-time ones below it:
    /// on a PREEMPT_RT kernel, the interrupt threads (SCHED_FIFO 50) that run the NICs' receive
    /// work. Above them it leaves that work to its idle moments, so give it its own core.
    /// Needs CAP_SYS_NICE (as VPP's `scheduler-policy fifo`). Left out of a written config
    /// when 0, so that one written for an older router (the testbed's `--router-bin`) loads.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub worker_priority: u8,
    #[serde(default = "default_strategy")]
    pub strategy: StrategyKind,
    #[serde(default = "default_device_budget")]
    pub device_budget: u32,
    #[serde(default = "default_time_slice")]
    pub time_slice_ns: u64,
    /// Highest priority first; unmatched traffic goes to the last.
    pub classes: Vec<ClassSpec>,
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    #[serde(default)]
    pub neighbors: Vec<NeighborConfig>,
    /// Mirror the kernel's routes and neighbours (static entries override them).
    #[serde(default = "default_true")]
    pub kernel_routes: bool,
    /// Safety re-dump of the kernel's tables every this many ms (events do the real work).
    #[serde(default = "default_refresh")]
    pub route_refresh_ms: u64,
    /// Most routes the forwarder takes; beyond it llrouter hands routed packets to the kernel
    /// until the table fits (never a partial table). 0: derived from the memory limit of the
    /// router's cgroup, if it has one ([`crate::config::auto_max_routes`]), else no limit.
    #[serde(default)]
    pub max_routes: u64,
    /// Receive buffer of the route mirror's netlink event socket, KiB (0: 16 MiB, as zebra's
    /// `--nl-bufsize`). A burst of route events beyond it overruns the socket and costs a full
    /// re-dump of the kernel's tables (`llrouter_mirror_overruns_total`).
    #[serde(default)]
    pub netlink_buffer_kb: u64,
    /// Back the route tables' randomly read arrays (the IPv4 first level, the IPv6 trie) with
    /// transparent huge pages: fewer TLB misses per lookup (IPv4 lookups 0.82–0.94× in `cargo
    /// bench -p llr-core --bench pages`), for 16–18 MB more resident with a full table, as
    /// whole 2 MiB pages are committed where 4 KiB ones would do.
    #[serde(default)]
    pub huge_pages: bool,
    #[serde(default)]
    pub wake: WakeMode,
    #[serde(default = "default_spin")]
    pub spin_us: u64,
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// Frames of the lowest-priority ring held back before a transmit kick (1: kick per grant).
    #[serde(default = "default_tx_batch")]
    pub tx_batch: u32,
    /// How long frames of a higher ring may wait for `tx-batch` frames before their own
    /// transmit kick, µs (0: a kick after every grant of a higher ring). The worker never holds
    /// frames when it runs out of work, so this only costs latency under load.
    #[serde(default = "default_tx_hold_us")]
    pub tx_hold_us: u32,
    /// The target of the classes with `budget = "auto"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_budget: Option<AutoBudgetConfig>,
    /// Artificial per-packet cost, ns of busy waiting.
    #[serde(default)]
    pub cost_ns: u64,
    /// Artificial per-packet cost, as an ACL of this many rules that never match.
    #[serde(default)]
    pub acl_rules: u32,
    #[serde(default)]
    pub attach: AttachMode,
    /// Classification before the CPU: the XDP classifier or NIC ntuple filters.
    #[serde(default)]
    pub steering: Steering,
    /// Write an XDP-metadata timestamp per frame (ring-latency metrics; on by default).
    #[serde(default = "default_true")]
    pub timestamp_meta: bool,
    /// 802.1Q-tagged frames: the kernel's VLAN devices' (the default), or routed with the tag
    /// kept, between trunks that carry the same VLANs (`"forward"`).
    #[serde(default)]
    pub tagged_frames: llr_core::fwd::TaggedFrames,
    #[serde(default)]
    pub rings: XskOptions,
    #[serde(default)]
    pub control: ControlConfig,
    /// Off unless present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricsConfig>,
    #[serde(default)]
    pub icmp: IcmpConfig,
    #[serde(default)]
    pub firewall: FirewallConfig,
    /// The flow scheduler (paper 003): present, or any `flows`, turns flows on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_scheduler: Option<FlowSchedConfig>,
    /// Flows with their shares, quanta and pipelines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowSpec>,
    /// Named ACLs for the `acl(NAME)` element.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acls: Vec<AclSpec>,
}

impl RouterConfig {
    /// The README's configuration on `interfaces`: `ll-wfq`, class `rt` (DSCP 46 / EF) above `be`,
    /// ll-wfq's default budgets, every other field at its default.
    pub fn two_class(interfaces: Vec<String>) -> RouterConfig {
        RouterConfig {
            interfaces,
            strategy: StrategyKind::LlWfq,
            classes: vec![ClassSpec::named("rt"), ClassSpec::named("be")],
            rules: vec![RuleSpec {
                class: "rt".into(),
                dscp: Some(46),
                ..Default::default()
            }],
            ..Default::default()
        }
    }
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            interfaces: Vec::new(),
            cores: Vec::new(),
            helper_cores: None,
            worker_priority: 0,
            strategy: default_strategy(),
            device_budget: default_device_budget(),
            time_slice_ns: default_time_slice(),
            classes: Vec::new(),
            rules: Vec::new(),
            routes: Vec::new(),
            neighbors: Vec::new(),
            kernel_routes: true,
            route_refresh_ms: default_refresh(),
            max_routes: 0,
            netlink_buffer_kb: 0,
            huge_pages: false,
            wake: WakeMode::default(),
            spin_us: default_spin(),
            batch: default_batch(),
            tx_batch: default_tx_batch(),
            tx_hold_us: default_tx_hold_us(),
            auto_budget: None,
            cost_ns: 0,
            acl_rules: 0,
            attach: AttachMode::default(),
            steering: Steering::default(),
            timestamp_meta: true,
            tagged_frames: Default::default(),
            rings: XskOptions::default(),
            control: ControlConfig::default(),
            metrics: None,
            icmp: IcmpConfig::default(),
            firewall: FirewallConfig::default(),
            flow_scheduler: None,
            flows: Vec::new(),
            acls: Vec::new(),
        }
    }
}

impl RouterConfig {
    /// `spin-us`: how long the adaptive wake-up mode spins before it sleeps.
    pub const DEFAULT_SPIN_US: u64 = 50;
    /// `batch`: frames a grant takes from a ring at most.
    pub const DEFAULT_BATCH: u32 = 32;

    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<RouterConfig, ConfigError> {
        Ok(toml::from_str(text)?)
    }

    /// The configuration as TOML text ([`from_toml`](Self::from_toml) reads it back equal).
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string(self).map_err(|e| ConfigError::field("config", e.to_string()))
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<RouterConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|err| ConfigError::Io {
            path: path.to_path_buf(),
            err,
        })?;
        Self::from_toml(&text).map_err(|e| ConfigError::File {
            path: path.to_path_buf(),
            err: Box::new(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_routes_from_the_memory_limit() {
        // configured wins; without a memory limit, no limit
        assert_eq!(effective_max_routes(500, Some(1 << 30)), 500);
        assert_eq!(effective_max_routes(0, None), 0);
        // 1 GiB: (1024 - 160) MiB / 160 B
        assert_eq!(effective_max_routes(0, Some(1 << 30)), 5_662_310);
        // a limit below the base still limits (to one route)
        assert_eq!(effective_max_routes(0, Some(128 << 20)), 1);
    }

    const GOOD: &str = r#"
interfaces = ["a", "b"]
strategy = "ll-wfq"
[[classes]]
name = "rt"
budget = 60
[[classes]]
name = "be"
budget = 4
[[rules]]
class = "rt"
dscp = 46
[[routes]]
prefix = "10.9.0.0/16"
dev = "b"
via = "10.0.2.1"
"#;

    fn idx(n: &str) -> Option<u32> {
        match n {
            "a" => Some(2),
            "b" => Some(3),
            _ => None,
        }
    }

    #[test]
    fn parses_and_resolves() {
        let r = RouterConfig::from_toml(GOOD).unwrap().resolve(idx).unwrap();
        assert_eq!(r.ifindexes, vec![2, 3]);
        assert_eq!(r.layout.rings.len(), 2);
        assert_eq!(r.rule_images.len(), 1);
        assert_eq!(r.default_class, 1);
        assert_eq!(r.routes[0].ifindex, 3);
    }

    #[test]
    fn errors_name_the_field() {
        let e = RouterConfig::from_toml(&format!("{GOOD}\nbogus = 1")).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        // Typed fields are refused as the file is read, with the line and the field.
        let e = RouterConfig::from_toml(&GOOD.replace("ll-wfq", "wrr")).unwrap_err();
        assert!(
            e.to_string().contains("strategy: unknown strategy `wrr`"),
            "{e}"
        );
        let e = RouterConfig::from_toml(&GOOD.replace("dev = \"b\"", "dev = \"zz\""))
            .unwrap()
            .resolve(idx)
            .unwrap_err();
        assert!(e.to_string().starts_with("routes[0].dev"), "{e}");
        let e = RouterConfig::from_toml(&GOOD.replace("dscp = 46", "dscp = 99"))
            .unwrap()
            .resolve(idx)
            .unwrap_err();
        assert!(e.to_string().starts_with("rules[0].dscp"), "{e}");
        let e = RouterConfig::from_toml(&GOOD.replace("budget = 4", "budget = 0")).unwrap_err();
        assert!(
            e.to_string().contains("budget = 0") && e.to_string().contains("at least 1"),
            "{e}"
        );
        let e = RouterConfig::from_toml(&format!("{GOOD}\n[metrics]\nlisten = \"0.0.0.0:9877\""))
            .unwrap()
            .resolve(idx)
            .unwrap_err();
        assert!(e.to_string().starts_with("metrics.listen"), "{e}");
        let e = RouterConfig::from_toml(&format!("{GOOD}\n[metrics]\nlisten = \"nope\""))
            .unwrap()
            .resolve(idx)
            .unwrap_err();
        assert!(e.to_string().starts_with("metrics.listen"), "{e}");
        let e = RouterConfig::from_toml(&format!("tx-hold-us = 1001\n{GOOD}"))
            .unwrap()
            .resolve(idx)
            .unwrap_err();
        assert!(e.to_string().starts_with("tx-hold-us"), "{e}");
        let c = RouterConfig::from_toml(GOOD).unwrap();
        assert_eq!(c.tx_hold_us, llr_core::sched::TxPolicy::DEFAULT_HOLD_US);
        for bad in ["netlink-buffer-kb = 63", "netlink-buffer-kb = 1048577"] {
            let e = RouterConfig::from_toml(&format!("{bad}\n{GOOD}"))
                .unwrap()
                .resolve(idx)
                .unwrap_err();
            assert!(e.to_string().starts_with("netlink-buffer-kb"), "{bad}: {e}");
        }
        assert!(!RouterConfig::from_toml(GOOD).unwrap().huge_pages);
        let c = RouterConfig::from_toml(&format!("huge-pages = true\n{GOOD}")).unwrap();
        assert!(c.huge_pages);
        let e = RouterConfig::from_toml(&format!("huge-pages = 1\n{GOOD}")).unwrap_err();
        assert!(
            e.to_string().contains("huge-pages = 1") && e.to_string().contains("boolean"),
            "{e}"
        );
        for good in ["netlink-buffer-kb = 0", "netlink-buffer-kb = 65536"] {
            RouterConfig::from_toml(&format!("{good}\n{GOOD}"))
                .unwrap()
                .resolve(idx)
                .unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for bad in ["tx-batch = 0", "tx-batch = 4096"] {
            let e = RouterConfig::from_toml(&format!("{bad}\n{GOOD}"))
                .unwrap()
                .validate()
                .unwrap_err();
            assert!(e.to_string().starts_with("tx-batch"), "{bad}: {e}");
        }
        let c = RouterConfig::from_toml(&format!("tx-batch = 1\n{GOOD}")).unwrap();
        assert_eq!(c.tx_batch, 1);
        assert_eq!(RouterConfig::from_toml(GOOD).unwrap().tx_batch, 16);
    }

    #[test]
    fn steering_and_rules_are_exposed() {
        let r = RouterConfig::from_toml(GOOD).unwrap().resolve(idx).unwrap();
        assert_eq!(r.cfg.steering, Steering::Xdp);
        assert_eq!(r.rules.len(), 1);
        assert_eq!(r.rules[0].dscp, Some(46));
        assert_eq!(r.rules[0].class, 0);
        let r = RouterConfig::from_toml(&format!("steering = \"ntuple\"\n{GOOD}"))
            .unwrap()
            .resolve(idx)
            .unwrap();
        assert_eq!(r.cfg.steering, Steering::Ntuple);
        let e = RouterConfig::from_toml(&format!("steering = \"rss\"\n{GOOD}")).unwrap_err();
        assert!(e.to_string().contains("steering"), "{e}");
    }

    #[test]
    fn every_example_round_trips_through_toml() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            // The lab's file is not a router config.
            let Ok(cfg) = RouterConfig::from_toml(&text) else {
                assert!(!text.contains("[[classes]]"), "{}", p.display());
                continue;
            };
            let out = cfg.to_toml().unwrap();
            let back = RouterConfig::from_toml(&out)
                .unwrap_or_else(|e| panic!("{}: {e}\n{out}", p.display()));
            assert_eq!(back, cfg, "{}:\n{out}", p.display());
            n += 1;
        }
        assert!(n >= 2, "router examples found: {n}");
        let mut c = RouterConfig::from_toml(GOOD).unwrap();
        c.metrics = Some(MetricsConfig {
            listen: "127.0.0.1:9877".into(),
            allow_remote: false,
        });
        c.helper_cores = Some(vec![0]);
        c.neighbors.push(NeighborConfig {
            ip: "10.0.2.1".parse().unwrap(),
            mac: "02:00:00:00:00:01".into(),
            dev: "b".into(),
        });
        assert_eq!(RouterConfig::from_toml(&c.to_toml().unwrap()).unwrap(), c);
        // A default worker priority is not written (an older router would refuse the key);
        // a set one is, and reads back.
        assert!(!c.to_toml().unwrap().contains("worker-priority"));
        c.worker_priority = 51;
        let t = c.to_toml().unwrap();
        assert!(t.contains("worker-priority = 51"), "{t}");
        assert_eq!(RouterConfig::from_toml(&t).unwrap(), c);
    }

    #[test]
    fn a_config_built_in_code_equals_the_parsed_one() {
        let c = RouterConfig {
            interfaces: vec!["a".into(), "b".into()],
            classes: vec![ClassSpec::named("rt"), ClassSpec::named("be")],
            ..Default::default()
        };
        let parsed = RouterConfig::from_toml(
            "interfaces = [\"a\", \"b\"]\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n",
        )
        .unwrap();
        assert_eq!(c, parsed);
        // two_class is the README's config: ll-wfq, rt with DSCP 46 above be
        let two = RouterConfig::two_class(vec!["a".into(), "b".into()]);
        let readme = RouterConfig::from_toml(
            "interfaces = [\"a\", \"b\"]\nstrategy = \"ll-wfq\"\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n[[rules]]\nclass = \"rt\"\ndscp = 46\n",
        )
        .unwrap();
        assert_eq!(two, readme);
    }

    #[test]
    fn io_and_file_errors_keep_their_messages() {
        let e = RouterConfig::load(Path::new("/nonexistent/r.toml")).unwrap_err();
        assert!(
            e.to_string().starts_with("read /nonexistent/r.toml: "),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("llr-router-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r.toml");
        std::fs::write(&p, format!("{GOOD}\nbogus = 1")).unwrap();
        let e = RouterConfig::load(&p).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            e.to_string()
                .starts_with(&format!("config {}: ", p.display())),
            "{e}"
        );
        assert!(matches!(e.root(), ConfigError::Toml(_)), "{e:?}");
        let mut cfg = RouterConfig::from_toml(GOOD).unwrap();
        cfg.rings.rx_size = 3;
        let e = cfg.resolve(idx).unwrap_err();
        assert!(
            matches!(&e, ConfigError::Field { field, .. } if field == "rx-size"),
            "{e:?}"
        );
    }

    #[test]
    fn control_and_metrics_sections() {
        let r = RouterConfig::from_toml(GOOD).unwrap();
        assert_eq!(
            r.control.socket,
            std::path::PathBuf::from(llr_ops::ctl::DEFAULT_SOCKET)
        );
        assert!(r.metrics.is_none(), "metrics off unless configured");
        let t = format!("{GOOD}\n[control]\nsocket = \"/tmp/x.sock\"\n[metrics]\nlisten = \"0.0.0.0:9877\"\nallow-remote = true\n");
        let r = RouterConfig::from_toml(&t).unwrap().resolve(idx).unwrap();
        assert_eq!(
            r.cfg.control.socket,
            std::path::PathBuf::from("/tmp/x.sock")
        );
        assert_eq!(r.cfg.metrics.unwrap().addr().unwrap().port(), 9877);
    }
}
