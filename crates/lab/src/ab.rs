//! Two builds of the router side by side (`scripts/ab.sh`) as a results study: runs the script
//! and reads the rounds it writes tab-separated. With the same revision on both sides it
//! measures the noise between builds that a change's ratios are read against.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde::Deserialize;

use crate::Result;

/// One point of one round with one build, as `scripts/ab.sh` writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AbRow {
    /// `old` or `new`.
    pub side: String,
    /// `flat` (2 Mpps offered) or `overload` (the script's OVERLOAD).
    pub point: String,
    pub round: u32,
    pub pps: f64,
    pub worker_ns: f64,
    pub loss_rt_pct: f64,
    pub rt_p99_us: f64,
}

/// What a run of the script gave: its rounds and its own table.
#[derive(Debug, Clone, Default)]
pub struct AbOutcome {
    pub rows: Vec<AbRow>,
    pub md: String,
}

impl AbOutcome {
    /// `f` of each build at `point`, one value per round and build (old first).
    pub fn values(&self, point: &str, f: fn(&AbRow) -> f64) -> Vec<f64> {
        ["old", "new"]
            .iter()
            .flat_map(|side| {
                (self.rows.iter())
                    .filter(move |r| r.point == point && r.side == *side)
                    .map(f)
            })
            .collect()
    }

    /// New ÷ old of `f` at `point`, round by round (NaN where a round lacks a side or old's
    /// value is 0).
    pub fn ratios(&self, point: &str, f: fn(&AbRow) -> f64) -> Vec<f64> {
        let of = |side: &str, round: u32| {
            (self.rows.iter())
                .find(|r| r.point == point && r.side == side && r.round == round)
                .map(f)
        };
        let mut rounds: Vec<u32> = (self.rows.iter())
            .filter(|r| r.point == point)
            .map(|r| r.round)
            .collect();
        rounds.sort_unstable();
        rounds.dedup();
        rounds
            .into_iter()
            .map(|k| match (of("old", k), of("new", k)) {
                (Some(o), Some(n)) if o != 0.0 => n / o,
                _ => f64::NAN,
            })
            .collect()
    }
}

/// Runs `bash <args…>` (`scripts/ab.sh` and its revisions) in `repo`, its rounds and logs in
/// `out`, its worktrees and builds in the repository's `target/ab` (kept between runs, so that
/// a second run rebuilds only what differs).
pub fn run(repo: &Path, args: &[&str], out: &Path, stop: &AtomicBool) -> Result<AbOutcome> {
    let out = crate::script::out_dir(out)?;
    let build = repo.join("target").join("ab");
    let env = [("OUT", out.as_path()), ("BUILD_DIR", build.as_path())];
    let r = crate::script::run(
        repo,
        args,
        &env,
        (&out.join("ab.tsv"), Some(&out.join("ab.md"))),
        stop,
    )?;
    Ok(AbOutcome {
        rows: r.rows,
        md: r.md,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_rounds_are_read_and_paired_by_round() {
        let dir = std::env::temp_dir().join(format!("llr-ab-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tsv = dir.join("ab.tsv");
        // Round 2 ran new first, as the script alternates; round 3 lost its old flat point.
        std::fs::write(
            &tsv,
            "side\tpoint\tround\tpps\tworker_ns\tloss_rt_pct\trt_p99_us\n\
             old\tflat\t1\t1000000\t1000\t0\t50\n\
             new\tflat\t1\t1100000\t900\t0\t45\n\
             new\tflat\t2\t900000\t1100\t0\t60\n\
             old\tflat\t2\t1200000\t800\t0.5\t40\n\
             new\tflat\t3\t1000000\t1000\t0\t50\n",
        )
        .unwrap();
        let rows: Vec<AbRow> = crate::script::read(&tsv).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let o = AbOutcome {
            rows,
            md: String::new(),
        };
        let r = o.ratios("flat", |r| r.pps);
        assert_eq!(r.len(), 3);
        assert!((r[0] - 1.1).abs() < 1e-12 && (r[1] - 0.75).abs() < 1e-12);
        assert!(r[2].is_nan());
        assert_eq!(
            o.values("flat", |r| r.loss_rt_pct),
            [0.0, 0.5, 0.0, 0.0, 0.0]
        );
        assert!(o.ratios("overload", |r| r.pps).is_empty());
    }
}
