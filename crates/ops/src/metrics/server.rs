//! The HTTP endpoint serving `GET /metrics`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{render, MetricsSnapshot};
use crate::conns::{Admit, ConnGuard, ConnTable};

/// `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Largest request head accepted (request line plus headers).
pub const MAX_REQUEST: usize = 8 * 1024;
/// Time a request head may take to arrive (in total), and a reply write may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections served at once; at the limit a newcomer closes the oldest one still sending its
/// request, or gets `503` when every one is being answered.
pub const MAX_CONNECTIONS: usize = 16;

/// A minimal HTTP/1.x endpoint for `GET /metrics`, on its own thread. Stops (and joins its
/// thread) on drop.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (use a loopback address unless the operator asked otherwise; port 0 picks a
    /// free one) and serves `snapshot()` rendered on every `GET /metrics`.
    pub fn start<F>(addr: SocketAddr, snapshot: F) -> io::Result<MetricsServer>
    where
        F: Fn() -> MetricsSnapshot + Send + Sync + 'static,
    {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let snapshot = Arc::new(snapshot);
        let conns = ConnTable::new(MAX_CONNECTIONS);
        let thread = std::thread::Builder::new()
            .name("llr-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop2.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    let Ok(c) = stream.try_clone() else { continue };
                    let guard = match conns.admit(Box::new(move || {
                        let _ = c.shutdown(std::net::Shutdown::Both);
                    })) {
                        Admit::Serve(g) => g,
                        Admit::Busy => {
                            refuse_busy(stream);
                            continue;
                        }
                    };
                    let snapshot = snapshot.clone();
                    let spawned = std::thread::Builder::new()
                        .name("llr-metrics-conn".into())
                        .spawn(move || {
                            if let Err(e) = serve_one(stream, &*snapshot, &guard) {
                                tracing::debug!("metrics connection: {e}");
                            }
                        });
                    if spawned.is_err() {
                        tracing::warn!("metrics: cannot spawn a connection thread");
                    }
                }
                conns.close_all();
            })?;
        tracing::info!("metrics on http://{addr}/metrics");
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address (with the real port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // wake the blocking accept
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reply beyond the connection limit while every connection is being answered.
fn refuse_busy(mut s: TcpStream) {
    tracing::warn!("metrics: {MAX_CONNECTIONS} connections are all being answered; refused one");
    let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
    let _ = respond(
        &mut s,
        "503 Service Unavailable",
        "text/plain",
        b"busy, try again\n",
    );
}

fn serve_one(
    mut s: TcpStream,
    snapshot: &(dyn Fn() -> MetricsSnapshot + Send + Sync),
    guard: &ConnGuard,
) -> io::Result<()> {
    // The whole request head must arrive within IO_TIMEOUT, however it is paced.
    let deadline = std::time::Instant::now() + IO_TIMEOUT;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        if buf.len() > MAX_REQUEST {
            return respond(
                &mut s,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"request too large\n",
            );
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request head not complete in time",
            ));
        }
        s.set_read_timeout(Some(left))?;
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(()); // closed before a full request
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    guard.start_request();
    let head = String::from_utf8_lossy(&buf[..head_end]);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => {
            let body =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render(&snapshot())));
            match body {
                Ok(b) => respond(&mut s, "200 OK", CONTENT_TYPE, b.as_bytes()),
                Err(_) => respond(
                    &mut s,
                    "500 Internal Server Error",
                    "text/plain",
                    b"snapshot failed\n",
                ),
            }
        }
        ("GET", _) => respond(&mut s, "404 Not Found", "text/plain", b"try /metrics\n"),
        _ => respond(
            &mut s,
            "405 Method Not Allowed",
            "text/plain",
            b"GET only\n",
        ),
    }
}

fn respond(s: &mut TcpStream, status: &str, ctype: &str, body: &[u8]) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    s.flush()
}
