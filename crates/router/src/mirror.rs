//! The thread that mirrors the kernel's routes and neighbours into the forwarder.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use llr_core::fwd::SharedForwarder;
use llr_io::kernel::{self, MirrorSpec};

use crate::error::{RouterError, Step};

/// The kernel route mirror thread; `Drop` stops and joins it.
pub(crate) struct Mirror {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Mirror {
    /// Starts the mirror on `cpus` (from `seed`'s dump, if given: `fwd` must hold what it
    /// built), counting on in `stats`. It sets its affinity itself: it is restarted from control
    /// connection threads as well as from the worker's thread before the worker pins itself.
    pub(crate) fn start(
        spec: MirrorSpec,
        fwd: Arc<SharedForwarder>,
        period: Duration,
        cpus: BTreeSet<usize>,
        seed: Option<kernel::Seed>,
        stats: Arc<Mutex<kernel::MirrorStats>>,
    ) -> Result<Mirror, RouterError> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("llr-mirror".into())
            .spawn(move || {
                if let Err(e) = llr_ops::cpus::set_affinity(&cpus) {
                    tracing::warn!("route mirror: helper cores: {e}");
                }
                kernel::refresh_loop(spec, fwd, period, s, seed, stats)
            })
            .step("spawn the route mirror")?;
        Ok(Mirror {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
