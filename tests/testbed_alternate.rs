//! `llrouter testbed alternate` on the namespace testbed (root; fails under CI without it). In
//! its own test binary: tests of one binary run two at a time, and a second testbed beside
//! `testbed_overload`'s capacity measurement halves what that measures.

use std::process::Command;

/// `testbed alternate` switches the running router's strategy through its control socket: the
/// slices come in the order asked, each forwarded frames, and the switch took effect — sq's
/// grants carry many frames, ll-wfq's BE grants at most its budget of 4. RT grants carry up to
/// 60, so RT is kept to 5 % of the offered rate: even if the generator reached all 3 Mpps and
/// the router forwarded only 300 kpps, BE would be half of what ll-wfq serves, which bounds its
/// frames per grant by 8, against sq's 32 (at 15 % RT a fast generator made RT nearly all of
/// the forwarded traffic, and ll-wfq's grants RT-sized).
/// Bounded: 5 slices of 0.3 s after a start-up, ~10 s.
#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn alternate_switches_the_strategy_live_and_pairs_slices() {
    llr_io::sys::require_root();
    let out = std::env::temp_dir().join(format!("llr-tb-alternate-{}", std::process::id()));
    let st = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args([
            "testbed",
            "alternate",
            "--targets",
            "llrouter:sq,llrouter:ll-wfq",
        ])
        .args(["--cycles", "2", "--slice-ms", "300", "--settle-ms", "100"])
        .args(["--rt-share", "0.05"])
        // 1 µs per packet: the router, not the generator, is the bottleneck on any machine.
        .args(["--cost-ns", "1000", "--flows", "8", "--out"])
        .arg(&out)
        .status()
        .expect("run llrouter testbed alternate");
    let csv = std::fs::read_to_string(out.join("alternate.csv")).unwrap_or_default();
    let rows = std::fs::read_to_string(out.join("results.csv")).unwrap_or_default();
    let md = std::fs::read_to_string(out.join("alternate.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert!(st.success(), "testbed alternate failed: {st}\n{md}");
    eprintln!("{md}\n{csv}");
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).expect(n);
    let slices: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let order: Vec<&str> = slices.iter().map(|r| r[col("strategy")]).collect();
    assert_eq!(order, ["sq", "ll-wfq", "sq", "ll-wfq", "sq"]);
    let num = |r: &Vec<&str>, n: &str| -> f64 { r[col(n)].parse().unwrap() };
    for r in &slices {
        assert!(
            num(r, "forwarded_pps") > 1000.0,
            "a slice forwarded nothing:\n{csv}"
        );
    }
    let per_grant = |r: &Vec<&str>| num(r, "served") / num(r, "grants");
    for (sq, wfq) in [(&slices[0], &slices[1]), (&slices[2], &slices[3])] {
        assert!(
            per_grant(sq) > 2.0 * per_grant(wfq),
            "the switch did not take effect: frames per grant sq {:.1}, ll-wfq {:.1}\n{csv}",
            per_grant(sq),
            per_grant(wfq)
        );
    }
    for r in slices.iter().filter(|r| r[col("strategy")] == "ll-wfq") {
        let ratio = num(r, "ratio");
        assert!(
            ratio > 0.0 && ratio.is_finite(),
            "ll-wfq slice without a ratio:\n{csv}"
        );
    }
    // One results.csv row per slice, for `testbed costs`.
    assert_eq!(rows.lines().count(), 1 + slices.len(), "{rows}");
}
