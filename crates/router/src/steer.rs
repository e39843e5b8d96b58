//! Steering: which interface queues each worker serves ([`QueueLayout`]), the classifiers all
//! workers share ([`Classifiers`]), and the NIC filters of `steering = "ntuple"`
//! ([`NtupleFilters`]).
//!
//! ```text
//! steering xdp      worker w: rx queue w of every interface; the classifier's rules pick the
//!                   class, its class→ring map the socket: XSKMAP[queue·64 + ring]
//! steering queues   worker w: rx queues w·C .. w·C+C−1 (C classes); queue q carries class
//! steering ntuple   q mod C, put there by the NIC (ntuple filters, which llrouter installs for
//!                   `ntuple`), a switch or the sender; the classifier only redirects by queue
//! ```
//!
//! Every queue of a worker gets one socket per ring, so a layout change (e.g. to `sq`, all
//! classes in ring 0) works the same way in every mode: the class→ring map moves new frames,
//! the sockets stay.

use std::path::{Path, PathBuf};

use llr_io::ebpf::{AttachMode, Classifier, ClassifierStats, XdpMode};
use llr_io::xsk::{PortSpec, SocketSlot};

use crate::config::{ConfigError, Resolved, Steering};
use crate::error::{IoStep, RouterError, Step};

/// Which rx queues each worker serves: every active rx queue of every interface, so that no
/// frame RSS puts on a queue lands where no socket waits (the classifier would hand it to the
/// kernel, counted as `no_socket`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueLayout {
    pub steering: Steering,
    pub workers: usize,
    pub classes: usize,
    /// Active rx queues of each interface (the order of the configuration's interfaces).
    pub rx: Vec<u32>,
    /// Frames span several UMEM chunks (an MTU beyond one chunk): multi-buffer sockets and
    /// the frags-aware classifier (the start-up plan's check decides).
    pub multi_buffer: bool,
}

/// Rx queues per interface the classifier can redirect from (its XSKMAP holds 64 rings for
/// each of 64 queues: bpf/classifier.c's LLR_MAX_QUEUES).
pub const MAX_QUEUES: u32 = llr_io::ebpf::MAX_QUEUES as u32;

impl QueueLayout {
    /// The layout of `r` under `steering` (one worker per listed core, at least one), with
    /// `rx[i]` active rx queues on interface `i`.
    pub fn new(r: &Resolved, steering: Steering, rx: Vec<u32>) -> QueueLayout {
        QueueLayout {
            steering,
            workers: r.cfg.cores.len().max(1),
            classes: r.cfg.classes.len(),
            rx,
            multi_buffer: false,
        }
    }

    /// The active rx queues of the configured interfaces in this namespace (1 for an
    /// interface that is not there: `--dry-run` plans anyway).
    pub fn active_queues(r: &Resolved) -> Vec<u32> {
        (r.cfg.interfaces.iter().zip(&r.ifindexes))
            .map(|(n, &i)| llr_io::kernel::active_rx_queues(n, i).unwrap_or(1))
            .collect()
    }

    /// The worker that serves rx queue `q`: with `xdp` queues go round-robin over the workers;
    /// with queue steering worker w owns queues w·C .. w·C+C−1, and queues beyond W·C (a NIC
    /// with more) go round-robin by groups of C, keeping `q mod C` as their class.
    pub fn worker_of(&self, q: u32) -> usize {
        let w = self.workers.max(1);
        match self.steering {
            Steering::Xdp => q as usize % w,
            Steering::Queues | Steering::Ntuple => (q as usize / self.classes.max(1)) % w,
        }
    }

    /// The rx queues of interface `i` that worker `w` serves.
    pub fn queues(&self, w: usize, i: usize) -> Vec<u32> {
        let n = self.rx.get(i).copied().unwrap_or(1);
        (0..n).filter(|&q| self.worker_of(q) == w).collect()
    }

    /// Rx queues every interface must have.
    pub fn queues_needed(&self) -> u32 {
        match self.steering {
            Steering::Xdp => self.workers as u32,
            Steering::Queues | Steering::Ntuple => (self.workers * self.classes) as u32,
        }
    }

    /// The ports (interface queues) worker `w` opens. Its first port on an interface is where
    /// it transmits to that interface.
    pub fn ports(&self, w: usize, ifindexes: &[u32]) -> Vec<PortSpec> {
        (ifindexes.iter().enumerate())
            .flat_map(|(i, &ifindex)| {
                self.queues(w, i)
                    .into_iter()
                    .map(move |queue| PortSpec { ifindex, queue })
            })
            .collect()
    }

    /// The class queue `q` carries with queue steering (`None` with `xdp`: the rules decide).
    pub fn queue_class(&self, q: u32) -> Option<usize> {
        match self.steering {
            Steering::Xdp => None,
            _ => Some(q as usize % self.classes.max(1)),
        }
    }

    /// Checks that every interface has the rx queues this layout needs, and no more than the
    /// classifier can serve. The error names `cores`, or `steering` when it is the per-class
    /// queues that do not fit; `interfaces` for too many.
    pub fn check(&self, names: &[String]) -> Result<(), ConfigError> {
        if self.steering == Steering::Ntuple && self.workers > 1 {
            return Err(ConfigError::field(
                "cores",
                format!(
                    "steering = \"ntuple\" runs one worker (the filters send each class to one hardware queue); {} cores given. Use steering = \"xdp\" or \"queues\" for several workers",
                    self.workers
                ),
            ));
        }
        let need = self.queues_needed();
        for (name, &have) in names.iter().zip(&self.rx) {
            if have > MAX_QUEUES {
                return Err(ConfigError::field(
                    "interfaces",
                    format!(
                        "{name} has {have} active rx queues; llrouter serves at most {MAX_QUEUES} per interface: `ethtool -L {name} combined {MAX_QUEUES}`"
                    ),
                ));
            }
            if have < need {
                let (field, why) = match self.steering {
                    Steering::Xdp => (
                        "cores",
                        format!("{} workers need one rx queue each", self.workers),
                    ),
                    _ => (
                        "steering",
                        format!(
                            "steering = \"{}\" with {} workers × {} classes needs one rx queue per (worker, class)",
                            self.steering.name(),
                            self.workers,
                            self.classes
                        ),
                    ),
                };
                return Err(ConfigError::field(
                    field,
                    format!(
                        "{name} has {have} active rx queue{}; {why}: {need} (veth: `numrxqueues {need} numtxqueues {need}` or `ethtool -L {name} rx {need} tx {need}`; a NIC: `ethtool -L {name} combined {need}`)",
                        if have == 1 { "" } else { "s" }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The queue plan in one phrase per interface: `eth0 4 queues`.
    pub fn plan_summary(&self, names: &[String]) -> String {
        (names.iter().zip(&self.rx))
            .map(|(n, &q)| format!("{n} {}", plural(q as usize, "queue")))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `--dry-run` lines: per interface, queue → worker (core) → class or rules.
    pub fn describe(
        &self,
        names: &[String],
        cores: &[usize],
        class_names: &[String],
    ) -> Vec<String> {
        let mut out = vec![format!(
            "# rx queue -> worker -> class ({} worker{}; every active rx queue is served)",
            self.workers,
            if self.workers == 1 { "" } else { "s" }
        )];
        for (i, name) in names.iter().enumerate() {
            let n = self.rx.get(i).copied().unwrap_or(1);
            out.push(format!(
                "#   {name}: {}",
                plural(n as usize, "active rx queue")
            ));
            for q in 0..n {
                let w = self.worker_of(q);
                let core = cores
                    .get(w)
                    .map_or_else(|| "unpinned".to_string(), |c| format!("core {c}"));
                let class = match self.queue_class(q) {
                    Some(c) => format!(
                        "class {}",
                        class_names.get(c).map(String::as_str).unwrap_or("?")
                    ),
                    None => "classes by the classifier's rules".to_string(),
                };
                out.push(format!("#     queue {q} -> worker {w} ({core}) -> {class}"));
            }
        }
        out
    }
}

/// The classifier of every interface, shared by all workers (one XDP program per interface;
/// the XSKMAP key carries the queue, so one map serves every worker's sockets). Changed only by
/// the control plane; detached on drop.
pub struct Classifiers {
    list: Vec<(u32, Classifier)>,
    installed: RuleImages,
    /// The router's own addresses as the classifiers have them (sorted).
    local: Vec<std::net::IpAddr>,
}

impl std::fmt::Debug for Classifiers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ifs: Vec<u32> = self.list.iter().map(|(i, _)| *i).collect();
        f.debug_struct("Classifiers")
            .field("ifindexes", &ifs)
            .finish()
    }
}

/// A classifier rule table: 64-byte `llr_rule` images (first match wins), the default class
/// and `llr_config.flags`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleImages {
    pub images: Vec<[u8; 64]>,
    pub default_class: u32,
    pub flags: u32,
}

impl Classifiers {
    /// Who forwards each family, `[IPv4, IPv6]`, on every interface
    /// ([`Classifier::set_family_modes`](llr_io::ebpf::Classifier::set_family_modes)).
    pub fn set_family_modes(
        &mut self,
        modes: [llr_core::filter::FamilyMode; 2],
    ) -> Result<(), llr_io::ebpf::EbpfError> {
        for (_, c) in &mut self.list {
            c.set_family_modes(modes)?;
        }
        Ok(())
    }

    /// Puts a direction of a carried connection in every interface's table (a frame of it can
    /// arrive on any); false if a table was full.
    pub fn ct_insert(&mut self, key: [u8; 40]) -> Result<bool, llr_io::ebpf::EbpfError> {
        let mut all = true;
        for (_, c) in &mut self.list {
            all &= c.ct_insert(key)?;
        }
        Ok(all)
    }

    /// Takes a direction out of every interface's table.
    pub fn ct_remove(&mut self, key: &[u8; 40]) -> Result<(), llr_io::ebpf::EbpfError> {
        for (_, c) in &mut self.list {
            c.ct_remove(key)?;
        }
        Ok(())
    }

    /// The latest time any interface's classifier took the direction (0: never).
    pub fn ct_seen(&self, key: &[u8; 40]) -> u64 {
        (self.list.iter())
            .filter_map(|(_, c)| c.ct_seen(key).ok().flatten())
            .max()
            .unwrap_or(0)
    }

    /// Loads one classifier per interface with the rules, the class→ring map and the router's
    /// own addresses; with queue steering they redirect by rx queue instead of by rules.
    pub fn load(
        r: &Resolved,
        queues: &QueueLayout,
        flags: u32,
        local: &[std::net::IpAddr],
    ) -> Result<Classifiers, RouterError> {
        let mut list = Vec::new();
        for &ifindex in &r.ifindexes {
            let mut c = Classifier::load_for(r.default_class, queues.multi_buffer)
                .map_err(RouterError::io)?;
            c.set_rules(&r.rule_images, r.default_class, flags)
                .map_err(RouterError::io)?;
            c.set_class_rings(&r.layout.class_to_ring)
                .map_err(RouterError::io)?;
            c.set_local_addrs(local).map_err(RouterError::io)?;
            if queues.steering != Steering::Xdp {
                c.set_queue_steering(queues.classes as u32)
                    .map_err(RouterError::io)?;
            }
            list.push((ifindex, c));
        }
        let mut local = local.to_vec();
        local.sort_unstable();
        Ok(Classifiers {
            list,
            installed: RuleImages {
                images: r.rule_images.clone(),
                default_class: r.default_class,
                flags,
            },
            local,
        })
    }

    /// Makes the router's own addresses (handed to the kernel in XDP) `now`: the addresses
    /// added since, and those removed, as the kernel mirror sees them. Returns whether anything
    /// changed.
    pub fn sync_local_addrs(
        &mut self,
        mut now: Vec<std::net::IpAddr>,
    ) -> Result<bool, llr_io::ebpf::EbpfError> {
        now.sort_unstable();
        if now == self.local {
            return Ok(false);
        }
        let added: Vec<_> = now
            .iter()
            .filter(|a| !self.local.contains(a))
            .copied()
            .collect();
        let gone: Vec<_> = self
            .local
            .iter()
            .filter(|a| !now.contains(a))
            .copied()
            .collect();
        for (_, c) in &mut self.list {
            c.set_local_addrs(&added)?;
            c.remove_local_addrs(&gone)?;
        }
        self.local = now;
        Ok(true)
    }

    /// Registers a worker's sockets.
    pub fn register(&mut self, sockets: &[SocketSlot]) -> Result<(), RouterError> {
        for s in sockets {
            let (_, c) = (self.list.iter_mut())
                .find(|(i, _)| *i == s.ifindex)
                .ok_or_else(|| {
                    RouterError::Setup(format!("ifindex {}: no classifier", s.ifindex))
                })?;
            c.set_socket(s.queue, s.ring, s.fd)
                .io_step(format_args!("ifindex {}", s.ifindex))?;
        }
        Ok(())
    }

    /// Attaches every classifier; returns how each one was attached (native XDP in the
    /// driver, or generic). Frames for a queue whose sockets are not registered yet go to the
    /// kernel.
    pub fn attach(&mut self, mode: AttachMode) -> Result<Vec<(u32, XdpMode)>, RouterError> {
        let mut out = Vec::new();
        for (ifindex, c) in &mut self.list {
            let m = c.attach(*ifindex, mode).map_err(RouterError::io)?;
            tracing::info!("ifindex {ifindex}: classifier attached ({m:?})");
            out.push((*ifindex, m));
        }
        Ok(out)
    }

    /// The rules installed now.
    pub fn installed(&self) -> &RuleImages {
        &self.installed
    }

    /// Installs `new` on every interface; on an error restores those already updated (nothing
    /// changed then). May wait for an RCU grace period per interface.
    pub fn update_rules(&mut self, new: &RuleImages) -> Result<(), String> {
        let old = self.installed.clone();
        for k in 0..self.list.len() {
            let (i, cl) = &mut self.list[k];
            let r = cl
                .update_rules(&old.images, &new.images, new.default_class, new.flags)
                .map_err(|e| format!("ifindex {i}: {e:#}"));
            if let Err(e) = r {
                for (_, cl) in self.list[..k].iter_mut() {
                    let _ = cl.update_rules(&new.images, &old.images, old.default_class, old.flags);
                }
                return Err(e);
            }
        }
        self.installed = new.clone();
        Ok(())
    }

    /// Points every class at its ring; on an error restores `old` where already changed.
    pub fn set_class_rings(&mut self, new: &[usize], old: &[usize]) -> Result<(), String> {
        for k in 0..self.list.len() {
            let (i, cl) = &mut self.list[k];
            if let Err(e) = cl.set_class_rings(new) {
                let e = format!("ifindex {i}: {e:#}");
                for (_, cl) in self.list[..k].iter_mut() {
                    let _ = cl.set_class_rings(old);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// The classifiers, by interface index.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Classifier)> {
        self.list.iter_mut().map(|(i, c)| (*i, c))
    }

    /// The classifiers, by interface index.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Classifier)> {
        self.list.iter().map(|(i, c)| (*i, c))
    }

    /// Counters per interface.
    pub fn stats(&self) -> Vec<(u32, ClassifierStats)> {
        (self.list.iter())
            .filter_map(|(i, c)| Some((*i, c.stats().ok()?)))
            .collect()
    }

    /// Detaches every classifier (also done on drop).
    pub fn detach(&mut self) {
        for (i, c) in &mut self.list {
            if let Err(e) = c.detach() {
                tracing::warn!("ifindex {i}: detach the classifier: {e:#}");
            }
        }
    }
}

impl Drop for Classifiers {
    fn drop(&mut self) {
        self.detach();
    }
}

/// The ntuple filters llrouter installed: removed on drop, and recorded in a state file first,
/// so that a router killed before it could remove them (kill -9, a crash) has them removed by
/// the next `llrouter run` with the same control socket.
pub struct NtupleFilters {
    state: PathBuf,
    undo: Vec<Vec<String>>,
}

impl NtupleFilters {
    /// Where the filters of the router with control socket `socket` are recorded.
    pub fn state_path(socket: &Path) -> PathBuf {
        let mut p = socket.as_os_str().to_owned();
        p.push(".ntuple");
        PathBuf::from(p)
    }

    /// Removes what a previous router left (its state file's commands, best effort: a filter
    /// already gone is fine). Returns how many commands ran.
    pub fn recover(state: &Path) -> usize {
        let Ok(text) = std::fs::read_to_string(state) else {
            return 0;
        };
        let cmds = parse_state(&text);
        for c in &cmds {
            if let Err(e) = llr_io::ntuple::run(c) {
                tracing::warn!("removing a stale ntuple filter: {e:#}");
            }
        }
        let _ = std::fs::remove_file(state);
        tracing::info!(
            "removed the ntuple filters of a router that did not stop cleanly ({})",
            state.display()
        );
        cmds.len()
    }

    /// Installs the filters of `plans` (one per interface), recording their undo first. On an
    /// error what was installed is removed again.
    pub fn install(
        plans: &[llr_io::ntuple::Plan],
        state: &Path,
    ) -> Result<NtupleFilters, RouterError> {
        let undo: Vec<Vec<String>> = plans.iter().flat_map(|p| p.undo()).collect();
        let text: String = undo.iter().map(|c| c.join("\t") + "\n").collect();
        std::fs::write(state, text).step(format_args!(
            "steering = \"ntuple\": record the filters in {}",
            state.display()
        ))?;
        let f = NtupleFilters {
            state: state.to_path_buf(),
            undo,
        };
        for p in plans {
            // on an error `f` drops: what went in comes out again
            llr_io::ntuple::apply(p).io_step("steering = \"ntuple\"")?;
        }
        Ok(f)
    }
}

impl Drop for NtupleFilters {
    fn drop(&mut self) {
        for c in &self.undo {
            if let Err(e) = llr_io::ntuple::run(c) {
                tracing::warn!("removing an ntuple filter: {e:#}");
            }
        }
        let _ = std::fs::remove_file(&self.state);
    }
}

fn parse_state(text: &str) -> Vec<Vec<String>> {
    (text.lines())
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// `1 ring`, `2 rings`.
pub(crate) fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(steering: Steering, workers: usize, rx: &[u32]) -> QueueLayout {
        QueueLayout {
            steering,
            workers,
            classes: 2,
            rx: rx.to_vec(),
            multi_buffer: false,
        }
    }

    #[test]
    fn xdp_serves_every_active_queue_round_robin_over_the_workers() {
        let l = layout(Steering::Xdp, 3, &[3, 4]);
        assert_eq!(l.queues(0, 0), [0]);
        assert_eq!(l.queues(2, 0), [2]);
        assert_eq!(l.queues(0, 1), [0, 3]);
        assert_eq!(l.queues_needed(), 3);
        assert_eq!(l.queue_class(1), None);
        let p = l.ports(1, &[7, 9]);
        assert_eq!(
            p,
            [
                PortSpec {
                    ifindex: 7,
                    queue: 1
                },
                PortSpec {
                    ifindex: 9,
                    queue: 1
                }
            ]
        );
        // one worker, a 4-queue veth: all four queues, not only queue 0
        let l = layout(Steering::Xdp, 1, &[4, 1]);
        assert_eq!(l.queues(0, 0), [0, 1, 2, 3]);
        assert_eq!(l.ports(0, &[7, 9]).len(), 5);
    }

    #[test]
    fn queue_steering_gives_each_worker_one_queue_per_class() {
        let l = layout(Steering::Queues, 2, &[4]);
        assert_eq!(l.queues(0, 0), [0, 1]);
        assert_eq!(l.queues(1, 0), [2, 3]);
        assert_eq!(l.queues_needed(), 4);
        assert_eq!(l.queue_class(2), Some(0));
        assert_eq!(l.queue_class(3), Some(1));
        // more queues than workers × classes: the rest by groups of C, class q mod C
        let l = layout(Steering::Queues, 2, &[8]);
        assert_eq!(l.queues(0, 0), [0, 1, 4, 5]);
        assert_eq!(l.queues(1, 0), [2, 3, 6, 7]);
    }

    #[test]
    fn too_few_or_too_many_queues_name_the_field() {
        let ifs = ["eth0".to_string()];
        let e = layout(Steering::Xdp, 2, &[1]).check(&ifs).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("cores: eth0 has 1 active rx queue;"), "{s}");
        assert!(layout(Steering::Xdp, 2, &[2]).check(&ifs).is_ok());
        let s = (layout(Steering::Queues, 2, &[2]).check(&ifs))
            .unwrap_err()
            .to_string();
        assert!(s.starts_with("steering: ") && s.contains(": 4 "), "{s}");
        let s = (layout(Steering::Ntuple, 2, &[8]).check(&ifs))
            .unwrap_err()
            .to_string();
        assert!(s.starts_with("cores: "), "{s}");
        let s = (layout(Steering::Xdp, 1, &[65]).check(&ifs))
            .unwrap_err()
            .to_string();
        assert!(s.starts_with("interfaces: eth0 has 65 active"), "{s}");
    }

    #[test]
    fn dry_run_lines_name_interface_queue_worker_and_class() {
        let names = ["rt".to_string(), "be".to_string()];
        let ifs = ["a".to_string(), "b".to_string()];
        let out = layout(Steering::Queues, 2, &[4, 4]).describe(&ifs, &[1, 3], &names);
        assert!(
            out.contains(&"#     queue 3 -> worker 1 (core 3) -> class be".to_string()),
            "{out:?}"
        );
        let out = layout(Steering::Xdp, 1, &[1, 4]).describe(&ifs, &[], &names);
        assert!(
            out.contains(&"#   b: 4 active rx queues".to_string()),
            "{out:?}"
        );
        assert!(
            out.iter()
                .any(|l| l.contains("queue 3 -> worker 0 (unpinned) -> classes by")),
            "{out:?}"
        );
    }

    #[test]
    fn state_file_round_trips_the_undo_commands() {
        let cmds = vec![
            vec!["-N".to_string(), "eth0".into(), "delete".into(), "0".into()],
            vec!["-X".to_string(), "eth0".into(), "default".into()],
        ];
        let text: String = cmds.iter().map(|c| c.join("\t") + "\n").collect();
        assert_eq!(parse_state(&text), cmds);
    }
}
