//! The forwarder the benches and `examples/fwd_count.rs` measure: two ports, 1 (in) and 2
//! (out), and, where a bench needs one route, 10.2.0.0/16 via 10.1.0.1 on port 2 with its
//! neighbour resolved.

use llr_core::fwd::{Forwarder, Interface, NextHop};
use std::net::IpAddr;

/// Ports 1 and 2 (MACs 02:00:00:00:00:01 and :02, MTU 1500), no route.
pub fn two_ports() -> Forwarder {
    let mut f = Forwarder::new();
    f.interfaces
        .upsert(Interface::new(1, [2, 0, 0, 0, 0, 1], 1500));
    f.interfaces
        .upsert(Interface::new(2, [2, 0, 0, 0, 0, 2], 1500));
    f
}

/// [`two_ports`] with 10.2.0.0/16 via 10.1.0.1 (MAC 02:00:00:00:00:09) on port 2.
#[allow(dead_code)] // not every bench that includes this module routes through it
pub fn one_route() -> Forwarder {
    let mut f = two_ports();
    let gw: IpAddr = "10.1.0.1".parse().unwrap();
    f.routes
        .insert(
            "10.2.0.0/16".parse().unwrap(),
            NextHop {
                ifindex: 2,
                gateway: Some(gw),
            },
        )
        .unwrap();
    f.neighbors.insert(2, gw, [2, 0, 0, 0, 0, 9]);
    f
}
