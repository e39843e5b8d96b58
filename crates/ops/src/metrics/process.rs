//! The router process's own figures, read from `/proc`.

use serde::{Deserialize, Serialize};

/// The router process's own resource use (the standard `process_*` metrics).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessMetrics {
    pub cpu_seconds: f64,
    pub resident_memory_bytes: u64,
    pub open_fds: u64,
    pub max_fds: u64,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: f64,
}

impl ProcessMetrics {
    /// Parses `/proc/self/stat` (`stat`) with the boot time (`btime` of `/proc/stat`, seconds
    /// since the epoch), clock ticks per second and page size.
    pub fn from_proc_stat(stat: &str, btime: u64, ticks: u64, page: u64) -> Option<Self> {
        // the command name may hold spaces and parentheses: the fields start after the last ')'
        let rest = &stat[stat.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (state): field n is f[n - 3]
        let field = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
        let ticks = ticks.max(1) as f64;
        Some(ProcessMetrics {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            resident_memory_bytes: field(24)? * page,
            open_fds: 0,
            max_fds: 0,
            start_time_seconds: btime as f64 + field(22)? as f64 / ticks,
        })
    }

    /// Reads this process's figures from `/proc`; `None` when `/proc` is unreadable.
    pub fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let btime = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
        let ticks = llr_io::sys::clock_ticks_per_sec().unwrap_or(1);
        let page = llr_io::sys::page_size().unwrap_or(1);
        let mut p = Self::from_proc_stat(&stat, btime, ticks, page)?;
        p.open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
        if let Ok(max) = llr_io::sys::max_open_files() {
            p.max_fds = max;
        }
        Some(p)
    }
}
