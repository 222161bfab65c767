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
}
