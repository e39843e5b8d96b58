//! Bad command-line input: every case exits 2 (usage) with a message naming the flag and the
//! reason, before anything is started — no sampling window, no simulation, no output files and,
//! for the testbed, no network namespace. Needs no root; runs in well under a second per case.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of the binary did.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    pid: u32,
}

fn llrouter(args: &[&str]) -> Outcome {
    let child = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(args)
        // RUST_LOG would override --log.
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start llrouter");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait for llrouter");
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        pid,
    }
}

/// Asserts exit code 2 and that stderr contains every one of `needles`.
fn usage_error(args: &[&str], needles: &[&str]) -> Outcome {
    let o = llrouter(args);
    assert_eq!(
        o.code,
        Some(2),
        "llrouter {}: expected exit 2\nstdout: {}\nstderr: {}",
        args.join(" "),
        o.stdout,
        o.stderr
    );
    for n in needles {
        assert!(
            o.stderr.contains(n),
            "llrouter {}: stderr lacks {n:?}:\n{}",
            args.join(" "),
            o.stderr
        );
    }
    o
}

fn scratch(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("llr-cli-bad-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// Namespaces a testbed process with this pid would have created (`llrtb-<pid>-…`).
fn netns_of(pid: u32) -> Vec<String> {
    let prefix = format!("llrtb-{pid}-");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// The testbed creates its output directory just before its namespaces, so a missing `out`
/// shows the run stopped before either; a namespace of this pid would be one left behind.
fn assert_untouched(o: &Outcome, out: &Path) {
    assert!(!out.exists(), "{} was created", out.display());
    assert_eq!(netns_of(o.pid), Vec::<String>::new(), "namespaces created");
}

#[test]
fn tune_rejects_bad_options_before_sampling() {
    usage_error(&["tune", "--samples", "0"], &["--samples", "at least 2"]);
    // A long window would show as a slow test: the device is checked before sampling.
    let t0 = std::time::Instant::now();
    usage_error(
        &["tune", "--dev", "nosuch0", "--samples", "20"],
        &["--dev", "nosuch0"],
    );
    assert!(t0.elapsed().as_secs() < 10, "sampled before checking --dev");
    usage_error(
        &["tune", "--cores", "4096", "--samples", "20"],
        &["--cores", "core 4096 is not online"],
    );
    assert!(
        t0.elapsed().as_secs() < 10,
        "sampled before checking --cores"
    );
    usage_error(
        &["tune", "--workers", "0"],
        &["--workers", "at least one worker"],
    );
    usage_error(
        &["tune", "--workers", "4096", "--samples", "20"],
        &["--workers", "4096 workers, but only", "cores are online"],
    );
    usage_error(
        &["tune", "--workers", "2", "--cores", "0", "--samples", "20"],
        &["--workers", "cores in --cores"],
    );
    assert!(
        t0.elapsed().as_secs() < 10,
        "sampled before checking --workers"
    );
    usage_error(
        &["tune", "--queues-per-worker", "0"],
        &["--queues-per-worker"],
    );
    usage_error(&["tune", "--irq", "nearby"], &["--irq", "on-workers"]);
    usage_error(&["tune", "--interval-ms", "0"], &["--interval-ms"]);
    usage_error(
        &["tune", "--ring-min", "100"],
        &["--ring-min", "power of two"],
    );
    usage_error(&["tune", "--bandwidth-mbps", "0"], &["--bandwidth-mbps"]);
    usage_error(&["sim", "--tx-batch", "0"], &["--tx-batch", "at least 1"]);
    usage_error(&["sim", "--flush-ns=-5"], &["flush-ns", "0 or more"]);
    usage_error(
        &["sim", "--flush-frame-ns=nan"],
        &["flush-frame-ns", "0 or more"],
    );
    usage_error(&["tune", "--count", "2"], &["--count", "--watch"]);
    usage_error(&["tune", "--watch", "--count", "0"], &["--count"]);
    usage_error(
        &["tune", "--watch", "--apply"],
        &["--apply", "--watch only watches"],
    );
}

#[test]
fn testbed_rejects_bad_targets_before_building_anything() {
    for (sub, target) in [("run", "llrouter:foo"), ("mlffr", "llrouter:bogus")] {
        let out = scratch(&format!("tb-{sub}"));
        let o = usage_error(
            &[
                "testbed",
                sub,
                "--targets",
                &format!("kernel,{target}"),
                "--out",
                out.to_str().unwrap(),
            ],
            &["--targets", target, "unknown strategy", "ll-wfq"],
        );
        assert_untouched(&o, &out);
    }
    let out = scratch("tb-opts");
    let o_str = out.to_str().unwrap();
    for (flag, value, needle) in [
        ("--targets", "linux", "kernel-htb"),
        ("--gaps", "weird", "constant, poisson"),
        ("--wake", "sometimes", "interrupt, busy, adaptive"),
        ("--gen-backend", "dpdk", "bpf-live"),
        ("--sink-backend", "pcap", "xdp"),
        ("--budgets", "5", "RT,BE"),
        ("--budgets", "0,4", "≥ 1"),
        ("--router-cpu", "4096", "CPU 4096 does not exist"),
        ("--gen-cpu", "4096", "CPU 4096 does not exist"),
        ("--size", "20", "--size"),
        ("--tx-batch", "0", "--tx-batch"),
        ("--tx-hold-us", "2000", "0..=1000"),
    ] {
        let targets = if flag == "--targets" {
            value
        } else {
            "llrouter:sq"
        };
        let mut args = vec!["testbed", "run", "--out", o_str, "--targets", targets];
        if flag != "--targets" {
            args.extend([flag, value]);
        }
        let o = usage_error(&args, &[flag, needle]);
        assert_untouched(&o, &out);
    }
    let o = usage_error(
        &["testbed", "run", "--out", o_str, "--reference-load", "1000"],
        &["--reference-load", "--mlffr-multiples"],
    );
    assert_untouched(&o, &out);
    let o = usage_error(
        &["testbed", "mlffr", "--out", o_str, "--rt-share", "2"],
        &["--rt-share"],
    );
    assert_untouched(&o, &out);
}

#[test]
fn sweep_rejects_unknown_parameters_and_single_run_flags() {
    let out = scratch("sweep");
    let o_str = out.to_str().unwrap();
    for (args, needles) in [
        (
            vec!["--param", "foo"],
            vec!["--param", "rt-share, utilization, time-slice, budget"],
        ),
        (vec!["--strategy", "sq"], vec!["--strategy", "--strategies"]),
        (
            vec!["--strategies", "sq,nope"],
            vec!["--strategies", "nope"],
        ),
        (
            vec!["--param", "utilization", "--values", "0.5,20"],
            vec!["--utilization", "at most 10"],
        ),
        (
            vec!["--param", "budget", "--values", "2.5"],
            vec!["--values", "whole number"],
        ),
        (vec!["--values", "1:0:1"], vec!["--values"]),
        (
            vec!["--param", "utilization", "--utilization", "0.5"],
            vec!["--utilization", "--param utilization varies it"],
        ),
        (
            vec!["--classes", "hi=0.2,lo=0.8"],
            vec!["--classes", "--param rt-share varies it"],
        ),
        (
            vec!["--param", "cores", "--values", "1,0"],
            vec!["--values", "whole number within 1–1024"],
        ),
        (
            vec!["--param", "cores", "--values", "2.5"],
            vec!["--values", "whole number"],
        ),
        (
            vec!["--param", "cores", "--cores", "4"],
            vec!["--cores", "--param cores varies it"],
        ),
        (
            vec!["--param", "cores", "--steering", "class"],
            vec!["--steering", "`sq`", "one ring per class"],
        ),
        (
            vec!["--capacity", "--loss-tolerance", "100"],
            vec!["--loss-tolerance", "[0, 100)"],
        ),
    ] {
        let mut a = vec![
            "sim",
            "sweep",
            "--quiet",
            "--packets",
            "1000",
            "--out",
            o_str,
        ];
        a.extend(args);
        usage_error(&a, &needles);
        assert!(!out.exists(), "llrouter {}: wrote {}", a.join(" "), o_str);
    }
}

#[test]
fn sweep_json_is_the_rows() {
    let out = scratch("sweep-json");
    let o = llrouter(&[
        "sim",
        "sweep",
        "--json",
        "--strategies",
        "sq,ll-wfq",
        "--values",
        "0.3",
        "--packets",
        "2000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("stdout is JSON");
    assert_eq!(v["param"], "rt-share");
    // Two strategies × one value × two classes.
    assert_eq!(v["rows"].as_array().map(Vec::len), Some(4), "{v}");
    assert!(out.join("loss_vs_rt-share.png").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn cores_sweep_reports_scaling_and_capacity() {
    let out = scratch("sweep-cores");
    let o = llrouter(&[
        "sim",
        "sweep",
        "--json",
        "--param",
        "cores",
        "--values",
        "1,4",
        "--flows",
        "8",
        "--strategies",
        "ll-wfq",
        "--steering",
        "class",
        "--capacity",
        "--packets",
        "5000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("stdout is JSON");
    assert_eq!(v["param"], "cores");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "two core counts × two classes: {v}");
    // --packets is per core in a cores sweep.
    assert_eq!(rows[2]["cores"], 4);
    assert_eq!(
        rows[2]["sent"].as_u64().unwrap() + rows[3]["sent"].as_u64().unwrap(),
        20_000
    );
    assert_eq!(rows[2]["steering"], "class");
    let caps = v["capacity"].as_array().unwrap();
    assert_eq!(caps.len(), 2);
    // 8 flows on 4 cores cannot balance: the capacity stops at the hash bound, below 1.
    let bound = caps[1]["hash_bound"].as_f64().unwrap();
    assert!(bound < 1.0, "{v}");
    assert!(caps[1]["utilization"].as_f64().unwrap() < 1.0, "{v}");
    for f in ["capacity.csv", "delivered_vs_cores.png", "results.csv"] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let _ = std::fs::remove_dir_all(&out);
    usage_error(
        &["sim", "--steering", "hash"],
        &["--steering", "rss", "class"],
    );
    usage_error(
        &["sim", "--steering", "class", "--strategy", "sq"],
        &["--steering", "`sq`"],
    );
    usage_error(&["sim", "--flow-pps", "0"], &["--flow-pps", "> 0"]);
    usage_error(
        &["sim", "--flow-pps", "410", "--flows", "8"],
        &["--flow-pps", "--flows"],
    );
}

#[test]
fn sim_utilization_is_checked_and_overload_is_shown() {
    usage_error(
        &["sim", "--utilization", "1e9"],
        &["--utilization", "at most 10", "overload"],
    );
    usage_error(
        &["sim", "--utilization", "inf"],
        &["--utilization", "not a finite number"],
    );
    usage_error(
        &["sim", "--utilization", "0"],
        &["--utilization", "greater than 0"],
    );
    usage_error(&["sim", "--rate-pps", "inf"], &["--rate-pps", "finite"]);
    usage_error(&["sim", "--strategy", "foo"], &["--strategy", "foo"]);
    // Above 1 is overload, reported as such, not clamped to the busy fraction.
    let o = llrouter(&["sim", "--utilization", "1.2", "--packets", "20000"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(
        o.stdout.contains("1.200 × capacity (overload)"),
        "{}",
        o.stdout
    );
    // In JSON, the busy fraction (≤ 1) and the offered load (1.2) side by side.
    let o = llrouter(&[
        "sim",
        "--utilization",
        "1.2",
        "--packets",
        "20000",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    assert!(
        (v["offered_load"].as_f64().unwrap() - 1.2).abs() < 1e-9,
        "{v}"
    );
    assert!(v["utilization"].as_f64().unwrap() <= 1.0, "{v}");
}

#[test]
fn cpu_options_count_the_machines_cpus() {
    let o = usage_error(
        &[
            "gen",
            "--dst",
            "127.0.0.1",
            "--cpu",
            "4096",
            "--packets",
            "1",
        ],
        &["--cpu", "CPU 4096 does not exist", "online CPU"],
    );
    assert!(!o.stderr.contains("os error"), "{}", o.stderr);
    usage_error(
        &["sink", "--cpu", "4096", "--duration", "1"],
        &["--cpu", "CPU 4096 does not exist"],
    );
}

#[test]
fn other_commands_name_the_flag() {
    usage_error(&["demo", "--live-secs", "9"], &["--live-secs", "0.5–3"]);
    usage_error(&["demo", "--packets", "0"], &["--packets"]);
    let png = scratch("model.png");
    usage_error(
        &[
            "model",
            "--plot",
            png.to_str().unwrap(),
            "--plot-budgets",
            "0",
        ],
        &["--plot-budgets", "≥ 1"],
    );
    assert!(!png.exists());
    usage_error(&["model", "--rho-rt", "1.5", "--m", "10"], &["--rho-rt"]);
    usage_error(&["--log", "nonsense=[", "model"], &["--log"]);
    usage_error(&["gen", "--dst", "127.0.0.1", "--size", "20"], &["--size"]);
    usage_error(&["sink", "--backend", "xdp"], &["--iface"]);
    // `--duration 0` is refused before the configuration is read
    usage_error(
        &[
            "run",
            "--config",
            "examples/router-ll-wfq.toml",
            "--duration",
            "0",
        ],
        &["--duration: must be above 0 seconds"],
    );
}

/// `testbed costs` names a missing results file (exit 2), and says which points it looked for
/// when a run has none of them (exit 1: the input is well-formed, it only lacks such points).
#[test]
fn testbed_costs_names_what_it_lacks() {
    let dir = scratch("costs");
    usage_error(
        &["testbed", "costs", dir.to_str().unwrap()],
        &["--results", "no such file"],
    );
    std::fs::create_dir_all(&dir).unwrap();
    // The header of a `testbed run` results.csv, and no rows.
    let header = llr_lab::report::RESULTS_HEADER;
    std::fs::write(dir.join("results.csv"), format!("{header}\n")).unwrap();
    for (flag, which) in [
        (None, "no overloaded llrouter point"),
        (
            Some("--below-saturation"),
            "no llrouter point below saturation",
        ),
    ] {
        let mut args = vec!["testbed", "costs", dir.to_str().unwrap()];
        args.extend(flag);
        let o = llrouter(&args);
        assert_eq!(o.code, Some(1), "{}", o.stderr);
        assert!(o.stderr.contains(which), "{}", o.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Client commands fail when they cannot reach the router, whatever they were asked.
#[test]
fn clients_fail_without_a_router() {
    let sock = scratch("absent.sock");
    let s = sock.to_str().unwrap();
    for args in [
        &["top", "--socket", s, "--count", "1", "--plain"][..],
        &["ctl", "--socket", s, "status"],
        &["ctl", "--socket", s, "show", "fib"],
    ] {
        let o = llrouter(args);
        assert_eq!(o.code, Some(1), "{args:?}: {}", o.stderr);
        assert!(
            o.stderr.contains("is llrouter running?"),
            "{args:?}: {}",
            o.stderr
        );
    }
}

#[test]
fn model_plot_is_written() {
    let png = scratch("model-ok.png");
    let o = llrouter(&["model", "--plot", png.to_str().unwrap()]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let bytes = std::fs::read(&png).expect("plot written");
    assert_eq!(&bytes[1..4], b"PNG");
    let _ = std::fs::remove_file(&png);
}

#[test]
fn sim_flows_config_errors_name_the_field() {
    let dir = scratch("flows");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[[flows]]\nname = \"x\"\nmatch = { proto = \"udp\" }\nweight = 0\n[[traffic]]\npps = 1000\n",
    )
    .unwrap();
    let b = bad.to_str().unwrap();
    usage_error(
        &["sim", "flows", "--config", b],
        &["--config", "flows[x].weight", "at least 1"],
    );
    std::fs::write(&bad, "[[traffic]]\npps = 1000\nrate = 5\n").unwrap();
    usage_error(
        &["sim", "flows", "--config", b],
        &["--config", "line 3", "unknown field `rate`"],
    );
    let good = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/flows/preempt.toml");
    usage_error(
        &["sim", "flows", "--config", good, "--quantum-us", "1,0"],
        &["--quantum-us", "not a quantum"],
    );
    usage_error(
        &["sim", "flows", "--config", "/nonexistent/flows.toml"],
        &["--config", "/nonexistent/flows.toml"],
    );
    let _ = std::fs::remove_dir_all(&dir);
    // The examples run; the quantum table has a row per value and the voice columns.
    let o = llrouter(&["sim", "flows", "--config", good, "--quantum-us", "1,50"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stdout.contains("voice p99 µs"), "{}", o.stdout);
    assert_eq!(o.stdout.lines().count(), 4, "{}", o.stdout);
}

#[test]
fn a_host_that_does_not_fit_the_config_is_refused_at_check() {
    // The loopback device exists in every namespace and has no ntuple filters, one queue and an
    // MTU of 65536: `--check` refuses each naming the field, without privileges.
    let dir = scratch("check");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("router.toml");
    let write = |extra: &str| {
        std::fs::write(
            &cfg,
            format!(
                "interfaces = [\"lo\"]\n{extra}\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n[control]\nsocket = \"{}\"\n",
                dir.join("ctl.sock").display()
            ),
        )
        .unwrap();
    };
    let c = cfg.to_str().unwrap();
    write("");
    usage_error(
        &["run", "--config", c, "--check"],
        &["interfaces: lo has MTU 65536; llrouter carries frames of up to 9018 bytes (MTU 9000, the limit of its classifier and parser): lower it (`ip link set lo mtu 9000`)"],
    );
    usage_error(
        &["run", "--config", c, "--check", "--steering", "ntuple"],
        &["steering: \"ntuple\": lo: the NIC has no ntuple (Flow Director) filters"],
    );
    // --shield keeps the worker cores free; with no worker pinned there is nothing to keep
    usage_error(
        &["run", "--config", c, "--shield"],
        &["--shield: the config pins no worker (`cores` is empty)"],
    );
    write("cores = [0, 1]");
    usage_error(
        &["run", "--config", c, "--check"],
        &["cores: lo has 1 active rx queue; 2 workers need one rx queue each"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn paper_rejects_unknown_figures_and_too_few_replications() {
    usage_error(
        &["paper", "001", "--fig", "9", "--out", "/nonexistent/x"],
        &["fig", "5, 6, 7"],
    );
    usage_error(
        &[
            "paper",
            "001",
            "--replications",
            "1",
            "--out",
            "/nonexistent/x",
        ],
        &["replications", "2..=100"],
    );
    usage_error(
        &["paper", "003", "--fig", "6", "--out", "/nonexistent/x"],
        &["fig", "this paper's figures are 5"],
    );
    usage_error(
        &["paper", "000", "--fig", "5a", "--out", "/nonexistent/x"],
        &["fig", "this paper's figures are 7a, 7b, eq1"],
    );
    usage_error(
        &["paper", "004", "--fig", "8", "--out", "/nonexistent/x"],
        &["fig", "this paper's figures are 4, 5, 6, 7"],
    );
    usage_error(&["paper", "002"], &["002"]);
}
