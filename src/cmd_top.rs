//! `llrouter top`: a live terminal view of a running router, polling `ctl counters`.

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use llr_ops::ctl::{Command, CtlClient, DEFAULT_SOCKET};
use llr_ops::metrics::MetricsSnapshot;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::cli_util::usage;
use llr_ops::views::top::render;

/// Live view of a running router: per-class packet and drop rates, ring-latency percentiles,
/// wake-ups, budget exhaustions and worker load, refreshed every INTERVAL.
///
/// Polls the control socket (`ctl counters`). Stops after --count refreshes or on Ctrl-C.
/// Latency percentiles are bucket upper bounds of the interval's ring-latency histogram.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Control socket of the router.
    #[arg(long, short = 's', default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many refreshes (default: until Ctrl-C).
    #[arg(long)]
    pub count: Option<u64>,
    /// Print screens one after another instead of redrawing (for logs and pipes).
    #[arg(long)]
    pub plain: bool,
}

pub fn run(args: Args) -> Result<()> {
    if !(args.interval.is_finite() && args.interval >= 0.05) {
        return Err(usage("interval", "must be at least 0.05 s"));
    }
    let interval = Duration::from_secs_f64(args.interval);
    let timeout = interval.max(Duration::from_secs(2));
    let mut client: Option<CtlClient> = None;
    let mut prev: Option<(Instant, MetricsSnapshot)> = None;
    let mut shown = 0u64;
    let mut stdout = std::io::stdout();
    loop {
        let started = Instant::now();
        // (re)connect lazily: the server closes idle connections, and the router may restart
        let snap = (|| -> Result<MetricsSnapshot> {
            if client.is_none() {
                client = Some(CtlClient::connect(&args.socket, timeout)?);
            }
            let reply = client
                .as_mut()
                .expect("connected above")
                .call(&Command::Counters {});
            let reply = match reply {
                Ok(r) => r,
                Err(e) => {
                    client = None;
                    return Err(e.into());
                }
            };
            let v = reply
                .into_result()
                .map_err(|e| anyhow::anyhow!("counters rejected: {e}"))?;
            serde_json::from_value(v).context("counters reply is not a metrics snapshot")
        })();
        let now = Instant::now();
        let screen = match &snap {
            Ok(s) => {
                render(
                    s,
                    prev.as_ref().map(|(t, p)| (now.duration_since(*t), p)),
                    &args.socket.display().to_string(),
                )
                .join("\n")
                    + "\n"
            }
            Err(e) => format!("llrouter top — {}: {e:#}\n", args.socket.display()),
        };
        if args.plain {
            let _ = writeln!(stdout, "{screen}");
        } else {
            // home + clear screen, then the frame
            let _ = write!(stdout, "\x1b[H\x1b[2J{screen}");
        }
        let _ = stdout.flush();
        shown += 1;
        match snap {
            Ok(s) => prev = Some((now, s)),
            // A bounded run that could not show the router in its last frame failed (a
            // script's `top --count 1` must not pass against a router that is not there).
            Err(e) if args.count.is_some_and(|c| shown >= c) => return Err(e),
            Err(_) => {}
        }
        if args.count.is_some_and(|c| shown >= c) {
            break;
        }
        std::thread::sleep(interval.saturating_sub(started.elapsed()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use llr_ops::ctl::{CtlError, CtlServer};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn polls_a_server_count_times() {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "llr-top-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let calls = Arc::new(AtomicU64::new(0));
        let c2 = calls.clone();
        let target = Arc::new(move |cmd: Command| -> Result<serde_json::Value, CtlError> {
            match cmd {
                Command::Counters {} => {
                    let k = c2.fetch_add(1, Ordering::SeqCst) + 1;
                    let snap = MetricsSnapshot {
                        workers: vec![llr_ops::metrics::WorkerMetrics {
                            poll_rounds: k,
                            ..Default::default()
                        }],
                        ..Default::default()
                    };
                    Ok(serde_json::to_value(snap).unwrap())
                }
                _ => Err(CtlError::new("cmd", "unsupported")),
            }
        });
        let srv = CtlServer::bind(&path, target).unwrap();
        run(Args {
            socket: path.clone(),
            interval: 0.05,
            count: Some(3),
            plain: true,
        })
        .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
