//! Flow configuration as a user meets it (no root: `llrouter run --dry-run` resolves the
//! configuration without touching an interface): the example config plans its flows; every bad
//! flow is refused with exit 2 and a message naming the flow and the field.

use std::path::PathBuf;
use std::process::Command;

fn dry_run(config: &str, tag: &str) -> (Option<i32>, String, String) {
    let dir = std::env::temp_dir().join(format!("llr-flows-cfg-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("router.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["run", "--dry-run", "--config"])
        .arg(&path)
        .env_remove("RUST_LOG")
        .output()
        .expect("run llrouter");
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn example() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/router-flows.toml");
    std::fs::read_to_string(p).expect("examples/router-flows.toml")
}

#[test]
fn example_config_plans_its_flows() {
    let (code, out, err) = dry_run(&example(), "ok");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("# flows (each worker): input weight 2"),
        "{out}"
    );
    assert!(
        out.contains("video class=any match=proto=udp dst=10.0.2.0/24 dport=5000-5999"),
        "{out}"
    );
    assert!(
        out.contains("meter(pps=20000,burst=64,exceed=drop) → work(ns=2000) → forward"),
        "{out}"
    );
    assert!(out.contains("guest class=be"), "{out}");
}

#[test]
fn bad_flows_are_refused_naming_the_field() {
    let base = example();
    let cases: Vec<(String, &str, &str)> = vec![
        (
            base.replace("\"work(us=2)\"", "\"crypt(aes)\""),
            "flows[video].pipeline",
            "unknown element `crypt`",
        ),
        (
            base.replace("\"work(us=2)\"", "\"work(us=2)\", \"goto(to=0)\""),
            "flows[video].pipeline",
            "`goto(to=0)` at element 2: a jump goes forward, to 3..=3",
        ),
        (
            base.replace("weight = 4", "weight = 0"),
            "flows[video].weight",
            "at least 1",
        ),
        (
            base.replace("quantum-us = 20", "quantum-us = 0"),
            "flows[guest].quantum-us",
            "not a quantum",
        ),
        (
            base.clone() + "\n[[flows]]\nname = \"clash\"\nmatch = { dst = \"10.0.0.0/8\" }\n",
            "flows[clash].precedence",
            "overlaps flow `video`",
        ),
        (
            base.replace("input-weight = 2", "input-weight = 2\nmax-flows = 1"),
            "flows[guest].flows",
            "full",
        ),
        (
            base.replace("\"acl(no-dns)\"", "\"acl(nope)\""),
            "flows[guest].pipeline",
            "no ACL named `nope`",
        ),
        (
            base.replace("weight = 4", "cpu = 1.5"),
            "flows[video].cpu",
            "fraction",
        ),
        (
            base.replace("class = \"be\"\nquantum", "class = \"bulk\"\nquantum"),
            "flows[guest].class",
            "unknown class `bulk`",
        ),
        (
            base.replace("input-weight = 2", "input-weight = 0"),
            "flow-scheduler.input-weight",
            "at least 1",
        ),
    ];
    for (i, (cfg, field, reason)) in cases.iter().enumerate() {
        let (code, out, err) = dry_run(cfg, &format!("bad{i}"));
        assert_eq!(code, Some(2), "case {i} ({field}): {out}{err}");
        assert!(
            err.contains(field) && err.contains(reason),
            "case {i}: stderr lacks {field} / {reason}: {err}"
        );
        assert!(out.is_empty(), "case {i}: nothing planned: {out}");
    }
}
