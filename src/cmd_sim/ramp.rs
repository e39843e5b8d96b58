//! `llrouter sim ramp`: a table of the phases.

use super::{result_json, sim_error, RampArgs};
use crate::cli_util::{table, us};
use llr_sim::sweep::offered_load;
use serde_json::{json, Value};

/// `llrouter sim ramp`: one run, a phase per RT share, a row per phase.
pub(super) fn ramp(a: RampArgs) -> anyhow::Result<()> {
    let o = llr_sim::ramp::run(&a).map_err(sim_error)?;
    let (cfg, results) = (&o.cfg, &o.results);
    if a.base.json {
        let rows: Vec<Value> = (o.rows.iter().zip(results))
            .map(|(row, r)| {
                json!({ "rt_share": row.rt_share, "be_budget": row.be_budget, "auto": r.auto_budget, "result": result_json(r, None) })
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
    let pct = |f: f64| format!("{:.2}", 100.0 * f);
    let rows: Vec<Vec<String>> = o
        .rows
        .iter()
        .map(|r| {
            vec![
                format!("{:.2}", r.rt_share),
                format!("{:.3}", r.rho_rt),
                r.be_budget.map_or("-".into(), |b| b.to_string()),
                r.tmax_ns.map_or("∞".into(), us),
                us(r.rt_p99_ns),
                us(r.rt_max_wait_ns),
                pct(r.rt_loss),
                us(r.be_p99_ns),
                pct(r.be_loss),
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
