//! Admission as Kubernetes enables it by default, driven with kubectl: the LimitRanger.

use serde_json::Value;

use std::time::Duration;

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
}
