use super::*;
use clap::Parser;
use llr_ops::query::{Family, PacketQuery};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    show: ShowCmd,
}

fn fib_words(words: &[&str]) -> Result<FibRequest> {
    let cli = Cli::try_parse_from(["show"].iter().chain(words))?;
    match cli.show {
        ShowCmd::Fib(a) => a.request().map_err(to_usage),
        other => panic!("{other:?}"),
    }
}

#[test]
fn fib_words_map_to_requests() {
    let all = RouteQuery::default();
    assert_eq!(
        fib_words(&["fib"]).unwrap(),
        FibRequest::ListOrSummary(all.clone())
    );
    // the familiar names
    assert_eq!(
        fib_words(&["routes"]).unwrap(),
        FibRequest::ListOrSummary(all.clone())
    );
    assert_eq!(
        fib_words(&["route", "--all"]).unwrap(),
        FibRequest::List(None, all.clone())
    );
    assert_eq!(
        fib_words(&["fib", "--limit", "5"]).unwrap(),
        FibRequest::List(Some(5), all.clone())
    );
    assert_eq!(
        fib_words(&["fib", "summary"]).unwrap(),
        FibRequest::Summary(all.clone())
    );
    let within = RouteQuery {
        prefix: Some("10.0.0.0/8".into()),
        dev: Some("eth1".into()),
        ..Default::default()
    };
    assert_eq!(
        fib_words(&["fib", "10.0.0.0/8", "--dev", "eth1"]).unwrap(),
        FibRequest::List(None, within)
    );
    let v6 = RouteQuery {
        family: Some(Family::Ipv6),
        connected: Some(true),
        ..Default::default()
    };
    assert_eq!(
        fib_words(&["fib", "--family", "ipv6", "--connected"]).unwrap(),
        FibRequest::List(None, v6)
    );
    let mut p = PacketQuery::to("10.71.2.1".parse().unwrap());
    p.dport = Some(5000);
    p.iif = Some("in0".into());
    assert_eq!(
        fib_words(&["fib", "10.71.2.1", "--dport", "5000", "--iif", "in0"]).unwrap(),
        FibRequest::Get(p)
    );
    assert_eq!(fib_words(&["fib", "rules"]).unwrap(), FibRequest::Rules);
    // usage errors, each naming its field
    for (words, field) in [
        (&["fib", "--limit", "0"][..], "--limit"),
        (&["fib", "10.0.0.0/33x"], "--prefix"),
        (&["fib", "hosts"], "--fib"),
        (&["fib", "--dport", "53"], "--from"),
        (&["fib", "10.1.2.3", "--all"], "--address"),
        (&["fib", "summary", "--limit", "3"], "--limit"),
        (&["fib", "rules", "--dev", "eth1"], "--rules"),
    ] {
        let e = fib_words(words).unwrap_err();
        assert!(
            e.downcast_ref::<crate::cli_util::UsageError>().is_some(),
            "{words:?}: {e}"
        );
        assert!(e.to_string().contains(field), "{words:?}: {e}");
    }
    assert!(fib_words(&["fib", "--all", "--limit", "3"]).is_err());
    assert!(fib_words(&["fib", "1.2.3.4", "--dscp", "64"]).is_err());
}

#[test]
fn unknown_words_get_a_suggestion() {
    let e = Cli::try_parse_from(["show", "rouets"])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("routes") || e.contains("route"), "{e}");
    let e = Cli::try_parse_from(["show", "neighbor"])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("neighbors") || e.contains("neighbours"), "{e}");
}
