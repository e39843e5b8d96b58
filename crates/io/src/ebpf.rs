//! Loading, configuring and attaching the XDP classifier (`bpf/classifier.c`).
//!
//! One [`Classifier`] per interface: each has its own maps, so XSKMAP keys (= ring ids of the
//! layout) never collide between interfaces. It attaches through a `bpf_link` where the kernel
//! offers one, so a router killed with SIGKILL leaves no program behind (the link dies with its
//! last fd); a stale *netlink*-attached llrouter program found on the interface is replaced.
//! Dropping the classifier detaches it.

use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};

use aya::maps::lpm_trie::{Key as LpmKey, LpmTrie};
use aya::maps::{Array, HashMap, Map, PerCpuArray, PerCpuValues, XskMap};
use aya::programs::links::FdLink;
use aya::programs::xdp::XdpLinkId;
pub use aya::programs::XdpMode;
use aya::programs::{ProgramError, TestRun, TestRunOptions, Xdp};
use aya::Ebpf;
use llr_core::filter::xdp::XdpDrops;
use llr_core::filter::FamilyMode;

/// Name of the XDP program in `bpf/classifier.c`; also how a stale one is recognised.
pub const PROGRAM_NAME: &str = "llr_classify";
/// The same program for multi-buffer frames (`xdp.frags`, loaded with `BPF_F_XDP_HAS_FRAGS`).
pub const PROGRAM_NAME_MB: &str = "llr_classify_mb";
/// Rules the program evaluates at most (`LLR_MAX_RULES`).
pub const MAX_RULES: usize = 64;
/// Classes, and rings per rx queue, at most (`LLR_MAX_CLASSES`).
pub const MAX_CLASSES: usize = 64;
/// Rx queues a classifier redirects from, at most (`LLR_MAX_QUEUES`): XSKMAP keys are
/// `queue * MAX_CLASSES + ring`.
pub const MAX_QUEUES: usize = 64;
/// `llr_config.flags`: write a `bpf_ktime_get_ns()` timestamp into 8 bytes of XDP metadata.
pub const FLAG_TIMESTAMP: u32 = 1;
/// `llr_config.flags`: 802.1Q-tagged frames are classified and routed like any, not handed to
/// the kernel (`CFG_TAGGED_FORWARD`; llr-core's `TaggedFrames::Forward`).
pub const FLAG_TAGGED_FORWARD: u32 = 64;
/// `llr_config.flags`: the class is the rx queue modulo `queue_classes`; rules are not used
/// (set through [`Classifier::set_queue_steering`]).
const FLAG_BY_QUEUE: u32 = 2;
/// `llr_config.flags`: every valid IPv4 frame to the kernel (`CFG_KERNEL_V4`).
const FLAG_KERNEL_V4: u32 = 4;
/// `llr_config.flags`: every valid IPv6 frame to the kernel (`CFG_KERNEL_V6`).
const FLAG_KERNEL_V6: u32 = 8;
/// `llr_config.flags`: the IPv4 drop tables have prefixes (`CFG_DROP_V4`).
const FLAG_DROP_V4: u32 = 16;
/// `llr_config.flags`: the IPv6 drop tables have prefixes (`CFG_DROP_V6`).
const FLAG_DROP_V6: u32 = 32;
/// `llr_config.flags`: the IPv4 drops include ports (`CFG_DROP_PORTS_V4`).
const FLAG_DROP_PORTS_V4: u32 = 512;
/// The same for IPv6 (`CFG_DROP_PORTS_V6`).
const FLAG_DROP_PORTS_V6: u32 = 1024;
/// `llr_config.flags`: the IPv4 drops include protocols without a port (`CFG_DROP_PROTOS_V4`).
const FLAG_DROP_PROTOS_V4: u32 = 2048;
/// The same for IPv6 (`CFG_DROP_PROTOS_V6`).
const FLAG_DROP_PROTOS_V6: u32 = 4096;
/// `llr_config.flags`: IPv4 frames of connections not in `llr_ct` to the kernel (`CFG_CT_V4`).
const FLAG_CT_V4: u32 = 128;
/// The same for IPv6 (`CFG_CT_V6`).
const FLAG_CT_V6: u32 = 256;
/// Entries of `llr_ct` (`LLR_MAX_CT`): two per connection.
pub const MAX_CT: usize = 262_144;
/// Rules (slots) of the drop tables (`LLR_MAX_DROPS`).
pub const MAX_DROPS: usize = 256;

/// XDP return codes (`enum xdp_action`).
pub const XDP_ABORTED: u32 = 0;
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_TX: u32 = 3;
pub const XDP_REDIRECT: u32 = 4;

const ST_PASS_NONIP: u32 = MAX_CLASSES as u32;
const ST_DROP_FIREWALL: u32 = MAX_CLASSES as u32 + 7;
const ST_PASS_VLAN: u32 = MAX_CLASSES as u32 + 8;
const ST_KEY_BASE: u32 = MAX_CLASSES as u32 + 9;
const ST_NOSOCK_QUEUE_BASE: u32 = ST_KEY_BASE + MAX_CLASSES as u32;
const ST_PASS_CT: u32 = ST_NOSOCK_QUEUE_BASE + MAX_QUEUES as u32;
const ST_SLOTS: u32 = ST_PASS_CT + 1;

/// A cause from the kernel or aya, kept as the source of an [`EbpfError`].
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// What failed in loading, configuring or attaching an XDP program.
#[derive(Debug, thiserror::Error)]
pub enum EbpfError {
    /// The object or its program did not load (the verifier's refusal says which kernel and
    /// where its log went).
    #[error("load {what}: {cause}")]
    Load { what: String, cause: Cause },
    /// The kernel's verifier refused the program.
    #[error("the kernel (Linux {release}) refused the eBPF program {program}: {cause}; verifier: \"{last}\"; full log: {log} (llrouter is tested on Linux 6.1 and later: please report this with the log)")]
    Verifier {
        program: String,
        release: String,
        cause: std::io::Error,
        /// The verifier's last words.
        last: String,
        /// Where the full log went (or how to see it).
        log: String,
    },
    /// A map of the program could not be opened, read or written.
    #[error("map {map}: {cause}")]
    Map { map: String, cause: Cause },
    /// A value beyond what the program holds (rules, classes, queues).
    #[error("{0}")]
    Limit(String),
    /// Attaching to an interface failed.
    #[error("attach XDP to {ifname} (ifindex {ifindex}, {mode:?}): {cause}")]
    Attach {
        ifname: String,
        ifindex: u32,
        mode: AttachMode,
        cause: Cause,
    },
    /// Another program holds the interface's XDP hook.
    #[error(transparent)]
    Held(#[from] XdpHeld),
    /// No interface of that name or index in the calling thread's namespace.
    #[error("no interface {0}")]
    NoInterface(String),
    /// Another step on the program failed (a test run, a detach, an `ip` command).
    #[error("{op}: {cause}")]
    Op { op: String, cause: Cause },
}

impl EbpfError {
    fn map(map: &str, e: impl Into<Cause>) -> EbpfError {
        EbpfError::Map {
            map: map.to_string(),
            cause: e.into(),
        }
    }

    fn op(op: impl Into<String>, e: impl Into<Cause>) -> EbpfError {
        EbpfError::Op {
            op: op.into(),
            cause: e.into(),
        }
    }
}

type Result<T, E = EbpfError> = std::result::Result<T, E>;

/// How to attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttachMode {
    /// Native (driver) mode, falling back to generic (skb) mode.
    #[default]
    Auto,
    Driver,
    Skb,
}

/// The classifier's own counters, summed over CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClassifierStats {
    /// Frames steered to each class (index = class id), whether or not a socket took them.
    pub per_class: Vec<u64>,
    /// Passed to the kernel: not IPv4/IPv6 (ARP, LLDP, ...).
    pub pass_non_ip: u64,
    /// Passed to the kernel: multicast/broadcast MAC, IPv6 multicast or link-local destination.
    pub pass_multicast: u64,
    /// Passed to the kernel: addressed to the router itself.
    pub pass_local: u64,
    /// Passed to the kernel: its family is the kernel's while the host's firewall has rules
    /// llrouter cannot evaluate ([`Classifier::set_kernel_families`]).
    pub pass_firewall: u64,
    /// Passed to the kernel: its family's firewall reads connection state, and the frame is
    /// not of an established connection llrouter carries ([`Classifier::ct_insert`]).
    pub pass_conntrack: u64,
    /// Passed to the kernel: an 802.1Q tag (the kernel's VLAN devices route or drop it).
    pub pass_vlan: u64,
    /// Malformed L2/L3 headers (steered to the lowest class; user space drops them).
    pub malformed: u64,
    /// No socket bound for the class's ring: the frame went to the kernel instead.
    pub no_socket: u64,
    /// `no_socket` by the rx queue the frame arrived on (index = queue).
    pub no_socket_queues: Vec<u64>,
    /// Frames that matched a rule.
    pub rule_hits: u64,
    /// Dropped here by the host firewall's rules ([`Classifier::set_drops`]).
    pub drop_firewall: u64,
    /// Frames redirected (or attempted) per XSKMAP key, i.e. per ring id.
    pub per_ring: Vec<u64>,
}

/// Outcome of [`Classifier::test_run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestOutcome {
    /// The XDP action returned.
    pub action: u32,
    /// The class the frame was steered to (`None`: passed to the kernel before classification).
    pub class: Option<u32>,
    /// The XSKMAP key (ring id) the class was redirected to (`None` with `class`).
    pub key: Option<u32>,
}

/// The loaded classifier of one interface.
pub struct Classifier {
    /// The program loaded: [`PROGRAM_NAME`] or [`PROGRAM_NAME_MB`].
    name: &'static str,
    ebpf: Ebpf,
    attached: Option<(u32, XdpMode)>,
    /// The link that attachment made (its detach is forced, see [`Classifier::detach`]).
    link: Option<XdpLinkId>,
    /// The rule-table half frames use now (`llr_config.active`).
    active: u32,
    /// The RCU grace period started in the background at the last flip: until it ends, frames
    /// may still read the retired half.
    grace: Option<std::thread::JoinHandle<()>>,
    /// Treat the program as running even when not attached (see [`Classifier::assume_live`]).
    live: bool,
    /// Classes per queue group with queue steering; 0: classes come from the rules.
    queue_classes: u32,
    /// The `FLAG_*` flags of the last rule set.
    flags: u32,
    /// `FLAG_KERNEL_V4` / `FLAG_KERNEL_V6`, kept across rule updates.
    kernel_flags: u32,
    /// The drop tables' generation frames use (`llr_config.drop_gen`).
    drop_gen: u32,
    /// `FLAG_DROP_V4` / `FLAG_DROP_V6` of that generation.
    drop_flags: u32,
    /// Per generation, the prefixes written (to delete them when it is replaced).
    drop_keys: [Vec<DropKey>; 2],
    /// The RCU grace period started at the last generation flip.
    drop_grace: Option<std::thread::JoinHandle<()>>,
}

/// A prefix of the drop tables written.
#[derive(Clone, Copy)]
enum DropKey {
    V4 { dst: bool, key: LpmKey<[u8; 8]> },
    V6 { dst: bool, key: LpmKey<[u8; 20]> },
    Port4(LpmKey<[u8; 12]>),
    Port6(LpmKey<[u8; 24]>),
}

/// The port tables (`llr_drop_port4`, `llr_drop_port6`).
const PORT_TABLES: [&str; 2] = ["llr_drop_port4", "llr_drop_port6"];

const DROP_TABLES: [[&str; 2]; 2] = [
    ["llr_drop_src4", "llr_drop_dst4"],
    ["llr_drop_src6", "llr_drop_dst6"],
];

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("attached", &self.attached)
            .finish()
    }
}

impl Classifier {
    /// Loads the program and its maps into the kernel (not attached). Every frame goes to class
    /// `default_class` until rules are set.
    pub fn load(default_class: u32) -> Result<Classifier> {
        Self::load_for(default_class, false)
    }

    /// [`Classifier::load`], for frames in several buffers if `multi_buffer` (jumbo MTUs):
    /// the frags-aware program, which drivers require before they take an MTU beyond a page.
    pub fn load_for(default_class: u32, multi_buffer: bool) -> Result<Classifier> {
        let name = if multi_buffer {
            PROGRAM_NAME_MB
        } else {
            PROGRAM_NAME
        };
        let load = |e: Cause| EbpfError::Load {
            what: "bpf/classifier.o".into(),
            cause: e,
        };
        let mut ebpf = Ebpf::load(crate::bpf_objects::CLASSIFIER).map_err(|e| load(e.into()))?;
        let prog: &mut Xdp = (ebpf.program_mut(name))
            .ok_or_else(|| load(format!("program {name} missing").into()))?
            .try_into()
            .map_err(|e: ProgramError| load(e.into()))?;
        load_checked(prog, name)?;
        let mut c = Classifier {
            name,
            ebpf,
            attached: None,
            link: None,
            active: 0,
            grace: None,
            live: false,
            queue_classes: 0,
            flags: 0,
            kernel_flags: 0,
            drop_gen: 0,
            drop_flags: 0,
            drop_keys: Default::default(),
            drop_grace: None,
        };
        c.set_rules(&[], default_class, 0)?;
        Ok(c)
    }

    /// The map `name`, opened as `T`.
    fn map_mut<'a, T>(&'a mut self, name: &str) -> Result<T>
    where
        T: TryFrom<&'a mut Map, Error = aya::maps::MapError>,
    {
        let m = (self.ebpf.map_mut(name))
            .ok_or_else(|| EbpfError::map(name, "missing in the object"))?;
        T::try_from(m).map_err(|e| EbpfError::map(name, e))
    }

    fn prog(&self) -> &Xdp {
        self.ebpf
            .program(self.name)
            .expect("loaded")
            .try_into()
            .expect("xdp")
    }

    fn prog_mut(&mut self) -> &mut Xdp {
        self.ebpf
            .program_mut(self.name)
            .expect("loaded")
            .try_into()
            .expect("xdp")
    }

    /// Installs `rules` (each `llr_core`'s 64-byte `struct llr_rule` image; first match wins),
    /// the class of unmatched frames and the `FLAG_*` flags. Safe while frames are classified:
    /// see [`Classifier::update_rules`].
    pub fn set_rules(&mut self, rules: &[[u8; 64]], default_class: u32, flags: u32) -> Result<()> {
        if rules.len() > MAX_RULES {
            return Err(EbpfError::Limit(format!(
                "rules: {} rules; the classifier holds at most {MAX_RULES}",
                rules.len()
            )));
        }
        if default_class as usize >= MAX_CLASSES {
            return Err(EbpfError::Limit(format!(
                "default class {default_class} >= {MAX_CLASSES}"
            )));
        }
        let next = self.active ^ 1;
        // Frames that read `active` before the last flip may still walk the half about to be
        // rewritten: wait until they are done (the RCU grace period started at that flip; XDP
        // runs under RCU). Usually it has long ended; back-to-back updates wait the rest of it.
        if let Some(g) = self.grace.take() {
            let _ = g.join();
        }
        let mut map: Array<_, [u8; 64]> = self.map_mut("llr_rules")?;
        let base = next * MAX_RULES as u32;
        for (i, r) in rules.iter().enumerate() {
            (map.set(base + i as u32, r, 0)).map_err(|e| EbpfError::map("llr_rules", e))?;
        }
        let mut sets: Array<_, [u32; 2]> = self.map_mut("llr_sets")?;
        (sets.set(next, [rules.len() as u32, default_class], 0))
            .map_err(|e| EbpfError::map("llr_sets", e))?;
        // The flip: one 4-byte word that frames read once.
        let (old_active, old_flags) = (self.active, self.flags);
        (self.active, self.flags) = (next, flags);
        if let Err(e) = self.write_config() {
            (self.active, self.flags) = (old_active, old_flags);
            return Err(e);
        }
        if self.attached.is_some() || self.live {
            self.grace = start_grace_period();
        }
        Ok(())
    }

    /// Makes rule updates wait for frames in flight even while not attached (for programs run
    /// concurrently through `BPF_PROG_TEST_RUN`, e.g. by tests).
    pub fn assume_live(&mut self, live: bool) {
        self.live = live;
    }

    /// The rule-table half (0 or 1) frames use now.
    pub fn active_half(&self) -> u32 {
        self.active
    }

    /// Maps each class (index) to the XSKMAP key (ring id) it is redirected to.
    pub fn set_class_rings(&mut self, class_to_ring: &[usize]) -> Result<()> {
        let mut map: Array<_, u32> = self.map_mut("llr_class_ring")?;
        for (c, r) in class_to_ring.iter().enumerate().take(MAX_CLASSES) {
            (map.set(c as u32, *r as u32, 0)).map_err(|e| EbpfError::map("llr_class_ring", e))?;
        }
        Ok(())
    }

    /// Addresses of the router itself: frames to them go to the kernel (XDP_PASS).
    pub fn set_local_addrs(&mut self, addrs: &[IpAddr]) -> Result<()> {
        for a in addrs {
            match a {
                IpAddr::V4(v4) => {
                    let mut m: HashMap<_, u32, u8> = self.map_mut("llr_local4")?;
                    (m.insert(u32::from_ne_bytes(v4.octets()), 1, 0))
                        .map_err(|e| EbpfError::map("llr_local4", e))?;
                }
                IpAddr::V6(v6) => {
                    let mut m: HashMap<_, [u8; 16], u8> = self.map_mut("llr_local6")?;
                    (m.insert(v6.octets(), 1, 0)).map_err(|e| EbpfError::map("llr_local6", e))?;
                }
            }
        }
        Ok(())
    }

    /// Removes `addrs` from the router's own addresses (an address not there is no error).
    pub fn remove_local_addrs(&mut self, addrs: &[IpAddr]) -> Result<()> {
        use aya::maps::MapError;
        let gone = |r: std::result::Result<(), MapError>, name: &str| match r {
            Ok(()) | Err(MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(EbpfError::map(name, e)),
        };
        for a in addrs {
            match a {
                IpAddr::V4(v4) => {
                    let mut m: HashMap<_, u32, u8> = self.map_mut("llr_local4")?;
                    gone(m.remove(&u32::from_ne_bytes(v4.octets())), "llr_local4")?;
                }
                IpAddr::V6(v6) => {
                    let mut m: HashMap<_, [u8; 16], u8> = self.map_mut("llr_local6")?;
                    gone(m.remove(&v6.octets()), "llr_local6")?;
                }
            }
        }
        Ok(())
    }

    /// Registers the AF_XDP socket `fd`, bound to rx queue `queue`, as ring `ring` of that
    /// queue (XSKMAP key `queue * MAX_CLASSES + ring`).
    pub fn set_socket(&mut self, queue: u32, ring: u32, fd: RawFd) -> Result<()> {
        if queue as usize >= MAX_QUEUES || ring as usize >= MAX_CLASSES {
            return Err(EbpfError::Limit(format!(
                "socket of queue {queue}, ring {ring}: at most {MAX_QUEUES} queues and {MAX_CLASSES} rings"
            )));
        }
        let key = queue * MAX_CLASSES as u32 + ring;
        let mut m: XskMap<_> = self.map_mut("llr_xsks")?;
        (m.set(key, fd, 0)).map_err(|e| {
            EbpfError::map(
                &format!("llr_xsks: XSKMAP[{key}] (queue {queue}, ring {ring}) = fd {fd}"),
                e,
            )
        })?;
        Ok(())
    }

    /// Steers by rx queue instead of by rules: a frame on queue q is class `q % classes`
    /// (`steering = "queues"` / `"ntuple"`: the NIC or the sender already sorted the classes
    /// into queues). `classes` = 0 goes back to the rules. Takes effect at once.
    pub fn set_queue_steering(&mut self, classes: u32) -> Result<()> {
        if classes as usize > MAX_CLASSES {
            return Err(EbpfError::Limit(format!(
                "queue steering: {classes} classes; at most {MAX_CLASSES}"
            )));
        }
        self.queue_classes = classes;
        self.write_config()
    }

    /// Writes `llr_config` from the classifier's state.
    fn write_config(&mut self) -> Result<()> {
        let by_queue = if self.queue_classes > 0 {
            FLAG_BY_QUEUE
        } else {
            0
        };
        let flags = self.flags | self.kernel_flags | self.drop_flags | by_queue;
        let v = [self.active, self.queue_classes, flags, self.drop_gen];
        let mut cfg: Array<_, [u32; 4]> = self.map_mut("llr_config")?;
        (cfg.set(0, v, 0)).map_err(|e| EbpfError::map("llr_config", e))
    }

    /// Hands every valid IPv4 (`v4`) or IPv6 (`v6`) frame to the kernel on its own interface
    /// (XDP_PASS), or stops doing so. Takes effect at once; the rules stay as they are.
    pub fn set_kernel_families(&mut self, v4: bool, v6: bool) -> Result<()> {
        let m = |k| {
            if k {
                FamilyMode::Kernel
            } else {
                FamilyMode::Llrouter
            }
        };
        self.set_family_modes([m(v4), m(v6)])
    }

    /// Who forwards each family, `[IPv4, IPv6]`: llrouter; llrouter for the connections in
    /// `llr_ct` only, the kernel for the rest ([`Classifier::ct_insert`]); or the kernel.
    /// Takes effect at once; the rules stay as they are.
    pub fn set_family_modes(&mut self, modes: [FamilyMode; 2]) -> Result<()> {
        let mut f = 0;
        for (m, kernel, ct) in [
            (modes[0], FLAG_KERNEL_V4, FLAG_CT_V4),
            (modes[1], FLAG_KERNEL_V6, FLAG_CT_V6),
        ] {
            f |= match m {
                FamilyMode::Llrouter => 0,
                FamilyMode::Conntrack => ct,
                FamilyMode::Kernel => kernel,
            };
        }
        self.kernel_flags = f;
        self.write_config()
    }

    /// Adds a direction of an established connection llrouter carries (a
    /// [`Tuple::bpf_key`](crate::conntrack::Tuple::bpf_key)); an entry already there keeps
    /// its last-seen time. False when the table is full (its frames stay with the kernel).
    pub fn ct_insert(&mut self, key: [u8; 40]) -> Result<bool> {
        use aya::maps::MapError;
        const BPF_NOEXIST: u64 = 1;
        let mut m: HashMap<_, [u8; 40], u64> = self.map_mut("llr_ct")?;
        match m.insert(key, 0, BPF_NOEXIST) {
            Ok(()) => Ok(true),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::EEXIST) => {
                Ok(true)
            }
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::E2BIG) => {
                Ok(false)
            }
            Err(e) => Err(EbpfError::map("llr_ct", e)),
        }
    }

    /// Removes a direction (one not there is no error).
    pub fn ct_remove(&mut self, key: &[u8; 40]) -> Result<()> {
        use aya::maps::MapError;
        let mut m: HashMap<_, [u8; 40], u64> = self.map_mut("llr_ct")?;
        match m.remove(key) {
            Ok(()) | Err(MapError::KeyNotFound) => Ok(()),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(())
            }
            Err(e) => Err(EbpfError::map("llr_ct", e)),
        }
    }

    /// When a frame last took the direction (`bpf_ktime_get_ns`; 0: never), if it is there.
    pub fn ct_seen(&self, key: &[u8; 40]) -> Result<Option<u64>> {
        use aya::maps::MapError;
        let m = (self.ebpf.map("llr_ct"))
            .ok_or_else(|| EbpfError::map("llr_ct", "missing in the object"))?;
        let m: HashMap<_, [u8; 40], u64> =
            HashMap::try_from(m).map_err(|e| EbpfError::map("llr_ct", e))?;
        match m.get(key, 0) {
            Ok(v) => Ok(Some(v)),
            Err(MapError::KeyNotFound) => Ok(None),
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(None)
            }
            Err(e) => Err(EbpfError::map("llr_ct", e)),
        }
    }

    /// Installs the host firewall's drops this classifier takes (llr-core's
    /// [`XdpDrops`](llr_core::filter::xdp::XdpDrops), computed for its interface) in place of
    /// the last ones. Frames see the whole old set or the whole new one: the new prefixes are
    /// written as the next generation beside the live ones, then one word of `llr_config`
    /// flips, and the retired generation is deleted at the next call, after an RCU grace
    /// period.
    ///
    /// Returns the generation written and the final per-slot (packets, bytes) of the one it
    /// replaced (retired at the previous call), which are then cleared.
    pub fn set_drops(&mut self, d: &XdpDrops) -> Result<(u32, Vec<(u64, u64)>)> {
        if d.slots.len() > MAX_DROPS {
            return Err(EbpfError::Limit(format!(
                "firewall drops: {} rules; the classifier holds at most {MAX_DROPS}",
                d.slots.len()
            )));
        }
        let next = self.drop_gen ^ 1;
        if let Some(g) = self.drop_grace.take() {
            let _ = g.join();
        }
        let retired = self.drop_counts(next, MAX_DROPS)?;
        for key in std::mem::take(&mut self.drop_keys[next as usize]) {
            let r = match key {
                DropKey::V4 { dst, key } => {
                    let name = DROP_TABLES[0][usize::from(dst)];
                    let mut t: LpmTrie<_, [u8; 8], u32> = self.map_mut(name)?;
                    t.remove(&key)
                }
                DropKey::V6 { dst, key } => {
                    let name = DROP_TABLES[1][usize::from(dst)];
                    let mut t: LpmTrie<_, [u8; 20], u32> = self.map_mut(name)?;
                    t.remove(&key)
                }
                DropKey::Port4(key) => {
                    let mut t: LpmTrie<_, [u8; 12], u32> = self.map_mut(PORT_TABLES[0])?;
                    t.remove(&key)
                }
                DropKey::Port6(key) => {
                    let mut t: LpmTrie<_, [u8; 24], u32> = self.map_mut(PORT_TABLES[1])?;
                    t.remove(&key)
                }
            };
            if let Err(e) = r {
                if !matches!(&e, aya::maps::MapError::KeyNotFound) {
                    return Err(EbpfError::map("llr_drop_*", e));
                }
            }
        }
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| EbpfError::map("llr_drop_stats", e))?;
        {
            let mut stats: PerCpuArray<_, [u64; 2]> = self.map_mut("llr_drop_stats")?;
            for slot in 0..MAX_DROPS as u32 {
                let zero = PerCpuValues::try_from(vec![[0u64; 2]; cpus])
                    .map_err(|e| EbpfError::map("llr_drop_stats", e))?;
                (stats.set(next * MAX_DROPS as u32 + slot, zero, 0))
                    .map_err(|e| EbpfError::map("llr_drop_stats", e))?;
            }
        }
        for (fam, tables) in d.prefixes.iter().enumerate() {
            for (dir, list) in tables.iter().enumerate() {
                let dst = dir == 1;
                for p in list {
                    let plen = 8 + u32::from(p.len);
                    let slot = u32::from(p.slot);
                    let (key, r) = if fam == 0 {
                        let mut data = [0u8; 8];
                        data[0] = next as u8;
                        data[1..5].copy_from_slice(&(p.addr as u32).to_be_bytes());
                        let key = LpmKey::new(plen, data);
                        let mut t: LpmTrie<_, [u8; 8], u32> = self.map_mut(DROP_TABLES[0][dir])?;
                        (DropKey::V4 { dst, key }, t.insert(&key, slot, 0))
                    } else {
                        let mut data = [0u8; 20];
                        data[0] = next as u8;
                        data[1..17].copy_from_slice(&p.addr.to_be_bytes());
                        let key = LpmKey::new(plen, data);
                        let mut t: LpmTrie<_, [u8; 20], u32> = self.map_mut(DROP_TABLES[1][dir])?;
                        (DropKey::V6 { dst, key }, t.insert(&key, slot, 0))
                    };
                    // Recorded before the error check: a failed update leaves what it wrote
                    // for the next call to delete.
                    self.drop_keys[next as usize].push(key);
                    r.map_err(|e| EbpfError::map(DROP_TABLES[fam][dir], e))?;
                }
            }
        }
        for (fam, list) in d.ports.iter().enumerate() {
            for e in list {
                // Key bytes after `gen` (struct llr_drop_port*_key): proto, port direction,
                // port (network order), address direction, address.
                let mut head = [0u8; 6];
                head[0] = next as u8;
                head[1] = e.proto;
                head[2] = e.port_dir;
                head[3..5].copy_from_slice(&e.port.to_be_bytes());
                head[5] = e.addr_dir;
                let plen = 48 + u32::from(e.len);
                let slot = u32::from(e.slot);
                let (key, r) = if fam == 0 {
                    let mut data = [0u8; 12];
                    data[..6].copy_from_slice(&head);
                    data[6..10].copy_from_slice(&(e.addr as u32).to_be_bytes());
                    let key = LpmKey::new(plen, data);
                    let mut t: LpmTrie<_, [u8; 12], u32> = self.map_mut(PORT_TABLES[0])?;
                    (DropKey::Port4(key), t.insert(&key, slot, 0))
                } else {
                    let mut data = [0u8; 24];
                    data[..6].copy_from_slice(&head);
                    data[6..22].copy_from_slice(&e.addr.to_be_bytes());
                    let key = LpmKey::new(plen, data);
                    let mut t: LpmTrie<_, [u8; 24], u32> = self.map_mut(PORT_TABLES[1])?;
                    (DropKey::Port6(key), t.insert(&key, slot, 0))
                };
                self.drop_keys[next as usize].push(key);
                r.map_err(|e| EbpfError::map(PORT_TABLES[fam], e))?;
            }
        }
        let (old_gen, old_flags) = (self.drop_gen, self.drop_flags);
        self.drop_gen = next;
        self.drop_flags = [
            (d.has_family(false), FLAG_DROP_V4),
            (d.has_family(true), FLAG_DROP_V6),
            (d.has_ports(false), FLAG_DROP_PORTS_V4),
            (d.has_ports(true), FLAG_DROP_PORTS_V6),
            (d.has_protos(false), FLAG_DROP_PROTOS_V4),
            (d.has_protos(true), FLAG_DROP_PROTOS_V6),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |all, (_, f)| all | f);
        if let Err(e) = self.write_config() {
            (self.drop_gen, self.drop_flags) = (old_gen, old_flags);
            return Err(e);
        }
        if self.attached.is_some() || self.live {
            self.drop_grace = start_grace_period();
        }
        Ok((next, retired))
    }

    /// The drop tables' generation frames use now.
    pub fn drop_gen(&self) -> u32 {
        self.drop_gen
    }

    /// Per slot of generation `gen` (the first `n`), the (packets, bytes) the classifier
    /// dropped, summed over CPUs.
    pub fn drop_counts(&self, gen: u32, n: usize) -> Result<Vec<(u64, u64)>> {
        let m = (self.ebpf.map("llr_drop_stats"))
            .ok_or_else(|| EbpfError::map("llr_drop_stats", "missing in the object"))?;
        let m: PerCpuArray<_, [u64; 2]> =
            PerCpuArray::try_from(m).map_err(|e| EbpfError::map("llr_drop_stats", e))?;
        (0..n.min(MAX_DROPS) as u32)
            .map(|slot| {
                let v = (m.get(&((gen & 1) * MAX_DROPS as u32 + slot), 0))
                    .map_err(|e| EbpfError::map("llr_drop_stats", e))?;
                Ok(v.iter().fold((0, 0), |(p, b), c| (p + c[0], b + c[1])))
            })
            .collect()
    }

    /// Attaches to `ifindex` (of the calling thread's network namespace). A stale llrouter
    /// program attached through netlink is replaced; anything else attached is an error.
    pub fn attach(&mut self, ifindex: u32, mode: AttachMode) -> Result<XdpMode> {
        if let Some((i, _)) = self.attached {
            return Err(EbpfError::Limit(format!(
                "classifier already attached to ifindex {i}"
            )));
        }
        let ifname = ifname(ifindex)?;
        let modes: &[XdpMode] = match mode {
            AttachMode::Auto => &[XdpMode::Driver, XdpMode::Skb],
            AttachMode::Driver => &[XdpMode::Driver],
            AttachMode::Skb => &[XdpMode::Skb],
        };
        let mut last_err = None;
        let mut replaced = false;
        let mut i = 0;
        while i < modes.len() {
            let m = modes[i];
            match self.prog_mut().attach_to_if_index(ifindex, m) {
                Ok(link) => {
                    self.attached = Some((ifindex, m));
                    self.link = Some(link);
                    return Ok(m);
                }
                Err(e) if is_busy(&e) && !replaced => {
                    replaced = true;
                    detach_stale(&ifname)?;
                    continue; // retry the same mode
                }
                Err(e) => last_err = Some(e),
            }
            i += 1;
        }
        Err(EbpfError::Attach {
            ifname,
            ifindex,
            mode,
            cause: last_err.expect("tried a mode").into(),
        })
    }

    /// Where and how the program is attached.
    pub fn attached(&self) -> Option<(u32, XdpMode)> {
        self.attached
    }

    /// Detaches from the interface (also done on drop).
    pub fn detach(&mut self) -> Result<()> {
        if let Some((ifindex, _)) = self.attached.take() {
            // A bpf_link is forced off its interface first: closing our fd alone leaves the
            // program attached while a child forked by another thread still holds a copy of
            // the fd (until its exec), so "stopped" would not yet mean "detached".
            if let Some(id) = self.link.take() {
                let prog = self.prog_mut();
                if let Ok(link) = prog.take_link(id) {
                    if let Ok(fd_link) = FdLink::try_from(link) {
                        let detached = (fd_link.info())
                            .map_err(|e| std::io::Error::other(e.to_string()))
                            .and_then(|info| crate::sys::bpf_link_detach(info.id()));
                        if let Err(e) = detached {
                            tracing::debug!(
                                "ifindex {ifindex}: BPF_LINK_DETACH: {e}; closing the link instead"
                            );
                        }
                    }
                    // A netlink attachment (no bpf_link) was removed when `link` was dropped.
                }
            }
            // Unloading the program's data drops what is left: bpf_link fds close, netlink
            // attachments are removed by aya.
            let prog = self.prog_mut();
            prog.unload()
                .map_err(|e| EbpfError::op("unload the classifier", e))?;
        }
        Ok(())
    }

    /// The classifier's counters, summed over CPUs.
    pub fn stats(&self) -> Result<ClassifierStats> {
        let m = (self.ebpf.map("llr_stats"))
            .ok_or_else(|| EbpfError::map("llr_stats", "missing in the object"))?;
        let m: PerCpuArray<_, u64> =
            PerCpuArray::try_from(m).map_err(|e| EbpfError::map("llr_stats", e))?;
        let mut v = vec![0u64; ST_SLOTS as usize];
        for (i, slot) in v.iter_mut().enumerate() {
            *slot = (m.get(&(i as u32), 0))
                .map_err(|e| EbpfError::map("llr_stats", e))?
                .iter()
                .sum();
        }
        let s = |k: u32| v[(ST_PASS_NONIP + k) as usize];
        Ok(ClassifierStats {
            per_class: v[..MAX_CLASSES].to_vec(),
            pass_non_ip: s(0),
            pass_multicast: s(1),
            pass_local: s(2),
            pass_firewall: s(3),
            malformed: s(4),
            no_socket: s(5),
            rule_hits: s(6),
            drop_firewall: v[ST_DROP_FIREWALL as usize],
            pass_vlan: v[ST_PASS_VLAN as usize],
            pass_conntrack: v[ST_PASS_CT as usize],
            per_ring: v[ST_KEY_BASE as usize..ST_NOSOCK_QUEUE_BASE as usize].to_vec(),
            no_socket_queues: v[ST_NOSOCK_QUEUE_BASE as usize..ST_PASS_CT as usize].to_vec(),
        })
    }

    /// Runs the program once over `frame` with `BPF_PROG_TEST_RUN` (nothing is attached or
    /// sent). `ingress_ifindex`: the `ctx->ingress_ifindex` to present (must exist in the calling
    /// thread's namespace; `None`: the kernel's default). The class is read from the per-class
    /// counters, so do not run this on a classifier that sees live traffic.
    pub fn test_run(&self, frame: &[u8], ingress_ifindex: Option<u32>) -> Result<TestOutcome> {
        let before = self.stats()?;
        let mut out = vec![0u8; frame.len() + 256];
        let ctx: Vec<u8> = ingress_ifindex
            .map(|i| {
                let md: [u32; 6] = [0, frame.len() as u32, 0, i, 0, 0];
                md.iter().flat_map(|w| w.to_ne_bytes()).collect()
            })
            .unwrap_or_default();
        let opts = TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut out),
            ctx_in: ingress_ifindex.map(|_| &ctx[..]),
            repeat: 1,
            ..Default::default()
        };
        let r = (self.prog().test_run(opts)).map_err(|e| EbpfError::op("BPF_PROG_TEST_RUN", e))?;
        let after = self.stats()?;
        let class = (0..MAX_CLASSES)
            .find(|&c| after.per_class[c] > before.per_class[c])
            .map(|c| c as u32);
        let key = (0..MAX_CLASSES)
            .find(|&k| after.per_ring[k] > before.per_ring[k])
            .map(|k| k as u32);
        Ok(TestOutcome {
            action: r.return_value,
            class,
            key,
        })
    }

    /// The program's fd (e.g. for `bpftool`-style inspection).
    pub fn prog_fd(&self) -> Result<RawFd> {
        let fd = (self.prog().fd()).map_err(|e| EbpfError::op("the program's fd", e))?;
        Ok(fd.as_fd().as_raw_fd())
    }
}

impl Drop for Classifier {
    fn drop(&mut self) {
        if let Err(e) = self.detach() {
            tracing::warn!("detach XDP: {e:#}");
        }
    }
}

fn is_busy(e: &ProgramError) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if io.raw_os_error() == Some(libc::EBUSY) || io.raw_os_error() == Some(libc::EEXIST) {
                return true;
            }
        }
        src = s.source();
    }
    false
}

/// An interface whose XDP hook another program holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{interface} is in use: {holder}; {fix}")]
pub struct XdpHeld {
    pub interface: String,
    /// What holds it, as far as the interface shows.
    pub holder: String,
    /// What the operator can do.
    pub fix: String,
}

/// The XDP program attached to `ifname` (of the calling thread's namespace), as `(id, name)`,
/// from `ip -d link show`; `None` when there is none or `ip` cannot tell.
pub fn xdp_program_on(ifname: &str) -> Option<(u32, String)> {
    let out = std::process::Command::new("ip")
        .args(["-d", "link", "show", "dev", ifname])
        .output()
        .ok()?;
    parse_xdp_program(&String::from_utf8_lossy(&out.stdout))
}

/// `prog/xdp id 42 name llr_classify tag …` → `(42, "llr_classify")`.
fn parse_xdp_program(text: &str) -> Option<(u32, String)> {
    let at = text.find("prog/xdp")?;
    let mut words = text[at..].split_whitespace();
    let mut id = None;
    let mut name = None;
    while let Some(w) = words.next() {
        match w {
            "id" if id.is_none() => id = words.next()?.parse().ok(),
            "name" if name.is_none() => name = words.next().map(str::to_string),
            _ => {}
        }
        if id.is_some() && name.is_some() {
            break;
        }
    }
    Some((id?, name.unwrap_or_default()))
}

/// What holds an interface another program uses: `llrouter's classifier (XDP program id 42)`
/// or `the XDP program \`xdp_fwd\` (id 7)`.
pub fn describe_holder(prog: Option<&(u32, String)>) -> String {
    match prog {
        Some((id, n)) if n == PROGRAM_NAME || n == PROGRAM_NAME_MB => {
            format!("another llrouter runs on it (its classifier is XDP program id {id})")
        }
        Some((id, n)) => format!("the XDP program `{n}` (id {id}) is attached to it"),
        None => "no XDP program is attached to it, so an AF_XDP program polls it in copy mode or \
                 is starting"
            .to_string(),
    }
}

/// Removes a netlink-attached llrouter program left by a crashed run from `ifname`.
fn detach_stale(ifname: &str) -> Result<()> {
    let out = std::process::Command::new("ip")
        .args(["-d", "link", "show", "dev", ifname])
        .output()
        .map_err(|e| EbpfError::op("run ip -d link show", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let prog = parse_xdp_program(&text);
    if !text.contains(&format!("name {PROGRAM_NAME}")) {
        return Err(EbpfError::Held(XdpHeld {
            interface: ifname.to_string(),
            holder: describe_holder(prog.as_ref()),
            fix: format!(
                "stop the program that attached it (or, if it was attached with `ip link`, \
                 remove it: `ip link set dev {ifname} xdp off`), or leave {ifname} out"
            ),
        }));
    }
    let mut ok = false;
    for flavour in ["xdp", "xdpgeneric", "xdpdrv"] {
        let st = std::process::Command::new("ip")
            .args(["link", "set", "dev", ifname, flavour, "off"])
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| EbpfError::op("run ip link set xdp off", e))?;
        ok |= st.success();
    }
    // `xdp off` succeeds for a mode with nothing attached, so what counts is whether the
    // program is still there: only a live process holds a bpf_link (a crashed router's program
    // would have gone with its last fd), so another llrouter runs on the interface.
    let after = std::process::Command::new("ip")
        .args(["-d", "link", "show", "dev", ifname])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(&format!("name {PROGRAM_NAME}")))
        .unwrap_or(true);
    if !ok || after {
        let id = prog
            .map(|(id, _)| format!(" (id {id})"))
            .unwrap_or_default();
        return Err(EbpfError::Held(XdpHeld {
            interface: ifname.to_string(),
            holder: format!(
                "another llrouter runs on it (its XDP program `{PROGRAM_NAME}`{id} is attached \
                 through a bpf link, which only a running process holds)"
            ),
            fix: "stop that router first".into(),
        }));
    }
    tracing::warn!("{ifname}: removed a stale llrouter XDP program (left by a run that ended without detaching it)");
    Ok(())
}

/// Loads `prog` into the kernel. When the kernel's verifier rejects it, the error is one line
/// (the kernel release, the verifier's last words, where the full log went) and the full log
/// goes to a file and to the debug log (`-v`), never to the user's terminal first.
pub fn load_checked(prog: &mut Xdp, name: &str) -> Result<()> {
    match prog.load() {
        Ok(()) => Ok(()),
        Err(ProgramError::LoadError {
            io_error,
            verifier_log,
        }) => {
            let log = verifier_log.to_string();
            tracing::debug!("verifier log of {name}:\n{log}");
            let last = (log.lines().rev())
                .map(str::trim)
                .find(|l| {
                    !l.is_empty()
                        && !l.starts_with("processed ")
                        && !l.starts_with("verification time")
                })
                .unwrap_or("(no verifier output)")
                .to_string();
            let path = save_verifier_log(name, &log);
            Err(EbpfError::Verifier {
                program: name.to_string(),
                release: crate::probe::kernel_release(),
                cause: io_error,
                last,
                log: path.map_or_else(|| "run with -v".to_string(), |p| p.display().to_string()),
            })
        }
        Err(e) => Err(EbpfError::Load {
            what: format!("the eBPF program {name}"),
            cause: e.into(),
        }),
    }
}

/// Writes a verifier log where an operator finds it: /run/llrouter when it can be created
/// (root), the temporary directory otherwise.
fn save_verifier_log(name: &str, log: &str) -> Option<std::path::PathBuf> {
    let dirs = [
        std::path::PathBuf::from("/run/llrouter"),
        std::env::temp_dir(),
    ];
    for d in dirs {
        if std::fs::create_dir_all(&d).is_err() {
            continue;
        }
        let p = d.join(format!("verifier-{name}.log"));
        if std::fs::write(&p, log).is_ok() {
            return Some(p);
        }
    }
    None
}

/// The name of `ifindex` in the calling thread's namespace.
pub fn ifname(ifindex: u32) -> Result<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes as if_indextoname requires; it NUL-terminates on success.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(EbpfError::NoInterface(format!(
            "with ifindex {ifindex}: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: on success buf holds a NUL-terminated string.
    Ok(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned())
}

/// The index of `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| {
        EbpfError::NoInterface(format!("named `{}` (it contains NUL)", name.escape_debug()))
    })?;
    // SAFETY: c is a valid NUL-terminated string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(EbpfError::NoInterface(format!("named `{name}`")));
    }
    Ok(i)
}

// Run-time rule replacement for the control plane: the rules of a running router change without
// detaching the program.
impl Classifier {
    /// Replaces the live rule set `old` (what is installed now) by `new`. Frames being
    /// classified meanwhile see either the complete old set or the complete new one, never a
    /// mix or a half-written rule: the program holds two rule tables and reads the index of the
    /// active one once per frame; the new set is written into the inactive table, then the index
    /// flipped (one 4-byte word). Each flip starts an RCU grace period on a helper thread
    /// (`membarrier(MEMBARRIER_CMD_GLOBAL)`, ~8–17 ms on the test VM); the next update waits for
    /// it to end before overwriting the retired table, so no frame that started before the flip
    /// is still reading it. Updates spaced more than a grace period apart never block;
    /// back-to-back ones wait the rest of it.
    ///
    /// `old` is kept for callers that track it; the double-buffered write does not need it.
    pub fn update_rules(
        &mut self,
        old: &[[u8; 64]],
        new: &[[u8; 64]],
        default_class: u32,
        flags: u32,
    ) -> Result<()> {
        let _ = old;
        self.set_rules(new, default_class, flags)
    }
}

/// Starts an RCU grace period on a thread of its own, so that the caller (the worker, between
/// poll rounds) never blocks for it; joining the handle waits for its end. If the thread
/// cannot start, waits here and returns `None`.
fn start_grace_period() -> Option<std::thread::JoinHandle<()>> {
    match std::thread::Builder::new()
        .name("llr-rcu-grace".into())
        .spawn(wait_grace_period)
    {
        Ok(h) => Some(h),
        Err(_) => {
            wait_grace_period();
            None
        }
    }
}

/// Waits for an RCU grace period: every XDP program run that started before the call has
/// finished when it returns (`MEMBARRIER_CMD_GLOBAL` is `synchronize_rcu()` in the kernel).
fn wait_grace_period() {
    const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;
    // SAFETY: membarrier takes two integer arguments and touches no user memory.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
    if rc != 0 {
        // nohz_full kernels refuse MEMBARRIER_CMD_GLOBAL: fall back to a generous sleep (an XDP
        // run lasts microseconds, in softirq context with bottom halves off).
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod holder_tests {
    use super::*;

    #[test]
    fn xdp_program_of_ip_link() {
        let t = "2: veth-rin@if3: <BROADCAST> mtu 1500 xdp qdisc noqueue\n    link/ether 02:00:00:00:01:fe\n    prog/xdp id 142 name llr_classify tag 3b185187f1855c4c jited \n";
        let p = parse_xdp_program(t);
        assert_eq!(p, Some((142, "llr_classify".into())));
        assert!(describe_holder(p.as_ref()).starts_with("another llrouter runs on it"));
        assert_eq!(parse_xdp_program("2: lo: <LOOPBACK> mtu 65536"), None);
        let other = (7, "xdp_fwd".to_string());
        assert_eq!(
            describe_holder(Some(&other)),
            "the XDP program `xdp_fwd` (id 7) is attached to it"
        );
    }
}
