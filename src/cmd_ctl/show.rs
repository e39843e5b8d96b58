//! `llrouter ctl show …`: the running router's tables. Listings stream: rows print as the
//! router sends them, and `-j` prints one JSON document whose array has one item per line.

use anyhow::{Context, Result};
use clap::Subcommand;
use llr_ops::ctl::{Command, CtlClient, SUMMARY_ABOVE};
use llr_ops::metrics::MetricsSnapshot;
use llr_ops::query::{
    FibArgs, FibRequest, ListingEnd, RouteLookupView, RouteQuery, RouteSummaryView,
};
use llr_ops::views::{
    self, listing_tail, lookup_text, neighbour_row, route_row, routing_rules_text, summary_text,
    InterfacesView, ListingWriter, StatusView,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::cli_util::{to_usage, usage};

#[derive(Debug, Clone, Subcommand)]
pub enum ShowCmd {
    /// Interfaces: index, MTU, MAC, addresses; frames received, transmitted, handed to the
    /// kernel, dropped, in error.
    Interfaces,
    /// The routes the forwarder uses (kernel routes mirrored, static routes over them).
    ///
    /// `show fib` lists every route of a table of up to 1000 routes and sums up a larger one
    /// (counts by length and next hop); `--limit N` or `--all` lists any number, IPv4 first,
    /// by address. `show fib PREFIX` lists the routes inside PREFIX; `show fib ADDRESS`
    /// looks one packet up like `ip route get`; `show fib summary` always sums up.
    #[command(visible_aliases = ["route", "routes"])]
    Fib(FibArgs),
    /// The neighbour (ARP / ND) entries the forwarder uses.
    #[command(visible_alias = "neighbors")]
    Neighbours {
        /// Show at most this many entries (all when absent).
        #[arg(long)]
        limit: Option<usize>,
        /// Only this interface's entries.
        #[arg(long)]
        dev: Option<String>,
    },
    /// Classes: ring, budget, frames classified and served, ring-full drops, p99 ring latency.
    Classes,
    /// Workers: core, load, poll rounds; their engine devices' wake-ups.
    Workers,
    /// The host's firewall as llrouter enforces it: every rule and policy on the forwarding
    /// path (nftables handles) with the packets and bytes it matched here, and the rules whose
    /// packets go to the kernel, with why.
    #[command(visible_alias = "firewall")]
    Filter,
}

/// Checks the words of a `show` before anything is sent: a bad command line is a usage error
/// (exit 2) whether or not a router answers.
pub fn check(cmd: &ShowCmd) -> Result<()> {
    match cmd {
        ShowCmd::Fib(a) => a.request().map(|_| ()).map_err(to_usage),
        ShowCmd::Neighbours { limit: Some(0), .. } => {
            Err(usage("limit", "must be at least 1 (leave it out for all)"))
        }
        _ => Ok(()),
    }
}

/// One call; a refusal is an error naming the router's field and reason (exit 1).
pub fn call(client: &mut CtlClient, cmd: &Command) -> Result<Value> {
    let reply = client.call(cmd).with_context(|| cmd.name().to_string())?;
    refused(cmd, reply)
}

/// Calls `cmd` and reads its reply as `T`.
pub fn call_as<T: serde::de::DeserializeOwned>(client: &mut CtlClient, cmd: &Command) -> Result<T> {
    let v = call(client, cmd)?;
    T::deserialize(v).with_context(|| format!("{} reply", cmd.name()))
}

fn refused(cmd: &Command, reply: llr_ops::ctl::Reply) -> Result<Value> {
    reply
        .into_result()
        .map_err(|e| anyhow::anyhow!("{} rejected: {}: {}", cmd.name(), e.field, e.reason))
}

/// Streams a listing to stdout: text rows as they come (`row` formats one item), or with
/// `json` one JSON document, an item per line.
fn stream<T: serde::de::DeserializeOwned>(
    client: &mut CtlClient,
    cmd: &Command,
    json: bool,
    head: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Result<ListingEnd> {
    let key = cmd.listing_key().expect("a listing");
    let out = std::io::stdout();
    let mut w = ListingWriter::new(std::io::BufWriter::new(out.lock()), key, json, head);
    let mut failed: Option<std::io::Error> = None;
    let mut each = |items: Vec<Value>| {
        if failed.is_none() {
            failed = w.items(items, &row).err();
        }
    };
    let reply = client
        .call_each(cmd, &mut each)
        .with_context(|| cmd.name().to_string());
    if let Some(e) = failed {
        return Err(e.into());
    }
    let end = refused(cmd, reply?)?;
    let end = ListingEnd::deserialize(end).context("the listing's end")?;
    w.finish(&end)?;
    Ok(end)
}

/// `show …`.
pub fn run(client: &mut CtlClient, cmd: &ShowCmd, json: bool) -> Result<()> {
    match cmd {
        ShowCmd::Interfaces => {
            let v: InterfacesView = call_as(client, &Command::Interfaces {})?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{}", views::interfaces_table(&v.interfaces));
            }
        }
        ShowCmd::Filter => {
            let v: views::FilterView = call_as(client, &Command::Filter {})?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{}", views::filter_text(&v));
            }
        }
        ShowCmd::Fib(a) => fib(client, &a.request().map_err(to_usage)?, json)?,
        ShowCmd::Neighbours { limit, dev } => {
            let cmd = Command::Neighbours {
                limit: *limit,
                dev: dev.clone(),
            };
            let end = stream(
                client,
                &cmd,
                json,
                &["ADDRESS", "MAC", "INTERFACE"],
                neighbour_row,
            )?;
            if !json {
                println!("{}", listing_tail(&end, "neighbours"));
            }
        }
        ShowCmd::Classes | ShowCmd::Workers => {
            let status: StatusView = call_as(client, &Command::Status {})?;
            let m: MetricsSnapshot = call_as(client, &Command::Counters {})?;
            let classes = matches!(cmd, ShowCmd::Classes);
            if json {
                let v = if classes {
                    json!({"classes": status.classes, "classified": m.classes, "rings": m.rings})
                } else {
                    json!({"workers": m.workers, "engine_devices": m.devices, "helper_cores": status.helper_cores})
                };
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else if classes {
                print!("{}", views::classes_table(&status, &m));
            } else {
                print!("{}", views::workers_table(&status, &m));
            }
        }
    }
    Ok(())
}

fn fib(client: &mut CtlClient, req: &FibRequest, json: bool) -> Result<()> {
    let list = |client: &mut CtlClient, limit: Option<usize>, q: &RouteQuery| -> Result<()> {
        let cmd = Command::Fib {
            limit,
            query: q.clone(),
        };
        let end = stream(
            client,
            &cmd,
            json,
            &["PREFIX", "NEXT HOP", "INTERFACE"],
            route_row,
        )?;
        if !json {
            println!("{}", listing_tail(&end, "routes"));
        }
        Ok(())
    };
    match req {
        FibRequest::List(limit, q) => list(client, *limit, q),
        FibRequest::ListOrSummary(q) | FibRequest::Summary(q) => {
            let cmd = Command::FibSummary { query: q.clone() };
            let s: RouteSummaryView = call_as(client, &cmd)?;
            if matches!(req, FibRequest::ListOrSummary(_)) && s.total <= SUMMARY_ABOVE {
                return list(client, None, q);
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print!("{}", summary_text(&s));
                if matches!(req, FibRequest::ListOrSummary(_)) {
                    println!(
                        "(more than {SUMMARY_ABOVE} routes: summed up; `show fib --all`, \
                         `--limit N` or `show fib PREFIX` list them)"
                    );
                }
            }
            Ok(())
        }
        FibRequest::Rules => {
            let r: llr_ops::query::RoutingRulesView = call_as(client, &Command::FibRules {})?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", routing_rules_text(&r));
            }
            Ok(())
        }
        FibRequest::Get(p) => {
            let r: RouteLookupView = call_as(client, &Command::FibGet { packet: p.clone() })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", lookup_text(&r));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
#[path = "show_tests.rs"]
mod tests;
