//! `llrouter ctl`: the control-plane client (protocol in `llr_ops::ctl`, views in
//! `llr_ops::views`, reference in docs/operations.md).

use anyhow::Result;
use clap::{Args as ClapArgs, Subcommand};
use llr_core::sched::{Budget, StrategyKind};
use llr_ops::ctl::{Command, CtlClient, WakeMode, DEFAULT_SOCKET};
use llr_ops::views;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli_util::usage;

mod flow;
mod show;
pub use flow::FlowCmd;
pub use show::ShowCmd;

/// Query and change a running router over its control socket.
///
/// Every change is validated by the router first and applied between poll rounds; a rejected
/// change leaves the running configuration untouched and the router's reason is printed.
/// Exit status: 0 done, 1 the router refused or could not be reached, 2 bad command line.
#[derive(Debug, Clone, ClapArgs)]
#[command(
    after_help = "Exit status: 0 done; 1 the router refused (its reason names the field) or could not be reached; 2 bad command line."
)]
pub struct Args {
    /// Control socket of the router.
    #[arg(long, short = 's', default_value = DEFAULT_SOCKET, global = true)]
    pub socket: PathBuf,
    /// Print JSON instead of tables (accepted before or after the subcommand).
    #[arg(long, short = 'j', global = true)]
    pub json: bool,
    /// Seconds to wait for the router.
    #[arg(long, default_value_t = 5.0, value_parser = positive_secs, global = true)]
    pub timeout: f64,
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v <= 3600.0 => Ok(v),
        Ok(_) => Err("must be a number of seconds above 0 (at most 3600)".into()),
        Err(_) => Err(format!("`{s}` is not a number of seconds")),
    }
}

#[derive(Debug, Clone, Subcommand)]
pub enum CtlCmd {
    /// Strategy, classes and budgets, wake-up mode, workers, uptime.
    Status,
    /// Every counter: rings, engine devices, workers, interfaces, drops and kernel passes.
    Counters,
    /// Tables of the running router: interfaces, routes, neighbours, classes, workers.
    #[command(subcommand)]
    Show(show::ShowCmd),
    /// Classification rules.
    #[command(subcommand)]
    Rules(RulesCmd),
    /// Ring budget of a class.
    #[command(subcommand)]
    Budget(BudgetCmd),
    /// Device budget (NAPI weight).
    #[command(subcommand, name = "device-budget")]
    DeviceBudget(DeviceBudgetCmd),
    /// Scheduling strategy.
    #[command(subcommand)]
    Strategy(StrategyCmd),
    /// Wake-up mode of the poll loop.
    #[command(subcommand)]
    Wakeup(WakeupCmd),
    /// Static routes.
    #[command(subcommand)]
    Route(RouteCmd),
    /// Re-read the configuration file and apply it (all or nothing).
    Reload,
    /// Flows of the flow scheduler (paper 003): set up, change, tear down, list.
    #[command(subcommand)]
    Flow(flow::FlowCmd),
}

#[derive(Debug, Clone, Subcommand)]
pub enum RulesCmd {
    /// List rules with their ids.
    List,
    /// Add a rule (first match wins after the existing ones), e.g.
    /// `rules add class=rt proto=udp dst_port=5000-5010`.
    Add {
        /// `class=NAME` and match fields as in the config: dscp, proto, src, dst, src_port,
        /// dst_port, vlan, pcp, ip_version, ifname.
        #[arg(required = true, num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
        rule: Vec<String>,
    },
    /// Remove the rule with this id.
    Remove {
        /// Rule id, as `rules list` shows it.
        id: u64,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum BudgetCmd {
    /// Set the ring budget of a class.
    Set {
        /// Class name, as in the config.
        class: String,
        /// Frames per grant (ns for the time-slice strategies), at least 1; `auto` (ll-wfq, a
        /// lower class, with an `auto-budget` target); or `default`, the strategy's.
        budget: Budget,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum DeviceBudgetCmd {
    /// Set the device budget.
    Set {
        /// Frames per device pass (NAPI weight); at least 1.
        budget: u32,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum StrategyCmd {
    /// Switch the scheduling strategy.
    Set {
        /// Strategy name.
        #[arg(value_parser = strategy_parser())]
        strategy: StrategyKind,
    },
}

fn strategy_parser() -> impl clap::builder::TypedValueParser<Value = StrategyKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(StrategyKind::ALL.map(|k| k.name()))
        .map(|s| s.parse::<StrategyKind>().expect("a listed strategy name"))
}

#[derive(Debug, Clone, Subcommand)]
pub enum WakeupCmd {
    /// Switch the wake-up mode.
    Set {
        /// Wake-up mode.
        #[arg(value_enum)]
        mode: WakeMode,
        /// Spin time before sleeping (adaptive only), µs.
        #[arg(long)]
        spin_us: Option<u64>,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum RouteCmd {
    /// `route add PREFIX [via GW] dev IF`: a static route over the kernel's.
    Add {
        /// Destination, `addr/len`.
        #[arg(value_parser = llr_ops::query::prefix_arg)]
        prefix: String,
        /// `via GW dev IF` or `dev IF`.
        #[arg(num_args = 2..=4, required = true)]
        rest: Vec<String>,
    },
    /// `route remove PREFIX`: remove a static route.
    Remove {
        /// Destination, `addr/len`, as added.
        #[arg(value_parser = llr_ops::query::prefix_arg)]
        prefix: String,
    },
}

/// What one `ctl` invocation asks the router: one protocol command, or a view (`show …`).
#[derive(Debug, Clone)]
pub enum Request {
    One(Command),
    Show(show::ShowCmd),
}

/// Builds the request from the CLI words; bad input is a usage error (exit 2).
pub fn request(cmd: &CtlCmd) -> Result<Request> {
    Ok(Request::One(match cmd {
        CtlCmd::Status => Command::Status {},
        CtlCmd::Counters => Command::Counters {},
        CtlCmd::Show(s) => {
            show::check(s)?;
            return Ok(Request::Show(s.clone()));
        }
        CtlCmd::Rules(RulesCmd::List) => Command::RulesList {},
        CtlCmd::Rules(RulesCmd::Add { rule }) => Command::RulesAdd {
            rule: rule.join(" "),
        },
        CtlCmd::Rules(RulesCmd::Remove { id }) => Command::RulesRemove { id: *id },
        CtlCmd::Budget(BudgetCmd::Set { class, budget }) => Command::BudgetSet {
            class: class.clone(),
            budget: *budget,
        },
        CtlCmd::DeviceBudget(DeviceBudgetCmd::Set { budget }) => {
            Command::DeviceBudgetSet { budget: *budget }
        }
        CtlCmd::Strategy(StrategyCmd::Set { strategy }) => Command::StrategySet {
            strategy: *strategy,
        },
        CtlCmd::Wakeup(WakeupCmd::Set { mode, spin_us }) => {
            if spin_us.is_some() && *mode != WakeMode::Adaptive {
                return Err(usage("spin-us", "only with the adaptive mode"));
            }
            Command::WakeupSet {
                mode: *mode,
                spin_us: *spin_us,
            }
        }
        CtlCmd::Route(RouteCmd::Add { prefix, rest }) => {
            let words: Vec<&str> = rest.iter().map(String::as_str).collect();
            let (via, dev) = match words.as_slice() {
                ["via", gw, "dev", dev] => (Some(gw.to_string()), dev.to_string()),
                ["dev", dev] => (None, dev.to_string()),
                _ => {
                    return Err(usage(
                        "route",
                        format!("expected `route add PREFIX [via GW] dev IF`, got {words:?}"),
                    ))
                }
            };
            Command::RouteAdd {
                prefix: prefix.clone(),
                via,
                dev,
            }
        }
        CtlCmd::Route(RouteCmd::Remove { prefix }) => Command::RouteRemove {
            prefix: prefix.clone(),
        },
        CtlCmd::Reload => Command::Reload {},
        CtlCmd::Flow(f) => flow::command(f)?,
    }))
}

pub fn run(args: Args) -> Result<()> {
    let req = request(&args.cmd)?;
    let mut client = CtlClient::connect(&args.socket, Duration::from_secs_f64(args.timeout))?;
    let cmd = match &req {
        Request::Show(s) => return show::run(&mut client, s, args.json),
        Request::One(cmd) => cmd,
    };
    let v = show::call(&mut client, cmd)?;
    let out = if args.json {
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        views::reply_text(cmd, &v).unwrap_or_else(|| format!("{v:#}\n"))
    };
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests;
