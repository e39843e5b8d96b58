//! [`Device`]: the AF_XDP sockets of one worker, every port on one UMEM.

use std::cell::Cell;
use std::collections::VecDeque;
use std::num::NonZeroU32;

use super::{Result, XskError};
use llr_core::sched::{RingId, RingView};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, User};

use super::frags::{self, Gathered, MAX_FRAME_MB, MAX_PKT_DESCS, XDP_PKT_CONTD, XDP_USE_SG};
use super::umem::UmemArea;
use super::{bind_retrying, Action, Held, PortStats, Spare, XskOptions};
use crate::sys;

/// One interface queue of a device: its sockets (one per ring) share the fill and completion
/// rings of the queue; the first one also carries the queue's Tx ring.
struct Port {
    ifindex: u32,
    queue: u32,
    dq: DeviceQueue,
    /// Rx ring of each layout ring (index = ring id).
    rx: Vec<RingRx>,
    /// Per rx ring, frames known to wait in it: a lower bound, since only the kernel adds and
    /// only we take. The kernel's producer index sits on a cache line another CPU writes with
    /// every frame, so reading it is a miss; under overload the engine asks about a full BE
    /// ring several times per grant, and this answers from here until the known frames are
    /// taken (libxdp's `cached_prod` does the same).
    known: Vec<Cell<u32>>,
    tx: RingTx,
    fds: Vec<i32>,
    users: Vec<User>,
    /// Frames waiting for the Tx ring, per ring id (index 0 = highest priority).
    egress: Vec<VecDeque<XdpDesc>>,
    /// Tx descriptors submitted and not yet completed.
    in_flight: u32,
    stats: PortStats,
    zerocopy: bool,
}

impl Port {
    /// Kicks the Tx ring (copy mode transmits in this call). A refusal that is not "busy, try
    /// again" is counted, and said once per port: frames then wait in the Tx ring untransmitted,
    /// which nothing else would show. Returns whether the kernel took the kick.
    fn kick(&mut self) -> bool {
        self.stats.tx_kicks += 1;
        match sys::kick_tx(self.fds[0]) {
            Ok(()) => true,
            Err(e) => {
                if self.stats.tx_kick_errors == 0 {
                    let name = crate::ebpf::ifname(self.ifindex)
                        .unwrap_or_else(|_| format!("ifindex {}", self.ifindex));
                    tracing::warn!(
                        "{name} queue {}: the kernel refused to transmit (sendto: {e}): frames \
                         wait in the Tx ring; counted in the interface's errors",
                        self.queue
                    );
                }
                self.stats.tx_kick_errors += 1;
                false
            }
        }
    }
}

/// The AF_XDP side of one worker: its ports (interface queues) sharing one UMEM.
///
/// A device registers nothing anywhere: the caller puts [`Device::sockets`] into the
/// classifier of each interface (one classifier serves every worker's queues) and attaches it.
/// Frames for Tx leave through the first port of their egress interface (the worker's own Tx
/// queue there).
pub struct Device {
    // Field order matters for drop: ports (sockets, rings) before the UMEM before its memory.
    ports: Vec<Port>,
    mem: UmemArea,
    nrings: usize,
    opts: XskOptions,
    cursor: usize,
    /// Times the worker blocked in poll() and was woken by packets.
    pub sleeps: u64,
    pub wakeups: u64,
    /// `wait_with` saw its extra fd readable.
    extra_ready: bool,
    /// Frames the receive callback held ([`Action::Hold`]), not yet taken by the caller.
    held: Vec<Held>,
    /// Where a multi-buffer frame is gathered ([`MAX_FRAME_MB`] bytes; empty without
    /// multi-buffer).
    scratch: Vec<u8>,
}

/// Descriptors one receive call takes from a ring of one port (a frame may run past it, up to
/// [`MAX_PKT_DESCS`] more).
const BATCH: usize = 64;

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field(
                "ports",
                &self.ports.iter().map(|p| p.ifindex).collect::<Vec<_>>(),
            )
            .field("nrings", &self.nrings)
            .finish()
    }
}

/// One interface queue to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSpec {
    pub ifindex: u32,
    pub queue: u32,
}

/// An open socket of a device, for the classifier's XSKMAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketSlot {
    pub ifindex: u32,
    pub queue: u32,
    pub ring: u32,
    pub fd: i32,
}

impl Device {
    /// Opens `nrings` sockets on every port (interface queue), all on one UMEM. Nothing is
    /// redirected to them until their [`sockets`](Device::sockets) are registered in the
    /// interfaces' classifiers. The kernel binds in zero-copy mode where the driver offers it
    /// and in copy mode otherwise ([`Device::zerocopy`] says which).
    pub fn open(ports: Vec<PortSpec>, nrings: usize, opts: &XskOptions) -> Result<Device> {
        opts.validate()?;
        if ports.is_empty() || nrings == 0 {
            return Err(XskError::Invalid(
                "a device needs at least one port and one ring".into(),
            ));
        }
        // Enough chunks that a full set of rings never starves the fill rings: the early drop
        // then happens at a full class ring (paper 004), not at an empty fill ring.
        let per_port = opts.fill_size as usize
            + nrings * opts.rx_size as usize
            + opts.tx_size as usize
            + nrings * opts.egress_queue as usize;
        let frames = (per_port * ports.len() + opts.hold_frames as usize).next_power_of_two();
        let mem = UmemArea::new(frames, opts.frame_size, opts.fill_size, opts.fill_size)?;
        let umem = &mem.umem;

        let mut out = Vec::new();
        for (pi, spec) in ports.into_iter().enumerate() {
            let queue = spec.queue;
            let fail = |op: &str, e| XskError::socket(op, spec.ifindex, queue, e);
            let mut info = IfInfo::invalid();
            info.from_ifindex(spec.ifindex)
                .map_err(|e| fail("interface", e))?;
            info.set_queue(queue);
            let first = if pi == 0 {
                Socket::with_shared(&info, umem)
            } else {
                Socket::new(&info)
            }
            .map_err(|e| fail("AF_XDP socket", e))?;
            let dq = umem
                .fq_cq(&first)
                .map_err(|e| fail("fill/completion rings", e))?;
            let mut users = Vec::new();
            let mut rx = Vec::new();
            let mut fds = Vec::new();
            let mut tx = None;
            for r in 0..nrings {
                let other;
                let sock: &Socket = if r == 0 {
                    &first
                } else {
                    other = Socket::new(&info).map_err(|e| fail("AF_XDP socket", e))?;
                    &other
                };
                let cfg = SocketConfig {
                    rx_size: NonZeroU32::new(opts.rx_size),
                    tx_size: if r == 0 {
                        NonZeroU32::new(opts.tx_size)
                    } else {
                        None
                    },
                    // Only the UMEM owner may ask for need_wakeup; the others inherit it.
                    bind_flags: if pi == 0 && r == 0 {
                        SocketConfig::XDP_BIND_NEED_WAKEUP
                            | opts.zero_copy.bind_flag()
                            | if opts.multi_buffer { XDP_USE_SG } else { 0 }
                    } else {
                        0
                    },
                };
                let user = umem.rx_tx(sock, &cfg).map_err(|e| fail("rx/tx rings", e))?;
                let ring = user.map_rx().map_err(|e| fail("map rx", e))?;
                if r == 0 {
                    tx = Some(
                        user.map_tx().map_err(|e| fail("map tx", e))?,
                    );
                    bind_retrying(|| umem.bind(&user))
                } else {
                    bind_retrying(|| dq.bind(&user))
                }
                .map_err(|e| {
                    let errno = e.get_raw().abs();
                    if errno == libc::EBUSY {
                        let interface = crate::ebpf::ifname(spec.ifindex)
                            .unwrap_or_else(|_| format!("ifindex {}", spec.ifindex));
                        let prog = crate::ebpf::xdp_program_on(&interface);
                        return XskError::QueueBusy(super::QueueBusy {
                            holder: crate::ebpf::describe_holder(prog.as_ref()),
                            interface,
                            queue,
                        });
                    }
                    let why = match errno {
                        libc::EINVAL if opts.multi_buffer => {
                            "; multi-buffer sockets (XDP_USE_SG, for an MTU beyond one UMEM chunk) need Linux 6.6 or later"
                        }
                        libc::EOPNOTSUPP if opts.multi_buffer => {
                            "; the driver has no zero-copy multi-buffer support: set `zero-copy = \"auto\"` or \"off\" in [rings], or lower the MTU"
                        }
                        _ => "",
                    };
                    XskError::Socket {
                        op: format!("bind AF_XDP socket of ring {r}"),
                        ifindex: spec.ifindex,
                        queue,
                        cause: std::io::Error::from_raw_os_error(errno),
                        hint: why,
                    }
                })?;
                let fd = ring.as_raw_fd();
                fds.push(fd);
                rx.push(ring);
                users.push(user);
            }
            let zerocopy = sys::xdp_zerocopy(fds[0]).unwrap_or(false);
            out.push(Port {
                ifindex: spec.ifindex,
                queue,
                zerocopy,
                dq,
                known: (0..rx.len()).map(|_| Cell::new(0)).collect(),
                rx,
                tx: tx.expect("ring 0 has tx"),
                fds,
                users,
                egress: (0..nrings).map(|_| VecDeque::new()).collect(),
                in_flight: 0,
                stats: PortStats {
                    ifindex: spec.ifindex,
                    ..Default::default()
                },
            });
        }
        let mut dev = Device {
            ports: out,
            mem,
            nrings,
            opts: opts.clone(),
            cursor: 0,
            sleeps: 0,
            wakeups: 0,
            extra_ready: false,
            held: Vec::new(),
            scratch: if opts.multi_buffer {
                vec![0; MAX_FRAME_MB]
            } else {
                Vec::new()
            },
        };
        dev.refill();
        Ok(dev)
    }

    /// The sockets, for the classifiers: ring `ring` of queue `queue` on `ifindex`.
    pub fn sockets(&self) -> Vec<SocketSlot> {
        (self.ports.iter())
            .flat_map(|p| {
                p.fds.iter().enumerate().map(|(r, &fd)| SocketSlot {
                    ifindex: p.ifindex,
                    queue: p.queue,
                    ring: r as u32,
                    fd,
                })
            })
            .collect()
    }

    /// `(ifindex, queue, zero-copy)` of every port.
    pub fn zerocopy(&self) -> Vec<(u32, u32, bool)> {
        (self.ports.iter())
            .map(|p| (p.ifindex, p.queue, p.zerocopy))
            .collect()
    }

    /// Number of rings (per port).
    pub fn num_rings(&self) -> usize {
        self.nrings
    }

    /// The interfaces served (once each, in port order).
    pub fn ifindexes(&self) -> Vec<u32> {
        let mut v: Vec<u32> = Vec::new();
        for p in &self.ports {
            if !v.contains(&p.ifindex) {
                v.push(p.ifindex);
            }
        }
        v
    }

    /// Serves up to `max` frames of ring `ring` (over all ports, rotating the start port),
    /// handing each to `f(frame, len, ingress_ifindex)` (`frame` is the whole chunk from the
    /// frame's start; its first `len` bytes were received). Returns how many were served. Frames for Tx go to the egress queue
    /// of their ring on the egress port; call [`Device::flush`] to transmit them.
    pub fn recv<F>(&mut self, ring: RingId, max: u32, mut f: F) -> u32
    where
        F: FnMut(&mut [u8], u32, u32) -> Action,
    {
        self.recv_meta(ring, max, |frame, len, ingress, _meta, _spare| {
            f(frame, len, ingress)
        })
    }

    /// [`Device::recv`], also handing `f` the 8 bytes in front of the frame, read as a native
    /// `u64`: the classifier's XDP-metadata timestamp (`bpf_ktime_get_ns()`) when it writes one
    /// (`FLAG_TIMESTAMP`; copy mode copies the metadata in front of the frame), 0 when the
    /// headroom is too small. Without the flag the value is stale garbage: ignore it. `f` may
    /// send more frames through its [`Spare`]; they go to the same ring's egress queue.
    // Always inlined: the worker's per-frame closure is then compiled into its grant loop.
    #[inline(always)]
    pub fn recv_meta<F>(&mut self, ring: RingId, max: u32, f: F) -> u32
    where
        F: FnMut(&mut [u8], u32, u32, u64, &mut Spare<'_>) -> Action,
    {
        self.recv_warmed(ring, max, |_| {}, f)
    }

    /// [`Device::recv_meta`] that first hands the received frames of a batch (each its `len`
    /// bytes, read-only) to `warm` together, before `f` sees any of them: the worker looks up
    /// their routes there so that the lookups' cache misses overlap (`Forwarder::route_many`).
    #[inline(always)]
    pub fn recv_warmed<W, F>(&mut self, ring: RingId, max: u32, mut warm: W, mut f: F) -> u32
    where
        W: FnMut(&[&[u8]]),
        F: FnMut(&mut [u8], u32, u32, u64, &mut Spare<'_>) -> Action,
    {
        let mut extra: Vec<(u32, XdpDesc)> = Vec::new();
        let np = self.ports.len();
        let mut served = 0;
        let base = self.mem.area.ptr;
        let area_len = self.mem.area.len as u64;
        let fs = self.mem.frame_size as u64;
        let multi = self.opts.multi_buffer;
        for k in 0..np {
            if served >= max {
                break;
            }
            let pi = (self.cursor + k) % np;
            let in_if = self.ports[pi].ifindex;
            // A port with nothing on this ring is passed over before the batch's arrays (~2 KB)
            // are zeroed for it: with traffic in one direction, every grant would pay that for
            // the other port. The check reads the producer index the receive below would read.
            let port = &self.ports[pi];
            if port.known[ring].get() == 0 && port.rx[ring].available() == 0 {
                continue;
            }
            let mut descs = [XdpDesc {
                addr: 0,
                len: 0,
                options: 0,
            }; BATCH + MAX_PKT_DESCS];
            let (n, frames) = {
                let port = &mut self.ports[pi];
                let want = (max - served).min(BATCH as u32);
                let (n, frames) = if multi {
                    read_frames(&mut port.rx[ring], want, &mut descs)
                } else {
                    let mut rd = port.rx[ring].receive(want);
                    let mut n = 0;
                    while let Some(d) = rd.read() {
                        descs[n] = d;
                        n += 1;
                    }
                    rd.release();
                    (n, n)
                };
                let k = &port.known[ring];
                k.set(k.get().saturating_sub(n as u32));
                port.stats.rx += frames as u64;
                (n, frames)
            };
            // The kernel wrote these frames on another CPU: their first touch here is a cache
            // miss (perf: ~60 % of the worker's own time with 4-frame grants). Ask for all of
            // them at once so the misses overlap instead of queueing one after another.
            for d in &descs[..n] {
                if d.addr >= 8 && d.addr < area_len {
                    prefetch(base.as_ptr().wrapping_add(d.addr as usize - 8));
                }
            }
            {
                let mut frames: [&[u8]; BATCH] = [&[]; BATCH];
                let mut m = 0;
                let mut first = true; // descs[i] starts a frame
                for d in &descs[..n] {
                    let starts = first;
                    first = frags::ends_frame(d);
                    if !starts || frame_room(d, fs, area_len).is_none() || m == BATCH {
                        continue; // a later chunk of a frame (its first holds the headers), or refused below
                    }
                    // SAFETY: [addr, addr+len) lies inside one chunk of the UMEM mapping
                    // (checked just above) that the kernel handed to us through the rx ring and
                    // will not write until we return it; these shared slices end with this
                    // block, before the loop below makes each frame's exclusive one.
                    frames[m] = unsafe {
                        std::slice::from_raw_parts(
                            base.as_ptr().add(d.addr as usize),
                            d.len as usize,
                        )
                    };
                    m += 1;
                }
                warm(&frames[..m]);
            }
            let mut i = 0;
            while i < n {
                let d = descs[i];
                if !frags::ends_frame(&d) {
                    let last = (i..n).find(|&j| frags::ends_frame(&descs[j]));
                    let (end, whole) = last.map_or((n, false), |j| (j + 1, true));
                    self.recv_multi(pi, ring, &descs[i..end], whole, &mut f, &mut extra);
                    i = end;
                    continue;
                }
                i += 1;
                let chunk = d.addr & !(fs - 1);
                let Some(room) = frame_room(&d, fs, area_len) else {
                    // never from a sane kernel; do not touch memory outside the chunk
                    self.mem.free.push(chunk);
                    continue;
                };
                // SAFETY: [addr, addr+room) lies inside one chunk of the UMEM mapping (checked
                // above); the kernel handed this chunk to us through the rx ring and will not
                // write it until we return it through the fill ring, so the slice is exclusive.
                let frame = unsafe {
                    std::slice::from_raw_parts_mut(
                        base.as_ptr().add(d.addr as usize),
                        room as usize,
                    )
                };
                let len = d.len as usize;
                let meta = self.mem.meta(&d);
                let mut spare = Spare {
                    free: &mut self.mem.free,
                    base,
                    frame_size: fs,
                    out: &mut extra,
                };
                match f(&mut frame[..], len as u32, in_if, meta, &mut spare) {
                    Action::Tx { ifindex, len } if len <= room as usize && len > 0 => {
                        let desc = XdpDesc {
                            addr: d.addr,
                            len: len as u32,
                            options: 0,
                        };
                        self.enqueue(pi, ring, ifindex, &[desc]);
                    }
                    Action::Hold { tag } => self.held.push(Held {
                        addr: d.addr,
                        len: d.len,
                        port: pi as u16,
                        ring: ring as u16,
                        ingress: in_if,
                        tag,
                        multi: None,
                    }),
                    _ => self.mem.free.push(chunk),
                }
                for (ifindex, desc) in extra.drain(..) {
                    self.enqueue(pi, ring, ifindex, &[desc]);
                }
            }
            served += frames as u32;
        }
        self.cursor = (self.cursor + 1) % np;
        served
    }

    /// Serves one frame that arrived in the chunks of `pkt` (`whole`: its last descriptor ends
    /// it): gathers it into the scratch buffer, hands that to `f`, and scatters the result
    /// back into the same chunks for Tx. A frame that does not gather (too long, a chunk
    /// outside the UMEM, cut short) is dropped whole and counted as `rx_broken`.
    #[inline(never)]
    fn recv_multi<F>(
        &mut self,
        pi: usize,
        ring: RingId,
        pkt: &[XdpDesc],
        whole: bool,
        f: &mut F,
        extra: &mut Vec<(u32, XdpDesc)>,
    ) where
        F: FnMut(&mut [u8], u32, u32, u64, &mut Spare<'_>) -> Action,
    {
        let mut data = std::mem::take(&mut self.scratch);
        let len = if whole && pkt.len() <= MAX_PKT_DESCS {
            self.mem.gather(pkt, &mut data)
        } else {
            None
        };
        let in_if = self.ports[pi].ifindex;
        let Some(len) = len else {
            self.ports[pi].stats.rx_broken += 1;
            self.mem.free_chunks(pkt.iter().map(|d| d.addr));
            self.scratch = data;
            return;
        };
        self.ports[pi].stats.rx_multi += 1;
        let meta = self.mem.meta(&pkt[0]);
        let mut spare = Spare {
            free: &mut self.mem.free,
            base: self.mem.area.ptr,
            frame_size: u64::from(self.mem.frame_size),
            out: extra,
        };
        let addrs = || pkt.iter().map(|d| d.addr);
        match f(&mut data[..], len as u32, in_if, meta, &mut spare) {
            Action::Tx { ifindex, len: out } if out > 0 && out <= data.len() => {
                self.send_gathered(pi, ring, ifindex, &data[..out], addrs());
            }
            Action::Hold { tag } => self.held.push(Held {
                addr: pkt[0].addr,
                len: len as u32,
                port: pi as u16,
                ring: ring as u16,
                ingress: in_if,
                tag,
                multi: Some(Box::new(Gathered {
                    data: data[..len.max(HELD_ROOM)].into(),
                    tail: addrs().skip(1).collect(),
                })),
            }),
            _ => self.mem.free_chunks(addrs()),
        }
        for (ifindex, desc) in extra.drain(..) {
            self.enqueue(pi, ring, ifindex, &[desc]);
        }
        self.scratch = data;
    }

    /// Scatters `bytes` (a frame) into the chunks at `addrs` in order (each from its address to
    /// the end of its chunk) and queues them as one frame for `ifindex`; chunks left over are
    /// freed. A frame that does not fit them is dropped (`egress_drops`).
    fn send_gathered(
        &mut self,
        pi: usize,
        ring: RingId,
        ifindex: u32,
        bytes: &[u8],
        addrs: impl Iterator<Item = u64>,
    ) {
        let mut out = [XdpDesc::default(); MAX_PKT_DESCS];
        let mut k = 0;
        let mut off = 0;
        for addr in addrs {
            if off >= bytes.len() || k == out.len() {
                self.mem.free_chunks(std::iter::once(addr));
                continue;
            }
            let n = self.mem.put(addr, &bytes[off..]);
            out[k] = XdpDesc {
                addr,
                len: n as u32,
                options: XDP_PKT_CONTD,
            };
            k += 1;
            off += n;
        }
        if off < bytes.len() || k == 0 {
            self.ports[pi].stats.egress_drops += 1;
            self.mem.free_chunks(out[..k].iter().map(|d| d.addr));
            return;
        }
        out[k - 1].options = 0;
        self.enqueue(pi, ring, ifindex, &out[..k]);
    }

    /// Moves the frames held by the last receive calls to `out`.
    pub fn take_held(&mut self, out: &mut Vec<Held>) {
        out.append(&mut self.held);
    }

    /// The buffer of a held frame, from its first byte to the end of its chunk (the frame is
    /// the first [`Held::len`] bytes); a multi-buffer frame's gathered copy.
    pub fn held_frame<'a>(&'a mut self, h: &'a mut Held) -> &'a mut [u8] {
        if let Some(g) = h.multi.as_mut() {
            return &mut g.data;
        }
        let fs = u64::from(self.mem.frame_size);
        let chunk = h.addr & !(fs - 1);
        let room = (chunk + fs - h.addr) as usize;
        // SAFETY: `h` was made in recv_meta from a descriptor whose [addr, addr+room) was
        // checked to lie inside one chunk of the UMEM mapping; the chunk has been ours since
        // (not on the free list, in no ring) and `Held` is not Clone, so this is the only
        // reference to it for as long as `&mut self` is borrowed.
        unsafe {
            std::slice::from_raw_parts_mut(self.mem.area.ptr.as_ptr().add(h.addr as usize), room)
        }
    }

    /// Finishes a held frame: `f(frame, len, ingress, spare)` decides as in
    /// [`recv_meta`](Self::recv_meta) (`Hold` again counts as `Drop`). Frames for Tx go to the
    /// egress queue of the ring the frame came in on.
    #[inline]
    pub fn finish_held<F>(&mut self, mut h: Held, f: F) -> Action
    where
        F: FnOnce(&mut [u8], u32, u32, &mut Spare<'_>) -> Action,
    {
        let mut extra: Vec<(u32, XdpDesc)> = Vec::new();
        let (pi, ring) = (h.port as usize, h.ring as usize);
        let base = self.mem.area.ptr;
        let fs = u64::from(self.mem.frame_size);
        if let Some(mut g) = h.multi.take() {
            let mut spare = Spare {
                free: &mut self.mem.free,
                base,
                frame_size: fs,
                out: &mut extra,
            };
            let a = f(&mut g.data, h.len, h.ingress, &mut spare);
            let addrs = std::iter::once(h.addr).chain(g.tail.iter().copied());
            match a {
                Action::Tx { ifindex, len } if len <= g.data.len() && len > 0 => {
                    self.send_gathered(pi, ring, ifindex, &g.data[..len], addrs);
                }
                _ => self.mem.free_chunks(addrs),
            }
            for (ifindex, desc) in extra {
                self.enqueue(pi, ring, ifindex, &[desc]);
            }
            return a;
        }
        let chunk = h.addr & !(fs - 1);
        let room = (chunk + fs - h.addr) as usize;
        // SAFETY: as in `held_frame`: the chunk is exclusively ours, [addr, addr+room) inside it.
        let frame =
            unsafe { std::slice::from_raw_parts_mut(base.as_ptr().add(h.addr as usize), room) };
        let mut spare = Spare {
            free: &mut self.mem.free,
            base,
            frame_size: fs,
            out: &mut extra,
        };
        let a = f(frame, h.len, h.ingress, &mut spare);
        match a {
            Action::Tx { ifindex, len } if len <= room && len > 0 => {
                let desc = XdpDesc {
                    addr: h.addr,
                    len: len as u32,
                    options: 0,
                };
                self.enqueue(pi, ring, ifindex, &[desc]);
            }
            _ => self.mem.free.push(chunk),
        }
        for (ifindex, desc) in extra {
            self.enqueue(pi, ring, ifindex, &[desc]);
        }
        a
    }

    /// Gives a held frame's chunks back (dropped).
    pub fn free_held(&mut self, h: Held) {
        let tail = h.multi.map(|g| g.tail).unwrap_or_default();
        self.mem
            .free_chunks(std::iter::once(h.addr).chain(tail.iter().copied()));
    }

    /// Queues `frame` (the descriptors of one frame, chunks this device owns) for
    /// transmission on `ifindex` behind ring `ring`'s frames, or frees its chunks (counted) if
    /// the port is unknown or its queue full.
    fn enqueue(&mut self, from_port: usize, ring: RingId, ifindex: u32, frame: &[XdpDesc]) {
        match self.ports.iter_mut().find(|p| p.ifindex == ifindex) {
            Some(out) => {
                let q = &mut out.egress[ring];
                if q.len() + frame.len() <= self.opts.egress_queue as usize {
                    q.extend(frame.iter().copied());
                    return;
                }
                out.stats.egress_drops += 1;
            }
            None => self.ports[from_port].stats.no_port += 1,
        }
        self.mem.free_chunks(frame.iter().map(|d| d.addr));
    }

    /// Reaps Tx completions, moves queued egress frames into the Tx rings (highest ring first:
    /// egress priority), kicks the kernel, and refills the fill rings. Returns the frames it
    /// handed to the kernel.
    pub fn flush(&mut self) -> usize {
        let mut handed = 0;
        let multi = self.opts.multi_buffer;
        for p in &mut self.ports {
            // A port with nothing in flight has nothing to complete: leave the kernel's
            // completion index alone (reading it is a cache miss while the kernel writes it).
            if p.in_flight > 0 {
                let mut c = p.dq.complete(p.in_flight.min(4096));
                let n = self.mem.reclaim(std::iter::from_fn(|| c.read()));
                c.release();
                drop(c);
                p.in_flight -= n.min(p.in_flight);
            }
            // transmit, strict priority by ring
            let mut submitted = 0;
            for q in p.egress.iter_mut() {
                if q.is_empty() {
                    continue;
                }
                let mut w = p.tx.transmit(q.len() as u32);
                let cap = w.capacity() as usize;
                let need = frags::first_frame_len(q);
                let (sent, frames) = if need <= cap {
                    let k = frags::whole_frames(q, cap);
                    let frames = if multi { frags::frames_in(q, k) } else { k };
                    let sent = w.insert(q.drain(..k));
                    w.commit();
                    (sent, frames)
                } else {
                    drop(w);
                    split_first_frame(&mut p.tx, q, cap, need, self.opts.tx_size)
                };
                submitted += sent;
                handed += frames;
                p.stats.tx += frames as u64;
                if !q.is_empty() {
                    break; // Tx ring full: lower rings wait
                }
            }
            p.in_flight += submitted;
            // Descriptors the kernel has not taken yet (`pending`) need a kick too, not only new
            // ones: copy mode transmits only in the syscall, and a flush with a full Tx ring
            // submits nothing, so a ring left full by the last flush would never drain.
            if submitted > 0 || p.tx.pending() > 0 || (p.in_flight > 0 && p.tx.needs_wakeup()) {
                // Copy mode transmits in this syscall, at most 32 descriptors per call (the
                // kernel's Tx budget): kick again while descriptors wait (bounded), so a flush
                // of a large batch does not leave frames for the next one.
                let mut ok = p.kick();
                let mut more = 0;
                while ok && p.tx.pending() > 0 && more < 16 {
                    ok = p.kick();
                    more += 1;
                }
            }
        }
        self.refill();
        handed
    }

    /// Gives free chunks to every port's fill ring (never more than its free slots).
    pub fn refill(&mut self) {
        for p in &mut self.ports {
            if self.mem.free.is_empty() {
                break;
            }
            let mut w = p.dq.fill(self.mem.free.len().min(u32::MAX as usize) as u32);
            let k = (w.capacity() as usize).min(self.mem.free.len());
            let start = self.mem.free.len() - k;
            w.insert(self.mem.free.drain(start..));
            w.commit();
            drop(w);
            if p.dq.needs_wakeup() {
                p.dq.wake();
                p.stats.fill_wakeups += 1;
            }
        }
    }

    /// Blocks in poll() on every rx fd until a packet arrives or `timeout_ms` passes. Returns
    /// whether any socket became readable.
    pub fn wait(&mut self, timeout_ms: i32) -> bool {
        let mut pfds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .flat_map(|p| p.fds.iter())
            .map(|&fd| sys::poll_in(fd))
            .collect();
        self.sleeps += 1;
        let n = sys::poll(&mut pfds, timeout_ms);
        if n > 0 {
            self.wakeups += 1;
        }
        n > 0
    }

    /// Frames waiting in the egress queues of all ports.
    pub fn egress_len(&self) -> usize {
        self.ports
            .iter()
            .map(|p| p.egress.iter().map(|q| q.len()).sum::<usize>())
            .sum()
    }

    /// Frames waiting in rx ring `ring` of every port now (the kernel's index, read afresh;
    /// [`RingView::backlog`] may answer from what it saw before).
    pub fn waiting(&self, ring: RingId) -> usize {
        self.ports
            .iter()
            .map(|p| p.rx[ring].available() as usize)
            .sum()
    }

    /// Whether any egress queue still holds frames.
    pub fn egress_pending(&self) -> bool {
        self.ports
            .iter()
            .any(|p| p.egress.iter().any(|q| !q.is_empty()))
    }

    /// Per-port counters (kernel socket statistics included).
    pub fn port_stats(&self) -> Vec<PortStats> {
        self.ports
            .iter()
            .map(|p| {
                let mut s = p.stats.clone();
                for u in &p.users {
                    if let Ok(k) = u.statistics_v2() {
                        s.kernel_rx_dropped += k.rx_dropped;
                        s.kernel_rx_ring_full += k.rx_ring_full;
                        s.kernel_fill_empty += k.rx_fill_ring_empty_descs;
                        s.kernel_tx_invalid += k.tx_invalid_descs;
                    }
                }
                s
            })
            .collect()
    }

    /// Chunks in the free list (for tests and leak checks).
    pub fn free_chunks(&self) -> usize {
        self.mem.free.len()
    }
}

impl RingView for Device {
    #[inline]
    fn backlog(&self, ring: RingId) -> usize {
        self.ports
            .iter()
            .map(|p| {
                let k = &p.known[ring];
                if k.get() == 0 {
                    k.set(p.rx[ring].available());
                }
                k.get() as usize
            })
            .sum()
    }
}

/// Control-plane access: kernel counters, waiting with the control eventfd.
impl Device {
    /// Kernel drop counters per ring (summed over ports): `(rx_ring_full, rx_dropped)`, i.e.
    /// early drops at the full class ring and other rx drops.
    pub fn ring_kernel_drops(&self) -> Vec<(u64, u64)> {
        let mut v = vec![(0u64, 0u64); self.nrings];
        for p in &self.ports {
            for (r, u) in p.users.iter().enumerate() {
                if let Ok(k) = u.statistics_v2() {
                    v[r].0 += k.rx_ring_full;
                    v[r].1 += k.rx_dropped;
                }
            }
        }
        v
    }

    /// [`Device::wait`] that also wakes up when `extra` (e.g. an eventfd of the control plane)
    /// becomes readable.
    pub fn wait_with(&mut self, timeout_ms: i32, extra: std::os::fd::RawFd) -> bool {
        let mut pfds: Vec<libc::pollfd> = self
            .ports
            .iter()
            .flat_map(|p| p.fds.iter())
            .chain(std::iter::once(&extra))
            .map(|&fd| sys::poll_in(fd))
            .collect();
        self.sleeps += 1;
        let n = sys::poll(&mut pfds, timeout_ms);
        let rx = n > 0 && pfds[..pfds.len() - 1].iter().any(|p| p.revents != 0);
        if rx {
            self.wakeups += 1;
        }
        if n > 0 && pfds[pfds.len() - 1].revents != 0 {
            self.extra_ready = true;
        }
        n > 0
    }

    /// Whether a [`Device::wait_with`] since the last call found `extra` readable (then the
    /// caller should drain it; until then, poll() returns at once).
    pub fn take_extra_ready(&mut self) -> bool {
        std::mem::take(&mut self.extra_ready)
    }
}

/// The bytes from `d`'s frame to the end of its chunk, if the frame lies inside the UMEM area
/// (`area_len` bytes of `fs`-byte chunks) and inside one chunk, as a sane kernel's always do.
#[inline(always)]
fn frame_room(d: &XdpDesc, fs: u64, area_len: u64) -> Option<u64> {
    let chunk = d.addr & !(fs - 1);
    let room = (chunk + fs).saturating_sub(d.addr);
    (d.addr + u64::from(d.len) <= area_len && room >= u64::from(d.len)).then_some(room)
}

/// Hints the CPU to load the cache line at `p` (no effect on other architectures).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and never changes memory, whatever
    // the address (callers pass addresses inside the UMEM mapping anyway).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Puts the first frame of `q` on the Tx ring when it needs more slots (`need`) than
/// xdpilone's cached view offers (`cap`). xdpilone re-reads the kernel's consumer index only
/// when that view shows no free slot at all, so a cached `cap` smaller than one frame, while
/// the ring has room, would never grow and the queue would stall. If the ring really has room,
/// the cached slots take the frame's first descriptors and a fresh reservation the rest; both
/// are committed before the kick that lets the kernel read them, so it never sees half a frame.
/// Returns (descriptors, frames) submitted.
fn split_first_frame(
    tx: &mut RingTx,
    q: &mut VecDeque<XdpDesc>,
    cap: usize,
    need: usize,
    ring_size: u32,
) -> (u32, usize) {
    let real_free = ring_size.saturating_sub(tx.pending()) as usize;
    if cap == 0 || real_free < need {
        return (0, 0); // the ring is full: the kick drains it
    }
    let mut w = tx.transmit(cap as u32);
    let mut sent = w.insert(q.drain(..cap));
    w.commit();
    drop(w);
    let mut w = tx.transmit((need - cap) as u32);
    let more = (w.capacity() as usize).min(need - cap);
    sent += w.insert(q.drain(..more));
    w.commit();
    (sent, 1)
}

/// Room a held multi-buffer frame's copy keeps at least, for an ICMP error written over it.
const HELD_ROOM: usize = 2048;

/// Reads whole frames from `rx` into `out`: up to `want` frames within [`BATCH`] descriptors,
/// and a frame begun within them to its end (`out` has [`MAX_PKT_DESCS`] more slots). Returns
/// (descriptors, frames); a frame cut short (longer than `out` allows, or not all published)
/// counts as a frame, and is dropped as broken.
fn read_frames(rx: &mut RingRx, want: u32, out: &mut [XdpDesc]) -> (usize, usize) {
    let want = want.min(BATCH as u32);
    // Peek as many descriptors as `out` holds, not `want` plus a frame's worth: `want` frames
    // of several chunks each take more than `want` descriptors, and a peek that ends inside a
    // frame would leave its last chunks to the next call, where they would pass for a frame.
    let mut rd = rx.receive(out.len() as u32);
    let (mut n, mut frames) = (0, 0);
    let mut inside = false;
    while n < out.len() && (inside || (frames < want as usize && n < BATCH)) {
        let Some(d) = rd.read() else { break };
        out[n] = d;
        n += 1;
        inside = !frags::ends_frame(&d);
        if !inside {
            frames += 1;
        }
    }
    if inside {
        frames += 1;
    }
    rd.release();
    (n, frames)
}
