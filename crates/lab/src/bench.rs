//! Criterion benchmarks of the repository as a study: `cargo bench …` run with its output
//! directory set (`CRITERION_HOME`), and each benchmark's median read back from the files
//! criterion writes for it (`<group>/<function>/new/benchmark.json` and `estimates.json`).
//!
//! Needs the source tree and cargo: a figure that only a micro-benchmark can give (a lookup of
//! a few ns) is measured where criterion measures it, not re-timed here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;

use crate::{LabError, Result};

/// What one `cargo bench` run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchOutcome {
    /// `group/function` → the median time of one iteration divided by the elements it
    /// processes (its criterion throughput; 1 without one), ns.
    pub per_element_ns: BTreeMap<String, f64>,
}

impl BenchOutcome {
    /// The benchmark `id`'s ns per element (NaN when it did not run).
    pub fn ns(&self, id: &str) -> f64 {
        self.per_element_ns.get(id).copied().unwrap_or(f64::NAN)
    }
}

#[derive(Deserialize)]
struct BenchmarkFile {
    full_id: String,
    /// `{"Elements": n}`, `{"Bytes": n}`, … (criterion's `Throughput`), or null.
    #[serde(default)]
    throughput: Option<BTreeMap<String, u64>>,
}

#[derive(Deserialize)]
struct EstimatesFile {
    median: Estimate,
}

#[derive(Deserialize)]
struct Estimate {
    point_estimate: f64,
}

/// Runs `cargo <args>` in `repo` with criterion's files under `home`, then reads them.
pub fn run(repo: &Path, args: &[&str], home: &Path, stop: &AtomicBool) -> Result<BenchOutcome> {
    // A fresh directory: only this run's benchmarks are read back.
    let _ = std::fs::remove_dir_all(home);
    std::fs::create_dir_all(home).map_err(|e| LabError::io(home.display().to_string(), e))?;
    let home = std::path::absolute(home).map_err(|e| LabError::io("criterion home", e))?;
    let status = std::process::Command::new("cargo")
        .args(args)
        .current_dir(repo)
        .env("CRITERION_HOME", &home)
        .status()
        .map_err(|e| LabError::io("run cargo (the benchmarks need the source tree)", e))?;
    if stop.load(Ordering::Relaxed) {
        return Err(LabError::step(
            "cargo bench",
            anyhow::anyhow!("interrupted"),
        ));
    }
    if !status.success() {
        return Err(LabError::step(
            format!("cargo {}", args.join(" ")),
            anyhow::anyhow!("{status}"),
        ));
    }
    read(&home)
}

/// Every benchmark criterion left under `home`.
pub fn read(home: &Path) -> Result<BenchOutcome> {
    let mut out = BenchOutcome::default();
    for dir in new_dirs(home)? {
        let text = |f: &str| {
            let p = dir.join(f);
            std::fs::read_to_string(&p).map_err(|e| LabError::io(p.display().to_string(), e))
        };
        let bad = |f: &str, e: serde_json::Error| {
            LabError::step(format!("read {}", dir.join(f).display()), e)
        };
        let b: BenchmarkFile =
            serde_json::from_str(&text("benchmark.json")?).map_err(|e| bad("benchmark.json", e))?;
        let e: EstimatesFile =
            serde_json::from_str(&text("estimates.json")?).map_err(|e| bad("estimates.json", e))?;
        let per = match b.throughput.and_then(|t| t.get("Elements").copied()) {
            Some(n) if n > 0 => n as f64,
            _ => 1.0,
        };
        out.per_element_ns
            .insert(b.full_id, e.median.point_estimate / per);
    }
    Ok(out)
}

/// The `new` directories (a benchmark's latest results) under `home`, at any depth.
fn new_dirs(home: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![home.to_path_buf()];
    while let Some(d) = todo.pop() {
        let rd = std::fs::read_dir(&d).map_err(|e| LabError::io(d.display().to_string(), e))?;
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() {
                continue;
            }
            if p.file_name().is_some_and(|n| n == "new") && p.join("estimates.json").is_file() {
                out.push(p);
            } else {
                todo.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The files as criterion 0.5 writes them (trimmed): the median per iteration over the
    /// iteration's elements.
    #[test]
    fn reads_the_median_per_element() {
        let home = std::env::temp_dir().join(format!("llr-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let write = |id: &str, thr: &str, median: f64| {
            let d = home.join(id).join("new");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("benchmark.json"),
                format!(
                    r#"{{"group_id":"g","function_id":"f","value_str":null,"throughput":{thr},"full_id":"{id}","directory_name":"{id}","title":"{id}"}}"#
                ),
            )
            .unwrap();
            std::fs::write(
                d.join("estimates.json"),
                format!(
                    r#"{{"mean":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0}},"point_estimate":9.0,"standard_error":0.1}},"median":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0}},"point_estimate":{median},"standard_error":0.1}}}}"#
                ),
            )
            .unwrap();
        };
        write(
            "fulltable/lookup_v4_1M_batched",
            r#"{"Elements":32}"#,
            192.0,
        );
        write("g/plain", "null", 15.5);
        // The previous run's directory is not read.
        std::fs::create_dir_all(home.join("g/plain/base")).unwrap();
        let o = read(&home).unwrap();
        let _ = std::fs::remove_dir_all(&home);
        assert_eq!(o.ns("fulltable/lookup_v4_1M_batched"), 6.0);
        assert_eq!(o.ns("g/plain"), 15.5);
        assert!(o.ns("g/missing").is_nan());
        assert_eq!(o.per_element_ns.len(), 2);
    }
}
