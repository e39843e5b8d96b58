//! `xsk` backend: an AF_XDP transmit socket on the egress interface (copy mode on veth). Each
//! packet gets its own send timestamp, sequence number and UDP checksum in user space, so the
//! backend paces packet by packet (no bursts at light load, unlike `bpf-live`); one `sendto` per
//! scheduling round transmits the frames due by then. Here it reaches ~0.8 Mpps towards the
//! kernel router and ~0.5 Mpps towards llrouter, whose ingress XDP work on veth runs on the
//! generator's CPU inside that `sendto`.
//!
//! Interface, source address and MACs come from the calling namespace's route to `cfg.dst`, as
//! in [`super::bpf_live`]. Frames are copies of the per-class templates of
//! [`super::bpf_live::template`] with the UDP source port `SPORT_BASE + flow` and the probe's
//! flow, seq and timestamp filled in; the UDP checksum is updated incrementally (RFC 1624) over
//! exactly those fields, which are zero in the template.

use anyhow::{bail, Result};
use llr_core::probe::{FLOW_OFFSET, SEQ_OFFSET, TS_OFFSET};
use llr_core::wire::checksum::ones_complement_sum;

use super::bpf_live::{template, Path, SPORT_BASE};
use super::{GenConfig, Sender, CLASS_BE, CLASS_RT};
use llr_io::sys::mono_ns;
use llr_io::xsk::TxSocket;

/// UMEM chunks of the generator socket.
const FRAMES: u32 = 4096;
/// Tx ring entries.
const TX_SIZE: u32 = 2048;

/// The AF_XDP backend.
pub struct XskSender {
    /// One socket per Tx queue (`cfg.queues`).
    socks: Vec<TxSocket>,
    /// The socket of each flow (`cfg.tx_steer`).
    flow_sock: Vec<usize>,
    /// Frame template per class (index = class id).
    tmpl: [Vec<u8>; 2],
    classes: Vec<u8>,
    /// Offset of the UDP header in the frame.
    l4: usize,
    path: Path,
}

impl std::fmt::Debug for XskSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskSender")
            .field("path", &self.path)
            .finish()
    }
}

/// Adds 16-bit big-endian words of `bytes` (even length, even offset in the UDP segment) to a
/// ones-complement sum.
fn add(sum: u32, bytes: &[u8]) -> u32 {
    sum + ones_complement_sum(bytes) as u32
}

impl XskSender {
    /// Opens the socket on the interface towards `cfg.dst` (calling thread's namespace).
    pub fn new(cfg: &GenConfig) -> Result<XskSender> {
        cfg.validate()?;
        if cfg.flows as u32 + SPORT_BASE as u32 > u16::MAX as u32 {
            bail!("--flows {}: too many for the xsk backend", cfg.flows);
        }
        let path = Path::resolve(cfg.dst)?;
        let tmpl = [
            template(cfg, &path, CLASS_RT)?,
            template(cfg, &path, CLASS_BE)?,
        ];
        let socks = (0..u32::from(cfg.queues.max(1)))
            .map(|q| TxSocket::open(path.ifindex, q, FRAMES, TX_SIZE))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(XskSender {
            socks,
            flow_sock: (0..cfg.flows)
                .map(|f| usize::from(cfg.tx_steer.queue(f, cfg.class_of(f), cfg.queues)))
                .collect(),
            tmpl,
            classes: (0..cfg.flows).map(|f| cfg.class_of(f)).collect(),
            l4: if cfg.dst.is_ipv4() { 34 } else { 54 },
            path,
        })
    }

    /// Transmit syscalls so far.
    pub fn kicks(&self) -> u64 {
        self.socks.iter().map(|s| s.kicks).sum()
    }
}

/// Fills the per-packet fields of a copy of the template in `f` (UDP header at `l4`).
fn stamp(f: &mut [u8], l4: usize, flow: u16, seq: u64, now: u64) {
    let sport = (SPORT_BASE + flow).to_be_bytes();
    let p = l4 + 8;
    f[l4..l4 + 2].copy_from_slice(&sport);
    f[p + FLOW_OFFSET..p + FLOW_OFFSET + 2].copy_from_slice(&flow.to_le_bytes());
    f[p + SEQ_OFFSET..p + SEQ_OFFSET + 8].copy_from_slice(&seq.to_le_bytes());
    f[p + TS_OFFSET..p + TS_OFFSET + 8].copy_from_slice(&now.to_le_bytes());
    // The template's checksum covers zeros in these fields: add the new words (RFC 1624).
    let old = u16::from_be_bytes([f[l4 + 6], f[l4 + 7]]);
    let mut s = (!old) as u32;
    s = add(s, &sport);
    s = add(s, &f[p + FLOW_OFFSET..p + TS_OFFSET + 8]);
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    let mut c = !(s as u16);
    if c == 0 {
        c = 0xffff; // UDP: 0 means "no checksum"
    }
    f[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
}

impl Sender for XskSender {
    fn send(&mut self, flow: u16, first_seq: u64, count: usize) -> Result<usize> {
        let class = self.classes[flow as usize];
        let t = &self.tmpl[class as usize];
        let l4 = self.l4;
        let sock = &mut self.socks[self.flow_sock[flow as usize]];
        let mut sent = 0;
        while sent < count {
            let seq = first_seq + sent as u64;
            let write = |buf: &mut [u8]| {
                buf[..t.len()].copy_from_slice(t);
                stamp(&mut buf[..t.len()], l4, flow, seq, mono_ns());
                t.len()
            };
            if !sock.push(write) {
                // Ring or UMEM full: transmit what is queued, then try once more.
                sock.kick();
                if !sock.push(write) {
                    break;
                }
            }
            sent += 1;
        }
        Ok(sent)
    }

    fn flush(&mut self) -> Result<()> {
        for s in &mut self.socks {
            s.kick();
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "xsk"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llr_core::probe::Probe;
    use llr_core::wire::checksum::checksum;

    /// The incremental checksum equals a full recomputation, IPv4 and IPv6, many field values.
    #[test]
    fn stamped_checksum_matches_full_recompute() {
        for (dst, src, size) in [
            ("10.0.0.2", "10.0.0.1", 64usize),
            ("10.0.0.2", "10.0.0.1", 1518),
            ("fd00::2", "fd00::1", 84),
            ("fd00::2", "fd00::1", 333),
        ] {
            let cfg = GenConfig {
                dst: dst.parse().unwrap(),
                frame_size: size,
                ..Default::default()
            };
            let path = Path {
                ifname: "x".into(),
                ifindex: 1,
                src: src.parse().unwrap(),
                src_mac: [2, 0, 0, 0, 0, 1],
                dst_mac: [2, 0, 0, 0, 0, 2],
            };
            let l4 = if cfg.dst.is_ipv4() { 34 } else { 54 };
            for class in [CLASS_RT, CLASS_BE] {
                let t = template(&cfg, &path, class).unwrap();
                let mut rng = super::super::Rng::new(7);
                for i in 0..2000u64 {
                    let mut f = t.clone();
                    let (flow, seq, ts) = (
                        rng.below(4096) as u16,
                        if i % 7 == 0 {
                            u64::MAX - i
                        } else {
                            rng.next_u64()
                        },
                        rng.next_u64(),
                    );
                    stamp(&mut f, l4, flow, seq, ts);
                    // Full UDP checksum over pseudo header + segment must verify to zero.
                    let ulen = (f.len() - l4) as u16;
                    let mut ph = Vec::new();
                    if cfg.dst.is_ipv4() {
                        ph.extend_from_slice(&f[26..34]);
                        ph.extend_from_slice(&[0, 17]);
                        ph.extend_from_slice(&ulen.to_be_bytes());
                    } else {
                        ph.extend_from_slice(&f[22..54]);
                        ph.extend_from_slice(&(ulen as u32).to_be_bytes());
                        ph.extend_from_slice(&[0, 0, 0, 17]);
                    }
                    ph.extend_from_slice(&f[l4..]);
                    assert_eq!(
                        checksum(&ph),
                        0,
                        "{dst} class {class} flow {flow} seq {seq}"
                    );
                    let p = Probe::decode(&f[l4 + 8..]).unwrap();
                    assert_eq!((p.class, p.flow, p.seq, p.tx_ns), (class, flow, seq, ts));
                    assert_eq!(u16::from_be_bytes([f[l4], f[l4 + 1]]), SPORT_BASE + flow);
                }
            }
        }
    }
}
