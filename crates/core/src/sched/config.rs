//! Scheduler configuration: strategies, classes, budgets, and the ring/device layout they imply.

use super::{Budget, ClassId, DevId, RingId};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How the rings of a core are laid out and served.
///
/// The first four are the packet-budget strategies of paper 000 (Table I); the rest are the
/// resource-management strategies of paper 001 (§V-C), with time slices in CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum StrategyKind {
    /// Single queue: no classification, one ring, FIFO — the state of the art.
    Sq,
    /// One device per class (classification without prioritisation), devices served
    /// round-robin by the poll list, each with the full device budget.
    Rr,
    /// One device, one ring per class, equal ring budgets, highest class first.
    LlRr,
    /// One device, one ring per class, ring budgets per class (e.g. rt=60, be=4). The
    /// router's default.
    #[default]
    LlWfq,
    /// First-come first-served between class rings: a ring that gets the core keeps it until it
    /// is empty; waiting rings are served in the order they became non-empty.
    Fcfs,
    /// Strict, non-preemptive priority: after each packet, the highest non-empty ring.
    Prio,
    /// Round robin with a constant time slice Δt per ring.
    RrSlice,
    /// Weighted fair queueing: ring k gets Δt·w_k/Σw per turn.
    Wfq,
    /// RR with the low-latency extension: without contention, higher classes go first.
    LlRrSlice,
    /// WFQ with the low-latency extension.
    LlWfqSlice,
}

impl StrategyKind {
    pub const ALL: [StrategyKind; 10] = [
        StrategyKind::Sq,
        StrategyKind::Rr,
        StrategyKind::LlRr,
        StrategyKind::LlWfq,
        StrategyKind::Fcfs,
        StrategyKind::Prio,
        StrategyKind::RrSlice,
        StrategyKind::Wfq,
        StrategyKind::LlRrSlice,
        StrategyKind::LlWfqSlice,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Sq => "sq",
            StrategyKind::Rr => "rr",
            StrategyKind::LlRr => "ll-rr",
            StrategyKind::LlWfq => "ll-wfq",
            StrategyKind::Fcfs => "fcfs",
            StrategyKind::Prio => "prio",
            StrategyKind::RrSlice => "rr-slice",
            StrategyKind::Wfq => "wfq",
            StrategyKind::LlRrSlice => "ll-rr-slice",
            StrategyKind::LlWfqSlice => "ll-wfq-slice",
        }
    }

    /// Strategies whose ring budgets are time slices (ns of CPU time) rather than packets.
    pub fn is_time_slice(self) -> bool {
        matches!(
            self,
            StrategyKind::RrSlice
                | StrategyKind::Wfq
                | StrategyKind::LlRrSlice
                | StrategyKind::LlWfqSlice
        )
    }

    /// Strategies that follow the packet-budget poll loop of paper 000, Fig. 2.
    pub fn is_packet_budget(self) -> bool {
        matches!(
            self,
            StrategyKind::Sq | StrategyKind::Rr | StrategyKind::LlRr | StrategyKind::LlWfq
        )
    }

    fn uses_weights(self) -> bool {
        matches!(self, StrategyKind::Wfq | StrategyKind::LlWfqSlice)
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for StrategyKind {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.trim().to_ascii_lowercase().replace('_', "-");
        StrategyKind::ALL
            .into_iter()
            .find(|k| k.name() == norm)
            .ok_or_else(|| {
                ConfigError::new(
                    "strategy",
                    format!("unknown strategy `{s}`; expected one of {}", Self::names()),
                )
            })
    }
}

/// Read as [`FromStr`] reads it, so a file, a control request and a flag accept the same names
/// and give the same error.
impl TryFrom<String> for StrategyKind {
    type Error = ConfigError;
    fn try_from(s: String) -> Result<Self, ConfigError> {
        s.parse()
    }
}

impl StrategyKind {
    /// All names, comma separated, for error messages and help texts.
    pub fn names() -> String {
        StrategyKind::ALL.map(|k| k.name()).join(", ")
    }
}

/// A configuration error that names the offending field.
pub type ConfigError = crate::FieldError;

/// One traffic class. Classes are listed highest priority first.
///
/// In a file: `name`, `budget` (packets, or `"auto"`: see [`AutoBudgetSpec`]) and `weight`;
/// other keys are refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    pub name: String,
    /// Ring budget (packet-budget strategies).
    #[serde(default, skip_serializing_if = "is_default")]
    pub budget: Budget,
    /// Weight for `wfq`/`ll-wfq-slice`. `None`: the default (3 for the highest class, 1 otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
}

fn is_default(b: &Budget) -> bool {
    *b == Budget::Default
}

impl ClassSpec {
    pub fn named(name: impl Into<String>) -> Self {
        ClassSpec {
            name: name.into(),
            budget: Budget::Default,
            weight: None,
        }
    }
}

/// What `budget = "auto"` aims for: the highest class's time in its ring within `target`, by
/// paper 000's Eq. 2, `b ≤ m·(1 − ρRT)`, with `ρRT` and the per-frame cost `x` measured over
/// each `window_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoBudgetSpec {
    pub target: AutoTarget,
    pub window_ns: u64,
}

impl AutoBudgetSpec {
    pub const DEFAULT_WINDOW_NS: u64 = 100_000_000;

    /// A target of `target_us` microseconds or `service_times` (exactly one), measured over
    /// windows of `window_ms`. Errors name the field as `target-us`, `service-times` or
    /// `window-ms` (callers prefix their section).
    pub fn new(
        target_us: Option<f64>,
        service_times: Option<u32>,
        window_ms: u64,
    ) -> Result<AutoBudgetSpec, ConfigError> {
        let target = match (target_us, service_times) {
            (Some(us), None) if us.is_finite() && us > 0.0 && us <= 1e6 => {
                AutoTarget::Ns((us * 1000.0).round().max(1.0) as u64)
            }
            (Some(us), None) => {
                return Err(ConfigError::new(
                    "target-us",
                    format!("{us}: must be greater than 0 and at most 1000000 (1 s)"),
                ))
            }
            (None, Some(m)) if (1..=1_000_000).contains(&m) => AutoTarget::ServiceTimes(m),
            (None, Some(m)) => {
                return Err(ConfigError::new(
                    "service-times",
                    format!("{m}: must be within 1..=1000000"),
                ))
            }
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    "target-us",
                    "give target-us or service-times, not both",
                ))
            }
            (None, None) => {
                return Err(ConfigError::new(
                    "target-us",
                    "needs target-us (µs) or service-times (m of paper 000's T* = m·x)",
                ))
            }
        };
        if !(1..=60_000).contains(&window_ms) {
            return Err(ConfigError::new(
                "window-ms",
                format!("{window_ms}: must be within 1..=60000"),
            ));
        }
        Ok(AutoBudgetSpec {
            target,
            window_ns: window_ms * 1_000_000,
        })
    }
}

/// The latency target of [`AutoBudgetSpec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AutoTarget {
    /// Nanoseconds: `m = target / x` with the measured `x`.
    Ns(u64),
    /// `m` service times (paper 000's `T* = m·x`).
    ServiceTimes(u32),
}

/// The scheduler configuration of one core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedConfig {
    pub strategy: StrategyKind,
    /// Highest priority first; at least one.
    pub classes: Vec<ClassSpec>,
    /// Packets a device may consume per turn on the poll list (NAPI weight; Linux default 64).
    pub device_budget: u32,
    /// Δt for the time-slice strategies, in ns.
    pub time_slice_ns: u64,
    /// The target of the classes with `budget = "auto"` (required when there are any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_budget: Option<AutoBudgetSpec>,
}

impl SchedConfig {
    pub const DEFAULT_DEVICE_BUDGET: u32 = 64;
    pub const DEFAULT_TIME_SLICE_NS: u64 = 50_000;
    /// Ring budget of paper 000's LL-RR, and of LL-WFQ's lower classes.
    pub const DEFAULT_LOW_BUDGET: u32 = 4;
    /// Ring budget of LL-WFQ's highest class.
    pub const DEFAULT_HIGH_BUDGET: u32 = 60;

    /// `strategy` over the classes `names` (highest first) with every default.
    pub fn new(strategy: StrategyKind, names: &[&str]) -> Self {
        SchedConfig {
            strategy,
            classes: names.iter().map(|n| ClassSpec::named(*n)).collect(),
            device_budget: Self::DEFAULT_DEVICE_BUDGET,
            time_slice_ns: Self::DEFAULT_TIME_SLICE_NS,
            auto_budget: None,
        }
    }

    /// Sets per-class ring budgets in packets, in class order (for configurations built in
    /// code; input from users goes through [`Budget`]'s parser, which names the field).
    ///
    /// # Panics
    /// On a budget of 0: a ring with budget 0 starves, so no configuration may hold one.
    pub fn with_budgets(mut self, budgets: &[u32]) -> Self {
        for (c, b) in self.classes.iter_mut().zip(budgets) {
            c.budget = Budget::packets(*b).expect("a ring budget is at least 1 packet");
        }
        self
    }

    /// Checks the configuration and derives the ring/device layout.
    pub fn layout(&self) -> Result<Layout, ConfigError> {
        let n = self.classes.len();
        if n == 0 {
            return Err(ConfigError::new(
                "classes",
                "at least one class is required",
            ));
        }
        if n > 64 {
            return Err(ConfigError::new(
                "classes",
                format!("{n} classes; at most 64 are supported"),
            ));
        }
        for (i, c) in self.classes.iter().enumerate() {
            if c.name.is_empty() {
                return Err(ConfigError::new(
                    "classes",
                    format!("class #{i} has an empty name"),
                ));
            }
            if self.classes[..i].iter().any(|o| o.name == c.name) {
                return Err(ConfigError::new(
                    "classes",
                    format!("class `{}` is listed twice", c.name),
                ));
            }
            if c.budget.is_auto() {
                let reason = if self.strategy != StrategyKind::LlWfq {
                    Some(format!(
                        "class `{}`: budget = \"auto\" needs strategy ll-wfq (the BE budget between RT visits that paper 000's Eq. 2 sets), not {}",
                        c.name, self.strategy
                    ))
                } else if i == 0 {
                    Some(format!(
                        "class `{}` is the highest class, whose latency the automatic budget bounds; make a lower class's budget \"auto\"",
                        c.name
                    ))
                } else if self.auto_budget.is_none() {
                    Some(format!(
                        "class `{}` has budget = \"auto\" but no target is set (auto-budget.target-us or auto-budget.service-times)",
                        c.name
                    ))
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(ConfigError::new("budgets", reason));
                }
            }
            if c.weight == Some(0) {
                return Err(ConfigError::new(
                    "weights",
                    format!(
                        "class `{}` has weight 0; weights must be at least 1",
                        c.name
                    ),
                ));
            }
        }
        if self.device_budget == 0 {
            return Err(ConfigError::new("device-budget", "must be at least 1"));
        }
        if self.strategy.is_time_slice() && self.time_slice_ns == 0 {
            return Err(ConfigError::new(
                "time-slice",
                "must be greater than 0 for time-slice strategies",
            ));
        }
        let budget = |i: usize| -> u32 {
            self.classes[i]
                .budget
                .fixed()
                .unwrap_or(match self.strategy {
                    StrategyKind::LlWfq if i == 0 && n > 1 => Self::DEFAULT_HIGH_BUDGET,
                    StrategyKind::LlWfq | StrategyKind::LlRr if n > 1 => Self::DEFAULT_LOW_BUDGET,
                    _ => self.device_budget,
                })
        };
        if self.strategy == StrategyKind::LlRr {
            let b0 = budget(0);
            if let Some(c) = (1..n).find(|&i| budget(i) != b0) {
                return Err(ConfigError::new(
                    "budgets",
                    format!(
                        "ll-rr serves every ring with the same budget, but `{}` has {} and `{}` has {}; use ll-wfq for unequal budgets",
                        self.classes[0].name,
                        b0,
                        self.classes[c].name,
                        budget(c)
                    ),
                ));
            }
        }
        let weight = |i: usize| -> u32 {
            self.classes[i]
                .weight
                .unwrap_or(if i == 0 && n > 1 { 3 } else { 1 })
        };
        let weight_sum: u64 = (0..n).map(|i| weight(i) as u64).sum();
        let slice = |i: usize| -> u64 {
            if self.strategy.uses_weights() {
                (self.time_slice_ns * weight(i) as u64 / weight_sum).max(1)
            } else {
                self.time_slice_ns
            }
        };

        if let Some(a) = &self.auto_budget {
            if a.window_ns == 0 {
                return Err(ConfigError::new(
                    "auto-budget.window-ms",
                    "must be at least 1",
                ));
            }
            if matches!(a.target, AutoTarget::Ns(0) | AutoTarget::ServiceTimes(0)) {
                return Err(ConfigError::new(
                    "auto-budget",
                    "the target must be greater than 0",
                ));
            }
        }
        let mut layout = Layout {
            strategy: self.strategy,
            device_budget: self.device_budget,
            rings: Vec::new(),
            devices: Vec::new(),
            class_to_ring: vec![0; n],
            auto_budget: None,
        };
        match self.strategy {
            StrategyKind::Sq => {
                layout.rings.push(RingSpec {
                    name: "all".into(),
                    classes: (0..n).collect(),
                    device: 0,
                    budget: self.device_budget,
                    slice_ns: 0,
                });
                layout.devices.push(vec![0]);
            }
            StrategyKind::Rr => {
                for i in 0..n {
                    layout.rings.push(RingSpec {
                        name: self.classes[i].name.clone(),
                        classes: vec![i],
                        device: i,
                        budget: self.device_budget,
                        slice_ns: 0,
                    });
                    layout.devices.push(vec![i]);
                    layout.class_to_ring[i] = i;
                }
            }
            _ => {
                for i in 0..n {
                    layout.rings.push(RingSpec {
                        name: self.classes[i].name.clone(),
                        classes: vec![i],
                        device: 0,
                        budget: budget(i),
                        slice_ns: if self.strategy.is_time_slice() {
                            slice(i)
                        } else {
                            0
                        },
                    });
                    layout.class_to_ring[i] = i;
                }
                layout.devices.push((0..n).collect());
            }
        }
        let auto: Vec<RingId> = (0..n)
            .filter(|&i| self.classes[i].budget.is_auto())
            .map(|i| layout.class_to_ring[i])
            .collect();
        if let (Some(spec), false) = (self.auto_budget, auto.is_empty()) {
            layout.auto_budget = Some(AutoRings { spec, rings: auto });
        }
        Ok(layout)
    }
}

/// One ring of the layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingSpec {
    pub name: String,
    /// Classes steered into this ring.
    pub classes: Vec<ClassId>,
    pub device: DevId,
    /// Ring budget in packets (packet-budget strategies).
    pub budget: u32,
    /// Time slice in ns (time-slice strategies), 0 otherwise.
    pub slice_ns: u64,
}

/// Rings and devices of one core, derived from a [`SchedConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub strategy: StrategyKind,
    pub device_budget: u32,
    /// Rings in priority order (index 0 highest).
    pub rings: Vec<RingSpec>,
    /// The rings of each device, in priority order.
    pub devices: Vec<Vec<RingId>>,
    /// Where each class is steered.
    pub class_to_ring: Vec<RingId>,
    /// The rings whose budget the worker sets (`budget = "auto"`), and its target.
    #[serde(default)]
    pub auto_budget: Option<AutoRings>,
}

/// The rings under `budget = "auto"` and what they aim for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoRings {
    pub spec: AutoBudgetSpec,
    /// In priority order; never ring 0.
    pub rings: Vec<RingId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_name_and_rejects_unknown() {
        for k in StrategyKind::ALL {
            assert_eq!(k.name().parse::<StrategyKind>().unwrap(), k);
        }
        let e = "wrr".parse::<StrategyKind>().unwrap_err();
        assert_eq!(e.field, "strategy");
        assert!(e.reason.contains("ll-wfq"));
    }

    #[test]
    fn layouts_follow_table_one() {
        let sq = SchedConfig::new(StrategyKind::Sq, &["rt", "be"])
            .layout()
            .unwrap();
        assert_eq!((sq.rings.len(), sq.devices.len()), (1, 1));
        assert_eq!(sq.class_to_ring, vec![0, 0]);
        let rr = SchedConfig::new(StrategyKind::Rr, &["rt", "be"])
            .layout()
            .unwrap();
        assert_eq!((rr.rings.len(), rr.devices.len()), (2, 2));
        let wfq = SchedConfig::new(StrategyKind::LlWfq, &["rt", "be"])
            .layout()
            .unwrap();
        assert_eq!(wfq.devices, vec![vec![0, 1]]);
        assert_eq!((wfq.rings[0].budget, wfq.rings[1].budget), (60, 4));
        let llrr = SchedConfig::new(StrategyKind::LlRr, &["a", "b", "c"])
            .layout()
            .unwrap();
        assert!(llrr.rings.iter().all(|r| r.budget == 4));
        let w = SchedConfig::new(StrategyKind::Wfq, &["rt", "be"])
            .layout()
            .unwrap();
        assert_eq!((w.rings[0].slice_ns, w.rings[1].slice_ns), (37_500, 12_500));
    }

    #[test]
    fn rejects_bad_budgets() {
        let e = SchedConfig::new(StrategyKind::LlRr, &["rt", "be"])
            .with_budgets(&[60, 4])
            .layout()
            .unwrap_err();
        assert_eq!(e.field, "budgets");
        // A budget of 0 cannot be built: the parser refuses it.
        assert_eq!("0".parse::<Budget>(), Err(crate::sched::BudgetError::Zero));
        let mut c = SchedConfig::new(StrategyKind::LlWfq, &["rt"]);
        c.device_budget = 0;
        assert_eq!(c.layout().unwrap_err().field, "device-budget");
        assert_eq!(
            SchedConfig::new(StrategyKind::Sq, &[])
                .layout()
                .unwrap_err()
                .field,
            "classes"
        );
        assert_eq!(
            SchedConfig::new(StrategyKind::Sq, &["a", "a"])
                .layout()
                .unwrap_err()
                .field,
            "classes"
        );
    }
}
