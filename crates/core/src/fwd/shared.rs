//! The forwarder as the workers see it: published by pointer swap, read without a lock.
//!
//! Route updates go straight into the shared [`RouteTable`](super::RouteTable) (atomic entries,
//! see [`lpm`](super::lpm)); the small tables (neighbours, interfaces, policy) are replaced as a
//! whole: the writer clones the current forwarder, changes the clone and publishes it. A worker
//! loads the current forwarder once per grant and keeps it for the grant; it never waits for a
//! writer, and a writer never waits for it.

use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, Guard};

use super::{Forwarder, RouteTable};

/// What a worker holds for one grant: the forwarder current when the grant began.
pub type ForwarderGuard = Guard<Arc<Forwarder>>;

/// A [`Forwarder`] shared between its writers (route mirror, control plane) and the workers.
#[derive(Debug)]
pub struct SharedForwarder {
    cur: ArcSwap<Forwarder>,
    /// Serialises writers, so that a clone-change-publish never loses another's change.
    writers: Mutex<()>,
}

impl Default for SharedForwarder {
    fn default() -> Self {
        Self::new(Forwarder::new())
    }
}

impl SharedForwarder {
    /// Publishes `f`.
    pub fn new(f: Forwarder) -> Self {
        SharedForwarder {
            cur: ArcSwap::from_pointee(f),
            writers: Mutex::new(()),
        }
    }

    /// The current forwarder, for one grant (cheap: no reference count is touched).
    #[inline]
    pub fn load(&self) -> ForwarderGuard {
        self.cur.load()
    }

    /// The current forwarder, to keep.
    pub fn load_full(&self) -> Arc<Forwarder> {
        self.cur.load_full()
    }

    /// The current route table: updates to it are seen by every worker at once.
    pub fn routes(&self) -> Arc<RouteTable> {
        self.cur.load().routes.clone()
    }

    /// Changes the small tables: `change` runs on a copy that is then published. The route
    /// table is shared by the copy, so route changes made through it are not copies.
    pub fn update<R>(&self, change: impl FnOnce(&mut Forwarder) -> R) -> R {
        let _w = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        let mut f = Forwarder::clone(&self.cur.load());
        let r = change(&mut f);
        self.cur.store(Arc::new(f));
        r
    }

    /// Publishes a new forwarder (new tables); returns the old one, which lives on until the
    /// last worker holding it finishes its grant.
    pub fn replace(&self, f: Forwarder) -> Arc<Forwarder> {
        let _w = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        self.cur.swap(Arc::new(f))
    }
}
