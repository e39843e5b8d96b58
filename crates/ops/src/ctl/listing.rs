//! Listings of any size in bounded lines.
//!
//! A listing command's items go out as they are made, in reply lines marked `"more": true`,
//! each at most [`MAX_MESSAGE`] bytes; the last line is the ordinary reply (totals, or the
//! error that ended the listing). The router holds one line's worth of items per listing,
//! whatever the table's size, and a client that stops reading stalls only its own connection
//! (the write times out and the listing ends).

use serde::Serialize;
use serde_json::Value;
use std::io;

use super::{CtlError, MAX_MESSAGE, VERSION};

/// Item bytes gathered before a line goes out (well under [`MAX_MESSAGE`], so a line never
/// needs a second buffer).
pub const CHUNK_BYTES: usize = 32 * 1024;

/// Where a listing's lines go.
pub type LineSink<'a> = dyn FnMut(&[u8]) -> io::Result<()> + 'a;

/// The items of one listing on their way to the client.
pub struct Listing<'a> {
    key: &'static str,
    head: Vec<u8>,
    buf: Vec<u8>,
    items: u64,
    out: &'a mut LineSink<'a>,
}

impl<'a> Listing<'a> {
    /// A listing of the items under `key` (`"routes"`) in the reply to request `id`, written
    /// line by line to `out`.
    pub fn new(key: &'static str, id: &Value, out: &'a mut LineSink<'a>) -> Self {
        let head = format!(
            r#"{{"version":{VERSION},"id":{},"ok":true,"more":true,"result":{{"{key}":["#,
            serde_json::to_string(id).unwrap_or_else(|_| "null".into())
        );
        Listing {
            key,
            head: head.into_bytes(),
            buf: Vec::with_capacity(CHUNK_BYTES + 1024),
            items: 0,
            out,
        }
    }

    /// The result key the items go under.
    pub fn key(&self) -> &'static str {
        self.key
    }

    /// Items pushed so far.
    pub fn count(&self) -> u64 {
        self.items
    }

    /// Adds one item; a full line goes out first. Errors end the listing: a client that went
    /// away or stopped reading, or an item that cannot fit in a line.
    pub fn push<T: Serialize + ?Sized>(&mut self, item: &T) -> Result<(), CtlError> {
        let s = serde_json::to_vec(item)
            .map_err(|e| CtlError::new(self.key, format!("cannot encode an item: {e}")))?;
        if self.head.len() + s.len() + 4 > MAX_MESSAGE {
            return Err(CtlError::new(
                self.key,
                format!("an item of {} bytes does not fit in a message", s.len()),
            ));
        }
        if !self.buf.is_empty() && self.head.len() + self.buf.len() + s.len() + 5 > CHUNK_BYTES {
            self.flush()?;
        }
        if !self.buf.is_empty() {
            self.buf.push(b',');
        }
        self.buf.extend_from_slice(&s);
        self.items += 1;
        Ok(())
    }

    /// Sends the items gathered so far (the server calls it before the final reply).
    pub fn flush(&mut self) -> Result<(), CtlError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut line = Vec::with_capacity(self.head.len() + self.buf.len() + 4);
        line.extend_from_slice(&self.head);
        line.append(&mut self.buf);
        line.extend_from_slice(b"]}}\n");
        (self.out)(&line).map_err(|e| CtlError::new("connection", format!("listing ended: {e}")))
    }
}

/// Collects a listing's items in memory: for a caller in the same process, and for targets
/// whose listings are small.
pub fn collect(
    key: &'static str,
    f: impl FnOnce(&mut Listing<'_>) -> Result<Value, CtlError>,
) -> Result<Value, CtlError> {
    let mut items: Vec<Value> = Vec::new();
    let mut sink = |line: &[u8]| -> io::Result<()> {
        let r: super::Reply = serde_json::from_slice(line).map_err(io::Error::other)?;
        if let Some(Value::Array(a)) = r.result.and_then(|mut v| v.get_mut(key).map(Value::take)) {
            items.extend(a);
        }
        Ok(())
    };
    let mut fin = {
        let mut l = Listing::new(key, &Value::Null, &mut sink);
        let fin = f(&mut l)?;
        l.flush()?;
        fin
    };
    if let Value::Object(o) = &mut fin {
        o.insert(key.to_string(), Value::Array(items));
    }
    Ok(fin)
}
