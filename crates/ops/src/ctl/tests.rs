//! Tests of the protocol, the server and the client.

use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use llr_core::sched::Budget;
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

/// A unique socket path under the temp dir; its directory is removed when this drops, also
/// when the test fails.
struct TestSock(PathBuf);

impl std::ops::Deref for TestSock {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for TestSock {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestSock {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn sock(tag: &str) -> TestSock {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "llr-ctl-{}-{}-{}",
        std::process::id(),
        tag,
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TestSock(dir.join("s.sock"))
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
                let Some(budget) = budget.fixed() else {
                    return Err(CtlError::new("budget", "a number of packets here"));
                };
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

fn server(tag: &str, timeout: Duration) -> (CtlServer, Arc<Mock>, TestSock) {
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
        budget: Budget::packets(60).unwrap(),
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
        // a budget of 0 does not parse: the field is named all the same
        (
            br#"{"version":1,"cmd":"budget.set","class":"rt","budget":0}"#,
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

/// The id a client reads back from a reply is the id it sent, for any JSON number. Found by
/// fuzzing (fuzz/, target `ctl`): serde_json's default best-effort float parsing read
/// `1844674407370955407370955161611` as 1.8446744073709554e30, which the reply wrote and the
/// client read back as 1.8446744073709552e30.
#[test]
fn reply_echoes_numeric_ids_exactly() {
    for id in [
        "1844674407370955407370955161611",
        "18446744073709551616",
        "-9223372036854775809",
        "0.30000000000000004",
        "2.2250738585072014e-308",
        "1.7976931348623157e308",
        "9007199254740993",
        "123456789012345678901234567890e-10",
    ] {
        let sent: Value = serde_json::from_str(id).unwrap();
        let line = format!(r#"{{"version":1,"id":{id},"cmd":"status"}}"#);
        let (got, cmd) = parse_request(line.as_bytes());
        assert!(cmd.is_ok(), "{line}");
        assert_eq!(got, sent, "{id}");
        let reply = serde_json::to_vec(&Reply::ok(got, Value::Null)).unwrap();
        let back: Reply = serde_json::from_slice(&reply).unwrap();
        assert_eq!(
            back.id,
            sent,
            "{id}: reply {}",
            String::from_utf8_lossy(&reply)
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
            budget: Budget::Auto,
        })
        .unwrap();
    assert_eq!(
        r.into_result().unwrap_err(),
        CtlError::new("budget", "a number of packets here")
    );
    assert_eq!(m.budgets.lock().unwrap()["rt"], 60); // untouched
    let r = c
        .call(&Command::BudgetSet {
            class: "rt".into(),
            budget: Budget::packets(30).unwrap(),
        })
        .unwrap();
    assert!(r.ok);
    assert_eq!(m.budgets.lock().unwrap()["rt"], 30);
    // a panicking handler gives an error reply, and the server goes on
    let r = c.call(&Command::Reload {}).unwrap();
    assert_eq!(r.error.unwrap().field, "cmd");
    assert!(c.call(&Command::Status {}).unwrap().ok);
    drop(srv);
}

#[test]
fn socket_is_private() {
    let (srv, _m, p) = server("mode", Duration::from_secs(5));
    assert_eq!(socket_mode(&p).unwrap(), 0o600);
    drop(srv);
    assert!(!p.exists(), "socket file removed on drop");
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
}

/// A router reserves its socket before it builds its tables: while reserved, a second server is
/// refused, a client that connects waits and is answered once the target serves, and a
/// reservation given up (start-up failed) leaves no socket file.
#[test]
fn a_reserved_socket_refuses_a_second_server_and_answers_once_served() {
    let p = sock("reserve");
    let m: Arc<dyn ControlTarget> = Arc::new(|_c: Command| Ok(Value::Null));
    let r = Reserved::take(&p).unwrap();
    assert!(matches!(
        CtlServer::bind(&p, m.clone()).err(),
        Some(BindError::InUse(_))
    ));
    let early = std::thread::spawn({
        let p = p.clone();
        move || client(&p).call(&Command::Status {}).unwrap().ok
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(!early.is_finished(), "answered before anything serves");
    let srv = r.serve(m.clone(), ServerOptions::default()).unwrap();
    assert!(early.join().unwrap(), "the waiting client is answered");
    drop(srv);
    assert!(!p.exists());

    drop(Reserved::take(&p).unwrap());
    assert!(!p.exists(), "a reservation dropped removes its socket");
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
    drop(r);
    // A closed connection's slot is freed by its handler thread once it reads the end of the
    // stream, which can come after the client's close returns: the next request is served
    // once that happened, within a bound (not at once on a loaded machine).
    let t0 = Instant::now();
    let served = loop {
        match client(&p).call(&Command::Status {}) {
            Ok(r) if r.ok => break true,
            _ if t0.elapsed() > Duration::from_secs(3) => break false,
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    assert!(served, "served again once the running requests ended");
    drop(srv);
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

/// A table of `n` numbered items, listed in order.
struct Table {
    n: u64,
    /// Items pushed, over every listing.
    pushed: AtomicUsize,
}

impl ControlTarget for Table {
    fn handle(&self, cmd: Command) -> Result<Value, CtlError> {
        Ok(serde_json::json!({"cmd": cmd.name()}))
    }

    fn list(&self, _cmd: Command, out: &mut Listing<'_>) -> Result<Value, CtlError> {
        for i in 0..self.n {
            out.push(
                &serde_json::json!({"prefix": format!("10.{}.{}.0/24", i >> 8, i & 255), "i": i}),
            )?;
            self.pushed.fetch_add(1, Ordering::Relaxed);
        }
        Ok(serde_json::json!({"listed": self.n, "total": self.n}))
    }
}

fn fib_all() -> Command {
    Command::Fib {
        limit: None,
        query: Default::default(),
    }
}

/// A listing far over one message arrives whole and in order, in lines that each fit a
/// message, and the connection stays usable after it.
#[test]
fn listings_of_any_size_arrive_in_bounded_lines() {
    let p = sock("list");
    let t = Arc::new(Table {
        n: 200_000,
        pushed: AtomicUsize::new(0),
    });
    let s = CtlServer::bind(&p, t.clone()).unwrap();
    let mut c = CtlClient::connect(&p, Duration::from_secs(5)).unwrap();
    let mut next = 0u64;
    let mut lines = 0;
    let fin = c
        .call_each(&fib_all(), &mut |items| {
            lines += 1;
            for it in items {
                assert_eq!(it["i"].as_u64(), Some(next));
                next += 1;
            }
        })
        .unwrap();
    assert_eq!(next, 200_000);
    assert!(lines > 200_000 * 30 / MAX_MESSAGE as u64, "{lines} lines");
    assert_eq!(fin.into_result().unwrap()["total"], 200_000);
    // the same through `call`, which gathers the items
    let v = c.call(&fib_all()).unwrap().into_result().unwrap();
    assert_eq!(v["routes"].as_array().unwrap().len(), 200_000);
    assert_eq!(v["routes"][199_999]["i"], 199_999);
    // and an ordinary command after it
    let r = c.call(&Command::Status {}).unwrap().into_result().unwrap();
    assert_eq!(r["cmd"], "status");
    // every line is within the limit: read raw
    let mut raw = UnixStream::connect(&p).unwrap();
    raw.write_all(b"{\"version\":1,\"id\":\"x\",\"cmd\":\"fib\"}\n")
        .unwrap();
    let mut r = BufReader::new(raw);
    let mut n = 0;
    loop {
        let line = read_line(&mut r, MAX_MESSAGE).unwrap().unwrap();
        let reply: Reply = serde_json::from_slice(&line).unwrap();
        assert_eq!(reply.id, "x");
        n += 1;
        if !reply.more {
            break;
        }
    }
    assert!(n > 10);
    drop(s);
}

/// A client that asks for a long listing and stops reading holds up only its own
/// connection: others are served meanwhile, and its listing ends when the write times out.
#[test]
fn a_client_that_stops_reading_stalls_only_itself() {
    let p = sock("stall");
    let t = Arc::new(Table {
        n: 2_000_000,
        pushed: AtomicUsize::new(0),
    });
    let s = CtlServer::bind_with(
        &p,
        t.clone(),
        ServerOptions {
            write_timeout: Duration::from_millis(300),
            ..ServerOptions::default()
        },
    )
    .unwrap();
    let mut stuck = UnixStream::connect(&p).unwrap();
    stuck
        .write_all(b"{\"version\":1,\"id\":1,\"cmd\":\"fib\"}\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let mut c = CtlClient::connect(&p, Duration::from_secs(2)).unwrap();
    let r = c.call(&Command::Status {}).unwrap().into_result().unwrap();
    assert_eq!(r["cmd"], "status");
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    // the stuck listing gave up: far fewer items than the table were made
    std::thread::sleep(Duration::from_millis(800));
    let pushed = t.pushed.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(t.pushed.load(Ordering::Relaxed), pushed, "still listing");
    assert!(pushed < 1_000_000, "{pushed}");
    drop(stuck);
    drop(s);
}

/// In memory, `listing::collect` gathers what a target pushes under its key.
#[test]
fn collected_listings_hold_every_item() {
    let t = Table {
        n: 5_000,
        pushed: AtomicUsize::new(0),
    };
    let v = listing::collect("routes", |out| t.list(fib_all(), out)).unwrap();
    assert_eq!(v["routes"].as_array().unwrap().len(), 5_000);
    assert_eq!(v["total"], 5_000);
}

/// Someone removed the socket file: stopping the server still returns at once.
#[test]
fn stops_when_its_socket_file_was_removed() {
    let p = sock("gone");
    let s = CtlServer::bind(
        &p,
        Arc::new(Table {
            n: 1,
            pushed: AtomicUsize::new(0),
        }),
    )
    .unwrap();
    let t0 = Instant::now();
    drop(s);
    assert!(t0.elapsed() < Duration::from_secs(1));
}
