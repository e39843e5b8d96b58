//! The routes one routing protocol (`proto bird`, say) holds in the kernel's main table, kept
//! from route events: a test bench learns when a daemon's table became complete, to the event,
//! without dumping a million routes (a dump of a full table takes seconds).

use std::collections::HashSet;

use llr_core::classify::IpPrefix;
use netlink_packet_route::route::RouteAttribute;
use netlink_packet_route::RouteNetlinkMessage;

use super::netlink::{
    frames, route_addr, Frame, NlSocket, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_ROUTE, RT_TABLE_MAIN,
};
use super::{KernelError, Result};

/// Route events of the calling thread's network namespace, counted for one protocol.
pub struct ProtoRouteWatch {
    sock: NlSocket,
    proto: u8,
    routes: HashSet<IpPrefix>,
    v4: usize,
}

impl ProtoRouteWatch {
    /// Subscribes to IPv4 and IPv6 route events with a receive buffer of `rcvbuf` bytes (root
    /// can exceed `net.core.rmem_max`). Counts from zero: start it before the protocol
    /// installs anything.
    pub fn new(proto: u8, rcvbuf: usize) -> Result<ProtoRouteWatch> {
        Ok(ProtoRouteWatch {
            sock: NlSocket::new(RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE, rcvbuf)?,
            proto,
            routes: HashSet::new(),
            v4: 0,
        })
    }

    /// Applies every event waiting on the socket; returns whether a count changed. An overrun
    /// (`ENOBUFS`: events lost) is an error: the counts would no longer be the kernel's.
    pub fn poll(&mut self) -> Result<bool> {
        let mut changed = false;
        loop {
            let n = match self.sock.sock.recv(&mut &mut self.sock.buf[..], 0) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(changed),
                Err(cause) => {
                    return Err(KernelError::Netlink {
                        op: "receive route events",
                        cause,
                    })
                }
            };
            for (_, _, f) in frames(&self.sock.buf[..n]) {
                let (add, m) = match f {
                    Frame::Msg(RouteNetlinkMessage::NewRoute(m)) => (true, m),
                    Frame::Msg(RouteNetlinkMessage::DelRoute(m)) => (false, m),
                    _ => continue,
                };
                if u8::from(m.header.protocol) != self.proto {
                    continue;
                }
                let mut table = u32::from(m.header.table);
                let mut dst = None;
                for a in &m.attributes {
                    match a {
                        RouteAttribute::Table(t) => table = *t,
                        RouteAttribute::Destination(d) => dst = route_addr(d),
                        _ => {}
                    }
                }
                let Some(p) = dst
                    .filter(|_| table == RT_TABLE_MAIN)
                    .and_then(|d| IpPrefix::new(d, m.header.destination_prefix_length).ok())
                else {
                    continue;
                };
                let v4 = usize::from(p.addr().is_ipv4());
                // A replace arrives as a new route for a prefix already held: no change.
                if add && self.routes.insert(p) {
                    self.v4 += v4;
                    changed = true;
                } else if !add && self.routes.remove(&p) {
                    self.v4 -= v4;
                    changed = true;
                }
            }
        }
    }

    /// The protocol's routes in the main table: (IPv4, IPv6).
    pub fn counts(&self) -> (usize, usize) {
        (self.v4, self.routes.len() - self.v4)
    }
}
