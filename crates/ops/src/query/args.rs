//! The words of `show fib` and of a lookup's packet as typed settings (the CLI derives its
//! flags from them with the `clap` feature), and the request they make.

use std::net::IpAddr;

use llr_core::error::FieldError;

use super::{Family, PacketQuery, RouteQuery};

/// An `addr/len` prefix argument, or why it is not one.
pub fn prefix_arg(s: &str) -> Result<String, String> {
    match s.split_once('/') {
        Some((a, l)) if a.parse::<IpAddr>().is_ok() && l.parse::<u8>().is_ok() => Ok(s.to_string()),
        Some(_) => Err("not an addr/len prefix".into()),
        None => Err("needs a length, e.g. 10.0.0.0/8".into()),
    }
}

#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FibArgs {
    /// `summary`, a prefix (`10.0.0.0/8`: the routes inside it) or an address (the route
    /// one packet takes).
    pub what: Option<String>,
    /// List at most this many routes.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "all"))]
    pub limit: Option<usize>,
    /// List every route, however many.
    #[cfg_attr(feature = "clap", arg(long))]
    pub all: bool,
    /// Only routes out of this interface.
    #[cfg_attr(feature = "clap", arg(long))]
    pub dev: Option<String>,
    /// Only routes through this gateway.
    #[cfg_attr(feature = "clap", arg(long))]
    pub via: Option<IpAddr>,
    /// Only connected routes.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "via"))]
    pub connected: bool,
    /// Only IPv4 or only IPv6 routes.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub family: Option<Family>,
    #[cfg_attr(feature = "clap", command(flatten))]
    pub packet: PacketArgs,
}

/// The rest of a packet a lookup asks about (`show fib ADDRESS`, `flow get ADDRESS`).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PacketArgs {
    /// Source address.
    #[cfg_attr(feature = "clap", arg(long))]
    pub from: Option<IpAddr>,
    /// udp, tcp, icmp, sctp or a number.
    #[cfg_attr(feature = "clap", arg(long))]
    pub proto: Option<String>,
    #[cfg_attr(feature = "clap", arg(long))]
    pub sport: Option<u16>,
    #[cfg_attr(feature = "clap", arg(long))]
    pub dport: Option<u16>,
    #[cfg_attr(feature = "clap", arg(long, value_parser = clap::value_parser!(u8).range(0..=63)))]
    pub dscp: Option<u8>,
    /// Ingress interface (default: the router's first).
    #[cfg_attr(feature = "clap", arg(long))]
    pub iif: Option<String>,
}

impl PacketArgs {
    /// Whether any part of the packet is given.
    pub fn given(&self) -> bool {
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
    /// The routing rules and the tables besides main.
    Rules,
}

impl FibArgs {
    /// What the words of `show fib` ask; a bad combination names the flag.
    pub fn request(&self) -> Result<FibRequest, FieldError> {
        let a = self;
        if a.limit == Some(0) {
            return Err(FieldError::new(
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
            return Err(FieldError::new(
                "from",
                "--from, --proto, --sport, --dport, --dscp and --iif describe a packet: give its \
                 destination address (`show fib 10.1.2.3 --dport 5000`)",
            ));
        }
        Ok(match what {
            Some("rules") if !filtered && a.limit.is_none() && !a.all => FibRequest::Rules,
            Some("rules") => {
                return Err(FieldError::new(
                    "rules",
                    "the rules take no filters or limits",
                ))
            }
            Some("summary") if a.limit.is_none() && !a.all => FibRequest::Summary(q),
            Some("summary") => return Err(FieldError::new("limit", "a summary lists no routes")),
            Some(w) if w.contains('/') => {
                q.prefix = Some(prefix_arg(w).map_err(|e| FieldError::new("prefix", e))?);
                FibRequest::List(a.limit, q)
            }
            Some(w) => match w.parse::<IpAddr>() {
                Ok(dst) if !filtered && a.limit.is_none() && !a.all => {
                    FibRequest::Get(a.packet.query(dst))
                }
                Ok(_) => {
                    return Err(FieldError::new(
                        "address",
                        "a lookup takes no filters, --limit or --all",
                    ))
                }
                Err(_) => {
                    return Err(FieldError::new(
                        "fib",
                        format!(
                            "`{w}` is not `summary`, `rules`, a prefix (10.0.0.0/8) or an address"
                        ),
                    ))
                }
            },
            None if a.all => FibRequest::List(None, q),
            None if a.limit.is_some() => FibRequest::List(a.limit, q),
            None if filtered => FibRequest::List(None, q),
            None => FibRequest::ListOrSummary(q),
        })
    }
}
