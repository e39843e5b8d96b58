//! The punt path: frames the worker hands to the kernel after they reached user space.
//!
//! Once a frame sits in an AF_XDP ring the kernel never sees it; the classifier hands almost
//! everything the host must see (ARP, ND, multicast, the router's own addresses) to the kernel
//! in XDP already, but the forwarder can still decide late (IP options, a route that is the
//! kernel's, a local address the classifier did not know yet). Such frames are written to a
//! TAP device in the router's namespace: the kernel receives them as if they had arrived on it
//! and answers or forwards them by its own routing table. The destination MAC is rewritten to
//! the TAP's so the kernel takes unicast frames as addressed to the host.
//!
//! The TAP is not persistent: it disappears with its last file descriptor, so neither a clean
//! exit nor a crash leaves it behind. It is multi-queue: each worker opens its own queue of the
//! one device. Caveats: the kernel sees these packets arrive on the TAP, so
//! strict reverse-path filtering (`rp_filter = 1`) drops the ones whose source is routed
//! elsewhere, and forwarding by the kernel needs `net.ipv4.ip_forward` / IPv6 forwarding on, as
//! for any kernel router.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

/// What failed in setting up the punt TAP or reading an interface's state.
#[derive(Debug, thiserror::Error)]
pub enum PuntError {
    /// Not a usable interface name.
    #[error("interface name `{name}`: {reason}")]
    Name { name: String, reason: &'static str },
    /// A system call on the interface (`op`: `TUNSETIFF`, `SIOCGIFFLAGS`, …) failed.
    #[error("{interface}: {op}: {cause}")]
    Sys {
        interface: String,
        op: &'static str,
        cause: std::io::Error,
    },
}

type Result<T, E = PuntError> = std::result::Result<T, E>;

const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
/// One TAP, one queue per open: every worker of a router writes to its own queue of the same
/// device.
const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// `struct ifreq` with the union members the TAP set-up uses.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    /// `ifr_flags` (short) or `ifr_hwaddr` (sockaddr: family u16 then 14 data bytes).
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> Result<IfReq> {
        let bad = |reason| PuntError::Name {
            name: name.escape_debug().to_string(),
            reason,
        };
        let c = CString::new(name).map_err(|_| bad("contains NUL"))?;
        let b = c.as_bytes_with_nul();
        if b.len() > libc::IFNAMSIZ {
            return Err(bad("longer than 15 bytes"));
        }
        let mut r = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        for (d, &s) in r.name.iter_mut().zip(b) {
            *d = s as libc::c_char;
        }
        Ok(r)
    }

    fn flags(&self) -> libc::c_short {
        libc::c_short::from_ne_bytes([self.data[0], self.data[1]])
    }

    fn set_flags(&mut self, f: libc::c_short) {
        self.data[..2].copy_from_slice(&f.to_ne_bytes());
    }
}

/// Runs `ioctl(fd, req, ifr)`.
/// Whether an interface is up: administratively (`IFF_UP`) and with a carrier
/// (`IFF_RUNNING`), in the calling thread's network namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkState {
    pub admin_up: bool,
    pub carrier: bool,
}

impl LinkState {
    /// Up and with a carrier: frames flow.
    pub fn is_up(&self) -> bool {
        self.admin_up && self.carrier
    }

    /// `down` / `up, no carrier` / `up`.
    pub fn describe(&self) -> &'static str {
        match (self.admin_up, self.carrier) {
            (false, _) => "down",
            (true, false) => "up without a carrier",
            (true, true) => "up",
        }
    }
}

/// A socket to address interface ioctls to (in the calling thread's network namespace).
fn ioctl_socket(name: &str) -> Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before it is owned.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(PuntError::Sys {
            interface: name.to_string(),
            op: "socket for interface ioctls",
            cause: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: `s` is a fresh descriptor returned by socket(2) above, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(s) })
}

/// `name`'s flags (SIOCGIFFLAGS), in a request ready to set them back.
fn flags_of(sock: &OwnedFd, name: &str) -> Result<IfReq> {
    let mut ifr = IfReq::new(name)?;
    ioctl(
        sock.as_raw_fd(),
        libc::SIOCGIFFLAGS,
        &mut ifr,
        (name, "SIOCGIFFLAGS"),
    )?;
    Ok(ifr)
}

/// The state of `name`.
pub fn link_state(name: &str) -> Result<LinkState> {
    let f = flags_of(&ioctl_socket(name)?, name)?.flags() as libc::c_int;
    Ok(LinkState {
        admin_up: f & libc::IFF_UP != 0,
        carrier: f & libc::IFF_RUNNING != 0,
    })
}

fn ioctl(
    fd: i32,
    req: libc::c_ulong,
    ifr: &mut IfReq,
    (interface, op): (&str, &'static str),
) -> Result<()> {
    // SAFETY: `ifr` is a live, writable `struct ifreq`-sized value (16-byte name + 24-byte
    // union, as the kernel's) for the duration of the call; the request codes used here read
    // and write only within it.
    let r = unsafe { libc::ioctl(fd, req as _, ifr as *mut IfReq) };
    if r < 0 {
        return Err(PuntError::Sys {
            interface: interface.to_string(),
            op,
            cause: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Counters of the punt path.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PuntStats {
    /// Frames written to the TAP (the kernel has them).
    pub punted: u64,
    /// Frames the TAP refused (its queue full) or the rate limit held back: lost.
    pub dropped: u64,
}

/// A TAP device that hands frames to the kernel; see the module doc.
pub struct Punt {
    file: File,
    name: String,
    mac: [u8; 6],
    /// Frames allowed per [`Punt::WINDOW_NS`].
    limit: u32,
    window_start: u64,
    in_window: u32,
    pub stats: PuntStats,
}

impl std::fmt::Debug for Punt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Punt")
            .field("name", &self.name)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Punt {
    const WINDOW_NS: u64 = 10_000_000;

    /// Creates the TAP `name` in the calling thread's namespace and brings it up; at most
    /// `per_sec` frames a second are written (a flood of frames for the kernel must not take
    /// the worker's time from forwarding).
    pub fn open(name: &str, per_sec: u32) -> Result<Punt> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")
            .map_err(|cause| PuntError::Sys {
                interface: name.to_string(),
                op: "open /dev/net/tun (the punt path needs the tun driver)",
                cause,
            })?;
        let mut ifr = IfReq::new(name)?;
        ifr.set_flags(IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE);
        ioctl(file.as_raw_fd(), TUNSETIFF, &mut ifr, (name, "TUNSETIFF"))?;
        let sock = ioctl_socket(name)?;
        // No IPv6 link-local address on the TAP: its duplicate-address detection would end in
        // an address event a second later, and every address event makes the route mirror
        // re-dump and write-lock the forwarder while the worker is forwarding. The kernel
        // still receives IPv6 on an interface without addresses of its own. (Absent when IPv6
        // is disabled: nothing to prevent then.)
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/addr_gen_mode"), "1");
        let mut ifr = flags_of(&sock, name)?;
        let up = ifr.flags() | libc::IFF_UP as libc::c_short;
        ifr.set_flags(up);
        ioctl(
            sock.as_raw_fd(),
            libc::SIOCSIFFLAGS,
            &mut ifr,
            (name, "SIOCSIFFLAGS"),
        )?;
        let mut ifr = IfReq::new(name)?;
        ioctl(
            sock.as_raw_fd(),
            libc::SIOCGIFHWADDR,
            &mut ifr,
            (name, "SIOCGIFHWADDR"),
        )?;
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&ifr.data[2..8]);
        Ok(Punt {
            file,
            name: name.to_string(),
            mac,
            limit: (u64::from(per_sec) * Self::WINDOW_NS / 1_000_000_000).max(1) as u32,
            window_start: 0,
            in_window: 0,
            stats: PuntStats::default(),
        })
    }

    /// The TAP's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Hands `frame` to the kernel at time `now_ns` (monotonic); false if it was dropped. The
    /// destination MAC of a unicast frame is rewritten to the TAP's.
    pub fn send(&mut self, frame: &mut [u8], now_ns: u64) -> bool {
        if now_ns.saturating_sub(self.window_start) >= Self::WINDOW_NS {
            self.window_start = now_ns;
            self.in_window = 0;
        }
        if self.in_window >= self.limit || frame.len() < 14 {
            self.stats.dropped += 1;
            return false;
        }
        self.in_window += 1;
        if frame[0] & 1 == 0 {
            frame[..6].copy_from_slice(&self.mac);
        }
        match self.file.write(frame) {
            Ok(n) if n == frame.len() => {
                self.stats.punted += 1;
                true
            }
            _ => {
                self.stats.dropped += 1;
                false
            }
        }
    }
}
