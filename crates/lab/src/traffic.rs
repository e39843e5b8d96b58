//! The generator and sink backends and their dispatch (`llrouter gen`, `llrouter sink` and the
//! testbed's measurement points use the same), and the generator configuration of a point.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use llr_io::gen::{self, GenConfig, GenReport};
use llr_io::netns::addr;
use llr_io::sink::{SinkConfig, SinkReport};
use llr_io::sink_xdp::XdpSink;
use serde::{Deserialize, Serialize};

use crate::options::Options;
use crate::{LabError, Result};

/// Sending backend of the generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum GenBackend {
    /// UDP sockets with sendmmsg (~0.4 Mpps per core; works anywhere).
    Udp,
    /// An AF_XDP transmit socket on the route's egress interface (root; packet-by-packet
    /// pacing and timestamps, one sendto per --batch due packets at most).
    Xsk,
    /// BPF_PROG_RUN with live XDP frames redirected into the route's egress interface
    /// (Mpps; root; bursts of --batch frames spaced to the average --rate).
    BpfLive,
}

/// Receiving backend of the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum SinkBackend {
    /// UDP sockets with recvmmsg (exact HDR histograms; ~0.5 Mpps).
    Udp,
    /// XDP program on --iface: timestamps in the driver, histograms in maps (3 % buckets), drops.
    Xdp,
}

/// Runs the generator with `cfg` on the calling thread (already in the right namespace).
pub fn generate(
    cfg: &GenConfig,
    backend: GenBackend,
    stop: &AtomicBool,
) -> anyhow::Result<GenReport> {
    match backend {
        GenBackend::Udp => {
            let mut tx = gen::udp::UdpSender::new(cfg)?;
            gen::drive(cfg, &mut tx, stop)
        }
        GenBackend::Xsk => {
            let mut tx = gen::xsk_tx::XskSender::new(cfg)?;
            gen::drive(cfg, &mut tx, stop)
        }
        GenBackend::BpfLive => gen::bpf_live::run(cfg, stop),
    }
}

/// An open sink of either backend.
pub enum Sink {
    Udp(llr_io::sink::Sink),
    /// Detaches its XDP program on drop.
    Xdp(XdpSink),
}

impl Sink {
    /// Binds the UDP sink, or attaches the XDP sink to `iface` (required for it).
    pub fn open(
        backend: SinkBackend,
        iface: Option<&str>,
        cfg: SinkConfig,
    ) -> anyhow::Result<Sink> {
        Ok(match (backend, iface) {
            (SinkBackend::Xdp, Some(i)) => Sink::Xdp(XdpSink::attach(i, cfg)?),
            (SinkBackend::Xdp, None) => anyhow::bail!("the XDP sink needs an interface"),
            (SinkBackend::Udp, _) => Sink::Udp(llr_io::sink::Sink::bind(cfg)?),
        })
    }

    /// Receives until a bound of its config or `stop`; returns the report.
    pub fn run(&mut self, stop: &AtomicBool) -> anyhow::Result<SinkReport> {
        match self {
            Sink::Udp(u) => Ok(u.run(stop)?.report()),
            Sink::Xdp(x) => x.run(stop),
        }
    }

    /// Whether packets are received by a thread of this process (the UDP sink), which then
    /// competes for its CPU.
    pub fn is_threaded(&self) -> bool {
        matches!(self, Sink::Udp(_))
    }
}

/// The flag and reason of an llr-io config error (`--size 20: must be …` → `size`,
/// `20: must be …`); llr-io's generator and sink configs name the flag that way.
pub fn flag_error(msg: &str) -> Option<(String, String)> {
    let rest = msg.strip_prefix("--")?;
    let flag = rest.split([' ', ':', '/']).next().unwrap_or("");
    let reason = rest[flag.len()..].trim_start_matches([':', ' ']);
    Some((flag.to_string(), reason.to_string()))
}

/// A generator config error as an option error naming the flag.
pub fn invalid_gen(e: anyhow::Error) -> LabError {
    match flag_error(&e.to_string()) {
        Some((field, reason)) => LabError::Invalid { field, reason },
        None => LabError::step("generator config", e),
    }
}

/// The generator configuration of one point at `rate` packets/s (checked).
pub fn gen_config(c: &Options, rate: f64, rt_share: f64) -> Result<GenConfig> {
    let (dst, size) = if c.ipv6 {
        (addr::SINK_V6, c.size.max(84))
    } else {
        (addr::SINK_V4, c.size)
    };
    let cfg = GenConfig {
        dst: dst
            .parse()
            .map_err(|e| LabError::step("sink address", anyhow::Error::new(e)))?,
        dst_port: 9000,
        rt_port: Some(9001),
        rt_dscp: true,
        frame_size: size,
        rate_pps: rate,
        gaps: c.gaps,
        rt_share,
        flows: c.flows,
        packets: None,
        duration: Some(Duration::from_secs_f64(c.point_secs)),
        seed: 1,
        batch: c.gen_batch,
        be_ttl: c.be_ttl,
    };
    cfg.validate().map_err(invalid_gen)?;
    Ok(cfg)
}

/// The sink configuration of one point: both probe ports, bounded a little past the traffic.
pub fn sink_config(c: &Options) -> SinkConfig {
    SinkConfig {
        ports: vec![9000, 9001],
        busy: false,
        packets: None,
        duration: Some(Duration::from_secs_f64(c.point_secs + 5.0)),
        idle: Some(Duration::from_millis(500)),
        batch: 64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_errors_name_the_flag() {
        match invalid_gen(anyhow::anyhow!("--size 20: must be 64..=1518")) {
            LabError::Invalid { field, reason } => {
                assert_eq!(
                    (field.as_str(), reason.as_str()),
                    ("size", "20: must be 64..=1518")
                )
            }
            e => panic!("{e:?}"),
        }
        assert!(matches!(
            invalid_gen(anyhow::anyhow!("no route")),
            LabError::Step { .. }
        ));
    }
}
