//! What a configuration would set up, without touching anything: `llrouter run --check` and
//! `--dry-run`, and the steering check [`Router::start`](crate::Router::start) makes first.

use crate::config::{ConfigError, Resolved, RouterConfig, Steering};
use crate::error::{IoStep, RouterError};
use crate::steer::{plural, QueueLayout};

/// Placeholder interface indexes of `--dry-run` for interfaces absent from the namespace.
const DRY_RUN_IFINDEX_BASE: u32 = 1 << 30;

/// One line for `--check`: `2 interfaces, strategy ll-wfq, 2 rings, 1 rule; rx queues served:
/// a 4 queues, b 1 queue`.
pub fn summary(r: &Resolved, queues: &QueueLayout) -> String {
    format!(
        "{}, strategy {}, {}, {}; rx queues served: {}",
        plural(r.ifindexes.len(), "interface"),
        r.layout.strategy,
        plural(r.layout.rings.len(), "ring"),
        plural(r.rule_images.len(), "rule"),
        queues.plan_summary(&r.cfg.interfaces)
    )
}

/// Bytes the kernel keeps in front of every received frame in a UMEM chunk (XDP_PACKET_HEADROOM;
/// llrouter asks for no UMEM headroom of its own).
pub const XDP_HEADROOM: u32 = 256;
/// Ethernet header and one VLAN tag: a frame's length beyond its MTU.
pub const L2_OVERHEAD: u32 = 18;

/// The longest frame a UMEM chunk of `frame_size` bytes takes whole. In copy mode the kernel
/// copies up to the chunk less its headroom; a zero-copy driver may program its receive buffers
/// in coarser units (igb and ixgbe: 1 KiB), so for zero-copy count only whole KiB. A longer
/// frame would be cut or split by the driver, or dropped by the kernel.
pub fn frame_capacity(frame_size: u32, zerocopy: bool) -> u32 {
    let room = frame_size - XDP_HEADROOM;
    if zerocopy {
        room & !1023
    } else {
        room
    }
}

/// The largest MTU the router carries: frames of up to 9018 bytes with a VLAN tag, the limit of
/// the classifier and of the parser (`llr_core::wire::DEFAULT_MAX_FRAME`).
pub const MAX_MTU: u32 = 9000;

/// Checks every interface's MTU (`mtus[i]` for interface i) against what the sockets carry:
/// at most [`MAX_MTU`], and a frame in one UMEM chunk unless `multi_buffer_ok` (the kernel
/// has AF_XDP multi-buffer, 6.6). `zerocopy`: the sockets bound in zero-copy mode (chunks in
/// whole KiB). Returns whether some frame needs several chunks; errors name the field.
pub fn check_frames(
    names: &[String],
    mtus: &[u32],
    frame_size: u32,
    zerocopy: bool,
    multi_buffer_ok: bool,
) -> Result<bool, ConfigError> {
    let cap = frame_capacity(frame_size, zerocopy);
    let mut multi = false;
    for (name, &mtu) in names.iter().zip(mtus) {
        if mtu > MAX_MTU {
            return Err(ConfigError::field(
                "interfaces",
                format!(
                    "{name} has MTU {mtu}; llrouter carries frames of up to {} bytes (MTU {MAX_MTU}, the limit of its classifier and parser): lower it (`ip link set {name} mtu {MAX_MTU}`)",
                    MAX_MTU + L2_OVERHEAD
                ),
            ));
        }
        if mtu + L2_OVERHEAD <= cap {
            continue;
        }
        if multi_buffer_ok {
            multi = true;
            continue;
        }
        let fix = if frame_size < 4096 && mtu + L2_OVERHEAD <= frame_capacity(4096, zerocopy) {
            "set `frame-size = 4096` in [rings]".to_string()
        } else {
            format!(
                "lower the MTU to {} (`ip link set {name} mtu {}`); frames that span several UMEM chunks need AF_XDP multi-buffer: Linux 6.6 or later, and `multi-buffer = true` in [rings] (the default)",
                cap - L2_OVERHEAD,
                cap - L2_OVERHEAD
            )
        };
        return Err(ConfigError::field(
            "rings.frame-size",
            format!(
                "{name} has MTU {mtu}: frames of up to {} bytes, but a {frame_size}-byte UMEM frame takes at most {cap}{}; {fix}",
                mtu + L2_OVERHEAD,
                if zerocopy { " in zero-copy mode (receive buffers in whole KiB)" } else { "" }
            ),
        ));
    }
    Ok(multi)
}

/// Everything `--check` and [`Router::start`](crate::Router::start) check before touching
/// anything: steering, the queue plan (every active rx queue gets a socket) and the MTUs
/// against the UMEM frame (`kernel_multi_buffer`: the kernel has AF_XDP multi-buffer, which
/// the config must also allow: `[rings] multi-buffer`, true by default). Returns the queue
/// plan, multi-buffer on where an MTU needs it.
pub fn check(
    r: &Resolved,
    steering: Steering,
    kernel_multi_buffer: bool,
) -> Result<QueueLayout, RouterError> {
    check_steering(r, steering)?;
    let mut queues = QueueLayout::new(r, steering, QueueLayout::active_queues(r));
    queues.check(&r.cfg.interfaces)?;
    let mtus: Vec<u32> = (r.ifindexes.iter())
        .map(|&i| llr_io::kernel::link_facts(i).map_or(1500, |f| f.mtu))
        .collect();
    queues.multi_buffer = check_frames(
        &r.cfg.interfaces,
        &mtus,
        r.cfg.rings.frame_size,
        false,
        kernel_multi_buffer && r.cfg.rings.multi_buffer,
    )?;
    Ok(queues)
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
            // A NIC without the filters, or rules they cannot express, is a configuration that
            // does not fit this host: bad input, named by the field.
            fn bad(e: impl std::fmt::Display) -> ConfigError {
                ConfigError::field("steering", format!("\"ntuple\": {e:#}"))
            }
            for (n, &ifindex) in r.cfg.interfaces.iter().zip(&r.ifindexes) {
                llr_io::ntuple::check_support(n, nclasses as u32).map_err(bad)?;
                llr_io::ntuple::plan(n, ifindex, &r.rules, nclasses, 0).map_err(bad)?;
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
    let queues = QueueLayout::new(&r, steering, QueueLayout::active_queues(&r));
    out.extend(queues.describe(&r.cfg.interfaces, &r.cfg.cores, &classes));
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
            .io_step("steering = \"ntuple\"")?;
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
    fn frames_beyond_a_chunk_need_multi_buffer_or_are_refused() {
        let names = ["a".to_string(), "b".to_string()];
        let check = |mtus: &[u32], zc: bool, mb: bool| {
            check_frames(&names, mtus, 4096, zc, mb).map_err(|e| e.to_string())
        };
        // Both fit one chunk: no multi-buffer, whatever the kernel.
        assert_eq!(check(&[1500, 3822], false, true), Ok(false));
        assert_eq!(check(&[1500, 3822], false, false), Ok(false));
        // A jumbo MTU: multi-buffer where the kernel has it (6.6+), refused where not.
        assert_eq!(check(&[1500, 9000], false, true), Ok(true));
        let e = check(&[1500, 9000], false, false).unwrap_err();
        assert!(
            e.starts_with("rings.frame-size: b has MTU 9000")
                && e.contains("lower the MTU to 3822")
                && e.contains("Linux 6.6"),
            "{e}"
        );
        // Zero-copy counts whole KiB.
        let e = check(&[3822, 1500], true, false).unwrap_err();
        assert!(e.contains("at most 3072"), "{e}");
        // Beyond what the classifier and the parser take: refused in any case.
        let e = check(&[9001, 1500], false, true).unwrap_err();
        assert!(
            e.starts_with(
                "interfaces: a has MTU 9001; llrouter carries frames of up to 9018 bytes"
            ),
            "{e}"
        );
    }

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
            out.iter().any(|l| l
                == "#     queue 0 -> worker 0 (unpinned) -> classes by the classifier's rules"),
            "{out:?}"
        );
    }
}
