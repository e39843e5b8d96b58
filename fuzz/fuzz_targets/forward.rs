#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use llr_core::fwd::{Forwarder, Interface, NextHop};

fn forwarder() -> &'static Forwarder {
    // Built once: the DIR-24-8 table is 64 MiB and must not be rebuilt per input.
    static F: OnceLock<Forwarder> = OnceLock::new();
    F.get_or_init(|| {
        let mut f = Forwarder::new();
        f.interfaces
            .upsert(Interface::new(1, [2, 0, 0, 0, 0, 1], 1500));
        f.interfaces
            .upsert(Interface::new(2, [2, 0, 0, 0, 0, 2], 1500));
        for (p, gw) in [("0.0.0.0/0", "10.1.0.1"), ("::/0", "2001:db8::1")] {
            let gw = gw.parse().unwrap();
            f.routes
                .insert(
                    p.parse().unwrap(),
                    NextHop {
                        ifindex: 2,
                        gateway: Some(gw),
                    },
                )
                .unwrap();
            f.neighbors.insert(2, gw, [2, 0, 0, 0, 0, 9]);
        }
        f
    })
}

fuzz_target!(|data: &[u8]| {
    let mut frame = data.to_vec();
    let _ = forwarder().process(&mut frame, 1);
});
