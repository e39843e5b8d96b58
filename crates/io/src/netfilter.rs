//! The host's netfilter configuration, read for the forwarding path: the nftables ruleset
//! through `nft -j list ruleset` (its documented JSON, libnftables-json(5); iptables-nft rules
//! are part of it), the legacy iptables tables through `iptables-legacy-save`, and a netlink
//! subscription to nftables changes.

use std::io;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};

/// Why the ruleset could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NetfilterError {
    /// `nft` is not installed.
    #[error("cannot run nft ({0}): install the nftables package")]
    NoNft(io::Error),
    /// `nft` ran and failed.
    #[error("nft -j list ruleset failed: {0}")]
    Nft(String),
    /// A legacy iptables tool failed.
    #[error("{tool} failed: {msg}")]
    Legacy {
        /// The tool.
        tool: &'static str,
        /// What it said.
        msg: String,
    },
    /// The netlink subscription failed.
    #[error("netlink (nftables events): {0}")]
    Netlink(io::Error),
}

/// The ruleset of the calling thread's network namespace as `nft -j list ruleset` prints it.
pub fn read_ruleset() -> Result<String, NetfilterError> {
    let out = Command::new("nft")
        .args(["-j", "list", "ruleset"])
        .output()
        .map_err(NetfilterError::NoNft)?;
    if !out.status.success() {
        let e = String::from_utf8_lossy(&out.stderr).trim().to_string();
        // A kernel without nf_tables (and without the module to load) cannot hold a ruleset.
        if e.contains("Protocol not supported") {
            tracing::info!("nft: the kernel has no nf_tables ({e}): no nftables ruleset");
            return Ok("{\"nftables\": []}".into());
        }
        return Err(NetfilterError::Nft(e));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // An empty ruleset prints nothing at all on some nft versions.
    if text.trim().is_empty() {
        return Ok("{\"nftables\": []}".into());
    }
    Ok(text)
}

/// The rules and non-ACCEPT policies of the legacy (x_tables) iptables and ip6tables of this
/// namespace, one `iptables-save` line each, prefixed with the table (`ip6 filter: -A FORWARD
/// …`). Empty when no legacy table exists. Legacy tables are listed in
/// `/proc/thread-self/net/ip{,6}_tables_names` (the calling thread's namespace) once anything created them; only then is the tool run.
pub fn legacy_rules() -> Result<Vec<String>, NetfilterError> {
    let mut out = Vec::new();
    for (names, tool, fam) in [
        (
            "/proc/thread-self/net/ip_tables_names",
            "iptables-legacy-save",
            "ip",
        ),
        (
            "/proc/thread-self/net/ip6_tables_names",
            "ip6tables-legacy-save",
            "ip6",
        ),
    ] {
        let tables = std::fs::read_to_string(names).unwrap_or_default();
        if tables.trim().is_empty() {
            continue;
        }
        let o = Command::new(tool)
            .output()
            .map_err(|e| NetfilterError::Legacy {
                tool,
                msg: format!(
                    "{e} (legacy tables {} exist)",
                    tables.trim().replace('\n', ", ")
                ),
            })?;
        if !o.status.success() {
            let msg = String::from_utf8_lossy(&o.stderr).trim().to_string();
            return Err(NetfilterError::Legacy { tool, msg });
        }
        out.extend(legacy_lines(&String::from_utf8_lossy(&o.stdout), fam));
    }
    Ok(out)
}

/// The lines of an `iptables-save` dump that change what a forwarded packet meets: rules of
/// the chains a forwarded packet crosses and their non-ACCEPT policies.
pub fn legacy_lines(save: &str, fam: &str) -> Vec<String> {
    let mut table = "";
    let mut out = Vec::new();
    let on_path = |chain: &str| matches!(chain, "PREROUTING" | "FORWARD" | "POSTROUTING");
    for line in save.lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t;
        } else if let Some(p) = line.strip_prefix(':') {
            let mut w = p.split_whitespace();
            let (chain, policy) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
            if on_path(chain) && policy != "ACCEPT" && policy != "-" {
                out.push(format!("{fam} {table}: policy {chain} {policy}"));
            }
        } else if line.starts_with("-A ") {
            // A rule of a user chain matters only if a path chain jumps to it, which is itself a
            // rule listed here.
            let chain = line.split_whitespace().nth(1).unwrap_or("");
            if on_path(chain) {
                out.push(format!("{fam} {table}: {line}"));
            }
        }
    }
    out
}

/// A subscription to the nftables change notifications of the calling thread's namespace
/// (`NFNLGRP_NFTABLES`): every committed change of a table, chain, rule, set or element, by
/// `nft`, iptables-nft, firewalld or anything else, sends one.
pub struct NftWatch {
    sock: Socket,
    buf: Vec<u8>,
}

/// `NFNLGRP_NFTABLES` (linux/netfilter/nfnetlink.h).
const NFNLGRP_NFTABLES: u32 = 7;

impl NftWatch {
    /// Subscribes.
    pub fn new() -> Result<NftWatch, NetfilterError> {
        let mut sock = Socket::new(NETLINK_NETFILTER).map_err(NetfilterError::Netlink)?;
        sock.bind(&SocketAddr::new(0, 0))
            .map_err(NetfilterError::Netlink)?;
        sock.add_membership(NFNLGRP_NFTABLES)
            .map_err(NetfilterError::Netlink)?;
        sock.set_non_blocking(true)
            .map_err(NetfilterError::Netlink)?;
        Ok(NftWatch {
            sock,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Waits up to `timeout` for notifications; true if any came (all waiting are consumed).
    /// An overrun (ENOBUFS) counts as a change: something changed that was not seen.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let mut fds = [crate::sys::poll_in(self.sock.as_raw_fd())];
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        if crate::sys::poll(&mut fds, ms) == 0 {
            return false;
        }
        let mut any = false;
        loop {
            match self.sock.recv(&mut &mut self.buf[..], 0) {
                Ok(_) => any = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return any,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => any = true,
                Err(_) => return true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::legacy_lines;

    #[test]
    fn legacy_lines_keep_the_forwarding_path() {
        let save = "*filter\n:INPUT DROP [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n\
                    -A INPUT -j ACCEPT\n-A FORWARD -d 10.0.0.1/32 -j DROP\nCOMMIT\n\
                    *nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n\
                    -A POSTROUTING -o wan -j MASQUERADE\nCOMMIT\n";
        assert_eq!(
            legacy_lines(save, "ip"),
            [
                "ip filter: policy FORWARD DROP",
                "ip filter: -A FORWARD -d 10.0.0.1/32 -j DROP",
                "ip nat: -A POSTROUTING -o wan -j MASQUERADE",
            ]
        );
        assert!(legacy_lines("*filter\n:FORWARD ACCEPT [0:0]\nCOMMIT\n", "ip").is_empty());
    }
}
