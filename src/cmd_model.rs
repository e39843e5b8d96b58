//! `llrouter model`: paper 000's latency bound and budget rule (Eq. 1 and 2).

use crate::cli_util::usage;
use clap::Args;
use llr_sim::model::{self, ModelReport};

/// Tmax = b·x/(1−ρRT) for a given budget, or the largest budget b ≤ m·(1−ρRT) for a target of
/// m service times.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Target RT latency bound in service times (Eq. 2): prints the largest BE ring budget.
    #[arg(long)]
    pub m: Option<f64>,
    /// BE ring budget b in packets (Eq. 1): prints Tmax (needs a service time).
    #[arg(long)]
    pub budget: Option<u32>,
    /// RT utilisation ρRT = λRT·x, in [0, 1).
    #[arg(long)]
    pub rho_rt: Option<f64>,
    /// RT arrival rate in packets per second (with a service time, gives ρRT).
    #[arg(long)]
    pub rt_rate_pps: Option<f64>,
    /// Service time x in ns.
    #[arg(long)]
    pub service_ns: Option<f64>,
    /// Frame size in bytes: x from paper 001's calibration a·S + b + c.
    #[arg(long)]
    pub packet_size: Option<u32>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ModelArgs) -> anyhow::Result<()> {
    let service = match (a.service_ns, a.packet_size) {
        (Some(x), _) if !(x > 0.0 && x.is_finite()) => {
            return Err(usage("service-ns", format!("{x}; must be greater than 0")))
        }
        (Some(x), _) => Some(x),
        (None, Some(0)) => return Err(usage("packet-size", "must be greater than 0")),
        (None, Some(s)) => Some(model::service_time_ns(s)),
        (None, None) => None,
    };
    let rho = match (a.rho_rt, a.rt_rate_pps) {
        (Some(r), _) => r,
        (None, Some(pps)) => {
            let x = service.ok_or_else(|| {
                usage(
                    "rt-rate-pps",
                    "needs --service-ns or --packet-size to compute ρRT",
                )
            })?;
            pps * x / 1e9
        }
        (None, None) => {
            return Err(usage(
                "rho-rt",
                "is required (or --rt-rate-pps with a service time)",
            ))
        }
    };
    if !(0.0..1.0).contains(&rho) {
        return Err(usage(
            "rho-rt",
            format!("{rho} is outside [0, 1): RT traffic alone would overload the core"),
        ));
    }
    let report = match (a.m, a.budget) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "m",
                "give either --m (find the budget) or --budget (find Tmax), not both",
            ))
        }
        (Some(m), None) => {
            if !(m > 0.0 && m.is_finite()) {
                return Err(usage("m", format!("{m}; must be greater than 0")));
            }
            let b = model::max_budget(m, rho);
            let tmax = service.and_then(|x| model::tmax_ns(b.max(1), x, rho));
            ModelReport {
                rho_rt: rho,
                m: Some(m),
                budget: b,
                service_ns: service,
                tmax_ns: tmax,
                tmax_service_times: Some(b as f64 / (1.0 - rho)),
            }
        }
        (None, Some(b)) => {
            if b == 0 {
                return Err(usage("budget", "must be at least 1"));
            }
            let x = service.ok_or_else(|| {
                usage(
                    "service-ns",
                    "is required with --budget (or give --packet-size)",
                )
            })?;
            ModelReport {
                rho_rt: rho,
                m: None,
                budget: b,
                service_ns: Some(x),
                tmax_ns: model::tmax_ns(b, x, rho),
                tmax_service_times: Some(b as f64 / (1.0 - rho)),
            }
        }
        (None, None) => {
            return Err(usage(
                "m",
                "give --m (find the budget) or --budget (find Tmax)",
            ))
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if let Some(m) = report.m {
            if report.budget == 0 {
                println!("no BE ring budget keeps RT latency within {m} service times at ρRT = {rho}: even b = 1 gives {:.2}·x", 1.0 / (1.0 - rho));
            } else {
                println!(
                    "largest BE ring budget for Tmax ≤ {m}·x at ρRT = {rho}: b = {}",
                    report.budget
                );
            }
        }
        if let Some(t) = report.tmax_ns {
            println!(
                "Tmax = b·x/(1−ρRT) = {}·{:.1} ns/(1−{rho}) = {:.1} ns ({:.2} service times)",
                report.budget.max(1),
                report.service_ns.unwrap_or(0.0),
                t,
                report.tmax_service_times.unwrap_or(0.0)
            );
        }
    }
    Ok(())
}
