//! The papers' experiments, one command each (`llrouter paper NNN`): each figure rebuilt with
//! the paper's parameters, replicated with independent seeds, and reported beside the paper's
//! values and claims (`report.md`, `results.csv`, one PNG per panel).
//!
//! A figure is a set of lines ([`Series`]: a strategy and its weights, named as in the paper)
//! over one parameter ([`Axis`]); every point is simulated `replications` times with seeds 1..=R
//! (the same seeds for every line, so lines differ by strategy, not by luck). A point's value is
//! the mean over replications of each class's mean latency, with the 95 % confidence interval of
//! Student's t over the replications, as the papers give theirs.
//!
//! The paper's claims about a figure are [`Claim`]s: a sentence of the paper and the check of it
//! against our points. A claim that fails is reported, not hidden: the report says which.

pub mod p000;
pub mod p001;
pub mod p003;
pub mod p003_shares;
pub mod p004;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use llr_core::sched::StrategyKind;
use llr_sim::sweep::SweepPoint;
use serde::Serialize;

use crate::plot::{line_chart, Series as PlotSeries};
use crate::report::Fixed;
use crate::{LabError, Result};

/// The swept parameter of a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Share of RT traffic, 0..1.
    RtShare,
    /// Offered load relative to the cores' capacity.
    Utilization,
    /// Time slice Δt, µs.
    TimeSliceUs,
    /// Offered load, Mpps.
    OfferedMpps,
}

impl Axis {
    pub fn label(self) -> &'static str {
        match self {
            Axis::RtShare => "real-time share",
            Axis::Utilization => "utilization",
            Axis::TimeSliceUs => "time slice Δt (µs)",
            Axis::OfferedMpps => "offered load (Mpps)",
        }
    }
}

/// One line of a figure, named as in the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Series {
    pub label: &'static str,
    pub strategy: StrategyKind,
    /// RT:BE weights (time-slice relation) for the weighted strategies.
    pub weights: Option<(u32, u32)>,
    /// The panel it is drawn in ('a' or 'b', as in the paper).
    pub panel: char,
}

/// One figure: its lines over the values of one parameter.
#[derive(Debug, Clone)]
pub struct Figure {
    /// "5" for Fig. 5.
    pub id: &'static str,
    pub title: &'static str,
    pub axis: Axis,
    pub values: Vec<f64>,
    pub series: Vec<Series>,
}

/// A point of a figure for one class: the mean latency over the replications and its 95 %
/// confidence interval's half-width.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stat {
    pub figure: String,
    pub series: String,
    pub class: String,
    pub x: f64,
    pub mean_us: f64,
    pub ci95_us: f64,
    pub replications: u32,
    /// Packets of the class dropped, percent of those sent (over all replications).
    pub loss_pct: f64,
}

/// A number the paper states, for the comparison table.
#[derive(Debug, Clone, Copy)]
pub struct PaperValue {
    pub figure: &'static str,
    pub series: &'static str,
    pub class: &'static str,
    pub x: f64,
    pub us: f64,
}

/// A statement of the paper and whether our points agree with it.
#[derive(Debug, Clone)]
pub struct Claim {
    pub figure: &'static str,
    /// The paper's statement, as it says it.
    pub statement: &'static str,
    /// How we checked it, with the numbers.
    pub check: String,
    pub holds: bool,
}

/// Every figure's points, and lookups into them.
#[derive(Debug, Clone, Default)]
pub struct Results {
    pub stats: Vec<Stat>,
}

impl Results {
    /// The point of `series`' `class` at `x` in `figure` (x compared to 1e-9).
    pub fn get(&self, figure: &str, series: &str, class: &str, x: f64) -> Option<&Stat> {
        self.stats.iter().find(|s| {
            s.figure == figure && s.series == series && s.class == class && (s.x - x).abs() < 1e-9
        })
    }

    /// The mean of a point (NaN when it does not exist, so every comparison with it fails).
    pub fn mean(&self, figure: &str, series: &str, class: &str, x: f64) -> f64 {
        self.get(figure, series, class, x)
            .map_or(f64::NAN, |s| s.mean_us)
    }

    /// The half-width of a point's interval (NaN when it does not exist).
    pub fn ci(&self, figure: &str, series: &str, class: &str, x: f64) -> f64 {
        self.get(figure, series, class, x)
            .map_or(f64::NAN, |s| s.ci95_us)
    }
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom (two-sided 95 %). A table,
/// not a statistics crate: the one crate that has it (statrs) brings in a linear-algebra
/// library for these 30 numbers.
pub fn t975(df: u32) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df as usize - 1],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

/// Mean and 95 % half-width of `xs` (the half-width is infinite for fewer than two).
pub fn mean_ci(xs: &[f64]) -> (f64, f64) {
    let n = xs.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let m = xs.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (m, f64::INFINITY);
    }
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    (m, t975(n as u32 - 1) * (var / n as f64).sqrt())
}

/// How a paper's figures are run: replications per point, packets per replication, threads.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct PaperArgs {
    /// Figures to run, comma-separated (default: every figure of the paper).
    #[cfg_attr(feature = "clap", arg(long, value_delimiter = ','))]
    pub fig: Vec<String>,
    /// Independent replications per point (seeds 1..=R), 2..=100: the confidence intervals
    /// come from their spread.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 10))]
    pub replications: u32,
    /// Packets offered per replication.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 400_000))]
    pub packets: u64,
    /// Output directory for report.md, results.csv and the plots.
    #[cfg_attr(feature = "clap", arg(long, default_value = "paper-out"))]
    pub out: PathBuf,
    /// Worker threads (default: all cores).
    #[cfg_attr(feature = "clap", arg(long))]
    pub jobs: Option<usize>,
}

impl PaperArgs {
    /// Checks the settings; `known` are the paper's figure ids.
    pub fn check(&self, known: &[&str]) -> Result<()> {
        if !(2..=100).contains(&self.replications) {
            return Err(LabError::invalid(
                "replications",
                format!("{}: must be within 2..=100", self.replications),
            ));
        }
        if !(1_000..=100_000_000).contains(&self.packets) {
            return Err(LabError::invalid(
                "packets",
                format!("{}: must be within 1000..=100000000", self.packets),
            ));
        }
        for f in &self.fig {
            if !known.contains(&f.as_str()) {
                return Err(LabError::invalid(
                    "fig",
                    format!("`{f}`: this paper's figures are {}", known.join(", ")),
                ));
            }
        }
        Ok(())
    }

    /// Whether figure `id` is asked for.
    pub fn wants(&self, id: &str) -> bool {
        self.fig.is_empty() || self.fig.iter().any(|f| f == id)
    }
}

/// One simulation: figure `fig`'s line `series` at one value, one replication.
#[derive(Debug, Clone)]
pub struct Job {
    pub fig: usize,
    pub series: usize,
    pub point: SweepPoint,
}

/// Every simulation of `figures`: figure × line × value × replication, the replications of a
/// point next to each other (as [`fold`] takes them); `args(series, axis, x, packets, seed)`
/// gives a paper's settings of one point.
pub fn jobs(
    figures: &[Figure],
    replications: u32,
    packets: u64,
    args: impl Fn(&Series, Axis, f64, u64, u64) -> llr_sim::args::SimArgs,
) -> Result<Vec<Job>> {
    let mut out = Vec::new();
    for (fi, fig) in figures.iter().enumerate() {
        for (si, series) in fig.series.iter().enumerate() {
            for &x in &fig.values {
                for rep in 0..replications {
                    let config = args(series, fig.axis, x, packets, 1 + u64::from(rep))
                        .to_config()
                        .map_err(LabError::Invalid)?;
                    out.push(Job {
                        fig: fi,
                        series: si,
                        point: SweepPoint {
                            strategy: series.strategy,
                            value: x,
                            config,
                        },
                    });
                }
            }
        }
    }
    Ok(out)
}

/// What [`simulate`] ran and gave.
pub struct Simulated {
    pub jobs: Vec<Job>,
    pub sims: Vec<llr_sim::SimResult>,
    pub results: Results,
    /// Packets offered over all simulations.
    pub packets: u64,
}

/// Simulates every point of `figs` ([`jobs`], with `point` the paper's settings) on
/// `args.jobs` threads and folds the replications; `done` is called after each simulation.
pub fn simulate(
    figs: &[Figure],
    args: &PaperArgs,
    point: impl Fn(&Series, Axis, f64, u64, u64) -> llr_sim::args::SimArgs,
    done: impl Fn() + Sync,
) -> Result<Simulated> {
    let jobs = jobs(figs, args.replications, args.packets, point)?;
    let points: Vec<SweepPoint> = jobs.iter().map(|j| j.point.clone()).collect();
    let (sims, _) = llr_sim::sweep::run(&points, args.jobs.unwrap_or(0), done)
        .map_err(|e| LabError::Failed(format!("simulation: {e}")))?;
    let results = fold(&jobs, figs, &sims, args.replications);
    Ok(Simulated {
        packets: points.iter().map(|p| p.config.packets).sum(),
        jobs,
        sims,
        results,
    })
}

/// Folds the results of `jobs` (the replications of a point next to each other, as
/// [`p001::jobs`] builds them) into [`Stat`]s.
pub fn fold(
    jobs: &[Job],
    figures: &[Figure],
    results: &[llr_sim::SimResult],
    replications: u32,
) -> Results {
    let mut stats = Vec::new();
    let reps = replications as usize;
    for (chunk, runs) in jobs.chunks(reps).zip(results.chunks(reps)) {
        let first = &chunk[0];
        let fig = &figures[first.fig];
        let series = fig.series[first.series].label;
        for (ci, class) in runs[0].classes.iter().enumerate() {
            let means: Vec<f64> = runs.iter().map(|r| r.classes[ci].mean_ns / 1e3).collect();
            let (mean_us, ci95_us) = mean_ci(&means);
            let sent: u64 = runs.iter().map(|r| r.classes[ci].sent).sum();
            let dropped: u64 = runs.iter().map(|r| r.classes[ci].dropped).sum();
            stats.push(Stat {
                figure: fig.id.to_string(),
                series: series.to_string(),
                class: class.name.clone(),
                x: first.point.value,
                mean_us,
                ci95_us,
                replications,
                loss_pct: if sent > 0 {
                    100.0 * dropped as f64 / sent as f64
                } else {
                    0.0
                },
            });
        }
    }
    Results { stats }
}

/// Writes `results.csv`, one PNG per figure panel, and `report.md`.
pub fn write_report(
    out: &Path,
    heading: &str,
    setup: &str,
    figures: &[Figure],
    res: &Results,
    paper: &[PaperValue],
    claims: &[Claim],
) -> Result<()> {
    std::fs::create_dir_all(out)
        .map_err(|e| LabError::io(format!("create {}", out.display()), e))?;
    #[derive(Serialize)]
    struct Line<'a> {
        figure: &'a str,
        series: &'a str,
        class: &'a str,
        x: Fixed<4>,
        mean_us: Fixed<3>,
        ci95_us: Fixed<3>,
        replications: u32,
        loss_pct: Fixed<3>,
    }
    let lines: Vec<Line<'_>> = (res.stats.iter())
        .map(|s| Line {
            figure: &s.figure,
            series: &s.series,
            class: &s.class,
            x: Fixed(s.x),
            mean_us: Fixed(s.mean_us),
            ci95_us: Fixed(s.ci95_us),
            replications: s.replications,
            loss_pct: Fixed(s.loss_pct),
        })
        .collect();
    crate::report::write_csv(
        &out.join("results.csv"),
        &lines,
        "figure,series,class,x,mean_us,ci95_us,replications,loss_pct",
    )?;
    let mut md = format!("# {heading}\n\n{setup}\n");
    for fig in figures {
        let _ = writeln!(md, "\n## Fig. {}: {}\n", fig.id, fig.title);
        for panel in ['a', 'b'] {
            let series: Vec<&Series> = fig.series.iter().filter(|s| s.panel == panel).collect();
            if series.is_empty() {
                continue;
            }
            // A figure drawn in one panel is named by its id alone (paper 000's "7a").
            let one = fig.series.iter().all(|s| s.panel == panel);
            let (png, name) = if one {
                (format!("fig{}.png", fig.id), format!("Fig. {}", fig.id))
            } else {
                (
                    format!("fig{}{panel}.png", fig.id),
                    format!("Fig. {}({panel})", fig.id),
                )
            };
            let lines = plot_lines(fig, &series, res);
            line_chart(
                &out.join(&png),
                &format!("{name}: {}", fig.title),
                fig.axis.label(),
                "mean latency (µs)",
                &lines,
                // The papers draw these on linear axes; T+ puts every mean within 2× in paper
                // 001's. Past saturation a full ring's wait is 100× the rest: logarithmic.
                fig.axis == Axis::OfferedMpps,
            )
            .map_err(|e| LabError::Failed(format!("plot {png}: {e}")))?;
            let _ = writeln!(md, "![{name}]({png})\n");
        }
        md.push_str(&table(fig, res));
    }
    let compared: Vec<&PaperValue> = (paper.iter())
        .filter(|p| figures.iter().any(|f| f.id == p.figure))
        .collect();
    if !compared.is_empty() {
        md.push_str("\n## Against the paper's numbers\n\n");
        md.push_str(
            "| figure | line | class | x | paper µs | ours µs (95 % CI) | ours / paper |\n",
        );
        md.push_str("|---|---|---|---|---|---|---|\n");
    }
    for p in compared {
        let ours = res.get(p.figure, p.series, p.class, p.x);
        let (m, ci) = ours.map_or((f64::NAN, f64::NAN), |s| (s.mean_us, s.ci95_us));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.0} | {m:.1} ± {ci:.1} | {:.3} |",
            p.figure,
            p.series,
            p.class,
            p.x,
            p.us,
            m / p.us
        );
    }
    finish_report(out, md, claims)
}

/// A markdown table of the claims with their verdicts.
pub(crate) fn claims_table(claims: &[Claim]) -> String {
    let mut md =
        String::from("| figure | the paper says | our check | holds |\n|---|---|---|---|\n");
    for c in claims {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            c.figure,
            c.statement,
            c.check,
            if c.holds { "yes" } else { "**no**" }
        );
    }
    md
}

/// Appends the claims' table to `md` and writes it as `out/report.md`.
pub(crate) fn finish_report(out: &Path, mut md: String, claims: &[Claim]) -> Result<()> {
    md.push_str("\n## The paper's claims\n\n");
    md.push_str(&claims_table(claims));
    let path = out.join("report.md");
    std::fs::write(&path, md).map_err(|e| LabError::io(format!("write {}", path.display()), e))
}

fn plot_lines(fig: &Figure, series: &[&Series], res: &Results) -> Vec<PlotSeries> {
    let mut out = Vec::new();
    for s in series {
        for (ci, class) in ["rt", "be"].iter().enumerate() {
            let points = (fig.values.iter())
                .map(|&x| (x, res.mean(fig.id, s.label, class, x)))
                .collect();
            out.push(PlotSeries {
                label: format!("{} {}", s.label, class.to_uppercase()),
                points,
                group: s.label.to_string(),
                class: ci,
            });
        }
    }
    out
}

/// A markdown table: one row per value, one column per line and class, mean ± CI.
fn table(fig: &Figure, res: &Results) -> String {
    let mut t = format!("| {} |", fig.axis.label());
    let mut rule = String::from("|---|");
    for s in &fig.series {
        let _ = write!(t, " {} RT | {} BE |", s.label, s.label);
        rule.push_str("---|---|");
    }
    t.push('\n');
    t.push_str(&rule);
    t.push('\n');
    for &x in &fig.values {
        let _ = write!(t, "| {x} |");
        for s in &fig.series {
            for class in ["rt", "be"] {
                let _ = write!(
                    t,
                    " {:.1} ± {:.1} |",
                    res.mean(fig.id, s.label, class, x),
                    res.ci(fig.id, s.label, class, x)
                );
            }
        }
        t.push('\n');
    }
    t
}

/// The papers' tests at reduced size.
#[cfg(test)]
pub(crate) mod reduced {
    use super::PaperArgs;

    /// Runs `run` with `fig` at 3 replications of 20 000 packets into a directory of its own;
    /// returns the outcome, whether every one of `files` was written, and the report. The
    /// directory is removed.
    pub fn run<T>(
        paper: &str,
        fig: &[&str],
        files: &[&str],
        run: impl FnOnce(&PaperArgs) -> crate::Result<T>,
    ) -> (T, bool, String) {
        let out = std::env::temp_dir().join(format!("llr-paper{paper}-{}", std::process::id()));
        let args = PaperArgs {
            fig: fig.iter().map(|f| f.to_string()).collect(),
            replications: 3,
            packets: 20_000,
            out: out.clone(),
            jobs: Some(2),
        };
        let o = run(&args);
        let exist = files.iter().all(|f| out.join(f).is_file());
        let report = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&out);
        (o.expect("the run"), exist, report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_and_intervals() {
        assert_eq!(t975(9), 2.262);
        assert_eq!(t975(1000), 1.960);
        let (m, h) = mean_ci(&[1.0, 2.0, 3.0]);
        assert!((m - 2.0).abs() < 1e-12);
        // sd 1, n 3: 4.303 / sqrt(3).
        assert!((h - 4.303 / 3f64.sqrt()).abs() < 1e-9, "{h}");
        assert!(mean_ci(&[5.0]).1.is_infinite());
    }
}
