//! `llrouter testbed scale` on a temporary testbed (root; fails under CI without it), at a
//! table small enough for the test: 20 000 IPv4 + 5 000 IPv6 routes, two routers, ~10 s.

use std::process::Command;

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn every_round_holds_the_whole_table_and_measures_it() {
    llr_io::sys::require_root();
    let out = std::env::temp_dir().join(format!("llr-tb-scale-{}", std::process::id()));
    let before = namespaces();
    let st = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["testbed", "scale", "--v4", "20000", "--v6", "5000"])
        .args(["--rounds", "2", "--idle-secs", "1", "--out"])
        .arg(&out)
        .status()
        .expect("run llrouter testbed scale");
    let csv = std::fs::read_to_string(out.join("scale.csv")).unwrap_or_default();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    assert!(st.success(), "testbed scale failed: {st}\n{md}");
    eprintln!("{md}");
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).expect(n);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    for r in &rows {
        let f = |n: &str| -> f64 { r[col(n)].parse().unwrap() };
        assert_eq!(r[col("incomplete")], "false", "{csv}");
        // The fixture's routes and the links' own (connected and local routes).
        let routes = f("routes");
        assert!((25_000.0..25_100.0).contains(&routes), "{csv}");
        assert!(f("complete_s") > 0.0 && f("complete_s") < 60.0, "{csv}");
        // 25 000 routes take a few MB of tables; the process holds them and more.
        assert!(f("fib_mb") > 1.0 && f("rss_mb") > f("fib_mb"), "{csv}");
        // The listing prints a line per route (and a heading).
        assert!(f("listed") > routes, "{csv}");
        assert!(f("listing_s") > 0.0 && f("listing_json_s") > 0.0, "{csv}");
        let cpu = f("mirror_idle_pct");
        assert!((0.0..100.0).contains(&cpu), "{csv}");
    }
    // The temporary testbed (and with it the 25 000 kernel routes) is gone.
    assert_eq!(namespaces(), before, "a namespace left behind");
}

fn namespaces() -> Vec<String> {
    let o = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn bad_settings_exit_2_naming_the_field() {
    for (args, field) in [
        (&["--rounds", "0"][..], "rounds"),
        (&["--idle-secs", "0"][..], "idle-secs"),
        (&["--v4", "0", "--v6", "0"][..], "v4"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_llrouter"))
            .args(["testbed", "scale", "--out", "/nonexistent/x"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(field), "{args:?}: {err}");
    }
}
