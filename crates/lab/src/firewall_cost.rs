//! `testbed firewall`: what the host's firewall costs the traffic llrouter forwards. One llrouter
//! target under one offered load, in every round once per ruleset, the rulesets interleaved
//! (the VM's speed moves within seconds, so each is set against "none" of its own round):
//!
//! - `none`: no ruleset;
//! - `stateless`: a forward chain of 10 rules and a 10 000-prefix blocklist that llrouter runs
//!   itself, none of them matching the traffic;
//! - `typical`: a typical router firewall (`ct state established,related accept; ct state
//!   invalid drop; iifname <lan> accept; icmp accept; policy drop`). The generator's flows are
//!   one-way, so none becomes an established connection: llrouter hands them to the kernel,
//!   which forwards them;
//! - `typical-est`: the same ruleset, each flow answered once by the sink before the point, so
//!   the kernel holds it established and llrouter carries it.
//!
//! The kernel's connection table is emptied before every point, so that no point inherits the
//! connections of the one before.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use llr_traffic::gen::bpf_live::SPORT_BASE;
use llr_traffic::netns::{addr, Topology};

use crate::measure::{measure, Row};
use crate::options::{check_repeat, Options, Target};
use crate::setup::prepare;
use crate::summary::spread;
use crate::target::Active;
use crate::{LabError, Progress, Result};
use llr_ops::metrics::MetricsSnapshot;

/// A ruleset in the router's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FirewallMode {
    /// No ruleset.
    None,
    /// 10 forward-chain rules and a 10 000-prefix blocklist, none matching the traffic.
    Stateless,
    /// A typical stateful router firewall; the flows never established: the kernel forwards.
    Typical,
    /// The same, every flow established before the point: llrouter carries them.
    TypicalEst,
}

impl FirewallMode {
    pub fn key(self) -> &'static str {
        match self {
            FirewallMode::None => "none",
            FirewallMode::Stateless => "stateless",
            FirewallMode::Typical => "typical",
            FirewallMode::TypicalEst => "typical-est",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FirewallMode::None => "none",
            FirewallMode::Stateless => "stateless, in llrouter",
            FirewallMode::Typical => "typical, not established: the kernel",
            FirewallMode::TypicalEst => "typical, established: llrouter",
        }
    }
}

/// The nftables table the study owns in the router's namespace (only this table is touched).
const TABLE: &str = "llrfwcost";

/// Prefixes in the stateless blocklist.
pub const BLOCKLIST: usize = 10_000;

/// The ruleset of `mode` for `nft -f`: replaces the study's table (empty for `None`).
pub fn ruleset(mode: FirewallMode) -> String {
    // `add` then `delete` removes the table whether or not it exists.
    let mut s = format!("add table inet {TABLE}\ndelete table inet {TABLE}\n");
    match mode {
        FirewallMode::None => {}
        FirewallMode::Stateless => {
            // Both families' lists, so that either family's traffic is looked up in one.
            let v4: Vec<String> = (0..BLOCKLIST)
                .map(|i| format!("10.{}.{}.0/24", 100 + i / 250, i % 250))
                .collect();
            let v6: Vec<String> = (0..BLOCKLIST)
                .map(|i| format!("2001:db8:{:x}::/48", i))
                .collect();
            let _ = write!(
                s,
                "table inet {TABLE} {{\n\
                 \x20 set block4 {{ type ipv4_addr; flags interval; elements = {{ {} }} }}\n\
                 \x20 set block6 {{ type ipv6_addr; flags interval; elements = {{ {} }} }}\n\
                 \x20 chain fw {{\n\
                 \x20   type filter hook forward priority 0; policy accept;\n\
                 \x20   ip daddr @block4 drop\n\
                 \x20   ip6 daddr @block6 drop\n\
                 \x20   ip saddr 192.0.2.0/24 drop\n\
                 \x20   ip saddr 198.51.100.0/24 drop\n\
                 \x20   tcp dport {{ 23, 135, 139, 445 }} drop\n\
                 \x20   udp dport {{ 137, 138, 161, 1900 }} drop\n\
                 \x20   tcp dport 25 oifname \"{out}\" reject\n\
                 \x20   meta l4proto sctp drop\n\
                 \x20   icmp type redirect drop\n\
                 \x20   udp dport 6000-6063 drop\n\
                 \x20 }}\n}}\n",
                v4.join(", "),
                v6.join(", "),
                out = addr::RTR_OUT_IF,
            );
        }
        FirewallMode::Typical | FirewallMode::TypicalEst => {
            let _ = write!(
                s,
                "table inet {TABLE} {{\n\
                 \x20 chain fw {{\n\
                 \x20   type filter hook forward priority 0; policy drop;\n\
                 \x20   ct state established,related accept\n\
                 \x20   ct state invalid drop\n\
                 \x20   iifname \"{lan}\" accept\n\
                 \x20   meta l4proto {{ icmp, ipv6-icmp }} accept\n\
                 \x20 }}\n}}\n",
                lan = addr::RTR_IN_IF,
            );
        }
    }
    s
}

/// The study.
#[derive(Debug, Clone)]
pub struct FirewallStudy {
    /// One llrouter target.
    pub options: Options,
    /// Offered load, packets/s.
    pub load: f64,
    pub rt_share: f64,
    pub rounds: u32,
    pub modes: Vec<FirewallMode>,
}

/// One mode in one round.
#[derive(Debug, Clone)]
pub struct FirewallRow {
    pub mode: FirewallMode,
    pub round: u32,
    pub row: Row,
    /// Frames llrouter's classifier handed to the kernel during the point (every reason):
    /// under `typical` the unestablished flows, elsewhere next to none.
    pub to_kernel: u64,
}

impl FirewallRow {
    /// [`FirewallRow::to_kernel`] per frame sent, %.
    pub fn to_kernel_pct(&self) -> f64 {
        let sent = self.row.sent_rt + self.row.sent_be;
        match sent {
            0 => f64::NAN,
            n => self.to_kernel as f64 / n as f64 * 100.0,
        }
    }
}

/// What the study measured.
#[derive(Debug, Clone, Default)]
pub struct FirewallOutcome {
    pub rows: Vec<FirewallRow>,
    pub md: String,
    pub interrupted: bool,
}

impl FirewallOutcome {
    /// `f` of `mode` in each round, in round order.
    pub fn col(&self, mode: FirewallMode, f: impl Fn(&Row) -> f64) -> Vec<f64> {
        (self.rows.iter().filter(|r| r.mode == mode))
            .map(|r| f(&r.row))
            .collect()
    }

    /// Per round, [`FirewallRow::to_kernel_pct`] of `mode`.
    pub fn to_kernel_pct(&self, mode: FirewallMode) -> Vec<f64> {
        (self.rows.iter().filter(|r| r.mode == mode))
            .map(FirewallRow::to_kernel_pct)
            .collect()
    }

    /// Per round, `f` of `mode` over `f` of `none` in the same round.
    pub fn vs_none(&self, mode: FirewallMode, f: impl Fn(&Row) -> f64) -> Vec<f64> {
        (self.rows.iter().filter(|r| r.mode == mode))
            .map(|r| {
                self.rows
                    .iter()
                    .find(|a| a.mode == FirewallMode::None && a.round == r.round)
                    .map(|a| f(&a.row))
                    .filter(|&d| d > 0.0)
                    .map_or(f64::NAN, |d| f(&r.row) / d)
            })
            .collect()
    }
}

impl FirewallStudy {
    /// The settings, checked before anything changes on the host.
    pub fn check(&self) -> Result<()> {
        let c = &self.options;
        if !matches!(c.targets.as_slice(), [Target::Llrouter(_)]) {
            return Err(LabError::invalid(
                "targets",
                "one llrouter:<strategy> target: the study compares rulesets under one router",
            ));
        }
        if c.be_dst.is_some() {
            return Err(LabError::invalid(
                "be-dst",
                "the traffic goes to the sink: a ruleset that drops it is `testbed flood`'s",
            ));
        }
        if !(self.load > 0.0 && self.load.is_finite()) {
            return Err(LabError::invalid("load", "a rate > 0 packets/s"));
        }
        if !(self.rt_share > 0.0 && self.rt_share < 1.0) {
            return Err(LabError::invalid(
                "rt-share",
                "between 0 and 1, both excluded",
            ));
        }
        if self.modes.is_empty() {
            return Err(LabError::invalid("modes", "at least one"));
        }
        if self.modes.len() > 1 && !self.modes.contains(&FirewallMode::None) {
            return Err(LabError::invalid(
                "modes",
                "every mode is set against `none` of its round: include it",
            ));
        }
        check_repeat(self.rounds, 100)?;
        crate::traffic::gen_config(c, self.load, self.rt_share)?;
        Ok(())
    }

    /// Runs every mode in every round, each point with a router started after its ruleset;
    /// writes `report.md`, `firewall.csv` and the rulesets. The study's table is removed from
    /// the router's namespace at the end, also on error.
    pub fn run(&self, stop: &AtomicBool, progress: &dyn Progress) -> Result<FirewallOutcome> {
        self.check()?;
        let c = &self.options;
        let (topo, _shield) = prepare(c)?;
        let table = crate::nft::StudyTable::new(&topo, TABLE)?;
        let target = c.targets[0];
        progress.start(u64::from(self.rounds) * self.modes.len() as u64);
        let mut o = FirewallOutcome::default();
        'rounds: for round in 1..=self.rounds {
            for &mode in &self.modes {
                if stop.load(Ordering::Relaxed) {
                    break 'rounds;
                }
                progress.message(&format!("{} (round {round})", mode.key()));
                table.apply(
                    &c.out.join(format!("ruleset-{}.nft", mode.key())),
                    &ruleset(mode),
                )?;
                forget_connections(&topo)?;
                if mode == FirewallMode::TypicalEst {
                    establish(&topo, c)?;
                }
                let act = Active::start(&topo, &target, c)?;
                let p = measure(&topo, &act, c, self.load, self.rt_share, stop)?;
                drop(act);
                let mut row = p.row(&target, self.rt_share);
                row.round = round;
                let to_kernel = (p.extra.counters.as_ref()).map_or(0, |(a, b)| {
                    let sum =
                        |m: &MetricsSnapshot| m.kernel_pass.iter().map(|(_, n)| n).sum::<u64>();
                    sum(b).saturating_sub(sum(a))
                });
                o.rows.push(FirewallRow {
                    mode,
                    round,
                    row,
                    to_kernel,
                });
                progress.inc(1);
            }
        }
        drop(table);
        progress.finish();
        o.interrupted = stop.load(Ordering::Relaxed);
        o.md = self.report(&o);
        let lines: Vec<CsvRow> = (o.rows.iter())
            .map(|r| CsvRow {
                mode: r.mode.key(),
                round: r.round,
                sent_pps: r.row.sent_pps,
                forwarded_pps: r.row.throughput_pps,
                loss_rt: r.row.loss_rt,
                rt_p99_us: r.row.rt_p99_us,
                to_kernel: r.to_kernel,
                to_kernel_pct: r.to_kernel_pct(),
                router_cpu_s: r.row.router_cpu_s,
            })
            .collect();
        crate::report::write_csv(&c.out.join("firewall.csv"), &lines, "mode")?;
        let path = c.out.join("report.md");
        std::fs::write(&path, &o.md)
            .map_err(|e| LabError::io(format!("write {}", path.display()), e))?;
        Ok(o)
    }

    /// The per-mode table: median [min–max] over rounds.
    pub fn report(&self, o: &FirewallOutcome) -> String {
        let mut s = format!(
            "## The host's firewall against none\n\n\
             {} pps offered, {:.0} % of it RT, {} flows; {} rounds of {} s per ruleset, the \
             rulesets interleaved, the connection table emptied before each point \
             (`ruleset-<mode>.nft`, rows in `firewall.csv`). Median [min–max] over rounds.\n\n\
             | firewall | sent pps | forwarded pps | ÷ none (same round) | RT loss % | RT p99 µs | ÷ none | to the kernel, % of sent |\n\
             |---|---|---|---|---|---|---|---|\n",
            self.load,
            self.rt_share * 100.0,
            self.options.flows,
            self.rounds,
            self.options.point_secs,
        );
        let m = |v: Vec<f64>, d: usize| match spread(&v) {
            Some((m, lo, hi)) => format!("{m:.d$} [{lo:.d$}–{hi:.d$}]"),
            None => "–".into(),
        };
        for &mode in &self.modes {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                mode.name(),
                m(o.col(mode, |r| r.sent_pps), 0),
                m(o.col(mode, |r| r.throughput_pps), 0),
                m(o.vs_none(mode, |r| r.throughput_pps), 2),
                m(o.col(mode, |r| r.loss_rt * 100.0), 3),
                m(o.col(mode, |r| r.rt_p99_us), 0),
                m(o.vs_none(mode, |r| r.rt_p99_us), 2),
                m(o.to_kernel_pct(mode), 2),
            );
        }
        s
    }
}

/// A line of `firewall.csv`.
#[derive(Debug, serde::Serialize)]
struct CsvRow {
    mode: &'static str,
    round: u32,
    sent_pps: f64,
    forwarded_pps: f64,
    loss_rt: f64,
    rt_p99_us: f64,
    to_kernel: u64,
    to_kernel_pct: f64,
    router_cpu_s: f64,
}

/// Empties the router namespace's connection table.
fn forget_connections(topo: &Topology) -> Result<()> {
    (topo.router)
        .run(|| llr_io::conntrack::Conntrack::open()?.flush())
        .map_err(|e| LabError::step("enter the router's namespace", e))?
        .map_err(|e| LabError::step("empty the router's connection table", anyhow::Error::new(e)))
}

/// Sends one datagram from each of the generator's flows (source port `SPORT_BASE + flow`) to
/// both sink ports and waits for the sink's answer, which the kernel forwards both ways: its
/// conntrack then holds every flow of the point as an established connection. Bounded: 3 s
/// for each answer.
fn establish(topo: &Topology, c: &Options) -> Result<()> {
    let (gen, sink) = if c.ipv6 {
        (addr::GEN_V6, addr::SINK_V6)
    } else {
        (addr::GEN_V4, addr::SINK_V4)
    };
    let gen: IpAddr = gen.parse().expect("a literal address");
    let sink: IpAddr = sink.parse().expect("a literal address");
    let wait = Duration::from_secs(3);
    let flows = c.flows;
    let ports = [9000u16, 9001];
    let answerers: Vec<_> = ports
        .iter()
        .map(|&port| {
            let sock = topo
                .sink
                .run(move || {
                    let s = UdpSocket::bind(SocketAddr::new(sink, port))?;
                    s.set_read_timeout(Some(wait))?;
                    Ok::<_, std::io::Error>(s)
                })
                .map_err(|e| LabError::step("enter the sink's namespace", e))?
                .map_err(|e| LabError::io(format!("bind the sink's port {port}"), e))?;
            Ok(std::thread::spawn(move || -> std::io::Result<()> {
                let mut buf = [0u8; 64];
                for _ in 0..flows {
                    let (_, peer) = sock.recv_from(&mut buf)?;
                    sock.send_to(b"ok", peer)?;
                }
                Ok(())
            }))
        })
        .collect::<Result<_>>()?;
    let sent = topo
        .gen
        .run(move || -> std::io::Result<()> {
            for f in 0..flows {
                for port in ports {
                    let s = UdpSocket::bind(SocketAddr::new(gen, SPORT_BASE + f))?;
                    s.set_read_timeout(Some(wait))?;
                    s.send_to(b"hello", SocketAddr::new(sink, port))?;
                    s.recv(&mut [0u8; 64])?;
                }
            }
            Ok(())
        })
        .map_err(|e| LabError::step("enter the generator's namespace", e))?;
    for a in answerers {
        a.join()
            .map_err(|_| LabError::Failed("the sink's answerer panicked".into()))?
            .map_err(|e| LabError::io("the sink's answer to a flow", e))?;
    }
    sent.map_err(|e| {
        LabError::io(
            "establish the flows (a datagram each way through the kernel)",
            e,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rulesets_replace_only_the_study_table() {
        let none = ruleset(FirewallMode::None);
        assert!(!none.contains("chain") && none.contains("delete table inet llrfwcost"));
        let st = ruleset(FirewallMode::Stateless);
        // The blocklist and the two source rules.
        assert_eq!(st.matches("/24").count(), BLOCKLIST + 2);
        assert_eq!(st.matches("/48").count(), BLOCKLIST);
        assert!(st.contains("policy accept") && !st.contains("ct state"));
        let t = ruleset(FirewallMode::Typical);
        assert!(t.contains("policy drop") && t.contains("iifname \"veth-rin\" accept"));
        assert_eq!(t, ruleset(FirewallMode::TypicalEst));
        assert!(!t.contains("flush ruleset"));
    }

    #[test]
    fn check_names_the_field() {
        use llr_core::sched::StrategyKind;
        let t = [Target::Llrouter(StrategyKind::LlWfq)];
        let ok = FirewallStudy {
            options: Options::new(&t, "/tmp/x".into()),
            load: 1e6,
            rt_share: 0.1,
            rounds: 2,
            modes: vec![FirewallMode::None, FirewallMode::Stateless],
        };
        ok.check().unwrap();
        let field = |s: FirewallStudy| match s.check() {
            Err(LabError::Invalid(e)) => e.field,
            other => panic!("{other:?}"),
        };
        let mut s = ok.clone();
        s.options.targets = vec![Target::Kernel];
        assert_eq!(field(s), "targets");
        let mut s = ok.clone();
        s.rt_share = 0.0;
        assert_eq!(field(s), "rt-share");
        let mut s = ok.clone();
        s.modes = vec![FirewallMode::Stateless, FirewallMode::Typical];
        assert_eq!(field(s), "modes");
        let mut s = ok.clone();
        s.load = f64::NAN;
        assert_eq!(field(s), "load");
        let mut s = ok;
        s.options.be_dst = Some("10.71.2.3".parse().unwrap());
        assert_eq!(field(s), "be-dst");
    }
}
