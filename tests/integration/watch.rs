//! Watch semantics: order, resume, expiry, slow watchers, bookmarks, initial events.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use serde_json::{json, Value};

use crate::util::{wait_until, Server};

/// Opens a watch and returns a line reader over its events.
fn watch(server: &Server, query: &str) -> impl Iterator<Item = Value> {
    let client = reqwest::blocking::Client::builder().timeout(None).build().unwrap();
    let response = client
        .get(server.url(&format!("/api/v1/namespaces/default/configmaps?watch=true&{query}")))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    BufReader::new(response).lines().map(|l| serde_json::from_str(&l.unwrap()).unwrap())
}

fn create_cm(server: &Server, name: &str) -> u64 {
    let (code, cm) =
        server.post("/api/v1/namespaces/default/configmaps", &json!({"metadata": {"name": name}}));
    assert_eq!(code, 201, "{cm}");
    cm["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

fn rv(event: &Value) -> u64 {
    event["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

#[test]
fn events_are_ordered_and_resumable() {
    let server = Server::start();
    let first = create_cm(&server, "a");
    let mut events = watch(&server, &format!("resourceVersion={first}&timeoutSeconds=20"));
    let writer = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..50 {
                create_cm(&server, &format!("b{i}"));
            }
            server.delete("/api/v1/namespaces/default/configmaps/a");
        });
        let mut last = first;
        let mut seen = Vec::new();
        for event in events.by_ref().take(51) {
            let current = rv(&event);
            assert!(current > last, "{current} after {last}");
            last = current;
            seen.push(event);
        }
        seen
    });
    assert_eq!(writer.len(), 51);
    assert!(writer[..50].iter().all(|e| e["type"] == "ADDED"));
    assert_eq!(writer[50]["type"], "DELETED");
    assert_eq!(writer[50]["object"]["metadata"]["name"], "a");
    // Resuming from the middle replays exactly what came after.
    let middle = rv(&writer[24]);
    let resumed: Vec<Value> =
        watch(&server, &format!("resourceVersion={middle}&timeoutSeconds=2")).collect();
    assert_eq!(resumed.len(), 26);
    assert_eq!(rv(&resumed[0]), rv(&writer[25]));
    // Label selectors apply to watches too.
    let none: Vec<Value> =
        watch(&server, &format!("resourceVersion={first}&labelSelector=x%3Dy&timeoutSeconds=1"))
            .collect();
    assert!(none.is_empty());
}

#[test]
fn initial_events_bookmarks_and_timeout() {
    let server = Server::start_with_env(&[("KPLANE_WATCH__BOOKMARK_INTERVAL_SECONDS", "1")]);
    create_cm(&server, "one");
    create_cm(&server, "two");
    let events: Vec<Value> =
        watch(&server, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=3")
            .collect();
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[1]["type"], "ADDED");
    assert_eq!(events[2]["type"], "BOOKMARK");
    assert_eq!(events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    // The list blueprint client-go's watch-list client builds its list from.
    let blueprint = &events[2]["object"]["metadata"]["annotations"]
        ["kubernetes.io/initial-events-list-blueprint"];
    let blueprint = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(blueprint.as_str().unwrap()).unwrap()
    };
    let blueprint: Value = serde_json::from_slice(&blueprint).unwrap();
    assert_eq!(
        blueprint,
        serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {},
            "items": null})
    );
    assert_eq!(events[2]["object"]["metadata"]["creationTimestamp"], Value::Null, "{}", events[2]);
    assert!(events[2]["object"]["metadata"].get("creationTimestamp").is_some());
    assert!(events[3..].iter().all(|e| e["type"] == "BOOKMARK"), "periodic bookmarks only");
    assert!(events.len() > 3, "a periodic bookmark arrived within the timeout");
    // No resourceVersion: the current state as ADDED events, then the stream closes cleanly.
    let events: Vec<Value> = watch(&server, "timeoutSeconds=1").collect();
    assert_eq!(events.len(), 2);
    // With bookmarks, that is a watch list (Kubernetes 1.32's defaults): the state's end is
    // marked, from no revision and from "0" alike.
    for from in ["", "&resourceVersion=0"] {
        let query = format!("allowWatchBookmarks=true&timeoutSeconds=1{from}");
        let events: Vec<Value> = watch(&server, &query).collect();
        assert_eq!(events[2]["type"], "BOOKMARK", "{events:?}");
        let end = &events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"];
        assert_eq!(end, "true", "{events:?}");
    }
    // A negative timeout has run out already: nothing is sent, not even the state.
    assert_eq!(watch(&server, "timeoutSeconds=-5").count(), 0);
    // With a resourceVersion, sendInitialEvents still sends the state first (the revision is
    // only a lower bound for it).
    let rv = rv(&events[1]);
    let query = format!("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=1");
    let events: Vec<Value> = watch(&server, &query).collect();
    let kinds: Vec<&str> = events.iter().take(3).map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ADDED", "ADDED", "BOOKMARK"], "{events:?}");
    // Without bookmarks asked for, the state comes without the bookmark marking its end.
    let query = "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1";
    let kinds: Vec<Value> = watch(&server, query).map(|e| e["type"].clone()).collect();
    assert_eq!(kinds, ["ADDED", "ADDED"]);
    // `sendInitialEvents=false` starts from now: only what happens after.
    let query = "sendInitialEvents=false&resourceVersionMatch=NotOlderThan&timeoutSeconds=2";
    let later = watch(&server, query);
    create_cm(&server, "three");
    let names: Vec<Value> = later.map(|e| e["object"]["metadata"]["name"].clone()).collect();
    assert_eq!(names, ["three"]);
    // A state newer than the store's is not there to send: the watch, admitted, ends with an
    // ERROR event carrying the 504, as kube-apiserver's watch cache answers it.
    let future = rv + 1_000_000;
    let events: Vec<Value> = watch(
        &server,
        &format!(
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={future}"
        ),
    )
    .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    let status = &events[0]["object"];
    assert_eq!((&status["code"], &status["reason"]), (&json!(504), &json!("Timeout")), "{status}");
    assert_eq!(status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
    // As Kubernetes checks the options (422 on ListOptions): not on a list, and only with
    // NotOlderThan.
    let cms = "/api/v1/namespaces/default/configmaps";
    for query in [
        "sendInitialEvents=true",
        "watch=true&sendInitialEvents=true",
        "watch=true&resourceVersion=1&resourceVersionMatch=Exact",
        "watch=true&resourceVersionMatch=NotOlderThan",
        "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=abc",
    ] {
        let (code, status) = server.get(&format!("{cms}?{query}"));
        assert_eq!((code, &status["details"]["kind"]), (422, &json!("ListOptions")), "{status}");
    }
    let (_, exact) = server.get(&format!("{cms}?watch=true&resourceVersionMatch=Exact"));
    assert_eq!(
        exact["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: \
         resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided, \
         resourceVersionMatch: Unsupported value: \"Exact\": supported values: \"NotOlderThan\"]"
    );
}

/// A watch that asked for bookmarks gets one shortly before its timeout.
#[test]
fn a_watch_with_bookmarks_gets_one_before_its_timeout() {
    // Periodic bookmarks every 60 s (the default) would not come within the watch.
    let server = Server::start();
    let first = create_cm(&server, "first");
    let second = create_cm(&server, "second");
    let query = format!(
        "resourceVersion={first}&labelSelector=x%3Dy&allowWatchBookmarks=true&timeoutSeconds=3"
    );
    let events: Vec<Value> = watch(&server, &query).collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "BOOKMARK");
    // The revision its resource has reached, past what the selector passed over.
    assert_eq!(rv(&events[0]), second);
    // Without bookmarks asked for, none; nor for a watch of two seconds or less.
    let query = format!("resourceVersion={first}&labelSelector=x%3Dy&timeoutSeconds=3");
    assert_eq!(watch(&server, &query).count(), 0);
    let query = format!("resourceVersion={first}&allowWatchBookmarks=true&timeoutSeconds=2");
    let kinds: Vec<Value> = watch(&server, &query).map(|e| e["type"].clone()).collect();
    assert_eq!(kinds, ["ADDED"], "the second configmap only");
}

/// A watch of one object is the old `/watch/.../{name}` path, which sees only that object's
/// events; `?watch=true` on the object's own path is a read of it, as in Kubernetes (its
/// installer routes a GET of an item to the getter alone).
#[test]
fn one_object_is_watched_by_its_own_path() {
    let server = Server::start();
    let first = create_cm(&server, "watched");
    create_cm(&server, "other");
    let client = reqwest::blocking::Client::builder().timeout(None).build().unwrap();
    let path = "/api/v1/watch/namespaces/default/configmaps/watched?";
    let url = server.url(&format!("{path}resourceVersion={}&timeoutSeconds=1", first - 1));
    let response = client.get(url).send().unwrap();
    assert_eq!(response.status().as_u16(), 200, "{path}");
    let events: Vec<Value> = BufReader::new(response)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let names: Vec<&str> =
        events.iter().map(|e| e["object"]["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["watched"], "{path}");
    let other =
        "/api/v1/watch/namespaces/default/configmaps/watched?fieldSelector=metadata.name%3Dother";
    let (code, refused) = server.get(other);
    assert_eq!(code, 400, "{refused}");
    assert_eq!(refused["message"], "fieldSelector metadata.name doesn't match requested name");
    let (code, read) = server.get("/api/v1/namespaces/default/configmaps/watched?watch=true");
    assert_eq!(
        (code, &read["kind"], &read["metadata"]["name"]),
        (200, &json!("ConfigMap"), &json!("watched"))
    );
    // The `/watch/` paths only watch: a write there is 405 and changes nothing.
    let (code, status) = server.delete("/api/v1/watch/namespaces/default/configmaps");
    assert_eq!((code, &status["reason"]), (405, &json!("MethodNotAllowed")), "{status}");
    let (code, _) = server.post("/api/v1/watch/namespaces/default/configmaps", &json!({}));
    assert_eq!(code, 405);
    assert_eq!(server.get("/api/v1/namespaces/default/configmaps/watched").0, 200);
}

#[test]
fn too_old_resource_version_is_410() {
    let server = Server::start_with_env(&[("KPLANE_WATCH__WINDOW_EVENTS", "10")]);
    let first = create_cm(&server, "old");
    for i in 0..30 {
        create_cm(&server, &format!("n{i}"));
    }
    let events: Vec<Value> =
        watch(&server, &format!("resourceVersion={first}&timeoutSeconds=5")).collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
}

#[test]
fn slow_watcher_is_cut_off_while_others_keep_up() {
    let server = Server::start_with_env(&[("KPLANE_WATCH__BUFFER", "5")]);
    let start = create_cm(&server, "seed");
    let client = reqwest::blocking::Client::builder().timeout(None).build().unwrap();
    let slow = client
        .get(server.url(&format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={start}"
        )))
        .send()
        .unwrap();
    let mut fast = watch(&server, &format!("resourceVersion={start}&timeoutSeconds=60"));
    // Big objects fill the socket buffers quickly, so the slow watcher's queue overflows.
    let blob = "x".repeat(512 * 1024);
    const UPDATES: usize = 120;
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..UPDATES {
                let body = json!({"metadata": {"name": format!("big{i}")}, "data": {"blob": blob}});
                let (code, _) = server.post("/api/v1/namespaces/default/configmaps", &body);
                assert_eq!(code, 201);
            }
        });
        let received = fast.by_ref().take(UPDATES).count();
        assert_eq!(received, UPDATES, "the fast watcher received every event");
    });
    // Now drain the slow watcher: it must end with an ERROR event before seeing everything.
    let mut text = String::new();
    let mut reader = BufReader::new(slow);
    reader.read_to_string(&mut text).unwrap();
    let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let last = events.last().unwrap();
    assert_eq!(last["type"], "ERROR", "slow watcher ended with an error");
    assert!(events.len() < UPDATES + 1, "slow watcher was cut off early ({} events)", events.len());
}

/// A mass delete commits its events in bursts faster than a client reads them (a
/// replication controller's 1,500 pods deleted: about a thousand events within 10 ms, as the
/// garbage collector asks for every pod's delete at once); with the default buffer a watcher
/// that keeps reading sees them all (with a buffer of 1,000 it was cut off after ~150).
#[test]
fn a_watcher_that_keeps_reading_sees_a_mass_delete_through() {
    const PODS: usize = 1500;
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__RUNTIME", "simulated"),
        ("KPLANE_AGENT__NODE_NAME", "burst"),
        ("KPLANE_AGENT__MAX_PODS", "2000"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
    ]);
    let rc = json!({"metadata": {"name": "many"}, "spec": {"replicas": PODS,
        "template": {"metadata": {"labels": {"app": "many"}},
            "spec": {"containers": [{"name": "c", "image": "kplane/pause"}]}}}});
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    assert_eq!(server.post(rcs, &rc).0, 201);
    wait_until(Duration::from_secs(120), "every pod ready", || {
        let (_, rc) = server.get(&format!("{rcs}/many"));
        rc["status"]["readyReplicas"].as_u64() == Some(PODS as u64)
    });
    let (_, list) = server.get("/api/v1/namespaces/default/pods?limit=1");
    let start = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let client = reqwest::blocking::Client::builder().timeout(None).build().unwrap();
    let watch = client
        .get(server.url(&format!(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion={start}&timeoutSeconds=120"
        )))
        .send()
        .unwrap();
    let (code, _) = server.delete(&format!("{rcs}/many?propagationPolicy=Background"));
    assert_eq!(code, 200);
    let mut deleted = 0;
    for line in BufReader::new(watch).lines() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        assert_ne!(event["type"], "ERROR", "the watch was cut off: {event}");
        deleted += usize::from(event["type"] == "DELETED");
        if deleted == PODS {
            return;
        }
    }
    panic!("the watch ended after {deleted} of {PODS} pods were deleted");
}

/// A watch whose client has gone ends, even on a resource nothing writes to (its connection
/// closed, not held until an event would fail to reach it), as Go's server ends it.
#[test]
fn a_watch_whose_client_has_gone_lets_its_connection_go() {
    use std::io::Write;
    let server = Server::start();
    let fds = || std::fs::read_dir(format!("/proc/{}/fd", server.pid())).unwrap().count();
    let before = fds();
    let request = "GET /api/v1/namespaces/default/secrets?watch=true HTTP/1.1\r\nHost: x\r\n\r\n";
    let address = server.base().trim_start_matches("http://").trim_end_matches('/').to_string();
    let mut clients: Vec<std::net::TcpStream> = (0..20)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(&address).unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            stream
        })
        .collect();
    for client in &mut clients {
        // Being watched (the answer's head has come), then gone: the client closes its side
        // without reading on, so no reset tells the server.
        let mut head = [0u8; 12];
        client.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        client.shutdown(std::net::Shutdown::Write).unwrap();
    }
    assert!(fds() >= before + 20);
    for client in &mut clients {
        // The server ends the watch and closes the connection: the rest reads to its end.
        client.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).expect("the server closes the connection");
    }
    wait_until(Duration::from_secs(30), "the connections let go", || fds() <= before + 2);
}
