//! Typed arguments and answers of the listing and lookup commands: which routes or flows a
//! listing keeps and in which order, the packet a lookup asks about, and what the router
//! answers (`ctl show fib ADDR`, `ctl flow get …`, `ctl show fib summary`).

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

mod args;
pub use args::{prefix_arg, FibArgs, FibRequest, PacketArgs};

/// One route of the forwarder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteView {
    pub prefix: String,
    /// Gateway; `None` for a connected route.
    pub via: Option<String>,
    pub dev: String,
    pub ifindex: u32,
}

/// One neighbour (ARP / ND) entry of the forwarder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighbourView {
    pub ip: String,
    pub mac: String,
    pub dev: String,
}

/// Which routes `fib` and `fib.summary` keep (every field given must match).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteQuery {
    /// Routes inside this prefix, itself included (`10.0.0.0/8`), like `ip route show root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Routes out of this interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
    /// Routes through this gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<IpAddr>,
    /// Only connected routes (`true`) or only routes via a gateway (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected: Option<bool>,
    /// Only one family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
}

/// An IP version, as `ip -4` / `ip -6` choose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

/// What a flow listing is sorted by. Every order is total: ties go by flow name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum FlowSort {
    /// By name.
    #[default]
    Name,
    /// Most CPU time first.
    Cpu,
    /// Most packets done first.
    Packets,
    /// Most bytes first (over the flow's first element).
    Bytes,
    /// Most drops (queue and element drops) first.
    Drops,
}

/// Which flows `flow.list` keeps, in which order, and how many.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowQuery {
    /// Flows whose name contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Flows of this ingress class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Flows whose match contains this text (`dst_port=5000`).
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    #[serde(default)]
    pub sort: FlowSort,
    /// At most this many (after sorting: the top N). None: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// A packet a lookup asks about, like the arguments of `ip route get`. Unset fields take the
/// values of an ordinary UDP packet (DSCP 0, ports 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketQuery {
    pub dst: IpAddr,
    /// Source address (default: unspecified, `0.0.0.0` or `::`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<IpAddr>,
    /// `udp`, `tcp`, `icmp`, `sctp` or a protocol number (default `udp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<u8>,
    /// Ingress interface (default: the router's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iif: Option<String>,
}

impl PacketQuery {
    /// The packet to `dst` with every other field left to its default.
    pub fn to(dst: IpAddr) -> Self {
        PacketQuery {
            dst,
            src: None,
            proto: None,
            sport: None,
            dport: None,
            dscp: None,
            iif: None,
        }
    }

    /// The IP protocol number of `proto`, or why it is not one.
    pub fn protocol(&self) -> Result<u8, String> {
        let Some(p) = self.proto.as_deref() else {
            return Ok(17);
        };
        match p {
            "udp" => Ok(17),
            "tcp" => Ok(6),
            "icmp" => Ok(1),
            "icmpv6" | "ipv6-icmp" => Ok(58),
            "sctp" => Ok(132),
            n => n
                .parse()
                .map_err(|_| format!("`{n}` is not udp, tcp, icmp, icmpv6, sctp or a number")),
        }
    }
}

/// The forwarder's answer for a packet (`ctl show fib ADDR`): what `ip route get` says, plus
/// the class the classifier's rules give it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteLookupView {
    pub dst: String,
    /// The route that matched (longest prefix), or none: the packet goes to the kernel.
    pub route: Option<RouteView>,
    /// Where the packet goes next: the gateway, or `dst` itself on a connected route.
    pub next_hop: Option<String>,
    /// The next hop's MAC when the neighbour table has it; none: the packet goes to the
    /// kernel to resolve it.
    pub neighbour: Option<String>,
    /// The egress interface's MTU.
    pub mtu: Option<u32>,
    /// `forward`, or why the worker hands the packet to the kernel (`local`, `no route`,
    /// `no neighbour`).
    pub verdict: String,
    /// The ingress class the rules give this packet on `iif`.
    pub class: String,
    pub iif: String,
    /// The routing rule that decided, in `ip rule`'s words, when the host has rules beyond
    /// the default ones (else the main table alone decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The table the route came from, when a rule picked one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    /// A multipath route's next hops (`via GW dev IF weight W`); `route` is the one this
    /// packet's flow takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub multipath: Vec<String>,
}

/// The kernel's routing rules as the forwarder evaluates them (`ctl show fib rules`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingRulesView {
    /// IPv4 rules in evaluation order, in `ip rule`'s words.
    pub ipv4: Vec<String>,
    /// IPv6 rules.
    pub ipv6: Vec<String>,
    /// Whether IPv4 routes by the main table alone (the rules reduce to it), so the
    /// forwarder's batched main-table lookups serve it.
    pub ipv4_main_only: bool,
    pub ipv6_main_only: bool,
    /// The tables besides main the forwarder holds, with their routes.
    pub tables: Vec<TableSizeView>,
}

/// One routing table besides main.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSizeView {
    pub table: u32,
    pub routes: usize,
}

/// Which flow and pipeline a packet maps to (`ctl flow get …`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowLookupView {
    pub class: String,
    pub iif: String,
    pub flow: String,
    /// The flow's match in the rule syntax (empty for a class's default flow).
    #[serde(rename = "match")]
    pub matches: String,
    pub pipeline: Vec<String>,
}

/// Route counts (`ctl show fib summary`, and `show fib` on a large table), like BIRD's
/// `show route count`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSummaryView {
    pub total: u64,
    /// `(family, length, routes)`, IPv4 first, by length.
    pub by_length: Vec<LengthCount>,
    /// The next hops with the most routes, most first.
    pub by_next_hop: Vec<NextHopCount>,
    /// Distinct next hops.
    pub next_hops: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LengthCount {
    pub family: Family,
    pub length: u8,
    pub routes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextHopCount {
    pub via: Option<String>,
    pub dev: String,
    pub routes: u64,
}

/// The final line of a listing: how many items it sent and how many the table holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingEnd {
    /// Items sent.
    pub listed: u64,
    /// Items the filter kept (before `limit`).
    pub matched: u64,
    /// Items in the table.
    pub total: u64,
}
