//! Service cluster IPs, node ports and health check node ports: allocated from the configured
//! ranges, never twice (also across a restart), released on delete; requested ones are checked.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::util::{wait_until, Server};

const WAIT: Duration = Duration::from_secs(60);

fn service(name: &str, extra: Value) -> Value {
    let mut spec = json!({"ports": [{"port": 80}], "selector": {"app": name}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

const SERVICES: &str = "/api/v1/namespaces/default/services";

#[test]
fn cluster_ips_and_node_ports_are_allocated_once() {
    let mut server = Server::start();
    let (code, a) = server.post(SERVICES, &service("a", json!({})));
    assert_eq!(code, 201, "{a}");
    let ip_a = a["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert!(ip_a.starts_with("127.192."), "{ip_a}");
    assert_eq!(a["spec"]["clusterIPs"], json!([ip_a]));
    let (code, clash) = server.post(SERVICES, &service("b", json!({"clusterIP": ip_a})));
    assert_eq!(code, 422, "{clash}");
    assert!(clash["message"].as_str().unwrap().contains("already allocated"));
    let (code, _) = server.post(SERVICES, &service("b", json!({"clusterIP": "10.0.0.1"})));
    assert_eq!(code, 422);
    // IPv6 is refused in the allocator's words; an address with leading zeros is read as
    // Kubernetes reads it (and held as the address it is).
    let (code, v6) = server.post(SERVICES, &service("b", json!({"clusterIP": "fd00::1"})));
    assert_eq!(code, 422, "{v6}");
    assert_eq!(
        v6["message"],
        "Service \"b\" is invalid: spec.clusterIPs[0]: Invalid value: []string{\"fd00::1\"}: IPv6 \
         is not configured on this cluster"
    );
    let (code, zeros) = server.post(SERVICES, &service("z", json!({"clusterIP": "127.192.0.077"})));
    assert_eq!((code, &zeros["spec"]["clusterIPs"]), (201, &json!(["127.192.0.077"])), "{zeros}");
    let (code, _) = server.post(SERVICES, &service("y", json!({"clusterIP": "127.192.0.77"})));
    assert_eq!(code, 422, "127.192.0.077 is 127.192.0.77");
    let (_, np) = server.post(SERVICES, &service("np", json!({"type": "NodePort"})));
    let port = np["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&port), "{np}");
    // A load balancer keeping its traffic on the node gets a health check node port too.
    let local = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local"});
    let (code, lb) = server.post(SERVICES, &service("lb", local.clone()));
    assert_eq!(code, 201, "{lb}");
    let health_check = lb["spec"]["healthCheckNodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&health_check), "{lb}");
    assert_ne!(health_check, lb["spec"]["ports"][0]["nodePort"].as_u64().unwrap());
    let mut taken_health_check = service("lb2", local);
    taken_health_check["spec"]["healthCheckNodePort"] = json!(health_check);

    // After a restart the allocations are known: nothing is handed out twice.
    server.restart();
    let (_, c) = server.post(SERVICES, &service("c", json!({})));
    assert_ne!(c["spec"]["clusterIP"], json!(ip_a));
    assert_ne!(c["spec"]["clusterIP"], np["spec"]["clusterIP"]);
    let mut taken_port = service("np2", json!({"type": "NodePort"}));
    taken_port["spec"]["ports"][0]["nodePort"] = json!(port);
    assert_eq!(server.post(SERVICES, &taken_port).0, 422);
    let (code, refused) = server.post(SERVICES, &taken_health_check);
    assert_eq!((code, refused["reason"].as_str()), (500, Some("InternalError")), "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.ends_with("provided port is already allocated"), "{refused}");

    // The cluster IP is immutable; a PUT without it keeps it.
    let mut changed = a.clone();
    changed["spec"]["clusterIP"] = json!("127.192.9.9");
    assert_eq!(server.put(&format!("{SERVICES}/a"), &changed).0, 422);
    let mut without = a.clone();
    without["spec"].as_object_mut().unwrap().remove("clusterIP");
    without["spec"].as_object_mut().unwrap().remove("clusterIPs");
    let (code, kept) = server.put(&format!("{SERVICES}/a"), &without);
    assert_eq!((code, kept["spec"]["clusterIP"].as_str()), (200, Some(ip_a.as_str())));

    // Deleting releases: the address and port can be asked for again.
    assert_eq!(server.delete(&format!("{SERVICES}/a")).0, 200);
    assert_eq!(server.delete(&format!("{SERVICES}/np")).0, 200);
    // (A load balancer goes once its controller has let go of it: its finalizer.)
    assert_eq!(server.delete(&format!("{SERVICES}/lb")).0, 200);
    wait_until(WAIT, "the health check port is free again", || {
        server.post(SERVICES, &taken_health_check).0 == 201
    });
    let lb_ip = lb["spec"]["clusterIP"].clone();
    let (code, again) = server.post(SERVICES, &service("e", json!({"clusterIP": lb_ip})));
    assert_eq!(code, 201, "the load balancer's address is free again: {again}");
    let (code, again) = server.post(SERVICES, &service("d", json!({"clusterIP": ip_a})));
    assert_eq!(code, 201, "{again}");
    assert_eq!(server.post(SERVICES, &taken_port).0, 201);
}

const LEAVING: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: leaving, labels: {app: leaving}}
spec:
  terminationGracePeriodSeconds: 8
  containers:
  - name: c
    image: kplane/agnhost
    args: ["serve-hostname"]
    ports: [{containerPort: 9376}]
    readinessProbe: {httpGet: {port: 9376}, periodSeconds: 1}
    lifecycle: {preStop: {sleep: {seconds: 6}}}
---
apiVersion: v1
kind: Service
metadata: {name: leaving}
spec:
  selector: {app: leaving}
  ports: [{port: 8080, targetPort: 9376}]
"#;

/// A service whose only pod is being deleted keeps sending it connections while it still
/// serves in its grace period (its endpoint terminating, not ready), as kube-proxy does.
#[test]
fn a_terminating_pod_still_serves_its_service_until_it_stops() {
    let n = crate::util::free_port();
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
        ("KPLANE_AGENT__ADDRESS", &format!("127.252.{}.{}", n / 256, n % 256 / 2 * 2 + 1)),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_SERVER__SERVICE_CLUSTER_IP_RANGE", &private_range(190)),
    ]);
    let kubectl = server.kubectl();
    let http =
        reqwest::blocking::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();
    kubectl.ok(&["apply", "-f", kubectl.write("leaving.yaml", LEAVING).to_str().unwrap()]);
    let (_, service) = server.get(&format!("{SERVICES}/leaving"));
    let cluster_ip = format!("{}:8080", service["spec"]["clusterIP"].as_str().unwrap());
    reaches_all(&http, &cluster_ip, &BTreeSet::from(["leaving".into()]));

    kubectl.ok(&["delete", "pod", "leaving", "--wait=false"]);
    let slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices\
                  ?labelSelector=kubernetes.io%2Fservice-name%3Dleaving";
    wait_until(WAIT, "the endpoint is terminating", || {
        let (_, list) = server.get(slices);
        list["items"][0]["endpoints"][0]["conditions"]
            == json!({"ready": false, "serving": true, "terminating": true})
    });
    assert_eq!(hostname_at(&http, &cluster_ip).as_deref(), Some("leaving"));
    wait_until(WAIT, "the pod is gone", || {
        server.get("/api/v1/namespaces/default/pods/leaving").0 == 404
    });
    wait_until(WAIT, "the cluster IP refuses", || refused(&cluster_ip));
}

/// The API server's warnings about a service (Kubernetes 1.32's): addresses Go's strict parser
/// would refuse, and fields the service's type ignores; kubectl prints them.
#[test]
fn odd_service_fields_are_warned_about() {
    let server = Server::start();
    let warned = |body: &Value| -> Vec<String> {
        let response = server.http.post(server.url(SERVICES)).json(body).send().unwrap();
        assert_eq!(response.status(), 201);
        let headers = response.headers().get_all("warning").iter();
        headers.map(|h| h.to_str().unwrap().to_string()).collect()
    };
    let odd = service(
        "odd",
        json!({"externalIPs": ["127.0.0.010"], "externalName": "example.com",
            "loadBalancerIP": "abc"}),
    );
    assert_eq!(
        warned(&odd),
        [
            "299 - \"spec.externalIPs[0]: IP address was accepted, but will be invalid in a \
             future Kubernetes release: ParseAddr(\\\"127.0.0.010\\\"): IPv4 field has octet with \
             leading zero\"",
            "299 - \"spec.loadBalancerIP: IP address was accepted, but will be invalid in a \
             future Kubernetes release: ParseAddr(\\\"abc\\\"): unable to parse IP\"",
            "299 - \"spec.externalName is ignored when spec.type is not \\\"ExternalName\\\"\"",
        ]
    );
    assert!(warned(&service("plain", json!({}))).is_empty());
    let kubectl = server.kubectl();
    let file = kubectl.write(
        "named.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: named}\nspec:\n  type: ExternalName\n  \
         externalName: example.com\n  externalIPs: [127.0.0.9]\n",
    );
    let (ok, _, stderr) = kubectl.run(&["create", "-f", file.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("Warning: spec.externalIPs is ignored when spec.type is \"ExternalName\""),
        "{stderr}"
    );
}

/// A one-off /24 inside 127.0.0.0/8 whose second octet is `base` plus up to 29, so that tests
/// running at once each have their own addresses. (Clear of the defaults' ranges a test keeps:
/// pods 127.64-127.127, load balancers 127.128, the node addresses tests pick at 127.251.)
fn private_range(base: u8) -> String {
    let n = crate::util::free_port();
    format!("127.{}.{}.0/24", base + (n % 30) as u8, n / 256)
}

/// The answer of `GET http://{addr}/` (the pod's name, from serve-hostname), if any.
fn hostname_at(http: &reqwest::blocking::Client, addr: &str) -> Option<String> {
    let answer = http.get(format!("http://{addr}/")).timeout(Duration::from_secs(2)).send().ok()?;
    answer.status().is_success().then(|| answer.text().ok()).flatten()
}

/// Whether nothing listens at `addr`.
fn refused(addr: &str) -> bool {
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err()
}

/// Waits until requests to `addr` have been answered by every one of `pods`.
fn reaches_all(http: &reqwest::blocking::Client, addr: &str, pods: &BTreeSet<String>) {
    let mut seen = BTreeSet::new();
    wait_until(WAIT, &format!("{addr} reaches {pods:?}"), || {
        seen.extend(hostname_at(http, addr));
        seen == *pods
    });
}

const APP: &str = r#"
apiVersion: v1
kind: ReplicationController
metadata: {name: hello}
spec:
  replicas: 2
  selector: {app: hello}
  template:
    metadata: {labels: {app: hello}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: kplane/agnhost
        args: ["serve-hostname"]
        ports: [{containerPort: 9376, name: http}]
        readinessProbe: {httpGet: {port: 9376}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: hello}
spec:
  type: LoadBalancer
  selector: {app: hello}
  ports: [{name: web, port: 8080, targetPort: http}]
"#;

/// Kube-proxy's and the service controller's work: a LoadBalancer service is reached at its
/// cluster IP, at the node's address and its node port, and at the address its load balancer
/// got (in its status, kept across a crash of the server); each spreads connections over the
/// ready pods. A service that stops being a load balancer loses that address (and its node
/// port, and its finalizer); a deleted one is no longer served at all.
#[test]
fn services_are_reached_at_cluster_ips_node_ports_and_load_balancers() {
    let n = crate::util::free_port();
    let node_address = format!("127.250.{}.{}", n / 256, n % 256 / 2 * 2 + 1);
    let cluster_ips = private_range(130);
    let load_balancers = private_range(160);
    let mut server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "proxied"),
        ("KPLANE_AGENT__ADDRESS", &node_address),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_SERVER__SERVICE_CLUSTER_IP_RANGE", &cluster_ips),
        ("KPLANE_CONTROLLERS__LOAD_BALANCER_IP_RANGE", &load_balancers),
    ]);
    let kubectl = server.kubectl();
    // A connection per request: each is balanced anew.
    let http =
        reqwest::blocking::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();
    kubectl.ok(&["apply", "-f", kubectl.write("app.yaml", APP).to_str().unwrap()]);
    let service_path = "/api/v1/namespaces/default/services/hello";
    let mut service = Value::Null;
    wait_until(WAIT, "the load balancer's address is in the status", || {
        service = server.get(service_path).1;
        service["status"]["loadBalancer"]["ingress"][0]["ip"].is_string()
    });
    let ingress = service["status"]["loadBalancer"]["ingress"][0]["ip"].as_str().unwrap();
    let lb_prefix = load_balancers.trim_end_matches("0/24");
    assert!(ingress.starts_with(lb_prefix), "{ingress} in {load_balancers}");
    assert_eq!(
        service["metadata"]["finalizers"],
        json!(["service.kubernetes.io/load-balancer-cleanup"])
    );
    let cluster_ip = service["spec"]["clusterIP"].as_str().unwrap().to_string();
    let node_port = service["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    let (at_cluster_ip, at_node_port, at_load_balancer) = (
        format!("{cluster_ip}:8080"),
        format!("{node_address}:{node_port}"),
        format!("{ingress}:8080"),
    );

    let mut pods = BTreeSet::new();
    wait_until(WAIT, "both pods are ready", || {
        let (_, list) = server.get("/api/v1/namespaces/default/pods?labelSelector=app%3Dhello");
        pods = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| {
                p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
            })
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        pods.len() == 2
    });
    for addr in [&at_cluster_ip, &at_node_port, &at_load_balancer] {
        reaches_all(&http, addr, &pods);
    }
    // Client IP affinity: this machine's connections keep to one pod, at every address; and
    // take turns again once it is off.
    let affinity = |to: &str| format!(r#"{{"spec":{{"sessionAffinity":"{to}"}}}}"#);
    kubectl.ok(&["patch", "service", "hello", "-p", &affinity("ClientIP")]);
    for addr in [&at_cluster_ip, &at_node_port, &at_load_balancer] {
        wait_until(WAIT, &format!("{addr} keeps to one pod"), || {
            let answers: Vec<String> = (0..6).filter_map(|_| hostname_at(&http, addr)).collect();
            answers.len() == 6 && answers.iter().all(|a| *a == answers[0])
        });
    }
    kubectl.ok(&["patch", "service", "hello", "-p", &affinity("None")]);
    reaches_all(&http, &at_cluster_ip, &pods);
    let table = kubectl.ok(&["get", "service", "hello"]);
    assert!(table.contains(ingress) && table.contains(&format!("8080:{node_port}/TCP")), "{table}");
    let events = kubectl.ok(&["get", "events", "--field-selector", "involvedObject.name=hello"]);
    assert!(events.contains("EnsuredLoadBalancer"), "{events}");

    // After a crash the load balancer is back at the address the status records.
    server.restart();
    reaches_all(&http, &at_load_balancer, &pods);
    let (_, after) = server.get(service_path);
    assert_eq!(after["status"]["loadBalancer"], service["status"]["loadBalancer"]);

    let kubectl = server.kubectl();
    // Only clients in its source ranges reach the load balancer (this machine's connections
    // come from 127.0.0.1): another's is closed unanswered. Node ports are not limited.
    let ranges = |range: &str| format!(r#"{{"spec":{{"loadBalancerSourceRanges":["{range}"]}}}}"#);
    kubectl.ok(&["patch", "service", "hello", "-p", &ranges("10.0.0.0/8")]);
    wait_until(WAIT, "the load balancer turns this machine away", || {
        hostname_at(&http, &at_load_balancer).is_none()
    });
    assert!(hostname_at(&http, &at_node_port).is_some());
    kubectl.ok(&["patch", "service", "hello", "-p", &ranges("127.0.0.0/8")]);
    reaches_all(&http, &at_load_balancer, &pods);

    // No longer a load balancer: its address and node port close, its finalizer goes.
    let cluster_ip_only = r#"{"spec":{"type":"ClusterIP","loadBalancerSourceRanges":null}}"#;
    kubectl.ok(&["patch", "service", "hello", "-p", cluster_ip_only]);
    wait_until(WAIT, "the load balancer is gone", || {
        let (_, now) = server.get(service_path);
        refused(&at_load_balancer)
            && refused(&at_node_port)
            && now["metadata"].get("finalizers").is_none()
    });
    let (_, now) = server.get(service_path);
    assert_eq!(now["status"], json!({"loadBalancer": {}}));
    // Its changes were reported as Kubernetes 1.32's controller reports them: ensured again for
    // each change of its affinity, the change of type no event of its own (it logs it) before
    // the load balancer's deletion.
    let event = |reason: &str| {
        let path = format!(
            "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dhello,reason%3D{reason}"
        );
        server.get(&path).1["items"][0].clone()
    };
    assert!(
        event("EnsuredLoadBalancer")["count"].as_u64() >= Some(3),
        "{}",
        event("EnsuredLoadBalancer")
    );
    assert_eq!(event("Type"), Value::Null);
    // (Recorded once the finalizer's removal is written.)
    wait_until(WAIT, "the load balancer's deletion reported", || {
        event("DeletedLoadBalancer")["message"] == "Deleted load balancer"
    });
    assert!(now["spec"]["ports"][0].get("nodePort").is_none(), "{now}");
    reaches_all(&http, &at_cluster_ip, &pods);

    // With no ready endpoint the cluster IP refuses connections, as kube-proxy rejects them;
    // with some again, it is served again.
    kubectl.ok(&["scale", "rc", "hello", "--replicas=0"]);
    wait_until(WAIT, "the cluster IP refuses without endpoints", || refused(&at_cluster_ip));
    kubectl.ok(&["scale", "rc", "hello", "--replicas=1"]);
    wait_until(WAIT, "the cluster IP is served again", || {
        hostname_at(&http, &at_cluster_ip).is_some()
    });

    // An external IP is served as kube-proxy serves one, while the service lists it.
    let external = format!("{}7", private_range(190).trim_end_matches("0/24"));
    let at_external = format!("{external}:8080");
    let listed = format!(r#"{{"spec":{{"externalIPs":["{external}"]}}}}"#);
    kubectl.ok(&["patch", "service", "hello", "-p", &listed]);
    wait_until(WAIT, "the external IP is served", || hostname_at(&http, &at_external).is_some());
    let unlisted = r#"[{"op":"remove","path":"/spec/externalIPs"}]"#;
    kubectl.ok(&["patch", "service", "hello", "--type=json", "-p", unlisted]);
    wait_until(WAIT, "the external IP is no longer served", || refused(&at_external));

    // Another load balancer's address (one its class names writes it in the status) is
    // served by the node, as kube-proxy catches traffic to it; not once the service is given
    // to another proxy.
    let vip = format!("{}9", private_range(200).trim_end_matches("0/24"));
    let other = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "other"},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": "example.com/other",
            "selector": {"app": "hello"}, "ports": [{"port": 8081, "targetPort": "http"}]}});
    assert_eq!(server.post(SERVICES, &other).0, 201);
    let status = format!(r#"{{"status":{{"loadBalancer":{{"ingress":[{{"ip":"{vip}"}}]}}}}}}"#);
    kubectl.ok(&[
        "patch",
        "service",
        "other",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
    let at_vip = format!("{vip}:8081");
    wait_until(WAIT, "the other load balancer's address is served", || {
        hostname_at(&http, &at_vip).is_some()
    });
    kubectl.ok(&[
        "label",
        "service",
        "other",
        "service.kubernetes.io/service-proxy-name=elsewhere",
    ]);
    wait_until(WAIT, "another proxy's service is left alone", || refused(&at_vip));
    kubectl.ok(&["delete", "service", "other"]);

    kubectl.ok(&["delete", "service", "hello"]);
    wait_until(WAIT, "the cluster IP is no longer served", || refused(&at_cluster_ip));

    // An address outside the range is not handed out: the service says why, and waits.
    let outside = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "fixed"},
        "spec": {"type": "LoadBalancer", "loadBalancerIP": "127.1.2.3", "ports": [{"port": 8080}]}});
    assert_eq!(server.post(SERVICES, &outside).0, 201);
    wait_until(WAIT, "the failure is an event", || {
        let events =
            kubectl.ok(&["get", "events", "--field-selector", "involvedObject.name=fixed"]);
        events.contains("SyncLoadBalancerFailed")
            && events.contains("the requested address 127.1.2.3 is not in the load balancer range")
    });
    let (_, fixed) = server.get(&format!("{SERVICES}/fixed"));
    assert_eq!(fixed["status"], json!({"loadBalancer": {}}));
    // Each retry (after 5 s, then longer) tries and fails again: both events counted up.
    let counted = |reason: &str| {
        let events = "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dfixed";
        let (_, list) = server.get(events);
        let items = list["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .filter(|e| e["reason"] == reason)
            .map(|e| e["count"].as_i64().unwrap_or(1))
            .sum::<i64>()
    };
    wait_until(WAIT, "the retry is reported", || counted("SyncLoadBalancerFailed") >= 2);
    assert!(counted("EnsuringLoadBalancer") >= 2, "each try is announced");
    // Its cleanup finalizer went on before the first try, as Kubernetes' controller adds it:
    // deleting it reports the load balancer's deletion.
    let (_, fixed) = server.get(&format!("{SERVICES}/fixed"));
    assert_eq!(
        fixed["metadata"]["finalizers"],
        json!(["service.kubernetes.io/load-balancer-cleanup"])
    );
    kubectl.ok(&["delete", "service", "fixed"]);
    wait_until(WAIT, "the failing load balancer's deletion reported", || {
        counted("DeletedLoadBalancer") == 1 && server.get(&format!("{SERVICES}/fixed")).0 == 404
    });
}

/// A backend answering every HTTP request with `name`, on a port of its own at `ip`.
fn named_backend(name: &'static str, ip: &str) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{name}",
                name.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    addr
}

/// Kube-proxy's handling of `externalTrafficPolicy: Local`: the node answers the service's
/// health check node port with its count of the service's ready endpoints (200 with some, 503
/// with none); its node port still reaches every endpoint from this machine (the node's own
/// traffic, as kube-proxy counts it: only clients on other machines are kept to the node's
/// endpoints). Back to `Cluster`, the health check port closes.
#[test]
fn a_load_balancer_keeping_traffic_local_is_health_checked_and_served_by_its_node() {
    let n = crate::util::free_port();
    let node_address = format!("127.251.{}.{}", n / 256, n % 256 / 2 * 2 + 1);
    let cluster_ips = private_range(220);
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "here"),
        ("KPLANE_AGENT__ADDRESS", &node_address),
        ("KPLANE_SERVER__SERVICE_CLUSTER_IP_RANGE", &cluster_ips),
    ]);
    let http =
        reqwest::blocking::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();
    // Two addresses, as two pods on two nodes have (one address on two nodes would be one
    // endpoint, as Kubernetes repacks Endpoints).
    let backend_ip = |last: u16| format!("127.252.{}.{}", n / 256, n % 256 / 2 * 2 + last);
    let (local, remote) =
        (named_backend("local", &backend_ip(0)), named_backend("remote", &backend_ip(1)));
    // Without a selector: the Endpoints are this test's, one address on this node and one
    // on another.
    let subset = |addr: std::net::SocketAddr, node: &str| {
        json!({"addresses": [{"ip": addr.ip().to_string(), "nodeName": node}],
            "ports": [{"port": addr.port()}]})
    };
    let endpoints = |subsets: Vec<Value>| {
        json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "lb"},
            "subsets": subsets})
    };
    let endpoints_path = "/api/v1/namespaces/default/endpoints";
    let both = endpoints(vec![subset(local, "here"), subset(remote, "elsewhere")]);
    assert_eq!(server.post(endpoints_path, &both).0, 201);
    let lb = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"port": 8080}]}});
    let (code, lb) = server.post(SERVICES, &lb);
    assert_eq!(code, 201, "{lb}");
    let at = |port: &Value| format!("{node_address}:{}", port.as_u64().unwrap());
    let (health_check, node_port) =
        (at(&lb["spec"]["healthCheckNodePort"]), at(&lb["spec"]["ports"][0]["nodePort"]));
    let cluster_ip = format!("{}:8080", lb["spec"]["clusterIP"].as_str().unwrap());
    let check = || {
        let answer = http.get(format!("http://{health_check}/")).send().ok()?;
        let status = answer.status().as_u16();
        let weight = answer.headers().get("X-Load-Balancing-Endpoint-Weight")?.to_str().ok()?;
        let weight = weight.to_string();
        Some((status, weight, answer.json::<Value>().ok()?))
    };

    wait_until(WAIT, "the health check counts the local endpoint", || {
        check().is_some_and(|(status, weight, _)| status == 200 && weight == "1")
    });
    let (_, _, body) = check().unwrap();
    assert_eq!(
        body,
        json!({"service": {"namespace": "default", "name": "lb"}, "localEndpoints": 1,
            "serviceProxyHealthy": true})
    );
    let both = BTreeSet::from(["local".into(), "remote".into()]);
    reaches_all(&http, &node_port, &both);
    reaches_all(&http, &cluster_ip, &both);

    // No endpoint here any more: unhealthy; from this machine the node port is still served.
    let remote_only = endpoints(vec![subset(remote, "elsewhere")]);
    assert_eq!(server.put(&format!("{endpoints_path}/lb"), &remote_only).0, 200);
    wait_until(WAIT, "the health check fails", || {
        check().is_some_and(|(status, weight, body)| {
            status == 503 && weight == "0" && body["localEndpoints"] == 0
        })
    });
    reaches_all(&http, &node_port, &BTreeSet::from(["remote".into()]));
    reaches_all(&http, &cluster_ip, &BTreeSet::from(["remote".into()]));

    // Traffic no longer kept local: no health check port.
    let cluster = json!({"spec": {"externalTrafficPolicy": "Cluster"}});
    let merge = Some("application/merge-patch+json");
    let path = format!("{SERVICES}/lb");
    let (code, cluster) = server.send_raw("PATCH", &path, merge, cluster.to_string().into());
    assert_eq!(code, 200, "{cluster}");
    assert!(cluster["spec"].get("healthCheckNodePort").is_none(), "{cluster}");
    wait_until(WAIT, "the health check port closes", || refused(&health_check));
    reaches_all(&http, &node_port, &BTreeSet::from(["remote".into()]));
}

/// The `kubernetes` Service kube-apiserver keeps: at the first address of the service range,
/// port 443 to the secure port, with the API server's advertised address in its Endpoints. Every pod gets
/// its variables, links or not, and reaches the API server through it with the server's own
/// certificate, which names that address.
#[test]
fn the_kubernetes_service_leads_pods_to_the_api_server() {
    let n = crate::util::free_port();
    let node_address = format!("127.250.{}.{}", n / 256, n % 256 / 2 * 2 + 1);
    let cluster_ips = private_range(190);
    let secure_port = crate::util::free_port().to_string();
    let server = Server::start_with_env(&[
        ("KPLANE_AGENT__ENABLED", "true"),
        ("KPLANE_SCHEDULER__ENABLED", "true"),
        ("KPLANE_AGENT__NODE_NAME", "apiserver-client"),
        ("KPLANE_AGENT__ADDRESS", &node_address),
        ("KPLANE_AGENT__SYNC_PERIOD_MILLIS", "200"),
        ("KPLANE_SERVER__SERVICE_CLUSTER_IP_RANGE", &cluster_ips),
        ("KPLANE_SERVER__SECURE_PORT", &secure_port),
        ("KPLANE_SERVER__BIND_ADDRESS", "0.0.0.0"),
        // Another loopback address than the one a wildcard would be taken for.
        ("KPLANE_SERVER__ADVERTISE_ADDRESS", "127.0.0.2"),
    ]);
    let first = cluster_ips.replace(".0/24", ".1");
    let kubectl = server.kubectl();
    wait_until(WAIT, "the kubernetes service", || {
        kubectl.run(&["get", "svc", "kubernetes"]).1.contains(&format!(" {first} "))
    });
    let service = server.get("/api/v1/namespaces/default/services/kubernetes").1;
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https", "port": 443, "protocol": "TCP",
        "targetPort": secure_port.parse::<u16>().unwrap()}])
    );
    assert_eq!(service["metadata"]["labels"]["component"], "apiserver");
    // The Endpoints follow the Service.
    let jsonpath = "jsonpath={.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}";
    wait_until(WAIT, "the kubernetes endpoints", || {
        let (_, endpoints, _) = kubectl.run(&["get", "endpoints", "kubernetes", "-o", jsonpath]);
        endpoints == format!("127.0.0.2:{secure_port}")
    });

    assert_eq!(
        server.post("/api/v1/namespaces", &json!({"metadata": {"name": "elsewhere"}})).0,
        201
    );
    let pod = json!({"metadata": {"name": "asker"}, "spec": {"enableServiceLinks": false,
        "terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": "none",
        "command": ["sh", "-c", "echo $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; exec sleep 1000"]}]}});
    assert_eq!(server.post("/api/v1/namespaces/elsewhere/pods", &pod).0, 201);
    wait_until(WAIT, "the pod tells the service's address", || {
        kubectl.run(&["logs", "-n", "elsewhere", "asker"]).1 == format!("{first}:443\n")
    });
    let ca = server.data.path().join("pki/apiserver.crt");
    // Every namespace gets the certificate to verify the API server with, as a ConfigMap.
    let published = "/api/v1/namespaces/elsewhere/configmaps/kube-root-ca.crt";
    wait_until(WAIT, "the namespace's kube-root-ca.crt", || server.get(published).0 == 200);
    let pem = std::fs::read_to_string(&ca).unwrap();
    assert_eq!(server.get(published).1["data"]["ca.crt"], pem.trim_end().to_string() + "\n");
    let mut version = String::new();
    wait_until(WAIT, "the API server through the service", || {
        let out = std::process::Command::new("curl")
            .args(["-s", "--max-time", "5", "--cacert"])
            .arg(&ca)
            .arg(format!("https://{first}/version"))
            .output()
            .unwrap();
        version = String::from_utf8_lossy(&out.stdout).into_owned();
        version.contains("gitVersion")
    });

    // Every container mounts its account's token, the certificate and its namespace, which
    // the official Python client's in-cluster configuration reads: the pod is its account on
    // the secure port, its token bound to it.
    let script = "from kubernetes import client, config\n\
        config.load_incluster_config()\n\
        me = client.AuthenticationV1Api().create_self_subject_review(client.V1SelfSubjectReview())\n\
        user = me.status.user_info\n\
        ns = open('/var/run/secrets/kubernetes.io/serviceaccount/namespace').read()\n\
        print(user.username, user.extra['authentication.kubernetes.io/pod-name'][0], ns)\n";
    let python = crate::util::python();
    let pod = json!({"metadata": {"name": "in-cluster"}, "spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "python", "command": [python, "-c", script]}]}});
    let (code, created) = server.post("/api/v1/namespaces/elsewhere/pods", &pod);
    assert_eq!(code, 201, "{created}");
    let volume = &created["spec"]["volumes"][0];
    let name = volume["name"].as_str().unwrap();
    assert!(name.starts_with("kube-api-access-"), "{created}");
    assert_eq!(
        created["spec"]["containers"][0]["volumeMounts"],
        json!([{"name": name, "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );
    let mut said = String::new();
    wait_until(WAIT, "the pod knows who it is", || {
        said = kubectl.run(&["logs", "-n", "elsewhere", "in-cluster"]).1;
        said.contains("system:serviceaccount:")
    });
    assert_eq!(said, "system:serviceaccount:elsewhere:default in-cluster elsewhere\n");
}

/// A service without a selector takes the Endpoints its user writes; they are mirrored into
/// EndpointSlices, which `kubectl describe service` reads.
#[test]
fn the_endpoints_of_a_service_without_a_selector_are_mirrored_into_slices() {
    let server = Server::start();
    let kubectl = server.kubectl();
    let manifest = r#"
apiVersion: v1
kind: Service
metadata: {name: external}
spec: {ports: [{name: p, port: 81, targetPort: 9999}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: external, labels: {team: a}}
subsets:
- addresses: [{ip: 127.0.0.42}]
  notReadyAddresses: [{ip: 127.0.0.43}]
  ports: [{name: p, port: 8081}]
"#;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), manifest).unwrap();
    kubectl.ok(&["create", "-f", file.path().to_str().unwrap()]);
    let slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices\
                  ?labelSelector=kubernetes.io%2Fservice-name%3Dexternal";
    let mut mirrored = Value::Null;
    wait_until(WAIT, "the endpoints are mirrored", || {
        mirrored = server.get(slices).1["items"][0].clone();
        !mirrored.is_null()
    });
    let labels = &mirrored["metadata"]["labels"];
    assert_eq!(
        labels["endpointslice.kubernetes.io/managed-by"],
        "endpointslicemirroring-controller.k8s.io"
    );
    assert_eq!(labels["team"], "a");
    assert_eq!(mirrored["metadata"]["ownerReferences"][0]["kind"], "Endpoints");
    assert_eq!(
        mirrored["endpoints"],
        json!([{"addresses": ["127.0.0.42"], "conditions": {"ready": true}},
            {"addresses": ["127.0.0.43"], "conditions": {"ready": false}}])
    );
    let described = kubectl.ok(&["describe", "service", "external"]);
    assert!(described.contains("127.0.0.42:8081"), "{described}");
    // A change to the Endpoints follows; deleting them takes the mirror away.
    kubectl.ok(&[
        "patch",
        "endpoints",
        "external",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/subsets/0/addresses/0/ip","value":"127.0.0.44"}]"#,
    ]);
    wait_until(WAIT, "the change is mirrored", || {
        server.get(slices).1["items"][0]["endpoints"][0]["addresses"] == json!(["127.0.0.44"])
    });
    kubectl.ok(&["delete", "endpoints", "external"]);
    wait_until(WAIT, "the mirror is gone", || {
        server.get(slices).1["items"].as_array().is_some_and(Vec::is_empty)
    });
}
