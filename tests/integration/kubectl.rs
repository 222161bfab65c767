//! kubectl end to end against a real server.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::util::{wait_until, Server};

const POD_YAML: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels:
    app: web
spec:
  containers:
  - name: c
    image: kplane/pause
    ports:
    - containerPort: 80
";

#[test]
fn version_api_resources_and_cluster_info() {
    let server = Server::start();
    let k = server.kubectl();
    let out = k.ok(&["version", "-o", "json"]);
    assert!(out.contains("\"minor\": \"32\""), "{out}");
    // Indented, its fields in Go's order, as kube-apiserver always writes it.
    let (_, _, raw) = server.get_with("/version", &[]);
    assert!(
        raw.starts_with("{\n  \"major\": \"1\",\n  \"minor\": \"32\",\n  \"gitVersion\""),
        "{raw}"
    );
    // Discovery is aggregated: with a cold cache kubectl reads `/api` and `/apis` alone, not
    // each group version's list.
    let (ok, out, log) = k.run(&["api-resources", "-v=6"]);
    assert!(ok, "{log}");
    let fetched: Vec<&str> = log
        .lines()
        .filter_map(|line| line.split_once("GET http://")?.1.split_once('/').map(|(_, path)| path))
        .filter_map(|path| path.split_once("?timeout").map(|(path, _)| path))
        .collect();
    assert_eq!(fetched, ["api", "apis"], "{log}");
    for needle in [
        "pods",
        "po",
        "replicationcontrollers",
        "rc",
        "leases",
        "coordination.k8s.io/v1",
        "namespaces",
    ] {
        assert!(out.contains(needle), "api-resources lacks {needle}: {out}");
    }
    let out = k.ok(&["cluster-info"]);
    assert!(out.contains("is running at"), "{out}");
    // Health, as kube-apiserver reports it: each check with `verbose`, one by its name.
    let out = k.ok(&["get", "--raw", "/readyz?verbose"]);
    assert_eq!(out.trim(), "[+]ping ok\n[+]log ok\n[+]etcd ok\nreadyz check passed", "{out}");
    let out = k.ok(&["get", "--raw", "/livez?verbose&exclude=log&exclude=nosuch"]);
    let said = "[+]ping ok\n[+]log excluded: ok\n[+]etcd ok\nwarn: some health checks cannot be \
                excluded: no matches for \"nosuch\"\nlivez check passed";
    assert_eq!(out.trim(), said, "{out}");
    assert_eq!(k.ok(&["get", "--raw", "/healthz"]), "ok");
    assert_eq!(k.ok(&["get", "--raw", "/livez/etcd"]), "ok");
    let (found, _, _) = k.run(&["get", "--raw", "/healthz/nonexistent"]);
    assert!(!found, "an unknown check is 404");
    // A HEAD probe gets the status alone.
    let http = reqwest::blocking::Client::new();
    for path in ["/readyz", "/livez/etcd", "/healthz/nonexistent"] {
        let answer = http.head(server.url(path)).send().unwrap();
        let expected = if path.ends_with("nonexistent") { 404 } else { 200 };
        assert_eq!(answer.status().as_u16(), expected, "{path}");
        assert_eq!(answer.bytes().unwrap().len(), 0, "{path}");
    }
}

#[test]
fn component_statuses_report_each_components_health() {
    // The scheduler is off in this server: it is reported, Unhealthy, with why.
    let server = Server::start();
    let k = server.kubectl();
    let (ok, out, err) = k.run(&["get", "componentstatuses"]);
    assert!(ok, "{err}");
    assert!(err.contains("Warning: v1 ComponentStatus is deprecated in v1.19+"), "{err}");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "STATUS", "MESSAGE", "ERROR"], "{out}");
    assert_eq!(rows[1][..2], ["scheduler", "Unhealthy"], "{out}");
    assert!(out.contains("the scheduler does not run in this server"), "{out}");
    for (row, name) in rows[2..].iter().zip(["controller-manager", "etcd-0", "etcd-1"]) {
        assert_eq!(row[..], [name, "Healthy", "ok"], "{out}");
    }
    assert_eq!(rows.len(), 5, "one row per store shard: {out}");
    let one: Value = serde_json::from_str(&k.ok(&["get", "cs", "etcd-1", "-o", "json"])).unwrap();
    assert_eq!(
        one,
        json!({"kind": "ComponentStatus", "apiVersion": "v1",
               "metadata": {"name": "etcd-1", "creationTimestamp": null},
               "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]})
    );
    let (found, _, err) = k.run(&["get", "cs", "etcd-7"]);
    assert!(!found && err.contains(r#"componentstatuses "etcd-7" not found"#), "{err}");
    // Read only, as in Kubernetes.
    let (code, _) = server.delete("/api/v1/componentstatuses/etcd-0");
    assert_eq!(code, 405);
    let (code, _) = server.get("/api/v1/componentstatuses?watch=true");
    assert_eq!(code, 405);
    let (code, list) = server.get("/api/v1/componentstatuses?fieldSelector=metadata.name%3Detcd-0");
    assert_eq!((code, list["items"].as_array().map(Vec::len)), (200, Some(1)), "{list}");

    // With the scheduler running, every component is healthy.
    let server = Server::start_with_env(&[("KPLANE_SCHEDULER__ENABLED", "true")]);
    let out = server.kubectl().ok(&["get", "cs", "scheduler", "--no-headers"]);
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["scheduler", "Healthy", "ok"]);
}

#[test]
fn create_get_label_replace_delete() {
    let server = Server::start();
    let k = server.kubectl();
    let file = k.write("pod.yaml", POD_YAML);
    let out = k.ok(&["create", "-f", file.to_str().unwrap()]);
    assert!(out.contains("pod/web-1 created"), "{out}");
    let (ok, _, err) = k.run(&["create", "-f", file.to_str().unwrap()]);
    assert!(!ok && err.contains("AlreadyExists"), "{err}");

    let table = k.ok(&["get", "pods"]);
    assert!(
        table.contains("NAME") && table.contains("READY") && table.contains("STATUS"),
        "{table}"
    );
    assert!(
        table.contains("web-1") && table.contains("0/1") && table.contains("Pending"),
        "{table}"
    );
    let wide = k.ok(&["get", "pods", "-o", "wide"]);
    assert!(wide.contains("NODE") && wide.contains("IP"), "{wide}");
    let json: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "pod", "web-1", "-o", "json"])).unwrap();
    assert_eq!(json["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(json["spec"]["serviceAccountName"], "default", "{json}");
    assert_eq!(json["spec"]["serviceAccount"], "default", "{json}");
    assert!(json["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()));
    let yaml = k.ok(&["get", "pod", "web-1", "-o", "yaml"]);
    assert!(yaml.contains("name: web-1") && yaml.contains("resourceVersion:"), "{yaml}");
    assert_eq!(k.ok(&["get", "pods", "-o", "name"]).trim(), "pod/web-1");
    let all = k.ok(&["get", "pods", "-A"]);
    assert!(all.contains("NAMESPACE") && all.contains("default") && all.contains("web-1"), "{all}");
    let (ok, _, err) = k.run(&["get", "pod", "nope"]);
    assert!(!ok && err.contains("NotFound") && err.contains("\"nope\" not found"), "{err}");

    k.ok(&["label", "pod", "web-1", "tier=front"]);
    let labels = k.ok(&["get", "pods", "-l", "tier=front", "-o", "name"]);
    assert_eq!(labels.trim(), "pod/web-1");
    assert_eq!(k.ok(&["get", "pods", "-l", "tier!=front", "-o", "name"]).trim(), "");

    // A pod's spec is immutable, and admission filled in its service account: as in
    // Kubernetes, the manifest it was created from no longer replaces it, what `get` returns
    // does.
    let file2 = k.write("pod2.yaml", &POD_YAML.replace("app: web", "app: web2"));
    let (ok, _, err) = k.run(&["replace", "-f", file2.to_str().unwrap()]);
    assert!(!ok && err.contains("pod updates may not change fields"), "{err}");
    let live = k.ok(&["get", "pod", "web-1", "-o", "yaml"]);
    let file2 = k.write("pod2.yaml", &live.replace("app: web", "app: web2"));
    k.ok(&["replace", "-f", file2.to_str().unwrap()]);
    let app = k.ok(&["get", "pod", "web-1", "-o", "jsonpath={.metadata.labels.app}"]);
    assert_eq!(app, "web2");

    let out = k.ok(&["delete", "pod", "web-1"]);
    assert!(out.contains("deleted"), "{out}");
    let (ok, _, _) = k.run(&["get", "pod", "web-1"]);
    assert!(!ok);
}

#[test]
fn generators_send_protobuf_bodies() {
    let server = Server::start();
    let k = server.kubectl();
    assert!(k.ok(&["create", "namespace", "team-a"]).contains("namespace/team-a created"));
    k.ok(&["create", "configmap", "settings", "-n", "team-a", "--from-literal=color=blue"]);
    k.ok(&["create", "secret", "generic", "token", "-n", "team-a", "--from-literal=key=s3cr3t"]);
    k.ok(&["create", "service", "clusterip", "front", "-n", "team-a", "--tcp=80:8080"]);
    k.ok(&["create", "quota", "limits", "-n", "team-a", "--hard=pods=10,requests.cpu=2"]);
    let hard = k.ok(&["get", "quota", "limits", "-n", "team-a", "-o", "jsonpath={.spec.hard}"]);
    assert_eq!(hard, r#"{"pods":"10","requests.cpu":"2"}"#);
    let color = k.ok(&["get", "cm", "settings", "-n", "team-a", "-o", "jsonpath={.data.color}"]);
    assert_eq!(color, "blue");
    let key = k.ok(&["get", "secret", "token", "-n", "team-a", "-o", "jsonpath={.data.key}"]);
    assert_eq!(key, "czNjcjN0");
    let svc = k.ok(&["get", "svc", "front", "-n", "team-a", "-o", "json"]);
    let svc: serde_json::Value = serde_json::from_str(&svc).unwrap();
    assert_eq!(svc["spec"]["ports"][0]["port"], 80);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    // Go's protobuf sends the zero node port and `false`s: they are unset, as in Kubernetes.
    assert!(svc["spec"]["ports"][0].get("nodePort").is_none(), "{svc}");
    assert!(svc["spec"].get("publishNotReadyAddresses").is_none(), "{svc}");
    k.ok(&["create", "service", "nodeport", "edge", "-n", "team-a", "--tcp=80:8080"]);
    let port =
        k.ok(&["get", "svc", "edge", "-n", "team-a", "-o", "jsonpath={.spec.ports[0].nodePort}"]);
    assert!(port.parse::<u16>().is_ok_and(|p| (30000..=32767).contains(&p)), "{port}");
    let ns = k.ok(&["get", "ns"]);
    for name in ["default", "kube-system", "kube-public", "kube-node-lease", "team-a"] {
        assert!(ns.contains(name), "{ns}");
    }
    k.ok(&["delete", "namespace", "team-a"]);
    let (ok, _, _) = k.run(&["get", "ns", "team-a"]);
    assert!(!ok, "namespace is gone after delete returned");
    let (code, _) = server.get("/api/v1/namespaces/team-a/configmaps/settings");
    assert_eq!(code, 404);
}

/// `kubectl get -o yaml` of several objects writes a `kind: List`, which kubectl validates
/// itself against `/openapi/v2` before it creates, replaces or applies the items.
#[test]
fn pod_templates_are_stored_validated_and_listed() {
    let server = Server::start();
    let k = server.kubectl();
    let file = k.write(
        "template.yaml",
        "apiVersion: v1\nkind: PodTemplate\nmetadata:\n  name: tpl\ntemplate:\n  metadata:\n    \
         labels:\n      app: web\n      tier: front\n  spec:\n    restartPolicy: OnFailure\n    \
         containers:\n    - name: a\n      image: kplane/pause\n    - name: b\n      image: kplane/agnhost:2.40\n",
    );
    assert!(k.ok(&["apply", "-f", file.to_str().unwrap()]).contains("podtemplate/tpl created"));
    let table = k.ok(&["get", "podtemplates"]);
    let row = table.lines().find(|l| l.starts_with("tpl")).unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells, ["tpl", "a,b", "kplane/pause,kplane/agnhost:2.40", "app=web,tier=front"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("POD LABELS"), "{table}");
    // Defaulted as a pod template is: the metadata as Go writes it, the spec's defaults.
    let (_, stored) = server.get("/api/v1/namespaces/default/podtemplates/tpl");
    assert_eq!(stored["template"]["metadata"]["creationTimestamp"], Value::Null, "{stored}");
    assert!(stored["template"]["metadata"].get("creationTimestamp").is_some(), "{stored}");
    assert_eq!(stored["template"]["spec"]["dnsPolicy"], "ClusterFirst", "{stored}");
    // Validated as a pod template: a container without a name is refused, with its path.
    let bad = json!({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "bad"},
        "template": {"spec": {"containers": [{"image": "kplane/pause"}]}}});
    let (code, status) = server.post("/api/v1/namespaces/default/podtemplates", &bad);
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "template.spec.containers[0].name");
    let resources = k.ok(&["api-resources", "--api-group="]);
    assert!(resources.lines().any(|l| l.starts_with("podtemplates ")), "{resources}");
    // A delete answers the deleted template, as its storage in Kubernetes does.
    let (code, deleted) = server.delete("/api/v1/namespaces/default/podtemplates/tpl");
    assert_eq!((code, &deleted["kind"]), (200, &json!("PodTemplate")), "{deleted}");
}

#[test]
fn list_files_are_validated_and_written() {
    let server = Server::start();
    let k = server.kubectl();
    k.ok(&["create", "configmap", "a", "--from-literal=x=1"]);
    k.ok(&["create", "configmap", "b", "--from-literal=y=2"]);
    let list = k.ok(&["get", "configmap", "a", "b", "-o", "yaml"]);
    assert!(list.contains("kind: List"), "{list}");
    let file = k.write("list.yaml", &list);
    let file = file.to_str().unwrap();
    assert!(k.ok(&["replace", "-f", file]).contains("configmap/b replaced"));
    assert!(k.ok(&["apply", "-f", file]).contains("configmap/a configured"));
    k.ok(&["delete", "configmap", "a", "b"]);
    assert!(k.ok(&["create", "-f", file]).contains("configmap/b created"));
    // An unknown field in an item: kubectl refuses the file, naming the field and the type.
    k.write("list.yaml", &list.replacen("  data:", "  bogus: 1\n  data:", 1));
    let (ok, _, err) = k.run(&["apply", "-f", file]);
    assert!(
        !ok && err.contains(r#"unknown field "bogus" in io.k8s.api.core.v1.ConfigMap"#),
        "{err}"
    );
}

#[test]
fn get_watch_sees_later_changes() {
    let server = Server::start();
    let k = server.kubectl();
    let file = k.write("pod.yaml", POD_YAML);
    k.ok(&["create", "-f", file.to_str().unwrap()]);
    let mut watch = k
        .command()
        .args(["get", "pods", "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = lines_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(first.contains("EVENT") || first.contains("web-1"), "{first}");
    k.ok(&["label", "pod", "web-1", "seen=yes"]);
    let mut seen = Vec::new();
    wait_until(Duration::from_secs(30), "kubectl get -w prints the change", || {
        while let Ok(line) = lines_rx.try_recv() {
            seen.push(line);
        }
        seen.iter().any(|l| l.contains("MODIFIED") && l.contains("web-1"))
    });
    watch.kill().unwrap();
    watch.wait().unwrap();
}

#[test]
fn apply_patch_annotate_and_set_image() {
    let server = Server::start();
    let k = server.kubectl();
    let file = k.write("pod.yaml", POD_YAML);
    assert!(k.ok(&["apply", "-f", file.to_str().unwrap()]).contains("created"));
    k.write("pod.yaml", &POD_YAML.replace("kplane/pause", "kplane/agnhost"));
    assert!(k.ok(&["apply", "-f", file.to_str().unwrap()]).contains("configured"));
    k.ok(&["annotate", "pod", "web-1", "owner=team-a"]);
    k.ok(&[
        "patch",
        "pod",
        "web-1",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/z","value":"1"}]"#,
    ]);
    k.ok(&[
        "patch",
        "pod",
        "web-1",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"app":null}}}"#,
    ]);
    k.ok(&["set", "image", "pod/web-1", "c=kplane/pause:2"]);
    // A field the kind does not declare is dropped, with a warning (the default, Warn), for
    // every kind of patch; a known one alone warns of nothing.
    for (kind, patch) in [
        ("strategic", r#"{"spec":{"bogus":1,"containers":[{"name":"c","extra":true}]}}"#),
        ("merge", r#"{"spec":{"bogus":1}}"#),
        ("json", r#"[{"op":"add","path":"/spec/bogus","value":1}]"#),
    ] {
        let (ok, _, err) = k.run(&["patch", "pod", "web-1", "--type", kind, "-p", patch]);
        assert!(ok && err.contains(r#"Warning: unknown field "spec.bogus""#), "{kind}: {err}");
        if kind == "strategic" {
            assert!(err.contains(r#"unknown field "spec.containers[0].extra""#), "{err}");
        }
    }
    let (_, _, err) =
        k.run(&["patch", "pod", "web-1", "-p", r#"{"metadata":{"labels":{"y":"2"}}}"#]);
    assert!(!err.contains("Warning"), "{err}");
    // A JSON patch whose test fails changes nothing: kube-apiserver's generic 422.
    let failing = r#"[{"op":"test","path":"/metadata/labels/y","value":"3"},
        {"op":"add","path":"/metadata/labels/w","value":"1"}]"#;
    let (ok, _, err) = k.run(&["patch", "pod", "web-1", "--type=json", "-p", failing]);
    assert!(!ok, "a failed test applies nothing");
    let says =
        "The request is invalid: the server rejected our request due to an error in our request";
    assert!(err.contains(says), "{err}");
    let pod: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "pod", "web-1", "-o", "json"])).unwrap();
    assert_eq!(pod["spec"]["containers"][0]["image"], "kplane/pause:2");
    assert_eq!(pod["metadata"]["annotations"]["owner"], "team-a");
    assert_eq!(pod["metadata"]["labels"], serde_json::json!({"y": "2", "z": "1"}));
    assert!(pod["spec"].get("bogus").is_none());
    assert!(pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .is_string());
}

#[test]
fn edit_and_explain() {
    let server = Server::start();
    let kubectl = server.kubectl();
    kubectl.ok(&["create", "configmap", "settings", "--from-literal=color=blue"]);
    let editor =
        kubectl.write("editor.sh", "#!/bin/sh\nsed -i 's/color: blue/color: red/' \"$1\"\n");
    let mut cmd = kubectl.command();
    cmd.args(["edit", "configmap", "settings"])
        .env("KUBE_EDITOR", format!("sh {}", editor.display()));
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        kubectl.ok(&["get", "configmap", "settings", "-o", "jsonpath={.data.color}"]),
        "red"
    );

    let explained = kubectl.ok(&["explain", "pod.spec.containers.livenessProbe"]);
    assert!(explained.contains("KIND:") && explained.contains("Pod"), "{explained}");
    assert!(explained.contains("periodSeconds"), "{explained}");
    // An enum field lists its values, and what each means.
    let explained = kubectl.ok(&["explain", "pod.spec.containers.imagePullPolicy"]);
    assert!(explained.contains("ENUM:\n    Always\n    IfNotPresent\n    Never\n"), "{explained}");
    assert!(explained.contains("Possible enum values:"), "{explained}");
}

/// A pod created from YAML that carries a status (as `kubectl get -o yaml` prints it) starts
/// Pending, with the QoS class its requests and limits give it. Its quantities are kept as
/// Kubernetes writes them back ("0.1" is "100m").
#[test]
fn created_pods_start_pending_with_their_qos_class() {
    let server = Server::start();
    let k = server.kubectl();
    let copied = "apiVersion: v1
kind: Pod
metadata:
  name: copied
spec:
  nodeName: elsewhere
  containers:
  - name: c
    image: kplane/pause
    resources:
      limits:
        cpu: 0.1
        memory: 65536Ki
status:
  phase: Running
  podIP: 10.1.2.3
  qosClass: BestEffort
";
    let file = k.write("copied.yaml", copied);
    k.ok(&["create", "-f", file.to_str().unwrap()]);
    let pod: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "pod", "copied", "-o", "json"])).unwrap();
    assert_eq!(pod["status"], serde_json::json!({"phase": "Pending", "qosClass": "Guaranteed"}));
    let resources = &pod["spec"]["containers"][0]["resources"];
    let canonical = serde_json::json!({"cpu": "100m", "memory": "64Mi"});
    assert_eq!((&resources["limits"], &resources["requests"]), (&canonical, &canonical));
    let over = copied
        .replace("name: copied", "name: over")
        .replace("      limits:\n", "      requests:\n        cpu: 200m\n      limits:\n");
    let file = k.write("over.yaml", &over);
    let (ok, _, err) = k.run(&["create", "-f", file.to_str().unwrap()]);
    assert!(!ok && err.contains("must be less than or equal to cpu limit of 100m"), "{err}");
}

/// `kubectl auth`: the reviews answer for the insecure port's user, who may do anything
/// (kubectl sends them as protobuf).
#[test]
fn auth_can_i_and_whoami() {
    let server = Server::start();
    let k = server.kubectl();
    assert_eq!(k.ok(&["auth", "can-i", "create", "pods"]).trim(), "yes");
    assert_eq!(k.ok(&["auth", "can-i", "delete", "nodes", "--all-namespaces"]).trim(), "yes");
    assert_eq!(k.ok(&["auth", "can-i", "get", "/healthz"]).trim(), "yes");
    let rules = k.ok(&["auth", "can-i", "--list"]);
    assert!(rules.lines().any(|l| l.starts_with("*.*") && l.ends_with("[*]")), "{rules}");
    let who = k.ok(&["auth", "whoami"]);
    assert!(who.contains("Username    system:unsecured"), "{who}");
    assert!(who.contains("[system:masters system:authenticated]"), "{who}");
    let bob = k.ok(&["auth", "whoami", "--as", "bob", "--as-group", "dev"]);
    assert!(bob.contains("Username    bob") && bob.contains("[dev system:authenticated]"), "{bob}");
    // Impersonated, a request is authorized as that user, on this port too.
    assert_eq!(k.run(&["auth", "can-i", "delete", "nodes", "--as", "bob"]).1, "no\n");
    let (ok, _, denied) = k.run(&["get", "pods", "--as", "bob"]);
    assert!(!ok && denied.contains("User \"bob\" cannot list resource \"pods\""), "{denied}");
    let admin = ["--as", "bob", "--as-group", "system:masters"];
    assert_eq!(k.run(&[&["auth", "can-i", "delete", "nodes"][..], &admin[..]].concat()).1, "yes\n");
    let resources = k.ok(&["api-resources", "--api-group", "authorization.k8s.io"]);
    assert!(resources.contains("selfsubjectaccessreviews"), "{resources}");
    // A review is only created.
    let (code, _) = server.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews");
    assert_eq!(code, 405);
}
