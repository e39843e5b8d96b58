//! The established connections llrouter carries in a family whose firewall reads connection
//! state ([`FamilyMode::Conntrack`]), as an nftables flowtable carries them: the kernel forwards
//! a connection until its conntrack entry is established, then this thread, told by the
//! entry's update event, puts both directions in the classifiers' `llr_ct` tables and llrouter
//! forwards the rest (SYN, FIN and RST segments still go to the kernel). A destroyed entry, or
//! one that is no longer carriable (closing, translated, …), is taken out again.
//!
//! Since the kernel no longer sees the packets llrouter carries, two things of the entry are
//! kept up here: its timeout, extended while the classifiers see the connection's frames (an
//! idle one still expires as in the kernel), and for TCP its window tracking, relaxed when the
//! connection is taken (else the kernel would call the FIN it sees after llrouter's segments
//! out of window, `ct state invalid`, as `nf_flow_table` avoids by the same means).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use llr_core::filter::FamilyMode;
use llr_core::fwd::SharedForwarder;
use llr_io::conntrack::{self, Conntrack, ConntrackError, Entry, Event, Tuple};

use crate::steer::Classifiers;

/// What the thread did, for `ctl show filter` and the log.
#[derive(Debug, Default)]
pub struct CtCounters {
    /// Connections carried now.
    pub carried: AtomicU64,
    /// Connections taken since start.
    pub taken: AtomicU64,
    /// Connections left to the kernel because the classifiers' table was full.
    pub table_full: AtomicU64,
}

struct Carried {
    reply: Tuple,
    /// When its kernel entry's timeout was last set (`mono_ns`; 0: not since it was taken).
    refreshed: u64,
}

struct Mirror {
    classifiers: Arc<Mutex<Classifiers>>,
    counters: Arc<CtCounters>,
    carried: HashMap<Tuple, Carried>,
    want: [bool; 2],
}

impl Mirror {
    fn lock(&self) -> std::sync::MutexGuard<'_, Classifiers> {
        self.classifiers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&mut self, ct: &mut Conntrack, e: &Entry) {
        let wanted = e.carriable() && self.want[usize::from(e.orig.v6())];
        let have = self.carried.contains_key(&e.orig);
        if wanted && !have {
            self.take(ct, e);
        } else if !wanted && have {
            self.release(&e.orig);
        }
    }

    fn take(&mut self, ct: &mut Conntrack, e: &Entry) {
        let mut refreshed = 0;
        if e.orig.proto == 6 {
            // Before the first segment goes past the kernel.
            let secs = conntrack::established_timeout(6).unwrap_or(432_000);
            match ct.refresh(&e.orig, secs, true) {
                Ok(()) => refreshed = llr_io::sys::mono_ns(),
                Err(err) => {
                    tracing::debug!("conntrack: {:?} stays with the kernel: {err}", e.orig);
                    return;
                }
            }
        }
        let ok = {
            let mut c = self.lock();
            let ok = c.ct_insert(e.orig.bpf_key()).unwrap_or(false)
                && c.ct_insert(e.reply.bpf_key()).unwrap_or(false);
            if !ok {
                let _ = c.ct_remove(&e.orig.bpf_key());
                let _ = c.ct_remove(&e.reply.bpf_key());
            }
            ok
        };
        if !ok {
            if self.counters.table_full.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    "firewall: the classifiers' table of carried connections is full ({} \
                     entries): further connections stay with the kernel",
                    llr_io::ebpf::MAX_CT
                );
            }
            return;
        }
        self.carried.insert(
            e.orig,
            Carried {
                reply: e.reply,
                refreshed,
            },
        );
        self.counters.taken.fetch_add(1, Ordering::Relaxed);
        self.counters
            .carried
            .store(self.carried.len() as u64, Ordering::Relaxed);
    }

    fn release(&mut self, orig: &Tuple) {
        let Some(c) = self.carried.remove(orig) else {
            return;
        };
        {
            let mut cl = self.lock();
            let _ = cl.ct_remove(&orig.bpf_key());
            let _ = cl.ct_remove(&c.reply.bpf_key());
        }
        self.counters
            .carried
            .store(self.carried.len() as u64, Ordering::Relaxed);
    }

    fn release_all(&mut self) {
        let all: Vec<Tuple> = self.carried.keys().copied().collect();
        for t in all {
            self.release(&t);
        }
    }

    /// After a dump: the entries to carry are exactly the carriable ones in it.
    fn sync(&mut self, ct: &mut Conntrack, entries: &[Entry]) {
        let keep: std::collections::HashSet<Tuple> = (entries.iter())
            .filter(|e| e.carriable() && self.want[usize::from(e.orig.v6())])
            .map(|e| e.orig)
            .collect();
        let gone: Vec<Tuple> = (self.carried.keys())
            .filter(|t| !keep.contains(t))
            .copied()
            .collect();
        for t in gone {
            self.release(&t);
        }
        for e in entries {
            self.update(ct, e);
        }
    }

    /// Extends the kernel entries of the connections whose frames the classifiers saw since
    /// their last extension, once a third of their timeout has passed (at once after they were
    /// taken: an entry a reply has just established may have 30 s left).
    fn refresh(&mut self, ct: &mut Conntrack) {
        let now = llr_io::sys::mono_ns();
        let mut gone = Vec::new();
        let mut due: Vec<(Tuple, u32)> = Vec::new();
        // Read once a pass, not once a connection: the sysctls are files.
        let timeouts = [6, 17].map(conntrack::established_timeout);
        {
            let cl = self.lock();
            for (t, c) in &self.carried {
                let timeout = if t.proto == 6 {
                    timeouts[0]
                } else {
                    timeouts[1]
                };
                let Some(secs) = timeout else {
                    continue;
                };
                let third = u64::from(secs) * 1_000_000_000 / 3;
                if c.refreshed != 0 && now.saturating_sub(c.refreshed) < third {
                    continue;
                }
                let seen = cl.ct_seen(&t.bpf_key()).max(cl.ct_seen(&c.reply.bpf_key()));
                if seen > c.refreshed {
                    due.push((*t, secs));
                }
            }
        }
        for (t, secs) in due {
            match ct.refresh(&t, secs, false) {
                Ok(()) => {
                    if let Some(c) = self.carried.get_mut(&t) {
                        c.refreshed = now;
                    }
                }
                Err(_) => gone.push(t),
            }
        }
        for t in gone {
            self.release(&t);
        }
    }
}

/// Runs until `stop`: carries the established connections of the families the published
/// filter puts in [`FamilyMode::Conntrack`], none otherwise.
pub fn watch(
    counters: Arc<CtCounters>,
    fwd: Arc<SharedForwarder>,
    classifiers: Arc<Mutex<Classifiers>>,
    stop: Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    let spawned = std::thread::Builder::new()
        .name("llr-conntrack".into())
        .spawn(move || {
            let mut m = Mirror {
                classifiers,
                counters,
                carried: HashMap::new(),
                want: [false; 2],
            };
            let mut ct: Option<Conntrack> = None;
            let mut last_refresh = Instant::now();
            let mut failed_once = false;
            while !stop.load(Ordering::Relaxed) {
                let modes = fwd.load().filter.family_modes();
                let want = modes.map(|x| x == FamilyMode::Conntrack);
                if want != m.want {
                    m.want = want;
                    if !want.iter().any(|&w| w) {
                        m.release_all();
                        ct = None;
                    } else if let Some(c) = ct.as_mut() {
                        resync(&mut m, c);
                    }
                }
                if !want.iter().any(|&w| w) {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
                if ct.is_none() {
                    match open() {
                        Ok(mut c) => {
                            resync(&mut m, &mut c);
                            tracing::info!(
                                "firewall: llrouter carries the established connections of \
                                 {} ({} now); the kernel forwards the others",
                                families(want),
                                m.carried.len()
                            );
                            ct = Some(c);
                            failed_once = false;
                        }
                        Err(e) => {
                            if !failed_once {
                                tracing::error!(
                                    "firewall: cannot read the kernel's connection table ({e}): \
                                     the kernel forwards every connection of {}",
                                    families(want)
                                );
                                failed_once = true;
                            }
                            std::thread::sleep(Duration::from_secs(1));
                            continue;
                        }
                    }
                }
                let Some(c) = ct.as_mut() else { continue };
                match c.events(Duration::from_millis(200)) {
                    Ok(events) => {
                        for e in events {
                            match e {
                                Event::Update(e) => m.update(c, &e),
                                Event::Destroy(t) => m.release(&t),
                            }
                        }
                    }
                    Err(ConntrackError::Overrun) => {
                        tracing::warn!(
                            "firewall: connection events were lost (a burst): reading the \
                             whole table again"
                        );
                        resync(&mut m, c);
                    }
                    Err(e) => {
                        tracing::error!("firewall: {e}; reopening");
                        m.release_all();
                        ct = None;
                        continue;
                    }
                }
                if last_refresh.elapsed() >= Duration::from_secs(1) {
                    last_refresh = Instant::now();
                    m.refresh(c);
                }
            }
            m.release_all();
        });
    match spawned {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::error!("firewall: cannot start the conntrack thread: {e}");
            None
        }
    }
}

fn open() -> Result<Conntrack, ConntrackError> {
    let mut c = Conntrack::open()?;
    c.subscribe()?;
    Ok(c)
}

fn resync(m: &mut Mirror, c: &mut Conntrack) {
    match c.dump() {
        Ok(entries) => m.sync(c, &entries),
        Err(e) => {
            tracing::error!("firewall: cannot dump the connection table: {e}");
            m.release_all();
        }
    }
}

fn families(want: [bool; 2]) -> &'static str {
    match want {
        [true, true] => "IPv4 and IPv6",
        [true, false] => "IPv4",
        _ => "IPv6",
    }
}
