//! The traffic of a measurement point: the generator and sink backends (llr-io's, as closed
//! choices) and the generator and sink configurations.

use std::time::Duration;

use llr_io::gen::GenConfig;
use llr_io::netns::addr;
use llr_io::sink::SinkConfig;
use serde::{Deserialize, Serialize};

use crate::options::Options;
use crate::{LabError, Result};

/// How the generator sends (llr-io's; `clap::ValueEnum` under the `clap` feature).
pub use llr_io::gen::Backend as GenBackend;

/// Which sink receives a point: the closed choice of [`llr_io::sink::SinkBackend`], whose XDP
/// variant also names the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum SinkBackend {
    /// UDP sockets with recvmmsg (exact HDR histograms; ~0.5 Mpps).
    Udp,
    /// XDP program on --iface: timestamps in the driver, histograms in maps (3 % buckets), drops.
    Xdp,
}

impl SinkBackend {
    /// llr-io's sink backend, the XDP program on `iface`.
    pub fn on(self, iface: &str) -> llr_io::sink::SinkBackend {
        match self {
            SinkBackend::Udp => llr_io::sink::SinkBackend::Udp,
            SinkBackend::Xdp => llr_io::sink::SinkBackend::Xdp {
                iface: iface.to_string(),
            },
        }
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
