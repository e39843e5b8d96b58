//! A target set up in the router namespace: receive steering (RPS, optionally threaded NAPI on
//! the router CPU), the HTB qdisc of `kernel-htb`, the pass-all XDP program of `kernel-xdp`, or
//! the llrouter process. Undone on drop.

use llr_traffic::netns::{addr, Topology};

use crate::host;
use crate::options::{Options, Target};
use crate::router_proc::RouterProc;
use crate::{LabError, Result, StepContext};

/// The egress HTB of `kernel-htb`: DSCP EF (IPv4 and IPv6) in the prio-0 class, the rest in
/// prio 1.
const HTB: [&str; 6] = [
    "qdisc add dev {dev} root handle 1: htb default 20",
    "class add dev {dev} parent 1: classid 1:1 htb rate 10gbit",
    "class add dev {dev} parent 1:1 classid 1:10 htb rate 5gbit ceil 10gbit prio 0",
    "class add dev {dev} parent 1:1 classid 1:20 htb rate 5gbit ceil 10gbit prio 1",
    "filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip dsfield 0xb8 0xfc flowid 1:10",
    "filter add dev {dev} parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xb8 0xfc flowid 1:10",
];

/// A running target; undoes its setup on drop.
pub struct Active<'a> {
    topo: &'a Topology,
    target: Target,
    /// The router's CPUs (RPS targets of the kernel, llrouter's workers).
    router_cpus: Vec<usize>,
    router: Option<RouterProc>,
    /// Final counters of an llrouter target (after [`Active::finish`]).
    pub counters: Option<serde_json::Value>,
    /// The llrouter target's `tx-hold-us`.
    pub tx_hold_us: Option<u32>,
}

impl<'a> Active<'a> {
    /// Sets up `target` in `topo`'s router namespace.
    pub fn start(topo: &'a Topology, target: &Target, c: &Options) -> Result<Active<'a>> {
        let before = steer_receive(topo, c)?;
        let mut act = Active {
            topo,
            target: *target,
            router_cpus: c.router_cpus(),
            router: None,
            counters: None,
            tx_hold_us: matches!(target, Target::Llrouter(_) | Target::LlrouterFlows(_))
                .then_some(c.tx_hold_us),
        };
        match target {
            Target::Kernel => {}
            Target::KernelHtb => {
                for line in HTB {
                    let line = line.replace("{dev}", addr::RTR_OUT_IF);
                    let mut argv = vec!["tc"];
                    argv.extend(line.split_whitespace());
                    topo.router.exec(&argv).step(|| line.clone())?;
                }
            }
            Target::KernelXdp => {
                let obj = c.out.join("xdp-pass.o");
                std::fs::write(&obj, llr_io::bpf_objects::PASS)
                    .map_err(|e| LabError::io(format!("write {}", obj.display()), e))?;
                let obj = obj.to_string_lossy();
                for dev in [addr::RTR_IN_IF, addr::RTR_OUT_IF] {
                    topo.router
                        .exec(&[
                            "ip",
                            "link",
                            "set",
                            "dev",
                            dev,
                            "xdp",
                            "obj",
                            &obj,
                            "sec",
                            "xdp.frags",
                        ])
                        .step(|| format!("attach the pass-all XDP program to {dev}"))?;
                    // `ip` built without libbpf may exit 0 without attaching.
                    let shown = topo.router.exec(&["ip", "link", "show", "dev", dev]);
                    let text = shown.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
                    if !text.as_deref().unwrap_or("").contains("llr_pass") {
                        return Err(LabError::Failed(format!(
                            "kernel-xdp: no XDP program llr_pass on {dev} after attaching it"
                        )));
                    }
                }
            }
            Target::Llrouter(strategy) => {
                act.router = Some(RouterProc::start(topo, c, *strategy, false)?);
            }
            Target::LlrouterFlows(strategy) => {
                act.router = Some(RouterProc::start(topo, c, *strategy, true)?);
            }
        }
        if c.rx_napi_thread {
            pin_new_napi_threads(&before, c.router_cpu)?;
        }
        Ok(act)
    }

    /// The target.
    pub fn target(&self) -> Target {
        self.target
    }

    /// The target's wake-up counter so far: llrouter's device wake-ups, or the NET_RX softirqs
    /// of the router CPUs for the kernel targets.
    pub fn wakeups(&self) -> Option<u64> {
        match &self.router {
            Some(r) => r.wakeups(),
            None => (self.router_cpus.iter())
                .map(|&c| host::net_rx_softirqs(c))
                .sum(),
        }
    }

    /// The llrouter target's counters now (`None` for the kernel targets, or when the control
    /// socket does not answer).
    pub fn counters(&self) -> Option<llr_ops::metrics::MetricsSnapshot> {
        self.router.as_ref()?.counters()
    }

    /// Sends a control command to the llrouter target (an error for the kernel targets).
    pub fn call(&self, cmd: &llr_ops::ctl::Command) -> Result<serde_json::Value> {
        match &self.router {
            Some(r) => r.call(cmd),
            None => Err(crate::LabError::Failed(format!(
                "{}: no control socket (not an llrouter target)",
                self.target.label()
            ))),
        }
    }

    /// Datagrams the sink namespace's kernel could not hand to the sink's sockets so far (full
    /// receive buffers): the loss at the application, after the router.
    pub fn sink_udp_errors(&self) -> u64 {
        self.topo.sink.run(host::udp_in_errors).unwrap_or(0)
    }

    /// Router CPU time so far, ns: llrouter's process time, or the router CPUs' softirq time.
    pub fn router_cpu_ns(&self) -> u64 {
        match &self.router {
            Some(r) => host::proc_cpu_ns(r.pid()),
            None => self.router_cpus.iter().map(|&c| host::softirq_ns(c)).sum(),
        }
    }

    /// The forwarding threads' CPU time so far, ns: llrouter's workers (scheduler time, no
    /// steal), or the router CPUs' softirq time (the kernel forwards there).
    pub fn worker_cpu_ns(&self) -> u64 {
        match &self.router {
            Some(r) => host::threads_cpu_ns(r.pid(), "llr-worker-"),
            None => self.router_cpu_ns(),
        }
    }

    /// llrouter's workers' [`host::Preemption`] so far (`None` for the kernel, which forwards
    /// in softirq).
    pub fn worker_preemption(&self) -> Option<host::Preemption> {
        self.router
            .as_ref()
            .and_then(|r| host::threads_preemption(r.pid(), "llr-worker-"))
    }

    /// Stops an llrouter target and keeps its counters.
    pub fn finish(&mut self) -> Result<()> {
        if let Some(r) = self.router.take() {
            self.counters = Some(r.stop()?);
        }
        Ok(())
    }
}

/// Kernel forwarding: steer the router's receive processing to its CPU (RPS), as on a NIC
/// whose IRQ is pinned there; GRO on; threaded NAPI as asked. Returns the NAPI threads that
/// existed before (not ours).
fn steer_receive(topo: &Topology, c: &Options) -> Result<Vec<u32>> {
    // Rx queue q to router CPU q mod workers: the kernel's twin of one llrouter worker per queue.
    let cpus = c.router_cpus();
    for q in 0..c.veth_queues() as usize {
        let mask = format!("{:x}", 1u64 << cpus[q % cpus.len()]);
        let rps = format!("/sys/class/net/{}/queues/rx-{q}/rps_cpus", addr::RTR_IN_IF);
        topo.router
            .exec(&["sh", "-c", &format!("echo {mask} > {rps}")])
            .step(|| "set RPS on the router's ingress veth".into())?;
    }
    // A veth delivers XDP-redirected frames (bpf-live generator) only to a peer whose NAPI
    // is on: GRO on (kernel targets) or an XDP program (llrouter's classifier).
    let _ = topo
        .router
        .exec(&["ethtool", "-K", addr::RTR_IN_IF, "gro", "on"]);
    // Off first, so that a thread left by an earlier target ends and ours is new.
    let threaded = format!("/sys/class/net/{}/threaded", addr::RTR_IN_IF);
    let _ = topo
        .router
        .exec(&["sh", "-c", &format!("echo 0 > {threaded}")]);
    let before = host::napi_threads(addr::RTR_IN_IF);
    if c.rx_napi_thread {
        topo.router
            .exec(&["sh", "-c", &format!("echo 1 > {threaded}")])
            .step(|| "set threaded NAPI on the router's ingress veth".into())?;
    }
    Ok(before)
}

/// Pins the NAPI threads of the router's ingress veth that are not in `before` to
/// `router_cpu`. Called after the router started: attaching XDP may create the thread anew;
/// threads of other namespaces' interfaces with the same name existed before.
fn pin_new_napi_threads(before: &[u32], router_cpu: usize) -> Result<()> {
    let ours: Vec<u32> = host::napi_threads(addr::RTR_IN_IF)
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect();
    if ours.is_empty() {
        return Err(LabError::Failed(
            "rx-napi-thread: no NAPI thread appeared for the router's ingress veth".into(),
        ));
    }
    host::pin_threads(&ours, router_cpu)
        .map_err(|e| LabError::Failed(format!("rx-napi-thread: {e}")))
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        drop(self.router.take());
        if self.target == Target::KernelXdp {
            for dev in [addr::RTR_IN_IF, addr::RTR_OUT_IF] {
                let _ = (self.topo.router).exec(&["ip", "link", "set", "dev", dev, "xdp", "off"]);
            }
        }
        if self.target == Target::KernelHtb {
            let _ = self
                .topo
                .router
                .exec(&["tc", "qdisc", "del", "dev", addr::RTR_OUT_IF, "root"]);
        }
    }
}
