//! The flow scheduler: start-time fair queueing over CPU time, preemption at element
//! boundaries (paper 003, §3–3.2).
//!
//! Every flow has a share (a weight, or a guaranteed fraction of the CPU), a quantum qᵢ, a queue
//! of packets and a pipeline. The scheduler keeps the *eligible* flows (something queued, or a
//! packet preempted mid-pipeline) ordered by SFQ start tag; idle flows are not in that order
//! and cost nothing. A turn runs the flow with the smallest start tag Sᵢ element by element;
//! the caller reports each element's CPU cost (measured live, modelled in the simulator), which
//! is charged to the flow: Fᵢ = Sᵢ + cost / wᵢ. Once the flow has run qᵢ, the turn ends after
//! the current element; the flow goes back in with Sᵢ = Fᵢ, behind any flow whose tag is equal
//! or smaller, so it is preempted exactly when paper 003 says (another eligible flow with an
//! equal or higher SFQ priority) and otherwise simply continues. A preempted packet keeps only
//! its position in the pipeline.
//!
//! The input (draining the receive rings into flow queues: the poll engine) is itself a flow,
//! the *input flow*, with its own share (§3.4): whether it is eligible is the rings' business,
//! so the caller says so ([`FlowSched::set_input_ready`]) and runs it when picked.
//!
//! Virtual time v is the start tag of the flow last picked; a flow that becomes eligible gets
//! Sᵢ = max(v, Fᵢ), so an idle flow neither saves up credit nor is punished for having run.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::element::Pipeline;
use crate::error::FieldError;

/// A flow's index in the scheduler (stable while the flow exists; reused after removal).
pub type FlowId = u32;

/// The input flow's id.
pub const INPUT: FlowId = 0;

/// A flow's CPU allocation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Share {
    /// A proportional share: flows share what guaranteed flows leave in proportion to weight.
    Weight(u32),
    /// A guaranteed fraction of the CPU (0 < f < 1) whenever the flow is backlogged.
    Cpu(f64),
}

impl Share {
    pub fn validate(&self) -> Result<(), FieldError> {
        match *self {
            Share::Weight(0) => Err(FieldError::new(
                "weight",
                "must be at least 1 (a flow with weight 0 would never run)",
            )),
            Share::Cpu(f) if !(f > 0.0 && f < 1.0) => Err(FieldError::new(
                "cpu",
                format!("{f} is not a fraction of the CPU between 0 and 1"),
            )),
            _ => Ok(()),
        }
    }
}

/// A flow's scheduling parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowParams {
    pub share: Share,
    /// Run at least this long before the turn may end (qᵢ).
    pub quantum_ns: u64,
    /// Packets queued at most; more are dropped on arrival (counted).
    pub queue_limit: u32,
}

impl Default for FlowParams {
    fn default() -> Self {
        FlowParams {
            share: Share::Weight(1),
            quantum_ns: 5_000,
            queue_limit: 256,
        }
    }
}

impl FlowParams {
    pub fn validate(&self) -> Result<(), FieldError> {
        self.share.validate()?;
        if self.quantum_ns == 0 {
            return Err(FieldError::new(
                "quantum-us",
                "must be more than 0 (it bounds how long a flow runs before others may go)",
            ));
        }
        if self.queue_limit == 0 {
            return Err(FieldError::new("queue", "must be at least 1 packet"));
        }
        Ok(())
    }
}

/// Per-flow counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowStats {
    /// Packets accepted into the queue.
    pub enqueued: u64,
    /// Packets dropped at a full queue.
    pub queue_drops: u64,
    /// Packets that left the pipeline (forwarded, dropped by an element or by forwarding).
    pub done: u64,
    /// CPU time charged to the flow.
    pub cpu_ns: u64,
    /// Turns run.
    pub turns: u64,
    /// Turns that ended with a packet mid-pipeline and another flow going next.
    pub preemptions: u64,
}

/// What to run next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The input flow: drain the rings (one grant), then [`FlowSched::input_done`].
    Input,
    /// A turn of this flow: [`FlowSched::run_turn`].
    Flow(FlowId),
    /// Nothing is eligible.
    Idle,
}

/// After an element: the packet goes on, or the caller took it (sent or dropped it).
pub enum Progress<P> {
    Next(P),
    /// Goes on at element `K` (a branch of the pipeline's graph): always further on, so a
    /// target at or before the current element counts as the next one.
    At(P, usize),
    Finished,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Turn {
    pub cost_ns: u64,
    pub elements: u32,
    pub packets_done: u32,
    /// The turn stopped with a packet between two elements.
    pub mid_packet: bool,
}

struct Slot<P> {
    name: String,
    params: FlowParams,
    start: f64,
    finish: f64,
    /// Key in `eligible` while the flow is in it.
    key: Option<(u64, u64)>,
    /// Eligible or running (counted in the active sums).
    active: bool,
    queue: VecDeque<P>,
    /// A packet preempted mid-pipeline and the element that is next for it.
    current: Option<(P, u16)>,
    pipeline: Pipeline,
    stats: FlowStats,
}

impl<P> Slot<P> {
    fn backlogged(&self) -> bool {
        self.current.is_some() || !self.queue.is_empty()
    }
}

/// A read-only view of one flow.
#[derive(Debug, Clone)]
pub struct FlowView<'a> {
    pub id: FlowId,
    pub name: &'a str,
    pub params: FlowParams,
    pub queue_len: usize,
    pub stats: FlowStats,
    pub pipeline: &'a Pipeline,
}

/// The flow scheduler over packets of type `P` (the live worker's held frames, the simulator's
/// packet records).
pub struct FlowSched<P> {
    slots: Vec<Option<Slot<P>>>,
    free: Vec<FlowId>,
    eligible: BTreeSet<(u64, u64, FlowId)>,
    seq: u64,
    v: f64,
    max_finish: f64,
    input_ready: bool,
    max_flows: usize,
    /// The flow of the last turn (context switches are counted against it).
    last: Option<FlowId>,
    pub switches: u64,
    /// Sum of the guaranteed fractions and of the weights of every installed flow (admission
    /// and the reported shares).
    sum_cpu: f64,
    sum_weight: f64,
    /// The same sums over the *active* flows (eligible or running): what a turn is charged
    /// against, so that weighted flows share what the active guaranteed ones leave and idle
    /// flows change nothing.
    act_cpu: f64,
    act_weight: f64,
}

/// Start tags are non-negative finite, so their bit patterns sort like the numbers.
fn tag_key(t: f64) -> u64 {
    debug_assert!(t >= 0.0 && t.is_finite());
    t.to_bits()
}

impl<P> FlowSched<P> {
    /// A scheduler with the input flow (id [`INPUT`]) and room for `max_flows` flows besides it.
    pub fn new(input: FlowParams, max_flows: usize) -> Result<FlowSched<P>, FieldError> {
        input.validate().map_err(|e| e.within("input"))?;
        let mut s = FlowSched {
            slots: Vec::new(),
            free: Vec::new(),
            eligible: BTreeSet::new(),
            seq: 0,
            v: 0.0,
            max_finish: 0.0,
            input_ready: false,
            max_flows,
            last: None,
            switches: 0,
            sum_cpu: 0.0,
            sum_weight: 0.0,
            act_cpu: 0.0,
            act_weight: 0.0,
        };
        s.slots
            .push(Some(Slot::new("input".into(), input, Pipeline::default())));
        s.renormalize();
        Ok(s)
    }

    /// Installs a flow; its id is returned.
    pub fn add(
        &mut self,
        name: &str,
        params: FlowParams,
        pipeline: Pipeline,
    ) -> Result<FlowId, FieldError> {
        params.validate()?;
        if self.len() >= self.max_flows {
            return Err(FieldError::new(
                "flows",
                format!(
                    "the flow table is full ({} flows; max-flows)",
                    self.max_flows
                ),
            ));
        }
        self.check_guarantees(None, &params)?;
        match params.share {
            Share::Cpu(f) => self.sum_cpu += f,
            Share::Weight(w) => self.sum_weight += f64::from(w),
        }
        let slot = Slot::new(name.into(), params, pipeline);
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(slot);
                id
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as FlowId
            }
        };
        Ok(id)
    }

    /// Changes a flow's parameters (its queue and any preempted packet stay). A shorter queue
    /// limit drops from the tail of the queue: those packets are handed back to be freed.
    pub fn set(&mut self, id: FlowId, params: FlowParams) -> Result<Vec<P>, FieldError> {
        params.validate()?;
        self.slot(id)
            .ok_or_else(|| FieldError::new("flow", format!("no flow {id}")))?;
        self.check_guarantees(Some(id), &params)?;
        let was_active = self.deactivate(id);
        let s = self.slot_mut(id).expect("checked");
        s.params = params;
        let keep = (params.queue_limit as usize).min(s.queue.len());
        let dropped: Vec<P> = s.queue.drain(keep..).collect();
        s.stats.queue_drops += dropped.len() as u64;
        if was_active {
            self.activate(id);
        }
        self.renormalize();
        Ok(dropped)
    }

    /// Replaces a flow's pipeline; a packet preempted mid-pipeline restarts at its first element.
    pub fn set_pipeline(&mut self, id: FlowId, pipeline: Pipeline) -> Result<(), FieldError> {
        let s = self
            .slot_mut(id)
            .ok_or_else(|| FieldError::new("flow", format!("no flow {id}")))?;
        s.pipeline = pipeline;
        if let Some((p, _)) = s.current.take() {
            s.queue.push_front(p);
        }
        Ok(())
    }

    /// Removes a flow; its queued packets are handed back for the caller to free.
    pub fn remove(&mut self, id: FlowId) -> Result<Vec<P>, FieldError> {
        if id == INPUT {
            return Err(FieldError::new("flow", "the input flow cannot be removed"));
        }
        if self.slot(id).is_none() {
            return Err(FieldError::new("flow", format!("no flow {id}")));
        }
        self.deactivate(id);
        let s = self.slots[id as usize].take().expect("checked");
        if let Some((a, b)) = s.key {
            self.eligible.remove(&(a, b, id));
        }
        self.free.push(id);
        if self.last == Some(id) {
            self.last = None;
        }
        self.renormalize();
        let mut out: Vec<P> = s.current.into_iter().map(|(p, _)| p).collect();
        out.extend(s.queue);
        Ok(out)
    }

    /// Flows installed, besides the input flow.
    pub fn len(&self) -> usize {
        self.slots.len() - 1 - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Flows with work (the input flow included when ready).
    pub fn eligible(&self) -> usize {
        self.eligible.len()
    }

    fn slot(&self, id: FlowId) -> Option<&Slot<P>> {
        self.slots.get(id as usize).and_then(Option::as_ref)
    }

    fn slot_mut(&mut self, id: FlowId) -> Option<&mut Slot<P>> {
        self.slots.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// The guaranteed fractions must leave room: their sum stays below 1.
    fn check_guarantees(
        &self,
        replacing: Option<FlowId>,
        p: &FlowParams,
    ) -> Result<(), FieldError> {
        let mut sum = self.sum_cpu;
        if let Some(Share::Cpu(f)) = replacing
            .and_then(|id| self.slot(id))
            .map(|s| s.params.share)
        {
            sum -= f;
        }
        if let Share::Cpu(f) = p.share {
            sum += f;
        }
        if sum >= 1.0 - 1e-9 {
            return Err(FieldError::new(
                "cpu",
                format!("the guaranteed CPU fractions would add up to {sum:.3}, not below 1"),
            ));
        }
        Ok(())
    }

    fn iter_slots(&self) -> impl Iterator<Item = (FlowId, &Slot<P>)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (i as FlowId, s)))
    }

    /// Recomputes the share totals (O(flows); on set-up and tear-down only).
    fn renormalize(&mut self) {
        let (mut cpu, mut weight) = (0.0, 0.0);
        for s in self.slots.iter().flatten() {
            match s.params.share {
                Share::Cpu(f) => cpu += f,
                Share::Weight(w) => weight += f64::from(w),
            }
        }
        self.sum_cpu = cpu;
        self.sum_weight = weight;
    }

    /// The share a turn is charged against: guaranteed flows their fraction, weighted flows
    /// what the active guaranteed flows leave, by weight among the active weighted flows.
    fn w(&self, p: &FlowParams) -> f64 {
        match p.share {
            Share::Cpu(f) => f,
            Share::Weight(w) => {
                let w = f64::from(w);
                (1.0 - self.act_cpu).max(0.0) * w / self.act_weight.max(w)
            }
        }
        .max(1e-9)
    }

    /// The share when every installed flow is backlogged (reports).
    fn w_all(&self, p: &FlowParams) -> f64 {
        match p.share {
            Share::Cpu(f) => f,
            Share::Weight(w) => {
                (1.0 - self.sum_cpu).max(0.0) * f64::from(w) / self.sum_weight.max(1.0)
            }
        }
    }

    fn activate(&mut self, id: FlowId) {
        let s = self.slots[id as usize].as_mut().expect("live flow");
        if s.active {
            return;
        }
        s.active = true;
        match s.params.share {
            Share::Cpu(f) => self.act_cpu += f,
            Share::Weight(w) => self.act_weight += f64::from(w),
        }
    }

    /// Returns whether the flow was active.
    fn deactivate(&mut self, id: FlowId) -> bool {
        let s = self.slots[id as usize].as_mut().expect("live flow");
        if !s.active {
            return false;
        }
        s.active = false;
        match s.params.share {
            Share::Cpu(f) => self.act_cpu = (self.act_cpu - f).max(0.0),
            Share::Weight(w) => self.act_weight = (self.act_weight - f64::from(w)).max(0.0),
        }
        true
    }

    fn make_eligible(&mut self, id: FlowId) {
        let v = self.v;
        let seq = self.seq;
        let s = self.slots[id as usize].as_mut().expect("live flow");
        if s.key.is_some() {
            return;
        }
        s.start = s.start.max(v).max(s.finish);
        let key = (tag_key(s.start), seq);
        s.key = Some(key);
        self.seq += 1;
        self.eligible.insert((key.0, key.1, id));
        self.activate(id);
    }

    /// Queues a packet on flow `id`; a full queue (or an unknown flow) hands it back: the
    /// caller drops it (the flow's `queue_drops` counts it).
    pub fn enqueue(&mut self, id: FlowId, pkt: P) -> Result<(), P> {
        let Some(s) = self.slot_mut(id).filter(|_| id != INPUT) else {
            return Err(pkt);
        };
        if s.queue.len() >= s.params.queue_limit as usize {
            s.stats.queue_drops += 1;
            return Err(pkt);
        }
        s.queue.push_back(pkt);
        s.stats.enqueued += 1;
        self.make_eligible(id);
        Ok(())
    }

    /// Whether the rings have frames (the input flow is eligible).
    pub fn set_input_ready(&mut self, ready: bool) {
        if ready == self.input_ready {
            return;
        }
        self.input_ready = ready;
        if ready {
            self.make_eligible(INPUT);
        } else if let Some(s) = self.slots[0].as_mut() {
            if let Some((a, b)) = s.key.take() {
                self.eligible.remove(&(a, b, INPUT));
            }
            self.deactivate(INPUT);
        }
    }

    /// Picks the eligible flow with the smallest start tag (ties: the one waiting longest).
    /// The flow leaves the eligible set until its turn is charged.
    pub fn pick(&mut self) -> Next {
        let Some((_, _, id)) = self.eligible.pop_first() else {
            return Next::Idle;
        };
        let s = self.slots[id as usize]
            .as_mut()
            .expect("eligible flow exists");
        s.key = None;
        self.v = s.start;
        if self.last != Some(id) {
            self.switches += 1;
            // The flow that ran last stopped mid-packet and another goes first: preempted.
            if let Some(prev) = self.last.and_then(|l| self.slots[l as usize].as_mut()) {
                if prev.current.is_some() {
                    prev.stats.preemptions += 1;
                }
            }
            self.last = Some(id);
        }
        if id == INPUT {
            self.input_ready = false;
            Next::Input
        } else {
            Next::Flow(id)
        }
    }

    /// Charges `cost_ns` to the input flow after its turn; `still_ready` if the rings still hold
    /// frames.
    pub fn input_done(&mut self, cost_ns: u64, still_ready: bool) {
        self.charge(INPUT, cost_ns, still_ready);
        if still_ready {
            self.set_input_ready(true);
        } else {
            self.deactivate(INPUT);
        }
    }

    /// Charges a turn. The server goes idle when the flow that ran has nothing left and no
    /// other flow waits: only then does v jump to the largest finish tag (SFQ's rule).
    fn charge(&mut self, id: FlowId, cost_ns: u64, backlogged: bool) {
        let w = self.w(&self.slots[id as usize].as_ref().expect("live flow").params);
        let s = self.slots[id as usize].as_mut().expect("live flow");
        s.stats.cpu_ns += cost_ns;
        s.stats.turns += 1;
        s.finish = s.start + cost_ns as f64 / w;
        s.start = s.finish;
        self.max_finish = self.max_finish.max(s.finish);
        if !backlogged && self.eligible.is_empty() {
            self.v = self.v.max(self.max_finish);
        }
    }

    /// Runs a turn of flow `id` (just returned by [`pick`](Self::pick)): packet after packet,
    /// element after element, until the queue is empty or the flow has run its quantum.
    /// `exec(pipeline, pos, pkt)` runs element `pos` (`pos == pipeline.len()`: the forwarding
    /// decision, after which the packet is always finished) and returns the packet's progress
    /// and the CPU time it took.
    pub fn run_turn<F>(&mut self, id: FlowId, mut exec: F) -> Turn
    where
        F: FnMut(&mut Pipeline, usize, P) -> (Progress<P>, u64),
    {
        let mut turn = Turn::default();
        let Some(s) = self.slot_mut(id).filter(|_| id != INPUT) else {
            return turn;
        };
        let quantum = s.params.quantum_ns;
        loop {
            let (pkt, pos) = match s.current.take() {
                Some((p, pos)) => (p, pos as usize),
                None => match s.queue.pop_front() {
                    Some(p) => (p, 0),
                    None => break,
                },
            };
            let last = s.pipeline.len();
            let (progress, cost) = exec(&mut s.pipeline, pos.min(last), pkt);
            turn.cost_ns += cost;
            turn.elements += 1;
            match progress {
                Progress::Next(p) if pos < last => s.current = Some((p, (pos + 1) as u16)),
                Progress::At(p, at) if pos < last => {
                    s.current = Some((p, at.clamp(pos + 1, last) as u16));
                }
                // After the forwarding decision there is no next element: the caller must take
                // the packet; if it did not, it is simply no longer this flow's.
                Progress::Next(_) | Progress::At(..) | Progress::Finished => {
                    s.stats.done += 1;
                    turn.packets_done += 1;
                }
            }
            if turn.cost_ns >= quantum {
                break;
            }
        }
        turn.mid_packet = s.current.is_some();
        let backlogged = s.backlogged();
        self.charge(id, turn.cost_ns, backlogged);
        if backlogged {
            self.make_eligible(id);
        } else {
            self.deactivate(id);
        }
        turn
    }

    /// One flow, for counters and `ctl flow list`.
    pub fn view(&self, id: FlowId) -> Option<FlowView<'_>> {
        self.slot(id).map(|s| FlowView {
            id,
            name: &s.name,
            params: s.params,
            queue_len: s.queue.len() + usize::from(s.current.is_some()),
            stats: s.stats,
            pipeline: &s.pipeline,
        })
    }

    /// Every flow, the input flow first.
    pub fn views(&self) -> impl Iterator<Item = FlowView<'_>> {
        self.iter_slots()
            .map(|(id, _)| self.view(id).expect("live"))
    }

    /// The id of the flow called `name`.
    pub fn find(&self, name: &str) -> Option<FlowId> {
        self.iter_slots()
            .find(|(_, s)| s.name == name)
            .map(|(i, _)| i)
    }

    /// Every queued packet of every flow, taken out (shut-down: the caller frees them).
    pub fn drain(&mut self) -> Vec<P> {
        let mut out = Vec::new();
        for s in self.slots.iter_mut().flatten() {
            if let Some((p, _)) = s.current.take() {
                out.push(p);
            }
            out.extend(s.queue.drain(..));
            s.key = None;
            s.active = false;
        }
        self.act_cpu = 0.0;
        self.act_weight = 0.0;
        self.eligible.clear();
        self.input_ready = false;
        out
    }

    /// Normalised share of a flow (for reports: the fraction of CPU it gets when every flow is
    /// backlogged).
    pub fn share_of(&self, id: FlowId) -> Option<f64> {
        self.slot(id).map(|s| self.w_all(&s.params))
    }
}

impl<P> Slot<P> {
    fn new(name: String, params: FlowParams, pipeline: Pipeline) -> Slot<P> {
        Slot {
            name,
            params,
            start: 0.0,
            finish: 0.0,
            key: None,
            active: false,
            queue: VecDeque::new(),
            current: None,
            pipeline,
            stats: FlowStats::default(),
        }
    }
}
