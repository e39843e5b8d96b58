//! Embeds the router: a configuration built in code, no file, no CLI.
//!
//! `cargo run --release -p llr-router --example embed -- IF_IN IF_OUT [SECONDS]` (root): routes
//! between the two interfaces with two classes, `rt` (DSCP 46, or UDP to port 5004) and `be`,
//! under ll-wfq, prints
//! the counters every second and stops on Ctrl-C or after SECONDS.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use llr_core::classify::{NumOrText, RuleSpec};
use llr_router::{Router, RouterConfig, StartOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (a, b) = match &args[..] {
        [a, b, ..] => (a.clone(), b.clone()),
        _ => return Err("usage: embed IF_IN IF_OUT [SECONDS]".into()),
    };
    let seconds: Option<f64> = args.get(2).map(|s| s.parse()).transpose()?;
    // Built in code: the README's two classes, and one more rule on top (RT for UDP to port
    // 5004, whatever its DSCP).
    let mut cfg = RouterConfig::two_class(vec![a, b]);
    cfg.rules.push(RuleSpec {
        class: "rt".into(),
        proto: Some(NumOrText::Text("udp".into())),
        dst_port: Some(NumOrText::Num(5004)),
        ..Default::default()
    });
    let running = Router::start(cfg, StartOptions::default())?;
    let stop = llr_io::sys::install_stop_signals(); // Ctrl-C
    running.wait_ready(Duration::from_secs(5));
    println!(
        "{}; control socket {}",
        running.summary(),
        running.control_socket().display()
    );
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) && seconds.is_none_or(|s| t0.elapsed().as_secs_f64() < s) {
        std::thread::sleep(Duration::from_secs(1));
        let snap = running.snapshot();
        let rings: Vec<String> = (snap.layout_rings.iter().zip(&snap.rings))
            .map(|(name, c)| format!("{name} served {} drops {}", c.served, c.drops))
            .collect();
        println!(
            "{:>5.1} s  {}",
            t0.elapsed().as_secs_f64(),
            rings.join("  ")
        );
    }
    let report = running.stop()?;
    println!("{}", report.worker);
    Ok(())
}
