//! `llrouter testbed firewall` on the namespace testbed (root; fails under CI without it). In
//! its own test binary: a second testbed beside another study's would halve what each measures.

use std::process::Command;

/// Two rounds of the four rulesets at a load the router carries. What makes the study's
/// comparison mean anything, checked from its own rows:
/// - under `typical` the one-way flows are unestablished and llrouter hands them to the
///   kernel — in round 2 too, after round 1's `typical-est`: the connection table was emptied
///   between the points;
/// - under `typical-est` the flows were established before the point, so llrouter carries
///   them itself, as under `none` and `stateless`;
/// - every ruleset forwarded the traffic (none of them matches it).
///
/// Bounded: 8 points of 1 s, each with a router start, ~40 s.
#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn rulesets_interleave_and_established_flows_stay_with_llrouter() {
    llr_io::sys::require_root();
    let out = std::env::temp_dir().join(format!("llr-tb-firewall-{}", std::process::id()));
    let st = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["testbed", "firewall", "--targets", "llrouter:ll-wfq"])
        .args(["--load", "50000", "--rt-share", "0.1", "--flows", "8"])
        .args(["--rounds", "2", "--point-secs", "1", "--out"])
        .arg(&out)
        .status()
        .expect("run llrouter testbed firewall");
    let csv = std::fs::read_to_string(out.join("firewall.csv")).unwrap_or_default();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert!(st.success(), "testbed firewall failed: {st}\n{md}");
    eprintln!("{md}\n{csv}");
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).expect(n);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let modes: Vec<&str> = rows.iter().map(|r| r[col("mode")]).collect();
    let order = ["none", "stateless", "typical", "typical-est"];
    assert_eq!(modes, [order, order].concat(), "{csv}");
    let num = |r: &Vec<&str>, n: &str| -> f64 { r[col(n)].parse().unwrap() };
    for r in &rows {
        let (mode, sent) = (r[col("mode")], num(r, "sent_pps"));
        let kernel_share = num(r, "to_kernel_pct") / 100.0;
        // A ruleset that matched the traffic would forward next to none of it; half leaves
        // room for a worker or a softirq off its core for a while on a loaded host.
        assert!(
            num(r, "forwarded_pps") > 0.5 * sent,
            "{mode}: the ruleset matches none of the traffic, yet not all was forwarded\n{csv}"
        );
        if mode == "typical" {
            assert!(
                kernel_share > 0.9,
                "typical: the unestablished flows were not handed to the kernel \
                 ({kernel_share:.3} of sent)\n{csv}"
            );
        } else {
            assert!(
                kernel_share < 0.01,
                "{mode}: llrouter handed {kernel_share:.3} of the traffic to the kernel\n{csv}"
            );
        }
    }
}
