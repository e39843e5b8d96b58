//! `llrouter ctl show …`: the running router's tables. Listings stream: rows print as the
//! router sends them, and `-j` prints one JSON document whose array has one item per line.

use anyhow::{Context, Result};
use clap::Subcommand;
use llr_ops::ctl::{Command, CtlClient, SUMMARY_ABOVE};
use llr_ops::metrics::MetricsSnapshot;
use llr_ops::query::{
    Family, ListingEnd, PacketQuery, RouteLookupView, RouteQuery, RouteSummaryView,
};
use llr_ops::views::{self, InterfacesView, NeighbourView, RouteView, StatusView};
use serde_json::{json, Value};
use std::io::Write;
use std::net::IpAddr;

use crate::cli_util::usage;

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
}

#[derive(Debug, Clone, clap::Args)]
pub struct FibArgs {
    /// `summary`, a prefix (`10.0.0.0/8`: the routes inside it) or an address (the route
    /// one packet takes).
    pub what: Option<String>,
    /// List at most this many routes.
    #[arg(long, conflicts_with = "all")]
    pub limit: Option<usize>,
    /// List every route, however many.
    #[arg(long)]
    pub all: bool,
    /// Only routes out of this interface.
    #[arg(long)]
    pub dev: Option<String>,
    /// Only routes through this gateway.
    #[arg(long)]
    pub via: Option<IpAddr>,
    /// Only connected routes.
    #[arg(long, conflicts_with = "via")]
    pub connected: bool,
    /// Only IPv4 or only IPv6 routes.
    #[arg(long, value_enum)]
    pub family: Option<Family>,
    #[command(flatten)]
    pub packet: PacketArgs,
}

/// The rest of a packet a lookup asks about (`show fib ADDRESS`, `flow get ADDRESS`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PacketArgs {
    /// Source address.
    #[arg(long)]
    pub from: Option<IpAddr>,
    /// udp, tcp, icmp, sctp or a number.
    #[arg(long)]
    pub proto: Option<String>,
    #[arg(long)]
    pub sport: Option<u16>,
    #[arg(long)]
    pub dport: Option<u16>,
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub dscp: Option<u8>,
    /// Ingress interface (default: the router's first).
    #[arg(long)]
    pub iif: Option<String>,
}

impl PacketArgs {
    fn given(&self) -> bool {
        self.from.is_some()
            || self.proto.is_some()
            || self.sport.is_some()
            || self.dport.is_some()
            || self.dscp.is_some()
            || self.iif.is_some()
    }

    pub fn query(&self, dst: IpAddr) -> PacketQuery {
        PacketQuery {
            dst,
            src: self.from,
            proto: self.proto.clone(),
            sport: self.sport,
            dport: self.dport,
            dscp: self.dscp,
            iif: self.iif.clone(),
        }
    }
}

/// What `show fib …` asks.
#[derive(Debug, Clone, PartialEq)]
pub enum FibRequest {
    /// List (limit: None = all).
    List(Option<usize>, RouteQuery),
    /// List if the table is small, else sum up.
    ListOrSummary(RouteQuery),
    Summary(RouteQuery),
    Get(PacketQuery),
}

/// Reads the words of `show fib`; bad combinations are usage errors (exit 2).
pub fn fib_request(a: &FibArgs) -> Result<FibRequest> {
    if a.limit == Some(0) {
        return Err(usage(
            "limit",
            "must be at least 1 (--all lists every route)",
        ));
    }
    let mut q = RouteQuery {
        prefix: None,
        dev: a.dev.clone(),
        via: a.via,
        connected: a.connected.then_some(true),
        family: a.family,
    };
    let filtered = q != RouteQuery::default();
    let what = a.what.as_deref();
    if a.packet.given() && what.is_none_or(|w| w.parse::<IpAddr>().is_err()) {
        return Err(usage(
            "from",
            "--from, --proto, --sport, --dport, --dscp and --iif describe a packet: give its \
             destination address (`show fib 10.1.2.3 --dport 5000`)",
        ));
    }
    Ok(match what {
        Some("summary") if a.limit.is_none() && !a.all => FibRequest::Summary(q),
        Some("summary") => return Err(usage("limit", "a summary lists no routes")),
        Some(w) if w.contains('/') => {
            q.prefix = Some(crate::cmd_ctl::prefix_arg(w).map_err(|e| usage("prefix", e))?);
            FibRequest::List(a.limit, q)
        }
        Some(w) => match w.parse::<IpAddr>() {
            Ok(dst) if !filtered && a.limit.is_none() && !a.all => {
                FibRequest::Get(a.packet.query(dst))
            }
            Ok(_) => {
                return Err(usage(
                    "address",
                    "a lookup takes no filters, --limit or --all",
                ))
            }
            Err(_) => {
                return Err(usage(
                    "fib",
                    format!("`{w}` is not `summary`, a prefix (10.0.0.0/8) or an address"),
                ))
            }
        },
        None if a.all => FibRequest::List(None, q),
        None if a.limit.is_some() => FibRequest::List(a.limit, q),
        None if filtered => FibRequest::List(None, q),
        None => FibRequest::ListOrSummary(q),
    })
}

/// Checks the words of a `show` before anything is sent: a bad command line is a usage error
/// (exit 2) whether or not a router answers.
pub fn check(cmd: &ShowCmd) -> Result<()> {
    match cmd {
        ShowCmd::Fib(a) => fib_request(a).map(|_| ()),
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

/// Streams a listing to stdout: text rows as they come (`row` formats one item, columns
/// `widths` wide), or with `json` one JSON document, an item per line.
fn stream<T: serde::de::DeserializeOwned>(
    client: &mut CtlClient,
    cmd: &Command,
    json: bool,
    head: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> Result<ListingEnd> {
    let key = cmd.listing_key().expect("a listing");
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let mut first = true;
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    let mut failed: Option<anyhow::Error> = None;
    let mut each = |items: Vec<Value>| {
        if failed.is_some() {
            return;
        }
        let r = (|| -> Result<()> {
            if json {
                for it in items {
                    let sep = if first {
                        format!("{{\"{key}\":[\n")
                    } else {
                        ",\n".into()
                    };
                    first = false;
                    write!(out, "{sep}{}", serde_json::to_string(&it)?)?;
                }
                return Ok(());
            }
            let rows: Vec<Vec<String>> = (items.into_iter())
                .map(|it| serde_json::from_value::<T>(it).map(|t| row(&t)))
                .collect::<Result<_, _>>()
                .context("a listing item")?;
            for r in &rows {
                for (w, c) in widths.iter_mut().zip(r) {
                    *w = (*w).max(c.chars().count());
                }
            }
            if first {
                first = false;
                let h: Vec<String> = head.iter().map(|s| s.to_string()).collect();
                writeln!(out, "{}", line(&widths, &h))?;
            }
            for r in &rows {
                writeln!(out, "{}", line(&widths, r))?;
            }
            Ok(())
        })();
        if let Err(e) = r {
            failed = Some(e);
        }
    };
    let reply = client
        .call_each(cmd, &mut each)
        .with_context(|| cmd.name().to_string());
    if let Some(e) = failed {
        return Err(e);
    }
    let end = refused(cmd, reply?)?;
    let end: ListingEnd = serde_json::from_value(end).context("the listing's end")?;
    if json {
        let head = if first {
            format!("{{\"{key}\":[")
        } else {
            "\n".into()
        };
        writeln!(
            out,
            "{head}],\"listed\":{},\"matched\":{},\"total\":{}}}",
            end.listed, end.matched, end.total
        )?;
    }
    out.flush()?;
    Ok(end)
}

fn line(widths: &[usize], cells: &[String]) -> String {
    let mut s = String::new();
    for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            s.push_str("  ");
        }
        s.push_str(c);
        s.push_str(&" ".repeat(w.saturating_sub(c.chars().count())));
    }
    s.trim_end().to_string()
}

fn route_row(r: &RouteView) -> Vec<String> {
    vec![
        r.prefix.clone(),
        r.via.clone().unwrap_or_else(|| "connected".into()),
        r.dev.clone(),
    ]
}

/// The line after a listing: how much of what was kept it showed.
fn listing_tail(end: &ListingEnd, what: &str) -> String {
    if end.listed < end.matched {
        format!(
            "({} of {} {what} shown; --all lists every one)",
            end.listed, end.matched
        )
    } else if end.matched < end.total {
        format!("({} of {} {what} match)", end.matched, end.total)
    } else {
        format!("({} {what})", end.total)
    }
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
        ShowCmd::Fib(a) => fib(client, &fib_request(a)?, json)?,
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
                |n: &NeighbourView| vec![n.ip.clone(), n.mac.clone(), n.dev.clone()],
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
            let v = call(client, &cmd)?;
            let s: RouteSummaryView = serde_json::from_value(v.clone()).context("summary")?;
            if matches!(req, FibRequest::ListOrSummary(_)) && s.total <= SUMMARY_ABOVE {
                return list(client, None, q);
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
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
        FibRequest::Get(p) => {
            let v = call(client, &Command::FibGet { packet: p.clone() })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                let r: RouteLookupView = serde_json::from_value(v).context("lookup reply")?;
                print!("{}", lookup_text(&r));
            }
            Ok(())
        }
    }
}

/// `show fib summary`.
pub fn summary_text(s: &RouteSummaryView) -> String {
    let mut out = format!("{} routes, {} next hops\n\n", s.total, s.next_hops);
    let rows: Vec<Vec<String>> = (s.by_length.iter())
        .map(|l| {
            let fam = if l.family == Family::Ipv4 {
                "ipv4"
            } else {
                "ipv6"
            };
            vec![fam.into(), format!("/{}", l.length), l.routes.to_string()]
        })
        .collect();
    out.push_str(&views::table(&["FAMILY", "LENGTH", "ROUTES"], &rows));
    let rows: Vec<Vec<String>> = (s.by_next_hop.iter())
        .map(|n| {
            let via = n.via.clone().unwrap_or_else(|| "connected".into());
            vec![via, n.dev.clone(), n.routes.to_string()]
        })
        .collect();
    out.push('\n');
    out.push_str(&views::table(&["NEXT HOP", "INTERFACE", "ROUTES"], &rows));
    if s.next_hops > s.by_next_hop.len() {
        out.push_str(&format!(
            "({} of {} next hops shown)\n",
            s.by_next_hop.len(),
            s.next_hops
        ));
    }
    out
}

/// `show fib ADDRESS`, in `ip route get`'s words.
pub fn lookup_text(r: &RouteLookupView) -> String {
    let mut out = format!("{} ", r.dst);
    match &r.route {
        Some(rt) => {
            out.push_str(&format!("via route {}", rt.prefix));
            if let Some(g) = &rt.via {
                out.push_str(&format!(" via {g}"));
            }
            out.push_str(&format!(" dev {}", rt.dev));
        }
        None => out.push_str("no route"),
    }
    out.push('\n');
    if let Some(nh) = &r.next_hop {
        let mac = r.neighbour.as_deref().unwrap_or("not resolved");
        out.push_str(&format!("    next hop {nh} lladdr {mac}"));
        if let Some(m) = r.mtu {
            out.push_str(&format!(" mtu {m}"));
        }
        out.push('\n');
    }
    out.push_str(&format!("    iif {} class {}\n", r.iif, r.class));
    out.push_str(&format!("    {}\n", r.verdict));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        show: ShowCmd,
    }

    fn fib_words(words: &[&str]) -> Result<FibRequest> {
        let cli = Cli::try_parse_from(["show"].iter().chain(words))?;
        match cli.show {
            ShowCmd::Fib(a) => fib_request(&a),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn fib_words_map_to_requests() {
        let all = RouteQuery::default();
        assert_eq!(
            fib_words(&["fib"]).unwrap(),
            FibRequest::ListOrSummary(all.clone())
        );
        // the familiar names
        assert_eq!(
            fib_words(&["routes"]).unwrap(),
            FibRequest::ListOrSummary(all.clone())
        );
        assert_eq!(
            fib_words(&["route", "--all"]).unwrap(),
            FibRequest::List(None, all.clone())
        );
        assert_eq!(
            fib_words(&["fib", "--limit", "5"]).unwrap(),
            FibRequest::List(Some(5), all.clone())
        );
        assert_eq!(
            fib_words(&["fib", "summary"]).unwrap(),
            FibRequest::Summary(all.clone())
        );
        let within = RouteQuery {
            prefix: Some("10.0.0.0/8".into()),
            dev: Some("eth1".into()),
            ..Default::default()
        };
        assert_eq!(
            fib_words(&["fib", "10.0.0.0/8", "--dev", "eth1"]).unwrap(),
            FibRequest::List(None, within)
        );
        let v6 = RouteQuery {
            family: Some(Family::Ipv6),
            connected: Some(true),
            ..Default::default()
        };
        assert_eq!(
            fib_words(&["fib", "--family", "ipv6", "--connected"]).unwrap(),
            FibRequest::List(None, v6)
        );
        let mut p = PacketQuery::to("10.71.2.1".parse().unwrap());
        p.dport = Some(5000);
        p.iif = Some("in0".into());
        assert_eq!(
            fib_words(&["fib", "10.71.2.1", "--dport", "5000", "--iif", "in0"]).unwrap(),
            FibRequest::Get(p)
        );
        // usage errors, each naming its field
        for (words, field) in [
            (&["fib", "--limit", "0"][..], "--limit"),
            (&["fib", "10.0.0.0/33x"], "--prefix"),
            (&["fib", "hosts"], "--fib"),
            (&["fib", "--dport", "53"], "--from"),
            (&["fib", "10.1.2.3", "--all"], "--address"),
            (&["fib", "summary", "--limit", "3"], "--limit"),
        ] {
            let e = fib_words(words).unwrap_err();
            assert!(
                e.downcast_ref::<crate::cli_util::UsageError>().is_some(),
                "{words:?}: {e}"
            );
            assert!(e.to_string().contains(field), "{words:?}: {e}");
        }
        assert!(fib_words(&["fib", "--all", "--limit", "3"]).is_err());
        assert!(fib_words(&["fib", "1.2.3.4", "--dscp", "64"]).is_err());
    }

    #[test]
    fn unknown_words_get_a_suggestion() {
        let e = Cli::try_parse_from(["show", "rouets"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("routes") || e.contains("route"), "{e}");
        let e = Cli::try_parse_from(["show", "neighbor"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("neighbors") || e.contains("neighbours"), "{e}");
    }

    #[test]
    fn summary_and_lookup_text() {
        let s = RouteSummaryView {
            total: 3,
            by_length: vec![
                llr_ops::query::LengthCount {
                    family: Family::Ipv4,
                    length: 24,
                    routes: 2,
                },
                llr_ops::query::LengthCount {
                    family: Family::Ipv6,
                    length: 48,
                    routes: 1,
                },
            ],
            by_next_hop: vec![llr_ops::query::NextHopCount {
                via: None,
                dev: "eth1".into(),
                routes: 3,
            }],
            next_hops: 2,
        };
        let t = summary_text(&s);
        assert!(t.starts_with("3 routes, 2 next hops\n"), "{t}");
        assert!(t.contains("ipv6    /48          1"), "{t}");
        assert!(t.contains("connected  eth1            3"), "{t}");
        assert!(t.contains("(1 of 2 next hops shown)"), "{t}");
        let r = RouteLookupView {
            dst: "10.71.2.1".into(),
            route: Some(RouteView {
                prefix: "10.71.2.0/24".into(),
                via: None,
                dev: "out0".into(),
                ifindex: 4,
            }),
            next_hop: Some("10.71.2.1".into()),
            neighbour: None,
            mtu: Some(1500),
            verdict: "no neighbour: to the kernel, which resolves it".into(),
            class: "be".into(),
            iif: "in0".into(),
        };
        assert_eq!(
            lookup_text(&r),
            "10.71.2.1 via route 10.71.2.0/24 dev out0\n    next hop 10.71.2.1 lladdr not resolved mtu 1500\n    iif in0 class be\n    no neighbour: to the kernel, which resolves it\n"
        );
    }
}
