//! Listings and lookups as `ctl show` prints them: rows written as the router streams them
//! (text, or one JSON document with an item per line), the line after a listing, a summary,
//! and a lookup in `ip route get`'s words.

use std::io::{self, Write};

use serde_json::Value;

use super::{table, NeighbourView, RouteView};
use crate::query::{Family, ListingEnd, RouteLookupView, RouteSummaryView};

/// Writes a streamed listing to `out` as its items arrive: text rows under `head` (columns as
/// wide as the widest cell so far), or with `json` one document `{"KEY":[…],"listed",…}` with
/// an item per line.
pub struct ListingWriter<'a, W: Write> {
    out: W,
    key: &'a str,
    json: bool,
    head: &'a [&'a str],
    widths: Vec<usize>,
    first: bool,
}

impl<'a, W: Write> ListingWriter<'a, W> {
    pub fn new(out: W, key: &'a str, json: bool, head: &'a [&'a str]) -> Self {
        ListingWriter {
            out,
            key,
            json,
            head,
            widths: head.iter().map(|h| h.chars().count()).collect(),
            first: true,
        }
    }

    /// Writes one batch of items; `row` gives a text row of one item read as `T`.
    pub fn items<T: serde::de::DeserializeOwned>(
        &mut self,
        items: Vec<Value>,
        row: &impl Fn(&T) -> Vec<String>,
    ) -> io::Result<()> {
        if self.json {
            for it in items {
                let sep = if self.first {
                    format!("{{\"{}\":[\n", self.key)
                } else {
                    ",\n".into()
                };
                self.first = false;
                write!(self.out, "{sep}{}", serde_json::to_string(&it)?)?;
            }
            return Ok(());
        }
        let rows: Vec<Vec<String>> = (items.into_iter())
            .map(|it| T::deserialize(it).map(|t| row(&t)))
            .collect::<Result<_, _>>()
            .map_err(|e| io::Error::other(format!("a listing item: {e}")))?;
        for r in &rows {
            for (w, c) in self.widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        if self.first {
            self.first = false;
            let h: Vec<String> = self.head.iter().map(|s| s.to_string()).collect();
            writeln!(self.out, "{}", line(&self.widths, &h))?;
        }
        for r in &rows {
            writeln!(self.out, "{}", line(&self.widths, r))?;
        }
        Ok(())
    }

    /// Ends the listing (the JSON document's close; text needs none) and flushes.
    pub fn finish(mut self, end: &ListingEnd) -> io::Result<()> {
        if self.json {
            let head = if self.first {
                format!("{{\"{}\":[", self.key)
            } else {
                "\n".into()
            };
            writeln!(
                self.out,
                "{head}],\"listed\":{},\"matched\":{},\"total\":{}}}",
                end.listed, end.matched, end.total
            )?;
        }
        self.out.flush()
    }
}

/// A neighbour as a row of `show neighbours`.
pub fn neighbour_row(n: &NeighbourView) -> Vec<String> {
    vec![n.ip.clone(), n.mac.clone(), n.dev.clone()]
}

/// One row of a streamed listing: cells padded to `widths`.
fn line(widths: &[usize], cells: &[String]) -> String {
    let mut s = String::new();
    for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            s.push_str("  ");
        }
        s.push_str(c);
        s.push_str(&" ".repeat(w.saturating_sub(c.chars().count())));
    }
    s.trim_end().to_string()
}

/// A route as a row of `show fib`.
pub fn route_row(r: &RouteView) -> Vec<String> {
    vec![
        r.prefix.clone(),
        r.via.clone().unwrap_or_else(|| "connected".into()),
        r.dev.clone(),
    ]
}

/// The line after a listing: how much of what was kept it showed.
pub fn listing_tail(end: &ListingEnd, what: &str) -> String {
    if end.listed < end.matched {
        format!(
            "({} of {} {what} shown; --all lists every one)",
            end.listed, end.matched
        )
    } else if end.matched < end.total {
        format!("({} of {} {what} match)", end.matched, end.total)
    } else {
        format!("({} {what})", end.total)
    }
}

/// `show fib summary`.
pub fn summary_text(s: &RouteSummaryView) -> String {
    let mut out = format!("{} routes, {} next hops\n\n", s.total, s.next_hops);
    let rows: Vec<Vec<String>> = (s.by_length.iter())
        .map(|l| {
            let fam = if l.family == Family::Ipv4 {
                "ipv4"
            } else {
                "ipv6"
            };
            vec![fam.into(), format!("/{}", l.length), l.routes.to_string()]
        })
        .collect();
    out.push_str(&table(&["FAMILY", "LENGTH", "ROUTES"], &rows));
    let rows: Vec<Vec<String>> = (s.by_next_hop.iter())
        .map(|n| {
            let via = n.via.clone().unwrap_or_else(|| "connected".into());
            vec![via, n.dev.clone(), n.routes.to_string()]
        })
        .collect();
    out.push('\n');
    out.push_str(&table(&["NEXT HOP", "INTERFACE", "ROUTES"], &rows));
    if s.next_hops > s.by_next_hop.len() {
        out.push_str(&format!(
            "({} of {} next hops shown)\n",
            s.by_next_hop.len(),
            s.next_hops
        ));
    }
    out
}

/// `show fib ADDRESS`, in `ip route get`'s words.
pub fn lookup_text(r: &RouteLookupView) -> String {
    let mut out = format!("{} ", r.dst);
    match &r.route {
        Some(rt) => {
            out.push_str(&format!("via route {}", rt.prefix));
            if let Some(g) = &rt.via {
                out.push_str(&format!(" via {g}"));
            }
            out.push_str(&format!(" dev {}", rt.dev));
        }
        None => out.push_str("no route"),
    }
    out.push('\n');
    if let Some(nh) = &r.next_hop {
        let mac = r.neighbour.as_deref().unwrap_or("not resolved");
        out.push_str(&format!("    next hop {nh} lladdr {mac}"));
        if let Some(m) = r.mtu {
            out.push_str(&format!(" mtu {m}"));
        }
        out.push('\n');
    }
    if !r.multipath.is_empty() {
        out.push_str(&format!(
            "    multipath, this flow's path of {}: {}\n",
            r.multipath.len(),
            r.multipath.join(", ")
        ));
    }
    if let Some(rule) = &r.rule {
        out.push_str(&format!("    rule {rule}"));
        if let Some(t) = r.table {
            out.push_str(&format!(", table {t}"));
        }
        out.push('\n');
    }
    out.push_str(&format!("    iif {} class {}\n", r.iif, r.class));
    out.push_str(&format!("    {}\n", r.verdict));
    out
}

/// `show fib rules` as text: each family's rules, then the tables besides main.
pub fn routing_rules_text(v: &crate::query::RoutingRulesView) -> String {
    let mut out = String::new();
    for (fam, rules, plain) in [
        ("IPv4", &v.ipv4, v.ipv4_main_only),
        ("IPv6", &v.ipv6, v.ipv6_main_only),
    ] {
        let note = if plain {
            " (route by table main alone)"
        } else {
            ""
        };
        out.push_str(&format!("{fam} rules{note}:\n"));
        for r in rules {
            out.push_str(&format!("  {r}\n"));
        }
    }
    if v.tables.is_empty() {
        out.push_str("no tables besides main\n");
    } else {
        out.push_str("tables besides main:\n");
        for t in &v.tables {
            out.push_str(&format!("  table {}: {} routes\n", t.table, t.routes));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{Family, RouteLookupView, RouteSummaryView};

    #[test]
    fn routing_rules_text_lists_each_family_then_the_tables() {
        let v = crate::query::RoutingRulesView {
            ipv4: vec![
                "0: from all lookup local".into(),
                "100: from all to 10.0.0.0/8 lookup 100".into(),
            ],
            ipv6: vec!["0: from all lookup local".into()],
            ipv4_main_only: false,
            ipv6_main_only: true,
            tables: vec![crate::query::TableSizeView {
                table: 100,
                routes: 3,
            }],
        };
        assert_eq!(
            super::routing_rules_text(&v),
            "IPv4 rules:\n  0: from all lookup local\n  100: from all to 10.0.0.0/8 lookup 100\n\
             IPv6 rules (route by table main alone):\n  0: from all lookup local\n\
             tables besides main:\n  table 100: 3 routes\n"
        );
    }

    #[test]
    fn summary_and_lookup_text() {
        let s = RouteSummaryView {
            total: 3,
            by_length: vec![
                crate::query::LengthCount {
                    family: Family::Ipv4,
                    length: 24,
                    routes: 2,
                },
                crate::query::LengthCount {
                    family: Family::Ipv6,
                    length: 48,
                    routes: 1,
                },
            ],
            by_next_hop: vec![crate::query::NextHopCount {
                via: None,
                dev: "eth1".into(),
                routes: 3,
            }],
            next_hops: 2,
        };
        let t = summary_text(&s);
        assert!(t.starts_with("3 routes, 2 next hops\n"), "{t}");
        assert!(t.contains("ipv6    /48          1"), "{t}");
        assert!(t.contains("connected  eth1            3"), "{t}");
        assert!(t.contains("(1 of 2 next hops shown)"), "{t}");
        let r = RouteLookupView {
            dst: "10.71.2.1".into(),
            route: Some(RouteView {
                prefix: "10.71.2.0/24".into(),
                via: None,
                dev: "out0".into(),
                ifindex: 4,
            }),
            next_hop: Some("10.71.2.1".into()),
            neighbour: None,
            mtu: Some(1500),
            verdict: "no neighbour: to the kernel, which resolves it".into(),
            class: "be".into(),
            iif: "in0".into(),
            rule: None,
            table: None,
            multipath: vec![],
        };
        assert_eq!(
            lookup_text(&r),
            "10.71.2.1 via route 10.71.2.0/24 dev out0\n    next hop 10.71.2.1 lladdr not resolved mtu 1500\n    iif in0 class be\n    no neighbour: to the kernel, which resolves it\n"
        );
        let r = RouteLookupView {
            rule: Some("100: from all to 10.71.0.0/16 lookup 100".into()),
            table: Some(100),
            ..r
        };
        assert!(
            lookup_text(&r)
                .contains("    rule 100: from all to 10.71.0.0/16 lookup 100, table 100\n"),
            "{}",
            lookup_text(&r)
        );
    }
}
