//! llrouter's I/O layer: the eBPF classifier, AF_XDP sockets, netlink, the punt TAP and the
//! raw system calls. The worker loop that drives them is in `llr-router`; the traffic tools
//! that test it (generator, sinks, namespaces) are in `llr-traffic`.
//!
//! - [`bpf_objects`]: the compiled `bpf/*.c` programs;
//! - [`ebpf`]: load, configure and attach the XDP classifier;
//! - [`xsk`]: AF_XDP sockets on one shared UMEM, as the poll engine's rings;
//! - [`punt`]: the TAP that hands frames to the kernel; [`ntuple`]: NIC flow-steering rules;
//! - [`kernel`]: interfaces, routes and neighbours mirrored from the kernel;
//! - [`netfilter`]: the host's nftables and iptables rulesets, read and watched;
//! - [`conntrack`]: the kernel's connection tracking table (ctnetlink);
//! - [`sys`]: the raw Linux calls (signals, affinity, clock, eventfd, poll, socket options).

pub mod conntrack;
pub mod bpf_objects {
    //! The eBPF objects compiled from `bpf/*.c` by `build.rs` (one constant per file, named
    //! after it in upper case).
    include!(concat!(env!("OUT_DIR"), "/bpf_objects.rs"));
}
pub mod ebpf;
pub mod kernel;
pub mod netfilter;
pub mod ntuple;
pub mod probe;
pub mod punt;
pub mod sys;
pub mod xsk;
