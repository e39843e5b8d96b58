//! Fixtures shared by the root-only router tests (gen ns → router ns → sink ns).
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use llr_traffic::netns::Topology;

/// The testbed topology with the veths' default offloads: the generator's plain sockets leave
/// their UDP checksums partial, and the router completes them.
pub fn topology(prefix: &str) -> Topology {
    Topology::new(prefix).expect("topology")
}

/// A UDP socket bound to `bind` inside namespace `ns`, with a read timeout of `timeout_ms`.
pub fn udp_in(ns: &llr_traffic::netns::Netns, bind: &str, timeout_ms: u64) -> std::net::UdpSocket {
    let bind = bind.to_string();
    let s = ns
        .run(move || std::net::UdpSocket::bind(bind))
        .expect("enter namespace")
        .expect("bind");
    s.set_read_timeout(Some(Duration::from_millis(timeout_ms)))
        .expect("read timeout");
    s
}

/// The count of `name` in a worker's `(name, count)` list (0 if absent).
pub fn count(list: &[(String, u64)], name: &str) -> u64 {
    list.iter().find(|(k, _)| k == name).map_or(0, |(_, c)| *c)
}

/// A per-process scratch directory, removed on drop (also when the test fails).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("llr-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create temp dir");
        TempDir(d)
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `router.toml` from `text`, with `CTL` replaced by a control socket path inside
    /// this directory (so parallel tests never share a socket), and returns its path.
    pub fn router_config(&self, text: &str) -> PathBuf {
        let cfg = self.join("router.toml");
        let ctl = self.join("ctl.sock");
        std::fs::write(&cfg, text.replace("CTL", &ctl.display().to_string()))
            .expect("write router.toml");
        cfg
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How many of the router namespace's interfaces carry an XDP program.
pub fn xdp_attached(topo: &Topology) -> usize {
    topo.router.xdp_links().unwrap().len()
}

type RouterResult = anyhow::Result<anyhow::Result<Option<llr_router::RunReport>>>;

/// `llrouter run --config …` in-process (`llr_router::Router::start` with the file as its
/// reload source) on a thread inside the router namespace, bounded at 25 s. Dropping it (a
/// failed assertion included) asks the router to stop, so it never outlives the test.
pub struct RouterThread {
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
    handle: Option<JoinHandle<RouterResult>>,
}

impl RouterThread {
    /// Starts the router; does not wait for it (see [`RouterThread::start`]).
    pub fn spawn(topo: &Topology, config: PathBuf) -> RouterThread {
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicBool::new(false));
        let (s2, r2) = (stop.clone(), ready.clone());
        let handle = topo.router.spawn(move || -> anyhow::Result<_> {
            let cfg = llr_router::RouterConfig::load(&config)?;
            let opts = llr_router::StartOptions {
                config_path: Some(config),
                duration: Some(Duration::from_secs(25)), // bound, if the test fails first
                steering: None,
            };
            let running = llr_router::Router::start(cfg, opts)?;
            r2.store(
                running.wait_ready(Duration::from_secs(30)),
                Ordering::Relaxed,
            );
            while !s2.load(Ordering::Relaxed) && !running.is_finished() {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(Some(running.stop()?))
        });
        RouterThread {
            stop,
            ready,
            handle: Some(handle),
        }
    }

    /// Starts the router and waits until its worker loop runs (bounded: 30 s).
    pub fn start(topo: &Topology, config: PathBuf) -> RouterThread {
        let r = RouterThread::spawn(topo, config);
        let t0 = Instant::now();
        while !r.ready.load(Ordering::Relaxed) {
            let done = r.handle.as_ref().is_some_and(|h| h.is_finished());
            assert!(
                !done && t0.elapsed() < Duration::from_secs(30),
                "router did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    /// Stops the router and returns what its run returned.
    pub fn finish(mut self) -> anyhow::Result<Option<llr_router::RunReport>> {
        self.stop.store(true, Ordering::Relaxed);
        let h = self.handle.take().expect("joined once");
        h.join()
            .expect("router thread panicked")
            .expect("enter the router namespace")
    }
}

impl Drop for RouterThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `llrouter ctl --socket SOCK ARGS…` through the binary: (exit code, stdout, stderr).
pub fn ctl_bin(sock: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_llrouter"))
        .arg("ctl")
        .arg("--socket")
        .arg(sock)
        .args(args)
        .output()
        .expect("run llrouter ctl");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A child process killed on drop (a failed assertion included).
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads `err` line by line until one holds `needle`; returns everything read. Panics with
/// what was read if the stream ends or 30 s pass first.
pub fn wait_for_line(err: &mut impl std::io::BufRead, needle: &str) -> String {
    let t0 = Instant::now();
    let mut said = String::new();
    while !said.contains(needle) {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap_or(0) == 0 || t0.elapsed() > Duration::from_secs(30) {
            panic!("no `{needle}` from the child:\n{said}");
        }
        said += &l;
    }
    said
}

/// A two-class ll-wfq router on the topology's veth pair, with its control socket (`CTL` is
/// replaced by [`TempDir::router_config`]).
pub const LL_WFQ_CONFIG: &str = r#"
interfaces = ["veth-rin", "veth-rout"]
strategy = "ll-wfq"
wake = "interrupt"
[[classes]]
name = "rt"
budget = 60
[[classes]]
name = "be"
budget = 4
[control]
socket = "CTL"
"#;
