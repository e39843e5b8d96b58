//! Fixtures shared by the root-only router tests (gen ns → router ns → sink ns).
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;
use std::time::{Duration, Instant};

use llr_io::netns::{addr, Topology};

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A topology whose generator computes its own UDP checksums: veth leaves them to the receiver,
/// and a frame forwarded through AF_XDP reaches the sink exactly as the generator sent it.
pub fn topology(prefix: &str) -> Topology {
    let topo = Topology::new(prefix).expect("topology");
    topo.gen
        .exec(&["ethtool", "-K", addr::GEN_IF, "tx", "off"])
        .expect("ethtool -K tx off");
    topo
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

/// Waits until both router interfaces carry the classifier (bounded: 30 s).
pub fn wait_attached(topo: &Topology) {
    let t0 = Instant::now();
    loop {
        let l = topo.router.ip(&["-d", "link", "show"]).unwrap();
        if String::from_utf8_lossy(&l.stdout)
            .matches("prog/xdp")
            .count()
            >= 2
        {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "router did not attach"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
}
