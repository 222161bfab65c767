//! Service cluster IPs and node ports: allocated from the configured ranges, never twice (also
//! across a restart), released on delete; requested ones are checked.

use serde_json::{json, Value};

use crate::util::Server;

fn service(name: &str, extra: Value) -> Value {
    let mut spec = json!({"ports": [{"port": 80}], "selector": {"app": name}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

const SERVICES: &str = "/api/v1/namespaces/default/services";

#[test]
fn cluster_ips_and_node_ports_are_allocated_once() {
    let mut server = Server::start();
    let (code, a) = server.post(SERVICES, &service("a", json!({})));
    assert_eq!(code, 201, "{a}");
    let ip_a = a["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(ip_a.starts_with("127.192."), "{ip_a}");
    assert_eq!(a["spec"]["clusterIPs"], json!([ip_a]));
    let (code, clash) = server.post(SERVICES, &service("b", json!({"clusterIP": ip_a})));
    assert_eq!(code, 422, "{clash}");
    assert!(clash["message"].as_str().unwrap().contains("already allocated"));
    let (code, _) = server.post(SERVICES, &service("b", json!({"clusterIP": "10.0.0.1"})));
    assert_eq!(code, 422);
    let (_, np) = server.post(SERVICES, &service("np", json!({"type": "NodePort"})));
    let port = np["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&port), "{np}");

    // After a restart the allocations are known: nothing is handed out twice.
    server.restart();
    let (_, c) = server.post(SERVICES, &service("c", json!({})));
    assert_ne!(c["spec"]["clusterIP"], json!(ip_a));
    assert_ne!(c["spec"]["clusterIP"], np["spec"]["clusterIP"]);
    let mut taken_port = service("np2", json!({"type": "NodePort"}));
    taken_port["spec"]["ports"][0]["nodePort"] = json!(port);
    assert_eq!(server.post(SERVICES, &taken_port).0, 422);

    // The cluster IP is immutable; a PUT without it keeps it.
    let mut changed = a.clone();
    changed["spec"]["clusterIP"] = json!("127.192.9.9");
    assert_eq!(server.put(&format!("{SERVICES}/a"), &changed).0, 422);
    let mut without = a.clone();
    without["spec"].as_object_mut().unwrap().remove("clusterIP");
    without["spec"].as_object_mut().unwrap().remove("clusterIPs");
    let (code, kept) = server.put(&format!("{SERVICES}/a"), &without);
    assert_eq!((code, kept["spec"]["clusterIP"].as_str()), (200, Some(ip_a.as_str())));

    // Deleting releases: the address and port can be asked for again.
    assert_eq!(server.delete(&format!("{SERVICES}/a")).0, 200);
    assert_eq!(server.delete(&format!("{SERVICES}/np")).0, 200);
    let (code, again) = server.post(SERVICES, &service("d", json!({"clusterIP": ip_a})));
    assert_eq!(code, 201, "{again}");
    assert_eq!(server.post(SERVICES, &taken_port).0, 201);
}
