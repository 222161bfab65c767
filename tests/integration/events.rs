//! Events through both APIs: core/v1 and events.k8s.io/v1 share one storage, so kubectl shows
//! what a component recorded through either, and a watch on either sees it in its own form.

use std::io::{BufRead, BufReader};

use serde_json::{json, Value};

use crate::util::Server;

const EVENTS_V1: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

fn scheduled_event(name: &str) -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
        "eventTime": "2026-11-30T08:00:00.000000Z", "reportingController": "example.com/sched",
        "reportingInstance": "sched-1", "action": "Binding", "reason": "Scheduled",
        "type": "Normal", "note": "assigned default/web to node-a",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web"}})
}

#[test]
fn events_k8s_io_shares_storage_with_core_events() {
    let server = Server::start();
    // A watch through events.k8s.io/v1 sees the event in that form, selected on that form's
    // field names.
    let (_, list) = server.get(EVENTS_V1);
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let query = format!("watch=true&resourceVersion={rv}&timeoutSeconds=10");
    let watch = reqwest::blocking::Client::new()
        .get(server.url(&format!("{EVENTS_V1}?{query}&fieldSelector=regarding.name%3Dweb")))
        .send()
        .unwrap();

    let (code, created) = server.post(EVENTS_V1, &scheduled_event("e1"));
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "events.k8s.io/v1");
    assert_eq!(created["regarding"]["name"], "web");

    let mut lines = BufReader::new(watch).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["note"], "assigned default/web to node-a");

    // The core/v1 form, by HTTP and through kubectl.
    let (code, core) = server.get("/api/v1/namespaces/default/events/e1");
    assert_eq!(code, 200);
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["involvedObject"]["name"], "web");
    assert_eq!(core["message"], "assigned default/web to node-a");
    assert_eq!(core["reportingComponent"], "example.com/sched");
    let k = server.kubectl();
    let table = k.ok(&["get", "events"]);
    assert!(table.contains("Scheduled") && table.contains("pod/web"), "{table}");
    let wide = k.ok(&["get", "events.events.k8s.io", "-o", "wide"]);
    assert!(wide.contains("example.com/sched") && wide.contains("assigned default/web"), "{wide}");
    let resources = k.ok(&["api-resources", "--api-group=events.k8s.io"]);
    assert!(resources.contains("events.k8s.io/v1"), "{resources}");

    // Written through core/v1, read through events.k8s.io/v1.
    let legacy = json!({"metadata": {"name": "e2"}, "reason": "Pulled", "message": "pulled",
        "type": "Normal", "involvedObject": {"kind": "Pod", "name": "web"}, "count": 3,
        "source": {"component": "kplane-agent"}});
    let (code, _) = server.post("/api/v1/namespaces/default/events", &legacy);
    assert_eq!(code, 201);
    let (_, e2) = server.get(&format!("{EVENTS_V1}/e2"));
    assert_eq!(e2["note"], "pulled");
    assert_eq!(e2["deprecatedCount"], 3);
    assert_eq!(e2["deprecatedSource"]["component"], "kplane-agent");

    // Field selectors, patches in the events.k8s.io form, validation, delete.
    // Each version selects on its own field names, as Kubernetes' field label conversions.
    let selected = |path: &str, selector: &str| {
        let (code, list) = server.get(&format!("{path}?fieldSelector={selector}"));
        assert_eq!(code, 200, "{selector}: {list}");
        let items = list["items"].as_array().unwrap().iter();
        items.map(|e| e["metadata"]["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(selected(EVENTS_V1, "reason%3DPulled"), ["e2"]);
    let by_controller = "regarding.name%3Dweb,reportingController%3Dexample.com%2Fsched";
    assert_eq!(selected(EVENTS_V1, by_controller), ["e1"]);
    assert_eq!(selected(EVENTS_V1, "regarding.kind%3DPod"), ["e1", "e2"]);
    let core_events = "/api/v1/namespaces/default/events";
    assert_eq!(selected(core_events, "involvedObject.name%3Dweb"), ["e1", "e2"]);
    assert_eq!(selected(core_events, "reportingComponent%3Dexample.com%2Fsched"), ["e1"]);
    for (path, label) in [(EVENTS_V1, "involvedObject.name"), (core_events, "regarding.name")] {
        let (code, status) = server.get(&format!("{path}?fieldSelector={label}%3Dweb"));
        assert_eq!(code, 400, "{status}");
        assert_eq!(status["message"], format!("field label not supported: {label}"));
    }
    // Through events.k8s.io/v1 only the series (and metadata) may change, as Kubernetes'
    // validation of an update there; through core/v1 the rest may too.
    let merge = "application/merge-patch+json";
    let patch = |path: &str, body: &str| {
        server.send_raw("PATCH", &format!("{path}/e1"), Some(merge), body.as_bytes().to_vec())
    };
    let series = r#"{"series":{"count":2,"lastObservedTime":"2026-11-30T08:01:00.000000Z"}}"#;
    let (code, patched) = patch(EVENTS_V1, series);
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["series"]["count"], 2);
    let (code, status) = patch(EVENTS_V1, r#"{"note":"moved","reportingController":"x"}"#);
    assert_eq!(code, 422, "{status}");
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert_eq!(fields, ["message", "reportingController"], "{status}");
    assert!(status["message"].as_str().unwrap().contains("field is immutable"), "{status}");
    let mut replaced = patched.clone();
    replaced["reason"] = json!("Moved");
    let (code, status) = server.put(&format!("{EVENTS_V1}/e1"), &replaced);
    assert_eq!(code, 422, "{status}");
    let (code, _) = patch("/api/v1/namespaces/default/events", r#"{"message":"moved"}"#);
    assert_eq!(code, 200);
    let (_, viewed) = server.get(&format!("{EVENTS_V1}/e1"));
    assert_eq!(viewed["note"], "moved");
    let mut invalid = scheduled_event("e3");
    invalid.as_object_mut().unwrap().remove("eventTime");
    let (code, status) = server.post(EVENTS_V1, &invalid);
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "eventTime");
    let (code, _) = server.post(EVENTS_V1, &json!({"apiVersion": "v1", "kind": "Event"}));
    assert_eq!(code, 400);
    // As Kubernetes' event storage: a Success Status naming what went, not the object.
    let (code, deleted) = server.delete(&format!("{EVENTS_V1}/e1"));
    assert_eq!(code, 200);
    assert_eq!((&deleted["kind"], &deleted["status"]), (&json!("Status"), &json!("Success")));
    assert_eq!(deleted["details"]["group"], "events.k8s.io", "{deleted}");
    assert_eq!(deleted["details"]["name"], "e1", "{deleted}");
    assert_eq!(server.get("/api/v1/namespaces/default/events/e1").0, 404);
    // Errors name the resource asked for: events.k8s.io's, in its group.
    let (code, missing) = server.get(&format!("{EVENTS_V1}/e1"));
    assert_eq!(code, 404);
    assert_eq!(missing["message"], r#"events.events.k8s.io "e1" not found"#, "{missing}");
    assert_eq!(missing["details"]["group"], "events.k8s.io", "{missing}");
    let (code, missing) = patch(EVENTS_V1, r#"{"series":null}"#);
    assert_eq!(code, 404);
    assert_eq!(missing["details"]["group"], "events.k8s.io", "{missing}");
    let (code, exists) = server.post(EVENTS_V1, &scheduled_event("e3"));
    assert_eq!(code, 201, "{exists}");
    let (code, exists) = server.post(EVENTS_V1, &scheduled_event("e3"));
    assert_eq!(code, 409);
    assert_eq!(exists["message"], r#"events.events.k8s.io "e3" already exists"#, "{exists}");
}
