//! The traffic of a measurement point: the generator and sink configurations.

use std::time::Duration;

use llr_traffic::gen::{GenConfig, TxSteer};
use llr_traffic::netns::addr;
use llr_traffic::sink::SinkConfig;

use crate::options::Options;
use crate::{LabError, Result};

pub use crate::options::{GenBackend, SinkBackend};

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
        be_dst: c.be_dst,
        queues: if c.gen_backend == GenBackend::Xsk {
            c.veth_queues() as u16
        } else {
            1
        },
        tx_steer: if c.steering == llr_router::Steering::Queues {
            TxSteer::Class
        } else {
            TxSteer::Rss
        },
    };
    cfg.validate()?;
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
        let mut o = Options::new(&[crate::Target::Kernel], std::env::temp_dir());
        o.size = 20;
        match gen_config(&o, 1000.0, 0.3) {
            Err(LabError::Invalid(e)) => assert_eq!(e.field, "size", "{e}"),
            other => panic!("{other:?}"),
        }
    }
}
