//! Flows on a running router (root: namespaces, veth, XDP): gen ns → router ns → sink ns.
//!
//! - `cpu_shares_follow_weights` (and `…_with_unequal_costs`, 10 µs vs 100 µs per packet): three
//!   UDP flows, each through a `work` element, offered well beyond what the core can do;
//!   weights 1:2:5. The CPU time the router charges them
//!   (measured around every element) splits 1:2:5 within ±5 % — the flow scheduler's promise,
//!   which holds whatever the machine's noise, because what is shared is measured CPU time.
//! - `flows_change_under_traffic`: 200 flow set-ups, changes and tear-downs while 10 kpps flow:
//!   each is in `flow.list` when its reply arrives and within 100 ms; traffic outside the flow
//!   being changed loses and duplicates nothing; bad changes are refused naming the field and
//!   change nothing.

mod common;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{topology, RouterThread, TempDir};
use llr_core::flow::{FlowInfo, FlowSpec};
use llr_ops::ctl::{Command, CtlClient};
use llr_traffic::gen::{self, udp::UdpSender, GenConfig};
use llr_traffic::netns::{addr, Topology};
use llr_traffic::sink::{Sink, SinkConfig};
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

const BASE: &str = r#"
interfaces = ["veth-rin", "veth-rout"]
strategy = "ll-wfq"
wake = "busy"
[[classes]]
name = "rt"
[[classes]]
name = "be"
[[rules]]
class = "rt"
dscp = 46
[control]
socket = "CTL"
"#;

/// The worker on core 1, the generator and sink on core 0: a worker that shares its core is
/// descheduled now and then for milliseconds — charged to whichever flow was running in the
/// middle of an element (fair in expectation, but noisy).
fn pinned(config: &str) -> String {
    config.replace("wake = \"busy\"", "wake = \"busy\"\ncores = [1]")
}

/// Packets the kernel dropped on their way to the sink's sockets so far: UDP receive errors
/// (buffer overruns) in the sink namespace, and input-backlog drops of every CPU
/// (`/proc/net/softnet_stat`, where a veth's received frames queue). Losses there are not the
/// router's.
fn sink_side_drops(topo: &Topology) -> u64 {
    let udp = topo.sink.run(llr_lab::host::udp_in_errors).unwrap_or(0);
    let backlog: u64 = std::fs::read_to_string("/proc/net/softnet_stat")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .sum();
    udp + backlog
}

fn client(dir: &TempDir) -> CtlClient {
    CtlClient::connect(dir.join("ctl.sock"), Duration::from_secs(2)).expect("control socket")
}

fn call(c: &mut CtlClient, cmd: Command) -> Result<Value, llr_ops::ctl::CtlError> {
    c.call(&cmd).expect("control I/O").into_result()
}

fn list(c: &mut CtlClient) -> Vec<FlowInfo> {
    let v = call(
        c,
        Command::FlowList {
            query: Default::default(),
        },
    )
    .expect("flow.list");
    serde_json::from_value(v["flows"].clone()).expect("flow list parses")
}

fn cpu_of(flows: &[FlowInfo], name: &str) -> u64 {
    flows
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no flow {name}"))
        .stats
        .cpu_ns
}

/// A sink in the sink namespace on `ports`, until `stop` (bounded at 60 s).
fn sink(
    topo: &Topology,
    ports: Vec<u16>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<anyhow::Result<anyhow::Result<llr_traffic::sink::SinkReport>>> {
    topo.sink.spawn(move || {
        // Off the worker's core (1): see `pinned`.
        llr_ops::cpus::set_affinity(&[0].into())?;
        let mut s = Sink::bind(SinkConfig {
            ports,
            duration: Some(Duration::from_secs(60)),
            idle: None,
            ..Default::default()
        })?;
        Ok(s.run(&stop)?.report())
    })
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn cpu_shares_follow_weights() {
    llr_io::sys::require_root();
    judged(|k| shares(&format!("a{k}"), [50, 50, 50]));
}

/// The same with unequal per-packet work: the weight-1 flow's packets cost 10 µs, the others'
/// 100 µs. CPU time still splits 1:2:5 (in packets the weight-1 flow gets far more).
#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn cpu_shares_follow_weights_with_unequal_costs() {
    llr_io::sys::require_root();
    judged(|k| shares(&format!("c{k}"), [10, 100, 100]));
}

/// Runs `run` until one run could judge the shares, at most twice: a run during which the host
/// or another task held the worker's core is repeated once; a second such run fails the test.
fn judged(run: impl Fn(u32) -> bool) {
    assert!(
        run(1) || run(2),
        "the worker's core was taken from it in both runs: the shares could not be judged"
    );
}

/// Time the worker's core was taken from it so far, ns: the host's steal of CPU 1 and the
/// worker threads' waits for a CPU while runnable.
fn taken_ns() -> u64 {
    let steal_ticks = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| {
            let l = t.lines().find(|l| l.starts_with("cpu1 "))?;
            l.split_whitespace().nth(8)?.parse::<u64>().ok()
        })
        .unwrap_or(0);
    // USER_HZ is 100 on every Linux ABI.
    let wait = llr_lab::host::threads_preemption(std::process::id(), "llr-worker")
        .map_or(0, |p| p.wait_ns);
    steal_ticks * 10_000_000 + wait
}

/// Three flows at weights 1:2:5 whose packets go through `work(us=W)` (`work_us`), offered
/// more than the worker can do; their CPU shares must be 1:2:5 within ±5 %. `false`: the
/// worker's core was taken from it for more than 2 % of the window, or one turn took over
/// 20 ms (the time a flow is charged then includes the time it lost), so the shares were not
/// judged.
fn shares(tag: &str, work_us: [u64; 3]) -> bool {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = topology(&format!("llrflw-{tag}"));
    let dir = TempDir::new(&format!("flows-shares-{tag}"));
    let mut text = BASE.to_string();
    text = pinned(&text);
    text += "[flow-scheduler]\nquantum-us = 5\nqueue = 128\n";
    for ((name, port, w), us) in [("w1", 9101, 1), ("w2", 9102, 2), ("w5", 9103, 5)]
        .into_iter()
        .zip(work_us)
    {
        text += &format!(
            "[[flows]]\nname = \"{name}\"\nmatch = {{ proto = \"udp\", dst_port = {port} }}\nweight = {w}\npipeline = [\"work(us={us})\"]\n"
        );
    }
    let router = RouterThread::start(&topo, dir.router_config(&text));
    let stop = Arc::new(AtomicBool::new(false));
    let sink_h = sink(&topo, vec![9101, 9102, 9103], stop.clone());
    std::thread::sleep(Duration::from_millis(200));
    // 3 × 30 kpps offered (about 24 kpps each reach the router) against work of 10–100 µs per
    // packet: even the weight-5 flow (5/8 of the CPU) stays backlogged.
    let gen_h = topo.gen.spawn(|| -> anyhow::Result<u64> {
        llr_ops::cpus::set_affinity(&[0].into())?;
        let socks: Vec<UdpSocket> = (9101..=9103)
            .map(|p| {
                let s = UdpSocket::bind("0.0.0.0:0")?;
                s.connect((addr::SINK_V4, p))?;
                Ok(s)
            })
            .collect::<std::io::Result<_>>()?;
        let t0 = Instant::now();
        let mut sent = 0u64;
        let mut tick = 0u64;
        while t0.elapsed() < Duration::from_secs(5) {
            for _ in 0..30 {
                for s in &socks {
                    if s.send(&[0u8; 64]).is_ok() {
                        sent += 1;
                    }
                }
            }
            tick += 1;
            let due = Duration::from_millis(tick);
            if let Some(wait) = due.checked_sub(t0.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        Ok(sent)
    });
    let mut c = client(&dir);
    std::thread::sleep(Duration::from_millis(1500));
    let before = list(&mut c);
    let (t0, taken0) = (Instant::now(), taken_ns());
    std::thread::sleep(Duration::from_secs(2));
    let after = list(&mut c);
    let (window, taken) = (t0.elapsed(), taken_ns() - taken0);
    // The longest turn since start: a 10–100 µs element whose turn took tens of ms was held up
    // by something outside the router, and the flow running it was charged for that.
    let longest_turn_s = call(&mut c, Command::Counters {}).expect("counters")["workers"][0]
        ["stall_max_seconds"]
        .as_f64()
        .expect("the worker's longest turn");
    let sent = gen_h.join().unwrap().unwrap().unwrap();
    stop.store(true, Ordering::Relaxed);
    let _ = sink_h.join();
    let report = router.finish().unwrap().unwrap();

    let names = ["w1", "w2", "w5"];
    let cpu: Vec<f64> = names
        .iter()
        .map(|n| (cpu_of(&after, n) - cpu_of(&before, n)) as f64)
        .collect();
    let total: f64 = cpu.iter().sum();
    let shares: Vec<f64> = cpu.iter().map(|c| c / total).collect();
    eprintln!(
        "sent {sent}; CPU shares {shares:?} over {:.2} s of flow CPU",
        total * 1e-9
    );
    for f in &after {
        eprintln!("{} {:?} queue {}", f.name, f.stats, f.queue_len);
    }
    eprintln!(
        "router drops {:?}; served {:?}",
        report.worker.drop, report.worker.served
    );
    // Backlogged: every flow's queue overflowed (SFQ rightly gives a flow's unused share to
    // the others, so a flow that runs dry would fail the comparison for the wrong reason).
    for n in names {
        let f = after.iter().find(|f| f.name == n).unwrap();
        assert!(f.stats.queue_drops > 0, "{n} was not backlogged: {f:?}");
    }
    assert!(total > 1.0e9, "the flows ran {total} ns of CPU in 2 s");
    if taken as f64 > 0.02 * window.as_nanos() as f64 || longest_turn_s > 0.02 {
        eprintln!(
            "the worker's core was taken from it for {:.1} ms of the {:.0} ms window, its \
             longest turn {:.1} ms: not judged",
            taken as f64 / 1e6,
            window.as_secs_f64() * 1e3,
            longest_turn_s * 1e3
        );
        return false;
    }
    for (s, want) in shares.iter().zip([1.0 / 8.0, 2.0 / 8.0, 5.0 / 8.0]) {
        assert!(
            (s / want - 1.0).abs() <= 0.05,
            "CPU shares {shares:?}, want 1:2:5 within ±5 %"
        );
    }
    // The work elements did run: each packet done spent its work.
    for (n, us) in names.into_iter().zip(work_us) {
        let f = after.iter().find(|f| f.name == n).unwrap();
        // (one packet may sit between its work element and forwarding, preempted)
        assert!(f.elements[0].packets - f.stats.done <= 1, "{n}: {f:?}");
        assert!(
            f.stats.cpu_ns >= f.stats.done * us * 1000,
            "{n}: {} ns for {} packets",
            f.stats.cpu_ns,
            f.stats.done
        );
    }
    assert!(report.worker.forwarded.iter().sum::<u64>() > 0);
    // Flow turns' transmit flushes are counted per ring as plain grants' are (backlogged, the
    // worker rarely runs out of work, where its catch-all flush is not counted).
    let (flushes, flushed) = (
        report.worker.flushes.iter().sum::<u64>(),
        report.worker.flushed.iter().sum::<u64>(),
    );
    assert!(
        flushes > 0 && flushed > 0,
        "flow turns' flushes counted: {flushes} flushes, {flushed} frames"
    );
    true
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn flows_change_under_traffic() {
    llr_io::sys::require_root();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = topology("llrflw-b");
    let dir = TempDir::new("flows-ctl");
    // Rings of 2048 (not 512): the test asserts that nothing outside the torn-down flows is
    // lost, and 512 entries at the generator's 7 kpps of BE last 73 ms, which a host that takes
    // the worker's core away for longer (CI's does now and then) would overflow on its own.
    let text = pinned(BASE) + "[flow-scheduler]\n[rings]\nrx-size = 2048\nfill-size = 4096\n";
    let router = RouterThread::start(&topo, dir.router_config(&text));
    let stop = Arc::new(AtomicBool::new(false));
    let udp_errors_before = sink_side_drops(&topo);
    let sink_h = sink(&topo, vec![9000, 9001], stop.clone());
    std::thread::sleep(Duration::from_millis(200));
    // Class 0 of the generator goes to port 9001 (the flows being changed match it), class 1 to
    // port 9000 (never matched by them).
    let gen_h = topo.gen.spawn(|| {
        llr_ops::cpus::set_affinity(&[0].into())?;
        let cfg = GenConfig {
            dst: addr::SINK_V4.parse().unwrap(),
            dst_port: 9000,
            rt_port: Some(9001),
            rate_pps: 10_000.0,
            rt_share: 0.3,
            flows: 4,
            packets: None,
            duration: Some(Duration::from_secs(8)),
            ..Default::default()
        };
        let mut tx = UdpSender::new(&cfg)?;
        let stop = AtomicBool::new(false);
        gen::drive(&cfg, &mut tx, &stop)
    });
    let mut c = client(&dir);
    let mut took: Vec<Duration> = Vec::new();
    let t0 = Instant::now();
    let spec = |name: &str| FlowSpec {
        name: name.into(),
        matches: Some(llr_core::classify::RuleSpec::parse_match("proto=udp dport=9001").unwrap()),
        weight: Some(2),
        pipeline: vec!["count".into()],
        ..Default::default()
    };
    // A branching pipeline on the live worker: `goto` takes every packet past the 50 µs
    // `work`, which then counts none, while the elements around it count them all.
    let mut jump = spec("jump");
    jump.pipeline = vec!["goto(to=2)".into(), "work(us=50)".into(), "count".into()];
    call(
        &mut c,
        Command::FlowAdd {
            flow: Box::new(jump),
        },
    )
    .expect("flow.add with a branch");
    std::thread::sleep(Duration::from_millis(700));
    let l = list(&mut c);
    let f = l.iter().find(|f| f.name == "jump").expect("jump listed");
    let n: Vec<u64> = f.elements.iter().map(|e| e.packets).collect();
    assert!(n[0] > 100, "the flow saw traffic: {n:?}");
    assert_eq!(n[1], 0, "no packet went through the skipped element: {n:?}");
    // A snapshot may fall between a packet's first element and its last.
    assert!(n[2] <= n[0] && n[2] + 64 >= n[0], "{n:?}");
    call(
        &mut c,
        Command::FlowDel {
            name: "jump".into(),
        },
    )
    .expect("flow.del");
    let mut changes = 0;
    for i in 0..67 {
        assert!(t0.elapsed() < Duration::from_secs(25), "changes too slow");
        let name = format!("x{i}");
        // set up, change, tear down: each visible in flow.list at once
        let t = Instant::now();
        call(
            &mut c,
            Command::FlowAdd {
                flow: Box::new(spec(&name)),
            },
        )
        .expect("flow.add");
        let l = list(&mut c);
        took.push(t.elapsed());
        assert!(l.iter().any(|f| f.name == name), "{name} not listed");
        let t = Instant::now();
        let set = FlowSpec {
            name: name.clone(),
            weight: Some(1 + i % 7),
            quantum_us: Some(2.0 + i as f64),
            pipeline: vec!["count".into(), "dscp(set=10)".into()],
            ..Default::default()
        };
        call(
            &mut c,
            Command::FlowSet {
                flow: Box::new(set),
            },
        )
        .expect("flow.set");
        let l = list(&mut c);
        took.push(t.elapsed());
        let f = l.iter().find(|f| f.name == name).unwrap();
        assert_eq!(f.quantum_ns, (2 + i as u64) * 1000);
        assert_eq!(f.pipeline, ["count", "dscp(set=10)", "forward"]);
        let t = Instant::now();
        call(&mut c, Command::FlowDel { name: name.clone() }).expect("flow.del");
        let l = list(&mut c);
        took.push(t.elapsed());
        assert!(!l.iter().any(|f| f.name == name), "{name} still listed");
        changes += 3;
        // bad changes: refused, naming the field; nothing changes
        if i % 10 == 0 {
            let before: Vec<String> = list(&mut c).into_iter().map(|f| f.name).collect();
            let mut bad = spec("bad");
            bad.pipeline = vec!["crypt(aes)".into()];
            let e = call(
                &mut c,
                Command::FlowAdd {
                    flow: Box::new(bad),
                },
            )
            .unwrap_err();
            assert_eq!(e.field, "pipeline", "{e:?}");
            let mut bad = spec("bad");
            bad.weight = Some(0);
            assert_eq!(
                call(
                    &mut c,
                    Command::FlowAdd {
                        flow: Box::new(bad),
                    }
                )
                .unwrap_err()
                .field,
                "weight"
            );
            let e = call(
                &mut c,
                Command::FlowDel {
                    name: "nope".into(),
                },
            )
            .unwrap_err();
            assert_eq!(e.field, "name");
            let after: Vec<String> = list(&mut c).into_iter().map(|f| f.name).collect();
            assert_eq!(before, after, "a refused change changed the flows");
        }
    }
    assert!(changes >= 200);
    // `reload` applies flows added to and removed from the file (restart-free while flows run).
    let cfg_path = dir.join("router.toml");
    let original = std::fs::read_to_string(&cfg_path).unwrap();
    let with_flow = original.clone()
        + "\n[[flows]]\nname = \"from-file\"\nmatch = { proto = \"udp\", dst_port = 9001 }\nweight = 3\n";
    std::fs::write(&cfg_path, &with_flow).unwrap();
    let v = call(&mut c, Command::Reload {}).expect("reload with a new flow");
    assert_eq!(v["changed"], serde_json::json!(["flows"]), "{v}");
    assert!(list(&mut c).iter().any(|f| f.name == "from-file"));
    std::fs::write(
        &cfg_path,
        with_flow.replace("[flow-scheduler]\n", "[flow-scheduler]\nquantum-us = 9\n"),
    )
    .unwrap();
    let e = call(&mut c, Command::Reload {}).unwrap_err();
    assert_eq!(e.field, "flow-scheduler", "needs a restart: {e:?}");
    std::fs::write(&cfg_path, &original).unwrap();
    call(&mut c, Command::Reload {}).expect("reload without it");
    assert!(!list(&mut c).iter().any(|f| f.name == "from-file"));
    let gen = gen_h.join().unwrap().unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let final_flows = list(&mut c);
    stop.store(true, Ordering::Relaxed);
    let sink = sink_h.join().unwrap().unwrap().unwrap();
    let report = router.finish().unwrap().unwrap();
    took.sort();
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize];
    let (median, p99, worst) = (at(0.5), at(0.99), at(1.0));
    eprintln!(
        "{changes} changes, visible after: median {median:?}, p99 {p99:?}, slowest {worst:?}; \
         gen sent {}",
        gen.sent
    );
    // Judged by the median and the 99th percentile, with a loose bound on the slowest: one
    // change the host delayed by taking this thread's core away (CI's does, for up to 100 ms)
    // says nothing about the router, while a slow path taken every time moves the median.
    assert!(
        median < Duration::from_millis(20) && p99 < Duration::from_millis(100),
        "changes were slow to show: median {median:?}, p99 {p99:?}"
    );
    assert!(worst < Duration::from_secs(1), "a change took {worst:?}");
    let class = |k: u8| sink.classes.iter().find(|c| c.class == k).cloned().unwrap();
    let (untouched, changed) = (class(1), class(0));
    eprintln!("untouched {:?}\nchanged {:?}", untouched.seq, changed.seq);
    eprintln!(
        "router drops {:?}; ports {:?}; flows at the end {:?}",
        report.worker.drop,
        report.worker.ports,
        final_flows
            .iter()
            .map(|f| (&f.name, f.stats.queue_drops, f.stats.done))
            .collect::<Vec<_>>()
    );
    // The router loses nothing outside the torn-down flows: no drop of any kind, no remaining
    // flow queue overflowed. (What is lost after the router's transmit, on the sink's side, the
    // kernel counts: see `sink_side_drops`.)
    let ports = &report.worker.ports;
    let rx: u64 = ports.iter().map(|p| p.rx).sum();
    let tx: u64 = ports.iter().map(|p| p.tx).sum();
    // Frames of a torn-down flow's queue are dropped with it: those are the only ones the router
    // may fail to transmit, and the sink then misses them in the changed class.
    assert!(
        rx.saturating_sub(tx) <= changed.seq.lost,
        "the router kept {} frames outside the torn-down flows: {ports:?}",
        rx.saturating_sub(tx)
    );
    assert!(
        report.worker.drop.iter().all(|(_, n)| *n == 0),
        "{:?}",
        report.worker.drop
    );
    assert!(
        final_flows.iter().all(|f| f.stats.queue_drops == 0),
        "{final_flows:?}"
    );
    let sink_errors = sink_side_drops(&topo) - udp_errors_before;
    assert!(
        untouched.seq.lost <= sink_errors,
        "traffic outside the changed flows lost {} packets; the kernel dropped {sink_errors} on the sink's side",
        untouched.seq.lost
    );
    assert_eq!(untouched.seq.duplicates, 0);
    assert_eq!(changed.seq.duplicates, 0);
    assert!(untouched.seq.received > 5_000, "{:?}", untouched.seq);
    assert!(report.worker.forwarded.iter().sum::<u64>() > 0);
}

/// Ten thousand flows (and the input and class flows): `flow list` streams every one, and
/// filters, sorts and cuts on the router; `flow get` finds the flow and pipeline of a packet;
/// the CLI's table and JSON agree. Timings go to stderr (the benchmark is
/// docs/operations.md's); here the listing only has to complete.
#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn ten_thousand_flows_are_listed_filtered_and_looked_up() {
    llr_io::sys::require_root();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = topology("llrflw-c");
    let dir = TempDir::new("flows-10k");
    let mut text = BASE.to_string() + "[flow-scheduler]\n";
    for i in 0..10_000u32 {
        text += &format!(
            "[[flows]]\nname = \"f-{i:05}\"\nmatch = {{ proto = \"udp\", dst_port = {} }}\nweight = {}\npipeline = [\"count\"]\n",
            10_000 + i,
            1 + i % 7
        );
    }
    let router = RouterThread::start(&topo, dir.router_config(&text));
    let mut c = client(&dir);
    let t0 = Instant::now();
    let all = list(&mut c);
    eprintln!("flow.list of {} flows: {:?}", all.len(), t0.elapsed());
    assert_eq!(
        all.len(),
        10_000 + 3,
        "the input flow, two class flows, 10 000 flows"
    );
    let names: Vec<&str> = all.iter().map(|f| f.name.as_str()).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted by name");

    let mut q = |query: llr_ops::query::FlowQuery| -> (Vec<FlowInfo>, Value) {
        let v = call(&mut c, Command::FlowList { query }).expect("flow.list");
        (serde_json::from_value(v["flows"].clone()).unwrap(), v)
    };
    let (one, v) = q(llr_ops::query::FlowQuery {
        name: Some("f-0004".into()),
        limit: Some(3),
        ..Default::default()
    });
    assert_eq!(
        one.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        ["f-00040", "f-00041", "f-00042"]
    );
    assert_eq!(
        (v["listed"].as_u64(), v["matched"].as_u64()),
        (Some(3), Some(10)),
        "{v}"
    );
    let (by_match, _) = q(llr_ops::query::FlowQuery {
        matches: Some("dst_port=19999".into()),
        ..Default::default()
    });
    assert_eq!(by_match.len(), 1);
    assert_eq!(by_match[0].name, "f-09999");
    let (top, _) = q(llr_ops::query::FlowQuery {
        sort: llr_ops::query::FlowSort::Cpu,
        limit: Some(5),
        ..Default::default()
    });
    assert_eq!(top.len(), 5);
    assert!(top
        .windows(2)
        .all(|w| w[0].stats.cpu_ns >= w[1].stats.cpu_ns));

    // a packet's flow, by the CLI
    let sock = dir.join("ctl.sock");
    let ctl = |args: &[&str]| common::ctl_bin(&sock, args);
    let (code, out, err) = ctl(&["flow", "get", addr::SINK_V4, "--dport", "10042"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("iif veth-rin class be flow f-00042 (match proto=udp dst_port=10042)"),
        "{out}"
    );
    assert!(out.contains("pipeline count"), "{out}");
    let (code, out, err) = ctl(&["flow", "get", addr::SINK_V4, "--dport", "9", "--dscp", "46"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("iif veth-rin class rt flow class:rt"),
        "{out}"
    );
    let t0 = Instant::now();
    let (code, out, err) = ctl(&["flow", "list"]);
    eprintln!("ctl flow list (table of 10 003): {:?}", t0.elapsed());
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.lines().count(),
        1 + 10_003 + 1,
        "header, rows, count line"
    );
    assert!(
        out.trim_end().ends_with("(10003 of 10003 flows)"),
        "{}",
        &out[out.len() - 200..]
    );
    let (code, out, _) = ctl(&["flow", "list", "--sort", "drops", "--top", "2", "-j"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["flows"].as_array().unwrap().len(), 2);
    router.finish().expect("router stops cleanly");
}
