//! The kernel × NIC matrix (`scripts/vm/matrix.sh`: Debian's kernel packages booted in QEMU
//! with virtio-net and igb NICs, `scripts/vm/guest-check.sh` in each guest) as a results
//! study: runs the script and reads the rows it writes tab-separated beside its table.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use crate::Result;

/// One row of the matrix: a kernel, a NIC and a socket mode, as the script's table names them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MatrixRow {
    /// The kernel package's short name (`6.1`, `6.12-rt`, `bpo`).
    pub kernel: String,
    /// NIC model and mode (`virtio-mq/auto`).
    pub row: String,
    pub release: String,
    pub driver: String,
    pub xdp: String,
    /// The AF_XDP sockets' mode (`zero-copy`, `copy`).
    pub mode: String,
    pub queues: String,
    pub mtu9000: String,
    /// `passed/total`.
    pub checks: String,
    /// The failed checks' names, or why the row has none.
    pub failed: String,
}

impl MatrixRow {
    /// Every check of the row ran and passed.
    pub fn passed(&self) -> bool {
        let mut it = self.checks.split('/').map(|n| n.trim().parse::<u32>());
        matches!((it.next(), it.next(), it.next()), (Some(Ok(a)), Some(Ok(b)), None) if a == b && b > 0)
            && self.failed.trim().is_empty()
    }
}

/// What a run of the matrix gave: its rows and its own Markdown table.
#[derive(Debug, Clone, Default)]
pub struct MatrixOutcome {
    pub rows: Vec<MatrixRow>,
    pub md: String,
}

/// Runs `bash <args…>` (the matrix script) in `repo` with its table and logs in `out`, and
/// reads the rows back. A row that failed is a result, not an error.
pub fn run(repo: &Path, args: &[&str], out: &Path, stop: &AtomicBool) -> Result<MatrixOutcome> {
    let out = crate::script::out_dir(out)?;
    let (md, tsv, logs) = (
        out.join("vm-matrix.md"),
        out.join("vm-matrix.tsv"),
        out.join("logs"),
    );
    let env = [("OUT", md.as_path()), ("LOG_DIR", logs.as_path())];
    let r = crate::script::run(repo, args, &env, (&tsv, Some(&md)), stop)?;
    Ok(MatrixOutcome {
        rows: r.rows,
        md: r.md,
    })
}

/// The rows of a `vm-matrix.tsv`.
pub fn read(tsv: &Path) -> Result<Vec<MatrixRow>> {
    crate::script::read(tsv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pass_only_with_every_check() {
        let row = |checks: &str, failed: &str| MatrixRow {
            checks: checks.into(),
            failed: failed.into(),
            ..MatrixRow::default()
        };
        assert!(row("15/15", "").passed());
        assert!(!row("14/15", "rt").passed());
        assert!(!row("15/15", "guest exited 1").passed());
        assert!(!row("0/0", "").passed());
        assert!(!row("-", "guest exited 255 after 600s").passed());
    }

    #[test]
    fn the_scripts_rows_are_read() {
        let dir = std::env::temp_dir().join(format!("llr-matrix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tsv = dir.join("vm-matrix.tsv");
        std::fs::write(
            &tsv,
            "kernel\trow\trelease\tdriver\txdp\tmode\tqueues\tmtu9000\tchecks\tfailed\n\
             6.1\tvirtio/auto\tLinux 6.1.0\tvirtio_net\tnative\tcopy\tenp0s10:1\trefused\t15/15\t\n\
             bpo\tigb/off\t-\t-\t-\t-\t-\t-\t-\tguest exited 1 after 20s; log x\n",
        )
        .unwrap();
        let rows = read(&tsv).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].release, "Linux 6.1.0");
        assert!(rows[0].passed());
        assert!(!rows[1].passed());
        assert!(rows[1].failed.starts_with("guest exited"));
    }
}
