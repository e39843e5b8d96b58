//! The run-time control plane (paper 003): a versioned, newline-delimited JSON protocol over a
//! Unix-domain stream socket, its server ([`CtlServer`]) and client ([`CtlClient`]).
//!
//! # Protocol (version 1)
//! One request per line, one reply per line, any number per connection:
//! ```text
//! → {"version":1,"id":7,"cmd":"budget.set","class":"rt","budget":60}
//! ← {"version":1,"id":7,"ok":true,"result":{...}}
//! ← {"version":1,"id":7,"ok":false,"error":{"field":"budget","reason":"must be at least 1"}}
//! ```
//! `id` is any JSON value, echoed back (`null` when the request had none or could not be
//! read). The command's arguments sit beside `cmd` ([`Command`] lists them); unknown fields are
//! rejected. Limits: a line longer than [`MAX_MESSAGE`] bytes gets an error reply and the
//! connection is closed; a connection that does not complete a line within the read timeout
//! (default [`DEFAULT_READ_TIMEOUT`]) is closed, as is one that ends in the middle of a line.
//! Malformed JSON, a wrong `version` or bad arguments get an error reply and the connection stays
//! usable.
//!
//! # Server side
//! The router implements [`ControlTarget`]; [`CtlServer::bind`] serves it on a socket created with
//! mode 0600 before it listens, refuses to start when another live server answers on the path,
//! removes a stale socket file left by a crashed router, and removes its file on drop.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::conns::{Admit, ConnGuard, ConnTable};

/// Protocol version spoken here.
pub const VERSION: u32 = 1;
/// Largest request or reply line, in bytes (without the newline).
pub const MAX_MESSAGE: usize = 64 * 1024;
/// Default time a connection may take to send a complete line.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a connection may stay idle between requests (`llrouter top` asks every second).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Entries a table dump (`fib`, `neighbours`) returns unless asked for another number.
pub const DEFAULT_DUMP_LIMIT: usize = 100;
/// Most entries a table dump returns: a reply must fit in [`MAX_MESSAGE`].
pub const MAX_DUMP_LIMIT: usize = 400;
/// Default socket path (systemd `RuntimeDirectory=llrouter`).
pub const DEFAULT_SOCKET: &str = "/run/llrouter/llrouter.sock";
/// Connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 32;

/// A rejected request: the offending field and why. Also what [`ControlTarget::handle`] returns
/// for a change it refuses (the running configuration stays as it was).
pub type CtlError = llr_core::FieldError;

/// Wake-up mode of the poll loop: the worker's own type (`wakeup.set` hands it over as is).
pub use llr_io::xsk::WakeMode;

/// One control command with its arguments. The JSON form is `{"cmd": NAME, ...arguments}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", deny_unknown_fields)]
pub enum Command {
    /// Router state: strategy, classes and budgets, wake-up mode, workers, uptime, config path.
    #[serde(rename = "status")]
    Status {},
    /// Counters: a [`crate::metrics::MetricsSnapshot`] as JSON.
    #[serde(rename = "counters")]
    Counters {},
    /// The router's interfaces: name, ifindex, MTU, MAC, addresses and counters
    /// (`{"interfaces": [crate::views::InterfaceView, …]}`).
    #[serde(rename = "interfaces")]
    Interfaces {},
    /// The forwarder's routes as the worker uses them, sorted, at most `limit`
    /// (default [`DEFAULT_DUMP_LIMIT`], at most [`MAX_DUMP_LIMIT`]):
    /// `{"routes": [crate::views::RouteView, …], "total": N}`.
    #[serde(rename = "fib")]
    Fib {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
    },
    /// The forwarder's neighbour table, like `fib`: `{"neighbours": [crate::views::NeighbourView,
    /// …], "total": N}`.
    #[serde(rename = "neighbours")]
    Neighbours {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
    },
    /// Classification rules with their ids, in the config's field names:
    /// `{"rules":[{"id":1,"rule":"class=rt dscp=46"}]}`.
    #[serde(rename = "rules.list")]
    RulesList {},
    /// Adds a rule in the one-line syntax of `llr_core::classify` (`class=rt dscp=46`);
    /// result `{"id": N}`.
    #[serde(rename = "rules.add")]
    RulesAdd { rule: String },
    /// Removes the rule with this id.
    /// On the wire the argument is `rule_id`: `id` is the request's own id (echoed in the reply).
    #[serde(rename = "rules.remove")]
    RulesRemove {
        #[serde(rename = "rule_id")]
        id: u64,
    },
    /// Sets the ring budget of a class (packets, or ns for time-slice strategies).
    #[serde(rename = "budget.set")]
    BudgetSet { class: String, budget: u32 },
    /// Sets the device budget (NAPI weight).
    #[serde(rename = "device_budget.set")]
    DeviceBudgetSet { budget: u32 },
    /// Switches the scheduling strategy (`sq`, `rr`, `ll-rr`, `ll-wfq`, …).
    #[serde(rename = "strategy.set")]
    StrategySet {
        strategy: llr_core::sched::StrategyKind,
    },
    /// Switches the wake-up mode; `spin_us` only for `adaptive`.
    #[serde(rename = "wakeup.set")]
    WakeupSet {
        mode: WakeMode,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spin_us: Option<u64>,
    },
    /// Adds a static route: `prefix` (`10.1.0.0/16`, `2001:db8::/32`), optional gateway, egress
    /// interface.
    #[serde(rename = "route.add")]
    RouteAdd {
        prefix: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
        dev: String,
    },
    /// Removes the static route for `prefix`.
    #[serde(rename = "route.remove")]
    RouteRemove { prefix: String },
    /// Re-reads the configuration file and applies it (validated first, all or nothing).
    #[serde(rename = "reload")]
    Reload {},
}

impl Command {
    /// The wire name (`"budget.set"`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Status {} => "status",
            Command::Counters {} => "counters",
            Command::Interfaces {} => "interfaces",
            Command::Fib { .. } => "fib",
            Command::Neighbours { .. } => "neighbours",
            Command::RulesList {} => "rules.list",
            Command::RulesAdd { .. } => "rules.add",
            Command::RulesRemove { .. } => "rules.remove",
            Command::BudgetSet { .. } => "budget.set",
            Command::DeviceBudgetSet { .. } => "device_budget.set",
            Command::StrategySet { .. } => "strategy.set",
            Command::WakeupSet { .. } => "wakeup.set",
            Command::RouteAdd { .. } => "route.add",
            Command::RouteRemove { .. } => "route.remove",
            Command::Reload {} => "reload",
        }
    }

    /// Whether the command changes the running configuration.
    pub fn is_change(&self) -> bool {
        !matches!(
            self,
            Command::Status {}
                | Command::Counters {}
                | Command::RulesList {}
                | Command::Interfaces {}
                | Command::Fib { .. }
                | Command::Neighbours { .. }
        )
    }
}

/// One entry of `rules.list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleEntry {
    pub id: u64,
    pub rule: String,
}

/// A reply line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    pub version: u32,
    #[serde(default)]
    pub id: Value,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<CtlError>,
}

impl Reply {
    pub fn ok(id: Value, result: Value) -> Self {
        Reply {
            version: VERSION,
            id,
            ok: true,
            result: Some(result),
            error: None,
        }
    }
    pub fn err(id: Value, e: CtlError) -> Self {
        Reply {
            version: VERSION,
            id,
            ok: false,
            result: None,
            error: Some(e),
        }
    }
    /// `result` on success, the error otherwise.
    pub fn into_result(self) -> Result<Value, CtlError> {
        match (self.ok, self.result, self.error) {
            (true, r, _) => Ok(r.unwrap_or(Value::Null)),
            (false, _, Some(e)) => Err(e),
            (false, _, None) => Err(CtlError::new("reply", "ok=false without an error")),
        }
    }
}

/// Parses one request line: `(id, command)`, or `(id, error)` with the id recovered where
/// possible so the error reply can carry it.
pub fn parse_request(line: &[u8]) -> (Value, Result<Command, CtlError>) {
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return (
                Value::Null,
                Err(CtlError::new("message", format!("bad JSON: {e}"))),
            )
        }
    };
    let Value::Object(mut obj) = v else {
        return (
            Value::Null,
            Err(CtlError::new("message", "not a JSON object")),
        );
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    match obj.remove("version") {
        None => return (id, Err(CtlError::new("version", "missing"))),
        Some(Value::Number(n)) if n.as_u64() == Some(VERSION as u64) => {}
        Some(other) => {
            return (
                id,
                Err(CtlError::new(
                    "version",
                    format!("unsupported version {other}; this router speaks {VERSION}"),
                )),
            )
        }
    }
    if !obj.contains_key("cmd") {
        return (id, Err(CtlError::new("cmd", "missing")));
    }
    let cmd = serde_json::from_value::<Command>(Value::Object(obj)).map_err(serde_error);
    (id, cmd)
}

/// Turns a serde message into a field/reason pair (`unknown field `x`` → field `x`).
fn serde_error(e: serde_json::Error) -> CtlError {
    let msg = e.to_string();
    let between = |m: &str| m.split('`').nth(1).map(str::to_string);
    let field = if msg.starts_with("unknown field") || msg.starts_with("missing field") {
        between(&msg)
    } else if msg.starts_with("unknown variant") {
        // which enum it was shows in the list of expected names
        if msg.contains("`status`") {
            Some("cmd".into())
        } else if msg.contains("`ll-wfq`") {
            Some("strategy".into())
        } else if msg.contains("`interrupt`") {
            Some("mode".into())
        } else {
            None
        }
    } else {
        None
    };
    CtlError::new(field.unwrap_or_else(|| "arguments".into()), msg)
}

/// What the router implements to be controlled. Called from connection threads, concurrently:
/// a change must be validated first and applied atomically between poll rounds; on `Err` the
/// running configuration must be unchanged.
pub trait ControlTarget: Send + Sync {
    fn handle(&self, cmd: Command) -> Result<Value, CtlError>;
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

impl CtlServer {
    /// Serves `target` on `path` with default options.
    pub fn bind(path: impl AsRef<Path>, target: Arc<dyn ControlTarget>) -> Result<Self, BindError> {
        Self::bind_with(path, target, ServerOptions::default())
    }

    /// Serves `target` on `path`.
    pub fn bind_with(
        path: impl AsRef<Path>,
        target: Arc<dyn ControlTarget>,
        opts: ServerOptions,
    ) -> Result<Self, BindError> {
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
        let ident = (meta.dev(), meta.ino());
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            conns: ConnTable::new(opts.max_connections),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("llr-ctl".into())
            .spawn(move || accept_loop(listener, sh, target, opts))
            .map_err(ioerr)?;
        tracing::info!("control socket {}", path.display());
        Ok(CtlServer {
            path,
            ident,
            shared,
            thread: Some(thread),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // wake the blocking accept
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.conns.close_all();
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if (m.dev(), m.ino()) == self.ident {
                let _ = std::fs::remove_file(&self.path);
            }
        }
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

/// Reads one line of at most `max` bytes. `Ok(None)`: clean end of stream between lines.
/// Errors: `InvalidData` when the line is too long, `UnexpectedEof` when the stream ends inside
/// a line, `WouldBlock`/`TimedOut` on timeout.
pub fn read_line<R: BufRead>(r: &mut R, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return if line.is_empty() {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection ended inside a message",
                ))
            };
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(p) => (p + 1, true),
            None => (buf.len(), false),
        };
        let content = if done { take - 1 } else { take };
        if line.len() + content > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("message larger than {max} bytes"),
            ));
        }
        line.extend_from_slice(&buf[..content]);
        r.consume(take);
        if done {
            return Ok(Some(line));
        }
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
            Ok(cmd) => {
                let name = cmd.name();
                let change = cmd.is_change();
                let res =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target.handle(cmd)));
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
                    Err(_) => {
                        Reply::err(id, CtlError::new("cmd", format!("{name}: internal error")))
                    }
                }
            }
        };
        send(&mut w, &reply)?;
        guard.done();
    }
}

/// A control-plane client.
pub struct CtlClient {
    r: BufReader<UnixStream>,
    w: UnixStream,
    next_id: u64,
}

impl CtlClient {
    /// Connects to `path`; `timeout` bounds every later read and write.
    pub fn connect(path: impl AsRef<Path>, timeout: Duration) -> io::Result<Self> {
        let path = path.as_ref();
        let s = UnixStream::connect(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{}: {e} (is llrouter running?)", path.display()),
            )
        })?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        Ok(CtlClient {
            w: s.try_clone()?,
            r: BufReader::new(s),
            next_id: 1,
        })
    }

    /// Sends `cmd` and waits for its reply.
    pub fn call(&mut self, cmd: &Command) -> io::Result<Reply> {
        let id = self.next_id;
        self.next_id += 1;
        let mut v = serde_json::to_value(cmd).map_err(io::Error::other)?;
        if let Value::Object(o) = &mut v {
            o.insert("version".into(), VERSION.into());
            o.insert("id".into(), id.into());
        }
        let mut line = serde_json::to_vec(&v).map_err(io::Error::other)?;
        line.push(b'\n');
        self.w.write_all(&line)?;
        self.w.flush()?;
        let reply = read_line(&mut self.r, MAX_MESSAGE)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
        })?;
        let reply: Reply = serde_json::from_slice(&reply)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad reply: {e}")))?;
        if reply.id != id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("reply id {} does not match request id {id}", reply.id),
            ));
        }
        Ok(reply)
    }

    /// Sends raw bytes (for tests and debugging) and reads one reply line, if any.
    pub fn raw(&mut self, bytes: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.w.write_all(bytes)?;
        self.w.flush()?;
        read_line(&mut self.r, MAX_MESSAGE)
    }
}

/// Mode bits of the socket file (for checks and `status`).
pub fn socket_mode(path: &Path) -> io::Result<u32> {
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    /// A unique socket path under the temp dir.
    fn sock(tag: &str) -> PathBuf {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "llr-ctl-{}-{}-{}",
            std::process::id(),
            tag,
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("s.sock")
    }

    fn cleanup(p: &Path) {
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    /// A mock router: a budget table that validates before changing.
    struct Mock {
        budgets: Mutex<HashMap<String, u32>>,
        calls: AtomicUsize,
    }

    impl ControlTarget for Mock {
        fn handle(&self, cmd: Command) -> Result<Value, CtlError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            match cmd {
                Command::Status {} => Ok(serde_json::json!({"strategy": "ll-wfq"})),
                Command::BudgetSet { class, budget } => {
                    if budget == 0 {
                        return Err(CtlError::new("budget", "must be at least 1"));
                    }
                    let mut b = self.budgets.lock().unwrap();
                    match b.get_mut(&class) {
                        Some(v) => {
                            *v = budget;
                            Ok(serde_json::json!({"class": class, "budget": budget}))
                        }
                        None => Err(CtlError::new("class", format!("no class {class:?}"))),
                    }
                }
                Command::Reload {} => panic!("boom"),
                other => Ok(serde_json::json!({"cmd": other.name()})),
            }
        }
    }

    fn server(tag: &str, timeout: Duration) -> (CtlServer, Arc<Mock>, PathBuf) {
        let p = sock(tag);
        let m = Arc::new(Mock {
            budgets: Mutex::new([("rt".to_string(), 60), ("be".to_string(), 4)].into()),
            calls: AtomicUsize::new(0),
        });
        let s = CtlServer::bind_with(
            &p,
            m.clone(),
            ServerOptions {
                line_timeout: timeout,
                idle_timeout: timeout,
                write_timeout: Duration::from_secs(2),
                ..ServerOptions::default()
            },
        )
        .unwrap();
        (s, m, p)
    }

    fn client(p: &Path) -> CtlClient {
        CtlClient::connect(p, Duration::from_secs(5)).unwrap()
    }

    fn raw_reply(c: &mut CtlClient, bytes: &[u8]) -> Reply {
        let line = c.raw(bytes).unwrap().expect("a reply line");
        serde_json::from_slice(&line).unwrap()
    }

    #[test]
    fn command_json_shape() {
        let c = Command::BudgetSet {
            class: "rt".into(),
            budget: 60,
        };
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::json!({"cmd": "budget.set", "class": "rt", "budget": 60})
        );
        let (id, cmd) =
            parse_request(br#"{"version":1,"id":"a","cmd":"strategy.set","strategy":"ll-rr"}"#);
        assert_eq!(id, Value::from("a"));
        assert_eq!(
            cmd.unwrap(),
            Command::StrategySet {
                strategy: llr_core::sched::StrategyKind::LlRr
            }
        );
        for (line, field) in [
            (&br#"{"version":1,"cmd":"status","x":1}"#[..], "x"),
            (
                br#"{"version":1,"cmd":"budget.set","class":"rt"}"#,
                "budget",
            ),
            (br#"{"version":1,"cmd":"nope"}"#, "cmd"),
            (br#"{"version":1}"#, "cmd"),
            (br#"{"version":2,"cmd":"status"}"#, "version"),
            (br#"{"version":"1","cmd":"status"}"#, "version"),
            (br#"{"cmd":"status"}"#, "version"),
            (
                br#"{"version":1,"cmd":"strategy.set","strategy":"fast"}"#,
                "strategy",
            ),
            (br#"{"version":1,"cmd":"wakeup.set","mode":"nap"}"#, "mode"),
            (br#"[1,2]"#, "message"),
            (br#"{"version":1,"#, "message"),
        ] {
            let (_, r) = parse_request(line);
            assert_eq!(
                r.unwrap_err().field,
                field,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn round_trip_and_rejected_change() {
        let (srv, m, p) = server("rt", Duration::from_secs(5));
        let mut c = client(&p);
        let r = c.call(&Command::Status {}).unwrap();
        assert!(r.ok);
        assert_eq!(r.result.unwrap()["strategy"], "ll-wfq");
        let r = c
            .call(&Command::BudgetSet {
                class: "rt".into(),
                budget: 0,
            })
            .unwrap();
        assert_eq!(
            r.into_result().unwrap_err(),
            CtlError::new("budget", "must be at least 1")
        );
        assert_eq!(m.budgets.lock().unwrap()["rt"], 60); // untouched
        let r = c
            .call(&Command::BudgetSet {
                class: "rt".into(),
                budget: 30,
            })
            .unwrap();
        assert!(r.ok);
        assert_eq!(m.budgets.lock().unwrap()["rt"], 30);
        // a panicking handler gives an error reply, and the server goes on
        let r = c.call(&Command::Reload {}).unwrap();
        assert_eq!(r.error.unwrap().field, "cmd");
        assert!(c.call(&Command::Status {}).unwrap().ok);
        drop(srv);
        cleanup(&p);
    }

    #[test]
    fn socket_is_private() {
        let (srv, _m, p) = server("mode", Duration::from_secs(5));
        assert_eq!(socket_mode(&p).unwrap(), 0o600);
        drop(srv);
        assert!(!p.exists(), "socket file removed on drop");
        cleanup(&p);
    }

    #[test]
    fn second_server_refused_stale_socket_replaced() {
        let (srv, _m, p) = server("dup", Duration::from_secs(5));
        let m2: Arc<dyn ControlTarget> = Arc::new(|_c: Command| Ok(Value::Null));
        let e = CtlServer::bind(&p, m2.clone()).err().expect("refused");
        assert_eq!(
            e.to_string(),
            format!("another llrouter is already serving {}", p.display())
        );
        // the first one still works
        assert!(client(&p).call(&Command::Status {}).unwrap().ok);
        drop(srv);

        // a stale socket file (bound, never listening: like a crashed router's) is replaced
        let stale = std::os::unix::net::UnixDatagram::bind(&p).unwrap();
        drop(stale);
        assert!(p.exists());
        let srv2 = CtlServer::bind(&p, m2.clone()).unwrap();
        assert!(client(&p).call(&Command::Status {}).unwrap().ok);
        drop(srv2);

        // a regular file is never replaced
        std::fs::write(&p, "x").unwrap();
        assert!(matches!(
            CtlServer::bind(&p, m2).err(),
            Some(BindError::NotASocket(_))
        ));
        cleanup(&p);
    }

    #[test]
    fn malformed_messages_get_errors_and_server_keeps_serving() {
        let (srv, m, p) = server("bad", Duration::from_millis(300));
        let mut c = client(&p);
        // bad JSON: error reply, connection stays usable
        let r = raw_reply(&mut c, b"{not json\n");
        assert!(!r.ok);
        assert_eq!(r.error.unwrap().field, "message");
        // unknown field, id echoed
        let r = raw_reply(
            &mut c,
            br#"{"version":1,"id":9,"cmd":"status","extra":true}"#
                .iter()
                .chain(b"\n")
                .copied()
                .collect::<Vec<_>>()
                .as_slice(),
        );
        assert_eq!(r.id, Value::from(9));
        assert_eq!(r.error.unwrap().field, "extra");
        // wrong version
        let r = raw_reply(&mut c, b"{\"version\":7,\"id\":1,\"cmd\":\"status\"}\n");
        assert_eq!(r.error.unwrap().field, "version");
        // still fine
        assert!(c.call(&Command::Status {}).unwrap().ok);
        assert_eq!(
            m.calls.load(Ordering::SeqCst),
            1,
            "bad requests never reach the router"
        );

        // oversize: error reply, then closed
        let mut big = client(&p);
        let mut msg = vec![b' '; MAX_MESSAGE + 10];
        msg.push(b'\n');
        let r = raw_reply(&mut big, &msg);
        assert!(r.error.unwrap().reason.contains("larger than"));
        assert!(
            big.raw(b"").map(|l| l.is_none()).unwrap_or(true),
            "closed after oversize"
        );

        // half-written message then EOF: closed without a reply
        let mut half = UnixStream::connect(&p).unwrap();
        half.write_all(br#"{"version":1,"cmd":"sta"#).unwrap();
        half.shutdown(std::net::Shutdown::Write).unwrap();
        half.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut rest = Vec::new();
        std::io::Read::read_to_end(&mut half, &mut rest).unwrap();
        assert!(rest.is_empty());

        // silent client: closed after the read timeout, others served meanwhile
        let mut silent = UnixStream::connect(&p).unwrap();
        let t0 = Instant::now();
        let mut c2 = client(&p);
        assert!(c2.call(&Command::Status {}).unwrap().ok);
        assert!(
            t0.elapsed() < Duration::from_millis(250),
            "not blocked by the silent client"
        );
        silent
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 16];
        let n = std::io::Read::read(&mut silent, &mut buf).unwrap_or(0);
        assert_eq!(n, 0, "silent client closed");
        assert!(t0.elapsed() >= Duration::from_millis(250));

        // a slow writer that sends part of a line and stalls is closed too
        let mut slow = UnixStream::connect(&p).unwrap();
        slow.write_all(b"{\"version\":1,").unwrap();
        slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(std::io::Read::read(&mut slow, &mut buf).unwrap_or(0), 0);

        // the first client idled past the timeout too and was closed; new ones are served
        assert!(c.call(&Command::Status {}).is_err());
        assert!(client(&p).call(&Command::Status {}).unwrap().ok);
        drop(srv);
        cleanup(&p);
    }

    /// 40 clients that trickle a byte every 200 ms (each under any per-read timeout) and
    /// reconnect when closed: an operator's `status` is still answered within 1 s, every time.
    #[test]
    fn trickling_clients_cannot_lock_operators_out() {
        let p = sock("trickle");
        let m = Arc::new(Mock {
            budgets: Mutex::new(HashMap::new()),
            calls: AtomicUsize::new(0),
        });
        let srv = CtlServer::bind(&p, m).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let reconnects = Arc::new(AtomicUsize::new(0));
        let tricklers: Vec<_> = (0..40)
            .map(|_| {
                let (p, stop, rc) = (p.clone(), stop.clone(), reconnects.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut s) = UnixStream::connect(&p) else {
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        };
                        rc.fetch_add(1, Ordering::Relaxed);
                        while !stop.load(Ordering::Relaxed) && s.write_all(b"{").is_ok() {
                            std::thread::sleep(Duration::from_millis(200));
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let mut worst = Duration::ZERO;
        for _ in 0..10 {
            let t0 = Instant::now();
            let r = CtlClient::connect(&p, Duration::from_secs(1))
                .and_then(|mut c| c.call(&Command::Status {}));
            let took = t0.elapsed();
            worst = worst.max(took);
            let r = r.unwrap_or_else(|e| panic!("status failed after {took:?}: {e}"));
            assert!(r.ok, "{r:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
        for t in tricklers {
            t.join().unwrap();
        }
        assert!(worst < Duration::from_secs(1), "worst {worst:?}");
        // the tricklers really occupied the table: more connects than slots
        assert!(reconnects.load(Ordering::Relaxed) > MAX_CONNECTIONS);
        drop(srv);
        cleanup(&p);
    }

    #[test]
    fn busy_reply_when_every_connection_runs_a_request() {
        struct Slow;
        impl ControlTarget for Slow {
            fn handle(&self, _cmd: Command) -> Result<Value, CtlError> {
                std::thread::sleep(Duration::from_millis(600));
                Ok(Value::Null)
            }
        }
        let p = sock("busy");
        let opts = ServerOptions {
            max_connections: 2,
            ..ServerOptions::default()
        };
        let srv = CtlServer::bind_with(&p, Arc::new(Slow), opts).unwrap();
        let running: Vec<_> = (0..2)
            .map(|_| {
                let p = p.clone();
                std::thread::spawn(move || client(&p).call(&Command::Status {}).unwrap().ok)
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let s = UnixStream::connect(&p).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut r = BufReader::new(s);
        let line = read_line(&mut r, MAX_MESSAGE)
            .unwrap()
            .expect("a busy reply");
        let reply: Reply = serde_json::from_slice(&line).unwrap();
        let e = reply.into_result().unwrap_err();
        assert_eq!(e.field, "connection");
        assert!(e.reason.starts_with("busy"), "{e}");
        for t in running {
            assert!(t.join().unwrap(), "the running requests were not disturbed");
        }
        assert!(client(&p).call(&Command::Status {}).unwrap().ok);
        drop(srv);
        cleanup(&p);
    }

    #[test]
    fn drop_closes_open_connections() {
        let (srv, _m, p) = server("drop", Duration::from_secs(30));
        let mut c = client(&p);
        assert!(c.call(&Command::Status {}).unwrap().ok);
        let t0 = Instant::now();
        drop(srv);
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(c.call(&Command::Status {}).is_err());
        cleanup(&p);
    }

    #[test]
    fn read_line_limits() {
        let mut r = BufReader::with_capacity(4, &b"abc\ndefgh\nxy"[..]);
        assert_eq!(read_line(&mut r, 5).unwrap().unwrap(), b"abc");
        assert_eq!(read_line(&mut r, 5).unwrap().unwrap(), b"defgh");
        assert_eq!(
            read_line(&mut r, 5).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        let mut r = BufReader::with_capacity(4, &b"abcdefgh\n"[..]);
        assert_eq!(
            read_line(&mut r, 5).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        let mut r = BufReader::new(&b""[..]);
        assert!(read_line(&mut r, 5).unwrap().is_none());
    }
}
