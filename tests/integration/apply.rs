//! Apply: client-side `kubectl apply` (its strategic merge patches, computed from the
//! OpenAPI document's list declarations), and server-side apply with field ownership:
//! `kubectl apply --server-side`, conflicts and `--force-conflicts`, fields a manager stops
//! applying, and the raw PATCH protocol.

use serde_json::{json, Value};

use crate::util::Server;

fn configmap(data: &[(&str, &str)]) -> String {
    let mut yaml = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n");
    yaml.push_str("  labels:\n    team: ops\ndata:\n");
    for (k, v) in data {
        yaml.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    yaml
}

fn managers(object: &Value) -> Vec<(String, String)> {
    let entries = object["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            let name = e["manager"].as_str().unwrap_or("").to_string();
            (name, e["operation"].as_str().unwrap_or("").to_string())
        })
        .collect()
}

const CONTROLLER: &str = r#"apiVersion: v1
kind: ReplicationController
metadata:
  name: web
  finalizers: [example.com/keep]
spec:
  replicas: REPLICAS
  selector: {app: web}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: app, image: kplane/agnhost, ports: [{containerPort: 80}]ENV}
"#;

fn controller(replicas: u32, env: &str) -> String {
    CONTROLLER.replace("REPLICAS", &replicas.to_string()).replace("ENV", env)
}

/// A replication controller `r` of no replicas whose pods run `container`.
fn controller_of(container: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "r"},
        "spec": {"replicas": 0, "selector": {"app": "r"}, "template": {
            "metadata": {"labels": {"app": "r"}}, "spec": {"containers": [container]}}}})
}

#[test]
fn kubectl_client_side_apply_merges_lists_by_their_keys() {
    let server = Server::start();
    let k = server.kubectl();
    let file = k.write("rc.yaml", &controller(0, ""));
    let file = file.to_str().unwrap();
    assert!(k.ok(&["apply", "-f", file]).contains("created"));
    // The server's defaults (a port's protocol, a container's pull policy) are no change.
    let out = k.ok(&["apply", "-f", file]);
    assert!(out.contains("replicationcontroller/web unchanged"), "{out}");

    // Another writer adds to the container and to the finalizers; a later apply of a changed
    // file patches the container by its name and the finalizers by value, so both stay.
    k.ok(&["set", "env", "rc/web", "FROM_ELSEWHERE=1"]);
    let path = "/api/v1/namespaces/default/replicationcontrollers/web";
    let (code, _) = server.send_raw(
        "PATCH",
        path,
        Some("application/merge-patch+json"),
        br#"{"metadata":{"finalizers":["example.com/keep","example.com/other"]}}"#.to_vec(),
    );
    assert_eq!(code, 200);
    // The file also gains an env var: kubectl orders the list as the file does
    // ($setElementOrder), the other writer's var after it.
    k.write("rc.yaml", &controller(1, ", env: [{name: FIRST, value: \"1\"}]"));
    let out = k.ok(&["apply", "-f", file]);
    assert!(out.contains("replicationcontroller/web configured"), "{out}");
    let (_, live) = server.get(path);
    assert_eq!(live["spec"]["replicas"], 1);
    let container = &live["spec"]["template"]["spec"]["containers"][0];
    let env = json!([{"name": "FIRST", "value": "1"}, {"name": "FROM_ELSEWHERE", "value": "1"}]);
    assert_eq!(container["env"], env, "{live}");
    assert_eq!(container["ports"][0]["containerPort"], 80);
    assert_eq!(live["metadata"]["finalizers"], json!(["example.com/keep", "example.com/other"]));

    // A field the type does not have is refused, as kubectl's patch asks (fieldValidation=
    // Strict), and nothing changes.
    k.write("rc.yaml", &controller(2, ", imagePullPolicyy: Always"));
    let (applied, _, stderr) = k.run(&["apply", "-f", file]);
    assert!(!applied);
    assert!(
        stderr.contains(
            r#"strict decoding error: unknown field "spec.template.spec.containers[0].imagePullPolicyy""#
        ),
        "{stderr}"
    );
    assert_eq!(server.get(path).1["spec"]["replicas"], 1);
}

#[test]
fn kubectl_server_side_apply_owns_conflicts_and_prunes() {
    let server = Server::start();
    let k = server.kubectl();
    let file = k.write("cm.yaml", &configmap(&[("a", "1"), ("b", "1")]));
    let file = file.to_str().unwrap();

    // Creates (the PATCH answers 201), then updates.
    let out = k.ok(&["apply", "--server-side", "-f", file]);
    assert!(out.contains("configmap/settings serverside-applied"), "{out}");
    let (_, live) = server.get("/api/v1/namespaces/default/configmaps/settings");
    assert_eq!(managers(&live), [("kubectl".to_string(), "Apply".to_string())]);
    let fields = &live["metadata"]["managedFields"][0]["fieldsV1"];
    assert_eq!(fields["f:data"]["f:a"], json!({}), "{fields}");
    assert!(fields["f:metadata"]["f:labels"]["f:team"].is_object(), "{fields}");

    // Another manager changes b: a later apply of another b is a conflict, named.
    k.ok(&["patch", "configmap", "settings", "--type=merge", "-p", r#"{"data":{"b":"2"}}"#]);
    k.write("cm.yaml", &configmap(&[("a", "1"), ("b", "3")]));
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", file]);
    assert!(!ok, "a conflicting apply must fail");
    assert!(err.contains("conflict") && err.contains(".data.b"), "{err}");
    let (_, live) = server.get("/api/v1/namespaces/default/configmaps/settings");
    assert_eq!(live["data"]["b"], "2", "a failed apply changes nothing");

    // --force-conflicts takes b over.
    k.ok(&["apply", "--server-side", "--force-conflicts", "-f", file]);
    let (_, live) = server.get("/api/v1/namespaces/default/configmaps/settings");
    assert_eq!(live["data"]["b"], "3");

    // A key the manager stops applying goes; so does the label.
    let smaller =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  b: \"3\"\n";
    k.write("cm.yaml", smaller);
    k.ok(&["apply", "--server-side", "-f", file]);
    let (_, live) = server.get("/api/v1/namespaces/default/configmaps/settings");
    assert_eq!(live["data"], json!({"b": "3"}));
    assert!(live["metadata"]["labels"].as_object().is_none_or(|l| l.is_empty()), "{live}");
}

#[test]
fn kubectl_switches_from_client_side_to_server_side_apply() {
    let server = Server::start();
    let k = server.kubectl();
    let file = k.write("cm.yaml", &configmap(&[("a", "1")]));
    let file = file.to_str().unwrap();
    k.ok(&["apply", "-f", file]);
    k.write("cm.yaml", &configmap(&[("a", "2")]));
    let out = k.ok(&["apply", "--server-side", "-f", file]);
    assert!(out.contains("serverside-applied"), "{out}");
    let (_, live) = server.get("/api/v1/namespaces/default/configmaps/settings");
    assert_eq!(live["data"]["a"], "2");
    let names: Vec<String> = managers(&live).into_iter().map(|(m, _)| m).collect();
    assert!(names.contains(&"kubectl".to_string()), "{names:?}");
    // Of a switch's conflicts, only those its last client-side apply does not explain stay.
    let file2 = k.write("cm2.yaml", &configmap(&[("a", "1")]).replace("settings", "other"));
    let file2 = file2.to_str().unwrap();
    k.ok(&["apply", "-f", file2]);
    k.ok(&["patch", "configmap", "other", "--type=merge", "-p", r#"{"data":{"z":"9"}}"#]);
    let both = configmap(&[("a", "2"), ("z", "10")]).replace("settings", "other");
    k.write("cm2.yaml", &both);
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", file2]);
    assert!(
        !ok && err.contains("Apply failed with 1 conflict") && err.contains(".data.z"),
        "{err}"
    );
    // Server-side apply of a pod: kubectl reads it back with its status and managed fields.
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: kplane/pause\n    ports:\n    - containerPort: 80\n";
    let pod_file = k.write("pod.yaml", pod);
    k.ok(&["apply", "--server-side", "-f", pod_file.to_str().unwrap()]);
    // (`y` unquoted is YAML 1.1's true, which kubectl sends as a JSON bool: refused as a bool
    // for a string, as Kubernetes refuses it.)
    let with_env = pod.replace("    ports:", "    env:\n    - name: X\n      value: y\n    ports:");
    k.write("pod.yaml", &with_env);
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", pod_file.to_str().unwrap()]);
    assert!(!ok && err.contains("cannot unmarshal bool into Go struct field EnvVar"), "{err}");
    let with_env = with_env.replace("value: y", "value: \"y\"");
    k.write("pod.yaml", &with_env);
    // A misspelt field is refused, as Kubernetes' field manager refuses it.
    k.write("pod.yaml", &with_env.replace("    env:", "    envv:"));
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", pod_file.to_str().unwrap()]);
    assert!(!ok && err.contains(".spec.containers[0].envv: field not declared in schema"), "{err}");
    k.write("pod.yaml", &with_env);
    // env is immutable on a pod: the server says so, as a 422 kubectl prints.
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", pod_file.to_str().unwrap()]);
    assert!(!ok && err.contains("Forbidden: pod updates may not change fields"), "{err}");
}

/// The switch takes over only what still holds the last applied value: a field another
/// writer changed since is a conflict, as Kubernetes' last-applied manager makes it.
#[test]
fn a_switch_to_server_side_apply_does_not_take_what_another_writer_changed() {
    let server = Server::start();
    let k = server.kubectl();
    let file = k.write("cm.yaml", &configmap(&[("a", "1"), ("b", "1")]));
    let file = file.to_str().unwrap();
    k.ok(&["apply", "-f", file]);
    k.ok(&["patch", "configmap", "settings", "-p", r#"{"data":{"a":"2"}}"#]);
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", file]);
    assert!(!ok, "the patched field is not taken silently");
    assert!(err.contains(r#"conflict with "kubectl-patch""#) && err.contains(".data.a"), "{err}");
    assert!(!err.contains(".data.b"), "b still holds the applied value: {err}");
    let (_, live) = server.get("/api/v1/namespaces/default/configmaps/settings");
    assert_eq!(live["data"]["a"], "2");
    // Lists of named items are matched by name: a container the server filled with defaults
    // still holds what was applied, and is taken over.
    let rc = k.write("rc.yaml", &controller(1, ""));
    let rc = rc.to_str().unwrap();
    k.ok(&["apply", "-f", rc]);
    k.write("rc.yaml", &controller(2, ", env: [{name: X, value: \"1\"}]"));
    let out = k.ok(&["apply", "--server-side", "-f", rc]);
    assert!(out.contains("serverside-applied"), "{out}");
}

#[test]
fn apply_patch_over_http() {
    let server = Server::start();
    let path = "/api/v1/namespaces/default/configmaps/raw";
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\ndata:\n  k: v\n".to_vec();
    let apply = "application/apply-patch+yaml";

    let (code, status) = server.send_raw("PATCH", path, Some(apply), yaml.clone());
    assert_eq!(code, 422, "fieldManager is required: {status}");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Required value: is required for apply patch"
    );

    let with_manager = format!("{path}?fieldManager=tool");
    let (code, created) = server.send_raw("PATCH", &with_manager, Some(apply), yaml.clone());
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"]["k"], "v");
    let (code, _) = server.send_raw("PATCH", &with_manager, Some(apply), yaml);
    assert_eq!(code, 200);

    // An update by another manager, then a conflicting apply: a 409 naming the owner.
    let merge = "application/merge-patch+json";
    let edit = format!("{path}?fieldManager=editor");
    let (code, _) = server.send_raw("PATCH", &edit, Some(merge), br#"{"data":{"k":"w"}}"#.to_vec());
    assert_eq!(code, 200);
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\ndata:\n  k: x\n".to_vec();
    let (code, status) = server.send_raw("PATCH", &with_manager, Some(apply), yaml.clone());
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldManagerConflict");
    assert_eq!(status["details"]["causes"][0]["field"], ".data.k");
    // As Kubernetes' NewApplyConflict: the details name only the causes.
    let details = status["details"].as_object().unwrap();
    assert_eq!(details.keys().collect::<Vec<_>>(), ["causes"], "{status}");
    assert!(status["message"].as_str().unwrap().contains("\"editor\""), "{status}");
    let forced = format!("{with_manager}&force=true");
    let (code, applied) = server.send_raw("PATCH", &forced, Some(apply), yaml);
    assert_eq!(code, 200, "{applied}");
    assert_eq!(applied["data"]["k"], "x");

    // As Kubernetes' field manager takes a configuration, whatever fieldValidation says: a
    // field the kind does not declare, or managedFields, is 400 and nothing changes.
    let misspelt = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\ndatta:\n  k: y\n";
    let (code, status) = server.send_raw("PATCH", &forced, Some(apply), misspelt.to_vec());
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "failed to create typed patch object (default/raw; /v1, Kind=ConfigMap): .datta: field \
         not declared in schema"
    );
    let owned = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\n  managedFields: []\n";
    let (code, status) = server.send_raw("PATCH", &forced, Some(apply), owned.to_vec());
    assert_eq!((code, &status["message"]), (400, &json!("metadata.managedFields must be nil")));
    assert_eq!(server.get(path).1["data"], json!({"k": "x"}));

    // force is for apply patches only (422 on the options, as Kubernetes validates them); bad
    // YAML and a missing kind are 400s.
    let (code, status) =
        server.send_raw("PATCH", &format!("{edit}&force=true"), Some(merge), b"{}".to_vec());
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
    );
    let (code, _) =
        server.send_raw("PATCH", &format!("{edit}&force=false"), Some(merge), b"{}".to_vec());
    assert_eq!(code, 422, "named at all, force is refused");
    let (code, _) = server.send_raw("PATCH", &with_manager, Some(apply), b"a: [".to_vec());
    assert_eq!(code, 400);
    let (code, _) = server.send_raw("PATCH", &with_manager, Some(apply), b"metadata: {}".to_vec());
    assert_eq!(code, 400);

    // A uid is a precondition: of the object there (another is an immutable field changed),
    // and of one that was there (none is not created for it).
    let with_uid = |name: &str, uid: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, uid: {uid}}}\n")
            .into_bytes()
    };
    let pinned = "/api/v1/namespaces/default/configmaps/pinned?fieldManager=tool";
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pinned}\n".to_vec();
    let (code, created) = server.send_raw("PATCH", pinned, Some(apply), yaml);
    assert_eq!(code, 201);
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let (code, _) = server.send_raw("PATCH", pinned, Some(apply), with_uid("pinned", &uid));
    assert_eq!(code, 200);
    let (code, status) = server.send_raw("PATCH", pinned, Some(apply), with_uid("pinned", "other"));
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Invalid value: \"other\": field is immutable"
    );
    let gone = "/api/v1/namespaces/default/configmaps/gone?fieldManager=tool";
    let (code, status) = server.send_raw("PATCH", gone, Some(apply), with_uid("gone", &uid));
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        format!(
            "Operation cannot be fulfilled on configmaps \"gone\": uid mismatch: the provided \
             object specified uid {uid}, and no existing object was found"
        )
    );

    // Updates without a fieldManager are owned by the User-Agent's product ("unknown" when, as
    // here, the client sends none).
    let (code, updated) = server.put(
        path,
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "raw"}, "data": {"k": "x", "n": "1"}}),
    );
    assert_eq!(code, 200, "{updated}");
    let names: Vec<String> = managers(&updated).into_iter().map(|(m, _)| m).collect();
    assert!(names.contains(&"unknown".to_string()), "{names:?}");

    // Clients may clear the managed fields.
    let cleared = br#"{"metadata":{"managedFields":[{}]}}"#.to_vec();
    let (code, updated) = server.send_raw("PATCH", path, Some(merge), cleared);
    assert_eq!(code, 200);
    assert!(updated["metadata"].get("managedFields").is_none(), "{updated}");
    // An empty list clears them too, patched in or sent whole. (Updates of an object without
    // managed fields do not track them, as Kubernetes skips them: an apply brings them back.)
    let applied = format!("{path}?fieldManager=tool&force=true");
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: raw}\ndata: {k: v}\n".to_vec();
    let (code, updated) = server.send_raw("PATCH", &applied, Some(apply), yaml.clone());
    assert_eq!(code, 200, "{updated}");
    assert!(!managers(&updated).is_empty(), "{updated}");
    let json_patch = "application/json-patch+json";
    let emptied = br#"[{"op":"replace","path":"/metadata/managedFields","value":[]}]"#.to_vec();
    let (code, updated) = server.send_raw("PATCH", path, Some(json_patch), emptied);
    assert_eq!(code, 200, "{updated}");
    assert!(updated["metadata"].get("managedFields").is_none(), "{updated}");
    let (code, updated) = server.send_raw("PATCH", &applied, Some(apply), yaml.clone());
    assert_eq!(code, 200, "{updated}");
    assert!(!managers(&updated).is_empty(), "{updated}");
    let mut unchanged = updated;
    unchanged["metadata"]["managedFields"] = json!([]);
    let (code, updated) = server.put(path, &unchanged);
    assert_eq!(code, 200, "{updated}");
    assert!(updated["metadata"].get("managedFields").is_none(), "{updated}");
}

/// An applied configuration that names a keyed list's item twice is refused, as
/// structured-merge-diff refuses it, before it can take over (and wipe) other managers' items.
#[test]
fn an_applied_configuration_with_a_repeated_key_is_refused() {
    let server = Server::start();
    let rc = |env: Value| controller_of(json!({"name": "a", "image": "kplane/pause", "env": env}));
    let path = "/api/v1/namespaces/default/replicationcontrollers/r";
    let apply = "application/apply-patch+yaml";
    let applied = |manager: &str, env: Value| {
        let body = rc(env).to_string().into_bytes();
        server.send_raw("PATCH", &format!("{path}?fieldManager={manager}"), Some(apply), body)
    };
    let (code, _) = applied("m1", json!([{"name": "A", "value": "a"}]));
    assert_eq!(code, 201);
    let (code, _) = applied("m2", json!([{"name": "B", "value": "b"}]));
    assert_eq!(code, 200);
    let (code, status) =
        applied("m1", json!([{"name": "E", "value": "1"}, {"name": "E", "value": "2"}]));
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "failed to create typed patch object (default/r; /v1, Kind=ReplicationController): \
         .spec.template.spec.containers[name=\"a\"].env: duplicate entries for key [name=\"E\"]"
    );
    let (_, rc) = server.get(path);
    let env = &rc["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env, &json!([{"name": "A", "value": "a"}, {"name": "B", "value": "b"}]), "{rc}");

    // A live list may repeat a key (an update stored it): an apply of other items keeps its
    // items, one of that key conflicts with the manager that wrote them.
    let mut edited = rc.clone();
    let repeated = json!([{"name": "A", "value": "a"}, {"name": "B", "value": "b"},
        {"name": "E", "value": "1"}, {"name": "E", "value": "2"}]);
    edited["spec"]["template"]["spec"]["containers"][0]["env"] = repeated;
    // Unconditional: the replication controller may write the status meanwhile.
    edited["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    let (code, put) = server.put(&format!("{path}?fieldManager=editor"), &edited);
    assert_eq!(code, 200, "{put}");
    let (code, rc) =
        applied("m1", json!([{"name": "A", "value": "a"}, {"name": "F", "value": "f"}]));
    assert_eq!(code, 200, "{rc}");
    let env = rc["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap().clone();
    let names: Vec<&str> = env.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["A", "B", "E", "E", "F"], "{rc}");
    let (code, status) =
        applied("m1", json!([{"name": "A", "value": "a"}, {"name": "E", "value": "3"}]));
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "Apply failed with 1 conflict: conflict with \"editor\" using v1: \
         .spec.template.spec.containers[name=\"a\"].env[name=\"E\"]"
    );
}

/// An applied configuration's empty list is the applier's to own, as in structured-merge-diff:
/// applying `args: []` over another manager's args conflicts, and forced, clears them.
#[test]
fn an_applied_empty_list_is_owned() {
    let server = Server::start();
    let rc =
        |args: Value| controller_of(json!({"name": "c", "image": "kplane/pause", "args": args}));
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let (code, _) = server.post(&format!("{rcs}?fieldManager=creator"), &rc(json!(["a"])));
    assert_eq!(code, 201);
    let apply = "application/apply-patch+yaml";
    let config = rc(json!([])).to_string().into_bytes();
    let path = format!("{rcs}/r?fieldManager=applier");
    let (code, status) = server.send_raw("PATCH", &path, Some(apply), config.clone());
    assert_eq!(code, 409, "{status}");
    let field = status["details"]["causes"][0]["field"].as_str().unwrap();
    assert!(field.ends_with(".args"), "{status}");
    let forced = format!("{path}&force=true");
    let (code, applied) = server.send_raw("PATCH", &forced, Some(apply), config);
    assert_eq!(code, 200, "{applied}");
    let container = &applied["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container.get("args"), None, "stored as Kubernetes stores it: {applied}");
}

#[test]
fn apply_to_status_and_dry_run() {
    let server = Server::start();
    let (code, _) = server.post("/api/v1/namespaces/default/pods", &crate::util::pod("p"));
    assert_eq!(code, 201);
    let apply = "application/apply-patch+yaml";
    let status = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},
        "spec":{"nodeName":"ignored"},
        "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#;
    let path = "/api/v1/namespaces/default/pods/p/status?fieldManager=agent";
    let (code, pod) = server.send_raw("PATCH", path, Some(apply), status.to_vec());
    assert_eq!(code, 200, "{pod}");
    assert_eq!(pod["status"]["phase"], "Running");
    assert!(pod["spec"].get("nodeName").is_none(), "a status apply leaves spec alone");
    let entries = pod["metadata"]["managedFields"].as_array().unwrap();
    let agent = entries.iter().find(|e| e["manager"] == "agent").expect("agent's entry");
    assert_eq!(agent["operation"], "Apply");
    assert_eq!(agent["subresource"], "status");
    assert!(agent["fieldsV1"]["f:status"]["f:conditions"].is_object(), "{agent}");

    // dryRun=All answers what would be, stores nothing.
    let config =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"},"data":{"a":"1"}}"#;
    let dry = "/api/v1/namespaces/default/configmaps/dry?fieldManager=m&dryRun=All";
    let (code, answered) = server.send_raw("PATCH", dry, Some(apply), config.to_vec());
    assert_eq!(code, 201, "{answered}");
    assert_eq!(answered["data"]["a"], "1");
    assert!(answered["metadata"].get("resourceVersion").is_none(), "never stored: {answered}");
    assert_eq!(server.get("/api/v1/namespaces/default/configmaps/dry").0, 404);
}

/// A server-side apply of a replication controller's `Scale`: its manager owns the
/// controller's replicas (an entry of its own, subresource `scale`), taken from kubectl's apply
/// by force, which kubectl's apply then conflicts with; the Scale's other fields are not the
/// controller's.
#[test]
fn apply_to_a_scale_owns_the_replicas() {
    let server = Server::start();
    let apply = "application/apply-patch+yaml";
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    let body = controller(1, "").into_bytes();
    let (code, rc) =
        server.send_raw("PATCH", &format!("{rcs}/web?fieldManager=kubectl"), Some(apply), body);
    assert_eq!(code, 201, "{rc}");
    let scale = br#"{"apiVersion":"autoscaling/v1","kind":"Scale",
        "metadata":{"name":"web","labels":{"not":"stored"}},"spec":{"replicas":3}}"#;
    let path = format!("{rcs}/web/scale?fieldManager=autoscaler");
    let (code, status) = server.send_raw("PATCH", &path, Some(apply), scale.to_vec());
    assert_eq!(code, 409, "kubectl applied the replicas: {status}");
    assert_eq!(status["details"]["causes"][0]["field"], ".spec.replicas");
    let forced = format!("{path}&force=true");
    let (code, answered) = server.send_raw("PATCH", &forced, Some(apply), scale.to_vec());
    assert_eq!(code, 200, "{answered}");
    assert_eq!(
        (answered["kind"].as_str(), answered["spec"]["replicas"].as_i64()),
        (Some("Scale"), Some(3))
    );
    let (_, rc) = server.get(&format!("{rcs}/web"));
    assert_eq!(rc["spec"]["replicas"], 3);
    assert_eq!(rc["metadata"]["labels"], json!({"app": "web"}), "the template's, not the Scale's");
    let entries = rc["metadata"]["managedFields"].as_array().unwrap();
    let scaler = entries.iter().find(|e| e["manager"] == "autoscaler").expect("its entry");
    assert_eq!(
        (scaler["operation"].as_str(), scaler["subresource"].as_str()),
        (Some("Apply"), Some("scale"))
    );
    assert_eq!(scaler["fieldsV1"]["f:spec"], json!({"f:replicas": {}}), "{scaler}");
    // kubectl's own apply gave its replicas up to the scaler: applying them again conflicts.
    let body = controller(5, "").into_bytes();
    let (code, status) =
        server.send_raw("PATCH", &format!("{rcs}/web?fieldManager=kubectl"), Some(apply), body);
    assert_eq!(code, 409, "{status}");
    assert!(status["message"].as_str().unwrap().contains("\"autoscaler\""), "{status}");

    // Not a Scale: 400; no such controller: 404 for its scale.
    let wrong = br#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"web"}}"#;
    let (code, status) = server.send_raw("PATCH", &path, Some(apply), wrong.to_vec());
    assert_eq!(code, 400, "{status}");
    let missing = format!("{rcs}/none/scale?fieldManager=autoscaler");
    let scale = br#"{"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"replicas":3}}"#;
    let (code, status) = server.send_raw("PATCH", &missing, Some(apply), scale.to_vec());
    assert_eq!(code, 404, "{status}");
    assert_eq!(status["details"]["kind"], "replicationcontrollers/scale");
}
