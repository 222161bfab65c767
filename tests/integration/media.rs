//! Response media types: what `Accept`, `?pretty` and the user agent ask for, as
//! kube-apiserver answers them.

use std::process::Command;

use serde_json::Value;

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
