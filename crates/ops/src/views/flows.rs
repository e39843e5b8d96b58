//! Flows as `ctl flow` prints them, and the typed replies of the flow commands.

use llr_core::flow::{FlowInfo, FlowSpec, Share};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::table;
use crate::ctl::Command;
use crate::query::FlowLookupView;

fn share_text(s: Share) -> String {
    match s {
        Share::Weight(w) => format!("w{w}"),
        Share::Cpu(f) => format!("{:.0}%", f * 100.0),
    }
}

/// The table of `flow list`.
pub fn flows_table(flows: &[FlowInfo]) -> String {
    let rows: Vec<Vec<String>> = flows
        .iter()
        .map(|f| {
            let drops = f.stats.queue_drops + f.elements.iter().map(|e| e.dropped).sum::<u64>();
            vec![
                f.name.clone(),
                f.class.clone().unwrap_or_else(|| "-".into()),
                if f.matches.is_empty() {
                    "-".into()
                } else {
                    f.matches.clone()
                },
                format!("{} ({:.1}%)", share_text(f.share), f.norm_share * 100.0),
                format!("{:.1}", f.quantum_ns as f64 / 1000.0),
                format!("{}/{}", f.queue_len, f.queue_limit),
                format!("{:.1}", f.stats.cpu_ns as f64 / 1e6),
                f.stats.done.to_string(),
                drops.to_string(),
                f.stats.preemptions.to_string(),
                f.pipeline.join(" "),
            ]
        })
        .collect();
    table(
        &[
            "FLOW", "CLASS", "MATCH", "SHARE", "Q(µs)", "QUEUE", "CPU(ms)", "DONE", "DROPS",
            "PREEMPT", "PIPELINE",
        ],
        &rows,
    )
}

/// `flow.list` as gathered: the flows and the listing's end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowListView {
    pub flows: Vec<FlowInfo>,
    pub matched: Option<u64>,
    pub total: Option<u64>,
}

/// `flow.add`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowAdded {
    pub added: FlowSpec,
}

/// `flow.set`: the flow as it is now, and before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowChanged {
    pub flow: FlowSpec,
    pub previous: FlowSpec,
}

/// `flow.del`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRemoved {
    pub removed: FlowSpec,
}

/// The text of a flow command's reply (`None` for other commands); `Err` holds the reply as
/// JSON when it does not read as its type.
pub fn flow_reply_text(cmd: &Command, v: &Value) -> Option<Result<String, String>> {
    let raw = || format!("{v:#}\n");
    Some(match cmd {
        Command::FlowList { .. } => FlowListView::deserialize(v)
            .map(|l| {
                let tail = match (l.matched, l.total) {
                    (Some(n), Some(t)) if (l.flows.len() as u64) < n => {
                        format!(
                            "({} of {n} matching flows shown, {t} in all)\n",
                            l.flows.len()
                        )
                    }
                    (Some(n), Some(t)) => format!("({n} of {t} flows)\n"),
                    _ => String::new(),
                };
                flows_table(&l.flows) + &tail
            })
            .map_err(|_| raw()),
        Command::FlowGet { .. } => match FlowLookupView::deserialize(v) {
            Ok(f) => Ok(format!(
                "iif {} class {} flow {}{}\n    pipeline {}\n",
                f.iif,
                f.class,
                f.flow,
                if f.matches.is_empty() {
                    String::new()
                } else {
                    format!(" (match {})", f.matches)
                },
                if f.pipeline.is_empty() {
                    "forward".to_string()
                } else {
                    f.pipeline.join(" ")
                }
            )),
            Err(_) => Err(raw()),
        },
        Command::FlowAdd { flow } => Ok(format!("added flow {}\n", flow.name)),
        Command::FlowSet { flow } => Ok(format!("changed flow {}\n", flow.name)),
        Command::FlowDel { name } => Ok(format!("removed flow {name}\n")),
        _ => return None,
    })
}
