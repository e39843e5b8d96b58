//! Helpers shared by the commands: usage errors (exit code 2), list parsing, tables.

use std::fmt;

/// Bad command-line input: printed as `error: --FLAG: REASON`, exit code 2.
#[derive(Debug)]
pub struct UsageError {
    pub flag: String,
    pub reason: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--{}: {}", self.flag, self.reason)
    }
}

impl std::error::Error for UsageError {}

/// A usage error for `flag`.
pub fn usage(flag: &str, reason: impl Into<String>) -> anyhow::Error {
    UsageError {
        flag: flag.to_string(),
        reason: reason.into(),
    }
    .into()
}

/// A field error of a library's settings as a usage error.
pub fn to_usage(e: llr_core::error::FieldError) -> anyhow::Error {
    UsageError::from(e).into()
}

/// The host refuses what was asked until the operator changes something (privileges, an
/// interface another program holds): printed as is, exit code 2 like bad input.
#[derive(Debug)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Whether `e` exits 2: a usage error or a refusal.
pub fn exits_2(e: &anyhow::Error) -> bool {
    e.downcast_ref::<UsageError>().is_some() || e.downcast_ref::<Refused>().is_some()
}

/// A testbed error: an option error becomes a usage error naming its flag.
pub fn lab_error(e: llr_lab::LabError) -> anyhow::Error {
    match e {
        llr_lab::LabError::Invalid(e) => UsageError {
            flag: e.field,
            reason: e.reason,
        }
        .into(),
        e => e.into(),
    }
}

impl From<llr_core::sched::ConfigError> for UsageError {
    fn from(e: llr_core::sched::ConfigError) -> Self {
        UsageError {
            flag: e.field,
            reason: e.reason,
        }
    }
}

/// Parses a list of numbers for `flag`: `a,b,c` or a range `start:stop:step` (inclusive).
pub fn parse_values(flag: &str, s: &str) -> anyhow::Result<Vec<f64>> {
    llr_sim::args::values(flag, s).map_err(|e| UsageError::from(e).into())
}

/// The machine's online CPUs (`/sys/devices/system/cpu/online`), not this thread's affinity.
pub fn online_cpus() -> anyhow::Result<std::collections::BTreeSet<usize>> {
    Ok(llr_ops::cpus::online())
}

/// Why `cpu` cannot be used, given the online CPUs; `None` when it is online.
pub fn cpu_problem(cpu: usize, online: &std::collections::BTreeSet<usize>) -> Option<String> {
    llr_ops::cpus::problem(cpu, online)
}

/// Checks a CPU option before anything is started: a usage error naming `flag` when the CPU
/// is not online.
pub fn check_cpu(flag: &str, cpu: usize) -> anyhow::Result<()> {
    match cpu_problem(cpu, &online_cpus()?) {
        Some(why) => Err(usage(flag, why)),
        None => Ok(()),
    }
}

/// Pins the calling thread to `cpu` (given by `flag`); an online CPU that this process may not
/// use (cpuset, taskset) is refused with that reason.
pub fn pin_cpu(flag: &str, cpu: usize) -> anyhow::Result<()> {
    check_cpu(flag, cpu)?;
    llr_io::sys::pin_to_cpu(cpu).map_err(|e| {
        usage(
            flag,
            format!(
                "CPU {cpu} is online but not allowed for this process (cpuset or taskset): {e}"
            ),
        )
    })
}

/// Runs `work` inside the network namespace named by `--netns`, or here when there is none.
pub fn in_netns<T: Send>(
    netns: Option<&str>,
    work: impl FnOnce() -> anyhow::Result<T> + Send,
) -> anyhow::Result<T> {
    match netns {
        Some(n) => llr_traffic::netns::Netns::open(n)
            .map_err(|e| usage("netns", e.to_string()))?
            .run(work)?,
        None => work(),
    }
}

/// Prints `rep` as pretty JSON with `--json`, else with the command's own table printer.
pub fn print_json_or<T: serde::Serialize>(
    json: bool,
    rep: &T,
    table: impl FnOnce(&T),
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(rep)?);
    } else {
        table(rep);
    }
    Ok(())
}

/// Formats nanoseconds as microseconds with a sensible precision.
pub fn us(ns: f64) -> String {
    let u = ns / 1000.0;
    if u >= 1000.0 {
        format!("{u:.0}")
    } else if u >= 10.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.2}")
    }
}

/// A plain left-aligned text table.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < w.len() {
                w[i] = w[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i].saturating_sub(c.chars().count());
            if i > 0 {
                s.push_str("  ");
            }
            s.push_str(c);
            s.push_str(&" ".repeat(pad));
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    out.push_str(&line(
        w.iter()
            .map(|n| "-".repeat(*n))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect(),
    ));
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_the_flag() {
        assert_eq!(parse_values("values", "1,2").unwrap(), vec![1.0, 2.0]);
        let e = parse_values("values", "1:0:1").unwrap_err().to_string();
        assert!(e.starts_with("--values: "), "{e}");
    }

    #[test]
    fn cpu_problem_counts_online_cpus() {
        let online: std::collections::BTreeSet<usize> = [0, 1].into();
        assert_eq!(cpu_problem(1, &online), None);
        assert_eq!(
            cpu_problem(9, &online).unwrap(),
            "CPU 9 does not exist: this machine has 2 online CPUs (0,1)"
        );
    }
}
