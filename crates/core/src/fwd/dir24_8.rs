//! DIR-24-8: IPv4 longest-prefix match in at most two memory reads.
//!
//! Gupta, Lin, McKeown, "Routing lookups in hardware at memory access speeds" (INFOCOM 1998), as
//! in DPDK's `rte_lpm`: a 2^24-entry table indexed by the top 24 address bits, and 256-entry
//! extension groups for the /24s that hold longer prefixes. Every entry records the length of the
//! prefix that wrote it, so an insert only overwrites entries from shorter prefixes, and a removal
//! restores the next-shorter covering prefix, found in the per-length shadow of all prefixes.

use std::collections::HashMap;

use crate::classify::mask32;

/// Largest value a route can carry (24 bits).
pub const MAX_VALUE: u32 = (1 << 24) - 1;

// Entry layout: bit 31 valid, bit 30 extension pointer, bits 24..30 prefix length, bits 0..24
// value (or group index when bit 30 is set).
const VALID: u32 = 1 << 31;
const EXT: u32 = 1 << 30;
const DEPTH_SHIFT: u32 = 24;
const DEPTH_MASK: u32 = 0x3f << DEPTH_SHIFT;
const VALUE_MASK: u32 = MAX_VALUE;
const GROUP: usize = 256;

fn leaf(value: u32, depth: u8) -> u32 {
    VALID | (u32::from(depth) << DEPTH_SHIFT) | value
}

fn depth_of(e: u32) -> u8 {
    ((e & DEPTH_MASK) >> DEPTH_SHIFT) as u8
}

/// Errors of [`Dir24_8`] updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpmError {
    /// Prefix length above 32.
    BadLength,
    /// Value above [`MAX_VALUE`].
    ValueTooLarge,
}

/// An IPv4 LPM table mapping prefixes to 24-bit values.
pub struct Dir24_8 {
    tbl24: Box<[u32]>,
    tbl8: Vec<u32>,
    free_groups: Vec<u32>,
    /// Every installed prefix, per length: masked network → value.
    shadow: Vec<HashMap<u32, u32>>,
}

impl Default for Dir24_8 {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Dir24_8 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dir24_8")
            .field("routes", &self.len())
            .field(
                "groups",
                &(self.tbl8.len() / GROUP - self.free_groups.len()),
            )
            .finish()
    }
}

impl Dir24_8 {
    /// An empty table (64 MiB of zeroed, lazily committed memory for the first level).
    pub fn new() -> Self {
        Dir24_8 {
            tbl24: vec![0u32; 1 << 24].into_boxed_slice(),
            tbl8: Vec::new(),
            free_groups: Vec::new(),
            shadow: vec![HashMap::new(); 33],
        }
    }

    /// Number of installed prefixes.
    pub fn len(&self) -> usize {
        self.shadow.iter().map(HashMap::len).sum()
    }

    /// True if no prefix is installed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every installed prefix as `(network, len, value)`, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u8, u32)> + '_ {
        self.shadow
            .iter()
            .enumerate()
            .flat_map(|(len, m)| m.iter().map(move |(&net, &v)| (net, len as u8, v)))
    }

    /// The value of the longest prefix containing `addr` (host order).
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let mut e = self.tbl24[(addr >> 8) as usize];
        if e & EXT != 0 {
            // Group indices are only ever handed out for allocated groups, so this is in bounds.
            e = self.tbl8[(e & VALUE_MASK) as usize * GROUP + (addr & 0xff) as usize];
        }
        (e & VALID != 0).then_some(e & VALUE_MASK)
    }

    /// The value stored for exactly this prefix.
    pub fn get(&self, prefix: u32, len: u8) -> Option<u32> {
        let m = self.shadow.get(usize::from(len))?;
        m.get(&(prefix & mask32(len))).copied()
    }

    /// Installs or replaces `prefix/len` (host bits ignored); returns the previous value.
    pub fn insert(&mut self, prefix: u32, len: u8, value: u32) -> Result<Option<u32>, LpmError> {
        if len > 32 {
            return Err(LpmError::BadLength);
        }
        if value > MAX_VALUE {
            return Err(LpmError::ValueTooLarge);
        }
        let net = prefix & mask32(len);
        let old = self.shadow[usize::from(len)].insert(net, value);
        // Overwrite entries from shorter (or equal: a replacement) prefixes; longer ones stay.
        self.write(net, len, leaf(value, len), |e| {
            !is_valid(e) || depth_of(e) <= len
        });
        Ok(old)
    }

    /// Removes `prefix/len`; its addresses fall back to the next-shorter covering prefix.
    pub fn remove(&mut self, prefix: u32, len: u8) -> Option<u32> {
        if len > 32 {
            return None;
        }
        let net = prefix & mask32(len);
        let old = self.shadow[usize::from(len)].remove(&net)?;
        let repl = (0..len)
            .rev()
            .find_map(|l| {
                let n = net & mask32(l);
                self.shadow[usize::from(l)].get(&n).map(|&v| leaf(v, l))
            })
            .unwrap_or(0);
        // Only entries written by this very prefix carry its length inside its range.
        self.write(net, len, repl, |e| is_valid(e) && depth_of(e) == len);
        Some(old)
    }

    /// Writes `new` into every leaf entry of `net/len` that satisfies `pred`.
    fn write(&mut self, net: u32, len: u8, new: u32, pred: impl Fn(u32) -> bool) {
        if len <= 24 {
            let first = (net >> 8) as usize;
            let count = 1usize << (24 - len);
            for i in first..first + count {
                let e = self.tbl24[i];
                if e & EXT != 0 {
                    let g = (e & VALUE_MASK) as usize * GROUP;
                    for x in &mut self.tbl8[g..g + GROUP] {
                        if pred(*x) {
                            *x = new;
                        }
                    }
                    self.try_collapse(i);
                } else if pred(e) {
                    self.tbl24[i] = new;
                }
            }
        } else {
            let i = (net >> 8) as usize;
            let e = self.tbl24[i];
            let g = if e & EXT != 0 {
                (e & VALUE_MASK) as usize
            } else {
                if !pred(e) {
                    // Only a removal can refuse an unexpanded entry (it holds depth <= 24 and the
                    // prefix is longer): there is nothing of the prefix to undo here.
                    return;
                }
                let g = self.alloc_group(e);
                self.tbl24[i] = VALID | EXT | g as u32;
                g
            };
            let first = g * GROUP + (net & 0xff) as usize;
            let count = 1usize << (32 - len);
            for x in &mut self.tbl8[first..first + count] {
                if pred(*x) {
                    *x = new;
                }
            }
            self.try_collapse(i);
        }
    }

    fn alloc_group(&mut self, fill: u32) -> usize {
        match self.free_groups.pop() {
            Some(g) => {
                let g = g as usize;
                self.tbl8[g * GROUP..(g + 1) * GROUP].fill(fill);
                g
            }
            None => {
                let g = self.tbl8.len() / GROUP;
                self.tbl8.resize(self.tbl8.len() + GROUP, fill);
                g
            }
        }
    }

    /// Folds an extension group back into its tbl24 entry once no prefix longer than /24 is left.
    fn try_collapse(&mut self, i: usize) {
        let e = self.tbl24[i];
        if e & EXT == 0 {
            return;
        }
        let g = (e & VALUE_MASK) as usize;
        let group = &self.tbl8[g * GROUP..(g + 1) * GROUP];
        // Entries of depth <= 24 all come from the one longest <=/24 prefix covering this /24,
        // so they are identical and the group can be replaced by any of them.
        if group.iter().all(|&x| !is_valid(x) || depth_of(x) <= 24) {
            self.tbl24[i] = group[0];
            self.free_groups.push(g as u32);
        }
    }
}

fn is_valid(e: u32) -> bool {
    e & VALID != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    #[test]
    fn overlapping_prefixes_insert_and_remove() {
        let mut t = Dir24_8::new();
        t.insert(ip("10.0.0.0"), 8, 1).unwrap();
        t.insert(ip("10.1.0.0"), 16, 2).unwrap();
        t.insert(ip("10.1.2.0"), 24, 3).unwrap();
        t.insert(ip("10.1.2.128"), 25, 4).unwrap();
        t.insert(ip("10.1.2.200"), 32, 5).unwrap();
        assert_eq!(t.lookup(ip("10.9.9.9")), Some(1));
        assert_eq!(t.lookup(ip("10.1.9.9")), Some(2));
        assert_eq!(t.lookup(ip("10.1.2.1")), Some(3));
        assert_eq!(t.lookup(ip("10.1.2.129")), Some(4));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(5));
        assert_eq!(t.lookup(ip("11.0.0.0")), None);
        // A shorter prefix inserted later must not shadow longer ones.
        t.insert(ip("0.0.0.0"), 0, 9).unwrap();
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(5));
        assert_eq!(t.lookup(ip("11.0.0.0")), Some(9));
        assert_eq!(t.remove(ip("10.1.2.128"), 25), Some(4));
        assert_eq!(t.lookup(ip("10.1.2.129")), Some(3));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(5));
        assert_eq!(t.remove(ip("10.1.2.200"), 32), Some(5));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(3));
        // The extension group has been folded back and reused on the next long insert.
        assert_eq!(t.free_groups.len(), 1);
        t.insert(ip("10.1.3.7"), 32, 6).unwrap();
        assert!(t.free_groups.is_empty());
        assert_eq!(t.remove(ip("10.1.0.0"), 16), Some(2));
        assert_eq!(t.lookup(ip("10.1.9.9")), Some(1));
        assert_eq!(t.lookup(ip("10.1.2.1")), Some(3));
        assert_eq!(t.remove(ip("0.0.0.0"), 0), Some(9));
        assert_eq!(t.lookup(ip("11.0.0.0")), None);
        assert_eq!(t.remove(ip("0.0.0.0"), 0), None);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn replace_and_errors() {
        let mut t = Dir24_8::new();
        assert_eq!(t.insert(ip("192.168.1.0"), 24, 1), Ok(None));
        assert_eq!(t.insert(ip("192.168.1.77"), 24, 2), Ok(Some(1)));
        assert_eq!(t.lookup(ip("192.168.1.5")), Some(2));
        assert_eq!(t.get(ip("192.168.1.0"), 24), Some(2));
        assert_eq!(t.insert(0, 33, 1), Err(LpmError::BadLength));
        assert_eq!(t.insert(0, 8, MAX_VALUE + 1), Err(LpmError::ValueTooLarge));
        assert_eq!(t.remove(ip("192.168.2.0"), 30), None);
    }
}
