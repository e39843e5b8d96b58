//! Traffic for llrouter's tests, benchmarks and testbed: the probe generator, the latency
//! sinks and the network-namespace fixtures they run in. Built on `llr-io`'s kernel I/O (its
//! system calls, XDP loading and AF_XDP transmit sockets); the router itself never uses it.
//!
//! - [`gen`]: UDP probes with sequence numbers, class and send timestamps, sent by sockets,
//!   AF_XDP or an XDP program that replays them (`bpf-live`);
//! - [`sink`]: one-way latency per class, loss and reordering per flow, from a UDP socket or
//!   an XDP program;
//! - [`netns`]: network namespaces and veth topologies (generator → router → sink).
#![forbid(unsafe_code)]

pub mod gen;
pub mod netns;
pub mod sink;

/// A duration flag in seconds: `0.5`, `10`; more than 0 and at most a day.
pub fn secs(s: &str) -> Result<std::time::Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => {
            Ok(std::time::Duration::from_secs_f64(v))
        }
        _ => Err(format!("{s}: must be > 0 and ≤ 86400 seconds")),
    }
}
