//! A candidate IPv6 structure, benchmarked only: the Poptrie with nodes of stride 8 instead of
//! 6, built once from a prefix list (no updates). A node is four parts of 64 children, each a
//! stride-6 Poptrie node of its own (child bitmap, leaf-run bitmap, the bases of its children
//! and leaves); a step reads the one part its next 8 bits pick, so it costs what a stride-6
//! step does, and a /48 takes three steps below the /24 direct table instead of four, a /32
//! one instead of two. What it would save is what `v6_structure/poptrie8_*` against
//! `v6_structure/poptrie_*` measures; what it would cost, the memory it prints.

const DIRECT_BITS: u8 = 24;
const VALID: u32 = 1 << 31;

/// A quarter of a node: children `64·q .. 64·q + 64` of it. 32-byte aligned, so a part never
/// straddles two cache lines.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Part {
    vector: u64,
    leafvec: u64,
    base0: u32,
    base1: u32,
}

type Node = [Part; 4];

pub struct Stride8 {
    /// Per /24: the root node + 1 (0 for none) in the low word, the longest prefix of 24 or
    /// fewer bits (`VALID | value`) in the high word.
    direct: Box<[u64]>,
    nodes: Vec<Node>,
    leaves: Vec<u32>,
}

#[inline(always)]
fn upto(c: u32) -> u64 {
    u64::MAX >> (63 - c)
}

fn bits(a: u128, from: u8, n: u8) -> usize {
    ((a << from) >> (128 - u32::from(n))) as usize
}

impl Stride8 {
    /// Built from `(network, length, value)` with no duplicates.
    pub fn build(prefixes: &[(u128, u8, u32)]) -> Stride8 {
        let mut t = Stride8 {
            direct: vec![0u64; 1 << DIRECT_BITS].into_boxed_slice(),
            nodes: Vec::new(),
            leaves: Vec::new(),
        };
        let mut short: Vec<_> = prefixes.iter().filter(|p| p.1 <= DIRECT_BITS).collect();
        short.sort_by_key(|p| p.1);
        for &&(net, len, v) in &short {
            let first = bits(net, 0, DIRECT_BITS);
            let n = 1usize << (DIRECT_BITS - len);
            for d in &mut t.direct[first..first + n] {
                *d = u64::from(VALID | v) << 32;
            }
        }
        let mut long: Vec<(u128, u8, u32)> = prefixes
            .iter()
            .copied()
            .filter(|p| p.1 > DIRECT_BITS)
            .collect();
        long.sort_unstable();
        let mut i = 0;
        while i < long.len() {
            let top = bits(long[i].0, 0, DIRECT_BITS);
            let j = i + long[i..]
                .iter()
                .take_while(|p| bits(p.0, 0, DIRECT_BITS) == top)
                .count();
            let inherited = (t.direct[top] >> 32) as u32;
            let root = t.node(&long[i..j], DIRECT_BITS, inherited);
            t.nodes.push(root);
            t.direct[top] |= t.nodes.len() as u64;
            i = j;
        }
        t
    }

    /// The node of the region the prefixes (all longer than `o`, sorted) lie in, its
    /// children already placed.
    fn node(&mut self, ps: &[(u128, u8, u32)], o: u8, inherited: u32) -> Node {
        let mut best = [inherited; 256];
        let mut here: Vec<_> = ps.iter().filter(|p| p.1 <= o + 8).collect();
        here.sort_by_key(|p| p.1);
        for &&(net, len, v) in &here {
            let width = 1usize << (o + 8 - len);
            let first = bits(net, o, 8) & !(width - 1);
            best[first..first + width].fill(VALID | v);
        }
        let mut kids: Vec<(usize, Node)> = Vec::new();
        if o + 8 < 128 {
            let deeper: Vec<(u128, u8, u32)> = ps.iter().copied().filter(|p| p.1 > o + 8).collect();
            let mut i = 0;
            while i < deeper.len() {
                let c = bits(deeper[i].0, o, 8);
                let j = i + deeper[i..]
                    .iter()
                    .take_while(|p| bits(p.0, o, 8) == c)
                    .count();
                let n = self.node(&deeper[i..j], o + 8, best[c]);
                kids.push((c, n));
                i = j;
            }
        }
        let base1 = self.nodes.len() as u32;
        self.nodes.extend(kids.iter().map(|k| k.1));
        let mut node = [Part::default(); 4];
        let mut placed = 0;
        for (q, part) in node.iter_mut().enumerate() {
            part.base1 = base1 + placed;
            part.base0 = self.leaves.len() as u32;
            let mut last = None;
            for cc in 0..64 {
                let c = q * 64 + cc;
                if kids.iter().any(|k| k.0 == c) {
                    part.vector |= 1 << cc;
                    placed += 1;
                } else if last != Some(best[c]) {
                    part.leafvec |= 1 << cc;
                    self.leaves.push(best[c]);
                    last = Some(best[c]);
                }
            }
        }
        node
    }

    /// Bytes of the direct table's written pages, and of the nodes and leaves.
    pub fn memory(&self) -> (usize, usize) {
        let direct = self
            .direct
            .chunks(512)
            .filter(|p| p.iter().any(|&d| d != 0))
            .count()
            * 4096;
        (direct, self.nodes.len() * 128 + self.leaves.len() * 4)
    }

    #[inline(always)]
    fn step(&self, at: u32, rest: &mut u128) -> Result<u32, u32> {
        let c = (*rest >> 120) as u32;
        *rest <<= 8;
        let p = &self.nodes[at as usize][(c >> 6) as usize];
        let cc = c & 63;
        if p.vector >> cc & 1 != 0 {
            Ok(p.base1 + (p.vector & upto(cc)).count_ones() - 1)
        } else {
            Err(p.base0 + (p.leafvec & upto(cc)).count_ones() - 1)
        }
    }

    pub fn lookup(&self, a: u128) -> Option<u32> {
        let d = self.direct[bits(a, 0, DIRECT_BITS)];
        let mut e = (d >> 32) as u32;
        if d as u32 != 0 {
            let (mut at, mut rest) = (d as u32 - 1, a << DIRECT_BITS);
            loop {
                match self.step(at, &mut rest) {
                    Ok(child) => at = child,
                    Err(slot) => {
                        e = self.leaves[slot as usize];
                        break;
                    }
                }
            }
        }
        (e & VALID != 0).then_some(e & !VALID)
    }

    /// As `Poptrie::lookup_many`: every lookup of a batch one level down before the next.
    pub fn lookup_many(&self, addrs: &[u128], out: &mut [Option<u32>]) {
        const B: usize = 32;
        for (addrs, out) in addrs.chunks(B).zip(out.chunks_mut(B)) {
            let n = addrs.len().min(out.len());
            let mut d = [0u64; B];
            let mut rest = [0u128; B];
            let mut at = [0u32; B];
            let mut leaf = [0u32; B];
            let mut live = 0u32;
            for i in 0..n {
                d[i] = self.direct[bits(addrs[i], 0, DIRECT_BITS)];
                rest[i] = addrs[i] << DIRECT_BITS;
                at[i] = (d[i] as u32).wrapping_sub(1);
                live |= u32::from(d[i] as u32 != 0) << i;
            }
            while live != 0 {
                let mut next = 0;
                let mut l = live;
                while l != 0 {
                    let i = l.trailing_zeros() as usize;
                    l &= l - 1;
                    match self.step(at[i], &mut rest[i]) {
                        Ok(child) => {
                            at[i] = child;
                            next |= 1 << i;
                        }
                        Err(slot) => leaf[i] = slot,
                    }
                }
                live = next;
            }
            for i in 0..n {
                let e = if d[i] as u32 != 0 {
                    self.leaves[leaf[i] as usize]
                } else {
                    (d[i] >> 32) as u32
                };
                out[i] = (e & VALID != 0).then_some(e & !VALID);
            }
        }
    }
}
