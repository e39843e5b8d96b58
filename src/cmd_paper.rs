//! `llrouter paper NNN`: a paper's experiments, one command each (`llr_lab::paper`): the
//! figures rebuilt with the paper's parameters, the report (`report.md`, `results.csv`, PNGs)
//! beside the paper's numbers and claims.

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use llr_lab::paper::{p000, p001, p003, p003_shares, p004, PaperArgs};

use crate::cli_util::lab_error;

/// A paper's experiments.
#[derive(Debug, Args)]
pub struct PaperCmd {
    #[command(subcommand)]
    pub paper: Paper,
}

#[derive(Debug, Subcommand)]
pub enum Paper {
    /// Paper 000, Fig. 7 and Eq. 1–2 (simulated: mean latency of RT and BE against the RT
    /// share at 1.5 Mpps and against the offered load at 30 % RT, for SQ, RR, LL-RR and
    /// LL-WFQ; the RT ring's waits against Eq. 1's Tmax). Figs. 5–6 and the live Fig. 7 are
    /// `llrouter testbed run` (docs/papers.md).
    #[command(name = "000")]
    P000(PaperArgs),
    /// Paper 001's case study, Figs. 5–7 (simulated: mean latency of RT and BE against the RT
    /// share, the utilization and the time slice, for every strategy, with 95 % confidence
    /// intervals).
    #[command(name = "001")]
    P001(PaperArgs),
    /// Paper 003 (CROSS). Fig. 5: the flow scheduler's context-switch overhead against the
    /// number of eligible flows, measured in thread CPU time on this machine (`--packets` is
    /// switches per point and replication; `--jobs` is not used: one thread measures), fitted,
    /// and set beside the paper's 280 ns + 5 ns per flow. Figs. 10–11: two flows sharing an
    /// element, scheduled per element (Click) and per flow (CROSS) on the router's flow
    /// scheduler (simulated, deterministic).
    #[command(name = "003")]
    P003(PaperArgs),
    /// Paper 004 (NAPI), Figs. 4–7 (simulated: throughput and latency against the offered
    /// load on one CPU and on two, with an interrupt per packet, as before NAPI, with NAPI, and
    /// with busy polling; the receive livelock and its cure). Fairness between interfaces is
    /// `tests/router_fairness.rs`.
    #[command(name = "004")]
    P004(PaperArgs),
}

pub fn run(a: PaperCmd) -> anyhow::Result<()> {
    match a.paper {
        Paper::P000(args) => p000_cmd(args),
        Paper::P001(args) => p001_cmd(args),
        Paper::P003(args) => p003_cmd(args),
        Paper::P004(args) => p004_cmd(args),
    }
}

fn p000_cmd(args: PaperArgs) -> anyhow::Result<()> {
    args.check(&p000::FIGURES).map_err(lab_error)?;
    let out = simulated(
        "000",
        p000::count(&args),
        |done| p000::run(&args, done),
        |o| (o.simulations, o.packets),
    )?;
    for b in out.bounds.iter().filter(|b| b.line == "LL-WFQ") {
        println!(
            "Eq. 1 LL-WFQ at {:.0} % RT: Tmax {:.2} µs; RT wait mean {:.2}, p99 {:.2}, longest {:.2} µs",
            100.0 * b.share,
            b.tmax_us,
            b.mean_wait_us,
            b.p99_wait_us,
            b.max_wait_us
        );
    }
    print_claims(&out.claims, &args);
    Ok(())
}

/// Runs a paper's simulations under a progress bar of `count` steps, then prints how many
/// simulations and packets (`size` of the outcome) took how long.
fn simulated<T>(
    paper: &str,
    count: usize,
    run: impl FnOnce(&(dyn Fn() + Sync)) -> llr_lab::Result<T>,
    size: impl Fn(&T) -> (usize, u64),
) -> anyhow::Result<T> {
    let pb = progress(paper, count, "simulations");
    let t0 = std::time::Instant::now();
    let out = run(&|| pb.inc(1)).map_err(lab_error)?;
    pb.finish_and_clear();
    let (simulations, packets) = size(&out);
    println!(
        "{simulations} simulations, {:.1} M packets in {:.1} s",
        packets as f64 / 1e6,
        t0.elapsed().as_secs_f64()
    );
    Ok(out)
}

fn progress(paper: &str, count: usize, unit: &str) -> ProgressBar {
    let pb = ProgressBar::new(count as u64);
    pb.set_style(
        ProgressStyle::with_template(&format!(
            "paper {paper} {{bar:40}} {{pos}}/{{len}} {unit}, {{eta}} left"
        ))
        .expect("a valid template"),
    );
    pb
}

/// Prints each claim with its verdict, then how many hold and where the report is.
fn print_claims(claims: &[llr_lab::paper::Claim], args: &PaperArgs) {
    let held = claims.iter().filter(|c| c.holds).count();
    for c in claims {
        let mark = if c.holds { "holds" } else { "DOES NOT HOLD" };
        println!("{} [{mark}] {}: {}", c.figure, c.statement, c.check);
    }
    println!(
        "{held} of {} claims hold; report: {}",
        claims.len(),
        args.out.join("report.md").display()
    );
}

fn p004_cmd(args: PaperArgs) -> anyhow::Result<()> {
    args.check(&p004::FIGURES).map_err(lab_error)?;
    let out = simulated(
        "004",
        p004::count(&args),
        |done| p004::run(&args, done),
        |o| (o.simulations, o.packets),
    )?;
    for (cpus, fig) in [(1, 4), (p004::SMP_CPUS, 5)] {
        for l in &p004::LINES {
            let row: Vec<String> = (out.points.iter())
                .filter(|p| p.line == l.label && p.cpus == cpus)
                .map(|p| format!("{}→{:.2}", p.load, p.forwarded.0))
                .collect();
            if !row.is_empty() {
                println!("Fig. {fig} {}: forwarded {}", l.label, row.join(" "));
            }
        }
    }
    print_claims(&out.claims, &args);
    Ok(())
}

fn p003_cmd(args: PaperArgs) -> anyhow::Result<()> {
    args.check(&p003::FIGURES).map_err(lab_error)?;
    if args.wants("5") {
        p003_fig5(&args)?;
    }
    if p003_shares::wanted(&args) {
        let out = p003_shares::run().map_err(lab_error)?;
        p003_shares::write_report(&args.out, &out, args.wants("5")).map_err(lab_error)?;
        for (design, r) in [
            ("element-based", &out.element_based),
            ("flow-based", &out.flow_based),
        ] {
            println!(
                "Figs. 10–11 {design}: A : B = {:.3} (the goal: 2), A dropped {}",
                r.ratio(),
                r.dropped[0]
            );
        }
        print_claims(&out.claims, &args);
    }
    Ok(())
}

fn p003_fig5(args: &PaperArgs) -> anyhow::Result<()> {
    let pb = progress("003", p003::count(args), "points");
    let out = p003::run(args, || pb.inc(1)).map_err(lab_error)?;
    pb.finish_and_clear();
    p003::write_report(&args.out, args, &out).map_err(lab_error)?;
    for p in &out.points {
        println!(
            "Fig. 5: {:>5} eligible flows: {:.1} ± {:.1} ns per switch (paper's list: {:.0} ns)",
            p.flows,
            p.mean_ns,
            p.ci95_ns,
            p003::PAPER_FIXED_NS + p003::PAPER_PER_FLOW_NS * p.flows as f64
        );
    }
    println!(
        "fit: {:.1} + {:.2}·log2 n ns (R² {:.3}); linear {:.1} + {:.4}·n ns (R² {:.3})",
        out.log_fit.intercept,
        out.log_fit.slope,
        out.log_fit.r2,
        out.linear_fit.intercept,
        out.linear_fit.slope,
        out.linear_fit.r2
    );
    println!("{} switches measured", out.turns);
    print_claims(&out.claims, args);
    Ok(())
}

fn p001_cmd(args: PaperArgs) -> anyhow::Result<()> {
    args.check(&p001::FIGURES).map_err(lab_error)?;
    let out = simulated(
        "001",
        p001::count(&args),
        |done| p001::run(&args, done),
        |o| (o.simulations, o.packets),
    )?;
    for p in &p001::PAPER {
        if let Some(s) = out.results.get(p.figure, p.series, p.class, p.x) {
            println!(
                "Fig. {} {} {} at {}: paper {:.0} µs, ours {:.1} ± {:.1} µs ({:.3}×)",
                p.figure,
                p.series,
                p.class.to_uppercase(),
                p.x,
                p.us,
                s.mean_us,
                s.ci95_us,
                s.mean_us / p.us
            );
        }
    }
    print_claims(&out.claims, &args);
    Ok(())
}
