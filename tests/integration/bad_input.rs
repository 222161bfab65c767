//! Bad input gets the right Status and code, never a 500.

use serde_json::{json, Value};

use std::time::Duration;

use crate::util::{metrics, pod, wait_until, Server};

/// GET `path` in the Table form kubectl asks for.
fn get_table(server: &Server, path: &str) -> Value {
    let request = server.http.get(server.url(path));
    let request = request.header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io");
    request.send().unwrap().json().unwrap()
}

fn assert_status(reply: &(u16, Value), code: u16, reason: &str) {
    assert_eq!(reply.0, code, "{}", reply.1);
    assert_eq!(reply.1["kind"], "Status", "{}", reply.1);
    assert_eq!(reply.1["code"], code);
    assert_eq!(reply.1["reason"], reason, "{}", reply.1);
    assert!(reply.1["message"].as_str().is_some_and(|m| !m.is_empty()));
}

#[test]
fn every_error_class_has_its_status() {
    let server = Server::start();
    let pods = "/api/v1/namespaces/default/pods";
    // 400: malformed JSON, kind mismatch, bad selectors and query values.
    assert_status(
        &server.send_raw("POST", pods, Some("application/json"), b"{not json".to_vec()),
        400,
        "BadRequest",
    );
    assert_status(
        &server.post(pods, &json!({"kind": "Service", "metadata": {"name": "x"}})),
        400,
        "BadRequest",
    );
    assert_status(&server.get(&format!("{pods}?labelSelector=a%20in%20(b")), 400, "BadRequest");
    let unknown_field = server.get(&format!("{pods}?fieldSelector=spec.bogus%3Dx"));
    assert_status(&unknown_field, 400, "BadRequest");
    assert_eq!(unknown_field.1["message"], "field label not supported: spec.bogus");
    let cms = "/api/v1/namespaces/default/configmaps?fieldSelector=data.a%3Dx";
    assert_eq!(
        server.get(cms).1["message"],
        "\"data.a\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    let reply = server.get(&format!("{pods}?limit=abc"));
    assert_status(&reply, 400, "BadRequest");
    assert_eq!(reply.1["message"], "strconv.ParseInt: parsing \"abc\": invalid syntax");
    let reply = server.get(&format!("{pods}?timeoutSeconds=99999999999999999999"));
    assert_eq!(
        reply.1["message"],
        "strconv.ParseInt: parsing \"99999999999999999999\": value out of range"
    );
    assert_status(&server.get(&format!("{pods}?continue=garbage")), 400, "BadRequest");
    assert_status(
        &server.get(&format!("{pods}?watch=true&resourceVersion=abc")),
        400,
        "BadRequest",
    );
    // 404: missing object, namespace, path.
    assert_status(&server.get(&format!("{pods}/nope")), 404, "NotFound");
    assert_status(&server.post("/api/v1/namespaces/nowhere/pods", &pod("p")), 404, "NotFound");
    assert_status(&server.get("/api/v1/widgets"), 404, "NotFound");
    assert_status(&server.get("/nothing/here"), 404, "NotFound");
    // 405: a verb the resource does not have.
    assert_status(
        &server.send_raw("POST", &format!("{pods}/x"), None, b"{}".to_vec()),
        405,
        "MethodNotAllowed",
    );
    // 409: AlreadyExists and Conflict.
    assert_eq!(server.post(pods, &pod("p")).0, 201);
    assert_status(&server.post(pods, &pod("p")), 409, "AlreadyExists");
    let (_, mut current) = server.get(&format!("{pods}/p"));
    current["metadata"]["resourceVersion"] = json!("1");
    assert_status(&server.put(&format!("{pods}/p"), &current), 409, "Conflict");
    // 400: a create carrying a resourceVersion (an object read back and posted again).
    current["metadata"]["name"] = json!("p2");
    assert_status(&server.post(pods, &current), 400, "BadRequest");
    assert_eq!(server.get(&format!("{pods}/p2")).0, 404);
    // 413: a body over 3 MiB.
    let big = vec![b' '; 3 * 1024 * 1024 + 1];
    assert_status(
        &server.send_raw("POST", pods, Some("application/json"), big),
        413,
        "RequestEntityTooLarge",
    );
    // 415: an unknown content type, and JSON sent as text (kube-apiserver takes only the media
    // types its serializers name).
    for media_type in ["application/xml", "text/plain", "*/*", ";;;", "; charset=utf-8"] {
        assert_status(
            &server.send_raw("POST", pods, Some(media_type), b"{}".to_vec()),
            415,
            "UnsupportedMediaType",
        );
    }
    // A body of `null` decodes as an empty object, which validation then refuses.
    let empty = server.send_raw("POST", pods, None, b"null".to_vec());
    assert_status(&empty, 422, "Invalid");
    assert_eq!(empty.1["details"]["causes"][0]["field"], "metadata.name", "{}", empty.1);
    let json_patch = server.send_raw("PATCH", &format!("{pods}/p"), None, b"{}".to_vec());
    assert_status(&json_patch, 415, "UnsupportedMediaType");
    assert_eq!(
        json_patch.1["message"],
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, \
         application/strategic-merge-patch+json, application/apply-patch+yaml"
    );
    // 422: options Kubernetes' validation refuses, on their kind.
    let sideways = server.send_raw(
        "DELETE",
        &format!("{pods}/p?propagationPolicy=Sideways"),
        None,
        Vec::new(),
    );
    assert_status(&sideways, 422, "Invalid");
    assert_eq!(
        sideways.1["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \
         \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
    // A `fieldValidation` Kubernetes does not take, on the options kind of the write, whatever
    // the body says.
    let bogus = [
        ("POST", format!("{pods}?fieldValidation=Bogus"), "CreateOptions"),
        ("PUT", format!("{pods}/p?fieldValidation=Bogus"), "UpdateOptions"),
        ("PATCH", format!("{pods}/p?fieldValidation=Bogus"), "PatchOptions"),
        ("POST", format!("{pods}/p/eviction?fieldValidation=Bogus"), "CreateOptions"),
    ];
    for (method, path, kind) in bogus {
        let merge = Some("application/merge-patch+json");
        let reply = server.send_raw(method, &path, merge, b"{}".to_vec());
        assert_status(&reply, 422, "Invalid");
        assert_eq!(
            reply.1["message"],
            format!(
                "{kind}.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \
                 \"Bogus\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            ),
            "{method} {path}"
        );
    }
    // 400: a DeleteOptions body whose field has the wrong type, as the decoder refuses it.
    let typed = br#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":"soon"}"#;
    let mistyped = server.send_raw("DELETE", &format!("{pods}/p"), None, typed.to_vec());
    assert_status(&mistyped, 400, "BadRequest");
    assert!(
        mistyped.1["message"].as_str().unwrap().ends_with(
            "json: cannot unmarshal string into Go struct field \
             DeleteOptions.gracePeriodSeconds of type int64"
        ),
        "{}",
        mistyped.1
    );
    let dry = server.post(&format!("{pods}?dryRun=Maybe"), &pod("dry"));
    assert_status(&dry, 422, "Invalid");
    assert_eq!(dry.1["details"]["kind"], "CreateOptions", "{}", dry.1);
    assert_eq!(dry.1["details"]["causes"][0]["field"], "dryRun", "{}", dry.1);
    // 422: a generateName no name can start with is a cause of its own, before the name's.
    let reply = server.post(
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"generateName": "Bad_"}}),
    );
    assert_status(&reply, 422, "Invalid");
    let fields = cause_fields(&reply.1);
    assert_eq!(fields, ["metadata.generateName", "metadata.name"], "{}", reply.1);
    // 422: invalid names and missing fields, with field causes.
    let reply =
        server.post(pods, &json!({"metadata": {"name": "Bad_Name"}, "spec": {"containers": []}}));
    assert_status(&reply, 422, "Invalid");
    let fields = cause_fields(&reply.1);
    assert_eq!(fields, ["metadata.name", "spec.containers"]);
    // Several causes are one line in brackets, as Kubernetes' error aggregate writes them.
    let message = reply.1["message"].as_str().unwrap();
    assert!(message.starts_with("Pod \"Bad_Name\" is invalid: [metadata.name: "), "{message}");
    assert!(message.ends_with("spec.containers: Required value]"), "{message}");
    // A PUT of a missing object is 404, except for the kinds whose update may create.
    let lease = json!({"metadata": {"name": "held"}, "spec": {"holderIdentity": "a"}});
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let (code, created) = server.put(&format!("{leases}/held"), &lease);
    assert_eq!((code, &created["spec"]["holderIdentity"]), (201, &json!("a")), "{created}");
    assert_eq!(server.put(&format!("{leases}/held"), &created).0, 200);
    // RBAC's four kinds create on update as well (kubectl replace of a new binding).
    let binding = json!({"metadata": {"name": "put-made"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "carol"}]});
    let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/put-made";
    let (code, created) = server.put(bindings, &binding);
    assert_eq!((code, &created["subjects"][0]["name"]), (201, &json!("carol")), "{created}");
    let cm = json!({"metadata": {"name": "absent"}});
    assert_status(
        &server.put("/api/v1/namespaces/default/configmaps/absent", &cm),
        404,
        "NotFound",
    );
    // A missing Content-Type and missing kind/apiVersion are fine (the Python client's habit).
    let body = serde_json::to_vec(&json!({"metadata": {"name": "py1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).unwrap();
    let (code, created) = server.send_raw("POST", pods, None, body);
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["kind"], "Pod");
    // A YAML body, which Kubernetes takes as well.
    let yaml =
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: \"1\"\n";
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, created) = server.send_raw("POST", cms, Some("application/yaml"), yaml.to_vec());
    assert_eq!((code, &created["data"]), (201, &json!({"a": "1"})), "{created}");
}

#[test]
fn list_pagination_and_selectors() {
    let server = Server::start();
    for i in 0..7 {
        let mut p = pod(&format!("p{i}"));
        p["metadata"]["labels"]["n"] = json!(i.to_string());
        assert_eq!(server.post("/api/v1/namespaces/default/pods", &p).0, 201);
    }
    let mut names = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    let mut remaining = Vec::new();
    loop {
        let (code, page) =
            server.get(&format!("/api/v1/namespaces/default/pods?limit=3&continue={token}"));
        assert_eq!(code, 200);
        pages += 1;
        remaining.push(page["metadata"]["remainingItemCount"].as_u64());
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["metadata"]["name"].as_str().unwrap().to_string()),
        );
        match page["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = t.to_string(),
            _ => break,
        }
        // A write between pages does not show up in the snapshot being paged.
        server.post("/api/v1/namespaces/default/pods", &pod(&format!("late{pages}")));
    }
    assert_eq!(pages, 3);
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4", "p5", "p6"]);
    // The list names the items' kind once: they carry none, as kube-apiserver writes them.
    let (_, page) = server.get("/api/v1/namespaces/default/pods?limit=1");
    assert_eq!((&page["kind"], &page["apiVersion"]), (&json!("PodList"), &json!("v1")));
    let item = page["items"][0].as_object().unwrap();
    assert!(!item.contains_key("kind") && !item.contains_key("apiVersion"), "{item:?}");
    assert_eq!(item["metadata"]["name"], "late1");
    // What the pages after each one hold, in the snapshot; none is left after the last.
    assert_eq!(remaining, [Some(4), Some(1), None]);
    // Across namespaces too, and in the Table form kubectl asks for. With a selector what
    // remains is not counted, as in Kubernetes.
    let (_, all) = server.get("/api/v1/pods?limit=2");
    let stored = 9; // p0-p6, late1, late2
    assert_eq!(all["metadata"]["remainingItemCount"], stored - 2, "{}", all["metadata"]);
    let table = get_table(&server, "/api/v1/namespaces/default/pods?limit=5");
    assert_eq!(table["metadata"]["remainingItemCount"], stored - 5, "{}", table["metadata"]);
    // One object's Table carries its resourceVersion, as kube-apiserver's does.
    let one = get_table(&server, "/api/v1/namespaces/default/pods/p3");
    let p3 = server.get("/api/v1/namespaces/default/pods/p3").1;
    assert_eq!(one["metadata"]["resourceVersion"], p3["metadata"]["resourceVersion"]);
    let (_, selected) = server.get("/api/v1/namespaces/default/pods?limit=2&labelSelector=n");
    assert!(selected["metadata"]["continue"].is_string(), "{}", selected["metadata"]);
    assert!(selected["metadata"].get("remainingItemCount").is_none(), "{}", selected["metadata"]);
    // A limit below one asks for no paging, as in Kubernetes.
    let (code, whole) = server.get("/api/v1/namespaces/default/pods?limit=-1");
    assert_eq!((code, whole["items"].as_array().unwrap().len()), (200, stored as usize));
    assert!(whole["metadata"].get("continue").is_none(), "{}", whole["metadata"]);
    // Boolean parameters as Kubernetes reads them: only `0` and `false` are false, a bare
    // `?watch` is a watch; a negative timeout has run out already.
    let path = "/api/v1/namespaces/default/pods";
    let (_, _, listed) = server.get_with(&format!("{path}?watch=0"), &[]);
    assert!(listed.contains("\"kind\":\"PodList\""), "{listed}");
    let (_, _, watched) = server.get_with(&format!("{path}?watch&timeoutSeconds=1"), &[]);
    let first: Value = serde_json::from_str(watched.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED", "{watched}");
    let (code, _, ended) = server.get_with(&format!("{path}?watch=yes&timeoutSeconds=-1"), &[]);
    assert_eq!(code, 200);
    // A watch (events, if any before its end), not a list.
    let events = ended.lines().map(|line| serde_json::from_str::<Value>(line).unwrap());
    assert!(events.into_iter().all(|event| event["type"].is_string()), "{ended}");
    let (_, list) = server.get("/api/v1/pods?labelSelector=n%20in%20(1,2),app%3Dweb");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    let (_, list) = server.get("/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dp3");
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let (_, list) =
        server.get("/api/v1/namespaces/default/pods?fieldSelector=status.phase!%3DPending");
    assert_eq!(list["items"].as_array().unwrap().len(), 0);
}

#[test]
fn strict_field_validation_names_the_unknown_field() {
    let server = Server::start();
    let mut p = pod("strict");
    p["spec"]["bogus"] = json!(1);
    p["spec"]["containers"][0]["imagePullPolisy"] = json!("Always");
    let reply = server.post("/api/v1/namespaces/default/pods?fieldValidation=Strict", &p);
    assert_status(&reply, 400, "BadRequest");
    let message = reply.1["message"].as_str().unwrap();
    assert!(
        message.contains("spec.bogus") && message.contains("spec.containers[0].imagePullPolisy"),
        "{message}"
    );
    // Warn (the default) accepts the object and says what it dropped in a Warning header.
    let response =
        server.http.post(server.url("/api/v1/namespaces/default/pods")).json(&p).send().unwrap();
    assert_eq!(response.status().as_u16(), 201);
    assert!(response.headers().get("warning").is_some());
    // ... and drops them, as Kubernetes does when it decodes a built-in type; so do patches.
    let (_, stored) = server.get("/api/v1/namespaces/default/pods/strict");
    assert!(stored["spec"].get("bogus").is_none(), "{stored}");
    assert!(stored["spec"]["containers"][0].get("imagePullPolisy").is_none(), "{stored}");
    let patch = br#"{"spec":{"alsoBogus":1},"metadata":{"labels":{"kept":"yes"}}}"#.to_vec();
    let merge = Some("application/merge-patch+json");
    let (code, patched) =
        server.send_raw("PATCH", "/api/v1/namespaces/default/pods/strict", merge, patch);
    assert_eq!(code, 200, "{patched}");
    assert!(patched["spec"].get("alsoBogus").is_none(), "{patched}");
    assert_eq!(patched["metadata"]["labels"]["kept"], "yes");

    // A field given twice: refused under Strict, named in a warning under Warn (an object
    // given again is decoded into the first, as Go's decoder does), as Kubernetes has it.
    let twice = br#"{"metadata":{"name":"twice","labels":{"a":"1"},"labels":{"b":"2"}},
        "data":{"k":"v"}}"#;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let json = Some("application/json");
    let strict = format!("{configmaps}?fieldValidation=Strict");
    let reply = server.send_raw("POST", &strict, json, twice.to_vec());
    assert_status(&reply, 400, "BadRequest");
    let message = reply.1["message"].as_str().unwrap();
    assert!(message.contains(r#"duplicate field "metadata.labels""#), "{message}");
    let response = server
        .http
        .post(server.url(configmaps))
        .header("content-type", "application/json")
        .body(twice.to_vec())
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let warning = response.headers().get("warning").unwrap().to_str().unwrap().to_string();
    assert_eq!(warning, r#"299 - "duplicate field \"metadata.labels\"""#);
    let (_, stored) = server.get(&format!("{configmaps}/twice"));
    assert_eq!(stored["metadata"]["labels"], json!({"a": "1", "b": "2"}), "{stored}");
    // A YAML key given twice: the same, the last value kept (YAML's mappings are replaced).
    let yaml_twice =
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice-yaml\ndata:\n  a: b\n  a: c\n";
    let yaml = Some("application/yaml");
    let reply = server.send_raw("POST", &strict, yaml, yaml_twice.to_vec());
    assert_status(&reply, 400, "BadRequest");
    let message = reply.1["message"].as_str().unwrap();
    assert!(message.contains(r#"duplicate field "data.a""#), "{message}");
    let reply = server.send_raw("POST", configmaps, yaml, yaml_twice.to_vec());
    assert_eq!(reply.0, 201, "{}", reply.1);
    assert_eq!(reply.1["data"], json!({"a": "c"}));

    // A patch's own repeated fields, and a JSON patch operation's unknown or repeated members,
    // come before the patched object's unknown fields: refused under Strict (422 on `patch`),
    // warned about under Warn, in Kubernetes' words and order; the last repeat wins.
    let twice = format!("{configmaps}/twice");
    let patches = [
        (
            "application/merge-patch+json",
            br#"{"data":{"q":"1","q":"2"},"bogus":1}"#.to_vec(),
            vec![r#"duplicate field "data.q""#, r#"unknown field "bogus""#],
        ),
        (
            "application/strategic-merge-patch+json",
            br#"{"data":{"q":"1","q":"2"}}"#.to_vec(),
            vec![r#"duplicate field "data.q""#],
        ),
        (
            "application/json-patch+json",
            br#"[{"op":"add","path":"/data/q","value":"2","foo":"bar"},
                {"op":"add","path":"/data/x","path":"/bogus","value":"1"}]"#
                .to_vec(),
            vec![
                r#"json patch unknown field "[0].foo""#,
                r#"json patch duplicate field "[1].path""#,
                r#"unknown field "bogus""#,
            ],
        ),
    ];
    for (patch_type, patch, findings) in patches {
        let strictly = format!("{twice}?fieldValidation=Strict");
        let reply = server.send_raw("PATCH", &strictly, Some(patch_type), patch.clone());
        assert_status(&reply, 422, "Invalid");
        let message = reply.1["details"]["causes"][0]["message"].as_str().unwrap();
        let decoding = format!("\": strict decoding error: {}", findings.join(", "));
        assert!(message.ends_with(&decoding), "{patch_type}: {message}");
        assert_eq!(server.get(&twice).1["data"].get("q"), None, "{patch_type}");
        let response = server
            .http
            .patch(server.url(&twice))
            .header("content-type", patch_type)
            .body(patch)
            .send()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{patch_type}");
        let warnings: Vec<&str> =
            response.headers().get_all("warning").iter().map(|w| w.to_str().unwrap()).collect();
        let expected: Vec<String> = findings
            .iter()
            .map(|finding| format!("299 - \"{}\"", finding.replace('"', "\\\"")))
            .collect();
        assert_eq!(warnings, expected, "{patch_type}");
        let patched: Value = response.json().unwrap();
        assert_eq!(patched["data"]["q"], "2", "{patch_type}: {patched}");
        assert_eq!(patched.get("bogus"), None, "{patch_type}: {patched}");
        let undo = br#"{"data":{"q":null}}"#.to_vec();
        assert_eq!(server.send_raw("PATCH", &twice, merge, undo).0, 200);
    }
}

#[test]
fn values_of_the_wrong_type_are_refused_and_not_stored() {
    let server = Server::start();
    let configmaps = "/api/v1/namespaces/default/configmaps";
    // A create or an update with a number where the type has a string: 400, as Kubernetes'
    // decoder answers, whatever the field validation; nothing is stored.
    let bad = json!({"metadata": {"name": "typed"}, "data": {"count": 3}});
    for validation in ["", "?fieldValidation=Strict", "?fieldValidation=Ignore"] {
        let reply = server.post(&format!("{configmaps}{validation}"), &bad);
        assert_status(&reply, 400, "BadRequest");
        let message = reply.1["message"].as_str().unwrap();
        assert!(
            message.contains("cannot unmarshal number into Go struct field ConfigMap.data"),
            "{message}"
        );
    }
    assert_eq!(server.get(&format!("{configmaps}/typed")).0, 404);
    let secret = json!({"metadata": {"name": "s"}, "data": {"key": "not base64!"}});
    let reply = server.post("/api/v1/namespaces/default/secrets", &secret);
    assert_status(&reply, 400, "BadRequest");
    assert!(reply.1["message"].as_str().unwrap().contains("illegal base64 data"), "{}", reply.1);
    let mut bad_port = pod("port");
    bad_port["spec"]["containers"][0]["ports"] = json!([{"containerPort": "80"}]);
    let reply = server.post("/api/v1/namespaces/default/pods", &bad_port);
    assert_status(&reply, 400, "BadRequest");
    assert!(reply.1["message"].as_str().unwrap().contains("of type int32"), "{}", reply.1);
    // A scale's replicas as text: 400 from the decoder of Scale; the count is unchanged.
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let rc = json!({"metadata": {"name": "typed-rc"}, "spec": {"replicas": 0,
        "selector": {"app": "t"}, "template": {"metadata": {"labels": {"app": "t"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    assert_eq!(server.post(rcs, &rc).0, 201);
    let scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "typed-rc", "namespace": "default"}, "spec": {"replicas": "3"}});
    let reply = server.put(&format!("{rcs}/typed-rc/scale"), &scale);
    assert_status(&reply, 400, "BadRequest");
    assert!(reply.1["message"].as_str().unwrap().contains("of type int32"), "{}", reply.1);
    assert_eq!(server.get(&format!("{rcs}/typed-rc")).1["spec"]["replicas"], 0);
    // A patch that leaves replicas as text: 422 on `patch`, as a resource's patch is.
    let patch = br#"{"spec":{"replicas":"3"}}"#.to_vec();
    let merge = Some("application/merge-patch+json");
    let reply = server.send_raw("PATCH", &format!("{rcs}/typed-rc/scale"), merge, patch);
    assert_status(&reply, 422, "Invalid");
    assert_eq!(reply.1["details"]["causes"][0]["field"], "patch", "{}", reply.1);
    assert!(reply.1["message"].as_str().unwrap().contains("of type int32"), "{}", reply.1);
    assert_eq!(server.get(&format!("{rcs}/typed-rc")).1["spec"]["replicas"], 0);
    let mut renamed = scale.clone();
    renamed["metadata"]["name"] = json!("other");
    renamed["spec"]["replicas"] = json!(2);
    let reply = server.put(&format!("{rcs}/typed-rc/scale"), &renamed);
    assert_status(&reply, 400, "BadRequest");
    assert_eq!(server.get(&format!("{rcs}/typed-rc")).1["spec"]["replicas"], 0);
    // A PUT's body must name its object, the scale's as the object's own (Kubernetes'
    // `checkName`); nothing is filled in from the URL.
    let unnamed_scale =
        json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "spec": {"replicas": 2}});
    let unnamed_rc = json!({"spec": {"replicas": 2}});
    for (path, unnamed) in
        [(format!("{rcs}/typed-rc/scale"), unnamed_scale), (format!("{rcs}/typed-rc"), unnamed_rc)]
    {
        let reply = server.put(&path, &unnamed);
        assert_status(&reply, 400, "BadRequest");
        assert_eq!(
            reply.1["message"],
            "the name of the object (typed-rc based on URL) was undeterminable: name must be \
             provided"
        );
    }
    assert_eq!(server.get(&format!("{rcs}/typed-rc")).1["spec"]["replicas"], 0);
    // An eviction names the pod of its URL.
    let evictions = "/api/v1/namespaces/default/pods/any/eviction";
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {}});
    let reply = server.post(evictions, &eviction);
    assert_status(&reply, 400, "BadRequest");
    assert_eq!(reply.1["message"], "name in URL does not match name in Eviction object");
    // The bodies of a binding, an eviction, a namespace's finalize and a scale are decoded
    // by their kinds' schemas, as a resource's: a value of the wrong type is 400, and an
    // unknown field too under Strict.
    let bindings = "/api/v1/namespaces/default/pods/any/binding";
    let finalize = "/api/v1/namespaces/default/finalize";
    let tokens = "/api/v1/namespaces/default/serviceaccounts/default/token";
    let scales = format!("{rcs}/typed-rc/scale");
    let typed = [
        (
            bindings,
            json!({"metadata": {"name": "any"}, "target": {"name": 7}}),
            "Binding in version \"v1\" cannot be handled as a Binding: json: cannot unmarshal \
             number into Go struct field ObjectReference.target.name of type string",
        ),
        (
            evictions,
            json!({"metadata": {"name": "any"}, "deleteOptions": {"gracePeriodSeconds": "0"}}),
            "Eviction in version \"v1\" cannot be handled as a Eviction: json: cannot unmarshal \
             string into Go struct field DeleteOptions.deleteOptions.gracePeriodSeconds of type \
             int64",
        ),
        (
            finalize,
            json!({"metadata": {"name": "default", "labels": "x"}}),
            "Namespace in version \"v1\" cannot be handled as a Namespace: json: cannot \
             unmarshal string into Go struct field ObjectMeta.metadata.labels of type \
             map[string]string",
        ),
        (
            tokens,
            json!({"spec": {"audiences": "a"}}),
            "TokenRequest in version \"v1\" cannot be handled as a TokenRequest: json: cannot \
             unmarshal string into Go struct field TokenRequestSpec.spec.audiences of type \
             []string",
        ),
    ];
    for (path, body, message) in typed {
        let reply =
            if path == finalize { server.put(path, &body) } else { server.post(path, &body) };
        assert_status(&reply, 400, "BadRequest");
        assert_eq!(reply.1["message"], message, "{path}");
    }
    // A token request naming another account than its URL's is 422; another namespace is
    // 400, as the API server's create handler refuses any object's.
    let other = server.post(tokens, &json!({"metadata": {"name": "other"}, "spec": {}}));
    assert_status(&other, 422, "Invalid");
    assert_eq!(
        other.1["message"],
        "TokenRequest.authentication.k8s.io \"default\" is invalid: metadata.name: Invalid \
         value: \"other\": must match the service account name if specified"
    );
    let elsewhere = server.post(tokens, &json!({"metadata": {"namespace": "kube-system"}}));
    assert_status(&elsewhere, 400, "BadRequest");
    let strict = [
        (
            bindings,
            "Binding",
            json!({"metadata": {"name": "any"}, "target": {"name": "n"}, "extra": 1}),
        ),
        (
            evictions,
            "Eviction",
            json!({"metadata": {"name": "any"}, "deleteOptions": {"extra": 1}}),
        ),
        (finalize, "Namespace", json!({"metadata": {"name": "default"}, "extra": 1})),
        (tokens, "TokenRequest", json!({"spec": {"audiences": ["a"], "extra": 1}})),
        (
            &scales,
            "Scale",
            json!({"metadata": {"name": "typed-rc"}, "spec": {"replicas": 1}, "extra": 1}),
        ),
    ];
    for (path, kind, body) in strict {
        let strictly = format!("{path}?fieldValidation=Strict");
        let put = path == finalize || path == scales;
        let reply = if put { server.put(&strictly, &body) } else { server.post(&strictly, &body) };
        assert_status(&reply, 400, "BadRequest");
        let message = reply.1["message"].as_str().unwrap();
        // As Kubernetes' decoder errors are worded once they reach the handler.
        let decoding = format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: strict decoding error: unknown field"
        );
        assert!(message.starts_with(&decoding), "{path}: {message}");
    }
    assert_eq!(server.get(&format!("{rcs}/typed-rc")).1["spec"]["replicas"], 0);
    // Under Strict, a patch leaving a field its kind does not declare is 422 on `patch`, as
    // `kubectl apply` (client-side, which patches with Strict) has it; otherwise it is dropped.
    let configmaps = "/api/v1/namespaces/default/configmaps";
    assert_eq!(server.post(configmaps, &json!({"metadata": {"name": "patched"}})).0, 201);
    let merge = Some("application/merge-patch+json");
    let patch = br#"{"data":{"a":"1"},"bogus":{"x":1}}"#.to_vec();
    let strictly = format!("{configmaps}/patched?fieldValidation=Strict");
    let reply = server.send_raw("PATCH", &strictly, merge, patch.clone());
    assert_status(&reply, 422, "Invalid");
    assert_eq!(reply.1["details"]["causes"][0]["field"], "patch", "{}", reply.1);
    // As Kubernetes' patch handler: no kind or name, the patched object the invalid value.
    let message = reply.1["details"]["causes"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("Invalid value: \"{\\\"apiVersion\\\":\\\"v1\\\","), "{message}");
    assert!(message.ends_with("\": strict decoding error: unknown field \"bogus\""), "{message}");
    assert!(reply.1["details"].get("kind").is_none(), "{}", reply.1);
    let top = reply.1["message"].as_str().unwrap();
    assert!(top.starts_with(" \"\" is invalid: patch: Invalid value: "), "{top}");
    let reply = server.send_raw(
        "PATCH",
        &strictly,
        Some("application/strategic-merge-patch+json"),
        patch.clone(),
    );
    assert_status(&reply, 422, "Invalid");
    // A strategic merge patch's invalid value is the patch, printed as Go prints its map.
    let message = reply.1["details"]["causes"][0]["message"].as_str().unwrap();
    let printed = "Invalid value: \"map[bogus:map[x:1] data:map[a:1]]\": strict decoding error";
    assert!(message.starts_with(printed), "{message}");
    let reply = server.send_raw("PATCH", &format!("{configmaps}/patched"), merge, patch);
    assert_eq!(reply.0, 200, "{}", reply.1);
    assert_eq!(reply.1.get("bogus"), None);
    assert_eq!(reply.1["data"]["a"], "1");
    let scale = br#"{"spec":{"replicas":1,"bogus":1}}"#.to_vec();
    let reply = server.send_raw(
        "PATCH",
        &format!("{rcs}/typed-rc/scale?fieldValidation=Strict"),
        merge,
        scale,
    );
    assert_status(&reply, 422, "Invalid");
    assert_eq!(server.get(&format!("{rcs}/typed-rc")).1["spec"]["replicas"], 0);
    // Warned about (the default), as a patch of the object itself is.
    let patch = r#"{"spec":{"replicas":0,"bogus":1}}"#;
    let args = ["patch", "rc", "typed-rc", "--subresource=scale", "--type=merge", "-p", patch];
    let (ok, _, err) = server.kubectl().run(&args);
    assert!(ok && err.contains("Warning: unknown field \"spec.bogus\""), "{err}");
    // A DELETE's body, when there is one, carries all its options: the query's are not read
    // (a `null` body is no body).
    let configmaps = "/api/v1/namespaces/default/configmaps";
    for name in ["dry-in-query", "null-body"] {
        assert_eq!(server.post(configmaps, &json!({"metadata": {"name": name}})).0, 201);
    }
    let body = br#"{"kind":"DeleteOptions","apiVersion":"v1"}"#.to_vec();
    let path = format!("{configmaps}/dry-in-query?dryRun=All");
    assert_eq!(server.send_raw("DELETE", &path, None, body).0, 200);
    assert_eq!(server.get(&format!("{configmaps}/dry-in-query")).0, 404);
    let path = format!("{configmaps}/null-body");
    assert_eq!(server.send_raw("DELETE", &path, None, b"null".to_vec()).0, 200);
    assert_eq!(server.get(&path).0, 404);
    // A quantity that is not one does not decode either, in any kind that has quantities.
    let quotas = "/api/v1/namespaces/default/resourcequotas";
    let quota = json!({"metadata": {"name": "q"}, "spec": {"hard": {"cpu": "lots"}}});
    let reply = server.post(quotas, &quota);
    assert_status(&reply, 400, "BadRequest");
    let message = reply.1["message"].as_str().unwrap();
    assert!(message.contains("quantities must match the regular expression"), "{message}");
    assert_eq!(server.get(&format!("{quotas}/q")).0, 404);

    let good = json!({"metadata": {"name": "typed", "labels": null}, "data": {"count": "3"}});
    assert_eq!(server.post(configmaps, &good).0, 201);
    let (_, mut current) = server.get(&format!("{configmaps}/typed"));
    current["data"]["count"] = json!(4);
    assert_status(&server.put(&format!("{configmaps}/typed"), &current), 400, "BadRequest");
    // A patch whose result has the wrong type: 422 on the field `patch`, as Kubernetes answers.
    let merge = Some("application/merge-patch+json");
    let patch = br#"{"data":{"count":5}}"#.to_vec();
    let reply = server.send_raw("PATCH", &format!("{configmaps}/typed"), merge, patch);
    assert_status(&reply, 422, "Invalid");
    assert_eq!(reply.1["details"]["causes"][0]["field"], "patch", "{}", reply.1);
    let apply = Some("application/apply-patch+yaml");
    let config = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typed}\ndata: {count: 6}\n";
    let path = format!("{configmaps}/typed?fieldManager=test");
    assert_status(&server.send_raw("PATCH", &path, apply, config.to_vec()), 400, "BadRequest");
    assert_eq!(server.get(&format!("{configmaps}/typed")).1["data"]["count"], "3");
}

/// What Kubernetes' Go types leave out once decoded is left out here too: `null` fields,
/// empty lists and maps that are not required, and the zeros of scalars that are not pointers
/// in Go, in creates, updates and patched objects.
#[test]
fn nulls_and_empty_optional_lists_are_left_out() {
    let server = Server::start();
    let pods = "/api/v1/namespaces/default/pods";
    let mut sent = pod("sparse");
    sent["metadata"]["annotations"] = Value::Null;
    sent["spec"]["nodeSelector"] = json!({});
    sent["spec"]["hostname"] = Value::Null;
    sent["spec"]["hostNetwork"] = json!(false);
    sent["spec"]["subdomain"] = json!("");
    sent["spec"]["enableServiceLinks"] = json!(false);
    sent["spec"]["containers"][0]["args"] = json!([]);
    sent["spec"]["containers"][0]["env"] = Value::Null;
    sent["spec"]["containers"][0]["tty"] = json!(false);
    let (code, created) = server.post(pods, &sent);
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"].get("annotations"), None, "{created}");
    for field in ["nodeSelector", "hostname", "hostNetwork", "subdomain"] {
        assert_eq!(created["spec"].get(field), None, "{created}");
    }
    // A pointer's zero is a value of its own.
    assert_eq!(created["spec"]["enableServiceLinks"], false, "{created}");
    assert_eq!(created["spec"]["containers"][0].get("tty"), None, "{created}");
    let container = &created["spec"]["containers"][0];
    assert!(container.get("args").is_none() && container.get("env").is_none(), "{container}");
    // (A pod's spec is immutable but for images and added tolerations: an empty list where
    // there was none is no change.)
    let mut updated = created.clone();
    updated["spec"]["containers"][0]["args"] = json!([]);
    updated["spec"]["containers"][0]["image"] = json!("kplane/agnhost");
    let (code, updated) = server.put(&format!("{pods}/sparse"), &updated);
    assert_eq!((code, updated["spec"]["containers"][0].get("args")), (200, None), "{updated}");
    let merge = Some("application/merge-patch+json");
    let patch = br#"{"metadata":{"labels":{"app":null}},"spec":{"nodeSelector":{}}}"#.to_vec();
    let (code, patched) = server.send_raw("PATCH", &format!("{pods}/sparse"), merge, patch);
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"].get("labels"), None, "{patched}");
    assert_eq!(patched["spec"].get("nodeSelector"), None, "{patched}");
    let patch = br#"{"status":{"message":"","podIP":""}}"#.to_vec();
    let status = format!("{pods}/sparse/status");
    let (code, patched) = server.send_raw("PATCH", &status, merge, patch);
    assert_eq!(code, 200, "{patched}");
    let status = patched["status"].as_object().unwrap();
    assert!(!status.contains_key("message") && !status.contains_key("podIP"), "{patched}");
}

#[test]
fn delete_collection_honours_selectors() {
    let server = Server::start();
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut p = pod(name);
        p["metadata"]["labels"]["app"] = json!(app);
        assert_eq!(server.post("/api/v1/namespaces/default/pods", &p).0, 201);
    }
    let (code, deleted) = server.delete("/api/v1/namespaces/default/pods?labelSelector=app%3Dx");
    assert_eq!(code, 200, "{deleted}");
    assert_eq!(deleted["items"].as_array().unwrap().len(), 2);
    let (_, left) = server.get("/api/v1/namespaces/default/pods");
    let names: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c"]);
}

/// With a `limit`, a deletecollection deletes one page and hands back its continue token, as
/// Kubernetes' does: a client deleting in batches never deletes more than it asked for.
#[test]
fn delete_collection_with_a_limit_deletes_one_page() {
    let server = Server::start();
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let mut created = Vec::new();
    for name in ["d1", "d2", "d3"] {
        let map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        let (code, map) = server.post(configmaps, &map);
        assert_eq!(code, 201);
        created.push(map["metadata"]["resourceVersion"].clone());
    }
    let names = |list: &Value| -> Vec<String> {
        let items = list["items"].as_array().unwrap().iter();
        items.map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    let (code, first) = server.delete(&format!("{configmaps}?limit=2"));
    assert_eq!(code, 200, "{first}");
    assert_eq!(names(&first), ["d1", "d2"]);
    // The page as it was listed, before its deletes, as Kubernetes answers.
    assert_eq!(first["items"][0]["metadata"]["resourceVersion"], created[0]);
    assert_eq!(first["items"][1]["metadata"]["resourceVersion"], created[1]);
    assert_eq!(first["metadata"]["resourceVersion"], created[2]);
    assert_eq!(first["metadata"]["remainingItemCount"], 1, "{first}");
    let token = first["metadata"]["continue"].as_str().expect("a continue token").to_string();
    assert_eq!(names(&server.get(configmaps).1), ["d3"], "only the page is gone");
    let (code, rest) = server.delete(&format!("{configmaps}?limit=2&continue={token}"));
    assert_eq!(code, 200, "{rest}");
    assert_eq!(names(&rest), ["d3"]);
    assert!(rest["metadata"].get("continue").is_none_or(|c| c == ""), "{rest}");
    assert!(names(&server.get(configmaps).1).is_empty());
}

/// A deletecollection's continue token is a list's: deleting goes on from where it points,
/// and one that cannot be read deletes nothing (400), as Kubernetes' `DeleteCollection` lists.
#[test]
fn delete_collection_goes_on_from_its_continue_token() {
    let server = Server::start();
    let configmaps = "/api/v1/namespaces/default/configmaps";
    for name in ["e1", "e2", "e3"] {
        let map = json!({"metadata": {"name": name}});
        assert_eq!(server.post(configmaps, &map).0, 201);
    }
    let names = |list: &Value| -> Vec<String> {
        let items = list["items"].as_array().unwrap().iter();
        items.map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    let (code, refused) = server.delete(&format!("{configmaps}?continue=garbage"));
    assert_eq!(code, 400, "{refused}");
    assert_eq!(names(&server.get(configmaps).1), ["e1", "e2", "e3"], "nothing deleted");
    let (_, first) = server.get(&format!("{configmaps}?limit=1"));
    let token = first["metadata"]["continue"].as_str().expect("a continue token").to_string();
    let (code, deleted) = server.delete(&format!("{configmaps}?continue={token}"));
    assert_eq!(code, 200, "{deleted}");
    assert_eq!(names(&deleted), ["e2", "e3"]);
    assert_eq!(names(&server.get(configmaps).1), ["e1"]);
}

/// As in Kubernetes, a collection across namespaces is only read: no create without a
/// namespace, no one request deleting in every namespace; and namespaces themselves have no
/// deletecollection.
#[test]
fn no_write_spans_every_namespace() {
    let server = Server::start();
    assert_eq!(
        server
            .post("/api/v1/namespaces/default/configmaps", &json!({"metadata": {"name": "kept"}}))
            .0,
        201
    );
    assert_status(&server.delete("/api/v1/configmaps"), 405, "MethodNotAllowed");
    assert_status(&server.post("/api/v1/pods", &pod("nowhere")), 405, "MethodNotAllowed");
    assert_status(&server.delete("/api/v1/namespaces"), 405, "MethodNotAllowed");
    assert_eq!(server.get("/api/v1/namespaces/default/configmaps/kept").0, 200);
    assert_eq!(server.get("/api/v1/namespaces/default").0, 200);
    let (_, discovery) = server.get("/api/v1");
    let verbs = |name: &str| {
        discovery["resources"].as_array().unwrap().iter().find(|r| r["name"] == name).unwrap()
            ["verbs"]
            .clone()
    };
    assert!(!verbs("namespaces").as_array().unwrap().contains(&json!("deletecollection")));
    assert!(verbs("configmaps").as_array().unwrap().contains(&json!("deletecollection")));
}

/// A subresource serves its own verbs only: a DELETE, PUT or PATCH of a pod's `log`, `exec`,
/// `attach` or `portforward` is 405 and leaves the pod alone (it deleted, replaced or patched
/// the pod, past what RBAC grants on `pods`).
#[test]
fn subresources_refuse_the_methods_they_do_not_serve() {
    let server = Server::start_with_env(&[("KPLANE_AGENT__ENABLED", "false")]);
    let pods = "/api/v1/namespaces/default/pods";
    assert_eq!(server.post(pods, &pod("kept")).0, 201);
    let merge = b"{\"metadata\":{\"labels\":{\"patched\":\"yes\"}}}".to_vec();
    for sub in ["log", "exec", "attach", "portforward"] {
        let path = format!("{pods}/kept/{sub}");
        assert_status(&server.delete(&path), 405, "MethodNotAllowed");
        assert_status(&server.put(&path, &pod("kept")), 405, "MethodNotAllowed");
        let patched =
            server.send_raw("PATCH", &path, Some("application/merge-patch+json"), merge.clone());
        assert_status(&patched, 405, "MethodNotAllowed");
    }
    assert_status(&server.post(&format!("{pods}/kept/log"), &json!({})), 405, "MethodNotAllowed");
    assert_status(&server.delete(&format!("{pods}/kept/binding")), 405, "MethodNotAllowed");
    let (code, kept) = server.get(&format!("{pods}/kept"));
    assert_eq!((code, &kept["metadata"]["labels"]), (200, &json!({"app": "web"})), "{kept}");
}

/// Kubernetes' update rules for ConfigMaps and Secrets: once `immutable`, their data stays;
/// a Secret's type never changes; a uid in a replace must be the object's.
#[test]
fn immutable_content_types_and_uids_are_kept_on_update() {
    let server = Server::start();
    let cms = "/api/v1/namespaces/default/configmaps";
    let frozen = json!({"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": true});
    let (_, created) = server.post(cms, &frozen);
    let mut changed = frozen.clone();
    changed["data"]["a"] = json!("2");
    let reply = server.put(&format!("{cms}/frozen"), &changed);
    assert_status(&reply, 422, "Invalid");
    assert_eq!(reply.1["details"]["causes"][0]["field"], "data", "{}", reply.1);
    let mut labelled = frozen.clone();
    labelled["metadata"]["labels"] = json!({"team": "a"});
    assert_eq!(server.put(&format!("{cms}/frozen"), &labelled).0, 200, "metadata may change");
    let mut other_uid = labelled.clone();
    other_uid["metadata"]["uid"] = json!("not-the-uid");
    assert_status(&server.put(&format!("{cms}/frozen"), &other_uid), 409, "Conflict");
    other_uid["metadata"]["uid"] = created["metadata"]["uid"].clone();
    assert_eq!(server.put(&format!("{cms}/frozen"), &other_uid).0, 200);

    let secrets = "/api/v1/namespaces/default/secrets";
    let secret =
        json!({"metadata": {"name": "s"}, "type": "Opaque", "stringData": {"password": "hunter2"}});
    let (code, created) = server.post(secrets, &secret);
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"], json!({"password": "aHVudGVyMg=="}), "stringData goes into data");
    assert!(created.get("stringData").is_none(), "{created}");
    let mut retyped = created.clone();
    retyped["type"] = json!("kubernetes.io/basic-auth");
    let reply = server.put(&format!("{secrets}/s"), &retyped);
    assert_status(&reply, 422, "Invalid");
    assert_eq!(reply.1["details"]["causes"][0]["field"], "type", "{}", reply.1);
}

#[test]
fn pod_specs_are_immutable_but_images() {
    let server = Server::start();
    let pods = "/api/v1/namespaces/default/pods";
    let (_, created) = server.post(pods, &crate::util::pod("fixed"));
    let mut ports = created.clone();
    ports["spec"]["containers"][0]["ports"] = serde_json::json!([{"containerPort": 81}]);
    let reply = server.put(&format!("{pods}/fixed"), &ports);
    assert_status(&reply, 422, "Invalid");
    assert_eq!(reply.1["details"]["causes"][0]["reason"], "FieldValueForbidden", "{}", reply.1);
    let mut image = created.clone();
    image["spec"]["containers"][0]["image"] = serde_json::json!("kplane/agnhost");
    assert_eq!(server.put(&format!("{pods}/fixed"), &image).0, 200);
}

#[test]
fn resource_version_semantics_of_reads() {
    // Ten recent changes kept: the store's history is as long as the watch window.
    let server = Server::start_with_env(&[("KPLANE_WATCH__WINDOW_EVENTS", "10")]);
    let cms = "/api/v1/namespaces/default/configmaps";
    let (_, created) = server.post(cms, &serde_json::json!({"metadata": {"name": "one"}}));
    let created_at = created["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let (_, list) = server.get(cms);
    let rv: u64 = list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let exact = format!("{cms}?resourceVersion={rv}&resourceVersionMatch=Exact");
    let (code, at) = server.get(&exact);
    assert_eq!((code, at["items"].as_array().unwrap().len()), (200, 1), "{at}");
    assert_eq!(at["metadata"]["resourceVersion"], rv.to_string());
    // Digits only, as Go reads a resourceVersion; a watch's options are checked as a list's.
    let (code, refused) = server.get(&format!("{cms}?resourceVersion=%2B{rv}"));
    assert_eq!(
        (code, &refused["message"]),
        (400, &json!(format!("invalid resource version: \"+{rv}\"")))
    );
    let (code, refused) = server.get(&format!("{cms}?watch=1&limit=abc&timeoutSeconds=1"));
    assert_eq!((code, &refused["reason"]), (400, &json!("BadRequest")), "{refused}");
    // Later changes (a create, a change, a delete) are undone for a list at `rv`, as etcd
    // serves a revision it has not compacted; so is a resourceVersion with a limit and no match.
    server.post(cms, &serde_json::json!({"metadata": {"name": "two"}}));
    server.post(cms, &serde_json::json!({"metadata": {"name": "three"}}));
    let changed = serde_json::json!({"metadata": {"name": "one"}, "data": {"k": "v"}});
    assert_eq!(server.put(&format!("{cms}/one"), &changed).0, 200);
    assert_eq!(server.delete(&format!("{cms}/three")).0, 200);
    let names = |list: &Value| -> Vec<String> {
        let items = list["items"].as_array().unwrap().iter();
        items.map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    for at_rv in [exact.clone(), format!("{cms}?resourceVersion={rv}&limit=5")] {
        let (code, at) = server.get(&at_rv);
        assert_eq!((code, names(&at)), (200, vec!["one".to_string()]), "{at_rv}: {at}");
        assert_eq!(at["metadata"]["resourceVersion"], rv.to_string());
        assert_eq!(at["items"][0]["metadata"]["resourceVersion"], created_at.as_str());
        assert!(at["items"][0].get("data").is_none(), "{at}");
    }
    let (_, paged) = server.get(&format!("{cms}?resourceVersion={rv}&limit=1"));
    assert_eq!(names(&paged), ["one"]);
    // Past the history (ten changes later), the state at `rv` is gone: 410, as outside
    // etcd's compaction window.
    for i in 0..10 {
        server.post(cms, &serde_json::json!({"metadata": {"name": format!("later-{i}")}}));
    }
    let expired = server.get(&exact);
    assert_status(&expired, 410, "Expired");
    assert_eq!(expired.1["message"], "The resourceVersion for the provided list is too old.");
    let (code, newer) =
        server.get(&format!("{cms}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"));
    assert_eq!((code, newer["items"].as_array().unwrap().len()), (200, 12));
    assert_eq!(server.get(&format!("{cms}?resourceVersion=0")).0, 200);
    let future = rv + 1_000_000;
    assert_status(&server.get(&format!("{cms}?resourceVersion={future}")), 504, "Timeout");
    assert_status(&server.get(&format!("{cms}/one?resourceVersion={future}")), 504, "Timeout");
    // Options that do not go together are 422 on ListOptions, as Kubernetes answers them.
    assert_status(&server.get(&format!("{cms}?resourceVersionMatch=Exact")), 422, "Invalid");
    assert_status(
        &server.get(&format!("{cms}?resourceVersion=0&resourceVersionMatch=Exact")),
        422,
        "Invalid",
    );
    let (code, unsupported) =
        server.get(&format!("{cms}?resourceVersion=1&resourceVersionMatch=Sometimes"));
    assert_eq!(code, 422, "{unsupported}");
    assert_eq!(unsupported["details"]["causes"][0]["reason"], "FieldValueNotSupported");
    assert_eq!(unsupported["details"]["group"], "meta.k8s.io");
    // Every problem at once: a match with a continue token and without a revision.
    let (code, both) = server.get(&format!("{cms}?resourceVersionMatch=Exact&continue=abc"));
    assert_eq!(code, 422, "{both}");
    assert_eq!(
        both["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: \
         resourceVersionMatch is forbidden unless resourceVersion is provided, \
         resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is \
         provided]"
    );
    // A list's sendInitialEvents is told last, with the others.
    let (code, initial) =
        server.get(&format!("{cms}?sendInitialEvents=true&resourceVersionMatch=Exact"));
    assert_eq!(code, 422, "{initial}");
    let causes = initial["details"]["causes"].as_array().unwrap();
    let fields: Vec<&str> = causes.iter().filter_map(|c| c["field"].as_str()).collect();
    assert_eq!(fields, ["resourceVersionMatch", "sendInitialEvents"], "{initial}");
}

#[test]
fn an_expired_continue_token_is_410() {
    // A store history of 50 changes.
    let server = Server::start_with_env(&[("KPLANE_WATCH__WINDOW_EVENTS", "50")]);
    let cms = "/api/v1/namespaces/default/configmaps";
    for i in 0..3 {
        server.post(cms, &serde_json::json!({"metadata": {"name": format!("c{i}")}}));
    }
    let (_, first) = server.get(&format!("{cms}?limit=1"));
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    // Each shard keeps 256 list snapshots: 260 later paginated lists, each after a write,
    // push the first one out; and the 260 writes are more than the history can undo.
    for i in 0..260 {
        server.post(cms, &serde_json::json!({"metadata": {"name": format!("later{i}")}}));
        server.get(&format!("{cms}?limit=1"));
    }
    let reply = server.get(&format!("{cms}?limit=1&continue={token}"));
    assert_status(&reply, 410, "Expired");
    // As Kubernetes: the answer says the list would be inconsistent, and gives a token that
    // goes on from the same place in the latest state, whose pages then hold together.
    let message = reply.1["message"].as_str().unwrap();
    assert!(message.contains("or use the continue token in this response"), "{message}");
    let latest = reply.1["metadata"]["continue"].as_str().expect("a token to go on with");
    let (code, page) = server.get(&format!("{cms}?limit=2&continue={latest}"));
    assert_eq!(code, 200, "{page}");
    let names: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c1", "c2"], "after c0, in the latest state");
    assert_eq!(page["metadata"]["remainingItemCount"], 260, "counted in the latest state");
    let next = page["metadata"]["continue"].as_str().unwrap();
    let (code, rest) = server.get(&format!("{cms}?limit=1000&continue={next}"));
    assert_eq!((code, rest["items"].as_array().unwrap().len()), (200, 260), "{rest}");
    assert_eq!(rest["metadata"]["resourceVersion"], page["metadata"]["resourceVersion"]);
}

/// An idle connection stays open for a client that comes back after a pause, as
/// kube-apiserver keeps one for 90 s (actix's default, 5 s, closed it under the client).
#[test]
fn an_idle_connection_is_kept_for_a_client_that_comes_back() {
    use std::io::{Read, Write};

    let server = Server::start();
    let mut connection = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    connection.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut ask = || {
        connection.write_all(b"GET /healthz HTTP/1.1\r\nHost: kplane\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        // The answer is `ok` after its head.
        while !answer.ends_with(b"\r\n\r\nok") {
            let read = connection.read(&mut buffer).unwrap();
            assert!(read > 0, "closed: {}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&buffer[..read]);
        }
        String::from_utf8(answer).unwrap()
    };
    assert!(ask().starts_with("HTTP/1.1 200"));
    // Longer than actix's default keep-alive: the wait is what is tested.
    std::thread::sleep(Duration::from_secs(6));
    assert!(ask().starts_with("HTTP/1.1 200"));
}

#[test]
fn past_the_inflight_limit_requests_are_429_with_retry_after() {
    use std::io::{Read, Write};

    let server = Server::start_with_env(&[
        ("KPLANE_SERVER__MAX_MUTATING_REQUESTS_INFLIGHT", "1"),
        ("KPLANE_SERVER__MAX_REQUESTS_INFLIGHT", "1"),
    ]);
    let configmap = |name: &str| json!({"metadata": {"name": name}, "data": {"k": "v"}});
    let path = "/api/v1/namespaces/default/configmaps";
    // A create whose body is still arriving holds the one mutating place.
    let body = configmap("held").to_string();
    let mut held = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: kplane\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    held.write_all(head.as_bytes()).unwrap();
    held.write_all(&body.as_bytes()[..1]).unwrap();
    // In flight by kind, as kube-apiserver labels them (the metrics request is not counted).
    let inflight = |kind: &str| {
        let text = server.http.get(server.url("/metrics")).send().unwrap().text().unwrap();
        let series = format!("apiserver_current_inflight_requests{{request_kind=\"{kind}\"}}");
        metrics::gauge(&text, &series)
    };
    wait_until(Duration::from_secs(10), "the held create is in flight", || {
        inflight("mutating") == 1.0
    });
    assert_eq!(inflight("readOnly"), 0.0);

    let refused = server.http.post(server.url(path)).json(&configmap("refused")).send().unwrap();
    assert_eq!(refused.status().as_u16(), 429);
    assert_eq!(refused.headers()["Retry-After"], "1");
    let status: Value = refused.json().unwrap();
    assert_eq!(status["reason"], "TooManyRequests", "{status}");
    assert_eq!(status["details"]["retryAfterSeconds"], 1, "{status}");
    // Reads have their own limit; probes and watches are not counted.
    assert_eq!(server.get("/api/v1/namespaces/default").0, 200);
    assert_eq!(server.http.get(server.url("/readyz")).send().unwrap().status().as_u16(), 200);
    let watch = server.url("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1");
    assert_eq!(server.http.get(watch).send().unwrap().status().as_u16(), 200);

    // The held create completes; its place is free again.
    held.write_all(&body.as_bytes()[1..]).unwrap();
    let mut answer = String::new();
    held.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(server.post(path, &configmap("admitted")).0, 201);
    assert_eq!(server.get(&format!("{path}/refused")).0, 404, "a refused create stores nothing");
}

#[test]
fn updates_and_deletes_refuse_what_kubernetes_refuses() {
    let server = Server::start();
    let merge = Some("application/merge-patch+json");
    let patch = |path: &str, body: Value| {
        server.send_raw("PATCH", path, merge, body.to_string().into_bytes())
    };
    // A volume's source and mode are fixed once it is created.
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/x"}}});
    assert_eq!(server.post("/api/v1/persistentvolumes", &pv).0, 201);
    let pv1 = "/api/v1/persistentvolumes/pv1";
    let moved = patch(pv1, json!({"spec": {"hostPath": {"path": "/tmp/y"}}}));
    assert_status(&moved, 422, "Invalid");
    assert_eq!(moved.1["details"]["causes"][0]["field"], "spec.persistentvolumesource");
    let block = patch(pv1, json!({"spec": {"volumeMode": "Block"}}));
    assert_status(&block, 422, "Invalid");
    assert_eq!(block.1["details"]["causes"][0]["field"], "volumeMode", "{}", block.1);
    let relabelled = patch(
        pv1,
        json!({"metadata": {"labels": {"a": "b"}},
        "spec": {"persistentVolumeReclaimPolicy": "Delete"}}),
    );
    assert_eq!(relabelled.0, 200, "{}", relabelled.1);
    // A volume is timed from its creation.
    assert!(relabelled.1["status"]["lastPhaseTransitionTime"].is_string(), "{}", relabelled.1);

    // A Service's name is a DNS-1035 label: it starts with a letter.
    let service = json!({"metadata": {"name": "1ab"}, "spec": {"ports": [{"port": 80}]}});
    let numbered = server.post("/api/v1/namespaces/default/services", &service);
    assert_status(&numbered, 422, "Invalid");
    assert!(numbered.1["message"].as_str().unwrap().contains("a DNS-1035 label"), "{}", numbered.1);

    // An event may not own anything.
    let owned = json!({"metadata": {"name": "owned", "ownerReferences": [{"apiVersion": "v1",
        "kind": "Event", "name": "e", "uid": "1"}]}});
    let reply = server.post("/api/v1/namespaces/default/configmaps", &owned);
    assert_status(&reply, 422, "Invalid");
    assert!(reply.1["message"].as_str().unwrap().contains("/v1, Kind=Event is disallowed"));

    // The deletion fields are the server's; selfLink is never stored.
    let cms = "/api/v1/namespaces/default/configmaps";
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/x"]}});
    assert_eq!(server.post(cms, &held).0, 201);
    let grace =
        patch(&format!("{cms}/held"), json!({"metadata": {"deletionGracePeriodSeconds": 5}}));
    assert_status(&grace, 422, "Invalid");
    assert_eq!(grace.1["details"]["causes"][0]["field"], "metadata.deletionGracePeriodSeconds");
    let stamped = patch(
        &format!("{cms}/held"),
        json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}}),
    );
    assert_status(&stamped, 422, "Invalid");
    let linked = patch(&format!("{cms}/held"), json!({"metadata": {"selfLink": "/y"}}));
    assert_eq!(linked.0, 200);
    assert!(linked.1["metadata"].get("selfLink").is_none(), "{}", linked.1);
    assert!(server.get(&format!("{cms}/held")).1["metadata"].get("selfLink").is_none());

    // A patch may not move an object to another namespace (the patch handler's words).
    let moved = patch(&format!("{cms}/held"), json!({"metadata": {"namespace": "kube-system"}}));
    assert_status(&moved, 400, "BadRequest");
    assert_eq!(
        moved.1["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    // A replace naming another uid is refused on it first, whatever its resourceVersion, in
    // the words of Kubernetes' storage.
    let uid = server.get(&format!("{cms}/held")).1["metadata"]["uid"].as_str().unwrap().to_string();
    let replaced = server.put(
        &format!("{cms}/held"),
        &json!({"metadata": {"name": "held", "uid": "other", "resourceVersion": "1"}}),
    );
    assert_status(&replaced, 409, "Conflict");
    assert_eq!(
        replaced.1["message"],
        format!(
            "Operation cannot be fulfilled on configmaps \"held\": StorageError: invalid object, \
             Code: 4, Key: /registry/configmaps/default/held, ResourceVersion: 0, \
             AdditionalErrorMsg: Precondition failed: UID in precondition: other, UID in object \
             meta: {uid}"
        )
    );
    let renamed = patch(&format!("{cms}/held"), json!({"metadata": {"uid": "other"}}));
    assert_status(&renamed, 422, "Invalid");
    assert_eq!(renamed.1["details"]["causes"][0]["field"], "metadata.uid", "{}", renamed.1);
    let garbage = server.get(&format!("{cms}?limit=1&continue=garbage"));
    assert_status(&garbage, 400, "BadRequest");
    assert!(garbage.1["message"].as_str().unwrap().starts_with("invalid continue token: "));

    // A resourceVersion precondition is compared as text: one that is no number is a 409.
    let body = json!({"preconditions": {"resourceVersion": "abc"}}).to_string().into_bytes();
    let stale = server.send_raw("DELETE", &format!("{cms}/held"), Some("application/json"), body);
    assert_status(&stale, 409, "Conflict");
    let message = stale.1["message"].as_str().unwrap();
    assert!(message.contains("the ResourceVersion in the precondition (abc) does not match"));

    // orphanDependents and propagationPolicy are one option: not both, in the query either.
    let both =
        server.delete(&format!("{cms}/held?orphanDependents=true&propagationPolicy=Foreground"));
    assert_status(&both, 422, "Invalid");
    // A delete that does not remove the object at once, asked not to orphan: 202.
    let accepted = server.delete(&format!("{cms}/held?orphanDependents=false"));
    assert_eq!(accepted.0, 202, "{}", accepted.1);
    assert!(accepted.1["metadata"]["deletionTimestamp"].is_string(), "{}", accepted.1);
    // One that does (a pod on no node is marked and deleted at once): 200.
    let pods = "/api/v1/namespaces/default/pods";
    assert_eq!(server.post(pods, &crate::util::pod("unplaced")).0, 201);
    let gone = server.delete(&format!("{pods}/unplaced?orphanDependents=false"));
    assert_eq!(gone.0, 200, "{}", gone.1);

    // A list's timeoutSeconds is decoded too; a list at any revision is not paged.
    assert_status(&server.get(&format!("{cms}?timeoutSeconds=abc")), 400, "BadRequest");
    for i in 0..3 {
        assert_eq!(server.post(cms, &json!({"metadata": {"name": format!("page-{i}")}})).0, 201);
    }
    let (_, paged) = server.get(&format!("{cms}?limit=2"));
    assert_eq!(paged["items"].as_array().unwrap().len(), 2);
    assert!(paged["metadata"]["continue"].is_string());
    let (_, whole) = server.get(&format!("{cms}?limit=2&resourceVersion=0"));
    assert!(whole["items"].as_array().unwrap().len() >= 4, "{whole}");
    assert!(whole["metadata"].get("continue").is_none(), "{whole}");
}

/// The fields a 422 Status' causes name, in order.
fn cause_fields(status: &Value) -> Vec<&str> {
    let causes = status["details"]["causes"].as_array().unwrap();
    causes.iter().map(|c| c["field"].as_str().unwrap()).collect()
}

/// A service's spec and its load balancer status are checked as Kubernetes 1.32 checks them.
#[test]
fn services_are_validated_as_kubernetes_validates_them() {
    let server = Server::start();
    let services = "/api/v1/namespaces/default/services";
    let bad = json!({"metadata": {"name": "s2"}, "spec": {"type": "LoadBalancer",
        "loadBalancerSourceRanges": ["bogus"], "externalIPs": ["bogus"],
        "ports": [{"port": 80, "appProtocol": "Bad Proto"}],
        "internalTrafficPolicy": "Bogus", "externalTrafficPolicy": "Bogus",
        "trafficDistribution": "Bogus", "loadBalancerClass": "Bad Class"}});
    let reply = server.post(services, &bad);
    assert_status(&reply, 422, "Invalid");
    let fields = cause_fields(&reply.1);
    assert_eq!(
        fields,
        [
            "spec.ports[0].appProtocol",
            "spec.externalIPs[0]",
            "spec.LoadBalancerSourceRanges[0]",
            "spec.loadBalancerClass",
            "spec.externalTrafficPolicy",
            "spec.internalTrafficPolicy",
            "spec.trafficDistribution",
        ],
        "{}",
        reply.1
    );
    assert_eq!(server.get(&format!("{services}/s2")).0, 404);
    // A status with ingress on a service that is no load balancer, or a bad ingress.
    let plain = json!({"metadata": {"name": "plain"}, "spec": {"ports": [{"port": 80}]}});
    assert_eq!(server.post(services, &plain).0, 201);
    let merge = Some("application/merge-patch+json");
    let ingress = br#"{"status":{"loadBalancer":{"ingress":[{"ip":"127.0.100.9"}]}}}"#.to_vec();
    let reply = server.send_raw("PATCH", &format!("{services}/plain/status"), merge, ingress);
    assert_status(&reply, 422, "Invalid");
    assert_eq!(reply.1["details"]["causes"][0]["field"], "status.loadBalancer.ingress");
    let patch = br#"{"spec":{"type":"LoadBalancer"}}"#.to_vec();
    assert_eq!(server.send_raw("PATCH", &format!("{services}/plain"), merge, patch).0, 200);
    let bad =
        br#"{"status":{"loadBalancer":{"ingress":[{"ip":"bogus"},{"hostname":"Bad_Host"}]}}}"#;
    let reply = server.send_raw("PATCH", &format!("{services}/plain/status"), merge, bad.to_vec());
    assert_status(&reply, 422, "Invalid");
    let fields = cause_fields(&reply.1);
    assert_eq!(
        fields,
        ["status.loadBalancer.ingress[0].ip", "status.loadBalancer.ingress[1].hostname"],
        "{}",
        reply.1
    );
}

/// Owner references given twice are stored once, with a warning; a pod naming a RuntimeClass
/// (kplane serves none) or an overhead is refused by admission, as Kubernetes refuses one
/// whose class does not exist.
#[test]
fn repeated_owners_are_dropped_and_runtime_classes_refused() {
    let server = Server::start();
    let configmaps = "/api/v1/namespaces/default/configmaps";
    // An owner that exists, so that the garbage collector leaves the dependent alone.
    let (_, boss) = server.post(configmaps, &json!({"metadata": {"name": "boss"}}));
    let uid = boss["metadata"]["uid"].as_str().unwrap().to_string();
    let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "boss", "uid": uid});
    let body = json!({"metadata": {"name": "owned", "ownerReferences": [owner, owner]}});
    let response = server.http.post(server.url(configmaps)).json(&body).send().unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let warning = response.headers().get("warning").unwrap().to_str().unwrap().to_string();
    assert!(warning.contains(".metadata.ownerReferences contains duplicate entries"), "{warning}");
    assert!(warning.ends_with(&format!("duplicate UID(s) observed: {uid}\"")), "{warning}");
    let (_, stored) = server.get(&format!("{configmaps}/owned"));
    assert_eq!(stored["metadata"]["ownerReferences"], json!([owner]), "{stored}");
    // A merge patch that repeats them is stored deduplicated too, with the warning Kubernetes
    // gives after admission.
    let patch =
        serde_json::to_vec(&json!({"metadata": {"ownerReferences": [owner, owner]}})).unwrap();
    let response = server
        .http
        .patch(server.url(&format!("{configmaps}/owned")))
        .header("content-type", "application/merge-patch+json")
        .body(patch)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let warning = response.headers().get("warning").unwrap().to_str().unwrap().to_string();
    assert!(warning.contains("duplicate entries after mutating admission happens"), "{warning}");
    let patched: Value = response.json().unwrap();
    assert_eq!(patched["metadata"]["ownerReferences"], json!([owner]));
    // A JSON patch that makes the object null is refused, not a panic.
    let json_patch = Some("application/json-patch+json");
    let root = br#"[{"op":"replace","path":"","value":null}]"#.to_vec();
    let (code, reply) = server.send_raw("PATCH", &format!("{configmaps}/owned"), json_patch, root);
    assert!((400..500).contains(&code), "{code}: {reply}");

    let pods = "/api/v1/namespaces/default/pods";
    let mut classed = pod("classed");
    classed["spec"]["runtimeClassName"] = json!("gvisor");
    let reply = server.post(pods, &classed);
    assert_status(&reply, 403, "Forbidden");
    assert_eq!(
        reply.1["message"],
        "pods \"classed\" is forbidden: pod rejected: RuntimeClass \"gvisor\" not found"
    );
    let mut heavy = pod("heavy");
    heavy["spec"]["overhead"] = json!({"cpu": "100m"});
    assert_status(&server.post(pods, &heavy), 403, "Forbidden");
}

/// The API server's warnings about a pod or pod template it creates (Kubernetes 1.32's): valid
/// fields that will not do what their writer likely meant; kubectl prints them. None on a
/// pod's update.
#[test]
fn doubtful_pod_fields_are_warned_about_when_created() {
    let server = Server::start();
    let kubectl = server.kubectl();
    let file = kubectl.write(
        "doubtful.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: doubtful}\nspec:\n  nodeSelector: \
         {beta.kubernetes.io/arch: amd64}\n  containers:\n  - name: c\n    image: \
         kplane/pause\n    ports: [{containerPort: 80}, {containerPort: 80}]\n    resources: \
         {limits: {memory: 100m}}\n",
    );
    let (ok, _, stderr) = kubectl.run(&["create", "-f", file.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    for warning in [
        r#"Warning: spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use "kubernetes.io/arch" instead"#,
        r#"Warning: spec.containers[0].resources.limits[memory]: fractional byte value "100m" is invalid, must be an integer"#,
        "Warning: spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]",
    ] {
        assert!(stderr.contains(warning), "{warning} in {stderr}");
    }
    let warned = |response: reqwest::blocking::Response| -> Vec<String> {
        assert!(response.status().is_success(), "{}", response.status());
        let headers = response.headers().get_all("warning").iter();
        headers.map(|h| h.to_str().unwrap().to_string()).collect()
    };
    let pods = "/api/v1/namespaces/default/pods";
    let (_, mut stored) = server.get(&format!("{pods}/doubtful"));
    stored["metadata"]["labels"] = json!({"updated": "yes"});
    let update = server.http.put(server.url(&format!("{pods}/doubtful"))).json(&stored);
    assert_eq!(warned(update.send().unwrap()), Vec::<String>::new());
    // A generated name is checked once it is known.
    let mut dotted = pod("");
    dotted["metadata"] = json!({"generateName": "web.v1-"});
    let created = warned(server.http.post(server.url(pods)).json(&dotted).send().unwrap());
    assert_eq!(created.len(), 1, "{created:?}");
    assert!(created[0].starts_with("299 - \"metadata.name: this is used in the Pod's hostname"));
    // A ReplicationController's template, under its own path.
    let rc = json!({"metadata": {"name": "doubtful"}, "spec": {"replicas": 0,
        "selector": {"app": "d"}, "template": {"metadata": {"labels": {"app": "d"}},
            "spec": {"terminationGracePeriodSeconds": -1,
                "containers": [{"name": "c", "image": "kplane/pause"}]}}}});
    let rcs = server.url("/api/v1/namespaces/default/replicationcontrollers");
    assert_eq!(
        warned(server.http.post(rcs).json(&rc).send().unwrap()),
        ["299 - \"spec.template.spec.terminationGracePeriodSeconds: must be >= 0; negative \
          values are invalid and will be treated as 1\""]
    );
}
