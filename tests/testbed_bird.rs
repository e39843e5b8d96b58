//! `llrouter testbed bird` on the namespace testbed (root, BIRD 2; fails under CI without
//! them). In its own test binary: a second testbed beside another study's would slow both.

use std::process::Command;

/// One round at a tenth of a percent of the full table's size (about 15 s). Checked from the
/// study's own row, which a study that timed nothing or compared nothing could not fill:
/// - the kernel's route events counted the whole table, or the study fails (its dump check);
/// - llrouter answered every sampled destination as the kernel did, and held exactly the
///   kernel's routes after the load, the withdrawal and the re-announcement;
/// - the times are in order: BGP up before the kernel held the table, llrouter not before the
///   kernel, and the withdrawal took out one eighth of the table;
/// - the mirror received at least one event per route installed, withdrawn and re-announced
///   (it got the table from events, not from a re-dump).
#[test]
#[ignore = "needs root: network namespaces, veth, XDP, BIRD (scripts/test.sh runs it as root)"]
fn a_bgp_table_is_timed_from_the_kernels_events_and_llrouter_matches_it() {
    llr_io::sys::require_root();
    let out = std::env::temp_dir().join(format!("llr-tb-bird-{}", std::process::id()));
    let (v4, v6) = (16_000usize, 4_000usize);
    let st = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["testbed", "bird", "--rounds", "1", "--check", "2000"])
        .args(["--v4", &v4.to_string(), "--v6", &v6.to_string(), "--out"])
        .arg(&out)
        .status()
        .expect("run llrouter testbed bird");
    let csv = std::fs::read_to_string(out.join("bgp.csv")).unwrap_or_default();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert!(st.success(), "testbed bird failed: {st}\n{md}");
    eprintln!("{md}\n{csv}");
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let row: Vec<&str> = lines.next().expect("one round").split(',').collect();
    let num = |n: &str| -> f64 {
        let i = head.iter().position(|h| *h == n).expect(n);
        row[i].parse().unwrap_or_else(|_| panic!("{n}: {}", row[i]))
    };
    let routes = (v4 + v6) as f64;
    assert_eq!(num("routes"), routes, "{csv}");
    assert_eq!(num("checked"), 2000.0 + 2.0 * 400.0, "{csv}");
    for n in ["differ", "missing", "stale", "regressions"] {
        assert_eq!(num(n), 0.0, "{n}\n{md}");
    }
    assert!(
        num("established_s") > 0.0 && num("established_s") < num("load_kernel_s"),
        "{csv}"
    );
    for step in ["load", "withdraw", "announce"] {
        let (k, l) = (
            num(&format!("{step}_kernel_s")),
            num(&format!("{step}_llrouter_s")),
        );
        assert!(
            k > 0.0 && l >= k,
            "{step}: kernel {k} s, llrouter {l} s\n{csv}"
        );
    }
    let withdrawn = num("withdrawn");
    assert!(
        (withdrawn - routes / 8.0).abs() <= 2.0,
        "withdrew {withdrawn} of {routes}\n{csv}"
    );
    assert!(
        num("mirror_events") >= routes + 2.0 * withdrawn,
        "the mirror got {} events for {routes} routes and {withdrawn} withdrawn and back\n{csv}",
        num("mirror_events")
    );
}
