//! The project's shell scripts as results studies (`scripts/vm/matrix.sh`, `scripts/ab.sh`):
//! each runs in the repository, writes its rows tab-separated beside its own Markdown table,
//! and the study reads both back, typed.

use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::de::DeserializeOwned;

use crate::{LabError, Result};

/// A script's run: its rows from `tsv` and its table from `md` (empty without one).
pub struct ScriptRun<T> {
    pub rows: Vec<T>,
    pub md: String,
}

/// Runs `bash <args…>` in `repo` with `env` set, then reads `tsv` and `md` (if the script
/// writes one), which the run must have written afresh (both are removed first). A script that exits with an error after
/// writing rows still gives them: a failed row is a result; its status only matters when it
/// wrote none.
pub fn run<T: DeserializeOwned>(
    repo: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
    (tsv, md): (&Path, Option<&Path>),
    stop: &AtomicBool,
) -> Result<ScriptRun<T>> {
    for f in std::iter::once(tsv).chain(md) {
        let _ = std::fs::remove_file(f);
    }
    let what = || format!("bash {}", args.join(" "));
    let status: ExitStatus = std::process::Command::new("bash")
        .args(args)
        .current_dir(repo)
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .status()
        .map_err(|e| LabError::io(what(), e))?;
    if stop.load(Ordering::Relaxed) {
        return Err(LabError::step(what(), anyhow::anyhow!("interrupted")));
    }
    let rows = read(tsv).map_err(|e| match status.success() {
        true => e,
        false => LabError::step(what(), anyhow::anyhow!("{status}, and no rows: {e}")),
    })?;
    let md = match md {
        Some(md) => {
            std::fs::read_to_string(md).map_err(|e| LabError::io(md.display().to_string(), e))?
        }
        None => String::new(),
    };
    Ok(ScriptRun { rows, md })
}

/// `out`, created and made absolute: the scripts run in the repository, so a relative path
/// handed to them in their environment would point elsewhere.
pub fn out_dir(out: &Path) -> Result<std::path::PathBuf> {
    std::fs::create_dir_all(out).map_err(|e| LabError::io(out.display().to_string(), e))?;
    std::path::absolute(out).map_err(|e| LabError::io(out.display().to_string(), e))
}

/// The rows of a tab-separated file with a header line; none is an error.
pub fn read<T: DeserializeOwned>(tsv: &Path) -> Result<Vec<T>> {
    let what = || format!("read {}", tsv.display());
    let mut r = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .quoting(false)
        .from_path(tsv)
        .map_err(|e| LabError::step(what(), e))?;
    let rows = r
        .deserialize()
        .collect::<std::result::Result<Vec<T>, _>>()
        .map_err(|e| LabError::step(what(), e))?;
    if rows.is_empty() {
        return Err(LabError::Failed(format!("{}: no rows", tsv.display())));
    }
    Ok(rows)
}
