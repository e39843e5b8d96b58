//! Medians and ranges over repeated rounds (`--repeat`): single measurements on a shared VM
//! move by tens of %, so the report states what held in every round, not one lucky run.

use std::fmt::Write as _;

use crate::measure::Row;

/// One MLFFR search result.
#[derive(Debug, Clone)]
pub struct Mlffr {
    pub target: String,
    pub round: u32,
    pub pps: f64,
    pub gen_limited: bool,
}

/// (median, min, max) of the finite values; `None` when there are none.
pub fn spread(v: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some((med, v[0], v[n - 1]))
}

/// `median [min–max]` with `digits` decimals, or `—`.
fn fmt_spread(v: &[f64], digits: usize) -> String {
    match spread(v) {
        None => "—".into(),
        Some((m, lo, hi)) if v.len() == 1 || lo == hi => format!("{m:.digits$}"),
        Some((m, lo, hi)) => format!("{m:.digits$} [{lo:.digits$}–{hi:.digits$}]"),
    }
}

fn targets_in_order<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Ratios `a / b` of two targets' values in the same round (rounds where both exist, b > 0).
fn same_round_ratios(m: &[Mlffr], a: &str, b: &str) -> Vec<f64> {
    m.iter()
        .filter(|x| x.target == a)
        .filter_map(|x| {
            let y = m
                .iter()
                .find(|y| y.target == b && y.round == x.round && y.pps > 0.0)?;
            Some(x.pps / y.pps)
        })
        .collect()
}

/// The MLFFR section: per target the median and range over rounds, and ratios to the first
/// target and to `llrouter:sq`, each taken within a round (both under the same machine noise).
pub fn mlffr_md(m: &[Mlffr], tolerance: f64) -> String {
    let mut s = String::new();
    let names = targets_in_order(m.iter().map(|x| x.target.as_str()));
    let Some(&first) = names.first() else {
        return s;
    };
    let has_sq = names.contains(&"llrouter:sq") && first != "llrouter:sq";
    let _ = write!(
        s,
        "\n## MLFFR (loss tolerance {tolerance})\n\nMedian [min–max] over rounds; ratios are taken within each round.\n\n\
         | target | rounds | MLFFR pps | ratio to {first} |{} generator-limited |\n|---|---|---|---|{}---|\n",
        if has_sq { " ratio to llrouter:sq |" } else { "" },
        if has_sq { "---|" } else { "" }
    );
    for t in &names {
        let v: Vec<f64> = m.iter().filter(|x| x.target == *t).map(|x| x.pps).collect();
        let lim = m.iter().filter(|x| x.target == *t && x.gen_limited).count();
        let _ = write!(
            s,
            "| {t} | {} | {} | {} |",
            v.len(),
            fmt_spread(&v, 0),
            fmt_spread(&same_round_ratios(m, t, first), 3)
        );
        if has_sq {
            let _ = write!(
                s,
                " {} |",
                fmt_spread(&same_round_ratios(m, t, "llrouter:sq"), 3)
            );
        }
        let _ = writeln!(s, " {lim} of {} |", v.len());
    }
    s
}

/// The price of each strategy in CPU time: per RT share and offered load, the forwarding
/// threads' CPU ns per forwarded packet (median [min–max] over rounds), and its ratio to
/// `base` in the same round. At a load every target keeps up with, each round forwards the
/// same packets, so the ratio is the strategy's own cost, which the VM's noise hides in rates.
pub fn cpu_price_md(rows: &[Row], base: &str) -> String {
    let mut s = String::new();
    if !rows.iter().any(|r| r.worker_ns_per_pkt.is_finite()) {
        return s;
    }
    let _ = write!(
        s,
        "\n## The price in CPU time\n\n\
         CPU time of the forwarding threads (llrouter's workers, by the scheduler's count; the \
         kernel's softirq time on the router CPU, in ticks) per forwarded packet, ns. Median \
         [min–max] over rounds; × {base}: the ratio within each round.\n\n\
         | RT share | offered pps | target | rounds | CPU ns per packet | × {base} |\n|---|---|---|---|---|---|\n"
    );
    let mut points: Vec<(f64, f64)> = Vec::new();
    for r in rows {
        if !points.contains(&(r.rt_share, r.offered_pps)) {
            points.push((r.rt_share, r.offered_pps));
        }
    }
    for (share, load) in points {
        let here: Vec<&Row> = rows
            .iter()
            .filter(|r| r.rt_share == share && r.offered_pps == load)
            .collect();
        for t in targets_in_order(here.iter().map(|r| r.target.as_str())) {
            let mine: Vec<&&Row> = here.iter().filter(|r| r.target == t).collect();
            let ns: Vec<f64> = mine.iter().map(|r| r.worker_ns_per_pkt).collect();
            let ratios: Vec<f64> = mine
                .iter()
                .filter_map(|r| {
                    let b = here
                        .iter()
                        .find(|b| b.target == base && b.round == r.round)?
                        .worker_ns_per_pkt;
                    (b > 0.0).then(|| r.worker_ns_per_pkt / b)
                })
                .collect();
            let _ = writeln!(
                s,
                "| {share} | {load:.0} | {t} | {} | {} | {} |",
                mine.len(),
                fmt_spread(&ns, 0),
                fmt_spread(&ratios, 3)
            );
        }
    }
    s
}

/// Rows of `target` in `round` at `share`, in measurement order (= order of the multiples).
fn round_rows<'a>(rows: &'a [Row], target: &str, round: u32, share: f64) -> Vec<&'a Row> {
    rows.iter()
        .filter(|r| r.target == target && r.round == round && r.rt_share == share)
        .collect()
}

/// The load-multiple section: per target and multiple the medians and ranges over rounds, then
/// per target how RT p99 grows from the lowest to the highest multiple (within each round).
pub fn multiples_md(rows: &[Row], m: &[Mlffr], multiples: &[f64], share: f64) -> String {
    let mut s = String::new();
    let names = targets_in_order(rows.iter().map(|r| r.target.as_str()));
    if names.is_empty() || multiples.is_empty() {
        return s;
    }
    let _ = write!(
        s,
        "\n## Latency and loss at multiples of each target's MLFFR (RT share {share})\n\n\
         Median [min–max] over rounds; loss in %, latency in µs.\n\n\
         | target | × MLFFR | rounds | RT loss % | BE loss % | RT p50 | RT p99 | BE p50 | BE p99 |\n|---|---|---|---|---|---|---|---|---|\n"
    );
    let rounds_of = |t: &str| -> Vec<u32> {
        let mut r: Vec<u32> = m
            .iter()
            .filter(|x| x.target == t)
            .map(|x| x.round)
            .collect();
        r.dedup();
        r
    };
    for t in &names {
        for (i, mult) in multiples.iter().enumerate() {
            let at: Vec<&Row> = rounds_of(t)
                .into_iter()
                .filter_map(|rd| round_rows(rows, t, rd, share).get(i).copied())
                .collect();
            if at.is_empty() {
                continue;
            }
            let col = |f: &dyn Fn(&Row) -> f64| at.iter().map(|r| f(r)).collect::<Vec<f64>>();
            let _ = writeln!(
                s,
                "| {t} | {mult} | {} | {} | {} | {} | {} | {} | {} |",
                at.len(),
                fmt_spread(&col(&|r| r.loss_rt * 100.0), 2),
                fmt_spread(&col(&|r| r.loss_be * 100.0), 2),
                fmt_spread(&col(&|r| r.rt_p50_us), 0),
                fmt_spread(&col(&|r| r.rt_p99_us), 0),
                fmt_spread(&col(&|r| r.be_p50_us), 0),
                fmt_spread(&col(&|r| r.be_p99_us), 0),
            );
        }
    }
    if multiples.len() < 2 {
        return s;
    }
    let (lo, hi) = (multiples[0], multiples[multiples.len() - 1]);
    let _ = write!(
        s,
        "\n### Growth from {lo}× to {hi}× MLFFR\n\n\
         RT p99 at {hi}× divided by RT p99 at {lo}×, within each round: median [min–max].\n\n\
         | target | rounds | RT p99 growth | RT p50 growth | RT loss at {hi}× (worst round) |\n|---|---|---|---|---|\n"
    );
    for t in &names {
        let mut g99 = Vec::new();
        let mut g50 = Vec::new();
        let mut worst_loss: f64 = 0.0;
        for rd in rounds_of(t) {
            let rr = round_rows(rows, t, rd, share);
            let (Some(a), Some(b)) = (rr.first(), rr.get(multiples.len() - 1)) else {
                continue;
            };
            if a.rt_p99_us > 0.0 && b.rt_p99_us > 0.0 {
                g99.push(b.rt_p99_us / a.rt_p99_us);
            }
            if a.rt_p50_us > 0.0 && b.rt_p50_us > 0.0 {
                g50.push(b.rt_p50_us / a.rt_p50_us);
            }
            worst_loss = worst_loss.max(b.loss_rt);
        }
        if g99.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "| {t} | {} | {}× | {}× | {:.3} % |",
            g99.len(),
            fmt_spread(&g99, 2),
            fmt_spread(&g50, 2),
            worst_loss * 100.0
        );
    }
    s
}

/// Growth against a separately measured light reference point (`--reference-load`): RT p99 at
/// the highest multiple divided by RT p99 at the reference, within each round.
pub fn reference_md(
    rows: &[Row],
    refs: &[Row],
    m: &[Mlffr],
    multiples: &[f64],
    share: f64,
    load: f64,
    backend: &str,
) -> String {
    let mut s = String::new();
    let Some(&hi) = multiples.last() else {
        return s;
    };
    let names = targets_in_order(refs.iter().map(|r| r.target.as_str()));
    let _ = write!(
        s,
        "\n### Growth against a light reference: {load:.0} pps from the `{backend}` generator\n\n\
         The same targets measured once per round at a fixed light load with another generator \
         (`xsk`: packet-by-packet arrivals, no bursts), then RT p99 at {hi}× MLFFR divided by RT \
         p99 at that reference, within each round: median [min–max].\n\n\
         | target | rounds | reference RT p50 µs | reference RT p99 µs | reference loss % | RT p99 growth to {hi}× |\n|---|---|---|---|---|---|\n"
    );
    for t in &names {
        let mut g = Vec::new();
        let (mut p50, mut p99, mut loss) = (Vec::new(), Vec::new(), Vec::new());
        for r in refs.iter().filter(|r| r.target == *t) {
            p50.push(r.rt_p50_us);
            p99.push(r.rt_p99_us);
            loss.push(
                (r.loss_rt * r.sent_rt as f64 + r.loss_be * r.sent_be as f64)
                    / (r.sent_rt + r.sent_be).max(1) as f64
                    * 100.0,
            );
            let top = round_rows(rows, t, r.round, share)
                .get(multiples.len() - 1)
                .copied();
            if let Some(top) = top.filter(|x| x.rt_p99_us > 0.0 && r.rt_p99_us > 0.0) {
                if m.iter().any(|x| x.target == *t && x.round == r.round) {
                    g.push(top.rt_p99_us / r.rt_p99_us);
                }
            }
        }
        let _ = writeln!(
            s,
            "| {t} | {} | {} | {} | {} | {}× |",
            p99.len(),
            fmt_spread(&p50, 1),
            fmt_spread(&p99, 0),
            fmt_spread(&loss, 3),
            fmt_spread(&g, 2)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(target: &str, round: u32, p99: f64, loss_rt: f64) -> Row {
        Row {
            round,
            target: target.into(),
            rt_share: 0.3,
            rt_p99_us: p99,
            rt_p50_us: p99 / 2.0,
            loss_rt,
            ..Default::default()
        }
    }

    fn ml(target: &str, round: u32, pps: f64) -> Mlffr {
        Mlffr {
            target: target.into(),
            round,
            pps,
            gen_limited: false,
        }
    }

    #[test]
    fn cpu_price_pairs_rounds_against_the_base() {
        let at = |target: &str, round: u32, ns: f64| Row {
            target: target.into(),
            round,
            rt_share: 0.3,
            offered_pps: 100_000.0,
            worker_ns_per_pkt: ns,
            ..Row::default()
        };
        // Round 2 is twice as slow for both: the ratio holds, the medians move.
        let rows = [
            at("llrouter:sq", 1, 500.0),
            at("llrouter:ll-wfq", 1, 525.0),
            at("llrouter:sq", 2, 1000.0),
            at("llrouter:ll-wfq", 2, 1050.0),
        ];
        let md = cpu_price_md(&rows, "llrouter:sq");
        assert!(
            md.contains("| 0.3 | 100000 | llrouter:ll-wfq | 2 | 788 [525–1050] | 1.050 |"),
            "{md}"
        );
        assert!(
            md.contains("| llrouter:sq | 2 | 750 [500–1000] | 1.000 |"),
            "{md}"
        );
        let none = [Row {
            worker_ns_per_pkt: f64::NAN,
            ..at("kernel", 1, 0.0)
        }];
        assert_eq!(cpu_price_md(&none, "llrouter:sq"), "");
    }

    #[test]
    fn spread_is_median_and_range() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(spread(&[4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(spread(&[f64::NAN]), None);
        assert_eq!(fmt_spread(&[1.0, 3.0, 2.0], 1), "2.0 [1.0–3.0]");
    }

    #[test]
    fn ratios_pair_rounds_not_medians() {
        // Round 1 is a slow machine for both targets; the within-round ratio stays 0.5, while
        // a ratio of medians would say 0.5 only by accident.
        let m = [
            ml("llrouter:sq", 1, 100.0),
            ml("llrouter:ll-wfq", 1, 50.0),
            ml("llrouter:sq", 2, 400.0),
            ml("llrouter:ll-wfq", 2, 200.0),
        ];
        assert_eq!(
            same_round_ratios(&m, "llrouter:ll-wfq", "llrouter:sq"),
            vec![0.5, 0.5]
        );
        let md = mlffr_md(&m, 0.005);
        assert!(
            md.contains("| llrouter:ll-wfq | 2 | 125 [50–200] | 0.500 | 0 of 2 |"),
            "{md}"
        );
        // With another first target, a second ratio column relates every target to sq.
        let mut m2 = vec![ml("kernel", 1, 200.0), ml("kernel", 2, 200.0)];
        m2.extend(m);
        let md = mlffr_md(&m2, 0.005);
        assert!(
            md.contains(
                "| llrouter:ll-wfq | 2 | 125 [50–200] | 0.625 [0.250–1.000] | 0.500 | 0 of 2 |"
            ),
            "{md}"
        );
    }

    #[test]
    fn growth_is_top_over_lowest_multiple_per_round() {
        let m = [ml("sq", 1, 1.0), ml("sq", 2, 1.0)];
        let rows = [
            row("sq", 1, 50.0, 0.0),
            row("sq", 1, 80.0, 0.0),
            row("sq", 1, 1000.0, 0.05),
            row("sq", 2, 100.0, 0.0),
            row("sq", 2, 90.0, 0.0),
            row("sq", 2, 1200.0, 0.02),
        ];
        let md = multiples_md(&rows, &m, &[0.5, 0.9, 1.5], 0.3);
        // 1000/50 = 20, 1200/100 = 12: median 16.
        assert!(
            md.contains("| sq | 2 | 16.00 [12.00–20.00]× | 16.00 [12.00–20.00]× | 5.000 % |"),
            "{md}"
        );
        assert!(md.contains("| sq | 1.5 | 2 | 3.50 [2.00–5.00] |"), "{md}");
        // Against references of 10 and 40 µs p99: 1000/10 = 100, 1200/40 = 30.
        let refs = [row("sq", 1, 10.0, 0.0), row("sq", 2, 40.0, 0.0)];
        let md = reference_md(&rows, &refs, &m, &[0.5, 0.9, 1.5], 0.3, 200000.0, "xsk");
        assert!(
            md.contains(
                "| sq | 2 | 12.5 [5.0–20.0] | 25 [10–40] | 0.000 | 65.00 [30.00–100.00]× |"
            ),
            "{md}"
        );
    }
}
