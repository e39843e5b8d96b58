//! What a configuration would set up, without touching anything: `llrouter run --check` and
//! `--dry-run`, and the steering check [`Router::start`](crate::Router::start) makes first.

use crate::config::{ConfigError, Resolved, RouterConfig, Steering};
use crate::error::{RouterError, Step};
use crate::steer::QueueLayout;

/// Placeholder interface indexes of `--dry-run` for interfaces absent from the namespace.
const DRY_RUN_IFINDEX_BASE: u32 = 1 << 30;

/// `1 ring`, `2 rings`.
pub(crate) fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// One line for `--check`: `2 interfaces, strategy ll-wfq, 2 rings, 1 rule`.
pub fn summary(r: &Resolved) -> String {
    format!(
        "{}, strategy {}, {}, {}",
        plural(r.ifindexes.len(), "interface"),
        r.layout.strategy,
        plural(r.layout.rings.len(), "ring"),
        plural(r.rule_images.len(), "rule")
    )
}

/// Checks that `steering` can be set up for `r`: for `ntuple`, that every interface has ntuple
/// filters and a queue per class and that the rules are expressible as filters; for `queues`,
/// that rules (which it would ignore) are not given. Changes nothing.
pub fn check_steering(r: &Resolved, steering: Steering) -> Result<(), RouterError> {
    let nclasses = r.cfg.classes.len();
    match steering {
        Steering::Xdp => Ok(()),
        Steering::Queues => {
            if r.cfg.rules.is_empty() {
                Ok(())
            } else {
                Err(ConfigError::field(
                    "rules",
                    format!(
                        "{} given, but steering = \"queues\" takes the class from the rx queue (class c of worker w arrives on queue w × {nclasses} + c) and uses no rules; remove them or use steering = \"xdp\" or \"ntuple\"",
                        plural(r.cfg.rules.len(), "rule")
                    ),
                )
                .into())
            }
        }
        Steering::Ntuple => {
            for (n, &ifindex) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
                llr_io::ntuple::check_support(n, nclasses as u32).step("steering = \"ntuple\"")?;
                llr_io::ntuple::plan(n, ifindex, &r.rules, nclasses, 0)
                    .step("steering = \"ntuple\"")?;
            }
            Ok(())
        }
    }
}

/// The `--dry-run` report: the class → queue (ntuple) or class → ring (xdp) layout and, for
/// ntuple, the `ethtool` commands per interface. Touches nothing; interfaces missing from this
/// namespace get a placeholder index (noted in the output), so a plan can be made anywhere.
pub fn dry_run_plan(cfg: RouterConfig, steering: Steering) -> Result<Vec<String>, RouterError> {
    let names = cfg.interfaces.clone();
    let lookup = move |n: &str| {
        llr_io::ebpf::ifindex(n).ok().or_else(|| {
            names
                .iter()
                .position(|x| x == n)
                .map(|i| DRY_RUN_IFINDEX_BASE + i as u32)
        })
    };
    let r = cfg.resolve(&lookup)?;
    let classes: Vec<String> = r.cfg.classes.iter().map(|c| c.name.clone()).collect();
    let mut out = vec![format!(
        "# llrouter dry run: steering {}, strategy {}, {} classes, {} rules; nothing is changed",
        steering.name(),
        r.layout.strategy,
        classes.len(),
        r.rules.len()
    )];
    for (n, &i) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
        if i >= DRY_RUN_IFINDEX_BASE {
            out.push(format!("# note: no interface `{n}` here; planned anyway"));
        }
    }
    out.extend(QueueLayout::new(&r, steering).describe(&r.cfg.cores, &classes));
    match steering {
        Steering::Ntuple => ntuple_plan(&r, &classes, &mut out)?,
        Steering::Xdp => xdp_plan(&r, &classes, &mut out),
        Steering::Queues => {}
    }
    if let Some(f) = &r.flows {
        flows_plan(f, &mut out);
    }
    Ok(out)
}

/// The flows each worker sets up (built from the checked setup, as a worker does).
fn flows_plan(setup: &crate::config::FlowSetup, out: &mut Vec<String>) {
    let Ok(flows) = setup.build::<()>() else {
        return;
    };
    out.push(format!(
        "# flows (each worker): input weight {}, default quantum {} µs, queue {}, max {}",
        setup.cfg.input_weight, setup.cfg.quantum_us, setup.cfg.queue, setup.cfg.max_flows
    ));
    for f in flows.list().iter().skip(1) {
        let matches = if f.matches.is_empty() {
            "-"
        } else {
            &f.matches
        };
        out.push(format!(
            "#   {} class={} match={} share={:.1}% q={} µs queue={} pipeline: {}",
            f.name,
            f.class.as_deref().unwrap_or("any"),
            matches,
            f.norm_share * 100.0,
            f.quantum_ns as f64 / 1000.0,
            f.queue_limit,
            f.pipeline.join(" → ")
        ));
    }
}

fn ntuple_plan(r: &Resolved, classes: &[String], out: &mut Vec<String>) -> Result<(), RouterError> {
    let mut layout_done = false;
    for (n, &ifindex) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
        let plan = llr_io::ntuple::plan(n, ifindex, &r.rules, classes.len(), 0)
            .step("steering = \"ntuple\"")?;
        if !layout_done {
            out.push("# class -> hardware queue (one AF_XDP socket per queue)".into());
            for (c, q) in classes.iter().zip(&plan.class_queue) {
                let d = if *c == classes[classes.len() - 1] {
                    " (default: unmatched traffic)"
                } else {
                    ""
                };
                out.push(format!("#   {c} -> queue {q}{d}"));
            }
            layout_done = true;
        }
        out.push(format!("# {n}"));
        out.extend(plan.lines());
    }
    Ok(())
}

fn xdp_plan(r: &Resolved, classes: &[String], out: &mut Vec<String>) {
    out.push(
        "# class -> ring (one AF_XDP socket per ring on each worker's queue, XDP classifier)"
            .into(),
    );
    for (c, name) in classes.iter().enumerate() {
        let ring = r.layout.class_to_ring.get(c).copied().unwrap_or(c);
        let rn = r
            .layout
            .rings
            .get(ring)
            .map(|x| x.name.as_str())
            .unwrap_or("?");
        out.push(format!("#   {name} -> ring {ring} ({rn})"));
    }
    for (i, spec) in r.cfg.rules.iter().enumerate() {
        out.push(format!("# rule {i}: {spec}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plural_words() {
        assert_eq!(plural(1, "ring"), "1 ring");
        assert_eq!(plural(2, "ring"), "2 rings");
    }

    #[test]
    fn dry_run_plans_absent_interfaces() {
        let cfg = RouterConfig::from_toml(
            "interfaces = [\"llr-none0\", \"llr-none1\"]\n[[classes]]\nname = \"rt\"\n[[classes]]\nname = \"be\"\n[[rules]]\nclass = \"rt\"\ndscp = 46\n",
        )
        .unwrap();
        let out = dry_run_plan(cfg, Steering::Xdp).unwrap();
        assert!(
            out[0].starts_with("# llrouter dry run: steering xdp"),
            "{out:?}"
        );
        assert!(
            out.iter().any(|l| l.contains("no interface `llr-none0`")),
            "{out:?}"
        );
        assert!(out.iter().any(|l| l == "#   rt -> ring 0 (rt)"), "{out:?}");
        assert!(
            out.iter()
                .any(|l| l
                    == "#   queue 0 -> worker 0 (unpinned) -> classes by the classifier's rules"),
            "{out:?}"
        );
    }
}
