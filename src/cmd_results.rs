//! `llrouter results`: runs the headline studies of docs/results.md (`llr_lab::results`),
//! stores each one's figures in docs/results/<topic>.toml and renders docs/results.md's
//! generated blocks and README.md's results table from them.

use anyhow::{bail, Result};
use clap::Args;
use llr_io::sys::install_stop_signals;
use llr_lab::results::{self, TOPICS};
use llr_lab::NoProgress;
use std::path::PathBuf;

use crate::cli_util::{lab_error, usage};

/// Regenerate the results tables from their studies.
#[derive(Debug, Args)]
pub struct ResultsArgs {
    /// Topics to run (default: every one; `--list` names them).
    pub topics: Vec<String>,
    /// List the topics with their commands and exit.
    #[arg(long)]
    pub list: bool,
    /// Only render README.md and docs/results.md from the stored results (no study runs).
    #[arg(long, conflicts_with = "check")]
    pub render: bool,
    /// Exit 1 if README.md or docs/results.md differ from what the stored results render.
    #[arg(long)]
    pub check: bool,
    /// Runs of each study, back to back (a figure is a result once a second run reproduces
    /// it within 15 %; the tables say which are not).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub runs: u32,
    /// The repository (holds docs/results.md and README.md).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Where the studies write their own files (results.csv, plots, reports).
    #[arg(long, default_value = "target/results")]
    pub out: PathBuf,
}

pub fn run(a: ResultsArgs) -> Result<()> {
    if a.list {
        for t in TOPICS {
            println!("{:<15} {}", t.name, t.title);
            for line in t.command().lines() {
                println!("{:<15} {line}", "");
            }
        }
        return Ok(());
    }
    if !a.repo.join("docs/results.md").is_file() || !a.repo.join("README.md").is_file() {
        return Err(usage(
            "repo",
            format!(
                "{} holds no docs/results.md and README.md: run from the repository or give --repo",
                a.repo.display()
            ),
        ));
    }
    if a.check {
        let stale = results::check_docs(&a.repo).map_err(lab_error)?;
        if !stale.is_empty() {
            let names: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
            bail!(
                "{} differ from the stored results (docs/results/*.toml): `llrouter results --render`",
                names.join(" and ")
            );
        }
        println!("README.md and docs/results.md match the stored results");
        return Ok(());
    }
    if !a.render {
        let mut chosen = Vec::new();
        for name in &a.topics {
            let t = results::topic(name).ok_or_else(|| {
                let names: Vec<&str> = TOPICS.iter().map(|t| t.name).collect();
                usage(
                    "topic",
                    format!("no topic `{name}` (topics: {})", names.join(", ")),
                )
            })?;
            chosen.push(t);
        }
        if chosen.is_empty() {
            chosen = TOPICS.iter().collect();
        }
        if chosen.iter().any(|t| t.needs_root()) {
            llr_lab::options::need_root().map_err(lab_error)?;
        }
        let stop = install_stop_signals();
        for t in chosen {
            eprintln!("== {}: {}", t.name, t.command());
            let r = t
                .run(&a.repo, &a.out, a.runs, stop, &NoProgress)
                .map_err(lab_error)?;
            let path = results::save(&a.repo, &r).map_err(lab_error)?;
            for f in &r.figures {
                println!("{}: {} — {}", f.what, f.measured(), f.status_text());
            }
            println!("stored {} ({:.0} s)", path.display(), r.secs);
            // After each topic, so an interrupted run keeps what it measured.
            results::write_docs(&a.repo).map_err(lab_error)?;
        }
    } else {
        results::write_docs(&a.repo).map_err(lab_error)?;
    }
    println!("rendered README.md and docs/results.md");
    Ok(())
}
