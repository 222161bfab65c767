//! Admission as Kubernetes enables it by default, driven with kubectl: the LimitRanger.

use serde_json::Value;

use crate::util::Server;

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
