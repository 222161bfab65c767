//! Optimistic concurrency: read-modify-write from many writers loses nothing.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use crate::util::Server;

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
