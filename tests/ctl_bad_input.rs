//! Bad input to `llrouter ctl`, `llrouter top` and `llrouter run`'s configuration, through the
//! binary: each case's exit status
//! (2: the command line is wrong, 1: the router refused or is not there) and message. No root
//! needed: a refusal comes from a stand-in router serving the control protocol.

use std::path::{Path, PathBuf};
use std::process::{Command as Proc, Output};
use std::sync::Arc;

use llr_core::sched::Budget;
use llr_ops::ctl::{Command, CtlError, CtlServer};

fn llrouter(args: &[&str]) -> Output {
    Proc::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(args)
        .output()
        .expect("run llrouter")
}

/// Asserts the exit code and that stderr contains every one of `needles`.
fn check(args: &[&str], code: i32, needles: &[&str]) -> String {
    let o = llrouter(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(code), "{args:?}: stderr:\n{err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in stderr:\n{err}");
    }
    err
}

/// A stand-in router that refuses changes the way the router does (field and reason).
fn stand_in(dir: &Path) -> (CtlServer, PathBuf) {
    let sock = dir.join("ctl.sock");
    let target = Arc::new(|cmd: Command| -> Result<serde_json::Value, CtlError> {
        match cmd {
            Command::BudgetSet {
                budget: Budget::Auto,
                ..
            } => Err(CtlError::new("budget", "no auto-budget target")),
            Command::BudgetSet { class, .. } if class != "rt" => Err(CtlError::new(
                "class",
                format!("unknown class `{class}` (known: rt, be)"),
            )),
            Command::Status {} => Ok(serde_json::json!({"strategy": "ll-wfq"})),
            _ => Err(CtlError::new("cmd", "not in this stand-in")),
        }
    });
    (CtlServer::bind(&sock, target).expect("bind"), sock)
}

#[test]
fn usage_errors_exit_2() {
    check(
        &["top", "--interval", "0"],
        2,
        &["--interval", "at least 0.05"],
    );
    check(&["ctl", "--timeout", "0", "status"], 2, &["--timeout"]);
    check(&["ctl", "status", "--timeout", "nan"], 2, &["--timeout"]);
    check(
        &["ctl", "wakeup", "set", "sometimes"],
        2,
        &["sometimes", "interrupt", "busy", "adaptive"],
    );
    let e = check(
        &["ctl", "strategy", "set", "foo"],
        2,
        &["foo", "ll-wfq", "sq"],
    );
    assert!(!e.contains("strategy: strategy:"), "doubled prefix: {e}");
    check(
        &["ctl", "wakeup", "set", "busy", "--spin-us", "5"],
        2,
        &["--spin-us", "adaptive"],
    );
    check(
        &["ctl", "route", "add", "10.1.0.0", "dev", "eth0"],
        2,
        &["10.1.0.0", "needs a length"],
    );
    check(
        &["ctl", "route", "add", "10.1.0.0/16", "gw", "eth0"],
        2,
        &["PREFIX [via GW] dev IF"],
    );
    check(&["ctl", "show", "fib", "--limit", "0"], 2, &["--limit"]);
    check(
        &["ctl", "show", "neighbours", "--limit", "0"],
        2,
        &["--limit"],
    );
    check(
        &["ctl", "show", "fib", "--dport", "53"],
        2,
        &["--from", "destination address"],
    );
    check(
        &["ctl", "show", "fib", "hosts"],
        2,
        &["--fib", "`hosts` is not `summary`"],
    );
    check(&["ctl", "flow", "list", "--top", "0"], 2, &["--limit"]);
    check(&["ctl", "budget", "set", "rt", "-1"], 2, &["-1"]);
    // 0 is no budget: refused before a router is asked
    check(
        &["ctl", "budget", "set", "rt", "0"],
        2,
        &["<BUDGET>", "at least 1"],
    );
    check(&["ctl", "rules", "add"], 2, &["RULE"]);
}

#[test]
fn runtime_errors_exit_1() {
    let dir = std::env::temp_dir().join(format!("llr-badinput-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("nobody.sock");
    check(
        &["ctl", "--socket", missing.to_str().unwrap(), "status"],
        1,
        &["nobody.sock"],
    );
    let (srv, sock) = stand_in(&dir);
    let s = sock.to_str().unwrap();
    check(
        &["ctl", "-s", s, "budget", "set", "rt", "auto"],
        1,
        &["budget.set rejected: budget: no auto-budget target"],
    );
    check(
        &["ctl", "budget", "set", "nope", "5", "--socket", s],
        1,
        &["budget.set rejected: class: unknown class `nope`"],
    );
    // --json after the subcommand: the refusal is still an error (exit 1)
    check(
        &["ctl", "budget", "set", "rt", "auto", "--json", "-s", s],
        1,
        &["budget: no auto-budget target"],
    );
    // and a good call works with -j anywhere
    let o = llrouter(&["ctl", "status", "-s", s, "-j"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["strategy"], "ll-wfq");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_run_configs_exit_2_naming_the_field() {
    let dir = std::env::temp_dir().join(format!("llr-badcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = "interfaces = [\"lo\"]\n[[classes]]\nname = \"be\"\n";
    for (extra, needle) in [
        (
            "cores = [4096]\n",
            "cores: core 4096 does not exist (online CPUs: ",
        ),
        (
            "helper-cores = [4096]\n",
            "helper-cores: core 4096 does not exist",
        ),
        (
            "helper-cores = []\n",
            "helper-cores: give at least one core",
        ),
        (
            "worker-priority = 100\n",
            "worker-priority: 100 is no SCHED_FIFO priority: give 1–99",
        ),
    ] {
        let cfg = dir.join("r.toml");
        std::fs::write(&cfg, format!("{extra}{base}")).unwrap();
        check(
            &["run", "--check", "--config", cfg.to_str().unwrap()],
            2,
            &["--config", needle],
        );
    }
    // the machine's CPUs count, not the checking thread's affinity: pinned to the first CPU,
    // a config naming the last one is fine
    let online = llr_ops::cpus::online();
    let (first, last) = (*online.first().unwrap(), *online.last().unwrap());
    if first != last {
        let cfg = dir.join("ok.toml");
        std::fs::write(&cfg, format!("cores = [{last}]\n{base}")).unwrap();
        let o = Proc::new("taskset")
            .args(["-c", &first.to_string(), env!("CARGO_BIN_EXE_llrouter")])
            .args(["run", "--check", "--config"])
            .arg(&cfg)
            .output()
            .expect("taskset (util-linux)");
        // lo's MTU (65536) is beyond what the router carries, so the check ends there, after
        // the cores were accepted.
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(
            !err.contains("cores") && err.contains("interfaces: lo has MTU 65536"),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
