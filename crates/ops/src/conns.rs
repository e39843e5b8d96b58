//! Connection admission shared by the control socket and the metrics endpoint: a bounded table
//! of live connections where a newcomer at the limit closes the least recently active idle one.
//!
//! A plain "refuse beyond N" lets N slow or hostile clients (a byte every few seconds, each
//! under any per-read timeout) lock operators out. Here "active" moves only when a connection
//! completes a request, so a trickler's age is its connect time: a fresh operator's connection is
//! always the newest and is never the one evicted, while connections that never finish a request
//! are closed first. Only when every connection is running a request is the newcomer refused
//! (the caller sends a "busy" reply).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How the table closes a connection it evicts (shutdown of its socket; its thread then sees an
/// error and exits).
pub type Closer = Box<dyn Fn() + Send>;

struct Entry {
    close: Closer,
    state: Arc<ConnState>,
}

struct ConnState {
    /// Running a request (not evictable).
    busy: AtomicBool,
    /// ms since the table's epoch of the connect or the last completed request.
    active_ms: AtomicU64,
}

/// A bounded set of live connections.
pub struct ConnTable {
    limit: usize,
    epoch: Instant,
    next: AtomicU64,
    live: Mutex<HashMap<u64, Entry>>,
    evicted: AtomicU64,
    refused: AtomicU64,
}

/// What [`ConnTable::admit`] decided.
pub enum Admit {
    /// Serve it; dropping the guard removes it from the table.
    Serve(ConnGuard),
    /// Every slot runs a request: refuse with a "busy" reply.
    Busy,
}

/// A connection's membership of the table.
pub struct ConnGuard {
    table: Arc<ConnTable>,
    id: u64,
    state: Arc<ConnState>,
}

impl ConnTable {
    /// A table of at most `limit` connections (at least 1).
    pub fn new(limit: usize) -> Arc<ConnTable> {
        Arc::new(ConnTable {
            limit: limit.max(1),
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            live: Mutex::new(HashMap::new()),
            evicted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Admits a new connection, evicting the least recently active idle one at the limit.
    pub fn admit(self: &Arc<Self>, close: Closer) -> Admit {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if live.len() >= self.limit {
            let victim = live
                .iter()
                .filter(|(_, e)| !e.state.busy.load(Ordering::Acquire))
                .min_by_key(|(id, e)| (e.state.active_ms.load(Ordering::Acquire), **id))
                .map(|(id, _)| *id);
            match victim.and_then(|id| live.remove(&id)) {
                Some(e) => {
                    (e.close)();
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return Admit::Busy;
                }
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState {
            busy: AtomicBool::new(false),
            active_ms: AtomicU64::new(self.now_ms()),
        });
        live.insert(
            id,
            Entry {
                close,
                state: state.clone(),
            },
        );
        Admit::Serve(ConnGuard {
            table: self.clone(),
            id,
            state,
        })
    }

    /// Closes every live connection (server shutdown).
    pub fn close_all(&self) {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        for e in live.values() {
            (e.close)();
        }
    }

    /// Connections live now.
    pub fn len(&self) -> usize {
        self.live.lock().map(|l| l.len()).unwrap_or(0)
    }

    /// No connection is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (evicted, refused busy) since start.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.evicted.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

impl ConnGuard {
    /// A request is complete and about to run: not evictable until [`ConnGuard::done`].
    pub fn start_request(&self) {
        self.state.busy.store(true, Ordering::Release);
    }

    /// The request's reply is sent: the connection is idle and freshly active.
    pub fn done(&self) {
        self.state
            .active_ms
            .store(self.table.now_ms(), Ordering::Release);
        self.state.busy.store(false, Ordering::Release);
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut live = self.table.live.lock().unwrap_or_else(|e| e.into_inner());
        live.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn closer(closed: &Arc<Vec<AtomicUsize>>, i: usize) -> Closer {
        let c = closed.clone();
        Box::new(move || {
            c[i].fetch_add(1, Ordering::SeqCst);
        })
    }

    #[test]
    fn evicts_least_recently_active_idle_and_refuses_when_all_busy() {
        let closed = Arc::new((0..5).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>());
        let t = ConnTable::new(2);
        let Admit::Serve(a) = t.admit(closer(&closed, 0)) else {
            panic!("room")
        };
        std::thread::sleep(std::time::Duration::from_millis(5));
        let Admit::Serve(b) = t.admit(closer(&closed, 1)) else {
            panic!("room")
        };
        // a completes a request later than b connected: b is now the least recently active
        std::thread::sleep(std::time::Duration::from_millis(5));
        a.start_request();
        a.done();
        let Admit::Serve(c) = t.admit(closer(&closed, 2)) else {
            panic!("b is idle and evictable")
        };
        assert_eq!(closed[1].load(Ordering::SeqCst), 1, "b evicted");
        assert_eq!(closed[0].load(Ordering::SeqCst), 0, "a kept");
        drop(b); // its thread exits later; removing an evicted id is harmless
        assert_eq!(t.len(), 2);
        a.start_request();
        c.start_request();
        assert!(matches!(t.admit(closer(&closed, 3)), Admit::Busy));
        assert_eq!(t.counts(), (1, 1));
        c.done();
        assert!(matches!(t.admit(closer(&closed, 4)), Admit::Serve(_)));
        assert_eq!(closed[2].load(Ordering::SeqCst), 1, "c evicted once idle");
        drop(a);
        t.close_all();
    }
}
