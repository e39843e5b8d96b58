//! The settings of each testbed study as a user gives them (`llrouter testbed` derives its
//! flags from them with the `clap` feature), and the study each one builds. The shared
//! settings are [`Options`], flattened into every study's.

use std::path::PathBuf;
use std::time::Duration;

use llr_core::values::Values;

use crate::alternate::AlternateStudy;
use crate::firewall_cost::{FirewallMode, FirewallStudy};
use crate::flood::{FloodMode, FloodStudy};
use crate::iperf::{Case, IperfStudy};
use crate::mlffr::MlffrStudy;
use crate::options::{Budgets, Options, Search};
use crate::sweep::SweepStudy;
use crate::{GenBackend, LabError, Result};

/// `testbed run`: offered load × RT share for each target.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct RunArgs {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub common: Options,
    /// Offered loads in packets/s: list `a,b,c` or range `start:stop:step`.
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value = "20000,100000,200000,400000")
    )]
    pub loads: Values,
    /// RT shares: list or range.
    #[cfg_attr(feature = "clap", arg(long, default_value = "0.3"))]
    pub rt_shares: Values,
    /// Loads as multiples of each target's MLFFR (e.g. `0.5,0.9,1.5`): searches the MLFFR of
    /// each target first (at the first RT share) and ignores --loads.
    #[cfg_attr(feature = "clap", arg(long))]
    pub mlffr_multiples: Option<Values>,
    /// MLFFR search (with --mlffr-multiples): tolerated loss ratio.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.001))]
    pub loss_tolerance: f64,
    /// MLFFR search: binary-search steps.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 7))]
    pub steps: u32,
    /// MLFFR search: upper end of the range, packets/s.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3_000_000.0))]
    pub max_rate: f64,
    /// Repeat the whole measurement of every target this many times, targets interleaved per
    /// round (a noisy VM moves single MLFFR searches by tens of %); the report gives medians
    /// and ranges.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub repeat: u32,
    /// With --mlffr-multiples: also measure every target, every round, at this fixed light load
    /// with --reference-gen-backend (default xsk: packet-by-packet Poisson arrivals, no bursts),
    /// and report latency growth against that reference too (reference.csv).
    #[cfg_attr(feature = "clap", arg(long))]
    pub reference_load: Option<f64>,
    /// Generator backend of the reference point.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = GenBackend::Xsk))]
    pub reference_gen_backend: GenBackend,
}

impl RunArgs {
    /// The lower end of the MLFFR search of `--mlffr-multiples`, packets/s.
    pub const MIN_RATE: f64 = 10_000.0;

    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<SweepStudy> {
        let s = SweepStudy {
            loads: self.loads.0,
            shares: self.rt_shares.0,
            multiples: self.mlffr_multiples.map(|m| m.0),
            search: Search {
                loss_tolerance: self.loss_tolerance,
                min_rate: Self::MIN_RATE,
                max_rate: self.max_rate,
                steps: self.steps,
            },
            repeat: self.repeat,
            reference_load: self.reference_load,
            reference_gen_backend: self.reference_gen_backend,
            options: self.common,
        };
        s.check()?;
        Ok(s)
    }
}

/// `testbed flood`: RT alone and beside a flood the router's ruleset drops, in XDP or in the
/// worker, interleaved.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FloodArgs {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub common: Options,
    /// Offered load of the flood modes, packets/s: RT is --rt-share of it (also alone), the
    /// flood the rest.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1_000_000.0))]
    pub load: f64,
    /// RT's share of --load.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.1))]
    pub rt_share: f64,
    /// Rounds, the modes interleaved within each.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 5))]
    pub rounds: u32,
    /// Modes, in the order each round runs them.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "alone,xdp,worker"
        )
    )]
    pub modes: Vec<FloodMode>,
    /// The flood's destination, which the ruleset drops (default 10.71.2.2, with --ipv6
    /// fd71:2::2: beside the sink, behind the same next hop).
    #[cfg_attr(feature = "clap", arg(long))]
    pub blocked: Option<std::net::IpAddr>,
}

impl FloodArgs {
    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<FloodStudy> {
        let s = FloodStudy {
            options: self.common,
            load: self.load,
            rt_share: self.rt_share,
            rounds: self.rounds,
            modes: self.modes,
            blocked: self.blocked,
        };
        s.check()?;
        Ok(s)
    }
}

/// `testbed firewall`: the host's firewall against none, interleaved: a stateless ruleset
/// llrouter runs itself, and a typical stateful one with the flows unestablished (the kernel
/// forwards them) and established (llrouter carries them).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FirewallArgs {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub common: Options,
    /// Offered load, packets/s.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2_000_000.0))]
    pub load: f64,
    /// RT's share of --load.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.1))]
    pub rt_share: f64,
    /// Rounds, the rulesets interleaved within each.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 5))]
    pub rounds: u32,
    /// Rulesets, in the order each round runs them (`none` among them: the others are set
    /// against it).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "none,stateless,typical,typical-est"
        )
    )]
    pub modes: Vec<FirewallMode>,
}

impl FirewallArgs {
    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<FirewallStudy> {
        let s = FirewallStudy {
            options: self.common,
            load: self.load,
            rt_share: self.rt_share,
            rounds: self.rounds,
            modes: self.modes,
        };
        s.check()?;
        Ok(s)
    }
}

/// `testbed mlffr`: the maximum loss-free forwarding rate of each target.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct MlffrArgs {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub common: Options,
    /// RT share of the traffic.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.3))]
    pub rt_share: f64,
    /// Tolerated loss ratio (noisy VMs: e.g. 0.001).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.0))]
    pub loss_tolerance: f64,
    /// Search range, packets/s.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 10_000.0))]
    pub min_rate: f64,
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2_000_000.0))]
    pub max_rate: f64,
    /// Repeat every search this many times, targets interleaved per round.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub repeat: u32,
    /// Binary-search steps.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 8))]
    pub steps: u32,
}

impl MlffrArgs {
    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<MlffrStudy> {
        let s = MlffrStudy {
            rt_share: self.rt_share,
            search: Search {
                loss_tolerance: self.loss_tolerance,
                min_rate: self.min_rate,
                max_rate: self.max_rate,
                steps: self.steps,
            },
            repeat: self.repeat,
            options: self.common,
        };
        s.check()?;
        Ok(s)
    }
}

/// `testbed alternate`: llrouter strategies under one constant overload, switched slice by
/// slice in the running router.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct AlternateArgs {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub common: Options,
    /// Offered load, packets per second (flat out: more than the router forwards).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3_000_000.0))]
    pub load: f64,
    /// RT share of the traffic.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.15))]
    pub rt_share: f64,
    /// Measured milliseconds per slice.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 500))]
    pub slice_ms: u64,
    /// Milliseconds after each switch before the slice is measured.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 100))]
    pub settle_ms: u64,
    /// Cycles through every target.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 30))]
    pub cycles: u32,
}

impl AlternateArgs {
    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<AlternateStudy> {
        let s = AlternateStudy {
            rate: self.load,
            rt_share: self.rt_share,
            slice: Duration::from_millis(self.slice_ms),
            settle: Duration::from_millis(self.settle_ms),
            cycles: self.cycles,
            options: self.common,
        };
        s.check()?;
        Ok(s)
    }
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Switch {
    On,
    Off,
}

/// `testbed iperf`: TCP goodput through each target, alone and beside a BE overload.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct IperfArgs {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub common: Options,
    /// Seconds per iperf3 run.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 5.0))]
    pub secs: f64,
    /// Offered rate of the BE overload beside the TCP flow, packets per second.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3_000_000.0))]
    pub overload: f64,
    /// Rounds (targets interleaved within each round); the report gives medians and ranges.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub repeat: u32,
    /// MTU of every link (576..=9000; above one UMEM chunk llrouter uses multi-buffer).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1500))]
    pub mtu: u32,
    /// Segmentation, receive and checksum offloads of the links: `on` leaves veth's defaults
    /// (TSO, GSO, checksum offload on), `off` turns TSO, GSO, GRO and checksum offload off.
    #[cfg_attr(feature = "clap", arg(long, value_enum, default_value_t = Switch::On))]
    pub offloads: Switch,
    /// Cases, comma-separated: alone (as fast as TCP goes), paced (at --pace), overload (beside
    /// a BE overload), rt (in the RT class beside it).
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            value_enum,
            value_delimiter = ',',
            default_value = "alone,overload,rt"
        )
    )]
    pub cases: Vec<Case>,
    /// Rate of the paced case's TCP flow, Mbit/s.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1000.0))]
    pub pace: f64,
    /// Run the end hosts' receive (the server's TCP stack, the client's ACKs) on --gen-cpu by
    /// RPS, for every target alike, instead of in whatever transmitted to them (the kernel's
    /// forwarding softirq, llrouter's transmit call) on the router's CPU.
    #[cfg_attr(feature = "clap", arg(long))]
    pub hosts_on_gen_cpu: bool,
}

impl IperfArgs {
    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<IperfStudy> {
        let s = IperfStudy {
            secs: self.secs,
            overload: self.overload,
            repeat: self.repeat,
            mtu: self.mtu,
            offloads: self.offloads == Switch::On,
            cases: self.cases,
            pace_mbps: self.pace,
            hosts_on_gen_cpu: self.hosts_on_gen_cpu,
            options: self.common,
        };
        s.check()?;
        Ok(s)
    }
}

/// `testbed costs`: the worker's grant and flush costs fitted over `testbed run` results.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct CostsArgs {
    /// results.csv files (or the output directories holding them) of `testbed run`s with
    /// llrouter targets at overload (or below saturation, with --below-saturation); each
    /// file's rounds stay its own.
    #[cfg_attr(feature = "clap", arg(required = true))]
    pub results: Vec<PathBuf>,
    /// The runs' ring budgets of rt and be, `RT,BE` (for the simulator).
    #[cfg_attr(feature = "clap", arg(long, default_value = "60,4"))]
    pub budgets: Budgets,
    /// The runs' --tx-batch (for the simulator).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = llr_core::sched::TxPolicy::DEFAULT_BATCH))]
    pub tx_batch: u32,
    /// Fit over the points below saturation (BE loss ≤ 1 %) instead of the overloaded ones,
    /// e.g. the CPU-per-packet runs at a load every target carries; prints the simulator's
    /// calibration flags instead of its forwarding ratios.
    #[cfg_attr(feature = "clap", arg(long))]
    pub below_saturation: bool,
}

impl CostsArgs {
    /// The results.csv files named (a directory stands for the one in it).
    pub fn files(&self) -> Result<Vec<PathBuf>> {
        let files: Vec<PathBuf> = (self.results.iter())
            .map(|p| {
                if p.is_dir() {
                    p.join("results.csv")
                } else {
                    p.clone()
                }
            })
            .collect();
        match files.iter().find(|f| !f.is_file()) {
            Some(f) => Err(LabError::invalid(
                "results",
                format!(
                    "{}: no such file (a `testbed run` output directory or its results.csv)",
                    f.display()
                ),
            )),
            None => Ok(files),
        }
    }

    /// Which points the costs are fitted over.
    pub fn points(&self) -> crate::report::CostPoints {
        if self.below_saturation {
            crate::report::CostPoints::BelowSaturation
        } else {
            crate::report::CostPoints::Overloaded
        }
    }

    /// The options the simulator needs to replay the runs.
    pub fn options(&self) -> Options {
        Options {
            budgets: self.budgets,
            tx_batch: self.tx_batch,
            ..Options::new(&[], PathBuf::new())
        }
    }
}

/// `testbed fulltable`: a generated full Internet routing table as files.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FulltableArgs {
    /// IPv4 prefixes (today's table: about 1 000 000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1_000_000))]
    pub v4: usize,
    /// IPv6 prefixes (today's table: about 200 000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 230_000))]
    pub v6: usize,
    /// Seed: the same seed and sizes always give the same table.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub seed: u64,
    /// Distinct next hops. 1: every route via the sink (10.71.2.1, fd71:2::1), so the batch
    /// files apply to a plain `testbed up`. More: gateways 10.71.64.1… and fd71:2::100:1…,
    /// which need 10.71.127.254/18 on the router's veth-rout (the summary says so).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1))]
    pub next_hops: u16,
    /// BIRD static protocols per family (fx4_0…, fx6_0…): `birdc disable fx4_3` withdraws a
    /// slice.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1000)))]
    pub slices: u32,
    /// Output directory (created).
    #[cfg_attr(feature = "clap", arg(long))]
    pub out: PathBuf,
}

impl FulltableArgs {
    /// The fixture's specification.
    pub fn spec(&self) -> llr_core::fixture::FixtureSpec {
        llr_core::fixture::FixtureSpec {
            v4: self.v4,
            v6: self.v6,
            seed: self.seed,
            next_hops: self.next_hops,
        }
    }
}

/// `llrouter testbed scale`: the route mirror at full-table scale.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ScaleArgs {
    /// IPv4 prefixes of the generated table (`testbed fulltable`'s).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1_000_000))]
    pub v4: usize,
    /// IPv6 prefixes.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 230_000))]
    pub v6: usize,
    /// Routers started one after the other on the loaded table.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3))]
    pub rounds: u32,
    /// The window the route mirror's CPU is measured over while no route changes, s.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 10.0))]
    pub idle_secs: f64,
    /// Output directory (the table's files, router configs and logs, scale.csv, report.md).
    #[cfg_attr(feature = "clap", arg(long, default_value = "testbed-scale"))]
    pub out: PathBuf,
    /// The llrouter binary to start (default: this one).
    #[cfg_attr(feature = "clap", arg(long))]
    pub router_bin: Option<PathBuf>,
}

impl ScaleArgs {
    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<crate::scale::ScaleStudy> {
        let mut options = crate::scale::options(self.out);
        options.router_bin = self.router_bin;
        let s = crate::scale::ScaleStudy {
            options,
            v4: self.v4,
            v6: self.v6,
            rounds: self.rounds,
            idle_secs: self.idle_secs,
        };
        s.check()?;
        Ok(s)
    }
}

/// `llrouter demo`: paper 000's scenario simulated, then live on the testbed as root.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct DemoArgs {
    /// Packets per simulated point.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 300_000))]
    pub packets: u64,
    /// Skip the live testbed part even when running as root.
    #[cfg_attr(feature = "clap", arg(long))]
    pub sim_only: bool,
    /// Seconds per live measurement point (0.5–3).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1.5))]
    pub live_secs: f64,
}

/// `llrouter testbed bird`: a full table over eBGP from BIRD into the kernel and llrouter.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct BgpArgs {
    /// IPv4 prefixes of the generated table (`testbed fulltable`'s).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 1_000_000))]
    pub v4: usize,
    /// IPv6 prefixes.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 230_000))]
    pub v6: usize,
    /// Rounds, each on a fresh testbed with its own BIRDs and router.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 2))]
    pub rounds: u32,
    /// Destinations compared with the kernel's `ip route get` after the load (a fifth as
    /// many after the withdrawal and after the re-announcement).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 10_000))]
    pub check: usize,
    /// Output directory (the table's files, router configs and logs, bgp.csv, report.md).
    #[cfg_attr(feature = "clap", arg(long, default_value = "testbed-bird"))]
    pub out: PathBuf,
    /// The llrouter binary to start (default: this one).
    #[cfg_attr(feature = "clap", arg(long))]
    pub router_bin: Option<PathBuf>,
}

impl BgpArgs {
    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<crate::bgp::BgpStudy> {
        let mut options = crate::bgp::options(self.out);
        options.router_bin = self.router_bin;
        let s = crate::bgp::BgpStudy {
            options,
            v4: self.v4,
            v6: self.v6,
            rounds: self.rounds,
            check: self.check,
        };
        s.check()?;
        Ok(s)
    }
}

/// `llrouter testbed churn`: route churn beside measured traffic.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ChurnArgs {
    #[cfg_attr(feature = "clap", command(flatten))]
    pub common: Options,
    /// /24 routes in the router namespace's table (the churn replaces them).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 100_000))]
    pub routes: usize,
    /// Route replaces a second during the churn points.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 10_000))]
    pub rate: u32,
    /// Offered load, packets/s.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 250_000.0))]
    pub load: f64,
    /// RT's share of --load.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 0.3))]
    pub rt_share: f64,
    /// Rounds, each a point with churn and one without (the order swapped every round).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = 3))]
    pub rounds: u32,
    /// The CPU the churn's `ip` runs on (default: the generator's, off the worker's).
    #[cfg_attr(feature = "clap", arg(long))]
    pub churn_cpu: Option<usize>,
}

impl ChurnArgs {
    /// The study, checked before anything changes on the host.
    pub fn study(self) -> Result<crate::churn::ChurnStudy> {
        let s = crate::churn::ChurnStudy {
            options: self.common,
            routes: self.routes,
            rate: self.rate,
            load: self.load,
            rt_share: self.rt_share,
            rounds: self.rounds,
            churn_cpu: self.churn_cpu,
        };
        s.check()?;
        Ok(s)
    }
}
