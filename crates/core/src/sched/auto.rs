//! `budget = "auto"`: paper 000's Eq. 2 run by whoever serves the rings. Over each window the
//! controller measures the mean cost of a frame `x` (CPU time of every grant over the frames
//! they served) and the highest class's utilisation `ρRT` (its frames served in the window
//! times `x`, over the window's length: the paper's λRT·x), and sets the budget of the lower
//! rings under "auto" to the largest `b` with `b·x/(1 − ρRT)` within the target —
//! `b = ⌊m·(1 − ρRT)⌋`, `m` the target in service times. Pure: time and the engine's counters come in as arguments, so the simulator and the
//! worker run the same controller.

use super::bound::max_budget;
use super::{AutoRings, AutoTarget, Layout, RingId, RingStats};

/// What the controller measured over its last window, and the budget it chose.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AutoReading {
    /// The highest class's frames served in the window × `x_ns`, over the window.
    pub rho_rt: f64,
    /// CPU ns per frame over every ring's grants.
    pub x_ns: f64,
    /// The budget of each ring under "auto".
    pub budget: u32,
}

/// Where a window started: time and the counters then.
#[derive(Debug, Clone, Copy)]
struct Mark {
    t_ns: u64,
    rt_served: u64,
    cost_ns: u64,
    served: u64,
}

/// The controller of one engine's rings under "auto".
#[derive(Debug, Clone)]
pub struct AutoBudget {
    auto: AutoRings,
    rt_ring: RingId,
    max: u32,
    budget: u32,
    start: Option<Mark>,
    last: Option<AutoReading>,
}

impl AutoBudget {
    /// A controller for `layout`'s rings under "auto" (`None` when there are none). Until its
    /// first window closes the rings keep the layout's budget.
    pub fn new(layout: &Layout) -> Option<AutoBudget> {
        let auto = layout.auto_budget.clone()?;
        let first = *auto.rings.first()?;
        Some(AutoBudget {
            rt_ring: layout.class_to_ring[0],
            max: layout.device_budget.max(1),
            budget: layout.rings[first].budget,
            auto,
            start: None,
            last: None,
        })
    }

    /// The rings whose budget [`AutoBudget::tick`] sets.
    pub fn rings(&self) -> &[RingId] {
        &self.auto.rings
    }

    /// The last window's reading (`None` before the first one closed).
    pub fn last(&self) -> Option<AutoReading> {
        self.last
    }

    /// Called with the engine's counters as often as convenient: when a window has passed,
    /// returns the new budget of each ring under "auto" if it changed. A window without served
    /// frames leaves the budget as it is; counters that went backwards (a new engine) start a
    /// new window.
    pub fn tick(&mut self, now_ns: u64, stats: &[RingStats]) -> Option<u32> {
        let mark = Mark {
            t_ns: now_ns,
            rt_served: stats.get(self.rt_ring).map_or(0, |s| s.served),
            cost_ns: stats.iter().map(|s| s.cost_ns).sum(),
            served: stats.iter().map(|s| s.served).sum(),
        };
        let Some(start) = self.start else {
            self.start = Some(mark);
            return None;
        };
        let dt = now_ns.saturating_sub(start.t_ns);
        if dt < self.auto.spec.window_ns {
            return None;
        }
        self.start = Some(mark);
        let (Some(rt), Some(cost), Some(served)) = (
            mark.rt_served.checked_sub(start.rt_served),
            mark.cost_ns.checked_sub(start.cost_ns),
            mark.served.checked_sub(start.served),
        ) else {
            return None;
        };
        if served == 0 || cost == 0 {
            return None;
        }
        let x_ns = cost as f64 / served as f64;
        // Not the RT ring's own grant time: RT frames leave in the transmit kicks of BE grants
        // (`tx-hold-us`), so their grants are cheaper than their frames, and ρRT read from
        // them came out well below λRT·x on the testbed, with budgets above the target.
        let rho_rt = (rt as f64 * x_ns / dt as f64).min(1.0);
        let m = match self.auto.spec.target {
            AutoTarget::Ns(t) => t as f64 / x_ns,
            AutoTarget::ServiceTimes(m) => m as f64,
        };
        let n = self.auto.rings.len().max(1) as u32;
        let budget = (max_budget(m, rho_rt) / n).clamp(1, self.max);
        self.last = Some(AutoReading {
            rho_rt,
            x_ns,
            budget,
        });
        (budget != self.budget).then(|| {
            self.budget = budget;
            budget
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::{AutoBudgetSpec, SchedConfig, StrategyKind};

    fn layout(target: AutoTarget) -> Layout {
        let mut c = SchedConfig::new(StrategyKind::LlWfq, &["rt", "be"]);
        c.classes[1].budget = crate::sched::Budget::Auto;
        c.auto_budget = Some(AutoBudgetSpec {
            target,
            window_ns: 1_000,
        });
        c.layout().unwrap()
    }

    fn stats(rt: (u64, u64), be: (u64, u64)) -> Vec<RingStats> {
        let s = |(served, cost_ns)| RingStats {
            served,
            cost_ns,
            ..RingStats::default()
        };
        vec![s(rt), s(be)]
    }

    #[test]
    fn the_budget_follows_eq_2_as_the_rt_load_moves() {
        let mut a = AutoBudget::new(&layout(AutoTarget::ServiceTimes(6))).unwrap();
        assert_eq!(a.rings(), &[1]);
        assert_eq!(a.tick(0, &stats((0, 0), (0, 0))), None);
        // Within the window: nothing yet.
        assert_eq!(a.tick(500, &stats((1, 100), (1, 100))), None);
        // ρRT = 300/1000, x = 1000/10 = 100 → b = ⌊6 · 0.7⌋ = 4, the layout's: no change.
        assert_eq!(a.tick(1_000, &stats((3, 300), (7, 700))), None);
        let r = a.last().unwrap();
        assert!((r.rho_rt - 0.3).abs() < 1e-12 && (r.x_ns - 100.0).abs() < 1e-12);
        assert_eq!(r.budget, 4);
        // ρRT = 0.5 → b = 3.
        assert_eq!(a.tick(2_000, &stats((8, 800), (12, 1_200))), Some(3));
        // ρRT = 0.9 → b = ⌊0.6⌋ → at least 1.
        assert_eq!(a.tick(3_000, &stats((17, 1_700), (13, 1_300))), Some(1));
        // An idle window keeps it.
        assert_eq!(a.tick(4_000, &stats((17, 1_700), (13, 1_300))), None);
        // Counters that went backwards (a new engine): a new window, no change.
        assert_eq!(a.tick(5_000, &stats((0, 0), (0, 0))), None);
        // ρRT = 0 → b = 6.
        assert_eq!(a.tick(6_000, &stats((0, 0), (10, 1_000))), Some(6));
    }

    #[test]
    fn rho_rt_counts_rt_frames_at_the_mean_cost_not_their_own_grants() {
        let mut a = AutoBudget::new(&layout(AutoTarget::ServiceTimes(6))).unwrap();
        a.tick(0, &stats((0, 0), (0, 0)));
        // RT grants took 30 ns for 3 frames (their transmit paid in BE's kicks), BE 970 ns for
        // 7: x = 100 ns, ρRT = 3 · 100 / 1000 = 0.3 → b = 4 (from RT's grants, 0.03 → 5).
        assert_eq!(a.tick(1_000, &stats((3, 30), (7, 970))), None);
        let r = a.last().unwrap();
        assert!((r.rho_rt - 0.3).abs() < 1e-12, "{r:?}");
        assert_eq!(r.budget, 4);
    }

    #[test]
    fn a_target_in_ns_divides_by_the_measured_cost() {
        let mut a = AutoBudget::new(&layout(AutoTarget::Ns(2_000))).unwrap();
        a.tick(0, &stats((0, 0), (0, 0)));
        // x = 200 ns → m = 10; ρRT = 0.2 → b = 8.
        assert_eq!(a.tick(1_000, &stats((1, 200), (4, 800))), Some(8));
        // The device budget caps it: x = 10 ns → m = 200; ρRT = 0 → 64.
        assert_eq!(a.tick(2_000, &stats((1, 200), (104, 1_800))), Some(64));
    }

    #[test]
    fn auto_is_refused_where_eq_2_does_not_apply() {
        let bad = |f: &dyn Fn(&mut SchedConfig)| {
            let mut c = SchedConfig::new(StrategyKind::LlWfq, &["rt", "be"]);
            c.classes[1].budget = crate::sched::Budget::Auto;
            c.auto_budget = Some(AutoBudgetSpec {
                target: AutoTarget::ServiceTimes(6),
                window_ns: 1_000,
            });
            f(&mut c);
            c.layout().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.strategy = StrategyKind::Sq).contains("needs strategy ll-wfq"));
        assert!(
            bad(&|c| c.classes[0].budget = crate::sched::Budget::Auto).contains("highest class")
        );
        assert!(bad(&|c| c.auto_budget = None).contains("no target"));
        assert!(bad(&|c| c.auto_budget.as_mut().unwrap().window_ns = 0).contains("window"));
        let no_auto = SchedConfig::new(StrategyKind::LlWfq, &["rt", "be"])
            .layout()
            .unwrap();
        assert!(AutoBudget::new(&no_auto).is_none());
    }

    #[test]
    fn a_class_reads_and_writes_budget_auto() {
        let c: crate::sched::ClassSpec =
            toml::from_str("name = \"be\"\nbudget = \"auto\"").unwrap();
        assert_eq!(c.budget, crate::sched::Budget::Auto);
        assert_eq!(
            toml::to_string(&c).unwrap().trim(),
            "name = \"be\"\nbudget = \"auto\""
        );
        let e = toml::from_str::<crate::sched::ClassSpec>("name = \"be\"\nbudget = \"fast\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected a number of packets or \"auto\""),
            "{e}"
        );
        let e = toml::from_str::<crate::sched::ClassSpec>("name = \"be\"\nbudgt = 4")
            .unwrap_err()
            .to_string();
        assert!(e.contains("budgt"), "{e}");
    }
}
