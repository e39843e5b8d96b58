//! `llrouter testbed`: the namespace testbed (gen ns → router ns → sink ns) and the study that
//! compares forwarding targets on the same traffic (`llr_lab`).
//!
//! - `up` / `down`: create / remove a named, persistent topology;
//! - `run`: sweep offered load × RT share for each target, write `results.csv`, PNG plots and
//!   `report.md`;
//! - `mlffr`: RFC 2544-style binary search for the maximum loss-free forwarding rate;
//! - `flood`: RT alone and beside a flood the router's own nftables ruleset drops (in XDP or in
//!   the worker), interleaved;
//! - `iperf`: TCP goodput of iperf3 through each target, alone and beside a BE overload;
//! - `fulltable`: write the generated full Internet table (`llr_core::fixture`) as `ip -batch`
//!   files, BIRD static protocols and a summary (`llr_lab::fulltable`);
//! - `scale`: that table loaded into a temporary testbed's kernel, routers started on it: time
//!   to a complete forwarder, the mirror's idle CPU, memory (`llr_lab::scale`);
//! - `churn`: RT beside route churn, points with and without it interleaved (`llr_lab::churn`).
//!
//! Targets: `kernel` (Linux forwarding in the router ns, its softirq steered to the router CPU
//! with RPS), `kernel-htb` (plus an egress HTB qdisc on the router's egress veth giving DSCP EF
//! the higher priority) and `llrouter:<strategy>` (`llrouter run` started in the router ns with
//! a generated config — classes rt/be, rule dscp 46 → rt, the strategy, budgets, wake-up mode,
//! per-packet cost — its worker pinned to `--router-cpu`; stopped with SIGINT, its exit counters
//! kept in `llrouter-<strategy>.json`).
//!
//! Generator and sink run as threads of this process, in their namespaces, pinned to `--gen-cpu`.
//! Generator backends: `bpf-live` (default; Mpps, enough to overload the router) or `udp`. Sink
//! backends: `xdp` (default; an XDP program on the sink veth, ~100 ns per packet) or `udp`.
//! The router's CPU cost per forwarded packet is measured per point: llrouter's process CPU time
//! (`/proc/PID/stat`), or the router CPU's softirq time (`/proc/stat`) for the kernel targets.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use llr_io::sys::install_stop_signals;
use llr_lab::args::{
    AlternateArgs, BgpArgs, ChurnArgs, CostsArgs, FirewallArgs, FloodArgs, FulltableArgs,
    IperfArgs, MlffrArgs, RunArgs, ScaleArgs,
};
use llr_lab::iperf;
use llr_lab::Progress;
use llr_traffic::netns::{addr, Topology};

use crate::cli_util::{lab_error, usage};

/// The namespace testbed.
#[derive(Debug, Args)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub cmd: TestbedCmd,
}

#[derive(Debug, Subcommand)]
pub enum TestbedCmd {
    /// Create a persistent topology (namespaces NAME-gen, NAME-rtr, NAME-sink).
    Up {
        #[arg(long, default_value = "llr")]
        name: String,
        /// Rx/Tx queues of every veth (one per llrouter worker; per worker and class for
        /// `--steering queues`).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        queues: u32,
    },
    /// Remove a topology created by `up`.
    Down {
        #[arg(long, default_value = "llr")]
        name: String,
    },
    /// Sweep offered load and RT share for each target.
    Run(RunArgs),
    /// Find the maximum loss-free forwarding rate of each target.
    Mlffr(MlffrArgs),
    /// Compare llrouter strategies under one constant overload by switching the running
    /// router's strategy every slice (the first target is the reference): each slice is set
    /// against the reference's slices around it, so the machine's own speed changes cancel.
    Alternate(AlternateArgs),
    /// RT alone and beside a flood to an address the router's own nftables ruleset drops, by a
    /// prerouting rule (in XDP) and by a forward-chain rule (in the worker), the modes
    /// interleaved in each round; one llrouter target.
    Flood(FloodArgs),
    /// The host's firewall against none, the rulesets interleaved in each round: a stateless
    /// ruleset llrouter runs itself, and a typical stateful one with the flows unestablished
    /// (the kernel forwards them) and established (llrouter carries them); one llrouter target.
    Firewall(FirewallArgs),
    /// Fit the worker's grant and flush costs over the results.csv of several `run`s (e.g. at
    /// `--tx-hold-us 0` and 5, interleaved) and compare the simulator with them.
    Costs(CostsArgs),
    /// TCP goodput of iperf3 (ordinary sockets, default offloads) through each target, alone
    /// and beside a BE overload.
    Iperf(IperfArgs),
    /// Write a generated full Internet routing table (deterministic, realistic prefix lengths,
    /// clustered and nested): routes-v4.batch and routes-v6.batch for `ip -batch`,
    /// bird-static.conf for BIRD 2, summary.txt with the prefix-length histogram.
    Fulltable(FulltableArgs),
    /// The route mirror at full-table scale: the generated table loaded into a temporary
    /// testbed's router namespace with `ip -batch`, then routers started on it one after the
    /// other: the time until the forwarder holds every route, the mirror's CPU while nothing
    /// changes, resident memory and the forwarding table's.
    Scale(ScaleArgs),
    /// A full table over eBGP: BIRD announces it to BIRD in the router namespace, which
    /// installs it in the kernel; per round the time until the kernel and then llrouter hold
    /// every route, a withdrawal of an eighth of it and its re-announcement, and llrouter's
    /// answers against the kernel's `ip route get` after each.
    Bird(BgpArgs),
    /// Route churn beside measured traffic: a table of /24 routes, and per round a point while
    /// routes are replaced at --rate a second and one without, one llrouter target.
    Churn(ChurnArgs),
}

/// A progress bar on stderr.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new() -> Bar {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:30} {pos}/{len} {msg} [{elapsed}/~{duration}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Bar(b)
    }
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.0.set_length(total);
    }
    fn message(&self, msg: &str) {
        self.0.set_message(msg.to_string());
    }
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

fn run_sweep(a: RunArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!(
        "wrote {}/results.csv, report.md and {} plots",
        study.options.out.display(),
        o.plots.len()
    );
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    if !o.errors.is_empty() {
        bail!(
            "{} target run(s) not measured (see report.md): {}",
            o.errors.len(),
            o.errors.join("; ")
        );
    }
    Ok(())
}

fn run_mlffr(a: MlffrArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    for (t, why) in &o.unmeasured {
        println!("{t}: not measured: {why}");
    }
    print!("{}{}", o.csv, o.md);
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    if !o.unmeasured.is_empty() {
        let names: Vec<&str> = o.unmeasured.iter().map(|(t, _)| t.as_str()).collect();
        bail!("not measured: {}", names.join(", "));
    }
    Ok(())
}

fn run_flood(a: FloodArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!("wrote {}/report.md", study.options.out.display());
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    Ok(())
}

fn run_firewall(a: FirewallArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!(
        "wrote {}/report.md and firewall.csv",
        study.options.out.display()
    );
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    Ok(())
}

fn run_churn(a: ChurnArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!(
        "wrote {}/report.md and churn.csv",
        study.options.out.display()
    );
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    Ok(())
}

fn run_bird(a: BgpArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!(
        "wrote {}/report.md and bgp.csv",
        study.options.out.display()
    );
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    Ok(())
}

fn run_scale(a: ScaleArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!(
        "wrote {}/report.md and scale.csv",
        study.options.out.display()
    );
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    Ok(())
}

fn run_alternate(a: AlternateArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let o = study.run(stop, &Bar::new()).map_err(lab_error)?;
    println!("{}", o.md);
    println!(
        "wrote {}/alternate.csv and alternate.md",
        study.options.out.display()
    );
    if o.interrupted {
        bail!("interrupted (partial results written)");
    }
    Ok(())
}

fn run_iperf(a: IperfArgs) -> Result<()> {
    let study = a.study().map_err(lab_error)?;
    let stop = install_stop_signals();
    let rows = study
        .run(stop, &mut |r| {
            eprintln!(
                "round {} {:<18} {:<17} {:>9.1} Mbit/s  retransmits {:>6} ({:.2} %)  overload {:>8.0} pps  router CPU {:>5.0} ms/Gbit",
                r.round,
                r.target,
                r.case,
                r.goodput_mbps,
                r.retransmits,
                r.retransmit_pct,
                r.overload_pps,
                r.router_cpu_ms_per_gbit
            )
        })
        .map_err(lab_error)?;
    println!("{}", iperf::summary(&rows));
    println!("rows: {}", study.csv_path().display());
    Ok(())
}

fn up(name: &str, queues: u32) -> Result<()> {
    if name.is_empty()
        || name.len() > 40
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(usage("name", "1..=40 characters of [A-Za-z0-9-]"));
    }
    if Topology::exists(name) {
        println!("topology {name} already up");
        return Ok(());
    }
    let mut t = Topology::create_with(name, queues)?;
    t.persist();
    println!(
        "up: {0}-gen ({1}, {2}) → {0}-rtr ({3} | {4}) → {0}-sink ({5}, {6})",
        name,
        addr::GEN_V4,
        addr::GEN_V6,
        addr::RTR_IN_IF,
        addr::RTR_OUT_IF,
        addr::SINK_V4,
        addr::SINK_V6
    );
    Ok(())
}

fn down(name: &str) -> Result<()> {
    if !Topology::exists(name) {
        println!("topology {name} is not up");
        return Ok(());
    }
    Topology::open(name)?.down()?;
    println!("down: {name}");
    Ok(())
}

/// `llrouter testbed`.
pub fn run(args: TestbedArgs) -> Result<()> {
    // A study killed while it held the CPU shield left the machine's other tasks confined;
    // any testbed command puts them back (the studies do it again when they start).
    match llr_ops::shield::sweep_stale() {
        Ok(0) => {}
        Ok(n) => eprintln!("released {n} CPU shield(s) left by a killed testbed run"),
        Err(e) => eprintln!("note: {e:#}"),
    }
    match args.cmd {
        TestbedCmd::Up { name, queues } => up(&name, queues),
        TestbedCmd::Down { name } => down(&name),
        TestbedCmd::Run(a) => run_sweep(a),
        TestbedCmd::Mlffr(a) => run_mlffr(a),
        TestbedCmd::Alternate(a) => run_alternate(a),
        TestbedCmd::Flood(a) => run_flood(a),
        TestbedCmd::Firewall(a) => run_firewall(a),
        TestbedCmd::Costs(a) => costs(a),
        TestbedCmd::Iperf(a) => run_iperf(a),
        TestbedCmd::Fulltable(a) => fulltable(a),
        TestbedCmd::Scale(a) => run_scale(a),
        TestbedCmd::Bird(a) => run_bird(a),
        TestbedCmd::Churn(a) => run_churn(a),
    }
}

fn costs(a: CostsArgs) -> Result<()> {
    let files = a.files().map_err(lab_error)?;
    let paths: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
    let rows = llr_lab::report::read_runs(&paths).map_err(lab_error)?;
    let md = llr_lab::report::costs_md(&a.options(), &rows, a.points());
    if md.is_empty() {
        let which = if a.below_saturation {
            "llrouter point below saturation (BE loss ≤ 1 %)"
        } else {
            "overloaded llrouter point (BE loss > 1 %; --below-saturation for the others)"
        };
        bail!(
            "no {which} with grant counters in {} file(s) (a build that records flushes)",
            files.len()
        );
    }
    print!("{md}");
    Ok(())
}

fn fulltable(a: FulltableArgs) -> Result<()> {
    use llr_core::fixture::Fixture;
    use llr_lab::fulltable::{self, Gateways};
    let spec = a.spec();
    let gw = Gateways::testbed(a.next_hops).map_err(lab_error)?;
    let t0 = std::time::Instant::now();
    let fx = Fixture::generate(spec).map_err(|e| usage(&e.field, e.reason))?;
    let w = fulltable::write_dir(&a.out, &fx, &gw, a.slices as usize).map_err(lab_error)?;
    print!("{}", fulltable::summary(&fx));
    println!(
        "\nwritten in {:.1} s: {}, {}, {}, {}",
        t0.elapsed().as_secs_f64(),
        w.batch_v4.display(),
        w.batch_v6.display(),
        w.bird_static.display(),
        w.summary.display()
    );
    if gw.needs_gateway_net() {
        println!(
            "the gateways are on {}: first `ip -n NAME-rtr addr add {} dev {}`",
            fulltable::GATEWAY_NET_V4,
            fulltable::ROUTER_GW_ADDR_V4,
            addr::RTR_OUT_IF
        );
    }
    println!(
        "load into a testbed's router namespace (never the host): ip -n NAME-rtr -batch {}",
        w.batch_v4.display()
    );
    Ok(())
}
