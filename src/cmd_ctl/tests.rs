use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn parse(words: &[&str]) -> Result<Request> {
    let cli = Cli::try_parse_from(std::iter::once("ctl").chain(words.iter().copied()))?;
    request(&cli.args.cmd)
}

fn one(words: &[&str]) -> Command {
    match parse(words).unwrap() {
        Request::One(c) => c,
        other => panic!("{other:?}"),
    }
}

#[test]
fn cli_words_map_to_commands() {
    assert_eq!(one(&["status"]), Command::Status {});
    assert_eq!(
        one(&["rules", "add", "class=rt dscp=46"]),
        Command::RulesAdd {
            rule: "class=rt dscp=46".into()
        }
    );
    // unquoted: the words are joined
    assert_eq!(
        one(&[
            "rules",
            "add",
            "class=rt",
            "proto=udp",
            "dst_port=5000-5010"
        ]),
        Command::RulesAdd {
            rule: "class=rt proto=udp dst_port=5000-5010".into()
        }
    );
    assert_eq!(
        one(&["budget", "set", "rt", "60"]),
        Command::BudgetSet {
            class: "rt".into(),
            budget: Budget::packets(60).unwrap()
        }
    );
    assert_eq!(
        one(&["device-budget", "set", "64"]),
        Command::DeviceBudgetSet { budget: 64 }
    );
    assert_eq!(
        one(&["strategy", "set", "ll-rr"]),
        Command::StrategySet {
            strategy: StrategyKind::LlRr
        }
    );
    assert_eq!(
        one(&[
            "route",
            "add",
            "10.1.0.0/16",
            "via",
            "10.0.0.2",
            "dev",
            "veth1"
        ]),
        Command::RouteAdd {
            prefix: "10.1.0.0/16".into(),
            via: Some("10.0.0.2".into()),
            dev: "veth1".into()
        }
    );
    assert_eq!(
        one(&["route", "add", "10.1.0.0/16", "dev", "veth1"]),
        Command::RouteAdd {
            prefix: "10.1.0.0/16".into(),
            via: None,
            dev: "veth1".into()
        }
    );
    assert!(matches!(
        parse(&["show", "classes"]).unwrap(),
        Request::Show(show::ShowCmd::Classes)
    ));
    assert!(matches!(
        one(&["wakeup", "set", "adaptive", "--spin-us", "50"]),
        Command::WakeupSet {
            mode: WakeMode::Adaptive,
            spin_us: Some(50)
        }
    ));
    // usage errors: clap's, or ours marked as usage (exit 2)
    let is_usage = |w: &[&str]| match parse(w) {
        Err(e) => {
            e.downcast_ref::<clap::Error>().is_some()
                || e.downcast_ref::<crate::cli_util::UsageError>().is_some()
        }
        Ok(r) => panic!("{w:?} accepted: {r:?}"),
    };
    assert!(is_usage(&["route", "add", "10.1.0.0/16", "gw", "x"]));
    assert!(is_usage(&["route", "add", "10.1.0.0", "dev", "x"]));
    assert!(is_usage(&["strategy", "set", "fastest"]));
    assert!(is_usage(&["wakeup", "set", "sometimes"]));
    assert!(is_usage(&["wakeup", "set", "busy", "--spin-us", "5"]));
    assert!(is_usage(&["budget", "set", "rt", "-1"]));
    assert!(is_usage(&["--timeout", "0", "status"]));
    assert!(is_usage(&["show", "fib", "--limit", "0"]));
    assert!(is_usage(&["show", "neighbours", "--limit", "0"]));
    assert!(is_usage(&["show", "fib", "--dport", "53"]));
}

#[test]
fn json_flag_anywhere() {
    for words in [
        &["-j", "status"][..],
        &["status", "--json"],
        &["show", "fib", "-j"],
        &["--json", "show", "interfaces"],
    ] {
        let cli = Cli::try_parse_from(std::iter::once("ctl").chain(words.iter().copied()))
            .unwrap_or_else(|e| panic!("{words:?}: {e}"));
        assert!(cli.args.json, "{words:?}");
    }
}
