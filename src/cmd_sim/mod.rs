//! `llrouter sim`, `llrouter sim sweep`, `llrouter sim ramp` and `llrouter sim flows`: the
//! discrete-event simulator from the command line. The settings and what they expand to are
//! llr_sim's ([`llr_sim::args`], [`llr_sim::sweep_args`]); this module runs and prints.

mod flows;
mod ramp;
mod sweep;
mod tables;

use crate::cli_util::to_usage;
use clap::{Args, Subcommand};
pub use llr_sim::args::{check_utilization, SimArgs};
use llr_sim::sweep::offered_load;
pub use llr_sim::sweep_args::{RampArgs, SweepArgs, SweepParam};
use std::time::Instant;

pub use flows::{flows_report, quantum_table, FlowsArgs};
pub use tables::{core_table, result_json, result_table};

#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimCmd {
    #[command(subcommand)]
    pub sub: Option<SimSub>,
    #[command(flatten)]
    pub args: SimArgs,
}

#[derive(Subcommand, Debug, Clone)]
pub enum SimSub {
    /// Vary one parameter over several strategies; write results.csv and PNG plots.
    Sweep(Box<SweepArgs>),
    /// Flow-based element pipelines (paper 003): the flow scheduler and its elements on
    /// simulated traffic, per flow CPU share, latency and drops.
    Flows(FlowsArgs),
    /// One run whose RT share moves phase by phase (classes rt and be): how the scheduler,
    /// and `--budgets be=auto` with its target, follow a changing mix.
    Ramp(Box<RampArgs>),
}

/// A simulator error (only configuration errors exist) as a usage error.
fn sim_error(llr_sim::SimError::Config(e): llr_sim::SimError) -> anyhow::Error {
    to_usage(e)
}

pub fn run(cmd: SimCmd) -> anyhow::Result<()> {
    match cmd.sub {
        Some(SimSub::Sweep(s)) => sweep::sweep(*s),
        Some(SimSub::Flows(f)) => flows::flows(f),
        Some(SimSub::Ramp(r)) => ramp::ramp(*r),
        None => {
            let cfg = cmd.args.to_config().map_err(to_usage)?;
            let t0 = Instant::now();
            let r = llr_sim::run(&cfg).map_err(sim_error)?;
            let eps = r.events as f64 / t0.elapsed().as_secs_f64();
            if cmd.args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&result_json(&r, Some(eps)))?
                );
            } else {
                let load = offered_load(&r, cfg.cores);
                println!(
                    "strategy {}  cores {} ({} steering)  offered {:.3} Mpps = {load:.3} × capacity{}  service {:.0} ns  busy {:.3}  wake-ups {:.0}/s",
                    cfg.sched.strategy,
                    cfg.cores,
                    cfg.steering,
                    r.offered_pps / 1e6,
                    if load > 1.0 { " (overload)" } else { "" },
                    r.service_ns,
                    r.utilization,
                    r.wakeups_per_sec
                );
                print!("{}", result_table(&r));
                if cfg.cores > 1 {
                    print!("{}", core_table(&cfg, &r));
                }
                println!(
                    "({} events in {:.2} s, {:.1} M events/s)",
                    r.events,
                    t0.elapsed().as_secs_f64(),
                    eps / 1e6
                );
            }
            Ok(())
        }
    }
}
