//! The route mirror at full-table scale: the fixture ([`crate::fulltable`]) loaded into the
//! router namespace's kernel with `ip -batch`, then per round `llrouter run` started on it, and
//! measured: the time from its start until its forwarder holds every route, the mirror thread's
//! CPU while no route changes, the process's resident memory and the forwarding table's own
//! (`llrouter_fib_memory_bytes`).
//!
//! The kernel's table is loaded once a study; each round starts a new router on it, as an
//! operator's restart would.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llr_core::fixture::{Fixture, FixtureSpec};
use llr_core::sched::StrategyKind;
use serde::{Deserialize, Serialize};

use crate::fulltable::{self, Gateways};
use crate::options::Options;
use crate::router_proc::RouterProc;
use crate::setup::prepare;
use crate::{host, LabError, Progress, Result, Target};

/// How long a router may take to hold every route before the round fails.
const COMPLETE_WITHIN: Duration = Duration::from_secs(300);
/// After the table is complete, before the idle window: the mirror's last batch settles.
const SETTLE: Duration = Duration::from_secs(2);

/// The study: table sizes, rounds, the idle window.
#[derive(Debug, Clone)]
pub struct ScaleStudy {
    /// Output directory, router binary, CPUs (the other traffic settings are not used).
    pub options: Options,
    pub v4: usize,
    pub v6: usize,
    pub rounds: u32,
    /// The window the mirror's CPU is measured over, s.
    pub idle_secs: f64,
}

/// One round: one router started on the loaded table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScaleRow {
    pub round: u32,
    /// Routes in the router's forwarding table (the fixture and the links' own).
    pub routes: usize,
    /// The table overflowed `max-routes`: the kernel routes for it.
    pub incomplete: bool,
    /// From `llrouter run`'s start until its forwarder held every route (or said it cannot), s.
    pub complete_s: f64,
    /// The route mirror thread's CPU over the idle window, % of one core.
    pub mirror_idle_pct: f64,
    /// The process's resident memory after the idle window, MB.
    pub rss_mb: f64,
    /// Of it, the forwarding table's structures, MB.
    pub fib_mb: f64,
    /// `llrouter ctl show fib --all`, from its start until its last line, s.
    pub listing_s: f64,
    /// The lines it printed.
    pub listed: usize,
    /// The same with `-j`, s.
    pub listing_json_s: f64,
}

/// What a study measured.
#[derive(Debug, Clone, Default)]
pub struct ScaleOutcome {
    pub rows: Vec<ScaleRow>,
    /// `ip -batch` of both families into the kernel, s.
    pub load_s: f64,
    /// The routes the fixture put in the kernel.
    pub fixture_routes: usize,
    /// The router's resident memory before the table was loaded (the links' routes only), MB.
    pub rss_empty_mb: f64,
    pub md: String,
    pub interrupted: bool,
}

impl ScaleStudy {
    /// Checks the settings before anything changes on the host.
    pub fn check(&self) -> Result<()> {
        if self.v4 + self.v6 == 0 {
            return Err(LabError::invalid(
                "v4",
                "the table needs at least one route",
            ));
        }
        if self.rounds == 0 {
            return Err(LabError::invalid("rounds", "at least 1"));
        }
        if !(0.5..=600.0).contains(&self.idle_secs) {
            return Err(LabError::invalid(
                "idle-secs",
                format!("{}: must be within 0.5..=600", self.idle_secs),
            ));
        }
        Ok(())
    }

    /// Runs it (root): a temporary testbed, the table loaded, `rounds` routers one after the
    /// other; writes `scale.csv` and `report.md` into the output directory.
    pub fn run(&self, stop: &AtomicBool, progress: &dyn Progress) -> Result<ScaleOutcome> {
        self.check()?;
        let c = &self.options;
        let (topo, _shield) = prepare(c)?;
        let fx = Fixture::generate(FixtureSpec {
            v4: self.v4,
            v6: self.v6,
            seed: 1,
            next_hops: 1,
        })
        .map_err(|e| LabError::invalid("v4", e.to_string()))?;
        let files = fulltable::write_dir(&c.out.join("fulltable"), &fx, &Gateways::testbed(1)?, 1)?;
        progress.message("a router without the table");
        let rp = RouterProc::start(&topo, c, StrategyKind::LlWfq, false)?;
        std::thread::sleep(SETTLE);
        let rss_empty_mb = rss_kb(rp.pid()).map_or(f64::NAN, |kb| kb as f64 * 1024.0 / 1e6);
        rp.stop()?;
        progress.message("loading the table into the kernel");
        let t0 = Instant::now();
        for f in [&files.batch_v4, &files.batch_v6] {
            crate::churn::ip_batch(&topo, f, None)?;
        }
        let mut o = ScaleOutcome {
            load_s: t0.elapsed().as_secs_f64(),
            fixture_routes: self.v4 + self.v6,
            rss_empty_mb,
            ..ScaleOutcome::default()
        };
        progress.start(u64::from(self.rounds));
        for round in 1..=self.rounds {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            progress.message(&format!("round {round}"));
            o.rows
                .push(self.round(&topo, round, o.fixture_routes, stop)?);
            progress.inc(1);
        }
        progress.finish();
        o.interrupted = stop.load(Ordering::Relaxed);
        o.md = self.report(&o);
        let csv = c.out.join("scale.csv");
        let mut w = csv::Writer::from_path(&csv)
            .map_err(|e| LabError::step(format!("write {}", csv.display()), e))?;
        for r in &o.rows {
            w.serialize(r)
                .map_err(|e| LabError::step(format!("write {}", csv.display()), e))?;
        }
        w.flush()
            .map_err(|e| LabError::io(format!("write {}", csv.display()), e))?;
        let md = c.out.join("report.md");
        std::fs::write(&md, &o.md)
            .map_err(|e| LabError::io(format!("write {}", md.display()), e))?;
        Ok(o)
    }

    fn round(
        &self,
        topo: &llr_traffic::netns::Topology,
        round: u32,
        expect: usize,
        stop: &AtomicBool,
    ) -> Result<ScaleRow> {
        let c = &self.options;
        let t0 = Instant::now();
        let rp = RouterProc::start(topo, c, StrategyKind::LlWfq, false)?;
        let st = loop {
            let st = rp.status()?;
            if st.routes_incomplete || st.routes >= expect {
                break st;
            }
            if t0.elapsed() > COMPLETE_WITHIN || stop.load(Ordering::Relaxed) {
                return Err(LabError::Failed(format!(
                    "the forwarder held {} of the {expect} routes after {:.0} s",
                    st.routes,
                    t0.elapsed().as_secs_f64()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let complete_s = t0.elapsed().as_secs_f64();
        std::thread::sleep(SETTLE);
        let pid = rp.pid();
        let cpu0 = host::threads_cpu_ns(pid, "llr-mirror");
        let w0 = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(self.idle_secs));
        let cpu = host::threads_cpu_ns(pid, "llr-mirror").saturating_sub(cpu0);
        let mirror_idle_pct = 100.0 * cpu as f64 / w0.elapsed().as_nanos() as f64;
        let rss_mb = rss_kb(pid).map_or(f64::NAN, |kb| kb as f64 * 1024.0 / 1e6);
        let fib_mb = rp.counters().map_or(f64::NAN, |m| {
            m.fib_memory.iter().map(|(_, b)| *b as f64).sum::<f64>() / 1e6
        });
        let (listing_s, listed) = self.list(&rp, &["show", "fib", "--all"])?;
        let (listing_json_s, _) = self.list(&rp, &["show", "fib", "--all", "-j"])?;
        rp.stop()?;
        Ok(ScaleRow {
            round,
            routes: st.routes,
            incomplete: st.routes_incomplete,
            complete_s,
            mirror_idle_pct,
            rss_mb,
            fib_mb,
            listing_s,
            listed,
            listing_json_s,
        })
    }

    /// `llrouter ctl … ARGS` against `rp` on the generator's CPU (off the worker's, as an
    /// operator's shell on a router that keeps its worker cores to the workers): the time until
    /// its output ended, and its lines.
    fn list(&self, rp: &RouterProc, args: &[&str]) -> Result<(f64, usize)> {
        use std::io::Read as _;
        let c = &self.options;
        let bin = match &c.router_bin {
            Some(b) => b.clone(),
            None => {
                std::env::current_exe().map_err(|e| LabError::io("path of this executable", e))?
            }
        };
        let what = || format!("llrouter ctl {}", args.join(" "));
        let t0 = Instant::now();
        let mut child = std::process::Command::new("taskset")
            .args(["-c", &c.gen_cpu.to_string()])
            .arg(&bin)
            .arg("ctl")
            .arg("--socket")
            .arg(rp.ctl_socket())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| LabError::io(what(), e))?;
        let mut lines = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        if let Some(mut o) = child.stdout.take() {
            loop {
                match o.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
                    Err(e) => return Err(LabError::io(what(), e)),
                }
            }
        }
        let out = child
            .wait_with_output()
            .map_err(|e| LabError::io(what(), e))?;
        let secs = t0.elapsed().as_secs_f64();
        if !out.status.success() {
            return Err(LabError::Failed(format!(
                "{}: {}: {}",
                what(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok((secs, lines))
    }

    fn report(&self, o: &ScaleOutcome) -> String {
        let mut s = format!(
            "{} IPv4 + {} IPv6 routes loaded into the kernel with `ip -batch` in {:.1} s; before \
             that, a router without them held {:.0} MB.\n\n\
             | round | routes | forwarder complete after | mirror CPU, idle | resident | of it the FIB | `show fib --all` | `-j` |\n\
             |---|---|---|---|---|---|---|---|\n",
            self.v4, self.v6, o.load_s, o.rss_empty_mb
        );
        for r in &o.rows {
            let routes = if r.incomplete {
                format!("{} (**incomplete**: max-routes)", r.routes)
            } else {
                r.routes.to_string()
            };
            let _ = writeln!(
                s,
                "| {} | {routes} | {:.2} s | {:.3} % | {:.0} MB | {:.1} MB | {:.2} s ({} lines) | {:.2} s |",
                r.round,
                r.complete_s,
                r.mirror_idle_pct,
                r.rss_mb,
                r.fib_mb,
                r.listing_s,
                r.listed,
                r.listing_json_s
            );
        }
        s
    }
}

/// `VmRSS` of `pid`, kB.
pub(crate) fn rss_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
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
        let s = |v4, rounds, idle| ScaleStudy {
            options: options("/nonexistent".into()),
            v4,
            v6: 0,
            rounds,
            idle_secs: idle,
        };
        let field = |st: ScaleStudy| match st.check() {
            Err(LabError::Invalid(e)) => e.field.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(field(s(0, 1, 1.0)), "v4");
        assert_eq!(field(s(10, 0, 1.0)), "rounds");
        assert_eq!(field(s(10, 1, 0.0)), "idle-secs");
        assert!(s(10, 1, 1.0).check().is_ok());
    }

    #[test]
    fn resident_memory_of_this_process() {
        assert!(rss_kb(std::process::id()).is_some_and(|kb| kb > 0));
        assert_eq!(rss_kb(u32::MAX), None);
    }
}
