//! `llrouter testbed flood` on the namespace testbed with the real `nft` (root; fails under CI
//! without it). In its own test binary, for the reason `testbed_alternate.rs` gives.

use std::process::Command;

/// One round of each mode: the prerouting rule's flood is dropped in XDP and none of it by a
/// worker, the forward chain's by the workers and none in XDP, and RT alone meets no rule; the
/// study's rulesets are what it applied. Bounded: 3 points of 0.5 s after router starts, ~15 s.
#[test]
#[ignore = "needs root: network namespaces, veth, XDP, nft (scripts/test.sh runs it as root)"]
fn flood_drops_where_each_ruleset_says_and_counts_it() {
    llr_io::sys::require_root();
    let out = std::env::temp_dir().join(format!("llr-tb-flood-{}", std::process::id()));
    let st = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["testbed", "flood", "--targets", "llrouter:ll-wfq"])
        .args(["--load", "100000", "--rt-share", "0.2", "--rounds", "1"])
        // A BE ring of 4096 rides out 50 ms of its worker's absence at this flood's rate.
        .args(["--point-secs", "0.5", "--rx-size", "4096", "--out"])
        .arg(&out)
        .status()
        .expect("run llrouter testbed flood");
    let csv = std::fs::read_to_string(out.join("flood.csv")).unwrap_or_default();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
    let xdp_rules = std::fs::read_to_string(out.join("ruleset-xdp.nft")).unwrap_or_default();
    let fw_rules = std::fs::read_to_string(out.join("ruleset-worker.nft")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert!(st.success(), "testbed flood failed: {st}\n{md}");
    eprintln!("{md}\n{csv}");
    assert!(xdp_rules.contains("hook prerouting") && xdp_rules.contains("ip daddr 10.71.2.2 drop"));
    assert!(fw_rules.contains("hook forward") && fw_rules.contains("ip daddr 10.71.2.2 drop"));
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).expect(n);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let modes: Vec<&str> = rows.iter().map(|r| r[col("mode")]).collect();
    assert_eq!(modes, ["alone", "xdp", "worker"], "{csv}");
    let num = |r: &Vec<&str>, n: &str| -> u64 { r[col(n)].parse().unwrap() };
    let (alone, xdp, worker) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!(num(alone, "sent_be"), 0, "RT alone sends no flood");
    assert_eq!(
        (num(alone, "dropped_xdp"), num(alone, "dropped_worker")),
        (0, 0)
    );
    for r in [xdp, worker] {
        assert!(num(r, "sent_be") > 10_000, "no flood sent:\n{csv}");
        assert!(num(r, "sent_rt") > 2_000, "no RT sent:\n{csv}");
    }
    // Every flood frame is counted where its rule is taken, and nowhere else.
    assert_eq!(num(xdp, "dropped_xdp"), num(xdp, "sent_be"), "{csv}");
    assert_eq!(num(xdp, "dropped_worker"), 0, "{csv}");
    assert_eq!(num(worker, "dropped_xdp"), 0, "{csv}");
    // 80 kpps of flood beside 20 kpps of RT is far below what a worker forwards: a flood frame
    // is lost on the way to the rule only where the host kept the worker off its core until
    // the BE ring was full, and then the ring counts it.
    assert_eq!(
        num(worker, "dropped_worker") + num(worker, "be_ring_drops"),
        num(worker, "sent_be"),
        "{csv}"
    );
    assert!(
        num(worker, "dropped_worker") > num(worker, "sent_be") / 2,
        "the rule dropped little of the flood:\n{csv}"
    );
    assert_eq!(num(xdp, "be_ring_drops"), 0, "{csv}");
}
