//! `llrouter testbed churn` on a temporary testbed (root; fails under CI without it): one round
//! at a small table, ~15 s.

use std::process::Command;

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn the_churn_reaches_the_forwarder_and_the_quiet_point_has_none() {
    llr_io::sys::require_root();
    let out = std::env::temp_dir().join(format!("llr-tb-churn-{}", std::process::id()));
    let st = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["testbed", "churn", "--targets", "llrouter:ll-wfq"])
        .args(["--routes", "5000", "--rate", "2000", "--load", "20000"])
        .args(["--rounds", "1", "--point-secs", "3", "--out"])
        .arg(&out)
        .status()
        .expect("run llrouter testbed churn");
    let csv = std::fs::read_to_string(out.join("churn.csv")).unwrap_or_default();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert!(st.success(), "testbed churn failed: {st}\n{md}");
    eprintln!("{md}");
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).expect(n);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let modes: Vec<&str> = rows.iter().map(|r| r[col("mode")]).collect();
    assert_eq!(modes, ["churn", "quiet"], "{csv}");
    let num = |r: &Vec<&str>, n: &str| -> u64 { r[col(n)].parse().unwrap() };
    let (churn, quiet) = (&rows[0], &rows[1]);
    for r in [churn, quiet] {
        assert!(num(r, "sent_rt") > 5_000, "no RT sent:\n{csv}");
    }
    // At least two of the point's three seconds of 2 000 replaces, and each replace moves a
    // route to the other gateway: the router's mirror changes its table for each one it saw.
    assert!(num(churn, "replaced") >= 4_000, "{csv}");
    assert!(num(churn, "fib_updates") >= 3_000, "{csv}");
    assert!(num(churn, "fib_updates") <= num(churn, "replaced"), "{csv}");
    assert_eq!(
        (num(quiet, "replaced"), num(quiet, "fib_updates")),
        (0, 0),
        "{csv}"
    );
}

#[test]
fn bad_settings_exit_2_naming_the_field() {
    for (args, field) in [
        (&["--targets", "kernel"][..], "targets"),
        (&["--targets", "llrouter:ll-wfq", "--rate", "0"][..], "rate"),
        (
            &["--targets", "llrouter:ll-wfq", "--point-secs", "1"][..],
            "point-secs",
        ),
        (
            &["--targets", "llrouter:ll-wfq", "--routes", "0"][..],
            "routes",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_llrouter"))
            .args(["testbed", "churn", "--out", "/nonexistent/x"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(field), "{args:?}: {err}");
    }
}
