//! The UMEM both socket kinds register: one anonymous mapping, cut into chunks.

use std::ptr::NonNull;
use xdpilone::xdp::XdpDesc;

use super::{Result, XskError};
use xdpilone::{Umem, UmemConfig};

/// An anonymous private mapping, unmapped on drop.
pub(super) struct Mmap {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
}

impl Mmap {
    fn new(len: usize) -> Result<Mmap> {
        // SAFETY: an anonymous mapping with no address hint has no preconditions; the result is
        // checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(XskError::Umem {
                op: "mmap the UMEM",
                kib: len / 1024,
                cause: std::io::Error::last_os_error(),
                hint: String::new(),
            });
        }
        Ok(Mmap {
            ptr: NonNull::new(p.cast()).expect("mmap returned non-null"),
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; the UMEM that registered this area is
        // dropped before (field order of `UmemArea`), so the kernel no longer references it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A UMEM: a memory mapping registered with the kernel, cut into `frame_size` chunks, and the
/// list of chunks user space owns (neither in a ring nor handed to the kernel).
pub(super) struct UmemArea {
    // Field order matters for drop: the registration before its memory.
    pub(super) umem: Umem,
    pub(super) area: Mmap,
    pub(super) frame_size: u32,
    pub(super) free: Vec<u64>,
}

impl UmemArea {
    /// Maps and registers `frames` chunks of `frame_size` bytes, every chunk free.
    pub(super) fn new(
        frames: usize,
        frame_size: u32,
        fill_size: u32,
        complete_size: u32,
    ) -> Result<Self> {
        let area = Mmap::new(frames * frame_size as usize)?;
        let ucfg = UmemConfig {
            fill_size,
            complete_size,
            frame_size,
            headroom: 0,
            flags: 0,
        };
        // SAFETY: `area` is a fresh mapping of frames*frame_size bytes that outlives the UMEM
        // (it is dropped after it: field order of `UmemArea`), and nothing else aliases it.
        let umem = unsafe { Umem::new(ucfg, NonNull::slice_from_raw_parts(area.ptr, area.len)) }
            .map_err(|e| {
                let errno = e.get_raw().abs();
                if errno == libc::ENOBUFS || errno == libc::ENOMEM || errno == libc::EPERM {
                    let mut lim = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    // SAFETY: getrlimit writes one `rlimit` into the live local `lim`.
                    let got = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0;
                    let limit = match (got, lim.rlim_cur) {
                        (false, _) => "unknown".to_string(),
                        (true, libc::RLIM_INFINITY) => "unlimited".to_string(),
                        (true, n) => format!("{} KiB", n / 1024),
                    };
                    XskError::Umem {
                        op: "register the AF_XDP buffer area of locked memory",
                        kib: area.len / 1024,
                        cause: std::io::Error::from_raw_os_error(errno),
                        hint: format!(
                            "; the locked-memory limit is {limit}: grant CAP_IPC_LOCK, or raise \
                             the limit (`ulimit -l unlimited`, LimitMEMLOCK=infinity in a \
                             systemd unit), or lower the [rings] sizes"
                        ),
                    }
                } else {
                    XskError::Umem {
                        op: "register the AF_XDP buffer area",
                        kib: area.len / 1024,
                        cause: std::io::Error::from_raw_os_error(errno),
                        hint: String::new(),
                    }
                }
            })?;
        let fs = u64::from(frame_size);
        Ok(UmemArea {
            umem,
            area,
            frame_size,
            free: (0..frames as u64).rev().map(|i| i * fs).collect(),
        })
    }

    /// Takes back the chunks of completed Tx descriptors; returns how many were read. Only
    /// chunks inside the mapping return to the free list (slices are made of them): a sane
    /// kernel completes only what was submitted, but it is not trusted.
    #[inline]
    pub(super) fn reclaim(&mut self, completed: impl Iterator<Item = u64>) -> u32 {
        let fs = u64::from(self.frame_size);
        let area_len = self.area.len as u64;
        let mut n = 0;
        for addr in completed {
            let chunk = addr & !(fs - 1);
            if chunk + fs <= area_len {
                self.free.push(chunk);
            }
            n += 1;
        }
        n
    }

    /// The 8 bytes in front of frame `d`, read as a native `u64` (the classifier's timestamp
    /// when it writes one); 0 when the headroom is too small.
    #[inline(always)]
    pub(super) fn meta(&self, d: &XdpDesc) -> u64 {
        let chunk = d.addr & !(u64::from(self.frame_size) - 1);
        if d.addr >= chunk + 8 && d.addr <= self.area.len as u64 {
            // SAFETY: [addr-8, addr) lies inside the mapping (checked just above) and in the
            // chunk the kernel handed to us with the frame; read_unaligned has no alignment
            // requirement.
            unsafe {
                std::ptr::read_unaligned(
                    self.area
                        .ptr
                        .as_ptr()
                        .add(d.addr as usize - 8)
                        .cast::<u64>(),
                )
            }
        } else {
            0
        }
    }

    /// Copies the frame in the chunks of `descs` (received, ours) into `out`, in order;
    /// returns its length, or `None` if a descriptor leaves its chunk or the mapping or the
    /// frame is longer than `out`.
    pub(super) fn gather(&self, descs: &[XdpDesc], out: &mut [u8]) -> Option<usize> {
        let fs = u64::from(self.frame_size);
        let mut len = 0;
        for d in descs {
            let chunk = d.addr & !(fs - 1);
            let l = d.len as usize;
            if d.addr + u64::from(d.len) > chunk + fs
                || chunk + fs > self.area.len as u64
                || len + l > out.len()
            {
                return None;
            }
            // SAFETY: [addr, addr+len) lies inside one chunk inside the mapping (checked just
            // above); the kernel handed the chunk to us through an rx ring and does not write
            // it until we give it back, and `out` is ordinary memory, not the UMEM.
            let src = unsafe {
                std::slice::from_raw_parts(self.area.ptr.as_ptr().add(d.addr as usize), l)
            };
            out[len..len + l].copy_from_slice(src);
            len += l;
        }
        Some(len)
    }

    /// Copies the front of `bytes` into the chunk of `addr` (one of ours), from `addr` to the
    /// chunk's end; returns how many bytes went in (0 for an address outside the mapping).
    pub(super) fn put(&mut self, addr: u64, bytes: &[u8]) -> usize {
        let fs = u64::from(self.frame_size);
        let chunk = addr & !(fs - 1);
        if chunk + fs > self.area.len as u64 {
            return 0;
        }
        let n = ((chunk + fs - addr) as usize).min(bytes.len());
        // SAFETY: [addr, addr+n) lies inside one chunk inside the mapping (checked just
        // above), a chunk user space owns (received, not yet in any ring), so nothing else
        // reads or writes it meanwhile; `bytes` is not the UMEM.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(self.area.ptr.as_ptr().add(addr as usize), n) };
        dst.copy_from_slice(&bytes[..n]);
        n
    }

    /// Gives the chunks of `addrs` (ours) back to the free list.
    pub(super) fn free_chunks(&mut self, addrs: impl Iterator<Item = u64>) {
        let fs = u64::from(self.frame_size);
        for a in addrs {
            let chunk = a & !(fs - 1);
            if chunk + fs <= self.area.len as u64 {
                self.free.push(chunk);
            }
        }
    }
}
