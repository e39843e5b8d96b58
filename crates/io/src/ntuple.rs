//! Hardware steering: classifier rules as `ethtool -N … action QUEUE` ntuple (Flow Director)
//! filters, one hardware queue per class — the papers' exact design.
//!
//! Queue layout: class `c` → hardware queue `first_queue + c`; the RSS indirection table is
//! pointed at the default (lowest) class's queue (`ethtool -X IF equal 1 start Q`), so unmatched
//! traffic lands there; one AF_XDP socket is bound per queue.
//!
//! What ntuple filters can express, per rule (anything else is rejected with the field named):
//! - `src` / `dst` prefixes (`src-ip A m WILDCARD`; ethtool masks are *don't-care* bits),
//! - `proto`: TCP, UDP, SCTP as flow types (`tcp4`, `udp6`, …), others as `ip4/ip6 l4proto N`,
//! - `sport` / `dport` ranges, split into aligned power-of-two blocks (at most
//!   [`MAX_PORT_BLOCKS`] filters per rule); they need `proto` = tcp, udp or sctp,
//! - `dscp` (`tos` / `tclass` with the ECN bits ignored), `vlan_id` / `vlan_pcp` (`vlan TCI m`),
//! - `ifindex`: a rule naming another interface is simply not installed on this one;
//! - **not** `flex` (NICs' `user-def` field is driver-specific, and offsets count from the L4
//!   payload, not the frame).
//!
//! A rule without an IP version (no `ip_version`, no prefix) becomes one filter per family.
//! Filters get `loc` numbers in rule order; most NICs give lower locations precedence, but the
//! first-match order of overlapping rules is ultimately the driver's.

use std::net::IpAddr;
use std::process::Command;

use llr_core::error::FieldError;

/// Why ntuple steering cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum NtupleError {
    /// A rule (or the classes) that ntuple filters cannot express, named by its field.
    #[error(transparent)]
    Rule(#[from] FieldError),
    /// The NIC lacks the filters or the queues.
    #[error("{ifname}: {reason}")]
    Unsupported { ifname: String, reason: String },
    /// `ethtool` could not be run.
    #[error("run {command} (install ethtool): {cause}")]
    Spawn {
        command: String,
        cause: std::io::Error,
    },
    /// `ethtool` refused the command.
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
}

type Result<T, E = NtupleError> = std::result::Result<T, E>;
use llr_core::classify::{PortRange, Rule};
use llr_core::wire::IpVersion;

/// Most filters one port range may expand into.
pub const MAX_PORT_BLOCKS: usize = 8;

/// The plan for one interface: the commands to run and which queue serves which class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub ifname: String,
    /// Hardware queue of each class (index = class id).
    pub class_queue: Vec<u32>,
    /// `ethtool` argument vectors, in order (without the program name).
    pub commands: Vec<Vec<String>>,
}

impl Plan {
    /// The commands that take the plan back out: every filter deleted (by `loc`), RSS spread
    /// over all queues again (`-X IF default`), in that order.
    pub fn undo(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = (self.commands.iter())
            .filter(|c| c.first().is_some_and(|a| a == "-N"))
            .filter_map(|c| {
                let at = c.iter().position(|a| a == "loc")?;
                let loc = c.get(at + 1)?;
                Some(vec![
                    "-N".into(),
                    self.ifname.clone(),
                    "delete".into(),
                    loc.clone(),
                ])
            })
            .collect();
        out.push(vec!["-X".into(), self.ifname.clone(), "default".into()]);
        out
    }

    /// The commands as shell lines.
    pub fn lines(&self) -> Vec<String> {
        self.commands
            .iter()
            .map(|c| format!("ethtool {}", c.join(" ")))
            .collect()
    }
}

/// Splits `lo..=hi` into aligned (value, don't-care mask) blocks.
pub fn port_blocks(r: PortRange) -> Vec<(u16, u16)> {
    let (mut lo, hi) = (u32::from(r.lo()), u32::from(r.hi()));
    let mut out = Vec::new();
    while lo <= hi {
        // the largest aligned block starting at lo that fits in the range
        let mut size = if lo == 0 {
            1 << 16
        } else {
            lo & lo.wrapping_neg()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u16, (size - 1) as u16));
        lo += size;
    }
    out
}

fn wildcard_v4(len: u8) -> String {
    let m = if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    };
    std::net::Ipv4Addr::from(!m).to_string()
}

fn wildcard_v6(len: u8) -> String {
    let m = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    std::net::Ipv6Addr::from(!m).to_string()
}

/// Computes the filters of `rules` for interface `ifname` (`ifindex`), class `c` → queue
/// `first_queue + c`; `nclasses` classes, the last one the default. Errors name the rule (by
/// position) and the field that ntuple cannot express.
pub fn plan(
    ifname: &str,
    ifindex: u32,
    rules: &[Rule],
    nclasses: usize,
    first_queue: u32,
) -> Result<Plan> {
    if nclasses == 0 {
        return Err(FieldError::new("classes", "at least one class is required").into());
    }
    let class_queue: Vec<u32> = (0..nclasses as u32).map(|c| first_queue + c).collect();
    let default_q = class_queue[nclasses - 1];
    let mut commands = vec![
        vec!["-K".into(), ifname.into(), "ntuple".into(), "on".into()],
        // unmatched traffic: RSS spreads it over one queue only, the default class's
        vec![
            "-X".into(),
            ifname.into(),
            "equal".into(),
            "1".into(),
            "start".into(),
            default_q.to_string(),
        ],
    ];
    let mut loc = 0u32;
    for (i, r) in rules.iter().enumerate() {
        let what = |field: &str, why: &str| {
            NtupleError::Rule(FieldError::new(
                format!("rules[{i}].{field}"),
                format!("{why} (steering = \"ntuple\")"),
            ))
        };
        if r.ifindex.is_some_and(|x| x != ifindex) {
            continue;
        }
        if r.flex.is_some() {
            return Err(what(
                "flex",
                "ntuple filters cannot match a 2-byte word at a frame offset; use steering = \"xdp\""
            ));
        }
        if r.class >= nclasses {
            return Err(what("class", &format!("class {} does not exist", r.class)));
        }
        let version = r
            .required_version()
            .map_err(|e| what("ip_version", &e.to_string()))?;
        let has_ports = r.sport.is_some() || r.dport.is_some();
        let l4 = match r.proto {
            Some(6) => Some("tcp"),
            Some(17) => Some("udp"),
            Some(132) => Some("sctp"),
            _ => None,
        };
        if has_ports && l4.is_none() {
            return Err(what(
                if r.sport.is_some() { "sport" } else { "dport" },
                "ports need proto = tcp, udp or sctp",
            ));
        }
        let families: Vec<IpVersion> = match version {
            Some(v) => vec![v],
            None => vec![IpVersion::V4, IpVersion::V6],
        };
        let sblocks = r
            .sport
            .map(port_blocks)
            .unwrap_or_else(|| vec![(0, 0xffff)]);
        let dblocks = r
            .dport
            .map(port_blocks)
            .unwrap_or_else(|| vec![(0, 0xffff)]);
        if sblocks.len() * dblocks.len() > MAX_PORT_BLOCKS {
            return Err(what(
                "sport/dport",
                &format!(
                    "the port ranges need {} aligned filters (more than {MAX_PORT_BLOCKS}); use ranges on power-of-two boundaries",
                    sblocks.len() * dblocks.len()
                )
            ));
        }
        for fam in families {
            let v4 = fam == IpVersion::V4;
            for &(sp, sm) in &sblocks {
                for &(dp, dm) in &dblocks {
                    let mut c: Vec<String> = vec!["-N".into(), ifname.into(), "flow-type".into()];
                    c.push(format!("{}{}", l4.unwrap_or("ip"), if v4 { 4 } else { 6 }));
                    for (key, p) in [("src-ip", r.src), ("dst-ip", r.dst)] {
                        if let Some(p) = p {
                            c.push(key.into());
                            c.push(p.addr().to_string());
                            if matches!(p.addr(), IpAddr::V4(_)) {
                                if p.len() < 32 {
                                    c.extend(["m".into(), wildcard_v4(p.len())]);
                                }
                            } else if p.len() < 128 {
                                c.extend(["m".into(), wildcard_v6(p.len())]);
                            }
                        }
                    }
                    if l4.is_none() {
                        if let Some(p) = r.proto {
                            c.extend(["l4proto".into(), p.to_string()]);
                        }
                    }
                    if r.sport.is_some() {
                        c.extend(["src-port".into(), sp.to_string()]);
                        if sm != 0 {
                            c.extend(["m".into(), format!("{sm:#x}")]);
                        }
                    }
                    if r.dport.is_some() {
                        c.extend(["dst-port".into(), dp.to_string()]);
                        if dm != 0 {
                            c.extend(["m".into(), format!("{dm:#x}")]);
                        }
                    }
                    if let Some(d) = r.dscp {
                        c.extend([
                            if v4 { "tos" } else { "tclass" }.into(),
                            format!("{:#x}", d << 2),
                            "m".into(),
                            "0x3".into(),
                        ]);
                    }
                    if r.vlan_id.is_some() || r.vlan_pcp.is_some() {
                        // TCI = PCP(3) DEI(1) VID(12); mask = the bits not compared
                        let tci =
                            (u16::from(r.vlan_pcp.unwrap_or(0)) << 13) | r.vlan_id.unwrap_or(0);
                        let care: u16 = if r.vlan_id.is_some() { 0x0fff } else { 0 }
                            | if r.vlan_pcp.is_some() { 0xe000 } else { 0 };
                        c.extend([
                            "vlan".into(),
                            format!("{tci:#x}"),
                            "m".into(),
                            format!("{:#x}", !care),
                        ]);
                    }
                    c.extend([
                        "action".into(),
                        class_queue[r.class].to_string(),
                        "loc".into(),
                        loc.to_string(),
                    ]);
                    loc += 1;
                    commands.push(c);
                }
            }
        }
    }
    Ok(Plan {
        ifname: ifname.into(),
        class_queue,
        commands,
    })
}

/// Checks that `ifname` has ntuple filters and at least `queues` rx queues; the error says why
/// not (veth: no ntuple support).
pub fn check_support(ifname: &str, queues: u32) -> Result<()> {
    let out = Command::new("ethtool")
        .args(["-k", ifname])
        .output()
        .map_err(|cause| NtupleError::Spawn {
            command: "ethtool -k".into(),
            cause,
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("ntuple-filters:"))
        .unwrap_or("");
    if !out.status.success() || line.is_empty() || line.contains("[fixed]") && line.contains("off")
    {
        return Err(NtupleError::Unsupported {
            ifname: ifname.into(),
            reason: format!(
                "the NIC has no ntuple (Flow Director) filters (`ethtool -k {ifname}`: {}); use steering = \"xdp\" (the eBPF classifier) instead",
                if line.is_empty() { "no ntuple-filters feature" } else { line.trim() }
            ),
        });
    }
    let ch = Command::new("ethtool")
        .args(["-l", ifname])
        .output()
        .map_err(|cause| NtupleError::Spawn {
            command: "ethtool -l".into(),
            cause,
        })?;
    let t = String::from_utf8_lossy(&ch.stdout);
    // "Current hardware settings:" block: Combined or RX count
    let current = t.split("Current hardware settings:").nth(1).unwrap_or("");
    let n: u32 = current
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "Combined" | "RX").then(|| v.trim().parse::<u32>().ok())?
        })
        .max()
        .unwrap_or(1);
    if n < queues {
        return Err(NtupleError::Unsupported {
            ifname: ifname.into(),
            reason: format!(
                "{n} rx queues, the classes need {queues} (ethtool -L {ifname} combined {queues})"
            ),
        });
    }
    Ok(())
}

/// Runs the plan's commands; stops at the first failure, naming the command.
pub fn apply(plan: &Plan) -> Result<()> {
    for c in &plan.commands {
        run(c)?;
    }
    Ok(())
}

/// Runs `ethtool ARGS`; the error names the command and says what ethtool said.
pub fn run(args: &[String]) -> Result<()> {
    let line = format!("ethtool {}", args.join(" "));
    tracing::info!("{line}");
    let out = Command::new("ethtool")
        .args(args)
        .output()
        .map_err(|cause| NtupleError::Spawn {
            command: line.clone(),
            cause,
        })?;
    if !out.status.success() {
        return Err(NtupleError::Failed {
            command: line,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use llr_core::classify::RuleSpec;

    fn rule(s: &str) -> Rule {
        let names = ["rt".to_string(), "mid".to_string(), "be".to_string()];
        s.parse::<RuleSpec>()
            .unwrap()
            .resolve(&names, |n| (n == "eth0").then_some(2))
            .unwrap()
    }

    fn lines(rules: &[&str]) -> Result<Vec<String>> {
        let rs: Vec<Rule> = rules.iter().map(|r| rule(r)).collect();
        Ok(plan("eth0", 2, &rs, 3, 0)?.lines())
    }

    #[test]
    fn port_blocks_cover_ranges_exactly() {
        assert_eq!(port_blocks(PortRange::single(53)), vec![(53, 0)]);
        assert_eq!(
            port_blocks(PortRange::new(0, 65535).unwrap()),
            vec![(0, 0xffff)]
        );
        assert_eq!(
            port_blocks(PortRange::new(5000, 5010).unwrap()),
            vec![(5000, 7), (5008, 1), (5010, 0)]
        );
        for (lo, hi) in [(1u16, 1000u16), (4095, 4097), (65534, 65535), (7, 8)] {
            let b = port_blocks(PortRange::new(lo, hi).unwrap());
            let covered: Vec<u32> = b
                .iter()
                .flat_map(|&(v, m)| u32::from(v)..=u32::from(v) + u32::from(m))
                .collect();
            assert_eq!(covered, (u32::from(lo)..=u32::from(hi)).collect::<Vec<_>>());
            for (v, m) in b {
                assert_eq!(v & m, 0, "aligned block");
            }
        }
    }

    #[test]
    fn commands_for_each_field() {
        let l = lines(&[
            "class=rt dscp=46",
            "class=rt proto=udp dport=5000-5007 dst=10.1.0.0/16",
            "class=mid proto=tcp sport=22 src=2001:db8::/32",
            "class=mid vlan=100 pcp=5 ip_version=4",
            "class=rt proto=47 ip_version=6",
        ])
        .unwrap();
        assert_eq!(l[0], "ethtool -K eth0 ntuple on");
        assert_eq!(l[1], "ethtool -X eth0 equal 1 start 2");
        assert_eq!(
            l[2],
            "ethtool -N eth0 flow-type ip4 tos 0xb8 m 0x3 action 0 loc 0"
        );
        assert_eq!(
            l[3],
            "ethtool -N eth0 flow-type ip6 tclass 0xb8 m 0x3 action 0 loc 1"
        );
        assert_eq!(
            l[4],
            "ethtool -N eth0 flow-type udp4 dst-ip 10.1.0.0 m 0.0.255.255 dst-port 5000 m 0x7 action 0 loc 2"
        );
        assert_eq!(
            l[5],
            "ethtool -N eth0 flow-type tcp6 src-ip 2001:db8:: m ::ffff:ffff:ffff:ffff:ffff:ffff src-port 22 action 1 loc 3"
        );
        assert_eq!(
            l[6],
            "ethtool -N eth0 flow-type ip4 vlan 0xa064 m 0x1000 action 1 loc 4"
        );
        assert_eq!(
            l[7],
            "ethtool -N eth0 flow-type ip6 l4proto 47 action 0 loc 5"
        );
        assert_eq!(l.len(), 8);
    }

    #[test]
    fn inexpressible_rules_are_rejected_by_field() {
        let e = lines(&["class=rt flex=14:0x00b8/0x00fc"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("rules[0].flex:"), "{e}");
        let e = lines(&["class=rt dport=53"]).unwrap_err().to_string();
        assert!(e.contains("rules[0].dport: ports need proto"), "{e}");
        let e = lines(&[
            "class=be dscp=1",
            "class=rt proto=udp sport=1-1000 dport=1-1000",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("rules[1].sport/dport:"), "{e}");
    }

    #[test]
    fn rules_of_other_interfaces_are_skipped() {
        let l = lines(&["class=rt dscp=46 ifname=eth0"]).unwrap();
        assert_eq!(l.len(), 4);
        let mut r = rule("class=rt dscp=46");
        r.ifindex = Some(7);
        assert_eq!(plan("eth0", 2, &[r], 3, 4).unwrap().commands.len(), 2);
        assert_eq!(
            plan("eth0", 2, &[], 3, 4).unwrap().class_queue,
            vec![4, 5, 6]
        );
    }

    #[test]
    fn veth_has_no_ntuple() {
        // `lo` stands in for any interface without ntuple filters (veth, loopback).
        if std::process::Command::new("ethtool")
            .arg("--version")
            .output()
            .is_err()
        {
            return;
        }
        let e = check_support("lo", 2).unwrap_err().to_string();
        assert!(e.contains("no ntuple"), "{e}");
    }
}
