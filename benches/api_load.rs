//! Durable creates/s and gets/s through the HTTP API of a real `kplane server` (RocksDB, WAL
//! synced on every commit) at 1, 16 and 64 concurrent clients, with the CPU per create of the
//! server and of the load generator, and how many creates shared a WAL sync (group commit, from
//! the server's `/metrics`). The client counts are measured in turns, three rounds, and the
//! medians reported. Writes target/bench-results/api_load.json.

mod common;

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::json;

const PHASE: Duration = Duration::from_secs(4);
/// A full run measures every client count this many times, in turns, and reports medians:
/// the machine's speed drifts, and a ratio of phases run side by side drifts less.
const ROUNDS: usize = 3;
/// The gets phase reads this many pods, round robin.
const GET_TARGETS: usize = 50;
/// The list phase lists a namespace of this many pods.
const LIST_PODS: usize = 10_000;
/// How many times each list is timed (the median is reported).
const LIST_RUNS: usize = 5;
/// The watch phase: this many watchers of one namespace...
const WATCHERS: usize = 1_000;
/// ...see this many pods created there, at this rate.
const WATCHED_PODS: usize = 300;
const WATCHED_PER_SEC: u64 = 100;

fn pod(name: &str) -> String {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"labels":{"app":"bench","tier":"load"}},
        "spec":{"containers":[{"name":"app","image":"kplane/agnhost","args":["serve-hostname"],
            "ports":[{"containerPort":9376}],"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}})
    .to_string()
}

/// `pod`'s JSON split around the name, so that a client writes a body by joining three
/// strings rather than building and serializing a JSON value for each request.
struct PodTemplate {
    head: String,
    tail: String,
}

impl PodTemplate {
    fn new() -> Self {
        const NAME: &str = "NAME-PLACEHOLDER";
        let json = pod(NAME);
        let (head, tail) = json.split_once(NAME).expect("the name is in the body");
        PodTemplate { head: head.to_string(), tail: tail.to_string() }
    }

    /// Appends the body of the pod `name` to `buffer`.
    fn write(&self, buffer: &mut Vec<u8>, name: &str) {
        buffer.extend_from_slice(self.head.as_bytes());
        buffer.extend_from_slice(name.as_bytes());
        buffer.extend_from_slice(self.tail.as_bytes());
    }
}

/// One client of the create and get phases: a kept-alive HTTP/1.1 connection, written and read
/// by the client's own task. A request goes out in one write, head and body; its response is
/// read up to its `Content-Length`. hyper's client runs each connection as a second task that
/// a request reaches through a channel: on these two cores, which the load generator shares
/// with the server, a create cost it 8-10 µs of CPU at 64 clients (18-22 µs at one), against
/// 6-7 µs (11-15 µs) here.
struct Connection {
    stream: tokio::net::TcpStream,
    /// The request being sent, and its body: built in place, kept from one to the next.
    request: Vec<u8>,
    body: Vec<u8>,
    /// What has been read and not yet taken as a response.
    received: Vec<u8>,
}

impl Connection {
    async fn open(addr: &str) -> Self {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        let (request, body, received) = (Vec::new(), Vec::new(), Vec::with_capacity(8192));
        Connection { stream, request, body, received }
    }

    /// POSTs the JSON that `write_body` writes to `path`; returns the response's status.
    async fn post(&mut self, path: &str, write_body: impl FnOnce(&mut Vec<u8>)) -> u16 {
        self.body.clear();
        write_body(&mut self.body);
        self.request.clear();
        write!(
            self.request,
            "POST {path} HTTP/1.1\r\nhost: kplane\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n",
            self.body.len()
        )
        .unwrap();
        self.request.extend_from_slice(&self.body);
        self.round_trip().await
    }

    /// GETs `path`; returns the response's status.
    async fn get(&mut self, path: &str) -> u16 {
        self.request.clear();
        write!(self.request, "GET {path} HTTP/1.1\r\nhost: kplane\r\n\r\n").unwrap();
        self.round_trip().await
    }

    /// Sends `self.request` and reads its whole response.
    async fn round_trip(&mut self) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.stream.write_all(&self.request).await.expect("send a request");
        loop {
            if let Some((status, end)) = self.response_received() {
                self.received.drain(..end);
                return status;
            }
            let read = self.stream.read_buf(&mut self.received).await.expect("read");
            assert!(read > 0, "the server closed the connection");
        }
    }

    /// The status of the response at the front of `self.received` and where it ends, once it
    /// has been read whole.
    fn response_received(&mut self) -> Option<(u16, usize)> {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(head) =
            response.parse(&self.received).expect("an HTTP response")
        else {
            return None;
        };
        let length = response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
            .expect("a response with a Content-Length");
        let (status, end) = (response.code.expect("a status code"), head + length);
        // The rest of the body comes in one read where it can.
        self.received.reserve(end.saturating_sub(self.received.len()));
        (self.received.len() >= end).then_some((status, end))
    }
}

/// A watch's connection: hyper's client, which reads the chunked stream.
async fn watch_connection(addr: &str) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).unwrap();
    let (sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(connection);
    sender
}

/// Requests per second over one phase, and how many requests it made.
async fn run_phase(addr: &str, clients: usize, op: &str, tag: &str) -> (f64, usize) {
    let done = Arc::new(AtomicUsize::new(0));
    let template = Arc::new(PodTemplate::new());
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let done = done.clone();
            let template = template.clone();
            let addr = addr.to_string();
            let op = op.to_string();
            let tag = tag.to_string();
            tokio::spawn(async move {
                let mut connection = Connection::open(&addr).await;
                let mut i = 0usize;
                let mut name = String::new();
                let mut path = String::new();
                while started.elapsed() < PHASE {
                    let status = if op == "create" {
                        name.clear();
                        write!(name, "{tag}-{c}-{i}").unwrap();
                        connection
                            .post("/api/v1/namespaces/default/pods", |body| {
                                template.write(body, &name)
                            })
                            .await
                    } else {
                        path.clear();
                        write!(path, "/api/v1/namespaces/default/pods/target-{}", i % GET_TARGETS)
                            .unwrap();
                        connection.get(&path).await
                    };
                    assert!(status == 201 || status == 200, "status {status}");
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let done = done.load(Ordering::Relaxed);
    (done as f64 / started.elapsed().as_secs_f64(), done)
}

/// One phase of creates: its rate, the CPU per create of the server and of this load
/// generator, and how many creates shared each WAL sync.
struct CreatePhase {
    rate: f64,
    /// Pods the phase created.
    created: usize,
    server_cpu_us: f64,
    own_cpu_us: f64,
    per_commit: f64,
    /// The share of the phase the shards' writers spent committing (write and WAL sync).
    writer_busy: f64,
}

async fn create_phase(
    server: u32,
    client: &reqwest::Client,
    base: &str,
    addr: &str,
    clients: usize,
    tag: &str,
) -> CreatePhase {
    let cpu_before = cpu_seconds(server);
    let own_cpu_before = cpu_seconds(std::process::id());
    let (writes_before, commits_before) = commit_totals(client, base).await;
    let (committing_before, _) = commit_seconds(client, base).await;
    let started = Instant::now();
    let (rate, done) = run_phase(addr, clients, "create", tag).await;
    let elapsed = started.elapsed().as_secs_f64();
    let server_cpu_us = (cpu_seconds(server) - cpu_before) / done as f64 * 1e6;
    let own_cpu_us = (cpu_seconds(std::process::id()) - own_cpu_before) / done as f64 * 1e6;
    let (writes, commits) = commit_totals(client, base).await;
    let per_commit = (writes - writes_before) / (commits - commits_before);
    let writer_busy = (commit_seconds(client, base).await.0 - committing_before) / elapsed;
    CreatePhase { rate, created: done, server_cpu_us, own_cpu_us, per_commit, writer_busy }
}

fn print_phase(label: &str, clients: usize, p: &CreatePhase) {
    println!(
        "{label}durable creates/s with {clients:>2} clients: {:>9.0} (CPU per create: server \
         {:.0} µs, load generator {:.0} µs; creates per WAL sync: {:.1}; writer busy {:.0}%)",
        p.rate,
        p.server_cpu_us,
        p.own_cpu_us,
        p.per_commit,
        p.writer_busy * 100.0
    );
}

/// CPU time (user + system) a process has used so far, from `/proc` (Linux's clock ticks are
/// 1/100 s).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("a process's /proc");
    // The fields after the parenthesised command name: state is the 3rd, utime the 14th.
    let fields: Vec<&str> =
        stat.rsplit_once(')').expect("a stat line").1.split_whitespace().collect();
    let ticks = |i: usize| fields[i - 3].parse::<f64>().expect("a tick count");
    (ticks(14) + ticks(15)) / 100.0
}

/// Writes and commits so far, summed over the shards (the store's group-commit histogram in
/// `/metrics`).
async fn commit_totals(client: &reqwest::Client, base: &str) -> (f64, f64) {
    metrics_histogram(client, base, "kplane_store_commit_batch_size").await
}

/// Seconds the shards' writers have spent committing so far, and their commits.
async fn commit_seconds(client: &reqwest::Client, base: &str) -> (f64, f64) {
    metrics_histogram(client, base, "kplane_store_commit_duration_seconds").await
}

async fn metrics_histogram(client: &reqwest::Client, base: &str, name: &str) -> (f64, f64) {
    let text = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    common::metrics::histogram_totals(&text, name)
}

/// Creates namespace `name` and waits for its `default` service account, which a pod naming
/// none is admitted with (as in Kubernetes, a pod created before the service account
/// controller made it is refused, 403).
async fn create_namespace(client: &reqwest::Client, base: &str, name: &str) {
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let created = client.post(format!("{base}/api/v1/namespaces")).json(&namespace).send().await;
    assert!(created.expect("create a namespace").status().is_success());
    let account = format!("{base}/api/v1/namespaces/{name}/serviceaccounts/default");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = client.get(&account).send().await;
        if found.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        assert!(Instant::now() < deadline, "no default service account in {name}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates `LIST_PODS` pods in a namespace of their own, then times listing them: whole, and
/// page by page as kubectl does (`limit=500` and `continue`).
async fn list_phase(
    client: &reqwest::Client,
    base: &str,
) -> Vec<(&'static str, serde_json::Value)> {
    use futures::StreamExt;
    create_namespace(client, base, "listed").await;
    let pods = format!("{base}/api/v1/namespaces/listed/pods");
    futures::stream::iter(0..LIST_PODS)
        .map(|i| {
            let request = client
                .post(&pods)
                .header("content-type", "application/json")
                .body(pod(&format!("listed-{i}")));
            async move { request.send().await.expect("create a listed pod").status() }
        })
        .buffer_unordered(64)
        .for_each(|status| async move { assert!(status.is_success(), "status {status}") })
        .await;
    let mut whole = Vec::new();
    let mut paged = Vec::new();
    let mut bytes = 0;
    for _ in 0..LIST_RUNS {
        let started = Instant::now();
        let body = client.get(&pods).send().await.unwrap().bytes().await.unwrap();
        whole.push(started.elapsed().as_secs_f64() * 1e3);
        let list: serde_json::Value = serde_json::from_slice(&body).expect("a list");
        assert_eq!(list["items"].as_array().map(Vec::len), Some(LIST_PODS));
        bytes = body.len();
        // Timed: the requests and their bodies; not: this client's parsing of each page.
        let (mut token, mut items, mut elapsed) = (String::new(), 0, 0.0);
        loop {
            let started = Instant::now();
            let request = client.get(format!("{pods}?limit=500&continue={token}"));
            let body = request.send().await.unwrap().bytes().await.unwrap();
            elapsed += started.elapsed().as_secs_f64() * 1e3;
            let page: serde_json::Value = serde_json::from_slice(&body).expect("a page");
            items += page["items"].as_array().map_or(0, Vec::len);
            match page["metadata"]["continue"].as_str() {
                Some(next) if !next.is_empty() => token = next.to_string(),
                _ => break,
            }
        }
        paged.push(elapsed);
        assert_eq!(items, LIST_PODS);
    }
    let (whole, paged) = (common::median(whole), common::median(paged));
    println!(
        "list of {LIST_PODS} pods: {whole:.0} ms whole ({:.1} MB of JSON), {paged:.0} ms in pages of 500",
        bytes as f64 / 1e6
    );
    vec![
        ("list_10000_pods_ms", json!(whole.round())),
        ("list_10000_pods_paged_ms", json!(paged.round())),
        ("list_10000_pods_mb", json!((bytes as f64 / 1e5).round() / 10.0)),
    ]
}

/// `WATCHERS` watches of a namespace, each on its own connection, see `WATCHED_PODS` pods
/// created there at `WATCHED_PER_SEC`: how long each event took to reach each watcher, from the
/// moment its create was sent (so the durable commit is included), and the deliveries per second.
async fn watch_phase(
    client: &reqwest::Client,
    base: &str,
    addr: &str,
) -> Vec<(&'static str, serde_json::Value)> {
    create_namespace(client, base, "watched").await;
    let started = Instant::now();
    // When each pod's create was sent, as time since `started`, by the pod's number.
    let sent: Arc<Vec<std::sync::OnceLock<Duration>>> =
        Arc::new((0..WATCHED_PODS).map(|_| std::sync::OnceLock::new()).collect());
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(WATCHERS);
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|_| {
            let (addr, sent, ready) = (addr.to_string(), sent.clone(), ready_tx.clone());
            tokio::spawn(async move {
                let mut sender = watch_connection(&addr).await;
                let request = Request::get("/api/v1/namespaces/watched/pods?watch=true")
                    .header("host", &addr)
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                let mut body = sender.send_request(request).await.expect("a watch").into_body();
                ready.send(()).await.unwrap();
                drop(ready);
                let mut latencies = Vec::with_capacity(WATCHED_PODS);
                let mut pending = Vec::new();
                while latencies.len() < WATCHED_PODS {
                    let frame = body.frame().await.expect("the watch ended").expect("a chunk");
                    let Ok(data) = frame.into_data() else { continue };
                    pending.extend_from_slice(&data);
                    let arrived = started.elapsed();
                    while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=end).collect();
                        if let Some(i) = watched_number(&line) {
                            let sent = sent[i].get().copied().expect("sent before it was seen");
                            latencies.push(arrived.saturating_sub(sent).as_secs_f64() * 1e3);
                        }
                    }
                }
                (latencies, started.elapsed())
            })
        })
        .collect();
    drop(ready_tx);
    for _ in 0..WATCHERS {
        ready_rx.recv().await.expect("every watch started");
    }
    let template = PodTemplate::new();
    let mut creator = Connection::open(addr).await;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / WATCHED_PER_SEC));
    let first = started.elapsed();
    for (i, sent_at) in sent.iter().enumerate() {
        tick.tick().await;
        let name = format!("watched-{i}");
        sent_at.set(started.elapsed()).expect("sent once");
        let status = creator
            .post("/api/v1/namespaces/watched/pods", |body| template.write(body, &name))
            .await;
        assert_eq!(status, 201);
    }
    let mut latencies = Vec::with_capacity(WATCHERS * WATCHED_PODS);
    let mut last = Duration::ZERO;
    for watcher in watchers {
        let (seen, done) = watcher.await.expect("a watcher");
        latencies.extend(seen);
        last = last.max(done);
    }
    latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    let deliveries = latencies.len() as f64 / (last - first).as_secs_f64();
    println!(
        "watch: {WATCHERS} watchers, {WATCHED_PODS} pods at {WATCHED_PER_SEC}/s: event latency \
         p50 {:.1} ms, p99 {:.1} ms (from the create sent); {deliveries:.0} deliveries/s",
        at(0.5),
        at(0.99)
    );
    vec![
        ("watch_latency_p50_ms", json!((at(0.5) * 10.0).round() / 10.0)),
        ("watch_latency_p99_ms", json!((at(0.99) * 10.0).round() / 10.0)),
        ("watch_deliveries_per_sec", json!(deliveries.round())),
    ]
}

/// The number of a `watched-<n>` pod a watch event's line is about: the first `"name"` in an
/// event is the object's own (`metadata` comes before `spec`, and managedFields hold no such
/// key).
fn watched_number(line: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(line).ok()?;
    let at = text.find("\"name\":\"watched-")? + "\"name\":\"watched-".len();
    let digits = &text[at..];
    let end = digits.find('"')?;
    digits[..end].parse().ok()
}

/// A process's resident memory (`VmRSS`), in KB.
fn resident_kb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("a process's /proc");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    line.split_whitespace().nth(1).and_then(|kb| kb.parse().ok()).expect("a size in kB")
}

/// The server, ended when the bench ends, also by a panic.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let data = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // API_LOAD_SERVER names another build of the server, to compare two builds in turns.
    let binary =
        std::env::var_os("API_LOAD_SERVER").unwrap_or_else(|| env!("CARGO_BIN_EXE_kplane").into());
    let server = Command::new(binary)
        .args(["server", "--insecure-port", &port.to_string(), "--secure-port", "0", "--data-dir"])
        .arg(data.path())
        .env("RUST_LOG", "warn")
        // The API server and store alone: a scheduler and node agent would add their own writes
        // (bindings, status, events) for every created pod.
        .env("KPLANE_SCHEDULER__ENABLED", "false")
        .env("KPLANE_AGENT__ENABLED", "false")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let server = KillOnDrop(server);
    let base = format!("http://127.0.0.1:{port}");
    let addr = format!("127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = client.get(format!("{base}/api/v1/namespaces/default")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(Instant::now() < deadline, "server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // `cargo bench --bench api_load -- 64` (any client counts, and/or `gets`, `list`, `watch`) runs only those
    // phases, e.g. to profile one; a partial run prints its figures and writes no results.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |phase: &str| only.is_empty() || only.iter().any(|o| o == phase);
    let mut results = serde_json::Map::new();
    let counts: Vec<usize> = if only.is_empty() {
        vec![1, 16, 64]
    } else {
        only.iter().filter_map(|o| o.parse().ok()).collect()
    };
    let rounds = if only.is_empty() { ROUNDS } else { 1 };
    let mut measured: Vec<Vec<CreatePhase>> = counts.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (i, &clients) in counts.iter().enumerate() {
            // The phase's place in the round too: `-- 64 64` must not create the same names twice.
            let tag = format!("c{round}-{i}-{clients}");
            let phase = create_phase(server.0.id(), &client, &base, &addr, clients, &tag).await;
            let label = if rounds > 1 { format!("round {}: ", round + 1) } else { String::new() };
            print_phase(&label, clients, &phase);
            measured[i].push(phase);
        }
    }
    for (&clients, phases) in counts.iter().zip(&measured) {
        let median_of = |f: fn(&CreatePhase) -> f64| common::median(phases.iter().map(f).collect());
        let phase = CreatePhase {
            rate: median_of(|p| p.rate),
            created: phases.iter().map(|p| p.created).sum(),
            server_cpu_us: median_of(|p| p.server_cpu_us),
            own_cpu_us: median_of(|p| p.own_cpu_us),
            per_commit: median_of(|p| p.per_commit),
            writer_busy: median_of(|p| p.writer_busy),
        };
        if rounds > 1 {
            print_phase(&format!("median of {rounds}: "), clients, &phase);
        }
        results.insert(
            format!("creates_per_commit_{clients}_clients"),
            json!((phase.per_commit * 10.0).round() / 10.0),
        );
        results.insert(format!("creates_per_sec_{clients}_clients"), json!(phase.rate.round()));
        results.insert(
            format!("server_cpu_us_per_create_{clients}_clients"),
            json!(phase.server_cpu_us.round()),
        );
        results.insert(
            format!("load_generator_cpu_us_per_create_{clients}_clients"),
            json!(phase.own_cpu_us.round()),
        );
        results.insert(
            format!("writer_busy_percent_{clients}_clients"),
            json!((phase.writer_busy * 100.0).round()),
        );
    }
    if wanted("gets") {
        for i in 0..GET_TARGETS {
            let created = client
                .post(format!("{base}/api/v1/namespaces/default/pods"))
                .header("content-type", "application/json")
                .body(pod(&format!("target-{i}")))
                .send()
                .await
                .expect("create a get target");
            assert!(created.status().is_success(), "create a get target: {}", created.status());
        }
        let (gets, _) = run_phase(&addr, 64, "get", "g").await;
        println!("gets/s with 64 clients: {gets:>9.0}");
        results.insert("gets_per_sec_64_clients".into(), json!(gets.round()));
    }
    if wanted("watch") {
        for (key, value) in watch_phase(&client, &base, &addr).await {
            results.insert(key.into(), value);
        }
    }
    if wanted("list") {
        for (key, value) in list_phase(&client, &base).await {
            results.insert(key.into(), value);
        }
    }
    if only.is_empty() {
        // Every pod of the run is stored: the create phases', the get targets and the listed.
        let created: usize = measured.iter().flatten().map(|p| p.created).sum();
        let stored = created + GET_TARGETS + LIST_PODS + WATCHED_PODS;
        let rss_kb = resident_kb(server.0.id());
        println!(
            "server resident memory with {stored} pods stored: {:.0} MB ({:.1} KB per pod)",
            rss_kb / 1024.0,
            rss_kb / stored as f64
        );
        results.insert("pods_stored".into(), json!(stored));
        results.insert("server_rss_mb".into(), json!((rss_kb / 1024.0).round()));
    }
    drop(server);
    if !only.is_empty() {
        return;
    }
    // Each round's 64-client phase against its own 1-client phase, run side by side.
    let (one, many) = (&measured[0], &measured[counts.len() - 1]);
    let ratios: Vec<f64> = one.iter().zip(many).map(|(a, b)| b.rate / a.rate).collect();
    let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.1}x")).collect();
    let ratio = common::median(ratios);
    println!(
        "64-client / 1-client create ratio: {ratio:.1}x (median; rounds: {})",
        shown.join(", ")
    );
    results.insert("create_ratio_64_to_1".into(), json!((ratio * 10.0).round() / 10.0));
    results.insert("rounds".into(), json!(rounds));
    common::report("api_load", &serde_json::Value::Object(results));
}
