//! The node agent end to end: the embedded agent runs real processes from built-in images,
//! probes them, serves their logs and stops them; a `kplane agent` in another process registers,
//! runs a pod, survives a kill -9 without duplicating or orphaning it; simulated nodes at scale.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::util::{
    free_port, huge_pages_enabled, pod, process_running, terminate, wait_until, Server,
};

const WAIT: Duration = Duration::from_secs(60);

/// A server whose embedded agent is node `node` with fast sync and back-off.
fn server_with_agent(node: &str) -> Server {
    Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", node),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_AGENT__RESTART_BACKOFF_SECONDS", "1"),
    ])
}

fn condition(object: &Value, kind: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str().map(String::from))
}

fn node_ready(server: &Server, node: &str) -> bool {
    let (code, node) = server.get(&format!("/api/v1/nodes/{node}"));
    code == 200 && condition(&node, "Ready").as_deref() == Some("True")
}

fn pod_on(name: &str, node: &str, container: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 3, "containers": [container]}})
}

fn get_pod(server: &Server, name: &str) -> Value {
    server.get(&format!("/api/v1/namespaces/default/pods/{name}")).1
}

fn wait_pod(server: &Server, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    wait_until(WAIT, what, || {
        last = get_pod(server, name);
        check(&last)
    });
    last
}

fn pid_of(pod: &Value) -> u32 {
    pod["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .and_then(|id| id.rsplit('/').next())
        .and_then(|pid| pid.parse().ok())
        .expect("a running container has a pid")
}

/// A server whose pods `selector` picks run containers that ignore SIGTERM, so they would
/// outlive the embedded agent's stop (an agent leaves containers running when it ends, by
/// design, for the next agent to adopt). When the test ends, however it ends, the server is
/// stopped and then those containers are killed (each leads its own process group).
struct KillingContainersAtEnd {
    server: Option<Server>,
    selector: &'static str,
}

impl std::ops::Deref for KillingContainersAtEnd {
    type Target = Server;

    fn deref(&self) -> &Server {
        self.server.as_ref().expect("the server runs until the end")
    }
}

impl Drop for KillingContainersAtEnd {
    fn drop(&mut self) {
        let Some(server) = self.server.take() else { return };
        let path = format!("/api/v1/namespaces/default/pods?labelSelector={}", self.selector);
        let (_, pods) = server.get(&path);
        let pids: Vec<i32> = pods["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|pod| pod["status"]["containerStatuses"][0]["containerID"].as_str())
            .filter_map(|id| id.rsplit('/').next()?.parse().ok())
            .collect();
        // The agent first, so that no container is started again.
        drop(server);
        for pid in pids {
            let group = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
}

/// Opens a websocket speaking the channel protocol, sends `send` (first byte: channel), and
/// collects (channel, data) frames until `done` holds or the server closes.
fn ws_frames(
    url: &str,
    send: &[Vec<u8>],
    done: impl Fn(&[(u8, Vec<u8>)]) -> bool,
) -> Vec<(u8, Vec<u8>)> {
    use tungstenite::client::IntoClientRequest;
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("Sec-WebSocket-Protocol", "v4.channel.k8s.io".parse().unwrap());
    let (mut socket, response) = tungstenite::connect(request).expect("websocket upgrade");
    assert_eq!(response.headers()["Sec-WebSocket-Protocol"], "v4.channel.k8s.io");
    for frame in send {
        socket.send(tungstenite::Message::Binary(frame.clone().into())).unwrap();
    }
    let mut frames = Vec::new();
    while !done(&frames) {
        match socket.read() {
            Ok(tungstenite::Message::Binary(data)) if !data.is_empty() => {
                frames.push((data[0], data[1..].to_vec()));
            }
            Ok(tungstenite::Message::Close(_)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    frames
}

/// Whether a websocket speaking the channel protocol answers a ping with its pong (kubectl
/// pings every 5 s and gives up on a stream that answers none), whatever it sends meanwhile.
fn answers_ping(url: &str) -> bool {
    use tungstenite::client::IntoClientRequest;
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("Sec-WebSocket-Protocol", "v4.channel.k8s.io".parse().unwrap());
    let (mut socket, _) = tungstenite::connect(request).expect("websocket upgrade");
    if let tungstenite::stream::MaybeTlsStream::Plain(stream) = socket.get_ref() {
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    }
    socket.send(tungstenite::Message::Ping(b"hb".to_vec().into())).unwrap();
    loop {
        match socket.read() {
            Ok(tungstenite::Message::Pong(data)) => return &data[..] == b"hb",
            Ok(tungstenite::Message::Close(_)) | Err(_) => return false,
            Ok(_) => {}
        }
    }
}

/// A GET sent as written (HTTP clients normalise `..` away).
fn raw_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply
}

fn agent_port(server: &Server, node: &str) -> u16 {
    let (_, node) = server.get(&format!("/api/v1/nodes/{node}"));
    node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"].as_u64().unwrap() as u16
}

#[test]
fn embedded_agent_runs_probes_logs_and_stops_pods() {
    let server = server_with_agent("node-a");
    wait_until(WAIT, "node-a is Ready", || node_ready(&server, "node-a"));
    let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-a";
    wait_until(WAIT, "node-a's lease", || {
        server.get(lease).1["spec"]["holderIdentity"] == "node-a"
    });

    // A built-in image answering HTTP on its own pod IP (and at the node's address, on its
    // host port).
    let host_port = free_port();
    let mut web = pod_on(
        "web",
        "node-a",
        json!({"name": "web", "image": "kplane/agnhost:2.40", "args": ["netexec", "--http-port=8080"],
            "ports": [{"name": "http", "containerPort": 8080, "hostPort": host_port}]}),
    );
    web["metadata"]["labels"] = json!({"app": "web"});
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &web).0, 201);
    let running = wait_pod(&server, "web", "web is Ready", |p| {
        condition(p, "Ready").as_deref() == Some("True")
    });
    let ip = running["status"]["podIP"].as_str().unwrap().to_string();
    assert!(ip.starts_with("127.") && ip != "127.0.0.1", "{ip}");
    // Ready without a readiness probe means started; the server may still be binding.
    let url = format!("http://{ip}:8080/hostname");
    wait_until(WAIT, "web answers on its pod IP", || {
        server.http.get(&url).send().ok().and_then(|r| r.text().ok()).as_deref() == Some("web")
    });
    let on_node = format!("http://127.0.0.1:{host_port}/hostname");
    let answer = server.http.get(&on_node).send().ok().and_then(|r| r.text().ok());
    assert_eq!(answer.as_deref(), Some("web"), "the host port forwards to the pod");

    // The proxy subresources: a node's agent, a pod's port; redirects stay out.
    let no_redirects = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let raw = |path: &str, upgrade: bool| {
        let mut request = no_redirects.get(server.url(path));
        if upgrade {
            request = request.header("Connection", "Upgrade").header("Upgrade", "websocket");
        }
        let response = request.send().unwrap();
        let location = response.headers().get("location").map(|l| l.to_str().unwrap().to_string());
        (response.status().as_u16(), location, response.text().unwrap())
    };
    assert_eq!(raw("/api/v1/nodes/node-a/proxy/healthz", false), (200, None, "ok".into()));
    // A node's port named: its agent's, or another (here the pod's host port) at its address.
    let agent = agent_port(&server, "node-a");
    let at_agent = format!("/api/v1/nodes/node-a:{agent}/proxy/healthz");
    assert_eq!(raw(&at_agent, false), (200, None, "ok".into()));
    let at_host_port = format!("/api/v1/nodes/node-a:{host_port}/proxy/hostname");
    assert_eq!(raw(&at_host_port, false), (200, None, "web".into()));
    let pod_proxy = "/api/v1/namespaces/default/pods/web:8080/proxy";
    assert_eq!(raw(&format!("{pod_proxy}/hostname"), false), (200, None, "web".into()));
    let (code, location, _) = raw(&format!("{pod_proxy}/redirect?location=/hostname"), false);
    let into_proxy = format!("{pod_proxy}/hostname");
    assert_eq!((code, location.as_deref()), (302, Some(into_proxy.as_str())), "not followed");
    // The root without its slash is redirected to it, as kube-apiserver does.
    let (code, location, _) = raw(&format!("{pod_proxy}?a=b"), false);
    let root = format!("{pod_proxy}/?a=b");
    assert_eq!((code, location.as_deref()), (301, Some(root.as_str())));
    // An upgrade the backend does not take is answered as a plain request; one with a body
    // (an h2c POST) is a plain request, its body passed on.
    assert_eq!(raw(&format!("{pod_proxy}/hostname"), true), (200, None, "web".into()));
    let posted = no_redirects
        .post(server.url(&format!("{pod_proxy}/echo?msg=posted")))
        .header("Connection", "Upgrade, HTTP2-Settings")
        .header("Upgrade", "h2c")
        .body("a body")
        .timeout(std::time::Duration::from_secs(20))
        .send()
        .unwrap();
    // The connection that asked for an upgrade is not kept, and the client is told so.
    let closing = posted.headers().get("connection").map(|c| c.to_str().unwrap().to_string());
    assert_eq!(closing.as_deref(), Some("close"));
    assert_eq!((posted.status().as_u16(), posted.text().unwrap()), (200, "posted".to_string()));
    // Without a port, a pod is reached at the first port a container declares.
    let default_port = raw("/api/v1/namespaces/default/pods/web/proxy/hostname", false);
    assert_eq!(default_port, (200, None, "web".into()));
    // The older spelling the source documents use.
    let legacy = raw("/api/v1/proxy/namespaces/default/pods/web:8080/hostname", false);
    assert_eq!(legacy, (200, None, "web".into()));
    assert_eq!(raw("/api/v1/proxy/nodes/node-a/healthz", false), (200, None, "ok".into()));

    // A service is reached at one of its ready endpoints, by port name or number.
    let service = |name: &str, port: Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": "web"}, "ports": [port]}})
    };
    let named = service("web", json!({"name": "http", "port": 80, "targetPort": "http"}));
    let unnamed = service("plain", json!({"port": 80, "targetPort": 8080}));
    let nobody = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nobody"},
        "spec": {"selector": {"app": "none"}, "ports": [{"port": 80}]}});
    for body in [&named, &unnamed, &nobody] {
        assert_eq!(server.post("/api/v1/namespaces/default/services", body).0, 201);
    }
    let services = "/api/v1/namespaces/default/services";
    wait_until(WAIT, "the services' endpoints", || {
        ["web", "plain"].iter().all(|s| {
            let (_, endpoints) = server.get(&format!("/api/v1/namespaces/default/endpoints/{s}"));
            endpoints["subsets"][0]["addresses"][0]["ip"] == ip.as_str()
        }) && server.get("/api/v1/namespaces/default/endpoints/nobody").0 == 200
    });
    for path in [
        format!("{services}/web:http/proxy/hostname"),
        format!("{services}/web:80/proxy/hostname"),
        format!("{services}/http:web:80/proxy/hostname"),
        format!("{services}/plain/proxy/hostname"),
        "/api/v1/proxy/namespaces/default/services/plain/hostname".to_string(),
        "/api/v1/proxy/namespaces/default/services/web:http/hostname".to_string(),
    ] {
        assert_eq!(raw(&path, false), (200, None, "web".into()), "{path}");
    }
    let (code, _, body) = raw(&format!("{services}/plain/proxy/echo?msg=hi%20there"), false);
    assert_eq!((code, body.as_str()), (200, "hi there"), "the query goes through");
    // As in Kubernetes: a named port must be named; an unknown number, no endpoint: 503.
    let unavailable = |path: String, message: &str| {
        let (code, _, body) = raw(&path, false);
        assert_eq!(code, 503, "{path}: {body}");
        let status: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["message"], message, "{path}");
    };
    unavailable(format!("{services}/web/proxy/"), "no endpoints available for service \"web\"");
    unavailable(
        format!("{services}/web:81/proxy/"),
        "no service port 81 found for service \"web\"",
    );
    unavailable(
        format!("{services}/nobody/proxy/"),
        "no endpoints available for service \"nobody\"",
    );
    // A backend that refuses: 503 in Kubernetes' (and Go's) words, whatever is proxied to.
    unavailable(
        "/api/v1/namespaces/default/pods/web:9/proxy/x".to_string(),
        &format!("error trying to reach service: dial tcp {ip}:9: connect: connection refused"),
    );
    assert_eq!(raw(&format!("{services}/nope/proxy/"), false).0, 404);
    assert_eq!(raw(&format!("{services}/https:web:http/proxy/"), false).0, 400);
    // A pod whose IP is not of its node's pod CIDR (status is writable) is not reached.
    let web_status = "/api/v1/namespaces/default/pods/web/status";
    let set_ip = |ip: &str| {
        let patch = json!({"status": {"podIP": ip}});
        let response = no_redirects
            .patch(server.url(web_status))
            .header("Content-Type", "application/merge-patch+json")
            .body(patch.to_string())
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
    };
    // The pod's agent writes its own word back at its next sync: both proxies are asked
    // within one such spell (tried again when the agent was quicker).
    let mut last = String::new();
    wait_until(WAIT, "a pod at a foreign IP refused by both proxies", || {
        set_ip("127.0.0.1");
        let (code, _, refused) = raw(&format!("{pod_proxy}/hostname"), false);
        // Nor through a service: its endpoint's pod no longer has the endpoint's IP.
        let through_service = raw(&format!("{services}/plain/proxy/hostname"), false).0;
        last = format!("{code} {through_service} {refused}");
        code == 400 && refused.contains("outside its node's pod CIDR") && through_service == 503
    });
    assert!(last.starts_with("400 503"), "{last}");
    set_ip(&ip);
    assert_eq!(raw(&format!("{pod_proxy}/hostname"), false).0, 200);
    wait_until(WAIT, "the service proxied again", || {
        raw(&format!("{services}/plain/proxy/hostname"), false).0 == 200
    });

    // Logs through the agent's port; the agent's own endpoints.
    let talker = pod_on(
        "talker",
        "node-a",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", "echo hello from $POD_NAME on $NODE_NAME; exec sleep 1000"]}),
    );
    server.post("/api/v1/namespaces/default/pods", &talker);
    wait_pod(&server, "talker", "talker runs", |p| p["status"]["phase"] == "Running");
    let port = agent_port(&server, "node-a");
    let agent = |path: &str| {
        let response = server.http.get(format!("http://127.0.0.1:{port}{path}")).send().unwrap();
        (response.status().as_u16(), response.text().unwrap())
    };
    wait_until(WAIT, "the log line", || {
        agent("/containerLogs/default/talker/c").1 == "hello from talker on node-a\n"
    });
    // A followed log whose limit the log already reaches ends there (the container is silent).
    let limited = server.url("/api/v1/namespaces/default/pods/talker/log?follow=true&limitBytes=5");
    let follower = reqwest::blocking::Client::builder().timeout(WAIT).build().unwrap();
    let text = follower.get(limited).send().and_then(|r| r.text());
    assert_eq!(text.expect("the limited follow ends"), "hello");
    assert_eq!(agent("/healthz"), (200, "ok".into()));
    let verbose = "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n";
    assert_eq!(agent("/healthz?verbose"), (200, verbose.into()));
    assert_eq!(agent("/healthz/syncloop"), (200, "ok".into()));
    assert_eq!(agent("/healthz/nosuch").0, 404);
    assert_eq!(agent("/nosuch"), (404, "404 page not found\n".into()));
    // The kubelet's resource metrics (what metrics-server scrapes), stamped samples.
    let (code, resource) = agent("/metrics/resource");
    assert_eq!(code, 200, "{resource}");
    let sample = resource
        .lines()
        .find(|l| l.starts_with(r#"container_cpu_usage_seconds_total{container="c",namespace="default",pod="talker"} "#))
        .unwrap_or_else(|| panic!("talker's CPU in {resource}"));
    assert_eq!(sample.split(' ').count(), 3, "a value and a time: {sample}");
    assert!(resource.contains("\nnode_memory_working_set_bytes "), "{resource}");
    assert!(resource.ends_with("resource_scrape_error 0\n"), "{resource}");
    // The summary names the node (its own name, not a pod's).
    let summary: Value = serde_json::from_str(&agent("/stats/summary").1).unwrap();
    assert_eq!(summary["node"]["nodeName"], "node-a", "{summary}");
    // Log options are read as the kubelet reads them: any flag value, `tail` (which
    // replaces `tailLines`), empty times.
    let read =
        agent("/containerLogs/default/talker/c?timestamps=1&tailLines=0&tail=all&sinceTime=");
    assert_eq!(read.0, 200, "{read:?}");
    assert!(read.1.ends_with(" hello from talker on node-a\n") && read.1.len() > 30, "{read:?}");
    let pods: Value = serde_json::from_str(&agent("/pods").1).unwrap();
    assert_eq!(pods["items"].as_array().unwrap().len(), 2);
    // The running pods as the kubelet's runtime knows them: names, uids, containers' images.
    let running: Value = serde_json::from_str(&agent("/runningpods/").1).unwrap();
    let talker =
        running["items"].as_array().unwrap().iter().find(|p| p["metadata"]["name"] == "talker");
    let talker = talker.expect("talker runs").clone();
    assert_eq!(talker["spec"]["containers"][0]["name"], "c", "{talker}");
    assert!(talker["metadata"]["uid"].is_string() && talker["status"] == json!({}), "{talker}");
    assert!(talker["metadata"].get("resourceVersion").is_none(), "{talker}");
    let summary: Value = serde_json::from_str(&agent("/stats/summary").1).unwrap();
    let web_stats = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == "web")
        .unwrap()
        .clone();
    assert!(web_stats["memory"]["workingSetBytes"].as_u64().unwrap() > 0, "{web_stats} {pods}");
    assert!(agent("/metrics").1.contains("kplane_agent_running_pods 2"));
    let spec: Value = serde_json::from_str(&agent("/spec/").1).unwrap();
    assert!(spec["num_cores"].as_u64().unwrap() >= 1);
    assert_eq!(agent("/containerLogs/default/nope/c").0, 404);
    assert_eq!(agent("/containerLogs/default/talker/c?tailLines=-1").0, 400);
    assert!(raw_get(port, "/logs/../../etc/passwd").starts_with("HTTP/1.1 400"));
    assert_eq!(agent("/logs/pods/").0, 200);

    // Debugging handlers: run, exec, attach, port-forward, pprof.
    let run = server
        .http
        .post(format!("http://127.0.0.1:{port}/run/default/talker/c?cmd=printenv%20POD_NAME"))
        .send()
        .unwrap();
    assert_eq!(run.text().unwrap(), "talker\n");
    // A command that fails is a 500 saying how it ended, as the kubelet's run answers.
    let failed = server
        .http
        .post(format!("http://127.0.0.1:{port}/run/default/talker/c?cmd=ls%20/nonexistent"))
        .send()
        .unwrap();
    assert_eq!(failed.status().as_u16(), 500);
    let said = failed.text().unwrap();
    assert!(said.starts_with("command 'ls /nonexistent' exited with 2: ls: "), "{said}");
    let exec = format!(
        "ws://127.0.0.1:{port}/exec/default/talker/c?command=sh&command=-c&command={}&stdout=1&stderr=1",
        "echo%20out%3B%20echo%20err%20%3E%262%3B%20exit%203"
    );
    let frames = ws_frames(&exec, &[], |frames| frames.iter().any(|(c, _)| *c == 3));
    let channel = |n: u8| -> String {
        frames
            .iter()
            .filter(|(c, _)| *c == n)
            .map(|(_, d)| String::from_utf8_lossy(d).to_string())
            .collect()
    };
    assert_eq!((channel(1).as_str(), channel(2).as_str()), ("out\n", "err\n"));
    // A WebSocket through the node's proxy subresource is joined with the backend's.
    let through_proxy = format!(
        "{}/api/v1/nodes/node-a/proxy/exec/default/talker/c?command=echo&command=proxied&stdout=1",
        server.url("").replacen("http://", "ws://", 1)
    );
    let frames = ws_frames(&through_proxy, &[], |frames| frames.iter().any(|(c, _)| *c == 3));
    let out: Vec<u8> =
        frames.iter().filter(|(c, _)| *c == 1).flat_map(|(_, d)| d.clone()).collect();
    assert_eq!(String::from_utf8_lossy(&out), "proxied\n");
    // The outputs come in the order the command wrote them (`kubectl cp` of a missing file
    // reads tar's error only if it comes before the empty archive): read as they come, not
    // after the client's 20 ms of set-up, when both were there and stdout went first. Most
    // of five tries, as a busy machine may start the readers late.
    let ordered = format!(
        "ws://127.0.0.1:{port}/exec/default/talker/c?command=sh&command=-c&command={}&stdout=1&stderr=1",
        "echo%20first%20%3E%262%3B%20sleep%200.01%3B%20echo%20second"
    );
    let in_order = (0..5)
        .filter(|_| {
            let frames = ws_frames(&ordered, &[], |frames| frames.iter().any(|(c, _)| *c == 3));
            let outputs = frames.iter().map(|(c, _)| *c).filter(|c| *c == 1 || *c == 2);
            outputs.collect::<Vec<u8>>() == [2, 1]
        })
        .count();
    assert!(in_order >= 3, "stderr first in {in_order} of 5");
    let status: Value = serde_json::from_str(&channel(3)).unwrap();
    assert_eq!(status["details"]["causes"][0]["message"], "3", "{status}");
    let forward = format!("ws://127.0.0.1:{port}/portForward/default/web?ports=8080");
    let request =
        [0u8].iter().chain(b"GET /hostname HTTP/1.0\r\n\r\n").copied().collect::<Vec<u8>>();
    let frames = ws_frames(&forward, &[request], |frames| {
        frames.iter().any(|(c, d)| *c == 0 && String::from_utf8_lossy(d).ends_with("web"))
    });
    assert_eq!(frames[0], (0, 8080u16.to_le_bytes().to_vec()), "the port comes first");
    assert!(agent("/debug/pprof/").1.contains("resident"));
    let ticker = pod_on(
        "ticker",
        "node-a",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", "while true; do echo tick; sleep 0.2; done"]}),
    );
    server.post("/api/v1/namespaces/default/pods", &ticker);
    wait_pod(&server, "ticker", "ticker runs", |p| p["status"]["phase"] == "Running");
    let attach = format!("ws://127.0.0.1:{port}/attach/default/ticker/c?stdout=1");
    let frames = ws_frames(&attach, &[], |frames| {
        frames.iter().any(|(c, d)| *c == 1 && d.starts_with(b"tick"))
    });
    assert!(!frames.is_empty());
    assert_eq!(agent("/attach/default/ticker/c?stdin=1").0, 400);
    // Quiet sessions stay: exec (with a terminal or without) and attach answer pings.
    let waiting =
        format!("ws://127.0.0.1:{port}/exec/default/talker/c?command=cat&stdin=1&stdout=1");
    assert!(answers_ping(&waiting), "exec");
    assert!(answers_ping(&format!("{waiting}&tty=1")), "exec with a terminal");
    assert!(answers_ping(&attach), "attach");
    server.delete("/api/v1/namespaces/default/pods/ticker");

    // Liveness failure restarts; readiness gates Ready.
    let mut probed = pod_on(
        "probed",
        "node-a",
        json!({"name": "c", "image": "kplane/agnhost", "args": ["liveness", "--healthy-seconds=1"],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1, "failureThreshold": 1}}),
    );
    let marker = server.data.path().join("ready-marker");
    probed["spec"]["containers"].as_array_mut().unwrap().push(json!({
        "name": "gate", "image": "kplane/pause",
        "readinessProbe": {"exec": {"command": ["test", "-f", marker.to_str().unwrap()]}, "periodSeconds": 1}}));
    server.post("/api/v1/namespaces/default/pods", &probed);
    wait_pod(&server, "probed", "a liveness restart", |p| {
        p["status"]["containerStatuses"][0]["restartCount"].as_u64() >= Some(1)
    });
    assert_eq!(condition(&get_pod(&server, "probed"), "Ready").as_deref(), Some("False"));
    std::fs::write(&marker, "").unwrap();
    wait_pod(&server, "probed", "gate ready", |p| {
        p["status"]["containerStatuses"][1]["ready"] == true
    });

    // A memory limit becomes the container's control group's, or, where the agent cannot make
    // groups, its RLIMIT_DATA (through `kplane exec-limited`).
    let script = "g=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); case $g in \
        /kplane/*) cat /sys/fs/cgroup/memory$g/memory.limit_in_bytes;; *) ulimit -d;; esac; \
        exec sleep 1000";
    let limited = pod_on(
        "limited",
        "node-a",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", script],
            "resources": {"limits": {"memory": "64Mi"}}}),
    );
    server.post("/api/v1/namespaces/default/pods", &limited);
    let expected = if cgroups_usable() { "67108864\n" } else { "65536\n" };
    wait_until(WAIT, "the limit in the log", || {
        agent("/containerLogs/default/limited/c").1 == expected
    });

    // A container that has never run has no log: 400, as the kubelet answers.
    let stuck = pod_on("stuck", "node-a", json!({"name": "c", "image": "nginx:1.27"}));
    server.post("/api/v1/namespaces/default/pods", &stuck);
    wait_pod(&server, "stuck", "stuck waits for its image", |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    });
    let (code, status) = server.get("/api/v1/namespaces/default/pods/stuck/log");
    assert_eq!(code, 400, "{status}");
    // In the kubelet's words for image pulls.
    let message = status["message"].as_str().unwrap();
    assert!(
        message.ends_with("is waiting to start: trying and failing to pull image")
            || message.ends_with("is waiting to start: image can't be pulled"),
        "{status}"
    );

    // A followed log ends when the container does (kubectl logs -f returns), with every line.
    let mut once = pod_on(
        "once",
        "node-a",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", "echo first; sleep 1; echo last"]}),
    );
    once["spec"]["restartPolicy"] = json!("Never");
    server.post("/api/v1/namespaces/default/pods", &once);
    wait_pod(&server, "once", "once has started", |p| p["status"]["phase"] != "Pending");
    let follower = reqwest::blocking::Client::builder().timeout(WAIT).build().unwrap();
    let followed = follower
        // (`1` is true too, as Kubernetes reads booleans.)
        .get(server.url("/api/v1/namespaces/default/pods/once/log?follow=1"))
        .send()
        .and_then(|r| r.text())
        .expect("the followed log ends with its container");
    assert_eq!(followed, "first\nlast\n");

    // activeDeadlineSeconds: the pod is stopped and Failed with DeadlineExceeded.
    let mut bounded = pod_on(
        "bounded",
        "node-a",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"]}),
    );
    bounded["spec"]["activeDeadlineSeconds"] = json!(1);
    server.post("/api/v1/namespaces/default/pods", &bounded);
    let failed = wait_pod(&server, "bounded", "bounded fails and is stopped", |p| {
        p["status"]["phase"] == "Failed"
            && p["status"]["containerStatuses"][0]["state"]["terminated"].is_object()
    });
    assert_eq!(failed["status"]["reason"], "DeadlineExceeded", "{failed}");

    // Graceful deletion stops the process tree and removes the pod.
    let pid = pid_of(&get_pod(&server, "talker"));
    assert!(alive(pid));
    assert_eq!(server.delete("/api/v1/namespaces/default/pods/talker").0, 200);
    wait_until(WAIT, "talker is gone", || {
        server.get("/api/v1/namespaces/default/pods/talker").0 == 404
    });
    wait_until(Duration::from_secs(10), "talker's process is gone", || !alive(pid));

    // A clean server stop stops the containers it runs.
    let web_pid = pid_of(&get_pod(&server, "web"));
    let mut server = server;
    server.stop();
    assert!(!alive(web_pid), "the embedded agent stops its containers on shutdown");
}

/// A web server of its own, in Python: HTML pages linking to its own paths, a redirect, its
/// request's headers as JSON, the length and digest of a POSTed body; headers a browser needs.
const WEB_APP: &str = r#"
import hashlib, http.server, json, os
class App(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self, code, kind, body, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/page":
            page = b'<html><body><a href="/docs/">docs</a> <a href="next">next</a></body></html>'
            cookies = [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("ETag", '"v1"'),
                ("Access-Control-Allow-Origin", "*")]
            self.answer(200, "text/html; charset=utf-8", page, cookies)
        elif self.path == "/big":
            self.answer(200, "text/html", b'<a href="/docs/">docs</a>' + b" " * (17 << 20))
        elif self.path == "/login":
            self.answer(303, "text/plain", b"", [("Location", "/page")])
        else:
            self.answer(200, "application/json", json.dumps(dict(self.headers)).encode())
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(200, "text/plain", b"%d %s" % (len(body), hashlib.sha256(body).hexdigest().encode()))
http.server.ThreadingHTTPServer((os.environ["POD_IP"], 8080), App).serve_forever()
"#;

#[test]
fn a_web_app_works_through_the_proxy() {
    let server = server_with_agent("node-web");
    wait_until(WAIT, "node-web is Ready", || node_ready(&server, "node-web"));
    let app = pod_on(
        "app",
        "node-web",
        json!({"name": "app", "image": "none", "command": ["python3", "-c", WEB_APP],
            "ports": [{"containerPort": 8080}]}),
    );
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &app).0, 201);
    let proxy = "/api/v1/namespaces/default/pods/app/proxy";
    let client = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    wait_until(WAIT, "the app answers through the proxy", || {
        client.get(server.url(&format!("{proxy}/headers"))).send().is_ok_and(|r| r.status() == 200)
    });

    // The request's headers go on (not the credentials), with where it came from (their
    // names as HTTP/1.1 sends them here: lower case).
    let seen: Value = client
        .get(server.url(&format!("{proxy}/headers?x=1")))
        .header("Cookie", "session=s1")
        .header("X-Custom", "yes")
        .header("Authorization", "Bearer for-the-api-server")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(seen["cookie"], "session=s1", "{seen}");
    assert_eq!(seen["x-custom"], "yes", "{seen}");
    assert_eq!(seen["x-forwarded-uri"], format!("{proxy}/headers"), "{seen}");
    assert_eq!(seen["x-forwarded-for"], "127.0.0.1", "{seen}");
    assert!(seen.get("authorization").is_none(), "{seen}");

    // A page's links to the app's own paths, and its redirects, stay under the proxy; its
    // headers come back (not its CORS ones).
    let page = client.get(server.url(&format!("{proxy}/page"))).send().unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers();
    let cookies: Vec<&str> =
        headers.get_all("set-cookie").iter().map(|c| c.to_str().unwrap()).collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    assert_eq!(headers["etag"], "\"v1\"");
    assert!(headers.get("access-control-allow-origin").is_none());
    let body = page.text().unwrap();
    assert_eq!(
        body,
        format!("<html><body><a href=\"{proxy}/docs/\">docs</a> <a href=\"next\">next</a></body></html>")
    );
    // A page past the largest rewritten (16 MiB) goes on as it came, whole.
    let big = client.get(server.url(&format!("{proxy}/big"))).send().unwrap();
    assert_eq!(big.status(), 200);
    let big = big.bytes().unwrap();
    assert_eq!(big.len(), 25 + (17 << 20));
    assert!(big.starts_with(b"<a href=\"/docs/\">docs</a> "));
    let login = client.get(server.url(&format!("{proxy}/login"))).send().unwrap();
    assert_eq!(login.status(), 303);
    assert_eq!(login.headers()["location"], format!("{proxy}/page").as_str());

    // A body larger than the API's own limit (3 MiB) goes through whole, streamed.
    let upload: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
    let digest = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&upload))
    };
    let answer = client.post(server.url(&format!("{proxy}/upload"))).body(upload).send().unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().unwrap(), format!("5000000 {digest}"));
}

/// The messages of the events about pod `name`.
fn pod_events(server: &Server, name: &str) -> Vec<(String, String)> {
    let path =
        format!("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{name}");
    let (_, events) = server.get(&path);
    let items = events["items"].as_array().cloned().unwrap_or_default();
    let text = |e: &Value, key: &str| e[key].as_str().unwrap_or("").to_string();
    items.iter().map(|e| (text(e, "reason"), text(e, "message"))).collect()
}

/// Waits until pod `name` has an event of `reason` whose message `matches`.
fn wait_event(server: &Server, name: &str, reason: &str, matches: impl Fn(&str) -> bool) {
    wait_until(WAIT, &format!("a {reason} event of {name}"), || {
        pod_events(server, name).iter().any(|(r, m)| r == reason && matches(m))
    });
}

fn container_ready(pod: &Value, container: &str) -> bool {
    let statuses = pod["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
    statuses.iter().any(|s| s["name"] == container && s["ready"] == true)
}

/// Probes of the kinds the kubelet has beyond exec and TCP, against servers that are not
/// kplane's (gRPC's Python implementation, openssl's TLS server) and kplane's own agnhost
/// grpc-health-checking (asked by gRPC's Python client too); HTTP redirects are followed on the
/// pod's host only.
#[test]
fn probes_speak_grpc_and_https_and_follow_redirects() {
    let server = server_with_agent("node-p");
    wait_until(WAIT, "node-p is ready", || node_ready(&server, "node-p"));
    let python = crate::util::python();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/grpcio_health.py");
    let (python, script) = (python.to_str().unwrap(), script.to_str().unwrap());

    // grpcio's health service ("" serving, "sleepy" not) and a gRPC server without it.
    let mut grpc = pod_on(
        "grpc",
        "node-p",
        json!({"name": "serving", "image": "none", "command": [python, script, "serve", "5000"],
            "readinessProbe": {"grpc": {"port": 5000}, "periodSeconds": 1}}),
    );
    let containers = grpc["spec"]["containers"].as_array_mut().unwrap();
    containers.push(json!({"name": "sleepy", "image": "kplane/pause",
        "readinessProbe": {"grpc": {"port": 5000, "service": "sleepy"}, "periodSeconds": 1}}));
    containers
        .push(json!({"name": "bare", "image": "none", "command": [python, script, "bare", "5001"],
        "readinessProbe": {"grpc": {"port": 5001}, "periodSeconds": 1}}));
    server.post("/api/v1/namespaces/default/pods", &grpc);
    wait_pod(&server, "grpc", "grpcio's health service is probed ready", |p| {
        container_ready(p, "serving")
    });
    wait_event(&server, "grpc", "Unhealthy", |m| {
        m == "Readiness probe failed: service unhealthy (responded with \"NOT_SERVING\")"
    });
    wait_event(&server, "grpc", "Unhealthy", |m| {
        m.starts_with(
            "Readiness probe failed: error: this server does not implement the grpc health \
             protocol (grpc.health.v1.Health): ",
        )
    });
    let pod = get_pod(&server, "grpc");
    assert!(!container_ready(&pod, "sleepy") && !container_ready(&pod, "bare"), "{pod}");

    // kplane's agnhost grpc-health-checking: probed, asked by grpcio's client, switched off.
    let agnhost = pod_on(
        "agnhost-grpc",
        "node-p",
        json!({"name": "c", "image": "kplane/agnhost",
            "args": ["grpc-health-checking", "--port=5000", "--http-port=5001", "--service=db"],
            "readinessProbe": {"grpc": {"port": 5000, "service": "db"}, "periodSeconds": 1}}),
    );
    server.post("/api/v1/namespaces/default/pods", &agnhost);
    let ready =
        wait_pod(&server, "agnhost-grpc", "agnhost's health service is probed ready", |p| {
            container_ready(p, "c")
        });
    let ip = ready["status"]["podIP"].as_str().unwrap().to_string();
    let ask = |service: &str| {
        let out = Command::new(python)
            .args([script, "check", &format!("{ip}:5000"), service])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(ask("db"), "SERVING");
    assert_eq!(ask("other"), "NOT_FOUND");
    let switched = reqwest::blocking::get(format!("http://{ip}:5001/make-not-serving")).unwrap();
    assert!(switched.status().is_success());
    assert_eq!(ask("db"), "NOT_SERVING");
    wait_pod(&server, "agnhost-grpc", "agnhost's service is probed not ready", |p| {
        !container_ready(p, "c")
    });

    // HTTPS: openssl's TLS server with a self-signed certificate, which the kubelet takes.
    let files = tempfile::tempdir().unwrap();
    let (cert, key) = (files.path().join("cert.pem"), files.path().join("key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=pod"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(made.success());
    let serve_tls = format!(
        "exec openssl s_server -quiet -www -accept \"$POD_IP:8443\" -cert {} -key {}",
        cert.display(),
        key.display()
    );
    let https = pod_on(
        "https",
        "node-p",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", serve_tls],
            "readinessProbe": {"httpGet": {"scheme": "HTTPS", "port": 8443}, "periodSeconds": 1}}),
    );
    server.post("/api/v1/namespaces/default/pods", &https);
    wait_pod(&server, "https", "the HTTPS server is probed ready", |p| container_ready(p, "c"));

    // Redirects: followed on the pod's own host (to a failing /healthz), not to another host.
    let redirects = pod_on(
        "redirects",
        "node-p",
        json!({"name": "c", "image": "kplane/agnhost", "args": ["liveness", "--healthy-seconds=0"],
            "readinessProbe": {"httpGet": {"path": "/redirect?loc=/healthz", "port": 8080}, "periodSeconds": 1},
            "livenessProbe": {"httpGet": {"path": "/redirect?loc=http://192.0.2.1/elsewhere", "port": 8080},
                "initialDelaySeconds": 1, "periodSeconds": 1}}),
    );
    server.post("/api/v1/namespaces/default/pods", &redirects);
    wait_event(&server, "redirects", "Unhealthy", |m| {
        m == "Readiness probe failed: HTTP probe failed with statuscode: 500"
    });
    wait_event(&server, "redirects", "ProbeWarning", |m| {
        m == "Liveness probe warning: Probe terminated redirects, Response body: "
    });
    let pod = get_pod(&server, "redirects");
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0, "{pod}");
    assert!(!container_ready(&pod, "c"), "{pod}");
}

/// A crash-looping container's log, and its `previous` log, are the run that just ended (its
/// last state), as the kubelet serves them; a container that cannot start counts its restarts
/// too.
#[test]
fn a_crash_loop_s_logs_are_its_last_run() {
    let server = server_with_agent("node-logs");
    wait_until(WAIT, "the node is ready", || node_ready(&server, "node-logs"));
    let runs = server.data.path().join("runs");
    let script = format!(
        "n=$(($(cat {f} 2>/dev/null || echo 0) + 1)); echo $n > {f}; echo run-$n; exit 1",
        f = runs.display()
    );
    let crashing = pod_on(
        "crashing",
        "node-logs",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", script]}),
    );
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &crashing).0, 201);
    let log = |query: &str| {
        let path = format!("/api/v1/namespaces/default/pods/crashing/log{query}");
        server.get_with(&path, &[]).2
    };
    let mut seen = None;
    wait_until(WAIT, "the logs, read while the loop waits", || {
        let before = get_pod(&server, "crashing")["status"]["containerStatuses"][0].clone();
        let restarts = before["restartCount"].as_u64().unwrap_or(0);
        if restarts < 2 || before["state"]["waiting"].is_null() {
            return false;
        }
        let (current, previous) = (log(""), log("?previous"));
        // Read again if it ran in between.
        let after = get_pod(&server, "crashing")["status"]["containerStatuses"][0].clone();
        seen = Some((restarts, current, previous));
        after == before
    });
    let (restarts, current, previous) = seen.unwrap();
    // The first run is restart 0: the run that just ended is restartCount + 1, and it is the
    // container's last state, which `previous` reads.
    assert_eq!(current, format!("run-{}\n", restarts + 1));
    assert_eq!(previous, current);

    let unstartable = pod_on(
        "unstartable",
        "node-logs",
        json!({"name": "c", "image": "none", "command": ["kplane-no-such-command"]}),
    );
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &unstartable).0, 201);
    let pod = wait_pod(&server, "unstartable", "a failed start counts as a restart", |p| {
        p["status"]["containerStatuses"][0]["restartCount"].as_u64() >= Some(1)
    });
    let last = &pod["status"]["containerStatuses"][0]["lastState"]["terminated"];
    assert_eq!((&last["reason"], &last["exitCode"]), (&json!("StartError"), &json!(128)), "{pod}");
    // A failed run's last output is its message, when the container asks for it.
    let mut failing = pod_on(
        "failing",
        "node-logs",
        json!({"name": "c", "image": "none", "terminationMessagePolicy": "FallbackToLogsOnError",
            "command": ["sh", "-c", "echo starting; echo 'fatal: config missing'; exit 3"]}),
    );
    failing["spec"]["restartPolicy"] = json!("Never");
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &failing).0, 201);
    let failed = wait_pod(&server, "failing", "the run fails", |p| {
        p["status"]["containerStatuses"][0]["state"]["terminated"].is_object()
    });
    let terminated = &failed["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["message"], "starting\nfatal: config missing\n", "{failed}");
    // kubectl's WebSocket is taken and the agent's refusal is its final status, as
    // kube-apiserver's stream translator reports it.
    let (ok, _, err) = server.kubectl().run(&["exec", "unstartable", "--", "true"]);
    assert!(!ok);
    let refused = "Internal error occurred: unable to upgrade connection: container not found";
    assert!(err.contains(&format!("{refused} (\"c\")")), "{err}");
    // An attach is refused in the kubelet's attach words.
    let (ok, _, err) = server.kubectl().run(&["attach", "unstartable"]);
    assert!(!ok);
    let refused = "unable to upgrade connection: container c not found in pod unstartable_default";
    assert!(err.contains(refused), "{err}");
}

/// A pod deleted gracefully stays while its node stops it, and its last state (how its
/// containers ended, its terminal phase) is the DELETED event's, as the kubelet writes it
/// before its final delete.
#[test]
fn a_gracefully_deleted_pod_reports_how_its_containers_ended() {
    use std::io::BufRead;
    let server = server_with_agent("node-grace");
    wait_until(WAIT, "the node is ready", || node_ready(&server, "node-grace"));
    let trapping = pod_on(
        "trapping",
        "node-grace",
        json!({"name": "c", "image": "none",
            "command": ["sh", "-c", "trap 'exit 7' TERM; echo trapping; while :; do sleep 0.1; done"]}),
    );
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &trapping).0, 201);
    wait_pod(&server, "trapping", "the pod runs", |p| {
        p["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
    // Its trap set (a SIGTERM before it would end the shell at once: 143).
    wait_until(WAIT, "the trap is set", || {
        let log = server.http.get(server.url("/api/v1/namespaces/default/pods/trapping/log"));
        log.send().and_then(|r| r.text()).is_ok_and(|text| text.contains("trapping"))
    });
    let running = get_pod(&server, "trapping");
    let rv = running["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watch = format!(
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}\
         &fieldSelector=metadata.name%3Dtrapping&timeoutSeconds=60"
    );
    let events = reqwest::blocking::get(server.url(&watch)).unwrap();
    let (code, _) = server.delete("/api/v1/namespaces/default/pods/trapping?gracePeriodSeconds=30");
    assert_eq!(code, 200);
    let deleted = std::io::BufReader::new(events)
        .lines()
        .map(|line| serde_json::from_str::<Value>(&line.unwrap()).unwrap())
        .find(|event| event["type"] == "DELETED")
        .expect("a DELETED event");
    let status = &deleted["object"]["status"];
    assert_eq!(status["phase"], "Failed", "{deleted}");
    assert_eq!(status["containerStatuses"][0]["state"]["terminated"]["exitCode"], 7);
}

/// `kubectl drain`: the node is cordoned and its pods evicted (the `eviction` subresource, a
/// protobuf `Eviction` body), and it waits until they are gone.
#[test]
fn kubectl_drains_a_node() {
    let server = server_with_agent("node-d");
    wait_until(WAIT, "node-d is Ready", || node_ready(&server, "node-d"));
    let sleeper = pod_on(
        "sleeper",
        "node-d",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"]}),
    );
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &sleeper).0, 201);
    let pid = pid_of(&wait_pod(&server, "sleeper", "sleeper runs", |p| {
        p["status"]["phase"] == "Running"
    }));
    let out = server.kubectl().ok(&[
        "drain",
        "node-d",
        "--force",
        "--ignore-daemonsets",
        "--timeout=60s",
    ]);
    assert!(out.contains("node/node-d drained"), "{out}");
    assert_eq!(server.get("/api/v1/namespaces/default/pods/sleeper").0, 404);
    wait_until(Duration::from_secs(10), "sleeper's process is gone", || !alive(pid));
    assert_eq!(server.get("/api/v1/nodes/node-d").1["spec"]["unschedulable"], true);
}

/// PodDisruptionBudgets: the disruption controller counts a ReplicationController's pods, an
/// eviction the budget does not allow is a 429 naming it (kubectl drain retries it until its
/// timeout), and one it allows marks the pod and deletes it gracefully.
#[test]
fn evictions_keep_to_disruption_budgets() {
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "node-b"),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
    ]);
    let server = KillingContainersAtEnd { server: Some(server), selector: "app%3Dweb" };
    wait_until(WAIT, "node-b is Ready", || node_ready(&server, "node-b"));
    // Containers that outlive a SIGTERM, so an evicted pod stays a while, being deleted.
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"app": "web"}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"terminationGracePeriodSeconds": 30, "containers": [{"name": "c",
                "image": "none",
                "command": ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"]}]}}}});
    assert_eq!(server.post("/api/v1/namespaces/default/replicationcontrollers", &rc).0, 201);
    let kubectl = server.kubectl();
    kubectl.ok(&["create", "pdb", "web", "--selector=app=web", "--min-available=2"]);
    let budget_path = "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web";
    let mut budget = Value::Null;
    wait_until(WAIT, "the budget counts two healthy pods", || {
        budget = server.get(budget_path).1;
        budget["status"]["currentHealthy"] == 2 && budget["status"]["observedGeneration"] == 1
    });
    assert_eq!(budget["status"]["desiredHealthy"], 2, "{budget}");
    assert_eq!(budget["status"]["expectedPods"], 2);
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    let table = kubectl.ok(&["get", "pdb"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["web", "2", "N/A", "0"], "{table}");

    let (_, pods) = server.get("/api/v1/namespaces/default/pods?labelSelector=app%3Dweb");
    let names: Vec<String> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 2, "{pods}");
    let evict = |name: &str| {
        // A null deleteOptions is none, as Kubernetes decodes it.
        let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": "default"}, "deleteOptions": null});
        server.post(&format!("/api/v1/namespaces/default/pods/{name}/eviction"), &eviction)
    };
    let (code, refused) = evict(&names[0]);
    assert_eq!(code, 429, "{refused}");
    assert_eq!(refused["reason"], "TooManyRequests");
    assert_eq!(
        refused["message"],
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert_eq!(refused["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        refused["details"]["causes"][0]["message"],
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    );
    assert_eq!(evict("nobody").0, 404);
    let (code, wrong) = server.post(
        &format!("/api/v1/namespaces/default/pods/{}/eviction", names[0]),
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": names[0]}}),
    );
    assert_eq!(code, 400, "{wrong}");
    // Two budgets over one pod: Kubernetes' bare Failure Status, code 500 and no reason.
    kubectl.ok(&["create", "pdb", "web-too", "--selector=app=web", "--max-unavailable=1"]);
    let (code, unsupported) = evict(&names[0]);
    assert_eq!(code, 500, "{unsupported}");
    assert!(unsupported.get("reason").is_none(), "{unsupported}");
    assert_eq!(
        unsupported["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does \
         not support."
    );
    kubectl.ok(&["delete", "pdb", "web-too"]);

    // kubectl drain evicts, is refused, retries, and gives up at its timeout.
    let (drained, _, stderr) =
        kubectl.run(&["drain", "node-b", "--ignore-daemonsets", "--timeout=6s"]);
    assert!(!drained);
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    for name in &names {
        assert!(get_pod(&server, name)["metadata"].get("deletionTimestamp").is_none());
    }
    kubectl.ok(&["uncordon", "node-b"]);

    // A budget of one: one eviction goes through; the pod is marked and deleted gracefully.
    kubectl.ok(&["patch", "pdb", "web", "--type=merge", "-p", r#"{"spec":{"minAvailable":1}}"#]);
    wait_until(WAIT, "the budget allows one disruption", || {
        budget = server.get(budget_path).1;
        budget["status"]["observedGeneration"] == 2 && budget["status"]["disruptionsAllowed"] == 1
    });
    let (code, status) = evict(&names[0]);
    assert_eq!((code, &status["status"]), (201, &json!("Success")), "{status}");
    let evicted = get_pod(&server, &names[0]);
    assert!(evicted["metadata"]["deletionTimestamp"].is_string(), "{evicted}");
    let conditions = evicted["status"]["conditions"].as_array().unwrap();
    let target = conditions.iter().find(|c| c["type"] == "DisruptionTarget").expect("marked");
    assert_eq!(target["reason"], "EvictionByEvictionAPI", "{evicted}");
}

/// metrics.k8s.io and `kubectl top`: the agents' usage read every second, CPU as a rate.
#[test]
fn kubectl_top_shows_what_pods_and_nodes_use() {
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "node-t"),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_METRICS_SERVER__RESOLUTION_SECONDS", "1"),
    ]);
    wait_until(WAIT, "node-t is Ready", || node_ready(&server, "node-t"));
    let mut burner = pod_on(
        "burner",
        "node-t",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", "while :; do :; done"]}),
    );
    burner["metadata"]["labels"] = json!({"load": "busy"});
    let idler = pod_on(
        "idler",
        "node-t",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"]}),
    );
    for pod in [&burner, &idler] {
        assert_eq!(server.post("/api/v1/namespaces/default/pods", pod).0, 201);
    }
    let millicores = |q: &Value| -> u64 {
        let q = q.as_str().expect("a quantity");
        kplane_actors::model::quantity::milli_value(q).unwrap().try_into().unwrap()
    };
    let pods_path = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods";
    let mut listed = Value::Null;
    wait_until(WAIT, "both pods have metrics", || {
        listed = server.get(pods_path).1;
        listed["items"].as_array().is_some_and(|items| items.len() == 2)
    });
    assert_eq!(listed["kind"], "PodMetricsList", "{listed}");
    let usage = |name: &str| {
        let items = listed["items"].as_array().unwrap();
        let pod = items.iter().find(|p| p["metadata"]["name"] == name).unwrap();
        pod["containers"][0]["usage"].clone()
    };
    let (busy, idle) = (millicores(&usage("burner")["cpu"]), millicores(&usage("idler")["cpu"]));
    assert!(busy >= 50 && busy > idle, "a busy loop uses more than sleep: {listed}");
    assert!(usage("idler")["memory"].as_str().unwrap().ends_with('i'), "binary: {listed}");
    assert!(listed["items"][0].get("kind").is_none(), "list items name no kind: {listed}");

    // Selected by the pods' labels; one by name; a pod without metrics is 404.
    let (_, selected) = server.get(&format!("{pods_path}?labelSelector=load%3Dbusy"));
    assert_eq!(selected["items"].as_array().unwrap().len(), 1, "{selected}");
    let (code, one) = server.get(&format!("{pods_path}/burner"));
    assert_eq!((code, &one["kind"]), (200, &json!("PodMetrics")), "{one}");
    assert_eq!(one["metadata"]["labels"]["load"], "busy");
    // As metrics-server: a missing pod is the pod's 404, one without metrics is named with
    // its namespace.
    let (code, missing) = server.get(&format!("{pods_path}/nobody"));
    assert_eq!(code, 404, "{missing}");
    assert_eq!(missing["message"], "pods \"nobody\" not found");
    let mut waiting = pod("waiting");
    waiting["spec"]["nodeSelector"] = json!({"no": "such-node"});
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &waiting).0, 201);
    // A pod not running is one metrics-server does not know.
    let (code, unmeasured) = server.get(&format!("{pods_path}/waiting"));
    assert_eq!(code, 404, "{unmeasured}");
    assert_eq!(unmeasured["message"], "pods \"waiting\" not found");
    // Unpaged; selected by name and namespace only.
    let (_, unpaged) = server.get(&format!("{pods_path}?limit=1"));
    assert_eq!(unpaged["items"].as_array().unwrap().len(), 2, "{unpaged}");
    let (code, refused) = server.get(&format!("{pods_path}?fieldSelector=spec.nodeName%3Dnode-t"));
    assert_eq!(code, 400, "{refused}");
    assert_eq!(
        refused["message"],
        "\"spec.nodeName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    let (code, watched) = server.get(&format!("{pods_path}?watch=1"));
    assert_eq!(code, 405, "{watched}");
    assert_eq!(
        watched["message"],
        "watch is not supported on resources of kind \"pods.metrics.k8s.io\""
    );
    assert_eq!(server.delete(&format!("{pods_path}/burner")).0, 405);
    let (code, node) = server.get("/apis/metrics.k8s.io/v1beta1/nodes/node-t");
    assert_eq!((code, &node["kind"]), (200, &json!("NodeMetrics")), "{node}");
    assert!(millicores(&node["usage"]["cpu"]) >= busy / 2, "the machine runs the loop: {node}");

    // kubectl top, as users read it.
    let kubectl = server.kubectl();
    let top = kubectl.ok(&["top", "pod"]);
    assert!(top.starts_with("NAME") && top.contains("burner") && top.contains("idler"), "{top}");
    let top = kubectl.ok(&["top", "node"]);
    assert!(top.contains("CPU(%)") && top.contains("node-t"), "{top}");
    // The metrics kinds themselves print as metrics-server prints them.
    let listed = kubectl.ok(&["get", "podmetrics"]);
    let header: Vec<&str> = listed.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "CPU", "MEMORY", "WINDOW"], "{listed}");
    assert!(listed.contains("burner"), "{listed}");
}

#[test]
fn containers_get_the_huge_pages_the_server_was_started_with() {
    let server = server_with_agent("node-h");
    assert!(!huge_pages_enabled(server.pid()), "the server turns them off for itself");
    let sleeper = pod_on(
        "sleeper",
        "node-h",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", "exec sleep 1000"]}),
    );
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &sleeper).0, 201);
    let running =
        wait_pod(&server, "sleeper", "sleeper runs", |p| p["status"]["phase"] == "Running");
    assert_eq!(
        huge_pages_enabled(pid_of(&running)),
        huge_pages_enabled(std::process::id()),
        "the container has what the server was started with (this test's own setting)"
    );
}

/// Whether agents here must put containers in control groups (root, cgroup v1's memory
/// controller): judged apart from the agent's own detection, which the tests hold to it.
fn cgroups_usable() -> bool {
    let memory = std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    nix::unistd::geteuid().is_root() && memory.is_file()
}

/// Past its memory limit a container is OOM-killed, as the kernel does it to a Kubernetes
/// container (its group's limit, not a process's); what a container started ends with it,
/// even a process that left its process group and session.
#[test]
fn containers_are_held_to_their_groups() {
    let server = server_with_agent("node-cg");
    wait_until(WAIT, "the node is ready", || node_ready(&server, "node-cg"));
    if !cgroups_usable() {
        eprintln!("skipped: no cgroup v1 memory controller the agent can use here");
        return;
    }
    // `tail` keeps a whole line in memory, and /dev/zero has no end of line.
    let mut hog = pod_on(
        "hog",
        "node-cg",
        json!({"name": "c", "image": "none", "command": ["tail", "/dev/zero"],
            "resources": {"limits": {"memory": "32Mi"}}}),
    );
    hog["spec"]["restartPolicy"] = json!("Never");
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &hog).0, 201);
    let failed = wait_pod(&server, "hog", "the hog fails", |p| p["status"]["phase"] == "Failed");
    let terminated = &failed["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["reason"], "OOMKilled", "{failed}");
    assert_eq!(terminated["exitCode"], 137, "{failed}");

    let marker = format!("sleep {}", 900_000 + u32::from(server.port));
    let script = format!("setsid {marker} & exec sleep 1000");
    let daemon = pod_on(
        "daemon",
        "node-cg",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", script]}),
    );
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &daemon).0, 201);
    wait_until(WAIT, "the daemon's leftover runs", || process_running(&marker));
    // What is exec'd in it joins its groups, with its OOM score (a BestEffort pod's, 1000, as
    // the kubelet gives it), and ends with it too.
    let kubectl = server.kubectl();
    let probe = "grep :memory: /proc/self/cgroup; cat /proc/self/oom_score_adj";
    let seen = kubectl.ok(&["exec", "daemon", "--", "sh", "-c", probe]);
    assert!(seen.contains(":memory:/kplane/pod"), "{seen}");
    assert_eq!(seen.lines().last(), Some("1000"), "{seen}");
    let exec_marker = format!("sleep {}", 800_000 + u32::from(server.port));
    let detached = format!("setsid {exec_marker} >/dev/null 2>&1 </dev/null &");
    kubectl.ok(&["exec", "daemon", "--", "sh", "-c", &detached]);
    wait_until(WAIT, "the exec'd leftover runs", || process_running(&exec_marker));
    let (code, _) = server.delete("/api/v1/namespaces/default/pods/daemon?gracePeriodSeconds=1");
    assert_eq!(code, 200);
    wait_until(WAIT, "the pod is gone", || {
        server.get("/api/v1/namespaces/default/pods/daemon").0 == 404
    });
    wait_until(WAIT, "the leftover ended with its container", || !process_running(&marker));
    wait_until(WAIT, "the exec'd one too", || !process_running(&exec_marker));
}

/// A pod past its containers' local storage limit (here its log) is evicted, as the kubelet's
/// eviction manager does it: stopped at once, Failed with reason `Evicted` and the kubelet's
/// message, and a Warning event saying so.
#[test]
fn a_pod_past_its_local_storage_limit_is_evicted() {
    let server = server_with_agent("node-ev");
    let logger = pod_on(
        "logger",
        "node-ev",
        json!({"name": "c", "image": "none",
            "command": ["sh", "-c", "yes | head -c 3000000; exec sleep 1000"],
            "resources": {"limits": {"ephemeral-storage": "1Mi"}}}),
    );
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &logger).0, 201);
    let evicted =
        wait_pod(&server, "logger", "the pod is evicted", |p| p["status"]["phase"] == "Failed");
    let message = "Pod ephemeral local storage usage exceeds the total limit of containers 1Mi. ";
    assert_eq!(
        (&evicted["status"]["reason"], &evicted["status"]["message"]),
        (&json!("Evicted"), &json!(message)),
        "{evicted}"
    );
    let disrupted = evicted["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "DisruptionTarget");
    let disrupted = disrupted.cloned().unwrap_or_default();
    assert_eq!(
        (&disrupted["status"], &disrupted["reason"], &disrupted["message"]),
        (&json!("True"), &json!("TerminationByKubelet"), &json!(message)),
        "{evicted}"
    );
    let events = "/api/v1/namespaces/default/events?fieldSelector=reason%3DEvicted";
    let mut event = Value::Null;
    wait_until(WAIT, "the eviction is an event", || {
        event = server.get(events).1["items"][0].clone();
        !event.is_null()
    });
    assert_eq!((&event["message"], &event["type"]), (&json!(message), &json!("Warning")));
}

/// `kplane agent` against `server`, as another machine would run it.
fn start_agent(server: &Server, args: &[&str], data: &std::path::Path) -> Child {
    start_agent_with_env(server, args, data, &[])
}

/// `start_agent`, with `KPLANE_*` settings of its own.
fn start_agent_with_env(
    server: &Server,
    args: &[&str],
    data: &std::path::Path,
    env: &[(&str, &str)],
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kplane"))
        .args(["agent", "--server", &server.base(), "--data-dir"])
        .arg(data)
        .args(args)
        .env("RUST_LOG", "warn")
        .env("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200")
        // A free port unless the test names one (`--port` wins over the setting): 10250 may
        // be taken by anything else on the machine.
        .env("KPLANE_AGENT__PORT", "0")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start kplane agent")
}

#[test]
fn a_remote_agent_runs_pods_and_adopts_them_after_a_crash() {
    let server = Server::start();
    let data = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let args = ["--node-name", "node-b", "--port", &port];
    let mut agent = start_agent(&server, &args, data.path());
    wait_until(WAIT, "node-b is Ready", || node_ready(&server, "node-b"));
    let pod = pod_on("sleeper", "node-b", json!({"name": "c", "image": "kplane/pause"}));
    server.post("/api/v1/namespaces/default/pods", &pod);
    let running =
        wait_pod(&server, "sleeper", "sleeper runs", |p| p["status"]["phase"] == "Running");
    let pid = pid_of(&running);
    // A container that starts a process of its own (unique to this test run).
    let child = format!("sleep {}7", port);
    let family = pod_on(
        "family",
        "node-b",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", format!("{child} & wait")]}),
    );
    server.post("/api/v1/namespaces/default/pods", &family);
    wait_until(WAIT, "the family's child runs", || process_running(&child));
    let phoenix = pod_on("phoenix", "node-b", json!({"name": "c", "image": "kplane/pause"}));
    server.post("/api/v1/namespaces/default/pods", &phoenix);
    let phoenix =
        wait_pod(&server, "phoenix", "phoenix runs", |p| p["status"]["phase"] == "Running");

    // kill -9 the agent: the container keeps running and is adopted, not started twice.
    agent.kill().unwrap();
    agent.wait().unwrap();
    assert!(alive(pid));
    let mut agent = start_agent(&server, &args, data.path());
    let healthz = format!("http://127.0.0.1:{port}/healthz");
    wait_until(WAIT, "the agent is back", || server.http.get(&healthz).send().is_ok());
    let pods_url = format!("http://127.0.0.1:{port}/pods");
    wait_until(WAIT, "the agent has the pods again", || {
        let pods: Value = server.http.get(&pods_url).send().unwrap().json().unwrap();
        pods["items"].as_array().is_some_and(|items| items.len() == 3)
    });
    let after = get_pod(&server, "sleeper");
    assert_eq!(pid_of(&after), pid, "the same process, adopted");
    assert_eq!(after["status"]["containerStatuses"][0]["restartCount"], 0);
    // An adopted container that dies is run again at once (a restarted kubelet has no
    // back-off for it), and its new run keeps running: what the old one left is cleaned up
    // before the new one starts in its control group.
    let adopted = pid_of(&phoenix);
    let leader = nix::unistd::Pid::from_raw(adopted as i32);
    nix::sys::signal::kill(leader, nix::sys::signal::Signal::SIGKILL).unwrap();
    let reborn = wait_pod(&server, "phoenix", "phoenix runs again", |p| {
        let c = &p["status"]["containerStatuses"][0];
        c["restartCount"] == 1 && c["state"]["running"].is_object()
    });
    let status = &reborn["status"]["containerStatuses"][0];
    assert_eq!(status["lastState"]["terminated"]["exitCode"], 137, "{status}");
    let new_pid = pid_of(&reborn);
    assert!(new_pid != adopted && alive(new_pid), "{status}");
    // An adopted container's stop takes what it started with it, as one of its own would.
    let url = server.url("/api/v1/namespaces/default/pods/family");
    assert_eq!(server.http.delete(url).send().unwrap().status().as_u16(), 200);
    wait_until(WAIT, "the family is gone", || get_pod(&server, "family")["code"] == 404);
    wait_until(WAIT, "the family's child is stopped", || !process_running(&child));

    // The server restarts (kill -9): the agent reconnects, re-lists and keeps its pod.
    let mut server = server;
    server.restart();
    let second = pod_on("second", "node-b", json!({"name": "c", "image": "kplane/pause"}));
    server.post("/api/v1/namespaces/default/pods", &second);
    wait_pod(&server, "second", "a pod created after the restart runs", |p| {
        p["status"]["phase"] == "Running"
    });
    assert_eq!(pid_of(&get_pod(&server, "sleeper")), pid, "still the same process");
    assert!(alive(pid));

    // A pod deleted while the agent is down is cleaned up when it comes back.
    agent.kill().unwrap();
    agent.wait().unwrap();
    let force = server
        .http
        .delete(server.url("/api/v1/namespaces/default/pods/sleeper?gracePeriodSeconds=0"))
        .send()
        .unwrap();
    assert_eq!(force.status().as_u16(), 200);
    let mut agent = start_agent(&server, &args, data.path());
    wait_until(WAIT, "the orphan is stopped", || !alive(pid));
    // An agent that stops leaves its containers running (to adopt them): the test's last pod
    // is deleted first, so that no process of the test outlives it.
    for last in ["second", "phoenix"] {
        let last_pid = pid_of(&get_pod(&server, last));
        let url =
            server.url(&format!("/api/v1/namespaces/default/pods/{last}?gracePeriodSeconds=0"));
        assert_eq!(server.http.delete(url).send().unwrap().status().as_u16(), 200);
        wait_until(WAIT, "the last pods are stopped", || !alive(last_pid));
    }
    terminate(&mut agent);
}

/// `kplane agent` run as `start_agent` runs it, to its refusal: its exit code and what it said
/// (killed, and the test failed, if it is not refused).
fn refused_agent(server: &Server, args: &[&str], data: &std::path::Path) -> (Option<i32>, String) {
    let mut agent = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .args(["agent", "--server", &server.base(), "--data-dir"])
        .arg(data)
        .args(args)
        .env("KPLANE_AGENT__PORT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kplane agent");
    let deadline = std::time::Instant::now() + WAIT;
    while agent.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            terminate(&mut agent);
            panic!("the agent {args:?} was not refused");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = agent.wait_with_output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// One node, one agent: a second agent given a node another one holds is refused, as is one
/// given another's data dir; once the holder stops, the node is free at once.
#[test]
fn a_node_held_by_one_agent_is_refused_to_another() {
    let server = Server::start();
    let (first_dir, second_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first_port = free_port().to_string();
    let mut first =
        start_agent(&server, &["--node-name", "twin", "--port", &first_port], first_dir.path());
    wait_until(WAIT, "twin is Ready", || node_ready(&server, "twin"));

    let (code, said) = refused_agent(&server, &["--node-name", "twin"], second_dir.path());
    assert_eq!(code, Some(2), "{said}");
    let held = format!("kplane: node twin is held by another agent at 127.0.0.1:{first_port}");
    assert!(said.starts_with(&held), "{said}");
    let (code, said) = refused_agent(&server, &["--node-name", "twin"], first_dir.path());
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("is in use by another agent"), "{said}");
    // Refused before doing anything: the node is the first agent's still.
    let (_, node) = server.get("/api/v1/nodes/twin");
    let port = &node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"];
    assert_eq!(port.to_string(), first_port);

    terminate(&mut first);
    let second_port = free_port();
    let args = ["--node-name", "twin", "--port", &second_port.to_string()];
    let mut second = start_agent(&server, &args, second_dir.path());
    wait_until(WAIT, "the second agent has the node", || {
        let (_, node) = server.get("/api/v1/nodes/twin");
        node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == second_port
    });
    terminate(&mut second);
}

/// A followed log loses no line when the log is rotated under it, however often.
#[test]
fn a_followed_log_loses_no_line_to_rotation() {
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "rotating"),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "100"),
        ("KPLANE_AGENT__MAX_LOG_BYTES", "100000"),
    ]);
    wait_until(WAIT, "rotating is Ready", || node_ready(&server, "rotating"));
    // 20,000 numbered lines in bursts of 500, about 45 bytes each in the log: a rotation
    // every few bursts, 9 in all.
    let script =
        "sleep 2; for k in $(seq 0 39); do seq $((k*500+1)) $((k*500+500)); sleep 0.2; done";
    let mut chatty = pod_on(
        "chatty",
        "rotating",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", script]}),
    );
    chatty["spec"]["restartPolicy"] = json!("Never");
    server.post("/api/v1/namespaces/default/pods", &chatty);
    wait_pod(&server, "chatty", "chatty runs", |p| p["status"]["phase"] == "Running");
    let follower = reqwest::blocking::Client::builder().timeout(WAIT).build().unwrap();
    let followed = follower
        .get(server.url("/api/v1/namespaces/default/pods/chatty/log?follow=true"))
        .send()
        .and_then(|r| r.text())
        .expect("the followed log ends with its container");
    let numbers: Vec<u32> = followed.lines().map(|line| line.parse().unwrap()).collect();
    let expected: Vec<u32> = (1..=20_000).collect();
    assert!(numbers == expected, "{} lines, first {:?}", numbers.len(), numbers.first());
}

/// An agent whose node was deleted and made again under it gives the node up, its container
/// stopped, and then ends with exit code 1 for its supervisor to see.
#[test]
fn an_agent_whose_node_was_made_again_stops_its_containers_and_ends() {
    let server = Server::start();
    let data = tempfile::tempdir().unwrap();
    let env = [("KPLANE_AGENT__LEASE_DURATION_SECONDS", "4")];
    let mut agent = start_agent_with_env(&server, &["--node-name", "remade"], data.path(), &env);
    wait_until(WAIT, "remade is Ready", || node_ready(&server, "remade"));
    let pod = pod_on("sleeper", "remade", json!({"name": "c", "image": "kplane/pause"}));
    server.post("/api/v1/namespaces/default/pods", &pod);
    let running =
        wait_pod(&server, "sleeper", "sleeper runs", |p| p["status"]["phase"] == "Running");
    let pid = pid_of(&running);

    let (code, _) = server.delete("/api/v1/nodes/remade");
    assert_eq!(code, 200);
    let (code, made) = server.post("/api/v1/nodes", &json!({"metadata": {"name": "remade"}}));
    assert_eq!(code, 201, "{made}");
    let mut ended = None;
    wait_until(WAIT, "the agent ends", || {
        ended = agent.try_wait().unwrap();
        ended.is_some()
    });
    assert_eq!(ended.and_then(|status| status.code()), Some(1));
    assert!(!alive(pid), "the container was stopped first");
}

/// The current time as Kubernetes writes it (whole seconds, UTC).
fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The status of container `name` in `pod`.
fn container_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    let statuses = pod["status"]["containerStatuses"].as_array();
    statuses.into_iter().flatten().find(|s| s["name"] == name).unwrap_or(&Value::Null)
}

/// Containers an agent adopted after a crash end with their own exit codes, whether they
/// ended while it was down or after it came back: their first process noted them (without,
/// both would be 137 `ContainerStatusUnknown`, and a `Never` pod that succeeded would fail).
#[test]
fn adopted_containers_end_with_their_own_exit_codes() {
    let server = Server::start();
    let data = tempfile::tempdir().unwrap();
    let triggers = tempfile::tempdir().unwrap();
    let (down, back) = (triggers.path().join("down"), triggers.path().join("back"));
    let port = free_port().to_string();
    let args = ["--node-name", "node-b", "--port", &port];
    let mut agent = start_agent(&server, &args, data.path());
    wait_until(WAIT, "node-b is Ready", || node_ready(&server, "node-b"));
    let waiting_for = |file: &std::path::Path, code: i32| {
        let script = format!("while [ ! -e {} ]; do sleep 0.05; done; exit {code}", file.display());
        json!(["sh", "-c", script])
    };
    let mut pod = pod_on(
        "outcomes",
        "node-b",
        json!({"name": "done", "image": "none",
        "command": waiting_for(&down, 0)}),
    );
    pod["spec"]["restartPolicy"] = json!("Never");
    let fails = json!({"name": "fails", "image": "none", "command": waiting_for(&back, 3)});
    let orphan_line = format!("sleep {port}8");
    let orphan =
        json!({"name": "orphan", "image": "none", "command": ["sleep", format!("{port}8")]});
    // A fourth passes its memory limit then: OOM-killed (per-process limits: an error).
    let hog = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; exec python3 -c 'b = bytearray(300 << 20)'",
        down.display()
    );
    let hog = json!({"name": "hog", "image": "none", "command": ["sh", "-c", hog],
        "resources": {"limits": {"memory": "64Mi"}}});
    pod["spec"]["containers"].as_array_mut().unwrap().extend([fails, orphan, hog]);
    server.post("/api/v1/namespaces/default/pods", &pod);
    let running = wait_pod(&server, "outcomes", "all run", |p| {
        let names = ["done", "fails", "orphan", "hog"];
        names.iter().all(|c| container_status(p, c)["state"]["running"].is_object())
    });
    let pid = |status: &Value| -> u32 {
        let id = status["containerID"].as_str().expect("a container id");
        id.rsplit('/').next().unwrap().parse().unwrap()
    };
    let done_pid = pid(container_status(&running, "done"));
    let orphan_pid = pid(container_status(&running, "orphan"));
    wait_until(WAIT, "the orphan's program runs", || process_running(&orphan_line));
    let children = format!("/proc/{0}/task/{0}/children", orphan_pid);
    let program: i32 = std::fs::read_to_string(children).unwrap().trim().parse().unwrap();

    // One ends while the agent is down, the other once it has come back and adopted it; the
    // first process of a third is killed alone, leaving its program behind.
    agent.kill().unwrap();
    agent.wait().unwrap();
    std::fs::write(&down, "").unwrap();
    let orphan_first = nix::unistd::Pid::from_raw(orphan_pid as i32);
    nix::sys::signal::kill(orphan_first, nix::sys::signal::Signal::SIGKILL).unwrap();
    let hog_pid = pid(container_status(&running, "hog"));
    wait_until(WAIT, "done and hog have ended", || !alive(done_pid) && !alive(hog_pid));
    // Its end is reported at its own time, not at the adoption's (a second later at least).
    let ended_by = now();
    wait_until(WAIT, "the second has turned", || now() > ended_by);
    let mut agent = start_agent(&server, &args, data.path());
    wait_pod(&server, "outcomes", "done's end is reported", |p| {
        container_status(p, "done")["state"]["terminated"].is_object()
    });
    std::fs::write(&back, "").unwrap();
    let ended = wait_pod(&server, "outcomes", "the pod ends", |p| p["status"]["phase"] == "Failed");
    let terminated = |name: &str| container_status(&ended, name)["state"]["terminated"].clone();
    let done = terminated("done");
    assert_eq!((&done["exitCode"], &done["reason"]), (&json!(0), &json!("Completed")), "{done}");
    assert!(done["finishedAt"].as_str().is_some_and(|at| at <= ended_by.as_str()), "{done}");
    let failed = terminated("fails");
    assert_eq!((&failed["exitCode"], &failed["reason"]), (&json!(3), &json!("Error")), "{failed}");
    assert_eq!(container_status(&ended, "fails")["restartCount"], 0, "never run twice");
    let hog = terminated("hog");
    match cgroups_usable() {
        true => assert_eq!(
            (&hog["exitCode"], &hog["reason"]),
            (&json!(137), &json!("OOMKilled")),
            "{hog}"
        ),
        false => {
            assert_eq!((&hog["exitCode"], &hog["reason"]), (&json!(1), &json!("Error")), "{hog}")
        }
    }
    let unknown = terminated("orphan");
    assert_eq!(unknown["reason"], "ContainerStatusUnknown", "no note: {unknown}");
    // What it left in its control group goes with it (without groups, nothing finds it).
    if cgroups_usable() {
        wait_until(WAIT, "the orphan's program is killed", || !process_running(&orphan_line));
    } else {
        let program = nix::unistd::Pid::from_raw(program);
        let _ = nix::sys::signal::kill(program, nix::sys::signal::Signal::SIGKILL);
    }
    terminate(&mut agent);
}

/// A node whose agent dies: after the grace period it is Unknown and tainted unreachable
/// (NoSchedule and NoExecute), its pods are evicted once they stop tolerating that, and their
/// ReplicationController replaces them on the node still alive; when the agent comes back, the
/// taints go and it stops what was evicted.
#[test]
fn pods_leave_a_node_whose_agent_went_silent() {
    // Nodes report every second and are given up on after five (Kubernetes: 10 s and 40 s).
    let fast = [
        ("KPLANE_AGENT__NODE_STATUS_UPDATE_PERIOD_SECONDS", "1"),
        ("KPLANE_AGENT__LEASE_DURATION_SECONDS", "4"),
    ];
    let mut env = vec![
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "node-a"),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
        ("KPLANE_CONTROLLERS__NODE_MONITOR_GRACE_PERIOD_SECONDS", "5"),
        ("KPLANE_CONTROLLERS__NODE_EVICTION_RATE", "10"),
    ];
    env.extend(fast);
    let server = Server::start_with_env(&env);
    let data = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let args = ["--node-name", "node-b", "--port", &port];
    let start_b = || Reaped(start_agent_with_env(&server, &args, data.path(), &fast));
    let mut agent = start_b();
    wait_until(WAIT, "both nodes Ready", || {
        node_ready(&server, "node-a") && node_ready(&server, "node-b")
    });
    // Both replicas on node-b: node-a is cordoned meanwhile.
    let cordon = |unschedulable: bool| {
        let patch = json!({"spec": {"unschedulable": unschedulable}});
        let response = server
            .http
            .patch(server.url("/api/v1/nodes/node-a"))
            .header("Content-Type", "application/merge-patch+json")
            .body(patch.to_string())
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
    };
    cordon(true);
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "keeper"},
        "spec": {"replicas": 2, "selector": {"app": "keeper"}, "template": {
            "metadata": {"labels": {"app": "keeper"}},
            "spec": {"terminationGracePeriodSeconds": 1,
                "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 1}],
                "containers": [{"name": "c", "image": "kplane/pause"}]}}}});
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    assert_eq!(server.post(rcs, &rc).0, 201);
    let running_on = |node: &str| -> Vec<Value> {
        let (_, pods) = server.get("/api/v1/namespaces/default/pods?labelSelector=app%3Dkeeper");
        let items = pods["items"].as_array().cloned().unwrap_or_default();
        let live = |p: &Value| {
            p["spec"]["nodeName"] == node
                && p["status"]["phase"] == "Running"
                && p["metadata"]["deletionTimestamp"].is_null()
        };
        items.into_iter().filter(live).collect()
    };
    wait_until(WAIT, "two replicas run on node-b", || running_on("node-b").len() == 2);
    let first: Vec<Value> = running_on("node-b");
    let tolerations = &first[0]["spec"]["tolerations"];
    assert_eq!(
        tolerations[1],
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 300}),
        "DefaultTolerationSeconds adds what the template lacks: {tolerations}"
    );
    let pids: Vec<u32> = first.iter().map(pid_of).collect();
    cordon(false);

    // node-b's agent dies.
    agent.0.kill().unwrap();
    agent.0.wait().unwrap();
    let mut node_b = Value::Null;
    wait_until(WAIT, "node-b unreachable, tainted NoExecute", || {
        node_b = server.get("/api/v1/nodes/node-b").1;
        let taints = node_b["spec"]["taints"].as_array().cloned().unwrap_or_default();
        taints
            .iter()
            .any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute")
    });
    assert_eq!(condition(&node_b, "Ready").as_deref(), Some("Unknown"));
    wait_until(WAIT, "two replacements run on node-a", || running_on("node-a").len() == 2);
    for old in &first {
        let name = old["metadata"]["name"].as_str().unwrap();
        let evicted = get_pod(&server, name);
        assert!(!evicted["metadata"]["deletionTimestamp"].is_null(), "{evicted}");
        let conditions = evicted["status"]["conditions"].as_array().unwrap();
        let target = conditions.iter().find(|c| c["type"] == "DisruptionTarget").unwrap();
        assert_eq!(target["reason"], "DeletionByTaintManager");
        let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(ready["status"], "False", "marked not ready with its node");
    }
    assert!(pids.iter().all(|pid| alive(*pid)), "no agent stopped them yet");

    // The agent comes back: its node is Ready and untainted, and it stops the evicted pods.
    let _agent = start_b();
    wait_until(WAIT, "node-b Ready and untainted", || {
        let node = server.get("/api/v1/nodes/node-b").1;
        condition(&node, "Ready").as_deref() == Some("True") && node["spec"]["taints"].is_null()
    });
    for old in &first {
        let name = old["metadata"]["name"].as_str().unwrap();
        let path = format!("/api/v1/namespaces/default/pods/{name}");
        wait_until(WAIT, "the evicted pod is gone", || server.get(&path).0 == 404);
    }
    wait_until(WAIT, "their processes are gone", || pids.iter().all(|pid| !alive(*pid)));
    assert_eq!(running_on("node-a").len(), 2, "the replacements stay");
}

/// A child process ended (SIGTERM, then SIGKILL) when dropped, a failed test's too.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            terminate(&mut self.0);
        }
    }
}

#[test]
fn a_hundred_simulated_nodes_register_and_run_pods() {
    // Nodes' pod networks are the server's to give, from its cluster CIDR, whatever the
    // agent's own configuration says.
    let server = Server::start_with_env(&[("KPLANE_AGENT__CLUSTER_CIDR", "127.96.0.0/16")]);
    let data = tempfile::tempdir().unwrap();
    // Reaped: a failed assertion still ends the agent.
    let mut agent = Reaped(start_agent_with_env(
        &server,
        &["--runtime", "simulated", "--nodes", "100", "--node-name-prefix", "sim-"],
        data.path(),
        &[("KPLANE_AGENT__CLUSTER_CIDR", "127.200.0.0/16")],
    ));
    wait_until(WAIT, "100 Ready nodes with their pod networks", || {
        let (_, nodes) = server.get("/api/v1/nodes");
        let items = nodes["items"].as_array().cloned().unwrap_or_default();
        let ready = |n: &&Value| condition(n, "Ready").as_deref() == Some("True");
        items.iter().filter(ready).filter(|n| n["spec"]["podCIDR"].is_string()).count() == 100
    });
    let (_, nodes) = server.get("/api/v1/nodes");
    let mut cidrs: Vec<&str> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["spec"]["podCIDR"].as_str().unwrap())
        .collect();
    cidrs.sort();
    cidrs.dedup();
    assert_eq!(cidrs.len(), 100, "every node has its own pod CIDR");
    assert!(cidrs.iter().all(|c| c.starts_with("127.96.") && c.ends_with(".0/24")), "{cidrs:?}");
    let pod = pod_on("hollow", "sim-42", json!({"name": "c", "image": "anything:latest"}));
    server.post("/api/v1/namespaces/default/pods", &pod);
    wait_pod(&server, "hollow", "the hollow pod is Ready", |p| {
        condition(p, "Ready").as_deref() == Some("True")
    });
    terminate(&mut agent.0);
    // A prefix names a single node too (not the host's node, which another agent may hold).
    let solo_data = tempfile::tempdir().unwrap();
    let args = ["--runtime", "simulated", "--nodes", "1", "--node-name-prefix", "solo-"];
    let mut solo = Reaped(start_agent(&server, &args, solo_data.path()));
    wait_until(WAIT, "node solo-0 Ready", || node_ready(&server, "solo-0"));
    terminate(&mut solo.0);
}

/// Extended resources: an operator advertises them by patching the node's capacity, the agent
/// makes them allocatable, and the scheduler places pods by them: one asking for more than is
/// left waits, its PodScheduled condition naming the resource.
#[test]
fn extended_resources_advertised_by_a_node_are_scheduled_by() {
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "node-x"),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_AGENT__NODE_STATUS_UPDATE_PERIOD_SECONDS", "1"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
    ]);
    let server = KillingContainersAtEnd { server: Some(server), selector: "app%3Ddongle" };
    wait_until(WAIT, "node-x is Ready", || node_ready(&server, "node-x"));
    let kubectl = server.kubectl();
    let advertise = r#"[{"op":"add","path":"/status/capacity/example.com~1dongle","value":"4"}]"#;
    kubectl.ok(&[
        "patch",
        "node",
        "node-x",
        "--subresource=status",
        "--type=json",
        "-p",
        advertise,
    ]);
    let allocatable = || server.get("/api/v1/nodes/node-x").1["status"]["allocatable"].clone();
    wait_until(WAIT, "the dongles are allocatable", || allocatable()["example.com/dongle"] == "4");
    let pod = |name: &str, dongles: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "dongle"}},
            "spec": {"containers": [{"name": "c", "image": "none", "command": ["sleep", "3600"],
                "resources": {"limits": {"example.com/dongle": dongles}}}]}})
    };
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &pod("three", "3")).0, 201);
    wait_until(WAIT, "three is placed", || {
        get_pod(&server, "three")["spec"]["nodeName"] == "node-x"
    });
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &pod("two", "2")).0, 201);
    let mut scheduled = Value::Null;
    wait_until(WAIT, "two is found not to fit", || {
        let conditions = get_pod(&server, "two")["status"]["conditions"].clone();
        let found =
            conditions.as_array().into_iter().flatten().find(|c| c["type"] == "PodScheduled");
        scheduled = found.cloned().unwrap_or_default();
        scheduled["reason"] == "Unschedulable"
    });
    let message = scheduled["message"].as_str().unwrap();
    assert!(
        message.starts_with("0/1 nodes are available: 1 Insufficient example.com/dongle."),
        "{message}"
    );
    // Taken back out of the capacity, it leaves allocatable too.
    let withdraw = r#"[{"op":"remove","path":"/status/capacity/example.com~1dongle"}]"#;
    kubectl.ok(&["patch", "node", "node-x", "--subresource=status", "--type=json", "-p", withdraw]);
    wait_until(WAIT, "the dongles are gone", || allocatable().get("example.com/dongle").is_none());
}

/// Pod volumes in the process runtime: each container sees its ConfigMap, Secret, downward
/// API and emptyDir volumes at their mount paths (its own mount namespace; the node's file
/// system is left as it was), read-only where Kubernetes mounts them so, shared between the
/// pod's containers, and in what is exec'd in it; a pod whose ConfigMap is missing waits as
/// `ContainerCreating` with a `FailedMount` event and starts once it exists.
#[test]
fn containers_see_their_volumes_at_their_mount_paths() {
    let server = server_with_agent("node-vol");
    wait_until(WAIT, "the node is ready", || node_ready(&server, "node-vol"));
    let kubectl = server.kubectl();
    kubectl.ok(&["create", "configmap", "settings", "--from-literal=greeting=hello"]);
    kubectl.ok(&["create", "secret", "generic", "creds", "--from-literal=token=s3cr3t"]);
    // Mount paths under the test's directory: one that is there on the node, with a file the
    // container's volume hides, and others the runtime makes.
    let root = server.data.path().join("mnt");
    let scratch = root.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("host-file"), "the node's").unwrap();
    let at = |name: &str| root.join(name).to_string_lossy().into_owned();
    let script = format!(
        "cat {cfg}/greeting; echo; cat {secret}/token; echo; cat {info}/labels; echo; \
         ls {scratch}; echo from-c > {scratch}/shared; touch {cfg}/x 2>/dev/null || echo ro; \
         pwd; exec sleep 1000",
        cfg = at("cfg"),
        secret = at("secret"),
        info = at("info"),
        scratch = at("scratch"),
    );
    let mounts = json!([{"name": "cfg", "mountPath": at("cfg")},
        {"name": "secret", "mountPath": at("secret")},
        {"name": "info", "mountPath": at("info")},
        {"name": "scratch", "mountPath": at("scratch")}]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "vol", "labels": {"app": "web"}},
        "spec": {"nodeName": "node-vol", "terminationGracePeriodSeconds": 1,
            "hostAliases": [{"ip": "123.45.67.89", "hostnames": ["foo.remote", "bar.remote"]}],
            "containers": [
                {"name": "c", "image": "busybox", "command": ["sh", "-c", script],
                    "workingDir": at("scratch"), "volumeMounts": mounts},
                {"name": "d", "image": "busybox", "command": ["sleep", "1000"],
                    "volumeMounts": [{"name": "scratch", "mountPath": at("other")}]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "settings"}},
                {"name": "secret", "secret": {"secretName": "creds"}},
                {"name": "info", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                {"name": "scratch", "emptyDir": {}}]}});
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &pod).0, 201);
    let log = || server.get_with("/api/v1/namespaces/default/pods/vol/log?container=c", &[]).2;
    wait_until(WAIT, "the container's script ran", || {
        log().ends_with(&format!("{}\n", at("scratch")))
    });
    // The emptyDir hid the node's file; the ConfigMap is read-only; the working directory is
    // the volume.
    assert_eq!(log(), format!("hello\ns3cr3t\napp=\"web\"\nro\n{}\n", at("scratch")));
    assert_eq!(
        std::fs::read_dir(&scratch).unwrap().count(),
        1,
        "the node's directory is as it was"
    );
    // The other container shares the emptyDir; what is exec'd joins the container's mounts.
    let exec = |container: &str, path: String| {
        kubectl.run(&["exec", "vol", "-c", container, "--", "cat", &path]).1
    };
    assert_eq!(exec("d", format!("{}/shared", at("other"))), "from-c\n");
    assert_eq!(exec("c", format!("{}/greeting", at("cfg"))), "hello");
    // The pod's own hosts file: its host name at its IP, and its aliases.
    let hosts = exec("d", "/etc/hosts".into());
    let ip = get_pod(&server, "vol")["status"]["podIP"].as_str().unwrap().to_string();
    assert!(hosts.starts_with("# Kubernetes-managed hosts file.\n"), "{hosts}");
    assert!(
        hosts.ends_with(&format!(
            "{ip}\tvol\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo.remote\tbar.remote\n"
        )),
        "{hosts}"
    );
    // New labels reach the downward API's file.
    kubectl.ok(&["label", "pod", "vol", "tier=front"]);
    wait_until(WAIT, "the labels file follows the pod", || {
        exec("c", format!("{}/labels", at("info"))) == "app=\"web\"\ntier=\"front\""
    });

    let mut waiting = pod_on(
        "waiting",
        "node-vol",
        json!({"name": "c", "image": "busybox", "command": ["sleep", "1000"],
            "volumeMounts": [{"name": "cfg", "mountPath": at("later")}]}),
    );
    waiting["spec"]["volumes"] = json!([{"name": "cfg", "configMap": {"name": "later"}}]);
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &waiting).0, 201);
    wait_event(&server, "waiting", "FailedMount", |m| {
        m == "MountVolume.SetUp failed for volume \"cfg\" : configmap \"later\" not found"
    });
    let pod = get_pod(&server, "waiting");
    let state = &pod["status"]["containerStatuses"][0]["state"];
    assert_eq!(state["waiting"]["reason"], "ContainerCreating", "{pod}");
    // No sandbox yet, as the kubelet makes none before the volumes: no IP.
    assert!(pod["status"].get("podIP").is_none(), "{pod}");
    let sandbox = pod["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodReadyToStartContainers")
        .cloned()
        .unwrap_or_default();
    assert_eq!(sandbox["status"], "False", "{pod}");
    kubectl.ok(&["create", "configmap", "later", "--from-literal=k=v"]);
    let started = wait_pod(&server, "waiting", "it starts once its ConfigMap is there", |p| {
        container_ready(p, "c")
    });
    assert!(started["status"]["podIP"].is_string(), "{started}");
    let later = format!("{}/k", at("later"));
    assert_eq!(kubectl.run(&["exec", "waiting", "--", "cat", &later]).1, "v");

    // A run's termination message is what it wrote to its `terminationMessagePath` (the
    // default `/dev/termination-log`, a file of its own), ahead of its logs.
    let mut messages = pod_on(
        "messages",
        "node-vol",
        json!({"name": "c", "image": "busybox",
            "command": ["sh", "-c", "printf 'all good' > /dev/termination-log"]}),
    );
    let custom = at("reports/why");
    messages["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "d",
        "image": "busybox", "terminationMessagePath": custom,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": ["sh", "-c", format!("echo to the log; printf oops > {custom}; exit 3")]}));
    // A long message: its last 4,096 bytes, then the pod's 12 KiB shared among its four
    // containers (the kubelet's `tail.ReadAtMost`, then its status manager's cut).
    let long = "(head -c 3000 /dev/zero | tr '\\0' A; head -c 3000 /dev/zero | tr '\\0' B) \
        > /dev/termination-log";
    for (name, command) in [("e", long), ("f", "true")] {
        messages["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": name,
            "image": "busybox", "command": ["sh", "-c", command]}));
    }
    messages["spec"]["restartPolicy"] = json!("Never");
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &messages).0, 201);
    let ended = wait_pod(&server, "messages", "both ran to their end", |p| {
        let statuses = p["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
        statuses.len() == 4 && statuses.iter().all(|s| s["state"]["terminated"].is_object())
    });
    let message = |name: &str| {
        let statuses = ended["status"]["containerStatuses"].as_array().unwrap();
        let status = statuses.iter().find(|s| s["name"] == name).unwrap();
        status["state"]["terminated"]["message"].clone()
    };
    assert_eq!((message("c"), message("d")), (json!("all good"), json!("oops")), "{ended}");
    // (6,000 bytes written: the last 4,096 start 1,096 bytes before the B's.)
    let expected = format!("{}{}", "A".repeat(1096), "B".repeat(12 * 1024 / 4 - 1096));
    let long = message("e");
    let long = long.as_str().unwrap_or_default();
    assert!(long == expected, "{} bytes, {} of them A", long.len(), long.matches('A').count());
}
