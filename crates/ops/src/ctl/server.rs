//! The control socket server: admission, per-connection deadlines and request dispatch to a
//! [`ControlTarget`].

use serde_json::Value;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{
    parse_request, read_line, Command, CtlError, Listing, Reply, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_READ_TIMEOUT, MAX_CONNECTIONS, MAX_MESSAGE,
};
use crate::conns::{Admit, ConnGuard, ConnTable};

/// What the router implements to be controlled. Called from connection threads, concurrently:
/// a change must be validated first and applied atomically between poll rounds; on `Err` the
/// running configuration must be unchanged.
pub trait ControlTarget: Send + Sync {
    fn handle(&self, cmd: Command) -> Result<Value, CtlError>;

    /// A listing command ([`Command::listing_key`]): pushes the items to `out` as it makes
    /// them and returns the final reply's fields. It must not hold a lock the datapath or other
    /// commands wait on while it pushes: a push may wait for a slow client. The default runs
    /// [`handle`](ControlTarget::handle) and pushes the array it returns under the key.
    fn list(&self, cmd: Command, out: &mut Listing<'_>) -> Result<Value, CtlError> {
        let mut v = self.handle(cmd)?;
        if let Some(Value::Array(items)) = v.get_mut(out.key()).map(Value::take) {
            for it in &items {
                out.push(it)?;
            }
        }
        if let Value::Object(o) = &mut v {
            o.remove(out.key());
        }
        Ok(v)
    }
}

impl<F> ControlTarget for F
where
    F: Fn(Command) -> Result<Value, CtlError> + Send + Sync,
{
    fn handle(&self, cmd: Command) -> Result<Value, CtlError> {
        self(cmd)
    }
}

/// Server options.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Time a client may take to send a whole line once its first byte has arrived: a client
    /// that trickles a byte at a time is closed when it runs out, whatever its pace.
    pub line_timeout: Duration,
    /// Time a connection may sit between requests before it is closed.
    pub idle_timeout: Duration,
    /// Time a reply write may block.
    pub write_timeout: Duration,
    /// Connections served at once; at the limit a newcomer closes the least recently active
    /// idle one, or gets a "busy" reply when every one is running a request.
    pub max_connections: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            line_timeout: DEFAULT_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: Duration::from_secs(5),
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// Why [`CtlServer::bind`] failed.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another llrouter is already serving {0}")]
    InUse(PathBuf),
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

struct Shared {
    stop: AtomicBool,
    conns: Arc<ConnTable>,
}

/// The control socket server. Drop stops it, closes its connections and removes the socket file.
pub struct CtlServer {
    path: PathBuf,
    /// (dev, ino) of the socket file we created: only that file is removed on drop.
    ident: (u64, u64),
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A control socket path taken, listening, with nobody answering yet: a router reserves it
/// before it builds anything, so that a second router on the same path is refused before it
/// loads a table or a classifier. Connections wait in the backlog until
/// [`serve`](Reserved::serve). Drop removes the socket file.
pub struct Reserved {
    path: PathBuf,
    /// (dev, ino) of the socket file we created: only that file is removed on drop.
    ident: (u64, u64),
    listener: Option<UnixListener>,
}

impl Reserved {
    /// Takes `path`: refuses if another server answers there or it is not a socket; removes a
    /// stale socket nobody answers on.
    pub fn take(path: impl AsRef<Path>) -> Result<Self, BindError> {
        let path = path.as_ref().to_path_buf();
        let ioerr = |source| BindError::Io {
            path: path.clone(),
            source,
        };
        match std::fs::symlink_metadata(&path) {
            Ok(m) if !m.file_type().is_socket() => return Err(BindError::NotASocket(path)),
            Ok(_) => match UnixStream::connect(&path) {
                Ok(_) => return Err(BindError::InUse(path)),
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    tracing::warn!("removing stale control socket {}", path.display());
                    std::fs::remove_file(&path).map_err(ioerr)?;
                }
                Err(e) => return Err(ioerr(e)),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(ioerr(e)),
        }
        let listener = llr_io::sys::bind_unix_private(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::AddrInUse {
                BindError::InUse(path.clone())
            } else {
                ioerr(e)
            }
        })?;
        let meta = std::fs::metadata(&path).map_err(ioerr)?;
        Ok(Reserved {
            ident: (meta.dev(), meta.ino()),
            path,
            listener: Some(listener),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts answering: `target` serves every connection, those waiting included.
    pub fn serve(
        mut self,
        target: Arc<dyn ControlTarget>,
        opts: ServerOptions,
    ) -> Result<CtlServer, BindError> {
        let listener = self.listener.take().expect("a reserved socket serves once");
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            conns: ConnTable::new(opts.max_connections),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("llr-ctl".into())
            .spawn(move || accept_loop(listener, sh, target, opts))
            .map_err(|source| {
                remove_if_ours(&self.path, self.ident);
                BindError::Io {
                    path: self.path.clone(),
                    source,
                }
            })?;
        tracing::info!("control socket {}", self.path.display());
        let path = std::mem::take(&mut self.path);
        Ok(CtlServer {
            path,
            ident: self.ident,
            shared,
            thread: Some(thread),
        })
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        // After `serve` the server owns the file (`path` is empty then).
        if self.listener.is_some() {
            remove_if_ours(&self.path, self.ident);
        }
    }
}

fn remove_if_ours(path: &Path, ident: (u64, u64)) {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if (m.dev(), m.ino()) == ident {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl CtlServer {
    /// Serves `target` on `path` with default options.
    pub fn bind(path: impl AsRef<Path>, target: Arc<dyn ControlTarget>) -> Result<Self, BindError> {
        Self::bind_with(path, target, ServerOptions::default())
    }

    /// Serves `target` on `path` ([`Reserved::take`], then [`Reserved::serve`]).
    pub fn bind_with(
        path: impl AsRef<Path>,
        target: Arc<dyn ControlTarget>,
        opts: ServerOptions,
    ) -> Result<Self, BindError> {
        Reserved::take(path)?.serve(target, opts)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the blocking accept. If the socket file is gone (removed by someone else),
        // nothing can reach the accept: the thread is left blocked there, holding only the
        // listener, rather than hanging the router's shutdown on it.
        if UnixStream::connect(&self.path).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        self.shared.conns.close_all();
        remove_if_ours(&self.path, self.ident);
    }
}

fn accept_loop(
    listener: UnixListener,
    shared: Arc<Shared>,
    target: Arc<dyn ControlTarget>,
    opts: ServerOptions,
) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("control socket accept: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let closer = match stream.try_clone() {
            Ok(c) => Box::new(move || {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }),
            Err(_) => continue,
        };
        let guard = match shared.conns.admit(closer) {
            Admit::Serve(g) => g,
            Admit::Busy => {
                refuse_busy(stream, opts.max_connections);
                continue;
            }
        };
        let (tg, op) = (target.clone(), opts.clone());
        let spawned = std::thread::Builder::new()
            .name("llr-ctl-conn".into())
            .spawn(move || {
                if let Err(e) = serve_conn(stream, &*tg, &op, &guard) {
                    tracing::debug!("control connection: {e}");
                }
            });
        if spawned.is_err() {
            tracing::warn!("control socket: cannot spawn a connection thread");
        }
    }
}

/// The reply of a connection beyond the limit while every slot runs a request.
fn refuse_busy(mut stream: UnixStream, limit: usize) {
    tracing::warn!("control socket: {limit} connections are all running requests; refused one");
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let e = CtlError::new(
        "connection",
        format!("busy: all {limit} control connections are running requests; try again"),
    );
    let _ = send(&mut stream, &Reply::err(Value::Null, e));
}

/// [`read_line`] on a socket with two deadlines: `idle` for the first byte of the line, then
/// `line` for the whole line from that byte on. `TimedOut` when either runs out.
fn read_line_deadline(
    r: &mut BufReader<UnixStream>,
    max: usize,
    idle: Duration,
    line: Duration,
) -> io::Result<Option<Vec<u8>>> {
    let mut deadline: Option<Instant> = None;
    let mut timed = DeadlineReader {
        inner: r,
        idle,
        line,
        deadline: &mut deadline,
    };
    read_line(&mut timed, max)
}

/// A `BufRead` that sets the socket's read timeout to what is left of the current deadline
/// before every refill.
struct DeadlineReader<'a> {
    inner: &'a mut BufReader<UnixStream>,
    idle: Duration,
    line: Duration,
    deadline: &'a mut Option<Instant>,
}

impl io::Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = {
            let b = io::BufRead::fill_buf(self)?;
            let n = b.len().min(buf.len());
            buf[..n].copy_from_slice(&b[..n]);
            n
        };
        io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl BufRead for DeadlineReader<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.inner.buffer().is_empty() {
            let left = match *self.deadline {
                None => self.idle,
                Some(d) => d.saturating_duration_since(Instant::now()),
            };
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "line not complete in time",
                ));
            }
            self.inner.get_ref().set_read_timeout(Some(left))?;
        }
        let buf = self.inner.fill_buf()?;
        if !buf.is_empty() && self.deadline.is_none() {
            *self.deadline = Some(Instant::now() + self.line);
        }
        Ok(buf)
    }

    fn consume(&mut self, n: usize) {
        self.inner.consume(n)
    }
}

fn send(w: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    let mut s = serde_json::to_vec(reply).map_err(io::Error::other)?;
    if s.len() > MAX_MESSAGE {
        let e = CtlError::new(
            "result",
            format!("reply of {} bytes exceeds {MAX_MESSAGE}", s.len()),
        );
        s = serde_json::to_vec(&Reply::err(reply.id.clone(), e)).map_err(io::Error::other)?;
    }
    s.push(b'\n');
    w.write_all(&s)?;
    w.flush()
}

/// Runs one command; a listing's item lines go to `w` before the reply is returned.
fn run(target: &dyn ControlTarget, cmd: Command, id: Value, w: &mut UnixStream) -> Reply {
    let name = cmd.name();
    let change = cmd.is_change();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match cmd.listing_key() {
        None => target.handle(cmd),
        Some(key) => {
            let mut sink = |line: &[u8]| w.write_all(line);
            let mut out = Listing::new(key, &id, &mut sink);
            let fin = target.list(cmd, &mut out)?;
            out.flush()?;
            Ok(fin)
        }
    }));
    match res {
        Ok(Ok(v)) => {
            if change {
                tracing::info!("ctl {name}: applied");
            }
            Reply::ok(id, v)
        }
        Ok(Err(e)) => {
            if change {
                tracing::info!("ctl {name}: rejected: {e}");
            }
            Reply::err(id, e)
        }
        Err(_) => Reply::err(id, CtlError::new("cmd", format!("{name}: internal error"))),
    }
}

fn serve_conn(
    stream: UnixStream,
    target: &dyn ControlTarget,
    opts: &ServerOptions,
    guard: &ConnGuard,
) -> io::Result<()> {
    stream.set_write_timeout(Some(opts.write_timeout))?;
    let mut w = stream.try_clone()?;
    // The reader may buffer beyond one line: a client may pipeline requests.
    let mut r = BufReader::with_capacity(8192, stream);
    loop {
        let line =
            match read_line_deadline(&mut r, MAX_MESSAGE, opts.idle_timeout, opts.line_timeout) {
                Ok(Some(l)) => l,
                Ok(None) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    let _ = send(
                        &mut w,
                        &Reply::err(Value::Null, CtlError::new("message", e.to_string())),
                    );
                    return Err(e);
                }
                Err(e) => return Err(e), // timeout, half-written message, reset: close
            };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        guard.start_request();
        let (id, cmd) = parse_request(&line);
        let reply = match cmd {
            Err(e) => Reply::err(id, e),
            Ok(cmd) => run(target, cmd, id, &mut w),
        };
        send(&mut w, &reply)?;
        guard.done();
    }
}
