//! Listings at scale (`scripts/listing-scale.sh`) as a results study: what listing the full
//! table over the control socket costs the traffic the worker forwards meanwhile. The script
//! loads the table into a testbed's router namespace, forwards a light stream in windows that
//! alternate between an idle control plane, `ctl show fib --all -j` listed back to back, and a
//! plain loop on the clients' core, and writes one row per window.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde::Deserialize;

use crate::Result;

/// One window, as the script writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ListingRow {
    /// The worker's wake mode (`interrupt`, `busy`).
    pub wake: String,
    /// `yes` when the router ran with `--shield`.
    pub shield: String,
    /// `idle`, `listing` or `hog`.
    pub mode: String,
    pub round: u32,
    pub sent: u64,
    pub received: u64,
    /// RT one-way latency p99 at the sink, µs (the sink shares the clients' core).
    pub rt_p99_sink_us: f64,
    /// The router's RT ring sojourn p99 over the window, its histogram bucket's bound, µs.
    pub ring_p99_us: f64,
    /// The worker's longest grant since it started, µs.
    pub stall_us: f64,
    pub ksoftirqd0_ms: f64,
    /// Time the hypervisor took from the worker's core during the window, ms.
    pub steal1_ms: f64,
    /// The worker threads' involuntary context switches during the window.
    pub preempted: u64,
}

impl ListingRow {
    pub fn lost(&self) -> f64 {
        self.sent.saturating_sub(self.received) as f64
    }
}

/// What one run of the script gave: its windows, in order.
#[derive(Debug, Clone, Default)]
pub struct ListingOutcome {
    pub rows: Vec<ListingRow>,
}

impl ListingOutcome {
    /// `f` of every window of `mode`, in order.
    pub fn col(&self, mode: &str, f: fn(&ListingRow) -> f64) -> Vec<f64> {
        (self.rows.iter())
            .filter(|r| r.mode == mode)
            .map(f)
            .collect()
    }

    /// How the router ran: wake mode and shield.
    pub fn setup(&self) -> String {
        match self.rows.first() {
            Some(r) if r.shield == "yes" => format!("--wake {}, --shield", r.wake),
            Some(r) => format!("--wake {}, no shield", r.wake),
            None => "no windows".into(),
        }
    }

    /// The windows as a Markdown table.
    pub fn md(&self) -> String {
        let mut s = format!(
            "\n**{}**\n\n| round | window | sent | lost | RT ring p99 µs (≤) | RT p99 at the sink µs \
             | worker's longest grant µs | steal on its core ms | worker preempted |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            self.setup()
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {} |",
                r.round,
                r.mode,
                r.sent,
                r.lost(),
                r.ring_p99_us,
                r.rt_p99_sink_us,
                r.stall_us,
                r.steal1_ms,
                r.preempted
            );
        }
        s
    }
}

/// Runs `bash <args…>` (`scripts/listing-scale.sh` and its options) in `repo`, its windows
/// written to `out/listing.tsv`.
pub fn run(repo: &Path, args: &[&str], out: &Path, stop: &AtomicBool) -> Result<ListingOutcome> {
    let out = crate::script::out_dir(out)?;
    let env = [("OUT", out.as_path())];
    let r = crate::script::run(repo, args, &env, (&out.join("listing.tsv"), None), stop)?;
    Ok(ListingOutcome { rows: r.rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_windows_are_read_by_mode() {
        let dir = std::env::temp_dir().join(format!("llr-listing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tsv = dir.join("listing.tsv");
        std::fs::write(
            &tsv,
            "wake\tshield\tmode\tround\tsent\treceived\trt_p99_sink_us\tring_p99_us\tstall_us\tksoftirqd0_ms\tsteal1_ms\tpreempted\n\
             busy\tyes\tidle\t1\t400000\t400000\t4100.5\t30\t812\t20\t0\t3\n\
             busy\tyes\tlisting\t1\t400000\t399886\t5200\t50\t812\t35\t10\t4\n\
             busy\tyes\tlisting\t2\t400000\t400000\tnan\tinf\t900\t30\t0\t2\n",
        )
        .unwrap();
        let rows: Vec<ListingRow> = crate::script::read(&tsv).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let o = ListingOutcome { rows };
        assert_eq!(o.setup(), "--wake busy, --shield");
        assert_eq!(o.col("idle", |r| r.ring_p99_us), [30.0]);
        let ring = o.col("listing", |r| r.ring_p99_us);
        assert_eq!(ring[0], 50.0);
        assert!(ring[1].is_infinite());
        assert_eq!(o.col("listing", ListingRow::lost), [114.0, 0.0]);
        assert!(o.col("hog", |r| r.lost()).is_empty());
        assert!(
            o.md().contains("| 1 | listing | 400000 | 114 | 50 |"),
            "{}",
            o.md()
        );
    }
}
