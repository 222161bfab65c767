//! Response media types: what `Accept`, `?pretty` and the user agent ask for, as
//! kube-apiserver answers them.

use std::process::Command;

use serde_json::{json, Value};

use crate::util::Server;

/// curl gets indented JSON (as from Kubernetes), `?pretty=false` compact JSON, `Accept:
/// application/yaml` YAML, and a media type the API cannot write 406, on logs and watches too.
#[test]
fn json_indented_for_curl_yaml_on_request_and_406_otherwise() {
    let server = Server::start();
    let path = "/api/v1/namespaces/default/serviceaccounts/default";
    let (_, compact) = server.get(path);
    let curl = |path: &str, accept: &str| {
        let out = Command::new("curl")
            .args(["-s", "-H", &format!("Accept: {accept}"), &server.url(path)])
            .output()
            .expect("curl runs");
        String::from_utf8(out.stdout).unwrap()
    };
    let pretty = curl(path, "*/*");
    assert!(pretty.starts_with("{\n  \"apiVersion\": \"v1\",\n"), "{pretty}");
    assert_eq!(serde_json::from_str::<Value>(&pretty).unwrap(), compact);
    let plain = curl(&format!("{path}?pretty=false"), "application/json");
    assert_eq!(plain.lines().count(), 1, "{plain}");
    assert_eq!(serde_json::from_str::<Value>(&plain).unwrap(), compact);
    let (code, _, text) = server.get_with(&format!("{path}?pretty=true"), &[]);
    assert!(code == 200 && text.contains("\n  \"kind\": \"ServiceAccount\""), "{text}");

    let (code, content_type, yaml) = server.get_with(path, &[("Accept", "application/yaml")]);
    assert_eq!((code, content_type.as_str()), (200, "application/yaml"), "{yaml}");
    assert!(yaml.starts_with("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n"), "{yaml}");
    assert_eq!(serde_yaml::from_str::<Value>(&yaml).unwrap(), compact);
    // Strings a YAML 1.1 reader (go-yaml, PyYAML, kubectl) would take for something else are
    // quoted, as Kubernetes quotes them: the YAML reads back as the object.
    let data = json!({"on": "on", "n": "N", "octal": "012", "day": "2002-12-14", "time": "12:30",
        "script": "echo a\necho b\n"});
    let map = json!({"metadata": {"name": "ambiguous"}, "data": data});
    assert_eq!(server.post("/api/v1/namespaces/default/configmaps", &map).0, 201);
    let path = "/api/v1/namespaces/default/configmaps/ambiguous";
    let (_, _, yaml) = server.get_with(path, &[("Accept", "application/yaml")]);
    for quoted in [r#""on": "on""#, r#""n": "N""#, r#"octal: "012""#, r#"day: "2002-12-14""#] {
        assert!(yaml.contains(quoted), "{quoted} in {yaml}");
    }
    assert!(yaml.contains("  script: |\n    echo a\n    echo b\n"), "{yaml}");
    assert!(yaml.contains("creationTimestamp: \"20"), "{yaml}");
    let read: Value = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(read["data"], data, "{yaml}");

    for (path, accept, accepted) in [
        (
            "/api/v1/namespaces",
            "text/html",
            "application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ),
        (
            "/api/v1/namespaces/default/pods/p/log",
            "text/plain",
            "application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ),
        (
            "/api/v1/pods?watch=true",
            "application/yaml",
            "application/json, application/vnd.kubernetes.protobuf",
        ),
    ] {
        let (code, _, text) = server.get_with(path, &[("Accept", accept)]);
        let status: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (code, status["reason"].as_str()),
            (406, Some("NotAcceptable")),
            "{path}: {text}"
        );
        let message = format!("only the following media types are accepted: {accepted}");
        assert_eq!(status["message"], message.as_str());
    }
    // What kubectl and the Python client send is answered as before.
    let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    assert_eq!(server.get_with("/api/v1/namespaces", &[("Accept", kubectl)]).0, 200);
    let protobuf = "application/vnd.kubernetes.protobuf,application/json";
    let (code, content_type, _) = server.get_with(path, &[("Accept", protobuf)]);
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
}

/// `/api` and `/apis` answer in aggregated discovery when asked (kubectl asks for `v2`, then
/// `v2beta1`, then plain JSON), with the content type clients decide by; plainly otherwise.
#[test]
fn aggregated_discovery_when_asked() {
    let server = Server::start();
    let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
    let kubectl = format!("{v2},{beta},application/json");
    let (code, content_type, text) = server.get_with("/api", &[("Accept", &kubectl)]);
    assert_eq!((code, content_type.as_str()), (200, v2), "{text}");
    let core: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (core["kind"].as_str(), core["apiVersion"].as_str()),
        (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io/v2"))
    );
    let version = &core["items"][0]["versions"][0];
    let resources = version["resources"].as_array().unwrap();
    let pods = resources.iter().find(|r| r["resource"] == "pods").unwrap();
    assert_eq!(
        (pods["scope"].as_str(), pods["shortNames"][0].as_str()),
        (Some("Namespaced"), Some("po"))
    );
    assert!(pods["subresources"].as_array().unwrap().iter().any(|s| s["subresource"] == "status"));
    // The same resources as the plain list, less its `parent/sub` entries.
    let (_, plain) = server.get("/api/v1");
    let names = |list: &[Value], key: &str| -> Vec<String> {
        let mut names: Vec<String> = list
            .iter()
            .map(|r| r[key].as_str().unwrap().to_string())
            .filter(|n| !n.contains('/'))
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(resources, "resource"), names(plain["resources"].as_array().unwrap(), "name"));

    let (code, content_type, text) = server.get_with("/apis/", &[("Accept", beta)]);
    assert_eq!((code, content_type.as_str()), (200, beta), "{text}");
    let groups: Value = serde_json::from_str(&text).unwrap();
    let (_, plain) = server.get("/apis");
    let group_names = |list: &Value, items: &str, name: &str| -> Vec<String> {
        list[items]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.pointer(name).unwrap().as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        group_names(&groups, "items", "/metadata/name"),
        group_names(&plain, "groups", "/name")
    );
    assert!(group_names(&groups, "items", "/metadata/name")
        .contains(&"coordination.k8s.io".to_string()));

    // Not asked, or asked elsewhere: plain JSON; asked alone where it is not served: 406.
    let (code, content_type, text) = server.get_with("/api", &[("Accept", "application/json")]);
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
    assert!(text.contains("\"APIVersions\""), "{text}");
    let (code, content_type, _) = server.get_with("/api/v1", &[("Accept", &kubectl)]);
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
    assert_eq!(server.get_with("/api/v1/namespaces", &[("Accept", v2)]).0, 406);
}

/// `as=PartialObjectMetadata` and `as=PartialObjectMetadataList`, as client-go's metadata
/// client asks: an object, a list's items and a watch's events carry only their metadata, in
/// the asked version of `meta.k8s.io`; the form that does not fit the endpoint is 406.
#[test]
fn metadata_only_objects_lists_and_watch_events() {
    let server = Server::start();
    let asking = |kind: &str, version: &str| {
        format!("application/json;as={kind};g=meta.k8s.io;v={version},application/json")
    };
    let get = |path: &str, accept: &str| {
        let (code, content_type, text) = server.get_with(path, &[("Accept", accept)]);
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"));
        (code, content_type, body)
    };
    let (_, whole) = server.get("/api/v1/namespaces/default");

    let (code, content_type, partial) =
        get("/api/v1/namespaces/default", &asking("PartialObjectMetadata", "v1beta1"));
    assert_eq!(code, 200, "{partial}");
    // Labelled plain JSON, as kube-apiserver labels a conversion.
    assert_eq!(content_type, "application/json");
    let expected = serde_json::json!({"kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1beta1", "metadata": whole["metadata"]});
    assert_eq!(partial, expected);

    let (code, content_type, list) =
        get("/api/v1/namespaces?limit=2", &asking("PartialObjectMetadataList", "v1"));
    assert_eq!(code, 200, "{list}");
    assert_eq!(content_type, "application/json");
    assert_eq!(
        (&list["kind"], &list["apiVersion"]),
        (&"PartialObjectMetadataList".into(), &"meta.k8s.io/v1".into())
    );
    assert!(list["metadata"]["continue"].is_string(), "{list}");
    assert_eq!(list["metadata"]["remainingItemCount"], 2, "four namespaces, two per page");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    for item in items {
        assert_eq!(item["kind"], "PartialObjectMetadata");
        assert_eq!(item["apiVersion"], "meta.k8s.io/v1");
        assert!(item["metadata"]["uid"].is_string() && item.get("spec").is_none(), "{item}");
    }
    assert_eq!(
        items[0],
        serde_json::json!({"kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1", "metadata": whole["metadata"]})
    );

    let (code, _, refused) = get("/api/v1/namespaces", &asking("PartialObjectMetadata", "v1"));
    assert_eq!((code, &refused["reason"]), (406, &"NotAcceptable".into()));
    assert_eq!(
        refused["message"],
        "you requested PartialObjectMetadata, but the requested object is a list \
         (*core.NamespaceList)"
    );
    let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let (code, _) = server.post(lease, &serde_json::json!({"metadata": {"name": "l"}}));
    assert_eq!(code, 201);
    let (code, _, refused) = get(&format!("{lease}/l"), &asking("PartialObjectMetadataList", "v1"));
    assert_eq!(code, 406, "{refused}");
    assert_eq!(
        refused["message"],
        "you requested PartialObjectMetadataList, but the requested object is not a list \
         (*coordination.Lease)"
    );
    // Versions and conversions kube-apiserver does not serve are skipped: the next is taken.
    let (code, content_type, plain) = get(
        "/api/v1/namespaces/default",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2,application/json",
    );
    assert_eq!((code, content_type.as_str(), &plain), (200, "application/json", &whole));
    let (code, _, refused) =
        get("/api/v1/namespaces", "application/json;as=Widget;g=meta.k8s.io;v=v1");
    assert_eq!(code, 406, "{refused}");

    // A watch's events and bookmarks, until its timeout.
    let watch = "/api/v1/namespaces?watch=true&timeoutSeconds=2&allowWatchBookmarks=true\
                 &sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
    let (code, content_type, events) =
        server.get_with(watch, &[("Accept", &asking("PartialObjectMetadata", "v1"))]);
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
    let events: Vec<Value> = events.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let added: Vec<&Value> = events.iter().filter(|e| e["type"] == "ADDED").collect();
    assert_eq!(added.len(), 4, "{events:?}");
    assert!(added.iter().any(|e| e["object"]["metadata"] == whole["metadata"]), "{events:?}");
    for event in &events {
        assert_eq!(event["object"]["kind"], "PartialObjectMetadata", "{event}");
        assert_eq!(event["object"]["apiVersion"], "meta.k8s.io/v1", "{event}");
    }
    let bookmark = events.iter().find(|e| e["type"] == "BOOKMARK").expect("a bookmark");
    assert_eq!(bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");

    // A watch's Tables: the column definitions come with the first event only.
    let watch = "/api/v1/namespaces?watch=true&timeoutSeconds=1";
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let (code, _, events) = server.get_with(watch, &[("Accept", table)]);
    assert_eq!(code, 200);
    let events: Vec<Value> = events.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(events[0]["object"]["columnDefinitions"].as_array().is_some_and(|c| !c.is_empty()));
    for event in &events[1..] {
        assert_eq!(event["object"]["kind"], "Table", "{event}");
        assert_eq!(event["object"]["columnDefinitions"], Value::Null, "{event}");
        assert_eq!(event["object"]["rows"].as_array().map(Vec::len), Some(1), "{event}");
    }

    // A Table in the version asked for.
    let beta = "application/json;as=Table;v=v1beta1;g=meta.k8s.io";
    let (code, content_type, table) = get("/api/v1/namespaces", beta);
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(table["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1beta1");
    // includeObject is checked when a Table is asked for, as kube-apiserver does.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let (code, _, refused) = get("/api/v1/namespaces?includeObject=Everything", table);
    assert_eq!(code, 400, "{refused}");
    assert_eq!(
        refused["message"],
        "Unable to convert to Table as requested: includeObject: Invalid value: \"Everything\": \
         must be 'Metadata', 'Object', 'None', or empty"
    );
}

/// A response of 128 KiB or more is gzipped for a client that takes gzip (kubectl's does), as
/// kube-apiserver's are; smaller ones, and clients that do not ask, get it as it is.
#[test]
fn large_responses_are_gzipped_for_clients_that_take_it() {
    use std::io::Read;
    let server = Server::start();
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let value = "x".repeat(20_000);
    for i in 0..8 {
        let map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("big-{i}")}, "data": {"v": value}});
        assert_eq!(server.post(configmaps, &map).0, 201);
    }
    let http = reqwest::blocking::Client::new();
    let get = |path: &str, encoding: Option<&str>| {
        let mut request = http.get(server.url(path));
        if let Some(encoding) = encoding {
            request = request.header("Accept-Encoding", encoding);
        }
        let response = request.send().unwrap();
        let header =
            |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap().to_string());
        let (coding, vary) = (header("content-encoding"), header("vary"));
        (coding, vary, response.bytes().unwrap().to_vec())
    };
    let (coding, vary, zipped) = get(configmaps, Some("deflate, gzip"));
    assert_eq!((coding.as_deref(), vary.as_deref()), (Some("gzip"), Some("Accept-Encoding")));
    let mut list = Vec::new();
    flate2::read::GzDecoder::new(&zipped[..]).read_to_end(&mut list).unwrap();
    let list: Value = serde_json::from_slice(&list).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 8);
    assert!(zipped.len() < 16 * 1024, "{} bytes", zipped.len());
    let (coding, _, _) = get(configmaps, Some("deflate, gzip;q=0"));
    assert_eq!(coding, None, "only a bare gzip is taken, as kube-apiserver reads the header");
    let (coding, _, plain) = get(configmaps, None);
    assert_eq!(coding, None);
    assert!(plain.len() >= 160_000, "{}", plain.len());
    let (coding, _, _) = get(&format!("{configmaps}/big-0"), Some("gzip"));
    assert_eq!(coding, None, "a small response is sent as it is");
}
