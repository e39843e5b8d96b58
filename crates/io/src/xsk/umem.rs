//! The UMEM both socket kinds register: one anonymous mapping, cut into chunks.

use std::ptr::NonNull;

use anyhow::{bail, Result};
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
            bail!(
                "mmap {len} bytes for the UMEM: {}",
                std::io::Error::last_os_error()
            );
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
            .map_err(|e| anyhow::anyhow!("register UMEM: errno {}", e.get_raw()))?;
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
}
