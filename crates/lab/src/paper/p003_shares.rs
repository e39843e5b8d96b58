//! Paper 003 (CROSS), Figs. 9–11: flow-based against element-based scheduling when two flows
//! share an element.
//!
//! Fig. 9's configuration: flows A and B each have a private `Paint` and share a
//! `MultPull2Push`, which pulls from A's and B's queues in turn. The goal is A at twice B's rate.
//!
//! - **Element-based** (Click): every element that runs as a task has a CPU share: A's Paint 4,
//!   B's Paint 2, and the shared element the "apparently reasonable" (4 + 2)/2 = 3. Each task
//!   is a flow of the router's [`FlowSched`] with that weight and one packet per turn (a Click
//!   task runs once per scheduling); the Paints push into queues of 1 000 (Click's `Queue`
//!   default), dropping when full, and the shared element pulls from them alternately.
//! - **Flow-based** (CROSS): two flows of the same [`FlowSched`], A of weight 2 and B of 1,
//!   each running both elements, the shared one in the flow that owns the packet.
//!
//! Both run the same elements ([`Work`] of a fixed CPU time each) on the same scheduler, both
//! flows always backlogged, 64-byte packets. The paper does not give the elements' costs: both
//! take 1 µs here. Time is virtual: the sum of the elements' costs.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::Path;

use llr_core::flow::element::Work;
use llr_core::flow::{Cx, FlowId, FlowParams, FlowSched, Next, Pipeline, Pkt, Progress, Share};
use serde::Serialize;

use super::{Claim, PaperArgs};
use crate::plot::{line_chart, Series as PlotSeries};
use crate::report::Fixed;
use crate::{LabError, Result};

/// CPU time of each element, ns.
pub const ELEMENT_NS: u64 = 1_000;
/// Click's `Queue` capacity between a Paint and the shared element.
pub const QUEUE: usize = 1_000;
/// Simulated time, and the interval of the progress samples, ns.
pub const DURATION_NS: u64 = 100_000_000;
pub const SAMPLE_NS: u64 = 1_000_000;
/// The element shares of the element-based run: A's Paint, B's Paint, the shared element.
pub const ELEMENT_SHARES: [u32; 3] = [4, 2, 3];
/// The flow shares of the flow-based run: A, B.
pub const FLOW_SHARES: [u32; 2] = [2, 1];

/// Cumulative progress of both flows at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    pub t_ms: f64,
    /// Packets through both elements.
    pub a: u64,
    pub b: u64,
    /// CPU time spent on the flow's packets, dropped ones included, ns.
    pub a_cpu_ns: u64,
    pub b_cpu_ns: u64,
}

/// One scheduling design's run.
#[derive(Debug, Clone)]
pub struct Run {
    pub samples: Vec<Sample>,
    /// A's and B's packets dropped at the shared element's queues.
    pub dropped: [u64; 2],
}

impl Run {
    fn last(&self) -> Sample {
        *self.samples.last().expect("a run has samples")
    }
    /// A's forwarded packets over B's.
    pub fn ratio(&self) -> f64 {
        let s = self.last();
        s.a as f64 / s.b.max(1) as f64
    }
}

/// What the experiment gave.
#[derive(Debug, Clone)]
pub struct Output {
    pub element_based: Run,
    pub flow_based: Run,
    pub claims: Vec<Claim>,
}

fn bad(e: llr_core::error::FieldError) -> LabError {
    LabError::Failed(format!("flow scheduler: {e}"))
}

fn work() -> Pipeline {
    Pipeline::new(vec![Box::new(Work::new(ELEMENT_NS))])
}

/// Runs element `pos` of `p` on a 64-byte packet: whether the packet goes on to another
/// element, and the CPU time. After the last element the packet has left the task or flow
/// (the forwarding decision, which costs nothing here, is not a step of its own).
fn exec(p: &mut Pipeline, pos: usize) -> (bool, u64) {
    if pos >= p.len() {
        return (false, 0);
    }
    let mut frame = [0u8; 64];
    let mut spent = 0;
    let mut spend = |ns: u64| spent += ns;
    let mut cx = Cx {
        now_ns: 0,
        spend: &mut spend,
    };
    let mut pkt = Pkt {
        frame: &mut frame,
        len: 64,
        ingress: 1,
    };
    p.run(pos, &mut pkt, &mut cx);
    (pos + 1 < p.len(), spent)
}

/// One element of flow `f`'s packet, its time charged to `cpu[f]`; `left(f)` when the packet
/// has left the task or flow.
fn step(
    p: &mut Pipeline,
    pos: usize,
    f: usize,
    cpu: &mut [u64; 2],
    left: &mut dyn FnMut(usize),
) -> (Progress<usize>, u64) {
    let (goes_on, ns) = exec(p, pos);
    cpu[f] += ns;
    if goes_on {
        (Progress::Next(f), ns)
    } else {
        left(f);
        (Progress::Finished, ns)
    }
}

fn sampler(samples: &mut Vec<Sample>, now: u64, done: [u64; 2], cpu: [u64; 2]) {
    while (samples.len() as u64 + 1) * SAMPLE_NS <= now {
        samples.push(Sample {
            t_ms: (samples.len() as u64 + 1) as f64 * SAMPLE_NS as f64 / 1e6,
            a: done[0],
            b: done[1],
            a_cpu_ns: cpu[0],
            b_cpu_ns: cpu[1],
        });
    }
}

/// Click's way: the three elements are tasks with shares of their own. A packet is its
/// flow's index (0 = A, 1 = B).
pub fn element_based() -> Result<Run> {
    let one = |w| FlowParams {
        share: Share::Weight(w),
        quantum_ns: 1,
        queue_limit: 1,
    };
    let mut s = FlowSched::<usize>::new(FlowParams::default(), 4).map_err(bad)?;
    let paint: Vec<FlowId> = (0..2)
        .map(|f| s.add(&format!("paint-{f}"), one(ELEMENT_SHARES[f]), work()))
        .collect::<std::result::Result<_, _>>()
        .map_err(bad)?;
    let shared = s
        .add("mult-pull2push", one(ELEMENT_SHARES[2]), work())
        .map_err(bad)?;
    let mut queues = [VecDeque::new(), VecDeque::new()];
    let (mut done, mut cpu, mut dropped) = ([0u64; 2], [0u64; 2], [0u64; 2]);
    // Whose queue the shared element pulls from next.
    let mut turn_to = 0;
    let mut samples = Vec::new();
    let mut now = 0u64;
    // Backlogged sources: each Paint always has a packet waiting.
    for (f, &id) in paint.iter().enumerate() {
        s.enqueue(id, f)
            .map_err(|_| LabError::Failed("enqueue".into()))?;
    }
    while now < DURATION_NS {
        if s.view(shared).is_some_and(|v| v.queue_len == 0) {
            for k in 0..2 {
                let q = (turn_to + k) % 2;
                if let Some(f) = queues[q].pop_front() {
                    s.enqueue(shared, f)
                        .map_err(|_| LabError::Failed("enqueue".into()))?;
                    turn_to = (q + 1) % 2;
                    break;
                }
            }
        }
        let Next::Flow(id) = s.pick() else {
            return Err(LabError::Failed("no element task was eligible".into()));
        };
        let mut out = None;
        let turn = s.run_turn(id, |p, pos, f| {
            step(p, pos, f, &mut cpu, &mut |f| out = Some(f))
        });
        now += turn.cost_ns;
        if let Some(f) = out {
            if id == shared {
                done[f] += 1;
            } else if queues[f].len() < QUEUE {
                queues[f].push_back(f);
            } else {
                dropped[f] += 1;
            }
        }
        if let Some(f) = paint.iter().position(|&p| p == id) {
            if s.view(id).is_some_and(|v| v.queue_len == 0) {
                s.enqueue(id, f)
                    .map_err(|_| LabError::Failed("enqueue".into()))?;
            }
        }
        sampler(&mut samples, now, done, cpu);
    }
    Ok(Run { samples, dropped })
}

/// CROSS's way: two flows with shares, each running both elements.
pub fn flow_based() -> Result<Run> {
    let mut s = FlowSched::<usize>::new(FlowParams::default(), 3).map_err(bad)?;
    let two = || {
        Pipeline::new(vec![
            Box::new(Work::new(ELEMENT_NS)),
            Box::new(Work::new(ELEMENT_NS)),
        ])
    };
    let ids: Vec<FlowId> = (0..2)
        .map(|f| {
            s.add(
                ["A", "B"][f],
                FlowParams {
                    share: Share::Weight(FLOW_SHARES[f]),
                    ..FlowParams::default()
                },
                two(),
            )
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(bad)?;
    let (mut done, mut cpu) = ([0u64; 2], [0u64; 2]);
    let mut samples = Vec::new();
    let mut now = 0u64;
    while now < DURATION_NS {
        for (f, &id) in ids.iter().enumerate() {
            while s.view(id).is_some_and(|v| v.queue_len < 2) {
                s.enqueue(id, f)
                    .map_err(|_| LabError::Failed("enqueue".into()))?;
            }
        }
        let Next::Flow(id) = s.pick() else {
            return Err(LabError::Failed("no flow was eligible".into()));
        };
        let turn = s.run_turn(id, |p, pos, f| {
            step(p, pos, f, &mut cpu, &mut |f| done[f] += 1)
        });
        now += turn.cost_ns;
        sampler(&mut samples, now, done, cpu);
    }
    Ok(Run {
        samples,
        dropped: [0, 0],
    })
}

/// The paper's statements about Figs. 10 and 11.
pub fn claims(e: &Run, f: &Run) -> Vec<Claim> {
    let (el, fl) = (e.last(), f.last());
    vec![
        Claim {
            figure: "10",
            statement: "element-based: A's actual rate is significantly smaller than the expected twice B's",
            check: format!(
                "A {} and B {} packets in {} ms: {:.2} to 1",
                el.a,
                el.b,
                DURATION_NS / 1_000_000,
                e.ratio()
            ),
            holds: e.ratio() < 0.9 * 2.0,
        },
        Claim {
            figure: "10",
            statement: "because the shared element does not get the CPU to keep up with A's arrivals, A's packets are dropped",
            check: format!(
                "dropped at the shared element's queues: A {}, B {}",
                e.dropped[0], e.dropped[1]
            ),
            holds: e.dropped[0] > 0,
        },
        Claim {
            figure: "11",
            statement: "flow-based: the progress of A to B is very close to the expected 2:1",
            check: format!("A {} and B {} packets: {:.3} to 1", fl.a, fl.b, f.ratio()),
            holds: (f.ratio() / 2.0 - 1.0).abs() <= 0.02,
        },
    ]
}

/// Runs Figs. 10 and 11 (deterministic: no random input).
pub fn run() -> Result<Output> {
    let (e, f) = (element_based()?, flow_based()?);
    let claims = claims(&e, &f);
    Ok(Output {
        element_based: e,
        flow_based: f,
        claims,
    })
}

/// Writes `fig10.png`, `fig11.png`, `shares.csv`, and the section of the report: appended to
/// `report.md` when `append` (after Fig. 5's), else as the whole of it.
pub fn write_report(out: &Path, o: &Output, append: bool) -> Result<()> {
    std::fs::create_dir_all(out)
        .map_err(|e| LabError::io(format!("create {}", out.display()), e))?;
    #[derive(Serialize)]
    struct Row {
        design: &'static str,
        t_ms: Fixed<1>,
        a: u64,
        b: u64,
        a_cpu_ms: Fixed<3>,
        b_cpu_ms: Fixed<3>,
    }
    let mut rows = Vec::new();
    for (design, r) in [("element", &o.element_based), ("flow", &o.flow_based)] {
        for s in &r.samples {
            rows.push(Row {
                design,
                t_ms: Fixed(s.t_ms),
                a: s.a,
                b: s.b,
                a_cpu_ms: Fixed(s.a_cpu_ns as f64 / 1e6),
                b_cpu_ms: Fixed(s.b_cpu_ns as f64 / 1e6),
            });
        }
    }
    crate::report::write_csv(
        &out.join("shares.csv"),
        &rows,
        "design,t_ms,a,b,a_cpu_ms,b_cpu_ms",
    )?;
    for (fig, r, title) in [
        ("10", &o.element_based, "element-based scheduling (Click)"),
        ("11", &o.flow_based, "flow-based scheduling (CROSS)"),
    ] {
        let line = |label: &str, class, f: &dyn Fn(&Sample) -> f64| PlotSeries {
            label: label.into(),
            points: r.samples.iter().map(|s| (s.t_ms, f(s))).collect(),
            group: label.chars().next().unwrap_or('?').to_string(),
            class,
        };
        // A after B, so that where they coincide (Fig. 10) A's line is the one seen.
        let series = vec![
            line("B", 0, &|s| s.b as f64),
            line("A", 0, &|s| s.a as f64),
            line("A expected (2 × B)", 1, &|s| 2.0 * s.b as f64),
        ];
        let png = format!("fig{fig}.png");
        line_chart(
            &out.join(&png),
            &format!("Fig. {fig}: progress of flows A and B, {title}"),
            "time (ms)",
            "packets through both elements",
            &series,
            false,
        )
        .map_err(|e| LabError::Failed(format!("plot {png}: {e}")))?;
    }
    let mut md = String::new();
    if !append {
        md.push_str("# Paper 003 (CROSS)\n");
    }
    let _ = write!(
        md,
        "\n## Figs. 9–11: flow-based against element-based scheduling\n\n\
         Two flows share an element; the goal is A at twice B's rate. Element-based: the \
         elements are tasks of the router's flow scheduler with shares A's Paint {}, B's Paint \
         {}, the shared MultPull2Push {} (Click's per-element shares, the paper's choice), one \
         packet per turn, queues of {QUEUE} before the shared element, which pulls from them in \
         turn. Flow-based: flows A and B of weight {} and {}, each running both elements. Every \
         element takes {ELEMENT_NS} ns, both flows are always backlogged, {} ms of virtual \
         time.\n\n![Fig. 10](fig10.png)\n\n![Fig. 11](fig11.png)\n\n\
         | design | A packets | B packets | A : B | A dropped | A CPU ms | B CPU ms |\n\
         |---|---|---|---|---|---|---|\n",
        ELEMENT_SHARES[0],
        ELEMENT_SHARES[1],
        ELEMENT_SHARES[2],
        FLOW_SHARES[0],
        FLOW_SHARES[1],
        DURATION_NS / 1_000_000
    );
    for (design, r) in [
        ("element-based", &o.element_based),
        ("flow-based", &o.flow_based),
    ] {
        let s = r.last();
        let _ = writeln!(
            md,
            "| {design} | {} | {} | {:.3} | {} | {:.1} | {:.1} |",
            s.a,
            s.b,
            r.ratio(),
            r.dropped[0],
            s.a_cpu_ns as f64 / 1e6,
            s.b_cpu_ns as f64 / 1e6
        );
    }
    md.push('\n');
    md.push_str(&super::claims_table(&o.claims));
    let path = out.join("report.md");
    let result = if append {
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(md.as_bytes()))
    } else {
        std::fs::write(&path, md)
    };
    result.map_err(|e| LabError::io(format!("write {}", path.display()), e))
}

/// Figs. 10 and 11 of the paper (no arguments: the experiment is deterministic).
pub fn wanted(args: &PaperArgs) -> bool {
    args.wants("10") || args.wants("11")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's result: element shares cannot give A twice B's rate through a shared
    /// element (the shared element pulls from both in turn, so A and B go through it at the
    /// same rate and A's surplus is dropped), flow shares can.
    #[test]
    fn flow_shares_hold_where_element_shares_do_not() {
        let o = run().unwrap();
        for c in &o.claims {
            assert!(c.holds, "{}: {}", c.statement, c.check);
        }
        // The shared element has 3/9 of the CPU and serves A and B alternately.
        assert!(
            (o.element_based.ratio() - 1.0).abs() < 0.01,
            "{}",
            o.element_based.ratio()
        );
        let out = std::env::temp_dir().join(format!("llr-paper003s-{}", std::process::id()));
        write_report(&out, &o, false).unwrap();
        let ok = ["report.md", "shares.csv", "fig10.png", "fig11.png"]
            .iter()
            .all(|f| out.join(f).is_file());
        let _ = std::fs::remove_dir_all(&out);
        assert!(ok);
    }
}
