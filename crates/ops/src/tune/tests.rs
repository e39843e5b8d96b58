//! Tests on synthetic `/proc` texts and temporary `/proc`-like trees.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use super::*;

/// A `/proc/stat` text with `(busy, idle)` ticks per core.
fn stat(cores: &[(u64, u64)]) -> String {
    let mut s = String::from("cpu  1 2 3 4 5 6 7 8 0 0\n");
    for (i, (busy, idle)) in cores.iter().enumerate() {
        // spread busy over user/system/softirq to exercise the sum
        let (u, sy, si) = (busy / 2, busy / 4, busy - busy / 2 - busy / 4);
        s.push_str(&format!("cpu{i} {u} 0 {sy} {idle} 0 0 {si} 0 0 0\n"));
    }
    s.push_str("intr 12345 0 0\nctxt 999\nbtime 1700000000\n");
    s
}

/// Cumulative snapshots from per-interval (busy fraction ×100) per core.
fn series(per_interval: &[&[u64]]) -> Vec<String> {
    let n = per_interval[0].len();
    let mut acc = vec![(1000u64, 1000u64); n];
    let mut out = vec![stat(&acc)];
    for iv in per_interval {
        for (c, b) in iv.iter().enumerate() {
            acc[c].0 += b;
            acc[c].1 += 100 - b;
        }
        out.push(stat(&acc));
    }
    out
}

const INTERRUPTS: &str = "\
           CPU0       CPU1       CPU2       CPU3
  0:         44          0          0          0   IO-APIC   2-edge      timer
  9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
 24:       1000          0          0          0   PCI-MSI 524288-edge      eth0-TxRx-0
 25:          0       2000          0          0   PCI-MSI 524289-edge      eth0-TxRx-1
 26:          5          0          0          0   PCI-MSI 524290-edge      eth0
 27:          0          0          0        300   PCI-MSI 1048576-edge      eth10-TxRx-0
 28:          0          0          7          0   PCI-MSI 1048577-edge      ahci[0000:00:1f.2], eth1
NMI:          0          0          0          0   Non-maskable interrupts
LOC:     123456     654321     111111     222222   Local timer interrupts
ERR:          0
";

#[test]
fn parses_stat_and_busy_fraction() {
    let a = parse_proc_stat(&stat(&[(100, 300), (0, 400)])).unwrap();
    let b = parse_proc_stat(&stat(&[(150, 350), (40, 460)])).unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(a[&0].busy(), 100);
    let f = busy_fractions(&a, &b).unwrap();
    assert!((f[&0] - 0.5).abs() < 1e-12);
    assert!((f[&1] - 0.4).abs() < 1e-12);
    // no time elapsed → error naming the core
    let e = busy_fractions(&a, &a).unwrap_err();
    assert_eq!(e.field, "/proc/stat cpu0");
    // backwards
    assert!(busy_fractions(&b, &a)
        .unwrap_err()
        .reason
        .contains("backwards"));
}

#[test]
fn bad_stat_names_line() {
    let e = parse_proc_stat("cpu 1 2 3 4\ncpu0 1 x 3 4\n").unwrap_err();
    assert_eq!(e.field, "/proc/stat line 2");
    assert!(parse_proc_stat("cpu0 1 2\n")
        .unwrap_err()
        .reason
        .contains("at least 4"));
    assert!(parse_proc_stat("intr 1\n").is_err());
}

#[test]
fn percentiles_nearest_rank() {
    let s: Vec<f64> = (1..=10).map(|i| i as f64 / 10.0).collect();
    assert_eq!(percentile(&s, 0.5), 0.5);
    assert_eq!(percentile(&s, 0.9), 0.9);
    assert_eq!(percentile(&s, 0.99), 1.0);
    assert_eq!(percentile(&s, 0.0), 0.1);
    let l = CoreLoad::from_samples(3, vec![0.3, 0.1, 0.2, 0.4]);
    assert_eq!(l.p50, 0.2);
    assert_eq!(l.max, 0.4);
    assert!((l.mean - 0.25).abs() < 1e-12);
    assert_eq!(
        l.ecdf,
        vec![(0.1, 0.25), (0.2, 0.5), (0.3, 0.75), (0.4, 1.0)]
    );
}

#[test]
fn picks_least_loaded_core() {
    // core 2 is idle most of the time but has one spike; core 1 is steady 5 %;
    // core 0 and 3 are busy. p90 over 10 samples = 9th value.
    let iv: Vec<[u64; 4]> = (0..10)
        .map(|i| [80, 5, if i == 9 { 90 } else { 0 }, 50])
        .collect();
    let ivr: Vec<&[u64]> = iv.iter().map(|a| &a[..]).collect();
    let snaps: Vec<_> = series(&ivr)
        .iter()
        .map(|t| parse_proc_stat(t).unwrap())
        .collect();
    let loads = core_loads(&snaps).unwrap();
    assert_eq!(loads.len(), 4);
    assert_eq!(loads[2].p90, 0.0);
    assert_eq!(loads[2].max, 0.9);
    let none = BTreeMap::new();
    assert_eq!(pick_worker_core(&loads, None, &none), Some(2));
    // restricted to {0, 1, 3} → 1
    let cand: BTreeSet<usize> = [0, 1, 3].into();
    assert_eq!(pick_worker_core(&loads, Some(&cand), &none), Some(1));
}

#[test]
fn tie_break_fewest_irqs_then_highest_core() {
    let loads: Vec<CoreLoad> = (0..4)
        .map(|c| CoreLoad::from_samples(c, vec![0.0, 0.0005]))
        .collect();
    let none = BTreeMap::new();
    assert_eq!(pick_worker_core(&loads, None, &none), Some(3));
    let irq: BTreeMap<usize, u32> = [(3, 1), (2, 2)].into();
    assert_eq!(pick_worker_core(&loads, None, &irq), Some(1));
}

#[test]
fn interrupts_parse_and_match_devices() {
    let lines = parse_interrupts(INTERRUPTS).unwrap();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[2].irq, 24);
    assert_eq!(lines[2].counts[&0], 1000);
    assert_eq!(lines[2].actions, vec!["eth0-TxRx-0"]);
    assert_eq!(lines[6].actions, vec!["ahci[0000:00:1f.2]", "eth1"]);
    let d = device_irqs(
        &lines,
        None,
        &["eth0".into(), "eth1".into()],
        &BTreeMap::new(),
    );
    let irqs: Vec<u32> = d.iter().map(|i| i.irq).collect();
    assert_eq!(irqs, vec![24, 25, 26, 28]); // not 27 (eth10)
    assert_eq!(d[1].serving_cores, vec![1]);
    assert_eq!(d[3].device, "eth1");
    // with a second snapshot, serving cores come from deltas
    let after = INTERRUPTS.replace(" 24:       1000          0", " 24:       1000         10");
    let after = parse_interrupts(&after).unwrap();
    let d = device_irqs(&lines, Some(&after), &["eth0".into()], &BTreeMap::new());
    assert_eq!(d[0].serving_cores, vec![1]);
    assert!(d[1].serving_cores.is_empty());
    // bad input names the line
    let e = parse_interrupts("CPU0 CPU1\n 5: 1 x foo\n").unwrap_err();
    assert_eq!(e.field, "/proc/interrupts line 2");
    assert!(parse_interrupts("").is_err());
}

/// A virtio NIC: /proc/interrupts names its queues after the virtio device, which only
/// sysfs relates to the interface.
#[test]
fn virtio_nic_queues_found_through_sysfs() {
    const VIRTIO: &str = "\
           CPU0       CPU1
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0       1440 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:        904          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 41:       2044          0 PCI-MSIX-0000:00:04.0   1-edge      virtio20-input.0
 42:          0       3970 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx
";
    assert_eq!(virtio_alias("../../../virtio2").as_deref(), Some("virtio2"));
    assert_eq!(
        virtio_alias("../../../virtio2/\n").as_deref(),
        Some("virtio2")
    );
    assert_eq!(virtio_alias("../../../0000:00:1f.6"), None);
    assert_eq!(virtio_alias("virtio"), None);
    let lines = parse_interrupts(VIRTIO).unwrap();
    let eth0 = vec!["eth0".to_string()];
    assert!(device_irqs(&lines, None, &eth0, &BTreeMap::new()).is_empty());

    // A synthetic sysfs tree: eth0 → virtio2, as on a KVM guest.
    let sys = tree("sys");
    let dev = sys.join("devices/pci0000:00/0000:00:03.0/virtio2");
    std::fs::create_dir_all(sys.join("class/net/eth0")).unwrap();
    std::fs::create_dir_all(&dev).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:03.0/virtio2",
        sys.join("class/net/eth0/device"),
    )
    .unwrap();
    let aliases = device_aliases(&sys, &eth0);
    assert_eq!(aliases.get("eth0").map(String::as_str), Some("virtio2"));
    let d = device_irqs(&lines, None, &eth0, &aliases);
    // The queues, not the config interrupt nor virtio20's.
    assert_eq!(d.iter().map(|i| i.irq).collect::<Vec<_>>(), vec![38, 39]);
    assert_eq!(d[0].serving_cores, vec![1]);
    assert_eq!(d[0].device, "eth0");
    assert_eq!(d[1].action, "virtio2-output.0");
    std::fs::remove_dir_all(&sys).unwrap();
}

#[test]
fn cpu_lists() {
    let s = |v: &[usize]| v.iter().copied().collect::<BTreeSet<_>>();
    assert_eq!(parse_cpu_list("0-1\n").unwrap(), s(&[0, 1]));
    assert_eq!(parse_cpu_list("0,2-4,7").unwrap(), s(&[0, 2, 3, 4, 7]));
    assert!(parse_cpu_list("3-1").is_err());
    assert!(parse_cpu_list("a").is_err());
}

#[test]
fn unknown_devices_are_named() {
    let net = NET_DEV.replace("PKTS", "1");
    let devs = vec!["eth0".to_string(), "nosuch0".to_string(), "lo".to_string()];
    assert_eq!(unknown_devices(&net, &devs).unwrap(), vec!["nosuch0"]);
}

#[test]
fn cpumask_round_trip() {
    let s = |v: &[usize]| v.iter().copied().collect::<BTreeSet<_>>();
    assert_eq!(format_cpumask(&s(&[0, 1])), "3");
    assert_eq!(format_cpumask(&s(&[0, 2, 3])), "d");
    assert_eq!(format_cpumask(&s(&[33])), "2,00000000");
    assert_eq!(format_cpumask(&s(&[])), "0");
    assert_eq!(
        parse_cpumask("00000000,0000000f").unwrap(),
        s(&[0, 1, 2, 3])
    );
    assert_eq!(parse_cpumask("2,00000001\n").unwrap(), s(&[0, 33]));
    assert!(parse_cpumask("zz").is_err());
}

#[test]
fn ring_and_buffer_formulas() {
    // 1 Mpps × 1 ms = 1000 → 1024
    assert_eq!(
        ring_size(1e6, Duration::from_millis(1), 64, 4096).unwrap(),
        1024
    );
    // exact power of two stays
    assert_eq!(
        ring_size(512e3, Duration::from_millis(1), 64, 4096).unwrap(),
        512
    );
    // clamped both ways
    assert_eq!(
        ring_size(10.0, Duration::from_millis(1), 64, 4096).unwrap(),
        64
    );
    assert_eq!(
        ring_size(1e8, Duration::from_millis(1), 64, 4096).unwrap(),
        4096
    );
    assert_eq!(
        ring_size(0.0, Duration::from_millis(1), 64, 4096).unwrap(),
        64
    );
    assert_eq!(
        ring_size(1e6, Duration::from_millis(1), 100, 4096)
            .unwrap_err()
            .field,
        "ring_min"
    );
    assert_eq!(
        ring_size(1e6, Duration::from_millis(1), 128, 64)
            .unwrap_err()
            .field,
        "ring_min"
    );
    assert_eq!(
        ring_size(f64::NAN, Duration::from_millis(1), 64, 64)
            .unwrap_err()
            .field,
        "rate_pps"
    );
    // 10 Gbit/s, 100 µs one-way, k=1: 2·1e10·1e-4/8 = 250000 bytes
    assert_eq!(
        socket_buffer_bytes(1e10, Duration::from_micros(100), 1.0).unwrap(),
        250_000
    );
    assert_eq!(
        socket_buffer_bytes(1e9, Duration::from_millis(1), 2.0).unwrap(),
        500_000
    );
    assert_eq!(
        socket_buffer_bytes(1e9, Duration::from_millis(1), 0.5)
            .unwrap_err()
            .field,
        "k"
    );
    assert_eq!(
        socket_buffer_bytes(0.0, Duration::from_millis(1), 1.0)
            .unwrap_err()
            .field,
        "bandwidth"
    );
}

const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 6000000  PKTS    0    0    0     0          0         0        0       0    0    0    0     0       0          0
";

fn tree(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "llr-ops-tune-{}-{}-{}",
        std::process::id(),
        tag,
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

#[test]
fn plan_then_apply_writes_masks_into_temp_tree() {
    // cores 0..3; core 1 is the least loaded but serves eth0's IRQ 25.
    let iv: Vec<[u64; 4]> = (0..5).map(|_| [60, 2, 30, 40]).collect();
    let ivr: Vec<&[u64]> = iv.iter().map(|a| &a[..]).collect();
    let mut input = TuneInput {
        stat: series(&ivr),
        interval: Duration::from_millis(500),
        interrupts_before: Some(INTERRUPTS.into()),
        interrupts_after: None,
        net_dev: [0u64, 100_000, 300_000, 350_000]
            .iter()
            .map(|p| NET_DEV.replace("PKTS", &p.to_string()))
            .collect(),
        affinity: BTreeMap::new(),
        aliases: BTreeMap::new(),
    };
    input.affinity.insert(24, "f".into());
    input.affinity.insert(25, "d".into()); // already {0,2,3}
    let params = TuneParams {
        devices: vec!["eth0".into()],
        bandwidth_bps: Some(1e9),
        one_way_delay: Duration::from_millis(1),
        ..TuneParams::default()
    };
    let p = plan(&input, &params).unwrap();
    assert_eq!(p.worker_core, 1);
    assert_eq!(p.irqs.len(), 3);
    assert!(p.irqs.iter().all(|i| i.proposed == "d"));
    assert_eq!(
        p.irqs.iter().map(|i| i.change).collect::<Vec<_>>(),
        vec![true, false, true]
    );
    // peak 200000 packets per 0.5 s = 400 kpps × 1 ms = 400 → 512
    let r = p.ring.as_ref().unwrap();
    assert!(r.measured);
    assert_eq!(r.rate_pps, 400_000.0);
    assert_eq!(r.ring_size, 512);
    assert_eq!(p.socket_buffer.as_ref().unwrap().bytes, 250_000);
    // JSON round trip has the fields the docs promise
    let j = serde_json::to_value(&p).unwrap();
    assert_eq!(j["worker_core"], 1);
    assert_eq!(j["cores"][1]["p99"], 0.02);

    // apply into a temp tree: only IRQs 24 and 26 are written
    let root = tree("apply");
    for irq in [24, 25, 26] {
        let d = root.join(format!("irq/{irq}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("smp_affinity"), "f\n").unwrap();
    }
    let done = apply(&p, &root);
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|a| a.error.is_none()));
    let read =
        |irq: u32| std::fs::read_to_string(root.join(format!("irq/{irq}/smp_affinity"))).unwrap();
    assert_eq!(read(24), "d\n");
    assert_eq!(read(25), "f\n"); // untouched: plan said no change
    assert_eq!(read(26), "d\n");
    // a missing file is reported, not a panic
    std::fs::remove_dir_all(root.join("irq/26")).unwrap();
    let done = apply(&p, &root);
    assert!(done[1].error.is_some());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn sample_reads_tree_and_plan_rejects_bad_candidates() {
    let root = tree("sample");
    std::fs::create_dir_all(root.join("net")).unwrap();
    std::fs::create_dir_all(root.join("irq/24")).unwrap();
    std::fs::write(root.join("interrupts"), INTERRUPTS).unwrap();
    std::fs::write(root.join("irq/24/smp_affinity"), "00000003\n").unwrap();
    std::fs::write(root.join("net/dev"), NET_DEV.replace("PKTS", "5")).unwrap();
    let snaps = series(&[&[10, 20, 30, 40], &[10, 20, 30, 0]]);
    let mut k = 0;
    // the sleep hook rewrites /proc/stat: a fake clock
    std::fs::write(root.join("stat"), &snaps[0]).unwrap();
    let input = sample(
        &root,
        3,
        Duration::from_millis(10),
        &["eth0".into()],
        &BTreeMap::new(),
        |_| {
            k += 1;
            std::fs::write(root.join("stat"), &snaps[k]).unwrap();
        },
    )
    .unwrap();
    assert_eq!(input.stat.len(), 3);
    assert_eq!(input.net_dev.len(), 3);
    assert_eq!(
        input.affinity.get(&24).map(String::as_str),
        Some("00000003")
    );
    let p = plan(&input, &TuneParams::default()).unwrap();
    assert_eq!(p.worker_core, 0);
    let params = TuneParams {
        candidates: Some([7].into()),
        ..TuneParams::default()
    };
    assert_eq!(plan(&input, &params).unwrap_err().field, "cores");
    assert_eq!(
        sample(&root, 1, Duration::ZERO, &[], &BTreeMap::new(), |_| {})
            .unwrap_err()
            .field,
        "samples"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn queue_index_from_action_names() {
    assert_eq!(irq_queue("eth0-TxRx-3", "eth0", None), Some(3));
    assert_eq!(irq_queue("eth0-rx-1", "eth0", None), Some(1));
    assert_eq!(irq_queue("eth0-2", "eth0", None), Some(2)); // sfc
    assert_eq!(irq_queue("eth0", "eth0", None), None); // link / misc
    assert_eq!(irq_queue("eth0:lsc", "eth0", None), None);
    assert_eq!(irq_queue("eth10-TxRx-0", "eth1", None), None);
    assert_eq!(
        irq_queue("virtio2-input.1", "eth0", Some("virtio2")),
        Some(1)
    );
    assert_eq!(
        irq_queue("virtio2-output.0", "eth0", Some("virtio2")),
        Some(0)
    );
    assert_eq!(irq_queue("virtio2-config", "eth0", Some("virtio2")), None);
    assert_eq!(irq_queue("virtio20-input.0", "eth0", Some("virtio2")), None);
}

/// Loads from per-core busy percentages held constant over 4 intervals.
fn flat_loads(busy: &[f64]) -> Vec<CoreLoad> {
    busy.iter()
        .enumerate()
        .map(|(c, b)| CoreLoad::from_samples(c, vec![b / 100.0; 4]))
        .collect()
}

#[test]
fn picks_n_distinct_idle_cores_avoiding_interrupt_carriers() {
    // cores:        0   1   2   3   4   5   6   7
    let loads = flat_loads(&[60.0, 1.0, 2.0, 3.0, 4.0, 30.0, 0.5, 5.0]);
    // cores 1 and 6 (the two idlest) serve the NIC's interrupts
    let irq: BTreeMap<usize, u32> = [(1, 1), (6, 2)].into();
    let w = pick_worker_cores(&loads, None, &irq, 3);
    assert_eq!(w, vec![2, 3, 4], "idle cores without interrupts first");
    // six workers: the idle interrupt-free cores run out; then the idle carriers, by load
    // (core 6 at 0.5 % before core 1 at 1 %), still before the busy core 5 (30 %)
    let w = pick_worker_cores(&loads, None, &irq, 6);
    assert_eq!(w, vec![2, 3, 4, 7, 6, 1]);
    let w = pick_worker_cores(&loads, None, &irq, 8);
    assert_eq!(
        w.iter().copied().collect::<BTreeSet<_>>().len(),
        8,
        "distinct"
    );
    assert_eq!(&w[6..], &[5, 0], "busy cores last, by load");
    // a busy interrupt-free core never beats an idle carrier
    let loads = flat_loads(&[50.0, 1.0]);
    assert_eq!(
        pick_worker_cores(&loads, None, &[(1, 3)].into(), 1),
        vec![1]
    );
    // candidates restrict, and fewer candidates give fewer cores
    let cand: BTreeSet<usize> = [0].into();
    assert_eq!(
        pick_worker_cores(&loads, Some(&cand), &BTreeMap::new(), 2),
        vec![0]
    );
}

/// Four cores; eth0's queue interrupts on cores 0 and 1; cores 2 and 3 idle.
fn four_core_input(busy: [u64; 4]) -> TuneInput {
    let iv: Vec<[u64; 4]> = (0..4).map(|_| busy).collect();
    let ivr: Vec<&[u64]> = iv.iter().map(|a| &a[..]).collect();
    let mut input = TuneInput {
        stat: series(&ivr),
        interval: Duration::from_millis(500),
        interrupts_before: Some(INTERRUPTS.into()),
        ..TuneInput::default()
    };
    input.affinity.insert(24, "f".into());
    input.affinity.insert(25, "f".into());
    input.affinity.insert(26, "3".into());
    input
}

#[test]
fn two_workers_off_the_interrupts() {
    let input = four_core_input([20, 15, 1, 0]);
    let params = TuneParams {
        devices: vec!["eth0".into()],
        workers: 2,
        ..TuneParams::default()
    };
    let p = plan(&input, &params).unwrap();
    assert_eq!(p.worker_cores, vec![3, 2]);
    assert_eq!(p.worker_core, 3);
    assert_eq!(p.spare_cores, vec![0, 1]);
    assert_eq!(p.irq_placement, IrqPlacement::OffWorkers);
    // every eth0 interrupt on {0, 1}; IRQ 26 already is
    assert!(p.irqs.iter().all(|i| i.proposed == "3"), "{:?}", p.irqs);
    assert_eq!(
        p.irqs
            .iter()
            .map(|i| (i.irq, i.queue, i.worker, i.change))
            .collect::<Vec<_>>(),
        vec![
            (24, Some(0), Some(0), true),
            (25, Some(1), Some(1), true),
            (26, None, None, false)
        ]
    );
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn on_workers_pins_queue_i_to_worker_i() {
    let input = four_core_input([20, 15, 1, 0]);
    let params = TuneParams {
        devices: vec!["eth0".into()],
        workers: 2,
        irq_placement: IrqPlacement::OnWorkers,
        ..TuneParams::default()
    };
    let p = plan(&input, &params).unwrap();
    assert_eq!(p.worker_cores, vec![3, 2]);
    let masks: Vec<(u32, &str)> = p
        .irqs
        .iter()
        .map(|i| (i.irq, i.proposed.as_str()))
        .collect();
    // queue 0 → worker 0 on core 3 (8), queue 1 → worker 1 on core 2 (4), the link
    // interrupt off the workers (3)
    assert_eq!(masks, vec![(24, "8"), (25, "4"), (26, "3")]);
    // with two queues per worker (steering = queues, two classes), both queues are worker 0's
    let p = plan(
        &input,
        &TuneParams {
            queues_per_worker: 2,
            ..params.clone()
        },
    )
    .unwrap();
    assert_eq!(p.irqs[0].worker, Some(0));
    assert_eq!(p.irqs[1].worker, Some(0));
    assert_eq!(p.irqs[1].proposed, "8");
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("2 queues found, the 2 workers need 4")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn workers_on_every_core_share_and_say_so() {
    // Two cores, a virtio NIC with two queue pairs: no core is left over.
    const VIRTIO2: &str = "\
           CPU0       CPU1
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0       1440 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:        904          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 40:        100          0 PCI-MSIX-0000:00:03.0   3-edge      virtio2-input.1
 41:          0        200 PCI-MSIX-0000:00:03.0   4-edge      virtio2-output.1
";
    let iv: Vec<[u64; 2]> = (0..3).map(|_| [5, 3]).collect();
    let ivr: Vec<&[u64]> = iv.iter().map(|a| &a[..]).collect();
    let input = TuneInput {
        stat: series(&ivr),
        interval: Duration::from_millis(500),
        interrupts_before: Some(VIRTIO2.into()),
        aliases: [("eth0".to_string(), "virtio2".to_string())].into(),
        ..TuneInput::default()
    };
    let params = TuneParams {
        devices: vec!["eth0".into()],
        workers: 2,
        ..TuneParams::default()
    };
    let p = plan(&input, &params).unwrap();
    assert_eq!(p.irq_placement, IrqPlacement::OnWorkers);
    assert!(p.spare_cores.is_empty());
    let w = &p.worker_cores;
    let mask = |c: usize| format_cpumask(&[c].into());
    for i in &p.irqs {
        let q = i
            .queue
            .expect("every virtio2 queue interrupt has its queue") as usize;
        assert_eq!(i.proposed, mask(w[q]), "{i:?}");
    }
    assert_eq!(p.irqs.len(), 4, "not the config interrupt");
    assert!(
        p.warnings
            .iter()
            .any(|m| m.contains("no core is left over") && m.contains("helper threads")),
        "{:?}",
        p.warnings
    );
    // off-workers cannot be done here, and says why
    let e = plan(
        &input,
        &TuneParams {
            irq_placement: IrqPlacement::OffWorkers,
            ..params.clone()
        },
    )
    .unwrap_err();
    assert_eq!(e.field, "irq");
    // one worker leaves a core: off-workers, and queue 1 gets traffic no worker serves
    let p = plan(
        &input,
        &TuneParams {
            workers: 1,
            ..params
        },
    )
    .unwrap();
    assert_eq!(p.irq_placement, IrqPlacement::OffWorkers);
    assert_eq!(p.spare_cores.len(), 1);
    assert!(
        p.warnings
            .iter()
            .any(|m| m.contains("the worker serves only queue 0")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn bad_worker_counts_name_workers() {
    let input = four_core_input([20, 15, 1, 0]);
    for (workers, candidates) in [(0, None), (5, None), (3, Some([1, 2].into()))] {
        let e = plan(
            &input,
            &TuneParams {
                workers,
                candidates,
                ..TuneParams::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.field, "workers", "{workers}: {e}");
    }
    let e = plan(
        &input,
        &TuneParams {
            queues_per_worker: 0,
            ..TuneParams::default()
        },
    )
    .unwrap_err();
    assert_eq!(e.field, "queues_per_worker");
    // exactly as many workers as cores is allowed
    assert_eq!(
        plan(
            &input,
            &TuneParams {
                workers: 4,
                ..TuneParams::default()
            }
        )
        .unwrap()
        .worker_cores
        .len(),
        4
    );
}

/// Paper 002's reading of a load dataset: an exponential's own samples are not long-tailed, a
/// Pareto's are (and lie on a straight line in log-log with its α), a bounded load is not; too
/// few samples give no verdict.
#[test]
fn tail_fit_tells_a_long_tail_from_an_exponential() {
    let n = 2000;
    let grid = |i: usize| (i as f64 + 0.5) / n as f64; // quantiles in (0, 1)
    let exp: Vec<f64> = (0..n).map(|i| -(1.0 - grid(i)).ln() * 0.2).collect();
    let t = TailFit::of(&exp).unwrap();
    assert!((t.exp_rate - 5.0).abs() < 0.1, "{t:?}");
    assert!(!t.long_tail, "{t:?}");
    assert!((t.ccdf_p99 / t.exp_ccdf_p99 - 1.0).abs() < 0.3, "{t:?}");
    // Pareto with α = 1.5 from x_m = 0.01: P[X ≥ x] = (x_m / x)^1.5
    let pareto: Vec<f64> = (0..n)
        .map(|i| 0.01 * (1.0 - grid(i)).powf(-1.0 / 1.5))
        .collect();
    let t = TailFit::of(&pareto).unwrap();
    assert!(t.long_tail, "{t:?}");
    assert!(
        (t.loglog_alpha - 1.5).abs() < 0.2 && t.loglog_r2 > 0.95,
        "{t:?}"
    );
    // a load between 0.2 and 0.4: its tail ends where an exponential's goes on
    let bounded: Vec<f64> = (0..n).map(|i| 0.2 + 0.2 * grid(i)).collect();
    assert!(!TailFit::of(&bounded).unwrap().long_tail);
    assert_eq!(TailFit::of(&exp[..TAIL_MIN_SAMPLES - 1]), None);
    assert_eq!(TailFit::of(&vec![0.0; 100]), None);
    // through CoreLoad, on unsorted samples
    let mut shuffled = pareto.clone();
    shuffled.reverse();
    assert_eq!(
        CoreLoad::from_samples(3, shuffled).tail,
        TailFit::of(&pareto)
    );
}

/// `watch` over a synthetic /proc whose stat moves on at every sleep: windows of 3 readings,
/// the second starting with the first's last reading, each core's busy fractions exact, and
/// the count and the stop respected.
#[test]
fn watch_emits_windows_that_join_up() {
    let root = std::env::temp_dir().join(format!("llr-tune-watch-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    // Per interval of 100 ticks: core 0 busy 10, 20, 30, 40; core 1 busy 50 each time.
    let busy0 = [10u64, 20, 30, 40];
    let write = |k: usize| {
        let b0: u64 = busy0[..k].iter().sum();
        let b1 = 50 * k as u64;
        let t = 100 * k as u64;
        std::fs::write(
            root.join("stat"),
            format!(
                "cpu  0 0 0 0 0 0 0 0\ncpu0 {b0} 0 0 {} 0 0 0 0\ncpu1 {b1} 0 0 {} 0 0 0 0\n",
                t - b0,
                t - b1
            ),
        )
        .unwrap();
    };
    write(0);
    let mut k = 0;
    let mut seen: Vec<(usize, Vec<f64>, Vec<f64>)> = Vec::new();
    let n = watch(
        &root,
        3,
        Duration::from_millis(1),
        Some(2),
        |_| {
            k += 1;
            write(k);
        },
        || false,
        |w, loads| {
            seen.push((w, loads[0].samples.clone(), loads[1].samples.clone()));
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(n, 2);
    assert_eq!(seen[0], (0, vec![0.1, 0.2], vec![0.5, 0.5]));
    assert_eq!(seen[1], (1, vec![0.3, 0.4], vec![0.5, 0.5]));
    // a stop before the first window is complete emits nothing
    write(0);
    let mut reads = 0;
    let n = watch(
        &root,
        3,
        Duration::from_millis(1),
        None,
        |_| {},
        || {
            reads += 1;
            reads > 1
        },
        |_, _| panic!("no window is complete"),
    )
    .unwrap();
    assert_eq!(n, 0);
    let e = watch(
        &root,
        1,
        Duration::from_millis(1),
        None,
        |_| {},
        || true,
        |_, _| Ok(()),
    )
    .unwrap_err();
    assert_eq!(e.field, "samples");
    let _ = std::fs::remove_dir_all(&root);
}
