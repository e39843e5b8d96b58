//! The kernel's connection tracking table over ctnetlink (`NETLINK_NETFILTER`,
//! `NFNL_SUBSYS_CTNETLINK`): a dump, the update and destroy events, and the two changes
//! llrouter makes to the entries of the connections it carries (their timeout, and TCP window
//! tracking relaxed, as the kernel does for a connection an nftables flowtable hands back).
//!
//! The messages are a handful of fixed attributes (linux/netfilter/nfnetlink_conntrack.h), read
//! and written here directly: no netlink crate on hand covers ctnetlink, and parsing a nest of
//! type-length-value attributes is short.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;

use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};

const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_NEW: u16 = 0;
const IPCTNL_MSG_CT_GET: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;

const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// `NFNLGRP_CONNTRACK_UPDATE`, `NFNLGRP_CONNTRACK_DESTROY`.
const GROUP_UPDATE: u32 = 2;
const GROUP_DESTROY: u32 = 3;

const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_STATUS: u16 = 3;
const CTA_PROTOINFO: u16 = 4;
const CTA_HELP: u16 = 5;
const CTA_TIMEOUT: u16 = 7;
const CTA_ZONE: u16 = 18;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_TUPLE_ZONE: u16 = 3;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_SRC: u16 = 3;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;
const CTA_PROTOINFO_TCP: u16 = 1;
const CTA_PROTOINFO_TCP_STATE: u16 = 1;
const CTA_PROTOINFO_TCP_FLAGS_ORIGINAL: u16 = 4;
const CTA_PROTOINFO_TCP_FLAGS_REPLY: u16 = 5;

/// `IP_CT_TCP_FLAG_BE_LIBERAL`: no window check for this direction.
const TCP_FLAG_BE_LIBERAL: u8 = 0x08;
/// `TCP_CONNTRACK_ESTABLISHED`.
const TCP_ESTABLISHED: u8 = 3;

/// `IPS_*` status bits.
pub mod status {
    /// A reply was seen: the connection is `established` to the ruleset.
    pub const SEEN_REPLY: u32 = 1 << 1;
    /// In the table (not a template or a packet's unconfirmed entry).
    pub const CONFIRMED: u32 = 1 << 3;
    /// Source NAT.
    pub const SRC_NAT: u32 = 1 << 4;
    /// Destination NAT.
    pub const DST_NAT: u32 = 1 << 5;
    /// TCP sequence numbers adjusted (by a helper's NAT).
    pub const SEQ_ADJUST: u32 = 1 << 6;
    /// Being destroyed.
    pub const DYING: u32 = 1 << 9;
    /// A template.
    pub const TEMPLATE: u32 = 1 << 11;
    /// Untracked.
    pub const UNTRACKED: u32 = 1 << 12;
    /// A helper is attached.
    pub const HELPER: u32 = 1 << 13;
    /// In an nftables flowtable.
    pub const OFFLOAD: u32 = 1 << 14;
    /// In a NIC's flow table.
    pub const HW_OFFLOAD: u32 = 1 << 15;
}

/// One direction of a connection, as conntrack keys it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tuple {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IP protocol.
    pub proto: u8,
}

impl Tuple {
    /// The other direction.
    pub fn reversed(&self) -> Tuple {
        Tuple {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
        }
    }

    /// IPv6.
    pub fn v6(&self) -> bool {
        self.src.is_ipv6()
    }

    /// The classifier's `struct llr_ct_key` (bpf/classifier.c) for frames of this direction.
    pub fn bpf_key(&self) -> [u8; 40] {
        let mut k = [0u8; 40];
        let put = |k: &mut [u8], a: IpAddr| match a {
            IpAddr::V4(a) => k[..4].copy_from_slice(&a.octets()),
            IpAddr::V6(a) => k.copy_from_slice(&a.octets()),
        };
        put(&mut k[0..16], self.src);
        put(&mut k[16..32], self.dst);
        // Host order: the program compares the numbers it assembled from the header.
        k[32..34].copy_from_slice(&self.sport.to_ne_bytes());
        k[34..36].copy_from_slice(&self.dport.to_ne_bytes());
        k[36] = self.proto;
        k[37] = if self.v6() { 6 } else { 4 };
        k
    }
}

/// A conntrack entry, as much of it as llrouter reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The original direction.
    pub orig: Tuple,
    /// The reply direction.
    pub reply: Tuple,
    /// `IPS_*` bits.
    pub status: u32,
    /// TCP's state (`TCP_CONNTRACK_*`), if TCP.
    pub tcp_state: Option<u8>,
    /// A helper is attached (`CTA_HELP`).
    pub helper: bool,
    /// The zone (0: the default).
    pub zone: u16,
}

/// What an event said of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Created or changed: the entry as it is now.
    Update(Entry),
    /// Gone.
    Destroy(Tuple),
}

impl Entry {
    /// Whether llrouter can carry this connection's packets: established in the kernel's
    /// sense (a reply seen; TCP in its established state), TCP or UDP, in the default zone,
    /// neither translated (NAT) nor watched by a helper nor offloaded elsewhere. llrouter
    /// forwards packets unchanged, so the reply direction must be the original reversed.
    pub fn carriable(&self) -> bool {
        use status::*;
        let needed = SEEN_REPLY | CONFIRMED;
        let refused = SRC_NAT
            | DST_NAT
            | SEQ_ADJUST
            | DYING
            | TEMPLATE
            | UNTRACKED
            | HELPER
            | OFFLOAD
            | HW_OFFLOAD;
        let proto_ok = match self.orig.proto {
            6 => self.tcp_state == Some(TCP_ESTABLISHED),
            17 => true,
            _ => false,
        };
        self.status & needed == needed
            && self.status & refused == 0
            && proto_ok
            && !self.helper
            && self.zone == 0
            && self.reply == self.orig.reversed()
    }
}

/// Why a ctnetlink request failed.
#[derive(Debug, thiserror::Error)]
pub enum ConntrackError {
    /// The socket failed.
    #[error("ctnetlink: {0}")]
    Io(#[from] io::Error),
    /// The kernel said no.
    #[error("ctnetlink: the kernel answered {0}")]
    Kernel(io::Error),
    /// Events were lost (the socket's buffer overran): the caller must dump again.
    #[error("ctnetlink: events were lost")]
    Overrun,
}

/// A ctnetlink socket: requests, and the events of the calling thread's namespace once
/// [`Conntrack::subscribe`]d.
pub struct Conntrack {
    sock: Socket,
    events: Option<Socket>,
    buf: Vec<u8>,
    seq: u32,
}

impl Conntrack {
    /// Opens the request socket.
    pub fn open() -> Result<Conntrack, ConntrackError> {
        let mut sock = Socket::new(NETLINK_NETFILTER)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        Ok(Conntrack {
            sock,
            events: None,
            buf: vec![0; 256 * 1024],
            seq: 1,
        })
    }

    /// Subscribes to update and destroy events (before a [`Conntrack::dump`], so that none
    /// falls between the two).
    pub fn subscribe(&mut self) -> Result<(), ConntrackError> {
        let mut s = Socket::new(NETLINK_NETFILTER)?;
        s.bind(&SocketAddr::new(0, 0))?;
        s.add_membership(GROUP_UPDATE)?;
        s.add_membership(GROUP_DESTROY)?;
        s.set_non_blocking(true)?;
        // Bursts of connections must not overrun it; an overrun costs a dump.
        let _ = crate::sys::set_rcvbuf(s.as_raw_fd(), 4 << 20);
        self.events = Some(s);
        Ok(())
    }

    /// Every entry of the table (both families).
    pub fn dump(&mut self) -> Result<Vec<Entry>, ConntrackError> {
        let seq = self.next_seq();
        let msg = request(IPCTNL_MSG_CT_GET, NLM_F_REQUEST | NLM_F_DUMP, seq, 0, &[]);
        self.sock.send(&msg, 0)?;
        let mut out = Vec::new();
        loop {
            let n = self.sock.recv(&mut &mut self.buf[..], 0)?;
            let mut done = false;
            for (ty, body) in messages(&self.buf[..n]) {
                match ty {
                    NLMSG_DONE => done = true,
                    NLMSG_ERROR => {
                        let code = error_code(body);
                        if code != 0 {
                            return Err(ConntrackError::Kernel(io::Error::from_raw_os_error(
                                -code,
                            )));
                        }
                    }
                    t if t == (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW => {
                        if let Some(e) = parse_entry(body) {
                            out.push(e);
                        }
                    }
                    _ => {}
                }
            }
            if done {
                return Ok(out);
            }
        }
    }

    /// Waits up to `timeout` for events; returns those that came (possibly none).
    pub fn events(&mut self, timeout: Duration) -> Result<Vec<Event>, ConntrackError> {
        let Some(s) = self.events.as_mut() else {
            std::thread::sleep(timeout);
            return Ok(Vec::new());
        };
        let mut fds = [crate::sys::poll_in(s.as_raw_fd())];
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        if crate::sys::poll(&mut fds, ms) == 0 {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        loop {
            match s.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => {
                    for (ty, body) in messages(&self.buf[..n]) {
                        let (sub, msg) = (ty >> 8, ty & 0xff);
                        if sub != NFNL_SUBSYS_CTNETLINK {
                            continue;
                        }
                        let Some(e) = parse_entry(body) else { continue };
                        out.push(match msg {
                            IPCTNL_MSG_CT_DELETE => Event::Destroy(e.orig),
                            _ => Event::Update(e),
                        });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(out),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Err(ConntrackError::Overrun)
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Sets the timeout of `orig`'s entry to `secs` from now and, with `liberal`, turns off
    /// TCP window tracking for both directions: the kernel does not see the segments llrouter
    /// carries, and would otherwise call the next one it sees (a FIN) out of window.
    pub fn refresh(
        &mut self,
        orig: &Tuple,
        secs: u32,
        liberal: bool,
    ) -> Result<(), ConntrackError> {
        let mut attrs = Vec::new();
        put_tuple(&mut attrs, CTA_TUPLE_ORIG, orig);
        put(&mut attrs, CTA_TIMEOUT, &secs.to_be_bytes());
        if liberal {
            let mut tcp = Vec::new();
            let flags = [TCP_FLAG_BE_LIBERAL, TCP_FLAG_BE_LIBERAL];
            put(&mut tcp, CTA_PROTOINFO_TCP_FLAGS_ORIGINAL, &flags);
            put(&mut tcp, CTA_PROTOINFO_TCP_FLAGS_REPLY, &flags);
            let mut info = Vec::new();
            put(&mut info, CTA_PROTOINFO_TCP | NLA_F_NESTED, &tcp);
            put(&mut attrs, CTA_PROTOINFO | NLA_F_NESTED, &info);
        }
        let family = if orig.v6() {
            libc::AF_INET6
        } else {
            libc::AF_INET
        } as u8;
        let seq = self.next_seq();
        let msg = request(
            IPCTNL_MSG_CT_NEW,
            NLM_F_REQUEST | NLM_F_ACK,
            seq,
            family,
            &attrs,
        );
        self.sock.send(&msg, 0)?;
        self.ack(seq)
    }

    /// Deletes every entry of both families (a DELETE without a tuple is a flush). A table
    /// that is not there (conntrack not loaded in this namespace) is already empty.
    pub fn flush(&mut self) -> Result<(), ConntrackError> {
        for family in [libc::AF_INET, libc::AF_INET6] {
            let seq = self.next_seq();
            let msg = request(
                IPCTNL_MSG_CT_DELETE,
                NLM_F_REQUEST | NLM_F_ACK,
                seq,
                family as u8,
                &[],
            );
            self.sock.send(&msg, 0)?;
            match self.ack(seq) {
                Err(ConntrackError::Kernel(e)) if e.raw_os_error() == Some(libc::ENOENT) => {}
                r => r?,
            }
        }
        Ok(())
    }

    /// Waits for the kernel's answer to request `seq`.
    fn ack(&mut self, seq: u32) -> Result<(), ConntrackError> {
        loop {
            let n = self.sock.recv(&mut &mut self.buf[..], 0)?;
            for (ty, body) in messages(&self.buf[..n]) {
                // An error or acknowledgement quotes the request's header: its seq at 12.
                if ty == NLMSG_ERROR && body.len() >= 16 {
                    let code = error_code(body);
                    let acked = u32::from_ne_bytes([body[12], body[13], body[14], body[15]]);
                    if acked != seq {
                        continue;
                    }
                    return match code {
                        0 => Ok(()),
                        c => Err(ConntrackError::Kernel(io::Error::from_raw_os_error(-c))),
                    };
                }
            }
        }
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }
}

/// A netlink request: header, `nfgenmsg`, attributes.
fn request(msg: u16, flags: u16, seq: u32, family: u8, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + 4 + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&((NFNL_SUBSYS_CTNETLINK << 8) | msg).to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[family, 0, 0, 0]);
    m.extend_from_slice(attrs);
    m
}

/// Appends one attribute, padded to 4 bytes.
fn put(out: &mut Vec<u8>, ty: u16, value: &[u8]) {
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&ty.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
}

fn put_tuple(out: &mut Vec<u8>, ty: u16, t: &Tuple) {
    let mut ip = Vec::new();
    match (t.src, t.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            put(&mut ip, CTA_IP_V4_SRC, &s.octets());
            put(&mut ip, CTA_IP_V4_DST, &d.octets());
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V6(a) => a.octets(),
                IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            };
            put(&mut ip, CTA_IP_V6_SRC, &v6(s));
            put(&mut ip, CTA_IP_V6_DST, &v6(d));
        }
    }
    let mut proto = Vec::new();
    put(&mut proto, CTA_PROTO_NUM, &[t.proto]);
    put(&mut proto, CTA_PROTO_SRC_PORT, &t.sport.to_be_bytes());
    put(&mut proto, CTA_PROTO_DST_PORT, &t.dport.to_be_bytes());
    let mut tuple = Vec::new();
    put(&mut tuple, CTA_TUPLE_IP | NLA_F_NESTED, &ip);
    put(&mut tuple, CTA_TUPLE_PROTO | NLA_F_NESTED, &proto);
    put(out, ty | NLA_F_NESTED, &tuple);
}

/// The netlink messages in a datagram: (type, payload after the header).
fn messages(b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    crate::kernel::netlink::messages(b).map(|m| (m.kind, &m.bytes[16..]))
}

/// An `NLMSG_ERROR`'s code (0: an acknowledgement).
fn error_code(body: &[u8]) -> i32 {
    body.get(..4)
        .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .unwrap_or(-libc::EIO)
}

/// The attributes of a nest: (type without flags, value).
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([b[0], b[1]]));
        if len < 4 || len > b.len() {
            return None;
        }
        let ty = u16::from_ne_bytes([b[2], b[3]]) & NLA_TYPE_MASK;
        let v = &b[4..len];
        b = &b[len.next_multiple_of(4).min(b.len())..];
        Some((ty, v))
    })
}

fn be16(v: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(v.get(..2)?.try_into().ok()?))
}

fn be32(v: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?))
}

fn parse_tuple(b: &[u8]) -> Option<(Tuple, u16)> {
    let (mut src, mut dst, mut proto, mut sport, mut dport, mut zone) = (None, None, None, 0, 0, 0);
    for (ty, v) in attrs(b) {
        match ty {
            CTA_TUPLE_IP => {
                for (t, a) in attrs(v) {
                    let addr = match a.len() {
                        4 => IpAddr::from(<[u8; 4]>::try_from(a).ok()?),
                        16 => IpAddr::from(<[u8; 16]>::try_from(a).ok()?),
                        _ => continue,
                    };
                    match t {
                        CTA_IP_V4_SRC | CTA_IP_V6_SRC => src = Some(addr),
                        CTA_IP_V4_DST | CTA_IP_V6_DST => dst = Some(addr),
                        _ => {}
                    }
                }
            }
            CTA_TUPLE_PROTO => {
                for (t, a) in attrs(v) {
                    match t {
                        CTA_PROTO_NUM => proto = a.first().copied(),
                        CTA_PROTO_SRC_PORT => sport = be16(a)?,
                        CTA_PROTO_DST_PORT => dport = be16(a)?,
                        _ => {}
                    }
                }
            }
            CTA_TUPLE_ZONE => zone = be16(v)?,
            _ => {}
        }
    }
    Some((
        Tuple {
            src: src?,
            dst: dst?,
            sport,
            dport,
            proto: proto?,
        },
        zone,
    ))
}

/// An entry from a ctnetlink message's payload (`nfgenmsg` first).
pub fn parse_entry(body: &[u8]) -> Option<Entry> {
    let attrs_b = body.get(4..)?;
    let (mut orig, mut reply) = (None, None);
    let (mut status, mut tcp_state, mut helper, mut zone) = (0, None, false, 0);
    for (ty, v) in attrs(attrs_b) {
        match ty {
            CTA_TUPLE_ORIG => {
                let (t, z) = parse_tuple(v)?;
                orig = Some(t);
                zone = zone.max(z);
            }
            CTA_TUPLE_REPLY => {
                let (t, z) = parse_tuple(v)?;
                reply = Some(t);
                zone = zone.max(z);
            }
            CTA_STATUS => status = be32(v)?,
            CTA_HELP => helper = true,
            CTA_ZONE => zone = zone.max(be16(v)?),
            CTA_PROTOINFO => {
                for (t, p) in attrs(v) {
                    if t == CTA_PROTOINFO_TCP {
                        for (k, x) in attrs(p) {
                            if k == CTA_PROTOINFO_TCP_STATE {
                                tcp_state = x.first().copied();
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let orig = orig?;
    Some(Entry {
        orig,
        // A destroy event carries the original tuple only.
        reply: reply.unwrap_or_else(|| orig.reversed()),
        status,
        tcp_state,
        helper,
        zone,
    })
}

/// The timeout (seconds) the kernel gives an established connection of `proto`, from this
/// namespace's sysctls (`None` when conntrack is not loaded).
pub fn established_timeout(proto: u8) -> Option<u32> {
    let name = match proto {
        6 => "nf_conntrack_tcp_timeout_established",
        17 => "nf_conntrack_udp_timeout_stream",
        _ => return None,
    };
    let path = format!("/proc/sys/net/netfilter/{name}");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(a: &str, b: &str, sport: u16, dport: u16, proto: u8) -> Tuple {
        Tuple {
            src: a.parse().unwrap(),
            dst: b.parse().unwrap(),
            sport,
            dport,
            proto,
        }
    }

    /// An event as the kernel writes it (`ctnetlink_fill_info`'s order of attributes).
    fn event(orig: &Tuple, reply: &Tuple, status: u32, tcp_state: Option<u8>) -> Vec<u8> {
        let mut a = Vec::new();
        put_tuple(&mut a, CTA_TUPLE_ORIG, orig);
        put_tuple(&mut a, CTA_TUPLE_REPLY, reply);
        put(&mut a, CTA_STATUS, &status.to_be_bytes());
        if let Some(s) = tcp_state {
            let mut tcp = Vec::new();
            put(&mut tcp, CTA_PROTOINFO_TCP_STATE, &[s]);
            let mut info = Vec::new();
            put(&mut info, CTA_PROTOINFO_TCP | NLA_F_NESTED, &tcp);
            put(&mut a, CTA_PROTOINFO | NLA_F_NESTED, &info);
        }
        request(IPCTNL_MSG_CT_NEW, 0, 0, libc::AF_INET as u8, &a)[16..].to_vec()
    }

    #[test]
    fn entries_parse_and_only_plain_established_ones_are_carried() {
        let o = tuple("10.0.0.1", "10.0.1.1", 40000, 80, 6);
        let est = status::SEEN_REPLY | status::CONFIRMED | 4;
        let e = parse_entry(&event(&o, &o.reversed(), est, Some(TCP_ESTABLISHED))).unwrap();
        assert_eq!(e.orig, o);
        assert_eq!(e.reply, o.reversed());
        assert_eq!(e.status, est);
        assert!(e.carriable());
        // Not yet answered; a TCP connection still in its handshake or closing.
        let syn = parse_entry(&event(&o, &o.reversed(), status::CONFIRMED, Some(3))).unwrap();
        assert!(!syn.carriable());
        let fin = parse_entry(&event(&o, &o.reversed(), est, Some(4))).unwrap();
        assert!(!fin.carriable());
        // NAT: the reply is not the original reversed.
        let mut r = o.reversed();
        r.dst = "192.0.2.1".parse().unwrap();
        let nat = parse_entry(&event(&o, &r, est | status::SRC_NAT, Some(3))).unwrap();
        assert!(!nat.carriable());
        // UDP (no protoinfo), IPv6.
        let u = tuple("fd00::1", "fd00:1::1", 5000, 53, 17);
        let e = parse_entry(&event(&u, &u.reversed(), est, None)).unwrap();
        assert_eq!(e.orig, u);
        assert!(e.carriable());
        // ICMP and other protocols stay with the kernel.
        let i = tuple("10.0.0.1", "10.0.1.1", 7, 0, 1);
        assert!(!parse_entry(&event(&i, &i.reversed(), est, None))
            .unwrap()
            .carriable());
        // Truncated input is no entry, not a panic.
        let b = event(&o, &o.reversed(), est, Some(3));
        for n in 0..b.len() {
            let _ = parse_entry(&b[..n]);
        }
    }

    #[test]
    fn the_bpf_key_is_the_classifiers_struct() {
        let k = tuple("10.0.0.1", "10.0.1.2", 0x1234, 80, 17).bpf_key();
        assert_eq!(&k[..4], &[10, 0, 0, 1]);
        assert_eq!(&k[4..16], &[0; 12]);
        assert_eq!(&k[16..20], &[10, 0, 1, 2]);
        assert_eq!(u16::from_ne_bytes([k[32], k[33]]), 0x1234);
        assert_eq!(u16::from_ne_bytes([k[34], k[35]]), 80);
        assert_eq!((k[36], k[37]), (17, 4));
        let k6 = tuple("fd00::1", "fd00::2", 1, 2, 6).bpf_key();
        assert_eq!(k6[37], 6);
        assert_eq!(k6[15], 1);
    }
}
