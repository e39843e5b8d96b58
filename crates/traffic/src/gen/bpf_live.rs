//! `bpf-live` backend: `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` over the XDP program
//! `bpf/gen.c`, which turns every run into one probe packet and redirects it into the egress
//! interface (~2.7–4.4 Mpps on one core here, ten times the UDP backend).
//!
//! - Per-packet work happens in the kernel: class (RT with probability `rt_share`, by
//!   `bpf_get_prandom_u32`), flow (uniform within the class; flows `0..rt_flows` are RT, as in
//!   [`GenConfig::class_of`]), per-flow sequence number (a counter per flow in a map, so the
//!   sink's per-flow `SeqTracker` sees 0, 1, 2, …), UDP source port `SPORT_BASE + flow`, DSCP EF
//!   for RT, the probe's send timestamp `bpf_ktime_get_ns()` (`CLOCK_MONOTONIC`), the UDP
//!   checksum; the IPv4 header checksum is in the per-class templates.
//! - Pacing: the program runs `repeat` times per syscall (a burst of back-to-back frames);
//!   bursts of `cfg.batch` frames are spaced so that the average rate is `cfg.rate_pps`
//!   (constant or exponential spacing of the bursts for `Gaps::Poisson`). Within a burst the
//!   frames go out at the backend's line rate; the kernel flushes redirected frames every
//!   `XDP_BATCH` runs, so a frame's timestamp can precede its transmission by up to that many
//!   frame times (a few µs, counted in the measured latency).
//! - Interface, source address and MACs come from the calling namespace's route to `cfg.dst`
//!   (`ip route get`) and the neighbour entry of its next hop (`ip neigh`).
//! - Sent counts are read back from the per-flow counters: a frame the veth could not queue
//!   (peer ring full) is counted as sent and shows up as loss at the sink, like a NIC's drop.
//! - `rt_port`/`dst_port` as in the UDP backend; `rt_dscp` marks RT with EF.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use aya::maps::Array;
use aya::programs::{TestRun, TestRunAttrs, TestRunOptions, Xdp, XdpMode};
use aya::Ebpf;
use llr_core::probe::Probe;
use llr_core::wire::checksum::checksum;

use super::{Gaps, GenConfig, GenReport, Rng, CLASS_BE, CLASS_RT, DSCP_EF};
use llr_io::sys::mono_ns;

/// Program name in `bpf/gen.c`.
pub const PROGRAM_NAME: &str = "llr_gen";
/// Flows the program supports (`GEN_MAX_FLOWS`).
pub const MAX_FLOWS: u16 = 4096;
/// UDP source port of flow 0.
pub const SPORT_BASE: u16 = 20_000;
/// Frames per XDP flush inside one `BPF_PROG_RUN` (the kernel's live-frames batch size).
pub const XDP_BATCH: u32 = 32;
const TMPL_LEN: usize = 128;

/// Where the frames go: resolved from the calling namespace's routing table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    pub ifname: String,
    pub ifindex: u32,
    pub src: IpAddr,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
}

fn parse_mac(s: &str) -> Result<[u8; 6]> {
    let v: Vec<u8> = s
        .split(':')
        .map(|h| u8::from_str_radix(h, 16))
        .collect::<Result<_, _>>()
        .with_context(|| format!("bad MAC `{s}`"))?;
    v.try_into().map_err(|_| anyhow::anyhow!("bad MAC `{s}`"))
}

impl Path {
    /// Resolves the egress interface, source address and MACs towards `dst` (calling thread's
    /// namespace) with `ip -j route get` and `ip -j neigh show`.
    pub fn resolve(dst: IpAddr) -> Result<Path> {
        let out = crate::netns::ip(&["-j", "route", "get", &dst.to_string()])?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("ip route get")?;
        let r = v.get(0).context("no route to the destination")?;
        let ifname = r["dev"].as_str().context("route without dev")?.to_owned();
        let src: IpAddr = r["prefsrc"]
            .as_str()
            .context("route without a source address")?
            .parse()?;
        let hop = r["gateway"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| dst.to_string());
        let out = crate::netns::ip(&["-j", "neigh", "show", &hop, "dev", &ifname])?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("ip neigh")?;
        let mac = v
            .get(0)
            .and_then(|n| n["lladdr"].as_str())
            .with_context(|| {
                format!("no neighbour entry (MAC) for next hop {hop} on {ifname}: add one with `ip neigh replace`")
            })?;
        let dst_mac = parse_mac(mac)?;
        // (/sys shows the namespace /sys was mounted in, not this thread's: ask `ip`.)
        let out = crate::netns::ip(&["-j", "link", "show", "dev", &ifname])?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("ip link")?;
        let src_mac = parse_mac(
            v.get(0)
                .and_then(|l| l["address"].as_str())
                .with_context(|| format!("MAC of {ifname}"))?,
        )?;
        Ok(Path {
            ifindex: llr_io::ebpf::ifindex(&ifname)?,
            ifname,
            src,
            src_mac,
            dst_mac,
        })
    }
}

/// The frame template of one class: full frame of `cfg.frame_size` bytes with zero source port,
/// flow, seq and timestamp, valid IPv4 header checksum, and the UDP checksum over those zeros.
pub fn template(cfg: &GenConfig, path: &Path, class: u8) -> Result<Vec<u8>> {
    let n = cfg.frame_size;
    let mut f = vec![0u8; n];
    f[0..6].copy_from_slice(&path.dst_mac);
    f[6..12].copy_from_slice(&path.src_mac);
    let dport = match (class, cfg.rt_port) {
        (CLASS_RT, Some(p)) => p,
        _ => cfg.dst_port,
    };
    let ttl = if class == CLASS_RT { 64 } else { cfg.be_ttl };
    let dst = match cfg.be_dst {
        Some(d) if class != CLASS_RT => d,
        _ => cfg.dst,
    };
    let tos = if class == CLASS_RT && cfg.rt_dscp {
        DSCP_EF << 2
    } else {
        0
    };
    let l4 = match (dst, path.src) {
        (IpAddr::V4(d), IpAddr::V4(s)) => {
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip = &mut f[14..34];
            ip[0] = 0x45;
            ip[1] = tos;
            ip[2..4].copy_from_slice(&((n - 14) as u16).to_be_bytes());
            ip[6] = 0x40; // DF
            ip[8] = ttl;
            ip[9] = 17;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            let c = checksum(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            34
        }
        (IpAddr::V6(d), IpAddr::V6(s)) => {
            f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            let ip = &mut f[14..54];
            let vtc: u32 = (6 << 28) | ((tos as u32) << 20);
            ip[0..4].copy_from_slice(&vtc.to_be_bytes());
            ip[4..6].copy_from_slice(&((n - 54) as u16).to_be_bytes());
            ip[6] = 17;
            ip[7] = ttl;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            54
        }
        _ => bail!(
            "destination {dst}: address family differs from the route's source {}",
            path.src
        ),
    };
    let ulen = (n - l4) as u16;
    f[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
    f[l4 + 4..l4 + 6].copy_from_slice(&ulen.to_be_bytes());
    Probe {
        class,
        flow: 0,
        seq: 0,
        tx_ns: 0,
    }
    .encode(&mut f[l4 + 8..])?;
    // Pseudo header + UDP header + payload.
    let mut ph = Vec::with_capacity(40 + n);
    match (dst, path.src) {
        (IpAddr::V4(d), IpAddr::V4(s)) => {
            ph.extend_from_slice(&s.octets());
            ph.extend_from_slice(&d.octets());
            ph.extend_from_slice(&[0, 17]);
            ph.extend_from_slice(&ulen.to_be_bytes());
        }
        (IpAddr::V6(d), IpAddr::V6(s)) => {
            ph.extend_from_slice(&s.octets());
            ph.extend_from_slice(&d.octets());
            ph.extend_from_slice(&(ulen as u32).to_be_bytes());
            ph.extend_from_slice(&[0, 0, 0, 17]);
        }
        _ => unreachable!(),
    }
    ph.extend_from_slice(&f[l4..]);
    let c = checksum(&ph);
    f[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    Ok(f)
}

/// The loaded generator program.
pub struct BpfLive {
    ebpf: Ebpf,
    frame: Vec<u8>,
    path: Path,
    flows: u16,
}

impl std::fmt::Debug for BpfLive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BpfLive").field("path", &self.path).finish()
    }
}

impl BpfLive {
    /// Loads `bpf/gen.c` and configures it for `cfg` (calling thread's namespace).
    pub fn new(cfg: &GenConfig) -> Result<BpfLive> {
        cfg.validate()?;
        if cfg.flows > MAX_FLOWS {
            bail!(
                "--flows {}: the bpf-live backend supports at most {MAX_FLOWS}",
                cfg.flows
            );
        }
        let min = if cfg.dst.is_ipv4() { 64 } else { 84 };
        if cfg.frame_size < min {
            bail!(
                "--size {}: the bpf-live backend needs ≥ {min}",
                cfg.frame_size
            );
        }
        let path = Path::resolve(cfg.dst)?;
        let mut ebpf = Ebpf::load(llr_io::bpf_objects::GEN).context("load bpf/gen.o")?;
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM_NAME)
            .context("program llr_gen missing in gen.o")?
            .try_into()?;
        llr_io::ebpf::load_checked(prog, "llr_gen")?;
        let rt_flows = cfg.rt_flows() as u32;
        let be_flows = cfg.flows as u32 - rt_flows;
        let thresh = (cfg.rt_share * 4_294_967_296.0).min(4_294_967_295.0) as u32;
        let words: [u32; 8] = [
            path.ifindex,
            thresh,
            rt_flows,
            be_flows,
            u32::from(cfg.rt_share >= 1.0 || be_flows == 0),
            u32::from(cfg.dst.is_ipv6()),
            SPORT_BASE as u32,
            0,
        ];
        let mut m: Array<_, [u32; 8]> =
            Array::try_from(ebpf.map_mut("gen_config").context("gen_config")?)?;
        m.set(0, words, 0)?;
        let be = template(cfg, &path, CLASS_BE)?;
        let rt = template(cfg, &path, CLASS_RT)?;
        let mut t: Array<_, [u8; TMPL_LEN]> =
            Array::try_from(ebpf.map_mut("gen_tmpl").context("gen_tmpl")?)?;
        for (k, f) in [(0u32, &be), (1, &rt)] {
            let mut b = [0u8; TMPL_LEN];
            let n = f.len().min(TMPL_LEN);
            b[..n].copy_from_slice(&f[..n]);
            t.set(k, b, 0)?;
        }
        // Keep the program in the XDP dispatcher (see bpf/gen.c): attached in skb mode to the
        // egress interface, where it passes every received frame to the kernel. Detached when
        // `ebpf` is dropped (bpf_link: also when the process dies).
        {
            let prog: &mut Xdp = ebpf
                .program_mut(PROGRAM_NAME)
                .context("llr_gen")?
                .try_into()?;
            // A NIC driver transmits redirected frames (ndo_xdp_xmit) only with a program
            // attached natively (virtio-net: -ENXIO otherwise, and every frame is lost
            // silently); veth needs none on the sender and stays in skb mode.
            let nic = std::path::Path::new("/sys/class/net")
                .join(&path.ifname)
                .join("device")
                .exists();
            let native = nic
                && prog
                    .attach_to_if_index(path.ifindex, XdpMode::Driver)
                    .is_ok();
            if native {
                tracing::debug!("bpf-live: llr_gen attached natively to {}", path.ifname);
            } else if let Err(e) = prog.attach_to_if_index(path.ifindex, XdpMode::Skb) {
                tracing::warn!(
                    "bpf-live: cannot pin llr_gen in the XDP dispatcher via {} ({e}); every burst will cost two RCU grace periods",
                    path.ifname
                );
            }
        }
        Ok(BpfLive {
            ebpf,
            frame: be,
            path,
            flows: cfg.flows,
        })
    }

    /// Where the frames go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs the program `n` times (sends `n` frames); returns when they are queued.
    pub fn burst(&self, n: u32) -> Result<()> {
        let prog: &Xdp = self
            .ebpf
            .program(PROGRAM_NAME)
            .context("llr_gen")?
            .try_into()?;
        let opts = TestRunOptions {
            data_in: Some(&self.frame),
            repeat: n.max(1),
            attrs: TestRunAttrs::new().xdp_live_frames(XDP_BATCH),
            ..Default::default()
        };
        prog.test_run(opts)
            .context("BPF_PROG_RUN (XDP live frames)")?;
        Ok(())
    }

    /// Frames generated per flow so far (the per-flow sequence counters).
    pub fn per_flow(&self) -> Result<Vec<u64>> {
        let m: Array<_, u64> = Array::try_from(self.ebpf.map("gen_seq").context("gen_seq")?)?;
        (0..self.flows as u32)
            .map(|f| m.get(&f, 0).map_err(Into::into))
            .collect()
    }
}

/// Sends `cfg`'s traffic with the bpf-live backend until the packet or time bound or `stop`.
pub fn run(cfg: &GenConfig, stop: &AtomicBool) -> Result<GenReport> {
    let g = BpfLive::new(cfg)?;
    drive(cfg, &g, stop)
}

/// The pacing loop of [`run`] over a loaded generator.
pub fn drive(cfg: &GenConfig, g: &BpfLive, stop: &AtomicBool) -> Result<GenReport> {
    let start = mono_ns();
    let end = cfg
        .duration
        .map(|d| start + d.as_nanos() as u64)
        .unwrap_or(u64::MAX);
    let limit = cfg.packets.unwrap_or(u64::MAX);
    let burst = cfg.batch as u64;
    let mut rng = Rng::new(cfg.seed);
    // Due time of the next burst (ns, fractional kept).
    let mean_gap = if cfg.rate_pps > 0.0 {
        1e9 * burst as f64 / cfg.rate_pps
    } else {
        0.0
    };
    let mut next_due = start as f64;
    let mut sent = 0u64;
    llr_io::sys::set_timer_slack(1000);
    loop {
        let now = mono_ns();
        if now >= end || sent >= limit || stop.load(Ordering::Relaxed) {
            break;
        }
        if mean_gap > 0.0 && (next_due as u64) > now {
            let wait = next_due as u64 - now;
            if wait > 60_000 {
                std::thread::sleep(Duration::from_nanos((wait - 40_000).min(50_000_000)));
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        // Catch up at most a few bursts at once after a hiccup (keeps bursts short).
        let mut n = burst;
        if mean_gap > 0.0 {
            let behind = ((now as f64 - next_due) / mean_gap).floor().max(0.0) as u64;
            n = burst * (1 + behind.min(3));
        } else {
            n = n.max(256);
        }
        n = n.min(limit - sent);
        g.burst(n as u32)?;
        sent += n;
        let k = n as f64 / burst as f64;
        next_due += match cfg.gaps {
            Gaps::Constant => mean_gap * k,
            Gaps::Poisson => -rng.unit().ln() * mean_gap * k,
        };
    }
    let dur = (mono_ns() - start) as f64 / 1e9;
    let per_flow = g.per_flow()?;
    let mut rep = GenReport {
        backend: "bpf-live".into(),
        offered_pps: cfg.rate_pps,
        frame_size: cfg.frame_size,
        duration_s: dur,
        ..Default::default()
    };
    for (f, &n) in per_flow.iter().enumerate() {
        rep.sent += n;
        if cfg.class_of(f as u16) == CLASS_RT {
            rep.sent_rt += n;
        } else {
            rep.sent_be += n;
        }
    }
    rep.achieved_pps = rep.sent as f64 / dur.max(1e-9);
    rep.per_flow = per_flow;
    Ok(rep)
}
