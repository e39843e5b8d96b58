//! AF_XDP sockets: one UMEM per worker, shared by every interface queue ("port") the worker
//! serves and by one socket per ring of the layout on each port (`XDP_SHARED_UMEM`).
//!
//! Why one UMEM across interfaces: a frame received on the ingress port is transmitted from the
//! same UMEM chunk on the egress port's Tx ring, with no copy (copy mode on veth still copies in
//! the kernel, but user space never does). The price is one fill/completion pair per
//! (ifindex, queue), which the kernel supports for shared UMEMs, and a single owner of the free
//! chunk list: the worker thread. Each port's first socket owns its fill + completion rings;
//! later sockets of the port bind with `XDP_SHARED_UMEM` only (NOTES: `XDP_COPY` or
//! `XDP_USE_NEED_WAKEUP` there is EINVAL).
//!
//! [`Device`] implements [`RingView`](llr_core::sched::RingView): the backlog of ring *r* is the number of rx descriptors
//! waiting in ring *r*'s sockets on all ports, so the poll engine of `llr-core` schedules the
//! real rings exactly as it schedules the simulator's FIFOs. [`TxSocket`] is the generator's
//! transmit-only socket; both register their memory through one UMEM type (`umem.rs`).

use std::ptr::NonNull;

/// What failed in setting up AF_XDP sockets and their UMEM.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    /// Ring sizes that do not check out, named by the field.
    #[error(transparent)]
    Options(#[from] ConfigError),
    /// A request the sockets cannot take (no ports, sizes that are not powers of two).
    #[error("{0}")]
    Invalid(String),
    /// A step of opening or binding a socket (`op`) failed; `hint` says what to change.
    #[error("{op} (ifindex {ifindex}, queue {queue}): {cause}{hint}")]
    Socket {
        op: String,
        ifindex: u32,
        queue: u32,
        cause: std::io::Error,
        hint: &'static str,
    },
    /// The queue is bound by another AF_XDP socket.
    #[error(transparent)]
    QueueBusy(#[from] QueueBusy),
    /// The UMEM could not be mapped or registered; `hint` names the limit to raise.
    #[error("{op} ({kib} KiB): {cause}{hint}")]
    Umem {
        op: &'static str,
        kib: usize,
        cause: std::io::Error,
        hint: String,
    },
}

impl XskError {
    /// A failed step of socket set-up, from xdpilone's errno.
    fn socket(op: impl Into<String>, ifindex: u32, queue: u32, e: xdpilone::Errno) -> XskError {
        XskError::Socket {
            op: op.into(),
            ifindex,
            queue,
            cause: std::io::Error::from_raw_os_error(e.get_raw().abs()),
            hint: "",
        }
    }
}

type Result<T, E = XskError> = std::result::Result<T, E>;
use llr_core::sched::ConfigError;
use xdpilone::xdp::XdpDesc;

mod device;
mod frags;
mod tx_socket;
mod umem;

pub use device::{Device, PortSpec, SocketSlot};
pub use frags::MAX_FRAME_MB;
pub use tx_socket::TxSocket;

/// How the worker waits for packets when its poll engine is idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum WakeMode {
    /// NAPI: block in poll() on the rx fds when every ring is empty (the "interrupt").
    #[default]
    Interrupt,
    /// Never sleep: spin over the rings in user space. No kernel busy-poll socket options are
    /// set: they act inside a receive syscall, which a spinning worker never makes.
    Busy,
    /// Spin `spin_us` before blocking.
    Adaptive,
}

impl WakeMode {
    /// The name in configs and on the control socket.
    pub fn name(self) -> &'static str {
        match self {
            WakeMode::Interrupt => "interrupt",
            WakeMode::Busy => "busy",
            WakeMode::Adaptive => "adaptive",
        }
    }
}

/// Socket and UMEM sizes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct XskOptions {
    /// UMEM chunk size (power of two, 2048 or 4096). 4096 by default: a 2048-byte chunk holds a
    /// 1514-byte frame in copy mode, but zero-copy drivers that size receive buffers in whole KiB
    /// (igb, ixgbe) would get 1 KiB buffers and cut it.
    pub frame_size: u32,
    /// Rx ring entries per socket (= per class ring per port).
    pub rx_size: u32,
    /// Tx ring entries per port.
    pub tx_size: u32,
    /// Fill and completion ring entries per port.
    pub fill_size: u32,
    /// Egress queue (software, per port and ring) used when the Tx ring is full.
    pub egress_queue: u32,
    /// UMEM chunks besides the rings' for frames held in flow queues (the flow scheduler);
    /// 0 without flows. Held frames beyond it leave the fill rings short (drops at reception).
    pub hold_frames: u32,
    /// Zero-copy (the driver receives into the UMEM) or copy mode.
    pub zero_copy: ZeroCopy,
    /// Frames may span several chunks (`XDP_USE_SG`, Linux 6.6+), for MTUs beyond one chunk.
    /// In a config it allows multi-buffer (the default); the router turns it on for the
    /// sockets only where an MTU needs it. `false` refuses such MTUs at start instead.
    pub multi_buffer: bool,
}

/// How the sockets bind: `auto` takes zero-copy where the driver offers it; `on` refuses to
/// start without it; `off` always copies (for comparison, or around a driver's zero-copy bug).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZeroCopy {
    #[default]
    Auto,
    On,
    Off,
}

impl ZeroCopy {
    /// The `XDP_ZEROCOPY` / `XDP_COPY` bind flag (none for `auto`). Only the UMEM's first
    /// socket takes it; every later socket of the UMEM follows its mode.
    pub(crate) fn bind_flag(self) -> u16 {
        match self {
            ZeroCopy::Auto => 0,
            ZeroCopy::On => xdpilone::SocketConfig::XDP_BIND_ZEROCOPY,
            ZeroCopy::Off => xdpilone::SocketConfig::XDP_BIND_COPY,
        }
    }
}

impl Default for XskOptions {
    fn default() -> Self {
        XskOptions {
            frame_size: 4096,
            rx_size: 512,
            tx_size: 1024,
            fill_size: 2048,
            egress_queue: 1024,
            hold_frames: 0,
            zero_copy: ZeroCopy::Auto,
            multi_buffer: true,
        }
    }
}

impl XskOptions {
    /// Checks the sizes; errors name the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("rx-size", self.rx_size),
            ("tx-size", self.tx_size),
            ("fill-size", self.fill_size),
        ] {
            if !v.is_power_of_two() || !(64..=32768).contains(&v) {
                return Err(ConfigError::new(
                    name,
                    format!("{v} must be a power of two between 64 and 32768"),
                ));
            }
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(ConfigError::new(
                "frame-size",
                format!("{} must be 2048 or 4096", self.frame_size),
            ));
        }
        if self.egress_queue == 0 {
            return Err(ConfigError::new("egress-queue", "must be at least 1"));
        }
        Ok(())
    }
}

/// What the caller of [`Device::recv`] decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Transmit the first `len` bytes of the (rewritten) frame on interface `ifindex`.
    Tx { ifindex: u32, len: usize },
    /// Give the chunk back (dropped, counted by the caller).
    Drop,
    /// Keep the frame for later ([`Device::take_held`]): its chunk stays the caller's until
    /// [`Device::finish_held`] or [`Device::free_held`]. `tag` travels with it (a flow id).
    Hold { tag: u32 },
}

/// A received frame kept out of the rings (in a flow queue). Not `Clone`: a chunk has one owner,
/// and handing the token back is what frees or transmits it.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    addr: u64,
    len: u32,
    port: u16,
    ring: u16,
    ingress: u32,
    pub tag: u32,
    /// A frame that arrived in several chunks: its bytes gathered, and its other chunks.
    multi: Option<Box<frags::Gathered>>,
}

impl Held {
    /// The ring (socket index) it was received on.
    pub fn ring(&self) -> usize {
        self.ring as usize
    }
    /// The frame's length.
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The interface it came in on.
    pub fn ingress(&self) -> u32 {
        self.ingress
    }
}

/// Frames a receive callback sends besides (or instead of) the one it was handed: IPv4
/// fragments of a frame larger than the egress MTU, each in a chunk of its own.
pub struct Spare<'a> {
    free: &'a mut Vec<u64>,
    base: NonNull<u8>,
    frame_size: u64,
    out: &'a mut Vec<(u32, XdpDesc)>,
}

/// Free chunks [`Spare::tx`] leaves for the fill rings, so that extra frames cannot starve
/// reception.
const SPARE_RESERVE: usize = 256;

impl Spare<'_> {
    /// Takes a free chunk, lets `write` fill it (returning the frame length, 0 for nothing)
    /// and queues it for transmission on `ifindex` after the frame being served. False when no
    /// chunk can be spared.
    pub fn tx(&mut self, ifindex: u32, write: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if self.free.len() <= SPARE_RESERVE {
            return false;
        }
        let Some(chunk) = self.free.pop() else {
            return false;
        };
        // SAFETY: every address on the free list is the start of a chunk of `frame_size` bytes
        // inside the UMEM mapping `base` points to, owned by user space (not in any ring) until
        // it is queued below or pushed back; nothing else references it meanwhile.
        let buf = unsafe {
            std::slice::from_raw_parts_mut(
                self.base.as_ptr().add(chunk as usize),
                self.frame_size as usize,
            )
        };
        let len = write(buf).min(self.frame_size as usize);
        if len == 0 {
            self.free.push(chunk);
            return false;
        }
        self.out.push((
            ifindex,
            XdpDesc {
                addr: chunk,
                len: len as u32,
                options: 0,
            },
        ));
        true
    }
}

/// Per-port counters.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PortStats {
    pub ifindex: u32,
    pub rx: u64,
    pub tx: u64,
    /// Frames dropped because the egress software queue of their ring was full.
    pub egress_drops: u64,
    /// Tx to an interface this device does not serve.
    pub no_port: u64,
    /// Fill-ring wake-ups (need_wakeup set).
    pub fill_wakeups: u64,
    /// Tx kicks (sendto syscalls; copy mode transmits in them).
    pub tx_kicks: u64,
    /// Frames that arrived in several chunks (multi-buffer).
    pub rx_multi: u64,
    /// Multi-buffer frames dropped whole because their chunks made no frame (more chunks or
    /// bytes than a frame can have, or a chunk outside the UMEM).
    pub rx_broken: u64,
    /// Kernel counters of the port's sockets, summed: rx dropped, rx ring full, fill ring empty.
    pub kernel_rx_dropped: u64,
    pub kernel_rx_ring_full: u64,
    pub kernel_fill_empty: u64,
    pub kernel_tx_invalid: u64,
    /// Tx kicks the kernel refused with an error (not "busy, try again"): the frames stay in
    /// the Tx ring, untransmitted, while this grows.
    pub tx_kick_errors: u64,
}

impl PortStats {
    /// Adds `o`'s counters (another queue of the same interface, or another worker's).
    pub fn add(&mut self, o: &PortStats) {
        self.rx += o.rx;
        self.tx += o.tx;
        self.egress_drops += o.egress_drops;
        self.no_port += o.no_port;
        self.fill_wakeups += o.fill_wakeups;
        self.tx_kicks += o.tx_kicks;
        self.rx_multi += o.rx_multi;
        self.rx_broken += o.rx_broken;
        self.kernel_rx_dropped += o.kernel_rx_dropped;
        self.kernel_rx_ring_full += o.kernel_rx_ring_full;
        self.kernel_fill_empty += o.kernel_fill_empty;
        self.kernel_tx_invalid += o.kernel_tx_invalid;
        self.tx_kick_errors += o.tx_kick_errors;
    }

    /// `ports` summed per interface (first-seen order).
    pub fn per_interface<'a>(ports: impl IntoIterator<Item = &'a PortStats>) -> Vec<PortStats> {
        let mut out: Vec<PortStats> = Vec::new();
        for p in ports {
            match out.iter_mut().find(|x| x.ifindex == p.ifindex) {
                Some(x) => x.add(p),
                None => out.push(p.clone()),
            }
        }
        out
    }
}

/// An rx queue another AF_XDP socket is bound to (after waiting for a just-closed one to go).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{interface} rx queue {queue} is held by another AF_XDP socket: {holder}. Stop it first \
     (`ip -d link show dev {interface}` shows its XDP program)"
)]
pub struct QueueBusy {
    pub interface: String,
    pub queue: u32,
    /// What holds the queue, as far as the interface shows it.
    pub holder: String,
}

/// Runs an AF_XDP bind, retrying for up to 2 s while the queue is busy: a socket closed just
/// before on the same queue (the previous generator or router) is released by the kernel
/// asynchronously, and until then bind fails with EBUSY (seen in CI).
fn bind_retrying(bind: impl Fn() -> Result<(), xdpilone::Errno>) -> Result<(), xdpilone::Errno> {
    let mut tries = 0;
    loop {
        match bind() {
            Err(e) if e.get_raw().abs() == libc::EBUSY && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}
