//! [`TxSocket`]: a transmit-only AF_XDP socket with a UMEM of its own.

use std::num::NonZeroU32;

use super::{Result, XskError};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingTx, Socket, SocketConfig, User};

use super::bind_retrying;
use super::umem::UmemArea;

/// A transmit-only AF_XDP socket on one interface queue with a UMEM of its own: the generator's
/// `xsk` backend. Frames are written straight into UMEM chunks and handed to the kernel through
/// the Tx ring; copy mode (veth) transmits them inside [`TxSocket::kick`].
pub struct TxSocket {
    // Field order matters for drop: rings and socket before the UMEM before its memory.
    tx: RingTx,
    dq: DeviceQueue,
    _user: User,
    mem: UmemArea,
    /// Descriptors written since the last kick.
    queued: u32,
    /// Descriptors handed to the kernel and not completed yet.
    in_flight: u32,
    /// Transmit syscalls made.
    pub kicks: u64,
}

impl std::fmt::Debug for TxSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxSocket")
            .field("free", &self.mem.free.len())
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl TxSocket {
    /// Opens the socket on `ifindex` queue `queue` with `frames` UMEM chunks of 2048 bytes and a
    /// Tx ring of `tx_size` entries (both powers of two).
    pub fn open(ifindex: u32, queue: u32, frames: u32, tx_size: u32) -> Result<TxSocket> {
        if !frames.is_power_of_two() || !tx_size.is_power_of_two() || tx_size > frames {
            return Err(XskError::Invalid(format!(
                "xsk tx: frames ({frames}) and tx ring ({tx_size}) must be powers of two, ring ≤ frames"
            )));
        }
        let mem = UmemArea::new(frames as usize, 2048, 64, tx_size)?;
        let umem = &mem.umem;
        let fail = |op: &str, e| XskError::socket(op, ifindex, queue, e);
        let mut info = IfInfo::invalid();
        info.from_ifindex(ifindex)
            .map_err(|e| fail("interface", e))?;
        info.set_queue(queue);
        let sock = Socket::with_shared(&info, umem).map_err(|e| fail("AF_XDP socket", e))?;
        // The kernel wants fill and completion rings on the UMEM owner even when it only sends.
        let dq = umem
            .fq_cq(&sock)
            .map_err(|e| fail("fill/completion rings", e))?;
        let cfg = SocketConfig {
            rx_size: None,
            tx_size: NonZeroU32::new(tx_size),
            bind_flags: 0,
        };
        let user = umem.rx_tx(&sock, &cfg).map_err(|e| fail("tx ring", e))?;
        let tx = user.map_tx().map_err(|e| fail("map tx", e))?;
        bind_retrying(|| umem.bind(&user)).map_err(|e| fail("bind AF_XDP tx socket", e))?;
        Ok(TxSocket {
            tx,
            dq,
            _user: user,
            mem,
            queued: 0,
            in_flight: 0,
            kicks: 0,
        })
    }

    /// Takes back the chunks of transmitted frames.
    pub fn reap(&mut self) {
        let mut c = self.dq.complete(self.in_flight.max(1));
        let n = self.mem.reclaim(std::iter::from_fn(|| c.read()));
        c.release();
        self.in_flight -= n.min(self.in_flight);
    }

    /// Queues one frame: `write` fills the chunk (2048 bytes) and returns the frame length.
    /// Returns false, writing nothing, when no chunk or Tx slot is free.
    pub fn push(&mut self, write: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if self.mem.free.is_empty() {
            self.reap();
        }
        let Some(&addr) = self.mem.free.last() else {
            return false;
        };
        let mut w = self.tx.transmit(1);
        if w.capacity() == 0 {
            return false;
        }
        // SAFETY: `addr` is the start of a chunk of `frame_size` bytes inside the mapping (all
        // chunks are multiples of frame_size below frames*frame_size); it is on the free list,
        // so the kernel does not own it (completed or never submitted) and no other slice to it
        // exists. The slice ends before this function hands the chunk to the kernel.
        let buf = unsafe {
            std::slice::from_raw_parts_mut(
                self.mem.area.ptr.as_ptr().add(addr as usize),
                self.mem.frame_size as usize,
            )
        };
        let len = write(buf).min(self.mem.frame_size as usize) as u32;
        w.insert(std::iter::once(XdpDesc {
            addr,
            len,
            options: 0,
        }));
        w.commit();
        self.mem.free.pop();
        self.queued += 1;
        self.in_flight += 1;
        true
    }

    /// Asks the kernel to transmit the queued frames. Copy mode sends at most 32 frames per
    /// syscall, so kick again while descriptors wait (bounded).
    pub fn kick(&mut self) {
        if self.queued == 0 {
            return;
        }
        self.queued = 0;
        let mut n = 0;
        loop {
            self.tx.wake();
            self.kicks += 1;
            n += 1;
            if self.tx.pending() == 0 || n >= 64 {
                break;
            }
        }
        self.reap();
    }
}
