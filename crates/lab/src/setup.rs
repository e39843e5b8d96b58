//! The start of every study: root, the output directory, the topology and the CPU shield.

use llr_ops::shield::CpuShield;
use llr_traffic::netns::{sweep_stale, Topology};

use crate::options::{need_root, Options};
use crate::{LabError, Result, StepContext, PREFIX};

/// Opens the named topology or creates a temporary one (removed on drop).
pub fn topology(c: &Options) -> Result<Topology> {
    match &c.name {
        Some(n) => Topology::open(n)
            .map_err(|e| LabError::invalid("name", format!("{e:#} (run `testbed up`)"))),
        None => {
            let _ = sweep_stale(PREFIX);
            Topology::with_queues(PREFIX, c.veth_queues()).step(|| "testbed topology".into())
        }
    }
}

/// The start of every study: root, the output directory, the topology, and with
/// [`Options::shield`] the CPU shield over the router's CPUs (held until the study ends).
pub fn prepare(c: &Options) -> Result<(Topology, Option<CpuShield>)> {
    need_root()?;
    std::fs::create_dir_all(&c.out)
        .map_err(|e| LabError::io(format!("create {}", c.out.display()), e))?;
    // A shield whose holder was killed would confine the machine until the next one.
    let _ = llr_ops::shield::sweep_stale();
    let shield = match c.shield {
        true => {
            let cpus = c.router_cpus().into_iter().collect();
            let s =
                CpuShield::new(&cpus).map_err(|e| LabError::invalid("shield", format!("{e:#}")))?;
            tracing::info!("CPU shield over {cpus:?}: {} tasks moved off", s.moved());
            Some(s)
        }
        false => None,
    };
    Ok((topology(c)?, shield))
}
