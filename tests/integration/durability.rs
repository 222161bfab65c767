//! Nothing acknowledged is lost: kill -9 and restart.

use std::collections::HashMap;

use serde_json::json;

use crate::util::Server;

#[test]
fn acknowledged_writes_survive_kill_9() {
    let mut server = Server::start();
    let mut written: HashMap<String, String> = HashMap::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let server = &server;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..125 {
                        let name = format!("cm-{t}-{i}");
                        let body =
                            json!({"metadata": {"name": name}, "data": {"i": i.to_string()}});
                        let (code, created) =
                            server.post("/api/v1/namespaces/default/configmaps", &body);
                        assert_eq!(code, 201, "{created}");
                        mine.push((
                            name,
                            created["metadata"]["resourceVersion"].as_str().unwrap().to_string(),
                        ));
                    }
                    mine
                })
            })
            .collect();
        for h in handles {
            written.extend(h.join().unwrap());
        }
    });
    assert_eq!(written.len(), 1000);
    let highest: u64 = written.values().map(|rv| rv.parse::<u64>().unwrap()).max().unwrap();

    server.restart();

    let (code, list) = server.get("/api/v1/namespaces/default/configmaps");
    assert_eq!(code, 200);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1000);
    for item in items {
        let name = item["metadata"]["name"].as_str().unwrap();
        assert_eq!(item["metadata"]["resourceVersion"].as_str().unwrap(), written[name], "{name}");
    }
    let (code, next) = server
        .post("/api/v1/namespaces/default/configmaps", &json!({"metadata": {"name": "after"}}));
    assert_eq!(code, 201);
    let next_rv: u64 = next["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(next_rv > highest, "{next_rv} <= {highest}");
    // The states before the restart are not kept: a list at one of their revisions is 410
    // (never the current state under an old revision), one at the latest is served.
    let lowest: u64 = written.values().map(|rv| rv.parse::<u64>().unwrap()).min().unwrap();
    let exact = |rv: u64| {
        let path = format!(
            "/api/v1/namespaces/default/configmaps?resourceVersion={rv}&resourceVersionMatch=Exact"
        );
        server.get(&path)
    };
    let (code, old) = exact(lowest);
    assert_eq!((code, &old["reason"]), (410, &json!("Expired")), "{old}");
    let (code, latest) = exact(next_rv);
    assert_eq!((code, latest["items"].as_array().map(Vec::len)), (200, Some(1001)));
}

/// What a writer knows of one ConfigMap once the server acknowledged its last write to it.
enum Acknowledged {
    /// Stored at this resourceVersion, with this `data.v`.
    Stored {
        rv: String,
        v: u64,
    },
    Deleted,
}

/// kill -9 in the middle of creates, updates and deletes from 8 writers: after the restart,
/// every acknowledged write is there as acknowledged (a write cut off by the kill may have
/// happened or not; its object is not checked), and the revision counter moved past them all.
#[test]
fn writes_acknowledged_up_to_a_kill_9_in_mid_flight_survive_it() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let mut server = Server::start();
    let base = server.url("/api/v1/namespaces/default/configmaps");
    let acknowledged = AtomicUsize::new(0);
    let mut known: HashMap<String, Acknowledged> = HashMap::new();
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..8)
            .map(|t| {
                let (base, acknowledged) = (&base, &acknowledged);
                s.spawn(move || {
                    let http = reqwest::blocking::Client::new();
                    let mut mine = HashMap::new();
                    // Each round creates one map, updates the one before and deletes the one
                    // before that; the first error (the server is gone) ends the writer, and
                    // the name it was writing becomes unknown.
                    for i in 0u64.. {
                        let steps = [
                            (format!("w{t}-{i}"), "create"),
                            (format!("w{t}-{}", i.wrapping_sub(1)), "update"),
                            (format!("w{t}-{}", i.wrapping_sub(2)), "delete"),
                        ];
                        for (name, step) in steps {
                            if step != "create" && !mine.contains_key(&name) {
                                continue;
                            }
                            let url = format!("{base}/{name}");
                            let sent = match step {
                                "create" => http
                                    .post(base.as_str())
                                    .json(&json!({"metadata": {"name": name}, "data": {"v": "0"}})),
                                "update" => http
                                    .put(url)
                                    .json(&json!({"metadata": {"name": name}, "data": {"v": "1"}})),
                                _ => http.delete(url),
                            }
                            .send()
                            .and_then(|r| r.error_for_status())
                            .and_then(|r| r.json::<serde_json::Value>());
                            let Ok(answer) = sent else {
                                mine.remove(&name);
                                return mine;
                            };
                            let state = if step == "delete" {
                                Acknowledged::Deleted
                            } else {
                                Acknowledged::Stored {
                                    rv: answer["metadata"]["resourceVersion"]
                                        .as_str()
                                        .unwrap()
                                        .to_string(),
                                    v: if step == "create" { 0 } else { 1 },
                                }
                            };
                            mine.insert(name, state);
                            acknowledged.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    unreachable!("the writer loops until the server is gone")
                })
            })
            .collect();
        crate::util::wait_until(
            std::time::Duration::from_secs(60),
            "600 acknowledged writes",
            || acknowledged.load(Ordering::Relaxed) >= 600,
        );
        server.kill9();
        for writer in writers {
            known.extend(writer.join().unwrap());
        }
    });
    let highest = known
        .values()
        .filter_map(|k| match k {
            Acknowledged::Stored { rv, .. } => Some(rv.parse::<u64>().unwrap()),
            Acknowledged::Deleted => None,
        })
        .max()
        .unwrap();
    assert!(known.values().any(|k| matches!(k, Acknowledged::Deleted)));

    server.restart();

    for (name, state) in &known {
        let (code, object) = server.get(&format!("/api/v1/namespaces/default/configmaps/{name}"));
        match state {
            Acknowledged::Deleted => assert_eq!(code, 404, "{name} was deleted: {object}"),
            Acknowledged::Stored { rv, v } => {
                assert_eq!(code, 200, "{name}: {object}");
                assert_eq!(object["metadata"]["resourceVersion"], rv.as_str(), "{name}");
                assert_eq!(object["data"]["v"], v.to_string(), "{name}");
            }
        }
    }
    let (code, next) =
        server.post("/api/v1/namespaces/default/configmaps", &json!({"metadata": {"name": "n"}}));
    assert_eq!(code, 201, "{next}");
    let next_rv: u64 = next["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(next_rv > highest, "{next_rv} <= {highest}");
}
