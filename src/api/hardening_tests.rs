//! Bad-input hardening: generated request bodies, patches, selectors and query strings against
//! the whole HTTP application in-process (over an in-memory store). Whatever comes in, the
//! answer is never a 5xx nor a panic, and every rejection is a `Status` saying what was wrong.
//! Each target runs `HARDENING_CASES` inputs (default 100,000).

use std::time::Duration;

use actix_web::test;
use actix_web::web::Data;
use kplane_actors::core::ApiCore;
use kplane_actors::store::{Store, StoreOptions};
use kplane_actors::watch::{HubOptions, WatchHub};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

use super::{app, AppState};

fn cases() -> usize {
    std::env::var("HARDENING_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(100_000)
}

async fn state() -> Data<AppState> {
    let hub = WatchHub::start(HubOptions {
        window_events: 1000,
        window_bytes: usize::MAX,
        buffer: 1000,
        bookmark_interval: Duration::from_secs(3600),
    });
    let store =
        Store::open(&StoreOptions { shards: 2, data_dir: None, ..Default::default() }, &hub)
            .unwrap();
    let core = ApiCore::new(store, hub)
        .with_schema_check(std::sync::Arc::new(super::openapi::check_patched));
    core.bootstrap().await.unwrap();
    Data::new(AppState::new(core, 64 * 1024, Duration::from_secs(5)))
}

/// Arbitrary JSON, shaped like Kubernetes objects often enough to get past the first checks.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "[a-zA-Z0-9._/:=!$-]{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("metadata"),
            Just("name"),
            Just("spec"),
            Just("status"),
            Just("containers"),
            Just("labels"),
            Just("ports"),
            Just("$patch"),
            Just("delete"),
            Just("replace"),
            Just("100m"),
            Just("1Gi"),
            Just("TCP"),
            Just("None"),
            Just("NodePort")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("metadata".to_string()),
            Just("name".to_string()),
            Just("namespace".to_string()),
            Just("labels".to_string()),
            Just("annotations".to_string()),
            Just("spec".to_string()),
            Just("status".to_string()),
            Just("containers".to_string()),
            Just("image".to_string()),
            Just("ports".to_string()),
            Just("containerPort".to_string()),
            Just("resources".to_string()),
            Just("requests".to_string()),
            Just("selector".to_string()),
            Just("replicas".to_string()),
            Just("template".to_string()),
            Just("kind".to_string()),
            Just("apiVersion".to_string()),
            Just("resourceVersion".to_string()),
            Just("finalizers".to_string()),
            Just("type".to_string()),
            Just("clusterIP".to_string()),
            Just("nodePort".to_string()),
            Just("$patch".to_string()),
            Just("$retainKeys".to_string()),
            Just("$setElementOrder/containers".to_string()),
            "[a-z$/]{1,8}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(key, inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const PATHS: &[&str] = &[
    "/api/v1/namespaces/default/pods",
    "/api/v1/namespaces/default/pods/target",
    "/api/v1/namespaces/default/pods/target/status",
    "/api/v1/namespaces/default/pods/target/binding",
    "/api/v1/namespaces/default/services",
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/replicationcontrollers",
    "/api/v1/namespaces/default/replicationcontrollers/rc/scale",
    "/api/v1/namespaces",
    "/api/v1/nodes",
    "/apis/coordination.k8s.io/v1/namespaces/default/leases",
];

/// Runs `inputs` through the app; every answer must be below 500 and, when an error, a Status.
async fn check_all(
    state: &Data<AppState>,
    inputs: impl Iterator<Item = test::TestRequest>,
) -> usize {
    let service = test::init_service(app(state.clone())).await;
    let mut n = 0;
    for request in inputs {
        let request = request.to_request();
        let described = format!("{} {}", request.method(), request.uri());
        let response = test::call_service(&service, request).await;
        let status = response.status();
        let body = test::read_body(response).await;
        // 504 Timeout is Kubernetes' answer to a resourceVersion the store has not reached.
        let text = String::from_utf8_lossy(&body);
        let too_new = status.as_u16() == 504 && text.contains("ResourceVersionTooLarge");
        assert!(status.as_u16() < 500 || too_new, "{described} -> {status}: {text}");
        if status.as_u16() >= 400 {
            let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            assert_eq!(
                parsed["kind"],
                "Status",
                "{described} -> {status}: {}",
                String::from_utf8_lossy(&body)
            );
            assert!(
                parsed["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{described}: {parsed}"
            );
        }
        n += 1;
    }
    n
}

fn generate<T: std::fmt::Debug>(
    strategy: impl Strategy<Value = T>,
    count: usize,
) -> impl Iterator<Item = T> {
    let mut runner = TestRunner::deterministic();
    (0..count).map(move |_| strategy.new_tree(&mut runner).expect("a value").current())
}

async fn seed(state: &Data<AppState>) {
    let pods = kplane_actors::model::resources::find("", "v1", "pods").unwrap();
    let pod = json!({"metadata": {"name": "target", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}});
    state.core.create(pods, "default", pod, &Default::default()).await.unwrap();
    let rcs = kplane_actors::model::resources::find("", "v1", "replicationcontrollers").unwrap();
    let rc = json!({"metadata": {"name": "rc"}, "spec": {"replicas": 1, "selector": {"a": "b"},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    state.core.create(rcs, "default", rc, &Default::default()).await.unwrap();
}

#[actix_web::test]
async fn request_bodies_never_break_the_server() {
    let state = state().await;
    seed(&state).await;
    let inputs = generate((0..PATHS.len(), 0..3usize, json_value(), any::<bool>()), cases());
    let requests = inputs.map(|(path, method, body, raw)| {
        let request = match method {
            0 => test::TestRequest::post(),
            1 => test::TestRequest::put(),
            _ => test::TestRequest::post(),
        }
        .uri(PATHS[path]);
        if raw {
            // Not JSON at all, or cut short.
            let text = body.to_string();
            request
                .insert_header(("content-type", "application/json"))
                .set_payload(text[..text.len() / 2].to_string())
        } else {
            request.set_json(body)
        }
    });
    assert_eq!(check_all(&state, requests).await, cases());
}

#[actix_web::test]
async fn patches_never_break_the_server() {
    let state = state().await;
    seed(&state).await;
    let json_patch_op = (
        prop_oneof![Just("add"), Just("remove"), Just("replace"), Just("move"), Just("copy"), Just("test"), Just("bogus")],
        "(/[a-z0-9~$-]{0,10}){0,4}",
        json_value(),
    )
        .prop_map(|(op, path, value)| json!({"op": op, "path": path, "from": "/metadata", "value": value}));
    let patch = prop_oneof![
        (
            Just("application/json-patch+json"),
            prop::collection::vec(json_patch_op, 0..4).prop_map(Value::from)
        ),
        (Just("application/merge-patch+json"), json_value()),
        (Just("application/strategic-merge-patch+json"), json_value()),
        // Server-side apply: a typed object with random fields, as a field manager sends it.
        (
            Just("application/apply-patch+yaml"),
            json_value().prop_map(|fields| {
                let mut config =
                    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "target"}});
                if let Value::Object(fields) = fields {
                    for (k, v) in fields {
                        config[k] = v;
                    }
                }
                config
            })
        ),
    ];
    let targets = prop_oneof![
        Just("/api/v1/namespaces/default/pods/target"),
        Just("/api/v1/namespaces/default/pods/target/status"),
        Just("/api/v1/namespaces/default/replicationcontrollers/rc/scale"),
    ];
    let managers =
        prop_oneof![Just(""), Just("?fieldManager=fuzz"), Just("?fieldManager=fuzz&force=true")];
    let requests = generate((targets, managers, patch), cases()).map(
        |(path, manager, (content_type, body))| {
            test::TestRequest::patch()
                .uri(&format!("{path}{manager}"))
                .insert_header(("content-type", content_type))
                .set_payload(body.to_string())
        },
    );
    assert_eq!(check_all(&state, requests).await, cases());
}

#[actix_web::test]
async fn selectors_never_break_the_server() {
    let state = state().await;
    seed(&state).await;
    let selector = "[a-z0-9.,=!()<> /_-]{0,24}|(app|spec.nodeName|status.phase|metadata.name)(=|==|!=| in | notin |<|>)[()a-z0-9, ]{0,10}";
    let requests =
        generate((selector, selector, any::<bool>()), cases()).map(|(labels, fields, all)| {
            let query =
                serde_urlencoded::to_string([("labelSelector", labels), ("fieldSelector", fields)])
                    .unwrap();
            let base = if all { "/api/v1/pods" } else { "/api/v1/namespaces/default/pods" };
            test::TestRequest::get().uri(&format!("{base}?{query}"))
        });
    assert_eq!(check_all(&state, requests).await, cases());
}

#[actix_web::test]
async fn query_strings_never_break_the_server() {
    let state = state().await;
    seed(&state).await;
    let key = prop_oneof![
        Just("limit"),
        Just("continue"),
        Just("resourceVersion"),
        Just("resourceVersionMatch"),
        Just("dryRun"),
        Just("fieldValidation"),
        Just("propagationPolicy"),
        Just("gracePeriodSeconds"),
        Just("timeoutSeconds"),
        Just("allowWatchBookmarks"),
        Just("includeObject"),
        Just("pretty"),
        Just("fieldManager"),
        Just("force"),
        Just("container"),
        Just("tailLines"),
        Just("watch"),
    ];
    let value = "[a-zA-Z0-9%=&+-]{0,10}";
    let pairs = prop::collection::vec((key, value), 0..4);
    let methods = prop_oneof![Just("GET"), Just("DELETE")];
    let requests =
        generate((0..PATHS.len(), methods, pairs), cases()).filter_map(|(path, method, pairs)| {
            // A real watch would stream until its timeout: that is the watch tests' business.
            let pairs: Vec<(&str, String)> = pairs
                .into_iter()
                .filter(|(k, v)| *k != "watch" || v == "false" || v == "0")
                .collect();
            let query = serde_urlencoded::to_string(&pairs).ok()?;
            let request = if method == "GET" {
                test::TestRequest::get()
            } else {
                test::TestRequest::delete()
            };
            Some(request.uri(&format!("{}?{query}", PATHS[path])))
        });
    assert!(check_all(&state, requests).await > cases() / 2);
}
