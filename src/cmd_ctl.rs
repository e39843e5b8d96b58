//! `llrouter ctl`: the control-plane client (protocol in `llr_ops::ctl`, reference in
//! docs/operations.md).

use anyhow::{bail, Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use llr_ops::ctl::{Command, CtlClient, WakeupMode, DEFAULT_SOCKET};
use llr_ops::metrics::MetricsSnapshot;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// Query and change a running router over its control socket.
///
/// Every change is validated by the router first and applied between poll rounds; a rejected
/// change leaves the running configuration untouched and the reason is printed (exit status 1).
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Control socket of the router.
    #[arg(long, short = 's', default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Print the raw JSON reply.
    #[arg(long)]
    pub json: bool,
    /// Seconds to wait for the router.
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

#[derive(Debug, Clone, Subcommand)]
pub enum CtlCmd {
    /// Strategy, classes and budgets, wake-up mode, workers, uptime.
    Status,
    /// Per-class/per-ring packets, bytes, drops; per-device wake-ups and budget exhaustions.
    Counters,
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
}

#[derive(Debug, Clone, Subcommand)]
pub enum RulesCmd {
    /// List rules with their ids.
    List,
    /// Add a rule, e.g. `rules add "class=rt dscp=46"`.
    Add { rule: String },
    /// Remove the rule with this id.
    Remove { id: u64 },
}

#[derive(Debug, Clone, Subcommand)]
pub enum BudgetCmd {
    /// `budget set CLASS N`.
    Set { class: String, budget: u32 },
}

#[derive(Debug, Clone, Subcommand)]
pub enum DeviceBudgetCmd {
    /// `device-budget set N`.
    Set { budget: u32 },
}

#[derive(Debug, Clone, Subcommand)]
pub enum StrategyCmd {
    /// `strategy set NAME` (sq, rr, ll-rr, ll-wfq, fcfs, prio, rr-slice, wfq, ll-rr-slice,
    /// ll-wfq-slice).
    Set { strategy: String },
}

#[derive(Debug, Clone, Subcommand)]
pub enum WakeupCmd {
    /// `wakeup set interrupt|busy|adaptive [--spin-us N]`.
    Set {
        mode: String,
        /// Spin time before sleeping (adaptive only), µs.
        #[arg(long)]
        spin_us: Option<u64>,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum RouteCmd {
    /// `route add PREFIX [via GW] dev IF`.
    Add {
        prefix: String,
        /// `via GW dev IF` or `dev IF`.
        #[arg(num_args = 2..=4, required = true)]
        rest: Vec<String>,
    },
    /// `route remove PREFIX`.
    Remove { prefix: String },
}

/// Builds the protocol command from the CLI words (validating what can be checked here).
pub fn command(cmd: &CtlCmd) -> Result<Command> {
    Ok(match cmd {
        CtlCmd::Status => Command::Status {},
        CtlCmd::Counters => Command::Counters {},
        CtlCmd::Rules(RulesCmd::List) => Command::RulesList {},
        CtlCmd::Rules(RulesCmd::Add { rule }) => Command::RulesAdd { rule: rule.clone() },
        CtlCmd::Rules(RulesCmd::Remove { id }) => Command::RulesRemove { id: *id },
        CtlCmd::Budget(BudgetCmd::Set { class, budget }) => Command::BudgetSet {
            class: class.clone(),
            budget: *budget,
        },
        CtlCmd::DeviceBudget(DeviceBudgetCmd::Set { budget }) => {
            Command::DeviceBudgetSet { budget: *budget }
        }
        CtlCmd::Strategy(StrategyCmd::Set { strategy }) => Command::StrategySet {
            strategy: strategy
                .parse()
                .map_err(|e| anyhow::anyhow!("strategy: {e}"))?,
        },
        CtlCmd::Wakeup(WakeupCmd::Set { mode, spin_us }) => {
            let mode: WakeupMode = mode.parse()?;
            if spin_us.is_some() && mode != WakeupMode::Adaptive {
                bail!("--spin-us: only with the adaptive mode");
            }
            Command::WakeupSet {
                mode,
                spin_us: *spin_us,
            }
        }
        CtlCmd::Route(RouteCmd::Add { prefix, rest }) => {
            let words: Vec<&str> = rest.iter().map(String::as_str).collect();
            let (via, dev) = match words.as_slice() {
                ["via", gw, "dev", dev] => (Some(gw.to_string()), dev.to_string()),
                ["dev", dev] => (None, dev.to_string()),
                _ => bail!("route add: expected `PREFIX [via GW] dev IF`, got {words:?}"),
            };
            if !prefix.contains('/') {
                bail!("prefix: {prefix:?} needs a length, e.g. 10.0.0.0/8");
            }
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
    })
}

pub fn run(args: Args) -> Result<()> {
    let cmd = command(&args.cmd)?;
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        bail!("--timeout: must be a positive number of seconds");
    }
    let mut client = CtlClient::connect(&args.socket, Duration::from_secs_f64(args.timeout))?;
    let reply = client
        .call(&cmd)
        .with_context(|| format!("{} on {}", cmd.name(), args.socket.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
        if !reply.ok {
            std::process::exit(1);
        }
        return Ok(());
    }
    match reply.into_result() {
        Ok(v) => {
            print!("{}", human(&cmd, &v));
            Ok(())
        }
        Err(e) => bail!("{} rejected: {}: {}", cmd.name(), e.field, e.reason),
    }
}

/// Human-readable form of a result.
pub fn human(cmd: &Command, v: &Value) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    match cmd {
        Command::Counters {} => {
            if let Ok(snap) = serde_json::from_value::<MetricsSnapshot>(v.clone()) {
                return counters_table(&snap);
            }
            flatten(&mut s, "", v);
        }
        Command::RulesList {} => match v.get("rules").and_then(Value::as_array) {
            Some(rules) if rules.is_empty() => s.push_str("no rules\n"),
            Some(rules) => {
                for r in rules {
                    let _ = writeln!(
                        s,
                        "{:>5}  {}",
                        r.get("id").map(|i| i.to_string()).unwrap_or_default(),
                        r.get("rule").and_then(Value::as_str).unwrap_or("?")
                    );
                }
            }
            None => flatten(&mut s, "", v),
        },
        _ if v.is_null() => s.push_str("ok\n"),
        _ => flatten(&mut s, "", v),
    }
    s
}

/// `a.b.c: value` lines.
fn flatten(s: &mut String, prefix: &str, v: &Value) {
    use std::fmt::Write;
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(s, &p, x);
            }
        }
        Value::Array(a) if a.iter().any(|x| x.is_object() || x.is_array()) => {
            for (i, x) in a.iter().enumerate() {
                flatten(s, &format!("{prefix}[{i}]"), x);
            }
        }
        Value::String(t) => {
            let _ = writeln!(s, "{prefix}: {t}");
        }
        other => {
            let _ = writeln!(
                s,
                "{}: {other}",
                if prefix.is_empty() { "result" } else { prefix }
            );
        }
    }
}

/// Counters as a table.
pub fn counters_table(m: &MetricsSnapshot) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "strategy {}", m.strategy);
    let _ = writeln!(
        s,
        "{:>3} {:>3} {:>4} {:<10} {:>14} {:>16} {:>12} {:>14} {:>12}",
        "wrk", "dev", "ring", "class", "packets", "bytes", "drops", "served", "budget_hits"
    );
    for r in &m.rings {
        let _ = writeln!(
            s,
            "{:>3} {:>3} {:>4} {:<10} {:>14} {:>16} {:>12} {:>14} {:>12}",
            r.worker,
            r.device,
            r.ring,
            r.class,
            r.packets,
            r.bytes,
            r.drops,
            r.served,
            r.budget_hits
        );
    }
    for d in &m.devices {
        let _ = writeln!(
            s,
            "worker {} device {}: wakeups {} rearms {} budget_exhaustions {} passes {}",
            d.worker, d.device, d.wakeups, d.rearms, d.budget_exhaustions, d.passes
        );
    }
    for w in &m.workers {
        let _ = writeln!(
            s,
            "worker {} on core {}: poll_rounds {} busy {:.1}%",
            w.worker,
            w.core,
            w.poll_rounds,
            w.busy_ratio * 100.0
        );
    }
    for (reason, n) in &m.drops {
        let _ = writeln!(s, "drops {reason}: {n}");
    }
    s
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

    fn parse(words: &[&str]) -> Result<Command> {
        let cli = Cli::try_parse_from(std::iter::once("ctl").chain(words.iter().copied()))?;
        command(&cli.args.cmd)
    }

    #[test]
    fn cli_words_map_to_commands() {
        assert_eq!(parse(&["status"]).unwrap(), Command::Status {});
        assert_eq!(
            parse(&["rules", "add", "class=rt dscp=46"]).unwrap(),
            Command::RulesAdd {
                rule: "class=rt dscp=46".into()
            }
        );
        assert_eq!(
            parse(&["budget", "set", "rt", "60"]).unwrap(),
            Command::BudgetSet {
                class: "rt".into(),
                budget: 60
            }
        );
        assert_eq!(
            parse(&["device-budget", "set", "64"]).unwrap(),
            Command::DeviceBudgetSet { budget: 64 }
        );
        assert_eq!(
            parse(&[
                "route",
                "add",
                "10.1.0.0/16",
                "via",
                "10.0.0.2",
                "dev",
                "veth1"
            ])
            .unwrap(),
            Command::RouteAdd {
                prefix: "10.1.0.0/16".into(),
                via: Some("10.0.0.2".into()),
                dev: "veth1".into()
            }
        );
        assert_eq!(
            parse(&["route", "add", "10.1.0.0/16", "dev", "veth1"]).unwrap(),
            Command::RouteAdd {
                prefix: "10.1.0.0/16".into(),
                via: None,
                dev: "veth1".into()
            }
        );
        assert!(parse(&["route", "add", "10.1.0.0/16", "gw", "x"]).is_err());
        assert!(parse(&["route", "add", "10.1.0.0", "dev", "x"]).is_err());
        assert!(parse(&["strategy", "set", "fastest"]).is_err());
        assert!(parse(&["wakeup", "set", "busy", "--spin-us", "5"]).is_err());
        assert!(parse(&["budget", "set", "rt", "-1"]).is_err());
        assert!(matches!(
            parse(&["wakeup", "set", "adaptive", "--spin-us", "50"]).unwrap(),
            Command::WakeupSet {
                mode: WakeupMode::Adaptive,
                spin_us: Some(50)
            }
        ));
    }

    #[test]
    fn human_output() {
        let v = serde_json::json!({"rules": [{"id": 3, "rule": "class=rt dscp=46"}]});
        assert!(human(&Command::RulesList {}, &v).contains("    3  class=rt dscp=46"));
        let v =
            serde_json::json!({"strategy": "ll-wfq", "classes": [{"name": "rt", "budget": 60}]});
        let h = human(&Command::Status {}, &v);
        assert!(h.contains("strategy: ll-wfq"));
        assert!(h.contains("classes[0].budget: 60"));
        let snap = MetricsSnapshot {
            strategy: "sq".into(),
            ..Default::default()
        };
        let v = serde_json::to_value(&snap).unwrap();
        assert!(human(&Command::Counters {}, &v).starts_with("strategy sq"));
    }
}
