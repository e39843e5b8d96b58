//! The control-plane client.

use serde_json::Value;
use std::io::{self, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::{read_line, Command, Reply, MAX_MESSAGE, VERSION};

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

    /// Sends `cmd` and waits for its reply. A listing's items are gathered into the final
    /// reply's result under their key (use [`call_each`](CtlClient::call_each) to handle them
    /// as they come).
    pub fn call(&mut self, cmd: &Command) -> io::Result<Reply> {
        let mut items: Vec<Value> = Vec::new();
        let key = cmd.listing_key();
        let mut reply = self.call_each(cmd, &mut |chunk| items.extend(chunk))?;
        if let (Some(key), Some(Value::Object(o))) = (key, reply.result.as_mut()) {
            o.insert(key.to_string(), Value::Array(items));
        }
        Ok(reply)
    }

    /// Sends `cmd`; hands a listing's items to `each` line by line as they arrive, and returns
    /// the final reply.
    pub fn call_each(
        &mut self,
        cmd: &Command,
        each: &mut dyn FnMut(Vec<Value>),
    ) -> io::Result<Reply> {
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
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        loop {
            let reply = read_line(&mut self.r, MAX_MESSAGE)?.ok_or_else(|| {
                io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
            })?;
            let reply: Reply =
                serde_json::from_slice(&reply).map_err(|e| bad(format!("bad reply: {e}")))?;
            if reply.id != id {
                return Err(bad(format!(
                    "reply id {} does not match request id {id}",
                    reply.id
                )));
            }
            if !reply.more {
                return Ok(reply);
            }
            let key = cmd
                .listing_key()
                .ok_or_else(|| bad(format!("{}: a listing line in reply", cmd.name())))?;
            match reply
                .result
                .and_then(|mut r| r.get_mut(key).map(Value::take))
            {
                Some(Value::Array(a)) => each(a),
                _ => return Err(bad(format!("listing line without `{key}`"))),
            }
        }
    }

    /// Sends raw bytes (for tests and debugging) and reads one reply line, if any.
    pub fn raw(&mut self, bytes: &[u8]) -> io::Result<Option<Vec<u8>>> {
        self.w.write_all(bytes)?;
        self.w.flush()?;
        read_line(&mut self.r, MAX_MESSAGE)
    }
}
