//! A Service's spec and status, as Kubernetes' `ValidateService`, `ValidateServiceUpdate` and
//! `ValidateLoadBalancerStatus` check them, in their order. Its cluster IPs and node ports
//! are the allocator's to check (`core::service_ips`), as they are Kubernetes' registry's.

use serde_json::{Map, Value};

use super::addresses::{
    cidr_warning, ip_warning, parse_ip, validate_cidr, validate_ip, validate_non_special_ip,
};
use super::{
    dns1123_subdomain_errors, label_key_errors, port_number, port_number_or_name, port_protocol,
    validate_labels, FieldError,
};
use crate::model::service_traffic::SOURCE_RANGES_ANNOTATION as SOURCE_RANGES;
use crate::model::{json, FastSet};

/// The port kube-apiserver keeps load balancers off (the kubelet's).
const KUBELET_PORT: i64 = 10250;
/// The longest ClientIP affinity, in seconds.
const MAX_AFFINITY_SECONDS: i64 = 86400;
const TOPOLOGY_MODE: &str = "service.kubernetes.io/topology-mode";
const TOPOLOGY_HINTS: &str = "service.kubernetes.io/topology-aware-hints";
const ONLY_LOAD_BALANCERS: &str = "may only be used when `type` is 'LoadBalancer'";
const TRAFFIC_POLICIES: [&str; 2] = ["Cluster", "Local"];

/// The API server's warnings about a service it stores (Kubernetes 1.32's
/// `GetWarningsForService`): the deprecated topology annotation, addresses and networks that
/// Go's strict parser would refuse or that are IPv6 not written canonically, and fields its
/// type ignores.
pub fn warnings(service: &Value) -> Vec<String> {
    let mut warnings = Vec::new();
    let annotations = json::at(service, "/metadata/annotations").and_then(Value::as_object);
    if annotations.is_some_and(|a| a.contains_key(TOPOLOGY_HINTS)) {
        warnings.push(format!(
            "annotation {TOPOLOGY_HINTS} is deprecated, please use {TOPOLOGY_MODE} instead"
        ));
    }
    let Some(spec) = service.get("spec").and_then(Value::as_object) else { return warnings };
    let text = |field: &str| spec.get(field).and_then(Value::as_str).unwrap_or("");
    let listed = |field: &str| json::strings(&service["spec"], field);
    let cluster_ip = text("clusterIP");
    if !cluster_ip.is_empty() && cluster_ip != "None" {
        for (i, ip) in listed("clusterIPs").iter().enumerate() {
            warnings.extend(ip_warning(&format!("spec.clusterIPs[{i}]"), ip));
        }
    }
    let external_ips = listed("externalIPs");
    for (i, ip) in external_ips.iter().enumerate() {
        warnings.extend(ip_warning(&format!("spec.externalIPs[{i}]"), ip));
    }
    if !text("loadBalancerIP").is_empty() {
        warnings.extend(ip_warning("spec.loadBalancerIP", text("loadBalancerIP")));
    }
    for (i, cidr) in listed("loadBalancerSourceRanges").iter().enumerate() {
        warnings.extend(cidr_warning(&format!("spec.loadBalancerSourceRanges[{i}]"), cidr));
    }
    let external_name = text("type") == "ExternalName";
    if external_name && !external_ips.is_empty() {
        warnings.push("spec.externalIPs is ignored when spec.type is \"ExternalName\"".into());
    }
    if !external_name && !text("externalName").is_empty() {
        warnings.push("spec.externalName is ignored when spec.type is not \"ExternalName\"".into());
    }
    warnings
}

/// A service, as created or replaced.
pub(super) fn validate(object: &Value, errors: &mut Vec<FieldError>) {
    let empty = Map::new();
    let spec_value = object.get("spec").unwrap_or(&Value::Null);
    let spec = spec_value.as_object().unwrap_or(&empty);
    let text = |field: &str| spec.get(field).and_then(Value::as_str);
    let kind = text("type").unwrap_or("ClusterIP");
    let headless = text("clusterIP") == Some("None");
    let annotations = json::at(object, "/metadata/annotations").and_then(Value::as_object);
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    if let (Some(mode), Some(hints)) = (annotation(TOPOLOGY_MODE), annotation(TOPOLOGY_HINTS)) {
        if mode != hints {
            let field = format!("metadata.annotations[{TOPOLOGY_MODE}]");
            let message =
                format!("must match annotations[{TOPOLOGY_HINTS}] when both are specified");
            errors.push(FieldError::invalid(field, mode, message));
        }
    }
    let ports = spec.get("ports").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if ports.is_empty() && !headless && kind != "ExternalName" {
        errors.push(FieldError::required("spec.ports"));
    }
    match kind {
        "LoadBalancer" | "NodePort" => {
            if kind == "LoadBalancer" {
                for (i, port) in ports.iter().enumerate() {
                    if port.get("port").and_then(Value::as_i64) == Some(KUBELET_PORT) {
                        errors.push(FieldError::invalid_number(
                            format!("spec.ports[{i}]"),
                            KUBELET_PORT,
                            format!(
                                "may not expose port {KUBELET_PORT} externally since it is used \
                                 by kubelet"
                            ),
                        ));
                    }
                }
            }
            if headless {
                let message = format!("may not be set to 'None' for {kind} services");
                errors.push(FieldError::invalid("spec.clusterIPs[0]", "None", message));
            }
        }
        "ExternalName" => {
            let addressed = text("clusterIP").is_some_and(|ip| !ip.is_empty())
                || !json::strings(spec_value, "clusterIPs").is_empty();
            if addressed {
                let message = "may not be set for ExternalName services";
                errors.push(FieldError::forbidden("spec.clusterIPs", message));
            }
            // A CNAME, which may end with a dot.
            let name = text("externalName").unwrap_or("");
            match name.strip_suffix('.').unwrap_or(name) {
                "" => errors.push(FieldError::required("spec.externalName")),
                cname => {
                    for problem in dns1123_subdomain_errors(cname) {
                        errors.push(FieldError::invalid("spec.externalName", cname, problem));
                    }
                }
            }
        }
        _ => {}
    }
    validate_ports(ports, errors);
    validate_labels(spec.get("selector"), "spec.selector", errors);
    validate_affinity(spec, errors);
    super::validate_ip_families(object.get("spec"), errors);
    let external_ips = json::strings(spec_value, "externalIPs");
    for (i, ip) in external_ips.iter().enumerate() {
        let field = || format!("spec.externalIPs[{i}]");
        match parse_ip(ip) {
            Some(parsed) => validate_non_special_ip(parsed, ip, field, errors),
            None => validate_ip(ip, field, errors),
        }
    }
    const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !TYPES.contains(&kind) {
        errors.push(FieldError::not_supported("spec.type", kind, &TYPES));
    }
    validate_source_ranges(spec_value, kind, annotation(SOURCE_RANGES), errors);
    if spec.get("allocateLoadBalancerNodePorts").is_some_and(|a| !a.is_null())
        && kind != "LoadBalancer"
    {
        errors
            .push(FieldError::forbidden("spec.allocateLoadBalancerNodePorts", ONLY_LOAD_BALANCERS));
    }
    match text("loadBalancerClass") {
        Some(class) if kind == "LoadBalancer" => {
            for problem in label_key_errors(class) {
                errors.push(FieldError::invalid("spec.loadBalancerClass", class, problem));
            }
        }
        Some(_) => {
            errors.push(FieldError::forbidden("spec.loadBalancerClass", ONLY_LOAD_BALANCERS))
        }
        None => {}
    }
    validate_traffic(spec, kind, !external_ips.is_empty(), errors);
}

/// Each port (`validateServicePort`), then ports and node ports given twice.
fn validate_ports(ports: &[Value], errors: &mut Vec<FieldError>) {
    let several = ports.len() > 1;
    let mut names = FastSet::default();
    for (i, port) in ports.iter().enumerate() {
        let at = |rest: &str| format!("spec.ports[{i}]{rest}");
        match port.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            None if several => errors.push(FieldError::required(at(".name"))),
            None => {}
            Some(name) => super::unique_label(name, &mut names, || at(".name"), errors),
        }
        match port.get("port").and_then(Value::as_i64) {
            Some(p) => port_number(p, || at(".port"), errors),
            None => errors.push(FieldError::required(at(".port"))),
        }
        let protocol = port.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
        port_protocol(protocol, || at(".protocol"), errors);
        if let Some(target) = port.get("targetPort").filter(|p| !p.is_null()) {
            port_number_or_name(Some(target), || at(".targetPort"), errors);
        }
        if let Some(app_protocol) = port.get("appProtocol").and_then(Value::as_str) {
            for problem in label_key_errors(app_protocol) {
                errors.push(FieldError::invalid(at(".appProtocol"), app_protocol, problem));
            }
        }
    }
    fn protocol(port: &Value) -> &str {
        port.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
    }
    fn number(port: &Value, field: &str) -> i64 {
        port.get(field).and_then(Value::as_i64).unwrap_or(0)
    }
    let mut node_ports = FastSet::default();
    for (i, port) in ports.iter().enumerate() {
        let node_port = number(port, "nodePort");
        if node_port != 0 && !node_ports.insert((node_port, protocol(port))) {
            let field = format!("spec.ports[{i}].nodePort");
            errors.push(FieldError::duplicate_struct(field, &node_port.to_string(), None));
        }
    }
    let mut numbers = FastSet::default();
    for (i, port) in ports.iter().enumerate() {
        if !numbers.insert((number(port, "port"), protocol(port))) {
            // The key Kubernetes keeps them by, as Go prints it.
            let printed = format!(
                "core.ServicePort{{Name:\"\", Protocol:{:?}, AppProtocol:(*string)(nil), \
                 Port:{}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, \
                 NodePort:0}}",
                protocol(port),
                number(port, "port")
            );
            errors.push(FieldError::duplicate_struct(format!("spec.ports[{i}]"), &printed, None));
        }
    }
}

/// `sessionAffinity` and its configuration.
fn validate_affinity(spec: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    let affinity = spec.get("sessionAffinity").and_then(Value::as_str).unwrap_or("None");
    let config = spec.get("sessionAffinityConfig").filter(|c| !c.is_null());
    match affinity {
        "ClientIP" => {
            let why = "when session affinity type is ClientIP";
            let path = "spec.sessionAffinityConfig";
            let client_ip = config.and_then(|c| c.get("clientIP")).filter(|c| !c.is_null());
            let timeout = client_ip.and_then(|c| c.get("timeoutSeconds")).and_then(Value::as_i64);
            match (config, client_ip, timeout) {
                (None, _, _) => errors.push(FieldError::required_because(path, why)),
                (Some(_), None, _) => {
                    errors.push(FieldError::required_because(format!("{path}.clientIP"), why))
                }
                (Some(_), Some(_), None) => errors.push(FieldError::required_because(
                    format!("{path}.clientIP.timeoutSeconds"),
                    why,
                )),
                (Some(_), Some(_), Some(seconds)) => {
                    if !(1..=MAX_AFFINITY_SECONDS).contains(&seconds) {
                        errors.push(FieldError::invalid_number(
                            format!("{path}.clientIP.timeoutSeconds"),
                            seconds,
                            format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
                        ));
                    }
                }
            }
        }
        "None" => {
            if config.is_some() {
                let message = "must not be set when session affinity is None";
                errors.push(FieldError::forbidden("spec.sessionAffinityConfig", message));
            }
        }
        other => {
            errors.push(FieldError::not_supported(
                "spec.sessionAffinity",
                other,
                &["ClientIP", "None"],
            ));
        }
    }
}

/// `loadBalancerSourceRanges`, or the older annotation when the field is not set.
fn validate_source_ranges(
    spec: &Value,
    kind: &str,
    annotation: Option<&str>,
    errors: &mut Vec<FieldError>,
) {
    let ranges = json::strings(spec, "loadBalancerSourceRanges");
    // (Kubernetes names the field with a capital L here.)
    if !ranges.is_empty() {
        let path = "spec.LoadBalancerSourceRanges";
        if kind != "LoadBalancer" {
            errors.push(FieldError::forbidden(path, ONLY_LOAD_BALANCERS));
        }
        for (i, range) in ranges.iter().enumerate() {
            validate_cidr(range.trim(), || format!("{path}[{i}]"), errors);
        }
    } else if let Some(value) = annotation {
        let path = format!("metadata.annotations[{SOURCE_RANGES}]");
        if kind != "LoadBalancer" {
            errors.push(FieldError::forbidden(path.clone(), ONLY_LOAD_BALANCERS));
        }
        let value = value.trim();
        for range in value.split(',').filter(|_| !value.is_empty()) {
            validate_cidr(range.trim(), || path.clone(), errors);
        }
    }
}

/// The traffic policies, the health check port and the traffic distribution.
fn validate_traffic(
    spec: &Map<String, Value>,
    kind: &str,
    has_external_ips: bool,
    errors: &mut Vec<FieldError>,
) {
    let text = |field: &str| spec.get(field).and_then(Value::as_str);
    // Only a service reached from outside has an external traffic policy.
    let outside =
        matches!(kind, "NodePort" | "LoadBalancer") || (kind == "ClusterIP" && has_external_ips);
    let external = text("externalTrafficPolicy").filter(|p| !p.is_empty());
    match external {
        Some(policy) if !outside => errors.push(FieldError::invalid(
            "spec.externalTrafficPolicy",
            policy,
            "may only be set for externally-accessible services",
        )),
        Some(policy) if !TRAFFIC_POLICIES.contains(&policy) => errors.push(
            FieldError::not_supported("spec.externalTrafficPolicy", policy, &TRAFFIC_POLICIES),
        ),
        _ => {}
    }
    let health_check = spec.get("healthCheckNodePort").and_then(Value::as_i64).unwrap_or(0);
    let needs_health_check = kind == "LoadBalancer" && external == Some("Local");
    if health_check != 0 {
        let field = "spec.healthCheckNodePort";
        if needs_health_check {
            port_number(health_check, || field.into(), errors);
        } else {
            errors.push(FieldError::invalid_number(
                field,
                health_check,
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is \
                 'Local'",
            ));
        }
    }
    if let Some(policy) = text("internalTrafficPolicy").filter(|p| !TRAFFIC_POLICIES.contains(p)) {
        let field = "spec.internalTrafficPolicy";
        errors.push(FieldError::not_supported(field, policy, &TRAFFIC_POLICIES));
    }
    if let Some(distribution) = text("trafficDistribution").filter(|d| *d != "PreferClose") {
        let field = "spec.trafficDistribution";
        errors.push(FieldError::not_supported(field, distribution, &["PreferClose"]));
    }
}

/// What a replacement may not change: a load balancer's class, and its health check port
/// while it needs one.
pub(super) fn validate_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let text = |service: &Value, field: &str| {
        json::at(service, &format!("/spec/{field}")).and_then(Value::as_str).map(String::from)
    };
    let balanced = |service: &Value| text(service, "type").as_deref() == Some("LoadBalancer");
    if balanced(old) && balanced(new) {
        let class = text(new, "loadBalancerClass");
        if text(old, "loadBalancerClass") != class {
            let field = "spec.loadBalancerClass";
            let message = "may not change once set";
            errors.push(match class {
                Some(class) => FieldError::invalid(field, &class, message),
                None => FieldError::invalid_printed(field, "\"null\"", message),
            });
        }
        let local =
            |service: &Value| text(service, "externalTrafficPolicy").as_deref() == Some("Local");
        let port = |service: &Value| {
            json::at(service, "/spec/healthCheckNodePort").and_then(Value::as_i64)
        };
        if local(old) && local(new) && port(old) != port(new) {
            errors.push(FieldError::forbidden("spec.healthCheckNodePort", "field is immutable"));
        }
    }
    errors
}

/// A status write's load balancer ingress (`ValidateLoadBalancerStatus`, with Kubernetes
/// 1.32's `LoadBalancerIPMode` on and `AllowServiceLBStatusOnNonLB` off).
pub(super) fn validate_status(service: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let path = "status.loadBalancer.ingress";
    let ingress = json::at(service, "/status/loadBalancer/ingress").and_then(Value::as_array);
    let ingress = ingress.map_or(&[][..], Vec::as_slice);
    let kind = json::at(service, "/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP");
    if kind != "LoadBalancer" && !ingress.is_empty() {
        let message = "may only be used when `spec.type` is 'LoadBalancer'";
        errors.push(FieldError::forbidden(path, message));
        return errors;
    }
    for (i, entry) in ingress.iter().enumerate() {
        let at = |field: &str| format!("{path}[{i}].{field}");
        let ip = entry.get("ip").and_then(Value::as_str).unwrap_or("");
        if !ip.is_empty() {
            validate_ip(ip, || at("ip"), &mut errors);
        }
        match entry.get("ipMode").and_then(Value::as_str) {
            None if !ip.is_empty() => errors.push(FieldError::required_because(
                at("ipMode"),
                "must be specified when `ip` is set",
            )),
            None => {}
            Some(_) if ip.is_empty() => {
                let message = "may not be specified when `ip` is not set";
                errors.push(FieldError::forbidden(at("ipMode"), message));
            }
            Some(mode) if !matches!(mode, "Proxy" | "VIP") => {
                errors.push(FieldError::not_supported(at("ipMode"), mode, &["Proxy", "VIP"]));
            }
            Some(_) => {}
        }
        let hostname = entry.get("hostname").and_then(Value::as_str).unwrap_or("");
        if !hostname.is_empty() {
            for problem in dns1123_subdomain_errors(hostname) {
                errors.push(FieldError::invalid(at("hostname"), hostname, problem));
            }
            if parse_ip(hostname).is_some() {
                let message = "must be a DNS name, not an IP address";
                errors.push(FieldError::invalid(at("hostname"), hostname, message));
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problems(service: Value) -> Vec<String> {
        let mut errors = Vec::new();
        validate(&service, &mut errors);
        errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
    }

    fn service(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn a_plain_service_passes() {
        let plain = service(json!({"type": "ClusterIP", "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080,
                "appProtocol": "kubernetes.io/h2c"}]}));
        assert_eq!(problems(plain), Vec::<String>::new());
        let balanced = service(json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 30123, "loadBalancerClass": "example.com/lb",
            "allocateLoadBalancerNodePorts": false, "loadBalancerSourceRanges": ["10.0.0.0/8 "],
            "externalIPs": ["192.0.2.1", "127.0.0.5"], "trafficDistribution": "PreferClose",
            "ports": [{"port": 443}]}));
        assert_eq!(problems(balanced), Vec::<String>::new());
    }

    #[test]
    fn what_kubernetes_refuses_in_a_spec() {
        let bad = service(json!({"type": "LoadBalancer",
            "loadBalancerSourceRanges": ["bogus"], "externalIPs": ["bogus", "0.0.0.0"],
            "ports": [{"port": 80, "appProtocol": "Bad Proto"}, {"name": "b", "port": 10250}],
            "internalTrafficPolicy": "Bogus", "externalTrafficPolicy": "Bogus",
            "trafficDistribution": "Bogus", "loadBalancerClass": "Bad Class"}));
        let found = problems(bad);
        let fields: Vec<&str> = found.iter().map(|p| p.split(": ").next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "spec.ports[1]",
                "spec.ports[0].name",
                "spec.ports[0].appProtocol",
                "spec.externalIPs[0]",
                "spec.externalIPs[1]",
                "spec.LoadBalancerSourceRanges[0]",
                "spec.loadBalancerClass",
                "spec.externalTrafficPolicy",
                "spec.internalTrafficPolicy",
                "spec.trafficDistribution",
            ],
            "{found:#?}"
        );
        assert!(
            found[0].ends_with("may not expose port 10250 externally since it is used by kubelet")
        );
        assert!(found[4].ends_with("may not be unspecified (0.0.0.0)"), "{}", found[4]);
        // Settings for another type of service.
        let clustered = service(json!({"type": "ClusterIP", "allocateLoadBalancerNodePorts": true,
            "loadBalancerClass": "a/b", "healthCheckNodePort": 30001, "ports": [{"port": 80}],
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10}}}));
        let found = problems(clustered);
        assert_eq!(
            found,
            [
                "spec.sessionAffinityConfig: Forbidden: must not be set when session affinity is None",
                "spec.allocateLoadBalancerNodePorts: Forbidden: may only be used when `type` is 'LoadBalancer'",
                "spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'",
                "spec.healthCheckNodePort: Invalid value: 30001: may only be set when `type` is \
                 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
            ]
        );
        let sticky = |seconds: i64| {
            service(json!({"sessionAffinity": "ClientIP", "ports": [{"port": 80}],
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": seconds}}}))
        };
        assert!(problems(sticky(86400)).is_empty());
        for seconds in [0, -3, 86401] {
            let found = problems(sticky(seconds));
            assert_eq!(found.len(), 1);
            assert!(found[0].ends_with("must be greater than 0 and less than 86400"), "{found:?}");
        }
        let named = service(json!({"type": "ExternalName", "externalName": "db.example.com",
            "clusterIP": "10.0.0.9"}));
        assert_eq!(
            problems(named),
            ["spec.clusterIPs: Forbidden: may not be set for ExternalName services"]
        );
        let twice = service(json!({"type": "NodePort", "clusterIP": "None",
            "ports": [{"name": "a", "port": 80, "nodePort": 30001},
                {"name": "b", "port": 80, "nodePort": 30001}]}));
        let found = problems(twice);
        assert_eq!(found[0], "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services");
        assert_eq!(found[1], "spec.ports[1].nodePort: Duplicate value: 30001");
        assert!(
            found[2].starts_with(
                "spec.ports[1]: Duplicate value: core.ServicePort{Name:\"\", Protocol:\"TCP\""
            ),
            "{}",
            found[2]
        );
        let annotated = json!({"metadata": {"name": "s", "annotations": {
            TOPOLOGY_MODE: "Auto", TOPOLOGY_HINTS: "Disabled", SOURCE_RANGES: "10.0.0.0/8, bogus"}},
            "spec": {"ports": [{"port": 80}]}});
        let found = problems(annotated);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found[0].starts_with("metadata.annotations[service.kubernetes.io/topology-mode]"));
        assert!(found[2].contains("must be a valid CIDR value"), "{}", found[2]);
    }

    #[test]
    fn a_load_balancer_keeps_its_class_and_health_check_port() {
        let balancer = |class: Value, port: i64| {
            json!({"spec": {"type": "LoadBalancer", "loadBalancerClass": class,
                "externalTrafficPolicy": "Local", "healthCheckNodePort": port}})
        };
        assert!(validate_update(&balancer(json!("a/b"), 30001), &balancer(json!("a/b"), 30001))
            .is_empty());
        let found = validate_update(&balancer(json!("a/b"), 30001), &balancer(json!(null), 30002));
        let messages: Vec<String> = found.iter().map(|e| e.message.clone()).collect();
        assert_eq!(
            messages,
            ["Invalid value: \"null\": may not change once set", "Forbidden: field is immutable"]
        );
    }

    #[test]
    fn a_load_balancer_status_is_checked() {
        let status = |kind: &str, ingress: Value| json!({"spec": {"type": kind}, "status": {"loadBalancer": {"ingress": ingress}}});
        let good = json!([{"ip": "127.0.100.1", "ipMode": "VIP"}, {"hostname": "lb.example.com"}]);
        assert!(validate_status(&status("LoadBalancer", good.clone())).is_empty());
        let found = validate_status(&status("ClusterIP", good));
        assert_eq!(found[0].field, "status.loadBalancer.ingress");
        let bad = json!([{"ip": "bogus", "ipMode": "VIP"}, {"hostname": "1.2.3.4", "ipMode": "VIP"},
            {"hostname": "Bad_Host"}, {"ip": "10.0.0.1"}, {"ip": "10.0.0.2", "ipMode": "Other"}]);
        let found: Vec<String> = validate_status(&status("LoadBalancer", bad))
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        let fields: Vec<&str> = found.iter().map(|p| p.split(": ").next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "status.loadBalancer.ingress[0].ip",
                "status.loadBalancer.ingress[1].ipMode",
                "status.loadBalancer.ingress[1].hostname",
                "status.loadBalancer.ingress[2].hostname",
                "status.loadBalancer.ingress[3].ipMode",
                "status.loadBalancer.ingress[4].ipMode",
            ],
            "{found:#?}"
        );
    }
}
