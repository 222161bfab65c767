//! Admission as Kubernetes enables it by default, driven with kubectl and HTTP: the
//! LimitRanger, the ServiceAccount and the ResourceQuota admission (with their controllers).

use std::time::Duration;

use serde_json::{json, Value};

use crate::util::{wait_until, Server};

/// A namespace's LimitRange gives the pods created there the requests and limits they leave
/// out (noting them in an annotation, with the QoS class they make), and refuses pods and
/// claims outside its bounds with 403, in Kubernetes' words.
#[test]
fn limit_ranges_default_and_bound_pods_and_claims() {
    let server = Server::start();
    let k = server.kubectl();
    k.ok(&["create", "namespace", "limited"]);
    let range = k.write(
        "range.yaml",
        "apiVersion: v1
kind: LimitRange
metadata: {name: bounds, namespace: limited}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 128Mi}
    defaultRequest: {cpu: 100m, memory: 128Mi}
    max: {cpu: '1'}
  - type: PersistentVolumeClaim
    max: {storage: 10Gi}
",
    );
    k.ok(&["create", "-f", range.to_str().unwrap()]);
    k.ok(&["run", "plain", "--image=kplane/pause", "-n", "limited"]);
    let pod: Value =
        serde_json::from_str(&k.ok(&["get", "pod", "plain", "-n", "limited", "-o", "json"]))
            .unwrap();
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        serde_json::json!({"requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "128Mi"}})
    );
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container plain; \
         cpu, memory limit for container plain"
    );
    assert_eq!(pod["status"]["qosClass"], "Burstable");
    // Elsewhere nothing is set.
    k.ok(&["run", "free", "--image=kplane/pause"]);
    let free = k.ok(&["get", "pod", "free", "-o", "jsonpath={.spec.containers[0].resources}"]);
    assert_eq!(free, "{}");

    let (ok, _, err) = k.run(&[
        "run",
        "big",
        "--image=kplane/pause",
        "-n",
        "limited",
        "--overrides",
        r#"{"spec": {"containers": [{"name": "big", "image": "kplane/pause",
            "resources": {"limits": {"cpu": "2"}}}]}}"#,
    ]);
    assert!(!ok, "a pod over the range's max was created");
    assert!(
        err.contains(
            "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
        ),
        "{err}"
    );
    // The LimitRanger's check is validating admission, which Kubernetes runs once a name has
    // been generated: the refusal names it, not the prefix.
    let generated = json!({"metadata": {"generateName": "big-"}, "spec": {"containers": [
        {"name": "c", "image": "kplane/pause", "resources": {"limits": {"cpu": "2"}}}]}});
    let (code, status) = server.post("/api/v1/namespaces/limited/pods", &generated);
    assert_eq!(code, 403, "{status}");
    let message = status["message"].as_str().unwrap();
    let named = message.strip_prefix("pods \"big-").and_then(|m| m.split_once('"'));
    assert!(
        named.is_some_and(|(suffix, rest)| suffix.len() == 5
            && rest == " is forbidden: maximum cpu usage per Container is 1, but limit is 2"),
        "{message}"
    );
    assert_eq!(status["details"]["name"].as_str().map(str::len), Some(9), "{status}");
    let claim = |name: &str, storage: &str| {
        format!(
            "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}, namespace: limited}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: {storage}}}}}
"
        )
    };
    let small = k.write("small.yaml", &claim("small", "1Gi"));
    k.ok(&["create", "-f", small.to_str().unwrap()]);
    let huge = k.write("huge.yaml", &claim("huge", "20Gi"));
    let (ok, _, err) = k.run(&["create", "-f", huge.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains(
            "maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"
        ),
        "{err}"
    );
    // A claim being deleted is no longer held to the ranges: its finalizers can go.
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    assert_eq!(server.post("/api/v1/namespaces/limited/persistentvolumeclaims", &held).0, 201);
    let floor = json!({"metadata": {"name": "floor"}, "spec": {"limits": [
        {"type": "PersistentVolumeClaim", "min": {"storage": "5Gi"}}]}});
    assert_eq!(server.post("/api/v1/namespaces/limited/limitranges", &floor).0, 201);
    k.ok(&["delete", "pvc", "held", "-n", "limited", "--wait=false"]);
    let unhold = r#"[{"op": "remove", "path": "/metadata/finalizers/0"}]"#;
    k.ok(&["patch", "pvc", "held", "-n", "limited", "--type=json", "-p", unhold]);
    k.ok(&["delete", "limitrange", "floor", "-n", "limited"]);
    // Once the range is gone, so are its bounds.
    k.ok(&["delete", "limitrange", "bounds", "-n", "limited"]);
    k.ok(&["create", "-f", huge.to_str().unwrap()]);
}

/// A namespace's ResourceQuota counts what is created there once the controller has worked
/// out its usage; creates past its hard limits are refused with 403 in Kubernetes' words,
/// and what a deleted pod held is given back.
#[test]
fn resource_quotas_count_and_bound_what_a_namespace_holds() {
    let server = Server::start();
    let k = server.kubectl();
    k.ok(&["create", "namespace", "counted"]);
    k.ok(&["create", "quota", "q", "-n", "counted", "--hard=pods=2,requests.cpu=1,configmaps=1"]);
    let used = |resource: &str| {
        k.ok(&[
            "get",
            "quota",
            "q",
            "-n",
            "counted",
            "-o",
            &format!("jsonpath={{.status.used.{resource}}}"),
        ])
    };
    wait_until(Duration::from_secs(10), "the quota's usage is worked out", || used("pods") == "0");
    let run = |name: &str, cpu: Option<&str>| {
        let resources = cpu.map_or(String::new(), |cpu| {
            format!(r#", "resources": {{"requests": {{"cpu": "{cpu}"}}}}"#)
        });
        let overrides = format!(
            r#"{{"spec": {{"containers": [{{"name": "{name}", "image": "kplane/pause"{resources}}}]}}}}"#
        );
        k.run(&["run", name, "-n", "counted", "--image=kplane/pause", "--overrides", &overrides])
    };
    assert!(run("a", Some("400m")).0);
    let (ok, _, err) = run("b", None);
    assert!(
        !ok && err
            .contains("pods \"b\" is forbidden: failed quota: q: must specify requests.cpu for: b"),
        "{err}"
    );
    let (ok, _, err) = run("c", Some("700m"));
    assert!(
        !ok && err.contains(
            "exceeded quota: q, requested: requests.cpu=700m, used: requests.cpu=400m, limited: requests.cpu=1"
        ),
        "{err}"
    );
    assert!(run("d", Some("100m")).0);
    let (ok, _, err) = run("e", Some("100m"));
    assert!(
        !ok && err.contains("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"),
        "{err}"
    );
    assert_eq!((used("pods"), used("requests\\.cpu")), ("2".to_string(), "500m".to_string()));
    k.ok(&["create", "configmap", "one", "-n", "counted"]);
    let (ok, _, err) = k.run(&["create", "configmap", "two", "-n", "counted"]);
    assert!(!ok && err.contains("exceeded quota: q, requested: configmaps=1"), "{err}");
    // What a deleted pod held is given back.
    k.ok(&["delete", "pod", "d", "-n", "counted", "--grace-period=0", "--force"]);
    wait_until(Duration::from_secs(10), "the deleted pod's usage is given back", || {
        used("pods") == "1"
    });
    assert!(run("e", Some("100m")).0);
    // Every quota's constraints come before any quota's limits, as Kubernetes checks them: a
    // pod past q's pod count that states no memory hears of the memory first.
    k.ok(&["create", "quota", "zmem", "-n", "counted", "--hard=requests.memory=10G"]);
    let memory = || {
        let path = "jsonpath={.status.used.requests\\.memory}";
        k.ok(&["get", "quota", "zmem", "-n", "counted", "-o", path])
    };
    wait_until(Duration::from_secs(10), "the memory quota's usage is worked out", || {
        memory() == "0"
    });
    let (ok, _, err) = run("f", Some("100m"));
    assert!(
        !ok && err.contains("failed quota: zmem: must specify requests.memory for: f"),
        "{err}"
    );
    // Amounts are written as they were asked for: 2G of memory is "2G", not "1953125Ki".
    k.ok(&["delete", "pod", "e", "-n", "counted", "--grace-period=0", "--force"]);
    wait_until(Duration::from_secs(10), "the pod's usage is given back", || used("pods") == "1");
    let overrides = r#"{"spec": {"containers": [{"name": "g", "image": "kplane/pause",
        "resources": {"requests": {"cpu": "100m", "memory": "2G"}}}]}}"#;
    k.ok(&["run", "g", "-n", "counted", "--image=kplane/pause", "--overrides", overrides]);
    assert_eq!(memory(), "2G");
}

/// A quota with a scope selector counts and bounds only the pods it selects: those of the
/// priority classes it names (`kubectl create quota --scopes` and a selector from a file).
#[test]
fn quotas_select_pods_by_priority_class() {
    let server = Server::start();
    let k = server.kubectl();
    k.ok(&["create", "namespace", "tiers"]);
    k.ok(&["create", "priorityclass", "high", "--value=1000"]);
    let quota = "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: high, namespace: tiers}\n\
        spec:\n  hard: {pods: \"1\"}\n  scopeSelector:\n    matchExpressions:\n\
        \x20   - {scopeName: PriorityClass, operator: In, values: [high]}\n";
    k.ok(&["create", "-f", k.write("quota.yaml", quota).to_str().unwrap()]);
    let used =
        || k.ok(&["get", "quota", "high", "-n", "tiers", "-o", "jsonpath={.status.used.pods}"]);
    wait_until(Duration::from_secs(10), "the quota's usage is worked out", || used() == "0");
    let run = |name: &str, class: Option<&str>| {
        let class = class.map_or(String::new(), |c| format!(r#""priorityClassName": "{c}", "#));
        let overrides = format!(
            r#"{{"spec": {{{class}"containers": [{{"name": "{name}", "image": "kplane/pause"}}]}}}}"#
        );
        k.run(&["run", name, "-n", "tiers", "--image=kplane/pause", "--overrides", &overrides])
    };
    assert!(run("first", Some("high")).0);
    let (ok, _, err) = run("second", Some("high"));
    assert!(
        !ok && err
            .contains("exceeded quota: high, requested: pods=1, used: pods=1, limited: pods=1"),
        "{err}"
    );
    assert!(run("plain", None).0, "a pod the quota does not select is not counted");
    assert_eq!(used(), "1");
    // What Kubernetes refuses of a selector.
    let bad = quota.replace("values: [high]", "values: []").replace("name: high,", "name: bad,");
    let (ok, _, err) = k.run(&["create", "-f", k.write("bad.yaml", &bad).to_str().unwrap()]);
    assert!(
        !ok && err.contains("spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"),
        "{err}"
    );
}

/// Creates racing for a quota's last units: exactly as many as it allows get in, the others
/// are refused with 403 (never a 5xx), and the quota's usage says so. A service that grows
/// into a load balancer is charged on update.
#[test]
fn racing_creates_take_exactly_the_quota_and_updates_are_charged_too() {
    let server = Server::start();
    assert_eq!(server.post("/api/v1/namespaces", &json!({"metadata": {"name": "race"}})).0, 201);
    let quota = json!({"metadata": {"name": "q"},
        "spec": {"hard": {"configmaps": "5", "services.loadbalancers": "0"}}});
    assert_eq!(server.post("/api/v1/namespaces/race/resourcequotas", &quota).0, 201);
    let used = |name: &str| {
        server.get("/api/v1/namespaces/race/resourcequotas/q").1["status"]["used"][name].clone()
    };
    wait_until(Duration::from_secs(10), "the quota's usage is worked out", || {
        used("configmaps") == "0"
    });
    let codes: Vec<u16> = std::thread::scope(|s| {
        let creates: Vec<_> = (0..20)
            .map(|i| {
                let server = &server;
                s.spawn(move || {
                    let cm = json!({"metadata": {"name": format!("cm-{i}")}});
                    server.post("/api/v1/namespaces/race/configmaps", &cm).0
                })
            })
            .collect();
        creates.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert_eq!(codes.iter().filter(|c| **c == 201).count(), 5, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 403).count(), 15, "{codes:?}");
    assert_eq!(used("configmaps"), "5");

    let service = json!({"metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}});
    assert_eq!(server.post("/api/v1/namespaces/race/services", &service).0, 201);
    let (_, mut current) = server.get("/api/v1/namespaces/race/services/web");
    current["spec"]["type"] = json!("LoadBalancer");
    // A dry run is judged by the quotas too (and charges nothing), as the real update.
    for path in
        ["/api/v1/namespaces/race/services/web?dryRun=All", "/api/v1/namespaces/race/services/web"]
    {
        let (code, status) = server.put(path, &current);
        assert_eq!(code, 403, "{path}: {status}");
        assert!(
            status["message"].as_str().unwrap().contains(
                "exceeded quota: q, requested: services.loadbalancers=1, used: services.loadbalancers=0, limited: services.loadbalancers=0"
            ),
            "{status}"
        );
    }
    // Events are never counted: a quota of none takes them.
    let quota = json!({"metadata": {"name": "no-events"}, "spec": {"hard": {"count/events": "0"}}});
    assert_eq!(server.post("/api/v1/namespaces/race/resourcequotas", &quota).0, 201);
    let event = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p",
        "namespace": "race"}, "reason": "Tested", "message": "m", "type": "Normal"});
    let (code, answer) = server.post("/api/v1/namespaces/race/events", &event);
    assert_eq!(code, 201, "{answer}");
}

/// The ServiceAccount admission: a pod runs as its namespace's `default` account unless it
/// names another (even one created the moment its namespace was), which must exist; it gets
/// its account's image pull secrets; an account that enforces its mountable secrets keeps its
/// pods to them (403 otherwise, in Kubernetes' words).
#[test]
fn pods_run_as_an_existing_service_account() {
    let server = Server::start();
    let k = server.kubectl();
    k.ok(&["create", "namespace", "team"]);
    k.ok(&["run", "first", "--image=kplane/pause", "-n", "team"]);
    let account =
        k.ok(&["get", "pod", "first", "-n", "team", "-o", "jsonpath={.spec.serviceAccountName}"]);
    assert_eq!(account, "default");

    let pods = "/api/v1/namespaces/team/pods";
    let as_account = |name: &str, account: &str, extra: Value| {
        let mut pod = crate::util::pod(name);
        pod["spec"]["serviceAccountName"] = json!(account);
        pod["spec"].as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        server.post(pods, &pod)
    };
    let (code, status) = as_account("lost", "ghost", json!({}));
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "pods \"lost\" is forbidden: error looking up service account team/ghost: \
         serviceaccount \"ghost\" not found"
    );

    let builder = json!({"metadata": {"name": "builder"},
        "imagePullSecrets": [{"name": "registry"}], "secrets": [{"name": "allowed"}]});
    assert_eq!(server.post("/api/v1/namespaces/team/serviceaccounts", &builder).0, 201);
    let (code, pod) = as_account("built", "builder", json!({}));
    assert_eq!(code, 201, "{pod}");
    assert_eq!(pod["spec"]["imagePullSecrets"], json!([{"name": "registry"}]));
    assert_eq!(pod["spec"]["serviceAccount"], "builder");
    let own = json!({"imagePullSecrets": [{"name": "mine"}]});
    let (_, pod) = as_account("own-secrets", "builder", own);
    assert_eq!(pod["spec"]["imagePullSecrets"], json!([{"name": "mine"}]), "a pod's own are kept");

    k.ok(&[
        "annotate",
        "serviceaccount",
        "builder",
        "-n",
        "team",
        "kubernetes.io/enforce-mountable-secrets=true",
    ]);
    let env = |secret: &str| {
        json!({"containers": [{"name": "c", "image": "kplane/pause", "env": [{"name": "PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": secret, "key": "k"}}}]}]})
    };
    assert_eq!(as_account("allowed", "builder", env("allowed")).0, 201);
    let (code, status) = as_account("denied", "builder", env("other"));
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "pods \"denied\" is forbidden: container c with envVar PASSWORD referencing \
         secret.secretName=\"other\" is not allowed because service account builder does not \
         reference that secret"
    );
    // Ephemeral containers (`kubectl debug`) are held to the same secrets.
    let debug = |secret: &str| {
        json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "kplane/pause",
            "envFrom": [{"secretRef": {"name": secret}}]}]}})
    };
    let path = "/api/v1/namespaces/team/pods/allowed/ephemeralcontainers";
    let patch = |body: &Value| {
        let content_type = Some("application/strategic-merge-patch+json");
        server.send_raw("PATCH", path, content_type, body.to_string().into_bytes())
    };
    let (code, status) = patch(&debug("other"));
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "pods \"allowed\" is forbidden: ephemeral container debugger with envFrom referencing \
         secret.secretName=\"other\" is not allowed because service account builder does not \
         reference that secret"
    );
    assert_eq!(patch(&debug("allowed")).0, 200);
}

/// PriorityClasses and the Priority admission: the system classes exist from the start, `kubectl
/// create priorityclass` (a protobuf body) makes more, a pod's priority and preemption policy
/// come from its class or the global default one, never from the pod, and the classes' rules
/// (one default, reserved `system-` names, bounded user values, a fixed value) are kept, in
/// Kubernetes' words.
#[test]
fn priority_classes_give_pods_their_priority() {
    let server = Server::start();
    let k = server.kubectl();
    let classes = k.ok(&["get", "pc"]);
    assert!(
        classes.starts_with("NAME                      VALUE        GLOBAL-DEFAULT"),
        "{classes}"
    );
    assert!(classes.contains("system-node-critical      2000001000   false"), "{classes}");
    k.ok(&["create", "priorityclass", "high", "--value=1000", "--preemption-policy=Never"]);
    k.ok(&["create", "priorityclass", "usual", "--value=10", "--global-default"]);
    let refused = |args: &[&str]| {
        let (ok, _, stderr) = k.run(args);
        assert!(!ok, "{args:?} was accepted");
        stderr
    };
    let second = refused(&["create", "priorityclass", "other", "--value=5", "--global-default"]);
    assert!(second.contains("is forbidden: PriorityClass usual is already marked as default. Only one default can exist"), "{second}");
    let huge = refused(&["create", "priorityclass", "huge", "--value=1000000001"]);
    assert!(
        huge.contains(
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        ),
        "{huge}"
    );
    let system = refused(&["create", "priorityclass", "system-mine", "--value=1"]);
    assert!(system.contains("system-mine is not a known system priority class"), "{system}");
    let changed = refused(&["patch", "pc", "high", "-p", r#"{"value": 5}"#]);
    assert!(changed.contains("value: Forbidden: may not be changed in an update."), "{changed}");
    let system = refused(&["delete", "pc", "system-node-critical"]);
    assert!(system.contains("this is a system priority class and cannot be deleted"), "{system}");

    let pods = "/api/v1/namespaces/default/pods";
    let (code, plain) = server.post(pods, &crate::util::pod("plain"));
    assert_eq!(code, 201, "{plain}");
    let spec = &plain["spec"];
    assert_eq!((&spec["priorityClassName"], &spec["priority"]), (&json!("usual"), &json!(10)));
    assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority");
    let with_class = |name: &str, class: &str, extra: Value| {
        let mut pod = crate::util::pod(name);
        pod["spec"]["priorityClassName"] = json!(class);
        for (field, value) in extra.as_object().unwrap() {
            pod["spec"][field] = value.clone();
        }
        server.post(pods, &pod)
    };
    let (code, high) = with_class("important", "high", json!({}));
    assert_eq!((code, &high["spec"]["priority"]), (201, &json!(1000)));
    assert_eq!(high["spec"]["preemptionPolicy"], "Never");
    let (code, missing) = with_class("lost", "nope", json!({}));
    assert_eq!(
        (code, missing["message"].as_str()),
        (403, Some("pods \"lost\" is forbidden: no PriorityClass with name nope was found"))
    );
    let (code, own) = with_class("pushy", "high", json!({"priority": 7}));
    assert_eq!(code, 403, "{own}");
    assert!(own["message"].as_str().unwrap().contains(
        "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000"));

    // A ReplicationController's pods, named from a prefix, are refused under that prefix, as
    // Kubernetes' admission (before the name is made) words it.
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "lost"}, "spec": {"replicas": 1, "selector": {"app": "lost"},
        "template": {"metadata": {"labels": {"app": "lost"}}, "spec": {
            "priorityClassName": "nope", "containers": [{"name": "c", "image": "kplane/pause"}]}}}});
    let rcs = "/api/v1/namespaces/default/replicationcontrollers";
    assert_eq!(server.post(rcs, &rc).0, 201);
    wait_until(Duration::from_secs(20), "the controller's ReplicaFailure", || {
        let (_, rc) = server.get(&format!("{rcs}/lost"));
        rc["status"]["conditions"][0]["message"]
            == "pods \"lost-\" is forbidden: no PriorityClass with name nope was found"
    });

    // A replace that leaves the priority out keeps it.
    let mut replaced = high.clone();
    replaced["spec"].as_object_mut().unwrap().remove("priority");
    replaced["spec"].as_object_mut().unwrap().remove("preemptionPolicy");
    replaced["metadata"]["labels"] = json!({"replaced": "yes"});
    let (code, kept) = server.put(&format!("{pods}/important"), &replaced);
    assert_eq!((code, &kept["spec"]["priority"]), (200, &json!(1000)), "{kept}");

    // Deleting them all deletes all but the system classes: kubectl deletes each (and says
    // which it could not), a collection's delete passes over them.
    let (ok, _, stderr) = k.run(&["delete", "pc", "high", "system-node-critical"]);
    assert!(!ok && stderr.contains("this is a system priority class"), "{stderr}");
    let (code, gone) = server.delete("/apis/scheduling.k8s.io/v1/priorityclasses");
    assert_eq!(code, 200, "{gone}");
    let left = k.ok(&["get", "pc", "-o", "name"]);
    assert_eq!(
        left,
        "priorityclass.scheduling.k8s.io/system-cluster-critical\n\
         priorityclass.scheduling.k8s.io/system-node-critical\n"
    );
}

/// The PodSecurity admission, driven by a namespace's labels: its `enforce` standard refuses
/// a pod that breaks it (403, Kubernetes' words), its `warn` standard warns about one it lets
/// in, a replication controller breaking either is admitted with the warning (its pods are
/// refused when the controller creates them), a pod update that adds nothing insecure is not
/// checked again, and labels naming no standard are refused (422).
#[test]
fn pod_security_labels_enforce_and_warn() {
    let server = Server::start();
    let k = server.kubectl();
    k.ok(&["create", "namespace", "psa"]);
    k.ok(&["run", "before", "-n", "psa", "--image=kplane/pause", "--privileged"]);
    // A server dry run previews what the label would say of the namespace's pods.
    let enforce = "pod-security.kubernetes.io/enforce=baseline";
    let (ok, _, previewed) = k.run(&["label", "--dry-run=server", "namespace", "psa", enforce]);
    assert!(ok && previewed.contains("Warning: before: privileged"), "{previewed}");
    // Enforcing a standard its pods break is allowed, with a warning naming them.
    let (ok, _, warned) =
        k.run(&["label", "namespace", "psa", "pod-security.kubernetes.io/enforce=baseline"]);
    assert!(ok, "{warned}");
    assert!(
        warned.contains(
            "Warning: existing pods in namespace \"psa\" violate the new PodSecurity enforce level \"baseline:latest\""
        ) && warned.contains("Warning: before: privileged"),
        "{warned}"
    );
    let (ok, _, refused) =
        k.run(&["run", "priv", "-n", "psa", "--image=kplane/pause", "--privileged"]);
    assert!(!ok);
    assert!(
        refused.contains(
            "pods \"priv\" is forbidden: violates PodSecurity \"baseline:latest\": privileged \
             (container \"priv\" must not set securityContext.privileged=true)"
        ),
        "{refused}"
    );
    // A pod enforced before its namespace asked may still have its labels changed, not its
    // image: that update is checked again.
    k.ok(&["label", "pod", "before", "-n", "psa", "changed=yes"]);
    let (ok, _, refused) =
        k.run(&["set", "image", "pod/before", "-n", "psa", "before=kplane/agnhost"]);
    assert!(
        !ok && refused.contains("violates PodSecurity \"baseline:latest\": privileged"),
        "{refused}"
    );

    k.ok(&["label", "namespace", "psa", "pod-security.kubernetes.io/warn=restricted"]);
    let (ok, _, warned) = k.run(&["run", "plain", "-n", "psa", "--image=kplane/pause"]);
    assert!(ok, "{warned}");
    assert!(
        warned.contains("Warning: would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false"),
        "{warned}"
    );
    // So does a significant update of it (a new image), not a label.
    let (ok, _, warned) =
        k.run(&["set", "image", "pod/plain", "-n", "psa", "plain=kplane/agnhost"]);
    assert!(ok && warned.contains("would violate PodSecurity \"restricted:latest\""), "{warned}");
    let (ok, _, quiet) = k.run(&["label", "pod", "plain", "-n", "psa", "seen=yes"]);
    assert!(ok && !quiet.contains("PodSecurity"), "{quiet}");
    let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "priv"},
        "spec": {"replicas": 1, "selector": {"app": "priv"}, "template": {
            "metadata": {"labels": {"app": "priv"}},
            "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "kplane/pause"}]}}}});
    let file = k.write("rc.json", &rc.to_string());
    let (ok, _, warned) = k.run(&["create", "-n", "psa", "-f", file.to_str().unwrap()]);
    assert!(ok, "{warned}");
    assert!(
        warned.contains(
            "would violate PodSecurity \"restricted:latest\": host namespaces (hostNetwork=true)"
        ),
        "{warned}"
    );
    wait_until(Duration::from_secs(30), "the controller's create is refused", || {
        let events =
            k.ok(&["get", "events", "-n", "psa", "--field-selector", "reason=FailedCreate"]);
        events.contains("violates PodSecurity")
    });
    // Every write of a workload is warned about, a label too.
    let (ok, _, warned) = k.run(&["label", "rc", "priv", "-n", "psa", "seen=yes"]);
    assert!(ok && warned.contains("host namespaces (hostNetwork=true)"), "{warned}");

    let (ok, _, invalid) =
        k.run(&["label", "namespace", "psa", "pod-security.kubernetes.io/audit=bogus"]);
    assert!(!ok);
    assert!(
        invalid.contains("The Namespace \"psa\" is invalid: ") && invalid.contains(
            "metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: \"bogus\": must be one of privileged, baseline, restricted"
        ),
        "{invalid}"
    );
    let (ok, _, invalid) = k.run(&["create", "namespace", "other"]);
    assert!(ok, "{invalid}");
    let (ok, _, invalid) =
        k.run(&["label", "namespace", "other", "pod-security.kubernetes.io/enforce-version=1.30"]);
    assert!(!ok && invalid.contains("must be \"latest\" or \"v1.x\""), "{invalid}");
}
