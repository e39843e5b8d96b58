//! Property tests of the poll engine: budgets, conservation, per-flow order, no starvation, and
//! the poll list of paper 000, Fig. 2.

use llr_core::sched::{Grant, PollEngine, Ring, SchedConfig, StrategyKind};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pkt {
    flow: u32,
    seq: u64,
}

#[derive(Debug, Clone)]
enum Op {
    /// `n` packets of `flow` arrive, in class `class`.
    Arrive { class: usize, flow: u32, n: usize },
    /// The core serves up to `k` grants; each grant served with `take` packets at most.
    Serve { k: usize, take: u32, cost: u64 },
}

fn op(classes: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..classes, 0u32..6, 1usize..40).prop_map(|(class, flow, n)| Op::Arrive {
            class,
            flow,
            n
        }),
        (1usize..30, 1u32..80, 0u64..5_000).prop_map(|(k, take, cost)| Op::Serve { k, take, cost }),
    ]
}

fn strategy() -> impl Strategy<Value = StrategyKind> {
    prop::sample::select(StrategyKind::ALL.to_vec())
}

struct Harness {
    engine: PollEngine,
    rings: Vec<Ring<Pkt>>,
    class_to_ring: Vec<usize>,
    ring_dev: Vec<usize>,
    budget: Vec<u32>,
    device_budget: u32,
    packet_budget: bool,
    next_seq: Vec<u64>,
    delivered: Vec<Vec<u64>>,
    enqueued: u64,
    dropped: u64,
    /// (device, turn id, packets served in that turn); a turn ends when the device leaves the
    /// head of the poll list (rotation or re-arm), which the device's counters reveal.
    turn: Option<(usize, u64, u32)>,
}

impl Harness {
    fn new(kind: StrategyKind, classes: usize, budgets: &[u32], ring_size: usize) -> Self {
        let names: Vec<String> = (0..classes).map(|i| format!("c{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut cfg = SchedConfig::new(kind, &refs);
        if kind == StrategyKind::LlWfq {
            cfg = cfg.with_budgets(budgets);
        }
        cfg.time_slice_ns = 10_000;
        let layout = cfg.layout().unwrap();
        let engine = PollEngine::new(&layout);
        let ring_dev = (0..layout.rings.len())
            .map(|r| engine.device_of(r))
            .collect();
        Harness {
            engine,
            rings: (0..layout.rings.len())
                .map(|_| Ring::new(ring_size))
                .collect(),
            class_to_ring: layout.class_to_ring.clone(),
            ring_dev,
            budget: layout.rings.iter().map(|r| r.budget).collect(),
            device_budget: layout.device_budget,
            packet_budget: kind.is_packet_budget(),
            next_seq: vec![0; 6],
            delivered: vec![Vec::new(); 6],
            enqueued: 0,
            dropped: 0,
            turn: None,
        }
    }

    fn arrive(&mut self, class: usize, flow: u32, n: usize) {
        // A flow stays in one class, as a classifier keyed on the flow's headers keeps it: the
        // flow decides the class, `class` only picks among flows of that class.
        let classes = self.class_to_ring.len();
        let flow = (flow - flow % classes as u32) + class as u32 % classes as u32;
        let flow = if flow as usize >= self.next_seq.len() {
            class as u32
        } else {
            flow
        };
        let ring = self.class_to_ring[flow as usize % classes];
        for _ in 0..n {
            let seq = self.next_seq[flow as usize];
            self.next_seq[flow as usize] += 1;
            match self.rings[ring].push(Pkt { flow, seq }) {
                Ok(()) => self.enqueued += 1,
                Err(_) => self.dropped += 1,
            }
        }
        self.engine.wake(self.ring_dev[ring]);
    }

    /// Serves one grant; checks the budget invariants. Returns false when the engine is idle.
    fn serve(&mut self, take: u32, cost: u64) -> Result<bool, TestCaseError> {
        let Some(g) = self.engine.pick(&self.rings[..]) else {
            prop_assert!(self.engine.is_idle());
            for d in 0..self.engine.num_devices() {
                prop_assert!(
                    !self.engine.is_scheduled(d),
                    "idle engine with a scheduled device"
                );
            }
            prop_assert!(
                self.rings.iter().all(|r| r.is_empty()),
                "engine idle while packets wait"
            );
            self.turn = None;
            return Ok(false);
        };
        let Grant { device, ring, max } = g;
        prop_assert!(self.engine.is_scheduled(device));
        prop_assert!(!self.rings[ring].is_empty(), "granted an empty ring");
        prop_assert_eq!(self.ring_dev[ring], device);
        prop_assert!(max <= self.device_budget);
        if self.packet_budget {
            prop_assert!(
                max <= self.budget[ring],
                "grant {} above ring budget {}",
                max,
                self.budget[ring]
            );
        }
        // Device budget per turn: the served count since the device reached the head.
        let st = &self.engine.device_stats()[device];
        let turn_id = st.budget_exhaustions + st.rearms;
        let served_in_turn = match self.turn {
            Some((d, t, s)) if d == device && t == turn_id => s,
            _ => 0,
        };
        let n = take.min(max).min(self.rings[ring].len() as u32);
        prop_assert!(
            served_in_turn + n <= self.device_budget,
            "device budget exceeded in one turn"
        );
        self.turn = Some((device, turn_id, served_in_turn + n));
        for _ in 0..n {
            let p = self.rings[ring].pop().unwrap();
            self.delivered[p.flow as usize].push(p.seq);
        }
        self.engine.complete(g, n, cost);
        Ok(true)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever the interleaving of arrivals and service: every accepted packet is delivered
    /// exactly once, in order within its flow; drops happen only at full rings; budgets hold;
    /// an idle engine has every device armed and every ring empty.
    #[test]
    fn conserves_orders_and_respects_budgets(
        kind in strategy(),
        classes in 1usize..5,
        be in 1u32..10,
        ops in prop::collection::vec(op(4), 1..120),
        ring_size in 4usize..64,
    ) {
        let budgets: Vec<u32> = (0..classes).map(|i| if i == 0 { 60 } else { be }).collect();
        let mut h = Harness::new(kind, classes, &budgets, ring_size);
        for o in ops {
            match o {
                Op::Arrive { class, flow, n } => h.arrive(class % classes, flow, n),
                Op::Serve { k, take, cost } => {
                    for _ in 0..k {
                        if !h.serve(take, cost)? {
                            break;
                        }
                    }
                }
            }
        }
        // Drain.
        let mut guard = 0;
        while h.serve(u32::MAX, 1_000)? {
            guard += 1;
            prop_assert!(guard < 100_000, "engine does not drain");
        }
        let delivered: usize = h.delivered.iter().map(Vec::len).sum();
        prop_assert_eq!(delivered as u64, h.enqueued, "lost or duplicated packets");
        let ring_drops: u64 = h.rings.iter().map(|r| r.dropped()).sum();
        prop_assert_eq!(ring_drops, h.dropped);
        for (f, seqs) in h.delivered.iter().enumerate() {
            prop_assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {} reordered: {:?}", f, seqs);
        }
    }

    /// With every ring permanently backlogged, every ring of a budgeted (non-strict-priority)
    /// strategy is served within a bounded number of grants.
    #[test]
    fn no_class_with_a_budget_starves(
        kind in prop::sample::select(vec![
            StrategyKind::Sq, StrategyKind::Rr, StrategyKind::LlRr, StrategyKind::LlWfq,
            StrategyKind::Fcfs, StrategyKind::RrSlice, StrategyKind::Wfq,
            StrategyKind::LlRrSlice, StrategyKind::LlWfqSlice,
        ]),
        classes in 2usize..5,
        be in 1u32..10,
        take in 1u32..70,
    ) {
        let budgets: Vec<u32> = (0..classes).map(|i| if i == 0 { 60 } else { be }).collect();
        let mut h = Harness::new(kind, classes, &budgets, 1 << 16);
        for c in 0..classes {
            for f in 0..6u32 {
                h.arrive(c, f, 2_000);
            }
        }
        let rings = h.rings.len();
        let mut last_served = vec![0usize; rings];
        for step in 1..=3_000usize {
            // Keep every class backlogged.
            for c in 0..classes {
                if h.rings[h.class_to_ring[c]].len() < 200 {
                    h.arrive(c, c as u32, 200);
                }
            }
            let before: Vec<usize> = h.rings.iter().map(|r| r.len()).collect();
            prop_assert!(h.serve(take, 1_000)?);
            for r in 0..rings {
                if h.rings[r].len() < before[r] {
                    last_served[r] = step;
                }
                // FCFS serves a ring until it is empty, so its bound is the backlog itself.
                if kind != StrategyKind::Fcfs {
                    prop_assert!(step - last_served[r] < 400, "ring {} starved for {} grants", r, step - last_served[r]);
                }
            }
        }
    }
}

/// Fig. 2, step by step: two devices (RR), one empties and leaves the poll list and re-arms;
/// a wake-up puts it back at the tail.
#[test]
fn poll_list_follows_fig2() {
    let cfg = SchedConfig::new(StrategyKind::Rr, &["rt", "be"]);
    let mut e = PollEngine::new(&cfg.layout().unwrap());
    let mut backlog = [10usize, 200];
    assert!(e.wake(0) && e.wake(1));
    assert_eq!(e.poll_list().collect::<Vec<_>>(), vec![0, 1]);
    let g = e.pick(&backlog[..]).unwrap();
    assert_eq!((g.device, g.ring, g.max), (0, 0, 64));
    e.complete(g, 10, 0);
    backlog[0] = 0;
    // Device 0 is empty: it leaves the poll list and is re-armed; device 1 is served.
    let g = e.pick(&backlog[..]).unwrap();
    assert_eq!(g.device, 1);
    assert_eq!(e.poll_list().collect::<Vec<_>>(), vec![1]);
    assert!(!e.is_scheduled(0));
    assert_eq!(e.device_stats()[0].rearms, 1);
    e.complete(g, 64, 0);
    backlog[1] -= 64;
    // Device budget spent, packets left: device 1 goes to the tail (here: stays alone).
    backlog[0] = 5;
    assert!(e.wake(0), "an armed device takes the interrupt");
    let g = e.pick(&backlog[..]).unwrap();
    assert_eq!(e.device_stats()[1].budget_exhaustions, 1);
    assert_eq!(
        g.device, 0,
        "device 1 moved behind the newly woken device 0"
    );
    assert_eq!(e.poll_list().collect::<Vec<_>>(), vec![0, 1]);
}
