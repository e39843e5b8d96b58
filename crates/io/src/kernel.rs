//! Mirrors the router namespace's interfaces, routes and neighbours into a `Forwarder`.
//!
//! Implementation: a periodic dump through iproute2's JSON output (`ip -j addr/route/neigh`),
//! rebuilt and swapped in whole, with the static configuration applied on top as an override.
//! Simple and robust; the price is a refresh latency of one period (default 500 ms) instead of
//! netlink's event-driven updates. (TODO: subscribe to RTNLGRP_IPV4_ROUTE/IPV6_ROUTE/NEIGH.)

use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use llr_core::classify::IpPrefix;
use llr_core::fwd::{Forwarder, Interface, NextHop};
use serde_json::Value;

/// A static route or neighbour from the configuration (overrides the kernel's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticRoute {
    pub prefix: IpPrefix,
    pub ifindex: u32,
    pub gateway: Option<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticNeighbor {
    pub ifindex: u32,
    pub addr: IpAddr,
    pub mac: [u8; 6],
}

/// What to mirror.
#[derive(Debug, Clone, Default)]
pub struct MirrorSpec {
    /// The router's interfaces (only routes through them are mirrored).
    pub ifindexes: Vec<u32>,
    /// Mirror kernel routes and neighbours (interfaces are always read).
    pub kernel_routes: bool,
    pub routes: Vec<StaticRoute>,
    pub neighbors: Vec<StaticNeighbor>,
}

fn ip_json(args: &[&str]) -> Result<Value> {
    let out = Command::new("ip")
        .arg("-j")
        .args(args)
        .output()
        .context("run ip")?;
    if !out.status.success() {
        bail!(
            "ip -j {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if out.stdout.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Value::Array(vec![]));
    }
    serde_json::from_slice(&out.stdout).with_context(|| format!("parse ip -j {}", args.join(" ")))
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let v: Vec<u8> = s
        .split(':')
        .map(|h| u8::from_str_radix(h, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    v.try_into().ok()
}

/// Builds a forwarder from the kernel's tables (calling thread's namespace) and the overrides.
pub fn build(spec: &MirrorSpec) -> Result<Forwarder> {
    let mut f = Forwarder::new();
    let links = ip_json(&["addr", "show"])?;
    for l in links.as_array().into_iter().flatten() {
        let idx = l["ifindex"].as_u64().unwrap_or(0) as u32;
        if !spec.ifindexes.contains(&idx) {
            continue;
        }
        let mac = l["address"].as_str().and_then(parse_mac).unwrap_or([0; 6]);
        let mtu = l["mtu"].as_u64().unwrap_or(1500) as u32;
        f.interfaces.upsert(Interface::new(idx, mac, mtu));
        for a in l["addr_info"].as_array().into_iter().flatten() {
            if let (Some(ip), Some(len)) = (
                a["local"].as_str().and_then(|s| s.parse::<IpAddr>().ok()),
                a["prefixlen"].as_u64(),
            ) {
                f.interfaces.add_addr(idx, ip, len as u8);
            }
        }
    }
    if spec.kernel_routes {
        let name_to_idx = |dev: &str| -> Option<u32> {
            links.as_array()?.iter().find_map(|l| {
                (l["ifname"].as_str() == Some(dev))
                    .then(|| l["ifindex"].as_u64().unwrap_or(0) as u32)
            })
        };
        for fam in ["-4", "-6"] {
            let routes = ip_json(&[fam, "route", "show", "table", "main"])?;
            for r in routes.as_array().into_iter().flatten() {
                if r["type"].as_str().is_some_and(|t| t != "unicast") {
                    continue;
                }
                let Some(idx) = r["dev"].as_str().and_then(name_to_idx) else {
                    continue;
                };
                if !spec.ifindexes.contains(&idx) {
                    continue;
                }
                let dst = r["dst"].as_str().unwrap_or("");
                let prefix = match dst {
                    "default" => {
                        if fam == "-4" {
                            "0.0.0.0/0".to_string()
                        } else {
                            "::/0".to_string()
                        }
                    }
                    d if d.contains('/') => d.to_string(),
                    d => format!("{d}/{}", if fam == "-4" { 32 } else { 128 }),
                };
                let Some(p) = parse_prefix(&prefix) else {
                    continue;
                };
                let gw = r["gateway"].as_str().and_then(|g| g.parse().ok());
                let _ = f.routes.insert(
                    p,
                    NextHop {
                        ifindex: idx,
                        gateway: gw,
                    },
                );
            }
        }
        let neigh = ip_json(&["neigh", "show"])?;
        for n in neigh.as_array().into_iter().flatten() {
            let states: Vec<&str> = n["state"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str())
                .collect();
            if states.iter().any(|s| *s == "FAILED" || *s == "INCOMPLETE") {
                continue;
            }
            let (Some(idx), Some(ip), Some(mac)) = (
                n["dev"].as_str().and_then(name_to_idx),
                n["dst"].as_str().and_then(|s| s.parse::<IpAddr>().ok()),
                n["lladdr"].as_str().and_then(parse_mac),
            ) else {
                continue;
            };
            if spec.ifindexes.contains(&idx) {
                f.neighbors.insert(idx, ip, mac);
            }
        }
    }
    for r in &spec.routes {
        f.routes
            .insert(
                r.prefix,
                NextHop {
                    ifindex: r.ifindex,
                    gateway: r.gateway,
                },
            )
            .map_err(|e| anyhow::anyhow!("routes: {:?}: {e:?}", r.prefix))?;
    }
    for n in &spec.neighbors {
        f.neighbors.insert(n.ifindex, n.addr, n.mac);
    }
    Ok(f)
}

/// Parses `addr/len`.
pub fn parse_prefix(s: &str) -> Option<IpPrefix> {
    let (a, l) = s.split_once('/')?;
    IpPrefix::new(a.parse().ok()?, l.parse().ok()?).ok()
}

/// Rebuilds the forwarder every `period` until `stop` (run on a thread in the router's
/// namespace). Errors are logged and the previous tables kept.
pub fn refresh_loop(
    spec: MirrorSpec,
    fwd: Arc<RwLock<Forwarder>>,
    period: Duration,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        let mut slept = Duration::ZERO;
        while slept < period && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
            slept += Duration::from_millis(20);
        }
        match build(&spec) {
            Ok(f) => *fwd.write().unwrap_or_else(|e| e.into_inner()) = f,
            Err(e) => tracing::warn!("route mirror: {e:#}"),
        }
    }
}
