//! Network-namespace fixtures for tests and the testbed: [`Netns`], [`VethPair`] and the
//! three-namespace [`Topology`] (gen ns → router ns → sink ns).
//!
//! Everything is driven through iproute2 (`ip`), which is simple, robust and what an operator
//! would type. Every resource is owned by an RAII guard whose `Drop` removes it, so a failing
//! test leaves nothing behind; names embed the process id and a counter so concurrent runs never
//! collide, and [`sweep_stale`] removes namespaces left behind by a killed run (whose pid is gone);
//! every new namespace or topology sweeps its own prefix first.
//!
//! Code that must open sockets inside a namespace uses [`Netns::run`] (a scoped thread that
//! `setns(2)`s into the namespace first) or [`Netns::enter`] on a thread of its own.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique name for a new namespace or topology, after removing what a killed earlier run
/// left under `prefix` ([`sweep_stale`]): a test or testbed ended by Ctrl-C or a kill runs no
/// `Drop`, and its namespaces would otherwise stay until reboot.
fn fresh_name(prefix: &str) -> String {
    let _ = sweep_stale(prefix);
    unique_name(prefix)
}

/// A unique name `"{prefix}-{pid}-{n}"`.
pub fn unique_name(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
}

/// Runs a command, failing with its stderr if it exits non-zero.
pub fn run_cmd(argv: &[&str]) -> Result<Output> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .with_context(|| format!("cannot start `{}`", argv.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// `ip ARGS...`.
pub fn ip(args: &[&str]) -> Result<Output> {
    let mut argv = vec!["ip"];
    argv.extend_from_slice(args);
    run_cmd(&argv)
}

/// Names of all named network namespaces (`ip netns list`).
pub fn list_netns() -> Result<Vec<String>> {
    let out = ip(&["netns", "list"])?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect())
}

/// Deletes the namespaces `"{prefix}-{pid}-..."` whose process `pid` no longer exists (left
/// behind by a killed run). Returns the names removed.
pub fn sweep_stale(prefix: &str) -> Result<Vec<String>> {
    let mut removed = Vec::new();
    let head = format!("{prefix}-");
    for name in list_netns()? {
        let Some(rest) = name.strip_prefix(&head) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let dead =
            pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists();
        if dead && ip(&["netns", "del", &name]).is_ok() {
            removed.push(name);
        }
    }
    Ok(removed)
}

/// A named network namespace, deleted on drop (unless [`Netns::persist`]ed).
#[derive(Debug)]
pub struct Netns {
    name: String,
    owned: bool,
}

impl Netns {
    /// Creates a namespace with a unique name `"{prefix}-{pid}-{n}"` and brings up its loopback.
    pub fn new(prefix: &str) -> Result<Netns> {
        Netns::create(&fresh_name(prefix))
    }

    /// Creates a namespace with exactly this name (fails if it exists).
    pub fn create(name: &str) -> Result<Netns> {
        ip(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_owned(),
            owned: true,
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Refers to an existing namespace without owning it (nothing is deleted on drop).
    pub fn open(name: &str) -> Result<Netns> {
        if !std::path::Path::new(&format!("/run/netns/{name}")).exists() {
            bail!("network namespace {name} does not exist");
        }
        Ok(Netns {
            name: name.to_owned(),
            owned: false,
        })
    }

    /// The namespace's name (as in `ip netns`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Keeps the namespace after this guard is dropped.
    pub fn persist(&mut self) {
        self.owned = false;
    }

    /// `ip -n NAME ARGS...`.
    pub fn ip(&self, args: &[&str]) -> Result<Output> {
        let mut argv = vec!["ip", "-n", &self.name];
        argv.extend_from_slice(args);
        run_cmd(&argv)
    }

    /// The interfaces of the namespace that have an XDP program attached, from `ip -j link`
    /// (its JSON `xdp` object is present only then).
    pub fn xdp_links(&self) -> Result<Vec<String>> {
        #[derive(serde::Deserialize)]
        struct Link {
            ifname: String,
            #[serde(default)]
            xdp: Option<serde_json::Value>,
        }
        let out = self.ip(&["-j", "link", "show"])?;
        let links: Vec<Link> = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("ip -n {} -j link show: not the expected JSON", self.name))?;
        Ok(links
            .into_iter()
            .filter(|l| l.xdp.is_some())
            .map(|l| l.ifname)
            .collect())
    }

    /// Whether `ifname` in the namespace has an XDP program attached.
    pub fn xdp_attached(&self, ifname: &str) -> Result<bool> {
        Ok(self.xdp_links()?.iter().any(|l| l == ifname))
    }

    /// Runs a command inside the namespace (`ip netns exec NAME CMD...`), failing on non-zero exit.
    pub fn exec(&self, cmd: &[&str]) -> Result<Output> {
        let mut argv = vec!["ip", "netns", "exec", &self.name];
        argv.extend_from_slice(cmd);
        run_cmd(&argv)
    }

    /// A `Command` that runs `program` inside the namespace (for long-running children).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Sets a sysctl inside the namespace, e.g. `("net.ipv4.ip_forward", "1")`.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let value = value.to_owned();
        self.run(move || std::fs::write(&path, value).with_context(|| format!("write {path}")))?
    }

    /// Steers the receive of every rx queue of `ifname` to `cpu` by RPS, or turns RPS off
    /// (`None`).
    pub fn set_rps(&self, ifname: &str, cpu: Option<usize>) -> Result<()> {
        let mask = cpu.map_or("0".to_string(), |c| format!("{:x}", 1u64 << c));
        let cmd = format!(
            "for q in /sys/class/net/{ifname}/queues/rx-*/rps_cpus; do echo {mask} > $q; done"
        );
        self.exec(&["sh", "-c", &cmd]).map(|_| ())
    }

    /// Moves the calling thread into the namespace for the rest of its life.
    pub fn enter(&self) -> io::Result<()> {
        let f = File::open(format!("/run/netns/{}", self.name))?;
        llr_io::sys::enter_netns(f.as_raw_fd())
    }

    /// Runs `f` on a fresh thread inside the namespace and returns its result (sockets opened
    /// there stay in the namespace even when the fd is later used from another thread).
    pub fn run<F, R>(&self, f: F) -> Result<R>
    where
        F: FnOnce() -> R + Send,
        R: Send,
    {
        std::thread::scope(|s| {
            s.spawn(|| -> Result<R> {
                self.enter()
                    .with_context(|| format!("setns into {}", self.name))?;
                Ok(f())
            })
            .join()
            .map_err(|_| anyhow::anyhow!("thread inside netns {} panicked", self.name))?
        })
    }

    /// Spawns a long-running thread inside the namespace.
    pub fn spawn<F, R>(&self, f: F) -> std::thread::JoinHandle<Result<R>>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let name = self.name.clone();
        std::thread::spawn(move || {
            Netns::open(&name)?
                .enter()
                .with_context(|| format!("setns into {name}"))?;
            Ok(f())
        })
    }

    /// Interface index of `ifname` inside the namespace.
    pub fn ifindex(&self, ifname: &str) -> Result<u32> {
        // /sys shows the namespace of whoever mounted it, so ask `ip` instead.
        let out = self.ip(&["-o", "link", "show", "dev", ifname])?;
        let s = String::from_utf8_lossy(&out.stdout);
        s.split(':')
            .next()
            .and_then(|n| n.trim().parse().ok())
            .with_context(|| format!("cannot parse ifindex of {ifname} from `{s}`"))
    }

    /// Deletes the namespace now (idempotent).
    pub fn delete(&mut self) -> Result<()> {
        if self.owned {
            self.owned = false;
            ip(&["netns", "del", &self.name])?;
        }
        Ok(())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = self.delete() {
            tracing::warn!("cleanup: {e:#}");
        }
    }
}

/// One end of a veth pair: its namespace, name, MAC and addresses (`"10.0.1.1/24"`, `"fd00::1/64"`).
#[derive(Debug, Clone)]
pub struct VethEnd<'a> {
    pub ns: &'a Netns,
    pub name: &'a str,
    pub mac: &'a str,
    pub addrs: &'a [&'a str],
}

/// A veth pair between two namespaces. Deleted on drop (deleting one end removes both); also
/// removed with its namespace.
#[derive(Debug)]
pub struct VethPair {
    ns: String,
    name: String,
    owned: bool,
}

impl VethPair {
    /// Creates the pair, sets MACs and addresses and brings both ends up.
    pub fn new(a: &VethEnd<'_>, b: &VethEnd<'_>) -> Result<VethPair> {
        VethPair::with_queues(a, b, 1)
    }

    /// [`VethPair::new`] with `queues` Rx and Tx queues on each end. A frame sent on Tx queue
    /// q of one end arrives on Rx queue q of the other (veth keeps the sender's queue mapping),
    /// which is how the testbed emulates a NIC's RSS or Flow Director.
    pub fn with_queues(a: &VethEnd<'_>, b: &VethEnd<'_>, queues: u32) -> Result<VethPair> {
        if queues == 0 || queues > 64 {
            anyhow::bail!("veth queues: {queues}; give 1 to 64");
        }
        let q = queues.to_string();
        a.ns.ip(&[
            "link",
            "add",
            "name",
            a.name,
            "address",
            a.mac,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            b.name,
            "address",
            b.mac,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            b.ns.name(),
        ])?;
        let pair = VethPair {
            ns: a.ns.name().to_owned(),
            name: a.name.to_owned(),
            owned: true,
        };
        for end in [a, b] {
            for addr in end.addrs {
                let mut args = vec!["addr", "add", addr, "dev", end.name];
                if addr.contains(':') {
                    args.push("nodad");
                }
                end.ns.ip(&args)?;
            }
            end.ns.ip(&["link", "set", "dev", end.name, "up"])?;
        }
        Ok(pair)
    }

    /// Keeps the pair after this guard is dropped.
    pub fn persist(&mut self) {
        self.owned = false;
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        if self.owned {
            // The namespace may already be gone (which removes the pair too): ignore errors.
            let _ = ip(&["-n", &self.ns, "link", "del", "dev", &self.name]);
        }
    }
}

/// Addresses and names of the standard testbed topology (fixed: each namespace is private).
pub mod addr {
    /// gen ns interface (towards the router).
    pub const GEN_IF: &str = "veth-gen";
    /// router ns interface towards gen (ingress).
    pub const RTR_IN_IF: &str = "veth-rin";
    /// router ns interface towards sink (egress).
    pub const RTR_OUT_IF: &str = "veth-rout";
    /// sink ns interface.
    pub const SINK_IF: &str = "veth-sink";
    pub const GEN_MAC: &str = "02:00:00:00:01:01";
    pub const RTR_IN_MAC: &str = "02:00:00:00:01:fe";
    pub const RTR_OUT_MAC: &str = "02:00:00:00:02:fe";
    pub const SINK_MAC: &str = "02:00:00:00:02:01";
    pub const GEN_V4: &str = "10.71.1.1";
    pub const RTR_IN_V4: &str = "10.71.1.254";
    pub const RTR_OUT_V4: &str = "10.71.2.254";
    pub const SINK_V4: &str = "10.71.2.1";
    pub const GEN_V6: &str = "fd71:1::1";
    pub const RTR_IN_V6: &str = "fd71:1::fe";
    pub const RTR_OUT_V6: &str = "fd71:2::fe";
    pub const SINK_V6: &str = "fd71:2::1";
}

/// gen ns → router ns → sink ns over two veth pairs, IPv4 + IPv6, default routes on gen and sink
/// via the router, forwarding enabled in the router, permanent neighbour entries everywhere (so no
/// ARP/ND races at the start of a run). Removed by [`Topology::down`] or on drop.
#[derive(Debug)]
pub struct Topology {
    pub base: String,
    pub gen: Netns,
    pub router: Netns,
    pub sink: Netns,
    owned: bool,
}

impl Topology {
    /// Creates a topology with unique names `"{prefix}-{pid}-{n}-{gen,rtr,sink}"`.
    pub fn new(prefix: &str) -> Result<Topology> {
        Topology::create(&fresh_name(prefix))
    }

    /// [`Topology::new`] with `queues` Rx/Tx queues on every veth (see [`VethPair::with_queues`]).
    pub fn with_queues(prefix: &str, queues: u32) -> Result<Topology> {
        Topology::create_with(&fresh_name(prefix), queues)
    }

    /// Creates the topology with namespaces `"{base}-gen"`, `"{base}-rtr"`, `"{base}-sink"`.
    pub fn create(base: &str) -> Result<Topology> {
        Topology::create_with(base, 1)
    }

    /// [`Topology::create`] with `queues` Rx/Tx queues on every veth.
    pub fn create_with(base: &str, queues: u32) -> Result<Topology> {
        use addr::*;
        // Each guard removes its namespace if a later step fails.
        let gen = Netns::create(&format!("{base}-gen"))?;
        let router = Netns::create(&format!("{base}-rtr"))?;
        let sink = Netns::create(&format!("{base}-sink"))?;
        let mut p1 = VethPair::with_queues(
            &VethEnd {
                ns: &gen,
                name: GEN_IF,
                mac: GEN_MAC,
                addrs: &[&format!("{GEN_V4}/24"), &format!("{GEN_V6}/64")],
            },
            &VethEnd {
                ns: &router,
                name: RTR_IN_IF,
                mac: RTR_IN_MAC,
                addrs: &[&format!("{RTR_IN_V4}/24"), &format!("{RTR_IN_V6}/64")],
            },
            queues,
        )?;
        let mut p2 = VethPair::with_queues(
            &VethEnd {
                ns: &router,
                name: RTR_OUT_IF,
                mac: RTR_OUT_MAC,
                addrs: &[&format!("{RTR_OUT_V4}/24"), &format!("{RTR_OUT_V6}/64")],
            },
            &VethEnd {
                ns: &sink,
                name: SINK_IF,
                mac: SINK_MAC,
                addrs: &[&format!("{SINK_V4}/24"), &format!("{SINK_V6}/64")],
            },
            queues,
        )?;
        // The namespaces own the pairs; deleting them removes the pairs.
        p1.persist();
        p2.persist();
        router.sysctl("net.ipv4.ip_forward", "1")?;
        router.sysctl("net.ipv6.conf.all.forwarding", "1")?;
        for ns in [&gen, &router, &sink] {
            ns.sysctl("net.ipv4.conf.all.rp_filter", "0")?;
            ns.sysctl("net.ipv4.conf.default.rp_filter", "0")?;
        }
        gen.ip(&["route", "add", "default", "via", RTR_IN_V4])?;
        gen.ip(&["-6", "route", "add", "default", "via", RTR_IN_V6])?;
        sink.ip(&["route", "add", "default", "via", RTR_OUT_V4])?;
        sink.ip(&["-6", "route", "add", "default", "via", RTR_OUT_V6])?;
        let neigh = |ns: &Netns, a: &str, mac: &str, dev: &str| {
            ns.ip(&[
                "neigh",
                "replace",
                a,
                "lladdr",
                mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ])
        };
        neigh(&gen, RTR_IN_V4, RTR_IN_MAC, GEN_IF)?;
        neigh(&gen, RTR_IN_V6, RTR_IN_MAC, GEN_IF)?;
        neigh(&router, GEN_V4, GEN_MAC, RTR_IN_IF)?;
        neigh(&router, GEN_V6, GEN_MAC, RTR_IN_IF)?;
        neigh(&router, SINK_V4, SINK_MAC, RTR_OUT_IF)?;
        neigh(&router, SINK_V6, SINK_MAC, RTR_OUT_IF)?;
        neigh(&sink, RTR_OUT_V4, RTR_OUT_MAC, SINK_IF)?;
        neigh(&sink, RTR_OUT_V6, RTR_OUT_MAC, SINK_IF)?;
        Ok(Topology {
            base: base.to_owned(),
            gen,
            router,
            sink,
            owned: true,
        })
    }

    /// Refers to an existing topology created with [`Topology::create`] (not owned: dropping it
    /// removes nothing; call [`Topology::down`] to remove it).
    pub fn open(base: &str) -> Result<Topology> {
        Ok(Topology {
            base: base.to_owned(),
            gen: Netns::open(&format!("{base}-gen"))?,
            router: Netns::open(&format!("{base}-rtr"))?,
            sink: Netns::open(&format!("{base}-sink"))?,
            owned: false,
        })
    }

    /// Whether a topology named `base` exists.
    pub fn exists(base: &str) -> bool {
        std::path::Path::new(&format!("/run/netns/{base}-rtr")).exists()
    }

    /// Keeps the namespaces after this guard is dropped.
    pub fn persist(&mut self) {
        self.owned = false;
        self.gen.persist();
        self.router.persist();
        self.sink.persist();
    }

    /// Removes the three namespaces (and with them the veth pairs). Idempotent; removes even a
    /// topology that was only opened.
    pub fn down(&mut self) -> Result<()> {
        let mut first_err = None;
        for ns in [&mut self.gen, &mut self.router, &mut self.sink] {
            ns.owned = Netns::open(&ns.name).is_ok();
            if let Err(e) = ns.delete() {
                first_err.get_or_insert(e);
            }
        }
        self.owned = false;
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if self.owned {
            if let Err(e) = self.down() {
                tracing::warn!("cleanup: {e:#}");
            }
        }
        // Otherwise the Netns guards' own Drop run (and do nothing when persisted/opened).
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn exists(name: &str) -> bool {
        list_netns().unwrap().iter().any(|n| n == name)
    }

    #[test]
    #[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
    fn netns_is_removed_on_drop_and_panic() {
        llr_io::sys::require_root();
        let name;
        {
            let ns = Netns::new("llrt").unwrap();
            name = ns.name().to_owned();
            assert!(exists(&name));
            let out = ns.exec(&["ip", "-o", "link"]).unwrap();
            assert!(String::from_utf8_lossy(&out.stdout).contains("lo:"));
        }
        assert!(!exists(&name));
        let r = std::panic::catch_unwind(|| {
            let ns = Netns::new("llrt").unwrap();
            let n = ns.name().to_owned();
            std::panic::panic_any(n);
        });
        let n = r.unwrap_err().downcast::<String>().unwrap();
        assert!(!exists(&n));
    }

    #[test]
    #[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
    fn topology_forwards_v4_and_v6_and_cleans_up() {
        llr_io::sys::require_root();
        let topo = Topology::new("llrt").unwrap();
        let names: Vec<String> = [&topo.gen, &topo.router, &topo.sink]
            .iter()
            .map(|n| n.name().to_owned())
            .collect();
        for (src_ip, dst_ip) in [(addr::GEN_V4, addr::SINK_V4), (addr::GEN_V6, addr::SINK_V6)] {
            let rx = topo
                .sink
                .run(move || UdpSocket::bind((dst_ip, 0)).unwrap())
                .unwrap();
            rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let dst = rx.local_addr().unwrap();
            topo.gen
                .run(move || {
                    let tx = UdpSocket::bind((src_ip, 0)).unwrap();
                    tx.send_to(b"hello", dst).unwrap();
                })
                .unwrap();
            let mut buf = [0u8; 16];
            let (n, from) = rx.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"hello");
            assert_eq!(from.ip().to_string(), src_ip);
        }
        drop(topo);
        for n in names {
            assert!(!exists(&n), "{n} left behind");
        }
    }

    #[test]
    #[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
    fn sweep_removes_only_dead_pids() {
        llr_io::sys::require_root();
        // pid 0x3fffffff is above pid_max: never alive.
        let dead = format!("llrsw-{}-0", 0x3fff_ffffu32);
        let live = Netns::new("llrsw").unwrap();
        ip(&["netns", "add", &dead]).unwrap();
        let removed = sweep_stale("llrsw").unwrap();
        assert_eq!(removed, vec![dead.clone()]);
        assert!(!exists(&dead));
        assert!(exists(live.name()));
        // Creating a namespace under a prefix sweeps that prefix first.
        ip(&["netns", "add", &dead]).unwrap();
        let second = Netns::new("llrsw").unwrap();
        assert!(!exists(&dead), "a new namespace removes a killed run's");
        assert!(exists(live.name()) && exists(second.name()));
    }

    #[test]
    #[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
    fn persisted_topology_survives_and_opens() {
        llr_io::sys::require_root();
        let base = unique_name("llrp");
        {
            let mut t = Topology::create(&base).unwrap();
            t.persist();
        }
        assert!(Topology::exists(&base));
        let mut t = Topology::open(&base).unwrap();
        assert!(t.router.ifindex(addr::RTR_IN_IF).unwrap() > 0);
        t.down().unwrap();
        assert!(!Topology::exists(&base));
    }
}
