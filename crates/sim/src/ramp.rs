//! `llrouter sim ramp`: one simulated run whose RT share steps up phase by phase, each phase
//! read against paper 000's bound (`Tmax = b·x/(1−ρRT)`) with the BE budget in force at its end.

use crate::sweep::offered_load;
use crate::sweep_args::RampArgs;
use crate::{ClassResult, SimConfig, SimError, SimResult};

/// One phase, as the bound sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RampRow {
    pub rt_share: f64,
    /// The automatic budget's last window in the phase, else share × offered load.
    pub rho_rt: f64,
    /// CPU ns per packet: the controller's measured x, else the mean service time.
    pub x_ns: f64,
    /// The BE ring's budget at the phase's end (the controller's, else the configured one).
    pub be_budget: Option<u32>,
    /// `None`: ρRT ≥ 1 or no BE budget, no bound.
    pub tmax_ns: Option<f64>,
    pub rt_p99_ns: f64,
    pub rt_max_wait_ns: f64,
    /// Fractions of the class's packets dropped at its ring.
    pub rt_loss: f64,
    pub be_p99_ns: f64,
    pub be_loss: f64,
}

/// The run: its configuration (the first phase's), every phase's result and its row.
#[derive(Debug, Clone)]
pub struct RampOutcome {
    pub cfg: SimConfig,
    pub results: Vec<SimResult>,
    pub rows: Vec<RampRow>,
}

/// Runs the phases of `a`.
pub fn run(a: &RampArgs) -> Result<RampOutcome, SimError> {
    let (cfg, phases) = a.phases()?;
    let results = crate::run_phases(&cfg, &phases)?;
    let fixed = cfg
        .sched
        .layout()
        .ok()
        .and_then(|l| l.rings.last().map(|x| x.budget));
    let loss = |c: &ClassResult| c.dropped as f64 / c.sent.max(1) as f64;
    let rows = (a.rt_shares.iter().zip(&results))
        .map(|(&share, r)| {
            let be_budget = r.auto_budget.map(|a| a.budget).or(fixed);
            let (rho_rt, x_ns) = r
                .auto_budget
                .map_or((share * offered_load(r, cfg.cores), r.service_ns), |a| {
                    (a.rho_rt, a.x_ns)
                });
            let (rt, be) = (&r.classes[0], &r.classes[1]);
            RampRow {
                rt_share: share,
                rho_rt,
                x_ns,
                be_budget,
                tmax_ns: be_budget.and_then(|b| llr_core::sched::bound::tmax_ns(b, x_ns, rho_rt)),
                rt_p99_ns: rt.p99_ns as f64,
                rt_max_wait_ns: rt.max_wait_ns,
                rt_loss: loss(rt),
                be_p99_ns: be.p99_ns as f64,
                be_loss: loss(be),
            }
        })
        .collect();
    Ok(RampOutcome { cfg, results, rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::SimArgs;

    fn ramp(budgets: &str, shares: Vec<f64>) -> RampOutcome {
        let base = SimArgs {
            utilization: Some(1.5),
            packets: 60_000,
            budgets: budgets
                .split(',')
                .map(|b| b.parse().expect("a class budget"))
                .collect(),
            ..SimArgs::default()
        };
        run(&RampArgs {
            rt_shares: shares,
            base,
        })
        .expect("a valid ramp")
    }

    /// A phase per share, each with the fixed budget, and Tmax as paper 000 computes it from the
    /// phase's own ρRT; at ρRT ≥ 1 there is no bound.
    #[test]
    fn rows_follow_the_phases_and_the_bound() {
        let o = ramp("be=4", vec![0.1, 0.5, 0.8]);
        assert_eq!(o.rows.len(), 3);
        for r in &o.rows {
            assert_eq!(r.be_budget, Some(4));
            assert!((r.rho_rt - r.rt_share * 1.5).abs() < 0.05, "{r:?}");
        }
        let t = o.rows[0].tmax_ns.expect("ρRT 0.15 has a bound");
        let want = 4.0 * o.rows[0].x_ns / (1.0 - o.rows[0].rho_rt);
        assert!((t - want).abs() < 1e-6, "{t} against {want}");
        assert_eq!(o.rows[2].tmax_ns, None, "ρRT 1.2: {:?}", o.rows[2]);
        // Overload: BE takes the loss at every phase whose RT fits.
        assert!(
            o.rows[0].be_loss > 0.2 && o.rows[0].rt_loss == 0.0,
            "{:?}",
            o.rows[0]
        );
    }
}
