//! The whole single-node cluster through kubectl: the scheduler binds a pod to the embedded
//! agent's node, the agent runs it, and `kubectl get -o wide`, `logs`, `get events`,
//! `describe`, `scale` and a graceful `delete` work.

use serde_json::{json, Value};
use std::time::Duration;

use crate::util::{process_running, wait_until, Server};

const WAIT: Duration = Duration::from_secs(60);

/// A server with its scheduler and an embedded agent (node `solo`) that syncs fast.
fn single_node_cluster() -> Server {
    Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "solo"),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
    ])
}

#[test]
fn kubectl_runs_a_pod_on_the_single_node_cluster() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    wait_until(WAIT, "the node is Ready", || {
        let (_, out, _) = kubectl.run(&["get", "nodes"]);
        out.lines().any(|l| l.starts_with("solo") && l.contains(" Ready"))
    });
    kubectl.ok(&["run", "web", "--image=kplane/agnhost:2.40", "--", "netexec", "--http-port=8080"]);
    wait_until(WAIT, "web is Running", || {
        kubectl.run(&["get", "pod", "web", "-o", "jsonpath={.status.phase}"]).1 == "Running"
    });
    let wide = kubectl.ok(&["get", "pod", "web", "-o", "wide"]);
    assert!(wide.contains("solo") && wide.contains("127."), "{wide}");
    // The kubelet's conditions in its order, the scheduler's last (its status patch orders
    // them), with their zero probe times written as Go writes them.
    let types = "{range .status.conditions[*]}{.type} {end}";
    let kubelet_order = "PodReadyToStartContainers Initialized Ready ContainersReady PodScheduled ";
    wait_until(WAIT, "the kubelet's order", || {
        kubectl.ok(&["get", "pod", "web", "-o", &format!("jsonpath={types}")]) == kubelet_order
    });
    let pod: Value =
        serde_json::from_str(&kubectl.ok(&["get", "pod", "web", "-o", "json"])).unwrap();
    let conditions = pod["status"]["conditions"].as_array().unwrap();
    assert!(conditions.iter().all(|c| c.get("lastProbeTime") == Some(&Value::Null)), "{pod}");
    wait_until(WAIT, "web's log", || kubectl.run(&["logs", "web"]).1.contains("serving HTTP"));
    let (ok, _, stderr) = kubectl.run(&["logs", "web", "-c", "nope"]);
    assert!(!ok && stderr.contains("not valid"), "{stderr}");
    // Each line with the time it was written; only the lines since a time.
    let timed = kubectl.ok(&["logs", "web", "--timestamps", "--tail=1"]);
    let (time, line) = timed.trim_end().split_once(' ').expect("a time, then the line");
    let written = chrono::DateTime::parse_from_rfc3339(time).expect("an RFC 3339 time");
    assert!(!line.is_empty(), "{timed}");
    assert!(chrono::Utc::now().signed_duration_since(written).num_seconds() < 120, "{timed}");
    assert!(kubectl.ok(&["logs", "web", "--since=1h"]).contains("serving HTTP"));
    // netexec writes only when it starts: a second later, the last second holds nothing.
    wait_until(WAIT, "no line in the last second", || {
        kubectl.ok(&["logs", "web", "--since=1s"]).is_empty()
    });
    let later = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    assert_eq!(kubectl.ok(&["logs", "web", &format!("--since-time={later}")]), "");
    // Options out of range are 422 on PodLogOptions, before the agent is asked.
    let (code, status) = server.get("/api/v1/namespaces/default/pods/web/log?limitBytes=0");
    assert_eq!((code, &status["details"]["kind"]), (422, &"PodLogOptions".into()), "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "limitBytes", "{status}");

    let events = kubectl.ok(&["get", "events"]);
    assert!(events.contains("Scheduled"), "{events}");
    // The scheduler reports through events.k8s.io/v1, as kube-scheduler does.
    let scheduled =
        "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=reason%3DScheduled";
    let (_, scheduled) = server.get(scheduled);
    let scheduled = &scheduled["items"][0];
    assert_eq!(
        (&scheduled["action"], &scheduled["regarding"]["name"]),
        (&json!("Binding"), &json!("web"))
    );
    assert_eq!(scheduled["reportingController"], "default-scheduler", "{scheduled}");
    assert!(scheduled["eventTime"].as_str().is_some_and(|t| t.ends_with('Z')), "{scheduled}");
    assert!(scheduled["deprecatedFirstTimestamp"].is_null(), "{scheduled}");
    let mut described = String::new();
    wait_until(WAIT, "the scheduler's and the agent's events", || {
        described = kubectl.ok(&["describe", "pod", "web"]);
        described.contains("Successfully assigned default/web to solo")
            && described.contains("Started container web")
    });
    assert!(described.contains("Ready") && described.contains("True"), "{described}");
    // The kubelet's events of a start, in their order.
    let at = |text: &str| described.find(text).unwrap_or_else(|| panic!("{text}: {described}"));
    let pulled = at("Container image \"kplane/agnhost:2.40\" already present on machine");
    assert!(pulled < at("Created container web"), "{described}");
    assert!(at("Created container web") < at("Started container web"), "{described}");

    let rc = kubectl.write(
        "rc.yaml",
        "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: front\nspec:\n  replicas: 1\n  \
         selector:\n    app: front\n  template:\n    metadata:\n      labels:\n        app: front\n    \
         spec:\n      containers:\n      - name: c\n        image: kplane/pause\n",
    );
    kubectl.ok(&["create", "-f", rc.to_str().unwrap()]);
    kubectl.ok(&["scale", "rc", "front", "--replicas=3"]);
    assert_eq!(kubectl.ok(&["get", "rc", "front", "-o", "jsonpath={.spec.replicas}"]), "3");
    // The scale subresource's table: desired and available replicas.
    let scale = kubectl.ok(&["get", "rc", "front", "--subresource=scale", "--no-headers"]);
    let cells: Vec<&str> = scale.split_whitespace().collect();
    assert_eq!(&cells[..2], ["front", "3"], "{scale}");
    assert!(cells[2].parse::<u32>().is_ok_and(|n| n <= 3), "{scale}");
    // The replication manager keeps three pods of the template running, the agent runs them.
    let running = |kubectl: &crate::util::Kubectl| {
        let phases = kubectl.ok(&[
            "get",
            "pods",
            "-l",
            "app=front",
            "-o",
            "jsonpath={range .items[*]}{.status.phase} {end}",
        ]);
        phases.split_whitespace().filter(|p| *p == "Running").count()
    };
    wait_until(WAIT, "three replicas ready", || {
        kubectl.ok(&["get", "rc", "front", "-o", "jsonpath={.status.readyReplicas}"]) == "3"
    });
    assert_eq!(running(&kubectl), 3);
    // A service selecting them: its Endpoints list the three pods' IPs, then the one left.
    kubectl.ok(&["create", "service", "clusterip", "front", "--tcp=80:8080"]);
    let addresses = |kubectl: &crate::util::Kubectl| {
        let ips = kubectl.ok(&[
            "get",
            "endpoints",
            "front",
            "-o",
            "jsonpath={range .subsets[*].addresses[*]}{.ip} {end}",
        ]);
        ips.split_whitespace().map(str::to_string).collect::<Vec<_>>()
    };
    wait_until(WAIT, "three endpoints", || addresses(&kubectl).len() == 3);
    let ports =
        kubectl.ok(&["get", "endpoints", "front", "-o", "jsonpath={.subsets[0].ports[0].port}"]);
    assert_eq!(ports, "8080");
    // And its EndpointSlices, which `kubectl describe service` reads.
    let mut described = String::new();
    wait_until(WAIT, "describe lists the three endpoints", || {
        described = kubectl.ok(&["describe", "service", "front"]);
        let line = described.lines().find(|l| l.starts_with("Endpoints:")).unwrap_or("");
        addresses(&kubectl).iter().all(|ip| line.contains(&format!("{ip}:8080")))
    });
    let slices = kubectl.ok(&["get", "endpointslices", "-l", "kubernetes.io/service-name=front"]);
    let header: Vec<&str> = slices.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"], "{slices}");
    let row: Vec<&str> = slices.lines().nth(1).unwrap_or("").split_whitespace().collect();
    assert!(row[0].starts_with("front-") && row[1..3] == ["IPv4", "8080"], "{slices}");
    let events = kubectl.ok(&["describe", "rc", "front"]);
    assert!(
        events.contains("SuccessfulCreate") && events.contains("Created pod: front-"),
        "{events}"
    );
    kubectl.ok(&["scale", "rc", "front", "--replicas=1"]);
    wait_until(WAIT, "one replica left", || {
        kubectl.ok(&["get", "pods", "-l", "app=front", "-o", "name"]).lines().count() == 1
    });
    wait_until(WAIT, "one endpoint left", || addresses(&kubectl).len() == 1);
    // Deleting the controller deletes its pods (the garbage collector follows their owner).
    kubectl.ok(&["delete", "rc", "front"]);
    wait_until(WAIT, "the controller's pods gone", || {
        kubectl.ok(&["get", "pods", "-l", "app=front", "-o", "name"]).trim().is_empty()
    });

    // kubectl waits until the agent has stopped the pod and removed it.
    kubectl.ok(&["delete", "pod", "web", "--timeout=60s"]);
    let (ok, _, stderr) = kubectl.run(&["get", "pod", "web"]);
    assert!(!ok && stderr.contains("NotFound"), "{stderr}");
}

/// A pod with scheduling gates waits, `SchedulingGated`, until kubectl removes the last one.
#[test]
fn a_gated_pod_runs_once_its_gates_are_removed() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    let pod = kubectl.write(
        "gated.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gated\nspec:\n  schedulingGates:\n  \
         - name: example.com/quota\n  containers:\n  - name: c\n    image: kplane/pause\n",
    );
    kubectl.ok(&["create", "-f", pod.to_str().unwrap()]);
    let table = kubectl.ok(&["get", "pod", "gated", "--no-headers"]);
    assert_eq!(table.split_whitespace().nth(2), Some("SchedulingGated"), "{table}");
    // No node, no logs yet: an empty 204, as Kubernetes answers.
    let (code, _, log) = server.get_with("/api/v1/namespaces/default/pods/gated/log", &[]);
    assert_eq!((code, log.as_str()), (204, ""));
    assert_eq!(kubectl.ok(&["logs", "gated"]), "");
    let add = r#"[{"op":"add","path":"/spec/schedulingGates/-","value":{"name":"x"}}]"#;
    let (ok, _, stderr) = kubectl.run(&["patch", "pod", "gated", "--type=json", "-p", add]);
    assert!(!ok, "a gate added");
    assert!(
        stderr.contains(
            "spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new \
             scheduling gate 'x'"
        ),
        "{stderr}"
    );
    let remove = r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#;
    kubectl.ok(&["patch", "pod", "gated", "--type=json", "-p", remove]);
    wait_until(WAIT, "gated is Running", || {
        kubectl.run(&["get", "pod", "gated", "-o", "jsonpath={.status.phase}"]).1 == "Running"
    });
    assert_eq!(kubectl.ok(&["get", "pod", "gated", "-o", "jsonpath={.spec.nodeName}"]), "solo");
}

/// A pod of higher priority takes the place of one of lower priority on a full node: kubectl
/// sees the victim's `Preempted` event and the preemptor's nominated node, and it runs.
#[test]
fn a_pod_of_higher_priority_preempts_a_running_one() {
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "solo"),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_AGENT__CAPACITY__CPU", "1"),
    ]);
    let kubectl = server.kubectl();
    wait_until(WAIT, "the node is Ready", || {
        let (_, out, _) = kubectl.run(&["get", "nodes"]);
        out.lines().any(|l| l.starts_with("solo") && l.contains(" Ready"))
    });
    kubectl.ok(&["create", "priorityclass", "urgent", "--value=1000"]);
    let pod = |name: &str, class: &str| {
        let class = if class.is_empty() {
            String::new()
        } else {
            format!("  priorityClassName: {class}\n")
        };
        let yaml = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{class}  \
             terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: \
             kplane/pause\n    resources:\n      requests:\n        cpu: 800m\n"
        );
        let file = kubectl.write(&format!("{name}.yaml"), &yaml);
        kubectl.ok(&["create", "-f", file.to_str().unwrap()]);
    };
    pod("low", "");
    wait_until(WAIT, "low is Running", || {
        kubectl.run(&["get", "pod", "low", "-o", "jsonpath={.status.phase}"]).1 == "Running"
    });
    pod("urgent", "urgent");
    wait_until(WAIT, "urgent is Running", || {
        kubectl.run(&["get", "pod", "urgent", "-o", "jsonpath={.status.phase}"]).1 == "Running"
    });
    let (ok, _, stderr) = kubectl.run(&["get", "pod", "low"]);
    assert!(!ok && stderr.contains("NotFound"), "low is gone: {stderr}");
    let wide = kubectl.ok(&["get", "pod", "urgent", "-o", "wide", "--no-headers"]);
    let cells: Vec<&str> = wide.split_whitespace().collect();
    assert_eq!(&cells[6..8], ["solo", "solo"], "NODE and NOMINATED NODE: {wide}");
    let uid = kubectl.ok(&["get", "pod", "urgent", "-o", "jsonpath={.metadata.uid}"]);
    let events = kubectl.ok(&["get", "events", "--field-selector", "reason=Preempted"]);
    assert!(events.contains(&format!("Preempted by pod {uid} on node solo")), "{events}");
}

/// Deleting a namespace, as in Kubernetes: it is Terminating (and takes no new objects) until
/// the namespace controller has emptied it, which waits for its running pods to be stopped and
/// for finalizers to be removed; then it goes, and a namespace of the same name starts empty.
#[test]
fn a_deleted_namespace_goes_once_it_is_empty() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    kubectl.ok(&["create", "namespace", "team"]);
    kubectl.ok(&[
        "-n",
        "team",
        "run",
        "sleeper",
        "--image=none",
        "--command",
        "--",
        "sleep",
        "1000",
    ]);
    wait_until(WAIT, "sleeper runs", || {
        kubectl.run(&["-n", "team", "get", "pod", "sleeper", "-o", "jsonpath={.status.phase}"]).1
            == "Running"
    });
    let held = kubectl.write(
        "held.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/keep]\n",
    );
    kubectl.ok(&["-n", "team", "create", "-f", held.to_str().unwrap()]);
    kubectl.ok(&["-n", "team", "create", "configmap", "plain"]);

    kubectl.ok(&["delete", "namespace", "team", "--wait=false"]);
    let phase = || kubectl.run(&["get", "ns", "team", "-o", "jsonpath={.status.phase}"]).1;
    assert_eq!(phase(), "Terminating");
    let (ok, _, stderr) = kubectl.run(&["-n", "team", "create", "configmap", "late"]);
    assert!(!ok && stderr.contains("being terminated"), "{stderr}");
    // As kube-apiserver's namespace lifecycle admission answers it.
    let late = json!({"metadata": {"name": "late"}});
    let (code, status) = server.post("/api/v1/namespaces/team/configmaps", &late);
    assert_eq!((code, status["reason"].as_str()), (403, Some("Forbidden")), "{status}");
    assert_eq!(
        status["message"],
        "configmaps \"late\" is forbidden: unable to create new content in namespace team \
         because it is being terminated"
    );
    assert_eq!(
        status["details"],
        json!({"name": "late", "kind": "configmaps", "causes": [{"reason": "NamespaceTerminating",
            "message": "namespace team is being terminated", "field": "metadata.namespace"}]})
    );
    // Subresources are created no more than objects (`kubectl drain` relies on the cause).
    let token = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"});
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "sleeper"}});
    for (path, body, about) in [
        ("serviceaccounts/robot/token", &token, "serviceaccounts \"robot\""),
        ("pods/sleeper/eviction", &eviction, "pods \"sleeper\""),
    ] {
        let (code, status) = server.post(&format!("/api/v1/namespaces/team/{path}"), body);
        assert_eq!(code, 403, "{path}: {status}");
        let message = status["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{about} is forbidden: unable")), "{message}");
        assert_eq!(status["details"]["causes"][0]["reason"], "NamespaceTerminating");
    }
    let (code, status) =
        server.post("/api/v1/namespaces/nowhere/serviceaccounts/robot/token", &token);
    assert_eq!((code, status["message"].as_str()), (404, Some("namespaces \"nowhere\" not found")));
    // Everything else goes; the ConfigMap with a finalizer stays, and so does the namespace.
    wait_until(WAIT, "the pod and the plain ConfigMap are gone", || {
        server.get("/api/v1/namespaces/team/pods/sleeper").0 == 404
            && server.get("/api/v1/namespaces/team/configmaps/plain").0 == 404
    });
    let held_now = server.get("/api/v1/namespaces/team/configmaps/held").1;
    assert!(held_now["metadata"]["deletionTimestamp"].is_string(), "{held_now}");
    assert_eq!(phase(), "Terminating");
    // The namespace's conditions say what holds it, in Kubernetes' words.
    let condition = |kind: &str| {
        let (_, ns) = server.get("/api/v1/namespaces/team");
        let conditions = ns["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.into_iter().find(|c| c["type"] == kind).unwrap_or_default()
    };
    wait_until(WAIT, "the namespace says what remains", || {
        condition("NamespaceContentRemaining")["message"]
            == "Some resources are remaining: configmaps. has 1 resource instances"
    });
    let finalizers = condition("NamespaceFinalizersRemaining");
    assert_eq!(
        (&finalizers["status"], &finalizers["reason"], &finalizers["message"]),
        (
            &json!("True"),
            &json!("SomeFinalizersRemain"),
            &json!("Some content in the namespace has finalizers remaining: example.com/keep in 1 resource instances")
        )
    );
    let discovered = condition("NamespaceDeletionDiscoveryFailure");
    assert_eq!(
        (&discovered["status"], &discovered["reason"]),
        (&json!("False"), &json!("ResourcesDiscovered"))
    );

    kubectl.ok(&[
        "-n",
        "team",
        "patch",
        "configmap",
        "held",
        "--type=json",
        "-p",
        r#"[{"op": "remove", "path": "/metadata/finalizers"}]"#,
    ]);
    kubectl.ok(&["wait", "--for=delete", "namespace/team", "--timeout=60s"]);
    kubectl.ok(&["create", "namespace", "team"]);
    let (code, left) = server.get("/api/v1/namespaces/team/configmaps");
    assert_eq!((code, left["items"].as_array().map(Vec::len)), (200, Some(0)), "{left}");
    // Namespaces carry their name as a label, to be selected by it.
    let by_label =
        kubectl.ok(&["get", "ns", "-l", "kubernetes.io/metadata.name=team", "-o", "name"]);
    assert_eq!(by_label.trim(), "namespace/team");

    // The way out for a namespace stuck in Terminating: its finalizers emptied through the
    // finalize subresource, and it goes (what held it stays, as in Kubernetes).
    kubectl.ok(&["-n", "team", "create", "-f", held.to_str().unwrap()]);
    kubectl.ok(&["delete", "namespace", "team", "--wait=false"]);
    assert_eq!(phase(), "Terminating");
    let (_, mut stuck) = server.get("/api/v1/namespaces/team");
    stuck["spec"]["finalizers"] = serde_json::json!([]);
    // A plain update keeps them: only finalize changes them, as in Kubernetes.
    let (code, kept) = server.put("/api/v1/namespaces/team", &stuck);
    assert_eq!(code, 200, "{kept}");
    assert_eq!(kept["spec"]["finalizers"], serde_json::json!(["kubernetes"]), "{kept}");
    stuck["metadata"]["resourceVersion"] = kept["metadata"]["resourceVersion"].clone();
    let (code, finalized) = server.put("/api/v1/namespaces/team/finalize", &stuck);
    assert_eq!(code, 200, "{finalized}");
    assert_eq!(server.get("/api/v1/namespaces/team").0, 404);
}

/// Once its content is gone, a namespace that other finalizers of its own keep says so in
/// its conditions, as Kubernetes' controller writes them on every pass.
#[test]
fn a_namespace_held_by_its_own_finalizer_says_its_content_is_gone() {
    let server = Server::start_with_env(&[("KPLANE_AGENT__ENABLED", "false")]);
    let held = json!({"metadata": {"name": "held"}, "spec": {"finalizers": ["example.com/x"]}});
    assert_eq!(server.post("/api/v1/namespaces", &held).0, 201);
    let content = json!({"metadata": {"name": "c"}});
    assert_eq!(server.post("/api/v1/namespaces/held/configmaps", &content).0, 201);
    // Preconditions are the namespace storage's own, in its words.
    let body = |options: Value| serde_json::to_vec(&options).unwrap();
    let (code, status) = server.send_raw(
        "DELETE",
        "/api/v1/namespaces/held",
        Some("application/json"),
        body(json!({"preconditions": {"uid": "abc"}})),
    );
    assert_eq!((code, &status["details"]["kind"]), (409, &json!("namespaces")), "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Operation cannot be fulfilled on namespaces \"held\": Precondition failed: UID in \
             precondition: abc, UID in object meta: "
        ),
        "{message}"
    );
    // Its policy puts the garbage collector's finalizer on (here only as a dry run).
    let (code, marked) = server.send_raw(
        "DELETE",
        "/api/v1/namespaces/held",
        Some("application/json"),
        body(json!({"propagationPolicy": "Orphan", "dryRun": ["All"]})),
    );
    assert_eq!((code, &marked["metadata"]["finalizers"]), (200, &json!(["orphan"])), "{marked}");
    // An owner waiting in the foreground for a dependent that a finalizer holds.
    let maps = "/api/v1/namespaces/held/configmaps";
    let (code, owner) = server.post(maps, &json!({"metadata": {"name": "a"}}));
    assert_eq!(code, 201, "{owner}");
    let dependent = json!({"metadata": {"name": "b", "finalizers": ["example.com/hold"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a",
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": true}]}});
    assert_eq!(server.post(maps, &dependent).0, 201);
    let foreground = body(json!({"propagationPolicy": "Foreground"}));
    let (code, waiting) =
        server.send_raw("DELETE", &format!("{maps}/a"), Some("application/json"), foreground);
    assert_eq!(code, 200, "{waiting}");
    assert_eq!(waiting["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert_eq!(server.delete("/api/v1/namespaces/held").0, 200);
    // Deleting it again answers it as it is, still Terminating, as Kubernetes does.
    let (code, again) = server.delete("/api/v1/namespaces/held");
    assert_eq!((code, &again["status"]["phase"]), (200, &json!("Terminating")), "{again}");
    // The owner goes with the namespace (its collector finalizer stripped, as Kubernetes'
    // namespace deleter's deletes do); its dependent stays while its own finalizer holds it.
    wait_until(WAIT, "the waiting owner is gone", || server.get(&format!("{maps}/a")).0 == 404);
    let (_, mut held_dependent) = server.get(&format!("{maps}/b"));
    held_dependent["metadata"]["finalizers"] = json!([]);
    assert_eq!(server.put(&format!("{maps}/b"), &held_dependent).0, 200);
    let condition = |kind: &str| {
        let (_, ns) = server.get("/api/v1/namespaces/held");
        let conditions = ns["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.into_iter().find(|c| c["type"] == kind).unwrap_or_default()
    };
    wait_until(WAIT, "the namespace says its content is gone", || {
        condition("NamespaceContentRemaining")["reason"] == "ContentRemoved"
    });
    let removed = condition("NamespaceContentRemaining");
    assert_eq!(
        (&removed["status"], &removed["message"]),
        (&json!("False"), &json!("All content successfully removed"))
    );
    assert_eq!(condition("NamespaceFinalizersRemaining")["reason"], "ContentHasNoFinalizers");
    let (_, mut ns) = server.get("/api/v1/namespaces/held");
    assert_eq!(ns["spec"]["finalizers"], json!(["example.com/x"]), "{ns}");
    assert_eq!(ns["status"]["phase"], "Terminating");
    // A finalize writes the metadata it is sent too (only the status is the server's).
    ns["metadata"]["labels"]["finalized-by"] = json!("test");
    let (code, finalized) = server.put("/api/v1/namespaces/held/finalize", &ns);
    assert_eq!(code, 200, "{finalized}");
    assert_eq!(finalized["metadata"]["labels"]["finalized-by"], "test", "{finalized}");
    assert_eq!(finalized["spec"]["finalizers"], json!(["example.com/x"]), "{finalized}");
}

/// Every namespace has its `default` ServiceAccount, from its creation on, and again after it
/// is deleted, as Kubernetes' service account controller keeps it; a deleted namespace still
/// goes.
#[test]
fn every_namespace_has_a_default_service_account() {
    let server = Server::start();
    let account =
        |ns: &str| server.get(&format!("/api/v1/namespaces/{ns}/serviceaccounts/default")).0;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        wait_until(Duration::from_secs(10), "the bootstrap namespaces' accounts", || {
            account(ns) == 200
        });
    }
    assert_eq!(server.post("/api/v1/namespaces", &json!({"metadata": {"name": "team"}})).0, 201);
    wait_until(Duration::from_secs(10), "the new namespace's account", || account("team") == 200);
    assert_eq!(server.delete("/api/v1/namespaces/team/serviceaccounts/default").0, 200);
    wait_until(Duration::from_secs(10), "the account made again", || account("team") == 200);
    server.delete("/api/v1/namespaces/team");
    wait_until(Duration::from_secs(20), "the namespace gone", || {
        server.get("/api/v1/namespaces/team").0 == 404
    });
}

/// Runs the command line it is given on a new pty of 33 x 101, types a few shell commands into
/// it, and prints what the terminal showed and the command's exit code.
const ON_TERMINAL: &str = r#"
import fcntl, os, select, struct, subprocess, sys, termios, time
controller, terminal = os.openpty()
fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
child = subprocess.Popen(sys.argv[1:], stdin=terminal, stdout=terminal, stderr=terminal,
                         start_new_session=True)
os.close(terminal)
# The terminal's size reaches the agent apart from what is typed (as in Kubernetes): the shell
# waits for it.
typed = (b"while [ \"$(stty size)\" = '0 0' ]; do sleep 0.1; done; "
         b"stty size; tty; echo TERM=$TERM; sleep 30 & jobs; kill %1; exit 7\n")
shown, deadline = b"", time.monotonic() + 60
while time.monotonic() < deadline:
    if select.select([controller], [], [], 0.2)[0]:
        try:
            more = os.read(controller, 4096)
        except OSError:
            break
        if not more:
            break
        if not shown:
            # The shell's prompt: kubectl is connected, and its terminal is raw.
            os.write(controller, typed)
        shown += more
    elif child.poll() is not None:
        break
sys.stdout.write(shown.decode(errors="replace") + "exit %d\n" % child.wait())
"#;

/// A pod's containers, and what is exec'd in them, have the pod's host name (`spec.hostname`,
/// else its name), as a container runtime gives each pod a UTS namespace; a pod on the host's
/// network has the machine's. Where the agent may make namespaces (root).
#[test]
fn containers_have_their_pod_s_host_name() {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    let machine = nix::unistd::gethostname().unwrap().to_string_lossy().to_string();
    // Its postStart hook and its readiness probe see the container's host name too: a failed
    // hook would restart the container, a failed probe keep it unready.
    let pod = |name: &str, expected: &str, spec: Value| {
        let mut spec = spec;
        let check =
            json!({"exec": {"command": ["sh", "-c", format!("test $(hostname) = {expected}")]}});
        spec["containers"] = json!([{"name": "c", "image": "none",
            "command": ["sh", "-c", "hostname; sleep 1000"],
            "lifecycle": {"postStart": check},
            "readinessProbe": {"periodSeconds": 1, "exec": check["exec"]}}]);
        let pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec});
        let file = kubectl.write(&format!("{name}.json"), &pod.to_string());
        kubectl.ok(&["create", "-f", file.to_str().unwrap()]);
    };
    pod("named", "named", json!({}));
    pod("renamed", "chosen", json!({"hostname": "chosen"}));
    pod("on-host", &machine, json!({"hostNetwork": true}));
    for (name, expected) in [("named", "named"), ("renamed", "chosen"), ("on-host", &machine)] {
        wait_until(WAIT, &format!("{name} printed its host name"), || {
            kubectl.run(&["logs", name]).1 == format!("{expected}\n")
        });
        assert_eq!(kubectl.ok(&["exec", name, "--", "hostname"]), format!("{expected}\n"));
        wait_until(WAIT, &format!("{name}'s probe passed"), || {
            let ready = "jsonpath={.status.containerStatuses[0].ready}";
            kubectl.run(&["get", "pod", name, "-o", ready]).1 == "true"
        });
        let restarts = "jsonpath={.status.containerStatuses[0].restartCount}";
        assert_eq!(kubectl.ok(&["get", "pod", name, "-o", restarts]), "0", "its hook passed");
    }
    assert_eq!(nix::unistd::gethostname().unwrap().to_string_lossy(), machine, "the machine's own");
}

/// `kubectl exec` and `kubectl attach` through the API server, which relays their WebSocket
/// to the pod's agent: a command runs in the container's environment, reads what kubectl
/// sends on stdin to its end, and hands back its exit code; attach streams the container's
/// output. A request that is not an upgrade, or names no container of the pod, is 400.
#[test]
fn kubectl_exec_and_attach_reach_the_container() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    let ticker = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "box"},
        "spec": {"containers": [{"name": "c", "image": "kplane/pause", "env": [{"name": "GREETING", "value": "hello"}],
            "command": ["sh", "-c", "while true; do echo tick; sleep 0.2; done"]}]}}"#;
    kubectl.ok(&["create", "-f", kubectl.write("box.json", ticker).to_str().unwrap()]);
    wait_until(WAIT, "box is Running", || {
        kubectl.run(&["get", "pod", "box", "-o", "jsonpath={.status.phase}"]).1 == "Running"
    });

    let out = kubectl.ok(&["exec", "box", "--", "sh", "-c", "echo $GREETING from $POD_NAME"]);
    assert_eq!(out, "hello from box\n");
    let mut cat = kubectl.command();
    cat.args(["exec", "-i", "box", "--", "cat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut cat = cat.spawn().unwrap();
    std::io::Write::write_all(&mut cat.stdin.take().unwrap(), b"line one\nline two\n").unwrap();
    let echoed = cat.wait_with_output().unwrap();
    assert!(echoed.status.success());
    assert_eq!(String::from_utf8_lossy(&echoed.stdout), "line one\nline two\n");
    let failed =
        kubectl.command().args(["exec", "box", "--", "sh", "-c", "exit 3"]).output().unwrap();
    assert_eq!(failed.status.code(), Some(3), "{}", String::from_utf8_lossy(&failed.stderr));
    // A command ended by a signal exits 128 + the signal, as container runtimes report it.
    let mut killed = kubectl.command();
    let killed = killed.args(["exec", "box", "--", "sh", "-c", "kill -9 $$"]).output().unwrap();
    assert_eq!(killed.status.code(), Some(137), "{}", String::from_utf8_lossy(&killed.stderr));

    // -t: kubectl on a terminal of 33 rows and 101 columns (a pty the harness opens) types into
    // a shell on a pty of the agent's: the size arrives, the shell has job control, and the exit
    // code comes back.
    let harness = kubectl.write("on_terminal.py", ON_TERMINAL);
    let mut typed = kubectl.command();
    let kubectl_line: Vec<String> = std::iter::once(typed.get_program())
        .chain(typed.get_args())
        .map(|a| a.to_string_lossy().to_string())
        .collect();
    typed = std::process::Command::new("python3");
    typed.arg(&harness).args(&kubectl_line).args(["exec", "-it", "box", "--", "sh"]);
    let shown = typed.output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).to_string();
    assert!(shown.contains("\r\n33 101\r\n/dev/pts/"), "{shown}");
    assert!(shown.contains("TERM=xterm") && shown.contains("Running"), "{shown}");
    assert!(shown.ends_with("exit 7\n"), "{shown}");

    // run -it --rm: the same shell on a terminal of the container's own (stdin, stdinOnce,
    // tty), typed into through attach; its exit code comes back and the pod is deleted.
    let mut run = std::process::Command::new("python3");
    run.arg(&harness).args(&kubectl_line).args(["run", "shell", "-it", "--rm"]);
    run.args(["--restart=Never", "--image=kplane/pause", "--command", "--", "sh"]);
    let shown = String::from_utf8_lossy(&run.output().unwrap().stdout).to_string();
    // (The shell's prompt may come after the typed line's echo: kubectl shows nothing of the
    // shell before it attaches, and the harness types once kubectl shows something.)
    assert!(shown.contains("33 101\r\n/dev/pts/"), "{shown}");
    assert!(shown.contains("TERM=xterm") && shown.contains("Running"), "{shown}");
    assert!(shown.contains("pod \"shell\" deleted") && shown.ends_with("exit 7\n"), "{shown}");
    assert_eq!(server.get("/api/v1/namespaces/default/pods/shell").0, 404);

    // attach -i: what kubectl reads goes to the container's stdin; with stdinOnce, the end of
    // kubectl's input is the end of the container's.
    let reader = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "reader"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "kplane/pause",
            "stdin": true, "stdinOnce": true,
            "command": ["sh", "-c", "while read line; do echo got $line; done; echo done"]}]}}"#;
    kubectl.ok(&["create", "-f", kubectl.write("reader.json", reader).to_str().unwrap()]);
    wait_until(WAIT, "reader is Running", || {
        kubectl.run(&["get", "pod", "reader", "-o", "jsonpath={.status.phase}"]).1 == "Running"
    });
    let mut typed = kubectl.command();
    typed.args(["attach", "-i", "reader"]);
    typed.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut typed = typed.spawn().unwrap();
    std::io::Write::write_all(&mut typed.stdin.take().unwrap(), b"one\ntwo\n").unwrap();
    let answered = typed.wait_with_output().unwrap();
    assert!(answered.status.success());
    assert_eq!(String::from_utf8_lossy(&answered.stdout), "got one\ngot two\ndone\n");
    wait_until(WAIT, "reader Succeeded", || {
        kubectl.run(&["get", "pod", "reader", "-o", "jsonpath={.status.phase}"]).1 == "Succeeded"
    });

    let (ok, _, stderr) = kubectl.run(&["exec", "box", "-c", "nope", "--", "true"]);
    assert!(!ok && stderr.contains("container nope is not valid for pod box"), "{stderr}");
    let (code, status) = server.get("/api/v1/namespaces/default/pods/box/exec?command=true");
    assert_eq!((code, status["message"].as_str()), (400, Some("Upgrade request required")));

    // attach: the container's output from now on, until kubectl is stopped.
    let mut attach = kubectl.command();
    attach.args(["attach", "box"]).stdout(std::process::Stdio::piped());
    let mut attach = attach.spawn().unwrap();
    let mut output = std::io::BufReader::new(attach.stdout.take().unwrap());
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut output, &mut line).is_ok_and(|n| n > 0) {
            if lines.send(std::mem::take(&mut line)).is_err() {
                break;
            }
        }
    });
    let first = received.recv_timeout(WAIT);
    crate::util::terminate(&mut attach);
    assert_eq!(first.as_deref(), Ok("tick\n"));

    // A command exec'd in a container ends with it, and so does what it started.
    let mut exec = kubectl.command();
    exec.args(["exec", "box", "--", "sh", "-c", "sleep 2228; echo never"]);
    let mut exec = exec.stdout(std::process::Stdio::piped()).spawn().unwrap();
    wait_until(WAIT, "the exec'd sleep runs", || process_running("sleep 2228"));
    kubectl.ok(&["delete", "pod", "box", "--wait=false"]);
    let mut ended = None;
    wait_until(WAIT, "the exec ended with its container", || {
        ended = exec.try_wait().unwrap();
        ended.is_some()
    });
    assert_eq!(ended.and_then(|status| status.code()), Some(137));
    wait_until(WAIT, "what it started stopped", || !process_running("sleep 2228"));
}

/// A running `kubectl port-forward` and what it prints on its first line: the local port.
struct Forwarding {
    child: std::process::Child,
    local_port: u16,
    errors: std::sync::mpsc::Receiver<String>,
}

impl Forwarding {
    /// `kubectl port-forward pod/NAME :PORT` (any free local port).
    fn start(kubectl: &crate::util::Kubectl, pod: &str, port: u16) -> Forwarding {
        let mut child = kubectl
            .command()
            .args(["port-forward", &format!("pod/{pod}"), &format!(":{port}")])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let lines = |pipe: Box<dyn std::io::Read + Send>| {
            let (sent, received) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for line in std::io::BufRead::lines(std::io::BufReader::new(pipe)) {
                    if line.map(|l| sent.send(l)).is_err() {
                        break;
                    }
                }
            });
            received
        };
        let output = lines(Box::new(child.stdout.take().unwrap()));
        let errors = lines(Box::new(child.stderr.take().unwrap()));
        let Ok(first) = output.recv_timeout(WAIT) else {
            let told: Vec<String> = errors.try_iter().collect();
            panic!("kubectl port-forward printed no port: {told:?}");
        };
        // "Forwarding from 127.0.0.1:40123 -> 9376"
        let local_port = first
            .strip_prefix("Forwarding from 127.0.0.1:")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        Forwarding { child, local_port, errors }
    }

    /// Writes `request` into a new local connection, half-closes it (or not), and reads to
    /// the end: the pod's end of the connection, or its refusal.
    fn exchange(&self, request: &[u8], half_close: bool) -> Vec<u8> {
        use std::io::{Read, Write};
        let mut connection = std::net::TcpStream::connect(("127.0.0.1", self.local_port)).unwrap();
        connection.set_read_timeout(Some(WAIT)).unwrap();
        let mut writing = connection.try_clone().unwrap();
        let request = request.to_vec();
        let writer = std::thread::spawn(move || {
            writing.write_all(&request).unwrap();
            if half_close {
                writing.shutdown(std::net::Shutdown::Write).unwrap();
            }
        });
        let mut answer = Vec::new();
        connection.read_to_end(&mut answer).unwrap();
        writer.join().unwrap();
        answer
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        // Not once it has exited and been waited for: its pid may be another's by now.
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            crate::util::terminate(&mut self.child);
        }
    }
}

/// `kubectl port-forward` through the API server, which relays its WebSocket to the agent; the
/// agent speaks the SPDY kubectl tunnels inside it, one pair of streams per local connection:
/// HTTP to agnhost, megabytes both ways with a half-close to an echo server, and a port
/// nothing listens on, which kubectl reports before it gives up.
#[test]
fn kubectl_port_forward_reaches_the_pods_ports() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    let echo_server = "import os, socket\n\
        s = socket.socket(); s.bind((os.environ['POD_IP'], 7000)); s.listen()\n\
        while True:\n    c = s.accept()[0]\n    while d := c.recv(65536): c.sendall(d)\n    c.close()\n";
    let pods = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c",
                "image": "kplane/agnhost", "args": ["serve-hostname"]}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "echo"},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c",
                "image": "none", "command": ["python3", "-c", echo_server],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "readinessProbe": {"tcpSocket": {"port": 7000}, "periodSeconds": 1}}]}}]});
    let file = kubectl.write("pods.json", &pods.to_string());
    kubectl.ok(&["create", "-f", file.to_str().unwrap()]);
    wait_until(WAIT, "both pods are ready", || {
        let (_, out, _) = kubectl.run(&[
            "get",
            "pods",
            "-o",
            "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        out == "True True"
    });

    let web = Forwarding::start(&kubectl, "web", 9376);
    // The pod closes first, or the client half-closes first: either way the local connection
    // ends when the pod's has.
    for half_close in [false, true] {
        let answer = web.exchange(b"GET / HTTP/1.0\r\n\r\n", half_close);
        assert!(String::from_utf8_lossy(&answer).ends_with("web"), "{answer:?}");
    }
    drop(web);

    let echo = Forwarding::start(&kubectl, "echo", 7000);
    let sent: Vec<u8> =
        (0..4_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let echoed = echo.exchange(&sent, true);
    assert!(echoed == sent, "{} of {} bytes came back", echoed.len(), sent.len());
    drop(echo);

    let mut closed = Forwarding::start(&kubectl, "web", 9999);
    assert_eq!(closed.exchange(b"hello", false), b"", "nothing answers on 9999");
    let told = closed.errors.recv_timeout(WAIT).unwrap_or_default();
    assert!(told.contains("error forwarding port 9999") && told.contains("refused"), "{told}");
    let status = closed.child.wait().unwrap();
    assert!(!status.success(), "kubectl gives up on a lost connection");

    let (code, status) = server.get("/api/v1/namespaces/default/pods/web/portforward?ports=9376");
    assert_eq!((code, status["message"].as_str()), (400, Some("Upgrade request required")));

    // A pod whose node's agent cannot be reached: kubectl's SPDY retry hears why, as it does
    // from kube-apiserver (it shows only the second answer).
    let silent_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let node = json!({"metadata": {"name": "gone"}});
    assert_eq!(server.post("/api/v1/nodes", &node).0, 201);
    let node_status = json!({"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": silent_port.port()}}}});
    kubectl.ok(&[
        "patch",
        "node",
        "gone",
        "--subresource=status",
        "--type=merge",
        "-p",
        &node_status.to_string(),
    ]);
    let stranded = json!({"metadata": {"name": "stranded"}, "spec": {"nodeName": "gone",
        "containers": [{"name": "c", "image": "kplane/pause"}]}});
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &stranded).0, 201);
    kubectl.ok(&[
        "patch",
        "pod",
        "stranded",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status": {"phase": "Running"}}"#,
    ]);
    let (ok, _, told) = kubectl.run(&["port-forward", "pod/stranded", ":80"]);
    assert!(!ok && told.contains("error dialing the agent of node gone"), "{told}");
}

/// Persistent volumes: a pod waits for its claim; the claim is bound to the volume that suits
/// it; the claim deleted, a Retain volume is Released.
#[test]
fn claims_are_bound_to_volumes_and_their_pods_wait_for_them() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
        "spec": {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "none", "command": ["sleep", "1000"]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}});
    assert_eq!(server.post("/api/v1/namespaces/default/pods", &pod).0, 201);
    wait_until(WAIT, "the pod waits for its claim", || {
        let out = kubectl.ok(&["describe", "pod", "user"]);
        out.contains("persistentvolumeclaim \"data\" not found")
    });
    let manifests = kubectl.write(
        "storage.yaml",
        r#"apiVersion: v1
kind: PersistentVolume
metadata: {name: big}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/kplane-big}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: small}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/kplane-small}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 500Mi}}
"#,
    );
    kubectl.ok(&["create", "-f", manifests.to_str().unwrap()]);
    let row = |out: &str, name: &str| -> Vec<String> {
        let line = out.lines().find(|l| l.starts_with(name)).unwrap_or("");
        line.split_whitespace().map(String::from).collect()
    };
    wait_until(WAIT, "the claim is bound", || {
        row(&kubectl.ok(&["get", "pvc"]), "data").get(1).is_some_and(|s| s == "Bound")
    });
    let claim = row(&kubectl.ok(&["get", "pvc"]), "data");
    assert_eq!(claim[..4], ["data", "Bound", "small", "1Gi"], "the smallest that suits: {claim:?}");
    let volume = row(&kubectl.ok(&["get", "pv"]), "small");
    assert_eq!(volume[4..6], ["Bound", "default/data"], "{volume:?}");
    assert_eq!(row(&kubectl.ok(&["get", "pv"]), "big")[4], "Available");
    wait_until(WAIT, "the pod runs", || {
        let (_, pod) = server.get("/api/v1/namespaces/default/pods/user");
        pod["status"]["phase"] == "Running" && pod["spec"]["nodeName"] == "solo"
    });

    // A claim in use stays, Terminating, while its pod runs (pvc-protection), and its volume
    // stays bound.
    kubectl.ok(&["delete", "pvc", "data", "--wait=false"]);
    let (_, claim) = server.get("/api/v1/namespaces/default/persistentvolumeclaims/data");
    assert_eq!(claim["metadata"]["finalizers"], json!(["kubernetes.io/pvc-protection"]));
    assert!(claim["metadata"]["deletionTimestamp"].is_string(), "{claim}");
    assert_eq!(row(&kubectl.ok(&["get", "pv"]), "small")[4], "Bound");
    kubectl.ok(&["delete", "pod", "user"]);
    wait_until(WAIT, "the volume is released", || {
        row(&kubectl.ok(&["get", "pv"]), "small").get(4).is_some_and(|s| s == "Released")
    });
}

/// `kubectl debug`: an ephemeral container added to a running pod (the `ephemeralcontainers`
/// subresource) is run once by the agent, its status and logs read like any container's; it
/// may not be changed, nor given what ephemeral containers may not have, nor be set but
/// through the subresource.
#[test]
fn kubectl_debug_adds_an_ephemeral_container() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    kubectl.ok(&["run", "target", "--image=none", "--command", "--", "sleep", "1000"]);
    wait_until(WAIT, "the pod runs", || {
        server.get("/api/v1/namespaces/default/pods/target").1["status"]["phase"] == "Running"
    });
    kubectl.ok(&[
        "debug",
        "target",
        "--image=busybox",
        "--container=dbg",
        "--target=target",
        "--",
        "sh",
        "-c",
        "echo debugging $HOSTNAME",
    ]);
    let mut pod = serde_json::Value::Null;
    wait_until(WAIT, "the ephemeral container ran", || {
        pod = server.get("/api/v1/namespaces/default/pods/target").1;
        pod["status"]["ephemeralContainerStatuses"][0]["state"]["terminated"]["reason"]
            == "Completed"
    });
    assert_eq!(pod["spec"]["ephemeralContainers"][0]["targetContainerName"], "target", "{pod}");
    assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 0, "the pod runs on");
    assert_eq!(kubectl.ok(&["logs", "target", "-c", "dbg"]).trim(), "debugging target");

    let path = "/api/v1/namespaces/default/pods/target/ephemeralcontainers";
    let patch = |body: serde_json::Value| {
        let response = reqwest::blocking::Client::new()
            .patch(server.url(path))
            .header("Content-Type", "application/strategic-merge-patch+json")
            .body(body.to_string())
            .send()
            .unwrap();
        let code = response.status().as_u16();
        (code, response.json::<serde_json::Value>().unwrap())
    };
    let (code, refused) = patch(json!({"spec": {"ephemeralContainers": [
        {"name": "served", "image": "x", "ports": [{"containerPort": 80}]}]}}));
    assert_eq!(code, 422, "{refused}");
    // (A container a strategic patch adds comes first, as Kubernetes orders merged lists.)
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.ephemeralContainers[0].ports");
    let (code, refused) = patch(json!({"spec": {"ephemeralContainers": [
        {"name": "dbg", "image": "other"}]}}));
    assert_eq!(code, 422, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("may not be changed"), "{refused}");
    // The pod's own update may not change them; nor may a create set them.
    let (_, mut current) = server.get("/api/v1/namespaces/default/pods/target");
    current["spec"].as_object_mut().unwrap().remove("ephemeralContainers");
    let (code, refused) = server.put("/api/v1/namespaces/default/pods/target", &current);
    assert_eq!(code, 422, "{refused}");
    let mut created = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "early"},
        "spec": {"containers": [{"name": "c", "image": "i"}],
            "ephemeralContainers": [{"name": "dbg", "image": "i"}]}});
    let (code, refused) = server.post("/api/v1/namespaces/default/pods", &created.take());
    assert_eq!(code, 422, "{refused}");
    assert_eq!(
        refused["message"],
        "Pod \"early\" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create"
    );

    // `--copy-to` sends the whole pod back as protobuf: nothing of it may be lost on the way.
    let (code, rich) = server.post(
        "/api/v1/namespaces/default/pods",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rich"},
            "spec": {"tolerations": [{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [{"name": "c", "image": "none", "command": ["sleep", "1000"],
                    "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "volumeMounts": [{"name": "v", "mountPath": "/data"}],
                    "readinessProbe": {"exec": {"command": ["true"]}},
                    "securityContext": {"runAsNonRoot": false}}]}}),
    );
    assert_eq!(code, 201, "{rich}");
    kubectl.ok(&["debug", "rich", "--copy-to=rich-copy", "--image=busybox", "--container=dbg"]);
    let (_, copy) = server.get("/api/v1/namespaces/default/pods/rich-copy");
    let original = &rich["spec"]["containers"][0];
    let copied = &copy["spec"]["containers"][0];
    for field in ["env", "volumeMounts", "readinessProbe", "securityContext"] {
        assert_eq!(copied[field], original[field], "{field} of the copy: {copy}");
    }
    assert_eq!(copy["spec"]["volumes"], rich["spec"]["volumes"], "{copy}");
    assert_eq!(copy["spec"]["tolerations"], rich["spec"]["tolerations"], "{copy}");
    // A running ephemeral container is never ready, and nothing says it started (the
    // kubelet's prober leaves ephemeral containers out).
    kubectl.ok(&["debug", "target", "--image=busybox", "--container=long", "--", "sleep", "600"]);
    let long = || -> serde_json::Value {
        let pod = server.get("/api/v1/namespaces/default/pods/target").1;
        let statuses = pod["status"]["ephemeralContainerStatuses"].as_array().cloned();
        statuses.into_iter().flatten().find(|s| s["name"] == "long").unwrap_or_default()
    };
    wait_until(WAIT, "the long one runs", || long()["state"]["running"].is_object());
    let status = long();
    assert_eq!(status["ready"], false, "{status}");
    assert!(status.get("started").is_none(), "{status}");
}

/// A pod's securityContext: its containers (and what is exec'd in them, and their exec
/// probes) run as its user and groups; a `runAsNonRoot` container that would run as root is
/// refused in the kubelet's words.
#[test]
fn containers_run_as_their_security_contexts_user() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    let manifest = r#"
apiVersion: v1
kind: Pod
metadata: {name: who}
spec:
  securityContext: {runAsUser: 1000, runAsGroup: 3000, fsGroup: 2000}
  containers:
  - name: c
    image: none
    command: [sh, -c, 'echo "uid $(id -u) gid $(id -g) groups $(id -G)"; sleep 3600']
    readinessProbe: {exec: {command: [sh, -c, 'test "$(id -u)" = 1000']}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: nonroot}
spec:
  securityContext: {runAsNonRoot: true}
  containers:
  - name: c
    image: none
    command: [sleep, '3600']
    securityContext: {runAsUser: 0}
"#;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest).unwrap();
    kubectl.ok(&["create", "-f", file.path().to_str().unwrap()]);
    let waiting = |pod: &str| {
        let path = "{.status.containerStatuses[0].state.waiting.message}";
        kubectl.run(&["get", "pod", pod, "-o", &format!("jsonpath={path}")]).1
    };
    wait_until(WAIT, "nonroot is refused", || !waiting("nonroot").is_empty());
    assert_eq!(
        waiting("nonroot"),
        format!(
            "container's runAsUser breaks non-root policy (pod: \"nonroot_default({})\", \
             container: c)",
            kubectl.ok(&["get", "pod", "nonroot", "-o", "jsonpath={.metadata.uid}"])
        )
    );
    // Taking another user needs the agent to be root, as these tests run in CI.
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    wait_until(WAIT, "who's log", || kubectl.run(&["logs", "who"]).1.contains("uid "));
    let mut said =
        kubectl.ok(&["logs", "who"]).split_whitespace().map(String::from).collect::<Vec<_>>();
    said[5..].sort();
    assert_eq!(said, ["uid", "1000", "gid", "3000", "groups", "2000", "3000"]);
    assert_eq!(kubectl.ok(&["exec", "who", "--", "id", "-u"]).trim(), "1000");
    wait_until(WAIT, "who is ready (its probe runs as 1000)", || {
        kubectl.run(&["get", "pod", "who", "-o", "jsonpath={.status.containerStatuses[0].ready}"]).1
            == "true"
    });
}

#[test]
fn kubectl_logs_follow_reads_a_deleted_pod_to_its_last_line() {
    let server = single_node_cluster();
    let kubectl = server.kubectl();
    // Its last line is written as it stops, just before its node agent removes its files
    // (its first once its trap is set).
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trap"},
        "spec": {"containers": [{"name": "c", "image": "kplane/pause",
            "command": ["sh", "-c", "trap 'echo bye; exit 0' TERM; echo start; while true; do sleep 0.1; done"]}]}}"#;
    kubectl.ok(&["create", "-f", kubectl.write("trap.json", pod).to_str().unwrap()]);
    wait_until(WAIT, "trap is Running", || {
        kubectl.run(&["get", "pod", "trap", "-o", "jsonpath={.status.phase}"]).1 == "Running"
    });
    let mut follow = kubectl.command();
    follow.args(["logs", "-f", "trap"]).stdout(std::process::Stdio::piped());
    let mut follow = follow.spawn().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let _ = lines.send(line.unwrap_or_default());
        }
    });
    assert_eq!(received.recv_timeout(WAIT).unwrap(), "start", "the follow has begun");
    kubectl.ok(&["delete", "pod", "trap", "--wait=false"]);
    assert_eq!(received.recv_timeout(WAIT).unwrap(), "bye");
    wait_until(WAIT, "the follow ends", || follow.try_wait().unwrap().is_some());
}
