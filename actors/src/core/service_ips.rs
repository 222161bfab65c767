//! Service cluster IPs and node ports: handed out from `service_cluster_ip_range` and
//! `service_node_port_range`, never twice, released when the service goes, and rebuilt from the
//! stored services on start-up. A service that asks for a specific IP or port gets it only if
//! it is in range and free.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Mutex;

use serde_json::{json, Value};

use super::ApiError;
use crate::model::service_traffic::{health_check_node_port, needs_health_check};
use crate::model::{json, validation, FieldError};

/// The ranges services draw from.
#[derive(Debug, Clone)]
pub struct ServiceRanges {
    /// Network and prefix length of the cluster IP range.
    pub cluster_ips: (Ipv4Addr, u8),
    /// First and last node port.
    pub node_ports: (u16, u16),
}

impl Default for ServiceRanges {
    fn default() -> Self {
        Self { cluster_ips: (Ipv4Addr::new(127, 192, 0, 0), 16), node_ports: (30000, 32767) }
    }
}

/// What is taken.
#[derive(Debug)]
pub struct ServiceAllocator {
    ranges: ServiceRanges,
    state: Mutex<Taken>,
}

#[derive(Debug, Default)]
struct Taken {
    ips: BTreeSet<u32>,
    ports: BTreeSet<u16>,
    next_ip: u32,
    next_port: u16,
}

/// What one write allocated: released again if the write fails.
#[derive(Debug, Default)]
pub struct Allocation {
    ips: Vec<u32>,
    ports: Vec<u16>,
    /// A dry run's: nothing is taken from the ranges (what it lists is only what it would
    /// take), as Kubernetes' dry-run allocators answer.
    dry_run: bool,
}

fn invalid(name: &str, field: &str, value: &str, detail: &str) -> ApiError {
    invalid_because(name, FieldError::invalid(field, value, detail))
}

/// A node port refused: written unquoted, as Kubernetes writes a number.
fn invalid_port(name: &str, field: &str, port: i64, detail: &str) -> ApiError {
    invalid_because(name, FieldError::invalid_number(field, port, detail))
}

fn invalid_because(name: &str, cause: FieldError) -> ApiError {
    ApiError::Invalid { kind: "Service", group: "", name: name.into(), causes: vec![cause] }
}

/// A service's IP families against what this cluster serves, IPv4 alone, as Kubernetes'
/// allocator checks them on a single-stack cluster: a single-stack policy takes one family; a
/// headless service without a selector takes both families under another policy (it needs no
/// address of either); any other asks only for IPv4, and not for dual-stack.
fn init_ip_families(service: &mut Value, old: Option<&Value>, name: &str) -> Result<(), ApiError> {
    let spec = &service["spec"];
    let policy = spec.get("ipFamilyPolicy").and_then(Value::as_str).unwrap_or("SingleStack");
    let policy = policy.to_string();
    let mut families = crate::model::json::strings(spec, "ipFamilies");
    let old_families = old.map(|old| crate::model::json::strings(&old["spec"], "ipFamilies"));
    if policy == "SingleStack" && families.len() > 1 && old_families.as_ref() == Some(&families) {
        // An update to single-stack that leaves the families as they were keeps the first.
        families.truncate(1);
        service["spec"]["ipFamilies"] = json!(families);
    }
    let spec = &service["spec"];
    let refused =
        |causes| ApiError::Invalid { kind: "Service", group: "", name: name.into(), causes };
    let mut causes = Vec::new();
    if policy == "SingleStack" && families.len() == 2 {
        let detail = "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families \
                      are specified";
        causes.push(FieldError::invalid("spec.ipFamilyPolicy", &policy, detail));
    }
    // The family of an address asked for, when `ipFamilies` does not say it (`clusterIP` alone
    // standing for the list, as Kubernetes' conversion reads it).
    let mut asked = json::strings(spec, "clusterIPs");
    if asked.is_empty() {
        asked.extend(cluster_ip(service).map(String::from));
    }
    for (i, ip) in asked.iter().enumerate().take_while(|(_, ip)| *ip != "None") {
        if i >= families.len() && ip.contains(':') {
            let field = format!("spec.clusterIPs[{i}]");
            let detail = "IPv6 is not configured on this cluster";
            causes.push(FieldError::invalid_printed(
                field,
                &validation::go_strings(&asked),
                detail,
            ));
        }
    }
    if !causes.is_empty() {
        return Err(refused(causes));
    }
    let headless = cluster_ip(service) == Some("None");
    let selectorless = spec.get("selector").and_then(Value::as_object).is_none_or(|s| s.is_empty());
    if headless && selectorless {
        if families.len() == 1 && policy != "SingleStack" {
            let other = if families[0] == "IPv4" { "IPv6" } else { "IPv4" };
            service["spec"]["ipFamilies"] = json!([families[0], other]);
        }
        return Ok(());
    }
    let mut causes = Vec::new();
    if policy == "RequireDualStack" {
        let detail = "this cluster is not configured for dual-stack services";
        causes.push(FieldError::invalid("spec.ipFamilyPolicy", &policy, detail));
    }
    for (i, family) in families.iter().enumerate().filter(|(_, family)| *family != "IPv4") {
        let field = format!("spec.ipFamilies[{i}]");
        causes.push(FieldError::invalid(field, family, "not configured on this cluster"));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(refused(causes))
    }
}

fn wants_node_ports(service: &Value) -> bool {
    matches!(
        service.pointer("/spec/type").and_then(Value::as_str),
        Some("NodePort" | "LoadBalancer")
    )
}

/// Whether a port that asks for no node port is given one: not by a LoadBalancer with
/// `allocateLoadBalancerNodePorts: false` (which still gets those it asks for), as Kubernetes'
/// `shouldAllocateNodePorts` says.
fn allocates_node_ports(service: &Value) -> bool {
    let balancer = service.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer");
    let declined = service.pointer("/spec/allocateLoadBalancerNodePorts") == Some(&json!(false));
    !(balancer && declined)
}

impl ServiceAllocator {
    pub fn new(ranges: ServiceRanges) -> Self {
        Self { ranges, state: Mutex::new(Taken::default()) }
    }

    /// (first, last) usable address of the cluster IP range as integers (network and
    /// broadcast addresses excluded).
    fn ip_bounds(&self) -> (u32, u32) {
        crate::model::cidr::usable_range(self.ranges.cluster_ips)
    }

    /// Records what an existing service holds (start-up). One holding an address or a node
    /// port outside the ranges (they were narrowed since) keeps it, and it is said, as
    /// Kubernetes' repair controllers say it (`ClusterIPOutOfRange`, `PortOutOfRange`).
    pub fn restore(&self, service: &Value) {
        let (first, last) = self.ip_bounds();
        let (low, high) = self.ranges.node_ports;
        let name = || {
            let meta = |field: &str| json::at(service, &format!("/metadata/{field}"));
            let text =
                |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
            format!("{}/{}", text(meta("namespace")), text(meta("name")))
        };
        let mut taken = self.state.lock().expect("allocator lock");
        if let Some(ip) = cluster_ip(service).and_then(validation::parse_ipv4) {
            let n = u32::from(ip);
            if n < first || n > last {
                let (net, bits) = self.ranges.cluster_ips;
                tracing::warn!(
                    service = %name(),
                    "ClusterIPOutOfRange: Cluster IP {ip} is not within the configured Service \
                     CIDR {net}/{bits}; please recreate service"
                );
            }
            taken.ips.insert(n);
        }
        for port in held_ports(service) {
            if !(low..=high).contains(&port) {
                tracing::warn!(
                    service = %name(),
                    "PortOutOfRange: Port {port} is not within the port range {low}-{high}; \
                     please recreate service"
                );
            }
            taken.ports.insert(port);
        }
    }

    /// Gives a new service its cluster IP and node ports (or checks the ones it asks for).
    /// A dry run takes nothing, as Kubernetes' dry-run allocators: an address of its own is
    /// the range's network address, one asked for is only checked to be in the range, node
    /// ports of its own are numbered from 32769.
    pub fn allocate(
        &self,
        service: &mut Value,
        name: &str,
        dry_run: bool,
    ) -> Result<Allocation, ApiError> {
        let mut allocation = Allocation { dry_run, ..Allocation::default() };
        let result = self.allocate_into(service, name, None, &mut allocation);
        if result.is_err() {
            self.release(&allocation);
        }
        result.map(|()| allocation)
    }

    /// An update: the cluster IP is immutable (carried over when left out); node ports are
    /// carried over by port, allocated for new ports. Returns what was allocated, and what the
    /// old version held that the new one no longer does (release it once the write is stored).
    pub fn reallocate(
        &self,
        old: &Value,
        service: &mut Value,
        name: &str,
        dry_run: bool,
    ) -> Result<(Allocation, Allocation), ApiError> {
        drop_type_dependent_fields(old, service);
        keep_allocated_cluster_ips(old, service);
        keep_health_check_node_port(old, service);
        keep_allocated_node_ports(old, service);
        follow_changed_cluster_ip(old, service);
        let mut allocation = Allocation { dry_run, ..Allocation::default() };
        let result = self.allocate_into(service, name, Some(old), &mut allocation);
        if let Err(e) = result {
            self.release(&allocation);
            return Err(e);
        }
        let kept: BTreeSet<u16> = held_ports(service).into_iter().collect();
        let mut freed = Allocation {
            ports: held_ports(old).into_iter().filter(|p| !kept.contains(p)).collect(),
            ..Allocation::default()
        };
        let old_ip = cluster_ip(old).and_then(validation::parse_ipv4);
        if old_ip.is_some() && cluster_ip(service).and_then(validation::parse_ipv4) != old_ip {
            freed.ips.extend(old_ip.map(u32::from));
        }
        Ok((allocation, freed))
    }

    fn allocate_into(
        &self,
        service: &mut Value,
        name: &str,
        old: Option<&Value>,
        allocation: &mut Allocation,
    ) -> Result<(), ApiError> {
        let external =
            service.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
        if !service["spec"].is_object() {
            return Ok(());
        }
        if !external {
            // The address asked for first: whether the service is headless decides its
            // families.
            default_ip_family_policy(service, old);
            follow_cluster_ips(service, name)?;
            init_ip_families(service, old, name)?;
        }
        let old_ip = old.and_then(cluster_ip).map(String::from);
        let wanted = cluster_ip(service).map(String::from);
        match (old_ip, wanted) {
            // (A service that is or was ExternalName may change it: it has or had none.)
            (Some(old_ip), Some(new_ip)) if old_ip != new_ip => {
                let listed = json::strings(&service["spec"], "clusterIPs");
                let cause = FieldError::invalid_printed(
                    "spec.clusterIPs[0]",
                    &validation::go_strings(&listed),
                    "may not change once set",
                );
                return Err(invalid_because(name, cause));
            }
            // Left out, it was carried over (`keep_allocated_cluster_ips`) unless the service
            // became ExternalName, which has none.
            (Some(_), None) => {}
            (Some(_), Some(_)) => {}
            (None, _) if external => {}
            (None, Some(ip)) if ip == "None" => {
                service["spec"]["clusterIPs"] = json!(["None"]);
            }
            (None, Some(ip)) => {
                let parsed = validation::parse_ipv4(&ip).ok_or_else(|| {
                    invalid(name, "spec.clusterIP", &ip, "must be a valid IP address")
                })?;
                let n = u32::from(parsed);
                let (first, last) = self.ip_bounds();
                // In the allocator's words (tools read the service range from the first).
                let refused = |why: String| {
                    let listed = validation::go_strings(std::slice::from_ref(&ip));
                    let detail = format!("failed to allocate IP {ip}: {why}");
                    invalid_because(
                        name,
                        FieldError::invalid_printed("spec.clusterIPs", &listed, &detail),
                    )
                };
                if n < first || n > last {
                    let (net, bits) = self.ranges.cluster_ips;
                    return Err(refused(format!(
                        "the provided IP ({ip}) is not in the valid range. The range of valid IPs \
                         is {net}/{bits}"
                    )));
                }
                if !allocation.dry_run {
                    if !self.state.lock().expect("allocator lock").ips.insert(n) {
                        return Err(refused("provided IP is already allocated".into()));
                    }
                    allocation.ips.push(n);
                }
                service["spec"]["clusterIPs"] = json!([ip]);
            }
            (None, None) => {
                let next = if allocation.dry_run {
                    Some(self.ranges.cluster_ips.0)
                } else {
                    self.next_ip()
                };
                let ip = next.ok_or_else(|| {
                    ApiError::Internal(
                        "Internal error occurred: failed to allocate a serviceIP: range is full"
                            .into(),
                    )
                })?;
                if !allocation.dry_run {
                    allocation.ips.push(u32::from(ip));
                }
                service["spec"]["clusterIP"] = json!(ip.to_string());
                service["spec"]["clusterIPs"] = json!([ip.to_string()]);
            }
        }
        self.allocate_node_ports(service, name, old, allocation)?;
        // After the service's node ports, as Kubernetes allocates it; an update keeps the
        // one it had while it needs one (`keep_health_check_node_port`; a change is refused
        // by validation).
        if needs_health_check(service) && !old.is_some_and(needs_health_check) {
            let asked = service.pointer("/spec/healthCheckNodePort").and_then(Value::as_i64);
            let port = match asked.filter(|n| *n != 0) {
                Some(n) => self.claim_health_check_port(n, allocation)?,
                None => self.claim_next_port(allocation)?,
            };
            service["spec"]["healthCheckNodePort"] = json!(port);
        }
        Ok(())
    }

    /// The node ports of a new or updated service's ports.
    fn allocate_node_ports(
        &self,
        service: &mut Value,
        name: &str,
        old: Option<&Value>,
        allocation: &mut Allocation,
    ) -> Result<(), ApiError> {
        if !wants_node_ports(service) {
            // Node ports left over from the old type were dropped above; any other is the
            // user's, and not for this type.
            if let Some((i, _)) = node_ports_by_index(service).first() {
                let service_type = service.pointer("/spec/type").and_then(Value::as_str);
                return Err(ApiError::Invalid {
                    kind: "Service",
                    group: "",
                    name: name.into(),
                    causes: vec![FieldError::forbidden(
                        format!("spec.ports[{i}].nodePort"),
                        format!(
                            "may not be used when `type` is '{}'",
                            service_type.unwrap_or("ClusterIP")
                        ),
                    )],
                });
            }
            return Ok(());
        }
        let allocates = allocates_node_ports(service);
        let Some(ports) = service.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
            return Ok(());
        };
        match old {
            None => self.init_node_ports(ports, allocates, name, allocation),
            Some(old) => {
                self.update_node_ports(ports, allocates, &node_ports(old), name, allocation)
            }
        }
    }

    /// A new service's node ports, as Kubernetes' `initNodePorts`: ports of the same number
    /// (TCP and UDP 53, say) share one node port, the one asked for by the first of them that
    /// asks, or the next free one.
    fn init_node_ports(
        &self,
        ports: &mut [Value],
        allocates: bool,
        name: &str,
        allocation: &mut Allocation,
    ) -> Result<(), ApiError> {
        let asked = |port: &Value| port.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0);
        let mut by_port: BTreeMap<i64, u16> = BTreeMap::new();
        for i in 0..ports.len() {
            if !allocates && asked(&ports[i]).is_none() {
                continue;
            }
            let number = ports[i]["port"].as_i64().unwrap_or(0);
            match (by_port.get(&number).copied(), asked(&ports[i])) {
                (None, _) => {
                    // The first port of its number: the node port the first of them asks for.
                    let same_number =
                        ports[i..].iter().filter(|p| p["port"].as_i64() == Some(number));
                    let n = match same_number.filter_map(asked).next() {
                        Some(n) => self.claim_port(n, &port_field(i), name, allocation)?,
                        None => self.claim_next_port(allocation)?,
                    };
                    by_port.insert(number, n);
                    ports[i]["nodePort"] = json!(n);
                }
                (Some(shared), None) => ports[i]["nodePort"] = json!(shared),
                (Some(shared), Some(n)) if n == i64::from(shared) => {}
                (Some(_), Some(n)) => {
                    self.claim_port(n, &port_field(i), name, allocation)?;
                }
            }
        }
        Ok(())
    }

    /// An updated service's node ports, as Kubernetes' `updateNodePorts`: the ones it held
    /// stay its own, others asked for are claimed, and a port without one gets the next free.
    fn update_node_ports(
        &self,
        ports: &mut [Value],
        allocates: bool,
        held: &[u16],
        name: &str,
        allocation: &mut Allocation,
    ) -> Result<(), ApiError> {
        for (i, port) in ports.iter_mut().enumerate() {
            match port.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
                None if !allocates => {}
                Some(n) if u16::try_from(n).is_ok_and(|n| held.contains(&n)) => {}
                // (Two ports of this update asking for one number: claimed once.)
                Some(n) if u16::try_from(n).is_ok_and(|n| allocation.ports.contains(&n)) => {}
                Some(n) => {
                    self.claim_port(n, &port_field(i), name, allocation)?;
                }
                None => port["nodePort"] = json!(self.claim_next_port(allocation)?),
            }
        }
        Ok(())
    }

    /// Claims node port `n`, asked for by `field`.
    fn claim_port(
        &self,
        n: i64,
        field: &str,
        name: &str,
        allocation: &mut Allocation,
    ) -> Result<u16, ApiError> {
        self.take_port(n, allocation).map_err(|detail| invalid_port(name, field, n, &detail))
    }

    /// Claims health check node port `n`: refused as an internal error, as Kubernetes'
    /// allocator refuses it (validation does not look at it).
    fn claim_health_check_port(
        &self,
        n: i64,
        allocation: &mut Allocation,
    ) -> Result<u16, ApiError> {
        self.take_port(n, allocation).map_err(|detail| {
            ApiError::Internal(format!(
                "Internal error occurred: failed to allocate requested HealthCheck NodePort {n}: \
                 {detail}"
            ))
        })
    }

    /// Takes node port `n`, or says why not.
    fn take_port(&self, n: i64, allocation: &mut Allocation) -> Result<u16, String> {
        let (low, high) = self.ranges.node_ports;
        let port = u16::try_from(n).ok().filter(|n| (low..=high).contains(n)).ok_or_else(|| {
            format!(
                "provided port is not in the valid range. The range of valid ports is {low}-{high}"
            )
        })?;
        let taken = if allocation.dry_run {
            allocation.ports.contains(&port)
                || self.state.lock().expect("allocator lock").ports.contains(&port)
        } else {
            !self.state.lock().expect("allocator lock").ports.insert(port)
        };
        if taken {
            return Err("provided port is already allocated".into());
        }
        allocation.ports.push(port);
        Ok(port)
    }

    fn claim_next_port(&self, allocation: &mut Allocation) -> Result<u16, ApiError> {
        if allocation.dry_run {
            // One past the highest this dry run took, from 32769 (Kubernetes' guess).
            let port = allocation.ports.iter().max().map_or(32769, |p| p.saturating_add(1));
            allocation.ports.push(port);
            return Ok(port);
        }
        let port = self.next_port().ok_or_else(|| {
            ApiError::Internal(
                "Internal error occurred: failed to allocate a nodePort: range is full".into(),
            )
        })?;
        allocation.ports.push(port);
        Ok(port)
    }

    fn next_ip(&self) -> Option<Ipv4Addr> {
        let (first, last) = self.ip_bounds();
        let size = 1u32 << (32 - u32::from(self.ranges.cluster_ips.1.min(32)));
        let band = static_band(size, 16, 256);
        let taken = &mut *self.state.lock().expect("allocator lock");
        claim_banded(&mut taken.ips, &mut taken.next_ip, first, last, band).map(Ipv4Addr::from)
    }

    fn next_port(&self) -> Option<u16> {
        let (low, high) = self.ranges.node_ports;
        let band = static_band(u32::from(high - low) + 1, 32, 128);
        let taken = &mut *self.state.lock().expect("allocator lock");
        claim_banded(&mut taken.ports, &mut taken.next_port, low, high, band as u16)
    }

    /// Gives back what `allocation` holds (a dry run's holds nothing).
    pub fn release(&self, allocation: &Allocation) {
        if allocation.dry_run {
            return;
        }
        let mut taken = self.state.lock().expect("allocator lock");
        for ip in &allocation.ips {
            taken.ips.remove(ip);
        }
        for port in &allocation.ports {
            taken.ports.remove(port);
        }
    }

    /// Gives back everything a deleted service held.
    pub fn release_service(&self, service: &Value) {
        let mut allocation = Allocation::default();
        if let Some(ip) = cluster_ip(service).and_then(validation::parse_ipv4) {
            allocation.ips.push(u32::from(ip));
        }
        allocation.ports = held_ports(service);
        self.release(&allocation);
    }
}

/// `clusterIP` and `clusterIPs` as Kubernetes' validation reads them once an update's left-out
/// addresses are the old ones: the list's first entry must be `clusterIP`, and a list without
/// `clusterIP` is refused (a client that sets the list sets both; one that sets `clusterIP`
/// alone gets the list from it).
fn follow_cluster_ips(service: &Value, name: &str) -> Result<(), ApiError> {
    let listed = json::strings(&service["spec"], "clusterIPs");
    if listed.is_empty() {
        return Ok(());
    }
    let detail = match cluster_ip(service) {
        None => "must be empty when `clusterIP` is not specified",
        Some(ip) if ip != listed[0] => "first value must match `clusterIP`",
        Some(_) => return Ok(()),
    };
    let cause =
        FieldError::invalid_printed("spec.clusterIPs", &validation::go_strings(&listed), detail);
    Err(invalid_because(name, cause))
}

/// A service's `ipFamilyPolicy` when the write leaves it out (Kubernetes' allocator defaults it,
/// not the API's defaults): an update keeps the old one; a headless service without a selector
/// asks for both families (it needs no address of either); any other for one.
fn default_ip_family_policy(service: &mut Value, old: Option<&Value>) {
    if service.pointer("/spec/ipFamilyPolicy").is_some_and(|p| !p.is_null()) {
        return;
    }
    let kept = old.and_then(|old| old.pointer("/spec/ipFamilyPolicy")).filter(|p| p.is_string());
    let policy = match kept {
        Some(policy) => policy.clone(),
        None => {
            let spec = &service["spec"];
            let headless = cluster_ip(service) == Some("None");
            let selectorless =
                spec.get("selector").and_then(Value::as_object).is_none_or(|s| s.is_empty());
            json!(if headless && selectorless { "RequireDualStack" } else { "SingleStack" })
        }
    };
    service["spec"]["ipFamilyPolicy"] = policy;
}

/// A health check node port an update leaves out is the old one while the service still needs
/// one (Kubernetes' `patchAllocatedValues`).
fn keep_health_check_node_port(old: &Value, service: &mut Value) {
    let given = service.pointer("/spec/healthCheckNodePort").and_then(Value::as_i64);
    if let Some(kept) = health_check_node_port(old) {
        if given.unwrap_or(0) == 0 && needs_health_check(service) {
            service["spec"]["healthCheckNodePort"] = json!(kept);
        }
    }
}

/// Whether traffic reaches a service from outside the cluster, so that it has an external
/// traffic policy: a node port or load balancer, or external IPs.
fn reached_from_outside(service: &Value) -> bool {
    let external_ips = service.pointer("/spec/externalIPs").and_then(Value::as_array);
    match service.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP") {
        "NodePort" | "LoadBalancer" => true,
        "ClusterIP" => external_ips.is_some_and(|ips| !ips.is_empty()),
        _ => false,
    }
}

/// The addresses an update leaves out are the old ones (Kubernetes' `patchAllocatedValues`),
/// unless the service is or was `ExternalName`.
fn keep_allocated_cluster_ips(old: &Value, service: &mut Value) {
    let external =
        |s: &Value| s.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
    if external(old) || external(service) {
        return;
    }
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let empty = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    };
    for field in ["clusterIP", "clusterIPs"] {
        let kept = old.pointer(&format!("/spec/{field}"));
        if empty(spec.get(field)) && !empty(kept) {
            spec.insert(field.into(), kept.cloned().unwrap_or_default());
        }
    }
}

/// The node ports an update leaves out are the old ones of the ports of the same name, unless
/// another port of the update uses them (Kubernetes' `patchAllocatedValues`): a port whose
/// number changed keeps its node port.
fn keep_allocated_node_ports(old: &Value, service: &mut Value) {
    if !wants_node_ports(old) || !wants_node_ports(service) {
        return;
    }
    let by_name: BTreeMap<&str, u16> = (old.pointer("/spec/ports").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let node_port = u16::try_from(p.get("nodePort")?.as_i64()?).ok()?;
            Some((p.get("name").and_then(Value::as_str).unwrap_or(""), node_port))
        })
        .collect();
    let old_ports: BTreeSet<u16> = node_ports(old).into_iter().collect();
    let used: BTreeSet<u16> =
        node_ports(service).into_iter().filter(|p| old_ports.contains(p)).collect();
    let Some(ports) = service.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else {
        return;
    };
    for port in ports {
        let unset = port.get("nodePort").and_then(Value::as_i64).is_none_or(|n| n == 0);
        let name = port.get("name").and_then(Value::as_str).unwrap_or("");
        match by_name.get(name) {
            Some(kept) if unset && !used.contains(kept) => port["nodePort"] = json!(kept),
            _ => {}
        }
    }
}

/// An update that changed `clusterIP` and left `clusterIPs` as they were means them too (what
/// an older client sends), as Kubernetes' service strategy reads it; clearing it clears them.
fn follow_changed_cluster_ip(old: &Value, service: &mut Value) {
    let field = |s: &Value, f: &str| s.pointer(&format!("/spec/{f}")).cloned();
    let single = field(service, "clusterIP");
    if single == field(old, "clusterIP") || field(service, "clusterIPs") != field(old, "clusterIPs")
    {
        return;
    }
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else { return };
    match single.as_ref().and_then(Value::as_str).filter(|ip| !ip.is_empty()) {
        None => spec.remove("clusterIPs"),
        Some(ip) => spec.insert("clusterIPs".into(), json!([ip])),
    };
}

fn cluster_ip(service: &Value) -> Option<&str> {
    service.pointer("/spec/clusterIP").and_then(Value::as_str).filter(|ip| !ip.is_empty())
}

/// What an update that changes a service's type no longer needs, and did not change itself, is
/// dropped, as Kubernetes' service strategy does: node ports when the type has none,
/// `allocateLoadBalancerNodePorts` and `loadBalancerClass` when it is no longer a load
/// balancer, `externalTrafficPolicy` when it is not reachable from outside, the health check
/// node port when it needs none; and the load balancer status of a service that is no longer
/// one.
fn drop_type_dependent_fields(old: &Value, service: &mut Value) {
    let outside = (reached_from_outside(old), reached_from_outside(service));
    let health_checked = (needs_health_check(old), needs_health_check(service));
    let type_of = |s: &Value| s.pointer("/spec/type").and_then(Value::as_str).map(String::from);
    let (old_type, new_type) = (type_of(old), type_of(service));
    let load_balancer = |t: &Option<String>| t.as_deref() == Some("LoadBalancer");
    let external = |t: &Option<String>| matches!(t.as_deref(), Some("NodePort" | "LoadBalancer"));
    let leaves_external = external(&old_type) && !external(&new_type);
    // Ports may be added, removed or changed in the same update, as long as it brings no
    // node port the old service did not hold (Kubernetes' `sameNodePorts`).
    let held = node_ports_by_index(old);
    let brings_none = node_ports_by_index(service)
        .iter()
        .all(|(_, port)| held.iter().any(|(_, old)| old == port));
    if leaves_external && brings_none {
        for port in
            service.pointer_mut("/spec/ports").and_then(Value::as_array_mut).into_iter().flatten()
        {
            port.as_object_mut().map(|p| p.remove("nodePort"));
        }
    }
    let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let mut drop_unchanged = |field: &str| {
        if spec.get(field) == old.pointer(&format!("/spec/{field}")) {
            spec.remove(field);
        }
    };
    if outside == (true, false) {
        drop_unchanged("externalTrafficPolicy");
    }
    if health_checked == (true, false) {
        drop_unchanged("healthCheckNodePort");
    }
    if load_balancer(&old_type) && !load_balancer(&new_type) {
        drop_unchanged("allocateLoadBalancerNodePorts");
        drop_unchanged("loadBalancerClass");
    }
    let external_name = |t: &Option<String>| t.as_deref() == Some("ExternalName");
    if !external_name(&old_type) && external_name(&new_type) {
        // An ExternalName service has no addresses (the old one is freed), so no families
        // either.
        drop_unchanged("ipFamilies");
        drop_unchanged("ipFamilyPolicy");
        let unchanged = |field: &str| spec.get(field) == old.pointer(&format!("/spec/{field}"));
        if unchanged("clusterIP") && unchanged("clusterIPs") {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
    }
    if !load_balancer(&new_type) {
        if let Some(status) = service.get_mut("status").and_then(Value::as_object_mut) {
            status.insert("loadBalancer".into(), json!({}));
        }
    }
}

/// The node ports of a service's ports, with their index.
fn node_ports_by_index(service: &Value) -> Vec<(usize, i64)> {
    service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.get("nodePort")?.as_i64()?)))
        .collect()
}

fn port_field(i: usize) -> String {
    format!("spec.ports[{i}].nodePort")
}

/// The node ports a service holds: its ports', and its health check node port while it needs
/// one.
fn held_ports(service: &Value) -> Vec<u16> {
    let mut ports = node_ports(service);
    ports.extend(health_check_node_port(service));
    ports
}

fn node_ports(service: &Value) -> Vec<u16> {
    service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| u16::try_from(p["nodePort"].as_i64()?).ok())
        .collect()
}

/// How many of a range's first values are kept for those asked for by number (Kubernetes'
/// static band, KEP-3070 and KEP-3668): none of a range of 16 or fewer, else a `step`th of it,
/// at least 16 and at most `most`; what is handed out unasked comes from above it first (so
/// the first cluster IP stays the `kubernetes` Service's).
fn static_band(size: u32, step: u32, most: u32) -> u32 {
    if size <= 16 {
        0
    } else {
        (size / step).clamp(16, most)
    }
}

/// Claims a free value of `first..=last` above its static band of `band` values (in turn, from
/// `cursor`), or, when those are all taken, of the band.
fn claim_banded<T>(taken: &mut BTreeSet<T>, cursor: &mut T, first: T, last: T, band: T) -> Option<T>
where
    T: Copy + Ord + Into<u64> + TryFrom<u64>,
{
    let above = T::try_from(first.into() + band.into()).ok().filter(|a| *a <= last)?;
    claim_next(taken, cursor, above, last).or_else(|| {
        // The band, when there is one: from its start each time (it is rarely reached).
        let below = T::try_from(above.into().checked_sub(1)?).ok().filter(|_| band.into() > 0)?;
        claim_next(taken, &mut { first }, first, below)
    })
}

/// Claims the first value of `first..=last` not in `taken`, searching from `cursor` and
/// wrapping around, and moves the cursor past it: addresses and ports are handed out in turn,
/// not the lowest free one again and again.
fn claim_next<T>(taken: &mut BTreeSet<T>, cursor: &mut T, first: T, last: T) -> Option<T>
where
    T: Copy + Ord + Into<u64> + TryFrom<u64>,
{
    let (low, high) = (first.into(), last.into());
    let span = high - low + 1;
    let start = (*cursor).into().clamp(low, high);
    for step in 0..span {
        let n = T::try_from(low + (start - low + step) % span).ok()?;
        if taken.insert(n) {
            *cursor = T::try_from(n.into() + 1).unwrap_or(n);
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> ServiceAllocator {
        ServiceAllocator::new(ServiceRanges {
            cluster_ips: (Ipv4Addr::new(127, 192, 0, 0), 30),
            node_ports: (30000, 30001),
        })
    }

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn leaving_a_type_drops_what_only_it_needed() {
        let a = small();
        let mut lb = svc(json!({"type": "LoadBalancer", "ports": [{"port": 80}],
            "externalTrafficPolicy": "Cluster", "allocateLoadBalancerNodePorts": true}));
        lb["status"] = json!({"loadBalancer": {"ingress": [{"ip": "127.128.0.1"}]}});
        a.allocate(&mut lb, "s", false).unwrap();
        let node_port = lb["spec"]["ports"][0]["nodePort"].as_u64().unwrap();

        let mut cluster_ip = lb.clone();
        cluster_ip["spec"]["type"] = json!("ClusterIP");
        let (_, freed) = a.reallocate(&lb, &mut cluster_ip, "s", false).unwrap();
        assert_eq!(freed.ports, vec![node_port as u16]);
        assert_eq!(cluster_ip["spec"]["ports"], json!([{"port": 80}]));
        for field in ["externalTrafficPolicy", "allocateLoadBalancerNodePorts"] {
            assert!(cluster_ip["spec"].get(field).is_none(), "{field}: {cluster_ip}");
        }
        assert_eq!(cluster_ip["status"], json!({"loadBalancer": {}}));

        // A node port the update sets itself is refused for a type without node ports.
        let mut changed = lb.clone();
        changed["spec"]["type"] = json!("ClusterIP");
        changed["spec"]["ports"][0]["nodePort"] = json!(30001);
        let Err(ApiError::Invalid { causes, .. }) = a.reallocate(&lb, &mut changed, "s", false)
        else {
            panic!("a ClusterIP service with a node port was accepted");
        };
        assert_eq!(causes[0].field, "spec.ports[0].nodePort");
        assert!(causes[0].message.contains("may not be used when `type` is 'ClusterIP'"));
    }

    #[test]
    fn leaving_node_ports_behind_may_drop_or_change_ports_in_the_same_update() {
        let a = four_node_ports();
        let mut node_port = svc(json!({"type": "NodePort",
            "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}));
        a.allocate(&mut node_port, "s", false).unwrap();
        let mut held = node_ports(&node_port);
        held.sort();
        assert_eq!(held.len(), 2, "{node_port}");

        // A port removed, the other's node port left out, the other renumbered: none brings a
        // node port of its own, so all are dropped and freed.
        let edits: [fn(&mut Value); 3] = [
            |s| drop(s["spec"]["ports"].as_array_mut().unwrap().remove(1)),
            |s| drop(s["spec"]["ports"][1].as_object_mut().unwrap().remove("nodePort")),
            |s| s["spec"]["ports"][0]["port"] = json!(8080),
        ];
        for edit in edits {
            let mut cluster_ip = node_port.clone();
            cluster_ip["spec"]["type"] = json!("ClusterIP");
            edit(&mut cluster_ip);
            let (_, freed) = a.reallocate(&node_port, &mut cluster_ip, "s", false).unwrap();
            assert!(node_ports(&cluster_ip).is_empty(), "{cluster_ip}");
            let mut freed = freed.ports;
            freed.sort();
            assert_eq!(freed, held);
        }

        // One it did not hold is the user's own, and refused for the type.
        let other = (30000..=30003).find(|p| !held.contains(p)).unwrap();
        let mut cluster_ip = node_port.clone();
        cluster_ip["spec"]["type"] = json!("ClusterIP");
        cluster_ip["spec"]["ports"][1]["nodePort"] = json!(other);
        let Err(ApiError::Invalid { causes, .. }) =
            a.reallocate(&node_port, &mut cluster_ip, "s", false)
        else {
            panic!("a node port the service did not hold was taken for a ClusterIP service");
        };
        assert_eq!(causes[0].field, "spec.ports[0].nodePort");
    }

    #[test]
    fn a_health_check_port_is_kept_while_needed_and_dropped_after() {
        let local = svc(json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 30123, "allocateLoadBalancerNodePorts": false,
            "ports": [{"port": 80}]}));
        // Left out by a replace: the old one.
        let mut replaced = local.clone();
        replaced["spec"].as_object_mut().unwrap().remove("healthCheckNodePort");
        drop_type_dependent_fields(&local, &mut replaced);
        keep_health_check_node_port(&local, &mut replaced);
        assert_eq!(replaced["spec"]["healthCheckNodePort"], 30123);
        // No longer needed, and not changed: gone.
        for (field, value) in [("externalTrafficPolicy", "Cluster"), ("type", "NodePort")] {
            let mut changed = local.clone();
            changed["spec"][field] = json!(value);
            drop_type_dependent_fields(&local, &mut changed);
            keep_health_check_node_port(&local, &mut changed);
            assert!(changed["spec"].get("healthCheckNodePort").is_none(), "{changed}");
        }
        // A ClusterIP service losing its external IPs loses its external traffic policy.
        let outside = svc(json!({"externalIPs": ["127.0.0.201"], "externalTrafficPolicy": "Local",
            "ports": [{"port": 80}]}));
        let mut inside = outside.clone();
        inside["spec"]["externalIPs"] = Value::Null;
        drop_type_dependent_fields(&outside, &mut inside);
        assert!(inside["spec"].get("externalTrafficPolicy").is_none(), "{inside}");
    }

    #[test]
    fn a_local_load_balancer_gets_a_health_check_port_held_until_it_needs_none() {
        let a = four_node_ports();
        let mut local = svc(json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"port": 80}]}));
        let allocation = a.allocate(&mut local, "s", false).unwrap();
        let node_port = local["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        let health_check = local["spec"]["healthCheckNodePort"].as_i64().unwrap();
        assert_ne!(node_port, health_check);
        assert!((30000..=30003).contains(&health_check), "{local}");
        assert_eq!(allocation.ports.len(), 2, "both are released if the write fails");

        // Held: another service asking for it is refused, in the allocator's words (an
        // internal error, as Kubernetes' allocator wraps it).
        let mut other = svc(json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "healthCheckNodePort": health_check, "ports": [{"port": 80}]}));
        let Err(ApiError::Internal(message)) = a.allocate(&mut other, "t", false) else {
            panic!("a held health check port was handed out twice");
        };
        assert_eq!(
            message,
            format!(
                "Internal error occurred: failed to allocate requested HealthCheck NodePort \
                 {health_check}: provided port is already allocated"
            )
        );
        let mut out_of_range = svc(json!({"type": "LoadBalancer",
            "externalTrafficPolicy": "Local", "healthCheckNodePort": 80, "ports": [{"port": 81}]}));
        assert!(a.allocate(&mut out_of_range, "u", false).is_err(), "outside the node port range");

        // An update that keeps needing it keeps it; one that needs none frees it.
        let mut replaced = local.clone();
        replaced["spec"].as_object_mut().unwrap().remove("healthCheckNodePort");
        let (allocated, freed) = a.reallocate(&local, &mut replaced, "s", false).unwrap();
        assert_eq!(replaced["spec"]["healthCheckNodePort"], health_check);
        assert!(allocated.ports.is_empty() && freed.ports.is_empty());
        let mut cluster = local.clone();
        cluster["spec"]["externalTrafficPolicy"] = json!("Cluster");
        let (_, freed) = a.reallocate(&local, &mut cluster, "s", false).unwrap();
        assert!(cluster["spec"].get("healthCheckNodePort").is_none(), "{cluster}");
        assert_eq!(freed.ports, vec![health_check as u16]);
        a.release(&freed);

        // Back to Local: a new one; deleting the service releases it with the node port.
        let (allocated, _) = a.reallocate(&cluster, &mut local.clone(), "s", false).unwrap();
        assert_eq!(allocated.ports.len(), 1);
        let restored = four_node_ports();
        restored.restore(&local);
        assert!(restored.allocate(&mut other, "t", false).is_err(), "restored at start-up");
        a.release_service(&local);
        assert!(!a.state.lock().unwrap().ports.contains(&(health_check as u16)));
    }

    fn four_node_ports() -> ServiceAllocator {
        ServiceAllocator::new(ServiceRanges {
            cluster_ips: (Ipv4Addr::new(127, 192, 0, 0), 24),
            node_ports: (30000, 30003),
        })
    }

    #[test]
    fn ip_families_are_checked_against_a_single_stack_cluster() {
        let a = small();
        let causes_of = |spec: Value| match a.allocate(&mut svc(spec), "s", false) {
            Err(ApiError::Invalid { causes, .. }) => {
                causes.into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
            }
            other => panic!("not refused: {other:?}"),
        };
        // An IPv6 address asked for, its family unsaid: the address is named.
        let causes: Vec<String> =
            causes_of(json!({"ports": [{"port": 80}], "clusterIP": "fd00::1"}));
        assert_eq!(
            causes,
            ["spec.clusterIPs[0]: Invalid value: []string{\"fd00::1\"}: IPv6 is not configured on \
              this cluster"]
        );
        let causes: Vec<String> = causes_of(json!({"ports": [{"port": 80}],
            "ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv6", "IPv4"]}));
        assert_eq!(
            causes,
            [
                "spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not \
             configured for dual-stack services",
                "spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster",
            ]
        );
        let causes: Vec<String> = causes_of(json!({"ports": [{"port": 80}],
            "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4", "IPv6"]}));
        assert_eq!(
            causes,
            ["spec.ipFamilyPolicy: Invalid value: \"SingleStack\": must be \
            'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"]
        );
        // Preferring dual-stack on a single-stack cluster is IPv4 alone.
        let mut preferring = svc(json!({"ports": [{"port": 80}],
            "ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv4"]}));
        a.allocate(&mut preferring, "p", false).unwrap();
        assert_eq!(preferring["spec"]["ipFamilies"], json!(["IPv4"]));
        // A headless service without a selector takes both families, needing no address.
        let mut headless = svc(json!({"clusterIP": "None", "ipFamilyPolicy": "RequireDualStack",
            "ipFamilies": ["IPv4"]}));
        a.allocate(&mut headless, "h", false).unwrap();
        assert_eq!(headless["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
        // An update to single-stack that leaves the families keeps the first.
        let mut single = headless.clone();
        single["spec"]["ipFamilyPolicy"] = json!("SingleStack");
        a.reallocate(&headless, &mut single, "h", false).unwrap();
        assert_eq!(single["spec"]["ipFamilies"], json!(["IPv4"]));
        // An update that leaves the policy out keeps the old one: a headless service without a
        // selector that gains one still asks for dual-stack, which this cluster refuses.
        let mut replaced = preferring.clone();
        replaced["spec"].as_object_mut().unwrap().remove("ipFamilyPolicy");
        a.reallocate(&preferring, &mut replaced, "p", false).unwrap();
        assert_eq!(replaced["spec"]["ipFamilyPolicy"], "PreferDualStack");
        let mut selecting = headless.clone();
        selecting["spec"]["selector"] = json!({"app": "web"});
        selecting["spec"].as_object_mut().unwrap().remove("ipFamilyPolicy");
        let Err(ApiError::Invalid { causes, .. }) =
            a.reallocate(&headless, &mut selecting, "h", false)
        else {
            panic!("a selecting service may not require dual-stack here");
        };
        assert_eq!(causes[0].field, "spec.ipFamilyPolicy");
        // Left out on create: one family, or both for a headless service without a selector.
        let mut plain = svc(json!({"ports": [{"port": 80}]}));
        a.allocate(&mut plain, "n", false).unwrap();
        assert_eq!(plain["spec"]["ipFamilyPolicy"], "SingleStack");
        let mut bare = svc(json!({"clusterIP": "None", "ipFamilies": ["IPv4"]}));
        a.allocate(&mut bare, "b", false).unwrap();
        assert_eq!(bare["spec"]["ipFamilyPolicy"], "RequireDualStack");
        assert_eq!(bare["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
        // Becoming an ExternalName service drops the families the update left as they were.
        let mut external = preferring.clone();
        external["spec"]["type"] = json!("ExternalName");
        a.reallocate(&preferring, &mut external, "p", false).unwrap();
        for field in ["ipFamilies", "ipFamilyPolicy"] {
            assert!(external["spec"].get(field).is_none(), "{field}: {external}");
        }
    }

    #[test]
    fn cluster_ips_go_with_cluster_ip() {
        let a = small();
        for listed in [json!(["127.192.0.2"]), json!(["None"])] {
            let mut alone = svc(json!({"ports": [{"port": 80}], "clusterIPs": listed}));
            let Err(ApiError::Invalid { causes, .. }) = a.allocate(&mut alone, "l", false) else {
                panic!("a list without `clusterIP` is invalid");
            };
            assert_eq!(causes[0].field, "spec.clusterIPs");
            assert!(causes[0].message.ends_with("must be empty when `clusterIP` is not specified"));
        }
        let mut both = svc(json!({"ports": [{"port": 80}], "clusterIP": "127.192.0.2",
            "clusterIPs": ["127.192.0.2"]}));
        a.allocate(&mut both, "b", false).unwrap();
        // An update that leaves `clusterIP` out keeps the old one, and may list it.
        let mut listed = svc(json!({"ports": [{"port": 80}], "clusterIPs": ["127.192.0.2"]}));
        a.reallocate(&both, &mut listed, "b", false).unwrap();
        assert_eq!(listed["spec"]["clusterIP"], "127.192.0.2");
        let mut apart = svc(json!({"ports": [{"port": 80}], "clusterIP": "127.192.0.1",
            "clusterIPs": ["127.192.0.3"]}));
        let Err(ApiError::Invalid { causes, .. }) = a.allocate(&mut apart, "x", false) else {
            panic!("a mismatch is invalid");
        };
        assert_eq!(causes[0].field, "spec.clusterIPs");
        assert_eq!(
            causes[0].message,
            "Invalid value: []string{\"127.192.0.3\"}: first value must match `clusterIP`"
        );
    }

    #[test]
    fn ips_are_unique_released_and_exhausted() {
        let a = small();
        let mut one = svc(json!({"ports": [{"port": 80}]}));
        let mut two = svc(json!({"ports": [{"port": 80}]}));
        a.allocate(&mut one, "one", false).unwrap();
        a.allocate(&mut two, "two", false).unwrap();
        assert_ne!(one["spec"]["clusterIP"], two["spec"]["clusterIP"]);
        assert_eq!(one["spec"]["clusterIPs"][0], one["spec"]["clusterIP"]);
        let mut three = svc(json!({}));
        assert!(
            matches!(a.allocate(&mut three, "three", false), Err(ApiError::Internal(_))),
            "/30: two usable"
        );
        a.release_service(&one);
        a.allocate(&mut three, "three", false).unwrap();
        assert_eq!(three["spec"]["clusterIP"], one["spec"]["clusterIP"]);
        let mut headless = svc(json!({"clusterIP": "None"}));
        a.allocate(&mut headless, "h", false).unwrap();
        let mut external = svc(json!({"type": "ExternalName", "externalName": "x.example"}));
        a.allocate(&mut external, "e", false).unwrap();
        assert!(external["spec"].get("clusterIP").is_none());
    }

    #[test]
    fn requested_ips_and_ports_are_checked() {
        let a = ServiceAllocator::new(ServiceRanges {
            cluster_ips: (Ipv4Addr::new(127, 192, 0, 0), 29),
            node_ports: (30000, 30001),
        });
        let mut taken = svc(json!({"clusterIP": "127.192.0.1"}));
        a.allocate(&mut taken, "a", false).unwrap();
        let mut again = svc(json!({"clusterIP": "127.192.0.1"}));
        let e = a.allocate(&mut again, "b", false).unwrap_err().to_string();
        assert!(e.contains("already allocated"), "{e}");
        let mut outside = svc(json!({"clusterIP": "10.0.0.1"}));
        assert_eq!(
            a.allocate(&mut outside, "c", false).unwrap_err().to_string(),
            "Service \"c\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.0.0.1\"}: \
             failed to allocate IP 10.0.0.1: the provided IP (10.0.0.1) is not in the valid \
             range. The range of valid IPs is 127.192.0.0/29"
        );
        let mut np = svc(
            json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 30001}]}),
        );
        a.allocate(&mut np, "d", false).unwrap();
        assert_eq!(np["spec"]["ports"][0]["nodePort"], 30000);
        let mut clash =
            svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30001}]}));
        assert!(a
            .allocate(&mut clash, "e", false)
            .unwrap_err()
            .to_string()
            .contains("already allocated"));
        // A failed allocation gives back what it took.
        let mut partial =
            svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 40000}]}));
        assert!(a.allocate(&mut partial, "f", false).is_err());
        let mut free_again = svc(json!({}));
        a.allocate(&mut free_again, "g", false).unwrap();
    }

    #[test]
    fn ports_of_one_number_share_a_node_port_and_updates_keep_them_by_name() {
        let a = ServiceAllocator::new(ServiceRanges {
            cluster_ips: (Ipv4Addr::new(127, 192, 0, 0), 28),
            node_ports: (30000, 30009),
        });
        let node_ports = |s: &Value| -> Vec<i64> {
            let ports = s["spec"]["ports"].as_array().unwrap();
            ports.iter().map(|p| p["nodePort"].as_i64().unwrap()).collect()
        };
        // TCP and UDP 53: one node port, allocated or asked for (by either of them).
        let mut dns = svc(json!({"type": "NodePort", "ports": [
            {"name": "tcp", "port": 53}, {"name": "udp", "port": 53, "protocol": "UDP"},
            {"name": "web", "port": 80}]}));
        a.allocate(&mut dns, "dns", false).unwrap();
        let ports = node_ports(&dns);
        assert_eq!(ports[0], ports[1]);
        assert_ne!(ports[0], ports[2]);
        let free = 30000 + (0..10).find(|p| !ports.contains(&(30000 + p))).unwrap();
        let mut asked = svc(json!({"type": "NodePort", "ports": [
            {"name": "tcp", "port": 53}, {"name": "udp", "port": 53, "nodePort": free}]}));
        a.allocate(&mut asked, "asked", false).unwrap();
        assert_eq!(node_ports(&asked), [free, free]);
        // A replace that changes a port's number keeps its node port (by the port's name);
        // a renamed port gets a new one.
        let mut replaced = svc(json!({"type": "NodePort", "clusterIP": dns["spec"]["clusterIP"],
            "ports": [{"name": "tcp", "port": 54}, {"name": "udp", "port": 54, "protocol": "UDP"},
                {"name": "www", "port": 80}]}));
        let (_, freed) = a.reallocate(&dns, &mut replaced, "dns", false).unwrap();
        let kept = node_ports(&replaced);
        assert_eq!(kept[..2], ports[..2]);
        assert!(!ports.contains(&kept[2]), "{kept:?}");
        assert_eq!(freed.ports, [ports[2] as u16]);
    }

    #[test]
    fn a_load_balancer_declining_node_ports_gets_only_those_it_asks_for() {
        let a = ServiceAllocator::new(ServiceRanges {
            cluster_ips: (Ipv4Addr::new(127, 192, 0, 0), 30),
            node_ports: (30000, 30009),
        });
        let mut lb = svc(json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
            "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30001}]}));
        let allocation = a.allocate(&mut lb, "lb", false).unwrap();
        assert_eq!(lb["spec"]["ports"][0].get("nodePort"), None, "{lb}");
        assert_eq!(lb["spec"]["ports"][1]["nodePort"], 30001);
        assert_eq!(allocation.ports, [30001]);
        let mut added = lb.clone();
        added["spec"]["ports"].as_array_mut().unwrap().push(json!({"name": "c", "port": 82}));
        a.reallocate(&lb, &mut added, "lb", false).unwrap();
        assert_eq!(added["spec"]["ports"][2].get("nodePort"), None, "{added}");
        // Allowed again, every port gets one.
        let mut allowed = added.clone();
        allowed["spec"]["allocateLoadBalancerNodePorts"] = json!(true);
        a.reallocate(&added, &mut allowed, "lb", false).unwrap();
        let ports = allowed["spec"]["ports"].as_array().unwrap();
        assert!(ports.iter().all(|p| p["nodePort"].is_u64()), "{allowed}");
    }

    #[test]
    fn unasked_ips_and_ports_come_from_above_the_static_band_first() {
        assert_eq!((static_band(16, 16, 256), static_band(65536, 16, 256)), (0, 256));
        assert_eq!((static_band(1024, 16, 256), static_band(2768, 32, 128)), (64, 86));
        // A /26 (62 usable addresses: a band of 16) and 40 ports (a band of 16).
        let a = ServiceAllocator::new(ServiceRanges {
            cluster_ips: (Ipv4Addr::new(127, 192, 0, 0), 26),
            node_ports: (30000, 30039),
        });
        let mut first = svc(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        a.allocate(&mut first, "first", false).unwrap();
        assert_eq!(first["spec"]["clusterIP"], "127.192.0.17", "127.192.0.1 stays for kubernetes");
        assert_eq!(first["spec"]["ports"][0]["nodePort"], 30016);
        // Asked for, one of the band is given.
        let mut kubernetes = svc(json!({"clusterIP": "127.192.0.1"}));
        a.allocate(&mut kubernetes, "kubernetes", false).unwrap();
        // Once above the band is full, the band's are handed out too.
        let mut names = 0;
        loop {
            let mut more = svc(json!({}));
            names += 1;
            if a.allocate(&mut more, &format!("s{names}"), false).is_err() {
                break;
            }
        }
        assert_eq!(names, 62 - 2 + 1, "every other address was handed out");
    }

    #[test]
    fn updates_keep_the_ip_and_ports_and_free_what_went() {
        let a = small();
        let mut old = svc(json!({"type": "NodePort",
            "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]}));
        a.allocate(&mut old, "s", false).unwrap();
        let mut new = svc(json!({"type": "NodePort", "ports": [{"name": "a", "port": 80}]}));
        let (_, freed) = a.reallocate(&old, &mut new, "s", false).unwrap();
        assert_eq!(new["spec"]["clusterIP"], old["spec"]["clusterIP"]);
        assert_eq!(new["spec"]["ports"][0]["nodePort"], old["spec"]["ports"][0]["nodePort"]);
        assert_eq!(freed.ports, vec![old["spec"]["ports"][1]["nodePort"].as_u64().unwrap() as u16]);
        // A new clusterIP is refused in Kubernetes' words, alone (standing for the clusterIPs
        // kept) or with the clusterIPs it was in.
        let refusal = |mut new: Value| match a.reallocate(&old, &mut new, "s", false) {
            Err(ApiError::Invalid { causes, .. }) => {
                format!("{}: {}", causes[0].field, causes[0].message)
            }
            other => panic!("{other:?}"),
        };
        let ip = old["spec"]["clusterIP"].as_str().unwrap().to_string();
        assert_eq!(
            refusal(svc(json!({"clusterIP": "127.192.0.2"}))),
            "spec.clusterIPs[0]: Invalid value: []string{\"127.192.0.2\"}: may not change once set"
        );
        let mut moved = old.clone();
        moved["spec"]["clusterIP"] = json!("127.192.0.2");
        assert_eq!(
            refusal(moved),
            "spec.clusterIPs[0]: Invalid value: []string{\"127.192.0.2\"}: may not change once set"
        );
        // To ExternalName: the addresses go (and are freed); back to ClusterIP, a new one.
        let mut external = old.clone();
        external["spec"]["type"] = json!("ExternalName");
        external["spec"]["externalName"] = json!("example.com");
        let (_, freed) = a.reallocate(&old, &mut external, "s", false).unwrap();
        assert_eq!(freed.ips, vec![u32::from(ip.parse::<Ipv4Addr>().unwrap())]);
        assert!(external["spec"].get("clusterIP").is_none(), "{external}");
        assert!(external["spec"].get("clusterIPs").is_none(), "{external}");
    }

    /// A dry run takes nothing: its own address is the range's network address, one asked
    /// for is only checked against the range, its own node ports are numbered from 32769,
    /// one asked for must be free; the next real allocation is as if it never ran.
    #[test]
    fn a_dry_run_takes_nothing_from_the_ranges() {
        let a = four_node_ports();
        let mut first = svc(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        a.allocate(&mut first, "first", false).unwrap();
        let held_port = first["spec"]["ports"][0]["nodePort"].clone();
        let held_ip = first["spec"]["clusterIP"].clone();
        let mut dry = svc(json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]}));
        let allocation = a.allocate(&mut dry, "dry", true).unwrap();
        let (net, _) = a.ranges.cluster_ips;
        assert_eq!(dry["spec"]["clusterIP"], json!(net.to_string()), "{dry}");
        let ports: Vec<&Value> =
            dry["spec"]["ports"].as_array().unwrap().iter().map(|p| &p["nodePort"]).collect();
        assert_eq!(ports, [&json!(32769), &json!(32770)]);
        a.release(&allocation);
        let mut asking = svc(json!({"clusterIP": held_ip, "type": "NodePort",
            "ports": [{"port": 80}]}));
        a.allocate(&mut asking, "asking", true).expect("a held address is only range-checked");
        let mut taken =
            svc(json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": held_port}]}));
        assert!(a.allocate(&mut taken, "taken", true).is_err(), "a held node port is refused");
        let taken = a.state.lock().unwrap();
        assert_eq!((taken.ips.len(), taken.ports.len()), (1, 1), "nothing more taken");
    }
}
