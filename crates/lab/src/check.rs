//! The checks of [`Options`] before a namespace exists: each field alone, and what the
//! targets will make of them (the router's configuration, the generator's), so that bad input
//! changes nothing on the host.

use llr_core::sched::StrategyKind;

use crate::options::{Options, Steering, Target};
use crate::router_proc::router_config_for;
use crate::traffic::{self, GenBackend};
use crate::{LabError, Result};

impl Options {
    /// Checks everything that can be checked before a namespace exists, so that bad input
    /// changes nothing on the host.
    pub fn check(&self) -> Result<()> {
        if !(self.point_secs > 0.0 && self.point_secs <= 600.0) {
            return Err(LabError::invalid("point-secs", "must be within (0, 600]"));
        }
        if self.targets.is_empty() {
            return Err(LabError::invalid("targets", "is empty"));
        }
        if let Some(us) = self.auto_budget_us {
            llr_core::sched::AutoBudgetSpec::new(Some(us), None, 100)
                .map_err(|e| LabError::invalid("auto-budget-us", e.reason))?;
            if !self
                .targets
                .contains(&Target::Llrouter(StrategyKind::LlWfq))
            {
                return Err(LabError::invalid(
                    "auto-budget-us",
                    "only llrouter:ll-wfq targets set their BE budget automatically; none is listed",
                ));
            }
        }
        let flow_targets = self
            .targets
            .iter()
            .filter_map(|t| match t {
                Target::LlrouterFlows(s) => Some(*s),
                _ => None,
            })
            .next();
        match (flow_targets, &self.flow_config) {
            (None, Some(_)) => {
                return Err(LabError::invalid(
                    "flow-config",
                    "no llrouter:<strategy>+flows target uses it",
                ))
            }
            (Some(s), _) => {
                // Checked now, as the router would, before anything is set up.
                let cfg = router_config_for(self, s, true)?;
                let classes: Vec<String> = cfg.classes.iter().map(|c| c.name.clone()).collect();
                llr_core::flow::Flows::<()>::new(
                    cfg.flow_scheduler.as_ref().expect("set for flows"),
                    &classes,
                    &cfg.flows,
                    &cfg.acls,
                    &|n: &str| {
                        cfg.interfaces
                            .iter()
                            .position(|i| i == n)
                            .map(|i| i as u32 + 1)
                    },
                )
                .map_err(|e| LabError::invalid("flow-config", e.to_string()))?;
            }
            (None, None) => {}
        }
        if !(1..=1024).contains(&self.gen_batch) {
            return Err(LabError::invalid(
                "gen-batch",
                format!("{}: must be 1..=1024 frames", self.gen_batch),
            ));
        }
        if !self.rx_size.is_power_of_two() || !(64..=32768).contains(&self.rx_size) {
            return Err(LabError::invalid(
                "rx-size",
                format!("{}: must be a power of two within 64..=32768", self.rx_size),
            ));
        }
        let llrouter = self
            .targets
            .iter()
            .any(|t| matches!(t, Target::Llrouter(_) | Target::LlrouterFlows(_)));
        if llrouter && !(1..=2048).contains(&self.tx_batch) {
            return Err(LabError::invalid(
                "tx-batch",
                format!("{}: must be within 1..=2048 frames", self.tx_batch),
            ));
        }
        if llrouter && self.tx_hold_us > 1000 {
            return Err(LabError::invalid(
                "tx-hold-us",
                format!("{}: must be within 0..=1000 µs", self.tx_hold_us),
            ));
        }
        let online = llr_ops::cpus::online();
        if self.workers == 0 || self.workers > 32 || self.workers > online.len() {
            return Err(LabError::invalid(
                "workers",
                format!(
                    "{}: must be 1..={} (one per online CPU)",
                    self.workers,
                    online.len().min(32)
                ),
            ));
        }
        if self.steering == Steering::Ntuple {
            return Err(LabError::invalid(
                "steering",
                "ntuple needs a NIC with ntuple filters; the testbed's veths have none (use queues)",
            ));
        }
        let steers_by_class = self.steering == Steering::Queues;
        if self.multi_queue()
            && self.gen_backend != GenBackend::Xsk
            && (steers_by_class || self.gen_backend != GenBackend::Udp)
        {
            return Err(LabError::invalid(
                "gen-backend",
                format!(
                    "{}: {} veth queues need the xsk generator, which sends on a chosen Tx queue ({})",
                    crate::choice_name(&self.gen_backend),
                    self.veth_queues(),
                    if steers_by_class {
                        "by class for --steering queues"
                    } else {
                        "by flow hash, as RSS"
                    }
                ),
            ));
        }
        for (field, cpu) in [("router-cpu", self.router_cpu), ("gen-cpu", self.gen_cpu)] {
            if let Some(why) = llr_ops::cpus::problem(cpu, &online) {
                return Err(LabError::invalid(field, why));
            }
        }
        traffic::gen_config(self, 1000.0, 0.3)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_config_is_checked_before_anything_runs() {
        let dir = std::env::temp_dir().join(format!("llr-lab-flowcfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("flows.toml");
        let flows = [Target::LlrouterFlows(StrategyKind::LlWfq)];
        let mut c = Options::new(&flows, dir.clone());
        c.flow_config = Some(file.clone());
        std::fs::write(
            &file,
            "[[flows]]\nname = \"rt\"\nclass = \"rt\"\nweight = 4\n",
        )
        .unwrap();
        c.check().unwrap();
        let cfg = router_config_for(&c, StrategyKind::LlWfq, true).unwrap();
        assert!(cfg.flow_scheduler.is_some());
        assert_eq!(cfg.flows[0].weight, Some(4));
        std::fs::write(
            &file,
            "[[flows]]\nname = \"rt\"\nclass = \"rt\"\nweight = 0\n",
        )
        .unwrap();
        let e = c.check().unwrap_err().to_string();
        assert!(
            e.contains("flow-config") && e.contains("flows[rt].weight"),
            "{e}"
        );
        std::fs::write(&file, "[[flow]]\n").unwrap();
        assert!(c.check().unwrap_err().to_string().contains("flow-config"));
        // a flow file without a +flows target is a mistake, not ignored
        let mut plain = Options::new(&[Target::Kernel], dir.clone());
        plain.flow_config = Some(file);
        assert!(plain.check().unwrap_err().to_string().contains("+flows"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
