//! A full table over eBGP from BIRD, as an operator's router receives one: BIRD in the sink
//! namespace announces the fixture ([`crate::fulltable`]) to BIRD in the router namespace, which
//! installs it in the kernel's main table; `llrouter run` (started first) mirrors the kernel.
//! Per round, on a fresh testbed:
//! 1. load: the time from the originator's start until the kernel holds every route, and until
//!    llrouter's forwarder does (then unchanged for a quiet window);
//! 2. withdrawal of one eighth of the table (two static protocols of the originator disabled)
//!    and its re-announcement, timed the same way;
//! 3. after each step: llrouter's route set against the one it must hold (listed through its
//!    control socket), and the answers for `check` destinations drawn from the table against
//!    the kernel's `ip route get`.
//!
//! The kernel's progress is followed from its route events (`llr_io::kernel::ProtoRouteWatch`
//! in a thread of the router namespace): the moment it holds the table is its last route's
//! event, to the millisecond, where a dump of a million routes would take seconds and blur the
//! time it measures. After each step one dump (`ip route show proto bird`) confirms that the
//! events' count was the table's. llrouter's route count is polled every [`POLL`].

use std::collections::HashSet;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llr_core::fixture::{Fixture, FixtureSpec};
use llr_core::sched::StrategyKind;
use llr_io::kernel::ProtoRouteWatch;
use llr_ops::ctl::{Command, CtlClient};
use llr_ops::query::{PacketQuery, RouteLookupView, RouteView};
use llr_traffic::netns::{addr, Netns, Topology};
use serde::{Deserialize, Serialize};

use crate::bird::{self, Bird};
use crate::fulltable::{self, Gateways};
use crate::options::Options;
use crate::router_proc::RouterProc;
use crate::setup::prepare;
use crate::{LabError, Progress, Result, Target};

/// Static protocols per family on the originator; one of them is withdrawn and re-announced.
const SLICES: usize = 8;
const CHURN_SLICE: usize = 3;
/// Next hops of the fixture: gateways on the router–sink link.
const NEXT_HOPS: u16 = 2000;
/// How often llrouter's route count is read.
const POLL: Duration = Duration::from_millis(10);
/// `RTPROT_BIRD` (linux/rtnetlink.h): the protocol BIRD installs its routes with.
const RTPROT_BIRD: u8 = 12;
/// The route watcher's receive buffer: room for the events of a whole table (about 1.5 M
/// messages of some 100 bytes), so that a descheduled watcher loses none.
const WATCH_RCVBUF: usize = 256 << 20;
/// How long llrouter's table must stay right before a step counts as settled: a mirror that
/// applied a stale snapshot after the right one shows as a regression.
const QUIET: Duration = Duration::from_millis(1500);
/// Examples of wrong answers kept for the report.
const EXAMPLES: usize = 5;

/// The study: table sizes, rounds, destinations compared.
#[derive(Debug, Clone)]
pub struct BgpStudy {
    /// Output directory, router binary, CPUs (the traffic settings are not used).
    pub options: Options,
    pub v4: usize,
    pub v6: usize,
    pub rounds: u32,
    /// Destinations compared with the kernel's `ip route get` after the load (a fifth of them
    /// after the withdrawal and the re-announcement, half of those in the withdrawn slice).
    pub check: usize,
}

/// One round: a fresh testbed, both BIRDs and a router.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BgpRow {
    pub round: u32,
    /// The fixture's routes (both families).
    pub routes: usize,
    /// From the originator's start until every BGP session was up, s.
    pub established_s: f64,
    /// From the originator's start until the kernel held every route, s.
    pub load_kernel_s: f64,
    /// … until llrouter's forwarder did, s.
    pub load_llrouter_s: f64,
    /// Routes withdrawn (one slice of each family).
    pub withdrawn: usize,
    /// From the withdrawal until the kernel no longer held them, s.
    pub withdraw_kernel_s: f64,
    pub withdraw_llrouter_s: f64,
    /// From the re-announcement until the kernel held them again, s.
    pub announce_kernel_s: f64,
    pub announce_llrouter_s: f64,
    /// Destinations compared with `ip route get`, all three steps.
    pub checked: usize,
    /// Of them, where llrouter's next hop or interface differed from the kernel's.
    pub differ: usize,
    /// Routes llrouter lacked, or held beyond the kernel's, after each step (summed).
    pub missing: usize,
    pub stale: usize,
    /// Times llrouter's table was right and then wrong again within a quiet window.
    pub regressions: u32,
    /// The router's resident memory after the load, MB.
    pub rss_mb: f64,
    /// The longest interval between two polls of the kernel's and llrouter's counts, all
    /// steps: the times' resolution, s.
    pub poll_max_s: f64,
    /// The route mirror's netlink events, full re-dumps and event-socket overruns (each
    /// repaired by a re-dump) over the round.
    pub mirror_events: u64,
    pub mirror_resyncs: u64,
    pub mirror_overruns: u64,
}

impl BgpRow {
    /// llrouter's lag behind the kernel at the load, s.
    pub fn load_lag_s(&self) -> f64 {
        (self.load_llrouter_s - self.load_kernel_s).max(0.0)
    }
    pub fn withdraw_lag_s(&self) -> f64 {
        (self.withdraw_llrouter_s - self.withdraw_kernel_s).max(0.0)
    }
    pub fn announce_lag_s(&self) -> f64 {
        (self.announce_llrouter_s - self.announce_kernel_s).max(0.0)
    }
}

/// What a study measured.
#[derive(Debug, Clone, Default)]
pub struct BgpOutcome {
    pub rows: Vec<BgpRow>,
    /// Wrong answers and missing or stale routes, a few of each, for the report.
    pub examples: Vec<String>,
    pub md: String,
    pub interrupted: bool,
}

/// The kernel's BIRD routes as its events told them, and when they last changed.
#[derive(Debug, Default)]
struct Seen {
    counts: (usize, usize),
    at: Option<Instant>,
    error: Option<String>,
}

/// A thread in the router namespace that follows the kernel's BIRD routes from its events;
/// stops when dropped.
struct KernelWatch {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl KernelWatch {
    fn start(ns: &Netns) -> Result<KernelWatch> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = ns.spawn(move || {
            let mut w = match ProtoRouteWatch::new(RTPROT_BIRD, WATCH_RCVBUF) {
                Ok(w) => {
                    let _ = ready_tx.send(Ok(()));
                    w
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            while !stop2.load(Ordering::Relaxed) {
                match w.poll() {
                    Ok(true) => {
                        let mut s = seen2.lock().unwrap_or_else(|e| e.into_inner());
                        (s.counts, s.at) = (w.counts(), Some(Instant::now()));
                    }
                    Ok(false) => std::thread::sleep(Duration::from_millis(1)),
                    Err(e) => {
                        seen2.lock().unwrap_or_else(|e| e.into_inner()).error = Some(e.to_string());
                        return;
                    }
                }
            }
        });
        let ready = ready_rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| LabError::Failed("the kernel's route watcher did not start".into()))?;
        ready.map_err(|e| LabError::Failed(format!("the kernel's route watcher: {e}")))?;
        Ok(KernelWatch {
            seen,
            stop,
            thread: Some(thread),
        })
    }

    /// (IPv4, IPv6) BIRD routes and the moment of the last change.
    fn seen(&self) -> Result<((usize, usize), Option<Instant>)> {
        let s = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match &s.error {
            Some(e) => Err(LabError::Failed(format!(
                "the kernel's route watcher: {e} (its counts are no longer the kernel's)"
            ))),
            None => Ok((s.counts, s.at)),
        }
    }
}

impl Drop for KernelWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// When a step settled, from its start.
struct Settled {
    kernel: Duration,
    llrouter: Duration,
    regressions: u32,
    poll_max: Duration,
}

/// The router's route count and its listing, over its control socket.
struct Ctl<'a>(&'a RouterProc);

impl Ctl<'_> {
    fn routes(&self) -> Result<usize> {
        Ok(self.0.status()?.routes)
    }

    fn client(&self) -> Result<CtlClient> {
        CtlClient::connect(self.0.ctl_socket(), Duration::from_secs(5))
            .map_err(|e| LabError::io("connect to the router's control socket", e))
    }

    fn prefixes(&self) -> Result<HashSet<String>> {
        let mut c = self.client()?;
        let mut set = HashSet::new();
        let mut bad = None;
        let cmd = Command::Fib {
            limit: None,
            query: Default::default(),
        };
        let reply = c
            .call_each(&cmd, &mut |items| {
                for v in items {
                    match RouteView::deserialize(v) {
                        Ok(r) => {
                            set.insert(r.prefix);
                        }
                        Err(e) => bad = Some(e.to_string()),
                    }
                }
            })
            .map_err(|e| LabError::io("list the router's routes", e))?;
        if let Some(e) = bad {
            return Err(LabError::Failed(format!("a route of the listing: {e}")));
        }
        reply
            .into_result()
            .map_err(|e| LabError::Failed(format!("list the router's routes: refused: {e}")))?;
        Ok(set)
    }

    /// llrouter's answer for each destination, as [`fulltable::RouteAnswer`].
    fn answers(&self, dsts: &[IpAddr]) -> Result<Vec<fulltable::RouteAnswer>> {
        let mut c = self.client()?;
        dsts.iter()
            .map(|d| {
                let cmd = Command::FibGet {
                    packet: PacketQuery::to(*d),
                };
                let what = || format!("fib.get {d}");
                let v = c
                    .call(&cmd)
                    .map_err(|e| LabError::io(what(), e))?
                    .into_result()
                    .map_err(|e| LabError::Failed(format!("{}: refused: {e}", what())))?;
                let view =
                    RouteLookupView::deserialize(v).map_err(|e| LabError::step(what(), e))?;
                Ok(view.route.map(|r| {
                    let via = r.via.and_then(|g| g.parse().ok());
                    (via, r.dev)
                }))
            })
            .collect()
    }
}

/// What one step must leave: the kernel's BIRD routes (IPv4, IPv6) and llrouter's route set.
struct Want<'a> {
    kernel: (usize, usize),
    llrouter: &'a HashSet<String>,
}

impl BgpStudy {
    /// Checks the settings before anything changes on the host.
    pub fn check(&self) -> Result<()> {
        if self.v4 + self.v6 < SLICES {
            return Err(LabError::invalid(
                "v4",
                format!("the table needs at least {SLICES} routes (one per slice)"),
            ));
        }
        if self.rounds == 0 {
            return Err(LabError::invalid("rounds", "at least 1"));
        }
        if !(10..=1_000_000).contains(&self.check) {
            return Err(LabError::invalid(
                "check",
                format!("{}: must be within 10..=1000000 destinations", self.check),
            ));
        }
        FixtureSpec {
            v4: self.v4,
            v6: self.v6,
            seed: 1,
            next_hops: NEXT_HOPS,
        }
        .validate()
        .map_err(LabError::Invalid)?;
        if !bird::available() {
            return Err(LabError::Failed(
                "BIRD 2 is missing: scripts/install-deps.sh installs the Debian package bird2"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Runs it (root): `rounds` fresh testbeds one after the other; writes `bgp.csv` and
    /// `report.md` into the output directory.
    pub fn run(&self, stop: &AtomicBool, progress: &dyn Progress) -> Result<BgpOutcome> {
        self.check()?;
        let c = &self.options;
        let spec = FixtureSpec {
            v4: self.v4,
            v6: self.v6,
            seed: 12,
            next_hops: NEXT_HOPS,
        };
        let fx = Fixture::generate(spec).map_err(LabError::Invalid)?;
        let gw = Gateways::testbed(NEXT_HOPS)?;
        let files = fulltable::write_dir(&c.out.join("fulltable"), &fx, &gw, SLICES)?;
        // BIRD resolves an include against its own configuration's directory.
        let statics = std::fs::canonicalize(&files.bird_static)
            .map_err(|e| LabError::io(format!("resolve {}", files.bird_static.display()), e))?;
        let mut o = BgpOutcome::default();
        progress.start(u64::from(self.rounds));
        for round in 1..=self.rounds {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            progress.message(&format!("round {round}"));
            let row = self.round(round, &fx, &statics, stop, &mut o.examples)?;
            o.rows.push(row);
            progress.inc(1);
        }
        progress.finish();
        o.interrupted = stop.load(Ordering::Relaxed);
        o.md = self.report(&o);
        crate::report::write_csv(&c.out.join("bgp.csv"), &o.rows, "round")?;
        let md = c.out.join("report.md");
        std::fs::write(&md, &o.md)
            .map_err(|e| LabError::io(format!("write {}", md.display()), e))?;
        Ok(o)
    }

    fn round(
        &self,
        round: u32,
        fx: &Fixture,
        statics: &std::path::Path,
        stop: &AtomicBool,
        examples: &mut Vec<String>,
    ) -> Result<BgpRow> {
        let c = &self.options;
        let (topo, _shield) = prepare(c)?;
        fulltable::add_gateway_net(&topo.router, &topo.sink)?;
        let (rtr_sessions, sink_sessions) = bird::testbed_sessions();
        let rtr_bird = Bird::start(
            &topo.router,
            "router",
            &bird::router_config(addr::RTR_OUT_V4.parse().unwrap(), &rtr_sessions),
        )?;
        let rp = RouterProc::start(&topo, c, StrategyKind::LlWfq, false)?;
        let ctl = Ctl(&rp);
        let before = ctl.prefixes()?;
        let watch = KernelWatch::start(&topo.router)?;
        let mut row = BgpRow {
            round,
            routes: fx.v4.len() + fx.v6.len(),
            ..BgpRow::default()
        };
        let limit = Duration::from_secs(60) + Duration::from_micros(400) * row.routes as u32;

        // Load.
        let t0 = Instant::now();
        let origin = Bird::start(
            &topo.sink,
            "originator",
            &bird::originator_config(addr::SINK_V4.parse().unwrap(), &sink_sessions, statics),
        )?;
        let names: Vec<&str> = rtr_sessions.iter().map(|s| s.name.as_str()).collect();
        rtr_bird.wait_established(&names, Duration::from_secs(30))?;
        row.established_s = t0.elapsed().as_secs_f64();
        let mut all = fixture_prefixes(fx);
        all.extend(before.iter().cloned());
        let full = (fx.v4.len(), fx.v6.len());
        let want = Want {
            kernel: full,
            llrouter: &all,
        };
        let s = settle(&watch, &ctl, &want, t0, limit, stop)?;
        (row.load_kernel_s, row.load_llrouter_s) = (secs(s.kernel), secs(s.llrouter));
        row.regressions += s.regressions;
        row.poll_max_s = secs(s.poll_max);
        row.rss_mb = crate::scale::rss_kb(rp.pid()).map_or(f64::NAN, |kb| kb as f64 * 1024.0 / 1e6);
        let dsts = fx.destinations(self.check, u64::from(round));
        self.verify(&topo, &ctl, &want, &dsts, &mut row, examples)?;

        // Withdrawal of one slice, then its re-announcement.
        let slice = fx.slice(CHURN_SLICE, SLICES);
        row.withdrawn = slice.v4.len() + slice.v6.len();
        let mut sample = slice.destinations(self.check / 10, u64::from(round) + 100);
        sample.extend(fx.destinations(self.check / 10, u64::from(round) + 200));
        let mut less = all.clone();
        for p in fixture_prefixes(&slice) {
            less.remove(&p);
        }
        let fewer = (full.0 - slice.v4.len(), full.1 - slice.v6.len());
        for (enable, want) in [
            (
                false,
                Want {
                    kernel: fewer,
                    llrouter: &less,
                },
            ),
            (true, want),
        ] {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let t1 = Instant::now();
            for v6 in [false, true] {
                let p = fulltable::static_protocol(v6, CHURN_SLICE);
                if enable {
                    origin.enable(&p)?;
                } else {
                    origin.disable(&p)?;
                }
            }
            let s = settle(&watch, &ctl, &want, t1, limit, stop)?;
            let t = (secs(s.kernel), secs(s.llrouter));
            if enable {
                (row.announce_kernel_s, row.announce_llrouter_s) = t;
            } else {
                (row.withdraw_kernel_s, row.withdraw_llrouter_s) = t;
            }
            row.regressions += s.regressions;
            row.poll_max_s = row.poll_max_s.max(secs(s.poll_max));
            self.verify(&topo, &ctl, &want, &sample, &mut row, examples)?;
        }
        let m = rp
            .counters()
            .and_then(|m| m.mirror)
            .ok_or_else(|| LabError::Failed("the router's counters have no route mirror".into()))?;
        (row.mirror_events, row.mirror_resyncs, row.mirror_overruns) =
            (m.events, m.resyncs, m.overruns);
        rp.stop()?;
        Ok(row)
    }

    /// After a step: the kernel's own dump agrees with its events, llrouter holds exactly the
    /// routes it must, and answers `dsts` as the kernel does.
    fn verify(
        &self,
        topo: &Topology,
        ctl: &Ctl,
        want: &Want,
        dsts: &[IpAddr],
        row: &mut BgpRow,
        examples: &mut Vec<String>,
    ) -> Result<()> {
        let dumped = fulltable::kernel_bird_routes(&topo.router)?;
        if dumped != want.kernel {
            return Err(LabError::Failed(format!(
                "the kernel's events said it held {:?} BIRD routes (IPv4, IPv6), but `ip route \
                 show proto bird` lists {dumped:?}: the study's timing would be wrong",
                want.kernel
            )));
        }
        let have = ctl.prefixes()?;
        let missing: Vec<&String> = want.llrouter.difference(&have).collect();
        let stale: Vec<&String> = have.difference(want.llrouter).collect();
        row.missing += missing.len();
        row.stale += stale.len();
        for p in missing.iter().take(EXAMPLES) {
            examples.push(format!("round {}: {p} missing", row.round));
        }
        for p in stale.iter().take(EXAMPLES) {
            examples.push(format!("round {}: {p} stale", row.round));
        }
        let dir = self.options.out.join("route-get");
        std::fs::create_dir_all(&dir)
            .map_err(|e| LabError::io(format!("create {}", dir.display()), e))?;
        let kernel = fulltable::kernel_route_get(&topo.router, &dir.join("batch"), dsts)?;
        let ours = ctl.answers(dsts)?;
        row.checked += dsts.len();
        for (d, l) in dsts.iter().zip(ours) {
            let k = kernel.get(d).cloned().flatten();
            if k != l {
                row.differ += 1;
                if examples.len() < 4 * EXAMPLES {
                    examples.push(format!(
                        "round {}: {d}: kernel {k:?}, llrouter {l:?}",
                        row.round
                    ));
                }
            }
        }
        Ok(())
    }

    fn report(&self, o: &BgpOutcome) -> String {
        let mut s = format!(
            "{} IPv4 + {} IPv6 prefixes over eBGP from BIRD to BIRD, installed in the kernel; \
             llrouter mirrors it. Times in s from the originator's start (load) or from `birdc \
             disable`/`enable` of one eighth of the table; llrouter's lag behind the kernel in \
             brackets.\n\n\
             | round | BGP up | load: kernel | llrouter | withdrawal: kernel | llrouter | re-announcement: kernel | llrouter | compared | differ | missing | stale | regressions | resident | longest poll | mirror events | re-dumps | overruns |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            self.v4, self.v6
        );
        for r in &o.rows {
            let _ = writeln!(
                s,
                "| {} | {:.2} | {:.2} | {:.2} (+{:.0} ms) | {:.2} | {:.2} (+{:.0} ms) | {:.2} | {:.2} (+{:.0} ms) | {} | {} | {} | {} | {} | {:.0} MB | {:.0} ms | {} | {} | {} |",
                r.round,
                r.established_s,
                r.load_kernel_s,
                r.load_llrouter_s,
                r.load_lag_s() * 1e3,
                r.withdraw_kernel_s,
                r.withdraw_llrouter_s,
                r.withdraw_lag_s() * 1e3,
                r.announce_kernel_s,
                r.announce_llrouter_s,
                r.announce_lag_s() * 1e3,
                r.checked,
                r.differ,
                r.missing,
                r.stale,
                r.regressions,
                r.rss_mb,
                r.poll_max_s * 1e3,
                r.mirror_events,
                r.mirror_resyncs,
                r.mirror_overruns
            );
        }
        if !o.examples.is_empty() {
            s.push_str("\nWrong, e.g.:\n\n");
            for e in &o.examples {
                let _ = writeln!(s, "- {e}");
            }
        }
        s
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn fixture_prefixes(fx: &Fixture) -> HashSet<String> {
    let v4 = fx.v4.iter().map(|r| r.prefix().to_string());
    v4.chain(fx.v6.iter().map(|r| r.prefix().to_string()))
        .collect()
}

/// Polls llrouter's route count until the kernel's events reached `want` and llrouter did
/// too and stayed there for [`QUIET`]; fails after `limit` from `t0`.
fn settle(
    watch: &KernelWatch,
    ctl: &Ctl,
    want: &Want,
    t0: Instant,
    limit: Duration,
    stop: &AtomicBool,
) -> Result<Settled> {
    let mut right_since: Option<Duration> = None;
    let mut regressions = 0;
    // From the first poll on: before it lies the wait for the BGP sessions.
    let (mut poll_max, mut last_poll) = (Duration::ZERO, None);
    loop {
        let (k, changed) = watch.seen()?;
        // The kernel held the table from its last change's event on (BIRD re-announcing
        // would move the count away again, and llrouter follows that).
        let kernel_at = changed
            .filter(|_| k == want.kernel)
            .map(|at| at.saturating_duration_since(t0));
        // Stamped at the middle of the call.
        let a = t0.elapsed();
        let n = ctl.routes()?;
        let n_at = (a + t0.elapsed()) / 2;
        if let Some(last) = last_poll {
            poll_max = poll_max.max(n_at - last);
        }
        last_poll = Some(n_at);
        let right = kernel_at.is_some() && n == want.llrouter.len();
        match (right, right_since) {
            (true, None) => right_since = Some(n_at),
            (true, Some(since)) if t0.elapsed() - since >= QUIET => {
                return Ok(Settled {
                    kernel: kernel_at.unwrap_or_default(),
                    llrouter: since,
                    regressions,
                    poll_max,
                })
            }
            (false, Some(_)) => {
                regressions += 1;
                right_since = None;
            }
            _ => {}
        }
        if stop.load(Ordering::Relaxed) {
            return Err(LabError::step(
                "testbed bird",
                anyhow::anyhow!("interrupted"),
            ));
        }
        if t0.elapsed() >= limit {
            return Err(LabError::Failed(format!(
                "not settled within {:.0} s: the kernel holds {k:?} BIRD routes (IPv4, IPv6), \
                 wants {:?}; llrouter {n} routes, wants {}",
                t0.elapsed().as_secs_f64(),
                want.kernel,
                want.llrouter.len()
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// The study's default options: ll-wfq, nothing else used.
pub fn options(out: std::path::PathBuf) -> Options {
    Options::new(&[Target::Llrouter(StrategyKind::LlWfq)], out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_before_the_host_changes() {
        let s = |v4, rounds, check| BgpStudy {
            options: options("/nonexistent".into()),
            v4,
            v6: 0,
            rounds,
            check,
        };
        let field = |st: BgpStudy| match st.check() {
            Err(LabError::Invalid(e)) => e.field.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(field(s(3, 1, 100)), "v4");
        assert_eq!(field(s(100, 0, 100)), "rounds");
        assert_eq!(field(s(100, 1, 5)), "check");
    }
}
