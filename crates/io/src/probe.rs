//! What the running kernel offers llrouter, looked up at start so that the router takes the best
//! path there is and says which, and refuses with one line where a hard requirement is missing.
//!
//! The per-interface facts (native or generic XDP, zero-copy or copy) are only known once the
//! classifier is attached and the sockets are bound; they are reported from there.

/// The oldest kernel llrouter runs on: the classifier copies a frame's head with
/// `bpf_xdp_load_bytes`, added in Linux 5.18. Tested from 6.1 (docs/compatibility.md).
pub const MIN_KERNEL: (u32, u32) = (5, 18);

/// `uname -r`.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `(major, minor)` of a release string such as `6.1.0-31-amd64` or `6.12.57+deb13-rt-amd64`.
pub fn parse_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Kernel features the datapath can use where present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFeatures {
    pub release: String,
    pub version: Option<(u32, u32)>,
    /// `SO_PREFER_BUSY_POLL` and `SO_BUSY_POLL_BUDGET` (5.11).
    pub prefer_busy_poll: bool,
    /// AF_XDP multi-buffer (`XDP_USE_SG`, 6.6): frames over several UMEM chunks.
    pub multi_buffer: bool,
    /// A PREEMPT_RT kernel (its softirqs run in threads).
    pub preempt_rt: bool,
}

impl KernelFeatures {
    /// The running kernel's.
    pub fn probe() -> KernelFeatures {
        let release = kernel_release();
        let version = parse_version(&release);
        let rt = std::fs::read_to_string("/sys/kernel/realtime").is_ok_and(|s| s.trim() == "1")
            || release.contains("-rt");
        KernelFeatures::from_release(release, rt, version)
    }

    fn from_release(release: String, preempt_rt: bool, version: Option<(u32, u32)>) -> Self {
        let at_least = |v: (u32, u32)| version.is_some_and(|k| k >= v);
        KernelFeatures {
            prefer_busy_poll: at_least((5, 11)),
            multi_buffer: at_least((6, 6)),
            preempt_rt,
            release,
            version,
        }
    }

    /// Refuses a kernel older than [`MIN_KERNEL`] in one line (an unparsable release passes:
    /// the classifier's load then says what is missing).
    pub fn check_minimum(&self) -> Result<(), KernelTooOld> {
        match self.version {
            Some(v) if v < MIN_KERNEL => Err(KernelTooOld {
                release: self.release.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// `Linux 6.12.57+deb13-rt-amd64 (PREEMPT_RT)`.
    pub fn describe(&self) -> String {
        format!(
            "Linux {}{}",
            self.release,
            if self.preempt_rt { " (PREEMPT_RT)" } else { "" }
        )
    }
}

/// A kernel older than [`MIN_KERNEL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "llrouter needs Linux {}.{} or later (the classifier uses bpf_xdp_load_bytes); this kernel is {release}",
    MIN_KERNEL.0,
    MIN_KERNEL.1
)]
pub struct KernelTooOld {
    pub release: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_release_strings_parse() {
        assert_eq!(parse_version("6.1.0-31-amd64"), Some((6, 1)));
        assert_eq!(parse_version("6.12.57+deb13-rt-amd64"), Some((6, 12)));
        assert_eq!(parse_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn features_follow_the_version_and_old_kernels_are_refused_in_one_line() {
        let f = KernelFeatures::from_release("6.1.0-31-amd64".into(), false, Some((6, 1)));
        assert!(f.prefer_busy_poll && !f.multi_buffer);
        assert!(f.check_minimum().is_ok());
        let f = KernelFeatures::from_release("5.10.0-30-amd64".into(), false, Some((5, 10)));
        let e = f.check_minimum().unwrap_err().to_string();
        assert!(
            e.starts_with("llrouter needs Linux 5.18 or later")
                && e.contains("5.10.0-30-amd64")
                && !e.contains('\n'),
            "{e}"
        );
        let f = KernelFeatures::from_release("6.12.57+deb13-rt-amd64".into(), true, Some((6, 12)));
        assert!(f.multi_buffer);
        assert_eq!(f.describe(), "Linux 6.12.57+deb13-rt-amd64 (PREEMPT_RT)");
    }
}

/// Capabilities the router needs: XDP attach and netlink (NET_ADMIN), AF_XDP sockets
/// (NET_RAW), BPF maps and programs (BPF, or SYS_ADMIN which implies it).
const NEEDED: [(u32, &str); 3] = [(12, "CAP_NET_ADMIN"), (13, "CAP_NET_RAW"), (39, "CAP_BPF")];
const CAP_SYS_ADMIN: u32 = 21;

/// The capabilities the router needs that this process lacks (empty: it has them all).
pub fn missing_capabilities() -> Vec<&'static str> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    missing_of(&status)
}

fn missing_of(status: &str) -> Vec<&'static str> {
    let Some(eff) = (status.lines())
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
    else {
        return Vec::new(); // cannot tell: the first privileged call will say
    };
    let has = |bit: u32| eff >> bit & 1 == 1;
    NEEDED
        .iter()
        .filter(|(bit, _)| !(has(*bit) || *bit == 39 && has(CAP_SYS_ADMIN)))
        .map(|(_, n)| *n)
        .collect()
}

/// The one-line refusal for missing capabilities.
pub fn privileges_message(missing: &[&str]) -> String {
    format!(
        "llrouter run needs root, or the capabilities CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF; \
         this process lacks {}. Run it with sudo, or as the systemd unit (llrouter.service \
         grants them)",
        missing.join(", ")
    )
}

#[cfg(test)]
mod caps_tests {
    use super::*;

    #[test]
    fn capabilities_from_proc_status() {
        let root = "Name:\tx\nCapEff:\t000001ffffffffff\n";
        assert!(missing_of(root).is_empty());
        let nobody = "CapEff:\t0000000000000000\n";
        assert_eq!(
            missing_of(nobody),
            ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF"]
        );
        // NET_ADMIN + NET_RAW + SYS_ADMIN: SYS_ADMIN stands in for BPF
        let old = format!("CapEff:\t{:016x}\n", 1u64 << 12 | 1 << 13 | 1 << 21);
        assert!(missing_of(&old).is_empty());
        let no_raw = format!("CapEff:\t{:016x}\n", 1u64 << 12 | 1 << 39);
        assert_eq!(missing_of(&no_raw), ["CAP_NET_RAW"]);
        assert!(privileges_message(&["CAP_BPF"]).contains("lacks CAP_BPF"));
    }
}
