//! `llrouter`: a low-latency, QoS-aware software router. See README.md.
#![forbid(unsafe_code)]

use clap::{CommandFactory, Parser, Subcommand};
use llrouter::cli_util::exits_2;
use llrouter::{
    cmd_ctl, cmd_demo, cmd_gen, cmd_model, cmd_paper, cmd_results, cmd_run, cmd_sim, cmd_sink,
    cmd_testbed, cmd_top, cmd_tune,
};
use std::io::IsTerminal;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "llrouter", version, about = "Low-latency, QoS-aware software router", long_about = None)]
struct Cli {
    /// Log level (error, warn, info, debug, trace) or a tracing filter; RUST_LOG overrides it.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the router: XDP classifier, per-class AF_XDP rings, poll engine, forwarding.
    Run(cmd_run::RunArgs),
    /// Run the simulator (paper 000/001 scenarios) on the shared poll engine.
    Sim(Box<cmd_sim::SimCmd>),
    /// Analytic model: RT latency bound Tmax and the ring budget rule (paper 000, Eq. 1–2).
    Model(cmd_model::ModelArgs),
    /// The demo: strategies side by side under load up to overload.
    Demo(cmd_demo::DemoArgs),
    /// A paper's experiments, one command each, reported beside the paper's numbers.
    Paper(cmd_paper::PaperCmd),
    /// Traffic generator: UDP probes with sequence numbers, class and send timestamps.
    Gen(cmd_gen::GenArgs),
    /// Latency sink: one-way latency per class, loss and reordering per flow.
    Sink(cmd_sink::SinkArgs),
    /// Namespace testbed: topology up/down, sweeps and MLFFR against the Linux kernel.
    Testbed(Box<cmd_testbed::TestbedArgs>),
    /// Regenerate docs/results.md's and README.md's results tables from their studies.
    Results(cmd_results::ResultsArgs),
    /// Host tuning (paper 002): per-core load, worker core, IRQ affinities, ring and buffer sizes.
    Tune(cmd_tune::TuneArgs),
    /// Control-plane client of a running router.
    Ctl(cmd_ctl::Args),
    /// Live terminal view of a running router's counters.
    Top(cmd_top::Args),
    /// Shell completions on stdout: `llrouter completions bash > /etc/bash_completion.d/llrouter`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Man pages of every command, written to DIR (the package build uses it).
    #[command(hide = true)]
    Manpages { dir: std::path::PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(&cli.log));
    match filter {
        Ok(f) => tracing_subscriber::fmt()
            .with_env_filter(f)
            .with_writer(std::io::stderr)
            // Colour codes only for a terminal: redirected stderr is a log file (the testbed's
            // llrouter-<strategy>.log, journald), where they are noise.
            .with_ansi(std::io::stderr().is_terminal())
            .init(),
        Err(e) => {
            eprintln!(
                "error: --log: `{}` is not a log level or filter: {e}",
                cli.log
            );
            return ExitCode::from(2);
        }
    }
    let res = match cli.cmd {
        Cmd::Run(a) => cmd_run::run(a),
        Cmd::Sim(a) => cmd_sim::run(*a),
        Cmd::Model(a) => cmd_model::run(a),
        Cmd::Demo(a) => cmd_demo::run(a),
        Cmd::Paper(a) => cmd_paper::run(a),
        Cmd::Gen(a) => cmd_gen::run(a),
        Cmd::Sink(a) => cmd_sink::run(a),
        Cmd::Testbed(a) => cmd_testbed::run(*a),
        Cmd::Results(a) => cmd_results::run(a),
        Cmd::Tune(a) => cmd_tune::run(a),
        Cmd::Ctl(a) => cmd_ctl::run(a),
        Cmd::Top(a) => cmd_top::run(a),
        Cmd::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "llrouter",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Cmd::Manpages { dir } => std::fs::create_dir_all(&dir)
            .and_then(|_| clap_mangen::generate_to(Cli::command(), &dir))
            .map_err(|e| anyhow::anyhow!("man pages into {}: {e}", dir.display())),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if exits_2(&e) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
