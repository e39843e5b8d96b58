//! `llrouter model`: paper 000's latency bound and budget rule (Eq. 1 and 2).

use crate::cli_util::{parse_values, usage};
use clap::Args;
use llr_lab::plot;
use llr_sim::model::{self, ModelReport};
use std::path::{Path, PathBuf};

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
    /// Draw Tmax vs ρRT for --plot-budgets into this PNG (in µs with a service time, else in
    /// service times); with --plot alone, nothing else is required.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// BE ring budgets drawn by --plot, packets.
    #[arg(long, default_value = "1,4,16,64")]
    pub plot_budgets: String,
}

/// Highest ρRT drawn: Tmax grows without bound as ρRT → 1.
const PLOT_RHO_MAX: f64 = 0.95;

/// Tmax over ρRT ∈ [0, 0.95] for each budget, in µs when `service_ns` is known, else in
/// service times.
pub fn tmax_series(budgets: &[u32], service_ns: Option<f64>) -> Vec<plot::Series> {
    let x = service_ns.unwrap_or(1.0);
    let unit = if service_ns.is_some() { 1e-3 } else { 1.0 };
    budgets
        .iter()
        .map(|&b| {
            let points = (0..=19)
                .map(|i| i as f64 / 20.0)
                .filter(|r| *r <= PLOT_RHO_MAX)
                .filter_map(|r| model::tmax_ns(b, x, r).map(|t| (r, t * unit)))
                .collect();
            plot::Series::new(format!("b = {b}"), points)
        })
        .collect()
}

fn draw(path: &Path, budgets_arg: &str, service: Option<f64>) -> anyhow::Result<()> {
    let budgets: Vec<u32> = parse_values("plot-budgets", budgets_arg)?
        .into_iter()
        .map(|v| {
            if v >= 1.0 && v.fract() == 0.0 && v <= u32::MAX as f64 {
                Ok(v as u32)
            } else {
                Err(usage(
                    "plot-budgets",
                    format!("{v}: a budget is a whole number of packets ≥ 1"),
                ))
            }
        })
        .collect::<anyhow::Result<_>>()?;
    let ylabel = match service {
        Some(x) => format!("Tmax (µs), x = {x:.0} ns"),
        None => "Tmax (service times x)".to_string(),
    };
    plot::line_chart(
        path,
        "RT latency bound Tmax = b·x/(1−ρRT) (paper 000, Eq. 1)",
        "RT utilisation ρRT",
        &ylabel,
        &tmax_series(&budgets, service),
        true,
    )
    .map_err(|e| anyhow::anyhow!("plot {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(())
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
    if let Some(p) = &a.plot {
        draw(p, &a.plot_budgets, service)?;
        if a.rho_rt.is_none() && a.rt_rate_pps.is_none() && a.m.is_none() && a.budget.is_none() {
            return Ok(());
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tmax_series_follows_eq1() {
        let s = tmax_series(&[1, 4], Some(1000.0));
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].label, "b = 4");
        // ρRT = 0: Tmax = b·x = 4 µs; ρRT = 0.5: twice that.
        assert_eq!(s[1].points[0], (0.0, 4.0));
        let half = s[1].points.iter().find(|p| p.0 == 0.5).unwrap();
        assert!((half.1 - 8.0).abs() < 1e-9);
        assert!(s[0].points.iter().all(|p| p.0 <= PLOT_RHO_MAX));
        // Without a service time: in service times.
        assert_eq!(tmax_series(&[16], None)[0].points[0], (0.0, 16.0));
    }
}
