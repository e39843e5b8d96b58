//! `ctl`: the control protocol decoder, as the server runs it on a connection's bytes.
//!
//! Input: one byte for the reader's buffer size (so lines straddle buffer refills at every
//! offset), then the bytes a client sends. Each line (`llr_ops::ctl::read_line`, at most
//! `MAX_MESSAGE` bytes) goes through `parse_request` like the server does. Properties: no
//! panic; lines come back without their newline and within the limit, and an over-long line or
//! a stream ending inside a line is the documented error; a decoded command encoded the way
//! `CtlClient` does decodes to the same command and id; every reply serialises and reads back
//! as itself (the client's side); the arguments that carry their own syntax (`rules.add`,
//! `route.add`) go through their parsers.

use std::io::{BufReader, ErrorKind};

use llr_core::classify::RuleSpec;
use llr_ops::ctl::{parse_request, read_line, Command, Reply, MAX_MESSAGE, VERSION};
use serde_json::{json, Value};

pub fn run(data: &[u8]) {
    let Some((&b, rest)) = data.split_first() else {
        return;
    };
    let mut r = BufReader::with_capacity(1 + usize::from(b), rest);
    let mut consumed = 0usize;
    for _ in 0..256 {
        match read_line(&mut r, MAX_MESSAGE) {
            Ok(Some(line)) => {
                assert!(line.len() <= MAX_MESSAGE);
                assert!(!line.contains(&b'\n'), "a line with a newline");
                assert_eq!(&rest[consumed..consumed + line.len()], &line[..]);
                consumed += line.len() + 1;
                assert_eq!(rest[consumed - 1], b'\n');
                if !line.iter().all(u8::is_ascii_whitespace) {
                    request(&line);
                }
            }
            Ok(None) => {
                assert_eq!(
                    consumed,
                    rest.len(),
                    "clean end before the end of the input"
                );
                return;
            }
            Err(e) => {
                match e.kind() {
                    ErrorKind::InvalidData => assert!(rest.len() - consumed > MAX_MESSAGE),
                    ErrorKind::UnexpectedEof => assert!(!rest[consumed..].contains(&b'\n')),
                    k => panic!("read_line on a byte slice failed with {k:?}: {e}"),
                }
                return;
            }
        }
    }
}

fn request(line: &[u8]) {
    let (id, cmd) = parse_request(line);
    let reply = match &cmd {
        Ok(c) => Reply::ok(id.clone(), json!({ "cmd": c.name() })),
        Err(e) => Reply::err(id.clone(), e.clone()),
    };
    // The server's reply line reads back as the same reply (the client's decoder).
    let bytes = serde_json::to_vec(&reply).expect("a reply serialises");
    let back: Reply = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "reply {} does not read back: {e}",
            String::from_utf8_lossy(&bytes)
        )
    });
    assert_eq!(back, reply);
    if let Ok(cmd) = cmd {
        // Encoded as CtlClient::call does, it decodes to the same command and id.
        let mut v = serde_json::to_value(&cmd).expect("a command serialises");
        let Value::Object(o) = &mut v else {
            panic!("{cmd:?} serialises to {v}, not an object")
        };
        assert_eq!(o.get("cmd").and_then(Value::as_str), Some(cmd.name()));
        o.insert("version".into(), VERSION.into());
        o.insert("id".into(), id.clone());
        let line2 = serde_json::to_vec(&v).expect("serialises");
        let (id2, cmd2) = parse_request(&line2);
        assert_eq!(id2, id);
        match cmd2 {
            Ok(c) => assert_eq!(c, cmd, "re-encoded as {}", String::from_utf8_lossy(&line2)),
            Err(e) => panic!(
                "{cmd:?} re-encoded as {} is rejected: {e}",
                String::from_utf8_lossy(&line2)
            ),
        }
        match &cmd {
            Command::RulesAdd { rule } => {
                let _ = rule.parse::<RuleSpec>();
            }
            Command::RouteAdd { prefix, via, .. } => {
                let _ = llr_io::kernel::parse_prefix(prefix);
                let _ = via.as_deref().map(str::parse::<std::net::IpAddr>);
            }
            Command::RouteRemove { prefix } => {
                let _ = llr_io::kernel::parse_prefix(prefix);
            }
            _ => {}
        }
    }
    // A reply line fed to the client's decoder: whatever it is, no panic.
    if let Ok(r) = serde_json::from_slice::<Reply>(line) {
        let _ = r.into_result();
    }
}
