//! The run-time control plane (paper 003): a versioned, newline-delimited JSON protocol over a
//! Unix-domain stream socket, its server ([`CtlServer`]) and client ([`CtlClient`]).
//!
//! # Protocol (version 1)
//! One request per line, one reply per line, any number per connection:
//! ```text
//! → {"version":1,"id":7,"cmd":"budget.set","class":"rt","budget":60}
//! ← {"version":1,"id":7,"ok":true,"result":{...}}
//! ← {"version":1,"id":7,"ok":false,"error":{"field":"budget","reason":"must be at least 1"}}
//! ```
//! A listing (`fib`, `neighbours`, `flow.list`: [`Command::listing_key`]) of any size comes
//! in several lines: items in lines marked `"more":true`, each at most [`MAX_MESSAGE`] bytes,
//! then the final reply with the totals ([`listing`]):
//! ```text
//! → {"version":1,"id":8,"cmd":"fib"}
//! ← {"version":1,"id":8,"ok":true,"more":true,"result":{"routes":[{...},{...}]}}
//! ← {"version":1,"id":8,"ok":true,"result":{"listed":2,"matched":2,"total":2}}
//! ```
//! `id` is any JSON value, echoed back (`null` when the request had none or could not be
//! read). The command's arguments sit beside `cmd` ([`Command`] lists them); unknown fields are
//! rejected. Limits: a line longer than [`MAX_MESSAGE`] bytes gets an error reply and the
//! connection is closed; a connection that does not complete a line within the read timeout
//! (default [`DEFAULT_READ_TIMEOUT`]) is closed, as is one that ends in the middle of a line.
//! Malformed JSON, a wrong `version` or bad arguments get an error reply and the connection stays
//! usable.
//!
//! # Server side
//! The router implements [`ControlTarget`]; [`CtlServer::bind`] serves it on a socket created with
//! mode 0600 before it listens, refuses to start when another live server answers on the path,
//! removes a stale socket file left by a crashed router, and removes its file on drop.

mod client;
pub mod listing;
mod server;
#[cfg(test)]
mod tests;

pub use client::CtlClient;
pub use listing::Listing;
pub use server::{BindError, ControlTarget, CtlServer, Reserved, ServerOptions};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{self, BufRead};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// Protocol version spoken here.
pub const VERSION: u32 = 1;
/// Largest request or reply line, in bytes (without the newline).
pub const MAX_MESSAGE: usize = 64 * 1024;
/// Default time a connection may take to send a complete line.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a connection may stay idle between requests (`llrouter top` asks every second).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Routes `ctl show fib` lists before it prints a summary instead (`--limit` or `--all` list
/// any number).
pub const SUMMARY_ABOVE: u64 = 1000;
/// Default socket path (systemd `RuntimeDirectory=llrouter`).
pub const DEFAULT_SOCKET: &str = "/run/llrouter/llrouter.sock";
/// Connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 32;

/// A rejected request: the offending field and why. Also what [`ControlTarget::handle`] returns
/// for a change it refuses (the running configuration stays as it was).
pub type CtlError = llr_core::FieldError;

/// Wake-up mode of the poll loop: the worker's own type (`wakeup.set` hands it over as is).
pub use llr_io::xsk::WakeMode;

/// One control command with its arguments. The JSON form is `{"cmd": NAME, ...arguments}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", deny_unknown_fields)]
pub enum Command {
    /// Router state: strategy, classes and budgets, wake-up mode, workers, uptime, config path.
    #[serde(rename = "status")]
    Status {},
    /// Counters: a [`crate::metrics::MetricsSnapshot`] as JSON.
    #[serde(rename = "counters")]
    Counters {},
    /// The router's interfaces: name, ifindex, MTU, MAC, addresses and counters
    /// (`{"interfaces": [crate::views::InterfaceView, …]}`).
    #[serde(rename = "interfaces")]
    Interfaces {},
    /// The host's firewall as llrouter runs it: mode, summary and every rule and policy on the
    /// forwarding path with its packets and bytes (`llr_router::firewall::FilterView`).
    #[serde(rename = "filter")]
    Filter {},
    /// The forwarder's routes as the worker uses them, in [`llr_core::fwd::RouteKey`] order
    /// (IPv4 first, by address, shorter first), those `query` keeps, at most `limit` (all when
    /// absent). A listing: items under `routes`, final [`crate::query::ListingEnd`].
    #[serde(rename = "fib")]
    Fib {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
        #[serde(default)]
        query: crate::query::RouteQuery,
    },
    /// Route counts by length and by next hop: [`crate::query::RouteSummaryView`].
    #[serde(rename = "fib.summary")]
    FibSummary {
        #[serde(default)]
        query: crate::query::RouteQuery,
    },
    /// The route, next hop, neighbour and class of one packet, like `ip route get`:
    /// [`crate::query::RouteLookupView`].
    #[serde(rename = "fib.get")]
    FibGet { packet: crate::query::PacketQuery },
    /// The kernel's routing rules as the forwarder evaluates them, and the tables besides
    /// main: [`crate::query::RoutingRulesView`].
    #[serde(rename = "fib.rules")]
    FibRules {},
    /// The forwarder's neighbour table by interface then address, at most `limit`, only
    /// `dev`'s if given. A listing: items under `neighbours`.
    #[serde(rename = "neighbours")]
    Neighbours {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dev: Option<String>,
    },
    /// Classification rules with their ids, in the config's field names:
    /// `{"rules":[{"id":1,"rule":"class=rt dscp=46"}]}`.
    #[serde(rename = "rules.list")]
    RulesList {},
    /// Adds a rule in the one-line syntax of `llr_core::classify` (`class=rt dscp=46`);
    /// result `{"id": N}`.
    #[serde(rename = "rules.add")]
    RulesAdd { rule: String },
    /// Removes the rule with this id.
    /// On the wire the argument is `rule_id`: `id` is the request's own id (echoed in the reply).
    #[serde(rename = "rules.remove")]
    RulesRemove {
        #[serde(rename = "rule_id")]
        id: u64,
    },
    /// Sets the ring budget of a class (packets, or ns for time-slice strategies).
    #[serde(rename = "budget.set")]
    BudgetSet {
        class: String,
        budget: llr_core::sched::Budget,
    },
    /// Sets the device budget (NAPI weight).
    #[serde(rename = "device_budget.set")]
    DeviceBudgetSet { budget: u32 },
    /// Switches the scheduling strategy (`sq`, `rr`, `ll-rr`, `ll-wfq`, …).
    #[serde(rename = "strategy.set")]
    StrategySet {
        strategy: llr_core::sched::StrategyKind,
    },
    /// Switches the wake-up mode; `spin_us` only for `adaptive`.
    #[serde(rename = "wakeup.set")]
    WakeupSet {
        mode: WakeMode,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spin_us: Option<u64>,
    },
    /// Adds a static route: `prefix` (`10.1.0.0/16`, `2001:db8::/32`), optional gateway, egress
    /// interface.
    #[serde(rename = "route.add")]
    RouteAdd {
        prefix: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
        dev: String,
    },
    /// Removes the static route for `prefix`.
    #[serde(rename = "route.remove")]
    RouteRemove { prefix: String },
    /// Re-reads the configuration file and applies it (validated first, all or nothing).
    #[serde(rename = "reload")]
    Reload {},
    /// The flows with their counters, those `query` keeps in its order. A listing: items
    /// ([`llr_core::flow::FlowInfo`]) under `flows`.
    #[serde(rename = "flow.list")]
    FlowList {
        #[serde(default)]
        query: crate::query::FlowQuery,
    },
    /// The class, flow and pipeline of one packet: [`crate::query::FlowLookupView`].
    #[serde(rename = "flow.get")]
    FlowGet { packet: crate::query::PacketQuery },
    /// Sets up a flow: `flow` as a `[[flows]]` entry (kebab-case keys).
    #[serde(rename = "flow.add")]
    FlowAdd { flow: Box<llr_core::flow::FlowSpec> },
    /// Changes a flow: `flow.name` and the fields to change (weight or cpu, quantum-us, queue,
    /// pipeline).
    #[serde(rename = "flow.set")]
    FlowSet { flow: Box<llr_core::flow::FlowSpec> },
    /// Tears a flow down.
    #[serde(rename = "flow.del")]
    FlowDel { name: String },
}

impl Command {
    /// The wire name (`"budget.set"`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Status {} => "status",
            Command::Counters {} => "counters",
            Command::Interfaces {} => "interfaces",
            Command::Filter {} => "filter",
            Command::Fib { .. } => "fib",
            Command::FibSummary { .. } => "fib.summary",
            Command::FibGet { .. } => "fib.get",
            Command::FibRules {} => "fib.rules",
            Command::Neighbours { .. } => "neighbours",
            Command::RulesList {} => "rules.list",
            Command::RulesAdd { .. } => "rules.add",
            Command::RulesRemove { .. } => "rules.remove",
            Command::BudgetSet { .. } => "budget.set",
            Command::DeviceBudgetSet { .. } => "device_budget.set",
            Command::StrategySet { .. } => "strategy.set",
            Command::WakeupSet { .. } => "wakeup.set",
            Command::RouteAdd { .. } => "route.add",
            Command::RouteRemove { .. } => "route.remove",
            Command::Reload {} => "reload",
            Command::FlowList { .. } => "flow.list",
            Command::FlowGet { .. } => "flow.get",
            Command::FlowAdd { .. } => "flow.add",
            Command::FlowSet { .. } => "flow.set",
            Command::FlowDel { .. } => "flow.del",
        }
    }

    /// Whether the command changes the running configuration.
    pub fn is_change(&self) -> bool {
        !matches!(
            self,
            Command::Status {}
                | Command::Counters {}
                | Command::RulesList {}
                | Command::Interfaces {}
                | Command::Filter {}
                | Command::Fib { .. }
                | Command::FibSummary { .. }
                | Command::FibGet { .. }
                | Command::FibRules {}
                | Command::Neighbours { .. }
                | Command::FlowList { .. }
                | Command::FlowGet { .. }
        )
    }

    /// For a listing, the result key its items go under.
    pub fn listing_key(&self) -> Option<&'static str> {
        match self {
            Command::Fib { .. } => Some("routes"),
            Command::Neighbours { .. } => Some("neighbours"),
            Command::FlowList { .. } => Some("flows"),
            _ => None,
        }
    }
}

/// One entry of `rules.list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleEntry {
    pub id: u64,
    pub rule: String,
}

/// A reply line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    pub version: u32,
    #[serde(default)]
    pub id: Value,
    pub ok: bool,
    /// A listing's line with items; the final reply follows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CtlError>,
}

impl Reply {
    pub fn ok(id: Value, result: Value) -> Self {
        Reply {
            version: VERSION,
            id,
            ok: true,
            more: false,
            result: Some(result),
            error: None,
        }
    }
    pub fn err(id: Value, e: CtlError) -> Self {
        Reply {
            version: VERSION,
            id,
            ok: false,
            more: false,
            result: None,
            error: Some(e),
        }
    }
    /// `result` on success, the error otherwise.
    pub fn into_result(self) -> Result<Value, CtlError> {
        match (self.ok, self.result, self.error) {
            (true, r, _) => Ok(r.unwrap_or(Value::Null)),
            (false, _, Some(e)) => Err(e),
            (false, _, None) => Err(CtlError::new("reply", "ok=false without an error")),
        }
    }
}

/// Parses one request line: `(id, command)`, or `(id, error)` with the id recovered where
/// possible so the error reply can carry it.
pub fn parse_request(line: &[u8]) -> (Value, Result<Command, CtlError>) {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return (
                Value::Null,
                Err(CtlError::new("message", format!("bad JSON: {e}"))),
            )
        }
    };
    let Value::Object(mut obj) = v else {
        return (
            Value::Null,
            Err(CtlError::new("message", "not a JSON object")),
        );
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    match obj.remove("version") {
        None => return (id, Err(CtlError::new("version", "missing"))),
        Some(Value::Number(n)) if n.as_u64() == Some(VERSION as u64) => {}
        Some(other) => {
            return (
                id,
                Err(CtlError::new(
                    "version",
                    format!("unsupported version {other}; this router speaks {VERSION}"),
                )),
            )
        }
    }
    if !obj.contains_key("cmd") {
        return (id, Err(CtlError::new("cmd", "missing")));
    }
    let cmd = serde_json::from_value::<Command>(Value::Object(obj)).map_err(serde_error);
    (id, cmd)
}

/// Turns a serde message into a field/reason pair (`unknown field `x`` → field `x`).
fn serde_error(e: serde_json::Error) -> CtlError {
    let msg = e.to_string();
    let between = |m: &str| m.split('`').nth(1).map(str::to_string);
    let field = if msg.starts_with("unknown field") || msg.starts_with("missing field") {
        between(&msg)
    } else if msg.starts_with("unknown variant") {
        // which enum it was shows in the list of expected names
        if msg.contains("`status`") {
            Some("cmd".into())
        } else if msg.contains("`ll-wfq`") {
            Some("strategy".into())
        } else if msg.contains("`interrupt`") {
            Some("mode".into())
        } else {
            None
        }
    } else if msg.contains("unknown strategy") {
        // StrategyKind and Budget parse as their FromStr does, with its message
        Some("strategy".into())
    } else if msg.contains("ring budget") || msg.contains("a number of packets or") {
        Some("budget".into())
    } else {
        None
    };
    CtlError::new(field.unwrap_or_else(|| "arguments".into()), msg)
}

/// Reads one line of at most `max` bytes. `Ok(None)`: clean end of stream between lines.
/// Errors: `InvalidData` when the line is too long, `UnexpectedEof` when the stream ends inside
/// a line, `WouldBlock`/`TimedOut` on timeout.
pub fn read_line<R: BufRead>(r: &mut R, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection ended inside a message",
                ))
            };
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(p) => (p + 1, true),
            None => (buf.len(), false),
        };
        let content = if done { take - 1 } else { take };
        if line.len() + content > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("message larger than {max} bytes"),
            ));
        }
        line.extend_from_slice(&buf[..content]);
        r.consume(take);
        if done {
            return Ok(Some(line));
        }
    }
}

/// Mode bits of the socket file (for checks and `status`).
pub fn socket_mode(path: &Path) -> io::Result<u32> {
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o7777)
}
