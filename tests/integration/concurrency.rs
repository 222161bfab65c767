//! Optimistic concurrency: read-modify-write from many writers loses nothing.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use crate::util::{metrics, Server};

#[test]
fn thirty_two_writers_lose_no_update() {
    let server = Server::start();
    let path = "/api/v1/namespaces/default/configmaps/counter";
    let (code, _) = server.post(
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "counter"}, "data": {"n": "0"}}),
    );
    assert_eq!(code, 201);
    const WRITERS: usize = 32;
    const INCREMENTS: usize = 5;
    let conflicts = AtomicUsize::new(0);
    let failed_attempts = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..WRITERS {
            s.spawn(|| {
                for _ in 0..INCREMENTS {
                    loop {
                        let (code, mut cm) = server.get(path);
                        assert_eq!(code, 200);
                        let n: u64 = cm["data"]["n"].as_str().unwrap().parse().unwrap();
                        cm["data"]["n"] = json!((n + 1).to_string());
                        let (code, reply) = server.put(path, &cm);
                        match code {
                            200 => break,
                            409 => {
                                failed_attempts.fetch_add(1, Ordering::Relaxed);
                                if reply["reason"] == "Conflict" {
                                    conflicts.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            other => panic!("unexpected {other}: {reply}"),
                        }
                    }
                }
            });
        }
    });
    let (_, cm) = server.get(path);
    assert_eq!(cm["data"]["n"], (WRITERS * INCREMENTS).to_string());
    assert_eq!(conflicts.load(Ordering::Relaxed), failed_attempts.load(Ordering::Relaxed));
}

/// Writes that name no resourceVersion (a PUT without one, a merge patch) are the server's to
/// retry when another writer gets in between, as Kubernetes' storage does: none of them may
/// answer 409, and no patch may be lost.
#[test]
fn unconditional_writes_never_conflict() {
    let server = Server::start();
    let collection = "/api/v1/namespaces/default/configmaps";
    for name in ["patched", "replaced"] {
        let (code, _) = server.post(collection, &json!({"metadata": {"name": name}}));
        assert_eq!(code, 201);
    }
    const WRITERS: usize = 32;
    // Enough that the server's retries are exercised: before they waited for the commit they
    // raced, about one write in 300 here answered 409 (so this fails nine times in ten then).
    const EACH: usize = 20;
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let server = &server;
            s.spawn(move || {
                for i in 0..EACH {
                    // Half the writers patch their own label into one object, half replace
                    // another one's data without a resourceVersion (the last writer wins).
                    let (code, reply) = if w % 2 == 0 {
                        let patch = json!({"metadata": {"labels": {format!("w{w}-{i}"): "x"}}});
                        let path = format!("{collection}/patched");
                        let merge = Some("application/merge-patch+json");
                        server.send_raw("PATCH", &path, merge, patch.to_string().into_bytes())
                    } else {
                        let body = json!({"metadata": {"name": "replaced"},
                            "data": {"writer": format!("{w}-{i}")}});
                        server.put(&format!("{collection}/replaced"), &body)
                    };
                    assert_eq!(code, 200, "writer {w}, write {i}: {reply}");
                }
            });
        }
    });
    let (_, patched) = server.get(&format!("{collection}/patched"));
    let labels = patched["metadata"]["labels"].as_object().map_or(0, |l| l.len());
    assert_eq!(labels, WRITERS / 2 * EACH, "every patch's label is there: {patched}");
    let (_, replaced) = server.get(&format!("{collection}/replaced"));
    assert!(replaced["data"]["writer"].is_string(), "{replaced}");
}

/// A histogram's `_sum` and `_count` totals, as the server reports them now.
fn histogram_totals(server: &Server, name: &str) -> (f64, f64) {
    let text = server.http.get(server.url("/metrics")).send().unwrap().text().unwrap();
    metrics::histogram_totals(&text, name)
}

#[test]
fn creates_are_counted_in_the_commit_metrics() {
    // Without the node agent and scheduler, nothing else writes while the test does.
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "false"),
        ("KPLANE_SCHEDULER__ENABLED", "false"),
    ]);
    // Nor the service account controller: the server writes the system namespaces' accounts
    // before it serves.
    let (batches, timings) =
        ("kplane_store_commit_batch_size", "kplane_store_commit_duration_seconds");
    let (writes_before, commits_before) = histogram_totals(&server, batches);
    let (_, timed_before) = histogram_totals(&server, timings);
    const THREADS: usize = 16;
    const EACH: usize = 8;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let server = &server;
            s.spawn(move || {
                for i in 0..EACH {
                    let cm = json!({"metadata": {"name": format!("cm-{t}-{i}")}});
                    let (code, reply) = server.post("/api/v1/namespaces/default/configmaps", &cm);
                    assert_eq!(code, 201, "{reply}");
                }
            });
        }
    });
    let (writes, commits) = histogram_totals(&server, batches);
    let (writes, commits) = (writes - writes_before, commits - commits_before);
    assert_eq!(writes, (THREADS * EACH) as f64, "every create is one committed write");
    assert!((1.0..=writes).contains(&commits), "{commits} commits for {writes} writes");
    let (_, timed) = histogram_totals(&server, timings);
    assert_eq!(timed - timed_before, commits, "every commit is timed");
}
