//! `llrouter run --steering ntuple --dry-run` prints the ethtool plan and the class → queue
//! layout without touching anything (no root needed: the interfaces need not exist); without
//! `--dry-run` on veth (no ntuple filters) it fails naming the interface (root: namespaces).

use std::process::Command;

const CONFIG: &str = r#"
interfaces = ["veth-rin", "veth-rout"]
strategy = "ll-wfq"
steering = "ntuple"
[control]
socket = "/nonexistent/llr-steering-test/llrouter.sock"
[[classes]]
name = "rt"
[[classes]]
name = "be"
[[rules]]
class = "rt"
dscp = 46
[[rules]]
class = "rt"
proto = "udp"
dst_port = "5000-5007"
"#;

fn write_config(tag: &str, text: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("llr-steering-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, text).unwrap();
    (dir, cfg)
}

#[test]
fn ntuple_dry_run_prints_the_plan() {
    let (dir, cfg) = write_config("dry", CONFIG);
    let out = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["run", "--dry-run", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let expected_cmds = |i: &str| {
        vec![
            format!("ethtool -K {i} ntuple on"),
            format!("ethtool -X {i} equal 1 start 1"),
            format!("ethtool -N {i} flow-type ip4 tos 0xb8 m 0x3 action 0 loc 0"),
            format!("ethtool -N {i} flow-type ip6 tclass 0xb8 m 0x3 action 0 loc 1"),
            format!("ethtool -N {i} flow-type udp4 dst-port 5000 m 0x7 action 0 loc 2"),
            format!("ethtool -N {i} flow-type udp6 dst-port 5000 m 0x7 action 0 loc 3"),
        ]
    };
    let cmds: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("ethtool"))
        .collect();
    let mut want = expected_cmds("veth-rin");
    want.extend(expected_cmds("veth-rout"));
    assert_eq!(cmds, want, "{text}");
    assert!(lines.contains(&"#   rt -> queue 0"), "{text}");
    assert!(
        lines.contains(&"#   be -> queue 1 (default: unmatched traffic)"),
        "{text}"
    );
    // The plan touched nothing: no control socket directory was created.
    assert!(!std::path::Path::new("/nonexistent/llr-steering-test").exists());

    // --steering on the command line overrides the config; xdp prints the ring layout.
    let (dir, cfg) = write_config("dry-xdp", CONFIG);
    let out = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["run", "--dry-run", "--steering", "xdp", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("ethtool"), "{text}");
    assert!(text.contains("#   rt -> ring 0 (rt)"), "{text}");
    assert!(text.contains("#   be -> ring 1 (be)"), "{text}");
}

#[test]
fn ntuple_rejects_inexpressible_rules_by_field() {
    let (dir, cfg) = write_config(
        "flex",
        &format!("{CONFIG}\n[[rules]]\nclass = \"rt\"\nflex = {{ offset = 14, value = 0x00b8, mask = 0x00fc }}\n"),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .args(["run", "--dry-run", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("rules[2].flex"), "{err}");
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn ntuple_on_veth_fails_naming_the_interface() {
    llr_io::sys::require_root();
    if Command::new("ethtool").arg("--version").output().is_err() {
        eprintln!("skipped: no ethtool");
        return;
    }
    let topo = llr_traffic::netns::Topology::new("llrntp").expect("topology");
    let (dir, cfg) = write_config("veth", CONFIG);
    let out = topo
        .router
        .command(env!("CARGO_BIN_EXE_llrouter"))
        .args(["run", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a config that does not fit the host: {err}"
    );
    assert!(err.contains("steering: \"ntuple\""), "{err}");
    assert!(err.contains("veth-rin: the NIC has no ntuple"), "{err}");
    let attached = topo.router.xdp_links().unwrap();
    assert!(attached.is_empty(), "nothing attached: {attached:?}");
}
