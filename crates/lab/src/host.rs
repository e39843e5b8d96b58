//! What the host tells about the router between two instants: CPU time, receive softirqs,
//! backlog drops, threaded-NAPI kernel threads. The `/proc/stat` and `/proc/PID/stat` parsers
//! are llr-ops' (`tune::parse_proc_stat`, `ProcessMetrics::from_proc_stat`).

use llr_ops::metrics::ProcessMetrics;
use llr_ops::tune;

/// Clock ticks per second of `/proc` times.
fn clk_tck() -> u64 {
    llr_io::sys::clock_ticks_per_sec().unwrap_or(100)
}

/// utime + stime of a process (all threads), ns; 0 when unreadable.
pub fn proc_cpu_ns(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| ProcessMetrics::from_proc_stat(&s, 0, clk_tck(), 1))
        .map_or(0, |p| (p.cpu_seconds * 1e9).round() as u64)
}

/// CPU time of the threads of `pid` whose name starts with `prefix`, ns (`schedstat`: the time
/// the scheduler ran them, in ns, whatever the tick; steal is not in it); 0 when unreadable.
pub fn threads_cpu_ns(pid: u32, prefix: &str) -> u64 {
    threads(pid, prefix)
        .filter_map(|t| schedstat_ns(&std::fs::read_to_string(t.join("schedstat")).ok()?))
        .sum()
}

/// The `/proc/PID/task/TID` directories of the threads of `pid` whose name starts with
/// `prefix` (none when unreadable).
fn threads(pid: u32, prefix: &str) -> impl Iterator<Item = std::path::PathBuf> + '_ {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|t| t.path())
        .filter(move |t| {
            std::fs::read_to_string(t.join("comm")).is_ok_and(|c| c.starts_with(prefix))
        })
}

/// What the scheduler did to a set of threads: how long they waited for a CPU while runnable
/// (`schedstat`'s second field) and how often they were switched out against their will
/// (`nonvoluntary_ctxt_switches`). For a busy-polling worker both are the times another task
/// took its CPU: a per-point measure of the stalls `stall_max_us` only gives the longest of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Preemption {
    pub wait_ns: u64,
    pub switches: u64,
}

impl Preemption {
    /// `self − earlier`, field by field (0 where a thread went away meanwhile).
    pub fn since(self, earlier: Preemption) -> Preemption {
        Preemption {
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }
}

/// [`Preemption`] summed over the threads of `pid` whose name starts with `prefix`; `None`
/// when no such thread could be read.
pub fn threads_preemption(pid: u32, prefix: &str) -> Option<Preemption> {
    let mut sum: Option<Preemption> = None;
    for t in threads(pid, prefix) {
        let wait = std::fs::read_to_string(t.join("schedstat"))
            .ok()
            .and_then(|s| schedstat_wait_ns(&s));
        let switches = std::fs::read_to_string(t.join("status"))
            .ok()
            .and_then(|s| nonvoluntary_switches(&s));
        if let (Some(wait_ns), Some(switches)) = (wait, switches) {
            let s = sum.get_or_insert_with(Preemption::default);
            s.wait_ns += wait_ns;
            s.switches += switches;
        }
    }
    sum
}

/// The second field of `/proc/…/schedstat`: time spent runnable, waiting for a CPU, ns.
fn schedstat_wait_ns(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// `nonvoluntary_ctxt_switches` of `/proc/…/status`.
fn nonvoluntary_switches(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// The first field of `/proc/…/schedstat`: time on the CPU, ns.
fn schedstat_ns(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// softirq time of one CPU (`/proc/stat`), ns; 0 when unreadable.
pub fn softirq_ns(cpu: usize) -> u64 {
    softirq_ns_in(
        &std::fs::read_to_string("/proc/stat").unwrap_or_default(),
        cpu,
    )
}

fn softirq_ns_in(proc_stat: &str, cpu: usize) -> u64 {
    tune::parse_proc_stat(proc_stat)
        .ok()
        .and_then(|s| s.get(&cpu).map(|t| t.softirq))
        .map_or(0, |t| t * 1_000_000_000 / clk_tck())
}

/// NET_RX softirqs handled by `cpu` so far (`/proc/softirqs`): the kernel's receive "interrupt"
/// count (NAPI polls and RPS IPIs) on the router's CPU.
pub fn net_rx_softirqs(cpu: usize) -> Option<u64> {
    net_rx_in(&std::fs::read_to_string("/proc/softirqs").ok()?, cpu)
}

fn net_rx_in(softirqs: &str, cpu: usize) -> Option<u64> {
    let l = softirqs
        .lines()
        .find(|l| l.trim_start().starts_with("NET_RX:"))?;
    l.split_whitespace().nth(1 + cpu)?.parse().ok()
}

/// UDP datagrams the kernel could not deliver to a socket (`Udp: InErrors` of
/// `/proc/net/snmp`, whose count includes the receive buffer's overflows, `RcvbufErrors`), in
/// the network namespace of the calling thread; 0 if unreadable.
pub fn udp_in_errors() -> u64 {
    udp_in_errors_in(&std::fs::read_to_string("/proc/net/snmp").unwrap_or_default())
}

fn udp_in_errors_in(snmp: &str) -> u64 {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(h), Some(v)) = (udp.next(), udp.next()) else {
        return 0;
    };
    h.split_whitespace()
        .zip(v.split_whitespace())
        .find(|(k, _)| *k == "InErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Packets dropped at `cpu`'s input backlog so far (`/proc/net/softnet_stat` column 2); 0 when
/// unreadable.
pub fn softnet_drops(cpu: usize) -> u64 {
    softnet_drops_in(
        &std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default(),
        cpu,
    )
}

fn softnet_drops_in(softnet_stat: &str, cpu: usize) -> u64 {
    softnet_stat
        .lines()
        .nth(cpu)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

/// Kernel threads running threaded NAPI for interfaces named `ifname` (any namespace):
/// `napi/<ifname>-<napi id>`.
pub fn napi_threads(ifname: &str) -> Vec<u32> {
    let prefix = format!("napi/{ifname}-");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(&prefix))
        })
        .collect()
}

/// Pins the threads `pids` to `cpu` (`taskset -pc`).
pub fn pin_threads(pids: &[u32], cpu: usize) -> Result<(), String> {
    per_thread(pids, "taskset", &["-pc", &cpu.to_string()])
}

/// Gives the threads `pids` SCHED_FIFO priority `prio` (`chrt -f -p`).
pub fn fifo_threads(pids: &[u32], prio: u8) -> Result<(), String> {
    per_thread(pids, "chrt", &["-f", "-p", &prio.to_string()])
}

/// Runs `cmd args… PID` for each of `pids`; a thread that ended meanwhile (its NAPI was
/// deleted) is not an error.
fn per_thread(pids: &[u32], cmd: &str, args: &[&str]) -> Result<(), String> {
    for pid in pids {
        let st = std::process::Command::new(cmd)
            .args(args)
            .arg(pid.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("{cmd}: {e}"))?;
        if !st.success() && std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(format!("{cmd} {} {pid} failed", args.join(" ")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_the_time_on_the_cpu() {
        assert_eq!(schedstat_ns("123456789 5000 42\n"), Some(123_456_789));
        assert_eq!(schedstat_ns(""), None);
        assert_eq!(schedstat_ns("x 1 2"), None);
        // This process's own threads: the test thread has run, so some time is counted.
        let me = std::process::id();
        assert!(threads_cpu_ns(me, "") > 0);
        assert_eq!(threads_cpu_ns(me, "no-such-thread-name"), 0);
    }

    #[test]
    fn preemption_reads_the_wait_and_the_involuntary_switches() {
        assert_eq!(schedstat_wait_ns("123456789 5000 42\n"), Some(5000));
        assert_eq!(schedstat_wait_ns("123"), None);
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(nonvoluntary_switches(status), Some(3));
        assert_eq!(nonvoluntary_switches("Name:\tx\n"), None);
        let me = std::process::id();
        assert!(threads_preemption(me, "").is_some());
        assert_eq!(threads_preemption(me, "no-such-thread-name"), None);
        let (a, b) = (
            Preemption {
                wait_ns: 10,
                switches: 5,
            },
            Preemption {
                wait_ns: 4,
                switches: 7,
            },
        );
        assert_eq!(
            a.since(b),
            Preemption {
                wait_ns: 6,
                switches: 0
            }
        );
    }

    #[test]
    fn readers_pick_the_right_column() {
        let stat = "cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 70 8\ncpu1 1 2 3 4 5 6 300 8\n";
        assert_eq!(softirq_ns_in(stat, 1), 300 * 1_000_000_000 / clk_tck());
        assert_eq!(softirq_ns_in(stat, 5), 0);
        let softirqs = "        CPU0   CPU1\n  NET_TX:  1  2\n  NET_RX:  30  40\n";
        assert_eq!(net_rx_in(softirqs, 1), Some(40));
        assert_eq!(net_rx_in(softirqs, 2), None);
        let snmp = "Ip: Forwarding\nIp: 1\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 10 2 7 4 5\nUdpLite: InDatagrams\nUdpLite: 0\n";
        assert_eq!(udp_in_errors_in(snmp), 7);
        assert_eq!(udp_in_errors_in("Ip: x\nIp: 1\n"), 0);
        let softnet = "0000aaaa 00000000 00000001\n0000bbbb 0000001f 00000000\n";
        assert_eq!(softnet_drops_in(softnet, 1), 31);
        assert!(proc_cpu_ns(std::process::id()) < u64::MAX);
    }
}
