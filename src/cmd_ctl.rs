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
    Show(crate::cmd_show::ShowCmd),
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
    Flow(crate::cmd_flow::FlowCmd),
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
        #[arg(value_parser = prefix_arg)]
        prefix: String,
        /// `via GW dev IF` or `dev IF`.
        #[arg(num_args = 2..=4, required = true)]
        rest: Vec<String>,
    },
    /// `route remove PREFIX`: remove a static route.
    Remove {
        /// Destination, `addr/len`, as added.
        #[arg(value_parser = prefix_arg)]
        prefix: String,
    },
}

/// An `addr/len` prefix argument, or why it is not one.
pub(crate) fn prefix_arg(s: &str) -> Result<String, String> {
    match s.split_once('/') {
        Some((a, l)) if a.parse::<std::net::IpAddr>().is_ok() && l.parse::<u8>().is_ok() => {
            Ok(s.to_string())
        }
        Some(_) => Err("not an addr/len prefix".into()),
        None => Err("needs a length, e.g. 10.0.0.0/8".into()),
    }
}

/// What one `ctl` invocation asks the router: one protocol command, or a view (`show …`).
#[derive(Debug, Clone)]
pub enum Request {
    One(Command),
    Show(crate::cmd_show::ShowCmd),
}

/// Builds the request from the CLI words; bad input is a usage error (exit 2).
pub fn request(cmd: &CtlCmd) -> Result<Request> {
    Ok(Request::One(match cmd {
        CtlCmd::Status => Command::Status {},
        CtlCmd::Counters => Command::Counters {},
        CtlCmd::Show(s) => {
            crate::cmd_show::check(s)?;
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
        CtlCmd::Flow(f) => crate::cmd_flow::command(f)?,
    }))
}

pub fn run(args: Args) -> Result<()> {
    let req = request(&args.cmd)?;
    let mut client = CtlClient::connect(&args.socket, Duration::from_secs_f64(args.timeout))?;
    let cmd = match &req {
        Request::Show(s) => return crate::cmd_show::run(&mut client, s, args.json),
        Request::One(cmd) => cmd,
    };
    let v = crate::cmd_show::call(&mut client, cmd)?;
    let out = if args.json {
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        views::reply_text(cmd, &v).unwrap_or_else(|| format!("{v:#}\n"))
    };
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(words: &[&str]) -> Result<Request> {
        let cli = Cli::try_parse_from(std::iter::once("ctl").chain(words.iter().copied()))?;
        request(&cli.args.cmd)
    }

    fn one(words: &[&str]) -> Command {
        match parse(words).unwrap() {
            Request::One(c) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cli_words_map_to_commands() {
        assert_eq!(one(&["status"]), Command::Status {});
        assert_eq!(
            one(&["rules", "add", "class=rt dscp=46"]),
            Command::RulesAdd {
                rule: "class=rt dscp=46".into()
            }
        );
        // unquoted: the words are joined
        assert_eq!(
            one(&[
                "rules",
                "add",
                "class=rt",
                "proto=udp",
                "dst_port=5000-5010"
            ]),
            Command::RulesAdd {
                rule: "class=rt proto=udp dst_port=5000-5010".into()
            }
        );
        assert_eq!(
            one(&["budget", "set", "rt", "60"]),
            Command::BudgetSet {
                class: "rt".into(),
                budget: Budget::packets(60).unwrap()
            }
        );
        assert_eq!(
            one(&["device-budget", "set", "64"]),
            Command::DeviceBudgetSet { budget: 64 }
        );
        assert_eq!(
            one(&["strategy", "set", "ll-rr"]),
            Command::StrategySet {
                strategy: StrategyKind::LlRr
            }
        );
        assert_eq!(
            one(&[
                "route",
                "add",
                "10.1.0.0/16",
                "via",
                "10.0.0.2",
                "dev",
                "veth1"
            ]),
            Command::RouteAdd {
                prefix: "10.1.0.0/16".into(),
                via: Some("10.0.0.2".into()),
                dev: "veth1".into()
            }
        );
        assert_eq!(
            one(&["route", "add", "10.1.0.0/16", "dev", "veth1"]),
            Command::RouteAdd {
                prefix: "10.1.0.0/16".into(),
                via: None,
                dev: "veth1".into()
            }
        );
        assert!(matches!(
            parse(&["show", "classes"]).unwrap(),
            Request::Show(crate::cmd_show::ShowCmd::Classes)
        ));
        assert!(matches!(
            one(&["wakeup", "set", "adaptive", "--spin-us", "50"]),
            Command::WakeupSet {
                mode: WakeMode::Adaptive,
                spin_us: Some(50)
            }
        ));
        // usage errors: clap's, or ours marked as usage (exit 2)
        let is_usage = |w: &[&str]| match parse(w) {
            Err(e) => {
                e.downcast_ref::<clap::Error>().is_some()
                    || e.downcast_ref::<crate::cli_util::UsageError>().is_some()
            }
            Ok(r) => panic!("{w:?} accepted: {r:?}"),
        };
        assert!(is_usage(&["route", "add", "10.1.0.0/16", "gw", "x"]));
        assert!(is_usage(&["route", "add", "10.1.0.0", "dev", "x"]));
        assert!(is_usage(&["strategy", "set", "fastest"]));
        assert!(is_usage(&["wakeup", "set", "sometimes"]));
        assert!(is_usage(&["wakeup", "set", "busy", "--spin-us", "5"]));
        assert!(is_usage(&["budget", "set", "rt", "-1"]));
        assert!(is_usage(&["--timeout", "0", "status"]));
        assert!(is_usage(&["show", "fib", "--limit", "0"]));
        assert!(is_usage(&["show", "neighbours", "--limit", "0"]));
        assert!(is_usage(&["show", "fib", "--dport", "53"]));
    }

    #[test]
    fn json_flag_anywhere() {
        for words in [
            &["-j", "status"][..],
            &["status", "--json"],
            &["show", "fib", "-j"],
            &["--json", "show", "interfaces"],
        ] {
            let cli = Cli::try_parse_from(std::iter::once("ctl").chain(words.iter().copied()))
                .unwrap_or_else(|e| panic!("{words:?}: {e}"));
            assert!(cli.args.json, "{words:?}");
        }
    }
}
