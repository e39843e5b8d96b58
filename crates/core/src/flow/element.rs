//! Elements: the steps of a flow's pipeline (paper 003, §2–3), and their text form.
//!
//! An element processes one packet and says whether it goes on ([`Step::Next`]) or is dropped
//! ([`Step::Drop`]). Elements do no I/O and read no clock: the time comes in through [`Cx`], and
//! CPU work that stands in for crypto or inspection is *spent* through [`Cx::spend`] — a busy
//! wait in the live worker, a step of virtual time in the simulator. Which is how the simulator
//! runs the same pipelines as the router.
//!
//! Text form (config and `llrouter ctl flow`): `name` or `name(key=value,…)`:
//!
//! | element | parameters | does |
//! |---|---|---|
//! | `count` | — | counts packets and bytes |
//! | `meter` | `pps=N` or `bps=N`, `burst=N` (packets or bytes), `exceed=drop` or `exceed=dscp:D` | token-bucket policer |
//! | `dscp` | `set=D` | rewrites the DSCP (IPv4 checksum updated) |
//! | `acl` | `name` (`[[acls]]` in the config) | first-match permit/deny over classifier rules |
//! | `work` | `ns=N` or `us=N` | spends that much CPU per packet (crypto/inspection stand-in) |
//! | `branch` | ACL `name`, `to=K` | packets the ACL permits go on at element K, the rest at the next |
//! | `goto` | `to=K` | every packet goes on at element K |
//! | `forward` | — | the forwarding decision; always the last element |
//!
//! With `branch` and `goto` a pipeline is a graph, not only a line: `K` counts the elements from
//! 0, and the forwarding decision is `K` = the number of elements. A jump only goes forward (the
//! pipeline refuses one that does not), so the graph has no cycle and every packet reaches the
//! forwarding decision or a drop in at most as many steps as there are elements. An if/else:
//! `["branch(voice,to=3)", "work(us=20)", "goto(to=4)", "dscp(set=46)", "count"]` gives voice
//! packets `dscp`, the rest `work`, both `count`.

use crate::classify::RuleSet;
use crate::error::FieldError;
use crate::wire::checksum::update_word;
use crate::wire::{parse_frame, IpVersion};

/// The packet an element sees: the frame buffer (possibly larger than the frame), the frame's
/// length and the interface it came in on.
pub struct Pkt<'a> {
    pub frame: &'a mut [u8],
    pub len: usize,
    pub ingress: u32,
}

impl Pkt<'_> {
    /// The received bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.frame[..self.len.min(self.frame.len())]
    }
}

/// What an element is given besides the packet.
pub struct Cx<'a> {
    /// The caller's clock (monotonic ns; virtual time in the simulator).
    pub now_ns: u64,
    /// Spends CPU: the live worker busy-waits, the simulator advances virtual time.
    pub spend: &'a mut dyn FnMut(u64),
}

impl Cx<'_> {
    /// Spends `ns` of CPU time on the packet.
    pub fn spend(&mut self, ns: u64) {
        (self.spend)(ns)
    }
}

/// An element's verdict on a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// To the next element.
    Next,
    /// Dropped here (counted by the element).
    Drop,
    /// To element `K` of the pipeline (further on; the number of elements is the forwarding
    /// decision).
    Jump(u16),
}

/// One pipeline element.
pub trait Element: Send + std::fmt::Debug {
    /// The element's text form (`meter(pps=1000,burst=32,exceed=drop)`), as [`parse`] reads it.
    fn text(&self) -> String;
    /// Processes one packet.
    fn process(&mut self, pkt: &mut Pkt<'_>, cx: &mut Cx<'_>) -> Step;
    /// A fresh copy with its own state (counters, token bucket) reset.
    fn fresh(&self) -> Box<dyn Element>;
    /// The element a [`Step::Jump`] of this element goes to, for the pipeline to check.
    fn jump(&self) -> Option<usize> {
        None
    }
}

/// Counts packets and bytes (the pipeline counts for every element; this one only exists to be
/// placed where a count is wanted).
#[derive(Debug, Clone, Default)]
pub struct Count;

impl Element for Count {
    fn text(&self) -> String {
        "count".into()
    }
    fn process(&mut self, _pkt: &mut Pkt<'_>, _cx: &mut Cx<'_>) -> Step {
        Step::Next
    }
    fn fresh(&self) -> Box<dyn Element> {
        Box::new(Count)
    }
}

/// What a meter does to a packet beyond its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceed {
    Drop,
    /// Remark to this DSCP and pass.
    Dscp(u8),
}

/// A token-bucket policer in packets or bits per second.
#[derive(Debug, Clone)]
pub struct Meter {
    /// Tokens per second (packets, or bytes when `bytes`).
    rate: u64,
    bytes: bool,
    burst: u64,
    exceed: Exceed,
    /// Tokens ×1e9 (so refills are integer: rate tokens/s × ns).
    tokens_e9: u128,
    last_ns: Option<u64>,
}

impl Meter {
    /// `rate` packets/s (or bytes/s when `bytes`), bucket depth `burst` (≥ 1).
    pub fn new(rate: u64, bytes: bool, burst: u64, exceed: Exceed) -> Meter {
        Meter {
            rate,
            bytes,
            burst,
            exceed,
            tokens_e9: u128::from(burst) * 1_000_000_000,
            last_ns: None,
        }
    }
}

impl Element for Meter {
    fn text(&self) -> String {
        let rate = if self.bytes {
            format!("bps={}", self.rate * 8)
        } else {
            format!("pps={}", self.rate)
        };
        let exceed = match self.exceed {
            Exceed::Drop => "drop".to_string(),
            Exceed::Dscp(d) => format!("dscp:{d}"),
        };
        format!("meter({rate},burst={},exceed={exceed})", self.burst)
    }

    fn process(&mut self, pkt: &mut Pkt<'_>, cx: &mut Cx<'_>) -> Step {
        let cap = u128::from(self.burst) * 1_000_000_000;
        if let Some(last) = self.last_ns {
            let dt = u128::from(cx.now_ns.saturating_sub(last));
            self.tokens_e9 = (self.tokens_e9 + dt * u128::from(self.rate)).min(cap);
        }
        self.last_ns = Some(cx.now_ns);
        let need = if self.bytes { pkt.len as u128 } else { 1 } * 1_000_000_000;
        if self.tokens_e9 >= need {
            self.tokens_e9 -= need;
            return Step::Next;
        }
        match self.exceed {
            Exceed::Drop => Step::Drop,
            Exceed::Dscp(d) => {
                set_dscp(pkt, d);
                Step::Next
            }
        }
    }

    fn fresh(&self) -> Box<dyn Element> {
        Box::new(Meter::new(self.rate, self.bytes, self.burst, self.exceed))
    }
}

/// Rewrites the DSCP of IPv4 and IPv6 packets; other frames pass unchanged.
#[derive(Debug, Clone)]
pub struct Remark {
    dscp: u8,
}

impl Element for Remark {
    fn text(&self) -> String {
        format!("dscp(set={})", self.dscp)
    }
    fn process(&mut self, pkt: &mut Pkt<'_>, _cx: &mut Cx<'_>) -> Step {
        set_dscp(pkt, self.dscp);
        Step::Next
    }
    fn fresh(&self) -> Box<dyn Element> {
        Box::new(self.clone())
    }
}

/// Sets the DSCP bits of an IP packet, keeping ECN; the IPv4 header checksum is updated
/// incrementally (RFC 1624). Non-IP or malformed frames are left alone.
pub fn set_dscp(pkt: &mut Pkt<'_>, dscp: u8) {
    let Ok(m) = parse_frame(pkt.bytes()) else {
        return;
    };
    let l3 = m.l3_offset as usize;
    let f = &mut pkt.frame[..];
    match m.version {
        IpVersion::V4 => {
            let old = u16::from_be_bytes([f[l3], f[l3 + 1]]);
            f[l3 + 1] = (dscp << 2) | (f[l3 + 1] & 0x03);
            let new = u16::from_be_bytes([f[l3], f[l3 + 1]]);
            let c = u16::from_be_bytes([f[l3 + 10], f[l3 + 11]]);
            f[l3 + 10..l3 + 12].copy_from_slice(&update_word(c, old, new).to_be_bytes());
        }
        IpVersion::V6 => {
            // version(4) | traffic class(8) | flow label(20): DSCP is the class's top 6 bits.
            let tc = (dscp << 2) | ((f[l3 + 1] >> 4) & 0x03);
            f[l3] = (f[l3] & 0xf0) | (tc >> 4);
            f[l3 + 1] = (f[l3 + 1] & 0x0f) | (tc << 4);
        }
    }
}

/// First-match permit/deny over classifier rules (rule class 0 = permit, 1 = deny).
#[derive(Debug, Clone)]
pub struct Acl {
    name: String,
    rules: RuleSet,
}

impl Acl {
    /// Class 0 of `rules` permits, class 1 denies; the set's default class applies to the rest.
    pub fn new(name: impl Into<String>, rules: RuleSet) -> Acl {
        Acl {
            name: name.into(),
            rules,
        }
    }
}

impl Element for Acl {
    fn text(&self) -> String {
        format!("acl({})", self.name)
    }
    fn process(&mut self, pkt: &mut Pkt<'_>, _cx: &mut Cx<'_>) -> Step {
        if self.rules.classify(pkt.bytes(), None, pkt.ingress) == ACL_DENY {
            Step::Drop
        } else {
            Step::Next
        }
    }
    fn fresh(&self) -> Box<dyn Element> {
        Box::new(self.clone())
    }
}

/// A jump in the pipeline: to element `to` for the packets an ACL permits (`branch`), or for
/// every packet (`goto`, no ACL).
#[derive(Debug, Clone)]
pub struct Branch {
    acl: Option<Acl>,
    to: u16,
}

impl Branch {
    /// Packets `acl` permits (every packet without one) go on at element `to`.
    pub fn new(acl: Option<Acl>, to: u16) -> Branch {
        Branch { acl, to }
    }
}

impl Element for Branch {
    fn text(&self) -> String {
        match &self.acl {
            Some(a) => format!("branch({},to={})", a.name, self.to),
            None => format!("goto(to={})", self.to),
        }
    }
    fn process(&mut self, pkt: &mut Pkt<'_>, _cx: &mut Cx<'_>) -> Step {
        match &self.acl {
            Some(a) if a.rules.classify(pkt.bytes(), None, pkt.ingress) == ACL_DENY => Step::Next,
            _ => Step::Jump(self.to),
        }
    }
    fn fresh(&self) -> Box<dyn Element> {
        Box::new(self.clone())
    }
    fn jump(&self) -> Option<usize> {
        Some(usize::from(self.to))
    }
}

/// The rule class that permits, in an ACL's [`RuleSet`].
pub const ACL_PERMIT: usize = 0;
/// The rule class that denies.
pub const ACL_DENY: usize = 1;

/// Spends a fixed CPU time per packet: the stand-in for per-flow crypto or inspection.
#[derive(Debug, Clone)]
pub struct Work {
    ns: u64,
}

impl Work {
    pub fn new(ns: u64) -> Work {
        Work { ns }
    }
}

impl Element for Work {
    fn text(&self) -> String {
        format!("work(ns={})", self.ns)
    }
    fn process(&mut self, _pkt: &mut Pkt<'_>, cx: &mut Cx<'_>) -> Step {
        cx.spend(self.ns);
        Step::Next
    }
    fn fresh(&self) -> Box<dyn Element> {
        Box::new(self.clone())
    }
}

/// Per-element counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ElementStats {
    pub packets: u64,
    pub bytes: u64,
    pub dropped: u64,
}

/// The named ACLs a pipeline may refer to.
pub trait AclLookup {
    fn acl(&self, name: &str) -> Option<RuleSet>;
}

impl AclLookup for () {
    fn acl(&self, _name: &str) -> Option<RuleSet> {
        None
    }
}

impl AclLookup for std::collections::BTreeMap<String, RuleSet> {
    fn acl(&self, name: &str) -> Option<RuleSet> {
        self.get(name).cloned()
    }
}

/// The name of the final element.
pub const FORWARD: &str = "forward";

/// Parses one element's text form (see the module doc). `forward` is not an element object
/// (the pipeline ends in it); asking for it here is an error.
pub fn parse(text: &str, acls: &dyn AclLookup) -> Result<Box<dyn Element>, FieldError> {
    let err = |r: String| FieldError::new("pipeline", format!("`{text}`: {r}"));
    let t = text.trim();
    let (name, args) = match t.find('(') {
        Some(i) => {
            let Some(inner) = t[i + 1..].strip_suffix(')') else {
                return Err(err("missing `)`".into()));
            };
            (&t[..i], inner)
        }
        None => (t, ""),
    };
    let mut kv: Vec<(&str, &str)> = Vec::new();
    let mut bare: Vec<&str> = Vec::new();
    for a in args.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        match a.split_once('=') {
            Some((k, v)) => kv.push((k.trim(), v.trim())),
            None => bare.push(a),
        }
    }
    let get = |k: &str| kv.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    let num = |k: &str| -> Result<Option<u64>, FieldError> {
        get(k)
            .map(|v| parse_num(v).ok_or_else(|| err(format!("{k}={v} is not a number"))))
            .transpose()
    };
    let allow = |keys: &[&str], bare_ok: usize| -> Result<(), FieldError> {
        if let Some((k, _)) = kv.iter().find(|(k, _)| !keys.contains(k)) {
            return Err(err(format!(
                "unknown parameter `{k}` (known: {})",
                if keys.is_empty() {
                    "none".to_string()
                } else {
                    keys.join(", ")
                }
            )));
        }
        if bare.len() > bare_ok {
            return Err(err(format!("unexpected `{}`", bare[bare_ok])));
        }
        Ok(())
    };
    // The ACL an element names (`name=N` or its first bare argument); `form` shows how.
    let named_acl = |form: &str| -> Result<Acl, FieldError> {
        let n = get("name")
            .or(bare.first().copied())
            .ok_or_else(|| err(format!("give the ACL's name: {form}")))?;
        let rules = acls
            .acl(n)
            .ok_or_else(|| err(format!("no ACL named `{n}` (define it under [[acls]])")))?;
        Ok(Acl::new(n, rules))
    };
    match name.trim() {
        "count" => {
            allow(&[], 0)?;
            Ok(Box::new(Count))
        }
        "meter" => {
            allow(&["pps", "bps", "burst", "exceed"], 0)?;
            let (rate, bytes) = match (num("pps")?, num("bps")?) {
                (Some(p), None) => (p, false),
                (None, Some(b)) => (b / 8, true),
                _ => return Err(err("give pps=N or bps=N".into())),
            };
            if rate == 0 {
                return Err(err("a rate of 0 passes nothing; use acl to drop".into()));
            }
            let burst = num("burst")?.unwrap_or(if bytes { 1500 * 8 } else { 32 });
            if burst == 0 {
                return Err(err("burst must be at least 1".into()));
            }
            let exceed = match get("exceed") {
                None | Some("drop") => Exceed::Drop,
                Some(v) => match v.strip_prefix("dscp:").and_then(|d| d.parse::<u8>().ok()) {
                    Some(d) if d <= 63 => Exceed::Dscp(d),
                    _ => return Err(err(format!("exceed={v}: give drop or dscp:0-63"))),
                },
            };
            Ok(Box::new(Meter::new(rate, bytes, burst, exceed)))
        }
        "dscp" | "remark" => {
            allow(&["set"], 1)?;
            let v = match (num("set")?, bare.first()) {
                (Some(v), None) => v,
                (None, Some(b)) => parse_num(b).ok_or_else(|| err(format!("{b} is not a DSCP")))?,
                _ => return Err(err("give set=0-63".into())),
            };
            if v > 63 {
                return Err(err(format!("{v} is not a DSCP (0-63)")));
            }
            Ok(Box::new(Remark { dscp: v as u8 }))
        }
        "acl" => {
            allow(&["name"], 1)?;
            Ok(Box::new(named_acl("acl(NAME)")?))
        }
        "branch" | "goto" => {
            let to = match num("to")? {
                Some(k) if k <= u64::from(u16::MAX) => k as u16,
                Some(k) => return Err(err(format!("to={k}: too far"))),
                None => return Err(err("give the element to go on at: to=K".into())),
            };
            if name.trim() == "goto" {
                allow(&["to"], 0)?;
                return Ok(Box::new(Branch::new(None, to)));
            }
            allow(&["name", "to"], 1)?;
            Ok(Box::new(Branch::new(Some(named_acl("branch(NAME,to=K)")?), to)))
        }
        "work" => {
            allow(&["ns", "us"], 0)?;
            let ns = match (num("ns")?, num("us")?) {
                (Some(n), None) => n,
                (None, Some(u)) => u.saturating_mul(1000),
                _ => return Err(err("give ns=N or us=N".into())),
            };
            if ns > 1_000_000 {
                return Err(err(format!("{ns} ns per packet is more than 1 ms")));
            }
            Ok(Box::new(Work::new(ns)))
        }
        FORWARD => Err(err("`forward` can only be the last element".into())),
        other => Err(err(format!(
            "unknown element `{other}` (known: count, meter, dscp, acl, work, branch, goto, forward)"
        ))),
    }
}

/// `1000`, `10k`, `2m`, `1g` (decimal multipliers).
fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let (digits, mult) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1_000),
        'm' => (&s[..s.len() - 1], 1_000_000),
        'g' => (&s[..s.len() - 1], 1_000_000_000),
        _ => (&s[..], 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// A flow's elements in order, each with its counters; the forwarding decision follows the last.
#[derive(Debug, Default)]
pub struct Pipeline {
    elements: Vec<Box<dyn Element>>,
    stats: Vec<ElementStats>,
}

impl Clone for Pipeline {
    /// The same elements with fresh state.
    fn clone(&self) -> Self {
        Pipeline::new(self.elements.iter().map(|e| e.fresh()).collect())
    }
}

impl Pipeline {
    /// Only the forwarding decision.
    pub fn forward_only() -> Pipeline {
        Pipeline::default()
    }

    pub fn new(elements: Vec<Box<dyn Element>>) -> Pipeline {
        let stats = vec![ElementStats::default(); elements.len()];
        Pipeline { elements, stats }
    }

    /// Parses the text form of each element; a trailing `forward` is allowed (it is implied).
    pub fn parse<S: AsRef<str>>(texts: &[S], acls: &dyn AclLookup) -> Result<Pipeline, FieldError> {
        let mut v = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            let t = t.as_ref();
            if t.trim() == FORWARD && i + 1 == texts.len() {
                break;
            }
            v.push(parse(t, acls)?);
        }
        for (i, e) in v.iter().enumerate() {
            match e.jump() {
                Some(to) if to <= i || to > v.len() => {
                    return Err(FieldError::new(
                        "pipeline",
                        format!(
                            "`{}` at element {i}: a jump goes forward, to {}..={} ({} is the forwarding decision)",
                            e.text(),
                            i + 1,
                            v.len(),
                            v.len()
                        ),
                    ))
                }
                _ => {}
            }
        }
        Ok(Pipeline::new(v))
    }

    /// Elements before the forwarding decision; position `len()` is the forwarding decision.
    pub fn len(&self) -> usize {
        self.elements.len()
    }

    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    /// Runs element `pos` (< [`len`](Self::len)) on `pkt`, counting.
    #[inline]
    pub fn run(&mut self, pos: usize, pkt: &mut Pkt<'_>, cx: &mut Cx<'_>) -> Step {
        let s = &mut self.stats[pos];
        s.packets += 1;
        s.bytes += pkt.len as u64;
        let step = self.elements[pos].process(pkt, cx);
        if step == Step::Drop {
            s.dropped += 1;
        }
        step
    }

    /// Text form of every element, `forward` last.
    pub fn texts(&self) -> Vec<String> {
        let mut v: Vec<String> = self.elements.iter().map(|e| e.text()).collect();
        v.push(FORWARD.into());
        v
    }

    /// Counters of each element (not of `forward`).
    pub fn stats(&self) -> &[ElementStats] {
        &self.stats
    }
}
