//! `llrouter sim ramp`: a table of the phases.

use super::{result_json, sim_error, RampArgs};
use crate::cli_util::{table, to_usage, us};
use llr_sim::sweep::offered_load;
use llr_sim::SimResult;
use serde_json::{json, Value};

/// `llrouter sim ramp`: one run, a phase per RT share, a row per phase.
pub(super) fn ramp(a: RampArgs) -> anyhow::Result<()> {
    let (cfg, phases) = a.phases().map_err(to_usage)?;
    let results = llr_sim::run_phases(&cfg, &phases).map_err(sim_error)?;
    let be_budget = |r: &SimResult| {
        r.auto_budget.map(|a| a.budget).or_else(|| {
            cfg.sched
                .layout()
                .ok()
                .and_then(|l| l.rings.last().map(|x| x.budget))
        })
    };
    if a.base.json {
        let rows: Vec<Value> = (a.rt_shares.iter().zip(&results))
            .map(|(share, r)| {
                json!({ "rt_share": share, "be_budget": be_budget(r), "auto": r.auto_budget, "result": result_json(r, None) })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let target = match cfg.sched.auto_budget.map(|s| s.target) {
        Some(llr_core::sched::AutoTarget::Ns(n)) => format!("target {:.1} µs", n as f64 / 1000.0),
        Some(llr_core::sched::AutoTarget::ServiceTimes(m)) => format!("target {m} service times"),
        None => "fixed budgets".into(),
    };
    println!(
        "strategy {}  offered {:.3} Mpps = {:.2} × capacity  service {:.0} ns  {} packets per phase  ({target})",
        cfg.sched.strategy,
        results[0].offered_pps / 1e6,
        offered_load(&results[0], cfg.cores),
        results[0].service_ns,
        cfg.packets
    );
    let rows: Vec<Vec<String>> = (a.rt_shares.iter().zip(&results))
        .map(|(share, r)| {
            let (rt, be) = (&r.classes[0], &r.classes[1]);
            let loss = |c: &llr_sim::ClassResult| {
                format!("{:.2}", 100.0 * c.dropped as f64 / c.sent.max(1) as f64)
            };
            let b = be_budget(r);
            let (rho, x) = r
                .auto_budget
                .map_or((*share * offered_load(r, cfg.cores), r.service_ns), |a| {
                    (a.rho_rt, a.x_ns)
                });
            let tmax = b.and_then(|b| llr_core::sched::bound::tmax_ns(b, x, rho));
            vec![
                format!("{share:.2}"),
                format!("{rho:.3}"),
                b.map_or("-".into(), |b| b.to_string()),
                tmax.map_or("∞".into(), us),
                us(rt.p99_ns as f64),
                us(rt.max_wait_ns),
                loss(rt),
                us(be.p99_ns as f64),
                loss(be),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "RT share",
                "ρRT",
                "BE budget",
                "Tmax µs",
                "RT p99 µs",
                "RT max wait µs",
                "RT loss%",
                "BE p99 µs",
                "BE loss%",
            ],
            &rows
        )
    );
    println!("(ρRT, x and the budget: the auto controller's last window in the phase, else share × load; Tmax = b·x/(1−ρRT))");
    Ok(())
}
