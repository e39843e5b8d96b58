//! Everything the worker does with a frame besides forwarding it whole: ICMP errors,
//! IPv4 fragmentation, frames for the kernel (punt), next hops for the kernel to resolve.
//! See the [module doc of `router`](super).

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use llr_core::fwd::{icmp, DropReason, Forwarder, IcmpKind, IcmpLimiter, PassReason, Verdict};
use llr_core::wire::PacketMeta;

use super::WorkerOptions;
use llr_io::punt::Punt;
use llr_io::sys::mono_ns;
use llr_io::xsk::{Action, Held, Spare};

/// At most this often the kernel is asked to resolve next hops.
const RESOLVE_EVERY: Duration = Duration::from_millis(200);
/// How long a frame waits for its next hop's address: the kernel gives up on a neighbour after
/// 3 probes a second apart (`mcast_solicit`, `retrans_time_ms`).
pub(super) const HOLD_NS: u64 = 3_000_000_000;
/// Frames held for unresolved neighbours at most, per worker (the kernel's `unres_qlen_bytes`
/// holds ~100 full-size frames per neighbour; this is for all of them together).
const PENDING_MAX: usize = 256;

/// Everything the worker does with a frame besides forwarding it whole; see the module doc.
pub(super) struct SlowPath {
    icmp: IcmpLimiter,
    punt: Option<Punt>,
    /// Per [`IcmpKind::class`]: errors sent, errors held back by the rate limit.
    icmp_sent: [u64; 4],
    icmp_limited: [u64; 4],
    /// Errors that could not be sent (no route back, no address, no room).
    icmp_unsendable: u64,
    fragments: u64,
    /// Packets that needed fragmenting but could not get every fragment out.
    fragment_failed: u64,
    punt_dropped: u64,
    ip_id: u16,
    pub(super) pass: Vec<u64>,
    pub(super) drops: Vec<(String, u64)>,
    /// Next hops (interface, address) for the kernel to resolve.
    to_resolve: Vec<(u32, IpAddr)>,
    /// When the kernel was last asked to resolve next hops.
    last_resolve: Instant,
    /// Frames whose next hop's link-layer address is being resolved, with when they were first
    /// held: kept, as the kernel keeps them in its unresolved-neighbour queue, and sent once the
    /// address is known, instead of dropping the first packets of every new neighbour.
    pub(super) pending: VecDeque<(Held, u64)>,
    /// Frames held in the grant being served; the device hands their tokens over after it.
    pub(super) holding: usize,
    /// The table (its address) `pending` was last tried against.
    pub(super) pending_table: usize,
    /// Whether `handle` may hold a frame (the plain path; the flow path has its own holds).
    pub(super) hold_ok: bool,
    /// Frames held for a neighbour, sent once it resolved, dropped when it did not in time.
    neighbor_held: u64,
    pub(super) neighbor_released: u64,
}

impl SlowPath {
    pub(super) fn new(opts: &WorkerOptions) -> SlowPath {
        let punt = opts.punt_device.as_deref().and_then(|name| {
            Punt::open(name, opts.punt_rate)
                .map_err(|e| {
                    tracing::warn!(
                        "punt device {name}: {e:#}; frames for the kernel will be dropped"
                    )
                })
                .ok()
        });
        SlowPath {
            icmp: IcmpLimiter::new(opts.icmp, mono_ns()),
            punt,
            icmp_sent: [0; 4],
            icmp_limited: [0; 4],
            icmp_unsendable: 0,
            fragments: 0,
            fragment_failed: 0,
            punt_dropped: 0,
            ip_id: 0,
            pass: vec![0; PassReason::ALL.len()],
            drops: Vec::new(),
            to_resolve: Vec::new(),
            // Long enough ago that the first next hop is asked for at once.
            last_resolve: Instant::now() - Duration::from_secs(10),
            pending: VecDeque::new(),
            holding: 0,
            pending_table: 0,
            hold_ok: false,
            neighbor_held: 0,
            neighbor_released: 0,
        }
    }

    /// The frame's action for a verdict other than `Tx`; `buf` is the frame's whole chunk room,
    /// its first `len` bytes the frame.
    pub(super) fn handle(
        &mut self,
        verdict: Verdict,
        buf: &mut [u8],
        len: usize,
        ingress: u32,
        table: &Forwarder,
        spare: &mut Spare<'_>,
    ) -> Action {
        match verdict {
            Verdict::Tx { ifindex, len } => Action::Tx { ifindex, len },
            Verdict::Redirect {
                ifindex,
                len,
                gateway,
            } => {
                let len = len as usize;
                self.redirect(&buf[..len], ingress, gateway, table, spare);
                Action::Tx { ifindex, len }
            }
            Verdict::Icmp { drop, error } => {
                count_drop(&mut self.drops, drop);
                self.icmp_error(buf, len, ingress, error, table)
            }
            Verdict::Fragment { ifindex, mtu } => {
                let Ok(m) = llr_core::wire::parse_frame(&buf[..len]) else {
                    return Action::Drop;
                };
                let l3 = usize::from(m.l3_offset);
                let frame = &buf[..len];
                let Some(n) = icmp::fragment_count(frame, l3, mtu as usize) else {
                    self.fragment_failed += 1;
                    return Action::Drop;
                };
                let sent = (0..n)
                    .take_while(|&k| {
                        spare.tx(ifindex, |out| {
                            icmp::fragment_v4(frame, l3, mtu as usize, k, out).unwrap_or(0)
                        })
                    })
                    .count();
                if sent < n || n == 0 {
                    // Out of spare chunks part-way: the receiver cannot reassemble anyway.
                    self.fragment_failed += 1;
                } else {
                    self.fragments += n as u64;
                }
                Action::Drop
            }
            Verdict::Pass(r) => {
                self.pass[r.index()] += 1;
                // The kernel does not finish a checksum the sender left partial (it arrives
                // on the TAP as a received frame), and its receivers drop it.
                if let Ok(m) = llr_core::wire::parse_frame(&buf[..len]) {
                    llr_core::wire::l4::complete_partial_checksum(&mut buf[..len], &m);
                }
                let sent = match self.punt.as_mut() {
                    Some(p) => p.send(&mut buf[..len], mono_ns()),
                    None => false,
                };
                if !sent {
                    self.punt_dropped += 1;
                }
                Action::Drop
            }
            Verdict::Drop(r) => {
                if r == DropReason::NoNeighbor {
                    self.want_neighbor(&buf[..len], ingress, table);
                    if self.hold_ok && self.pending.len() + self.holding < PENDING_MAX {
                        self.holding += 1;
                        self.neighbor_held += 1;
                        return Action::Hold { tag: 0 };
                    }
                }
                count_drop(&mut self.drops, r);
                Action::Drop
            }
        }
    }

    fn icmp_error(
        &mut self,
        buf: &mut [u8],
        len: usize,
        ingress: u32,
        error: IcmpKind,
        table: &Forwarder,
    ) -> Action {
        let Ok(m): Result<PacketMeta, _> = llr_core::wire::parse_frame(&buf[..len]) else {
            return Action::Drop;
        };
        let class = error.class();
        if !self.icmp.allow(error, &m.src, mono_ns()) {
            self.icmp_limited[class] += 1;
            return Action::Drop;
        }
        self.ip_id = self.ip_id.wrapping_add(1);
        match table.icmp_error(buf, &m, ingress, error, self.ip_id) {
            Verdict::Tx { ifindex, len } => {
                self.icmp_sent[class] += 1;
                Action::Tx { ifindex, len }
            }
            _ => {
                self.icmp_unsendable += 1;
                Action::Drop
            }
        }
    }

    /// Sends the sender of `frame` (forwarded back out of `ingress`, already rewritten) an ICMP
    /// redirect to `gateway`, built in a spare chunk from a copy of the frame: the kernel too
    /// quotes the packet as forwarded (TTL decremented).
    fn redirect(
        &mut self,
        frame: &[u8],
        ingress: u32,
        gateway: u32,
        table: &Forwarder,
        spare: &mut Spare<'_>,
    ) {
        let Ok(m) = llr_core::wire::parse_frame(frame) else {
            return;
        };
        if !icmp::may_answer(frame, &m) {
            return;
        }
        let kind = IcmpKind::Redirect { gateway };
        let class = kind.class();
        if !self.icmp.allow(kind, &m.src, mono_ns()) {
            self.icmp_limited[class] += 1;
            return;
        }
        self.ip_id = self.ip_id.wrapping_add(1);
        let id = self.ip_id;
        let mut built = false;
        spare.tx(ingress, |out| {
            let n = frame.len().min(out.len());
            out[..n].copy_from_slice(&frame[..n]);
            match table.icmp_error(out, &m, ingress, kind, id) {
                Verdict::Tx { len, .. } => {
                    built = true;
                    len
                }
                _ => 0,
            }
        });
        if built {
            self.icmp_sent[class] += 1;
        } else {
            self.icmp_unsendable += 1;
        }
    }

    /// Takes the frames held in the grant just served (`held`: the device's tokens).
    pub(super) fn park(&mut self, held: Vec<Held>, now_ns: u64) {
        self.holding = 0;
        self.pending.extend(held.into_iter().map(|h| (h, now_ns)));
    }

    /// Remembers the next hop of `frame` for the kernel to resolve.
    fn want_neighbor(&mut self, frame: &[u8], ingress: u32, table: &Forwarder) {
        if let Some(a) = table.next_hop_for(frame, ingress) {
            if self.to_resolve.len() < 16 && !self.to_resolve.contains(&a) {
                self.to_resolve.push(a);
            }
        }
    }

    /// Asks the kernel to resolve the next hops remembered since the last time (at most every
    /// [`RESOLVE_EVERY`]).
    #[inline]
    pub(super) fn resolve_neighbors(&mut self) {
        if !self.to_resolve.is_empty() && self.last_resolve.elapsed() > RESOLVE_EVERY {
            for (ifindex, a) in self.to_resolve.drain(..) {
                let _ = llr_io::sys::poke_neighbor(ifindex, a);
            }
            self.last_resolve = Instant::now();
        }
    }

    /// The slow-path counters, named.
    pub(super) fn events(&self) -> Vec<(String, u64)> {
        let mut v = Vec::new();
        for (i, n) in IcmpKind::CLASS_NAMES.iter().enumerate() {
            v.push((format!("icmp_sent_{n}"), self.icmp_sent[i]));
            v.push((format!("icmp_ratelimited_{n}"), self.icmp_limited[i]));
        }
        v.push(("icmp_unsendable".to_string(), self.icmp_unsendable));
        v.push(("neighbor_held".to_string(), self.neighbor_held));
        v.push(("neighbor_released".to_string(), self.neighbor_released));
        v.push(("fragments_sent".to_string(), self.fragments));
        v.push(("fragment_failed".to_string(), self.fragment_failed));
        let ps = self.punt.as_ref().map(|p| p.stats).unwrap_or_default();
        v.push(("punted".to_string(), ps.punted));
        v.push(("punt_dropped".to_string(), self.punt_dropped));
        v
    }
}

fn count_drop(drops: &mut Vec<(String, u64)>, r: DropReason) {
    let name = r.name();
    match drops.iter_mut().find(|(n, _)| n == name) {
        Some((_, c)) => *c += 1,
        None => drops.push((name.to_string(), 1)),
    }
}
