//! Receive rates from `/proc/net/dev`, and the ring and socket-buffer sizes they call for.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Result, TuneError};

/// Received packets per interface from `/proc/net/dev`.
pub fn parse_net_dev(text: &str) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if name.contains('|') || name.contains(' ') {
            continue;
        }
        // columns: rx bytes, rx packets, ...
        let pkts = rest
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| {
                TuneError::new(
                    format!("/proc/net/dev line {}", i + 1),
                    format!("no rx packet count for {name}"),
                )
            })?;
        out.insert(name.to_string(), pkts);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// sizes

/// Smallest power of two ≥ `n` (1 for 0), saturating at 2^63.
fn next_pow2(n: u64) -> u64 {
    n.max(1).checked_next_power_of_two().unwrap_or(1 << 63)
}

/// Ring size in descriptors: `clamp(next_pow2(ceil(rate_pps · stall)), min, max)`.
pub fn ring_size(rate_pps: f64, stall: Duration, min: u32, max: u32) -> Result<u32> {
    if !rate_pps.is_finite() || rate_pps < 0.0 {
        return Err(TuneError::new(
            "rate_pps",
            format!("{rate_pps} is not a rate"),
        ));
    }
    for (f, v) in [("ring_min", min), ("ring_max", max)] {
        if !v.is_power_of_two() {
            return Err(TuneError::new(f, format!("{v} is not a power of two")));
        }
    }
    if min > max {
        return Err(TuneError::new(
            "ring_min",
            format!("{min} is larger than ring_max {max}"),
        ));
    }
    let need = (rate_pps * stall.as_secs_f64()).ceil();
    let need = if need >= u64::MAX as f64 {
        u64::MAX
    } else {
        need as u64
    };
    Ok(next_pow2(need).clamp(min as u64, max as u64) as u32)
}

/// Socket buffer in bytes: `ceil(k · 2 · B · D_oneway / 8)` (paper 002, eq. 1).
pub fn socket_buffer_bytes(bandwidth_bps: f64, one_way_delay: Duration, k: f64) -> Result<u64> {
    if !bandwidth_bps.is_finite() || bandwidth_bps <= 0.0 {
        return Err(TuneError::new(
            "bandwidth",
            format!("{bandwidth_bps} bit/s is not a bandwidth"),
        ));
    }
    if !k.is_finite() || k < 1.0 {
        return Err(TuneError::new("k", format!("{k} must be at least 1")));
    }
    Ok((k * 2.0 * bandwidth_bps * one_way_delay.as_secs_f64() / 8.0).ceil() as u64)
}
