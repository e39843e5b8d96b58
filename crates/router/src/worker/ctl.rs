//! The worker's side of the control plane: validated changes handed to the worker, applied
//! between poll rounds, acknowledged; and the counters the worker publishes for `ctl counters`,
//! `llrouter top` and the metrics endpoint.
//!
//! ```text
//! control thread                        every worker (between poll rounds)
//!   validate (SchedConfig::layout, …)
//!   queue Request, kick eventfd  ───►    take requests (claim: Pending → Taken)
//!   wait ≤ timeout for every ack          apply: new PollEngine, wake mode
//!   timeout → cancel (Pending → Cancelled)  publish a snapshot, ack
//! ```
//!
//! A request the worker has not claimed when the wait times out is cancelled, so an error reply
//! always means "not applied". One the worker claimed is waited for (it takes microseconds).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llr_core::sched::{AutoReading, Layout, StrategyKind};

use llr_io::sys::EventFd;
use llr_io::xsk::{PortStats, WakeMode};

pub use llr_ops::metrics::LATENCY_BOUNDS;

/// A validated change for the worker.
#[derive(Debug, Clone)]
pub enum Change {
    /// A new ring layout (strategy, budgets, device budget): the poll engine is rebuilt; the
    /// sockets stay (the control plane rewrites the classifiers' class→ring maps).
    Sched(Layout),
    /// A new wake-up mode.
    Wake { wake: WakeMode, spin_us: u64 },
    /// Several changes applied in one go (reload), in order.
    Batch(Vec<Change>),
    /// A flow set up, changed or torn down (between turns: no packet of another flow is
    /// touched; a torn-down flow's queued packets are freed, counted as its queue drops).
    Flow(FlowChange),
}

/// A change to the flows ([`llr_core::flow::Flows`]).
#[derive(Debug, Clone)]
pub enum FlowChange {
    Add(Box<llr_core::flow::FlowSpec>),
    /// Only the fields given change (share, quantum, queue, pipeline).
    Set(Box<llr_core::flow::FlowSpec>),
    Del(String),
}

const PENDING: u8 = 0;
const TAKEN: u8 = 1;
const CANCELLED: u8 = 2;

/// A change in flight.
pub struct Request {
    pub change: Change,
    state: Arc<AtomicU8>,
    ack: SyncSender<Result<(), String>>,
}

impl Request {
    /// Claims the request for applying; `false` if the control side gave up on it already.
    pub fn claim(&self) -> bool {
        self.state
            .compare_exchange(PENDING, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Reports the outcome.
    pub fn done(self, r: Result<(), String>) {
        let _ = self.ack.try_send(r);
    }
}

/// Counters of one socket index ("ring" k: the AF_XDP socket of class k on every port).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RingCounters {
    /// Frames taken from the ring.
    pub served: u64,
    /// Bytes of those frames.
    pub bytes: u64,
    /// Grants that ended with the ring budget spent and frames left.
    pub budget_hits: u64,
    /// Grants served and their CPU time, ns (the worker's clock around each grant).
    pub grants: u64,
    pub grant_ns: u64,
    /// Grants of this ring that ended in a transmit flush (`TxPolicy`): the kicks its latency
    /// costs.
    pub flushes: u64,
    /// The worker's clock inside those flushes, ns, and the frames they handed to the kernel:
    /// what a flush costs beside the grant it ends (its fixed part and per frame).
    pub flush_ns: u64,
    pub flushed: u64,
    /// Frames forwarded (queued for Tx).
    pub forwarded: u64,
    /// Frames waiting in the ring now.
    pub backlog: u64,
    /// Early drops at the full ring (kernel `rx_ring_full`), and other kernel rx drops.
    pub drops: u64,
    pub kernel_rx_dropped: u64,
    /// Ring-latency histogram: counts per `LATENCY_BOUNDS` bucket (+Inf last), and the sum (s).
    pub latency_counts: Vec<u64>,
    pub latency_sum: f64,
}

impl RingCounters {
    fn new() -> Self {
        RingCounters {
            latency_counts: vec![0; LATENCY_BOUNDS.len() + 1],
            ..Default::default()
        }
    }

    /// Records one time-in-ring value (seconds).
    #[inline]
    pub fn observe(&mut self, v: f64) {
        let i = LATENCY_BOUNDS.partition_point(|b| *b < v);
        self.latency_counts[i] += 1;
        self.latency_sum += v;
    }
}

/// Counters of one engine device id (accumulated over engine rebuilds).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct DeviceCounters {
    pub wakeups: u64,
    pub rearms: u64,
    pub budget_exhaustions: u64,
    pub passes: u64,
}

/// What a worker publishes.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct WorkerSnapshot {
    /// Increases with every publication.
    pub seq: u64,
    pub strategy: Option<StrategyKind>,
    /// Layout ring names and their socket index (= ring id) in the running layout.
    pub layout_rings: Vec<String>,
    pub class_to_ring: Vec<usize>,
    pub device_budget: u32,
    pub ring_budgets: Vec<u32>,
    /// `budget = "auto"`: the last window's ρRT, x and the budget set.
    pub auto_budget: Option<AutoReading>,
    pub wake: Option<WakeMode>,
    pub spin_us: u64,
    /// Per socket index (class k's socket), accumulated over strategy changes.
    pub rings: Vec<RingCounters>,
    /// Per engine device id, accumulated.
    pub devices: Vec<DeviceCounters>,
    pub poll_rounds: u64,
    /// The longest grant or flow turn since start, ns: the worker's longest stall (route
    /// updates never make it wait: the table is lock-free).
    pub stall_max_ns: u64,
    /// CPU busy fraction over the last window (about 0.5 s).
    pub busy_ratio: f64,
    /// Time the worker was not idle since it started, seconds (a counter: `rate()` of it is
    /// the load over any window).
    pub busy_s: f64,
    pub sleeps: u64,
    pub poll_wakeups: u64,
    pub pass: Vec<(String, u64)>,
    pub drop: Vec<(String, u64)>,
    /// Slow-path events (ICMP errors sent and rate-limited, fragments, punts).
    pub events: Vec<(String, u64)>,
    pub ports: Vec<PortStats>,
    /// Changes applied.
    pub changes: u64,
    pub elapsed_s: f64,
    /// The worker's flows with their counters (flows on). With many flows they are copied
    /// only into snapshots asked for (`fresh`), not the periodic ones: `flows_total` says how
    /// many there are either way.
    pub flows: Vec<llr_core::flow::FlowInfo>,
    pub flows_total: usize,
    /// `flows` holds every flow (not only those that have seen traffic).
    pub flows_complete: bool,
    /// Flow scheduler context switches (a different flow than the last picked).
    pub flow_switches: u64,
}

/// A change handed to a worker ([`WorkerLink::send`]).
pub struct Sent {
    state: Arc<AtomicU8>,
    rx: Receiver<Result<(), String>>,
}

impl Sent {
    /// Waits up to `timeout` for the outcome; a change not claimed by then is cancelled (and
    /// so never applied). `Err`: not applied.
    pub fn wait(self, timeout: Duration) -> Result<(), String> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(_) => {
                if self
                    .state
                    .compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    Err(format!(
                        "the worker did not pick the change up within {} ms; nothing was changed",
                        timeout.as_millis()
                    ))
                } else {
                    // Claimed: it is being applied right now; its outcome comes shortly.
                    self.rx
                        .recv_timeout(Duration::from_secs(2))
                        .unwrap_or_else(
                            |_| Err("the worker did not confirm the change".to_string()),
                        )
                }
            }
        }
    }
}

/// The link between the control plane and one worker.
pub struct WorkerLink {
    queue: Mutex<Vec<Request>>,
    pending: AtomicBool,
    want_snapshot: AtomicBool,
    /// The next snapshot carries every flow, idle ones included (`flow.list`).
    want_flows: AtomicBool,
    seq: AtomicU64,
    efd: EventFd,
    published: Mutex<Arc<WorkerSnapshot>>,
}

impl WorkerLink {
    /// A link with its eventfd (the worker polls it with its sockets).
    pub fn new() -> std::io::Result<Arc<WorkerLink>> {
        let efd = EventFd::new()?;
        Ok(Arc::new(WorkerLink {
            queue: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            want_snapshot: AtomicBool::new(false),
            want_flows: AtomicBool::new(false),
            seq: AtomicU64::new(0),
            efd,
            published: Mutex::new(Arc::new(WorkerSnapshot::default())),
        }))
    }

    /// The eventfd to poll.
    pub fn fd(&self) -> RawFd {
        self.efd.fd()
    }

    /// Wakes the worker (its poll() on the eventfd), e.g. when a job it waits for is done.
    pub fn kick(&self) {
        self.efd.kick();
    }

    /// Worker: clears the eventfd.
    pub fn clear(&self) {
        self.efd.clear();
    }

    /// Hands `change` to the worker and waits up to `timeout` for it to be applied. `Err` means
    /// it was not applied (refused by the worker, or not picked up in time and cancelled).
    pub fn apply(&self, change: Change, timeout: Duration) -> Result<(), String> {
        self.send(change).wait(timeout)
    }

    /// Hands `change` to the worker without waiting: [`Sent::wait`] for the outcome. Several
    /// workers then apply one change at the same time.
    pub fn send(&self, change: Change) -> Sent {
        let (tx, rx) = sync_channel(1);
        let state = Arc::new(AtomicU8::new(PENDING));
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Request {
                change,
                state: state.clone(),
                ack: tx,
            });
        self.pending.store(true, Ordering::Release);
        self.kick();
        Sent { state, rx }
    }

    /// Worker: whether requests wait (one relaxed load).
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Worker: takes the queued requests.
    pub fn take(&self) -> Vec<Request> {
        self.pending.store(false, Ordering::Release);
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Worker: whether a fresh snapshot is wanted.
    #[inline]
    pub fn snapshot_wanted(&self) -> bool {
        self.want_snapshot.load(Ordering::Relaxed)
    }

    /// Asks that the next snapshots carry every flow (until one is published).
    pub fn want_flow_list(&self) {
        self.want_flows.store(true, Ordering::Release);
    }

    /// Worker: whether the snapshot should carry every flow.
    pub fn flow_list_wanted(&self) -> bool {
        self.want_flows.load(Ordering::Acquire)
    }

    /// Worker: publishes a snapshot.
    pub fn publish(&self, mut s: WorkerSnapshot) {
        s.seq = self.seq.load(Ordering::Relaxed) + 1;
        let had_flows = s.flows_complete;
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(s);
        self.want_snapshot.store(false, Ordering::Relaxed);
        if had_flows {
            self.want_flows.store(false, Ordering::Release);
        }
        self.seq.fetch_add(1, Ordering::Release);
    }

    /// The latest snapshot, without asking the worker.
    pub fn latest(&self) -> Arc<WorkerSnapshot> {
        self.published
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Asks the worker for a fresh snapshot and waits up to
    /// `timeout` for it; returns the latest one either way. The worker only copies counters.
    pub fn fresh(&self, timeout: Duration) -> Arc<WorkerSnapshot> {
        fresh_all(std::slice::from_ref(self), timeout).remove(0)
    }

    /// Asks for a snapshot; returns the publication count to wait past.
    fn ask(&self) -> u64 {
        let before = self.seq.load(Ordering::Acquire);
        self.want_snapshot.store(true, Ordering::Release);
        self.kick();
        before
    }
}

/// [`WorkerLink::fresh`] for several workers: all are asked at once, then each is waited for
/// until one common deadline, so `n` workers cost one wait, not `n`.
pub fn fresh_all<L: std::borrow::Borrow<WorkerLink>>(
    links: &[L],
    timeout: Duration,
) -> Vec<Arc<WorkerSnapshot>> {
    let before: Vec<u64> = links.iter().map(|l| l.borrow().ask()).collect();
    let t = Instant::now();
    for (l, b) in links.iter().zip(before) {
        while l.borrow().seq.load(Ordering::Acquire) == b && t.elapsed() < timeout {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    links.iter().map(|l| l.borrow().latest()).collect()
}

pub(super) fn new_rings(n: usize) -> Vec<RingCounters> {
    (0..n).map(|_| RingCounters::new()).collect()
}
