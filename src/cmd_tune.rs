//! `llrouter tune`: host tuning after paper 002 — per-core load percentiles, the worker cores,
//! IRQ affinities, ring and socket-buffer sizes. Shows a plan; changes nothing without `--apply`.
//! The settings, their checks and the plan's text are llr_ops::tune's.

use crate::cli_util::to_usage;
use anyhow::{bail, Result};
pub use llr_ops::tune::TuneArgs;
use llr_ops::tune::{self, render, CheckError, TuneError};
use std::time::Duration;

/// A tuning error as a usage error (exit code 2) when it names an option, else as it is.
fn tune_err(e: TuneError) -> anyhow::Error {
    match tune::flag_error(e) {
        Ok(f) => to_usage(f),
        Err(e) => e.into(),
    }
}

pub fn run(args: TuneArgs) -> Result<()> {
    args.check().map_err(|e| match e {
        CheckError::Flag(f) => to_usage(f),
        e => e.into(),
    })?;
    let interval = Duration::from_millis(args.interval_ms);
    if args.watch {
        return watch(&args, interval);
    }
    let params = args.params();
    if !args.json {
        eprintln!(
            "sampling {} for {:.1} s ({} samples)…",
            args.proc_root.join("stat").display(),
            (args.samples - 1) as f64 * interval.as_secs_f64(),
            args.samples
        );
    }
    let aliases = tune::device_aliases(&args.sys_root, &args.devices);
    let input = tune::sample(
        &args.proc_root,
        args.samples,
        interval,
        &args.devices,
        &aliases,
        std::thread::sleep,
    )
    .map_err(tune_err)?;
    let plan = tune::plan(&input, &params).map_err(tune_err)?;
    let applied = if args.apply {
        Some(tune::apply(&plan, &args.proc_root))
    } else {
        None
    };
    if args.json {
        let v = serde_json::json!({ "plan": plan, "applied": applied });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render(&plan, &args.proc_root));
        match &applied {
            None if plan.irqs.iter().any(|i| i.change) => {
                println!("\n(nothing written; rerun with --apply to set the IRQ affinities)")
            }
            None => {}
            Some(done) => {
                println!();
                for a in done {
                    match &a.error {
                        None => println!("wrote {} to {}", a.mask, a.path.display()),
                        Some(e) => println!("FAILED {} to {}: {e}", a.mask, a.path.display()),
                    }
                }
                if done.is_empty() {
                    println!("nothing to write: every affinity already matches");
                }
            }
        }
    }
    if let Some(done) = &applied {
        let failed = done.iter().filter(|a| a.error.is_some()).count();
        if failed > 0 {
            bail!(
                "{failed} of {} IRQ affinities could not be written",
                done.len()
            );
        }
    }
    Ok(())
}

/// `tune --watch`: the cores' load statistics window after window (paper 002's continuous
/// monitoring), text or one JSON object per line, until Ctrl-C or `--count`.
fn watch(args: &TuneArgs, interval: Duration) -> Result<()> {
    use std::io::Write as _;
    use std::sync::atomic::Ordering;
    let stop = llr_io::sys::install_stop_signals();
    let window_s = (args.samples - 1) as f64 * interval.as_secs_f64();
    if !args.json {
        eprintln!(
            "watching {} every {} ms, a window of {} samples ({window_s:.1} s); Ctrl-C stops",
            args.proc_root.join("stat").display(),
            args.interval_ms,
            args.samples
        );
    }
    let pct = |x: f64| format!("{:.1}", 100.0 * x);
    let mut out = std::io::stdout().lock();
    tune::watch(
        &args.proc_root,
        args.samples,
        interval,
        args.count,
        std::thread::sleep,
        || stop.load(Ordering::Relaxed),
        |w, loads| {
            let r = if args.json {
                let v = serde_json::json!({ "window": w, "seconds": window_s, "cores": loads });
                writeln!(out, "{v}")
            } else {
                let mut t = format!(
                    "window {w} ({window_s:.1} s)\n  core  mean %  p50 %  p90 %  p99 %  max %  \
                     exp λ  P≥p99  exp P≥p99  log-log α (R²)  tail\n"
                );
                for l in loads {
                    let (lambda, c99, e99, alpha, verdict) = match &l.tail {
                        Some(f) => (
                            format!("{:.1}", f.exp_rate),
                            format!("{:.4}", f.ccdf_p99),
                            format!("{:.4}", f.exp_ccdf_p99),
                            format!("{:.2} ({:.2})", f.loglog_alpha, f.loglog_r2),
                            if f.long_tail {
                                "long (heavier than exponential)"
                            } else {
                                "not heavier than exponential"
                            },
                        ),
                        None => (
                            "-".into(),
                            "-".into(),
                            "-".into(),
                            "-".into(),
                            "too few samples or never busy",
                        ),
                    };
                    t += &format!(
                        "  {:>4}  {:>6}  {:>5}  {:>5}  {:>5}  {:>5}  {lambda:>5}  {c99:>6}  {e99:>9}  {alpha:>14}  {verdict}\n",
                        l.core,
                        pct(l.mean),
                        pct(l.p50),
                        pct(l.p90),
                        pct(l.p99),
                        pct(l.max)
                    );
                }
                write!(out, "{t}")
            };
            r.and_then(|_| out.flush())
                .map_err(|e| TuneError::new("stdout", e.to_string()))
        },
    )
    .map_err(tune_err)?;
    Ok(())
}
