//! The Debian package installs and runs on a clean Debian 12 (root: namespaces, veth, XDP,
//! systemd-nspawn).
//!
//! `scripts/package.sh` builds the .deb from this build's binary; `scripts/debian-rootfs.sh`
//! makes (once) a debootstrapped bookworm with systemd. A copy of that root boots under
//! systemd-nspawn inside the testbed's router namespace, so its systemd sees the veth pair.
//! A one-shot unit in it installs the package with dpkg, points the default config at the
//! veths, starts `llrouter.service` and asks it for its status and table; meanwhile the host
//! pings through it (DF set) from the generator namespace to the sink. Then the unit stops,
//! the package is purged, and the container powers off.

mod common;
use common::{topology, TempDir};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use llr_traffic::netns::addr;

const CHECK: &str = r#"#!/bin/sh
exec > /result/log 2>&1
set -x
dpkg -i /pkg/llrouter.deb && echo INSTALLED
dpkg-query -W -f='${Status}\n' llrouter
for f in /usr/bin/llrouter /lib/systemd/system/llrouter.service /etc/llrouter/router.toml \
    /usr/share/man/man1/llrouter.1.gz /usr/share/man/man1/llrouter-ctl-show-fib.1.gz \
    /usr/share/bash-completion/completions/llrouter /usr/share/zsh/vendor-completions/_llrouter \
    /usr/share/fish/vendor_completions.d/llrouter.fish /usr/share/doc/llrouter/operations.md \
    /usr/share/llrouter/grafana/llrouter.json; do
    [ -s "$f" ] && echo "HAS $f"
done
doc=$(sed -n 's|^Documentation=file://||p' /lib/systemd/system/llrouter.service)
[ -s "$doc" ] && echo "DOC $doc"
sed -i 's/"eth1", "eth2"/"veth-rin", "veth-rout"/' /etc/llrouter/router.toml
systemctl start llrouter
for i in $(seq 1 60); do
    llrouter ctl status >/dev/null 2>&1 && break
    sleep 0.5
done
echo "ACTIVE $(systemctl is-active llrouter)"
llrouter ctl status
llrouter ctl show fib
touch /result/up
for i in $(seq 1 60); do
    [ -e /result/pinged ] && break
    sleep 0.5
done
llrouter ctl counters
systemctl stop llrouter
echo "STOPPED $(systemctl is-active llrouter)"
journalctl -u llrouter --no-pager | tail -n 30
dpkg --purge llrouter && echo PURGED
[ -e /usr/bin/llrouter ] || echo "GONE /usr/bin/llrouter"
[ -e /etc/llrouter/router.toml ] || echo "GONE /etc/llrouter/router.toml"
echo DONE
systemctl poweroff
"#;

const UNIT: &str = "[Unit]\nDescription=llrouter package check\nAfter=multi-user.target\n\
[Service]\nType=oneshot\nExecStart=/check.sh\n[Install]\nWantedBy=multi-user.target\n";

fn script(name: &str, envs: &[(&str, &str)]) -> String {
    let o = Command::new("bash")
        .arg(format!("scripts/{name}"))
        .envs(envs.iter().copied())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(o.status.success(), "{name} failed");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP, systemd-nspawn (scripts/test.sh runs it as root)"]
fn the_package_installs_and_its_unit_forwards_on_debian_12() {
    llr_io::sys::require_root();
    let deb = script(
        "package.sh",
        &[
            ("SKIP_BUILD", "1"),
            ("LLROUTER_BIN", env!("CARGO_BIN_EXE_llrouter")),
        ],
    );
    let rootfs = script("debian-rootfs.sh", &[]);
    let topo = topology("llrpkg");
    let dir = TempDir::new("pkg-debian");
    let root = dir.join("root");
    let res = dir.join("result");
    std::fs::create_dir_all(&res).unwrap();
    let cp = Command::new("cp")
        .args(["-a", "--reflink=auto", &rootfs])
        .arg(&root)
        .status()
        .unwrap();
    assert!(cp.success(), "copy {rootfs}");
    std::fs::write(root.join("check.sh"), CHECK).unwrap();
    Command::new("chmod")
        .args(["0755"])
        .arg(root.join("check.sh"))
        .status()
        .unwrap();
    std::fs::create_dir_all(root.join("pkg")).unwrap();
    std::fs::write(root.join("etc/systemd/system/llr-check.service"), UNIT).unwrap();
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(
        "/etc/systemd/system/llr-check.service",
        wants.join("llr-check.service"),
    )
    .unwrap();

    let mut boot = Command::new("timeout")
        .args([
            "180",
            "systemd-nspawn",
            "-q",
            "-b",
            "--keep-unit",
            "--register=no",
        ])
        .arg("-D")
        .arg(&root)
        .arg(format!(
            "--network-namespace-path=/run/netns/{}",
            topo.router.name()
        ))
        // The router attaches XDP and binds AF_XDP sockets: the container keeps every
        // capability and may call bpf(2).
        .args([
            "--capability=all",
            "--system-call-filter=bpf perf_event_open",
        ])
        .arg(format!("--bind={}:/result", res.display()))
        .arg(format!("--bind-ro={deb}:/pkg/llrouter.deb"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("systemd-nspawn");
    // The container's router is up: ping through it, DF set, from the generator namespace.
    let t0 = Instant::now();
    while !res.join("up").exists() {
        if boot.try_wait().unwrap().is_some() || t0.elapsed() > Duration::from_secs(120) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            topo.gen.name(),
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
        ])
        .args(["-W", "2", "-M", "do", "-s", "1400", addr::SINK_V4])
        .output()
        .ok();
    std::fs::write(res.join("pinged"), b"").unwrap();
    let status = boot.wait().unwrap();
    let log = std::fs::read_to_string(res.join("log")).unwrap_or_default();
    assert!(
        status.success(),
        "the container did not power off cleanly:\n{log}"
    );
    let ping = ping.expect("ping ran");
    let ping_out = String::from_utf8_lossy(&ping.stdout);
    for want in [
        "INSTALLED",
        "install ok installed",
        "HAS /usr/bin/llrouter",
        "HAS /lib/systemd/system/llrouter.service",
        "HAS /etc/llrouter/router.toml",
        "HAS /usr/share/man/man1/llrouter.1.gz",
        "HAS /usr/share/man/man1/llrouter-ctl-show-fib.1.gz",
        "HAS /usr/share/bash-completion/completions/llrouter",
        "HAS /usr/share/zsh/vendor-completions/_llrouter",
        "HAS /usr/share/fish/vendor_completions.d/llrouter.fish",
        "HAS /usr/share/llrouter/grafana/llrouter.json",
        "DOC /usr/share/doc/llrouter/operations.md",
        "ACTIVE active",
        "strategy     ll-wfq",
        "10.71.2.0/24  connected  veth-rout",
        "STOPPED inactive",
        "PURGED",
        "GONE /usr/bin/llrouter",
        "GONE /etc/llrouter/router.toml",
        "DONE",
    ] {
        assert!(
            log.contains(want),
            "no `{want}` in the container's log:\n{log}"
        );
    }
    assert!(
        ping.status.success() && ping_out.contains("3 received"),
        "ping through the packaged router:\n{ping_out}\n{log}"
    );
    assert_eq!(
        common::xdp_attached(&topo),
        0,
        "the unit's stop detached XDP"
    );
    drop(dir);
    assert!(
        !Path::new(&root).exists(),
        "the container's root is removed"
    );
}
