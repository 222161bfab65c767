//! What a Service's spec says about its traffic, read where it is allocated (the API's
//! allocator), served (the node's service proxy, the load balancer) and health-checked: the
//! traffic policies, client IP affinity, a load balancer's source ranges, and the health
//! check node port of a load balancer that keeps outside traffic on its nodes.

use std::time::Duration;

use serde_json::Value;

use super::cidr::{self, Ipv4Cidr};
use super::json;

fn spec_text<'a>(service: &'a Value, field: &str) -> Option<&'a str> {
    json::at(service, &format!("/spec/{field}")).and_then(Value::as_str)
}

/// Whether traffic from outside the cluster (node ports, load balancers) goes only to the
/// endpoints on the node it reaches (`externalTrafficPolicy: Local`).
pub fn keeps_external_traffic_local(service: &Value) -> bool {
    spec_text(service, "externalTrafficPolicy") == Some("Local")
}

/// Whether traffic from inside the cluster (the cluster IP) goes only to the endpoints on the
/// node it starts from (`internalTrafficPolicy: Local`).
pub fn keeps_internal_traffic_local(service: &Value) -> bool {
    spec_text(service, "internalTrafficPolicy") == Some("Local")
}

/// How long a client keeps to the endpoint it last reached (`sessionAffinity: ClientIP`, for
/// `sessionAffinityConfig.clientIP.timeoutSeconds`, three hours unless given).
pub fn client_ip_affinity(service: &Value) -> Option<Duration> {
    if spec_text(service, "sessionAffinity") != Some("ClientIP") {
        return None;
    }
    let seconds = json::at(service, "/spec/sessionAffinityConfig/clientIP/timeoutSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(10_800);
    Some(Duration::from_secs(seconds))
}

/// The older annotation that lists a load balancer's source ranges, comma-separated.
pub const SOURCE_RANGES_ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

/// The IPv4 ranges a load balancer's clients must come from: `spec.loadBalancerSourceRanges`,
/// or the older annotation when the field is empty (as kube-proxy reads them). `None` when
/// neither lists any: every client may reach it. Ranges of another family are left out, so
/// that a service listing only those admits no IPv4 client.
pub fn load_balancer_source_ranges(service: &Value) -> Option<Vec<Ipv4Cidr>> {
    let field = json::at(service, "/spec/loadBalancerSourceRanges").and_then(Value::as_array);
    let mut listed: Vec<&str> =
        field.into_iter().flatten().filter_map(Value::as_str).map(str::trim).collect();
    if listed.is_empty() {
        let annotation = json::at(service, "/metadata/annotations")
            .and_then(|a| a.get(SOURCE_RANGES_ANNOTATION))
            .and_then(Value::as_str)
            .unwrap_or("");
        listed = annotation.split(',').map(str::trim).filter(|r| !r.is_empty()).collect();
    }
    (!listed.is_empty()).then(|| listed.into_iter().filter_map(cidr::parse).collect())
}

/// Whether a service needs a health check node port: a load balancer that keeps outside
/// traffic on the node it arrives at.
pub fn needs_health_check(service: &Value) -> bool {
    spec_text(service, "type") == Some("LoadBalancer") && keeps_external_traffic_local(service)
}

/// The health check node port a service holds: its `healthCheckNodePort` while it needs one.
pub fn health_check_node_port(service: &Value) -> Option<u16> {
    let port = json::at(service, "/spec/healthCheckNodePort")?.as_u64()?;
    u16::try_from(port).ok().filter(|p| *p != 0 && needs_health_check(service))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn client_ip_affinity_lasts_its_timeout_or_three_hours() {
        let sticky = |spec| super::client_ip_affinity(&json!({"spec": spec}));
        assert_eq!(sticky(json!({"sessionAffinity": "None"})), None);
        assert_eq!(sticky(json!({})), None);
        assert_eq!(
            sticky(json!({"sessionAffinity": "ClientIP"})),
            Some(super::Duration::from_secs(10_800))
        );
        let config = json!({"sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}});
        assert_eq!(sticky(config), Some(super::Duration::from_secs(60)));
    }

    use super::*;

    #[test]
    fn source_ranges_come_from_the_field_else_the_annotation() {
        let ranges = |service| load_balancer_source_ranges(&service);
        assert_eq!(ranges(json!({"spec": {}})), None);
        let field = json!({"spec": {"loadBalancerSourceRanges": [" 10.0.0.0/8", "::/0"]},
            "metadata": {"annotations": {SOURCE_RANGES_ANNOTATION: "192.168.0.0/16"}}});
        assert_eq!(ranges(field), Some(vec![(std::net::Ipv4Addr::new(10, 0, 0, 0), 8)]));
        let annotated = json!({"spec": {"loadBalancerSourceRanges": []},
            "metadata": {"annotations": {SOURCE_RANGES_ANNOTATION: "127.0.0.1/32, 10.1.0.0/16"}}});
        assert_eq!(ranges(annotated).map(|r| r.len()), Some(2));
        let other_family = json!({"spec": {"loadBalancerSourceRanges": ["fd00::/8"]}});
        assert_eq!(ranges(other_family), Some(vec![]));
    }

    #[test]
    fn only_a_local_load_balancer_holds_a_health_check_port() {
        let local = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "internalTrafficPolicy": "Local", "healthCheckNodePort": 30500}});
        assert_eq!(health_check_node_port(&local), Some(30500));
        assert!(keeps_internal_traffic_local(&local));
        for (field, value) in [("type", "NodePort"), ("externalTrafficPolicy", "Cluster")] {
            let mut other = local.clone();
            other["spec"][field] = json!(value);
            assert_eq!(health_check_node_port(&other), None, "{other}");
        }
        let mut unset = local;
        unset["spec"]["healthCheckNodePort"] = json!(0);
        assert!(needs_health_check(&unset) && health_check_node_port(&unset).is_none());
    }
}
