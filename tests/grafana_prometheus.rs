//! The Grafana dashboard against a real Prometheus (root: namespaces, veth, XDP; the
//! `prometheus` Debian package, which scripts/install-deps.sh installs).
//!
//! `dashboard_queries_answer_from_a_live_router`: a router with two classes and two flows
//! forwards UDP while Prometheus, started from the shipped scrape example
//! (grafana/prometheus.yml, its interval shortened to 1 s and its target moved to the test's
//! port), scrapes it. Then every query of grafana/llrouter.json, with `$instance` filled in as
//! Grafana fills it from the dashboard's own template query, goes to Prometheus' query API:
//! each must parse and return series. Prometheus evaluates them with its own PromQL engine, so a
//! vector match that never matches or a wrong label shows here as an empty panel would.
//! Beyond "not empty": the RT class's packet rate is positive, the flows' CPU shares add up to 1,
//! and the RT ring's sojourn p99 is a finite number.
//!
//! Grafana itself is not run: it is not packaged for Debian and this machine reaches no other
//! source for it. The dashboard's JSON model is what Grafana imports; the queries are what it
//! sends to the data source.

mod common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{topology, udp_in, RouterThread, TempDir};
use llr_traffic::netns::{addr, Netns};
use serde_json::Value;

const METRICS: &str = "127.0.0.1:9877";
const PROMETHEUS: &str = "127.0.0.1:9090";

const CONFIG: &str = r#"
interfaces = ["veth-rin", "veth-rout"]
strategy = "ll-wfq"
wake = "busy"
cores = [1]
[[classes]]
name = "rt"
[[classes]]
name = "be"
[[rules]]
class = "rt"
dscp = 46
[control]
socket = "CTL"
[metrics]
listen = "127.0.0.1:9877"
[[flows]]
name = "voice"
match = { proto = "udp", dst_port = 9201 }
weight = 3
pipeline = ["work(us=1)"]
[[flows]]
name = "bulk"
match = { proto = "udp", dst_port = 9202 }
weight = 1
pipeline = ["work(us=1)"]
"#;

/// Prometheus in the router's namespace, killed and reaped on drop (also when the test fails).
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Percent-encodes a query parameter (RFC 3986 unreserved bytes pass).
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GET `path` from Prometheus in `ns`: the JSON body, or why not.
fn get(ns: &Netns, path: &str) -> Result<Value, String> {
    let path = path.to_string();
    ns.run(move || -> Result<Value, String> {
        let mut s = TcpStream::connect(PROMETHEUS).map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: prometheus\r\n\r\n").map_err(|e| e.to_string())?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).map_err(|e| e.to_string())?;
        let (head, body) = buf.split_once("\r\n\r\n").ok_or("no HTTP body")?;
        let v: Value =
            serde_json::from_str(body).map_err(|e| format!("{head}: {e}: {body:.200}"))?;
        Ok(v)
    })
    .map_err(|e| format!("enter the namespace: {e}"))?
}

/// An instant query: the result vector, or Prometheus' error.
fn query(ns: &Netns, expr: &str) -> Result<Vec<Value>, String> {
    let v = get(ns, &format!("/api/v1/query?query={}", enc(expr)))?;
    if v["status"] != "success" {
        return Err(format!("{}: {}", v["errorType"], v["error"]));
    }
    assert_eq!(v["data"]["resultType"], "vector", "{expr}: {v}");
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

fn value(series: &Value) -> f64 {
    series["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The shipped scrape example with the test's interval and target: the shipped file must hold
/// both settings, so an edit that moves them fails here rather than testing something else.
fn scrape_config(dir: &TempDir) -> std::path::PathBuf {
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/grafana/prometheus.yml");
    let text = std::fs::read_to_string(shipped).expect("grafana/prometheus.yml");
    assert!(text.contains("scrape_interval: 5s"), "{text}");
    assert!(text.contains("\"127.0.0.1:9877\""), "{text}");
    let path = dir.join("prometheus.yml");
    std::fs::write(
        &path,
        text.replace("scrape_interval: 5s", "scrape_interval: 1s"),
    )
    .expect("write");
    path
}

fn promtool_check(path: &Path) {
    let out = std::process::Command::new("promtool")
        .args(["check", "config"])
        .arg(path)
        .output()
        .expect("promtool (Debian package prometheus; run scripts/install-deps.sh)");
    assert!(
        out.status.success(),
        "promtool check config {}: {}{}",
        path.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "needs root: network namespaces, veth, XDP (scripts/test.sh runs it as root)"]
fn dashboard_queries_answer_from_a_live_router() {
    llr_io::sys::require_root();
    promtool_check(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/grafana/prometheus.yml"
    )));
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/grafana/llrouter.json"
        ))
        .expect("dashboard"),
    )
    .expect("dashboard JSON");

    let topo = topology("llrgraf");
    let dir = TempDir::new("grafana-prometheus");
    let router = RouterThread::start(&topo, dir.router_config(CONFIG));
    let conf = scrape_config(&dir);
    let data = dir.join("tsdb");
    let mut cmd = topo.router.command("prometheus");
    cmd.arg(format!("--config.file={}", conf.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address={PROMETHEUS}"))
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("prometheus.log")).expect("log"),
        ));
    let prom = Prometheus(
        cmd.spawn()
            .expect("start prometheus (Debian package prometheus; run scripts/install-deps.sh)"),
    );
    let log = || std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();

    // Traffic for the classes and both flows: the sink's sockets take it in.
    let sinks: Vec<UdpSocket> = [9200u16, 9201, 9202]
        .iter()
        .map(|p| udp_in(&topo.sink, &format!("0.0.0.0:{p}"), 50))
        .collect();
    let gen = topo.gen.spawn(|| -> std::io::Result<u64> {
        let rt = UdpSocket::bind("0.0.0.0:0")?;
        rt.connect((addr::SINK_V4, 9200))?;
        // DSCP 46 (EF) in the TOS byte
        let tos: libc::c_int = 46 << 2;
        // SAFETY: `rt` is an open socket for the whole call; the option value is a c_int
        // that lives on this stack frame and its size is passed with it.
        let rc = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&rt),
                libc::IPPROTO_IP,
                libc::IP_TOS,
                &tos as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let flows: Vec<UdpSocket> = [9201u16, 9202]
            .iter()
            .map(|p| {
                let s = UdpSocket::bind("0.0.0.0:0")?;
                s.connect((addr::SINK_V4, *p))?;
                Ok(s)
            })
            .collect::<std::io::Result<_>>()?;
        let t0 = Instant::now();
        let mut sent = 0;
        // 12 s at about 3 kpps: every scrape from the first to the queries sees traffic
        while t0.elapsed() < Duration::from_secs(12) {
            for s in std::iter::once(&rt).chain(&flows) {
                if s.send(&[0u8; 100]).is_ok() {
                    sent += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(sent)
    });

    // Prometheus up and scraping the router (bounded: 20 s).
    let t0 = Instant::now();
    loop {
        match query(&topo.router, "up{job=\"llrouter\"} == 1") {
            Ok(r) if !r.is_empty() => break,
            _ if t0.elapsed() > Duration::from_secs(20) => {
                panic!(
                    "Prometheus did not scrape the router within 20 s:\n{}",
                    log()
                )
            }
            _ => std::thread::sleep(Duration::from_millis(250)),
        }
    }
    // rate() over [1m] needs two samples of each series; give it several.
    std::thread::sleep(Duration::from_secs(6));

    // The template variable, as Grafana fills it: label_values(llrouter_build_info, instance).
    let tmpl = dash["templating"]["list"][1]["query"]
        .as_str()
        .expect("query");
    assert_eq!(tmpl, "label_values(llrouter_build_info, instance)");
    let inst = get(
        &topo.router,
        &format!(
            "/api/v1/label/instance/values?match[]={}",
            enc("llrouter_build_info")
        ),
    )
    .expect("label values");
    assert_eq!(inst["data"], serde_json::json!([METRICS]), "{inst}");
    // Grafana's Prometheus data source formats a variable inside =~ as a regex, escaped once
    // for the regex and once for PromQL's string: 127\\.0\\.0\\.1:9877.
    let instance = METRICS.replace('.', "\\\\.");

    let mut failures = Vec::new();
    let mut results = std::collections::BTreeMap::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"]
                .as_str()
                .expect("expr")
                .replace("$instance", &instance);
            match query(&topo.router, &expr) {
                Ok(r) if r.is_empty() => failures.push(format!(
                    "panel {:?}: no series for `{expr}`",
                    p["title"].as_str().unwrap_or("")
                )),
                Ok(r) => {
                    results.insert(expr, r);
                }
                Err(e) => failures.push(format!("panel {:?}: `{expr}`: {e}", p["title"])),
            }
        }
    }
    let sent = gen
        .join()
        .expect("gen thread")
        .expect("enter")
        .expect("send");
    drop(sinks);
    drop(prom);
    let rep = router.finish();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(sent > 10_000, "the generator sent {sent}");
    rep.expect("router run").expect("router report");

    let find = |needle: &str| -> &Vec<Value> {
        (results.iter())
            .find(|(e, _)| e.contains(needle))
            .map(|(_, r)| r)
            .unwrap_or_else(|| panic!("no query with {needle}"))
    };
    let by_class = find("sum by (class) (rate(llrouter_class_packets_total");
    let rt = (by_class.iter())
        .find(|s| s["metric"]["class"] == "rt")
        .unwrap_or_else(|| panic!("no rt series: {by_class:?}"));
    // Positive, not a rate: Prometheus divides the increase it extrapolates by the whole
    // [1m] window, of which only the few seconds since its first scrape hold samples (~1/8 of
    // the ~1 kpps sent here).
    assert!(value(rt) > 0.0, "RT packets per second: {rt}");
    let shares = find("llrouter_flow_cpu_seconds_total");
    let total: f64 = shares.iter().map(value).sum();
    // one series per flow the scheduler runs: the two configured, and its own (input, the
    // classes' default flows)
    let named = |n: &str| shares.iter().any(|s| s["metric"]["flow"] == n);
    assert!(
        named("voice") && named("bulk") && (total - 1.0).abs() < 0.01,
        "flow CPU shares must name each flow and add up to 1: {shares:?}"
    );
    let p99 = find("histogram_quantile(0.99");
    let rt99 = (p99.iter())
        .find(|s| s["metric"]["class"] == "rt")
        .map(value)
        .unwrap_or(f64::NAN);
    assert!(
        rt99.is_finite() && rt99 > 0.0,
        "RT ring sojourn p99: {p99:?}"
    );
}
