//! `huge-pages = true` (root: namespaces, veth, XDP): the running router's route tables sit in
//! transparent huge pages, and without the setting nothing of the router does.

mod common;
use common::{topology, wait_for_line, Running, TempDir};

use std::io::BufReader;
use std::process::{Command, Stdio};

/// The THP mode, as `[madvise]` in `always [madvise] never`.
fn thp_mode() -> String {
    let m = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .expect("transparent huge pages in this kernel");
    m.split_whitespace()
        .find(|w| w.starts_with('['))
        .unwrap_or_default()
        .to_string()
}

/// Starts the router with `huge_pages`, waits until it routes (its tables are built from the
/// kernel's routes before it says so), and returns its AnonHugePages in kB.
fn huge_kb(huge_pages: bool) -> u64 {
    let topo = topology("llrhuge");
    let dir = TempDir::new(&format!("huge-pages-{huge_pages}"));
    let cfg = dir.router_config(&format!(
        "interfaces = [\"veth-rin\", \"veth-rout\"]\nhuge-pages = {huge_pages}\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n[control]\nsocket = \"CTL\"\n"
    ));
    let mut child = Running(
        Command::new("ip")
            .args(["netns", "exec", topo.router.name()])
            .arg(env!("CARGO_BIN_EXE_llrouter"))
            .args(["run", "--duration", "20", "--config"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start llrouter"),
    );
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    wait_for_line(&mut err, "routing between");
    // `ip netns exec` runs llrouter in its own process (exec), so the child's pid is the
    // router's.
    let rollup = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", child.0.id()))
        .expect("the router's smaps_rollup");
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .expect("AnonHugePages")
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn huge_pages_back_the_route_tables_only_when_asked() {
    llr_io::sys::require_root();
    let mode = thp_mode();
    assert_ne!(
        mode, "[never]",
        "transparent huge pages are off on this kernel: huge-pages cannot be shown to work"
    );
    // The connected routes write into the IPv4 first level and the IPv6 trie; under the advice
    // the first write into each 2 MiB of them takes a whole huge page.
    let with = huge_kb(true);
    assert!(with >= 2048, "huge-pages = true: {with} kB in huge pages");
    if mode == "[madvise]" {
        // Only advised memory gets huge pages in this mode, and nothing else of the router
        // asks for them.
        let without = huge_kb(false);
        assert_eq!(without, 0, "huge-pages = false: {without} kB in huge pages");
    }
}
