//! The `llrouter run` child of an llrouter target: its generated config, start in the router
//! namespace, readiness through its control socket, stop with SIGINT (its exit counters kept in
//! `llrouter-<strategy>.json`), and cleanup on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use llr_core::classify::{NumOrText, RuleSpec};
use llr_core::sched::{Budget, ClassSpec, StrategyKind};
use llr_io::xsk::XskOptions;
use llr_ops::ctl::{Command, CtlClient};
use llr_ops::views::StatusView;
use llr_router::config::{ControlConfig, RouterConfig};
use llr_router::Steering;
use llr_traffic::netns::{addr, Topology};
use serde::Deserialize;

use crate::options::Options;
use crate::{LabError, Result};

/// The TCP port whose traffic, both directions, llrouter targets put in the RT class (the
/// RT case of `testbed iperf`): a real deployment classifies a flow's ACKs with its data.
pub const RT_TCP_PORT: u16 = 5202;

/// How long a router may take from start to forwarding.
const READY_WITHIN: Duration = Duration::from_secs(15);

/// How long a router may take to stop after SIGINT before it is killed.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// Control socket of the llrouter target running `strategy`: unique per testbed process, so
/// runs never collide with each other or with a router on the default socket.
pub fn ctl_socket(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("llrtb-{}-{tag}.sock", std::process::id()))
}

/// The router configuration the testbed generates for `llrouter:<strategy>`: classes rt/be,
/// rules DSCP 46 and TCP port [`RT_TCP_PORT`] (either direction) → rt, the options' budgets,
/// wake-up mode, per-packet cost and rings, the worker on the router CPU, routes from the
/// kernel.
pub fn router_config(c: &Options, strategy: StrategyKind) -> Result<RouterConfig> {
    router_config_for(c, strategy, false)
}

/// The flow sections a `--flow-config` file may hold.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FlowFile {
    #[serde(default)]
    flow_scheduler: Option<llr_core::flow::FlowSchedConfig>,
    #[serde(default)]
    flows: Vec<llr_core::flow::FlowSpec>,
    #[serde(default)]
    acls: Vec<llr_core::flow::AclSpec>,
}

/// The name of a target's files and control socket: `ll-wfq`, `ll-wfq+flows`.
fn tag(strategy: StrategyKind, flows: bool) -> String {
    if flows {
        format!("{strategy}+flows")
    } else {
        strategy.to_string()
    }
}

/// [`router_config`], with the flow scheduler on when `flows` (`llrouter:<strategy>+flows`).
pub fn router_config_for(c: &Options, strategy: StrategyKind, flows: bool) -> Result<RouterConfig> {
    let mut cfg = plain_config(c, strategy, flows)?;
    if flows {
        let f = match &c.flow_config {
            None => FlowFile::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| LabError::io(format!("read {}", p.display()), e))?;
                toml::from_str(&text).map_err(|e| {
                    LabError::invalid("flow-config", format!("{}: {e}", p.display()))
                })?
            }
        };
        cfg.flow_scheduler = Some(f.flow_scheduler.unwrap_or_default());
        cfg.flows = f.flows;
        cfg.acls = f.acls;
    }
    Ok(cfg)
}

fn plain_config(c: &Options, strategy: StrategyKind, flows: bool) -> Result<RouterConfig> {
    if !(1..=2048).contains(&c.tx_batch) {
        return Err(LabError::invalid(
            "tx-batch",
            format!("{}: must be within 1..=2048 frames", c.tx_batch),
        ));
    }
    let class = |name: &str, budget: Budget| ClassSpec {
        budget,
        ..ClassSpec::named(name)
    };
    // Paper 000's Eq. 2 for the BE ring, where the strategy has one (ll-wfq).
    let auto = c.auto_budget_us.filter(|_| strategy == StrategyKind::LlWfq);
    let be = match auto {
        Some(_) => class("be", Budget::Auto),
        None => class("be", c.budgets.be()),
    };
    let rt_tcp = |src: bool| {
        let port = Some(NumOrText::Num(RT_TCP_PORT.into()));
        RuleSpec {
            class: "rt".into(),
            proto: Some(NumOrText::Text("tcp".into())),
            src_port: if src { port.clone() } else { None },
            dst_port: if src { None } else { port },
            ..RuleSpec::default()
        }
    };
    Ok(RouterConfig {
        interfaces: vec![addr::RTR_IN_IF.into(), addr::RTR_OUT_IF.into()],
        cores: c.router_cpus(),
        steering: c.steering,
        strategy,
        device_budget: c.device_budget,
        wake: c.wake,
        cost_ns: c.cost_ns,
        firewall: llr_router::config::FirewallConfig {
            unsupported: if c.firewall_to_kernel {
                llr_router::config::Unsupported::Kernel
            } else {
                llr_router::config::Unsupported::Refuse
            },
            ..Default::default()
        },
        tx_batch: c.tx_batch,
        tx_hold_us: c.tx_hold_us,
        kernel_routes: true,
        // ll-rr gives every ring the same budget (the config refuses anything else): the BE
        // count, as the strategy's own default does.
        classes: vec![
            class(
                "rt",
                if strategy == StrategyKind::LlRr {
                    c.budgets.be()
                } else {
                    c.budgets.rt()
                },
            ),
            be,
        ],
        auto_budget: auto.map(|us| llr_router::config::AutoBudgetConfig {
            target_us: Some(us),
            service_times: None,
            window_ms: 100,
        }),
        // With queue steering the generator already sorted the classes into queues.
        rules: if c.steering == Steering::Queues {
            Vec::new()
        } else {
            vec![
                RuleSpec {
                    class: "rt".into(),
                    dscp: Some(46),
                    ..RuleSpec::default()
                },
                rt_tcp(false),
                rt_tcp(true),
            ]
        },
        rings: XskOptions {
            rx_size: c.rx_size,
            ..XskOptions::default()
        },
        control: ControlConfig {
            socket: ctl_socket(&tag(strategy, flows)),
        },
        ..RouterConfig::default()
    })
}

/// [`router_config`] as the TOML file the router reads.
pub fn router_toml(c: &Options, strategy: StrategyKind) -> Result<String> {
    router_toml_for(c, strategy, false)
}

/// [`router_config_for`] as TOML.
pub fn router_toml_for(c: &Options, strategy: StrategyKind, flows: bool) -> Result<String> {
    let text = router_config_for(c, strategy, flows)?
        .to_toml()
        .map_err(|e| LabError::Failed(format!("router config: {e}")))?;
    Ok(format!("# generated by llrouter testbed\n{text}"))
}

/// A running `llrouter run` child in the router namespace.
pub struct RouterProc {
    child: Child,
    tag: String,
    ctl: PathBuf,
    stderr_path: PathBuf,
    json_path: PathBuf,
}

impl RouterProc {
    /// Writes `router-<strategy>.toml` into `c.out`, starts `llrouter run` on it in the router
    /// namespace (stderr to `llrouter-<strategy>.log`) and waits until it forwards.
    pub fn start(
        topo: &Topology,
        c: &Options,
        strategy: StrategyKind,
        flows: bool,
    ) -> Result<RouterProc> {
        let tag = tag(strategy, flows);
        let cfg_path = c.out.join(format!("router-{tag}.toml"));
        let write = |p: &Path, text: &str| {
            std::fs::write(p, text).map_err(|e| LabError::io(format!("write {}", p.display()), e))
        };
        write(&cfg_path, &router_toml_for(c, strategy, flows)?)?;
        let cfg_abs = std::fs::canonicalize(&cfg_path)
            .map_err(|e| LabError::io(format!("resolve {}", cfg_path.display()), e))?;
        let bin = match &c.router_bin {
            Some(b) => b.clone(),
            None => {
                std::env::current_exe().map_err(|e| LabError::io("path of this executable", e))?
            }
        };
        let stderr_path = c.out.join(format!("llrouter-{tag}.log"));
        let errf = std::fs::File::create(&stderr_path)
            .map_err(|e| LabError::io(format!("create {}", stderr_path.display()), e))?;
        let child = topo
            .router
            .command("nice")
            .args(["-n", "-10"])
            .arg(&bin)
            .args(["run", "--json", "--config"])
            .arg(&cfg_abs)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(errf)
            .spawn()
            .map_err(|e| LabError::io(format!("start {} run", bin.display()), e))?;
        let mut rp = RouterProc {
            child,
            ctl: ctl_socket(&tag),
            stderr_path,
            json_path: c.out.join(format!("llrouter-{tag}.json")),
            tag,
        };
        rp.wait_ready()?;
        Ok(rp)
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its control socket.
    pub fn ctl_socket(&self) -> &Path {
        &self.ctl
    }

    /// Waits until the worker runs, asking the control socket: the socket is bound before the
    /// classifiers are attached, so an answer alone is not enough; the worker's first snapshot
    /// (the `wakeup` mode in `status`) is published from inside its loop.
    fn wait_ready(&mut self) -> Result<()> {
        let t0 = Instant::now();
        loop {
            if worker_running(&self.ctl) {
                break;
            }
            let log = || {
                std::fs::read_to_string(&self.stderr_path)
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            };
            let strategy = &self.tag;
            if let Some(st) = self.child.try_wait().map_err(|e| LabError::io("wait", e))? {
                return Err(LabError::Failed(format!(
                    "target llrouter:{strategy}: `llrouter run` exited ({st}) before it was ready: {}",
                    log()
                )));
            }
            if t0.elapsed() > READY_WITHIN {
                return Err(LabError::Failed(format!(
                    "target llrouter:{strategy}: not ready after {} s: {}",
                    READY_WITHIN.as_secs(),
                    log()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the route mirror settle.
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    }

    /// Worker wake-ups so far: the engine's device wake-ups (a device put on the poll list
    /// after it went idle — NAPI's `napi_schedule`), from the control socket.
    pub fn wakeups(&self) -> Option<u64> {
        Some(self.counters()?.devices.iter().map(|d| d.wakeups).sum())
    }

    /// The router's counters (`ctl counters`).
    pub fn counters(&self) -> Option<llr_ops::metrics::MetricsSnapshot> {
        let mut c = CtlClient::connect(&self.ctl, Duration::from_secs(1)).ok()?;
        let v = c.call(&Command::Counters {}).ok()?.into_result().ok()?;
        serde_json::from_value(v).ok()
    }

    /// Sends one control command; the router's refusal (it names the field) is an error.
    pub fn call(&self, cmd: &Command) -> Result<serde_json::Value> {
        let what = || format!("control command {}", cmd.name());
        let mut c = CtlClient::connect(&self.ctl, Duration::from_secs(2))
            .map_err(|e| LabError::io(what(), e))?;
        let reply = c.call(cmd).map_err(|e| LabError::io(what(), e))?;
        reply
            .into_result()
            .map_err(|e| LabError::Failed(format!("{}: refused: {e}", what())))
    }

    /// The router's `status`, typed.
    pub fn status(&self) -> Result<StatusView> {
        let v = self.call(&Command::Status {})?;
        StatusView::deserialize(v).map_err(|e| LabError::step("read the router's status", e))
    }

    /// SIGINT, wait (then SIGKILL), keep the JSON counters; returns them.
    pub fn stop(mut self) -> Result<serde_json::Value> {
        self.signal(libc::SIGINT);
        let t0 = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().map_err(|e| LabError::io("wait", e))? {
                break st;
            }
            if t0.elapsed() > STOP_WITHIN {
                let _ = self.child.kill();
                let st = self.child.wait().map_err(|e| LabError::io("wait", e))?;
                return Err(LabError::Failed(format!(
                    "llrouter run did not stop within {} s of SIGINT (killed: {st})",
                    STOP_WITHIN.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            use std::io::Read as _;
            let _ = o.read_to_string(&mut out);
        }
        if !status.success() {
            let err = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
            return Err(LabError::Failed(format!(
                "llrouter run exited with {status}: {}",
                err.trim()
            )));
        }
        let v: serde_json::Value = out
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| LabError::Failed("llrouter run printed no JSON counters".into()))?;
        let pretty = serde_json::to_string_pretty(&v).unwrap_or_default();
        let _ = std::fs::write(&self.json_path, pretty);
        Ok(v)
    }

    fn signal(&self, sig: libc::c_int) {
        // Our own child, not yet reaped (callers check), so its pid is not reused.
        let _ = llr_io::sys::signal_process(self.child.id(), sig);
    }
}

/// Whether the router behind `ctl` answers and every worker has published a snapshot.
fn worker_running(ctl: &Path) -> bool {
    let Ok(mut c) = CtlClient::connect(ctl, Duration::from_secs(1)) else {
        return false;
    };
    // `counters` asks the worker for a fresh snapshot, so a running worker publishes at once.
    let _ = c.call(&Command::Counters {});
    c.call(&Command::Status {})
        .ok()
        .and_then(|r| r.into_result().ok())
        .and_then(|v| StatusView::deserialize(v).ok())
        .is_some_and(|s| s.ready)
}

impl Drop for RouterProc {
    fn drop(&mut self) {
        // Reached only on error paths (stop() consumes self after reaping): SIGINT, then kill.
        if let Ok(None) = self.child.try_wait() {
            self.signal(libc::SIGINT);
            for _ in 0..100 {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Target;

    #[test]
    fn written_config_parses_back_into_the_same_config() {
        let c = Options {
            rx_size: 2048,
            cost_ns: 1000,
            ..Options::new(
                &[Target::Llrouter(StrategyKind::LlWfq)],
                PathBuf::from("/nonexistent"),
            )
        };
        let cfg = router_config(&c, StrategyKind::LlWfq).unwrap();
        let text = router_toml(&c, StrategyKind::LlWfq).unwrap();
        assert_eq!(RouterConfig::from_toml(&text).unwrap(), cfg);
        assert_eq!(cfg.rings.rx_size, 2048);
        assert_eq!(cfg.cores, [1]);
        // The file the router reads is a valid configuration.
        cfg.validate().unwrap();
        let bad = Options { tx_batch: 0, ..c };
        match router_toml(&bad, StrategyKind::Sq) {
            Err(LabError::Invalid(e)) => assert_eq!(e.field, "tx-batch"),
            other => panic!("{other:?}"),
        }
    }
}
