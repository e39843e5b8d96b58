//! `llrouter ctl flow …`: flows set up, changed, torn down and listed at run time.

use anyhow::Result;
use clap::Subcommand;
use llr_core::classify::RuleSpec;
use llr_core::flow::FlowSpec;
use llr_ops::ctl::Command;
use llr_ops::query::{FlowQuery, FlowSort};

use crate::cli_util::usage;

#[derive(Debug, Clone, Subcommand)]
pub enum FlowCmd {
    /// Flows with their share, quantum, queue, pipeline and counters, by name or the top N by
    /// CPU, packets, bytes or drops.
    List {
        /// Flows whose name contains this text.
        #[arg(long)]
        name: Option<String>,
        /// Flows of this ingress class.
        #[arg(long)]
        class: Option<String>,
        /// Flows whose match contains this text (`dst_port=5000`).
        #[arg(long = "match", value_name = "TEXT")]
        matches: Option<String>,
        /// Order: name, or most cpu, packets, bytes or drops first.
        #[arg(long, value_enum, default_value_t = FlowSort::Name)]
        sort: FlowSort,
        /// At most this many (`--sort cpu --limit 10`: the top ten).
        #[arg(long, visible_alias = "top")]
        limit: Option<usize>,
    },
    /// The class, flow and pipeline a packet maps to: `flow get 10.1.2.3 --proto udp --dport
    /// 5000 --iif eth0`.
    Get {
        /// Destination address.
        dst: std::net::IpAddr,
        #[command(flatten)]
        packet: llr_ops::query::PacketArgs,
    },
    /// Set up a flow, e.g. `flow add video --match "proto=udp dst=10.1.0.0/16" --weight 4
    /// --pipeline "meter(pps=20000) work(us=2)"`.
    Add {
        name: String,
        #[command(flatten)]
        opts: FlowOpts,
        /// Match fields in the rule syntax (no class=): proto, src, dst, sport, dport, dscp, …
        #[arg(long = "match", value_name = "FIELDS")]
        matches: Option<String>,
        /// Only this ingress class's traffic (without --match: the class's global flow).
        #[arg(long)]
        class: Option<String>,
        /// Order among overlapping wildcard flows (higher first).
        #[arg(long)]
        precedence: Option<u32>,
    },
    /// Change a flow's share, quantum, queue limit or pipeline (only the options given).
    Set {
        name: String,
        #[command(flatten)]
        opts: FlowOpts,
    },
    /// Tear a flow down (its queued packets are dropped, counted).
    #[command(alias = "remove")]
    Del { name: String },
}

#[derive(Debug, Clone, clap::Args)]
pub struct FlowOpts {
    /// Proportional CPU share.
    #[arg(long, conflicts_with = "cpu")]
    weight: Option<u32>,
    /// Guaranteed fraction of the CPU (0 < cpu < 1) instead of a weight.
    #[arg(long)]
    cpu: Option<f64>,
    /// Preemption quantum, µs.
    #[arg(long = "quantum-us")]
    quantum_us: Option<f64>,
    /// Queue limit, packets.
    #[arg(long)]
    queue: Option<u32>,
    /// Elements separated by spaces: count, meter(pps=N,burst=N), dscp(set=D), acl(NAME),
    /// work(us=N); forward is implied last.
    #[arg(long)]
    pipeline: Option<String>,
}

impl FlowOpts {
    fn spec(&self, name: &str) -> FlowSpec {
        FlowSpec {
            name: name.to_string(),
            weight: self.weight,
            cpu: self.cpu,
            quantum_us: self.quantum_us,
            queue: self.queue,
            pipeline: self
                .pipeline
                .as_deref()
                .map(|p| p.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            ..Default::default()
        }
    }
}

/// The protocol command of a `flow` subcommand.
pub fn command(cmd: &FlowCmd) -> Result<Command> {
    Ok(match cmd {
        FlowCmd::List {
            name,
            class,
            matches,
            sort,
            limit,
        } => {
            if *limit == Some(0) {
                return Err(usage("limit", "must be at least 1 (leave it out for all)"));
            }
            Command::FlowList {
                query: FlowQuery {
                    name: name.clone(),
                    class: class.clone(),
                    matches: matches.clone(),
                    sort: *sort,
                    limit: *limit,
                },
            }
        }
        FlowCmd::Get { dst, packet } => Command::FlowGet {
            packet: packet.query(*dst),
        },
        FlowCmd::Add {
            name,
            opts,
            matches,
            class,
            precedence,
        } => {
            let mut spec = opts.spec(name);
            spec.matches = matches
                .as_deref()
                .map(RuleSpec::parse_match)
                .transpose()
                .map_err(|e| usage("match", format!("{}: {}", e.field, e.reason)))?;
            spec.class = class.clone();
            spec.precedence = *precedence;
            Command::FlowAdd {
                flow: Box::new(spec),
            }
        }
        FlowCmd::Set { name, opts } => Command::FlowSet {
            flow: Box::new(opts.spec(name)),
        },
        FlowCmd::Del { name } => Command::FlowDel { name: name.clone() },
    })
}
