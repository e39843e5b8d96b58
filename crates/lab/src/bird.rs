//! BIRD 2 routing daemons in the testbed's namespaces: a harness ([`Bird`]) and the two
//! configurations of the full-table path — an *originator* that announces the fixture over
//! eBGP ([`originator_config`]) and a *router* speaker that exports what it learns to the
//! kernel's main table ([`router_config`]), which llrouter mirrors. This is the path an
//! operator uses (a routing daemon in the router's namespace), with withdrawals and
//! re-announcements on demand ([`Bird::disable`] / [`Bird::enable`] of a static protocol).
//!
//! Each [`Bird`] is `bird -f` run as a child process inside a namespace, with its own control
//! socket and config in a private temporary directory. It is stopped and reaped on drop (also
//! when a test fails), receives SIGTERM if the thread that started it dies
//! (`llr_io::sys::term_with_parent`), and shares the caller's process group, so Ctrl-C ends it
//! too. State is read through `birdc -v` (numbered reply codes), never from logs; BIRD's own
//! log goes to a file in the directory and is quoted only in error messages.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use llr_traffic::netns::Netns;

use crate::{LabError, Result};

/// The `bird` and `birdc` programs (Debian package `bird2`).
pub const BIRD: &str = "bird";
pub const BIRDC: &str = "birdc";

/// Whether BIRD 2 is installed (`bird --version` runs).
pub fn available() -> bool {
    Command::new(BIRD)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One line of `show protocols`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    /// `BGP`, `Static`, `Kernel`, `Device`.
    pub proto: String,
    /// `up`, `down`, `start`.
    pub state: String,
    /// The rest of the line: for BGP the session state (`Established`, `Active`, …) and the
    /// last error.
    pub info: String,
}

impl Protocol {
    /// A BGP session that is up.
    pub fn established(&self) -> bool {
        self.state == "up" && self.info.split_whitespace().next() == Some("Established")
    }
}

/// A BIRD daemon in a namespace; stopped and reaped on drop.
#[derive(Debug)]
pub struct Bird {
    name: String,
    ns: String,
    dir: PathBuf,
    socket: PathBuf,
    child: Option<Child>,
}

impl Bird {
    /// Starts `bird -f` with `config` inside `ns` and waits (up to 10 s) until its control
    /// socket answers. `name` tags the temporary directory and error messages.
    pub fn start(ns: &Netns, name: &str, config: &str) -> Result<Bird> {
        let dir =
            std::env::temp_dir().join(llr_traffic::netns::unique_name(&format!("llr-bird-{name}")));
        std::fs::create_dir_all(&dir)
            .map_err(|e| LabError::io(format!("create {}", dir.display()), e))?;
        let mut bird = Bird {
            name: name.to_owned(),
            ns: ns.name().to_owned(),
            socket: dir.join("bird.ctl"),
            dir,
            child: None,
        };
        let conf = bird.dir.join("bird.conf");
        std::fs::write(&conf, config)
            .map_err(|e| LabError::io(format!("write {}", conf.display()), e))?;
        let log = std::fs::File::create(bird.log_path())
            .map_err(|e| LabError::io(format!("create {}", bird.log_path().display()), e))?;
        let mut cmd = ns.command(BIRD);
        cmd.arg("-c")
            .arg(&conf)
            .arg("-s")
            .arg(&bird.socket)
            .arg("-f")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        llr_io::sys::term_with_parent(&mut cmd);
        // `ip netns exec` enters the namespace and execs bird: the child is bird itself.
        bird.child = Some(
            cmd.spawn()
                .map_err(|e| LabError::step(format!("start {BIRD} ({name})"), e))?,
        );
        let t0 = Instant::now();
        loop {
            if let Some(st) = bird
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(LabError::Failed(format!(
                    "bird {name} in {} exited ({st}) at start: {}",
                    bird.ns,
                    bird.log_tail()
                )));
            }
            if bird.socket.exists() && bird.birdc(&["show", "status"]).is_ok() {
                return Ok(bird);
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(LabError::Failed(format!(
                    "bird {name} in {}: no answer on {} within 10 s: {}",
                    bird.ns,
                    bird.socket.display(),
                    bird.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The control socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The namespace it runs in.
    pub fn netns(&self) -> &str {
        &self.ns
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("bird.log")
    }

    /// The last lines of BIRD's log (for error messages).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join(" | ")
    }

    /// Runs `birdc -v -s SOCKET ARGS…` and returns its reply lines as `(code, text)`;
    /// continuation lines carry the code of the line before. A failure reply (BIRD's 8xxx /
    /// 9xxx codes, or birdc failing) is an error.
    pub fn birdc(&self, args: &[&str]) -> Result<Vec<(u16, String)>> {
        let out = Command::new(BIRDC)
            .arg("-v")
            .arg("-s")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| LabError::step(format!("run {BIRDC} ({})", self.name), e))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let reply = parse_reply(&text);
        let failed = reply.iter().find(|(c, _)| *c >= 8000);
        if !out.status.success() || failed.is_some() {
            return Err(LabError::Failed(format!(
                "birdc {} ({}): {} {}",
                args.join(" "),
                self.name,
                failed.map_or(String::new(), |(c, t)| format!("{c} {t}")),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(reply)
    }

    /// `show protocols`.
    pub fn protocols(&self) -> Result<Vec<Protocol>> {
        Ok(parse_protocols(&self.birdc(&["show", "protocols"])?))
    }

    /// Waits until every BGP protocol in `names` is `Established` (bounded by `timeout`).
    pub fn wait_established(&self, names: &[&str], timeout: Duration) -> Result<()> {
        let t0 = Instant::now();
        loop {
            let ps = self.protocols()?;
            let missing: Vec<String> = names
                .iter()
                .filter(|n| !ps.iter().any(|p| p.name == **n && p.established()))
                .map(|n| {
                    let p = ps.iter().find(|p| p.name == *n);
                    format!("{n}: {}", p.map_or("no such protocol", |p| p.info.as_str()))
                })
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            if t0.elapsed() > timeout {
                return Err(LabError::Failed(format!(
                    "bird {}: BGP not established within {timeout:?}: {}; log: {}",
                    self.name,
                    missing.join(", "),
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `disable NAME`: a static protocol withdraws its routes, a BGP session closes.
    pub fn disable(&self, proto: &str) -> Result<()> {
        self.birdc(&["disable", proto]).map(drop)
    }

    /// `enable NAME`: re-announces what [`Bird::disable`] withdrew.
    pub fn enable(&self, proto: &str) -> Result<()> {
        self.birdc(&["enable", proto]).map(drop)
    }

    /// Stops the daemon (SIGTERM, then SIGKILL after 5 s), reaps it and removes its
    /// directory. Idempotent; `Drop` calls it.
    pub fn stop(&mut self) -> Result<()> {
        let mut res = Ok(());
        if let Some(mut child) = self.child.take() {
            if child.try_wait().ok().flatten().is_none() {
                // Not reaped yet, so the pid is still ours.
                let _ = llr_io::sys::signal_process(child.id(), libc::SIGTERM);
                let t0 = Instant::now();
                while child.try_wait().ok().flatten().is_none() {
                    if t0.elapsed() > Duration::from_secs(5) {
                        let _ = child.kill();
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            if let Err(e) = child.wait() {
                res = Err(LabError::step(format!("reap bird {}", self.name), e));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        res
    }
}

impl Drop for Bird {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!("cleanup: {e}");
        }
    }
}

/// `birdc -v` output → `(code, text)` lines.
fn parse_reply(text: &str) -> Vec<(u16, String)> {
    let mut code = 0u16;
    let mut out = Vec::new();
    for line in text.lines() {
        let head = line.get(..4).and_then(|h| h.parse::<u16>().ok());
        match (head, line.as_bytes().get(4)) {
            (Some(c), Some(b'-' | b' ')) | (Some(c), None) => {
                code = c;
                out.push((c, line.get(5..).unwrap_or("").to_owned()));
            }
            _ => out.push((code, line.trim_start().to_owned())),
        }
    }
    out
}

/// The `1002` lines of `show protocols`: `name proto table state since info…` (`since` is
/// one word, BIRD's default short time format).
fn parse_protocols(reply: &[(u16, String)]) -> Vec<Protocol> {
    reply
        .iter()
        .filter(|(c, _)| *c == 1002)
        .filter_map(|(_, t)| {
            let w: Vec<&str> = t.split_whitespace().collect();
            (w.len() >= 4).then(|| Protocol {
                name: w[0].to_owned(),
                proto: w[1].to_owned(),
                state: w[3].to_owned(),
                info: w.get(5..).map_or(String::new(), |r| r.join(" ")),
            })
        })
        .collect()
}

/// One eBGP session: this speaker's address and AS, the neighbour's. The family of
/// `neighbor` decides the channel (`ipv4` or `ipv6`): one session per family, each over its
/// own transport, as most operators run them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub name: String,
    pub local: IpAddr,
    pub local_as: u32,
    pub neighbor: IpAddr,
    pub neighbor_as: u32,
}

fn header(out: &mut String, router_id: Ipv4Addr) {
    let _ = writeln!(
        out,
        "# Generated by llrouter's testbed.\nrouter id {router_id};\nlog stderr all;\n\
         protocol device {{ }}"
    );
}

fn bgp(out: &mut String, s: &Session, channel_body: &str) {
    let fam = if s.neighbor.is_ipv6() { "ipv6" } else { "ipv4" };
    // Both sides connect at once and retry every second (BIRD's defaults wait 5 s before the
    // first attempt and 120 s after a refused one): the session comes up as soon as both run.
    let _ = writeln!(
        out,
        "protocol bgp {name} {{\n  local {local} as {las};\n  neighbor {nb} as {nas};\n  \
         connect delay time 1;\n  connect retry time 1;\n  error wait time 1, 10;\n  \
         {fam} {{ {channel_body} }};\n}}",
        name = s.name,
        local = s.local,
        las = s.local_as,
        nb = s.neighbor,
        nas = s.neighbor_as,
    );
}

/// The originator: announces every static route it has (`include "STATICS"`, e.g. the file
/// of [`crate::fulltable::write_bird_static`]) over its sessions, learning nothing. eBGP
/// keeps a route's own gateway as the BGP next hop when it lies on the link to the
/// neighbour (a third-party next hop, as at an exchange's route server), so the fixture's
/// gateways reach the router's kernel unchanged.
pub fn originator_config(router_id: Ipv4Addr, sessions: &[Session], statics: &Path) -> String {
    let mut out = String::new();
    header(&mut out, router_id);
    let _ = writeln!(out, "include \"{}\";", statics.display());
    for s in sessions {
        bgp(
            &mut out,
            s,
            "import none; export where source = RTS_STATIC;",
        );
    }
    out
}

/// The router's speaker: learns from its sessions, exports nothing back, and installs the
/// best routes into the kernel's main table (`protocol kernel`, no learning of foreign
/// kernel routes, routes removed when BIRD stops), where llrouter's mirror finds them. IPv6
/// routes get the global next hop the neighbour sends (not its link-local one), as the
/// kernel and llrouter then name the same gateway as the fixture.
pub fn router_config(router_id: Ipv4Addr, sessions: &[Session]) -> String {
    let mut out = String::new();
    header(&mut out, router_id);
    for fam in ["ipv4", "ipv6"] {
        let _ = writeln!(
            out,
            "protocol kernel kernel_{fam} {{\n  {fam} {{ import none; export all; }};\n  \
             learn off;\n  persist off;\n}}"
        );
    }
    for s in sessions {
        let extra = if s.neighbor.is_ipv6() {
            " next hop prefer global;"
        } else {
            ""
        };
        bgp(&mut out, s, &format!("import all; export none;{extra}"));
    }
    out
}

/// The standard testbed's sessions between the sink (originator, AS 65002) and the router
/// (AS 65001) over the router–sink link: `(router side, sink side)`, IPv4 and IPv6 each.
pub fn testbed_sessions() -> (Vec<Session>, Vec<Session>) {
    use llr_traffic::netns::addr::{RTR_OUT_V4, RTR_OUT_V6, SINK_V4, SINK_V6};
    let ip = |s: &str| s.parse::<IpAddr>().expect("a literal");
    let pair = |name: &str, rtr: &str, sink: &str| {
        (
            Session {
                name: format!("from_sink_{name}"),
                local: ip(rtr),
                local_as: 65001,
                neighbor: ip(sink),
                neighbor_as: 65002,
            },
            Session {
                name: format!("to_router_{name}"),
                local: ip(sink),
                local_as: 65002,
                neighbor: ip(rtr),
                neighbor_as: 65001,
            },
        )
    };
    let (r4, s4) = pair("v4", RTR_OUT_V4, SINK_V4);
    let (r6, s6) = pair("v6", RTR_OUT_V6, SINK_V6);
    (vec![r4, r6], vec![s4, s6])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_codes_and_protocols() {
        let text = "0001 BIRD 2.0.12 ready.\n\
            2002-Name       Proto      Table      State  Since         Info\n\
            1002-device1    Device     ---        up     00:56:19.881  \n     \
            up4        BGP        ---        up     00:52:15.100  Established   \n     \
            up6        BGP        ---        start  00:52:15.005  Active        Socket: Connection refused\n\
            0000 \n";
        let r = parse_reply(text);
        assert_eq!(r[0], (1, "BIRD 2.0.12 ready.".into()));
        assert_eq!(r[3].0, 1002, "continuation keeps the code");
        let ps = parse_protocols(&r);
        assert_eq!(ps.len(), 3);
        assert_eq!(ps[1].name, "up4");
        assert!(ps[1].established());
        assert!(!ps[0].established());
        assert_eq!(ps[2].state, "start");
        assert_eq!(ps[2].info, "Active Socket: Connection refused");
        assert!(!ps[2].established());
        let err = parse_reply("0001 BIRD ready.\n9001 syntax error\n");
        assert_eq!(err[1].0, 9001);
    }

    #[test]
    fn configs_name_sessions_channels_and_kernel_export() {
        let (rtr, sink) = testbed_sessions();
        let r = router_config("10.71.2.254".parse().unwrap(), &rtr);
        assert!(r.contains("protocol kernel kernel_ipv4"), "{r}");
        assert!(
            r.contains("learn off;") && r.contains("persist off;"),
            "{r}"
        );
        assert!(r.contains("neighbor 10.71.2.1 as 65002;"), "{r}");
        assert!(
            r.contains("ipv6 { import all; export none; next hop prefer global; }"),
            "{r}"
        );
        let o = originator_config(
            "10.71.2.1".parse().unwrap(),
            &sink,
            Path::new("/tmp/x/bird-static.conf"),
        );
        assert!(o.contains("include \"/tmp/x/bird-static.conf\";"), "{o}");
        assert!(o.contains("neighbor fd71:2::fe as 65001;"), "{o}");
        assert!(o.contains("export where source = RTS_STATIC;"), "{o}");
        assert!(
            !o.contains("protocol kernel"),
            "the originator installs nothing"
        );
    }
}
