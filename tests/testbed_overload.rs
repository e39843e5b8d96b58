//! Overload on the namespace testbed (root; skipped otherwise): llrouter with `sq` and with
//! `ll-wfq`, 30 % RT traffic at 1.5× each target's own MLFFR (found first by a short binary
//! search; an artificial per-packet cost of 1 µs keeps the router, not the bpf-live generator,
//! the bottleneck).
//!
//! Asserts only the *direction*, with a generous margin (a noisy, shared 2-core VM):
//! - with ll-wfq, RT loses less than BE (BE absorbs the overload);
//! - the RT p99 latency with ll-wfq is below the RT p99 with sq.
//!
//! Bounded: 2 targets × (4 search trials + 1 point) × 1.5 s of traffic + start-ups ≈ 40–80 s.

use std::process::Command;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn ll_wfq_protects_rt_under_overload() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let out = std::env::temp_dir().join(format!("llr-tb-overload-{}", std::process::id()));
    let st = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args([
            "testbed",
            "run",
            "--targets",
            "llrouter:sq,llrouter:ll-wfq",
            "--mlffr-multiples",
            "1.5",
            "--steps",
            "4",
            "--loss-tolerance",
            "0.01",
            "--max-rate",
            "1000000",
            "--rt-shares",
            "0.3",
            "--cost-ns",
            "1000",
            "--point-secs",
            "1.5",
            "--flows",
            "8",
            "--out",
        ])
        .arg(&out)
        .status()
        .expect("run llrouter testbed");
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap_or_default();
    let report = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert!(st.success(), "testbed run failed: {st}\n{report}");
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).expect(name);
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    let get = |target: &str, name: &str| -> f64 {
        rows.iter()
            .find(|r| r[col("target")] == target)
            .unwrap_or_else(|| panic!("no row for {target}:\n{csv}"))[col(name)]
        .parse()
        .unwrap()
    };
    let (sq, wfq) = ("llrouter:sq", "llrouter:ll-wfq");
    eprintln!("{report}");
    // The point is an overload at all: sq must lose BE traffic.
    assert!(get(sq, "loss_be") > 0.05, "not an overload:\n{csv}");
    assert!(
        get(wfq, "loss_rt") < get(wfq, "loss_be"),
        "ll-wfq: RT loss {} not below BE loss {}\n{csv}",
        get(wfq, "loss_rt"),
        get(wfq, "loss_be")
    );
    assert!(
        get(wfq, "rt_p99_us") < get(sq, "rt_p99_us"),
        "RT p99 ll-wfq {} µs not below sq {} µs\n{csv}",
        get(wfq, "rt_p99_us"),
        get(sq, "rt_p99_us")
    );
}
